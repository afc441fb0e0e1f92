//! Groups of several member sets (a launcher and its workers, a head and worker groups): every
//! set placed at once, or none. Sets are placed one after another into one allocation, the
//! largest first, each seeing the room the earlier ones took (so a small set lands in what a
//! large one left on its nodes); when one cannot reach its minimum, the sets placed so far are
//! taken back and the next domain of the group's topology level is tried.

use std::sync::Arc;

use super::{Allocation, MatchOutcome, Member, Otherwise, ResourceGraph};
use crate::graph::{NodeId, VertexId};
use crate::jobspec::{ConstraintMode, GroupRequest};
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
        let demands = match self.resolve_sets(&requests) {
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
        let demands = self.resolve_sets(&requests).map_err(|u| u.0)?;
        self.sets_satisfiable(req, &demands)
    }

    /// [`ResourceGraph::reserve`] of a group of sets.
    pub(super) fn reserve_sets(&mut self, req: &GroupRequest, now: i64) -> MatchOutcome {
        let requests = set_requests(req);
        match self.resolve_sets(&requests) {
            Ok(demands) => self.reserve_set_demands(req, &demands, "the sets do not fit now".into(), now),
            Err(u) => MatchOutcome::Unsatisfiable(u.0),
        }
    }

    fn resolve_sets<'a>(&self, requests: &'a [GroupRequest]) -> Result<Vec<Demand<'a>>, Unsatisfiable> {
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

    /// Each set fits the empty cluster alone, and the group's minimum fits its totals.
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
        Ok(())
    }

    /// Places every set in `window` within the first scope of the group's topology that takes
    /// them all, written into the graph; None (the graph as it was) when no scope does.
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
        let order = largest_first(demands, self.graph.totals().0);
        let id = self.take_id();
        for scope in self.group_scopes(req, demands, window) {
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
            let mut placed_all = true;
            for &k in &order {
                let d = &demands[k];
                let (p, _) = self.graph.search_inside(d, window, set_policy(policy, k == order[0]), scope);
                if placed_units(&p) < d.min_units {
                    placed_all = false;
                    break;
                }
                let first = first_member(req, k);
                let mut index = first;
                for &(n, units) in &p {
                    for _ in 0..d.members(units) {
                        alloc.members.push(Member { index, node: n, devices: Vec::new(), sockets: Vec::new() });
                        index += 1;
                    }
                }
                let nodes: Vec<NodeId> = p.iter().map(|&(n, _)| n).collect();
                self.apply_nodes(&mut alloc, nodes, None);
            }
            if placed_all {
                let end = Self::end_of(start, req, alloc.members.len() as u32);
                if end != alloc.end {
                    self.set_end(&mut alloc, end);
                }
                alloc.members.sort_by_key(|m| m.index);
                return Some(alloc);
            }
            let members = std::mem::take(&mut alloc.members);
            self.apply_nodes(&mut alloc, members.iter().map(|m| m.node), None);
        }
        self.next_id -= 1;
        None
    }

    /// Where the whole group may go, in the order to try: anywhere without a topology
    /// constraint; else each domain of the constraint's levels (a preferred one falling back to
    /// the whole cluster unless kept within a level), skipping those too small for some set.
    fn group_scopes(&self, req: &GroupRequest, demands: &[Demand], window: Window) -> Vec<Option<VertexId>> {
        let Some(t) = &req.topology else { return vec![None] };
        let mut scopes = Vec::new();
        for level in self.graph.constraint_levels(t) {
            for &(v, dom) in self.graph.level_domains(&level) {
                let large_enough =
                    demands.iter().all(|d| self.graph.domain_total_bound(dom, d, window) >= u64::from(d.min_units));
                if large_enough {
                    scopes.push(Some(v));
                }
            }
        }
        if t.mode == ConstraintMode::Preferred && t.within.is_none() {
            scopes.push(None);
        }
        scopes
    }

    /// Adds `count` members to the last set of running allocation `id` (see [`Self::grow`]).
    pub(super) fn grow_request(alloc: &Allocation, count: u32) -> (GroupRequest, u32) {
        let req = &alloc.request;
        let last = req.member_sets().len() - 1;
        let mut extra = req.set_request(last);
        extra.sets.clear();
        extra.min_members = count;
        extra.max_members = count;
        (extra, first_member(req, last))
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

/// Set positions, the set asking the largest share of the cluster's scarcest resource first: it
/// has the fewest places to go, and the small sets then fit beside it.
fn largest_first(demands: &[Demand], capacity: &[u64]) -> Vec<usize> {
    let share = |d: &Demand| -> u128 {
        let members = u128::from(d.members(d.max_units.max(d.min_units)));
        (d.per_member.iter().zip(capacity))
            .map(|(&q, &c)| ((u128::from(q) * members) << 32) / u128::from(c.max(1)))
            .max()
            .unwrap_or(0)
    };
    let mut order: Vec<usize> = (0..demands.len()).collect();
    order.sort_by_key(|&k| (std::cmp::Reverse(share(&demands[k])), k));
    order
}
