//! The controller's decisions against a real SQLite store, fed with the views the watchers
//! produce: admission, exact bindings, readiness, other schedulers' pods, bind failures, user
//! suspend and resume, and recovery after a restart. The same code runs against a real
//! apiserver in hack/e2e (test-muster-*.sh).

use std::collections::BTreeMap;

use muster_controller::brain::{Action, Brain, BrainConfig, Change, Event};
use muster_controller::convert::{JobView, NodeView, PodPhase, PodView};
use muster_durable::Options;
use muster_graph::{NodeSpec, Policy};
use muster_k8s::group::{Members, OwnerReference};
use muster_k8s::{GroupPhase, GroupSpec as GroupObjectSpec, Quantity};
use muster_queue::{EngineConfig, GroupKey, GroupState};
use muster_store::testing::TempDir;
use muster_store::{SqliteStore, Store};

const NS: &str = "team";

fn node(name: &str, cpu: u64) -> NodeView {
    NodeView {
        spec: NodeSpec {
            name: name.into(),
            topology: vec![],
            pooled: vec![("cpu".into(), cpu * 1000), ("memory".into(), 64 << 30), ("pods".into(), 110)],
            devices: vec![],
            labels: BTreeMap::new(),
            taints: vec![],
            unschedulable: false,
        },
        ready: true,
    }
}

fn job(name: &str, members: i64, cpu: i64) -> JobView {
    JobView {
        key: GroupKey::new(NS, name),
        uid: format!("uid-{name}"),
        queue: "default".into(),
        suspended: true,
        finished: None,
        resume_requested: false,
        created: 100,
        group: Ok(GroupObjectSpec {
            queue: "default".into(),
            members: Members { min: members, max: None },
            resources: BTreeMap::from([("cpu".to_string(), Quantity::Int(cpu))]),
            node_selector: BTreeMap::new(),
            affinity: vec![],
            tolerations: vec![],
            topology: None,
            priority_class_name: None,
            duration_seconds: None,
            owner: Some(OwnerReference {
                api_version: "batch/v1".into(),
                kind: "Job".into(),
                name: name.into(),
                uid: None,
            }),
        }),
    }
}

fn pod(job: &str, index: u32, cpu: u64) -> PodView {
    PodView {
        uid: format!("{job}-{index}"),
        namespace: NS.into(),
        name: format!("{job}-{index}"),
        node: None,
        ours: true,
        phase: PodPhase::Pending,
        ready: false,
        requests: vec![("cpu".into(), cpu * 1000)],
        job: Some(job.into()),
        member: None,
        completion_index: Some(index),
        deleting: false,
    }
}

struct Harness {
    brain: Brain<SqliteStore>,
    dir: TempDir,
    now: i64,
}

impl Harness {
    fn new(nodes: &[NodeView], jobs: &[JobView], pods: &[PodView]) -> Self {
        let dir = TempDir::new("muster-brain");
        Self::start(dir, nodes, jobs, pods, 1000)
    }

    fn start(dir: TempDir, nodes: &[NodeView], jobs: &[JobView], pods: &[PodView], now: i64) -> Self {
        let cfg = BrainConfig {
            engine: EngineConfig::single_queue("default"),
            options: Options::new("muster", 30),
            policy: Policy::Pack,
        };
        let mut brain = Brain::new(cfg);
        for n in nodes {
            brain.handle(Event::Node(Change::Apply(n.clone())), now);
        }
        for j in jobs {
            brain.handle(Event::Job(Change::Apply(j.clone())), now);
        }
        for p in pods {
            brain.handle(Event::Pod(Change::Apply(p.clone())), now);
        }
        assert!(!brain.synced(), "not synced before every kind listed");
        for e in [Event::Node(Change::InitDone), Event::Pod(Change::InitDone), Event::Job(Change::InitDone)] {
            brain.handle(e, now);
        }
        assert!(brain.synced());
        let mut store = SqliteStore::open(dir.0.join("muster.db")).unwrap();
        let fence = store.acquire_lease("muster", "test", now, 30).unwrap().unwrap();
        brain.start(store, fence, now).unwrap();
        Harness { brain, dir, now }
    }

    fn cycle(&mut self) -> Vec<Action> {
        self.now += 1;
        self.brain.cycle(self.now);
        self.brain.take_actions()
    }

    /// One event and the batch it makes (as the controller's loop runs them).
    fn send(&mut self, e: Event) -> Vec<Action> {
        self.brain.handle(e, self.now);
        self.brain.cycle(self.now);
        self.brain.take_actions()
    }

    fn state(&self, name: &str) -> Option<GroupState> {
        self.brain.engine()?.engine().group(&GroupKey::new(NS, name)).map(|g| g.state)
    }
}

fn binds(actions: &[Action]) -> Vec<(String, String, u32)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Bind { pod, node, member, .. } => Some((pod.clone(), node.clone(), *member)),
            _ => None,
        })
        .collect()
}

fn unsuspends(actions: &[Action], name: &str) -> usize {
    actions.iter().filter(|a| matches!(a, Action::Suspend { key, suspend: false } if key.name == name)).count()
}

fn last_phase(actions: &[Action], name: &str) -> Option<GroupPhase> {
    actions.iter().rev().find_map(|a| match a {
        Action::Status { key, status } if key.name == name => status.phase,
        _ => None,
    })
}

/// Binds as the API server would: the pod gets the node and the member annotation.
fn bound(p: &PodView, node: &str, member: u32, ready: bool) -> PodView {
    PodView { node: Some(node.into()), member: Some(member), phase: PodPhase::Running, ready, ..p.clone() }
}

#[test]
fn a_job_is_queued_admitted_bound_exactly_and_runs() {
    let mut h = Harness::new(&[node("n1", 4), node("n2", 4)], &[job("train", 3, 2)], &[]);
    let first = h.brain.take_actions();
    assert!(
        first.iter().any(
            |a| matches!(a, Action::EnsureGroup { key, job_uid, .. } if key.name == "train" && job_uid == "uid-train")
        ),
        "the Group object is created: {first:?}"
    );
    let a = h.cycle();
    assert_eq!(h.state("train"), Some(GroupState::Admitted));
    assert_eq!(unsuspends(&a, "train"), 1, "{a:?}");
    assert_eq!(last_phase(&a, "train"), Some(GroupPhase::Admitted));
    let alloc =
        h.brain.engine().unwrap().engine().group(&GroupKey::new(NS, "train")).unwrap().allocation.clone().unwrap();
    // The Job controller creates its pods; each is bound to its member's node, by completion index.
    let pods: Vec<PodView> = (0..3).map(|i| pod("train", i, 2)).collect();
    let mut all = Vec::new();
    for p in &pods {
        all.extend(h.send(Event::Pod(Change::Apply(p.clone()))));
    }
    let b = binds(&all);
    assert_eq!(b.len(), 3, "{all:?}");
    for (pod, node, member) in &b {
        let want = alloc.members.iter().find(|m| m.index == *member).unwrap();
        assert_eq!(node, &want.node, "{pod} bound to its member's node");
        assert_eq!(pod, &format!("train-{member}"), "completion index i fills member i");
    }
    // A repeated pod event does not bind again while the binding is in flight.
    assert!(binds(&h.send(Event::Pod(Change::Apply(pods[0].clone())))).is_empty());
    // Bound and ready: Running.
    for (p, (_, node, member)) in pods.iter().zip(&b) {
        h.send(Event::Pod(Change::Apply(bound(p, node, *member, true))));
    }
    assert_eq!(h.state("train"), Some(GroupState::Running));
    let mut done = job("train", 3, 2);
    done.suspended = false;
    done.finished = Some(true);
    let a = h.send(Event::Job(Change::Apply(done)));
    assert_eq!(h.state("train"), Some(GroupState::Succeeded));
    assert_eq!(last_phase(&a, "train"), Some(GroupPhase::Succeeded));
}

#[test]
fn two_jobs_that_fit_only_one_at_a_time_never_share_the_cluster() {
    // Seed 001 in small: each job needs the whole cluster.
    let mut h = Harness::new(&[node("n1", 4), node("n2", 4)], &[job("a", 4, 2), job("b", 4, 2)], &[]);
    let a = h.cycle();
    let admitted: Vec<_> = ["a", "b"].into_iter().filter(|n| unsuspends(&a, n) == 1).collect();
    assert_eq!(admitted.len(), 1, "exactly one job runs: {a:?}");
    let (first, second) = if admitted[0] == "a" { ("a", "b") } else { ("b", "a") };
    // The waiting job's pods would not exist (its Job stays suspended); even if some did, they
    // are not bound.
    let stray = pod(second, 0, 2);
    assert!(binds(&h.send(Event::Pod(Change::Apply(stray)))).is_empty());
    assert!(h.cycle().iter().all(|a| unsuspends(std::slice::from_ref(a), second) == 0));
    let mut done = job(first, 4, 2);
    done.finished = Some(true);
    let a = h.send(Event::Job(Change::Apply(done)));
    assert_eq!(unsuspends(&a, second), 1, "the second job runs once the first finished: {a:?}");
}

#[test]
fn other_schedulers_pods_use_capacity() {
    let mut foreign = pod("web", 0, 3);
    foreign.ours = false;
    foreign.job = None;
    foreign.node = Some("n1".into());
    foreign.phase = PodPhase::Running;
    let mut h = Harness::new(&[node("n1", 4), node("n2", 4)], &[job("train", 2, 2)], &[foreign.clone()]);
    h.brain.take_actions();
    h.cycle();
    // 1 core left on n1: two 2-core members do not fit beside the foreign pod... on n2 they do.
    let g = h.brain.engine().unwrap().engine().group(&GroupKey::new(NS, "train")).unwrap().clone();
    assert_eq!(g.state, GroupState::Admitted);
    assert!(g.allocation.unwrap().members.iter().all(|m| m.node == "n2"), "n1 is mostly taken");
    // A second job must wait for the foreign pod to finish.
    h.send(Event::Job(Change::Apply(job("more", 2, 2))));
    h.cycle();
    assert_eq!(h.state("more"), Some(GroupState::Queued));
    foreign.phase = PodPhase::Succeeded;
    h.send(Event::Pod(Change::Apply(foreign)));
    h.cycle();
    assert_eq!(h.state("more"), Some(GroupState::Admitted));
}

#[test]
fn a_refused_binding_releases_the_whole_group() {
    let mut h = Harness::new(&[node("n1", 8)], &[job("train", 2, 2)], &[]);
    h.cycle();
    let p0 = pod("train", 0, 2);
    let b = binds(&h.send(Event::Pod(Change::Apply(p0.clone()))));
    assert_eq!(b.len(), 1);
    let a = h.send(Event::BindFailed { key: GroupKey::new(NS, "train"), pod: p0.name, message: "node full".into() });
    assert!(
        a.iter().any(|a| matches!(a, Action::Suspend { key, suspend: true } if key.name == "train")),
        "the Job is suspended again (its pods go): {a:?}"
    );
    let suspend = a.iter().position(|a| matches!(a, Action::Suspend { suspend: true, .. })).unwrap();
    // Not the group's fault: queued again at once, and placed anew (its pods start over).
    let g = h.brain.engine().unwrap().engine().group(&GroupKey::new(NS, "train")).unwrap();
    assert_eq!(g.evictions, 1);
    if let Some(again) = a.iter().position(|a| matches!(a, Action::Suspend { suspend: false, .. })) {
        assert!(again > suspend, "released before admitted again: {a:?}");
    }
    assert!(a.iter().any(|a| matches!(a, Action::Event { reason, .. } if reason == "BindFailed")));
}

#[test]
fn user_suspend_releases_and_resume_requeues() {
    let mut h = Harness::new(&[node("n1", 8)], &[job("train", 2, 2)], &[]);
    h.cycle();
    let mut j = job("train", 2, 2);
    j.suspended = false;
    h.send(Event::Job(Change::Apply(j.clone())));
    assert_eq!(h.state("train"), Some(GroupState::Admitted), "muster's own unsuspend changes nothing");
    j.suspended = true;
    h.send(Event::Job(Change::Apply(j.clone())));
    assert_eq!(h.state("train"), Some(GroupState::Suspended));
    j.resume_requested = true;
    let a = h.send(Event::Job(Change::Apply(j)));
    assert!(a.iter().any(|a| matches!(a, Action::ClearResume { .. })), "{a:?}");
    h.cycle();
    assert_eq!(h.state("train"), Some(GroupState::Admitted));
}

#[test]
fn a_restart_recovers_running_groups_from_the_store_and_bound_pods() {
    let jobs = [job("a", 2, 2), job("b", 2, 8)];
    let nodes = [node("n1", 8), node("n2", 8)];
    let mut h = Harness::new(&nodes, &jobs, &[]);
    let a = h.cycle();
    assert_eq!(unsuspends(&a, "a"), 1);
    let alloc = h.brain.engine().unwrap().engine().group(&GroupKey::new(NS, "a")).unwrap().allocation.clone().unwrap();
    let pods: Vec<PodView> =
        alloc.members.iter().map(|m| bound(&pod("a", m.index, 2), &m.node, m.index, true)).collect();
    for p in &pods {
        h.send(Event::Pod(Change::Apply(p.clone())));
    }
    assert_eq!(h.state("a"), Some(GroupState::Running));
    let b_state = h.state("b");
    let (dir, now) = (std::mem::replace(&mut h.dir, TempDir::new("unused")), h.now);
    drop(h.brain);
    // A new instance: same store, the cluster as listed now.
    let mut running = jobs.to_vec();
    running[0].suspended = false;
    let mut h2 = Harness::start(dir, &nodes, &running, &pods, now + 5);
    let a = h2.brain.take_actions();
    assert_eq!(h2.state("a"), Some(GroupState::Running), "{a:?}");
    assert_eq!(h2.state("b"), b_state);
    assert!(binds(&a).is_empty(), "nothing is bound twice: {a:?}");
    assert_eq!(unsuspends(&a, "a"), 0, "no second admission");
    h2.cycle();
    h2.brain.engine().unwrap().engine().check_invariants().unwrap();
}
