//! The engine's whole state as one serializable value, and the way back: `snapshot` and
//! `restore` (which imports placed groups onto a fresh graph of the cluster's nodes).

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use muster_graph::{GraphError, ImportedMember, ResourceGraph};
use serde::{Deserialize, Serialize};

use super::{Engine, EngineError, ExternalHold, LearnedRunTimes, QueueUsage, ReservationWindow};
use crate::config::EngineConfig;
use crate::group::{Group, GroupState, MemberPlacement};

/// The engine's whole state, serializable. `Engine::restore` rebuilds an engine from it and a graph
/// of the cluster's nodes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    pub config: EngineConfig,
    pub now: i64,
    pub seq: u64,
    pub next_alloc_id: u64,
    pub structure_version: u64,
    /// Something changed since the last full cycle.
    pub dirty: bool,
    /// When the last full cycle ran: the reservation starts and dues it has already woken for.
    /// A snapshot written before it was kept reads as no cycle yet, which wakes once more.
    #[serde(default = "no_cycle_yet")]
    pub last_full_cycle: i64,
    pub groups: Vec<Group>,
    pub usage: BTreeMap<String, QueueUsage>,
    pub namespaces: BTreeMap<String, BTreeMap<String, String>>,
    pub cordoned: BTreeSet<String>,
    pub down: BTreeSet<String>,
    /// Capacity held by pods of other schedulers, by the caller's id (a pod uid).
    #[serde(default)]
    pub external: BTreeMap<String, ExternalHold>,
    /// Run times learned from finished groups that declared none.
    #[serde(default)]
    pub learned_run_times: LearnedRunTimes,
    /// The calendar reservations' windows and the nodes each held: a restore makes each again
    /// on its nodes first, with its users' work inside it as before.
    #[serde(default)]
    pub windows_held: Vec<ReservationWindow>,
}

impl Engine {
    /// The engine's full state. Reservations are not part of it: every cycle recomputes them.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            config: self.config.clone(),
            now: self.now,
            seq: self.seq,
            next_alloc_id: self.next_alloc_id,
            structure_version: self.structure_version,
            dirty: self.dirty,
            last_full_cycle: self.last_full_cycle,
            groups: self.groups.values().map(|g| Group::clone(g)).collect(),
            usage: self.usage_hist.clone(),
            namespaces: self.namespaces.clone(),
            cordoned: self.cordoned.clone(),
            down: self.down.clone(),
            external: self.external.iter().map(|(id, (h, _))| (id.clone(), h.clone())).collect(),
            learned_run_times: self.learned.clone(),
            windows_held: self.windows_held(),
        }
    }

    /// Rebuilds an engine from a snapshot and a graph of the cluster's nodes (without this engine's
    /// allocations; it may hold other schedulers' pods). Placed groups are imported onto the graph
    /// under their recorded nodes and devices, beyond a node's capacity if it shrank since (see
    /// `Graph::over_committed`) and without the devices no longer there; an import whose node is
    /// gone is an error.
    pub fn restore(mut graph: ResourceGraph, snap: Snapshot) -> Result<Self, EngineError> {
        for n in &snap.cordoned {
            if graph.graph.node_id(n).is_ok() {
                graph.set_unschedulable(n, true)?;
            }
        }
        for n in &snap.down {
            if graph.graph.node_id(n).is_ok() {
                graph.set_up(n, false)?;
            }
        }
        let mut e = Engine::new(graph, snap.config)?;
        e.now = snap.now;
        e.seq = snap.seq;
        e.next_alloc_id = snap.next_alloc_id;
        e.structure_version = snap.structure_version;
        e.dirty = snap.dirty;
        e.last_full_cycle = snap.last_full_cycle;
        e.namespaces = snap.namespaces;
        e.cordoned = snap.cordoned;
        e.down = snap.down;
        e.learned = snap.learned_run_times;
        e.remember_windows_held(snap.windows_held);
        for (q, u) in snap.usage {
            e.usage_hist.insert(q, u);
        }
        let mut next_graph_id = e.graph.allocations().map(|a| a.id).max().unwrap_or(0) + 1;
        for mut g in snap.groups {
            // The configuration may have changed since: a reservation given or taken away.
            g.spec = e.with_usable_reservations(g.spec);
            let key = g.spec.key.clone();
            if !e.compiled.queues.contains_key(&g.spec.queue) {
                return Err(e.unknown_queue_err(&key, &g.spec.queue));
            }
            e.index_spec(&key, &g.spec.request);
            let state = g.state;
            let alloc = g.allocation.clone();
            e.groups.insert(key.clone(), Arc::new(g));
            e.retire_if_ended(&key);
            if state.is_pending() {
                e.add_pending(&key);
            }
            if state == GroupState::Reserved {
                e.reserved.insert(key.clone());
            }
            if matches!(state, GroupState::Admitted | GroupState::Running | GroupState::Evicted) {
                e.live.insert(key.clone());
                if let Some(t) = e.timer_of(&e.groups[&key]) {
                    e.timers.push(Reverse((t, key.clone())));
                }
            }
            if state.holds_allocation()
                && let Some(a) = alloc
            {
                // A device gone since (no longer published: found unhealthy) is left out: the
                // member holds what is left, its node over-committed as one that shrank.
                let still_there = |m: &MemberPlacement| {
                    m.devices.iter().filter(|d| e.graph.graph.node_has(&m.node, d)).cloned().collect()
                };
                let members: Vec<ImportedMember> = (a.members.iter())
                    .map(|m| ImportedMember { index: m.index, node: m.node.clone(), devices: still_there(m) })
                    .collect();
                // Recorded with what the nodes still know of: a resource, a driver's devices or a
                // topology level gone from every node since is left out of what it holds.
                let req = e.graph.graph.known_part(&e.groups[&key].spec.request);
                let id = next_graph_id;
                next_graph_id += 1;
                // Its pods run there: a node that shrank since (an unhealthy device, more set
                // aside for the system) holds more than it has until enough ends, as when it
                // shrinks under a running engine, rather than making the state unreadable.
                match e.graph.import(id, &req, &members, (a.start, a.end)) {
                    Err(GraphError::Insufficient { .. }) => e.graph.restore(id, &req, &members, (a.start, a.end))?,
                    imported => imported?,
                }
                e.graph_alloc.insert(key.clone(), id);
                e.by_graph_alloc.insert(id, key.clone());
                e.add_usage(&key, a.members.iter().map(|m| m.index), 1);
            }
        }
        // Other schedulers' pods after ours: the recorded placements were made around them.
        for (id, hold) in snap.external {
            e.occupy(&id, hold, e.now)?;
        }
        // A quota lowered below what runs (while no instance led, or by a reconfigure).
        e.over_quota_from_config = crate::quota::check(&e.compiled, &e.usage).is_err();
        Ok(e)
    }
}

impl Snapshot {
    /// `last_full_cycle` of an engine that has run no cycle.
    pub const NO_CYCLE_YET: i64 = i64::MIN;
}

fn no_cycle_yet() -> i64 {
    Snapshot::NO_CYCLE_YET
}
