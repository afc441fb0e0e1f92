//! Memory and time of the controller's state at scale, on a synthetic load: NODES nodes and
//! JOBS jobs of PODS pods each (default 5,000 nodes, 15,000 x 10 = 150,000 pods), fed to the
//! brain as the watchers would (compact views, batches of events), with a real SQLite store.
//! Every group is admitted and all its pods bound and ready; then prints peak RSS, and what a
//! change of configuration costs taken by the running engine and recovered from the store.
//!
//!   cargo run --release -p muster-controller --example controller_memory [NODES JOBS PODS]

use std::collections::BTreeMap;
use std::time::Instant;

use muster_controller::brain::{Action, Brain, BrainConfig, Change, Event};
use muster_controller::convert::{NodeView, PodPhase, PodView, WorkloadView};
use muster_durable::Options;
use muster_graph::{NodeSpec, Policy};
use muster_k8s::group::Members;
use muster_k8s::workload::{HELD_KINDS, PodPlace, SetLayout};
use muster_k8s::{GroupSpec as GroupObjectSpec, Quantity};
use muster_queue::{EngineConfig, GroupKey, GroupState, QueuePolicy};
use muster_store::testing::TempDir;
use muster_store::{SqliteStore, Store};

fn rss_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn main() {
    let args: Vec<u64> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let (nodes, jobs, pods) = (
        args.first().copied().unwrap_or(5000),
        args.get(1).copied().unwrap_or(15_000),
        args.get(2).copied().unwrap_or(10),
    );
    let t0 = Instant::now();
    let mut config = EngineConfig::single_queue("default");
    config.queues[0].policy = QueuePolicy::Easy;
    let cfg = BrainConfig {
        engine: config,
        options: Options::new("muster", 3600),
        policy: Policy::Pack,
        left_out_queues: Default::default(),
    };
    let mut brain: Brain<SqliteStore> = Brain::new(cfg);
    let now = 1_000;
    // 64 cores per node; each pod 2 cores: 32 pods per node, room for 160,000 at 5,000 nodes.
    for i in 0..nodes {
        let spec = NodeSpec {
            name: format!("node-{i:05}"),
            topology: vec![("zone".into(), format!("zone-{}", i % 4)), ("rack".into(), format!("rack-{}", i / 40))],
            pooled: vec![("cpu".into(), 64_000), ("memory".into(), 256 << 30), ("pods".into(), 110)],
            devices: vec![],
            published: Vec::new(),
            labels: BTreeMap::from([("kubernetes.io/hostname".to_string(), format!("node-{i:05}"))]),
            taints: vec![],
            unschedulable: false,
        };
        brain.handle(Event::Node(Change::Apply(NodeView { spec, ready: true })), now);
    }
    for j in 0..jobs {
        let name = format!("job-{j:06}");
        let job = WorkloadView {
            kind: &muster_k8s::workload::job::KIND,
            hold: &muster_k8s::workload::job::KIND,
            key: GroupKey::new("team", &name),
            uid: format!("uid-{j}"),
            queue: "default".into(),
            suspended: true,
            finished: None,
            resume_requested: false,
            suspend_requested: false,
            created: now,
            deleting: false,
            layout: vec![SetLayout { name: String::new(), children: 1, pods: pods as u32 }],
            release_deadline: None,
            succeeded_pods_to_finish: Some(pods as u32),
            devices: vec![Default::default()],
            group: Ok(GroupObjectSpec {
                queue: "default".into(),
                members: Members { min: pods as i64, max: None },
                resources: BTreeMap::from([
                    ("cpu".to_string(), Quantity::Text("2".into())),
                    ("memory".to_string(), Quantity::Text("2Gi".into())),
                ]),
                devices: vec![],
                node_selector: BTreeMap::new(),
                affinity: vec![],
                tolerations: vec![],
                topology: None,
                priority_class_name: None,
                duration_seconds: Some(600),
                shrinkable: false,
                owner: None,
                sets: vec![],
                subgroups: vec![],
            }),
        };
        brain.handle(Event::Workload(job.kind, Change::Apply(job)), now);
    }
    let kinds = HELD_KINDS.iter().map(|k| Event::Workload(k, Change::InitDone));
    for e in [Event::Node(Change::InitDone), Event::Pod(Change::InitDone)].into_iter().chain(kinds) {
        brain.handle(e, now);
    }
    let dir = TempDir::new("muster-memory");
    let mut store = SqliteStore::open(dir.0.join("muster.db")).expect("store");
    let fence = store.acquire_lease("muster", "bench", now, 3600).expect("lease").expect("free");
    brain.start(store, fence, now).expect("start");
    let t_submit = t0.elapsed();
    brain.cycle(now + 1);
    let actions = brain.take_actions();
    let t_admit = t0.elapsed();
    let engine = brain.engine().expect("leading").engine();
    let admitted = engine.groups().filter(|g| g.state == GroupState::Admitted).count();
    // The Job controller's pods, bound where muster placed them, all ready.
    let mut batch = 0;
    let mut pod_count = 0;
    let placements: Vec<(GroupKey, Vec<(u32, String)>)> = engine
        .groups()
        .filter_map(|g| {
            let a = g.allocation.as_ref()?;
            Some((g.spec.key.clone(), a.members.iter().map(|m| (m.index, m.node.clone())).collect()))
        })
        .collect();
    for (key, members) in placements {
        for (index, node) in members {
            let pod = PodView {
                uid: format!("{}-{index}", key.name),
                namespace: key.namespace.to_string(),
                name: format!("{}-{index}", key.name),
                node: Some(node),
                ours: true,
                phase: PodPhase::Running,
                ready: true,
                requests: vec![("cpu".into(), 2000), ("memory".into(), 2 << 30)],
                place: Some(Box::new(PodPlace {
                    workload: key.name.to_string(),
                    set: String::new(),
                    child: 0,
                    index: Some(index),
                })),
                member: Some(index),
                deleting: false,
                ..PodView::default()
            };
            brain.handle(Event::Pod(Change::Apply(pod)), now + 2);
            pod_count += 1;
            batch += 1;
            if batch == 10_000 {
                brain.cycle(now + 2);
                brain.take_actions();
                batch = 0;
            }
        }
    }
    brain.cycle(now + 3);
    brain.take_actions();
    let t_pods = t0.elapsed();
    let engine = brain.engine().expect("leading").engine();
    let running = engine.groups().filter(|g| g.state == GroupState::Running).count();
    let binds = actions.iter().filter(|a| matches!(a, Action::Bind { .. })).count();
    println!(
        "nodes {nodes}, jobs {jobs} x {pods} pods: {admitted} admitted, {running} running, {pod_count} pods fed, {binds} binds before pods existed"
    );
    println!(
        "time: submit+recover {:.2}s, admit {:.2}s, pods {:.2}s",
        t_submit.as_secs_f64(),
        (t_admit - t_submit).as_secs_f64(),
        (t_pods - t_admit).as_secs_f64()
    );
    println!("rss now {} MiB, peak {} MiB", rss_kib("VmRSS:") / 1024, rss_kib("VmHWM:") / 1024);

    // A Queue changed: the running engine takes the new configuration (what the controller
    // does), against recovering the engine from the store with it (what it did, less listing
    // the cluster again from the apiserver).
    let mut changed = brain.engine().expect("leading").engine().config().clone();
    changed.queues[0].policy = QueuePolicy::Conservative { depth: 16 };
    let t = Instant::now();
    brain.reconfigure(changed.clone(), Default::default(), now + 4);
    brain.cycle(now + 4);
    brain.take_actions();
    let t_reconfigure = t.elapsed();
    let t = Instant::now();
    let mut store = SqliteStore::open(dir.0.join("muster.db")).expect("store");
    let fence = store.acquire_lease("muster", "bench", now + 5, 3600).expect("lease").expect("ours");
    brain.start(store, fence, now + 5).expect("recover");
    brain.cycle(now + 5);
    brain.take_actions();
    let t_recover = t.elapsed();
    let engine = brain.engine().expect("leading").engine();
    assert_eq!(engine.groups().filter(|g| g.state == GroupState::Running).count(), running, "nothing moved");
    println!(
        "a configuration change: taken by the running engine {:.2}s, recovered from the store {:.2}s",
        t_reconfigure.as_secs_f64(),
        t_recover.as_secs_f64()
    );
}
