//! A cheap way through an attempt that is sure to fail: the same request, or one it contains,
//! failed to match ahead of it in this cycle (`failed_requests.rs`), or what its minimum asks is
//! more than the cluster has free.
//!
//! With thousands of groups waiting, most attempts behind a blocked head end one of these two
//! ways. Such an attempt would copy the request, ask the quota and look the group up several times
//! only to reach the answer these tests give; when nothing on its way could decide otherwise, it
//! is settled here with the outcome and reason the full attempt gives.

use std::sync::Arc;

use super::Engine;
use super::attempt::Attempt;
use super::cycle::Pass;
use super::group_table::PendingGroup;
use crate::config::{FairShareWithinCohort, WithinQueue};

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
        // By slot: with thousands waiting, looking a group up by its key is what costs.
        let g = Arc::clone(self.groups.at(head.slot));
        let key = &*head.key;
        debug_assert_eq!(g.spec.key, *key, "the pending index holds the group's slot");
        let shape = self.shapes[key];
        let r = &g.spec.request;
        // The tests that usually fail first, before any other lookup.
        let short: Arc<str>;
        let size = || self.size_of(shape, r, r.duration.is_some());
        let busy: &str = if let Some(ahead) = pass.failed.ahead((shape, r.min_members, r.max_members), size) {
            ahead
        } else {
            short = self.may_fit_now(shape, r).err()?;
            &short
        };
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
            && self.effective_min(&g) == r.min_members
            && self.sat_cache.get(&(shape, r.min_members)).is_some_and(Result::is_ok);
        if !settled {
            return None;
        }
        let mut reason = std::mem::take(&mut self.reason_scratch);
        reason.clear();
        reason.push_str("waiting for capacity: ");
        reason.push_str(busy);
        self.push_backfill_only_tail(&g, &mut reason);
        // Mostly the reason it had: then nothing is written.
        // The copy must be gone before the reason is set, or setting it would copy the group.
        let changed = g.reason != reason;
        drop(g);
        if changed {
            let old = &mut Arc::make_mut(self.groups.at_mut(head.slot)).reason;
            old.clone_from(&reason);
        }
        self.reason_scratch = reason;
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
