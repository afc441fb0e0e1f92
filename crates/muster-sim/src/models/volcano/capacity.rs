//! Volcano's `capacity` plugin (pkg/scheduler/plugins/capacity/capacity.go, v1.15.1) over the
//! Queues of [`super::queue_specs`]: flat (buildQueueAttrs), or a tree under `root` when the
//! scenario's cohorts form one (`enableHierarchy`, buildHierarchicalQueueAttrs):
//! - flat: a Queue's realCapability is the cluster less every Queue's guarantee plus its own,
//!   capped by its capability; its deserved is clamped to that and raised to its guarantee;
//! - tree: `root` may take anything; under each Queue its children's deserved are raised to their
//!   guarantees, a resource a child's capability does not name is its parent's, and a child's
//!   realCapability is its parent's less all the children's guarantees plus its own, capped by its
//!   capability (checkHierarchicalQueue). A pod counts against its Queue and every one above it;
//!   a job is enqueued and a pod allocated only within the realCapability of each (the
//!   `...Hierarchically` checks); queues take turns by the shares of their ancestors where their
//!   paths part (QueueOrderFn). Reclaim looks at the reclaimee's own Queue only, as it does with
//!   `ancestorReclaimLevel` at its default of 0.
//!
//! A resource a Queue does not list has no deserved or capability.

use super::queue_specs::{QueueSpec, hierarchical, queue_specs};
use crate::scenario::Tenants;

/// The Queues' quotas in base units by resource index, and what each holds in the session.
/// Queues are indexed as the tenants' queues first, then (in a tree) the cohorts' and `root`.
#[derive(Debug, Clone)]
pub struct Queues {
    /// Resource indices the plugin compares (all but `pods`).
    dims: Vec<usize>,
    /// How many of the Queues are tenants' (the leaves jobs go to).
    tenants: usize,
    /// Per Queue: the Queues above it, `root` first; empty when flat.
    ancestors: Vec<Vec<usize>>,
    /// Per Queue: deserved (after the plugin's adjustments); None where the queue sets none.
    deserved: Vec<Vec<Option<u64>>>,
    real_capability: Vec<Vec<u64>>,
    guarantee: Vec<Vec<u64>>,
    /// Per Queue: what its pods (in a tree, its subtree's) hold (Allocated, Binding, Bound,
    /// Running), kept current through the session as pods are placed, pipelined and evicted.
    pub allocated: Vec<Vec<u64>>,
}

impl Queues {
    /// The tenants' queues over a cluster of `total`, resources named `resources`.
    pub fn new(tenants: &Tenants, resources: &[String], total: &[u64]) -> Self {
        let dims: Vec<usize> = (0..resources.len()).filter(|&r| resources[r] != "pods").collect();
        // Tenants' Queues first, so that a tenant's queue index is its Queue's.
        let mut specs = queue_specs(tenants);
        specs.sort_by_key(|s| s.tenant.is_none());
        let amounts = |m: &std::collections::BTreeMap<String, u64>| -> Vec<Option<u64>> {
            resources.iter().map(|r| m.get(r).copied()).collect()
        };
        let guarantee: Vec<Vec<u64>> =
            specs.iter().map(|s| amounts(&s.guarantee).into_iter().map(|g| g.unwrap_or(0)).collect()).collect();
        let deserved: Vec<Vec<Option<u64>>> = specs.iter().map(|s| amounts(&s.deserved)).collect();
        let capability: Vec<Vec<Option<u64>>> = specs.iter().map(|s| amounts(&s.capability)).collect();
        let mut queues = Queues {
            dims,
            tenants: tenants.queues.len(),
            ancestors: vec![Vec::new(); specs.len()],
            deserved,
            real_capability: Vec::new(),
            guarantee,
            allocated: vec![vec![0; resources.len()]; specs.len()],
        };
        if hierarchical(tenants) {
            queues.build_tree(&specs, capability);
        } else {
            queues.build_flat(capability, total);
        }
        queues
    }

    /// buildQueueAttrs: every Queue shares the cluster.
    fn build_flat(&mut self, capability: Vec<Vec<Option<u64>>>, total: &[u64]) {
        let total_guarantee: Vec<u64> = (0..total.len()).map(|r| self.guarantee.iter().map(|g| g[r]).sum()).collect();
        self.real_capability = (0..capability.len())
            .map(|q| {
                (0..total.len())
                    .map(|r| {
                        let shared = total[r].saturating_sub(total_guarantee[r]) + self.guarantee[q][r];
                        capability[q][r].map_or(shared, |c| c.min(shared))
                    })
                    .collect()
            })
            .collect();
        for q in 0..self.deserved.len() {
            for r in 0..total.len() {
                let (real, guarantee) = (self.real_capability[q][r], self.guarantee[q][r]);
                self.deserved[q][r] = self.deserved[q][r].map(|d| d.min(real).max(guarantee));
            }
        }
    }

    /// buildHierarchicalQueueAttrs and checkHierarchicalQueue: `root` (added last) without limit,
    /// then each Queue's children, from the top down.
    fn build_tree(&mut self, specs: &[QueueSpec], mut capability: Vec<Vec<Option<u64>>>) {
        let r = self.allocated[0].len();
        let root = specs.len();
        let index = |name: &str| specs.iter().position(|s| s.name == name);
        let parent: Vec<usize> = specs.iter().map(|s| s.parent.as_deref().and_then(index).unwrap_or(root)).collect();
        self.ancestors.push(Vec::new());
        self.deserved.push(vec![None; r]);
        self.guarantee.push(vec![0; r]);
        self.allocated.push(vec![0; r]);
        capability.push(vec![Some(u64::MAX); r]);
        self.real_capability = vec![vec![u64::MAX; r]; root + 1];
        let depth = |mut q: usize| {
            let mut d = 0;
            while q != root {
                q = parent[q];
                d += 1;
            }
            d
        };
        let mut order: Vec<usize> = (0..root).collect();
        order.sort_by_key(|&q| depth(q));
        for &q in &order {
            let p = parent[q];
            self.ancestors[q] = self.ancestors[p].iter().copied().chain([p]).collect();
        }
        for p in std::iter::once(root).chain(order.iter().copied()) {
            let children: Vec<usize> = (0..root).filter(|&c| parent[c] == p).collect();
            let mut total_guarantee = vec![0u64; r];
            for &c in &children {
                for d in 0..r {
                    let g = self.guarantee[c][d];
                    if g > 0 {
                        self.deserved[c][d] = Some(self.deserved[c][d].unwrap_or(0).max(g));
                    }
                    capability[c][d] = capability[c][d].or(capability[p][d]);
                    total_guarantee[d] = total_guarantee[d].saturating_add(g);
                }
            }
            for &c in &children {
                for d in 0..r {
                    let real = self.real_capability[p][d].saturating_sub(total_guarantee[d]);
                    let real = real.saturating_add(self.guarantee[c][d]);
                    self.real_capability[c][d] = capability[c][d].map_or(real, |cap| cap.min(real));
                }
            }
        }
    }

    /// How many tenants' queues there are.
    pub fn len(&self) -> usize {
        self.tenants
    }

    /// Queue `q` and every Queue above it.
    fn chain(&self, q: usize) -> impl Iterator<Item = usize> + '_ {
        std::iter::once(q).chain(self.ancestors[q].iter().rev().copied())
    }

    /// Whether `base` + `req` stays within the queue's realCapability on every dimension `req`
    /// asks for.
    fn within_capability(&self, q: usize, base: &[u64], req: &[u64]) -> bool {
        self.dims.iter().all(|&d| req[d] == 0 || base[d].saturating_add(req[d]) <= self.real_capability[q][d])
    }

    /// AllocatableFn: one more pod asking `req` keeps its queue, and each Queue above it, within
    /// its realCapability.
    pub fn allocatable(&self, q: usize, req: &[u64]) -> bool {
        self.chain(q).all(|a| self.within_capability(a, &self.allocated[a], req))
    }

    /// JobEnqueueableFn: the job's minResources on top of what the queue holds and what its
    /// Inqueue groups still need, less its elastic part, stays within realCapability, and so for
    /// each Queue above it with its subtree's. `inqueue` and `elastic` are per tenant's queue.
    pub fn enqueueable(&self, q: usize, min: &[u64], inqueue: &[Vec<u64>], elastic: &[Vec<u64>]) -> bool {
        self.chain(q).all(|a| {
            let leaves: Vec<usize> = (0..self.tenants).filter(|&t| t == a || self.ancestors[t].contains(&a)).collect();
            let sum = |of: &[Vec<u64>], d: usize| leaves.iter().map(|&t| of[t][d]).sum::<u64>();
            let base: Vec<u64> = (0..min.len())
                .map(|d| (self.allocated[a][d] + sum(inqueue, d)).saturating_sub(sum(elastic, d)))
                .collect();
            self.within_capability(a, &base, min)
        })
    }

    /// PreemptiveFn: the queue may reclaim for a pod asking `req` if it then stays within its
    /// realCapability and within deserved on at least one dimension the pod asks for.
    pub fn preemptive(&self, q: usize, req: &[u64]) -> bool {
        let used = &self.allocated[q];
        self.allocatable(q, req)
            && self.dims.iter().any(|&d| req[d] > 0 && used[d] + req[d] <= self.deserved[q][d].unwrap_or(0))
    }

    /// The queue's share (updateQueueAttrShare): the largest allocated / deserved over the
    /// dimensions it deserves; 1 for a queue that deserves nothing. With whether it deserves
    /// anything, for QueueOrderFn's tie-break.
    fn share(&self, q: usize) -> (f64, bool) {
        let deserved: Vec<(usize, u64)> =
            self.dims.iter().filter_map(|&d| self.deserved[q][d].filter(|&v| v > 0).map(|v| (d, v))).collect();
        if deserved.is_empty() {
            return (1.0, false);
        }
        let share = deserved.iter().map(|&(d, v)| self.allocated[q][d] as f64 / v as f64).fold(0.0, f64::max);
        (share, true)
    }

    /// QueueOrderFn (queues of equal priority): the lowest share first, compared between the
    /// Queues where the two paths from `root` part (the queues themselves under one parent); on a
    /// tie, one that deserves something first; then the tenants' order.
    fn queue_order(&self, a: usize, b: usize) -> std::cmp::Ordering {
        let (pa, pb) = self.parted(a, b);
        let ((sa, da), (sb, db)) = (self.share(pa), self.share(pb));
        sa.total_cmp(&sb).then(db.cmp(&da)).then(a.cmp(&b))
    }

    /// The queue first in QueueOrderFn.
    pub fn first<'a>(&self, queues: impl Iterator<Item = &'a usize>) -> Option<usize> {
        queues.copied().min_by(|&a, &b| self.queue_order(a, b))
    }

    /// `queues` in QueueOrderFn's order.
    pub fn ordered(&self, mut queues: Vec<usize>) -> Vec<usize> {
        queues.sort_by(|&a, &b| self.queue_order(a, b));
        queues
    }

    /// The Queues whose shares QueueOrderFn compares for leaves `a` and `b` (getQueueLevel): the
    /// ones just below the last ancestor their paths share, or the leaves themselves.
    fn parted(&self, a: usize, b: usize) -> (usize, usize) {
        let (xa, xb) = (&self.ancestors[a], &self.ancestors[b]);
        let level = xa.iter().zip(xb).take_while(|(x, y)| x == y).count().saturating_sub(1);
        (xa.get(level + 1).copied().unwrap_or(a), xb.get(level + 1).copied().unwrap_or(b))
    }

    /// ReclaimableFn for one reclaimee asking `req` of queue `q`, whose holdings as victims are
    /// taken so far are `allocated`: it is a victim if taking it keeps the queue at its
    /// guarantee and the queue deserves nothing it asks for, or holds more than it deserves on a
    /// dimension it asks for. A victim's request comes off `allocated`.
    pub fn take_victim(&self, q: usize, allocated: &mut [u64], req: &[u64]) -> bool {
        let keeps_guarantee = self.dims.iter().all(|&d| self.guarantee[q][d] <= allocated[d].saturating_sub(req[d]));
        let relevant =
            || self.dims.iter().filter(|&&d| req[d] > 0).filter_map(|&d| self.deserved[q][d].map(|v| (d, v)));
        let immediate = !relevant().any(|(_, v)| v > 0);
        let over = relevant().any(|(d, v)| allocated[d] > v);
        if keeps_guarantee && (immediate || over) {
            for (a, r) in allocated.iter_mut().zip(req) {
                *a = a.saturating_sub(*r);
            }
            true
        } else {
            false
        }
    }

    /// Adds (`take`) or removes a pod's request from what queue `q`, and each Queue above it,
    /// holds.
    pub fn hold(&mut self, q: usize, req: &[u64], take: bool) {
        let chain: Vec<usize> = self.chain(q).collect();
        for a in chain {
            for (x, r) in self.allocated[a].iter_mut().zip(req) {
                *x = if take { *x + r } else { x.saturating_sub(*r) };
            }
        }
    }
}
