//! What each tenant's queue held over a run, and the work its evicted jobs lost: the raw record
//! behind the per-tenant metrics (share against entitlement, work lost to preemption).

/// Per tenant's queue, as the engine leaves it.
#[derive(Debug, Clone, Default)]
pub struct TenantRecord {
    /// Per sample bucket, per queue, per resource: resource-milliseconds held by the pods of its
    /// running jobs (a job whose run has not begun, or a partial gang, does no work with what it
    /// holds).
    pub held: Vec<Vec<Vec<f64>>>,
    /// Per queue, per resource: resource-milliseconds of runs cut short by an eviction (the
    /// resources the job held times how long it had run).
    pub lost: Vec<Vec<f64>>,
    /// Per queue: jobs taken off their nodes after they had started.
    pub evictions: Vec<u64>,
}

/// Counts, while a run goes, what each queue holds now and integrates it into the record.
#[derive(Debug, Clone, Default)]
pub struct TenantMeter {
    /// Per queue, per resource, base units held now by the pods of running jobs.
    held_now: Vec<Vec<u64>>,
    record: TenantRecord,
}

impl TenantMeter {
    pub fn new(queues: usize, resources: usize) -> Self {
        TenantMeter {
            held_now: vec![vec![0; resources]; queues],
            record: TenantRecord { held: vec![], lost: vec![vec![0.0; resources]; queues], evictions: vec![0; queues] },
        }
    }

    /// Room of a running job of queue `queue` (`request`, base units per resource) starts
    /// (`true`) or stops working: a pod bound or gone while the job runs, or the run beginning or
    /// cut short with the pods it holds.
    pub fn working(&mut self, queue: usize, request: &[u64], take: bool) {
        for (h, q) in self.held_now[queue].iter_mut().zip(request) {
            if take { *h += q } else { *h -= q }
        }
    }

    /// Adds what is held now, for `ms` milliseconds, to sample bucket `bucket`.
    pub fn accrue(&mut self, bucket: usize, ms: i64) {
        if self.held_now.is_empty() {
            return;
        }
        if self.record.held.len() <= bucket {
            let empty = vec![vec![0.0; self.held_now[0].len()]; self.held_now.len()];
            self.record.held.resize(bucket + 1, empty);
        }
        for (sums, now) in self.record.held[bucket].iter_mut().zip(&self.held_now) {
            for (s, h) in sums.iter_mut().zip(now) {
                *s += (*h as f64) * ms as f64;
            }
        }
    }

    /// A job of queue `queue` holding `held` (base units per resource) was evicted; it had run
    /// for `ran_ms` (0 when its run had not begun).
    pub fn evicted(&mut self, queue: usize, held: &[u64], ran_ms: i64) {
        self.record.evictions[queue] += 1;
        for (l, h) in self.record.lost[queue].iter_mut().zip(held) {
            *l += (*h as f64) * ran_ms as f64;
        }
    }

    pub fn into_record(self) -> TenantRecord {
        self.record
    }
}
