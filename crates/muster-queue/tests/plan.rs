//! The plan the dashboard shows: running, reserved and estimated windows, queues and nodes.

mod common;

use common::*;
use muster_queue::{EngineConfig, GroupState, QueuePolicy, WindowKind};

#[test]
fn the_plan_shows_what_runs_what_is_reserved_and_what_the_planner_expects() {
    let mut c = EngineConfig::single_queue("q");
    c.queues[0].policy = QueuePolicy::Conservative { depth: 1 };
    let mut e = engine(graph(2, 4), c);
    e.submit(spec("run", "q", 2, 4, Some(100), 0), 0).unwrap();
    e.schedule(0);
    e.submit(spec("a", "q", 2, 4, Some(100), 1), 1).unwrap();
    e.submit(spec("b", "q", 1, 4, None, 2), 2).unwrap();
    e.schedule(2);
    let reservations = e.graph().stat().reservations;
    let plan = e.plan(2);
    assert_eq!(plan.now, 2);
    let names: Vec<&str> = plan.groups.iter().map(|g| g.key.name.as_ref()).collect();
    assert_eq!(names, ["run", "a", "b"], "running first, then the queue in order");

    let run = &plan.groups[0];
    assert_eq!((run.state, run.position, run.members), (GroupState::Admitted, 0, 2));
    let w = run.window.as_ref().expect("a running group has its window");
    assert_eq!((w.kind, w.start, w.end, w.nodes.len()), (WindowKind::Running, 0, Some(100), 2));

    // a holds a reservation (depth 1) on both nodes from when run ends.
    let a = &plan.groups[1];
    let w = a.window.as_ref().expect("a reserved group has its window");
    assert_eq!((a.position, a.estimated_start, a.members), (1, Some(100), 2));
    assert_eq!((w.kind, w.start, w.end), (WindowKind::Reserved, 100, Some(200)));
    let mut nodes = w.nodes.clone();
    nodes.sort();
    let mut running_nodes = run.window.as_ref().unwrap().nodes.clone();
    running_nodes.sort();
    assert_eq!(nodes, running_nodes, "the reservation is on the nodes run frees");

    // b is beyond the depth: only an estimate, after a, with no declared end.
    let b = &plan.groups[2];
    let w = b.window.as_ref().expect("the planner estimates b");
    assert_eq!((b.position, w.kind, w.start, w.end), (2, WindowKind::Estimated, 200, None));

    assert_eq!(plan.queues.len(), 1);
    let q = &plan.queues[0];
    assert_eq!((q.name.as_str(), q.pending, q.admitted), ("q", 2, 1));
    assert_eq!(q.usage.get("cpu"), Some(&8000), "two members of 4 cpu, in millicores");
    assert_eq!(plan.nodes.len(), 2);
    for n in &plan.nodes {
        assert_eq!((n.capacity.get("cpu"), n.used.get("cpu")), (Some(&4000), Some(&4000)), "{}", n.name);
        assert!(n.schedulable);
        assert!(n.domain.is_some(), "nodes are in racks");
    }
    // Looking changed nothing: the estimate's allocation is gone, the reservation stays.
    assert_eq!(e.graph().stat().reservations, reservations);
    assert_eq!(e.plan(2), plan);
}
