//! Bookkeeping every room shares: access to groups, the pending index, the checked state change
//! that reports each `Transition`, the request index (shapes, elastic groups), and the invariants
//! tests check.

use std::cmp::Reverse;
use std::collections::BTreeMap;
use std::sync::Arc;

use muster_graph::GroupRequest;

use super::cycle::{queue_order_time, reservation_due_at};
use super::group_table::PendingGroup;
use super::{Engine, EngineError, PendingKey};
use crate::config::QueueConfig;
use crate::group::{AllocationRecord, Group, GroupKey, GroupState, Reason, Transition};
use crate::quota::{self, Usage};

/// A fingerprint of a request without its name: groups with equal shapes fit or fail alike. It is
/// stable across builds (FNV-1a of the request's JSON; std's hasher may change between Rust
/// releases), because learned run times are stored under it. The lowest bit is left free for
/// variants of a shape (the request for all of max).
pub fn request_shape(req: &GroupRequest) -> u64 {
    let mut r = req.clone();
    r.name.clear();
    let text = serde_json::to_string(&r).unwrap_or_default();
    let hash = text.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
    hash & !1
}

impl Engine {
    pub(super) fn get(&self, key: &GroupKey) -> Result<&Group, EngineError> {
        self.groups.get(key).map(|g| &**g).ok_or_else(|| EngineError::UnknownGroup(key.clone()))
    }

    /// A group to change: copied first if a copy of the engine still shares it (see `groups`).
    pub(super) fn group_mut(&mut self, key: &GroupKey) -> &mut Group {
        Arc::make_mut(self.groups.get_mut(key).expect("exists"))
    }

    /// Rewritten every cycle for every waiting group, but mostly to the same text: only a new
    /// text copies the group (see `groups`).
    pub(super) fn set_reason(&mut self, key: &GroupKey, reason: impl AsRef<str>) {
        let g = self.groups.get_mut(key).expect("exists");
        if g.reason != reason.as_ref() {
            // Into the old text's buffer: the same reasons come back cycle after cycle.
            let old = &mut Arc::make_mut(g).reason;
            old.clear();
            old.push_str(reason.as_ref());
        }
    }

    pub(super) fn queue_cfg(&self, q: &str) -> &QueueConfig {
        &self.config.queues[self.compiled.queues[q].index]
    }

    /// Whether queue `q` has a quota of anything: a queue without one skips every quota step.
    pub(super) fn queue_has_quota(&self, q: &str) -> bool {
        !self.compiled.queues[q].quotas.is_empty()
    }

    pub(super) fn unknown_queue_err(&self, key: &GroupKey, queue: &str) -> EngineError {
        EngineError::InvalidGroup {
            key: key.clone(),
            field: "queue".into(),
            message: format!(
                "unknown queue {queue:?}; known: {:?}",
                self.config.queues.iter().map(|q| q.name.as_str()).collect::<Vec<_>>()
            ),
        }
    }

    // ----- the pending index -----

    /// A group's place in its queue's pending order: priority, then [`queue_order_time`], then
    /// submission order.
    pub(super) fn pending_key(&self, g: &Group) -> PendingKey {
        let policy = self.queue_cfg(&g.spec.queue).policy;
        PendingKey { neg_priority: -i64::from(g.priority), order_time: queue_order_time(g, policy), seq: g.seq }
    }

    pub(super) fn add_pending(&mut self, key: &GroupKey) {
        let g = &self.groups[key];
        let (pk, queue) = (self.pending_key(g), g.spec.queue.clone());
        if let Some(t) = reservation_due_at(g, self.queue_cfg(&queue).policy) {
            self.due_reservation.insert((t, key.clone()));
        }
        let slot = self.groups.slot(key).expect("a known group");
        let shape = self.shapes[key];
        self.pending.entry(queue).or_default().insert(pk, PendingGroup { key: Arc::new(key.clone()), slot, shape });
    }

    pub(super) fn remove_pending(&mut self, key: &GroupKey) {
        let g = &self.groups[key];
        let pk = self.pending_key(g);
        if let Some(t) = reservation_due_at(g, self.queue_cfg(&g.spec.queue).policy) {
            self.due_reservation.remove(&(t, key.clone()));
        }
        if let Some(p) = self.pending.get_mut(&g.spec.queue) {
            p.remove(&pk);
        }
    }

    // ----- state changes -----

    /// Records a state change after checking it against the lifecycle.
    pub(super) fn set_state(
        &mut self,
        key: &GroupKey,
        to: GroupState,
        reason: Reason,
        allocation: Option<AllocationRecord>,
        out: &mut Vec<Transition>,
    ) -> Result<(), EngineError> {
        let g = Arc::make_mut(self.groups.get_mut(key).ok_or_else(|| EngineError::UnknownGroup(key.clone()))?);
        let from = g.state;
        GroupState::transition(from, to)
            .map_err(|source| EngineError::IllegalTransition { key: key.clone(), source })?;
        g.state = to;
        if to == GroupState::Reserved {
            self.reserved.insert(key.clone());
        } else {
            self.reserved.remove(key);
        }
        if matches!(to, GroupState::Admitted | GroupState::Running | GroupState::Evicted) {
            self.live.insert(key.clone());
        } else {
            self.live.remove(key);
        }
        out.push(Transition { at: self.now, key: key.clone(), from, to, reason, allocation });
        // Every timer is set just before a transition (admission, readiness lost, eviction).
        if let Some(t) = self.timer_of(&self.groups[key]) {
            self.timers.push(Reverse((t, key.clone())));
        }
        self.retire_if_ended(key);
        Ok(())
    }

    /// A group that succeeded or failed leaves play for the history (`group_table.rs`), and its
    /// request shape and elastic mark with it: nothing plans or grows it again (an elastic group
    /// that ended no longer makes every cycle plan its reservations afresh).
    pub(super) fn retire_if_ended(&mut self, key: &GroupKey) {
        if matches!(self.groups[key].state, GroupState::Succeeded | GroupState::Failed) {
            self.groups.retire(key);
            self.shapes.remove(key);
            self.elastic.remove(key);
        }
    }

    /// Internal transitions the engine itself chose: legal by construction.
    pub(super) fn step(
        &mut self,
        key: &GroupKey,
        to: GroupState,
        reason: Reason,
        allocation: Option<AllocationRecord>,
        out: &mut Vec<Transition>,
    ) {
        self.set_state(key, to, reason, allocation, out).expect("engine-chosen transition is legal");
    }

    /// Queues a released group again at once (no backoff).
    pub(super) fn requeue_now(&mut self, key: &GroupKey, out: &mut Vec<Transition>) {
        let g = self.group_mut(key);
        g.requeue_at = None;
        self.step(key, GroupState::Queued, Reason::Requeued, None, out);
        self.add_pending(key);
    }

    /// The groups holding a reservation, in queue order (queues by name, then each queue's
    /// pending order).
    pub(super) fn reserved_groups(&self) -> impl Iterator<Item = &Group> {
        let mut reserved: Vec<&Group> = self.reserved.iter().map(|k| &*self.groups[k]).collect();
        reserved.sort_by_cached_key(|g| (g.spec.queue.as_str(), self.pending_key(g)));
        reserved.into_iter()
    }

    /// The groups starting soon ([`Engine::starts_soon`]): reserved ones, and the first in line
    /// of each queue.
    pub fn starting_soon(&self, now: i64) -> impl Iterator<Item = &Group> {
        let first_in_line = self.pending.values().filter_map(|p| p.values().next()).map(|k| &*self.groups[k]);
        self.reserved_groups()
            .chain(first_in_line.filter(|g| g.state == GroupState::Queued))
            .filter(move |g| self.starts_soon(g, now))
    }

    /// Whether `g`'s pods may be made now, to wait unbound for its start: it is of a fixed size
    /// (an elastic group's size is chosen at admission) and either reserved to start within its
    /// queue's `createPodsAheadS` of `now`, or first in its queue's line without a reservation.
    /// The latter's start is not planned (a group ahead of it runs without a known end, or the
    /// policy does not reserve for it yet), so it may come with the next group to end; its pods
    /// waiting cost one group's worth of unbound pods per queue. A queue's lead of 0 turns both
    /// off.
    pub fn starts_soon(&self, g: &Group, now: i64) -> bool {
        let ahead = self.queue_cfg(&g.spec.queue).create_pods_ahead_s;
        let r = &g.spec.request;
        let first_in_line =
            || self.pending.get(&g.spec.queue).and_then(|p| p.values().next()).is_some_and(|k| **k == g.spec.key);
        ahead > 0
            && r.min_members == r.max_members
            && match g.state {
                GroupState::Reserved => g.reserved_at.is_some_and(|t| t <= now.saturating_add(ahead)),
                GroupState::Queued => g.unsatisfiable.is_none() && first_in_line(),
                _ => false,
            }
    }

    /// What is kept about a group's request for fast lookups: its shape, and whether it is elastic.
    pub(super) fn index_spec(&mut self, key: &GroupKey, request: &GroupRequest) {
        self.shapes.insert(key.clone(), request_shape(request));
        if request.min_members < request.max_members {
            self.elastic.insert(key.clone());
        } else {
            self.elastic.remove(key);
        }
    }

    /// Checks internal invariants (for tests): quotas, all-or-nothing placements, indices.
    pub fn check_invariants(&self) -> Result<(), String> {
        if !self.over_quota_from_config {
            quota::check(&self.compiled, &self.usage)?;
        }
        for g in self.groups.values() {
            let placed = self.graph_alloc.get(&g.spec.key);
            if g.state.holds_allocation() {
                let id = placed.ok_or_else(|| format!("{} is {} without an allocation", g.spec.key, g.state))?;
                let a = self.graph.allocation(*id).map_err(|e| e.to_string())?;
                let n = a.members.len() as u32;
                if n < g.spec.request.min_members || n > g.spec.request.max_members {
                    return Err(format!(
                        "{} holds {n} members outside {}..={}",
                        g.spec.key, g.spec.request.min_members, g.spec.request.max_members
                    ));
                }
                if g.member_count() != n {
                    return Err(format!("{} record has {} members, graph {n}", g.spec.key, g.member_count()));
                }
                if a.reserved {
                    return Err(format!("{} holds a reservation as allocation", g.spec.key));
                }
            } else if placed.is_some() {
                return Err(format!("{} is {} but holds an allocation", g.spec.key, g.state));
            }
            let entry = self.pending.get(&g.spec.queue).and_then(|p| p.get(&self.pending_key(g)));
            let in_pending = entry.is_some_and(|k| **k == g.spec.key);
            if g.state.is_pending() != in_pending {
                return Err(format!("{} is {} but pending index says {in_pending}", g.spec.key, g.state));
            }
            if let Some(e) = entry.filter(|_| in_pending)
                && (e.shape != self.shapes[&g.spec.key] || self.groups.slot(&g.spec.key) != Some(e.slot))
            {
                return Err(format!("{}'s pending entry holds another shape or slot than the group", g.spec.key));
            }
            if (g.state == GroupState::Reserved) != self.reserved.contains(&g.spec.key) {
                return Err(format!("{} is {} but the reserved index disagrees", g.spec.key, g.state));
            }
        }
        if let Some(k) =
            self.reservations.keys().find(|k| self.groups.get(k).is_none_or(|g| g.state != GroupState::Reserved))
        {
            return Err(format!("{k} holds a reservation on the graph but is not reserved"));
        }
        // Quota usage equals the sum of placed groups.
        let mut usage: Usage = BTreeMap::new();
        for g in self.groups.values().filter(|g| g.state.holds_allocation()) {
            let u = usage.entry(g.spec.queue.clone()).or_default();
            for (r, total) in quota::members_asks(&g.spec.request, g.member_indices()) {
                *u.entry(r).or_insert(0) += total;
            }
        }
        for (q, u) in &self.usage {
            for (r, a) in u {
                let want = usage.get(q).and_then(|m| m.get(r)).copied().unwrap_or(0);
                if *a != want {
                    return Err(format!("queue {q} usage {r} is {a}, placed groups sum to {want}"));
                }
            }
        }
        Ok(())
    }
}
