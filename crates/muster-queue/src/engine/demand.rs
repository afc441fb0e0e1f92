//! The cheap test before any match: does what a request's minimum asks fit in what the cluster
//! has free, in all and per member? Its demand is worked out once per request, in the graph's
//! resource ids, so that the test is a few integer comparisons however long the queue.

use std::collections::BTreeMap;

use muster_graph::GroupRequest;
use muster_graph::resources::{ResourceId, ResourceTable};

use super::Engine;
use crate::quota;

/// What a request's minimum asks, in the graph's resource ids. Resources the graph lacks are left
/// out: no node has them, which the match reports.
#[derive(Debug, Clone)]
pub(super) struct Demand {
    /// In all, per resource, in resource name order (the first short one is the one named).
    total: Vec<(ResourceId, u64)>,
    /// One member of each set: (set index, resource, amount).
    each: Vec<(usize, ResourceId, u64)>,
}

impl Demand {
    fn of(req: &GroupRequest, resources: &ResourceTable) -> Self {
        let total = (quota::Asks::of(req).with(req.min_members).into_iter())
            .filter_map(|(r, a)| Some((resources.get(&r)?, a)))
            .collect();
        let sets = req.member_sets();
        let each = (sets.iter().enumerate())
            .flat_map(|(k, set)| set.requests.iter().filter_map(move |(r, a)| Some((k, resources.get(r)?, *a))))
            .collect();
        Self { total, each }
    }
}

/// Demands by (request shape, min members): the same for every request derived from a group's own
/// by its bounds (the sets before the last are fixed).
pub(super) type Demands = BTreeMap<(u64, u32), Demand>;

impl Engine {
    /// Necessary condition for a fit now of `req` (of shape `shape`), from the cluster's
    /// aggregates: Err says what is short.
    pub(super) fn may_fit_now(&mut self, shape: u64, req: &GroupRequest) -> Result<(), String> {
        let key = (shape, req.min_members);
        if !self.demands.contains_key(&key) {
            // Shapes are nearly one per group (declared run times differ): bounded by the groups.
            if self.demands.len() > 2 * self.groups.len() + 1024 {
                self.demands.clear();
            }
            self.demands.insert(key, Demand::of(req, &self.graph.graph.resources));
        }
        let d = &self.demands[&key];
        let g = &self.graph.graph;
        let (_, free) = g.totals();
        if let Some(&(id, need)) = d.total.iter().find(|&&(id, need)| need > free[id.index()]) {
            return Err(format!(
                "needs {} {} in all, {} is free",
                g.resources.format(id, need),
                g.resources.def(id).name,
                g.resources.format(id, free[id.index()])
            ));
        }
        let max_free = &g.domain(g.root_domain).max_free;
        if let Some(&(k, id, per)) = d.each.iter().find(|&&(_, id, per)| per > max_free[id.index()]) {
            let set = &req.member_sets()[k].name;
            let who = if set.is_empty() { "each member".to_string() } else { format!("each {set} member") };
            return Err(format!(
                "{who} needs {} {}; no schedulable node has that much free now",
                g.resources.format(id, per),
                g.resources.def(id).name
            ));
        }
        Ok(())
    }
}
