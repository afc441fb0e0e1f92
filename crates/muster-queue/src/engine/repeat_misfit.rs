//! A cheap way through an attempt that is sure to fail the way one before it in the cycle did.
//!
//! With thousands of groups waiting, most attempts behind a blocked head are of a request that
//! already failed to match in this cycle (the same shape and member bounds). Such an attempt would
//! copy the request, ask the quota and look the group up several times only to reach the same
//! answer; when nothing on its way could decide otherwise, it is settled here with the outcome and
//! reason the full attempt gives.

use super::Engine;
use super::attempt::Attempt;
use super::cycle::Pass;
use crate::config::{FairShareWithinCohort, WithinQueue};
use crate::group::GroupKey;

/// What a group's reason says when a request like its own failed ahead of it in the cycle.
pub(super) const SAME_SHAPE_AHEAD: &str = "a group of the same shape ahead of it did not fit";

impl Engine {
    /// Blocked, with its reason set, when the full attempt is sure to end so: the request (shape,
    /// min, max) failed to match earlier in this cycle (`Pass::failed_shapes`; only a preemption
    /// frees room within a cycle, and it clears them), and none of the steps before or after the
    /// match could decide otherwise. None: attempt it in full.
    pub(super) fn repeat_misfit(&mut self, key: &GroupKey, may_reserve: bool, pass: &mut Pass<'_>) -> Option<Attempt> {
        if !self.settle_repeat_misfits || may_reserve || pass.failed_shapes.is_empty() {
            return None;
        }
        let g = &self.groups[key];
        let r = &g.spec.request;
        let shape = self.shapes[key];
        // The one test that usually fails first, before any other lookup.
        if !pass.failed_shapes.contains(&(shape, r.min_members, r.max_members)) {
            return None;
        }
        let q = &g.spec.queue;
        let cfg = self.queue_cfg(q);
        let preemption_off = cfg.preemption.within_queue == WithinQueue::Never
            && !cfg.preemption.reclaim_within_cohort
            && cfg.preemption.fair_share_within_cohort == FairShareWithinCohort::Never
            && self.leaving_for.as_ref() != Some(key);
        let settled = g.unsatisfiable.is_none()
            // No quota narrows the request or blocks it, no start window holds it.
            && self.compiled.queues[q].quotas.is_empty()
            && cfg.readiness.max_starting_members.is_none()
            && (pass.preempt_budget == 0 || preemption_off)
            // Not an elastic group waiting for all its members.
            && self.effective_min(g) == r.min_members
            && self.sat_cache.get(&(shape, r.min_members)).is_some_and(Result::is_ok);
        if !settled {
            return None;
        }
        let reason = format!("waiting for capacity: {SAME_SHAPE_AHEAD}{}", self.backfill_only_tail(key));
        self.set_reason(key, reason);
        Some(Attempt::Blocked)
    }
}

impl Engine {
    /// Attempts every group in full, for tests that the cheap way decides the same.
    #[doc(hidden)]
    pub fn attempt_every_group_in_full(&mut self) {
        self.settle_repeat_misfits = false;
    }
}
