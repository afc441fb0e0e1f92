//! Scenario files: the cluster to use, timing of the modelled control plane, scheduler settings,
//! and job classes or an SWF trace; turned into a deterministic list of jobs for one seed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use muster_graph::GroupRequest;
use muster_graph::cluster::ClusterDescription;
use muster_graph::filter::{NodeFilter, Toleration};
use muster_graph::jobspec::{ConstraintMode, MemberSet, SubGroup, TopologyConstraint};
use muster_graph::resources;
use serde::{Deserialize, Deserializer};

use crate::SimError;
use crate::rng::Rng;
use crate::swf;

mod history_source;
mod peers;
mod placeable;
mod pod_sets;
pub mod reservations;
mod tenants;
pub use peers::{
    CoschedConfig, FairSharingConfig, KueueConfig, NativeConfig, PodEndSpread, PreemptionStrategy, RequeueTimestamp,
    Submitters, Timing, VolcanoConfig,
};
pub use pod_sets::{PodSetClass, SubGroupClass};
pub use tenants::{DEFAULT_QUEUE, TenantQueue, Tenants, TenantsFile};

/// Most jobs one class may declare.
pub const MAX_JOBS_PER_CLASS: i64 = 10_000_000;
/// Most members one job may have.
pub const MAX_MEMBERS: i64 = 100_000;

/// A duration in milliseconds, written as `500ms`, `90s`, `3m`, `1h` or a number of seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Dur(pub i64);

impl Dur {
    pub fn parse(text: &str) -> Option<Self> {
        let t = text.trim();
        let (num, scale) = if let Some(n) = t.strip_suffix("ms") {
            (n, 1.0)
        } else if let Some(n) = t.strip_suffix('s') {
            (n, 1e3)
        } else if let Some(n) = t.strip_suffix('m') {
            (n, 60e3)
        } else if let Some(n) = t.strip_suffix('h') {
            (n, 3600e3)
        } else {
            (t, 1e3)
        };
        let v: f64 = num.trim().parse().ok()?;
        let ms = (v * scale).round();
        (v.is_finite() && v >= 0.0 && ms < 1e15).then_some(Dur(ms as i64))
    }
}

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = serde_yaml_ng::Value::deserialize(d)?;
        let text = match &v {
            serde_yaml_ng::Value::String(s) => s.clone(),
            serde_yaml_ng::Value::Number(n) => n.to_string(),
            _ => String::new(),
        };
        Dur::parse(&text).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "{text:?} is not a duration; write e.g. 500ms, 90s, 3m, 1h or a number of seconds (>= 0)"
            ))
        })
    }
}

fn secs(s: i64) -> Dur {
    Dur(s * 1000)
}

/// A duration in microseconds, written as `250us`, `1.5ms` or `2s` (a bare number is seconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Micros(pub i64);

impl<'de> Deserialize<'de> for Micros {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = serde_yaml_ng::Value::deserialize(d)?;
        let text = match &v {
            serde_yaml_ng::Value::String(s) => s.clone(),
            serde_yaml_ng::Value::Number(n) => n.to_string(),
            _ => String::new(),
        };
        let t = text.trim();
        let (num, scale) = if let Some(n) = t.strip_suffix("us") {
            (n, 1.0)
        } else if let Some(n) = t.strip_suffix("ms") {
            (n, 1e3)
        } else {
            (t.strip_suffix('s').unwrap_or(t), 1e6)
        };
        num.trim()
            .parse::<f64>()
            .ok()
            .map(|v| (v * scale).round())
            .filter(|us| us.is_finite() && *us >= 0.0 && *us < 1e15)
            .map(|us| Micros(us as i64))
            .ok_or_else(|| {
                serde::de::Error::custom(format!("{text:?} is not a duration; write e.g. 250us, 1.5ms or 2s"))
            })
    }
}

fn one() -> u32 {
    1
}

fn one_f() -> f64 {
    1.0
}

fn yes() -> bool {
    true
}

/// When a job's run time starts counting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub enum RunStart {
    /// Once its quorum of pods (all, or `min` for an elastic job) is Ready; until then it makes no
    /// progress (MPI, distributed training).
    #[default]
    AllReady,
    /// Each pod runs its own run time from when it is Ready.
    PodStart,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub enum Pattern {
    /// All jobs at `start`.
    #[default]
    Burst,
    /// One every `interval` from `start`.
    Uniform,
    /// Exponential gaps with mean `interval` from `start`.
    Poisson,
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Arrival {
    #[serde(default)]
    pub pattern: Pattern,
    #[serde(default)]
    pub start: Option<Dur>,
    #[serde(default)]
    pub interval: Option<Dur>,
    /// Spans in which the class submits nothing (a team away): arrivals due from `from` on are
    /// pushed back by the lull's length, so the stream stops at `from` and resumes at `to`.
    #[serde(default)]
    pub lulls: Vec<Lull>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lull {
    pub from: Dur,
    pub to: Dur,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(untagged, expecting = "a whole number such as 4, or a range such as {min: 2, max: 8}")]
pub enum Members {
    Exact(i64),
    Range { min: i64, max: i64 },
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct JobClass {
    pub name: String,
    pub count: i64,
    /// The tenant's queue its jobs are submitted to; required when the scenario has `tenants`.
    #[serde(default)]
    pub queue: Option<String>,
    /// Pods of a job, alike; absent when the class gives `sets`.
    #[serde(default)]
    pub members: Option<Members>,
    /// Per pod, Kubernetes quantities (`cpu: "2"`, `memory: 2Gi`); `pods: 1` is implied.
    #[serde(default)]
    pub resources: Option<BTreeMap<String, serde_yaml_ng::Value>>,
    /// Pods of a job as several sets of alike pods, instead of `members` and `resources`.
    #[serde(default)]
    pub sets: Vec<PodSetClass>,
    /// Sets kept to one domain of a level together (with `sets` only).
    #[serde(default)]
    pub sub_groups: Vec<SubGroupClass>,
    pub run_time: Dur,
    /// Run time is `runTime * (1 + jitter * u)`, u uniform in [0, 1).
    #[serde(default)]
    pub jitter: f64,
    #[serde(default)]
    pub run_starts: RunStart,
    /// activeDeadlineSeconds, counted from the job's (last) unsuspension.
    #[serde(default)]
    pub deadline: Option<Dur>,
    #[serde(default)]
    pub priority: i32,
    #[serde(default)]
    pub node_selector: BTreeMap<String, String>,
    #[serde(default)]
    pub tolerations: Vec<Toleration>,
    #[serde(default)]
    pub arrival: Arrival,
    /// A probe class: its time to schedule is reported.
    #[serde(default)]
    pub probe: bool,
    /// Whether its jobs declare their run time (the longest the class can draw); a job that
    /// does not leaves the scheduler to guess.
    #[serde(default = "declares_by_default")]
    pub declares_run_time: bool,
    /// What its jobs declare, where not that longest run: a shorter one models users who
    /// under-declare to be backfilled (a scheduler that holds jobs to it ends them).
    #[serde(default)]
    pub declared_run_time: Option<Dur>,
    /// All pods within one domain of a topology level of the cluster.
    #[serde(default)]
    pub topology: Option<ClassTopology>,
    /// An elastic class whose running jobs may give back pods above their min (a scheduler that
    /// can shrink them deletes those pods; the rest do the work left more slowly).
    #[serde(default)]
    pub shrinkable: bool,
}

fn declares_by_default() -> bool {
    true
}

/// A job class's topology constraint, and what breaking it costs.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ClassTopology {
    /// A level of the cluster's `topology` (rack, block, ...).
    pub level: String,
    /// `required`: a scheduler that honours it never spreads the job; `preferred`: it may.
    pub mode: ConstraintMode,
    /// For a preferred level: an enclosing level the job must stay within when `level` cannot
    /// hold it (prefer a rack, require its block).
    #[serde(default)]
    pub within: Option<String>,
    /// A job whose pods span more than one domain of the level runs this many times longer
    /// (its traffic crosses the level's uplinks). The scenario states it; 1 means no cost.
    #[serde(default = "one_f")]
    pub span_slowdown: f64,
}

/// An SWF trace as a workload (see `swf` for the mapping rule).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SwfSource {
    pub file: String,
    #[serde(default = "one")]
    pub procs_per_pod: u32,
    #[serde(default = "default_cpu_per_proc")]
    pub cpu_per_proc: serde_yaml_ng::Value,
    #[serde(default = "default_mem_per_proc")]
    pub memory_per_proc: serde_yaml_ng::Value,
    #[serde(default)]
    pub run_starts: RunStart,
    /// Use the trace's requested time as activeDeadlineSeconds.
    #[serde(default)]
    pub deadline_from_requested: bool,
    #[serde(default)]
    pub max_jobs: Option<usize>,
    /// The tenant's queue the trace's jobs are submitted to; required when the scenario has
    /// `tenants`.
    #[serde(default)]
    pub queue: Option<String>,
}

fn default_cpu_per_proc() -> serde_yaml_ng::Value {
    serde_yaml_ng::Value::String("1".into())
}
fn default_mem_per_proc() -> serde_yaml_ng::Value {
    serde_yaml_ng::Value::String("1Gi".into())
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ScenarioFile {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// Cluster description, relative to the scenario file.
    pub cluster: String,
    /// The simulation stops here even if jobs are left (default 24h).
    #[serde(default)]
    pub horizon: Option<Dur>,
    /// Resolution of the utilization series (default 10s).
    #[serde(default)]
    pub sample_interval: Option<Dur>,
    #[serde(default)]
    pub timing: Timing,
    #[serde(default)]
    pub submitters: Submitters,
    #[serde(default)]
    pub kueue: KueueConfig,
    #[serde(default)]
    pub coscheduling: CoschedConfig,
    #[serde(default)]
    pub volcano: VolcanoConfig,
    #[serde(default)]
    pub native: NativeConfig,
    /// Queues with quotas the jobs are submitted to; absent: one queue without quotas.
    #[serde(default)]
    pub tenants: Option<TenantsFile>,
    /// Calendar reservations for the tenants' queues (or the one queue without tenants), times
    /// in seconds from the start of the run: muster's models hold them, the peers have none.
    #[serde(default)]
    pub reservations: Vec<muster_queue::ReservationConfig>,
    #[serde(default)]
    pub job_classes: Vec<JobClass>,
    #[serde(default)]
    pub swf: Option<SwfSource>,
    /// Recorded runs of a cluster, replayed as its jobs (what-if).
    #[serde(default)]
    pub history: Option<history_source::HistorySource>,
}

/// One job as every scheduler sees it: a batch/v1 Job with parallelism = completions = members,
/// backoffLimit 0 and an optional activeDeadlineSeconds.
#[derive(Debug, Clone, PartialEq)]
pub struct JobSpec {
    pub name: String,
    pub class: String,
    /// Index into `Workload::classes`.
    pub class_index: usize,
    /// Over all its pods (with sets, the sums of the sets' bounds).
    pub min_members: u32,
    pub max_members: u32,
    /// Per pod, base units (cpu millicores, memory bytes), by resource name; includes `pods: 1`.
    /// With sets, the most any set's pod asks, per resource (each pod asks its own set's).
    pub requests: Vec<(String, u64)>,
    /// Where its pods run; empty with sets (each set says where its own pods run).
    pub filter: NodeFilter,
    /// Its pods as several sets of alike pods, numbered set after set (each set but the last
    /// takes its count of completion indices, the last the rest); empty when all pods are alike.
    pub sets: Vec<MemberSet>,
    /// The gangs inside the job kept to one domain each (sets with a level of their own, and
    /// sub-groups), resolved against the cluster; empty when all pods are alike.
    pub units: Vec<JobUnit>,
    /// The run time this job will actually take with `max_members` pods.
    pub run_ms: i64,
    /// What its user declares: the longest run time its class can draw (base * (1 + jitter)),
    /// on the slowest placement it may get (spread across domains of a preferred topology level);
    /// None where the class declares none.
    pub expected_run_ms: Option<i64>,
    pub run_starts: RunStart,
    pub deadline_ms: Option<i64>,
    pub priority: i32,
    pub submit_ms: i64,
    pub probe: bool,
    pub topology: Option<JobTopology>,
    pub shrinkable: bool,
    /// Index of its tenant's queue in `Workload::tenants`; none without tenants.
    pub queue: Option<usize>,
}

/// A gang inside a job kept to one domain of its level: a set with a topology of its own, or a
/// sub-group of sets.
#[derive(Debug, Clone, PartialEq)]
pub struct JobUnit {
    /// The set's or the sub-group's name.
    pub name: String,
    /// Its sets, by index into `JobSpec::sets`.
    pub sets: Vec<usize>,
    pub topology: JobTopology,
    /// A sub-group (muster's group form names it) rather than one set's own level.
    pub sub_group: bool,
}

/// A job's topology constraint, resolved against the cluster: the node label of its level.
#[derive(Debug, Clone, PartialEq)]
pub struct JobTopology {
    pub level: String,
    /// The node label whose value names a node's domain at `level`.
    pub label: String,
    pub mode: ConstraintMode,
    /// The enclosing level a preferred one is kept within, and its node label.
    pub within: Option<(String, String)>,
    pub span_slowdown: f64,
}

impl JobTopology {
    /// The constraint as muster's matcher takes it.
    pub fn constraint(&self) -> TopologyConstraint {
        TopologyConstraint {
            level: self.level.clone(),
            mode: self.mode,
            within: self.within.as_ref().map(|(level, _)| level.clone()),
            weights: Default::default(),
        }
    }

    /// How much longer a run whose pods break this constraint takes: its span slowdown for a
    /// preferred one, 1 for a required one (a placement never breaks it).
    pub fn worst_slowdown(&self) -> f64 {
        if self.mode == ConstraintMode::Preferred { self.span_slowdown } else { 1.0 }
    }

    /// The node label of the level the job must stay within: its level's when required, the
    /// enclosing one's when preferred within one, else none.
    pub fn binding_label(&self) -> Option<&str> {
        match self.mode {
            ConstraintMode::Required => Some(&self.label),
            ConstraintMode::Preferred => self.within.as_ref().map(|(_, label)| label.as_str()),
        }
    }
}

impl JobSpec {
    /// The group the muster engine would receive for this job (duration rounded up to seconds).
    pub fn to_group_request(&self) -> GroupRequest {
        let mut g = GroupRequest::simple(&self.name, self.max_members, &[]);
        g.min_members = self.min_members;
        g.requests = self.requests.clone();
        g.filter = self.filter.clone();
        if !self.sets.is_empty() {
            g = (g.with_sets(self.sets.clone()))
                .and_then(|g| g.with_subgroups(self.subgroups()))
                .expect("the sets and sub-groups were checked when the scenario was loaded");
        }
        g.duration = self.expected_run_ms.map(|ms| (ms as u64).div_ceil(1000).max(1));
        g.topology = self.topology.as_ref().map(JobTopology::constraint);
        g.shrinkable = self.shrinkable;
        g
    }

    /// Its sub-groups as muster's matcher takes them (a set's own level is in its `MemberSet`).
    fn subgroups(&self) -> Vec<SubGroup> {
        (self.units.iter().filter(|u| u.sub_group))
            .map(|u| SubGroup {
                name: u.name.clone(),
                sets: u.sets.iter().map(|&k| self.sets[k].name.clone()).collect(),
                topology: u.topology.constraint(),
            })
            .collect()
    }

    pub fn is_elastic(&self) -> bool {
        self.min_members < self.max_members
    }

    /// Its sets of alike pods: its own, or the one set all its pods make.
    pub fn pod_sets(&self) -> std::borrow::Cow<'_, [MemberSet]> {
        if !self.sets.is_empty() {
            return std::borrow::Cow::Borrowed(&self.sets);
        }
        std::borrow::Cow::Owned(vec![MemberSet::alike(
            self.min_members,
            self.max_members,
            &self.requests,
            &self.filter,
        )])
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassInfo {
    pub name: String,
    pub probe: bool,
}

/// Resolved simulation parameters.
#[derive(Debug, Clone)]
pub struct SimParams {
    /// Seeds the engine's own random streams (pod end spread).
    pub seed: u64,
    pub horizon_ms: i64,
    pub sample_ms: i64,
    pub timing: Timing,
}

/// A scenario made concrete for one seed.
#[derive(Debug, Clone)]
pub struct Workload {
    pub name: String,
    pub description: String,
    pub cluster_file: String,
    pub cluster: ClusterDescription,
    pub params: SimParams,
    pub kueue: KueueConfig,
    pub coscheduling: CoschedConfig,
    pub volcano: VolcanoConfig,
    pub native: NativeConfig,
    /// Empty when the scenario declares none.
    pub tenants: Tenants,
    /// Calendar reservations, checked; empty when the scenario declares none.
    pub reservations: Vec<muster_queue::ReservationConfig>,
    pub classes: Vec<ClassInfo>,
    /// In submission order; a job's `JobId` is its index here.
    pub jobs: Vec<JobSpec>,
}

fn class_topology(
    file: &str,
    at: &str,
    t: &ClassTopology,
    cluster: &ClusterDescription,
) -> Result<JobTopology, SimError> {
    let Some(level) = cluster.topology.iter().find(|l| l.level == t.level) else {
        let known: Vec<_> = cluster.topology.iter().map(|l| l.level.as_str()).collect();
        return Err(input(
            file,
            format!("{at}.level"),
            format!("{:?} is not a level of the cluster; levels are {known:?}", t.level),
        ));
    };
    if !t.span_slowdown.is_finite() || !(1.0..=100.0).contains(&t.span_slowdown) {
        return Err(input(
            file,
            format!("{at}.spanSlowdown"),
            format!("{} is out of range; allowed 1..=100", t.span_slowdown),
        ));
    }
    let within = match &t.within {
        None => None,
        Some(_) if t.mode == ConstraintMode::Required => {
            return Err(input(
                file,
                format!("{at}.within"),
                "a required level is kept within nothing else; drop within, or make the level preferred",
            ));
        }
        Some(w) => {
            // The cluster lists its levels outermost first.
            let outer = cluster.topology.iter().take_while(|l| l.level != t.level).find(|l| &l.level == w);
            let Some(outer) = outer else {
                let enclosing: Vec<_> =
                    cluster.topology.iter().take_while(|l| l.level != t.level).map(|l| l.level.as_str()).collect();
                return Err(input(
                    file,
                    format!("{at}.within"),
                    format!("{w:?} is not a level enclosing {:?}; levels that do: {enclosing:?}", t.level),
                ));
            };
            Some((outer.level.clone(), outer.label.clone()))
        }
    };
    Ok(JobTopology {
        level: t.level.clone(),
        label: level.label.clone(),
        mode: t.mode,
        within,
        span_slowdown: t.span_slowdown,
    })
}

fn input(file: &str, path: impl Into<String>, msg: impl Into<String>) -> SimError {
    SimError::Input(muster_graph::InputError::new(file, path, msg))
}

fn read(path: &Path) -> Result<String, SimError> {
    std::fs::read_to_string(path).map_err(|e| SimError::Io { path: path.display().to_string(), message: e.to_string() })
}

/// Loads a scenario file and everything it names.
pub fn load(path: &Path, seed: u64) -> Result<Workload, SimError> {
    let text = read(path)?;
    let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
    from_text(&path.display().to_string(), &text, &base, seed)
}

/// Parses scenario text; `base` is the directory relative paths start from.
pub fn from_text(file: &str, text: &str, base: &Path, seed: u64) -> Result<Workload, SimError> {
    from_text_with(file, text, base, seed, &read)
}

/// `from_text` with the files it names read by `read_file` (a built-in scenario carries its
/// cluster in the binary).
pub fn from_text_with(
    file: &str,
    text: &str,
    base: &Path,
    seed: u64,
    read_file: &dyn Fn(&Path) -> Result<String, SimError>,
) -> Result<Workload, SimError> {
    let sf: ScenarioFile = muster_graph::InputError::parse_yaml(file, text)?;
    let cluster_path: PathBuf = base.join(&sf.cluster);
    let cluster_file = cluster_path.display().to_string();
    let cluster = ClusterDescription::parse(&cluster_file, &read_file(&cluster_path)?)?;
    let mut offered: BTreeMap<String, ()> = BTreeMap::new();
    for class in &cluster.node_classes {
        offered.extend(class.capacity.keys().chain(class.devices.keys()).map(|k| (k.clone(), ())));
    }
    let t = &sf.timing;
    for (field, v) in [("timing.podCreateQps", t.pod_create_qps), ("timing.bindQps", t.bind_qps)] {
        if !v.is_finite() || v < 0.0 {
            return Err(input(file, field, format!("{v} is out of range; allowed >= 0 (0 = unlimited)")));
        }
    }
    if let Some(sp) = t.pod_end_spread
        && !(0.0..=1.0).contains(&sp.new_clump)
    {
        return Err(input(
            file,
            "timing.podEndSpread.newClump",
            format!("{} is out of range; allowed 0..1", sp.new_clump),
        ));
    }
    if t.concurrent_job_syncs == 0 {
        return Err(input(file, "timing.concurrentJobSyncs", "0 is out of range; allowed >= 1"));
    }
    if sf.submitters.count == 0 {
        return Err(input(file, "submitters.count", "0 is out of range; allowed >= 1"));
    }
    if !sf.kueue.quota_factor.is_finite() || sf.kueue.quota_factor <= 0.0 {
        return Err(input(
            file,
            "kueue.quotaFactor",
            format!("{} is out of range; allowed > 0", sf.kueue.quota_factor),
        ));
    }
    if sf.kueue.fair_sharing.as_ref().is_some_and(|f| !f.strategies_valid()) {
        return Err(input(
            file,
            "kueue.fairSharing.preemptionStrategies",
            "not a list Kueue accepts; use [LessThanOrEqualToFinalShare], [LessThanInitialShare] or \
             [LessThanOrEqualToFinalShare, LessThanInitialShare]",
        ));
    }
    let v = &sf.volcano;
    if !v.overcommit_factor.is_finite() || v.overcommit_factor <= 0.0 {
        return Err(input(
            file,
            "volcano.overcommitFactor",
            format!("{} is out of range; allowed > 0", v.overcommit_factor),
        ));
    }
    if v.schedule_period.0 < 1 {
        return Err(input(file, "volcano.schedulePeriod", "must be at least 1ms"));
    }
    // kube-scheduler refuses the same configuration (podMaxBackoffSeconds below the initial).
    if sf.native.pod_max_backoff.0 < sf.native.pod_initial_backoff.0 {
        return Err(input(
            file,
            "native.podMaxBackoff",
            "is shorter than native.podInitialBackoff; kube-scheduler takes the maximum at least as long",
        ));
    }
    if sf.job_classes.is_empty() && sf.swf.is_none() && sf.history.is_none() {
        return Err(input(file, "jobClasses", "no jobs; give at least one job class, an swf trace or a history"));
    }
    let tenants = sf.tenants.map(|t| Tenants::check(file, t, &offered)).transpose()?.unwrap_or_default();
    let placeable = placeable::Placeable::new(file, &cluster, &cluster_file, &tenants)?;
    let reservations = reservations::check(file, sf.reservations, &tenants, &cluster, &offered, placeable.graph())?;
    let mut horizon_ms = sf.horizon.map_or(24 * 3600 * 1000, |d| d.0);
    if horizon_ms < 1 {
        return Err(input(file, "horizon", "must be at least 1ms: the run stops there"));
    }
    let sample_ms = sf.sample_interval.map_or(10_000, |d| d.0);
    if sample_ms < 1 {
        return Err(input(file, "sampleInterval", "must be at least 1ms"));
    }

    // (nominal arrival, class index, spec without submit time)
    let mut pending: Vec<(i64, usize, JobSpec)> = Vec::new();
    let mut classes = Vec::new();
    for (ci, c) in sf.job_classes.iter().enumerate() {
        let at = |f: &str| format!("jobClasses[{ci}].{f}");
        if !muster_graph::names::is_dns_label(&c.name) || c.name == "swf" || c.name == "history" {
            return Err(input(
                file,
                at("name"),
                format!("{:?}: use 1-63 of a-z, 0-9 and '-' (not \"swf\" or \"history\")", c.name),
            ));
        }
        if sf.job_classes[..ci].iter().any(|o| o.name == c.name) {
            return Err(input(file, at("name"), format!("class {:?} is declared twice", c.name)));
        }
        if !(1..=MAX_JOBS_PER_CLASS).contains(&c.count) {
            return Err(input(
                file,
                at("count"),
                format!("{} is out of range; allowed 1..={MAX_JOBS_PER_CLASS}", c.count),
            ));
        }
        let topology = c.topology.as_ref().map(|t| class_topology(file, &at("topology"), t, &cluster)).transpose()?;
        let pods = pod_sets::class_pods(file, &format!("jobClasses[{ci}]"), c, &cluster, &offered)?;
        if c.shrinkable && pods.min == pods.max {
            return Err(input(file, at("shrinkable"), muster_graph::jobspec::SHRINKABLE_NEEDS_ELASTIC));
        }
        if let Some(d) = c.declared_run_time {
            if !c.declares_run_time {
                return Err(input(
                    file,
                    at("declaredRunTime"),
                    "a class that declares no run time (declaresRunTime: false) has none to give",
                ));
            }
            if d.0 < 1 {
                return Err(input(file, at("declaredRunTime"), "must be at least 1ms"));
            }
        }
        if c.run_time.0 < 1 {
            return Err(input(file, at("runTime"), "must be at least 1ms"));
        }
        if !c.jitter.is_finite() || !(0.0..=10.0).contains(&c.jitter) {
            return Err(input(file, at("jitter"), format!("{} is out of range; allowed 0..=10", c.jitter)));
        }
        if c.deadline.is_some_and(|d| d.0 < 1) {
            return Err(input(file, at("deadline"), "must be at least 1ms"));
        }
        let interval = c.arrival.interval.map_or(0, |d| d.0);
        if c.arrival.pattern == Pattern::Burst && c.arrival.interval.is_some() {
            return Err(input(
                file,
                at("arrival.interval"),
                "a burst arrives all at once; drop the interval, or use pattern uniform or poisson",
            ));
        }
        if c.arrival.pattern != Pattern::Burst && interval < 1 {
            return Err(input(file, at("arrival.interval"), "uniform and poisson arrivals need an interval >= 1ms"));
        }
        let queue = queue_of(file, &at("queue"), c.queue.as_deref(), &tenants)?;
        check_lulls(file, &at("arrival.lulls"), &c.arrival.lulls)?;
        // A job that may be spread across domains declares the run time of that placement: a
        // scheduler holds it to what it declares (muster's runTimeLimit).
        let worst_placement = topology
            .iter()
            .chain(pods.units.iter().map(|u| &u.topology))
            .map(JobTopology::worst_slowdown)
            .fold(1.0, f64::max);
        let first = pending.len();
        let mut arrivals = Rng::stream(seed, &format!("arrival:{}", c.name));
        let mut runtimes = Rng::stream(seed, &format!("runtime:{}", c.name));
        let start = c.arrival.start.map_or(0, |d| d.0);
        let mut t = start;
        for k in 0..c.count {
            let nominal = match c.arrival.pattern {
                Pattern::Burst => start,
                Pattern::Uniform => start + k * interval,
                Pattern::Poisson => {
                    t += (-(1.0 - arrivals.unit()).ln() * interval as f64).round() as i64;
                    t
                }
            };
            let nominal = after_lulls(nominal, &c.arrival.lulls);
            let run_ms = (c.run_time.0 as f64 * (1.0 + c.jitter * runtimes.unit())).round() as i64;
            pending.push((
                nominal,
                ci,
                JobSpec {
                    name: format!("{}-{k}", c.name),
                    class: c.name.clone(),
                    class_index: ci,
                    min_members: pods.min,
                    max_members: pods.max,
                    requests: pods.requests.clone(),
                    filter: pods.filter.clone(),
                    sets: pods.sets.clone(),
                    units: pods.units.clone(),
                    run_ms: run_ms.max(1),
                    expected_run_ms: c.declares_run_time.then(|| {
                        c.declared_run_time
                            .map_or((c.run_time.0 as f64 * (1.0 + c.jitter) * worst_placement).ceil() as i64, |d| d.0)
                    }),
                    run_starts: c.run_starts,
                    deadline_ms: c.deadline.map(|d| d.0),
                    priority: c.priority,
                    submit_ms: 0,
                    probe: c.probe,
                    topology: topology.clone(),
                    shrinkable: c.shrinkable,
                    queue,
                },
            ));
        }
        let class_jobs = &pending[first..];
        if class_jobs.iter().all(|(t, _, _)| *t >= horizon_ms) {
            return Err(input(
                file,
                at("arrival"),
                format!(
                    "no job of class {:?} arrives before the horizon ({} s): start its arrivals sooner, or make the \
                     horizon longer",
                    c.name,
                    horizon_ms as f64 / 1000.0
                ),
            ));
        }
        // The jobs of a class differ only in run time: the first stands for all.
        placeable.check_class(file, ci, &c.name, &class_jobs[0].2, &tenants)?;
        classes.push(ClassInfo { name: c.name.clone(), probe: c.probe });
    }
    if let Some(src) = &sf.swf {
        let ci = classes.len();
        let swf_path = base.join(&src.file);
        let swf_file = swf_path.display().to_string();
        let cpu = quantity(file, "swf.cpuPerProc", "cpu", &src.cpu_per_proc)?;
        let mem = quantity(file, "swf.memoryPerProc", "memory", &src.memory_per_proc)?;
        if src.procs_per_pod == 0 {
            return Err(input(file, "swf.procsPerPod", "0 is out of range; allowed >= 1"));
        }
        let rule = swf::Mapping {
            procs_per_pod: src.procs_per_pod,
            cpu_per_proc: cpu,
            memory_per_proc: mem,
            deadline_from_requested: src.deadline_from_requested,
        };
        let queue = queue_of(file, "swf.queue", src.queue.as_deref(), &tenants)?;
        let trace = swf::parse(&swf_file, &read_file(&swf_path)?)?;
        let before = pending.len();
        for job in trace.iter().take(src.max_jobs.unwrap_or(usize::MAX)) {
            let Some(m) = rule.map(job) else { continue };
            let mut requests = vec![("cpu".to_string(), m.cpu_per_pod), ("memory".to_string(), m.memory_per_pod)];
            requests.retain(|(_, a)| *a > 0);
            requests.push(("pods".to_string(), 1));
            requests.retain(|(r, _)| r != "pods" || offered.contains_key("pods"));
            pending.push((
                m.submit_ms,
                ci,
                JobSpec {
                    name: format!("swf-{}", job.id),
                    class: "swf".into(),
                    class_index: ci,
                    min_members: m.pods,
                    max_members: m.pods,
                    requests,
                    filter: NodeFilter::default(),
                    sets: vec![],
                    units: vec![],
                    run_ms: m.run_ms,
                    expected_run_ms: Some(m.expected_ms),
                    run_starts: src.run_starts,
                    deadline_ms: m.deadline_ms,
                    priority: 0,
                    submit_ms: 0,
                    probe: false,
                    topology: None,
                    shrinkable: false,
                    queue,
                },
            ));
        }
        if pending.len() == before {
            let why = match (trace.len(), src.max_jobs) {
                (0, _) => "it holds no job line".to_string(),
                (_, Some(0)) => "swf.maxJobs is 0".to_string(),
                (n, _) => format!(
                    "none of its {n} jobs has a run time and a processor count (above 0) and a submit time of 0 or more"
                ),
            };
            return Err(input(file, "swf.file", format!("{swf_file}: nothing to run: {why}")));
        }
        classes.push(ClassInfo { name: "swf".into(), probe: false });
    }
    if let Some(src) = &sf.history {
        let ci = classes.len();
        let runs = history_source::read(src, base, read_file)?;
        let offers_pods = offered.contains_key("pods");
        let replayed = history_source::jobs(file, src, (&runs.0, &runs.1), &cluster, &tenants, offers_pods, ci)?;
        if sf.horizon.is_none() {
            // A history may span months: by default the replay runs until every job could have run
            // one after another.
            let total: i64 = replayed.iter().map(|j| j.run_ms).sum();
            let last = replayed.iter().map(|j| j.submit_ms).max().unwrap_or(0);
            horizon_ms = horizon_ms.max(last.saturating_add(total));
        }
        pending.extend(replayed.into_iter().map(|j| (j.submit_ms, ci, j)));
        classes.push(ClassInfo { name: "history".into(), probe: false });
    }
    // Stable sort: ties keep class order and index order.
    pending.sort_by_key(|(t, _, _)| *t);
    let per_job = sf.submitters.per_job.map_or(0, |d| d.0);
    let mut free_at = vec![0i64; sf.submitters.count as usize];
    let mut jobs = Vec::with_capacity(pending.len());
    for (nominal, _, mut spec) in pending {
        let (si, _) = free_at.iter().enumerate().min_by_key(|(i, t)| (**t, *i)).expect("count >= 1");
        let done = nominal.max(free_at[si]) + per_job;
        free_at[si] = done;
        spec.submit_ms = done;
        jobs.push(spec);
    }
    jobs.sort_by_key(|j| j.submit_ms);
    Ok(Workload {
        name: sf.name,
        description: sf.description,
        cluster_file,
        cluster,
        params: SimParams { seed, horizon_ms, sample_ms, timing: sf.timing },
        kueue: sf.kueue,
        coscheduling: sf.coscheduling,
        volcano: sf.volcano,
        native: sf.native,
        tenants,
        reservations,
        classes,
        jobs,
    })
}

/// The queue a class (or the trace) names: required with tenants, refused without.
fn queue_of(file: &str, at: &str, queue: Option<&str>, tenants: &Tenants) -> Result<Option<usize>, SimError> {
    match queue {
        None if tenants.is_empty() => Ok(None),
        None => Err(input(file, at, format!("missing; name one of the tenants' queues {:?}", tenants.names()))),
        Some(_) if tenants.is_empty() => {
            Err(input(file, at, "the scenario declares no tenants; add a tenants section or drop queue"))
        }
        Some(q) => tenants
            .index_of(q)
            .map(Some)
            .ok_or_else(|| input(file, at, format!("{q:?} is not a tenant's queue; queues are {:?}", tenants.names()))),
    }
}

fn check_lulls(file: &str, at: &str, lulls: &[Lull]) -> Result<(), SimError> {
    for (i, l) in lulls.iter().enumerate() {
        if l.to <= l.from {
            return Err(input(file, format!("{at}[{i}].to"), "must be after from"));
        }
        if i > 0 && l.from < lulls[i - 1].to {
            return Err(input(file, format!("{at}[{i}].from"), "lulls must be in order and not overlap"));
        }
    }
    Ok(())
}

/// An arrival due at `nominal` once the class's lulls have pushed it back.
fn after_lulls(nominal: i64, lulls: &[Lull]) -> i64 {
    lulls.iter().fold(nominal, |t, l| if t >= l.from.0 { t + (l.to.0 - l.from.0) } else { t })
}

fn quantity(file: &str, path: &str, resource: &str, v: &serde_yaml_ng::Value) -> Result<u64, SimError> {
    let text = match v {
        serde_yaml_ng::Value::String(s) => s.clone(),
        serde_yaml_ng::Value::Number(n) => n.to_string(),
        _ => return Err(input(file, path, "must be a quantity such as 2 or 4Gi")),
    };
    let unit = resources::unit_of(resource).map_err(|m| input(file, path, m))?;
    resources::parse_amount(unit, &text).map_err(|e| input(file, path, e.to_string()))
}

fn parse_requests(
    file: &str,
    path: &str,
    map: &BTreeMap<String, serde_yaml_ng::Value>,
    offered: &BTreeMap<String, ()>,
) -> Result<Vec<(String, u64)>, SimError> {
    let mut out = Vec::new();
    for (name, v) in map {
        let p = format!("{path}.{name}");
        if name == "pods" {
            return Err(input(file, p, "pods is implied (1 per pod); remove it"));
        }
        let amount = quantity(file, &p, name, v)?;
        if amount > 0 && !offered.contains_key(name) {
            let known: Vec<&str> = offered.keys().map(String::as_str).collect();
            return Err(input(file, p, format!("no node offers {name:?}; the cluster has {known:?}")));
        }
        out.push((name.clone(), amount));
    }
    if offered.contains_key("pods") {
        out.push(("pods".to_string(), 1));
    }
    Ok(out)
}
