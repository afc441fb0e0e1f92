//! Gangs of gangs: sub-groups of a group's sets, each kept within one domain of its own level
//! inside the group's, placed all at once or not at all, and grown inside the domain they share;
//! and how the group's, a sub-group's and a set's levels nest.

mod common;

use std::collections::BTreeSet;

use common::{GPU_NODES, check_invariants, fingerprint, rg};
use muster_graph::graph::NodeId;
use muster_graph::jobspec::{MemberSet, SubGroup, TopologyConstraint};
use muster_graph::{GroupRequest, MatchOutcome, Policy, ResourceGraph};

fn set(name: &str, min: u32, max: u32, requests: &[(&str, u64)]) -> MemberSet {
    MemberSet {
        name: name.into(),
        min_members: min,
        max_members: max,
        requests: requests.iter().map(|(r, a)| (r.to_string(), *a)).collect(),
        devices: Vec::new(),
        filter: Default::default(),
        topology: None,
    }
}

fn subgroup(name: &str, sets: &[&str], level: &str) -> SubGroup {
    SubGroup {
        name: name.into(),
        sets: sets.iter().map(|s| s.to_string()).collect(),
        topology: TopologyConstraint::required(level),
    }
}

/// Disaggregated serving: a prefill and a decode gang, each a leader that takes a whole node's
/// cores and `workers` GPU workers, each gang in one rack, both in one block.
fn serving(workers: u32) -> GroupRequest {
    let leader = |name: &str| set(name, 1, 1, &[("cpu", 64_000)]);
    let worker = |name: &str| set(name, workers, workers, &[("cpu", 1000), ("nvidia.com/gpu", 8)]);
    let mut group = GroupRequest::simple("serve", 1, &[]);
    group.topology = Some(TopologyConstraint::required("block"));
    group
        .with_sets(vec![leader("prefill-leader"), worker("prefill"), leader("decode-leader"), worker("decode")])
        .unwrap()
        .with_subgroups(vec![
            subgroup("prefill", &["prefill-leader", "prefill"], "rack"),
            subgroup("decode", &["decode-leader", "decode"], "rack"),
        ])
        .unwrap()
}

fn allocate(r: &mut ResourceGraph, req: &GroupRequest) -> Option<u64> {
    match r.allocate(req, 0) {
        MatchOutcome::Allocated(id) => Some(id),
        MatchOutcome::Busy(_) => None,
        other => panic!("{}: {other:?}", req.name),
    }
}

/// The name of the domain of `level` that member `index` of allocation `id` runs in.
fn domain_of(r: &ResourceGraph, id: u64, index: u32, level: &str) -> String {
    let a = r.allocation(id).unwrap();
    let m = a.members.iter().find(|m| m.index == index).unwrap();
    let v = r.graph.ancestor_at_level(m.node, level).unwrap();
    r.graph.vertex(v).meta.name.clone()
}

fn domains(r: &ResourceGraph, id: u64, members: std::ops::Range<u32>, level: &str) -> BTreeSet<String> {
    members.map(|i| domain_of(r, id, i, level)).collect()
}

#[test]
fn each_sub_group_shares_a_rack_of_its_own_with_its_leader() {
    let mut r = rg(GPU_NODES, Policy::First);
    // One GPU node of the first rack is busy: its three other nodes take a gang's workers but
    // then no node is left there for its leader, so the gang moves to the next rack whole.
    allocate(&mut r, &GroupRequest::simple("busy", 1, &[("cpu", 1000), ("nvidia.com/gpu", 8)])).unwrap();
    let group = serving(3);
    let id = allocate(&mut r, &group).expect("block 0 has racks for both gangs");
    let (prefill, decode) = (0..4, 4..8);
    let prefill_racks = domains(&r, id, prefill.clone(), "rack");
    let decode_racks = domains(&r, id, decode.clone(), "rack");
    assert_eq!(prefill_racks.len(), 1, "prefill's leader and workers share a rack: {prefill_racks:?}");
    assert_eq!(decode_racks.len(), 1, "decode's leader and workers share a rack: {decode_racks:?}");
    assert!(prefill_racks.is_disjoint(&decode_racks), "a rack of 4 nodes holds one gang");
    let first_rack = r.graph.ancestor_at_level(NodeId(0), "rack").unwrap();
    let first_rack = &r.graph.vertex(first_rack).meta.name;
    assert!(!prefill_racks.contains(first_rack) && !decode_racks.contains(first_rack), "the busy rack holds no gang");
    assert_eq!(domains(&r, id, 0..8, "block").len(), 1, "both gangs in one block");
    check_invariants(&r);
}

#[test]
fn a_sub_group_no_rack_can_hold_is_unsatisfiable_and_named() {
    let mut r = rg(GPU_NODES, Policy::First);
    // Four workers and a leader of a whole node: five nodes, and a rack has four.
    let group = serving(4);
    match r.allocate(&group, 0) {
        MatchOutcome::Unsatisfiable(why) => {
            assert!(why.contains("prefill in one rack, decode in one rack"), "{why}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn when_one_sub_group_cannot_be_placed_none_of_the_group_is() {
    let mut r = rg(GPU_NODES, Policy::First);
    // Every rack but one has a busy node: one gang of a leader and three workers fits, the other
    // does not, and the graph stays as it was.
    for rack in 0..8u32 {
        if rack != 5 {
            let mut busy = GroupRequest::simple(&format!("busy-{rack}"), 1, &[("cpu", 1000), ("nvidia.com/gpu", 8)]);
            busy.filter.node_selector.insert("muster.dev/rack".into(), rack_label(&r, rack));
            allocate(&mut r, &busy).unwrap();
        }
    }
    let before = fingerprint(&r.graph);
    assert_eq!(allocate(&mut r, &serving(3)), None);
    assert_eq!(fingerprint(&r.graph), before, "nothing of the group is left behind");
    check_invariants(&r);
}

/// The rack label value of the `rack`-th rack, as the first node of that rack carries it.
fn rack_label(r: &ResourceGraph, rack: u32) -> String {
    r.graph.node(NodeId(rack * 4)).labels["muster.dev/rack"].clone()
}

#[test]
fn a_growing_set_grows_inside_its_sub_groups_rack() {
    let mut r = rg(GPU_NODES, Policy::First);
    // A head and elastic workers kept in one rack, in a group with no constraint of its own. The
    // first rack is full when the group starts, so it starts in the second; once the first is
    // free again, the nodes that come first are there, and still the workers grow only in the
    // rack their head shares.
    let full = allocate(&mut r, &GroupRequest::simple("full", 4, &[("cpu", 64_000), ("nvidia.com/gpu", 8)])).unwrap();
    let group = GroupRequest::simple("ray", 1, &[])
        .with_sets(vec![set("head", 1, 1, &[("cpu", 4000)]), set("workers", 2, 4, &[("nvidia.com/gpu", 4)])])
        .unwrap()
        .with_subgroups(vec![subgroup("cluster", &["head", "workers"], "rack")])
        .unwrap();
    let id = allocate(&mut r, &group).unwrap();
    let rack = domain_of(&r, id, 0, "rack");
    r.shrink(id, &[3, 4]).unwrap();
    r.cancel(full).unwrap();
    let added = r.grow(id, 2, 0).unwrap().expect("the rack has room for two more");
    assert_eq!(added, [3, 4]);
    for i in added {
        assert_eq!(domain_of(&r, id, i, "rack"), rack, "member {i} left its sub-group's rack");
    }
    check_invariants(&r);
}

#[test]
fn a_set_level_wider_than_the_groups_holds_inside_the_groups_domain() {
    let mut r = rg(GPU_NODES, Policy::First);
    // The group within one rack, its workers "within one block": the rack is in one block, so
    // the set's level holds wherever the group's does.
    let mut workers = set("workers", 3, 3, &[("nvidia.com/gpu", 8)]);
    workers.topology = Some(TopologyConstraint::required("block"));
    let mut group = GroupRequest::simple("narrow", 1, &[]);
    group.topology = Some(TopologyConstraint::required("rack"));
    let group = group.with_sets(vec![set("head", 1, 1, &[("cpu", 1000)]), workers]).unwrap();
    let id = allocate(&mut r, &group).expect("one rack holds the group");
    assert_eq!(domains(&r, id, 0..4, "rack").len(), 1);
    check_invariants(&r);
}

#[test]
fn a_set_with_a_level_of_its_own_grows_only_in_its_domain() {
    let mut r = rg(GPU_NODES, Policy::First);
    // Elastic workers required to share a rack, in a group with no constraint: they start in the
    // second rack (the first is full). With the first rack free again and the second full, the
    // workers may not grow into the first: they would no longer share one rack.
    let full = allocate(&mut r, &GroupRequest::simple("full", 4, &[("cpu", 64_000), ("nvidia.com/gpu", 8)])).unwrap();
    let mut workers = set("workers", 2, 4, &[("nvidia.com/gpu", 8)]);
    workers.topology = Some(TopologyConstraint::required("rack"));
    let group = GroupRequest::simple("train", 1, &[])
        .with_sets(vec![set("launcher", 1, 1, &[("cpu", 1000)]), workers])
        .unwrap();
    let id = allocate(&mut r, &group).unwrap();
    let rack = domain_of(&r, id, 1, "rack");
    r.shrink(id, &[3, 4]).unwrap();
    r.cancel(full).unwrap();
    let mut rest = GroupRequest::simple("rest", 2, &[("nvidia.com/gpu", 8)]);
    rest.filter.node_selector.insert("muster.dev/rack".into(), rack.clone());
    let rest = allocate(&mut r, &rest).expect("the workers' rack has two nodes left");
    assert_eq!(r.grow(id, 2, 0).unwrap(), None, "the workers' rack is full: they do not grow elsewhere");
    r.cancel(rest).unwrap();
    let added = r.grow(id, 2, 0).unwrap().expect("the workers' rack has room again");
    for i in added {
        assert_eq!(domain_of(&r, id, i, "rack"), rack, "member {i} left its set's rack");
    }
    assert_eq!(r.allocation(id).unwrap().domain, None, "the group's own domain stays the whole cluster");
    check_invariants(&r);
}
