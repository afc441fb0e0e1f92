//! Groups of several member sets (a launcher and its workers, a head and worker groups): every
//! set placed at once, or none. Each set's minimum is placed first, one set after another into
//! one allocation, the largest first, each seeing the room the earlier ones took (so a small set
//! lands in what a large one left on its nodes); when one cannot reach its minimum, the sets
//! placed so far are taken back and the next domain of the group's topology level is tried.
//! Only then do the elastic sets take their extra members, in the group's order (its member
//! steps), each close to its own members: an elastic set placed first never takes the room
//! another set's minimum needs.

use std::sync::Arc;

use super::{Allocation, FOREVER, MatchOutcome, Member, Otherwise, ResourceGraph};
use crate::graph::{NodeId, VertexId};
use crate::jobspec::{ConstraintMode, GroupRequest, SubGroup, TopologyConstraint};
use crate::matcher::{Demand, Unsatisfiable, Window, placed_units};
use crate::policy::Policy;

impl ResourceGraph {
    /// Per member of each set, by resource index.
    pub(super) fn per_set(&self, req: &GroupRequest) -> Result<Vec<Vec<u64>>, Unsatisfiable> {
        let requests = set_requests(req);
        requests.iter().map(|r| Demand::resolve(&self.graph, r).map(|d| d.per_member)).collect()
    }

    pub(super) fn match_sets(&mut self, req: &GroupRequest, now: i64, otherwise: Otherwise) -> MatchOutcome {
        let requests = set_requests(req);
        let demands = match self.resolve_sets(req, &requests) {
            Ok(d) => d,
            Err(u) => return MatchOutcome::Unsatisfiable(u.0),
        };
        let end = Self::end_of(now, req, req.min_members);
        if let Some(alloc) = self.place_sets(req, &demands, Window::Now { now, end }, now, false) {
            let id = alloc.id;
            self.allocations.insert(id, Arc::new(alloc));
            return MatchOutcome::Allocated(id);
        }
        if otherwise != Otherwise::Busy
            && let Err(reason) = self.sets_satisfiable(req, &demands)
        {
            return MatchOutcome::Unsatisfiable(reason);
        }
        let shortfall: Vec<String> =
            demands.iter().map(|d| format!("{}: {}", d.request.name, self.busy_reason(d, now))).collect();
        let shortfall = shortfall.join("; ");
        if otherwise != Otherwise::Reserve {
            return MatchOutcome::Busy(shortfall);
        }
        self.reserve_set_demands(req, &demands, shortfall, now)
    }

    /// [`ResourceGraph::satisfiability`] of a group of sets.
    pub(super) fn satisfiability_sets(&self, req: &GroupRequest) -> Result<(), String> {
        let requests = set_requests(req);
        let demands = self.resolve_sets(req, &requests).map_err(|u| u.0)?;
        self.sets_satisfiable(req, &demands)
    }

    /// [`ResourceGraph::reserve`] of a group of sets.
    pub(super) fn reserve_sets(&mut self, req: &GroupRequest, now: i64) -> MatchOutcome {
        let requests = set_requests(req);
        match self.resolve_sets(req, &requests) {
            Ok(demands) => self.reserve_set_demands(req, &demands, "the sets do not fit now".into(), now),
            Err(u) => MatchOutcome::Unsatisfiable(u.0),
        }
    }

    /// Each set's demand, once the group's own constraint and its sub-groups' are known to name
    /// levels this cluster has (as each set's are, in its demand): a level no node carries is
    /// refused as it is for a group of alike members, never placed or waited for.
    fn resolve_sets<'a>(
        &self,
        req: &GroupRequest,
        requests: &'a [GroupRequest],
    ) -> Result<Vec<Demand<'a>>, Unsatisfiable> {
        for t in req.topology.iter().chain(req.subgroups.iter().map(|g| &g.topology)) {
            self.graph.check_topology(t)?;
        }
        requests.iter().map(|r| Demand::resolve(&self.graph, r)).collect()
    }

    /// The earliest start at which every set fits, reserved; `shortfall` says why not now.
    fn reserve_set_demands(
        &mut self,
        req: &GroupRequest,
        demands: &[Demand],
        shortfall: String,
        now: i64,
    ) -> MatchOutcome {
        let need = self.sets_need(req);
        for t in self.candidate_times(&need, now) {
            let w_end = Self::end_of(t, req, req.min_members);
            if let Some(alloc) = self.place_sets(req, demands, Window::Future { start: t, end: w_end }, t, true) {
                let id = alloc.id;
                self.allocations.insert(id, Arc::new(alloc));
                return MatchOutcome::Reserved { id, at: t };
            }
        }
        MatchOutcome::Busy(format!(
            "{shortfall}; no future start found because some allocations run without a duration"
        ))
    }

    /// What the group's minimum asks in all, by resource index.
    fn sets_need(&self, req: &GroupRequest) -> Vec<u64> {
        let mut need = vec![0u64; self.graph.resources.len()];
        for (r, a) in req.requests_with(req.min_members) {
            if let Some(id) = self.graph.resources.get(&r) {
                need[id.index()] = a;
            }
        }
        need
    }

    /// Each set fits the empty cluster alone, the group's minimum fits the cluster's totals, and a
    /// group with sub-groups is placed on the empty cluster.
    fn sets_satisfiable(&self, req: &GroupRequest, demands: &[Demand]) -> Result<(), String> {
        for d in demands {
            self.satisfiability(d.request).map_err(|e| format!("{}: {e}", d.request.name))?;
        }
        let (capacity, _) = self.graph.totals();
        for (i, (&need, &cap)) in self.sets_need(req).iter().zip(capacity).enumerate() {
            if need > cap {
                let id = crate::resources::ResourceId(i as u16);
                return Err(format!(
                    "the sets need {} {} in all; the whole cluster has {}",
                    self.graph.resources.format(id, need),
                    self.graph.resources.def(id).name,
                    self.graph.resources.format(id, cap)
                ));
            }
        }
        if !req.subgroups.is_empty() && !self.places_on_empty(req, demands) {
            let subgroups: Vec<String> =
                req.subgroups.iter().map(|g| format!("{} in one {}", g.name, g.topology.level)).collect();
            return Err(format!(
                "even on the empty cluster the sets cannot all be placed with each sub-group within one domain \
                 ({}); make a sub-group smaller, or its level wider",
                subgroups.join(", ")
            ));
        }
        Ok(())
    }

    /// Whether the whole group is placed on the cluster emptied: what the bounds above cannot
    /// tell, as a sub-group of whole nodes larger than any domain of its level.
    fn places_on_empty(&self, req: &GroupRequest, demands: &[Demand]) -> bool {
        let mut empty = ResourceGraph::new(self.graph.emptied(), self.policy);
        let window = Window::Now { now: 0, end: FOREVER };
        empty.place_sets(req, demands, window, 0, false).is_some()
    }

    /// Places every set in `window` within the first scope of the group's topology that takes
    /// them all, written into the graph; None (the graph as it was) when no scope does. Inside
    /// the scope each sub-group goes to the first domain of its own level that takes all its sets.
    fn place_sets(
        &mut self,
        req: &GroupRequest,
        demands: &[Demand],
        window: Window,
        start: i64,
        reserved: bool,
    ) -> Option<Allocation> {
        let policy = req.policy.unwrap_or(self.policy);
        let window_end = match window {
            Window::Now { end, .. } | Window::Future { end, .. } => end,
            Window::Empty => return None,
        };
        let per_set: Vec<Vec<u64>> = demands.iter().map(|d| d.per_member.clone()).collect();
        let minimums: Vec<Demand> = demands.iter().map(|d| Demand { max_units: d.min_units, ..d.clone() }).collect();
        let parts = parts_largest_first(req, demands, self.graph.totals().0);
        let first = parts[0].sets[0];
        let id = self.take_id();
        let everything: Vec<usize> = (0..demands.len()).collect();
        for scope in self.scopes_within(req.topology.as_ref(), demands, &everything, window, None) {
            let mut alloc = Allocation {
                id,
                request: req.clone(),
                per_set: per_set.clone(),
                members: Vec::new(),
                start,
                end: window_end,
                reserved,
                domain: scope,
            };
            let placed_all = parts.iter().all(|part| {
                let topology = part.subgroup.map(|g| &g.topology);
                self.scopes_within(topology, demands, &part.sets, window, scope).into_iter().any(|within| {
                    let mark = alloc.members.len();
                    let placed = (part.sets.iter()).all(|&k| {
                        self.place_set(&minimums[k], k, &mut alloc, window, set_policy(policy, k == first), within)
                    });
                    if !placed {
                        self.take_back(&mut alloc, mark);
                    }
                    placed
                })
            });
            if placed_all {
                for (k, d) in demands.iter().enumerate() {
                    self.place_extras(d, k, &mut alloc, window, set_policy(policy, k == first));
                }
                let end = Self::end_of(start, req, alloc.members.len() as u32);
                if end != alloc.end {
                    self.set_end(&mut alloc, end);
                }
                alloc.members.sort_by_key(|m| m.index);
                return Some(alloc);
            }
            self.take_back(&mut alloc, 0);
        }
        self.next_id -= 1;
        None
    }

    /// Places set `k` (demand `d`) inside `scope`, its members added to `alloc` and written into
    /// the graph; false, with nothing added, when it cannot reach its minimum there.
    fn place_set(
        &mut self,
        d: &Demand,
        k: usize,
        alloc: &mut Allocation,
        window: Window,
        policy: Policy,
        scope: Option<VertexId>,
    ) -> bool {
        let (p, _) = self.graph.search_inside(d, window, policy, scope);
        if placed_units(&p) < d.min_units {
            return false;
        }
        let first = first_member(&alloc.request, k);
        self.add_set_members(alloc, d, &p, first);
        true
    }

    /// Adds to set `k` of `alloc` as many members as fit up to its max (demand `d`), after every
    /// set's minimum is placed: in the domains its members' growth would take
    /// ([`Self::growth_scopes`]), the innermost first.
    /// An optional set is placed the same way, but whole or not at all, and within one domain of
    /// its own level when it has one.
    fn place_extras(&mut self, d: &Demand, k: usize, alloc: &mut Allocation, window: Window, policy: Policy) {
        if d.max_units <= d.min_units {
            return;
        }
        let mut next = first_member(&alloc.request, k) + d.members(d.min_units);
        let whole = alloc.request.is_optional(k);
        let units = d.max_units - d.min_units;
        let mut extra = Demand { min_units: if whole { units } else { 0 }, max_units: units, ..d.clone() };
        for scope in self.extra_scopes(alloc, k, &extra, window) {
            if extra.max_units == 0 {
                break;
            }
            let (p, _) = self.graph.search(&extra, window, policy, scope);
            let placed = placed_units(&p);
            if placed < extra.min_units {
                continue;
            }
            self.add_set_members(alloc, &extra, &p, next);
            (extra.max_units, next) = (extra.max_units - placed, next + extra.members(placed));
            extra.min_units = extra.min_units.min(extra.max_units);
        }
    }

    /// Where set `k` of `alloc` takes members beyond its minimum (demand `d`), in the order to
    /// try: [`Self::growth_scopes`], and for a set with a level of its own that holds no member
    /// yet (an optional set), each domain of that level inside them, as a set is first placed.
    pub(super) fn extra_scopes(
        &self,
        alloc: &Allocation,
        k: usize,
        d: &Demand,
        window: Window,
    ) -> Vec<Option<VertexId>> {
        let scopes = self.growth_scopes(alloc, k);
        let req = &alloc.request;
        let own = req.sets.get(k).and_then(|s| s.topology.as_ref());
        let Some(own) = own.filter(|_| !alloc.members.iter().any(|m| req.set_of(m.index).0 == k)) else {
            return scopes;
        };
        let mut seen = std::collections::BTreeSet::new();
        let within =
            scopes.into_iter().flat_map(|s| self.scopes_within(Some(own), std::slice::from_ref(d), &[0], window, s));
        within.filter(|s| seen.insert(*s)).collect()
    }

    /// Writes placement `p` (of demand `d`) into `alloc` and the graph, its members numbered from
    /// `index` on.
    fn add_set_members(&mut self, alloc: &mut Allocation, d: &Demand, p: &[(NodeId, u32)], mut index: u32) {
        for &(n, units) in p {
            for _ in 0..d.members(units) {
                alloc.members.push(Member { index, node: n, devices: Vec::new(), sockets: Vec::new() });
                index += 1;
            }
        }
        self.apply_nodes(alloc, p.iter().map(|&(n, _)| n), None);
    }

    /// Takes the members of `alloc` after the first `keep` out of the graph again.
    fn take_back(&mut self, alloc: &mut Allocation, keep: usize) {
        let gone = alloc.members.split_off(keep);
        self.apply_nodes(alloc, gone.iter().map(|m| m.node), None);
    }

    /// Where members under constraint `t` may go inside `scope` (None: the whole cluster), in
    /// the order to try: the scope itself without a constraint or when a domain of its level
    /// holds the scope; else each domain of the constraint's levels inside the scope that is
    /// large enough for every set of `sets`, and, for a preferred constraint not kept within a
    /// level the scope is outside of, the scope itself last.
    fn scopes_within(
        &self,
        t: Option<&TopologyConstraint>,
        demands: &[Demand],
        sets: &[usize],
        window: Window,
        scope: Option<VertexId>,
    ) -> Vec<Option<VertexId>> {
        let Some(t) = t else { return vec![scope] };
        let holds_scope = |level: &str| {
            scope
                .is_some_and(|s| self.graph.level_domains(level).iter().any(|&(v, _)| self.graph.is_within(s, Some(v))))
        };
        let mut scopes = Vec::new();
        for level in self.graph.constraint_levels(t) {
            if holds_scope(&level) {
                scopes.push(scope);
                return scopes;
            }
            for &(v, dom) in self.graph.level_domains(&level) {
                let large_enough = sets.iter().all(|&k| {
                    let d = &demands[k];
                    self.graph.domain_total_bound(dom, d, window) >= u64::from(d.min_units)
                });
                if large_enough && self.graph.is_within(v, scope) {
                    scopes.push(Some(v));
                }
            }
        }
        let falls_back = t.mode == ConstraintMode::Preferred && t.within.as_deref().is_none_or(holds_scope);
        if falls_back {
            scopes.push(scope);
        }
        scopes
    }

    /// The request for `count` more members of set `k` of running allocation `alloc` (see
    /// [`Self::grow`]), and the number of that set's first member.
    pub(super) fn grow_request(alloc: &Allocation, k: usize, count: u32) -> (GroupRequest, u32) {
        let req = &alloc.request;
        let mut extra = req.set_request(k);
        extra.min_members = count;
        extra.max_members = count;
        (extra, first_member(req, k))
    }
}

/// Each set's own request, in the group's set order.
fn set_requests(req: &GroupRequest) -> Vec<GroupRequest> {
    (0..req.member_sets().len()).map(|k| req.set_request(k)).collect()
}

/// The number of set `k`'s first member.
fn first_member(req: &GroupRequest, k: usize) -> u32 {
    req.member_sets()[..k].iter().map(|s| s.max_members).sum()
}

/// The policy a set is placed by. Packing takes the nodes that hold the most of a set's members,
/// which for a small set after the first are the emptiest: a head's CPU pods would take the cores
/// of nodes whose GPUs are free, and the GPUs would idle. So under packing the later sets go to
/// the tightest nodes first, beside what the first set took.
fn set_policy(policy: Policy, first: bool) -> Policy {
    if policy == Policy::Pack && !first { Policy::BestFit } else { policy }
}

/// What is placed together: a sub-group's sets (kept within one domain of its level), or a set
/// of no sub-group.
struct Part<'a> {
    sets: Vec<usize>,
    subgroup: Option<&'a SubGroup>,
}

/// The group's parts, the one asking the largest share of the cluster's scarcest resource first
/// (it has the fewest places to go, and the small ones then fit beside it), and within a part its
/// sets in the same order.
fn parts_largest_first<'a>(req: &'a GroupRequest, demands: &[Demand], capacity: &[u64]) -> Vec<Part<'a>> {
    let share = |d: &Demand| -> u128 {
        let members = u128::from(d.members(d.max_units.max(d.min_units)));
        (d.per_member.iter().zip(capacity))
            .map(|(&q, &c)| ((u128::from(q) * members) << 32) / u128::from(c.max(1)))
            .max()
            .unwrap_or(0)
    };
    let mut order: Vec<usize> = (0..demands.len()).collect();
    order.sort_by_key(|&k| (std::cmp::Reverse(share(&demands[k])), k));
    let mut parts: Vec<Part> = Vec::new();
    for k in order {
        let subgroup = req.subgroup_of(k);
        match parts.iter_mut().find(|p| subgroup.is_some() && p.subgroup == subgroup) {
            Some(part) => part.sets.push(k),
            None => parts.push(Part { sets: vec![k], subgroup }),
        }
    }
    parts
}
