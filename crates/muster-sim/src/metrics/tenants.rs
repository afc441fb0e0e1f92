//! Per tenant: how far its share fell short of what it was entitled to, how long its jobs waited
//! for quota it was guaranteed, and the work it lost to evictions. Measured in one resource, the
//! cluster's scarce one: GPUs where nodes have them, else cpu.

use muster_graph::jobspec::MemberSet;
use muster_graph::quantity::Unit;
use muster_graph::resources::unit_of;
use serde::{Deserialize, Serialize};

use super::{GPU, Stats, round3, stats};
use crate::engine::RunRecord;
use crate::scenario::Workload;
use crate::scheduler::JobPhase;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TenantResult {
    pub queue: String,
    /// The resource measured (`nvidia.com/gpu` or `cpu`).
    pub resource: String,
    /// Its nominal quota of it (GPUs, cores); none when its queue does not limit it.
    pub nominal: Option<f64>,
    pub jobs: usize,
    pub completed: usize,
    /// Resource-hours it was entitled to: at each moment the smaller of its nominal quota and
    /// what its unfinished jobs asked.
    pub entitled_h: f64,
    /// Resource-hours held by its running jobs' pods (a job whose run has not begun, or a partial
    /// gang, does no work with what it holds, and counts nothing).
    pub held_h: f64,
    /// Resource-hours of entitlement its pods did not hold: the integral of the shortfall.
    pub shortfall_h: f64,
    /// `shortfall_h / entitled_h`.
    pub shortfall_share: f64,
    /// From submission to placement (every pod bound), for jobs that arrived while the tenant's
    /// unfinished jobs, theirs included, asked no more than its nominal quota: how long it took
    /// to get guaranteed quota back. A job never placed counts until the run stopped.
    pub wait_within_quota: Stats,
    /// Resource-hours of runs cut short by evictions (a job restarts from the beginning).
    pub lost_h: f64,
    pub evictions: u64,
}

/// From base units to the unit a reader counts in (cores, GiB, devices).
pub(super) fn in_units(resource: &str, base: f64) -> f64 {
    match unit_of(resource) {
        Ok(Unit::Millicores) => base / 1000.0,
        Ok(Unit::Bytes) => base / (1u64 << 30) as f64,
        _ => base,
    }
}

/// One result per tenant's queue; empty without tenants. The harness gives it a real run's record
/// (`muster_harness::tenant_figures`), so the real figures are the sim's.
pub fn summarize(w: &Workload, rec: &RunRecord) -> Vec<TenantResult> {
    let tenants = &w.tenants;
    if tenants.is_empty() {
        return vec![];
    }
    let has_gpu = rec.resources.iter().zip(&rec.capacity).any(|(r, c)| r == GPU && *c > 0);
    let resource = if has_gpu { GPU } else { "cpu" };
    let Some(r) = rec.resources.iter().position(|x| x == resource) else { return vec![] };
    let sample = rec.sample_ms;
    let end = rec.end_ms.max(1);
    let buckets = (end as usize).div_ceil(sample as usize).max(1);
    let per_member = |s: &MemberSet| s.requests.iter().find(|(n, _)| n == resource).map_or(0, |x| x.1);
    let asks: Vec<u64> =
        w.jobs.iter().map(|j| j.pod_sets().iter().map(|s| u64::from(s.max_members) * per_member(s)).sum()).collect();
    let ended = |j: usize| rec.jobs[j].ended_ms.unwrap_or(end).min(end);
    let hours = |base_ms: f64| round3(in_units(resource, base_ms) / 3_600_000.0);
    let mut out = vec![];
    for (q, queue) in tenants.queues.iter().enumerate() {
        let nominal = tenants.quota(q, resource).map(|x| x.nominal);
        let mine: Vec<usize> = (0..w.jobs.len()).filter(|&j| w.jobs[j].queue == Some(q)).collect();
        // What its unfinished jobs asked, per bucket (resource-milliseconds).
        let mut demand = vec![0.0f64; buckets];
        for &j in &mine {
            let mut t = w.jobs[j].submit_ms;
            while t < ended(j) {
                let b = (t / sample) as usize;
                let next = ((b as i64 + 1) * sample).min(ended(j));
                demand[b] += asks[j] as f64 * (next - t) as f64;
                t = next;
            }
        }
        let (mut entitled, mut held, mut short) = (0.0, 0.0, 0.0);
        for (b, d) in demand.iter().enumerate() {
            let len = (end - b as i64 * sample).clamp(1, sample) as f64;
            let e = nominal.map_or(*d, |n| d.min(n as f64 * len));
            let h = rec.tenants.held.get(b).map_or(0.0, |per_queue| per_queue[q][r]);
            entitled += e;
            held += h;
            short += (e - h).max(0.0);
        }
        let mut waits = vec![];
        for &j in &mine {
            let at = w.jobs[j].submit_ms;
            let before: u64 =
                mine.iter().filter(|&&k| k != j && w.jobs[k].submit_ms <= at && ended(k) > at).map(|&k| asks[k]).sum();
            if nominal.is_none_or(|n| before + asks[j] <= n) {
                waits.push(rec.jobs[j].scheduled_ms.unwrap_or(end) - at);
            }
        }
        out.push(TenantResult {
            queue: queue.name.clone(),
            resource: resource.to_string(),
            nominal: nominal.map(|n| round3(in_units(resource, n as f64))),
            jobs: mine.len(),
            completed: mine.iter().filter(|&&j| rec.jobs[j].phase == JobPhase::Succeeded).count(),
            entitled_h: hours(entitled),
            held_h: hours(held),
            shortfall_h: hours(short),
            shortfall_share: if entitled > 0.0 { round3(short / entitled) } else { 0.0 },
            wait_within_quota: stats(&waits),
            lost_h: hours(rec.tenants.lost[q][r]),
            evictions: rec.tenants.evictions[q],
        });
    }
    out
}
