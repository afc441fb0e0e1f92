//! Each run cut short, in the order it happened: which job, when, after how long, and the work
//! lost with it. The per-tenant sums say how much a scheduler lost; this list says to whom and
//! when, which is what one compares to see why two schedulers lose different amounts.

use std::collections::BTreeMap;

use serde::Serialize;

use super::round3;
use super::tenants::in_units;
use crate::engine::RunRecord;
use crate::scenario::Workload;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EvictionResult {
    pub job: String,
    pub class: String,
    /// Its tenant's queue; absent without tenants.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
    pub priority: i32,
    pub at_s: f64,
    /// How long the run had gone when it was cut short.
    pub ran_s: f64,
    /// Per resource its pods held (pods not counted): resource-hours of work lost, in cores,
    /// GiB or devices.
    pub lost_h: BTreeMap<String, f64>,
}

pub fn list(w: &Workload, rec: &RunRecord) -> Vec<EvictionResult> {
    rec.evictions
        .iter()
        .filter_map(|e| {
            let job = w.jobs.get(e.job)?;
            let lost_h = rec
                .resources
                .iter()
                .zip(&e.held)
                .filter(|(r, held)| **held > 0 && *r != "pods")
                .map(|(r, held)| (r.clone(), round3(in_units(r, *held as f64 * e.ran_ms as f64) / 3_600_000.0)))
                .collect();
            Some(EvictionResult {
                job: job.name.clone(),
                class: job.class.clone(),
                queue: job.queue.and_then(|q| w.tenants.queues.get(q)).map(|q| q.name.clone()),
                priority: job.priority,
                at_s: round3(e.at_ms as f64 / 1000.0),
                ran_s: round3(e.ran_ms as f64 / 1000.0),
                lost_h,
            })
        })
        .collect()
}
