//! Properties over random clusters and random operation sequences: nothing is ever
//! over-committed, matches are all-or-nothing, cancel and import are exact inverses, reservations
//! never overlap allocations beyond capacity, and what satisfiability rejects is never placed.

mod common;

use common::parse::socket_jgf;
use common::{check_invariants, fingerprint};
use muster_graph::graph::VertexId;
use muster_graph::jobspec::{ConstraintMode, MemberSet, SocketRequest, TopologyConstraint};
use muster_graph::matcher::{Demand, Window};
use muster_graph::{GroupRequest, ImportedMember, MatchOutcome, Policy, ResourceGraph, cluster, jgf};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

#[derive(Debug, Clone)]
struct ClassSpec {
    count: u32,
    cores: u32,
    mem_gi: u32,
    gpus: u32,
    rack: u32,
    tainted: bool,
}

fn class_strategy() -> impl Strategy<Value = ClassSpec> {
    (1u32..6, 1u32..16, 1u32..64, 0u32..4, 1u32..4, any::<bool>()).prop_map(
        |(count, cores, mem_gi, gpus, rack, tainted)| ClassSpec {
            count,
            cores,
            mem_gi,
            gpus,
            rack: rack.min(count),
            tainted,
        },
    )
}

fn cluster_yaml(classes: &[ClassSpec]) -> String {
    let mut y = String::from("name: p\ntopology: [{level: rack, label: muster.dev/rack}]\nnodeClasses:\n");
    for (i, c) in classes.iter().enumerate() {
        // Racks must divide evenly only against an outer level; a single level needs no care.
        y += &format!(
            "  - name: c{i}\n    count: {}\n    capacity: {{cpu: {}, memory: {}Gi, pods: 16}}\n    spread: {{rack: {}}}\n    labels: {{class: c{i}}}\n",
            c.count, c.cores, c.mem_gi, c.rack
        );
        if c.gpus > 0 {
            y += &format!("    devices: {{nvidia.com/gpu: {}}}\n", c.gpus);
        }
        if c.tainted {
            y += "    taints: [{key: t, value: v, effect: NoSchedule}]\n";
        }
    }
    y
}

#[derive(Debug, Clone)]
struct ReqSpec {
    min: u32,
    extra: u32,
    millicores: u64,
    mem_mi: u64,
    gpus: u64,
    rack: Option<bool>,
    tolerate: bool,
    per_node: Option<u32>,
    exclusive: bool,
    duration: Option<u64>,
    policy: u8,
    /// Whole sockets per member, on graphs with sockets.
    sockets: Option<u32>,
    /// k of n alike replicas of up to 3 members each, the first k required, the rest optional
    /// (where neither members per node nor sockets are asked).
    replicas: Option<(u32, u32)>,
}

fn req_strategy() -> impl Strategy<Value = ReqSpec> {
    (
        (1u32..8, 0u32..4, 1u64..8000, 0u64..20_000, 0u64..3),
        (
            proptest::option::of(any::<bool>()),
            any::<bool>(),
            proptest::option::weighted(0.15, 1u32..3),
            proptest::bool::weighted(0.1),
        ),
        (
            proptest::option::weighted(0.8, 1u64..200),
            0u8..6,
            proptest::option::weighted(0.4, 1u32..3),
            proptest::option::weighted(0.2, (1u32..3, 0u32..3)),
        ),
    )
        .prop_map(
            |(
                (min, extra, millicores, mem_mi, gpus),
                (rack, tolerate, per_node, exclusive),
                (duration, policy, sockets, replicas),
            )| {
                ReqSpec {
                    min,
                    extra,
                    millicores,
                    mem_mi,
                    gpus,
                    rack,
                    tolerate,
                    per_node,
                    exclusive,
                    duration,
                    policy,
                    sockets,
                    replicas: replicas.map(|(k, more)| (k, k + more)),
                }
            },
        )
}

const POLICIES: [Policy; 6] =
    [Policy::First, Policy::HighId, Policy::Pack, Policy::Spread, Policy::Locality, Policy::BestFit];

fn request(i: usize, s: &ReqSpec, socketed: bool) -> GroupRequest {
    let mut requests = vec![("cpu", s.millicores), ("memory", s.mem_mi << 20)];
    if s.gpus > 0 {
        requests.push(("nvidia.com/gpu", s.gpus));
    }
    requests.retain(|(_, a)| *a > 0);
    let mut r = GroupRequest::simple(&format!("g{i}"), s.min, &requests);
    r.max_members = s.min + s.extra;
    if let Some(m) = s.per_node {
        r.members_per_node = Some(m);
        r.min_members = s.min * m;
        r.max_members = (s.min + s.extra) * m;
    }
    r.exclusive = s.exclusive;
    r.duration = s.duration;
    r.policy = Some(POLICIES[usize::from(s.policy) % POLICIES.len()]);
    r.topology =
        s.rack.map(
            |required| {
                if required { TopologyConstraint::required("rack") } else { TopologyConstraint::preferred("rack") }
            },
        );
    if let Some(count) = s.sockets.filter(|_| socketed) {
        let per_socket = std::mem::take(&mut r.requests);
        r.requests = per_socket.iter().map(|(name, a)| (name.clone(), a * u64::from(count))).collect();
        r.sockets = Some(SocketRequest { count, requests: per_socket });
    }
    if s.tolerate {
        r.filter.tolerations.push(muster_graph::filter::Toleration {
            key: "t".into(),
            operator: muster_graph::filter::TolerationOperator::Exists,
            value: String::new(),
            effect: None,
        });
    }
    match s.replicas {
        Some((k, n)) if r.members_per_node.is_none() && r.sockets.is_none() => replicas(r, s, k, n),
        _ => r,
    }
}

/// `r` as k of n alike replicas, each a set of up to 3 members, within one rack of its own where
/// `s.rack` requires one.
fn replicas(r: GroupRequest, s: &ReqSpec, k: u32, n: u32) -> GroupRequest {
    let members = s.min.min(3);
    let sets = (0..n)
        .map(|j| MemberSet {
            name: format!("r{j}"),
            min_members: if j < k { members } else { 0 },
            max_members: members,
            requests: r.requests.clone(),
            devices: Vec::new(),
            filter: r.filter.clone(),
            topology: (s.rack == Some(true)).then(|| TopologyConstraint::required("rack")),
        })
        .collect();
    let mut group = r;
    group.topology = None;
    group.with_sets(sets).expect("valid replicas")
}

#[derive(Debug, Clone)]
enum Op {
    Allocate(ReqSpec),
    Reserve(ReqSpec),
    Cancel(usize),
    Shrink(usize, u32),
    Grow(usize, u32),
    Reimport(usize),
    Advance(i64),
    Cordon(usize, bool),
}

fn op_strategy() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => req_strategy().prop_map(Op::Allocate),
        2 => req_strategy().prop_map(Op::Reserve),
        2 => any::<usize>().prop_map(Op::Cancel),
        1 => (any::<usize>(), 0u32..4).prop_map(|(a, m)| Op::Shrink(a, m)),
        1 => (any::<usize>(), 1u32..3).prop_map(|(a, m)| Op::Grow(a, m)),
        1 => any::<usize>().prop_map(Op::Reimport),
        1 => (1i64..100).prop_map(Op::Advance),
        1 => (any::<usize>(), any::<bool>()).prop_map(|(n, c)| Op::Cordon(n, c)),
    ]
}

fn pick(rg: &ResourceGraph, k: usize, running_only: bool) -> Option<u64> {
    let ids: Vec<u64> = rg.allocations().filter(|a| !running_only || !a.reserved).map(|a| a.id).collect();
    (!ids.is_empty()).then(|| ids[k % ids.len()])
}

/// Checks a successful placement against the request's own rules.
/// `at_least_min` is false after a grow: a shrink may have taken the group below its minimum.
fn check_placement(rg: &ResourceGraph, id: u64, at_least_min: bool) {
    let a = rg.allocation(id).unwrap();
    let req = &a.request;
    let n = a.members.len() as u32;
    assert!(
        n <= req.max_members && (n >= req.min_members || !at_least_min),
        "{} members outside {}..{}",
        n,
        req.min_members,
        req.max_members
    );
    let sets = req.member_sets();
    for m in &a.members {
        let filter = &sets[req.set_of(m.index).0].filter;
        assert!(filter.admits(rg.graph.node(m.node)), "member on a node its set's filter refuses");
    }
    if let Some(per) = req.members_per_node {
        let mut counts = std::collections::BTreeMap::new();
        for m in &a.members {
            *counts.entry(m.node).or_insert(0u32) += 1;
        }
        assert!(counts.values().all(|c| *c == per), "members per node {counts:?} != {per}");
    }
    if let Some(sr) = &req.sockets {
        let mut held: Vec<_> = a.members.iter().flat_map(|m| m.sockets.iter().copied()).collect();
        assert!(a.members.iter().all(|m| m.sockets.len() == sr.count as usize), "a member without its sockets");
        held.sort_unstable();
        let all = held.len();
        held.dedup();
        assert_eq!(held.len(), all, "a socket held by two members");
    }
    if at_least_min {
        // A placed optional set holds all its members or none; a set's own rack holds.
        let held = req.held_per_set(a.members.iter().map(|m| m.index));
        for (k, set) in req.sets.iter().enumerate() {
            assert!(!req.is_optional(k) || held[k] == 0 || held[k] == set.max_members, "part of optional set {k}");
            if set.topology.as_ref().is_some_and(|t| t.mode == ConstraintMode::Required) {
                let racks: std::collections::BTreeSet<_> = (a.members.iter())
                    .filter(|m| req.set_of(m.index).0 == k)
                    .map(|m| rg.graph.ancestor_at_level(m.node, "rack"))
                    .collect();
                assert!(racks.len() <= 1, "members of rack-bound set {k} in several racks");
            }
        }
    }
    if req.topology.as_ref().is_some_and(|t| t.mode == ConstraintMode::Required) {
        let racks: std::collections::BTreeSet<_> =
            a.members.iter().map(|m| rg.graph.ancestor_at_level(m.node, "rack")).collect();
        assert_eq!(racks.len(), 1, "members of a rack-constrained group in several racks");
    }
    if let Some(domain) = a.domain {
        let within = |mut v: Option<VertexId>| {
            while let Some(at) = v {
                if at == domain {
                    return true;
                }
                v = rg.graph.vertex(at).parent;
            }
            false
        };
        assert!(a.members.iter().all(|m| within(Some(rg.graph.node(m.node).vertex))), "a member outside its domain");
    }
}

/// Runs `ops` on `rg`, checking every invariant after each; `socketed` lets requests ask for
/// sockets.
fn run_ops(mut rg: ResourceGraph, ops: &[Op], socketed: bool) -> Result<(), TestCaseError> {
    let mut now = 0i64;
    // The same nodes, cordoned alike, never allocated on.
    let mut fresh = rg.without_allocations();
    for (i, op) in ops.iter().enumerate() {
        let before = fingerprint(&rg.graph);
        match op {
            Op::Allocate(s) | Op::Reserve(s) => {
                let req = request(i, s, socketed);
                let sat = rg.satisfiability(&req);
                let ahead = rg.graph.free_ahead(now);
                check_free_ahead(&rg, now, &ahead)?;
                let outcome = if matches!(op, Op::Allocate(_)) {
                    rg.allocate(&req, now)
                } else {
                    rg.allocate_orelse_reserve(&req, now)
                };
                match outcome {
                    MatchOutcome::Allocated(id) => {
                        prop_assert!(sat.is_ok(), "placed a group satisfiability rejected: {sat:?}");
                        check_placement(&rg, id, true);
                        // What it holds in all fits the room ahead at every moment of its run.
                        let end = rg.allocation(id).unwrap().end;
                        if let Some(least) = ahead.least_before(end) {
                            let held = held_in_all(&rg, id);
                            prop_assert!(held.iter().zip(least).all(|(h, l)| h <= l), "{held:?} over {least:?}");
                        }
                        // Cancel is the exact inverse of the allocation.
                        let mut undo = rg.clone();
                        undo.cancel(id).unwrap();
                        prop_assert_eq!(fingerprint(&undo.graph), before.clone());
                    }
                    MatchOutcome::Reserved { id, at } => {
                        prop_assert!(sat.is_ok());
                        prop_assert!(at > now, "a reservation starts in the future");
                        check_placement(&rg, id, true);
                    }
                    MatchOutcome::Busy(_) | MatchOutcome::Unsatisfiable(_) => {
                        prop_assert_eq!(fingerprint(&rg.graph), before.clone(), "a refused match changed the graph");
                        if matches!(outcome, MatchOutcome::Unsatisfiable(_)) {
                            prop_assert!(sat.is_err());
                        }
                        // Completeness for unconstrained rigid groups: if first fit says busy,
                        // the nodes really cannot hold the minimum.
                        if req.topology.is_none() && req.sets.is_empty() && sat.is_ok() {
                            let d = Demand::resolve(&rg.graph, &req).unwrap();
                            // Until the end of the fewest members: an elastic group runs longer on fewer.
                            let end = ResourceGraph::end_of(now, &req, d.members(d.min_units));
                            let mut buf = Vec::new();
                            let total: u32 = rg
                                .graph
                                .live_nodes()
                                .map(|(n, _)| rg.graph.node_units(n, &d, Window::Now { now, end }, &mut buf))
                                .sum();
                            prop_assert!(total < d.min_units, "busy although {total} units fit (need {})", d.min_units);
                        }
                    }
                }
            }
            Op::Cancel(k) => {
                if let Some(id) = pick(&rg, *k, false) {
                    rg.cancel(id).unwrap();
                }
            }
            Op::Shrink(k, m) => {
                if let Some(id) = pick(&rg, *k, true) {
                    let members: Vec<u32> =
                        rg.allocation(id).unwrap().members.iter().map(|x| x.index).take(*m as usize).collect();
                    rg.shrink(id, &members).unwrap();
                }
            }
            Op::Grow(k, m) => {
                if let Some(id) = pick(&rg, *k, true) {
                    match rg.grow(id, *m, now) {
                        Ok(Some(added)) => {
                            prop_assert_eq!(added.len() as u32, *m);
                            check_placement(&rg, id, false);
                        }
                        Ok(None) | Err(_) => prop_assert_eq!(fingerprint(&rg.graph), before.clone()),
                    }
                }
            }
            Op::Reimport(k) => {
                // Cancel then import of the same placement is the identity.
                if let Some(id) = pick(&rg, *k, true) {
                    let a = rg.allocation(id).unwrap().clone();
                    let members: Vec<ImportedMember> = a
                        .members
                        .iter()
                        .map(|m| ImportedMember {
                            index: m.index,
                            node: rg.graph.node(m.node).name.clone(),
                            devices: m
                                .devices
                                .iter()
                                .chain(&m.sockets)
                                .map(|d| rg.graph.vertex(*d).meta.name.clone())
                                .collect(),
                        })
                        .collect();
                    // From when every member held its place: members added by grow joined later,
                    // and an earlier start could overlap a reservation made before they joined.
                    let joined =
                        rg.graph.nodes.iter().flat_map(|n| &n.spans).filter(|s| s.alloc == id).map(|s| s.start);
                    let start = joined.max().unwrap_or(a.start);
                    rg.cancel(id).unwrap();
                    rg.import(id, &a.request, &members, (start, a.end)).unwrap();
                    // Import knows one start for the group; members added later by grow had
                    // their own. Nor does it know from which sockets a group that asks for none
                    // took its pooled amounts: they are split again over the sockets as they are
                    // now. Everything else must be identical.
                    let same_start = |mut f: common::Fingerprint| {
                        for s in f.nodes.iter_mut().flat_map(|n| n.1.iter_mut()).filter(|s| s.alloc == id) {
                            s.start = a.start;
                            if a.request.sockets.is_none() {
                                s.sockets.clear();
                            }
                        }
                        f
                    };
                    prop_assert_eq!(same_start(fingerprint(&rg.graph)), same_start(before.clone()));
                }
            }
            Op::Advance(dt) => now += dt,
            Op::Cordon(n, c) => {
                let names: Vec<String> = rg.graph.live_nodes().map(|(_, n)| n.name.clone()).collect();
                rg.set_unschedulable(&names[n % names.len()], *c).unwrap();
                fresh.set_unschedulable(&names[n % names.len()], *c).unwrap();
            }
        }
        check_invariants(&rg);
    }
    // Released of everything, the graph is its nodes as if nothing had ever been placed.
    let bare = rg.without_allocations();
    prop_assert_eq!(bare.allocations().count(), 0);
    prop_assert_eq!(fingerprint(&bare.graph), fingerprint(&fresh.graph));
    check_invariants(&bare);
    Ok(())
}

/// What allocation `id` holds in all, by resource.
fn held_in_all(rg: &ResourceGraph, id: u64) -> Vec<u64> {
    let mut held = vec![0u64; rg.graph.resources.len()];
    for s in rg.graph.nodes.iter().flat_map(|n| &n.spans).filter(|s| s.alloc == id) {
        for (h, a) in held.iter_mut().zip(&s.amounts) {
            *h += a;
        }
    }
    held
}

/// The room ahead against a count at every moment of every schedulable node's spans: the least
/// total free before each moment (the room just after `now` included) is what the spans say.
fn check_free_ahead(
    rg: &ResourceGraph,
    now: i64,
    ahead: &muster_graph::free_ahead::FreeAhead,
) -> Result<(), TestCaseError> {
    let g = &rg.graph;
    let free_at = |t: i64| -> Vec<u64> {
        let mut total = vec![0u64; g.resources.len()];
        for (_, n) in g.live_nodes().filter(|(_, n)| n.schedulable()) {
            for (k, f) in total.iter_mut().enumerate() {
                let used: u64 = n.spans.iter().filter(|s| s.start <= t && t < s.end).map(|s| s.amounts[k]).sum();
                *f += n.capacity[k].saturating_sub(used);
            }
        }
        total
    };
    let least_with = |base: &[u64], other: Option<&[u64]>| -> Vec<u64> {
        base.iter().enumerate().map(|(k, &b)| other.map_or(b, |o| b.min(o[k]))).collect()
    };
    let base = free_at(now);
    let mut moments: Vec<i64> =
        g.nodes.iter().flat_map(|n| &n.spans).flat_map(|s| [s.start, s.end]).filter(|&t| t > now).collect();
    moments.sort_unstable();
    moments.dedup();
    for end in moments.iter().copied().chain([i64::MAX]) {
        let mut brute = base.clone();
        for &t in moments.iter().filter(|&&t| t < end) {
            brute = least_with(&brute, Some(&free_at(t)));
        }
        prop_assert_eq!(least_with(&base, ahead.least_before(end)), brute, "least free before {}", end);
    }
    Ok(())
}

proptest! {
    // 192 cases by default; PROPTEST_CASES raises it for a deeper run (`make properties`).
    #![proptest_config(ProptestConfig { cases: std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(192), ..ProptestConfig::default() })]

    #[test]
    fn random_operation_sequences_keep_every_invariant(
        classes in proptest::collection::vec(class_strategy(), 1..4),
        ops in proptest::collection::vec(op_strategy(), 1..40),
    ) {
        let graph = cluster::load("p.yaml", &cluster_yaml(&classes)).unwrap();
        run_ops(ResourceGraph::new(graph, Policy::First), &ops, false)?;
    }

    #[test]
    fn random_operation_sequences_on_sockets_keep_every_invariant(
        nodes in 1i64..4,
        sockets in 1i64..4,
        ops in proptest::collection::vec(op_strategy(), 1..40),
    ) {
        let graph = jgf::import("sockets.json", &socket_jgf(nodes, sockets, false)).unwrap();
        run_ops(ResourceGraph::new(graph, Policy::First), &ops, true)?;
    }
}
