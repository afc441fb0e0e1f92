//! Optional sets (minimum 0): k of n alike replicas, each a gang of its own in one rack. The
//! group starts with the required k and takes each further replica whole, in its own rack, or
//! not at all; what it gives back is whole replicas too.

mod common;

use std::collections::BTreeSet;

use common::{GPU_NODES, check_invariants, rg};
use muster_graph::jobspec::{self, MemberSet, SubGroup, TopologyConstraint};
use muster_graph::{GraphError, GroupRequest, MatchOutcome, Policy, ResourceGraph};

/// Replica `name` of 4 whole 8-GPU nodes in one rack; `optional` gives it minimum 0.
fn replica(name: &str, optional: bool) -> MemberSet {
    MemberSet {
        name: name.into(),
        min_members: if optional { 0 } else { 4 },
        max_members: 4,
        requests: vec![("nvidia.com/gpu".into(), 8)],
        devices: Vec::new(),
        filter: Default::default(),
        topology: Some(TopologyConstraint::required("rack")),
    }
}

/// Two of four replicas, all in one block: r0 and r1 required, r2 and r3 optional.
fn two_of_four() -> GroupRequest {
    let sets = vec![replica("r0", false), replica("r1", false), replica("r2", true), replica("r3", true)];
    let mut group = GroupRequest::simple("serve", 1, &[]);
    group.topology = Some(TopologyConstraint::required("block"));
    group.with_sets(sets).unwrap()
}

fn busy(r: &mut ResourceGraph, name: &str, nodes: u32) -> u64 {
    match r.allocate(&GroupRequest::simple(name, nodes, &[("nvidia.com/gpu", 8)]), 0) {
        MatchOutcome::Allocated(id) => id,
        other => panic!("{name}: {other:?}"),
    }
}

fn racks(r: &ResourceGraph, id: u64, members: std::ops::Range<u32>) -> BTreeSet<String> {
    let a = r.allocation(id).unwrap();
    (a.members.iter().filter(|m| members.contains(&m.index)))
        .map(|m| r.graph.vertex(r.graph.ancestor_at_level(m.node, "rack").unwrap()).meta.name.clone())
        .collect()
}

fn indices(r: &ResourceGraph, id: u64) -> Vec<u32> {
    r.allocation(id).unwrap().members.iter().map(|m| m.index).collect()
}

#[test]
fn optional_replicas_do_not_stretch_the_run_time() {
    // Replicas serve beside the required ones rather than share their work: two or four placed,
    // the run is as long, so a window searched for the fewest members holds for any more (before,
    // two replicas ran 600 s and three 1,200 s, and a group placed with its extras overran the
    // window it was searched in, onto a reservation behind it).
    let mut g = two_of_four();
    g.duration = Some(600);
    for members in [8, 12, 16] {
        assert_eq!(g.run_time_with(members), Some(600), "{members} members");
    }
    // Beside an elastic worker set, only the workers spread the work.
    let mut workers = replica("workers", false);
    (workers.min_members, workers.max_members, workers.topology) = (2, 4, None);
    let mut mixed = GroupRequest::simple("train", 1, &[]).with_sets(vec![workers, replica("spare", true)]).unwrap();
    mixed.duration = Some(600);
    assert_eq!(
        (mixed.run_time_with(2), mixed.run_time_with(4), mixed.run_time_with(8)),
        (Some(1200), Some(600), Some(600))
    );
}

#[test]
fn member_counts_take_optional_sets_whole() {
    let g = two_of_four();
    assert_eq!((g.min_members, g.max_members), (8, 16));
    assert_eq!(g.member_steps()[..4], [(0, 4), (1, 4), (2, 4), (3, 4)]);
    for (asked, whole) in [(8, 8), (10, 8), (11, 8), (12, 12), (15, 12), (16, 16), (3, 3)] {
        assert_eq!(g.whole_count(asked), whole, "{asked} members");
    }
    let narrowed = g.narrowed_to(14);
    assert_eq!(narrowed.max_members, 12, "a quota of 14 takes one optional replica, not half of another");
    assert_eq!(g.narrowed_to(5).max_members, 8, "never below the minimum");
    assert!(g.meets_minimum(0..8), "the two required replicas");
    assert!(!g.meets_minimum((0..4).chain(8..12)), "an optional replica stands in for no required one");
    let held: Vec<u32> = (0..12).collect();
    assert_eq!(g.surplus(held.iter().copied()), [11, 10, 9, 8], "an optional replica is all surplus");
    let some: BTreeSet<u32> = [9].into();
    assert_eq!(g.with_whole_sets(some, held.iter().copied()), (8..12).collect(), "given back whole");
    let required: BTreeSet<u32> = [1].into();
    assert_eq!(g.with_whole_sets(required.clone(), held), required, "a required set may give back part");
}

#[test]
fn k_of_n_replicas_start_with_those_that_fit_and_take_the_rest_whole_in_a_rack() {
    let mut r = rg(GPU_NODES, Policy::First);
    // Block 0 (racks 0-3) busy, and half of racks 4 and 5: block 1 has racks 6 and 7 free, and
    // four nodes in racks 4 and 5, no rack of which is whole.
    busy(&mut r, "busy", 18);
    let rest_of_rack_4 = busy(&mut r, "filler", 2);
    let half = busy(&mut r, "half", 2);
    r.cancel(rest_of_rack_4).unwrap();
    let group = two_of_four();
    let id = match r.allocate(&group, 0) {
        MatchOutcome::Allocated(id) => id,
        other => panic!("{other:?}"),
    };
    assert_eq!(indices(&r, id), (0..8).collect::<Vec<_>>(), "the two required replicas, none optional");
    assert_eq!(racks(&r, id, 0..4).len(), 1);
    assert_eq!(racks(&r, id, 4..8).len(), 1);
    assert_ne!(racks(&r, id, 0..4), racks(&r, id, 4..8));
    check_invariants(&r);
    // Four nodes are free, in two racks: a replica needs one rack.
    assert_eq!(r.grow(id, 4, 0).unwrap(), None);
    assert!(matches!(r.grow(id, 2, 0), Err(GraphError::PartOfOptionalSet { wanted: 2, whole: 4, .. })));
    r.cancel(half).unwrap();
    assert_eq!(r.grow(id, 4, 0).unwrap(), Some(vec![8, 9, 10, 11]), "rack 5 is whole now");
    assert_eq!(racks(&r, id, 8..12).len(), 1, "{:?}", racks(&r, id, 8..12));
    check_invariants(&r);
    let blocks: BTreeSet<String> = (0..12)
        .map(|i| r.allocation(id).unwrap().members[i].node)
        .map(|n| r.graph.vertex(r.graph.ancestor_at_level(n, "block").unwrap()).meta.name.clone())
        .collect();
    assert_eq!(blocks.len(), 1);
    // On an empty cluster every replica is placed, each in a rack of its own.
    let mut r = rg(GPU_NODES, Policy::First);
    let MatchOutcome::Allocated(id) = r.allocate(&group, 0) else { panic!("empty cluster") };
    assert_eq!(indices(&r, id).len(), 16);
    let all: BTreeSet<String> = (0..4).flat_map(|k| racks(&r, id, k * 4..k * 4 + 4)).collect();
    assert_eq!(all.len(), 4);
    for k in 0..4 {
        assert_eq!(racks(&r, id, k * 4..k * 4 + 4).len(), 1);
    }
    check_invariants(&r);
}

#[test]
fn optional_sets_are_refused_where_they_make_no_gang() {
    let all_optional = GroupRequest::simple("x", 1, &[]).with_sets(vec![replica("a", true), replica("b", true)]);
    assert!(all_optional.unwrap_err().message.contains("make at least one set required"));
    let sub =
        SubGroup { name: "spare".into(), sets: vec!["b".into()], topology: TopologyConstraint::required("block") };
    let group = GroupRequest::simple("x", 1, &[]).with_sets(vec![replica("a", false), replica("b", true)]).unwrap();
    let e = group.with_subgroups(vec![sub]).unwrap_err();
    assert_eq!(e.path, "subgroups[0].sets");
    let g = jobspec::parse(
        "g.yaml",
        "name: serve\nsets:\n  - {name: r0, members: 4, resources: {nvidia.com/gpu: 8}}\n  \
         - {name: r1, members: 4, resources: {nvidia.com/gpu: 8}, optional: true}\n",
    )
    .unwrap();
    assert_eq!((g.min_members, g.max_members), (4, 8));
    assert!(g.is_optional(1) && !g.is_optional(0));
    let e = jobspec::parse(
        "g.yaml",
        "name: serve\nsets:\n  - {name: r0, members: 4, resources: {cpu: 1}}\n  \
         - {name: r1, members: {min: 1, max: 4}, resources: {cpu: 1}, optional: true}\n",
    )
    .unwrap_err();
    assert_eq!(e.path, "sets[1].members", "{e}");
}
