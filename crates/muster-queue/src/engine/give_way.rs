//! Shrinking running elastic groups that allow it (`shrinkable`) so that the first group in line
//! starts now rather than at its reservation. Members above a group's minimum, on the nodes the
//! waiting group would take, are asked back; the waiting group starts once their pods are gone
//! (the controller reports them lost), never on top of them. Worth it only when the start it
//! gains is longer than the time the shrunk groups lose: fewer members do their work left more
//! slowly, so a group without a planned end is never asked.

use std::collections::{BTreeMap, BTreeSet};

use muster_graph::{AllocId, GroupRequest, MatchOutcome};

use super::Engine;
use crate::group::{GroupKey, GroupState, Reason, Transition};

/// Members asked back from running groups for one waiting group.
pub(super) type GiveBack = BTreeMap<GroupKey, BTreeSet<u32>>;

impl Engine {
    /// Asks shrinkable groups to give back members so that `key` (reserved at `at`, or with no
    /// start found) can start now; returns whether it asked. Changes nothing in the graph: the
    /// members stay held until their pods are gone.
    pub(super) fn give_way(
        &mut self,
        key: &GroupKey,
        req: &GroupRequest,
        reservation: Option<(AllocId, i64)>,
        out: &mut Vec<Transition>,
    ) -> bool {
        // One give-back at a time: the waiting group starts once it is done.
        self.leaving.retain(|k, _| self.groups.get(k).is_some_and(|g| g.state == GroupState::Running));
        if !self.leaving.is_empty() {
            return false;
        }
        let surplus = self.surplus_members(key);
        if surplus.is_empty() {
            return false;
        }
        let trial = |asked: &GiveBack| -> Option<BTreeSet<muster_graph::NodeId>> {
            let mut g = self.graph.clone();
            if let Some((id, _)) = reservation {
                g.cancel(id).ok()?;
            }
            for (k, members) in asked {
                let members: Vec<u32> = members.iter().copied().collect();
                g.shrink(self.graph_alloc[k], &members).ok()?;
            }
            let MatchOutcome::Allocated(id) = g.allocate(req, self.now) else { return None };
            Some(g.allocation(id).ok()?.members.iter().map(|m| m.node).collect())
        };
        self.last_stats.match_calls += 2;
        // With every surplus member gone, where would the group go? Ask back only those there.
        let Some(nodes) = trial(&surplus) else { return false };
        let asked: GiveBack = surplus
            .into_iter()
            .map(|(k, members)| {
                let alloc = self.graph.allocation(self.graph_alloc[&k]).expect("placed");
                let there: BTreeSet<u32> = alloc
                    .members
                    .iter()
                    .filter(|m| members.contains(&m.index) && nodes.contains(&m.node))
                    .map(|m| m.index)
                    .collect();
                let there = self.groups[&k].spec.request.with_whole_sets(there, members.iter().copied());
                (k, there)
            })
            .filter(|(_, members)| !members.is_empty())
            .collect();
        if trial(&asked).is_none() {
            return false;
        }
        let gained = reservation.map_or(i64::MAX, |(_, at)| at.saturating_sub(self.now));
        // Fewer members do the work left more slowly: with k members giving back s, the end
        // moves by (end - now) x s / (k - s). A shrunk group grows back once the waiting one ends
        // (`grow_elastic`), so it loses at most the given members' work over that run, spread
        // over its members.
        let waiting_run = req.run_time_with(req.max_members).map(|d| d as i64);
        let lost: i64 = asked
            .iter()
            .map(|(k, members)| {
                let end = self.graph.allocation(self.graph_alloc[k]).map_or(self.now, |a| a.end);
                let (held, given) = (self.groups[k].member_count() as i64, members.len() as i64);
                let ceil_div = |a: i64, b: i64| (a.saturating_add(b - 1)) / b.max(1);
                let stretch = ceil_div(end.saturating_sub(self.now).saturating_mul(given), held - given);
                waiting_run.map_or(stretch, |run| stretch.min(ceil_div(run.saturating_mul(given), held)))
            })
            .fold(0, i64::saturating_add);
        if gained <= lost {
            return false;
        }
        for (k, members) in &asked {
            let rec = self.groups[k].allocation.clone();
            let reason = Reason::GivingWay { members: members.iter().copied().collect(), to: key.clone() };
            self.step(k, GroupState::Running, reason, rec, out);
        }
        self.leaving = asked;
        self.leaving_for = Some(key.clone());
        true
    }

    /// Members above their minimum of the running groups that may give them back to `key`: the
    /// shrinkable ones, ready, of no higher priority, with a planned end (`GroupRequest::surplus`).
    fn surplus_members(&self, key: &GroupKey) -> GiveBack {
        let priority = self.groups[key].priority;
        self.elastic
            .iter()
            .filter(|k| *k != key && self.live.contains(*k))
            .filter_map(|k| {
                let g = &self.groups[k];
                let r = &g.spec.request;
                let usable = r.shrinkable
                    && g.state == GroupState::Running
                    && g.not_ready_since.is_none()
                    && g.priority <= priority
                    && r.members_per_node.is_none();
                let alloc = self.graph.allocation(*self.graph_alloc.get(k)?).ok().filter(|_| usable)?;
                if alloc.end == muster_graph::allocations::FOREVER || alloc.end <= self.now {
                    return None;
                }
                let surplus = r.surplus(alloc.members.iter().map(|m| m.index));
                (!surplus.is_empty()).then(|| (k.clone(), surplus.into_iter().collect()))
            })
            .collect()
    }

    /// The members `key` was asked to give back and still holds.
    pub fn leaving(&self, key: &GroupKey) -> Option<&BTreeSet<u32>> {
        self.leaving.get(key)
    }
}
