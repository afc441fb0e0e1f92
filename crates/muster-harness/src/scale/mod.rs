//! Seed 002's scale experiment (`scale`) and the bind-rate bursts (`bind`) on a real control
//! plane: Jobs or pods created from parallel submitters, every pod and Job followed through
//! watches, the figures printed as one JSON line (also appended to `--out`).
//!
//! Times are taken when the watch delivers an object (sub-second, with the watch's latency of a
//! few ms), not from the objects' own timestamps, which have one-second resolution. Node use is
//! accounted from the same ordered watch stream: a pod holds its requests on its node from the
//! event that shows it bound until the one that shows it Succeeded, Failed or deleted, which is
//! the order the scheduler itself sees them in.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Debug;
use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{Container, Node, Pod, PodSpec, PodTemplateSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::{ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Api, Client, Resource};
use muster_k8s::labels;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::cluster::{self, JOB_NAME_LABEL, amount, lock, now, retry, watch};
use crate::stats::{Quantiles, py_float, quantiles, round};
use crate::{Error, Result};

mod figures;

pub use figures::*;

/// What `scale` and `bind` share.
#[derive(Debug, Clone, clap::Args)]
pub struct Common {
    /// Default: $KUBECONFIG.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    #[arg(long)]
    pub namespace: String,
    #[arg(long, default_value = "default", value_parser = ["default", "muster"])]
    pub scheduler: String,
    /// muster.dev/queue of the objects with --scheduler muster.
    #[arg(long, default_value = "default")]
    pub queue: String,
    #[arg(long, default_value_t = 5)]
    pub submitters: usize,
    #[arg(long, default_value = "2")]
    pub cpu: String,
    #[arg(long, default_value = "2Gi")]
    pub memory: String,
    /// key=value: the nodes the pods may use (and whose capacity is reported).
    #[arg(long, default_value = "muster.dev/pool=worker")]
    pub node_selector: String,
    /// Also append the JSON line to this file.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

#[derive(Debug, Clone, clap::Args)]
pub struct ScaleArgs {
    #[command(flatten)]
    pub common: Common,
    #[arg(long, default_value_t = 200)]
    pub jobs: usize,
    #[arg(long, default_value_t = 10)]
    pub pods_per_job: u32,
    #[arg(long, default_value_t = 18, allow_negative_numbers = true)]
    pub run_seconds: i64,
    #[arg(long, default_value_t = 9, allow_negative_numbers = true)]
    pub jitter_seconds: i64,
    #[arg(long, default_value = "all-ready", value_parser = ["all-ready", "start"])]
    pub run_after: String,
    #[arg(long, default_value_t = 90, allow_negative_numbers = true)]
    pub deadline_seconds: i64,
    /// Give up after this many seconds (0: from the sizes).
    #[arg(long, default_value_t = 0.0)]
    pub timeout: f64,
    #[arg(long, default_value_t = 10.0)]
    pub progress_seconds: f64,
}

#[derive(Debug, Clone, clap::Args)]
pub struct BindArgs {
    #[command(flatten)]
    pub common: Common,
    /// pods: N bare pods (one plain-pod group with muster); jobs: N one-pod Jobs; gang: one Job of N.
    #[arg(long, default_value = "pods", value_parser = ["jobs", "gang", "pods"])]
    pub shape: String,
    #[arg(long, default_value_t = 1000)]
    pub count: usize,
    #[arg(long, default_value_t = 300.0)]
    pub timeout: f64,
    /// uncordon: create the burst on cordoned nodes, time from uncordoning them; create: time from
    /// the first create request.
    #[arg(long, default_value = "uncordon", value_parser = ["uncordon", "create"])]
    pub release: String,
    #[arg(long, default_value_t = 3.0)]
    pub settle_seconds: f64,
}

impl Common {
    fn check(&self) -> Result<PathBuf> {
        if self.submitters < 1 {
            return Err(Error::Input("--submitters must be 1 or more".into()));
        }
        self.kubeconfig
            .clone()
            .or_else(|| std::env::var_os("KUBECONFIG").filter(|v| !v.is_empty()).map(PathBuf::from))
            .ok_or_else(|| Error::Input("no kubeconfig (set KUBECONFIG or pass --kubeconfig)".into()))
    }

    fn pod_cpu(&self) -> u64 {
        amount("cpu", Some(&Quantity(self.cpu.clone())), 0)
    }

    fn pod_mem(&self) -> u64 {
        amount("memory", Some(&Quantity(self.memory.clone())), 0)
    }
}

impl ScaleArgs {
    /// Every job either completes or hits its deadline; allow for the submissions and a control
    /// plane that binds slowly.
    pub fn default_timeout(&self) -> f64 {
        let cores = self.common.pod_cpu() as f64 / 1000.0;
        let pods = self.jobs as f64 * f64::from(self.pods_per_job);
        let work = pods * cores * (self.run_seconds + self.jitter_seconds) as f64;
        self.deadline_seconds as f64 * 4.0 + pods / 20.0 + 3.0 * work / 10_000.0 + 120.0
    }
}

/// cpu (millicores), memory (bytes) and pods of a node or in use on it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Amounts {
    pub cpu: i64,
    pub mem: i64,
    pub pods: i64,
}

/// One pod's life as the watch showed it (wall-clock seconds).
#[derive(Debug, Clone, Default)]
pub struct PodLife {
    pub seen: f64,
    pub bound: Option<f64>,
    pub node: Option<String>,
    pub ended: Option<f64>,
    pub cpu: i64,
    pub mem: i64,
    pub job: Option<String>,
    pub phase: Option<String>,
    pub all_ready: Option<f64>,
    pub running: Option<f64>,
}

/// One Job's life as the watch showed it.
#[derive(Debug, Clone, Default)]
pub struct JobLife {
    pub seen: f64,
    pub end: Option<f64>,
    pub outcome: Option<String>,
    pub reason: Option<String>,
    /// status.startTime: where activeDeadlineSeconds counts from.
    pub start: Option<f64>,
}

/// Every pod's and Job's life as the watches show it, and each node's use over time.
#[derive(Debug, Default)]
pub struct Tracker {
    pub pods: HashMap<String, PodLife>,
    pub jobs: HashMap<String, JobLife>,
    pub alloc: BTreeMap<String, Amounts>,
    pub used: HashMap<String, Amounts>,
    pub peak: HashMap<String, Amounts>,
    /// (time, node, use) whenever a node went over its allocatable.
    pub over: Vec<(f64, String, Amounts)>,
    pub running: i64,
    pub peak_running: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    pub pods: usize,
    pub bound: usize,
    pub holding: i64,
    pub running: usize,
    pub complete: usize,
    pub failed: usize,
}

/// A pod's cpu (millicores) and memory (bytes) as the kubelet counts them (muster_k8s::pod::requests;
/// a pod with an amount muster cannot count counts as nothing: no scheduler places it).
pub fn pod_requests(pod: &Pod) -> (i64, i64) {
    let r = pod.spec.as_ref().and_then(|s| muster_k8s::pod::requests(s).ok()).unwrap_or_default();
    let get = |k: &str| r.get(k).copied().map_or(0, |v| i64::try_from(v).unwrap_or(i64::MAX));
    (get("cpu"), get("memory"))
}

impl Tracker {
    pub fn new(alloc: BTreeMap<String, Amounts>) -> Self {
        Tracker { alloc, ..Default::default() }
    }

    pub fn on_pod(&mut self, deleted: bool, pod: &Pod, now: f64) {
        let meta = &pod.metadata;
        let uid = meta.uid.clone().unwrap_or_default();
        let p = self.pods.entry(uid).or_insert_with(|| {
            let labels = meta.labels.as_ref();
            let (cpu, mem) = pod_requests(pod);
            PodLife {
                seen: now,
                cpu,
                mem,
                job: labels.and_then(|l| l.get(JOB_NAME_LABEL).or_else(|| l.get("job-name"))).cloned(),
                ..Default::default()
            }
        });
        if p.ended.is_some() {
            return;
        }
        if let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.as_ref())
            && p.bound.is_none()
        {
            p.bound = Some(now);
            p.node = Some(node.clone());
            let u = self.used.entry(node.clone()).or_default();
            u.cpu += p.cpu;
            u.mem += p.mem;
            u.pods += 1;
            self.running += 1;
            self.peak_running = self.peak_running.max(self.running);
            let pk = self.peak.entry(node.clone()).or_default();
            pk.cpu = pk.cpu.max(u.cpu);
            pk.mem = pk.mem.max(u.mem);
            pk.pods = pk.pods.max(u.pods);
            if let Some(a) = self.alloc.get(node)
                && (u.cpu > a.cpu || u.mem > a.mem || u.pods > a.pods)
            {
                self.over.push((now, node.clone(), *u));
            }
        }
        if p.all_ready.is_none()
            && let Some(stamp) = meta.annotations.as_ref().and_then(|a| a.get(cluster::ALL_READY_AT))
        {
            p.all_ready = cluster::parse_time(stamp);
        }
        p.phase = pod.status.as_ref().and_then(|s| s.phase.clone());
        if p.phase.as_deref() == Some("Running") && p.running.is_none() {
            p.running = Some(now);
        }
        if deleted || matches!(p.phase.as_deref(), Some("Succeeded" | "Failed")) {
            p.ended = Some(now);
            if let Some(node) = &p.node {
                let u = self.used.entry(node.clone()).or_default();
                u.cpu -= p.cpu;
                u.mem -= p.mem;
                u.pods -= 1;
                self.running -= 1;
            }
        }
    }

    pub fn on_job(&mut self, deleted: bool, job: &Job, now: f64) {
        let name = job.metadata.name.clone().unwrap_or_default();
        let j = self.jobs.entry(name).or_insert_with(|| JobLife { seen: now, ..Default::default() });
        if j.end.is_some() {
            return;
        }
        let status = job.status.as_ref();
        if let Some(t) = status.and_then(|s| s.start_time.as_ref()) {
            j.start = Some(cluster::secs(t));
        }
        for c in status.and_then(|s| s.conditions.as_ref()).into_iter().flatten() {
            if c.status == "True" && (c.type_ == "Complete" || c.type_ == "Failed") {
                (j.end, j.outcome, j.reason) = (Some(now), Some(c.type_.clone()), c.reason.clone());
            }
        }
        if deleted && j.end.is_none() {
            (j.end, j.outcome, j.reason) = (Some(now), Some("Failed".into()), Some("Deleted".into()));
        }
    }

    pub fn counts(&self) -> Counts {
        let outcome = |o: &str| self.jobs.values().filter(|j| j.outcome.as_deref() == Some(o)).count();
        Counts {
            pods: self.pods.len(),
            bound: self.pods.values().filter(|p| p.bound.is_some()).count(),
            holding: self.running,
            running: self.pods.values().filter(|p| p.phase.as_deref() == Some("Running") && p.ended.is_none()).count(),
            complete: outcome("Complete"),
            failed: outcome("Failed"),
        }
    }
}

type Shared = Arc<Mutex<Tracker>>;

/// Allocatable cpu, memory and pods (default 110) of the nodes matching `selector`.
pub async fn node_allocatable(client: &Client, selector: &str) -> Result<BTreeMap<String, Amounts>> {
    let nodes: Api<Node> = Api::all(client.clone());
    let lp = if selector.is_empty() { ListParams::default() } else { ListParams::default().labels(selector) };
    let list = retry("list nodes", || nodes.list(&lp)).await?;
    Ok(list
        .items
        .iter()
        .map(|n| {
            let a = n.status.as_ref().and_then(|s| s.allocatable.as_ref());
            let get = |k: &str, d: u64| amount(k, a.and_then(|a| a.get(k)), d) as i64;
            (
                n.metadata.name.clone().unwrap_or_default(),
                Amounts { cpu: get("cpu", 0), mem: get("memory", 0), pods: get("pods", 110) },
            )
        })
        .collect())
}

fn pod_template(c: &Common, run: Option<(i64, &str, i64)>, labels: BTreeMap<String, String>) -> PodTemplateSpec {
    let mut ann = BTreeMap::from([("e2e.muster.dev/test".to_string(), "true".to_string())]);
    if let Some((run_seconds, after, jitter)) = run {
        ann.insert("kwok.muster.dev/run-seconds".into(), run_seconds.to_string());
        ann.insert("kwok.muster.dev/run-after".into(), after.into());
        if jitter != 0 {
            ann.insert("kwok.muster.dev/run-jitter-seconds".into(), jitter.to_string());
        }
    }
    let res = BTreeMap::from([
        ("cpu".to_string(), Quantity(c.cpu.clone())),
        ("memory".to_string(), Quantity(c.memory.clone())),
    ]);
    let node_selector = (!c.node_selector.is_empty()).then(|| {
        let (k, v) = c.node_selector.split_once('=').unwrap_or((&c.node_selector, ""));
        BTreeMap::from([(k.to_string(), v.to_string())])
    });
    PodTemplateSpec {
        metadata: Some(ObjectMeta { labels: Some(labels), annotations: Some(ann), ..Default::default() }),
        spec: Some(PodSpec {
            restart_policy: Some("Never".into()),
            termination_grace_period_seconds: Some(0),
            containers: vec![Container {
                name: "job".into(),
                image: Some("kwok-fake".into()),
                resources: Some(ResourceRequirements {
                    requests: Some(res.clone()),
                    limits: Some(res),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            node_selector,
            ..Default::default()
        }),
    }
}

const PART_OF: (&str, &str) = ("app.kubernetes.io/part-of", "muster-scale");

fn part_of() -> BTreeMap<String, String> {
    BTreeMap::from([(PART_OF.0.to_string(), PART_OF.1.to_string())])
}

/// A Job of `pods` pods; with muster it carries the queue label.
pub fn job_manifest(c: &Common, name: &str, pods: u32, run: Option<(i64, &str, i64)>, deadline: i64) -> Job {
    let mut labels = part_of();
    if c.scheduler == "muster" {
        labels.insert(labels::QUEUE.into(), c.queue.clone());
    }
    Job {
        metadata: ObjectMeta { name: Some(name.into()), labels: Some(labels), ..Default::default() },
        spec: Some(JobSpec {
            parallelism: Some(pods as i32),
            completions: Some(pods as i32),
            backoff_limit: Some(0),
            active_deadline_seconds: (deadline != 0).then_some(deadline),
            template: pod_template(c, run, part_of()),
            ..Default::default()
        }),
        status: None,
    }
}

/// A bare pod; with muster one of a plain-pod gang of `group_size` (muster's label contract for
/// pods that no Job owns).
pub fn bare_pod(c: &Common, name: &str, group_size: usize) -> Pod {
    let mut labels = part_of();
    if c.scheduler == "muster" {
        labels.insert(labels::QUEUE.into(), c.queue.clone());
        labels.insert(labels::GROUP.into(), "burst".into());
        labels.insert(labels::GROUP_SIZE.into(), group_size.to_string());
    }
    let t = pod_template(c, None, labels);
    let mut metadata = t.metadata.unwrap_or_default();
    metadata.name = Some(name.into());
    Pod { metadata, spec: t.spec, status: None }
}

/// Creates the objects from `submitters` tasks (object i from task i mod S, each serial); returns
/// the times of the first and last create request and of each object's (by name).
async fn submit_all<K>(api: &Api<K>, objs: Vec<K>, submitters: usize) -> (f64, f64, HashMap<String, f64>)
where
    K: Resource + Clone + Serialize + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let objs = Arc::new(objs);
    let sent = Arc::new(Mutex::new(HashMap::new()));
    let errors = Arc::new(Mutex::new(Vec::new()));
    let t0 = now();
    let mut tasks = tokio::task::JoinSet::new();
    for k in 0..submitters {
        let (api, objs, sent, errors) = (api.clone(), objs.clone(), sent.clone(), errors.clone());
        tasks.spawn(async move {
            let pp = PostParams::default();
            for m in objs.iter().skip(k).step_by(submitters) {
                let t = now();
                let name = m.meta().name.clone().unwrap_or_default();
                match retry(&format!("create {name}"), || api.create(&pp, m)).await {
                    Ok(_) => drop(sent.lock().unwrap_or_else(|e| e.into_inner()).insert(name, t)),
                    Err(e) => errors.lock().unwrap_or_else(|e| e.into_inner()).push(e.to_string()),
                }
            }
        });
    }
    while tasks.join_next().await.is_some() {}
    let errors = errors.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(first) = errors.first() {
        eprintln!("scale: {} create requests failed; first: {first}", errors.len());
    }
    let sent = std::mem::take(&mut *sent.lock().unwrap_or_else(|e| e.into_inner()));
    (t0, now(), sent)
}

/// Cordons (true) or uncordons (false) `nodes` from `threads` tasks at once.
async fn set_unschedulable(client: &Client, nodes: Vec<String>, value: bool, threads: usize) -> Result<()> {
    let api: Api<Node> = Api::all(client.clone());
    let nodes = Arc::new(nodes);
    let patch = serde_json::json!({"spec": {"unschedulable": if value { serde_json::json!(true) } else { serde_json::Value::Null }}});
    let mut tasks = tokio::task::JoinSet::new();
    for k in 0..threads.max(1) {
        let (api, nodes, patch) = (api.clone(), nodes.clone(), patch.clone());
        tasks.spawn(async move {
            let (pp, patch) = (PatchParams::default(), Patch::Merge(&patch));
            for name in nodes.iter().skip(k).step_by(threads.max(1)) {
                retry(&format!("patch node {name}"), || api.patch(name, &pp, &patch)).await?;
            }
            Ok::<_, Error>(())
        });
    }
    let mut first = Ok(());
    while let Some(r) = tasks.join_next().await {
        if let Ok(Err(e)) = r
            && first.is_ok()
        {
            first = Err(e);
        }
    }
    first
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScaleResult {
    pub experiment: String,
    pub scheduler: String,
    pub server: Option<String>,
    pub jobs: usize,
    pub pods_per_job: u32,
    pub pod_cpu: String,
    pub pod_memory: String,
    pub submitters: usize,
    pub run_seconds: i64,
    pub jitter_seconds: i64,
    pub run_after: String,
    pub deadline_seconds: i64,
    pub submitted: usize,
    pub submit_seconds: f64,
    pub completed: usize,
    pub failed: usize,
    pub failed_deadline_exceeded: usize,
    pub unfinished: usize,
    pub timed_out: bool,
    pub makespan_seconds: Option<f64>,
    pub last_completion_seconds: Option<f64>,
    /// Completed jobs over the whole run (until the last job ended), as the seed counts them.
    pub jobs_per_minute: f64,
    /// No schedule can beat this: all the work spread over all the cpus, or one job's run time.
    pub makespan_lower_bound_seconds: f64,
    /// The fake kubelet's delay from bind to Running; seconds here mean the harness, not the
    /// scheduler, sets the pace.
    pub bound_to_running_seconds: Option<Quantiles>,
    /// How late the fake kubelet finished pods: seen Succeeded minus (all-ready stamp + run
    /// time). The stamp is cut to the second and the jitter adds 0..J, so 0..J+1 is on time.
    pub run_lag_seconds: Option<Quantiles>,
    #[serde(flatten)]
    pub job_start: JobStartFigures,
    pub load_average: Vec<f64>,
    /// The share of bound pod-seconds that went to Jobs that completed.
    pub goodput: Option<f64>,
    pub pods_created: usize,
    #[serde(flatten)]
    pub bind: BindFigures,
    #[serde(flatten)]
    pub nodes: NodeFigures,
}

fn load_average() -> Vec<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .filter_map(|x| x.parse::<f64>().ok().map(|x| round(x, 2)))
        .collect()
}

async fn server_version(client: &Client) -> Option<String> {
    client.apiserver_version().await.ok().map(|i| i.git_version)
}

fn progress(t: &Shared, t0: f64, total: usize) {
    let c = lock(t).counts();
    eprintln!(
        "[{:6.0}s] pods {} bound {} on nodes {} Running {} | jobs complete {} failed {} of {total}",
        now() - t0,
        c.pods,
        c.bound,
        c.holding,
        c.running,
        c.complete,
        c.failed
    );
}

/// Prints the JSON line and appends it to `out`.
fn emit<T: Serialize>(result: &T, out: Option<&PathBuf>) -> Result<()> {
    let line = serde_json::to_string(result).expect("plain data");
    println!("{line}");
    if let Some(path) = out {
        let mut f =
            std::fs::OpenOptions::new().create(true).append(true).open(path).map_err(|e| Error::file(path, e))?;
        writeln!(f, "{line}").map_err(|e| Error::file(path, e))?;
    }
    Ok(())
}

/// Seed 002's experiment: N Jobs x P pods, run R (+0..J) s after all pods of a Job are ready,
/// activeDeadlineSeconds D, from S submitters; waits until every Job completed or failed. Exit
/// status 1 when a node was over-committed or the run timed out.
pub async fn scale(a: &ScaleArgs) -> Result<i32> {
    let c = &a.common;
    let kubeconfig = c.check()?;
    if a.jobs < 1 || a.pods_per_job < 1 {
        return Err(Error::Input("--jobs and --pods-per-job must be 1 or more".into()));
    }
    if a.run_seconds.min(a.jitter_seconds).min(a.deadline_seconds) < 0 {
        return Err(Error::Input("--run-seconds, --jitter-seconds and --deadline-seconds must not be negative".into()));
    }
    let timeout = if a.timeout == 0.0 { a.default_timeout() } else { a.timeout };
    let (client, _) = cluster::client(&kubeconfig).await?;
    let alloc = node_allocatable(&client, &c.node_selector).await?;
    if alloc.is_empty() {
        return Err(Error::Input(format!("no nodes match {:?}", c.node_selector)));
    }
    let tracker: Shared = Arc::new(Mutex::new(Tracker::new(alloc.clone())));
    let watches = [
        watch(Api::<Pod>::namespaced(client.clone(), &c.namespace), tracker.clone(), Tracker::on_pod),
        watch(Api::<Job>::namespaced(client.clone(), &c.namespace), tracker.clone(), Tracker::on_job),
    ];
    cluster::sleep(1.0).await; // let both watches list before the first create
    let names: Vec<String> = (0..a.jobs).map(|i| format!("scale-{i:05}")).collect();
    let run = Some((a.run_seconds, a.run_after.as_str(), a.jitter_seconds));
    let manifests: Vec<Job> =
        names.iter().map(|n| job_manifest(c, n, a.pods_per_job, run, a.deadline_seconds)).collect();
    let (pod_cpu, pod_mem) = (c.pod_cpu() as i64, c.pod_mem() as i64);
    let cap_cpu: i64 = alloc.values().map(|x| x.cpu).sum();
    eprintln!(
        "scale: {} jobs x {} pods ({} cpu / {}) on {} nodes ({:.0} cpu), run {}s+0..{}s after {}, deadline {}s, {} \
         submitters, scheduler {}",
        a.jobs,
        a.pods_per_job,
        c.cpu,
        c.memory,
        alloc.len(),
        cap_cpu as f64 / 1000.0,
        a.run_seconds,
        a.jitter_seconds,
        a.run_after,
        a.deadline_seconds,
        c.submitters,
        c.scheduler
    );
    // Progress while submitting too: 1000 jobs take a while to create.
    let t_start = now();
    let reporter = {
        let (t, every, total) = (tracker.clone(), a.progress_seconds, a.jobs);
        tokio::spawn(async move {
            loop {
                cluster::sleep(every).await;
                progress(&t, t_start, total);
            }
        })
    };
    let jobs_api = Api::<Job>::namespaced(client.clone(), &c.namespace);
    let (t0, t_sub, sent) = submit_all(&jobs_api, manifests, c.submitters).await;
    let deadline = t0 + timeout;
    let mut timed_out = false;
    loop {
        let ended = {
            let t = lock(&tracker);
            sent.keys().filter(|n| t.jobs.get(*n).is_some_and(|j| j.end.is_some())).count()
        };
        if ended >= sent.len() {
            break;
        }
        if now() > deadline {
            timed_out = true;
            break;
        }
        cluster::sleep(0.5).await;
    }
    reporter.abort();
    watches.iter().for_each(|w| w.abort());
    progress(&tracker, t_start, a.jobs);
    let server = server_version(&client).await;
    let t = lock(&tracker);
    let jobs: HashMap<&str, JobLife> =
        names.iter().map(|n| (n.as_str(), t.jobs.get(n).cloned().unwrap_or_default())).collect();
    let pods: Vec<PodLife> = t.pods.values().cloned().collect();
    let with = |o: &str| -> Vec<&str> {
        names.iter().map(String::as_str).filter(|n| jobs[n].outcome.as_deref() == Some(o)).collect()
    };
    let (complete, failed) = (with("Complete"), with("Failed"));
    let deadline_failed = failed.iter().filter(|n| jobs[*n].reason.as_deref() == Some("DeadlineExceeded")).count();
    let last_end = jobs.values().filter_map(|j| j.end).reduce(f64::max);
    let last_done = complete.iter().filter_map(|n| jobs[n].end).reduce(f64::max);
    let makespan = last_end.filter(|_| !timed_out).map(|e| e - t0);
    // Bound pod-seconds of each job: what it held, whether or not it finished.
    let at = now();
    let mut held: HashMap<&str, f64> = HashMap::new();
    for p in &pods {
        if let (Some(b), Some(j)) = (p.bound, p.job.as_deref()) {
            *held.entry(j).or_default() += p.ended.unwrap_or(at) - b;
        }
    }
    let held_total: f64 = held.values().sum();
    let mean_run = a.run_seconds as f64 + a.jitter_seconds as f64 / 2.0;
    let work = names.len() as f64 * f64::from(a.pods_per_job) * pod_cpu as f64 * mean_run;
    let result = ScaleResult {
        experiment: "seed-002-scale".into(),
        scheduler: c.scheduler.clone(),
        server,
        jobs: a.jobs,
        pods_per_job: a.pods_per_job,
        pod_cpu: c.cpu.clone(),
        pod_memory: c.memory.clone(),
        submitters: c.submitters,
        run_seconds: a.run_seconds,
        jitter_seconds: a.jitter_seconds,
        run_after: a.run_after.clone(),
        deadline_seconds: a.deadline_seconds,
        submitted: sent.len(),
        submit_seconds: round(t_sub - t0, 3),
        completed: complete.len(),
        failed: failed.len(),
        failed_deadline_exceeded: deadline_failed,
        unfinished: names.len() - complete.len() - failed.len(),
        timed_out,
        makespan_seconds: makespan.map(|m| round(m, 2)),
        last_completion_seconds: last_done.map(|d| round(d - t0, 2)),
        jobs_per_minute: makespan.filter(|m| *m != 0.0).map_or(0.0, |m| round(complete.len() as f64 / m * 60.0, 1)),
        makespan_lower_bound_seconds: round((work / cap_cpu.max(1) as f64).max(a.run_seconds as f64), 1),
        bound_to_running_seconds: quantiles(pods.iter().filter_map(|p| Some(p.running? - p.bound?)).collect()),
        run_lag_seconds: quantiles(
            pods.iter()
                .filter(|p| p.phase.as_deref() == Some("Succeeded"))
                .filter_map(|p| Some(p.ended? - p.all_ready? - a.run_seconds as f64))
                .collect(),
        ),
        job_start: job_start_figures(&jobs, &pods, &complete, &failed),
        load_average: load_average(),
        goodput: (held_total != 0.0)
            .then(|| round(complete.iter().filter_map(|n| held.get(n)).sum::<f64>() / held_total, 3)),
        pods_created: pods.len(),
        bind: bind_figures(&pods, t0),
        nodes: node_figures(&t, pod_cpu, pod_mem),
    };
    emit(&result, c.out.as_ref())?;
    if let Some((_, node, u)) = t.over.first() {
        eprintln!(
            "scale: node {node} over its allocatable: cpu {}, memory {}, pods {}",
            py_float(u.cpu as f64 / 1000.0),
            u.mem,
            u.pods
        );
    }
    Ok(i32::from(result.nodes.overcommitted_nodes > 0 || timed_out))
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BindResult {
    pub experiment: String,
    pub scheduler: String,
    pub server: Option<String>,
    pub shape: String,
    pub count: usize,
    pub submitters: usize,
    pub release: String,
    /// How long uncordoning took: pods bound meanwhile saw only some of the nodes.
    pub release_seconds: Option<f64>,
    pub create_requests_seconds: f64,
    pub pods_seen: usize,
    pub last_pod_seen_seconds: Option<f64>,
    #[serde(flatten)]
    pub bind: BindFigures,
    #[serde(flatten)]
    pub nodes: NodeFigures,
    pub timed_out: bool,
}

/// A burst of N pods (N one-pod Jobs, one Job of N pods, or N bare pods); how fast they were
/// bound. With `--release uncordon` the nodes are cordoned while the burst is created and the
/// clock starts when they are uncordoned, so the figure is the scheduler's, not the rate at which
/// pods can be created. Exit status 1 when not all were bound or a node was over-committed.
pub async fn bind(a: &BindArgs) -> Result<i32> {
    let c = &a.common;
    let kubeconfig = c.check()?;
    if a.count < 1 {
        return Err(Error::Input("--count must be 1 or more".into()));
    }
    let (client, _) = cluster::client(&kubeconfig).await?;
    let alloc = node_allocatable(&client, &c.node_selector).await?;
    let nodes: Vec<String> = alloc.keys().cloned().collect();
    let tracker: Shared = Arc::new(Mutex::new(Tracker::new(alloc)));
    let watcher = watch(Api::<Pod>::namespaced(client.clone(), &c.namespace), tracker.clone(), Tracker::on_pod);
    cluster::sleep(1.0).await;
    let uncordon = a.release == "uncordon";
    if uncordon {
        // Hold the whole burst back by cordoning the nodes, so that what is timed is the
        // scheduler placing N waiting pods, not how fast they can be created.
        set_unschedulable(&client, nodes.clone(), true, 10).await?;
    }
    let r = bind_burst(a, &client, &tracker, &nodes).await;
    watcher.abort();
    if uncordon {
        set_unschedulable(&client, nodes, false, 10).await?;
    }
    r
}

async fn bind_burst(a: &BindArgs, client: &Client, tracker: &Shared, nodes: &[String]) -> Result<i32> {
    let c = &a.common;
    let n = a.count;
    let (t_create, t_sub) = match a.shape.as_str() {
        "pods" => {
            let pods = (0..n).map(|i| bare_pod(c, &format!("bind-{i:05}"), n)).collect();
            let (t0, t1, _) =
                submit_all(&Api::<Pod>::namespaced(client.clone(), &c.namespace), pods, c.submitters).await;
            (t0, t1)
        }
        shape => {
            let jobs = if shape == "gang" {
                vec![job_manifest(c, "bind-gang", n as u32, None, 0)]
            } else {
                (0..n).map(|i| job_manifest(c, &format!("bind-{i:05}"), 1, None, 0)).collect()
            };
            let (t0, t1, _) =
                submit_all(&Api::<Job>::namespaced(client.clone(), &c.namespace), jobs, c.submitters).await;
            (t0, t1)
        }
    };
    let mut t0 = t_create;
    let mut release_s = None;
    if a.release == "uncordon" {
        let deadline = t_create + a.timeout;
        // muster creates a queued Job's pods only once it admits the Job: none to wait for.
        let want = if c.scheduler == "muster" && a.shape != "pods" { 0 } else { n };
        while lock(tracker).counts().pods < want && now() < deadline {
            cluster::sleep(0.2).await;
        }
        cluster::sleep(a.settle_seconds).await; // let the scheduler (or muster) look at them all once
        let held = lock(tracker).counts().bound;
        if held > 0 {
            eprintln!("bind: {held} pods were bound while the nodes were cordoned");
        }
        t0 = now();
        // Uncordon all at once (one task per node, up to 50): the nodes should come back together.
        set_unschedulable(client, nodes.to_vec(), false, nodes.len().clamp(1, 50)).await?;
        release_s = Some(now() - t0);
    }
    let deadline = t0 + a.timeout;
    while lock(tracker).counts().bound < n && now() <= deadline {
        cluster::sleep(0.2).await;
    }
    let server = server_version(client).await;
    let t = lock(tracker);
    let pods: Vec<PodLife> = t.pods.values().cloned().collect();
    let last_seen = pods.iter().map(|p| p.seen).reduce(f64::max);
    let (pod_cpu, pod_mem) = (c.pod_cpu() as i64, c.pod_mem() as i64);
    let bind = bind_figures(&pods, t0);
    let result = BindResult {
        experiment: "bind-burst".into(),
        scheduler: c.scheduler.clone(),
        server,
        shape: a.shape.clone(),
        count: n,
        submitters: c.submitters,
        release: a.release.clone(),
        release_seconds: release_s.map(|r| round(r, 3)),
        create_requests_seconds: round(t_sub - t_create, 3),
        pods_seen: pods.len(),
        last_pod_seen_seconds: last_seen.map(|s| round(s - t_create, 3)),
        timed_out: bind.pods_bound < n,
        bind,
        nodes: node_figures(&t, pod_cpu, pod_mem),
    };
    emit(&result, c.out.as_ref())?;
    Ok(i32::from(result.timed_out || result.nodes.overcommitted_nodes > 0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        scale: ScaleArgs,
    }

    fn args(extra: &[&str]) -> ScaleArgs {
        let mut argv = vec!["x", "--namespace", "ns"];
        argv.extend(extra);
        Cli::parse_from(argv).scale
    }

    fn pod(uid: &str, node: Option<&str>, phase: &str) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": uid, "uid": uid, "labels": {"batch.kubernetes.io/job-name": "j"}},
            "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {"requests": {"cpu": "1500m", "memory": "1Gi"}}}]},
            "status": {"phase": phase}
        }))
        .unwrap()
    }

    #[test]
    fn defaults_and_timeout_match_the_python_harness() {
        let a = args(&[]);
        assert_eq!((a.jobs, a.pods_per_job, a.run_seconds, a.jitter_seconds, a.deadline_seconds), (200, 10, 18, 9, 90));
        assert_eq!((a.common.submitters, a.common.cpu.as_str(), a.common.memory.as_str()), (5, "2", "2Gi"));
        // 90*4 + 2000/20 + 3*(2000*2*27)/10000 + 120
        assert_eq!(a.default_timeout(), 360.0 + 100.0 + 32.4 + 120.0);
        let j = serde_json::to_value(job_manifest(
            &args(&["--scheduler", "muster"]).common,
            "scale-00001",
            10,
            Some((18, "all-ready", 9)),
            90,
        ))
        .unwrap();
        assert_eq!(j["metadata"]["labels"]["muster.dev/queue"], "default");
        assert_eq!(j["spec"]["activeDeadlineSeconds"], 90);
        let ann = &j["spec"]["template"]["metadata"]["annotations"];
        assert_eq!(
            (ann["kwok.muster.dev/run-seconds"].as_str(), ann["kwok.muster.dev/run-jitter-seconds"].as_str()),
            (Some("18"), Some("9"))
        );
        assert_eq!(j["spec"]["template"]["spec"]["nodeSelector"]["muster.dev/pool"], "worker");
        assert_eq!(j["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["cpu"], "2");
        let p = serde_json::to_value(bare_pod(&args(&["--scheduler", "muster"]).common, "bind-00000", 7)).unwrap();
        assert_eq!(p["metadata"]["labels"]["muster.dev/group-size"], "7");
        assert!(p["metadata"]["annotations"].get("kwok.muster.dev/run-seconds").is_none());
    }

    #[test]
    fn node_use_follows_the_watch() {
        let alloc = BTreeMap::from([("n1".to_string(), Amounts { cpu: 2000, mem: 4 << 30, pods: 110 })]);
        let mut t = Tracker::new(alloc);
        t.on_pod(false, &pod("a", None, "Pending"), 1.0);
        t.on_pod(false, &pod("a", Some("n1"), "Pending"), 2.0);
        t.on_pod(false, &pod("b", Some("n1"), "Running"), 2.5);
        assert_eq!(t.used["n1"], Amounts { cpu: 3000, mem: 2 << 30, pods: 2 });
        assert_eq!(t.over.len(), 1, "3 cpu on a 2-cpu node");
        t.on_pod(false, &pod("a", Some("n1"), "Succeeded"), 4.0);
        t.on_pod(true, &pod("a", Some("n1"), "Succeeded"), 5.0);
        assert_eq!(t.used["n1"].pods, 1);
        let c = t.counts();
        assert_eq!((c.pods, c.bound, c.holding, c.running), (2, 2, 1, 1));
        let pods: Vec<PodLife> = t.pods.values().cloned().collect();
        let b = bind_figures(&pods, 1.0);
        assert_eq!(b.pods_bound, 2);
        let d = b.detail.unwrap();
        assert_eq!((d.first_bind_seconds, d.last_bind_seconds), (1.0, 1.5));
        let n = node_figures(&t, 1500, 1 << 30);
        assert_eq!((n.nodes, n.nodes_used, n.pods_per_node_capacity, n.peak_pods_on_a_node), (1, 1, 1, 2));
        assert_eq!(
            (n.peak_cpu_fraction_on_a_node, n.cluster_pod_capacity, n.overcommitted_nodes),
            (Some(1.5), Some(1), 1)
        );
        let v = serde_json::to_value(b_none()).unwrap();
        assert_eq!(v, serde_json::json!({"podsBound": 0}));
    }

    fn b_none() -> BindFigures {
        bind_figures(&[], 0.0)
    }

    #[test]
    fn job_outcomes() {
        let mut t = Tracker::default();
        let job = |conds: serde_json::Value| -> Job {
            serde_json::from_value(serde_json::json!({"metadata": {"name": "j"}, "status": {"startTime": "2026-01-01T00:00:00Z", "conditions": conds}})).unwrap()
        };
        t.on_job(false, &job(serde_json::json!([])), 1.0);
        t.on_job(
            false,
            &job(serde_json::json!([{"type": "Failed", "status": "True", "reason": "DeadlineExceeded"}])),
            2.0,
        );
        t.on_job(true, &job(serde_json::json!([])), 3.0);
        let j = &t.jobs["j"];
        assert_eq!(
            (j.end, j.outcome.as_deref(), j.reason.as_deref()),
            (Some(2.0), Some("Failed"), Some("DeadlineExceeded"))
        );
        assert!(j.start.is_some());
    }
}
