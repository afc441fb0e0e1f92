//! hack/sim-vs-real.sh's real side: a scenario's Jobs created at their submit times on a real
//! control plane and read back (`run`), the control plane's rates on a burst that fits
//! (`calibrate`), the comparison with `muster sim` (`compare`), and kube-scheduler's own counters
//! over the run (`metrics`). Object timestamps have 1 s resolution.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams, PostParams};
use kube::{Api, Client, Config};
use muster_sim::metrics::{Occupancy, TenantResult};
use muster_sim::scenario::Workload;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::Semaphore;

use crate::cluster::{self, ALL_READY_AT, Condition, now, secs, true_condition};
use crate::job_groups::{from_volcano_job, merged};
use crate::occupancy::{Ledger, PartialGangs, capacity};
use crate::outcome::{TopologySpread, Waits, bound_at, created, job_name, topology_spread, waits};
use crate::peers::{Object, Peer, PeerOptions, job_objects, priority_classes};
use crate::stats::{mean, peak_rate, py, round};
use crate::tenant_figures::{self, tenant_figures};
use crate::timeline::JobTimeline;
use crate::workload::{JobRecord, ManifestOptions, manifest};
use crate::{Error, Result, read_json, write_json};

/// The real run as `compare` and the docs read it (`NAME.real.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RealResult {
    pub jobs: usize,
    pub completed: usize,
    pub failed: usize,
    pub unfinished: usize,
    /// First Job created -> last Job finished, when every Job finished.
    pub makespan_s: Option<f64>,
    pub last_end_s: Option<f64>,
    pub first_submit_offset_s: f64,
    pub submit_lag_s: Lag,
    pub measured: Measured,
    #[serde(default)]
    pub series: Vec<Sample>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scheduler_metrics: Vec<Snapshot>,
    /// Jobs with a topology constraint whose pods all still exist, and those of them whose pods
    /// ran in more than one domain of its level; absent when no job has a constraint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology: Option<TopologySpread>,
    /// How long the Jobs waited for their first bind, overall and per job class; absent when
    /// there were no Jobs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waits: Option<Waits>,
    /// The resources held, and held by jobs not yet running, from scenario time 0 to the last
    /// pod's end (as `muster sim` reports them); absent in runs made before it was measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub occupancy: Option<Occupancy>,
    /// What gangs held before every member was bound, over the same span.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partial_gangs: Option<PartialGangs>,
    /// Each job's steps (pods made, bound, Ready, ended) to the millisecond; empty in runs made
    /// before it was measured.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub timeline: Vec<JobTimeline>,
    /// Per tenant of a scenario with tenants, the simulator's measures ([`fn@tenant_figures`]);
    /// empty without tenants.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tenants: Vec<TenantResult>,
}

impl RealResult {
    /// When the run's last pod ended, in scenario seconds to the millisecond (the makespan's
    /// Job timestamps have whole seconds); none without a timeline.
    pub fn last_pod_end_s(&self) -> Option<f64> {
        self.timeline.iter().filter_map(|t| t.last_end_s).reduce(f64::max)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Lag {
    pub mean: Option<f64>,
    pub max: Option<f64>,
}

/// Latencies of the modelled steps among the Jobs whose pods still exist (1 s timestamps).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Measured {
    pub job_to_last_pod_created_s: Option<f64>,
    pub last_pod_bound_to_all_ready_s: Option<f64>,
    pub peak_pod_creates_per_s: f64,
    pub peak_bindings_per_s: f64,
    pub pods_seen: usize,
}

/// Every 5 s of the run: active Jobs by how many of their pods are bound, and the Jobs' states.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Sample {
    pub whole: usize,
    pub partial: usize,
    pub none: usize,
    pub pending: usize,
    pub t: i64,
    pub complete: usize,
    pub failed: usize,
}

/// kube-scheduler's metrics at `t` seconds of the run: `"name{labels}": value`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Snapshot {
    pub t: f64,
    pub samples: BTreeMap<String, f64>,
}

/// kube-scheduler's metrics `run` keeps (counters and gauges; histograms as _sum and _count).
pub const SCHED_METRICS: [&str; 11] = [
    "scheduler_schedule_attempts_total",
    "scheduler_scheduling_attempt_duration_seconds_sum",
    "scheduler_scheduling_attempt_duration_seconds_count",
    "scheduler_queue_incoming_pods_total",
    "scheduler_pending_pods",
    "scheduler_unschedulable_pods",
    "scheduler_framework_extension_point_duration_seconds_sum",
    "scheduler_framework_extension_point_duration_seconds_count",
    "scheduler_event_handling_duration_seconds_count",
    "rest_client_requests_total",
    "process_cpu_seconds_total",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobState {
    Complete,
    Failed,
    Active,
}

/// A Job's state and end time from its Complete/Failed conditions.
pub fn job_end(j: &Job) -> (JobState, Option<f64>) {
    let st = j.status.as_ref();
    let conds = st.and_then(|s| s.conditions.as_deref()).unwrap_or_default();
    if let Some(c) = true_condition(conds, "Complete") {
        let end = st.and_then(|s| s.completion_time.as_ref()).map(secs).or_else(|| c.last_transition());
        return (JobState::Complete, end);
    }
    if let Some(c) = true_condition(conds, "Failed") {
        return (JobState::Failed, c.last_transition());
    }
    (JobState::Active, None)
}

fn all_ready_stamp(p: &Pod) -> Option<f64> {
    p.metadata.annotations.as_ref().and_then(|a| a.get(ALL_READY_AT)).and_then(|s| cluster::parse_time(s))
}

async fn list<K>(api: &Api<K>) -> Result<Vec<K>>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    Ok(api.list(&ListParams::default()).await.map_err(Error::kube("list"))?.items)
}

/// Where a run's Jobs are: its namespace, and each tenant's own when the scenario has tenants
/// (then the Jobs and pods are read from every namespace and kept if in one of these).
struct Scope {
    namespaces: BTreeSet<String>,
    everywhere: bool,
}

impl Scope {
    fn new(ns: &str, jobs: &[JobRecord]) -> Self {
        let tenants: BTreeSet<String> = jobs.iter().filter_map(|j| j.tenant.clone()).collect();
        let everywhere = !tenants.is_empty();
        let mut namespaces = tenants;
        namespaces.insert(ns.to_string());
        Scope { namespaces, everywhere }
    }

    fn api<K>(&self, client: &Client, ns: &str) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
    {
        if self.everywhere { Api::all(client.clone()) } else { Api::namespaced(client.clone(), ns) }
    }

    async fn list<K>(&self, api: &Api<K>) -> Result<Vec<K>>
    where
        K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    {
        let mut items = list(api).await?;
        items.retain(|o| o.meta().namespace.as_ref().is_some_and(|n| self.namespaces.contains(n)));
        Ok(items)
    }

    /// The objects of a custom resource in the run's namespaces.
    async fn list_dynamic(&self, client: &Client, ns: &str, ar: &ApiResource) -> Result<Vec<DynamicObject>> {
        let api = if self.everywhere {
            Api::all_with(client.clone(), ar)
        } else {
            Api::namespaced_with(client.clone(), ns, ar)
        };
        self.list(&api).await
    }
}

/// Volcano's Job (`batch.volcano.sh/v1alpha1`).
fn volcano_job_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("batch.volcano.sh", "v1alpha1", "Job"), "jobs")
}

/// Active Jobs by how many of their (non-terminal) pods are bound, and the pending pods.
pub fn gangs(pods: &[Pod]) -> (usize, usize, usize, usize) {
    let mut by: HashMap<Option<String>, (usize, usize)> = HashMap::new();
    for p in pods {
        let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
        if matches!(phase, Some("Succeeded" | "Failed")) || p.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let b = by.entry(job_name(p)).or_default();
        b.0 += 1;
        b.1 += usize::from(p.spec.as_ref().is_some_and(|s| s.node_name.is_some()));
    }
    let v: Vec<_> = by.into_values().collect();
    (
        v.iter().filter(|(n, b)| b == n).count(),
        v.iter().filter(|(n, b)| 0 < *b && b < n).count(),
        v.iter().filter(|(_, b)| *b == 0).count(),
        v.iter().map(|(n, b)| n - b).sum(),
    )
}

/// Creates `objects` in order in `ns` (cluster-scoped ones cluster-wide), stopping at the first
/// failure.
pub async fn create_objects(client: &Client, ns: &str, objects: &[Object]) -> std::result::Result<(), String> {
    for o in objects {
        let ar = o.api_resource();
        let api: Api<DynamicObject> = if o.namespaced {
            // A tenant's objects name their own namespace.
            let ns = o.value["metadata"]["namespace"].as_str().unwrap_or(ns);
            Api::namespaced_with(client.clone(), ns, &ar)
        } else {
            Api::all_with(client.clone(), &ar)
        };
        let obj: DynamicObject = serde_json::from_value(o.value.clone()).map_err(|e| format!("{}: {e}", o.name()))?;
        api.create(&PostParams::default(), &obj).await.map_err(|e| format!("{} {}: {e}", o.kind(), o.name()))?;
    }
    Ok(())
}

/// Creates the PriorityClasses, keeping any that exist with the same value; one of the same name
/// and another value is an error (the run would not be the scenario's).
async fn ensure_priority_classes(client: &Client, classes: &[Object]) -> Result<()> {
    let api: Api<PriorityClass> = Api::all(client.clone());
    for o in classes {
        let want: PriorityClass = serde_json::from_value(o.value.clone()).map_err(|e| Error::Input(e.to_string()))?;
        match api.get_opt(o.name()).await.map_err(Error::kube(format!("get PriorityClass {}", o.name())))? {
            Some(have) if have.value == want.value => {}
            Some(have) => {
                return Err(Error::Input(format!(
                    "PriorityClass {} exists with value {}, the scenario needs {}: delete it or run on a fresh cluster",
                    o.name(),
                    have.value.unwrap_or(0),
                    want.value.unwrap_or(0)
                )));
            }
            None => {
                api.create(&PostParams::default(), &want)
                    .await
                    .map_err(Error::kube(format!("create PriorityClass {}", o.name())))?;
            }
        }
    }
    Ok(())
}

/// Submits each Job of `jobs_file` at its time (from 8 creators) decorated for `peer`, its
/// companion objects just before it, waits until all are Complete or Failed (or `timeout` s), and
/// writes what the objects say to `out`. With $SCHEDULER_METRICS_URL kube-scheduler's metrics are
/// scraped once a second meanwhile. With `workload`, the scenario the jobs were drawn from, a
/// scenario with tenants gets its per-tenant figures too (the jobs must be its jobs).
pub async fn run(
    jobs_file: &Path,
    kubeconfig: &Path,
    ns: &str,
    out: &Path,
    timeout: f64,
    peer: &PeerOptions,
    workload: Option<&Workload>,
) -> Result<()> {
    let jobs: Vec<JobRecord> = read_json(jobs_file)?;
    if let Some(w) = workload {
        let drawn = w.jobs.iter().map(|j| j.name.as_str());
        if w.jobs.len() != jobs.len() || !drawn.eq(jobs.iter().map(|j| j.name.as_str())) {
            return Err(Error::Input(format!(
                "{}: its jobs are not the scenario's (another scenario or seed?); give the --scenario and --seed \
                 they were drawn with",
                jobs_file.display()
            )));
        }
    }
    let Some(last) = jobs.last() else { return Err(Error::Input(format!("{}: no jobs", jobs_file.display()))) };
    let (client, config) = cluster::client(kubeconfig).await?;
    // A job of several sets reaches Volcano as a Volcano Job, read as the Job it stands for.
    let volcano_jobs = peer.peer == Peer::Volcano && jobs.iter().any(|j| !j.sets.is_empty());
    let scope = Scope::new(ns, &jobs);
    let api: Api<Job> = scope.api(&client, ns);
    let pods: Api<Pod> = scope.api(&client, ns);
    ensure_priority_classes(&client, &priority_classes(&jobs)).await?;
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let pod_watch = cluster::watch(pods.clone(), ledger.clone(), Ledger::observe);
    let t0 = now() + 1.0; // scenario time 0
    let snapshots = Arc::new(Mutex::new(Vec::new()));
    let scraper = match std::env::var("SCHEDULER_METRICS_URL") {
        Ok(url) if !url.is_empty() => Some(tokio::spawn(scrape_every(config, url, t0, snapshots.clone()))),
        _ => None,
    };
    eprintln!("submitting {} Jobs over {:.1}s", jobs.len(), last.submit_ms as f64 / 1000.0);
    let creators = Arc::new(Semaphore::new(8));
    let lag = Arc::new(Mutex::new(Vec::new()));
    let errors = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = tokio::task::JoinSet::new();
    for job in &jobs {
        let at = t0 + job.submit_ms as f64 / 1000.0;
        // Hand each job over shortly before its time, so a slow create delays no other.
        cluster::sleep_until(at - 0.5).await;
        let (client, creators, lag, errors) = (client.clone(), creators.clone(), lag.clone(), errors.clone());
        let objects = job_objects(job, peer);
        let ns = ns.to_string();
        tasks.spawn(async move {
            cluster::sleep_until(at).await;
            let _permit = creators.acquire().await;
            let t = now();
            if let Err(e) = create_objects(&client, &ns, &objects).await {
                errors.lock().unwrap_or_else(|e| e.into_inner()).push(e);
            }
            lag.lock().unwrap_or_else(|e| e.into_inner()).push(t - at);
        });
    }
    while tasks.join_next().await.is_some() {}
    let errors = std::mem::take(&mut *errors.lock().unwrap_or_else(|e| e.into_inner()));
    if !errors.is_empty() {
        return Err(Error::Input(format!("creates failed: {}", errors[..errors.len().min(5)].join("; "))));
    }
    let limit = t0 + timeout;
    let mut series = Vec::new();
    let jobs_now = || async {
        let mut items = merged(scope.list(&api).await?);
        if volcano_jobs {
            items.extend(scope.list_dynamic(&client, ns, &volcano_job_resource()).await?.iter().map(from_volcano_job));
        }
        Ok::<_, Error>(items)
    };
    loop {
        let items = jobs_now().await?;
        let states: Vec<JobState> = items.iter().map(|j| job_end(j).0).collect();
        let count = |s: JobState| states.iter().filter(|x| **x == s).count();
        let active = count(JobState::Active);
        if active == 0 && items.len() == jobs.len() {
            break;
        }
        if now() > limit {
            eprintln!("time limit: {active} Jobs still active after {timeout}s");
            break;
        }
        let (whole, partial, none, pending) = gangs(&scope.list(&pods).await?);
        let g = Sample {
            whole,
            partial,
            none,
            pending,
            t: (now() - t0).round() as i64,
            complete: count(JobState::Complete),
            failed: count(JobState::Failed),
        };
        eprintln!(
            "  t={:4}s Jobs complete {} failed {} active {active}; active Jobs with all pods bound {}, partly \
             bound {}, none bound {}; pending pods {}",
            g.t, g.complete, g.failed, g.whole, g.partial, g.none, g.pending
        );
        series.push(g);
        cluster::sleep(5.0).await;
    }
    cluster::sleep(1.0).await;
    if let Some(s) = scraper {
        s.abort();
    }
    pod_watch.abort();
    let items = jobs_now().await?;
    let all_pods = scope.list(&pods).await?;
    let nodes = list(&Api::<Node>::all(client.clone())).await?;
    let lag = lag.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let mut result = summarize(&items, &all_pods, &jobs, t0, &lag);
    if jobs.iter().any(JobRecord::constrained) {
        result.topology = topology_spread(&jobs, &all_pods, &nodes);
    }
    let ledger = cluster::lock(&ledger);
    // Up to the last pod's end, as the simulator's run ends with its last event.
    let to = ledger.last_end().filter(|_| result.unfinished == 0).unwrap_or_else(now).max(t0);
    let (occupancy, partial_gangs) = ledger.usage(capacity(&nodes), &jobs, t0, to);
    (result.occupancy, result.partial_gangs) = (Some(occupancy), Some(partial_gangs));
    result.timeline = ledger.timelines(&jobs, t0);
    if let Some(w) = workload {
        result.tenants = tenant_figures(w, &jobs, &ledger, &items, capacity(&nodes), t0, to);
        if !result.tenants.is_empty() {
            eprint!("{}", tenant_figures::table(&result.tenants));
        }
    }
    result.series = series;
    result.scheduler_metrics = std::mem::take(&mut *snapshots.lock().unwrap_or_else(|e| e.into_inner()));
    write_json(out, &result, 2)
}

/// Completed, failed and makespan off the Job objects, the latencies of the modelled steps, and
/// the Jobs' waits by the class of their records in `jobs`.
pub fn summarize(items: &[Job], pods: &[Pod], jobs: &[JobRecord], t0: f64, lag: &[f64]) -> RealResult {
    let first = items.iter().map(|j| created(&j.metadata)).fold(f64::INFINITY, f64::min);
    let ends: Vec<(JobState, Option<f64>)> = items.iter().map(job_end).collect();
    let done: Vec<f64> = ends.iter().filter_map(|(_, e)| *e).collect();
    let mut by_job: HashMap<Option<String>, Vec<&Pod>> = HashMap::new();
    for p in pods {
        by_job.entry(job_name(p)).or_default().push(p);
    }
    let jobs_by_name: HashMap<&str, &Job> =
        items.iter().filter_map(|j| j.metadata.name.as_deref().map(|n| (n, j))).collect();
    let (mut create_lat, mut ready_lat, mut pod_created, mut pod_bound) = (vec![], vec![], vec![], vec![]);
    for (name, ps) in &by_job {
        let pc: Vec<f64> = ps.iter().map(|p| created(&p.metadata)).collect();
        pod_created.extend(&pc);
        let pb: Vec<f64> = ps.iter().filter_map(|p| bound_at(p)).collect();
        pod_bound.extend(&pb);
        let max = |xs: &[f64]| xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        if let Some(j) = name.as_deref().and_then(|n| jobs_by_name.get(n))
            && Some(ps.len() as i32) == j.spec.as_ref().and_then(|s| s.parallelism)
        {
            create_lat.push(max(&pc) - created(&j.metadata));
        }
        if let Some(stamp) = all_ready_stamp(ps[0])
            && pb.len() == ps.len()
        {
            ready_lat.push(stamp - max(&pb));
        }
    }
    let count = |s: JobState| ends.iter().filter(|(x, _)| *x == s).count();
    let last_end = done.iter().copied().reduce(f64::max).map(|e| e - first);
    RealResult {
        jobs: items.len(),
        completed: count(JobState::Complete),
        failed: count(JobState::Failed),
        unfinished: count(JobState::Active),
        makespan_s: last_end.filter(|_| count(JobState::Active) == 0),
        last_end_s: last_end,
        first_submit_offset_s: round(first - t0, 2),
        submit_lag_s: Lag { mean: mean(lag), max: lag.iter().copied().reduce(f64::max).map(|m| round(m, 3)) },
        measured: Measured {
            job_to_last_pod_created_s: mean(&create_lat),
            last_pod_bound_to_all_ready_s: mean(&ready_lat),
            peak_pod_creates_per_s: peak_rate(&pod_created, 5.0),
            peak_bindings_per_s: peak_rate(&pod_bound, 5.0),
            pods_seen: pods.len(),
        },
        series: vec![],
        scheduler_metrics: vec![],
        topology: None,
        waits: waits(items, pods, jobs),
        occupancy: None,
        partial_gangs: None,
        timeline: Vec::new(),
        tenants: Vec::new(),
    }
}

/// The calibration figures (`NAME.calibration.json`).
#[derive(Debug, Clone, Serialize)]
pub struct Calibration {
    pub pods: usize,
    pub all_created_s: f64,
    pub all_bound_s: f64,
    /// 1 s timestamps: spans count whole seconds, so +1 s keeps a rate from being overstated.
    pub pod_creates_per_s: f64,
    pub bindings_per_s: f64,
    pub last_bound_to_all_ready_stamp_s: Option<f64>,
    pub stamp_plus_run_to_job_complete_s: Option<f64>,
}

impl Calibration {
    /// The fields in the order they are written and printed.
    pub const FIELDS: [&str; 7] = [
        "pods",
        "all_created_s",
        "all_bound_s",
        "pod_creates_per_s",
        "bindings_per_s",
        "last_bound_to_all_ready_stamp_s",
        "stamp_plus_run_to_job_complete_s",
    ];
}

/// Rates of the modelled steps on a burst that fits the cluster at once: `jobs` Jobs of `pods`
/// pods (2 cpu / 2Gi, 5 s after all ready) created together.
pub async fn calibrate(kubeconfig: &Path, ns: &str, jobs: usize, pods: u32, out: &Path) -> Result<()> {
    let (client, _) = cluster::client(kubeconfig).await?;
    let api: Api<Job> = Api::namespaced(client.clone(), ns);
    let pod_api: Api<Pod> = Api::namespaced(client, ns);
    let creators = Arc::new(Semaphore::new(8));
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..jobs {
        let rec = JobRecord {
            name: format!("cal-{i}"),
            class: "cal".into(),
            pods,
            min_pods: None,
            requests: BTreeMap::from([("cpu".into(), "2".into()), ("memory".into(), "2Gi".into())]),
            run_ms: 5000,
            run_after: "all-ready".into(),
            deadline_s: None,
            node_selector: BTreeMap::new(),
            tolerations: vec![],
            submit_ms: 0,
            expected_run_ms: 5000,
            topology: None,
            priority: 0,
            tenant: None,
            sets: Vec::new(),
            gangs: Vec::new(),
        };
        let (api, creators) = (api.clone(), creators.clone());
        tasks.spawn(async move {
            let _permit = creators.acquire().await;
            api.create(&PostParams::default(), &manifest(&rec, &ManifestOptions::default())).await.map(|_| ())
        });
    }
    while let Some(r) = tasks.join_next().await {
        if let Ok(Err(e)) = r {
            return Err(Error::Kube { what: "calibration: create".into(), source: e });
        }
    }
    let limit = now() + 300.0;
    while now() < limit {
        if list(&api).await?.iter().all(|j| job_end(j).0 != JobState::Active) {
            break;
        }
        cluster::sleep(1.0).await;
    }
    let items = list(&api).await?;
    let ps = list(&pod_api).await?;
    let res = calibration(&items, &ps).ok_or_else(|| Error::Input("calibration: no pods were created".into()))?;
    write_json(out, &res, 2)?;
    let v = serde_json::to_value(&res).expect("plain data");
    let line: Vec<String> = Calibration::FIELDS.iter().map(|k| format!("{k} {}", py(&v[*k]))).collect();
    eprintln!("calibration (1 s timestamps): {}", line.join(", "));
    Ok(())
}

/// The calibration figures of a finished burst; none without pods.
pub fn calibration(items: &[Job], ps: &[Pod]) -> Option<Calibration> {
    let first = items.iter().map(|j| created(&j.metadata)).reduce(f64::min)?;
    let created_at: Vec<f64> = ps.iter().map(|p| created(&p.metadata)).collect();
    let bound: Vec<f64> = ps.iter().filter_map(bound_at).collect();
    let max_created = created_at.iter().copied().reduce(f64::max)?;
    let (min_b, max_b) = (bound.iter().copied().reduce(f64::min)?, bound.iter().copied().reduce(f64::max)?);
    let mut by: HashMap<Option<String>, Vec<&Pod>> = HashMap::new();
    for p in ps {
        by.entry(job_name(p)).or_default().push(p);
    }
    let (mut stamp_lag, mut done_lag) = (vec![], vec![]);
    for j in items {
        let mine = by.get(&j.metadata.name).map(Vec::as_slice).unwrap_or_default();
        let stamp = mine.first().and_then(|p| all_ready_stamp(p));
        let pb: Vec<f64> = mine.iter().filter_map(|p| bound_at(p)).collect();
        if let (Some(stamp), Some(last)) = (stamp, pb.iter().copied().reduce(f64::max)) {
            stamp_lag.push(stamp - last);
            if let Some(end) = job_end(j).1 {
                done_lag.push(end - stamp - 5.0);
            }
        }
    }
    Some(Calibration {
        pods: ps.len(),
        all_created_s: max_created - first,
        all_bound_s: max_b - first,
        pod_creates_per_s: round(ps.len() as f64 / (max_created - first + 1.0), 1),
        bindings_per_s: round(bound.len() as f64 / (max_b - min_b + 1.0), 1),
        last_bound_to_all_ready_stamp_s: mean(&stamp_lag),
        stamp_plus_run_to_job_complete_s: mean(&done_lag),
    })
}

/// Scrapes `url` once a second from `t0` on with the kubeconfig's certificates, into `into`.
async fn scrape_every(config: Config, url: String, t0: f64, into: Arc<Mutex<Vec<Snapshot>>>) {
    let client = match scrape_client(config, &url) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("scheduler metrics: {e}");
            return;
        }
    };
    loop {
        match tokio::time::timeout(std::time::Duration::from_secs(10), scrape(&client, &url)).await {
            Ok(Ok(samples)) => {
                into.lock().unwrap_or_else(|e| e.into_inner()).push(Snapshot { t: round(now() - t0, 2), samples })
            }
            Ok(Err(e)) => eprintln!("scheduler metrics: {e}"),
            Err(_) => eprintln!("scheduler metrics: timed out"),
        }
        cluster::sleep(1.0).await;
    }
}

fn scrape_client(mut config: Config, url: &str) -> std::result::Result<Client, String> {
    let uri: http::Uri = url.parse().map_err(|e| format!("{url}: {e}"))?;
    let base = format!("{}://{}", uri.scheme_str().unwrap_or("https"), uri.authority().map_or("", |a| a.as_str()));
    config.cluster_url = base.parse().map_err(|e| format!("{url}: {e}"))?;
    Client::try_from(config).map_err(|e| e.to_string())
}

async fn scrape(client: &Client, url: &str) -> std::result::Result<BTreeMap<String, f64>, String> {
    let uri: http::Uri = url.parse().map_err(|e| format!("{url}: {e}"))?;
    let path = uri.path_and_query().map_or("/metrics", |p| p.as_str());
    let req = http::Request::get(path).body(Vec::new()).map_err(|e| e.to_string())?;
    let text = client.request_text(req).await.map_err(|e| e.to_string())?;
    Ok(parse_metrics(&text))
}

/// The `SCHED_METRICS` samples of a Prometheus text page.
pub fn parse_metrics(text: &str) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for line in text.lines().filter(|l| !l.is_empty() && !l.starts_with('#')) {
        let Some((key, value)) = line.rsplit_once(' ') else { continue };
        let name = key.split('{').next().unwrap_or(key);
        if SCHED_METRICS.contains(&name)
            && let Some(v) = parse_float(value)
        {
            out.insert(key.to_string(), v);
        }
    }
    out
}

fn parse_float(s: &str) -> Option<f64> {
    match s {
        "+Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        _ => s.parse().ok(),
    }
}

/// `(name, {label: value})` of a sample key such as `name{a="x",b="y"}`.
pub fn labels(key: &str) -> (&str, BTreeMap<&str, &str>) {
    let (name, mut rest) = key.split_once('{').unwrap_or((key, ""));
    let mut out = BTreeMap::new();
    while let Some(eq) = rest.find("=\"") {
        let label = rest[..eq].rsplit(|c: char| !(c.is_alphanumeric() || c == '_')).next().unwrap_or("");
        let after = &rest[eq + 2..];
        let Some(end) = after.find('"') else { break };
        out.insert(label, &after[..end]);
        rest = &after[end + 1..];
    }
    (name, out)
}

/// The sum of the samples of `name` grouped by the values of the labels `by`.
pub fn metric_sums(samples: &BTreeMap<String, f64>, name: &str, by: &[&str]) -> BTreeMap<Vec<String>, f64> {
    let mut out = BTreeMap::new();
    for (key, v) in samples {
        let (n, ls) = labels(key);
        if n == name {
            let k = by.iter().map(|b| ls.get(b).copied().unwrap_or("").to_string()).collect();
            *out.entry(k).or_insert(0.0) += v;
        }
    }
    out
}

/// The real run against `muster sim`'s default model; false when completed jobs or makespan
/// differ by more than `tol`.
pub fn compare(real_file: &Path, sim_file: &Path, jobs_file: &Path, tol: f64) -> Result<bool> {
    let real: Value = read_json(real_file)?;
    let report: Value = read_json(sim_file)?;
    let jobs: Vec<JobRecord> = read_json(jobs_file)?;
    let run = report["runs"]
        .as_array()
        .and_then(|rs| rs.iter().find(|r| r["scheduler"] == "default"))
        .ok_or_else(|| Error::Input(format!("{}: no run of the default scheduler", sim_file.display())))?;
    let first = jobs.first().map_or(0.0, |j| j.submit_ms as f64 / 1000.0);
    // The simulator's makespan runs from time 0; the real one from the first submit.
    let sim_makespan = run["makespan_s"].as_f64().map_or(Value::Null, |m| serde_json::json!(m - first));
    let sim = [run["completed"].clone(), run["failed"].clone(), run["unfinished"].clone(), sim_makespan];
    let pct = (tol * 100.0).round() as i64;
    let mut ok = true;
    println!("{:<12} {:>10} {:>10} {:>8}", "metric", "real", "sim", "diff");
    let keys = [("completed", true), ("failed", false), ("unfinished", false), ("makespan_s", true)];
    for ((key, checked), s) in keys.into_iter().zip(&sim) {
        let r = &real[key];
        let d = rel(r.as_f64(), s.as_f64());
        let bad = checked && d.is_some_and(|d| d > tol);
        ok &= !bad;
        let fmt = |v: &Value| {
            if v.is_null() {
                "never".to_string()
            } else if v.is_f64() {
                format!("{:.1}", v.as_f64().unwrap_or(0.0))
            } else {
                v.to_string()
            }
        };
        let ds = match d {
            None => "-".to_string(),
            Some(d) if d.is_infinite() => "inf".to_string(),
            Some(d) => format!("{:.1}%", d * 100.0),
        };
        let over = if bad { format!("  <- over {pct}%") } else { String::new() };
        println!("{key:<12} {:>10} {:>10} {ds:>8}{over}", fmt(r), fmt(s));
    }
    // How the resources were used: read beside each other, not checked.
    for key in ["mean_util_gpu", "mean_util_cpu", "clog_share"] {
        let (r, s) = (real.get("occupancy").and_then(|o| o.get(key)).and_then(Value::as_f64), run[key].as_f64());
        if r.is_some() || s.is_some() {
            let show = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{:.1}%", v * 100.0));
            println!("{key:<12} {:>10} {:>10}", show(r), show(s));
        }
    }
    let m = &real["measured"];
    println!(
        "real: Job -> last pod created {}s, last pod bound -> all-ready stamp {}s (means over the Jobs whose pods \
         remain; 1 s timestamps); submit lag mean {}s, max {}s",
        py(&m["job_to_last_pod_created_s"]),
        py(&m["last_pod_bound_to_all_ready_s"]),
        py(&real["submit_lag_s"]["mean"]),
        py(&real["submit_lag_s"]["max"])
    );
    println!("agreement within {pct}% on completed jobs and makespan: {}", if ok { "yes" } else { "NO" });
    Ok(ok)
}

/// The relative difference of `s` from `r`: none when both are absent, infinite when one is.
fn rel(r: Option<f64>, s: Option<f64>) -> Option<f64> {
    match (r, s) {
        (None, None) => None,
        (Some(r), Some(s)) if r == s => Some(0.0),
        (Some(r), Some(s)) if r != 0.0 => Some((s - r).abs() / r.abs()),
        _ => Some(f64::INFINITY),
    }
}

/// kube-scheduler's counters over the run, from the snapshots `run` scraped; false without any.
pub fn metrics_report(real_file: &Path, step: f64) -> Result<bool> {
    let real: RealResult = read_json(real_file)?;
    let snaps = &real.scheduler_metrics;
    let (Some(first_snap), Some(last_snap)) = (snaps.first(), snaps.last()) else {
        println!("no scheduler metrics in this run (SCHEDULER_METRICS_URL was not set)");
        return Ok(false);
    };
    let (first, last) = (&first_snap.samples, &last_snap.samples);
    let delta = |name: &str, by: &[&str]| -> BTreeMap<Vec<String>, f64> {
        let (a, b) = (metric_sums(first, name, by), metric_sums(last, name, by));
        b.iter().map(|(k, v)| (k.clone(), v - a.get(k).copied().unwrap_or(0.0))).filter(|(_, d)| *d != 0.0).collect()
    };
    let span = last_snap.t - first_snap.t;
    let cpu: f64 = delta("process_cpu_seconds_total", &[]).values().sum();
    println!("{} snapshots over {span:.0}s; kube-scheduler cpu {cpu:.1}s", snaps.len());
    let att = delta("scheduler_schedule_attempts_total", &["result"]);
    let dur = delta("scheduler_scheduling_attempt_duration_seconds_sum", &["result"]);
    let cnt = delta("scheduler_scheduling_attempt_duration_seconds_count", &["result"]);
    for (res, n) in &att {
        let mean = match cnt.get(res) {
            Some(c) => dur.get(res).copied().unwrap_or(0.0) / c * 1e3,
            None => f64::NAN,
        };
        println!("  attempts {}: {n:.0} ({:.1}/s), mean attempt {mean:.2} ms", res[0], n / span);
    }
    let ext_s = delta("scheduler_framework_extension_point_duration_seconds_sum", &["extension_point", "status"]);
    let ext_n = delta("scheduler_framework_extension_point_duration_seconds_count", &["extension_point", "status"]);
    for (k, n) in &ext_n {
        let each = ext_s.get(k).copied().unwrap_or(0.0) / n * 1e3;
        println!("  extension point {} ({}): {n:.0} x {each:.2} ms", k[0], k[1]);
    }
    for (k, n) in delta("scheduler_queue_incoming_pods_total", &["event", "queue"]) {
        println!("  incoming {} -> {}: {n:.0}", k[0], k[1]);
    }
    for (k, n) in delta("rest_client_requests_total", &["code", "method"]) {
        println!("  API {} {}: {n:.0}", k[1], k[0]);
    }
    println!(
        "{:>5} {:>8} {:>9} {:>7} {:>8} {:>8} {:>6}",
        "t", "sched/s", "unsched/s", "active", "backoff", "unsched", "gated"
    );
    let (mut prev, mut prev_t) = (first, first_snap.t);
    for (i, s) in snaps.iter().enumerate().skip(1) {
        if s.t - prev_t < step && i != snaps.len() - 1 {
            continue;
        }
        let dt = s.t - prev_t;
        let (a, b) = (
            metric_sums(prev, "scheduler_schedule_attempts_total", &["result"]),
            metric_sums(&s.samples, "scheduler_schedule_attempts_total", &["result"]),
        );
        let r = |res: &str| {
            let k = vec![res.to_string()];
            b.get(&k).map_or(0.0, |v| (v - a.get(&k).copied().unwrap_or(0.0)) / dt)
        };
        let q = metric_sums(&s.samples, "scheduler_pending_pods", &["queue"]);
        let q = |name: &str| q.get(&vec![name.to_string()]).copied().unwrap_or(0.0);
        println!(
            "{:5.0} {:8.1} {:9.1} {:7.0} {:8.0} {:8.0} {:6.0}",
            s.t,
            r("scheduled"),
            r("unschedulable"),
            q("active"),
            q("backoff"),
            q("unschedulable"),
            q("gated")
        );
        (prev, prev_t) = (&s.samples, s.t);
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::WaitStats;
    use crate::workload::test_record as record;

    #[test]
    fn metrics_pages_and_labels() {
        let page = "# HELP x\nscheduler_schedule_attempts_total{profile=\"default-scheduler\",result=\"scheduled\"} 12\n\
                    scheduler_schedule_attempts_total{profile=\"default-scheduler\",result=\"unschedulable\"} 3\n\
                    other_metric 5\nprocess_cpu_seconds_total 1.5\n";
        let s = parse_metrics(page);
        assert_eq!(s.len(), 3);
        let (name, ls) =
            labels("scheduler_schedule_attempts_total{profile=\"default-scheduler\",result=\"scheduled\"}");
        assert_eq!(name, "scheduler_schedule_attempts_total");
        assert_eq!(ls["result"], "scheduled");
        assert_eq!(ls["profile"], "default-scheduler");
        let by = metric_sums(&s, "scheduler_schedule_attempts_total", &["result"]);
        assert_eq!(by[&vec!["scheduled".to_string()]], 12.0);
        assert_eq!(metric_sums(&s, "process_cpu_seconds_total", &[])[&vec![]], 1.5);
    }

    #[test]
    fn relative_differences() {
        assert_eq!(rel(None, None), None);
        assert_eq!(rel(Some(10.0), Some(10.0)), Some(0.0));
        assert_eq!(rel(Some(10.0), Some(12.0)), Some(0.2));
        assert_eq!(rel(Some(0.0), Some(1.0)), Some(f64::INFINITY));
        assert_eq!(rel(None, Some(1.0)), Some(f64::INFINITY));
    }

    #[test]
    fn a_real_run_is_summarized_from_its_objects() {
        let job: Job = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "a-0", "creationTimestamp": "2026-01-01T00:00:10Z"},
            "spec": {"parallelism": 2, "template": {}},
            "status": {"conditions": [{"type": "Complete", "status": "True", "lastTransitionTime": "2026-01-01T00:01:00Z"}],
                       "completionTime": "2026-01-01T00:00:50Z"}
        }))
        .unwrap();
        let pod = |n: &str, bound: &str| -> Pod {
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": n, "creationTimestamp": "2026-01-01T00:00:12Z",
                             "labels": {"batch.kubernetes.io/job-name": "a-0"},
                             "annotations": {"kwok.muster.dev/all-ready-at": "2026-01-01T00:00:20Z"}},
                "spec": {"containers": [], "nodeName": "n1"},
                "status": {"phase": "Succeeded", "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": bound}]}
            }))
            .unwrap()
        };
        let pods = [pod("a-0-x", "2026-01-01T00:00:13Z"), pod("a-0-y", "2026-01-01T00:00:15Z")];
        let t0 = cluster::parse_time("2026-01-01T00:00:09Z").unwrap();
        let r = summarize(std::slice::from_ref(&job), &pods, &[record("a-0", "a")], t0, &[0.1, 0.3]);
        assert_eq!((r.jobs, r.completed, r.failed, r.unfinished), (1, 1, 0, 0));
        assert_eq!(r.makespan_s, Some(40.0));
        assert_eq!(r.first_submit_offset_s, 1.0);
        assert_eq!(r.submit_lag_s.mean, Some(0.2));
        assert_eq!(r.measured.job_to_last_pod_created_s, Some(2.0));
        assert_eq!(r.measured.last_pod_bound_to_all_ready_s, Some(5.0));
        // Created 00:10, first pod bound 00:13, complete 00:50: wait 3 s, run 37 s.
        let one = WaitStats {
            count: 1,
            unbound: 0,
            mean_s: Some(3.0),
            p95_s: Some(3.0),
            max_s: Some(3.0),
            bounded_slowdown: Some(1.081),
        };
        assert_eq!(r.waits, Some(Waits { overall: one.clone(), classes: BTreeMap::from([("a".into(), one)]) }));
        assert_eq!(summarize(&[], &pods, &[], t0, &[]).waits, None);
        assert_eq!(gangs(&pods), (0, 0, 0, 0));
        let c = calibration(std::slice::from_ref(&job), &pods).unwrap();
        assert_eq!((c.pods, c.all_created_s, c.all_bound_s), (2, 2.0, 5.0));
        assert_eq!(c.last_bound_to_all_ready_stamp_s, Some(5.0));
        assert_eq!(c.stamp_plus_run_to_job_complete_s, Some(25.0));
    }
}
