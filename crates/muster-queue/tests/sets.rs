//! Groups of member sets (a head and its workers) in the engine.

mod common;

use common::*;
use muster_graph::jobspec::{GroupRequest, MemberSet};
use muster_queue::{EngineConfig, GroupSpec, GroupState, Reason};

/// A head of 1 cpu and `workers` workers of 2 cpu: one group of two sets.
fn head_and_workers(workers: u32) -> GroupSpec {
    let set = |name: &str, members: u32, cpu: u64| MemberSet {
        name: name.into(),
        min_members: members,
        max_members: members,
        requests: vec![("cpu".into(), cpu * 1000)],
        filter: Default::default(),
        topology: None,
    };
    let request =
        GroupRequest::simple("rc", 1, &[]).with_sets(vec![set("head", 1, 1), set("worker", workers, 2)]).unwrap();
    GroupSpec { key: key("rc"), queue: "q".into(), priority_class: None, request, submitted_at: 0 }
}

#[test]
fn a_running_group_of_sets_resized_grows_its_last_set() {
    // 1 + 2 x 2 cpu run on 3 nodes of 4 cpu; its workload then asks 3 workers (a RayCluster scaled).
    let mut e = engine(graph(3, 4), EngineConfig::single_queue("q"));
    e.submit(head_and_workers(2), 0).unwrap();
    let ts = e.schedule(0);
    ready_all(&mut e, &ts, 0);
    assert_eq!(state(&e, "rc"), GroupState::Running);
    // As the controller resizes a placed group: the counts go as far as the 3 members it holds
    // allow, 3..=4, the last set taking the difference (2..=3 workers).
    let mut resized = head_and_workers(3);
    resized.request.set_bounds(3, 4);
    let ts = e.update(resized, 1).unwrap();
    assert_eq!(ts[0].reason, Reason::Reshaped { min: 3, max: 4 }, "{ts:?}");
    let ts = e.schedule(2);
    let grown = ts.iter().find(|t| matches!(t.reason, Reason::Grown { .. })).expect("grows");
    assert_eq!(grown.allocation.as_ref().unwrap().members.len(), 4);
    e.check_invariants().unwrap();
    // Its requests are still what it was placed for: another worker size is refused.
    let mut other = head_and_workers(3);
    other.request.sets[1].requests = vec![("cpu".into(), 1000)];
    let err = e.update(other, 3).unwrap_err();
    assert!(err.to_string().contains("may change only how many members it has"), "{err}");
}
