//! Volcano's `capacity` plugin over flat queues (pkg/scheduler/plugins/capacity/capacity.go,
//! v1.15.1): each tenant's queue is a Volcano Queue, its quotas written as
//! - `deserved` = nominal,
//! - `capability` = nominal + borrowingLimit (no borrowingLimit: no capability, the cluster;
//!   a queue in no cohort, which borrows nothing: nominal),
//! - `guarantee` = the part of nominal it never lends (nominal - lendingLimit; 0 without one),
//! - `reclaimable: true`.
//!
//! Cohorts have no Volcano counterpart here: every queue shares the whole cluster (hierarchical
//! queues are not modelled). A resource a queue does not list has no deserved or capability.

use crate::scenario::Tenants;

/// The queues' quotas in base units by resource index, and what each holds in the session.
#[derive(Debug, Clone)]
pub struct Queues {
    /// Resource indices the plugin compares (all but `pods`).
    dims: Vec<usize>,
    /// Per queue: deserved (after the plugin's clamp to realCapability and raise to guarantee);
    /// None where the queue sets none.
    deserved: Vec<Vec<Option<u64>>>,
    /// Per queue: realCapability, the cluster less every queue's guarantee plus its own, capped
    /// by its capability (buildQueueAttrs).
    real_capability: Vec<Vec<u64>>,
    guarantee: Vec<Vec<u64>>,
    /// Per queue: what its pods hold (Allocated, Binding, Bound, Running), kept current through
    /// the session as pods are placed, pipelined and evicted.
    pub allocated: Vec<Vec<u64>>,
}

impl Queues {
    /// The tenants' queues over a cluster of `total`, resources named `resources`.
    pub fn new(tenants: &Tenants, resources: &[String], total: &[u64]) -> Self {
        let dims: Vec<usize> = (0..resources.len()).filter(|&r| resources[r] != "pods").collect();
        let n = tenants.queues.len();
        let quota = |q: usize, r: usize| tenants.quota(q, &resources[r]);
        let guarantee: Vec<Vec<u64>> =
            (0..n).map(|q| (0..resources.len()).map(|r| quota(q, r).map_or(0, |x| x.guaranteed())).collect()).collect();
        let total_guarantee: Vec<u64> = (0..resources.len()).map(|r| guarantee.iter().map(|g| g[r]).sum()).collect();
        let real_capability: Vec<Vec<u64>> = (0..n)
            .map(|q| {
                (0..resources.len())
                    .map(|r| {
                        let shared = total[r].saturating_sub(total_guarantee[r]) + guarantee[q][r];
                        let alone = tenants.queues[q].cohort.is_none();
                        let capability = quota(q, r).and_then(|x| match x.borrowing_limit {
                            _ if alone => Some(x.nominal),
                            limit => limit.map(|b| x.nominal + b),
                        });
                        capability.map_or(shared, |c| c.min(shared))
                    })
                    .collect()
            })
            .collect();
        let deserved = (0..n)
            .map(|q| {
                (0..resources.len())
                    .map(|r| quota(q, r).map(|x| x.nominal.min(real_capability[q][r]).max(guarantee[q][r])))
                    .collect()
            })
            .collect();
        Queues { dims, deserved, real_capability, guarantee, allocated: vec![vec![0; resources.len()]; n] }
    }

    pub fn len(&self) -> usize {
        self.allocated.len()
    }

    /// Whether `base` + `req` stays within the queue's realCapability on every dimension `req`
    /// asks for.
    fn within_capability(&self, q: usize, base: &[u64], req: &[u64]) -> bool {
        self.dims.iter().all(|&d| req[d] == 0 || base[d] + req[d] <= self.real_capability[q][d])
    }

    /// AllocatableFn: one more pod asking `req` keeps the queue within its realCapability.
    pub fn allocatable(&self, q: usize, req: &[u64]) -> bool {
        self.within_capability(q, &self.allocated[q], req)
    }

    /// JobEnqueueableFn: the job's minResources on top of what the queue holds and what its
    /// Inqueue groups still need, less its elastic part, stays within realCapability.
    pub fn enqueueable(&self, q: usize, min: &[u64], inqueue: &[u64], elastic: &[u64]) -> bool {
        let base: Vec<u64> =
            (0..min.len()).map(|d| (self.allocated[q][d] + inqueue[d]).saturating_sub(elastic[d])).collect();
        self.within_capability(q, &base, min)
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

    /// QueueOrderFn (queues of equal priority): the lowest share first; on a tie, one that
    /// deserves something first; then the tenants' order.
    pub fn first<'a>(&self, queues: impl Iterator<Item = &'a usize>) -> Option<usize> {
        queues.copied().min_by(|&a, &b| {
            let ((sa, da), (sb, db)) = (self.share(a), self.share(b));
            sa.total_cmp(&sb).then(db.cmp(&da)).then(a.cmp(&b))
        })
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

    /// Adds (`take`) or removes a pod's request from what queue `q` holds.
    pub fn hold(&mut self, q: usize, req: &[u64], take: bool) {
        for (a, r) in self.allocated[q].iter_mut().zip(req) {
            *a = if take { *a + r } else { a.saturating_sub(*r) };
        }
    }
}
