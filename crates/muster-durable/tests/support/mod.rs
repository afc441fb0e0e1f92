//! Fixtures: both store backends, a store that fails on demand, a small cluster, and a model of
//! the pods a binder would run for acknowledged transitions.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use muster_durable::{ClusterReport, DurableEngine, Options, Recovery};
use muster_graph::{GroupRequest, Policy, ResourceGraph};
use muster_queue::{AllocationRecord, Engine, EngineConfig, Group, GroupKey, GroupSpec, MemberPlacement, Transition};
use muster_store::testing::{PgServer, TempDir};
use muster_store::{
    Fence, HistoryEntry, PgStore, PutResult, RunRecord, RunTimeRecord, Snapshot, SqliteStore, Store, StoreError,
    UsageSum, Write,
};

/// A fresh, empty database of one backend.
pub trait Backend {
    type S: Store;
    /// A new connection ("instance").
    fn open(&self) -> Self::S;
}

pub struct Sqlite {
    dir: TempDir,
}

impl Sqlite {
    pub fn new() -> Self {
        Sqlite { dir: TempDir::new("muster-durable-test") }
    }
}

impl Backend for Sqlite {
    type S = SqliteStore;
    fn open(&self) -> SqliteStore {
        SqliteStore::open(self.dir.0.join("muster.db")).unwrap()
    }
}

pub struct Pg {
    params: String,
}

impl Pg {
    pub fn new() -> Self {
        Pg { params: PgServer::shared().create_database().unwrap() }
    }
}

impl Backend for Pg {
    type S = PgStore;
    fn open(&self) -> PgStore {
        PgStore::connect(&self.params).unwrap()
    }
}

/// When a [`Flaky`] store fails: the next `after` applies go through, then one fails.
#[derive(Debug, Default)]
pub struct Plan {
    pub fail_after: Option<usize>,
    /// The failing apply commits first (a crash between commit and acknowledgement).
    pub commit_then_fail: bool,
    pub failed: bool,
}

/// A store that fails one apply on demand with `Unavailable`.
pub struct Flaky<S> {
    pub inner: S,
    pub plan: Rc<RefCell<Plan>>,
}

impl<S: Store> Flaky<S> {
    pub fn new(inner: S) -> (Self, Rc<RefCell<Plan>>) {
        let plan = Rc::new(RefCell::new(Plan::default()));
        (Flaky { inner, plan: plan.clone() }, plan)
    }
}

impl<S: Store> Store for Flaky<S> {
    fn apply(&mut self, fence: &Fence, now: i64, batch: &[Write]) -> Result<Vec<PutResult>, StoreError> {
        let mut plan = self.plan.borrow_mut();
        match plan.fail_after {
            Some(0) => {
                plan.fail_after = None;
                plan.failed = true;
                if plan.commit_then_fail {
                    self.inner.apply(fence, now, batch)?;
                }
                Err(StoreError::Unavailable("injected failure".into()))
            }
            Some(n) => {
                plan.fail_after = Some(n - 1);
                self.inner.apply(fence, now, batch)
            }
            None => self.inner.apply(fence, now, batch),
        }
    }
    fn load(&mut self) -> Result<Snapshot, StoreError> {
        self.inner.load()
    }
    fn acquire_lease(&mut self, name: &str, holder: &str, now: i64, ttl: i64) -> Result<Option<Fence>, StoreError> {
        self.inner.acquire_lease(name, holder, now, ttl)
    }
    fn renew_lease(&mut self, fence: &Fence, now: i64, ttl: i64) -> Result<bool, StoreError> {
        self.inner.renew_lease(fence, now, ttl)
    }
    fn release_lease(&mut self, fence: &Fence) -> Result<bool, StoreError> {
        self.inner.release_lease(fence)
    }
    fn usage_since(&mut self, queue: Option<&str>, since: i64) -> Result<Vec<UsageSum>, StoreError> {
        self.inner.usage_since(queue, since)
    }
    fn decayed_usage(&mut self, now: i64, half_life_seconds: i64) -> Result<Vec<UsageSum>, StoreError> {
        self.inner.decayed_usage(now, half_life_seconds)
    }
    fn history(&mut self, group_key: &str) -> Result<Vec<HistoryEntry>, StoreError> {
        self.inner.history(group_key)
    }
    fn recent_run_times(&mut self, per_shape: usize) -> Result<Vec<RunTimeRecord>, StoreError> {
        self.inner.recent_run_times(per_shape)
    }
    fn runs(&mut self, since: i64, until: i64) -> Result<Vec<RunRecord>, StoreError> {
        self.inner.runs(since, until)
    }
}

pub const NODES: u32 = 4;
pub const NODE_CPU: u64 = 4;

/// `NODES` nodes of `NODE_CPU` cores.
pub fn graph() -> ResourceGraph {
    graph_of(NODE_CPU)
}

/// `NODES` nodes of `cpu` cores, named as in [`graph`].
pub fn graph_of(cpu: u64) -> ResourceGraph {
    let text = format!(
        "name: t\nnodeClasses:\n  - name: n\n    count: {NODES}\n    capacity: {{cpu: {cpu}, memory: 64Gi, pods: 110}}\n    spread: {{rack: 2}}\n"
    );
    ResourceGraph::new(muster_graph::cluster::load("t.yaml", &text).unwrap(), Policy::First)
}

/// Queues `a` and `b`; readiness timeout 30 s, backoff 5..20 s.
pub fn config() -> EngineConfig {
    let mut c = EngineConfig::single_queue("a");
    let mut b = c.queues[0].clone();
    b.name = "b".into();
    c.queues.push(b);
    for q in &mut c.queues {
        q.readiness.timeout_s = Some(30);
        q.readiness.recovery_timeout_s = Some(20);
        q.readiness.backoff_base_s = 5;
        q.readiness.backoff_max_s = 20;
        q.readiness.backoff_limit = Some(3);
    }
    c.fair_share_half_life_s = 3600;
    c
}

/// The name of node `i` of [`graph`].
pub fn node(i: usize) -> String {
    graph().graph.nodes[i].name.clone()
}

pub fn key(name: &str) -> GroupKey {
    GroupKey::new("ns", name)
}

pub fn spec(name: &str, queue: &str, min: u32, max: u32, cpu: u64, duration: Option<u64>, at: i64) -> GroupSpec {
    let mut request = GroupRequest::simple(name, min, &[("cpu", cpu * 1000)]);
    request.max_members = max;
    request.duration = duration;
    GroupSpec { key: key(name), queue: queue.into(), priority_class: None, request, submitted_at: at }
}

pub fn options() -> Options {
    Options::new("engine", 30)
}

/// Takes the lease for `holder` and recovers.
pub fn start<S: Store>(store: S, holder: &str, cluster: &ClusterReport, now: i64) -> (DurableEngine<S>, Recovery) {
    start_with(config(), store, holder, cluster, now)
}

/// [`start`] with configuration `c`.
pub fn start_with<S: Store>(
    c: EngineConfig,
    store: S,
    holder: &str,
    cluster: &ClusterReport,
    now: i64,
) -> (DurableEngine<S>, Recovery) {
    start_on(graph(), c, store, holder, cluster, now)
}

/// [`start`] on nodes `g` with configuration `c`.
pub fn start_on<S: Store>(
    g: ResourceGraph,
    c: EngineConfig,
    mut store: S,
    holder: &str,
    cluster: &ClusterReport,
    now: i64,
) -> (DurableEngine<S>, Recovery) {
    let fence = store.acquire_lease("engine", holder, now, options().lease.ttl_s).unwrap().expect("lease free");
    DurableEngine::recover(g, c, store, fence, options(), cluster, now).unwrap()
}

/// The pods a binder runs: it acts on acknowledged transitions only.
#[derive(Debug, Default, Clone)]
pub struct Cluster {
    pub pods: BTreeMap<GroupKey, Vec<MemberPlacement>>,
}

impl Cluster {
    pub fn act(&mut self, ts: &[Transition]) {
        for t in ts {
            if t.to.holds_allocation() && !t.from.holds_allocation() {
                assert!(!self.pods.contains_key(&t.key), "{} admitted twice", t.key);
            }
            if t.to.holds_allocation() {
                if let Some(a) = &t.allocation {
                    self.pods.insert(t.key.clone(), a.members.clone());
                }
            } else {
                self.pods.remove(&t.key);
            }
        }
        self.check();
    }

    /// No node runs more than it has.
    pub fn check(&self) {
        let mut per_node: BTreeMap<&str, usize> = BTreeMap::new();
        for m in self.pods.values().flatten() {
            *per_node.entry(&m.node).or_default() += 1;
        }
        // Every test group member asks for at least 1 core of a NODE_CPU-core node.
        assert!(per_node.values().all(|&n| n as u64 <= NODE_CPU), "cluster over-committed: {per_node:?}");
    }

    pub fn report(&self) -> ClusterReport {
        ClusterReport { running: self.pods.clone(), ..Default::default() }
    }
}

/// Checks the stored allocations: each belongs to a placed group, no node is over-committed,
/// and no member is placed twice. Returns them by group key.
pub fn check_store<S: Store>(store: &mut S) -> BTreeMap<String, AllocationRecord> {
    let snap = store.load().unwrap();
    let specs: BTreeMap<String, (String, GroupSpec)> = snap
        .groups
        .iter()
        .map(|g| (g.group.key.clone(), (g.group.state.clone(), serde_json::from_value(g.group.spec.clone()).unwrap())))
        .collect();
    let mut cpu: BTreeMap<String, u64> = BTreeMap::new();
    let mut out = BTreeMap::new();
    for a in &snap.allocations {
        let (state, spec) = &specs[&a.group_key];
        assert!(state == "Admitted" || state == "Running", "{} has an allocation in state {state}", a.group_key);
        let rec: AllocationRecord = serde_json::from_value(a.placement.clone()).unwrap();
        let per = spec.request.requests.iter().find(|(r, _)| r == "cpu").map_or(0, |(_, v)| *v);
        for m in &rec.members {
            *cpu.entry(m.node.clone()).or_default() += per;
        }
        out.insert(a.group_key.clone(), rec);
    }
    for (node, used) in &cpu {
        assert!(*used <= NODE_CPU * 1000, "store over-commits {node}: {used} millicores");
    }
    out
}

/// The engine's groups without their explanation text (not stored: recomputed every cycle).
pub fn durable_groups(e: &Engine) -> Vec<Group> {
    e.groups().map(|g| Group { reason: String::new(), ..g.clone() }).collect()
}
