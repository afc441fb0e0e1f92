//! Node inputs (added, removed, changed, cordoned, up or down), the node reshapes that wait until
//! nothing runs on a node, and the capacity other schedulers' pods hold on nodes (occupy, vacate).

use std::collections::BTreeSet;

use muster_graph::{NodeSpec, NodeUpdate};
use serde::{Deserialize, Serialize};

use super::{Engine, EngineError};
use crate::group::Transition;

/// Capacity used on a node by what the engine did not place: another scheduler's pod, or the
/// devices another scheduler allocated to a claim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExternalHold {
    pub node: String,
    /// Requests in base units by resource name (a claim's: its devices counted per driver).
    pub requests: Vec<(String, u64)>,
    /// The devices held, by their names in the graph; those the node does not have free are
    /// counted but not named (another free device of the resource is held in their place).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<String>,
}

impl ExternalHold {
    /// What a pod's requests hold on `node`.
    pub fn pod(node: &str, requests: &[(String, u64)]) -> Self {
        Self { node: node.to_string(), requests: requests.to_vec(), devices: Vec::new() }
    }
}

impl Engine {
    pub fn node_added(&mut self, spec: &NodeSpec, now: i64) -> Result<Vec<Transition>, EngineError> {
        self.advance(now);
        self.graph.add_node(spec)?;
        self.structure_changed();
        Ok(Vec::new())
    }

    /// A node left: members on it are lost (see `members_lost`).
    pub fn node_removed(&mut self, name: &str, now: i64) -> Result<Vec<Transition>, EngineError> {
        self.advance(now);
        let affected = self.graph.remove_node(name)?;
        self.external.retain(|_, (h, _)| h.node != name);
        self.cordoned.remove(name);
        self.down.remove(name);
        self.deferred_reshapes.remove(name);
        self.structure_changed();
        let mut out = Vec::new();
        for (id, lost) in affected {
            if let Some(key) = self.by_graph_alloc.get(&id).cloned() {
                let lost: BTreeSet<u32> = lost.into_iter().collect();
                self.lose_members(&key, id, &lost, true, &mut out);
            }
            // Reservations on the node are recomputed in the next cycle.
        }
        Ok(out)
    }

    /// A node's labels, taints, capacity or topology changed (see [`muster_graph::ResourceGraph::update_node`]).
    /// Running groups stay where they are; what placement reads changes at once, except a new
    /// topology place or resource set, which each cycle applies once nothing runs on the node.
    pub fn node_changed(&mut self, spec: &NodeSpec, now: i64) -> Result<Vec<Transition>, EngineError> {
        self.advance(now);
        self.deferred_reshapes.remove(&spec.name);
        if self.graph.update_node(spec)? == NodeUpdate::ShapeDeferred {
            self.deferred_reshapes.insert(spec.name.clone(), spec.clone());
        }
        if spec.unschedulable {
            self.cordoned.insert(spec.name.clone());
        } else {
            self.cordoned.remove(&spec.name);
        }
        self.structure_changed();
        Ok(Vec::new())
    }

    /// Rebuilds the nodes whose deferred new shape can now be applied.
    pub(super) fn apply_deferred_reshapes(&mut self) {
        let specs: Vec<NodeSpec> = self.deferred_reshapes.values().cloned().collect();
        for spec in specs {
            // An error here means the node is gone, which its removal handles.
            if !matches!(self.graph.update_node(&spec), Ok(NodeUpdate::ShapeDeferred)) {
                self.deferred_reshapes.remove(&spec.name);
                self.structure_changed();
            }
        }
    }

    /// Nodes were added, removed or reshaped: cached satisfiability no longer holds.
    fn structure_changed(&mut self) {
        self.structure_version += 1;
        self.sat_cache.clear();
        self.demands.clear();
        self.replan();
    }

    pub fn node_cordoned(&mut self, name: &str, cordoned: bool, now: i64) -> Result<Vec<Transition>, EngineError> {
        self.advance(now);
        self.graph.set_unschedulable(name, cordoned)?;
        if cordoned {
            self.cordoned.insert(name.to_string());
        } else {
            self.cordoned.remove(name);
        }
        self.replan();
        Ok(Vec::new())
    }

    pub fn node_up(&mut self, name: &str, up: bool, now: i64) -> Result<Vec<Transition>, EngineError> {
        self.advance(now);
        self.graph.set_up(name, up)?;
        if up {
            self.down.remove(name);
        } else {
            self.down.insert(name.to_string());
        }
        self.replan();
        Ok(Vec::new())
    }

    /// A pod the engine did not place (another scheduler's), or a claim another scheduler
    /// allocated, holds capacity on a node; `id` names it
    /// for [`Engine::vacate`]. Idempotent for an unchanged pod. Counted even where the graph saw
    /// no room (the pod is there; the node then has nothing free until enough of it ends), so a
    /// group released in the same batch never hands that room to another group. Errors, changing
    /// nothing, only when the node is unknown (the caller retries once the node is known).
    pub fn occupy(&mut self, id: &str, hold: ExternalHold, now: i64) -> Result<Vec<Transition>, EngineError> {
        self.advance(now);
        if self.external.get(id).is_some_and(|(h, _)| *h == hold) {
            return Ok(Vec::new());
        }
        // Hold first: on an unknown node nothing changes, not even the pod's old hold.
        let alloc = self.graph.hold(&hold.node, &hold.requests, &hold.devices, now)?;
        // A changed pod (resized, or moved by a restart of its scheduler) replaces its old hold.
        if let Some((_, old)) = self.external.insert(id.to_string(), (hold, alloc)) {
            self.graph.cancel(old)?;
        }
        self.replan();
        Ok(Vec::new())
    }

    /// The pod `id` of [`Engine::occupy`] is gone (or finished): its capacity is free again.
    /// Unknown ids are ignored (the node may have left with it).
    pub fn vacate(&mut self, id: &str, now: i64) -> Result<Vec<Transition>, EngineError> {
        self.advance(now);
        if let Some((_, alloc)) = self.external.remove(id) {
            self.graph.cancel(alloc)?;
            self.replan();
        }
        Ok(Vec::new())
    }

    /// Pods of other schedulers the engine counts, by id.
    pub fn external(&self) -> impl Iterator<Item = (&String, &ExternalHold)> {
        self.external.iter().map(|(id, (h, _))| (id, h))
    }
}
