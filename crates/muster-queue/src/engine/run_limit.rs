//! Run times as limits. Backfill starts a group ahead of a reservation because its declared run
//! time ends before the reservation starts; a group that outran it would push the reservation
//! back for as long as it ran. Under `runTimeLimit.mode: Enforce` (the default) a group that
//! declares a run time is ended (Failed, `Reason::RunTimeExceeded`) once it has held its nodes
//! that long plus the queue's grace, so a reservation starts at most the grace late. The limit is
//! the end of the group's allocation (its declared run time from admission, stretched for fewer
//! members), which the store keeps: a restarted engine ends the group on time too.
//!
//! A run time learned for a group that declares none is an estimate, not a limit: such a group is
//! matched as if it ran forever ([`Engine::match_planned`]), so that it starts, or is
//! reserved, only where it delays no reservation made ahead of it however long it runs.

use std::borrow::Cow;

use muster_graph::allocations::FOREVER;
use muster_graph::{AllocId, GroupRequest, MatchOutcome};

use super::Engine;
use crate::config::RunTimeLimitMode;
use crate::group::{Group, GroupKey, GroupState, Reason, Transition};

impl Engine {
    /// When a placed group is ended for outrunning its declared run time, grace included; None
    /// where its queue's limit is advisory, or it declares no run time.
    pub(super) fn run_time_limit(&self, g: &Group) -> Option<i64> {
        let limit = self.queue_cfg(&g.spec.queue).run_time_limit;
        if limit.mode != RunTimeLimitMode::Enforce || g.spec.request.duration.is_none() || !g.state.holds_allocation() {
            return None;
        }
        let end = g.allocation.as_ref()?.end;
        (end != FOREVER).then(|| end.saturating_add(limit.grace_s))
    }

    /// Ends a group whose limit has passed: its allocation is released, and it fails.
    pub(super) fn end_over_limit(&mut self, key: &GroupKey, out: &mut Vec<Transition>) {
        let g = &self.groups[key];
        let grace_s = self.queue_cfg(&g.spec.queue).run_time_limit.grace_s;
        let Some((start, end)) = g.allocation.as_ref().map(|a| (a.start, a.end)) else { return };
        let run_time_s = u64::try_from(end.saturating_sub(start)).unwrap_or(0);
        let grace_s = u64::try_from(grace_s).unwrap_or(0);
        let rec = self.release(key);
        self.group_mut(key).run_time_exceeded = Some(run_time_s.saturating_add(grace_s));
        self.step(key, GroupState::Failed, Reason::RunTimeExceeded { run_time_s, grace_s }, rec, out);
    }

    /// The request a group is matched with, now or for a reservation: `planned` itself, or, for
    /// a group whose run time is only learned, `planned` running forever. An estimate is no
    /// promise: a group that outran it would delay the reservations it was started ahead of.
    /// Copied only where the run time is taken out: a match per attempt is the common case.
    pub(super) fn request_to_match<'p>(&self, g: &Group, planned: &'p GroupRequest) -> Cow<'p, GroupRequest> {
        if g.spec.request.duration.is_some() || planned.duration.is_none() {
            return Cow::Borrowed(planned);
        }
        let mut req = planned.clone();
        req.duration = None;
        Cow::Owned(req)
    }

    /// Places `key`'s group now as `planned` asks (with `reserve`, or reserves its earliest
    /// start), matched by [`Engine::request_to_match`]; a group with a learned run time placed
    /// now is then given its expected end, so that the groups behind it are planned around it.
    pub(super) fn match_planned(&mut self, key: &GroupKey, planned: &GroupRequest, reserve: bool) -> MatchOutcome {
        let req = self.request_to_match(&self.groups[key], planned);
        let outcome =
            if reserve { self.graph.reserve(&req, self.now) } else { self.graph.allocate_satisfiable(&req, self.now) };
        match outcome {
            MatchOutcome::Allocated(id) if req.duration != planned.duration => {
                MatchOutcome::Allocated(self.expect_end(id, planned))
            }
            other => other,
        }
    }

    /// Reserves `key`'s group's earliest start after `after` as `planned` asks (matched by
    /// [`Engine::request_to_match`]), for a group that may not start before then.
    pub(super) fn reserve_after(&mut self, key: &GroupKey, planned: &GroupRequest, after: i64) -> MatchOutcome {
        let req = self.request_to_match(&self.groups[key], planned);
        self.graph.reserve(&req, after)
    }

    /// Gives allocation `id` (matched to run forever) the end `planned`'s run time says.
    fn expect_end(&mut self, id: AllocId, planned: &GroupRequest) -> AllocId {
        let Ok(a) = self.graph.allocation(id) else { return id };
        let end = muster_graph::ResourceGraph::end_of(a.start, planned, a.members.len() as u32);
        let (request, window) = (a.request.clone(), (a.start, end));
        let members = self.imported_members(id);
        let _ = self.graph.cancel(id);
        self.graph.import(id, &request, &members, window).expect("the same placement fits for less time");
        id
    }
}
