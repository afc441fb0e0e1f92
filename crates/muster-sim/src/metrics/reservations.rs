//! Per calendar reservation: how late its users' jobs started after their window opened, others'
//! work found on its room inside its windows, the room left idle (what it costs), and the jobs
//! evicted when a window opened. Measured in its room's scarce resource: GPUs where it has them,
//! else cpu. Taken under every scheduler, including those that hold no reservations (the peers),
//! against which the reservation's worth shows.

use serde::Serialize;

use super::tenants::in_units;
use super::{Stats, round3, stats};
use crate::engine::RunRecord;
use crate::scenario::Workload;
use crate::scenario::reservations::{may_use, window_for, windows_opened};

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReservationResult {
    pub reservation: String,
    /// The resource measured (`nvidia.com/gpu` or `cpu`).
    pub resource: String,
    /// What it sets aside of that resource in each window (GPUs, cores).
    pub room: f64,
    /// Whether the scheduler held it: muster's models do, unless told to ignore reservations;
    /// the peers have no calendar reservations.
    pub held: bool,
    /// Its windows that opened before the run stopped.
    pub windows: usize,
    /// Its users' jobs measured: those submitted before its last window ended.
    pub jobs: usize,
    /// From the later of a job's submission and the start of its window (the one open, else the
    /// next) to its placement (every pod bound); 0 for a job placed before. A job never placed
    /// counts until the run stopped.
    pub start_delay: Stats,
    /// Resource-seconds of others' pods found on its room inside its windows (for an amount, on
    /// the nodes it may be on, beyond what it leaves free). Lower bound 0.
    pub others_on_room_s: f64,
    /// Resource-hours of room inside its windows that no pod held: the price of setting it aside
    /// (a scheduler without reservations lets others fill it).
    pub idle_h: f64,
    /// Jobs evicted because one of its windows opened (`atStart: Evict`).
    pub evictions: u64,
}

/// One result per reservation; empty without them.
pub fn summarize(w: &Workload, rec: &RunRecord) -> Vec<ReservationResult> {
    let end = rec.end_ms;
    (w.reservations.iter().zip(&rec.reservations))
        .map(|(r, m)| {
            let mut delays = vec![];
            for (j, job) in w.jobs.iter().enumerate().filter(|(_, job)| may_use(r, &w.tenants, job)) {
                let Some((opens, _)) = window_for(r, job.submit_ms) else { continue };
                let due = job.submit_ms.max(opens);
                delays.push((rec.jobs[j].scheduled_ms.unwrap_or(end) - due).max(0));
            }
            let units = |base: f64| in_units(&m.resource, base);
            ReservationResult {
                reservation: r.name.clone(),
                resource: m.resource.clone(),
                room: round3(units(m.room as f64)),
                held: m.evictions.is_some(),
                windows: windows_opened(r, end),
                jobs: delays.len(),
                start_delay: stats(&delays),
                others_on_room_s: round3(units(m.others_on_room_ms) / 1000.0),
                idle_h: round3(units(m.idle_ms) / 3_600_000.0),
                evictions: m.evictions.unwrap_or(0),
            }
        })
        .collect()
}
