//! The planner: the earliest future start of a group that does not fit now. Reservations hold
//! their nodes in the plan (spans) but not in the present (`free`), so backfill may use the room
//! until they start, and never past it.

use std::cell::Cell;
use std::sync::Arc;

use super::{Allocation, FOREVER, MatchOutcome, ResourceGraph};
use crate::graph::NodeId;
use crate::jobspec::GroupRequest;
use crate::matcher::{Demand, Window, placed_units};

impl ResourceGraph {
    /// Reserves the earliest future start of a group already known not to fit now (a queue that
    /// just tried `allocate`), without searching the present again.
    pub fn reserve(&mut self, req: &GroupRequest, now: i64) -> MatchOutcome {
        if !req.sets.is_empty() {
            return self.reserve_sets(req, now);
        }
        match Demand::resolve(&self.graph, req) {
            Ok(d) => self.reserve_demand(&d, now),
            Err(u) => MatchOutcome::Unsatisfiable(u.0),
        }
    }

    pub(super) fn reserve_demand(&mut self, d: &Demand, now: i64) -> MatchOutcome {
        let policy = d.request.policy.unwrap_or(self.policy);
        // The graph stays as it is and the starts ascend until the search succeeds, so a node
        // found full at one start need not be looked at again until its spans end.
        let mut d = d.clone();
        d.future_full_until = vec![Cell::new(i64::MIN); self.graph.nodes.len()];
        let d = &d;
        let need: Vec<u64> = d.per_member.iter().map(|q| q.saturating_mul(u64::from(d.members(d.min_units)))).collect();
        for t in self.candidate_times(&need, now) {
            let w_end = Self::end_of(t, d.request, d.members(d.min_units));
            let (p, domain) = self.graph.search(d, Window::Future { start: t, end: w_end }, policy, None);
            if placed_units(&p) >= d.min_units {
                let id = self.take_id();
                let end = Self::end_of(t, d.request, d.members(placed_units(&p)));
                let alloc = self.commit(id, d, &p, t, end, true, domain);
                self.allocations.insert(id, Arc::new(alloc));
                return MatchOutcome::Reserved { id, at: t };
            }
        }
        MatchOutcome::Busy(format!(
            "{}; no future start found because some allocations run without a duration",
            self.busy_reason(d, now)
        ))
    }

    /// Times after `now` when capacity is given back (an allocation or a reservation ends),
    /// ascending: the possible reservation starts. Times before the cluster's total free amounts
    /// (now, plus what running allocations give back by then) could cover the group's minimum are
    /// skipped: no placement can exist there, and searching them node by node is what makes
    /// reservations expensive on big clusters.
    ///
    /// A running allocation past its expected end still holds its nodes and is due to give them
    /// back any moment: it counts as ending at the next second, so the group still gets a
    /// reservation (its nodes then wait for it, and backfill keeps off them). Left out, it would
    /// make the group's start unknowable, and a group without a reservation can be overtaken by
    /// any backfill, over and over.
    pub(super) fn candidate_times(&self, need: &[u64], now: i64) -> Vec<i64> {
        let mut ends: Vec<(i64, &Allocation)> = self
            .allocations()
            .filter(|a| a.end != FOREVER && (a.end > now || !a.reserved))
            .map(|a| (a.end.max(now + 1), a))
            .collect();
        ends.sort_unstable_by_key(|&(end, a)| (end, a.id));
        let mut total = self.graph.totals().1.to_vec();
        let mut times = Vec::new();
        let mut nodes = Vec::new();
        for (end, a) in ends {
            if !a.reserved {
                self.add_held(a, &mut total, &mut nodes);
            }
            let covered = total.iter().zip(need).all(|(t, n)| t >= n);
            if covered && times.last() != Some(&end) {
                times.push(end);
            }
        }
        times
    }

    /// Adds what a running allocation holds in all (whole nodes for exclusive groups, whole
    /// sockets for groups that ask for them) to `total`; `nodes` is scratch space. Runs for every
    /// allocation on every reservation, so it allocates nothing per call.
    fn add_held(&self, a: &Allocation, total: &mut [u64], nodes: &mut Vec<NodeId>) {
        if a.request.exclusive || a.request.sockets.is_some() {
            nodes.clear();
            nodes.extend(a.members.iter().map(|m| m.node));
            nodes.sort_unstable();
            nodes.dedup();
            for &n in nodes.iter() {
                let node = self.graph.node(n);
                let span = node.spans.iter().find(|s| s.alloc == a.id);
                for (t, &c) in total.iter_mut().zip(span.map_or(&node.capacity, |s| &s.amounts)) {
                    *t = t.saturating_add(c);
                }
            }
        } else {
            a.add_held_to(total);
        }
    }
}
