//! A cheap way through an attempt that is sure to fail: the same request, or one it contains,
//! failed to match ahead of it in this cycle (`failed_requests.rs`), or what its minimum asks is
//! more than the cluster has free, now or, within a run, at some moment of its run as planned
//! (the room ahead, `muster_graph::free_ahead`).
//!
//! With thousands of groups waiting behind a blocked head, most attempts behind it end one of
//! these ways. Such an attempt would copy the request, ask the quota and look the group up several
//! times only to reach the answer these tests give; when nothing on its way could decide otherwise,
//! it is settled here with the outcome and reason the full attempt gives. Where the blocked queue
//! is the last one the cycle has groups of, a whole run of such groups is settled in one go
//! ([`Engine::settle_misfit_run`]), without taking each one as the cycle's head.

use std::ops::Bound;
use std::sync::Arc;

use muster_graph::allocations::FOREVER;

use super::attempt::{Attempt, CAPACITY, backfill_tail};
use super::cycle::{Pass, reservation_due_at};
use super::failed_requests::size;
use super::group_table::{PendingGroup, Slot};
use super::{Engine, PendingKey, demand};
use crate::config::{FairShareWithinCohort, QueuePolicy, WithinQueue};
use crate::group::GroupState;

/// How many groups a run takes from the pending index at a time: at first, and at most. A run
/// often ends after a few groups, at one that must be attempted in full.
const RUN_BATCH: (usize, usize) = (8, 256);

/// The room ahead as a run of settled groups sees it, each part worked out when a group first
/// needs it: nothing changes the graph while a run lasts.
#[derive(Default)]
struct RunAhead {
    /// The earliest start of a reservation the engine holds ([`FOREVER`]: none). A group whose
    /// run ends by then is not tested: where nothing is reserved ahead of its end, the room only
    /// grows after now, and the test would not rule it out.
    first_reserved: Option<i64>,
    /// The engine's `room_ahead` holds this run's room.
    worked_out: bool,
}

impl Engine {
    /// Blocked, with its reason set, when the full attempt is sure to end so: the request (shape,
    /// min, max), or one it contains, failed to match earlier in this cycle (`Pass::failed`; only
    /// a preemption frees room within a cycle, and it clears them) or does not pass the aggregate test
    /// (`may_fit_now`), and none of the steps before or after the match could decide otherwise.
    /// None: attempt it in full.
    pub(super) fn repeat_misfit(
        &mut self,
        head: &PendingGroup,
        may_reserve: bool,
        pass: &mut Pass<'_>,
    ) -> Option<Attempt> {
        if !self.settle_repeat_misfits || may_reserve {
            return None;
        }
        let g = self.groups.at(head.slot);
        debug_assert_eq!(g.spec.key, *head.key, "the pending index holds the group's slot");
        let q = &g.spec.queue;
        if !self.queue_settles_misfits(q, pass) {
            return None;
        }
        let qi = self.compiled.queues[q].index;
        self.settle_misfit(head.slot, head.shape, qi, None, pass).then_some(Attempt::Blocked)
    }

    /// Settles the groups of blocked queue `q` (under `policy`; `may_reserve_more`: its
    /// reservation depth is not used up in this cycle) after `after`, in order, for as long as
    /// each is a repeat misfit and the backfill budget lasts, as taking each one as the cycle's
    /// head would: the same budget spent, the same reasons. Only for the last queue the cycle has
    /// groups of, so that no other queue's group would come in between. Returns the last group
    /// settled (`after` if none): the cycle goes on from there.
    pub(super) fn settle_misfit_run(
        &mut self,
        q: &str,
        policy: QueuePolicy,
        may_reserve_more: bool,
        after: PendingKey,
        pass: &mut Pass<'_>,
    ) -> PendingKey {
        if !self.settle_repeat_misfits || !self.queue_settles_misfits(q, pass) {
            return after;
        }
        let mut batch = std::mem::take(&mut self.run_batch);
        let last = self.settle_batches(q, policy, may_reserve_more, after, &mut batch, pass);
        self.run_batch = batch;
        last
    }

    /// [`Engine::settle_misfit_run`] past its checks, taking the pending groups into `batch` (the
    /// engine's reused storage) a batch at a time.
    fn settle_batches(
        &mut self,
        q: &str,
        policy: QueuePolicy,
        may_reserve_more: bool,
        mut last: PendingKey,
        batch: &mut Vec<(PendingKey, Slot, u64)>,
        pass: &mut Pass<'_>,
    ) -> PendingKey {
        let mut size = RUN_BATCH.0;
        let (mut ahead, qi) = (RunAhead::default(), self.compiled.queues[q].index);
        loop {
            batch.clear();
            let next = self.pending[q].range((Bound::Excluded(last), Bound::Unbounded));
            batch.extend(next.take(size.min(pass.backfill_budget)).map(|(pk, p)| (*pk, p.slot, p.shape)));
            size = (2 * size).min(RUN_BATCH.1);
            if batch.is_empty() {
                return last;
            }
            for &(pk, slot, shape) in batch.iter() {
                // A group that may reserve, or keeps its reservation, is attempted in full. Only a
                // reserved group holds one (the invariants say so).
                let g = self.groups.at(slot);
                if pass.keep && g.state == GroupState::Reserved && self.reservations.contains_key(&g.spec.key) {
                    return last;
                }
                let due = reservation_due_at(g, policy).is_none_or(|t| self.now >= t);
                if (may_reserve_more && due) || !self.settle_misfit(slot, shape, qi, Some(&mut ahead), pass) {
                    return last;
                }
                pass.backfill_budget -= 1;
                self.last_stats.examined += 1;
                last = pk;
            }
        }
    }

    /// Whether the steps of an attempt that do not depend on the group itself leave a misfit
    /// blocked: queue `q` has no quota to narrow or block the request and no start window, and
    /// no preemption could make room.
    fn queue_settles_misfits(&self, q: &str, pass: &Pass<'_>) -> bool {
        let cfg = self.queue_cfg(q);
        let preemption_off = cfg.preemption.within_queue == WithinQueue::Never
            && !cfg.preemption.reclaim_within_cohort
            && cfg.preemption.fair_share_within_cohort == FairShareWithinCohort::Never;
        !self.queue_has_quota(q)
            && cfg.readiness.max_starting_members.is_none()
            && (pass.preempt_budget == 0 || preemption_off)
    }

    /// Settles the group in `slot` (of request shape `shape`, in the queue of index `qi`) as
    /// blocked, its reason written, if it is a repeat misfit in a queue that settles them
    /// (`queue_settles_misfits`); false if it must be attempted in full. With `ahead` (the graph's room ahead, worked out on first use),
    /// also a group whose match would fail for lack of room in total during its run
    /// (`short_ahead`): that failure is recorded as the match would record it.
    fn settle_misfit(
        &mut self,
        slot: Slot,
        shape: u64,
        qi: usize,
        ahead: Option<&mut RunAhead>,
        pass: &mut Pass<'_>,
    ) -> bool {
        // Reached by slot, and borrowed, not shared: with thousands waiting, a lookup by key or a
        // count taken on the group is what costs. What the tests below look up is worked out
        // first, into the engine's tables, beside the borrowed group.
        let bound = self.groups.len();
        let g = self.groups.at(slot);
        let r = &g.spec.request;
        // What does not depend on why it is short.
        let settles = g.unsatisfiable.is_none()
            // Giving way is a kind of preemption.
            && (pass.preempt_budget == 0 || self.leaving_for.as_ref() != Some(&g.spec.key))
            // Not an elastic group waiting for all its members.
            && self.effective_min(g) == r.min_members;
        if !settles {
            return false;
        }
        let shape_key = (shape, r.min_members, r.max_members);
        let d = demand::work_out(&mut self.demands, bound, &self.graph.graph.resources, shape, r, Some(slot));
        let compare = self.compare_by_size;
        let declares_run_time = r.duration.is_some();
        let size_of = |d: &mut demand::Demand| compare.then(|| size(|| d.kind(r), r, declares_run_time)).flatten();
        let failed_ahead = pass.failed.ahead(shape_key, || size_of(d));
        if !d.satisfiable {
            if !self.sat_cache.get(&(shape, r.min_members)).is_some_and(Result::is_ok) {
                return false;
            }
            d.satisfiable = true;
        }
        // Why it is short: what failed ahead of it, the room now, then the room during its run.
        let busy = match failed_ahead {
            Some(busy) => busy,
            None => match d.short_now(&self.graph.graph) {
                Some(busy) => busy,
                None => {
                    let calendar = !self.config.reservations.is_empty() || !r.reservations.is_empty();
                    let Some(run) = ahead.filter(|_| !calendar) else { return false };
                    // Matched as the attempt matches it: for its declared run time, else for ever.
                    let end = r.run_time_with(r.min_members).map_or(FOREVER, |t| self.now.saturating_add(t as i64));
                    let (reservations, graph) = (&self.reservations, &self.graph);
                    let first_reserved = *run.first_reserved.get_or_insert_with(|| {
                        let starts = reservations.values().filter_map(|id| graph.allocation(*id).ok()).map(|a| a.start);
                        starts.min().unwrap_or(FOREVER)
                    });
                    if end <= first_reserved {
                        return false;
                    }
                    if !run.worked_out {
                        self.graph.graph.free_ahead_into(self.now, &mut self.room_ahead);
                        run.worked_out = true;
                    }
                    let Some(busy) = d.short_ahead(r, &self.graph.graph, end, &self.room_ahead) else { return false };
                    // The match's failure, as the attempt records it.
                    pass.failed.record(shape_key, size_of(d));
                    busy
                }
            },
        };
        // Mostly the reason it had: then nothing is written, nor put together.
        let tail = backfill_tail(&self.backfill_tails[qi], self.config.queues[qi].policy, self.now, g);
        let unchanged = crate::text::is_concat(&g.reason, &[CAPACITY, busy, &tail]);
        if !unchanged {
            // Written over the old text: reasons that flip between two causes then reuse its
            // storage.
            let reason = &mut Arc::make_mut(self.groups.at_mut(slot)).reason;
            reason.clear();
            reason.extend([CAPACITY, busy, &tail]);
        }
        true
    }
}

impl Engine {
    /// Attempts every group in full, for tests that the cheap way decides the same.
    #[doc(hidden)]
    pub fn attempt_every_group_in_full(&mut self) {
        self.settle_repeat_misfits = false;
    }
}
