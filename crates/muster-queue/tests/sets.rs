//! Groups of member sets (a head and its workers) in the engine.

mod common;

use common::*;
use muster_graph::jobspec::{GroupRequest, MemberSet};
use muster_queue::{EngineConfig, GroupSpec, GroupState, Reason};

/// A head of 1 cpu and `workers` workers of 2 cpu: one group of two sets.
fn head_and_workers(workers: u32) -> GroupSpec {
    let request = GroupRequest::simple("rc", 1, &[])
        .with_sets(vec![cpu_set("head", 1, 1, 1), cpu_set("worker", workers, workers, 2)])
        .unwrap();
    GroupSpec { key: key("rc"), queue: "q".into(), priority_class: None, request, submitted_at: 0 }
}

/// A set of `min..max` members of `cpu` cpus each.
fn cpu_set(name: &str, min: u32, max: u32, cpu: u64) -> MemberSet {
    MemberSet {
        name: name.into(),
        min_members: min,
        max_members: max,
        requests: vec![("cpu".into(), cpu * 1000)],
        devices: Vec::new(),
        filter: Default::default(),
        topology: None,
    }
}

/// Queue `q` with a quota of 12 cpu on 4 nodes of 8, a filler of `filler_cpu` cpus running in it
/// until t=50.
fn quota_of_12_cpu_beside_a_filler(filler_cpu: u64) -> muster_queue::Engine {
    let mut c = EngineConfig::single_queue("q");
    c.queues[0].quotas.insert(
        "cpu".into(),
        muster_queue::config::QuotaSpec { nominal: 12.into(), borrowing_limit: None, lending_limit: None },
    );
    let mut e = engine(graph(4, 8), c);
    e.submit(spec("filler", "q", 1, filler_cpu, Some(50), 0), 0).unwrap();
    let ts = e.schedule(0);
    ready_all(&mut e, &ts, 0);
    e
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

#[test]
fn a_group_of_sets_that_loses_a_fixed_set_is_evicted_whatever_its_last_set_keeps() {
    // An elastic group of a head and 2..4 workers, all 5 placed: losing two workers leaves it
    // running; losing its head does not, though 4 members remain above the group's minimum of 3.
    let running = || {
        let mut spec = head_and_workers(4);
        spec.request.set_bounds(3, 5);
        let mut e = engine(graph(3, 8), EngineConfig::single_queue("q"));
        e.submit(spec, 0).unwrap();
        let ts = e.schedule(0);
        ready_all(&mut e, &ts, 0);
        assert_eq!(state(&e, "rc"), GroupState::Running);
        e
    };
    let mut e = running();
    e.members_lost(&key("rc"), &[3, 4], 1).unwrap();
    assert_eq!(state(&e, "rc"), GroupState::Running, "two workers of four lost: still its minimum");
    e.check_invariants().unwrap();
    let mut e = running();
    let ts = e.members_lost(&key("rc"), &[0], 1).unwrap();
    assert!(ts.iter().any(|t| t.to == GroupState::Evicted), "{ts:?}");
    e.check_invariants().unwrap();
}

#[test]
fn a_group_of_sets_waiting_for_its_max_waits_in_its_last_set() {
    // A head of 1 cpu and 2..4 workers of 3 cpu on 4 nodes of 4 cpu, 2 cpu of one taken until
    // t=50: 14 cpu are free, more than the 13 it asks in all, but only 3 nodes take a worker. A
    // group that waits up to 100 s for all its workers waits, and gets them at t=50.
    let mut c = EngineConfig::single_queue("q");
    c.queues[0].elastic_max_wait_s = 100;
    let mut e = engine(graph(4, 4), c);
    e.submit(spec("filler", "q", 1, 2, Some(50), 0), 0).unwrap();
    let ts = e.schedule(0);
    ready_all(&mut e, &ts, 0);
    let mut spec = head_and_workers(4);
    spec.request.sets[1].requests = vec![("cpu".into(), 3000)];
    spec.request.set_bounds(3, 5);
    spec.request.duration = Some(100);
    e.submit(spec, 1).unwrap();
    e.schedule(1);
    assert_ne!(state(&e, "rc"), GroupState::Admitted, "placed with fewer workers than it waits for");
    e.finished(&key("filler"), true, 50).unwrap();
    let ts = e.schedule(50);
    ready_all(&mut e, &ts, 50);
    assert_eq!(e.group(&key("rc")).unwrap().member_count(), 5, "all its workers once the room is there");
    e.check_invariants().unwrap();
}

#[test]
fn a_group_of_two_elastic_sets_is_capped_and_grown_along_its_member_steps() {
    // A head of 1 cpu, `small` 1..3 workers of 1 cpu, `big` 2..4 workers of 2 cpu, in a queue of
    // 12 cpu of which a filler holds 3 until t=50. Along the member steps (minimums, then
    // small's extra members, then big's) 9 cpu take 6 members: the head, 3 small, 2 big.
    let mut e = quota_of_12_cpu_beside_a_filler(3);
    let set = cpu_set;
    let request = GroupRequest::simple("rc", 1, &[])
        .with_sets(vec![set("head", 1, 1, 1), set("small", 1, 3, 1), set("big", 2, 4, 2)])
        .unwrap();
    e.submit(GroupSpec { key: key("rc"), queue: "q".into(), priority_class: None, request, submitted_at: 1 }, 1)
        .unwrap();
    let ts = e.schedule(1);
    ready_all(&mut e, &ts, 1);
    let members = |e: &muster_queue::Engine| e.group(&key("rc")).unwrap().member_indices();
    assert_eq!(members(&e), [0, 1, 2, 3, 4, 5], "the head, all of small, big's minimum");
    e.check_invariants().unwrap();
    // The filler's 3 cpu back: 4 cpu of quota left, and big grows by its 2 extra workers.
    e.finished(&key("filler"), true, 50).unwrap();
    let ts = e.schedule(50);
    let grown = ts.iter().find_map(|t| match &t.reason {
        Reason::Grown { members } => Some(members.clone()),
        _ => None,
    });
    assert_eq!(grown, Some(vec![6, 7]), "{ts:?}");
    assert_eq!(e.group(&key("rc")).unwrap().member_count(), 8);
    // A second such group finds no quota left: the reason walks the same steps.
    let request = GroupRequest::simple("rc2", 1, &[])
        .with_sets(vec![set("head", 1, 1, 1), set("small", 1, 3, 1), set("big", 2, 4, 2)])
        .unwrap();
    e.submit(GroupSpec { key: key("rc2"), queue: "q".into(), priority_class: None, request, submitted_at: 51 }, 51)
        .unwrap();
    e.schedule(51);
    let reason = &e.group(&key("rc2")).unwrap().reason;
    assert!(reason.contains("queue q uses 12 of cpu") && reason.contains("it fits 0 of its members (0)"), "{reason}");
    assert!(reason.ends_with("its next member needs 1"), "{reason}");
    e.check_invariants().unwrap();
}

#[test]
fn an_elastic_group_grows_once_its_members_are_ready_though_nothing_else_changes() {
    // 2..4 members of 4 cpu on 2 nodes of 8, one node's half held by a filler until t=10. The
    // group starts with 3; the filler ends while it is still starting (growth waits for its
    // members to be ready), and its readiness alone must bring the cycle that grows it.
    let mut e = engine(graph(2, 8), EngineConfig::single_queue("q"));
    e.submit(spec("filler", "q", 1, 4, Some(10), 0), 0).unwrap();
    let ts = e.schedule(0);
    ready_all(&mut e, &ts, 0);
    e.submit(elastic("g", "q", 2, 4, 4, None, 1), 1).unwrap();
    e.schedule(1);
    assert_eq!((state(&e, "g"), e.group(&key("g")).unwrap().member_count()), (GroupState::Admitted, 3));
    e.finished(&key("filler"), true, 10).unwrap();
    e.schedule(10);
    assert_eq!(e.group(&key("g")).unwrap().member_count(), 3, "not grown while its members start");
    e.pods_ready(&key("g"), 3, 11).unwrap();
    e.schedule(11);
    assert_eq!(e.group(&key("g")).unwrap().member_count(), 4, "grown once ready");
    e.check_invariants().unwrap();
}

#[test]
fn an_elastic_group_grown_by_part_of_its_room_grows_again_once_its_new_members_are_ready() {
    // One node of 20 cpu, 12 of them held by a filler until t=10; 2..6 members of 4 cpu. The
    // group starts with 2; at t=10 it may grow by 3, tries 4, then 2 (growth halves its step).
    // The third waits for the new members to report ready, and that report alone must bring the
    // cycle that adds it.
    let mut e = engine(graph(1, 20), EngineConfig::single_queue("q"));
    e.submit(spec("filler", "q", 1, 12, Some(10), 0), 0).unwrap();
    let ts = e.schedule(0);
    ready_all(&mut e, &ts, 0);
    e.submit(elastic("g", "q", 2, 6, 4, None, 1), 1).unwrap();
    e.schedule(1);
    e.finished(&key("filler"), true, 10).unwrap();
    e.schedule(10);
    e.pods_ready(&key("g"), 2, 11).unwrap();
    e.schedule(11);
    assert_eq!(e.group(&key("g")).unwrap().member_count(), 4, "grown by 2 of the 3 it has room for");
    e.pods_ready(&key("g"), 4, 12).unwrap();
    e.schedule(12);
    assert_eq!(e.group(&key("g")).unwrap().member_count(), 5, "and by the third once they are ready");
    e.check_invariants().unwrap();
}

#[test]
fn optional_replicas_are_admitted_and_grown_whole_within_the_quota() {
    // One of three replicas of 2 members x 2 cpu: r0 required, r1 and r2 optional. The queue's
    // 12 cpu less a filler's 2 leave room for 5 members: r0 and r1, not half of r2.
    let mut e = quota_of_12_cpu_beside_a_filler(2);
    let replica = |name: &str, min: u32| cpu_set(name, min, 2, 2);
    let request = GroupRequest::simple("serve", 1, &[])
        .with_sets(vec![replica("r0", 2), replica("r1", 0), replica("r2", 0)])
        .unwrap();
    e.submit(GroupSpec { key: key("serve"), queue: "q".into(), priority_class: None, request, submitted_at: 1 }, 1)
        .unwrap();
    let ts = e.schedule(1);
    ready_all(&mut e, &ts, 1);
    let members = |e: &muster_queue::Engine| e.group(&key("serve")).unwrap().member_indices();
    assert_eq!(members(&e), [0, 1, 2, 3], "r0 and r1 whole");
    // The filler's 2 cpu free 1 member's quota: r2 stays out until both of its members fit.
    e.submit(spec("small", "q", 1, 2, Some(30), 2), 2).unwrap();
    let ts = e.schedule(2);
    ready_all(&mut e, &ts, 2);
    e.finished(&key("filler"), true, 10).unwrap();
    e.schedule(10);
    assert_eq!(members(&e), [0, 1, 2, 3], "room for one member of r2 is no room for r2");
    e.finished(&key("small"), true, 30).unwrap();
    let ts = e.schedule(30);
    let grown = ts.iter().find_map(|t| match &t.reason {
        Reason::Grown { members } => Some(members.clone()),
        _ => None,
    });
    assert_eq!(grown, Some(vec![4, 5]), "{ts:?}");
    e.check_invariants().unwrap();
}
