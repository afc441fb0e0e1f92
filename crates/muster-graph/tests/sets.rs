//! Groups of several member sets: each set holds what its members ask, every set is placed at
//! once or none is, and elastic sets grow and give back along the group's member steps.

mod common;

use common::{GPU_NODES, check_invariants, fingerprint, rg};
use muster_graph::jobspec::{self, MemberSet, TopologyConstraint};
use muster_graph::{GroupRequest, MatchOutcome, Policy, ResourceGraph};

fn set(name: &str, members: u32, requests: &[(&str, u64)]) -> MemberSet {
    MemberSet {
        name: name.into(),
        min_members: members,
        max_members: members,
        requests: requests.iter().map(|(r, a)| (r.to_string(), *a)).collect(),
        devices: Vec::new(),
        filter: Default::default(),
        topology: None,
    }
}

/// An MPIJob: a 1-cpu launcher and `workers` workers of a whole node's GPUs each.
fn mpijob(name: &str, workers: u32) -> GroupRequest {
    GroupRequest::simple(name, 1, &[])
        .with_sets(vec![
            set("launcher", 1, &[("cpu", 1000)]),
            set("worker", workers, &[("cpu", 32_000), ("nvidia.com/gpu", 8)]),
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

#[test]
fn a_launcher_holds_no_worker_sized_slot() {
    let mut r = rg(GPU_NODES, Policy::BestFit);
    // Sized like its largest member, each job would hold 5 nodes: 6 fit on 32. With sets, the
    // launcher lands beside a worker and each holds 4: 8 fit, every GPU used.
    let placed: Vec<u64> = (0..9).filter_map(|i| allocate(&mut r, &mpijob(&format!("mpi-{i}"), 4))).collect();
    assert_eq!(placed.len(), 8, "the ninth finds no room");
    check_invariants(&r);
    let worker_nodes: std::collections::BTreeSet<_> =
        r.allocations().flat_map(|a| a.members.iter().filter(|m| m.index > 0).map(|m| m.node)).collect();
    for &id in &placed {
        let a = r.allocation(id).unwrap();
        assert_eq!(a.members.len(), 5);
        assert!(worker_nodes.contains(&a.members[0].node), "the launcher shares a node with workers");
        assert_eq!(a.member_amounts(0)[r.graph.resources.get("nvidia.com/gpu").unwrap().index()], 0);
        let held = a.held();
        assert_eq!(held[r.graph.resources.get("cpu").unwrap().index()], 129_000, "1 + 4 x 32 cores");
        assert_eq!(held[r.graph.resources.get("nvidia.com/gpu").unwrap().index()], 32);
    }
    let (_, free) = r.graph.totals();
    assert_eq!(free[r.graph.resources.get("nvidia.com/gpu").unwrap().index()], 0);
}

#[test]
fn sets_are_placed_all_or_none() {
    let mut r = rg(GPU_NODES, Policy::First);
    // 30 of 32 nodes' GPUs taken: the workers of a 4-node job cannot be placed, so neither is
    // its launcher, and the graph is as it was.
    let filler = GroupRequest::simple("filler", 30, &[("nvidia.com/gpu", 8)]);
    allocate(&mut r, &filler).unwrap();
    let before = fingerprint(&r.graph);
    assert_eq!(allocate(&mut r, &mpijob("big", 4)), None);
    assert_eq!(fingerprint(&r.graph), before);
    assert_eq!(r.allocations().count(), 1);
    check_invariants(&r);
    // It reserves the time the filler ends, every set together.
    let mut r = rg(GPU_NODES, Policy::First);
    let mut timed = filler;
    timed.duration = Some(100);
    allocate(&mut r, &timed).unwrap();
    let mut job = mpijob("later", 4);
    job.duration = Some(50);
    match r.allocate_orelse_reserve(&job, 0) {
        MatchOutcome::Reserved { id, at } => {
            assert_eq!(at, 100);
            assert_eq!(r.allocation(id).unwrap().members.len(), 5);
        }
        other => panic!("{other:?}"),
    }
    check_invariants(&r);
}

#[test]
fn sub_gangs_share_their_own_rack_within_the_groups_block() {
    let mut r = rg(GPU_NODES, Policy::First);
    // Disaggregated inference: prefill and decode gangs, each whole in one rack, both in one block.
    let mut prefill = set("prefill", 3, &[("nvidia.com/gpu", 8)]);
    prefill.topology = Some(TopologyConstraint::required("rack"));
    let mut decode = set("decode", 4, &[("nvidia.com/gpu", 8)]);
    decode.topology = Some(TopologyConstraint::required("rack"));
    let mut group = GroupRequest::simple("serve", 1, &[]);
    group.topology = Some(TopologyConstraint::required("block"));
    let group = group.with_sets(vec![prefill, decode]).unwrap();
    // Block 0 is busy but for one rack: the group must go to block 1.
    let busy = GroupRequest::simple("busy", 12, &[("nvidia.com/gpu", 8)]);
    allocate(&mut r, &busy).unwrap();
    let id = allocate(&mut r, &group).expect("block 1 holds both");
    let a = r.allocation(id).unwrap();
    let at = |i: usize, level: &str| {
        let v = r.graph.ancestor_at_level(a.members[i].node, level).unwrap();
        r.graph.vertex(v).meta.name.clone()
    };
    let racks: Vec<String> = (0..7).map(|i| at(i, "rack")).collect();
    assert!(racks[..3].iter().all(|x| *x == racks[0]) && racks[3..].iter().all(|x| *x == racks[3]), "{racks:?}");
    assert_ne!(racks[0], racks[3], "a rack of 4 nodes holds one gang, not both");
    let blocks: std::collections::BTreeSet<String> = (0..7).map(|i| at(i, "block")).collect();
    assert_eq!(blocks.len(), 1);
    check_invariants(&r);
}

#[test]
fn a_level_no_node_carries_is_refused_for_sets_as_for_alike_members() {
    // "zone" is no level of this cluster. A group of alike members naming it is unsatisfiable;
    // a group of sets naming it, for the whole group or a sub-group, required or preferred, is
    // refused the same way: never placed (its allocation could not be recorded again with that
    // constraint) and never left waiting for room that cannot come.
    let zone = |mode: &str| match mode {
        "required" => TopologyConstraint::required("zone"),
        _ => TopologyConstraint::preferred("zone"),
    };
    for mode in ["required", "preferred"] {
        let mut alike = GroupRequest::simple("alike", 2, &[("nvidia.com/gpu", 8)]);
        alike.topology = Some(zone(mode));
        let mut on_group = mpijob("on-group", 2);
        on_group.topology = Some(zone(mode));
        let sub = jobspec::SubGroup { name: "workers".into(), sets: vec!["worker".into()], topology: zone(mode) };
        let on_subgroup = mpijob("on-subgroup", 2).with_subgroups(vec![sub]).unwrap();
        for req in [&alike, &on_group, &on_subgroup] {
            let mut r = rg(GPU_NODES, Policy::First);
            let before = fingerprint(&r.graph);
            for outcome in [r.allocate(req, 0), r.allocate_orelse_reserve(req, 0)] {
                match outcome {
                    MatchOutcome::Unsatisfiable(why) => {
                        assert!(why.contains("no topology level \"zone\""), "{} ({mode}): {why}", req.name)
                    }
                    other => panic!("{} ({mode}): {other:?}", req.name),
                }
            }
            assert_eq!(fingerprint(&r.graph), before, "{} ({mode}) holds nothing", req.name);
            let why = r.satisfiability(req).unwrap_err();
            assert!(why.contains("zone"), "{} ({mode}): {why}", req.name);
        }
    }
}

#[test]
fn a_rigid_set_never_grows_or_gives_back() {
    let mut r = rg(GPU_NODES, Policy::First);
    let mut workers = set("worker", 8, &[("nvidia.com/gpu", 1)]);
    workers.min_members = 2;
    let group =
        GroupRequest::simple("elastic", 1, &[]).with_sets(vec![set("head", 1, &[("cpu", 2000)]), workers]).unwrap();
    assert_eq!((group.min_members, group.max_members), (3, 9));
    assert_eq!(group.set_bounds_within(), [(1, 1), (2, 8)], "the head's share of min and max is the same");
    let id = allocate(&mut r, &group).unwrap();
    assert_eq!(r.allocation(id).unwrap().members.len(), 9);
    r.shrink(id, &[7, 8]).unwrap();
    let added = r.grow(id, 2, 0).unwrap().unwrap();
    assert_eq!(added, [7, 8], "new members take the workers' numbers, never the head's");
    let a = r.allocation(id).unwrap();
    let gpu = r.graph.resources.get("nvidia.com/gpu").unwrap().index();
    assert_eq!(a.held()[gpu], 8);
    check_invariants(&r);
    // Work is spread over the workers only: half the workers take twice as long.
    let mut timed = group.clone();
    timed.duration = Some(100);
    assert_eq!(timed.run_time_with(1 + 4), Some(200));
}

#[test]
fn the_group_form_reads_sets_and_names_the_field_at_fault() {
    let g = jobspec::parse(
        "g.yaml",
        "name: mpi\nsets:\n  - {name: worker, members: {min: 2, max: 4}, resources: {nvidia.com/gpu: 8}}\n  \
         - {name: launcher, members: 1, resources: {cpu: 1}}\ntopology: {level: rack, mode: preferred}\n",
    )
    .unwrap();
    let names: Vec<&str> = g.sets.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["worker", "launcher"], "members are numbered in the sets' order");
    assert_eq!((g.min_members, g.max_members), (3, 5));
    assert_eq!(g.requests_with(3).get("nvidia.com/gpu"), Some(&16));
    assert_eq!(g.split(4), [3, 1], "the minimums first, then the workers' extra members");
    for (text, path) in [
        ("name: x\nmembers: 2\nsets: [{name: a, members: 1, resources: {cpu: 1}}]\n", "members"),
        (
            "name: x\nsets: [{name: a, members: 1, resources: {cpu: 1}}, {name: a, members: 1, resources: {cpu: 1}}]\n",
            "sets[1].name",
        ),
        ("name: x\nsets: [{name: a, members: {min: 2, max: 1}, resources: {cpu: 1}}]\n", "sets[0].members"),
        ("name: x\nsets: [{name: a, members: 1, resources: {gpu: 1}}]\n", "sets[0].resources.gpu"),
        ("name: x\n", "members"),
    ] {
        let e = jobspec::parse("g.yaml", text).unwrap_err();
        assert_eq!(e.path, path, "{e}");
    }
}

#[test]
fn a_flux_jobspec_of_several_slots_is_a_group_of_sets() {
    let slot = |label: &str, count: &str, with: &str| {
        format!("      - type: slot\n        count: {count}\n        label: {label}\n        with: {with}\n")
    };
    let two = format!(
        "version: 1\nresources:\n  - type: rack\n    count: 1\n    with:\n{}{}attributes: {{system: {{duration: 600}}}}\n",
        slot("launcher", "1", "[{type: core, count: 1}]"),
        slot("worker", "{min: 2, max: 4}", "[{type: core, count: 8}, {type: gpu, count: 8}]"),
    );
    let g = jobspec::parse("mpi.yaml", &two).unwrap();
    let sets: Vec<_> = g.sets.iter().map(|s| (s.name.as_str(), s.min_members, s.max_members)).collect();
    assert_eq!(sets, [("launcher", 1, 1), ("worker", 2, 4)]);
    assert_eq!(g.sets[1].requests, [("cpu".to_string(), 8000), ("nvidia.com/gpu".to_string(), 8)]);
    assert_eq!((g.topology.as_ref().map(|t| t.level.as_str()), g.duration), (Some("rack"), Some(600)));
    let mut r = rg(GPU_NODES, Policy::First);
    let id = allocate(&mut r, &g).expect("fits");
    assert_eq!(r.allocation(id).unwrap().members.len(), 5);

    // Several top-level resources are several slots too; whole nodes per slot are not sets.
    let tops = "version: 1\nresources:\n  - {type: slot, count: 1, label: head, with: [{type: core, count: 2}]}\n  \
                - {type: slot, count: 2, label: gpus, with: [{type: gpu, count: 1}]}\n";
    let g = jobspec::parse("ray.yaml", tops).unwrap();
    assert_eq!(g.sets.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(), ["head", "gpus"]);
    let nodes = "version: 1\nresources:\n  - {type: slot, count: 1, label: head, with: [{type: core, count: 2}]}\n  \
                 - {type: slot, count: 2, label: gpus, with: [{type: node, count: 1}]}\n";
    let e = jobspec::parse("ray.yaml", nodes).unwrap_err();
    assert_eq!(e.path, "resources[1]", "{e}");

    // A count of a Kubernetes resource type is of whole units: 9 `cpu` is 9 cores, as 9 `core`
    // is, and asks more than an 8-core node has; two slots may each have a range.
    let cpu = "version: 1\nresources:\n  - {type: slot, count: {min: 1, max: 2}, label: a, with: [{type: cpu, count: 9}]}\n  \
               - {type: slot, count: {min: 1, max: 3}, label: b, with: [{type: core, count: 2}, {type: cpu, count: 1}]}\n";
    let g = jobspec::parse("cpu.yaml", cpu).unwrap();
    assert_eq!(g.sets[0].requests, [("cpu".to_string(), 9000)]);
    assert_eq!(g.sets[1].requests, [("cpu".to_string(), 3000)]);
    assert_eq!((g.min_members, g.max_members), (2, 5));
    let eight = "name: c\nnodeClasses:\n  - {name: n, count: 4, capacity: {cpu: 8, memory: 32Gi, pods: 110}}\n";
    let r = ResourceGraph::new(muster_graph::cluster::load("c.yaml", eight).unwrap(), Policy::First);
    assert!(r.satisfiability(&g).unwrap_err().contains("a:"), "set a's 9 cores fit no 8-core node");
}

#[test]
fn a_group_of_sets_is_satisfiable_and_reserved_by_what_each_set_asks() {
    // 4 nodes of 8 cpu: a leader of 1 and 4 workers of 7 fit (29 cpu), though 5 of 7 would not.
    let four = "name: c\nnodeClasses:\n  - {name: n, count: 4, capacity: {cpu: 8, memory: 32Gi, pods: 110}}\n";
    let mut r = rg(four, Policy::Pack);
    let mut group = GroupRequest::simple("lead", 1, &[])
        .with_sets(vec![set("leader", 1, &[("cpu", 1000)]), set("worker", 4, &[("cpu", 7000)])])
        .unwrap();
    group.duration = Some(60);
    assert_eq!(r.satisfiability(&group), Ok(()));
    // Busy now: the planner reserves every set at once when the blocker ends.
    let mut blocker = GroupRequest::simple("blocker", 1, &[("cpu", 2000)]);
    blocker.duration = Some(30);
    allocate(&mut r, &blocker).unwrap();
    match r.reserve(&group, 0) {
        MatchOutcome::Reserved { id, at } => {
            assert_eq!((at, r.allocation(id).unwrap().members.len()), (30, 5));
        }
        other => panic!("{other:?}"),
    }
    check_invariants(&r);
    let huge = GroupRequest::simple("huge", 1, &[])
        .with_sets(vec![set("leader", 1, &[("cpu", 1000)]), set("worker", 5, &[("cpu", 7000)])])
        .unwrap();
    assert!(r.satisfiability(&huge).unwrap_err().contains("worker"), "names the set that cannot fit");
}

/// 2 nodes of 8 GPUs and 96 cores.
const TWO_GPU_NODES: &str = "
name: two
nodeClasses:
  - name: g
    count: 2
    capacity: {cpu: 96, memory: 1Ti, nvidia.com/gpu: 8, pods: 110}
";

#[test]
fn a_packed_group_puts_its_small_sets_beside_its_workers_not_on_free_gpus() {
    let mut r = rg(TWO_GPU_NODES, Policy::Pack);
    // A Ray job: 2 GPU workers take one node's GPUs and half its cores; its 4 cpu workers (64
    // cores) fit 3 beside them and 1 on the other node. Put on the emptiest node instead (the
    // one that takes the most of them), they would leave it 32 cores: too few for the 2 GPU
    // workers of the next job, and its 8 GPUs would idle.
    let ray = |name: &str| {
        GroupRequest::simple(name, 1, &[])
            .with_sets(vec![
                set("cpu-workers", 4, &[("cpu", 16_000)]),
                set("gpu-workers", 2, &[("cpu", 24_000), ("nvidia.com/gpu", 4)]),
            ])
            .unwrap()
    };
    let first = allocate(&mut r, &ray("ray-0")).unwrap();
    let a = r.allocation(first).unwrap();
    let gpu_node = a.members[4].node;
    assert_eq!(a.members.iter().filter(|m| m.index < 4 && m.node == gpu_node).count(), 3);
    let next = GroupRequest::simple("gpu-workers", 2, &[("cpu", 24_000), ("nvidia.com/gpu", 4)]);
    assert!(allocate(&mut r, &next).is_some(), "the other node's GPUs stay usable");
    check_invariants(&r);
}

/// A head and two elastic worker sets: `small` (1..3 members of 1 GPU), then `big` (2..4 of 8).
fn two_elastic_sets() -> GroupRequest {
    let mut small = set("small", 3, &[("nvidia.com/gpu", 1)]);
    small.min_members = 1;
    let mut big = set("big", 4, &[("nvidia.com/gpu", 8)]);
    big.min_members = 2;
    GroupRequest::simple("ray", 1, &[]).with_sets(vec![set("head", 1, &[("cpu", 2000)]), small, big]).unwrap()
}

#[test]
fn several_sets_are_elastic_and_split_along_the_member_steps() {
    let group = two_elastic_sets();
    assert_eq!((group.min_members, group.max_members), (4, 8));
    // Every minimum first, then each set's extra members in the sets' order.
    assert_eq!(group.member_steps()[..5], [(0, 1), (1, 1), (2, 2), (1, 2), (2, 2)]);
    assert_eq!(group.split(4), [1, 1, 2]);
    assert_eq!(group.split(6), [1, 3, 2]);
    assert_eq!(group.split(7), [1, 3, 3]);
    assert_eq!(group.requests_with(6).get("nvidia.com/gpu"), Some(&(3 + 16)));
    // Narrowed to 6 (a quota), the sets keep their numbers and take their shares.
    let narrowed = group.narrowed_to(6);
    assert_eq!(narrowed.set_members("big"), Some(4..8), "numbers do not move");
    assert_eq!(narrowed.set_bounds_within(), [(1, 1), (1, 3), (2, 2)]);
    let mut r = rg(GPU_NODES, Policy::First);
    let id = allocate(&mut r, &narrowed).unwrap();
    let indices = |r: &ResourceGraph| r.allocation(id).unwrap().members.iter().map(|m| m.index).collect::<Vec<_>>();
    assert_eq!(indices(&r), [0, 1, 2, 3, 4, 5], "the head, all of small, big's minimum");
    // Widened back, big grows, and no further than its max.
    r.set_member_bounds(id, 4, 8).unwrap();
    assert_eq!(group.growing_set(indices(&r)), Some((2, 2)));
    assert!(r.grow(id, 3, 0).is_err(), "big has room for 2");
    assert_eq!(r.grow(id, 2, 0).unwrap().unwrap(), [6, 7]);
    assert_eq!(group.growing_set(indices(&r)), None);
    // Given back: the later set's extra members first, each set's highest first, no set below
    // its minimum.
    assert_eq!(group.surplus(indices(&r)), [7, 6, 3, 2]);
    r.shrink(id, &[2, 7]).unwrap();
    assert!(group.meets_minimum(indices(&r)));
    assert!(!group.meets_minimum([0, 1, 4]), "big below its minimum");
    // Refilled in the sets' order: small first.
    assert_eq!(group.growing_set(indices(&r)), Some((1, 1)));
    assert!(r.grow(id, 2, 0).is_err(), "small has room for 1");
    assert_eq!(r.grow(id, 1, 0).unwrap().unwrap(), [2]);
    assert_eq!(r.grow(id, 1, 0).unwrap().unwrap(), [7]);
    let gpu = r.graph.resources.get("nvidia.com/gpu").unwrap().index();
    assert_eq!(r.allocation(id).unwrap().held()[gpu], 3 + 32);
    check_invariants(&r);
}

#[test]
fn an_elastic_set_takes_its_extra_members_only_after_every_sets_minimum() {
    // One node of 8 cpu. Workers of 2 cpu (2..4) ask the larger share and are placed first: at
    // their max they would fill the node, and the head's 1 cpu would find no room.
    let one_node = "name: one\nnodeClasses:\n  - {name: n, count: 1, capacity: {cpu: 8, memory: 64Gi, pods: 110}}\n";
    let mut r = rg(one_node, Policy::First);
    let mut workers = set("worker", 4, &[("cpu", 2000)]);
    workers.min_members = 2;
    let group = GroupRequest::simple("ray", 1, &[]).with_sets(vec![set("head", 1, &[("cpu", 1000)]), workers]).unwrap();
    let id = allocate(&mut r, &group).expect("the minimum, 5 cpu, fits");
    let indices: Vec<u32> = r.allocation(id).unwrap().members.iter().map(|m| m.index).collect();
    assert_eq!(indices, [0, 1, 2, 3], "the head and 3 workers: 7 of 8 cpu");
    check_invariants(&r);
    // Two elastic sets: their extra members go in the sets' order.
    let mut r = rg(one_node, Policy::First);
    let mut small = set("small", 3, &[("cpu", 1000)]);
    small.min_members = 1;
    let mut big = set("big", 4, &[("cpu", 2000)]);
    big.min_members = 1;
    let group = GroupRequest::simple("two", 1, &[]).with_sets(vec![small, big]).unwrap();
    let id = allocate(&mut r, &group).unwrap();
    let counts = group.held_per_set(r.allocation(id).unwrap().members.iter().map(|m| m.index));
    assert_eq!(counts, [3, 2], "small's 2 extra members first (2 cpu), then one more of big (2 cpu)");
    check_invariants(&r);
}
