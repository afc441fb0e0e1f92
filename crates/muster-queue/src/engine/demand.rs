//! The cheap test before any match: does what a request's minimum asks fit in what the cluster
//! has free, in all and per member? Its demand is worked out once per request, in the graph's
//! resource ids, so that the test is a few integer comparisons however long the queue.

use std::sync::Arc;

use muster_graph::GroupRequest;
use muster_graph::resources::{ResourceId, ResourceTable};

use super::Engine;
use crate::quota;

/// What a request's minimum asks, in the graph's resource ids, each amount with the text that
/// says it is short. Resources the graph lacks are left out: no node has them, which the match
/// reports.
#[derive(Debug, Clone)]
pub(super) struct Demand {
    /// In all, per resource, in resource name order (the first short one is the one named).
    total: Vec<(ResourceId, u64, Arc<str>)>,
    /// One member of each set: (set index, resource, amount).
    each: Vec<(usize, ResourceId, u64, Arc<str>)>,
}

impl Demand {
    /// The texts name the amount asked, not the amount free: a group's reason then stays the
    /// same from cycle to cycle while it waits for the same thing, and is written once.
    fn of(req: &GroupRequest, resources: &ResourceTable) -> Self {
        let total = (quota::Asks::of(req).with(req.min_members).into_iter())
            .filter_map(|(r, a)| {
                let id = resources.get(&r)?;
                let text = format!("needs {} {r} in all, more than is free", resources.format(id, a));
                Some((id, a, text.into()))
            })
            .collect();
        let sets = req.member_sets();
        let each = (sets.iter().enumerate())
            .flat_map(|(k, set)| {
                let who =
                    if set.name.is_empty() { "each member".to_string() } else { format!("each {} member", set.name) };
                set.requests.iter().filter_map(move |(r, a)| {
                    let id = resources.get(r)?;
                    let text = format!(
                        "{who} needs {} {r}; no schedulable node has that much free now",
                        resources.format(id, *a)
                    );
                    Some((k, id, *a, text.into()))
                })
            })
            .collect();
        Self { total, each }
    }
}

/// Demands by (request shape, min members): the same for every request derived from a group's own
/// by its bounds (the sets before the last are fixed). Hashed: looked up at every attempt.
pub(super) type Demands = foldhash::HashMap<(u64, u32), Demand>;

impl Engine {
    /// Necessary condition for a fit now of `req` (of shape `shape`), from the cluster's
    /// aggregates: Err says what is short.
    pub(super) fn may_fit_now(&mut self, shape: u64, req: &GroupRequest) -> Result<(), Arc<str>> {
        let key = (shape, req.min_members);
        // Shapes are nearly one per group (declared run times differ): bounded by the groups.
        if self.demands.len() > 2 * self.groups.len() + 1024 && !self.demands.contains_key(&key) {
            self.demands.clear();
        }
        let resources = &self.graph.graph.resources;
        let d = self.demands.entry(key).or_insert_with(|| Demand::of(req, resources));
        let g = &self.graph.graph;
        let (_, free) = g.totals();
        if let Some((_, _, text)) = d.total.iter().find(|(id, need, _)| *need > free[id.index()]) {
            return Err(Arc::clone(text));
        }
        let max_free = &g.domain(g.root_domain).max_free;
        if let Some((_, _, _, text)) = d.each.iter().find(|(_, id, per, _)| *per > max_free[id.index()]) {
            return Err(Arc::clone(text));
        }
        Ok(())
    }
}
