//! What each calendar reservation's room held inside its windows over a run, counted from the
//! simulator's own record of placements (which pod is on which node), not from what the scheduler
//! says it did: others' pods found on the room, and room its users left idle. The raw record
//! behind the per-reservation metrics (`metrics::reservations`).

use std::collections::BTreeMap;

use muster_queue::ReservationConfig;

use crate::scenario::Workload;
use crate::scenario::reservations::{inside_windows_ms, may_use, room_nodes};

/// The resource a reservation is measured in where its room has it, else cpu.
const GPU: &str = "nvidia.com/gpu";

/// Per reservation, as a run leaves it.
#[derive(Debug, Clone, PartialEq)]
pub struct ReservationRecord {
    /// The resource measured: GPUs where its room has them, else cpu.
    pub resource: String,
    /// What it sets aside of that resource in each window, in base units: its nodes' whole
    /// capacity, or its amount.
    pub room: u64,
    /// Resource-milliseconds of others' pods on its room inside its windows. For an amount,
    /// which the scheduler places, what others hold on the nodes it may be on beyond what the
    /// amount leaves free of them.
    pub others_on_room_ms: f64,
    /// Resource-milliseconds of room inside its windows that no pod held (neither its users'
    /// nor others' found on it).
    pub idle_ms: f64,
    /// Jobs the scheduler evicted because a window opened; none when the scheduler holds no
    /// calendar reservations.
    pub evictions: Option<u64>,
}

struct Watched {
    config: ReservationConfig,
    /// Index of the measured resource in the run's resources.
    resource: usize,
    /// Per node: whether its room may lie there.
    on_room: Vec<bool>,
    /// Those nodes' capacity of the measured resource.
    capacity: u64,
    /// What it sets aside: `capacity` for whole nodes, else its amount.
    room: u64,
    /// Per job: whether it may use the reservation.
    users: Vec<bool>,
    /// Held now on the room's nodes by its users' pods and by others'.
    users_now: u64,
    others_now: u64,
    others_ms: f64,
    idle_ms: f64,
}

/// Counts, while a run goes, what each reservation's room holds now and integrates it over the
/// parts of the run inside its windows.
#[derive(Default)]
pub struct ReservationMeter {
    watched: Vec<Watched>,
}

impl ReservationMeter {
    /// For the workload's reservations, on nodes of `capacity` (per node, per resource, in the
    /// description's order) and the run's `resources`.
    pub fn new(w: &Workload, resources: &[String], capacity: &[Vec<u64>]) -> Self {
        let has = |name: &str, on: &[bool]| {
            let r = resources.iter().position(|x| x == name)?;
            capacity.iter().zip(on).any(|(c, on)| *on && c[r] > 0).then_some(r)
        };
        let watched = (w.reservations.iter())
            .map(|r| {
                let on_room = room_nodes(r, &w.cluster);
                let resource = match &r.amount {
                    Some(a) if a.resources.contains_key(GPU) => has(GPU, &on_room),
                    Some(_) => None,
                    None => has(GPU, &on_room),
                }
                .or_else(|| resources.iter().position(|x| x == "cpu"))
                .unwrap_or(0);
                let capacity_of_room = capacity.iter().zip(&on_room).filter(|(_, on)| **on).map(|(c, _)| c[resource]);
                let capacity: u64 = capacity_of_room.sum();
                let room = r.amount_request().map_or(capacity, |req| {
                    let per_member = req.requests.iter().find(|(n, _)| *n == resources[resource]).map_or(0, |x| x.1);
                    per_member.saturating_mul(u64::from(req.max_members))
                });
                let users = w.jobs.iter().map(|j| may_use(r, &w.tenants, j)).collect();
                Watched {
                    config: r.clone(),
                    resource,
                    on_room,
                    capacity,
                    room,
                    users,
                    users_now: 0,
                    others_now: 0,
                    others_ms: 0.0,
                    idle_ms: 0.0,
                }
            })
            .collect();
        ReservationMeter { watched }
    }

    /// A pod of job `job` asking `request` (per resource) was placed on node `node` (`true`) or
    /// left it.
    pub fn placed(&mut self, job: usize, node: usize, request: &[u64], take: bool) {
        for w in self.watched.iter_mut().filter(|w| w.on_room[node]) {
            let held = if w.users[job] { &mut w.users_now } else { &mut w.others_now };
            let q = request[w.resource];
            if take { *held += q } else { *held -= q }
        }
    }

    /// Adds what is held now over `[from, to)` (ms), for the part of it inside each
    /// reservation's windows.
    pub fn accrue(&mut self, from: i64, to: i64) {
        for w in &mut self.watched {
            let inside = inside_windows_ms(&w.config, from, to);
            if inside == 0 {
                continue;
            }
            // Whole nodes: every pod of others is on the room. An amount: others may hold what
            // it leaves of its nodes.
            let whole = w.config.amount.is_none();
            let free_for_others = if whole { 0 } else { w.capacity.saturating_sub(w.room) };
            let intruding = w.others_now.saturating_sub(free_for_others);
            w.others_ms += intruding as f64 * inside as f64;
            w.idle_ms += w.room.saturating_sub(w.users_now + intruding) as f64 * inside as f64;
        }
    }

    /// The record, with the scheduler's own count of evictions at windows' openings, by
    /// reservation (none if it holds no reservations).
    pub fn into_record(
        self,
        resources: &[String],
        evictions: Option<&BTreeMap<String, u64>>,
    ) -> Vec<ReservationRecord> {
        (self.watched.into_iter())
            .map(|w| ReservationRecord {
                resource: resources[w.resource].clone(),
                room: w.room,
                others_on_room_ms: w.others_ms,
                idle_ms: w.idle_ms,
                evictions: evictions.map(|e| e.get(&w.config.name).copied().unwrap_or(0)),
            })
            .collect()
    }
}
