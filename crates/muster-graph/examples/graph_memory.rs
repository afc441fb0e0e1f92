//! Peak memory of a large graph: builds a cluster of N nodes (default 50000; 100 cpu / 100Gi /
//! 1000 pods, 40 per rack, 1000 per zone) from the cluster description, fills it to ~50% random
//! occupancy (one imported allocation per node), runs matches, and prints VmHWM (peak RSS) and
//! VmRSS from /proc/self/status after each stage.
//!
//!     cargo run --release -p muster-graph --example graph_memory [-- NODES]

#[path = "../benches/common/mod.rs"]
mod common;

use std::time::Instant;

use common::{GI, Shape, allocate_ok, group, round};
use muster_graph::Policy;

fn status(field: &str) -> String {
    let text = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    text.lines()
        .find(|l| l.starts_with(field))
        .map(|l| l[field.len() + 1..].trim().to_string())
        .unwrap_or_else(|| "n/a".to_string())
}

fn report(stage: &str, t: Instant) {
    println!(
        "{stage:<44} VmHWM {:>12}  VmRSS {:>12}  ({:.2} s)",
        status("VmHWM"),
        status("VmRSS"),
        t.elapsed().as_secs_f64()
    );
}

fn main() {
    let nodes: u64 = std::env::args().nth(1).map(|a| a.parse().expect("NODES must be a number")).unwrap_or(50_000);
    let t = Instant::now();
    report("start", t);
    let shape = Shape::big_nodes(nodes);
    let graph = muster_graph::cluster::load("bench.yaml", &shape.yaml()).expect("cluster description");
    let mut rg = muster_graph::ResourceGraph::new(graph, Policy::First);
    report(&format!("built {nodes} nodes ({} vertices)", rg.graph.vertices.len()), t);
    common::fill_random(&mut rg, &shape, 0x5EED_0001);
    let (cpu, mem) = common::occupancy(&rg);
    report(&format!("filled (cpu {cpu:.1}%, memory {mem:.1}%)"), t);
    let ten = group("ten", 10, 2000, 2 * GI);
    for _ in 0..1000 {
        round(&mut rg, &ten);
    }
    report("1000 x allocate+cancel of 10 members", t);
    let mut kept = Vec::new();
    for _ in 0..1000 {
        kept.push(allocate_ok(&mut rg, &ten));
    }
    let big = group("thousand", 1000, 2000, 2 * GI);
    kept.push(allocate_ok(&mut rg, &big));
    report("1000 x 10 members + 1 x 1000 members held", t);
    for id in kept {
        rg.cancel(id).expect("cancel");
    }
    report("all cancelled", t);
    println!("peak RSS (VmHWM): {}", status("VmHWM"));
}
