//! Shared set-up for the matcher benchmarks and the memory example: clusters built from the
//! cluster description, filled to a deterministic random occupancy.
//!
//! Occupancy model: every node gets one imported allocation whose cpu and memory (and, where the
//! class has them, devices) are drawn independently and uniformly from 0..=capacity in whole
//! cores / whole GiB / whole devices. Mean use is therefore 50% of every resource, some nodes are
//! full, some idle, and cpu and memory use are uncorrelated (so per-domain maxima do not prune
//! perfectly).

#![allow(dead_code)]

use muster_graph::{GroupRequest, ImportedMember, MatchOutcome, Policy, ResourceGraph};

pub const GI: u64 = 1 << 30;

/// Tiny deterministic generator (SplitMix64); no `rand` in the workspace.
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in 0..=max.
    pub fn upto(&mut self, max: u64) -> u64 {
        self.next_u64() % (max + 1)
    }
}

/// One node class: capacity per node and how nodes are grouped into racks and zones.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    pub nodes: u64,
    pub cpu: u64,
    pub memory_gi: u64,
    pub pods: u64,
    pub gpus: u64,
    pub rack: u64,
    pub zone: u64,
}

impl Shape {
    /// 100 cpu / 100Gi / 1000 pods nodes, 40 per rack, 1000 per zone (smaller clusters: one
    /// zone, 20 per rack).
    pub fn big_nodes(nodes: u64) -> Self {
        let (rack, zone) = if nodes >= 1000 { (40, 1000) } else { (20, nodes) };
        Self { nodes, cpu: 100, memory_gi: 100, pods: 1000, gpus: 0, rack, zone }
    }

    pub fn yaml(&self) -> String {
        let devices =
            if self.gpus > 0 { format!("\n    devices: {{nvidia.com/gpu: {}}}", self.gpus) } else { String::new() };
        format!(
            "name: bench\n\
             topology:\n  - {{level: zone, label: topology.kubernetes.io/zone}}\n  - {{level: rack, label: muster.dev/rack}}\n\
             nodeClasses:\n  - name: n\n    count: {}\n    capacity: {{cpu: \"{}\", memory: {}Gi, pods: {}}}{devices}\n    spread: {{zone: {}, rack: {}}}\n",
            self.nodes, self.cpu, self.memory_gi, self.pods, self.zone, self.rack
        )
    }

    /// Builds the graph from the description and fills it to ~50% random occupancy.
    pub fn build(&self, policy: Policy, seed: u64) -> ResourceGraph {
        let graph = muster_graph::cluster::load("bench.yaml", &self.yaml()).expect("bench cluster description");
        let mut rg = ResourceGraph::new(graph, policy);
        fill_random(&mut rg, self, seed);
        rg
    }
}

/// Gives every node one imported allocation of random size (see the module comment).
pub fn fill_random(rg: &mut ResourceGraph, shape: &Shape, seed: u64) {
    let mut rng = SplitMix64(seed);
    for i in 0..shape.nodes {
        let cpu = rng.upto(shape.cpu);
        let mem = rng.upto(shape.memory_gi);
        let gpus = if shape.gpus > 0 { rng.upto(shape.gpus) } else { 0 };
        if cpu == 0 && mem == 0 && gpus == 0 {
            continue;
        }
        let mut requests = vec![("cpu", cpu * 1000), ("memory", mem * GI)];
        if gpus > 0 {
            requests.push(("nvidia.com/gpu", gpus));
        }
        let req = GroupRequest::simple(&format!("bg-{i}"), 1, &requests);
        let member = ImportedMember {
            index: 0,
            node: format!("n-{i}"),
            devices: (0..gpus).map(|g| format!("gpu{g}")).collect(),
        };
        rg.import(1_000_000 + i, &req, &[member], (0, ResourceGraph::end_of(0, &req, 1)))
            .expect("background import fits by construction");
    }
}

/// The measured group: `members` x (cpu millicores, memory bytes).
pub fn group(name: &str, members: u32, cpu_milli: u64, memory: u64) -> GroupRequest {
    GroupRequest::simple(name, members, &[("cpu", cpu_milli), ("memory", memory)])
}

/// Allocates, asserts the group was placed with all its members, and returns the id.
pub fn allocate_ok(rg: &mut ResourceGraph, req: &GroupRequest) -> u64 {
    match rg.allocate(req, 0) {
        MatchOutcome::Allocated(id) => {
            debug_assert_eq!(rg.allocation(id).map(|a| a.members.len()).ok(), Some(req.min_members as usize));
            id
        }
        other => panic!("group {} was not allocated: {other:?}", req.name),
    }
}

/// One allocate + cancel round; the graph is back to its previous state afterwards.
pub fn round(rg: &mut ResourceGraph, req: &GroupRequest) {
    let id = allocate_ok(rg, req);
    rg.cancel(id).expect("cancel of a fresh allocation");
}

/// Percentage of cpu and memory in use, for the record.
pub fn occupancy(rg: &ResourceGraph) -> (f64, f64) {
    let (cap, free) = rg.graph.totals();
    let pct = |name: &str| {
        let i = rg.graph.resources.get(name).expect("resource").index();
        100.0 * (cap[i] - free[i]) as f64 / cap[i] as f64
    };
    (pct("cpu"), pct("memory"))
}
