//! Each policy and operation on small clusters where the right answer is known.

mod common;

use std::collections::BTreeSet;

use common::{check_invariants, fingerprint, rg};
use muster_graph::jobspec::{ConstraintMode, TopologyConstraint};
use muster_graph::{GraphError, GroupRequest, ImportedMember, MatchOutcome, Policy, ResourceGraph};

const RACKS: &str = "
name: t
topology: [{level: rack, label: muster.dev/rack}]
nodeClasses:
  - name: a
    count: 8
    capacity: {cpu: 8, memory: 32Gi, pods: 110}
    spread: {rack: 4}
  - name: small
    count: 2
    capacity: {cpu: 8, memory: 32Gi, pods: 110}
    spread: {rack: 2}
";

fn cpu(name: &str, members: u32, cores: u64) -> GroupRequest {
    GroupRequest::simple(name, members, &[("cpu", cores * 1000)])
}

fn allocated(rg: &mut ResourceGraph, req: &GroupRequest) -> u64 {
    match rg.allocate(req, 0) {
        MatchOutcome::Allocated(id) => id,
        other => panic!("expected an allocation of {}, got {other:?}", req.name),
    }
}

fn nodes_of(rg: &ResourceGraph, id: u64) -> Vec<String> {
    rg.allocation(id).unwrap().members.iter().map(|m| rg.graph.node(m.node).name.clone()).collect()
}

fn distinct(v: &[String]) -> usize {
    v.iter().collect::<BTreeSet<_>>().len()
}

#[test]
fn first_fit_fills_in_id_order_and_high_id_from_the_end() {
    let mut r = rg(RACKS, Policy::First);
    let id = allocated(&mut r, &cpu("g", 3, 4));
    assert_eq!(nodes_of(&r, id), ["a-0", "a-0", "a-1"]);
    let mut r = rg(RACKS, Policy::HighId);
    let id = allocated(&mut r, &cpu("g", 3, 4));
    assert_eq!(nodes_of(&r, id), ["small-1", "small-1", "small-0"]);
}

#[test]
fn pack_uses_fewest_nodes_and_spread_the_most() {
    let mut r = rg(RACKS, Policy::First);
    // Leave a-0 with 2 cores free and every other node empty.
    allocated(&mut r, &cpu("filler", 1, 6));
    let mut pack = r.clone();
    pack.policy = Policy::Pack;
    let id = allocated(&mut pack, &cpu("g", 8, 1));
    assert_eq!(distinct(&nodes_of(&pack, id)), 1, "8 one-core members fit on one empty node");
    let mut spread = r.clone();
    spread.policy = Policy::Spread;
    let id = allocated(&mut spread, &cpu("g", 8, 1));
    let nodes = nodes_of(&spread, id);
    assert_eq!(distinct(&nodes), 8, "one member per node");
    assert!(!nodes.contains(&"a-0".to_string()), "the most allocated node is used last");
}

#[test]
fn pack_fills_a_node_in_use_before_it_breaks_an_empty_one() {
    // A half-used node in each rack of the a-nodes; the rest empty.
    let mut r = rg(RACKS, Policy::First);
    let half = allocated(&mut r, &cpu("half", 1, 4));
    let held = nodes_of(&r, half);
    r.policy = Policy::Pack;
    // A small group that fits the half left: there, not on an empty node.
    let id = allocated(&mut r, &cpu("small", 1, 4));
    assert_eq!(nodes_of(&r, id), held, "a one-member group takes the free half of a node in use");
    // A group that fits one empty node whole still takes one node, not two halves.
    allocated(&mut r, &cpu("half-2", 1, 4));
    let id = allocated(&mut r, &cpu("pair", 2, 4));
    assert_eq!(distinct(&nodes_of(&r, id)), 1, "two 4-core members on one empty node");
    check_invariants(&r);
}

#[test]
fn locality_picks_the_smallest_domain_that_fits() {
    let mut r = rg(RACKS, Policy::Locality);
    // 12 cores fit within one rack; the 2-node rack (small-*) fits it most tightly.
    let id = allocated(&mut r, &cpu("g", 3, 4));
    let nodes = nodes_of(&r, id);
    assert!(nodes.iter().all(|n| n.starts_with("small-")), "{nodes:?}");
    // 40 cores fit in no rack of 32: falls back to the cluster.
    let id = allocated(&mut r, &cpu("big", 10, 4));
    assert_eq!(r.allocation(id).unwrap().members.len(), 10);
}

#[test]
fn required_topology_keeps_members_in_one_rack_or_refuses() {
    let mut r = rg(RACKS, Policy::First);
    let mut req = cpu("g", 8, 4);
    req.topology = Some(TopologyConstraint::required("rack"));
    let id = allocated(&mut r, &req);
    let racks: BTreeSet<_> = r
        .allocation(id)
        .unwrap()
        .members
        .iter()
        .map(|m| r.graph.node(m.node).labels["muster.dev/rack"].clone())
        .collect();
    assert_eq!(racks.len(), 1);
    let mut too_big = cpu("g2", 9, 4);
    too_big.topology = req.topology.clone();
    let before = fingerprint(&r.graph);
    match r.allocate(&too_big, 0) {
        MatchOutcome::Unsatisfiable(reason) => assert!(reason.contains("in one rack"), "{reason}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(fingerprint(&r.graph), before, "a refused match changes nothing");
    // Preferred falls back to spanning racks.
    too_big.topology.as_mut().unwrap().mode = ConstraintMode::Preferred;
    let id = allocated(&mut r, &too_big);
    assert_eq!(r.allocation(id).unwrap().members.len(), 9);
    check_invariants(&r);
}

#[test]
fn best_fit_fills_the_tightest_node_first() {
    let mut r = rg(RACKS, Policy::First);
    allocated(&mut r, &cpu("f1", 1, 5)); // a-0: 3 free
    allocated(&mut r, &cpu("f2", 1, 6)); // a-1: 2 free
    r.policy = Policy::BestFit;
    let id = allocated(&mut r, &cpu("g", 2, 1));
    assert_eq!(nodes_of(&r, id), ["a-1", "a-1"]);
}

#[test]
fn all_or_nothing_when_the_group_does_not_fit() {
    let mut r = rg(RACKS, Policy::First);
    allocated(&mut r, &cpu("half", 10, 4));
    let before = fingerprint(&r.graph);
    match r.allocate(&cpu("g", 11, 4), 0) {
        MatchOutcome::Busy(reason) => assert!(reason.contains("cpu"), "{reason}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(fingerprint(&r.graph), before);
}

#[test]
fn elastic_groups_take_what_fits_between_min_and_max() {
    let mut r = rg(RACKS, Policy::First);
    allocated(&mut r, &cpu("most", 15, 4)); // 5 slots of 4 cores left
    let mut req = cpu("elastic", 8, 4);
    req.min_members = 3;
    let id = allocated(&mut r, &req);
    assert_eq!(r.allocation(id).unwrap().members.len(), 5);
    req.name = "elastic2".into();
    assert!(matches!(r.allocate(&req, 0), MatchOutcome::Busy(_)));
}

#[test]
fn exclusive_and_members_per_node() {
    let mut r = rg(RACKS, Policy::First);
    allocated(&mut r, &cpu("small", 1, 1)); // a-0 is no longer idle
    let mut req = cpu("x", 4, 1);
    req.members_per_node = Some(2);
    req.exclusive = true;
    let id = allocated(&mut r, &req);
    let nodes = nodes_of(&r, id);
    assert_eq!(nodes, ["a-1", "a-1", "a-2", "a-2"]);
    // Exclusive nodes are held whole.
    let a1 = r.graph.node(r.graph.node_id("a-1").unwrap());
    assert!(a1.free.iter().all(|f| *f == 0));
    check_invariants(&r);
}

#[test]
fn filters_respect_selectors_and_taints() {
    let yaml = "
name: t
nodeClasses:
  - name: plain
    count: 2
    capacity: {cpu: 8}
  - name: gpu
    count: 2
    capacity: {cpu: 8}
    devices: {nvidia.com/gpu: 2}
    labels: {kind: gpu}
    taints: [{key: gpu, value: 'yes', effect: NoSchedule}]
";
    let mut r = rg(yaml, Policy::First);
    let mut req = GroupRequest::simple("g", 2, &[("cpu", 1000), ("nvidia.com/gpu", 1)]);
    assert!(matches!(r.allocate(&req, 0), MatchOutcome::Unsatisfiable(_)), "untolerated taint");
    req.filter.tolerations = vec![muster_graph::filter::Toleration {
        key: "gpu".into(),
        operator: muster_graph::filter::TolerationOperator::Exists,
        value: String::new(),
        effect: None,
    }];
    let id = allocated(&mut r, &req);
    let a = r.allocation(id).unwrap();
    assert!(a.members.iter().all(|m| r.graph.node(m.node).name.starts_with("gpu-") && m.devices.len() == 1));
    let devices: BTreeSet<_> = a.members.iter().flat_map(|m| m.devices.clone()).collect();
    assert_eq!(devices.len(), 2, "each member its own device");
    let mut sel = cpu("sel", 1, 1);
    sel.filter.node_selector.insert("kind".into(), "cpu".into());
    match r.allocate(&sel, 0) {
        MatchOutcome::Unsatisfiable(reason) => assert!(reason.contains("selector"), "{reason}"),
        other => panic!("{other:?}"),
    }
    check_invariants(&r);
}

#[test]
fn reservation_starts_when_capacity_returns_and_backfill_never_delays_it() {
    let mut r = rg(RACKS, Policy::First);
    let mut long = cpu("long", 10, 8);
    long.duration = Some(100);
    allocated(&mut r, &long); // 80 of 80 cores until t=100
    let mut big = cpu("big", 10, 8);
    big.duration = Some(50);
    match r.allocate_orelse_reserve(&big, 0) {
        MatchOutcome::Reserved { at, .. } => assert_eq!(at, 100),
        other => panic!("{other:?}"),
    }
    r.cancel(1).unwrap(); // "long" finishes early at t=10
    // Short job ending before t=100 may backfill; one running past it may not.
    let mut short = cpu("short", 10, 8);
    short.duration = Some(80);
    assert!(matches!(r.allocate(&short, 10), MatchOutcome::Allocated(_)));
    let mut over = cpu("over", 1, 1);
    over.duration = Some(200);
    assert!(matches!(r.allocate(&over, 10), MatchOutcome::Busy(_)), "would run into the reservation");
    check_invariants(&r);
}

#[test]
fn an_end_moves_later_only_where_no_reservation_is_in_the_way() {
    let mut r = rg(RACKS, Policy::First);
    let mut whole = cpu("whole", 10, 8);
    whole.duration = Some(100);
    let id = allocated(&mut r, &whole);
    let mut next = cpu("next", 1, 8);
    next.duration = Some(10);
    let MatchOutcome::Reserved { id: reserved, at } = r.allocate_orelse_reserve(&next, 0) else { panic!("reserved") };
    assert_eq!(at, 100);
    assert!(matches!(r.extend_end(id, 150), Err(GraphError::ReservationInTheWay { .. })));
    assert_eq!(r.allocation(id).unwrap().end, 100, "refused, nothing changed");
    r.cancel(reserved).unwrap();
    r.extend_end(id, 150).unwrap();
    assert_eq!(r.allocation(id).unwrap().end, 150);
    let MatchOutcome::Reserved { at, .. } = r.allocate_orelse_reserve(&next, 0) else { panic!("reserved") };
    assert_eq!(at, 150, "plans follow the new end");
    check_invariants(&r);
}

#[test]
fn a_running_group_grows_past_its_rack_only_when_the_rack_is_preferred() {
    for (mode, grows) in [(ConstraintMode::Preferred, true), (ConstraintMode::Required, false)] {
        let mut r = rg(RACKS, Policy::First);
        // Four whole nodes: a rack of class a (four nodes) holds them.
        let mut req = cpu("g", 4, 8);
        req.topology = Some(TopologyConstraint { mode, ..TopologyConstraint::required("rack") });
        let id = allocated(&mut r, &req);
        assert_eq!(distinct(&rack_of(&r, id)), 1, "{mode:?}: placed in one rack");
        // Resized while it runs: two more members, which its rack has no room for.
        r.set_member_bounds(id, 4, 6).unwrap();
        let added = r.grow(id, 2, 0).unwrap();
        assert_eq!(added.is_some(), grows, "{mode:?}: {added:?}");
        if grows {
            let racks = rack_of(&r, id);
            assert_eq!(racks.len(), 6);
            assert_eq!(distinct(&racks[4..]), 1, "the new members keep to one rack where they fit");
        }
        check_invariants(&r);
    }
}

fn rack_of(rg: &ResourceGraph, id: u64) -> Vec<String> {
    let members = &rg.allocation(id).unwrap().members;
    members.iter().map(|m| rg.graph.node(m.node).labels["muster.dev/rack"].clone()).collect()
}

#[test]
fn shrink_grow_cancel_and_import_restore_state() {
    let mut r = rg(RACKS, Policy::First);
    let empty = fingerprint(&r.graph);
    let mut req = cpu("g", 6, 2);
    req.min_members = 2;
    req.max_members = 8;
    let id = allocated(&mut r, &req);
    assert_eq!(r.allocation(id).unwrap().members.len(), 8, "elastic groups start at max when it fits");
    assert!(r.grow(id, 1, 0).is_err(), "past max");
    r.shrink(id, &[6, 7]).unwrap();
    let at_six = fingerprint(&r.graph);
    let added = r.grow(id, 2, 0).unwrap().expect("room to grow");
    assert_eq!(added, [6, 7], "released indices are reused, as indexed Jobs do");
    r.shrink(id, &[6, 7]).unwrap();
    assert_eq!(fingerprint(&r.graph), at_six, "shrinking the grown members restores the state");
    assert!(r.shrink(id, &[42]).is_err());
    let members: Vec<ImportedMember> = r
        .allocation(id)
        .unwrap()
        .members
        .iter()
        .map(|m| ImportedMember { index: m.index, node: r.graph.node(m.node).name.clone(), devices: vec![] })
        .collect();
    r.cancel(id).unwrap();
    assert_eq!(fingerprint(&r.graph), empty);
    r.import(id, &req, &members, (0, ResourceGraph::end_of(0, &req, members.len() as u32))).unwrap();
    assert_eq!(fingerprint(&r.graph), at_six, "import rebuilds the same state");
    assert!(
        r.import(id, &req, &members, (0, ResourceGraph::end_of(0, &req, members.len() as u32))).is_err(),
        "ids are unique"
    );
    r.cancel(id).unwrap();
    assert_eq!(fingerprint(&r.graph), empty);
}

#[test]
fn import_refuses_overcommit_and_changes_nothing() {
    let mut r = rg(RACKS, Policy::First);
    let req = cpu("g", 3, 4);
    let members: Vec<ImportedMember> =
        (0..3).map(|i| ImportedMember { index: i, node: "a-0".into(), devices: vec![] }).collect();
    let before = fingerprint(&r.graph);
    let err =
        r.import(9, &req, &members, (0, ResourceGraph::end_of(0, &req, members.len() as u32))).unwrap_err().to_string();
    assert!(err.contains("a-0") && err.contains("cpu"), "{err}");
    assert_eq!(fingerprint(&r.graph), before);
}

#[test]
fn node_changes_while_allocations_exist() {
    let mut r = rg(RACKS, Policy::First);
    let id = allocated(&mut r, &cpu("g", 4, 4)); // a-0, a-1
    r.set_unschedulable("a-2", true).unwrap();
    let id2 = allocated(&mut r, &cpu("h", 2, 8));
    assert_eq!(nodes_of(&r, id2), ["a-3", "a-4"], "cordoned a-2 is skipped");
    r.set_up("a-5", false).unwrap();
    let affected = r.remove_node("a-0").unwrap();
    assert_eq!(affected, vec![(id, vec![0, 1])]);
    assert_eq!(r.allocation(id).unwrap().members.len(), 2);
    let stat = r.stat();
    assert_eq!((stat.nodes, stat.schedulable_nodes), (9, 7));
    r.add_node(&muster_graph::NodeSpec {
        name: "new-0".into(),
        pooled: vec![("cpu".into(), 8000)],
        ..Default::default()
    })
    .unwrap();
    assert!(r.add_node(&muster_graph::NodeSpec { name: "new-0".into(), ..Default::default() }).is_err());
    check_invariants(&r);
}

/// The description `update_node` gets for node `name` of RACKS, with its rack and capacity.
fn rack_node(name: &str, rack: &str, cores: u64) -> muster_graph::NodeSpec {
    muster_graph::NodeSpec {
        name: name.into(),
        topology: vec![("rack".into(), rack.into())],
        pooled: vec![("cpu".into(), cores * 1000), ("memory".into(), 32 << 30), ("pods".into(), 110)],
        ..Default::default()
    }
}

#[test]
fn node_labels_taints_and_capacity_change_under_running_allocations() {
    let mut r = rg(RACKS, Policy::First);
    let rack = r.graph.node(r.graph.node_id("a-0").unwrap()).labels["muster.dev/rack"].clone();
    let id = allocated(&mut r, &cpu("g", 2, 4)); // both on a-0
    let mut spec = rack_node("a-0", &rack, 8);
    spec.labels.insert("pool".into(), "blue".into());
    spec.taints = vec![muster_graph::graph::Taint {
        key: "maint".into(),
        value: String::new(),
        effect: muster_graph::graph::TaintEffect::NoSchedule,
    }];
    assert_eq!(r.update_node(&spec).unwrap(), muster_graph::NodeUpdate::Applied);
    assert_eq!(nodes_of(&r, id), ["a-0", "a-0"], "running members stay");
    let mut blue = cpu("blue", 1, 1);
    blue.filter.node_selector.insert("pool".into(), "blue".into());
    assert!(matches!(r.allocate(&blue, 0), MatchOutcome::Unsatisfiable(_)), "the only blue node is tainted");
    spec.taints.clear();
    r.update_node(&spec).unwrap();
    r.cancel(id).unwrap();
    let b = allocated(&mut r, &blue);
    assert_eq!(nodes_of(&r, b), ["a-0"], "the new label is matched");
    r.cancel(b).unwrap();
    check_invariants(&r);

    // Capacity shrinks below what runs there: nothing new fits until enough of it ends.
    let id = allocated(&mut r, &cpu("g", 2, 4));
    r.update_node(&rack_node("a-0", &rack, 4)).unwrap();
    let n = r.graph.node_id("a-0").unwrap();
    assert_eq!(r.graph.node(n).free[0], 0);
    r.shrink(id, &[1]).unwrap();
    assert_eq!(r.graph.node(n).free[0], 0, "4 of the 4 cores still held");
    r.shrink(id, &[0]).ok();
    r.cancel(id).ok();
    assert_eq!(r.graph.node(n).free[0], 4000);
    assert_eq!(r.graph.node(n).capacity[0], 4000);
    check_invariants(&r);
}

#[test]
fn node_moves_rack_only_once_nothing_runs_on_it() {
    let mut r = rg(RACKS, Policy::First);
    let n = r.graph.node_id("a-0").unwrap();
    let old_rack = r.graph.node(n).labels["muster.dev/rack"].clone();
    let id = allocated(&mut r, &cpu("g", 1, 4));
    let moved = rack_node("a-0", "rack-new", 8);
    assert_eq!(r.update_node(&moved).unwrap(), muster_graph::NodeUpdate::ShapeDeferred);
    let rack_of = |r: &ResourceGraph| {
        let n = r.graph.node_id("a-0").unwrap();
        r.graph.vertex(r.graph.vertex(r.graph.node(n).vertex).parent.unwrap()).meta.name.clone()
    };
    assert_eq!(rack_of(&r), old_rack);
    r.cancel(id).unwrap();
    r.set_up("a-0", false).unwrap();
    assert_eq!(r.update_node(&moved).unwrap(), muster_graph::NodeUpdate::Applied);
    assert_eq!(rack_of(&r), "rack-new");
    let n = r.graph.node_id("a-0").unwrap();
    assert!(!r.graph.node(n).up, "a node down stays down when rebuilt");
    assert_eq!(r.stat().nodes, 10);
    // A refused shape changes nothing.
    let mut bad = moved.clone();
    bad.devices = vec![("cpu".into(), 2)];
    assert!(r.update_node(&bad).is_err());
    assert_eq!(rack_of(&r), "rack-new");
    check_invariants(&r);
}

#[test]
fn reserve_finds_the_same_start_as_allocate_orelse_reserve_and_waits_for_reservations_to_end() {
    let mut r = rg(RACKS, Policy::First);
    let mut long = cpu("long", 10, 8);
    long.duration = Some(100);
    allocated(&mut r, &long);
    let mut big = cpu("big", 10, 8);
    big.duration = Some(50);
    let mut other = r.clone();
    let at = |o: MatchOutcome| match o {
        MatchOutcome::Reserved { at, .. } => at,
        o => panic!("{o:?}"),
    };
    assert_eq!(at(r.reserve(&big, 0)), at(other.allocate_orelse_reserve(&big, 0)));
    // A second whole-cluster group can only start when the first reservation ends.
    let mut next = cpu("next", 10, 8);
    next.duration = Some(10);
    assert_eq!(at(r.reserve(&next, 0)), 150);
    check_invariants(&r);
}

#[test]
fn a_hold_beyond_free_capacity_is_recorded_and_frees_nothing_until_enough_ends() {
    let mut rg =
        rg("name: one\nnodeClasses:\n  - {name: a, count: 1, capacity: {cpu: 8, memory: 32Gi}}\n", Policy::Pack);
    let whole = allocated(&mut rg, &cpu("whole", 1, 8));
    // Another scheduler's pod is there anyway: a fact, not a decision, so it is recorded.
    let hold = rg.hold("a-0", &[("cpu".into(), 7000)], &[], 0).unwrap();
    rg.cancel(whole).unwrap();
    let n = rg.graph.node_id("a-0").unwrap();
    assert_eq!(rg.graph.node(n).free[0], 1000, "the release frees only what the pod does not use");
    assert!(matches!(rg.allocate(&cpu("honest", 1, 4), 0), MatchOutcome::Busy(_)), "4 cores do not fit beside 7");
    rg.cancel(hold).unwrap();
    assert_eq!(rg.graph.node(n).free[0], 8000);
    assert!(rg.hold("nowhere", &[("cpu".into(), 1)], &[], 0).is_err(), "an unknown node is refused");
}

/// `nodes` 8-cpu nodes, `per_block` to a block and `per_rack` to a rack.
fn blocks(nodes: u32, per_block: u32, per_rack: u32) -> String {
    format!(
        "name: t\ntopology: [{{level: block, label: muster.dev/block}}, {{level: rack, label: muster.dev/rack}}]\n\
         nodeClasses:\n  - {{name: a, count: {nodes}, capacity: {{cpu: 8, memory: 32Gi, pods: 110}}, \
         spread: {{block: {per_block}, rack: {per_rack}}}}}\n"
    )
}

/// The domain of `level` node `n` is in (its `muster.dev/LEVEL` label).
fn domain(r: &ResourceGraph, n: &str, level: &str) -> String {
    r.graph.node(r.graph.node_id(n).unwrap()).labels[&format!("muster.dev/{level}")].clone()
}

#[test]
fn a_preferred_rack_kept_within_a_block_never_spreads_over_blocks() {
    for policy in [Policy::First, Policy::HighId, Policy::Locality] {
        let mut r = rg(&blocks(8, 4, 2), policy);
        // Other pods fill one rack of each block: 2 nodes are left in each.
        for n in ["a-0", "a-1", "a-4", "a-5"] {
            r.hold(n, &[("cpu".into(), 8000)], &[], 0).unwrap();
        }
        assert_ne!(domain(&r, "a-0", "block"), domain(&r, "a-4", "block"));
        let within_block = TopologyConstraint { within: Some("block".into()), ..TopologyConstraint::preferred("rack") };
        // Three members fit in no rack and no block: kept within a block they wait; without
        // `within` they run across both blocks.
        let mut three = cpu("three", 3, 8);
        three.topology = Some(within_block.clone());
        assert!(matches!(r.allocate(&three, 0), MatchOutcome::Busy(_)), "{policy:?}");
        three.topology = Some(TopologyConstraint::preferred("rack"));
        let spread = allocated(&mut r, &three);
        let blocks: BTreeSet<_> = nodes_of(&r, spread).iter().map(|n| domain(&r, n, "block")).collect();
        assert_eq!(blocks.len(), 2, "{policy:?}");
        r.cancel(spread).unwrap();
        // Five members fit in no block even when the cluster is empty: never, and it says why.
        let mut five = cpu("five", 5, 8);
        five.topology =
            Some(TopologyConstraint { within: Some("block".into()), ..TopologyConstraint::preferred("rack") });
        match r.allocate(&five, 0) {
            MatchOutcome::Unsatisfiable(why) => {
                assert_eq!(why, "needs 5 members in one block; the largest block holds 4")
            }
            other => panic!("{policy:?}: {other:?}"),
        }
        // Two members share a free rack.
        let mut pair = cpu("pair", 2, 8);
        pair.topology = Some(within_block);
        let id = allocated(&mut r, &pair);
        let racks: BTreeSet<_> = nodes_of(&r, id).iter().map(|n| domain(&r, n, "rack")).collect();
        assert_eq!(racks.len(), 1, "{policy:?}: {racks:?}");
        check_invariants(&r);
    }
}

#[test]
fn blocks_labelled_above_racks_while_running_enclose_them() {
    // Found on the real control plane: racks first, then each rack's nodes labelled into a block.
    // The racks' old domains stay behind at the top; the levels' order must still put racks in.
    let mut r = rg(RACKS, Policy::First);
    for i in 0..8 {
        let name = format!("a-{i}");
        let rack = r.graph.node(r.graph.node_id(&name).unwrap()).labels["muster.dev/rack"].clone();
        let mut spec = rack_node(&name, &rack, 8);
        spec.topology.insert(0, ("block".into(), format!("block-{}", i / 4)));
        assert_eq!(r.update_node(&spec).unwrap(), muster_graph::NodeUpdate::Applied);
    }
    let within_block = TopologyConstraint { within: Some("block".into()), ..TopologyConstraint::preferred("rack") };
    let mut three = cpu("three", 3, 8);
    three.topology = Some(within_block.clone());
    let id = allocated(&mut r, &three);
    assert_eq!(nodes_of(&r, id).len(), 3);
    let mut five = cpu("five", 5, 8);
    five.topology = Some(within_block);
    match r.allocate(&five, 0) {
        MatchOutcome::Unsatisfiable(why) => assert_eq!(why, "needs 5 members in one block; the largest block holds 4"),
        other => panic!("{other:?}"),
    }
    check_invariants(&r);
}

#[test]
fn a_constraint_kept_within_a_level_that_does_not_enclose_it_is_refused() {
    let mut r = rg(&blocks(8, 4, 2), Policy::First);
    let cases = [
        (
            TopologyConstraint { within: Some("rack".into()), ..TopologyConstraint::preferred("block") },
            "\"rack\" does not enclose \"block\"",
        ),
        (
            TopologyConstraint { within: Some("rack".into()), ..TopologyConstraint::preferred("rack") },
            "\"rack\" does not enclose \"rack\"",
        ),
        (
            TopologyConstraint { within: Some("zone".into()), ..TopologyConstraint::preferred("rack") },
            "no topology level \"zone\"",
        ),
        (
            TopologyConstraint { within: Some("block".into()), ..TopologyConstraint::required("rack") },
            "a required \"rack\" constraint cannot also be kept within \"block\"",
        ),
    ];
    for (t, want) in cases {
        let mut req = cpu("g", 1, 1);
        req.topology = Some(t);
        match r.allocate(&req, 0) {
            MatchOutcome::Unsatisfiable(why) => assert!(why.contains(want), "{why}"),
            other => panic!("{want}: {other:?}"),
        }
    }
}

#[test]
fn a_preferred_rack_that_cannot_be_met_falls_back_to_one_block_before_the_cluster() {
    for policy in [Policy::First, Policy::HighId, Policy::Locality] {
        let mut r = rg(&blocks(8, 4, 2), policy);
        // A filler takes one whole rack, leaving 2 nodes in its block and 4 in the other. No
        // rack takes 3 whole-node members; plain order would spread them over both blocks, the
        // fallback keeps them in the block with room.
        let mut filler = cpu("filler", 2, 8);
        filler.topology = Some(TopologyConstraint::required("rack"));
        allocated(&mut r, &filler);
        let mut req = cpu("g", 3, 8);
        req.topology = Some(TopologyConstraint::preferred("rack"));
        let id = allocated(&mut r, &req);
        let blocks: BTreeSet<_> = r
            .allocation(id)
            .unwrap()
            .members
            .iter()
            .map(|m| r.graph.node(m.node).labels["muster.dev/block"].clone())
            .collect();
        assert_eq!(blocks.len(), 1, "{policy:?}: {blocks:?}");
        // Too big for any block now: it still runs, across the cluster.
        let mut big = cpu("big", 3, 8);
        big.topology = req.topology.clone();
        let id = allocated(&mut r, &big);
        assert_eq!(r.allocation(id).unwrap().members.len(), 3, "{policy:?}");
        check_invariants(&r);
    }
}

#[test]
fn weighted_preferences_trade_fewer_racks_against_one_block_by_their_weights() {
    // Three blocks of three racks of four nodes.
    let mut base = rg(&blocks(36, 12, 4), Policy::First);
    let mut racks: std::collections::BTreeMap<(String, String), Vec<String>> = Default::default();
    for i in 0..36 {
        let n = format!("a-{i}");
        racks.entry((domain(&base, &n, "block"), domain(&base, &n, "rack"))).or_default().push(n);
    }
    let racks: Vec<Vec<String>> = racks.into_values().collect();
    assert_eq!(racks.len(), 9);
    // Free after other pods: block 0 has 3 + 3 + 2 nodes (8, over three racks); blocks 1 and 2
    // one whole rack each (8 over two racks, two blocks).
    let busy = |r: &[String], keep: usize| r[keep..].to_vec();
    let mut held: Vec<String> = [busy(&racks[0], 3), busy(&racks[1], 3), busy(&racks[2], 2)].concat();
    held.extend(racks[4..6].concat());
    held.extend(racks[7..9].concat());
    for n in &held {
        base.hold(n, &[("cpu".into(), 8000)], &[], 0).unwrap();
    }
    let place = |members: u32, weights: &[(&str, u32)]| {
        let mut r = base.clone();
        let mut eight = cpu("gang", members, 8);
        eight.topology = Some(TopologyConstraint {
            weights: weights.iter().map(|&(l, w)| (l.to_string(), w)).collect(),
            ..TopologyConstraint::preferred("rack")
        });
        let id = allocated(&mut r, &eight);
        let nodes = nodes_of(&r, id);
        let blocks: BTreeSet<_> = nodes.iter().map(|n| domain(&r, n, "block")).collect();
        let in_racks: BTreeSet<_> = nodes.iter().map(|n| domain(&r, n, "rack")).collect();
        check_invariants(&r);
        (blocks.len(), in_racks.len())
    };
    // Unweighted, the first level out that holds the group wins: one block, three racks.
    assert_eq!(place(8, &[]), (1, 3));
    // Rack pairs worth ten times block pairs: two whole racks, in two blocks (score 10x12 + 12
    // against 10x7 + 28).
    assert_eq!(place(8, &[("rack", 10), ("block", 1)]), (2, 2));
    // Equal weights, or blocks worth more: one block (7 + 28 against 12 + 12).
    assert_eq!(place(8, &[("rack", 1), ("block", 1)]), (1, 3));
    assert_eq!(place(8, &[("rack", 1), ("block", 10)]), (1, 3));
    // Room in one rack wins whatever the weights.
    assert_eq!(place(4, &[("rack", 1), ("block", 100)]), (1, 1));
}

#[test]
fn weights_that_do_not_rank_the_preferred_levels_are_refused_with_the_fix() {
    let mut r = rg(&blocks(36, 12, 4), Policy::First);
    let weighted = |t: TopologyConstraint, weights: &[(&str, u32)]| TopologyConstraint {
        weights: weights.iter().map(|&(l, w)| (l.to_string(), w)).collect(),
        ..t
    };
    let cases = [
        (weighted(TopologyConstraint::required("rack"), &[("rack", 1)]), "a required \"rack\" constraint has none"),
        (weighted(TopologyConstraint::preferred("rack"), &[("rack", 0)]), "weight 0 of \"rack\" is out of range"),
        (weighted(TopologyConstraint::preferred("rack"), &[("rack", 101)]), "allowed 1..=100"),
        (weighted(TopologyConstraint::preferred("rack"), &[("block", 5)]), "leave out \"rack\""),
        (weighted(TopologyConstraint::preferred("block"), &[("block", 5), ("rack", 1)]), "\"rack\" is out of order"),
        (weighted(TopologyConstraint::preferred("rack"), &[("rack", 5), ("zone", 1)]), "no topology level \"zone\""),
        (
            weighted(
                TopologyConstraint { within: Some("rack".into()), ..TopologyConstraint::preferred("rack") },
                &[("rack", 5)],
            ),
            "does not enclose",
        ),
    ];
    for (t, want) in cases {
        let mut req = cpu("g", 1, 1);
        req.topology = Some(t);
        match r.allocate(&req, 0) {
            MatchOutcome::Unsatisfiable(why) => assert!(why.contains(want), "{want}: {why}"),
            other => panic!("{want}: {other:?}"),
        }
    }
}

#[test]
fn an_unsatisfiable_reason_names_the_taint_or_selector_that_leaves_a_large_enough_node_out() {
    let cluster = "name: c\nnodeClasses:\n  - {name: cpu, count: 2, capacity: {cpu: 8, pods: 110}, labels: {kind: cpu}}\n  \
                   - name: gpu\n    count: 1\n    capacity: {cpu: 16, pods: 110}\n    devices: {nvidia.com/gpu: 4}\n    \
                   labels: {kind: gpu}\n    taints: [{key: nvidia.com/gpu, value: present, effect: NoSchedule}]\n";
    let r = ResourceGraph::new(muster_graph::cluster::load("c.yaml", cluster).unwrap(), Policy::First);
    let gpu = GroupRequest::simple("gpu", 1, &[("nvidia.com/gpu", 1)]);
    let why = r.satisfiability(&gpu).unwrap_err();
    assert!(
        why.contains("node gpu-0 has that much, but its taint nvidia.com/gpu=present:NoSchedule is not tolerated"),
        "{why}"
    );
    let mut big = cpu("big", 1, 12);
    big.filter.node_selector = [("kind".to_string(), "cpu".to_string())].into();
    let why = r.satisfiability(&big).unwrap_err();
    assert!(why.contains("the largest matching node has 8"), "{why}");
    assert!(why.contains("node gpu-0 has that much, but the group's node selector or affinity leaves it out"), "{why}");
    // Nothing to point at: no node of any kind has 32 cores.
    let why = r.satisfiability(&cpu("huge", 1, 32)).unwrap_err();
    assert!(why.ends_with("the largest matching node has 8"), "{why}");
}

#[test]
fn the_room_ahead_counts_each_node_as_the_matcher_does() {
    let mut r = rg(RACKS, Policy::First);
    let rack = r.graph.node(r.graph.node_id("a-0").unwrap()).labels["muster.dev/rack"].clone();
    let mut held = cpu("held", 1, 8);
    held.duration = Some(100);
    allocated(&mut r, &held); // a-0 until t=100
    let mut fill = cpu("fill", 9, 8);
    fill.duration = Some(50);
    allocated(&mut r, &fill); // the other nine nodes until t=50
    // a-0 shrinks to 4 cores under its 8: nothing free there (not -4) until t=100.
    r.update_node(&rack_node("a-0", &rack, 4)).unwrap();
    assert_eq!(r.graph.free_ahead(0).least_before(1_000), None, "nothing reserved: the room only grows");

    let mut next = cpu("next", 1, 8);
    next.duration = Some(10);
    let MatchOutcome::Reserved { at, .. } = r.allocate_orelse_reserve(&next, 0) else { panic!("reserved") };
    assert_eq!(at, 50);
    let ahead = r.graph.free_ahead(0);
    let cpu_id = r.graph.resources.get("cpu").unwrap().index();
    assert_eq!(ahead.least_before(50), None, "nothing changes before t=50");
    assert_eq!(ahead.least_before(55).unwrap()[cpu_id], 64_000, "nine nodes free at t=50, one reserved, none on a-0");
    assert_eq!(ahead.least_before(1_000), ahead.least_before(55), "after the last start the room only grows");
    r.update_node(&rack_node("a-0", &rack, 8)).unwrap();
    check_invariants(&r);
}
