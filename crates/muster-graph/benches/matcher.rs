//! Matcher benchmarks: all-or-nothing placement of a group on clusters of 100 to 50k nodes at
//! ~50% random occupancy (see benches/common/mod.rs), policies, topology constraints, cancel, and
//! the Fluxion comparison points. Run with `cargo bench -p muster-graph --bench matcher`; results
//! are recorded in docs/benchmarks.md.
//!
//! Every timed iteration allocates the group (asserting that every member was placed) and cancels
//! it, so the graph returns to the same state and iterations are independent. Graphs are built
//! once per case, outside the timed loop.

mod common;

use std::hint::black_box;
use std::time::{Duration, Instant};

use common::{GI, Shape, allocate_ok, group, occupancy, round};
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use muster_graph::jobspec::{MemberSet, SubGroup, TopologyConstraint};
use muster_graph::{GroupRequest, MatchOutcome, Policy, ResourceGraph};

const SEED: u64 = 0x5EED_0001;

fn ten() -> GroupRequest {
    group("ten", 10, 2000, 2 * GI)
}

fn with_rack(mut req: GroupRequest) -> GroupRequest {
    req.topology = Some(TopologyConstraint::required("rack"));
    req
}

/// A group of `members`: one launcher (1 cpu), half the rest of (2 cpu, 2Gi), half of (1 cpu, 4Gi).
fn three_sets(members: u32) -> GroupRequest {
    let set = |name: &str, count: u32, cpu: u64, memory: u64| MemberSet {
        name: name.into(),
        min_members: count,
        max_members: count,
        requests: vec![("cpu".into(), cpu), ("memory".into(), memory)],
        devices: Vec::new(),
        filter: Default::default(),
        topology: None,
    };
    let half = (members - 1) / 2;
    let sets = vec![
        set("launcher", 1, 1000, GI),
        set("compute", half, 2000, 2 * GI),
        set("memory", members - 1 - half, 1000, 4 * GI),
    ];
    GroupRequest::simple("sets", 1, &[]).with_sets(sets).expect("valid sets")
}

fn note(rg: &ResourceGraph, what: &str) {
    let (cpu, mem) = occupancy(rg);
    eprintln!("# {what}: {} nodes, occupancy cpu {cpu:.1}% memory {mem:.1}%", rg.graph.nodes.len());
}

/// 10 x (2 cpu, 2Gi) on 100 .. 50k nodes, policy first; and the same with a required rack.
fn scaling(c: &mut Criterion) {
    let mut g = c.benchmark_group("match10");
    for nodes in [100u64, 1_000, 10_000, 50_000] {
        let mut rg = Shape::big_nodes(nodes).build(Policy::First, SEED);
        note(&rg, &format!("match10 {nodes}"));
        let req = ten();
        g.bench_with_input(BenchmarkId::new("first", nodes), &nodes, |b, _| b.iter(|| round(&mut rg, black_box(&req))));
        let rack = with_rack(ten());
        g.bench_with_input(BenchmarkId::new("first-rack-required", nodes), &nodes, |b, _| {
            b.iter(|| round(&mut rg, black_box(&rack)))
        });
    }
    g.finish();
}

/// Large groups on 10k nodes: 1000 members unconstrained, 100 members within one rack (a rack of
/// 40 nodes at 50% holds ~1000 of these members, so 1000 cannot fit in one).
fn large_groups(c: &mut Criterion) {
    let mut rg = Shape::big_nodes(10_000).build(Policy::First, SEED);
    let mut g = c.benchmark_group("large10k");
    let big = group("thousand", 1000, 2000, 2 * GI);
    g.bench_function("match1000/first", |b| b.iter(|| round(&mut rg, black_box(&big))));
    let rack100 = with_rack(group("hundred", 100, 2000, 2 * GI));
    g.bench_function("match100/first-rack-required", |b| b.iter(|| round(&mut rg, black_box(&rack100))));
    // The same 1000 members in three sets that ask differently (a launcher, two kinds of workers).
    let sets = three_sets(1000);
    g.bench_function("match1000-3sets/first", |b| b.iter(|| round(&mut rg, black_box(&sets))));
    // 200 members in three sets and two sub-groups, each within one rack (the launcher and the
    // compute workers in one, the memory workers in another).
    let rack = || TopologyConstraint::required("rack");
    let subgroup = |name: &str, sets: &[&str]| SubGroup {
        name: name.into(),
        sets: sets.iter().map(|s| s.to_string()).collect(),
        topology: rack(),
    };
    let subgroups = three_sets(200)
        .with_subgroups(vec![subgroup("a", &["launcher", "compute"]), subgroup("b", &["memory"])])
        .expect("valid sub-groups");
    g.bench_function("match200-3sets-2subgroups/rack-required", |b| b.iter(|| round(&mut rg, black_box(&subgroups))));
    // Two of four replicas of 50 members, each replica within one rack: the two optional ones
    // are placed whole where a rack takes them.
    let replicas: Vec<MemberSet> = (0..4)
        .map(|i| MemberSet {
            name: format!("r{i}"),
            min_members: if i < 2 { 50 } else { 0 },
            max_members: 50,
            requests: vec![("cpu".into(), 2000), ("memory".into(), 2 * GI)],
            devices: Vec::new(),
            filter: Default::default(),
            topology: Some(rack()),
        })
        .collect();
    let k_of_n = GroupRequest::simple("replicas", 1, &[]).with_sets(replicas).expect("valid replicas");
    g.bench_function("match200-2of4-replicas/rack-required", |b| b.iter(|| round(&mut rg, black_box(&k_of_n))));
    // 1000 members fit in no rack: a preferred rack falls back to one zone; with weights, the
    // zone's placement is weighed against the fewest racks and the fewest zones cluster-wide.
    let mut preferred = big.clone();
    preferred.topology = Some(TopologyConstraint::preferred("rack"));
    g.bench_function("match1000/rack-preferred", |b| b.iter(|| round(&mut rg, black_box(&preferred))));
    let mut weighted = preferred.clone();
    weighted.topology.as_mut().unwrap().weights = [("rack".to_string(), 10), ("zone".to_string(), 1)].into();
    g.bench_function("match1000/rack-preferred-weighted", |b| b.iter(|| round(&mut rg, black_box(&weighted))));
    // Allocate and cancel timed apart (the other half of each round is untimed).
    for (name, req) in [("10", ten()), ("1000", big.clone())] {
        g.bench_function(format!("allocate-only/{name}"), |b| {
            b.iter_custom(|iters| {
                let mut spent = Duration::ZERO;
                for _ in 0..iters {
                    let t = Instant::now();
                    let id = allocate_ok(&mut rg, &req);
                    spent += t.elapsed();
                    rg.cancel(id).expect("cancel");
                }
                spent
            })
        });
        g.bench_function(format!("cancel-only/{name}"), |b| {
            b.iter_custom(|iters| {
                let mut spent = Duration::ZERO;
                for _ in 0..iters {
                    let id = allocate_ok(&mut rg, &req);
                    let t = Instant::now();
                    black_box(rg.cancel(id).expect("cancel"));
                    spent += t.elapsed();
                }
                spent
            })
        });
    }
    g.finish();
}

/// The same 10-member group on 10k nodes under every policy (the graph's default policy is
/// overridden per request).
fn policies(c: &mut Criterion) {
    let mut rg = Shape::big_nodes(10_000).build(Policy::First, SEED);
    let mut g = c.benchmark_group("policy10k");
    for (name, policy) in [
        ("first", Policy::First),
        ("high-id", Policy::HighId),
        ("pack", Policy::Pack),
        ("locality", Policy::Locality),
        ("spread", Policy::Spread),
        ("best-fit", Policy::BestFit),
    ] {
        let mut req = ten();
        req.policy = Some(policy);
        g.bench_function(name, |b| b.iter(|| round(&mut rg, black_box(&req))));
    }
    // Locality on 1k nodes too, to see how it scales.
    let mut rg1k = Shape::big_nodes(1_000).build(Policy::First, SEED);
    for (name, policy) in [("pack-1k", Policy::Pack), ("locality-1k", Policy::Locality)] {
        let mut req = ten();
        req.policy = Some(policy);
        g.bench_function(name, |b| b.iter(|| round(&mut rg1k, black_box(&req))));
    }
    g.finish();
}

/// A request that does not fit now: one exclusive node on 10k nodes where no node is idle. Times
/// the whole refusal (search now, satisfiability on the empty cluster, the reason).
fn refusal(c: &mut Criterion) {
    let mut rg = Shape::big_nodes(10_000).build(Policy::First, SEED);
    let idle = rg.graph.nodes.iter().filter(|n| n.idle()).count();
    eprintln!("# refusal: {idle} idle nodes of 10000");
    let mut req = GroupRequest::simple("whole", 1, &[("cpu", 1000)]);
    req.exclusive = true;
    let mut g = c.benchmark_group("busy10k");
    g.bench_function("exclusive-node", |b| {
        b.iter(|| {
            let out = rg.allocate(black_box(&req), 0);
            assert!(matches!(out, MatchOutcome::Busy(_)), "expected Busy, got {out:?}");
        })
    });
    // The same shape expressed as a pooled request for a whole node's cpu: pruned by max_free.
    let whole_cpu = GroupRequest::simple("whole-cpu", 1, &[("cpu", 100_000), ("memory", 100 * GI)]);
    g.bench_function("whole-node-pooled", |b| {
        b.iter(|| {
            let out = rg.allocate(black_box(&whole_cpu), 0);
            assert!(matches!(out, MatchOutcome::Busy(_)), "expected Busy, got {out:?}");
        })
    });
    g.finish();
}

/// Fluxion comparison points (see docs/benchmarks.md for the published figures).
fn fluxion(c: &mut Criterion) {
    let mut g = c.benchmark_group("fluxion");
    // flux-sched#448: cluster->node[256]->core[32]; jobspec node[1]->slot[1]->core[1], high-id.
    let s448 = Shape { nodes: 256, cpu: 32, memory_gi: 128, pods: 110, gpus: 0, rack: 32, zone: 256 };
    let mut rg = s448.build(Policy::HighId, SEED);
    note(&rg, "fluxion 256x32");
    let core = GroupRequest::simple("core", 1, &[("cpu", 1000)]);
    g.bench_function("256x32/1-core-high-id", |b| b.iter(|| round(&mut rg, black_box(&core))));
    let node = GroupRequest::simple("node", 1, &[("cpu", 32_000)]);
    g.bench_function("256x32/whole-node-cores", |b| b.iter(|| round(&mut rg, black_box(&node))));
    drop(rg);
    // flux-sched#1171: 16384 nodes x 64 cores x 4 gpus.
    let s1171 = Shape { nodes: 16_384, cpu: 64, memory_gi: 256, pods: 256, gpus: 4, rack: 32, zone: 1024 };
    let mut rg = s1171.build(Policy::First, SEED);
    note(&rg, "fluxion 16384x64");
    g.bench_function("16k/1-core", |b| b.iter(|| round(&mut rg, black_box(&core))));
    let node = GroupRequest::simple("node", 1, &[("cpu", 64_000), ("nvidia.com/gpu", 4)]);
    g.bench_function("16k/whole-node-cores-gpus", |b| b.iter(|| round(&mut rg, black_box(&node))));
    let nodes16 = GroupRequest::simple("nodes16", 16, &[("cpu", 64_000), ("nvidia.com/gpu", 4)]);
    g.bench_function("16k/16-whole-nodes", |b| b.iter(|| round(&mut rg, black_box(&nodes16))));
    g.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(700))
        .measurement_time(Duration::from_secs(2))
        .configure_from_args()
}

criterion_group! {
    name = benches;
    config = config();
    targets = scaling, large_groups, policies, refusal, fluxion
}
criterion_main!(benches);
