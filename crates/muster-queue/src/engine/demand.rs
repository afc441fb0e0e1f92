//! The cheap test before any match: does what a request's minimum asks fit in what the cluster
//! has free, in all and per member? Its demand is worked out once per request, in the graph's
//! resource ids, so that the test is a few integer comparisons however long the queue.

use muster_graph::allocations::NOT_ON_THE_NODES;
use muster_graph::free_ahead::FreeAhead;
use muster_graph::resources::{ResourceId, ResourceTable};
use muster_graph::{Graph, GroupRequest, matcher};

use super::group_table::Slot;
use super::{Engine, failed_requests};
use crate::quota;

/// What a request's minimum asks, in the graph's resource ids, each amount with the text that
/// says it is short. Resources the graph lacks are left out: no node has them, which the match
/// reports.
#[derive(Debug, Clone)]
pub(super) struct Demand {
    /// In all, per resource, in resource name order (the first short one is the one named).
    total: Vec<(ResourceId, u64, Box<str>)>,
    /// One member of each set: (set index, resource, amount).
    each: Vec<(usize, ResourceId, u64, Box<str>)>,
    /// In all, as the matcher counts it (each member's pod included), for the test against the
    /// room ahead (`short_ahead`), worked out when that test first needs it; None where that test
    /// does not apply: members of several sets, with devices or whole sockets, or placed a fixed
    /// number per node.
    matched: Option<Option<Vec<(ResourceId, u64)>>>,
    /// The engine found the request satisfiable (its `sat_cache`): kept here so that a group
    /// settled cycle after cycle costs no second lookup. A change of the graph's structure clears
    /// both tables.
    pub(super) satisfiable: bool,
    /// The request's kind, as containment compares requests (`failed_requests::kind_of`), worked
    /// out when first compared.
    kind: Option<u64>,
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
        Self { total, each, matched: None, satisfiable: false, kind: None }
    }

    /// The kind of `req`, the request this demand was worked out for.
    pub(super) fn kind(&mut self, req: &GroupRequest) -> u64 {
        *self.kind.get_or_insert_with(|| failed_requests::kind_of(req))
    }

    /// What the matcher's demand for the minimum holds in all (its own resolution of `req` on
    /// graph `g`, each member's pod included), where members are alike and placed one at a time.
    fn matched(req: &GroupRequest, g: &Graph) -> Option<Vec<(ResourceId, u64)>> {
        let alike = req.sets.is_empty() && req.subgroups.is_empty() && req.devices.is_empty();
        if !alike || req.sockets.is_some() || req.members_per_node.is_some() {
            return None;
        }
        let d = matcher::Demand::resolve(g, req).ok()?;
        let members = u64::from(d.members(d.min_units));
        let asked = d.per_member.iter().enumerate().filter(|(_, a)| **a > 0);
        Some(asked.map(|(i, a)| (ResourceId(i as u16), a.saturating_mul(members))).collect())
    }
}

/// Demands by (request shape, min members): the same for every request derived from a group's own
/// by its bounds (the sets before the last are fixed). Hashed, as looked up at every attempt; and
/// found by the slot of the group last worked out for, without a hash lookup, as a group settled
/// behind a blocked head is cycle after cycle.
#[derive(Debug, Clone, Default)]
pub(super) struct Demands {
    ids: foldhash::HashMap<(u64, u32), u32>,
    table: Vec<((u64, u32), Demand)>,
    /// By group slot, the index in `table` of the demand last worked out for the group there
    /// (`u32::MAX`: none). A slot another group has taken since is told by the demand's key.
    by_slot: Vec<u32>,
}

impl Demands {
    /// Forgets every demand: the graph's resources changed.
    pub(super) fn clear(&mut self) {
        self.ids.clear();
        self.table.clear();
        self.by_slot.clear();
    }

    fn get(&self, key: &(u64, u32)) -> Option<&Demand> {
        self.ids.get(key).map(|&i| &self.table[i as usize].1)
    }
}

/// Works out (once) what a request of shape `shape` asks for its minimum, for the group in `slot`
/// if given. `bound`: the engine's group count, which the table is kept within (shapes are nearly
/// one per group, as declared run times differ). A free function over the table, so that a caller
/// may hold other parts of the engine while it runs.
pub(super) fn work_out<'d>(
    demands: &'d mut Demands,
    bound: usize,
    resources: &ResourceTable,
    shape: u64,
    req: &GroupRequest,
    slot: Option<Slot>,
) -> &'d mut Demand {
    let key = (shape, req.min_members);
    let cached = slot.and_then(|s| demands.by_slot.get(s.index())).map(|&i| i as usize);
    if let Some(i) = cached.filter(|&i| demands.table.get(i).is_some_and(|(k, _)| *k == key)) {
        return &mut demands.table[i].1;
    }
    if demands.table.len() > 2 * bound + 1024 && !demands.ids.contains_key(&key) {
        demands.clear();
    }
    let table = &mut demands.table;
    let i = *demands.ids.entry(key).or_insert_with(|| {
        table.push((key, Demand::of(req, resources)));
        (table.len() - 1) as u32
    });
    if let Some(s) = slot {
        if demands.by_slot.len() <= s.index() {
            demands.by_slot.resize(s.index() + 1, u32::MAX);
        }
        demands.by_slot[s.index()] = i;
    }
    &mut demands.table[i as usize].1
}

impl Engine {
    /// Necessary condition for a fit now of `req` (of shape `shape`), from the cluster's
    /// aggregates: Err says what is short.
    pub(super) fn may_fit_now(&mut self, shape: u64, req: &GroupRequest) -> Result<(), &str> {
        work_out(&mut self.demands, self.groups.len(), &self.graph.graph.resources, shape, req, None);
        self.short_now(shape, req.min_members).map_or(Ok(()), Err)
    }

    /// What is short now for the minimum (`min` members) of a request of shape `shape`, whose
    /// demand is worked out (`work_out`): None if the aggregates do not rule out a fit.
    pub(super) fn short_now(&self, shape: u64, min: u32) -> Option<&str> {
        self.demands.get(&(shape, min))?.short_now(&self.graph.graph)
    }
}

impl Demand {
    /// What is short now on graph `g` for this demand: None if the aggregates do not rule out a
    /// fit.
    pub(super) fn short_now(&self, g: &Graph) -> Option<&str> {
        let (_, free) = g.totals();
        if let Some((_, _, text)) = self.total.iter().find(|(id, need, _)| *need > free[id.index()]) {
            return Some(text);
        }
        let max_free = &g.domain(g.root_domain).max_free;
        self.each.iter().find(|(_, id, per, _)| *per > max_free[id.index()]).map(|(_, _, _, text)| &**text)
    }

    /// For a demand (of request `req`) that passed `short_now`, matched over a window from now to
    /// `end`: the reason the match gives when what it asks in all is more than the cluster has
    /// free in total at some moment of the window (`ahead`, worked out from graph `g` as it is),
    /// so that no placement exists. None where the test does not apply or does not rule out a fit; also
    /// where the match would give another reason (a total it counts that is short now).
    pub(super) fn short_ahead(
        &mut self,
        req: &GroupRequest,
        g: &Graph,
        end: i64,
        ahead: &FreeAhead,
    ) -> Option<&'static str> {
        let matched = self.matched.get_or_insert_with(|| Self::matched(req, g)).as_ref()?;
        let (_, free) = g.totals();
        if matched.iter().any(|(id, need)| *need > free[id.index()]) {
            return None;
        }
        let least = ahead.least_before(end)?;
        matched.iter().any(|(id, need)| *need > least[id.index()]).then_some(NOT_ON_THE_NODES)
    }
}

#[cfg(test)]
mod tests {
    use muster_graph::quantity::Unit;
    use muster_graph::resources::ResourceKind;

    use super::*;

    fn total(d: &Demand) -> Vec<u64> {
        d.total.iter().map(|(_, a, _)| *a).collect()
    }

    #[test]
    fn a_slot_taken_by_another_group_finds_that_groups_demand() {
        let mut resources = ResourceTable::default();
        resources.intern("cpu", Unit::Millicores, ResourceKind::Pooled).unwrap();
        let (small, large) =
            (GroupRequest::simple("a", 2, &[("cpu", 1000)]), GroupRequest::simple("b", 3, &[("cpu", 4000)]));
        let mut demands = Demands::default();
        let slot = Slot::at(5);
        assert_eq!(total(work_out(&mut demands, 10, &resources, 1, &small, Some(slot))), [2000]);
        // Found again by its slot, as the same demand.
        work_out(&mut demands, 10, &resources, 1, &small, Some(slot)).satisfiable = true;
        assert!(work_out(&mut demands, 10, &resources, 1, &small, None).satisfiable);
        // The slot's group gone, another group there asks for its own.
        assert_eq!(total(work_out(&mut demands, 10, &resources, 2, &large, Some(slot))), [12000]);
        assert_eq!(total(work_out(&mut demands, 10, &resources, 1, &small, Some(slot))), [2000]);
        // Cleared with the graph's resources, the slot's entry is forgotten too.
        demands.clear();
        assert!(!work_out(&mut demands, 10, &resources, 1, &small, Some(slot)).satisfiable);
    }
}
