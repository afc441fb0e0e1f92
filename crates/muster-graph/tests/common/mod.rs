//! Helpers shared by the matcher's integration tests.

#![allow(dead_code, unused_imports)]

pub mod parse;

use muster_graph::graph::Span;
use muster_graph::{Graph, ResourceGraph, cluster};

/// 32 nodes of 8 GPUs and 64 cores, 8 racks of 4 in 2 blocks.
pub const GPU_NODES: &str = "
name: gpus
topology: [{level: block, label: muster.dev/block}, {level: rack, label: muster.dev/rack}]
nodeClasses:
  - name: g
    count: 32
    capacity: {cpu: 64, memory: 512Gi, nvidia.com/gpu: 8, pods: 110}
    spread: {block: 16, rack: 4}
";

/// One node's (free amounts, spans sorted by allocation, device holders).
pub type NodeFingerprint = (Vec<u64>, Vec<Span>, Vec<Option<u64>>);

/// One domain's (free sums, free maxima, idle nodes, earliest end of a running allocation).
pub type DomainFingerprint = (Vec<u64>, Vec<u64>, u32, i64);

/// Everything allocation state consists of, in a comparable form: per node (free, spans sorted
/// by allocation, device holders) and per domain (free sums and maxima).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fingerprint {
    pub nodes: Vec<NodeFingerprint>,
    pub domains: Vec<DomainFingerprint>,
}

pub fn fingerprint(g: &Graph) -> Fingerprint {
    Fingerprint {
        nodes: g
            .nodes
            .iter()
            .map(|n| {
                let mut spans = n.spans.clone();
                spans.sort_by_key(|s| s.alloc);
                (n.free.clone(), spans, n.devices.iter().map(|d| d.holder).collect())
            })
            .collect(),
        domains: g.domains.iter().map(|d| (d.sum_free.clone(), d.max_free.clone(), d.idle_nodes, d.min_end)).collect(),
    }
}

pub fn graph(yaml: &str) -> Graph {
    cluster::load("test.yaml", yaml).expect("test cluster parses")
}

pub fn rg(yaml: &str, policy: muster_graph::Policy) -> ResourceGraph {
    ResourceGraph::new(graph(yaml), policy)
}

/// Checks that nothing is over-committed at any time and that free amounts, device holders and
/// domain aggregates agree with the spans. Panics with a description otherwise.
pub fn check_invariants(rg: &ResourceGraph) {
    let g = &rg.graph;
    for n in g.nodes.iter().filter(|n| !n.removed) {
        let r = n.capacity.len();
        // free = capacity - running allocations.
        for i in 0..r {
            let used: u64 = n.spans.iter().filter(|s| !s.reserved).map(|s| s.amounts[i]).sum();
            assert!(used <= n.capacity[i], "node {} resource {i}: allocations use {used} of {}", n.name, n.capacity[i]);
            assert_eq!(n.used[i], used, "node {} resource {i}: used out of step", n.name);
            assert_eq!(n.free[i], n.capacity[i] - used, "node {} resource {i}: free out of step", n.name);
        }
        // At every span start, allocations plus reservations fit.
        for p in n.spans.iter().map(|s| s.start) {
            for i in 0..r {
                let used: u64 = n.spans.iter().filter(|s| s.start <= p && p < s.end).map(|s| s.amounts[i]).sum();
                assert!(used <= n.capacity[i], "node {} resource {i} at t={p}: {used} > {}", n.name, n.capacity[i]);
            }
        }
        // Sockets: within capacity at every span start, and one whose holder asks for sockets is
        // used by nobody else at the same time.
        for p in n.spans.iter().map(|s| s.start) {
            let active: Vec<_> = n.spans.iter().filter(|s| s.start <= p && p < s.end).collect();
            for (si, socket) in n.sockets.iter().enumerate() {
                let users: Vec<_> = active.iter().filter(|s| s.sockets[si].iter().any(|&u| u > 0)).collect();
                for i in 0..r {
                    let used: u64 = users.iter().map(|s| s.sockets[si][i]).sum();
                    assert!(used <= socket.capacity[i], "node {} socket {si} resource {i} at t={p}", n.name);
                }
                let whole = users.iter().any(|s| rg.allocation(s.alloc).is_ok_and(|a| a.request.sockets.is_some()));
                assert!(!whole || users.len() == 1, "node {} socket {si} at t={p}: held whole and shared", n.name);
            }
        }
        // A device an allocation holds is counted in the socket it sits in.
        for span in n.spans.iter().filter(|s| !s.reserved && !s.sockets.is_empty()) {
            for d in n.devices.iter().filter(|d| d.holder == Some(span.alloc)) {
                if let Some(x) = d.socket {
                    let held = n
                        .devices
                        .iter()
                        .filter(|e| e.holder == d.holder && e.socket == d.socket && e.resource == d.resource);
                    let counted = span.sockets[usize::from(x)][d.resource.index()];
                    assert!(
                        held.count() as u64 <= counted,
                        "node {} allocation {}: a device outside its socket's count",
                        n.name,
                        span.alloc
                    );
                }
            }
        }
        // Devices: each allocation holds exactly what its members on this node hold.
        for s in n.spans.iter().filter(|s| !s.reserved) {
            let a = rg.allocation(s.alloc).expect("span of a live allocation");
            let held = n.devices.iter().filter(|d| d.holder == Some(s.alloc)).count();
            let member_devices: usize =
                a.members.iter().filter(|m| g.node(m.node).name == n.name).map(|m| m.devices.len()).sum();
            assert_eq!(held, member_devices, "node {} allocation {}: device holders out of step", n.name, s.alloc);
        }
    }
    // Incremental aggregates equal a rebuild from scratch.
    let mut fresh = g.clone();
    fresh.rebuild_index();
    assert_eq!(fingerprint(&fresh).domains, fingerprint(g).domains, "domain aggregates drifted");
}
