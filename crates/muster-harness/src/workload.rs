//! A scenario's jobs as muster-sim itself draws them (`muster_sim::scenario::load`: the same
//! random streams, duration parser, arrivals and submitters), and the batch/v1 Jobs they become.
//! Only what a Job manifest can express is accepted: deadlines in whole seconds, priorities a
//! PriorityClass can hold (each becomes the class [`priority_class`] names, made by `run`).
//! An elastic job (members: {min, max}) becomes a Job of `max` pods with its minimum kept in
//! [`JobRecord::min_pods`]; each peer states that minimum its own way ([`crate::peers`]). The run
//! time is always the one at `max` members (KWOK's run-seconds cannot scale with how many pods
//! actually run, as the simulator's elastic jobs do).

use std::collections::BTreeMap;
use std::path::Path;

use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec, ResourceRequirements, Toleration};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::ObjectMeta;
use muster_graph::filter::TolerationOperator;
use muster_graph::jobspec::ConstraintMode;
use muster_graph::{quantity, resources};
use muster_k8s::labels;
use muster_sim::scenario::RunStart;
use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// One job of a scenario as the real run needs it (the `jobs` JSON file).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobRecord {
    pub name: String,
    pub class: String,
    pub pods: u32,
    /// The fewest pods an elastic job can start with; absent for a rigid job (= `pods`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_pods: Option<u32>,
    /// Per pod, Kubernetes quantities (`pods` left out).
    pub requests: BTreeMap<String, String>,
    pub run_ms: i64,
    /// `all-ready` or `start`: kwok.muster.dev/run-after (hack/kwok/stages.yaml).
    pub run_after: String,
    pub deadline_s: Option<i64>,
    pub node_selector: BTreeMap<String, String>,
    pub tolerations: Vec<Toleration>,
    pub submit_ms: i64,
    /// What the job declares as its run time (muster.dev/duration-seconds for muster); 0 when
    /// it declares none.
    #[serde(default)]
    pub expected_run_ms: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology: Option<RecordTopology>,
    /// The pods' priority: 0, or the value of the PriorityClass [`priority_class`] names.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub priority: i32,
    /// The tenant's queue the job is submitted to (scenarios with `tenants`): its namespace and
    /// its queue under every peer ([`crate::tenants`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// A job of several member sets (a launcher beside its workers): each set's pods and what
    /// each of them asks; then `pods` is their sum and `requests` is empty. Empty for a job of
    /// alike pods.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sets: Vec<SetRecord>,
    /// Gangs inside a job of several sets: a set kept to one domain of its own level, or sets
    /// kept to one domain together (a sub-group); each within the job's own domain.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gangs: Vec<GangRecord>,
}

/// A gang inside a job: its sets' pods, all within one domain of a required level.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GangRecord {
    /// The set's name, or the sub-group's.
    pub name: String,
    /// The names of its sets.
    pub sets: Vec<String>,
    /// A sub-group of sets rather than one set's own level.
    pub sub_group: bool,
    pub level: String,
    /// The node label naming a node's domain at `level`.
    pub label: String,
}

/// One set of alike pods of a job of several sets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetRecord {
    pub name: String,
    pub pods: u32,
    /// Per pod, Kubernetes quantities (`pods` left out).
    pub requests: BTreeMap<String, String>,
}

fn is_zero(p: &i32) -> bool {
    *p == 0
}

/// Kubernetes keeps values above this for its own system classes.
pub const MAX_USER_PRIORITY: i32 = 1_000_000_000;

/// The PriorityClass a job of `priority` names (every peer reads a pod's class: kube-scheduler,
/// Kueue, Volcano and coscheduling for its order, muster for its queue's), made before the Jobs.
pub fn priority_class(priority: i32) -> String {
    match priority {
        p if p < 0 => format!("harness-priority-minus-{}", p.unsigned_abs()),
        p => format!("harness-priority-{p}"),
    }
}

/// All of a job's pods within one domain of a topology level.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordTopology {
    pub level: String,
    /// The node label naming a node's domain at `level`.
    pub label: String,
    /// Required, or only preferred.
    pub required: bool,
    /// For a preferred level: the enclosing level the job stays within.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub within: Option<EnclosingLevel>,
}

/// A level enclosing a job's preferred one, and the node label naming a node's domain of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnclosingLevel {
    pub level: String,
    pub label: String,
}

impl RecordTopology {
    /// The node label of the level the job must stay within: its own when required, the
    /// enclosing one's when kept within one, else none.
    pub fn binding_label(&self) -> Option<&str> {
        if self.required { Some(&self.label) } else { self.within.as_ref().map(|w| w.label.as_str()) }
    }
}

/// The jobs of `scenario` for `seed`, in submission order.
pub fn jobs(scenario: &Path, seed: u64) -> Result<Vec<JobRecord>> {
    let w = muster_sim::scenario::load(scenario, seed)?;
    w.jobs
        .iter()
        .map(|j| {
            let tenant = j.queue.map(|q| w.tenants.queues[q].name.clone());
            Ok(JobRecord { tenant, ..record(j)? })
        })
        .collect()
}

/// One of muster-sim's jobs as a record, or why a Job cannot express it.
pub fn record(j: &muster_sim::JobSpec) -> Result<JobRecord> {
    let refuse = |what: &str| Err(Error::Input(format!("class {}: {what}", j.class)));
    if j.priority > MAX_USER_PRIORITY {
        return refuse(&format!(
            "priority {} is above {MAX_USER_PRIORITY}, which Kubernetes keeps for system classes; use a lower one",
            j.priority
        ));
    }
    if j.deadline_ms.is_some_and(|d| d % 1000 != 0) {
        return refuse("activeDeadlineSeconds needs a whole number of seconds");
    }
    let mut sets = Vec::new();
    for s in &j.sets {
        if s.min_members < s.max_members {
            return refuse(&format!(
                "set {}: an elastic set ({}..{} members) is simulated only; a group of several sets starts whole \
                 under every scheduler here: give the set a fixed members count",
                s.name, s.min_members, s.max_members
            ));
        }
        if s.filter != j.filter {
            return refuse(&format!(
                "set {}: a set's own node selector or tolerations are simulated only; give them on the class, for \
                 all its sets",
                s.name
            ));
        }
        sets.push(SetRecord { name: s.name.clone(), pods: s.max_members, requests: quantities(&s.requests)? });
    }
    let mut gangs = Vec::new();
    for u in &j.units {
        let kind = if u.sub_group { "sub-group" } else { "set" };
        if u.topology.mode != ConstraintMode::Required {
            return refuse(&format!(
                "{kind} {}: a preferred level inside a job is simulated only; make it required",
                u.name
            ));
        }
        gangs.push(GangRecord {
            name: u.name.clone(),
            sets: u.sets.iter().map(|&k| j.sets[k].name.clone()).collect(),
            sub_group: u.sub_group,
            level: u.topology.level.clone(),
            label: u.topology.label.clone(),
        });
    }
    let requests = if sets.is_empty() { quantities(&j.requests)? } else { BTreeMap::new() };
    let tolerations = j
        .filter
        .tolerations
        .iter()
        .map(|t| Toleration {
            key: (!t.key.is_empty()).then(|| t.key.clone()),
            operator: Some(match t.operator {
                TolerationOperator::Equal => "Equal".into(),
                TolerationOperator::Exists => "Exists".into(),
            }),
            value: (!t.value.is_empty()).then(|| t.value.clone()),
            effect: t.effect.clone().filter(|e| !e.is_empty()),
            toleration_seconds: None,
        })
        .collect();
    Ok(JobRecord {
        name: j.name.clone(),
        class: j.class.clone(),
        pods: j.max_members,
        min_pods: j.is_elastic().then_some(j.min_members),
        requests,
        run_ms: j.run_ms,
        run_after: match j.run_starts {
            RunStart::AllReady => "all-ready",
            RunStart::PodStart => "start",
        }
        .into(),
        deadline_s: j.deadline_ms.map(|d| d / 1000),
        node_selector: j.filter.node_selector.clone(),
        tolerations,
        submit_ms: j.submit_ms,
        expected_run_ms: j.expected_run_ms.unwrap_or(0),
        topology: j.topology.as_ref().map(|t| RecordTopology {
            level: t.level.clone(),
            label: t.label.clone(),
            required: t.mode == ConstraintMode::Required,
            within: t
                .within
                .as_ref()
                .map(|(level, label)| EnclosingLevel { level: level.clone(), label: label.clone() }),
        }),
        priority: j.priority,
        tenant: None,
        sets,
        gangs,
    })
}

/// Per-pod amounts as Kubernetes quantities, `pods` left out.
fn quantities(amounts: &[(String, u64)]) -> Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for (name, amount) in amounts.iter().filter(|(n, _)| n != "pods") {
        let unit = resources::unit_of(name).map_err(Error::Input)?;
        out.insert(name.clone(), quantity::format_amount(*amount, unit));
    }
    Ok(out)
}

impl JobRecord {
    /// The fewest pods the job can run with: its minimum when elastic, else all of them.
    pub fn min(&self) -> u32 {
        self.min_pods.unwrap_or(self.pods).min(self.pods)
    }

    /// Whether it keeps pods to a topology domain: its own level, or a gang's inside it.
    pub fn constrained(&self) -> bool {
        self.topology.is_some() || !self.gangs.is_empty()
    }

    /// The resources its pods ask for, over all its sets.
    pub fn requested(&self) -> impl Iterator<Item = &String> {
        self.requests.keys().chain(self.sets.iter().flat_map(|s| s.requests.keys()))
    }

    /// One of its sets as a job of alike pods, named `<job>-<set>`: what the Job (or the task, or
    /// the replicated Job) of that set is made from.
    pub fn set_job(&self, set: &SetRecord) -> JobRecord {
        JobRecord {
            name: format!("{}-{}", self.name, set.name),
            pods: set.pods,
            min_pods: None,
            requests: set.requests.clone(),
            sets: Vec::new(),
            topology: None,
            gangs: Vec::new(),
            ..self.clone()
        }
    }
}

/// How a record becomes a Job beyond the record itself.
#[derive(Debug, Clone, Default)]
pub struct ManifestOptions {
    /// muster.dev/queue: muster's webhook holds the Job and muster places it; the Job also
    /// declares its expected run time (muster.dev/duration-seconds), as the sim's muster does.
    pub queue: Option<String>,
    /// spec.template.spec.schedulerName (another scheduler profile or plugin).
    pub scheduler_name: Option<String>,
    pub namespace: Option<String>,
}

/// `ms` as a decimal number of seconds with no trailing zeros (25191 -> "25.191").
pub fn seconds(ms: i64) -> String {
    let s = format!("{}.{:03}", ms / 1000, ms % 1000);
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// The batch/v1 Job of a record: parallelism = completions = pods, backoffLimit 0, the run time
/// as KWOK's stages read it (kwok.muster.dev/run-seconds, run-after), requests, node selector,
/// tolerations and activeDeadlineSeconds.
pub fn manifest(job: &JobRecord, opts: &ManifestOptions) -> Job {
    let annotations = BTreeMap::from([
        ("kwok.muster.dev/run-seconds".to_string(), seconds(job.run_ms)),
        ("kwok.muster.dev/run-after".to_string(), job.run_after.clone()),
    ]);
    let requests: BTreeMap<String, Quantity> =
        job.requests.iter().map(|(k, v)| (k.clone(), Quantity(v.clone()))).collect();
    // Only cpu, memory and ephemeral storage may be over-committed: the apiserver refuses a request
    // for anything else (GPUs, hugepages) without an equal limit.
    let overcommittable = |k: &str| matches!(k, "cpu" | "memory" | "ephemeral-storage");
    let limits: BTreeMap<String, Quantity> =
        requests.iter().filter(|(k, _)| !overcommittable(k)).map(|(k, v)| (k.clone(), v.clone())).collect();
    let pod = PodSpec {
        restart_policy: Some("Never".into()),
        termination_grace_period_seconds: Some(0),
        containers: vec![Container {
            name: "main".into(),
            image: Some("kwok-fake".into()),
            resources: Some(ResourceRequirements {
                limits: (!limits.is_empty()).then_some(limits),
                requests: Some(requests),
                ..Default::default()
            }),
            ..Default::default()
        }],
        node_selector: (!job.node_selector.is_empty()).then(|| job.node_selector.clone()),
        tolerations: (!job.tolerations.is_empty()).then(|| job.tolerations.clone()),
        scheduler_name: opts.scheduler_name.clone(),
        priority_class_name: (job.priority != 0).then(|| priority_class(job.priority)),
        ..Default::default()
    };
    let mut meta = ObjectMeta { name: Some(job.name.clone()), namespace: opts.namespace.clone(), ..Default::default() };
    if let Some(q) = &opts.queue {
        meta.labels = Some(BTreeMap::from([(labels::QUEUE.to_string(), q.clone())]));
        let mut ann = BTreeMap::new();
        if job.expected_run_ms > 0 {
            let secs = (job.expected_run_ms.max(job.run_ms) as u64).div_ceil(1000).max(1);
            ann.insert(labels::DURATION.to_string(), secs.to_string());
        }
        if job.min() < job.pods {
            ann.insert(labels::MIN_MEMBERS.to_string(), job.min().to_string());
        }
        if let Some(t) = &job.topology {
            let key = if t.required { labels::REQUIRED_TOPOLOGY } else { labels::PREFERRED_TOPOLOGY };
            ann.insert(key.to_string(), t.level.clone());
            if let Some(w) = &t.within {
                ann.insert(labels::REQUIRED_TOPOLOGY.to_string(), w.level.clone());
            }
        }
        meta.annotations = Some(ann);
    }
    Job {
        metadata: meta,
        spec: Some(JobSpec {
            parallelism: Some(job.pods as i32),
            completions: Some(job.pods as i32),
            backoff_limit: Some(0),
            active_deadline_seconds: job.deadline_s,
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta { annotations: Some(annotations), ..Default::default() }),
                spec: Some(pod),
            },
            ..Default::default()
        }),
        status: None,
    }
}

/// Every Job of a scenario as a YAML stream (`kubectl apply -f`), each with its submit time.
pub fn objects_yaml(jobs: &[JobRecord], opts: &ManifestOptions) -> String {
    let mut out = String::new();
    for j in jobs {
        let yaml = serde_yaml_ng::to_string(&manifest(j, opts)).expect("a Job is plain data and always serializes");
        out.push_str(&format!("---\n# submit at {} s\n{yaml}", seconds(j.submit_ms)));
    }
    out
}

/// A one-pod job record of `class` for tests.
#[cfg(test)]
pub(crate) fn test_record(name: &str, class: &str) -> JobRecord {
    JobRecord {
        name: name.into(),
        class: class.into(),
        pods: 1,
        min_pods: None,
        requests: BTreeMap::new(),
        run_ms: 1000,
        run_after: "all-ready".into(),
        deadline_s: None,
        node_selector: BTreeMap::new(),
        tolerations: vec![],
        submit_ms: 0,
        expected_run_ms: 1000,
        topology: None,
        priority: 0,
        tenant: None,
        sets: Vec::new(),
        gangs: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scenario(name: &str) -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios").join(name)
    }

    /// The records are muster-sim's own jobs: same count, order, pods, requests, submit times,
    /// run times and deadlines.
    #[test]
    fn jobs_are_muster_sims_jobs() {
        for (file, seed) in [("sim-vs-real.yaml", 1), ("sim-vs-real-clog.yaml", 7), ("sim-vs-real-seed.yaml", 1)] {
            let path = scenario(file);
            let sim = muster_sim::scenario::load(&path, seed).unwrap().jobs;
            let ours = jobs(&path, seed).unwrap();
            assert_eq!(ours.len(), sim.len(), "{file}");
            for (r, s) in ours.iter().zip(&sim) {
                assert_eq!(r.name, s.name);
                assert_eq!(r.pods, s.max_members);
                assert_eq!(
                    (r.submit_ms, r.run_ms, r.expected_run_ms),
                    (s.submit_ms, s.run_ms, s.expected_run_ms.unwrap_or(0))
                );
                assert_eq!(r.deadline_s.map(|d| d * 1000), s.deadline_ms);
                assert_eq!(r.node_selector, s.filter.node_selector);
                // The requests read back by muster's parser are the sim's, apart from `pods: 1`.
                let back: Vec<(String, u64)> = r
                    .requests
                    .iter()
                    .map(|(n, q)| (n.clone(), resources::parse_amount(resources::unit_of(n).unwrap(), q).unwrap()))
                    .collect();
                let want: Vec<(String, u64)> = s.requests.iter().filter(|(n, _)| n != "pods").cloned().collect();
                assert_eq!(back, want);
            }
        }
        // The values the Python copy of the generator drew for seed 1 (hack/sim-vs-real.py, last
        // run before it was removed): the first jobs of sim-vs-real.yaml.
        let first = jobs(&scenario("sim-vs-real.yaml"), 1).unwrap();
        let got: Vec<(i64, i64)> = first.iter().take(2).map(|j| (j.run_ms, j.submit_ms)).collect();
        assert_eq!(got, [(25191, 0), (22299, 500)]);
        assert_eq!(first[0].requests, BTreeMap::from([("cpu".into(), "2".into()), ("memory".into(), "2Gi".into())]));
    }

    #[test]
    fn gpu_requests_carry_equal_limits_and_cpu_memory_none() {
        let j = &jobs(&scenario("suite/gpu-burst.yaml"), 1).unwrap()[0];
        let m = serde_json::to_value(manifest(j, &ManifestOptions::default())).unwrap();
        let res = &m["spec"]["template"]["spec"]["containers"][0]["resources"];
        assert_eq!(res["requests"]["nvidia.com/gpu"], "8", "{res}");
        assert_eq!(res["limits"], serde_json::json!({"nvidia.com/gpu": "8"}), "{res}");
    }

    #[test]
    fn manifests_carry_what_kwok_and_muster_read() {
        let j = &jobs(&scenario("sim-vs-real-seed.yaml"), 1).unwrap()[0];
        let plain = serde_json::to_value(manifest(j, &ManifestOptions::default())).unwrap();
        let ann = &plain["spec"]["template"]["metadata"]["annotations"];
        assert_eq!(ann["kwok.muster.dev/run-seconds"], seconds(j.run_ms));
        assert_eq!(ann["kwok.muster.dev/run-after"], "all-ready");
        assert_eq!(plain["spec"]["parallelism"], 10);
        assert_eq!(plain["spec"]["completions"], 10);
        assert_eq!(plain["spec"]["backoffLimit"], 0);
        assert_eq!(plain["spec"]["activeDeadlineSeconds"], 900);
        let pod = &plain["spec"]["template"]["spec"];
        assert_eq!(pod["containers"][0]["resources"]["requests"]["memory"], "2Gi");
        assert_eq!(pod["nodeSelector"]["muster.dev/pool"], "worker");
        assert!(plain["metadata"].get("labels").is_none());
        assert!(pod.get("schedulerName").is_none());
        let opts = ManifestOptions {
            queue: Some("default".into()),
            scheduler_name: Some("other".into()),
            namespace: Some("ns".into()),
        };
        let queued = serde_json::to_value(manifest(j, &opts)).unwrap();
        assert_eq!(queued["metadata"]["labels"]["muster.dev/queue"], "default");
        assert_eq!(queued["metadata"]["annotations"]["muster.dev/duration-seconds"], "270");
        assert_eq!(queued["metadata"]["namespace"], "ns");
        // A class that declares no run time gets no duration annotation: muster learns it.
        let silent = &jobs(&scenario("starvation-undeclared.yaml"), 1).unwrap()[0];
        let queued_silent = serde_json::to_value(manifest(silent, &opts)).unwrap();
        assert!(queued_silent["metadata"]["annotations"].get("muster.dev/duration-seconds").is_none());
        assert_eq!(queued["spec"]["template"]["spec"]["schedulerName"], "other");
        assert!(
            objects_yaml(std::slice::from_ref(j), &opts)
                .contains("# submit at 0.4 s\napiVersion: batch/v1\nkind: Job\n")
        );
    }

    #[test]
    fn what_a_job_cannot_express_is_refused() {
        assert_eq!(seconds(25191), "25.191");
        assert_eq!(seconds(20000), "20");
        assert_eq!(seconds(500), "0.5");
        let mut s = muster_sim::scenario::load(&scenario("sim-vs-real.yaml"), 1).unwrap().jobs.remove(0);
        s.deadline_ms = Some(1500);
        assert!(record(&s).unwrap_err().to_string().contains("whole number"));
        s.deadline_ms = None;
        s.priority = MAX_USER_PRIORITY + 1;
        assert!(record(&s).unwrap_err().to_string().contains("system classes"));
        // A set of {min, max} members: every peer here starts a group of several sets whole.
        let ai = muster_sim::scenario::load(&scenario("suite/ai-sets.yaml"), 1).unwrap().jobs;
        let ray = ai.iter().find(|j| j.class == "ray").unwrap();
        let e = record(ray).unwrap_err().to_string();
        assert!(e.contains("class ray: set gpu-workers: an elastic set (2..8 members)"), "{e}");
        assert!(e.contains("give the set a fixed members count"), "{e}");
        // A gang inside a job takes a required level only.
        let pd = muster_sim::scenario::load(&scenario("suite/disaggregated.yaml"), 1).unwrap().jobs;
        let mut job = pd.iter().find(|j| j.class == "pd").unwrap().clone();
        job.units[1].topology.mode = ConstraintMode::Preferred;
        let e = record(&job).unwrap_err().to_string();
        assert!(e.contains("class pd: set decode: a preferred level inside a job is simulated only"), "{e}");
    }

    #[test]
    fn gangs_inside_a_job_keep_their_sets_and_levels() {
        let jobs = jobs(&scenario("suite/disaggregated-sixtieth.yaml"), 1).unwrap();
        let pd = jobs.iter().find(|j| j.class == "pd").unwrap();
        assert_eq!(pd.topology.as_ref().map(|t| (t.label.as_str(), t.required)), Some(("muster.dev/block", true)));
        let gangs: Vec<(&str, &[String], bool, &str)> =
            pd.gangs.iter().map(|g| (g.name.as_str(), &g.sets[..], g.sub_group, g.label.as_str())).collect();
        let one = |s: &str| vec![s.to_string()];
        assert_eq!(
            gangs,
            [
                ("prefill", &one("prefill")[..], false, "muster.dev/rack"),
                ("decode", &one("decode")[..], false, "muster.dev/rack")
            ]
        );
        assert!(pd.constrained());
        let mpi = jobs.iter().find(|j| j.class == "mpi").unwrap();
        assert!(mpi.topology.is_none() && mpi.gangs.len() == 1 && mpi.constrained());
        // A set's own Job is not constrained itself: the gang is the job's.
        let worker = mpi.set_job(&mpi.sets[1]);
        assert!(!worker.constrained());
        assert!(!jobs.iter().find(|j| j.class == "single").unwrap().constrained());
    }

    #[test]
    fn a_job_of_several_sets_keeps_each_sets_pods_and_requests() {
        let path = scenario("suite/ai-sets-sixtieth.yaml");
        let sim = muster_sim::scenario::load(&path, 1).unwrap().jobs;
        let ours = jobs(&path, 1).unwrap();
        assert_eq!(ours.len(), 68);
        for (r, s) in ours.iter().zip(&sim) {
            assert!(r.requests.is_empty(), "a job of sets asks nothing beyond its sets");
            assert_eq!(r.pods, s.max_members);
            assert_eq!(r.sets.len(), s.sets.len());
            for (rs, ss) in r.sets.iter().zip(&s.sets) {
                assert_eq!((rs.name.as_str(), rs.pods), (ss.name.as_str(), ss.max_members));
                let back: Vec<(String, u64)> = rs
                    .requests
                    .iter()
                    .map(|(n, q)| (n.clone(), resources::parse_amount(resources::unit_of(n).unwrap(), q).unwrap()))
                    .collect();
                let want: Vec<(String, u64)> = ss.requests.iter().filter(|(n, _)| n != "pods").cloned().collect();
                assert_eq!(back, want);
            }
        }
        let mpi = &ours[0];
        assert_eq!(mpi.class, "mpi");
        let launcher = mpi.set_job(&mpi.sets[0]);
        assert_eq!((launcher.name, launcher.pods), (format!("{}-launcher", mpi.name), 1));
        assert_eq!(launcher.requests, BTreeMap::from([("cpu".into(), "1".into()), ("memory".into(), "2Gi".into())]));
        assert_eq!(launcher.run_ms, mpi.run_ms);
        let names: Vec<&String> = mpi.requested().collect();
        assert_eq!(names, ["cpu", "memory", "cpu", "memory", "nvidia.com/gpu"]);
    }

    #[test]
    fn priorities_become_priority_classes() {
        let jobs = jobs(&scenario("seed-scalability.yaml"), 1).unwrap();
        let high = jobs.iter().find(|j| j.class == "sample-high").unwrap();
        let plain = jobs.iter().find(|j| j.class == "sample-default").unwrap();
        assert_eq!((high.priority, plain.priority), (1000, 0));
        let pod = |j| {
            serde_json::to_value(manifest(j, &ManifestOptions::default())).unwrap()["spec"]["template"]["spec"].clone()
        };
        assert_eq!(pod(high)["priorityClassName"], "harness-priority-1000");
        assert!(pod(plain).get("priorityClassName").is_none());
        assert_eq!(priority_class(-5), "harness-priority-minus-5");
    }
}
