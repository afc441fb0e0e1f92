//! Engine throughput and cycle latency at scale.
//!
//! `cargo run --release -p muster-queue --example engine_bench [-- NODES PENDING RUNNING POLICY]`
//! (defaults 10000 10000 1000 easy; POLICY = strict | besteffort | easy | conservative |
//! selective, the default policy: depth 16, slowdown 3).
//!
//! 1. Burst: 1000 groups placed, then 10k pending groups that all fit on the rest of the cluster are
//!    admitted by one `schedule` call: admissions per second.
//! 2. Steady state: a full cluster (RUNNING groups running, PENDING waiting, 4 queues); each step
//!    finishes 10 running groups and runs one cycle: cycle latency and admissions per second.

use std::time::Instant;

use muster_graph::{GroupRequest, Policy, ResourceGraph};
use muster_queue::{Engine, EngineConfig, GroupKey, GroupSpec, GroupState, QueuePolicy};

fn cluster(nodes: u32) -> ResourceGraph {
    let text = format!(
        "name: bench\nnodeClasses:\n  - name: n\n    count: {nodes}\n    capacity: {{cpu: 32, memory: 128Gi, pods: 110}}\n    spread: {{zone: {}, rack: 40}}\n",
        nodes.clamp(40, 1000)
    );
    ResourceGraph::new(muster_graph::cluster::load("bench", &text).unwrap(), Policy::First)
}

fn config(policy: QueuePolicy) -> EngineConfig {
    let mut c = EngineConfig::single_queue("q0");
    for i in 1..4 {
        let mut q = c.queues[0].clone();
        q.name = format!("q{i}");
        c.queues.push(q);
    }
    for q in &mut c.queues {
        q.policy = policy;
        q.readiness.timeout_s = None;
    }
    c
}

fn spec(i: usize, members: u32, cpu: u64, duration: u64, at: i64) -> GroupSpec {
    let mut request = GroupRequest::simple(&format!("g{i}"), members, &[("cpu", cpu * 1000), ("memory", 4 << 30)]);
    request.duration = Some(duration);
    GroupSpec {
        key: GroupKey::new("bench", &format!("g{i}")),
        queue: format!("q{}", i % 4),
        priority_class: None,
        request,
        submitted_at: at,
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |i: usize, d: usize| args.get(i).and_then(|s| s.parse().ok()).unwrap_or(d);
    let nodes = arg(1, 10_000) as u32;
    let pending = arg(2, 10_000);
    let running = arg(3, 1_000);
    let policy = match args.get(4).map(String::as_str).unwrap_or("easy") {
        "strict" => QueuePolicy::StrictFifo,
        "besteffort" => QueuePolicy::BestEffortFifo,
        "conservative" => QueuePolicy::Conservative { depth: 16 },
        "selective" => QueuePolicy::Selective { depth: 16, slowdown: 3 },
        _ => QueuePolicy::Easy,
    };
    println!("nodes {nodes}, pending {pending}, running {running}, policy {policy:?}");

    // 1. Burst admission.
    let mut e = Engine::new(cluster(nodes), config(policy)).unwrap();
    for i in 0..running {
        e.submit(spec(i, 10, 2, 3600, 0), 0).unwrap();
    }
    let t = Instant::now();
    let ts = e.schedule(0);
    let first = t.elapsed();
    let admitted = ts.iter().filter(|t| t.to == GroupState::Admitted).count();
    println!(
        "burst: {admitted} admissions in {first:.2?} ({:.0}/s) [running set-up]",
        admitted as f64 / first.as_secs_f64()
    );
    for i in running..running + pending {
        e.submit(spec(i, 10, 1, 3600, 1), 1).unwrap();
    }
    let t = Instant::now();
    let ts = e.schedule(1);
    let el = t.elapsed();
    let admitted = ts.iter().filter(|t| t.to == GroupState::Admitted).count();
    println!(
        "burst: {admitted} admissions of 10-member groups in one cycle, {el:.2?}: {:.0} admissions/s, {:.1} µs each",
        admitted as f64 / el.as_secs_f64(),
        el.as_secs_f64() * 1e6 / admitted.max(1) as f64
    );

    // 2. Steady state on a full cluster.
    let mut e = Engine::new(cluster(nodes), config(policy)).unwrap();
    let per_group = (u64::from(nodes) * 32 / running as u64 / 10).max(1);
    for i in 0..running {
        e.submit(spec(i, 10, per_group, 600 + (i as u64 % 3000), 0), 0).unwrap();
    }
    let ts = e.schedule(0);
    let mut live: Vec<GroupKey> = ts.iter().filter(|t| t.to == GroupState::Admitted).map(|t| t.key.clone()).collect();
    for k in &live {
        e.pods_ready(k, 10, 0).unwrap();
    }
    for i in running..running + pending {
        let members = [1, 2, 5, 10][i % 4];
        e.submit(spec(i, members, per_group, 300 + (i as u64 % 3000), 1), 1).unwrap();
    }
    let t = Instant::now();
    e.schedule(1);
    println!(
        "steady: first cycle with {pending} pending on a full cluster: {:.2?} ({:?})",
        t.elapsed(),
        e.last_cycle()
    );
    let mut lat = Vec::new();
    let mut total_admitted = 0;
    let mut total_time = 0.0;
    let mut now = 2;
    for step in 0..100 {
        now += 1;
        for _ in 0..10 {
            if let Some(k) = live.pop() {
                e.finished(&k, true, now).unwrap();
            }
        }
        let t = Instant::now();
        let ts = e.schedule(now);
        let el = t.elapsed().as_secs_f64();
        lat.push(el);
        total_time += el;
        for tr in &ts {
            if tr.to == GroupState::Admitted {
                total_admitted += 1;
                let n = tr.allocation.as_ref().unwrap().members.len() as u32;
                e.pods_ready(&tr.key, n, now).unwrap();
                live.insert(0, tr.key.clone());
            }
        }
        if step == 0 {
            println!("steady: cycle stats {:?}", e.last_cycle());
        }
    }
    lat.sort_by(f64::total_cmp);
    println!(
        "steady: 100 cycles, {total_admitted} admissions; cycle latency median {:.2} ms, p90 {:.2} ms, max {:.2} ms; {:.0} admissions/s of cycle time",
        lat[50] * 1e3,
        lat[90] * 1e3,
        lat[99] * 1e3,
        total_admitted as f64 / total_time
    );
    let t = Instant::now();
    let view = e.queue_view(now);
    println!("queue_view: {} pending groups explained in {:.2?}", view.len(), t.elapsed());
    let t = Instant::now();
    let snap = e.snapshot();
    let json = serde_json::to_string(&snap).unwrap();
    println!("snapshot: {} groups, {} KiB JSON in {:.2?}", snap.groups.len(), json.len() / 1024, t.elapsed());
}
