//! What of a request a graph can count: a group placed before its nodes lost something it asks
//! for (a resource patched out of every node, every device of a driver unpublished, a topology
//! label removed everywhere) is recorded where it runs without it, as a running engine keeps it.

use crate::graph::Graph;
use crate::jobspec::{GroupRequest, TopologyConstraint};

impl Graph {
    /// `req` without what no node of this graph has: requests of resources no node has, device
    /// requests of drivers no node publishes, topology constraints on levels no node is in (and
    /// sub-groups kept by one). `req` itself when the graph knows all of it.
    pub fn known_part(&self, req: &GroupRequest) -> GroupRequest {
        let mut part = req.clone();
        let has = |name: &str| self.resources.get(name).is_some();
        let level_known = |t: &TopologyConstraint| self.check_topology(t).is_ok();
        part.requests.retain(|(r, _)| has(r));
        part.devices.retain(|d| has(&d.driver));
        if let Some(s) = part.sockets.as_mut() {
            s.requests.retain(|(r, _)| has(r));
        }
        part.topology = part.topology.filter(level_known);
        for set in &mut part.sets {
            set.requests.retain(|(r, _)| has(r));
            set.devices.retain(|d| has(&d.driver));
            set.topology = set.topology.take().filter(level_known);
        }
        part.subgroups.retain(|g| level_known(&g.topology));
        part
    }
}
