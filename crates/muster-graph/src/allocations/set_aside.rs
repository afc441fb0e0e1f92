//! Calendar reservations: room set aside for named users over a time window. A set-aside is a
//! reserved allocation, so it holds its room in the plan (spans) and not in the present (`free`):
//! work that ends before the window may use the room until then (backfill), nothing else may
//! enter the window, and reservations of pending groups plan around it. Groups that name the
//! reservation (`GroupRequest::reservations`) see its spans as free room.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::{Allocation, ResourceGraph};
use crate::error::GraphError;
use crate::graph::{AllocId, NodeId};
use crate::jobspec::GroupRequest;
use crate::matcher::{Demand, Placement, Window, placed_units};

impl ResourceGraph {
    /// Sets aside the whole of every node whose labels match `selector`, over `[start, end)`,
    /// for reservation `name`. Refused, changing nothing, when no node matches or when another
    /// reservation already holds one of the nodes at an overlapping time.
    pub fn set_aside_nodes(
        &mut self,
        name: &str,
        selector: &BTreeMap<String, String>,
        (start, end): (i64, i64),
    ) -> Result<AllocId, GraphError> {
        let nodes: Vec<NodeId> = (self.graph.live_nodes())
            .filter(|(_, n)| selector.iter().all(|(k, v)| n.labels.get(k) == Some(v)))
            .map(|(id, _)| id)
            .collect();
        if nodes.is_empty() {
            return Err(GraphError::SetAsideSelectsNothing { reservation: name.to_string() });
        }
        self.check_no_overlap(name, &nodes, (start, end))?;
        let mut request = GroupRequest::simple(name, nodes.len() as u32, &[]);
        request.exclusive = true;
        let members = (nodes.iter().enumerate())
            .map(|(i, &node)| super::Member { index: i as u32, node, devices: Vec::new(), sockets: Vec::new() })
            .collect();
        let id = self.take_id();
        let mut alloc = Allocation {
            id,
            request,
            per_set: vec![vec![0; self.graph.resources.len()]],
            members,
            start,
            end,
            reserved: true,
            domain: None,
        };
        self.apply_nodes(&mut alloc, nodes, None);
        self.allocations.insert(id, Arc::new(alloc));
        self.graph.set_asides.insert(id, name.to_string());
        Ok(id)
    }

    /// Sets aside what `req` asks (its minimum of members, each with its requests, where its
    /// filter and topology allow), placed by the matcher as a group starting at `start` would be,
    /// over `[start, end)`, for reservation `name`. Refused, changing nothing, when it does not
    /// fit then (running work expected to end later, or other reservations, are in the way).
    ///
    /// A window made again (after a restart, or when nodes change) goes back first on the nodes
    /// it `held_before`, its users' work inside it as then: moved elsewhere, it would hold a
    /// whole amount beside that work and keep others out of room nobody uses. Else it goes
    /// beside the work of the reservation's users (allocations whose request names it) and,
    /// where that leaves no room, counts that work inside it, as it is once the set-aside is
    /// made: so a window made again while its users run in it holds their room, not nothing.
    pub fn set_aside_amount(
        &mut self,
        name: &str,
        req: &GroupRequest,
        (start, end): (i64, i64),
        held_before: &[String],
    ) -> Result<AllocId, GraphError> {
        let no_room = |reason: String| GraphError::SetAsideNoRoom { reservation: name.to_string(), reason };
        let mut req = req.clone();
        req.reservations.clear();
        let d = Demand::resolve(&self.graph, &req).map_err(|u| no_room(u.0))?;
        let policy = req.policy.unwrap_or(self.policy);
        let window = Window::Future { start, end };
        let fits = |p: &Placement| placed_units(p) >= d.min_units;
        let search = |g: &ResourceGraph| Some(g.graph.search(&d, window, policy, None)).filter(|(p, _)| fits(p));
        let found = match held_before.is_empty() {
            true => None,
            false => {
                let mut only_there = self.without_users_work(name, (start, end)).unwrap_or_else(|| self.clone());
                let elsewhere: Vec<String> = (only_there.graph.live_nodes())
                    .filter(|(_, n)| !held_before.contains(&n.name))
                    .map(|(_, n)| n.name.clone())
                    .collect();
                for n in elsewhere {
                    only_there.set_unschedulable(&n, true)?;
                }
                search(&only_there)
            }
        };
        // Copies of the graph only where the search needs them: a window is made rarely, but
        // on a large cluster a copy costs more than the search.
        let (p, domain) = found
            .or_else(|| search(self))
            .or_else(|| self.without_users_work(name, (start, end)).and_then(|g| search(&g)))
            .ok_or_else(|| {
                let (p, _) = self.graph.search(&d, window, policy, None);
                no_room(match self.satisfiability(&req) {
                    Err(never) => never,
                    Ok(()) => format!("{} members fit of {}", d.members(placed_units(&p)), req.min_members),
                })
            })?;
        let id = self.take_id();
        let alloc = self.commit(id, &d, &p, start, end, true, domain);
        self.allocations.insert(id, Arc::new(alloc));
        self.graph.set_asides.insert(id, name.to_string());
        Ok(id)
    }

    /// A copy of the graph without the work of reservation `name`'s users that overlaps
    /// `[start, end)`: the room the set-aside may count that work inside. None when there is none.
    fn without_users_work(&self, name: &str, (start, end): (i64, i64)) -> Option<ResourceGraph> {
        let users: Vec<AllocId> = (self.allocations())
            .filter(|a| a.request.reservations.iter().any(|r| r == name))
            .filter(|a| a.start < end && start < a.end)
            .map(|a| a.id)
            .collect();
        if users.is_empty() {
            return None;
        }
        let mut without = self.clone();
        for id in users {
            without.cancel(id).expect("listed above");
        }
        Some(without)
    }

    /// Another reservation's set-aside on one of `nodes` that overlaps `[start, end)`.
    fn check_no_overlap(&self, name: &str, nodes: &[NodeId], (start, end): (i64, i64)) -> Result<(), GraphError> {
        for &n in nodes {
            let node = self.graph.node(n);
            let other = (node.spans.iter())
                .filter(|s| s.start < end && start < s.end)
                .find_map(|s| self.graph.set_asides.get(&s.alloc));
            if let Some(other) = other {
                return Err(GraphError::SetAsideOverlap {
                    reservation: name.to_string(),
                    other: other.clone(),
                    node: node.name.clone(),
                });
            }
        }
        Ok(())
    }
}
