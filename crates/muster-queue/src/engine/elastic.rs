//! Elastic groups (min < max members): how many members one asks for now (all of max while it
//! waits for max), and growing running ones toward max after each cycle.

use super::Engine;
use super::quota_holds::QuotaTimeline;
use crate::group::{Group, GroupKey, GroupState, Reason, Transition};
use crate::quota;

impl Engine {
    /// The member count an elastic group asks for now: all of max while it waits for max.
    pub(super) fn effective_min(&self, g: &Group) -> u32 {
        let r = &g.spec.request;
        if r.min_members >= r.max_members {
            return r.min_members;
        }
        let wait = self.queue_cfg(&g.spec.queue).elastic_max_wait_s;
        if wait > 0 && self.now < g.spec.submitted_at.saturating_add(wait) { r.max_members } else { r.min_members }
    }

    /// Whether group `key` is elastic, below its max and in an open queue: once all its members
    /// are ready, the next cycle may grow it (a cycle runs only when something changed, and its
    /// readiness is a change).
    pub(super) fn may_grow(&self, key: &GroupKey) -> bool {
        let g = &self.groups[key];
        g.member_count() < g.spec.request.max_members && !self.queue_cfg(&g.spec.queue).closed
    }

    /// Grows running elastic groups toward max where capacity (and quota, beside what the
    /// cycle's reservations hold of it) allow, without touching any reservation.
    pub(super) fn grow_elastic(&mut self, quota: &mut QuotaTimeline, out: &mut Vec<Transition>) {
        let keys: Vec<GroupKey> = self
            .elastic
            .iter()
            // A group giving members back does not take room again meanwhile.
            .filter(|k| self.live.contains(*k) && !self.leaving.contains_key(*k))
            .filter(|k| {
                let g = &self.groups[*k];
                g.state == GroupState::Running
                    && g.not_ready_since.is_none()
                    && g.spec.request.members_per_node.is_none()
                    && self.may_grow(k)
            })
            .cloned()
            .collect();
        for key in keys {
            let g = &self.groups[&key];
            let cur = g.member_count();
            let Some((set, room)) = g.spec.request.growing_set(g.member_indices()) else { continue };
            let asks = quota::Asks::growth(&g.spec.request, set);
            let (qmax, _) =
                quota::max_members(&self.compiled, &self.usage, &g.spec.queue, &asks, u32::MAX, &|_, a| a.to_string());
            let mut want = room.min(g.spec.request.max_members - cur).min(qmax);
            // The members added run until the group's planned end.
            let end = g.allocation.as_ref().map_or(i64::MAX, |a| a.end);
            want = self.held_room(&key, &g.spec.queue, &asks, want, (self.now, end), quota).0;
            // An optional set comes whole: all its members, or it waits.
            let whole = g.spec.request.is_optional(set);
            if whole && want < room {
                continue;
            }
            let alloc_id = g.allocation.as_ref().map_or(0, |a| a.alloc_id);
            let id = self.graph_alloc[&key];
            while want > 0 {
                self.last_stats.match_calls += 1;
                match self.graph.grow(id, want, self.now) {
                    Ok(Some(added)) => {
                        let rec = self.record_of(id, alloc_id);
                        self.add_usage(&key, added.iter().copied(), 1);
                        quota.runs_changed();
                        let g = self.group_mut(&key);
                        g.allocation = Some(rec.clone());
                        self.step(&key, GroupState::Running, Reason::Grown { members: added }, Some(rec), out);
                        break;
                    }
                    Ok(None) if !whole => want /= 2,
                    Ok(None) => break,
                    Err(_) => break,
                }
            }
        }
    }
}
