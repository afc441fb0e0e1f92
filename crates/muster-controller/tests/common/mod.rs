//! What the controller's decision-core tests share: views as the watchers produce them, and a
//! brain on a real SQLite store driven as the controller's loop drives it.
#![allow(dead_code, unused_imports)] // each test file uses its own part

pub use std::collections::BTreeMap;
pub use std::sync::Arc;

pub use muster_controller::brain::{Action, Brain, BrainConfig, Change, Event, QueueView};
pub use muster_controller::convert::{NamespaceView, NodeView, PodPhase, PodView, WorkloadView};
pub use muster_controller::metrics::{Metrics, TimedStore};
pub use muster_durable::Options;
pub use muster_graph::{NodeSpec, Policy};
pub use muster_k8s::group::{Members, OwnerReference};
pub use muster_k8s::workload::{self, PodPlace, SetLayout};
pub use muster_k8s::{GroupSpec as GroupObjectSpec, Quantity, QueueStatus};
pub use muster_queue::{EngineConfig, GroupKey, GroupState};
pub use muster_store::testing::TempDir;
pub use muster_store::{SqliteStore, Store};

pub const NS: &str = "team";

pub fn node(name: &str, cpu: u64) -> NodeView {
    NodeView {
        spec: NodeSpec {
            name: name.into(),
            topology: vec![],
            pooled: vec![("cpu".into(), cpu * 1000), ("memory".into(), 64 << 30), ("pods".into(), 110)],
            devices: vec![],
            published: Vec::new(),
            labels: BTreeMap::new(),
            taints: vec![],
            unschedulable: false,
        },
        ready: true,
    }
}

pub fn job(name: &str, members: i64, cpu: i64) -> WorkloadView {
    WorkloadView {
        kind: &muster_k8s::workload::job::KIND,
        hold: &muster_k8s::workload::job::KIND,
        key: GroupKey::new(NS, name),
        uid: format!("uid-{name}"),
        queue: "default".into(),
        suspended: true,
        finished: None,
        resume_requested: false,
        suspend_requested: false,
        created: 100,
        deleting: false,
        layout: vec![SetLayout { name: String::new(), children: 1, pods: members as u32 }],
        release_deadline: None,
        succeeded_pods_to_finish: None,
        devices: vec![Default::default()],
        group: Ok(GroupObjectSpec {
            queue: "default".into(),
            members: Members { min: members, max: None },
            resources: BTreeMap::from([("cpu".to_string(), Quantity::Int(cpu))]),
            devices: vec![],
            node_selector: BTreeMap::new(),
            affinity: vec![],
            tolerations: vec![],
            topology: None,
            priority_class_name: None,
            duration_seconds: None,
            shrinkable: false,
            owner: Some(OwnerReference {
                api_version: "batch/v1".into(),
                kind: "Job".into(),
                name: name.into(),
                uid: None,
            }),
            sets: vec![],
            subgroups: vec![],
        }),
    }
}

/// A change of a Job, as its watcher sends it.
pub fn job_event(c: Change<WorkloadView>) -> Event {
    Event::Workload(&workload::job::KIND, c)
}

pub fn pod(job: &str, index: u32, cpu: u64) -> PodView {
    PodView {
        uid: format!("{job}-{index}"),
        namespace: NS.into(),
        name: format!("{job}-{index}"),
        node: None,
        ours: true,
        phase: PodPhase::Pending,
        ready: false,
        requests: vec![("cpu".into(), cpu * 1000)],
        place: Some(Box::new(PodPlace { workload: job.into(), set: String::new(), child: 0, index: Some(index) })),
        member: None,
        deleting: false,
        ..PodView::default()
    }
}

/// The brain's settings for the queue configuration `engine`, as the controller makes them.
pub fn brain_config(engine: EngineConfig) -> BrainConfig {
    BrainConfig {
        engine,
        options: Options::new("muster", 30),
        policy: Policy::Pack,
        left_out_queues: Default::default(),
    }
}

/// A brain on a real SQLite store, counting into `metrics` as the controller does.
pub struct Harness {
    pub brain: Brain<TimedStore<SqliteStore>>,
    pub metrics: Arc<Metrics>,
    pub dir: TempDir,
    pub now: i64,
}

impl Harness {
    pub fn new(nodes: &[NodeView], jobs: &[WorkloadView], pods: &[PodView]) -> Self {
        let dir = TempDir::new("muster-brain");
        Self::start(dir, nodes, jobs, pods, 1000)
    }

    pub fn start(dir: TempDir, nodes: &[NodeView], jobs: &[WorkloadView], pods: &[PodView], now: i64) -> Self {
        Self::start_with(dir, nodes, jobs, &[], pods, now)
    }

    pub fn start_with(
        dir: TempDir,
        nodes: &[NodeView],
        jobs: &[WorkloadView],
        others: &[WorkloadView],
        pods: &[PodView],
        now: i64,
    ) -> Self {
        Self::configured(dir, brain_config(EngineConfig::single_queue("default")), nodes, jobs, others, pods, now)
    }

    /// A brain running `cfg`.
    pub fn configured(
        dir: TempDir,
        cfg: BrainConfig,
        nodes: &[NodeView],
        jobs: &[WorkloadView],
        others: &[WorkloadView],
        pods: &[PodView],
        now: i64,
    ) -> Self {
        let metrics = Arc::new(Metrics::new());
        let mut brain = Brain::new(cfg).with_metrics(metrics.clone());
        for n in nodes {
            brain.handle(Event::Node(Change::Apply(n.clone())), now);
        }
        for j in jobs.iter().chain(others) {
            brain.handle(Event::Workload(j.kind, Change::Apply(j.clone())), now);
        }
        for p in pods {
            brain.handle(Event::Pod(Change::Apply(p.clone())), now);
        }
        assert!(!brain.synced(), "not synced before every kind listed");
        for e in [Event::Node(Change::InitDone), Event::Pod(Change::InitDone)] {
            brain.handle(e, now);
        }
        assert!(!brain.synced(), "not synced before ResourceSlices listed");
        brain.handle(Event::Slice(Change::InitDone), now);
        assert!(!brain.synced(), "not synced before ResourceClaims listed");
        brain.handle(Event::Claim(Change::InitDone), now);
        assert!(!brain.synced(), "not synced before ResourceClaimTemplates listed");
        brain.handle(Event::Template(Change::InitDone), now);
        assert!(!brain.synced(), "not synced before DeviceClasses listed");
        brain.handle(Event::Class(Change::InitDone), now);
        // Every held kind lists (empty, without its CRD): recovery waits for each.
        for kind in workload::HELD_KINDS {
            assert!(!brain.synced(), "not synced before {}s listed", kind.kind);
            brain.handle(Event::Workload(kind, Change::InitDone), now);
        }
        assert!(brain.synced());
        let mut store = TimedStore::new(SqliteStore::open(dir.0.join("muster.db")).unwrap(), metrics.clone());
        let fence = store.acquire_lease("muster", "test", now, 30).unwrap().unwrap();
        brain.start(store, fence, now).unwrap();
        Harness { brain, metrics, dir, now }
    }

    pub fn cycle(&mut self) -> Vec<Action> {
        self.now += 1;
        self.brain.cycle(self.now);
        self.brain.take_actions()
    }

    /// One event and the batch it makes (as the controller's loop runs them).
    pub fn send(&mut self, e: Event) -> Vec<Action> {
        self.brain.handle(e, self.now);
        self.brain.cycle(self.now);
        self.brain.take_actions()
    }

    pub fn state(&self, name: &str) -> Option<GroupState> {
        self.brain.engine()?.engine().group(&GroupKey::new(NS, name)).map(|g| g.state)
    }
}

pub fn binds(actions: &[Action]) -> Vec<(String, String, u32)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Bind { pod, node, member, .. } => Some((pod.clone(), node.clone(), *member)),
            _ => None,
        })
        .collect()
}

/// The messages of the events with `reason` among `actions`.
pub fn told<'a>(actions: &'a [Action], reason: &str) -> Vec<&'a String> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Event { reason: r, message, .. } if r == reason => Some(message),
            _ => None,
        })
        .collect()
}

pub fn unsuspends(actions: &[Action], name: &str) -> usize {
    actions
        .iter()
        .filter(
            |a| matches!(a, Action::Suspend { key, kind, suspend: false } if &*key.name == name && kind.kind == "Job"),
        )
        .count()
}

pub fn last_phase(actions: &[Action], name: &str) -> Option<GroupState> {
    actions.iter().rev().find_map(|a| match a {
        Action::Status { key, status } if &*key.name == name => status.phase,
        _ => None,
    })
}

/// Binds as the API server would: the pod gets the node and the member annotation.
pub fn bound(p: &PodView, node: &str, member: u32, ready: bool) -> PodView {
    PodView { node: Some(node.into()), member: Some(member), phase: PodPhase::Running, ready, ..p.clone() }
}

// ----- plain-pod groups: pods with muster.dev/group, gated by the webhook, no Job -----

/// A pod of plain group `group`, as the webhook leaves it: gated, schedulerName muster.
pub fn plain(group: &str, i: u32, size: u32, cpu: u64) -> PodView {
    PodView {
        uid: format!("{group}-uid-{i}"),
        namespace: NS.into(),
        name: format!("{group}-{i}"),
        ours: true,
        requests: vec![("cpu".into(), cpu * 1000)],
        group: Some(group.into()),
        members: Some(Box::new(Ok(Members { min: i64::from(size), max: None }))),
        queue: Some("default".into()),
        gated: true,
        created: 50 + i64::from(i),
        ..PodView::default()
    }
}

/// Ungated and bound as the API server would after muster's patch and binding.
pub fn bound_plain(p: &PodView, node: &str, member: u32, ready: bool) -> PodView {
    PodView { gated: false, ..bound(p, node, member, ready) }
}

pub fn ungates(actions: &[Action]) -> Vec<String> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Ungate { pod, .. } => Some(pod.clone()),
            _ => None,
        })
        .collect()
}

/// Every Bind of a gated pod comes right after that pod's Ungate.
pub fn assert_ungated_before_bound(actions: &[Action]) {
    for (i, a) in actions.iter().enumerate() {
        if let Action::Ungate { uid, .. } = a {
            assert!(
                matches!(actions.get(i + 1), Some(Action::Bind { uid: u, .. }) if u == uid),
                "the Ungate of {uid} is followed by its Bind: {actions:?}"
            );
        }
    }
}

pub fn allocation(h: &Harness, name: &str) -> Vec<(u32, String)> {
    let g = h.brain.engine().unwrap().engine().group(&GroupKey::new(NS, name)).unwrap();
    g.allocation.as_ref().unwrap().members.iter().map(|m| (m.index, m.node.clone())).collect()
}

pub fn deleted_groups(actions: &[Action], name: &str) -> usize {
    actions.iter().filter(|a| matches!(a, Action::DeleteGroup { key } if &*key.name == name)).count()
}
