//! One pending group's attempt within a cycle, as a pipeline of steps. Each step either hands on
//! to the next (`Continue`) or ends the attempt with its outcome (`Break`):
//!
//! 0. `repeat_misfit`: a request that already failed to match in this cycle, with nothing on its
//!    way that could decide otherwise, is blocked at once with the reason the steps would give.
//! 1. `check_satisfiable`: a group that never fits, even on the empty cluster, is skipped (decided
//!    once per graph structure); else how many members it asks for now (elastic groups).
//! 2. `check_start_window`: its queue's start window is full: the group waits for members to be
//!    ready.
//! 3. `apply_quota`: over quota: preempt, or blocked; else the request narrowed to what the quota
//!    and the start window allow.
//! 4. `match_now`: placed now (admitted), or why not; an elastic group that would finish sooner
//!    with all its members a little later waits for them. Skipped, as is step 5, while the quota
//!    that reservations ahead of it hold would not let it run to its planned end
//!    (`quota_holds.rs`).
//! 5. `preempt`: admitted by evicting whole groups, where the queue allows it.
//! 6. `reserve_or_wait`: the earliest start reserved (where the quota holds the group then), or
//!    blocked with its reason.

use std::borrow::Cow;
use std::ops::ControlFlow::{self, Break, Continue};

use muster_graph::{AllocId, GroupRequest, MatchOutcome};

use super::Engine;
use super::cycle::{Pass, reservation_due_at};
use super::group_table::{PendingGroup, Slot};
use super::preemption::Preemption;
use super::quota_holds::Shortfall;
use crate::clock;
use crate::config::QueuePolicy;
use crate::group::{Group, GroupKey, GroupState, Reason, Transition};
use crate::quota;

/// What a waiting group's reason adds when running groups give members back for it.
const GIVEN_WAY: &str = "; shrinkable groups are giving back members for it, and it starts once their pods are gone";
/// The reason of a group for which preemption asked members back.
const ASKED_BACK: &str = ": members that shrinkable groups hold above their minimum are asked back for it (preemption), and it starts \
     once their pods are gone";

/// How a waiting group's reason starts when what it asks is not free now.
pub(super) const CAPACITY: &str = "waiting for capacity: ";

/// How a cycle left a group.
pub(super) enum Attempt {
    Admitted,
    Reserved,
    /// Did not fit (capacity or quota); blocks a strict FIFO queue.
    Blocked,
    /// Its queue's start window is full: the groups behind it wait too, so that smaller ones
    /// do not keep a large one out of the window.
    WindowFull,
    /// Never fits, or not tried: does not block the queue.
    Skipped,
}

/// What a group that does not start now waits for, and in what way it is short of it.
struct Wait {
    short: Short,
    busy: String,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Short {
    Capacity,
    /// Its queue's quota now (`busy` is the quota's own reason).
    Quota,
    /// Quota that reservations ahead of it hold over its run.
    HeldQuota,
}

impl Wait {
    fn for_quota(&self) -> bool {
        self.short != Short::Capacity
    }

    /// Its reason while it holds no reservation.
    fn waiting(&self) -> String {
        match self.short {
            Short::Capacity => format!("{CAPACITY}{}", self.busy),
            Short::Quota => self.busy.clone(),
            Short::HeldQuota => format!("waiting for quota: {}", self.busy),
        }
    }

    /// Its reason with a reservation from `at`.
    fn reserved(&self, at: i64) -> String {
        let what = if self.for_quota() { "quota" } else { "capacity" };
        let busy = self.busy.strip_prefix("quota: ").unwrap_or(&self.busy);
        format!("waiting for {what} ({busy}); reserved to start at {}", clock::show(at))
    }
}

/// A step's result: what the next step needs, or the attempt's outcome.
type Step<T> = ControlFlow<Attempt, T>;

/// The group an attempt is for, as its steps read it.
struct Candidate<'k> {
    key: &'k GroupKey,
    /// Where the group is kept: each step reaches it without a lookup by key.
    slot: Slot,
    queue: String,
    shape: u64,
    /// The least members of its own request.
    own_min: u32,
    /// The members it asks for now: its min, or all of max while an elastic group waits for max.
    min: u32,
    /// Its queue's reservation depth is not used up in this cycle.
    may_reserve: bool,
}

impl Candidate<'_> {
    fn waiting_for_max(&self) -> bool {
        self.min > self.own_min
    }
}

impl Engine {
    /// Tries one pending group: satisfiability, start window, quota, placement now, preemption,
    /// reservation.
    pub(super) fn attempt(&mut self, head: &PendingGroup, may_reserve: bool, pass: &mut Pass<'_>) -> Attempt {
        match self.attempt_steps(head, may_reserve, pass) {
            Break(outcome) | Continue(outcome) => outcome,
        }
    }

    fn attempt_steps(&mut self, head: &PendingGroup, may_reserve: bool, pass: &mut Pass<'_>) -> Step<Attempt> {
        if let Some(outcome) = self.repeat_misfit(head, may_reserve, pass) {
            return Break(outcome);
        }
        let key = &*head.key;
        let (c, planned) = self.check_satisfiable(head, may_reserve, pass.out)?;
        self.check_start_window(&c)?;
        let req = self.apply_quota(&c, planned, pass)?;
        let wait = match self.quota_held_against(key, &c.queue, &req, self.now, &mut pass.quota) {
            Some(short) => Wait { short: Short::HeldQuota, busy: short.to_string() },
            None => {
                let busy = self.match_now(&c, &req, pass)?;
                self.preempt(&c, &req, pass)?;
                Wait { short: Short::Capacity, busy }
            }
        };
        Continue(self.reserve_or_wait(&c, &req, &wait, pass))
    }

    /// Step 1: skips a group that can never fit on the cluster as it is built; else the group
    /// and the request it is planned with (its own, with the run time learned for it).
    fn check_satisfiable<'k>(
        &mut self,
        head: &'k PendingGroup,
        may_reserve: bool,
        out: &mut Vec<Transition>,
    ) -> Step<(Candidate<'k>, GroupRequest)> {
        let (key, slot, shape) = (&*head.key, head.slot, head.shape);
        let g = self.groups.at(slot);
        // Unsatisfiable: decided once per graph structure version, never retried in between.
        if g.unsatisfiable.as_ref().is_some_and(|(_, v)| *v == self.structure_version) {
            return Break(Attempt::Skipped);
        }
        let request = self.planned_request(g);
        let queue = g.spec.queue.clone();
        let had_unsat = g.unsatisfiable.is_some();
        match self.satisfiable(shape, &request).and_then(|()| self.quota_reachable(&queue, &request)) {
            Err(message) => {
                self.mark_unsatisfiable(key, message, out);
                return Break(Attempt::Skipped);
            }
            Ok(()) if had_unsat => self.group_mut(key).unsatisfiable = None,
            Ok(()) => {}
        }
        let min = self.members_now(slot, shape, &request);
        let own_min = request.min_members;
        Continue((Candidate { key, slot, queue, shape, own_min, min, may_reserve }, request))
    }

    /// The members the group asks for now: all of max while an elastic group waits for max, which
    /// makes sense only if max could ever fit.
    fn members_now(&mut self, slot: Slot, shape: u64, request: &GroupRequest) -> u32 {
        let eff_min = self.effective_min(self.groups.at(slot));
        if eff_min > request.min_members {
            let mut full = request.clone();
            full.set_bounds(full.max_members, full.max_members);
            if self.satisfiable(shape ^ 1, &full).is_err() {
                return request.min_members;
            }
        }
        eff_min
    }

    /// Step 2: the queue's start window must have room for the group's members.
    fn check_start_window(&mut self, c: &Candidate<'_>) -> Step<()> {
        if let Some((limit, starting)) = self.start_window(&c.queue)
            && starting > 0
            && starting.saturating_add(c.min) > limit
        {
            let q = &c.queue;
            self.set_reason(
                c.key,
                format!(
                    "start window: {starting} members of queue {q} are starting \
                     (readiness.maxStartingMembers {limit}); waiting for them to be ready"
                ),
            );
            return Break(Attempt::WindowFull);
        }
        Continue(())
    }

    /// A queue's start window, if it has one: (readiness.maxStartingMembers, members starting).
    fn start_window(&self, q: &str) -> Option<(u32, u32)> {
        let limit = self.queue_cfg(q).readiness.max_starting_members?;
        Some((limit, self.starting.get(q).copied().unwrap_or(0)))
    }

    /// Step 3: the quota must allow the members the group asks for now (else preemption may make
    /// room); the request (`planned`) is then capped at what the quota and the start window allow.
    fn apply_quota(&mut self, c: &Candidate<'_>, planned: GroupRequest, pass: &mut Pass<'_>) -> Step<GroupRequest> {
        let (qmax, qreason) = self.quota_room(&c.queue, &planned);
        if qmax < c.min {
            let mut req = planned;
            req.set_bounds(c.min, req.max_members);
            self.preempt(c, &req, pass)?;
            let busy = qreason.unwrap_or_else(|| "quota".into());
            // A group reserved before keeps its promise while the quota holds it at its start:
            // groups behind it may have used the quota now only if they give it back by then.
            if c.may_reserve && self.groups.at(c.slot).state == GroupState::Reserved {
                let wait = Wait { short: Short::Quota, busy };
                return Break(self.reserve(c.key, &req.narrowed_to(c.min), "", &wait, pass));
            }
            self.set_reason(c.key, busy);
            return Break(Attempt::Blocked);
        }
        if let Some(lender) = self.reclaim_pending(c, &planned) {
            self.set_reason(
                c.key,
                format!(
                    "its room was reclaimed by queue {lender}, which still has groups waiting: it borrows no room \
                     until they start, and runs within its own nominal quota meanwhile"
                ),
            );
            return Break(Attempt::Blocked);
        }
        let mut req = planned;
        req.set_bounds(c.min, req.max_members);
        let mut max = qmax.max(c.min).min(req.max_members);
        if let Some((limit, starting)) = self.start_window(&c.queue) {
            max = max.min(limit.saturating_sub(starting).max(c.min));
        }
        req.narrow_to(max);
        Continue(req)
    }

    /// The queue that reclaimed the group's room, while that queue has groups waiting, when the
    /// group's minimum would borrow: that queue wants its room back as soon as it can place them,
    /// so what the group borrowed would be reclaimed again, its run so far lost each time. The
    /// hold ends once the queue has no group waiting.
    fn reclaim_pending(&mut self, c: &Candidate<'_>, planned: &GroupRequest) -> Option<String> {
        let lender = self.groups.at(c.slot).reclaimed_for.clone()?;
        if self.pending.get(&lender).is_none_or(|p| p.is_empty()) {
            self.group_mut(c.key).reclaimed_for = None;
            return None;
        }
        let asks = quota::Asks::of(planned).with(c.min);
        quota::would_borrow(&self.compiled, &self.usage, &c.queue, &asks).then_some(lender)
    }

    /// The most members (up to the request's max) the quota lets `queue` add now, and, when that
    /// is fewer than max, why (amounts in the graph's units).
    fn quota_room(&self, queue: &str, request: &GroupRequest) -> (u32, Option<String>) {
        if !self.queue_has_quota(queue) {
            return (request.max_members, None);
        }
        let asks = quota::Asks::of(request);
        let fmt = |r: &str, a: u64| self.show_amount(r, a);
        quota::max_members(&self.compiled, &self.usage, queue, &asks, request.max_members, &fmt)
    }

    /// Whether the group's minimum could ever be in `queue`, the whole cohort idle: the queue's
    /// quota is fixed while the engine runs (a changed Queue makes a new engine).
    fn quota_reachable(&self, queue: &str, request: &GroupRequest) -> Result<(), String> {
        if !self.queue_has_quota(queue) {
            return Ok(());
        }
        let asks = quota::Asks::of(request);
        let fmt = |r: &str, a: u64| self.show_amount(r, a);
        quota::never_fits(&self.compiled, queue, &asks, request.min_members, &fmt).map_or(Ok(()), Err)
    }

    /// `a` base units of resource `r`, as a user writes them (`4`, `500m`, `16Gi`).
    pub fn show_amount(&self, r: &str, a: u64) -> String {
        let resources = &self.graph.graph.resources;
        match resources.get(r) {
            Some(id) => resources.format(id, a),
            None => match muster_graph::resources::unit_of(r) {
                Ok(u) => muster_graph::quantity::format_amount(a, u),
                Err(_) => a.to_string(),
            },
        }
    }

    /// Step 4: places the group now if it fits; else says why not. A request that did not fit is
    /// remembered so that the same one behind it, or one containing it, is not matched again in
    /// this cycle.
    fn match_now(&mut self, c: &Candidate<'_>, req: &GroupRequest, pass: &mut Pass<'_>) -> Step<String> {
        let shape_key = (c.shape, req.min_members, req.max_members);
        let declares_run_time = self.groups.at(c.slot).spec.request.duration.is_some();
        if let Some(ahead) = pass.failed.ahead(shape_key, || self.size_of(c.shape, req, declares_run_time)) {
            return Continue(ahead.to_string());
        }
        if let Err(busy) = self.may_fit_now(c.shape, req) {
            return Continue(busy.to_string());
        }
        self.last_stats.match_calls += 1;
        let busy = match self.match_planned(c.key, req, false) {
            MatchOutcome::Allocated(id) => {
                let id = self.sooner_with_all_members(c, req, id, pass)?;
                self.admit(c.key, id, Reason::Admitted { backfill: pass.any_reservation }, pass.out);
                return Break(Attempt::Admitted);
            }
            MatchOutcome::Unsatisfiable(message) => {
                self.mark_unsatisfiable(c.key, message, pass.out);
                return Break(Attempt::Skipped);
            }
            MatchOutcome::Busy(r) => {
                let matched = self.request_to_match(self.groups.at(c.slot), req);
                self.held_by_calendar(&matched).unwrap_or(r)
            }
            MatchOutcome::Reserved { id, .. } => {
                let _ = self.graph.cancel(id);
                "busy".into()
            }
        };
        pass.failed.record(shape_key, self.size_of(c.shape, req, declares_run_time));
        Continue(busy)
    }

    /// Within step 4: an elastic group placed now with fewer than all its members runs longer
    /// (the same work on fewer members, `GroupRequest::run_time_with`). When a reservation for all
    /// of them would finish sooner, the group waits for it instead: the placement is undone and
    /// the reservation kept. Else the same placement is made again (the graph is as it was).
    fn sooner_with_all_members(
        &mut self,
        c: &Candidate<'_>,
        req: &GroupRequest,
        id: AllocId,
        pass: &mut Pass<'_>,
    ) -> Step<AllocId> {
        let placed = self.graph.allocation(id).map_or(req.max_members, |a| a.members.len() as u32);
        // A learned run time is no promise to reserve on: such a group starts with what fits.
        let promised = self.request_to_match(self.groups.at(c.slot), req).duration;
        let (Some(run_now), Some(run_all)) = (req.run_time_with(placed), promised) else {
            return Continue(id);
        };
        if placed >= req.max_members || !c.may_reserve {
            return Continue(id);
        }
        let _ = self.graph.cancel(id);
        let mut all = req.clone();
        all.set_bounds(req.max_members, req.max_members);
        self.last_stats.match_calls += 2;
        let finish_now = self.now.saturating_add(run_now as i64);
        match self.graph.reserve(&all, self.now) {
            MatchOutcome::Reserved { id: rid, at } if at.saturating_add(run_all as i64) < finish_now => {
                let reason = format!(
                    "elastic: all {} members from {} finish at {}, sooner than {placed} now (at {}); \
                     reserved to start at {}",
                    req.max_members,
                    clock::show(at),
                    clock::show(at.saturating_add(run_all as i64)),
                    clock::show(finish_now),
                    clock::show(at)
                );
                self.keep_reservation(c.key, rid, at, reason, pass);
                return Break(Attempt::Reserved);
            }
            MatchOutcome::Reserved { id: rid, .. } | MatchOutcome::Allocated(rid) => {
                let _ = self.graph.cancel(rid);
            }
            MatchOutcome::Busy(_) | MatchOutcome::Unsatisfiable(_) => {}
        }
        match self.match_planned(c.key, req, false) {
            MatchOutcome::Allocated(id) => Continue(id),
            // Cannot happen (the graph is as it was when this request fitted); waiting is safe.
            _ => Break(Attempt::Blocked),
        }
    }

    /// Step 5 (and within step 3): admits the group by preemption while the cycle's budget lasts.
    /// Room freed this way may fit requests that failed before, so they are forgotten.
    fn preempt(&mut self, c: &Candidate<'_>, req: &GroupRequest, pass: &mut Pass<'_>) -> Step<()> {
        if pass.preempt_budget == 0 {
            return Continue(());
        }
        match self.try_preempt(c.key, req, pass) {
            Preemption::Admitted => {
                pass.failed.clear();
                Break(Attempt::Admitted)
            }
            Preemption::AskedBack => {
                self.set_reason(c.key, format!("waiting for capacity{ASKED_BACK}"));
                Break(Attempt::Blocked)
            }
            Preemption::None => Continue(()),
        }
    }

    /// Step 6: reserves the group's earliest start if its queue's depth allows; else it waits,
    /// and its reason says for what.
    fn reserve_or_wait(&mut self, c: &Candidate<'_>, req: &GroupRequest, wait: &Wait, pass: &mut Pass<'_>) -> Attempt {
        let prefix = if c.waiting_for_max() {
            let until = self.groups.at(c.slot).spec.submitted_at + self.queue_cfg(&c.queue).elastic_max_wait_s;
            format!("elastic: waiting until {} for all {} members; ", clock::show(until), req.min_members)
        } else {
            String::new()
        };
        // Short of quota: only a group reserved before is reserved again, from when the quota
        // frees; searching that start for every group short of quota costs too much per cycle.
        let reserved_before = self.groups.at(c.slot).state == GroupState::Reserved;
        if c.may_reserve && (!wait.for_quota() || reserved_before) {
            return self.reserve(c.key, req, &prefix, wait, pass);
        }
        let mut reason = format!("{prefix}{}", wait.waiting());
        if !c.may_reserve {
            reason.push_str(&self.backfill_only_tail(self.groups.at(c.slot)));
        }
        self.set_reason(c.key, reason);
        Attempt::Blocked
    }

    /// What a waiting group's reason ends with when it may not hold a reservation: why it can
    /// only backfill. Written once per queue, except while a group is not yet due a reservation.
    pub(super) fn backfill_only_tail(&self, g: &Group) -> Cow<'_, str> {
        let qi = self.compiled.queues[&g.spec.queue].index;
        backfill_tail(&self.backfill_tails[qi], self.config.queues[qi].policy, self.now, g)
    }

    /// Reserves the earliest time the whole group fits (or admits it, if that is now), where its
    /// queue's quota holds it from then to its planned end (`quota_holds.rs`); else it waits.
    fn reserve(
        &mut self,
        key: &GroupKey,
        req: &GroupRequest,
        prefix: &str,
        wait: &Wait,
        pass: &mut Pass<'_>,
    ) -> Attempt {
        self.last_stats.match_calls += 1;
        // Only the first group in line may have running groups shrunk for it, for capacity.
        let first = !pass.any_reservation && !wait.for_quota();
        let outcome = match wait.for_quota() {
            // Short of quota now: reserved from when what runs gives enough back, if it ever does.
            true => {
                let queue = self.groups[key].spec.queue.clone();
                match self.quota_free_from(key, &queue, req, &mut pass.quota) {
                    Some(t) => self.reserve_after(key, req, t - 1),
                    None => MatchOutcome::Busy(String::new()),
                }
            }
            false => self.match_planned(key, req, true),
        };
        // A start at which the quota is held for reservations ahead is no start: it waits for quota.
        let start = match outcome {
            MatchOutcome::Reserved { id, at } => Some((id, at)),
            MatchOutcome::Allocated(id) => Some((id, self.now)),
            _ => None,
        };
        if let Some((id, at)) = start {
            let queue = &self.groups[key].spec.queue;
            let short = match self.quota_held_against(key, queue, req, at, &mut pass.quota) {
                // Placed now while the quota is short now: it may not start.
                None if wait.for_quota() && at <= self.now => Some(Shortfall::Used),
                short => short,
            };
            if let Some(short) = short {
                let _ = self.graph.cancel(id);
                pass.start_refused_for_quota = true;
                let reason = match short {
                    Shortfall::Used if wait.for_quota() => format!("{prefix}{}", wait.waiting()),
                    short => format!("{prefix}waiting for quota: {short}"),
                };
                self.set_reason(key, reason);
                return Attempt::Blocked;
            }
        }
        match outcome {
            MatchOutcome::Reserved { id, at } => {
                let mut reason = format!("{prefix}{}", wait.reserved(at));
                if first && at > self.now && self.give_way(key, req, Some((id, at)), pass.out) {
                    reason.push_str(GIVEN_WAY);
                }
                self.keep_reservation(key, id, at, reason, pass);
                Attempt::Reserved
            }
            MatchOutcome::Allocated(id) => {
                self.admit(key, id, Reason::Admitted { backfill: pass.any_reservation }, pass.out);
                Attempt::Admitted
            }
            MatchOutcome::Busy(_) if wait.for_quota() => {
                self.set_reason(key, format!("{prefix}{}", wait.waiting()));
                Attempt::Blocked
            }
            MatchOutcome::Busy(r) => {
                let given = if first && self.give_way(key, req, None, pass.out) { GIVEN_WAY } else { "" };
                self.set_reason(key, format!("{prefix}waiting for capacity: {r}{given}"));
                Attempt::Blocked
            }
            MatchOutcome::Unsatisfiable(m) => {
                self.set_reason(key, format!("{prefix}unsatisfiable now: {m}"));
                Attempt::Blocked
            }
        }
    }

    /// Records reservation `id` (starting at `at`) as the group's, with the reason it waits.
    fn keep_reservation(&mut self, key: &GroupKey, id: AllocId, at: i64, reason: String, pass: &mut Pass<'_>) {
        self.reservations.insert(key.clone(), id);
        pass.reserved.insert(key.clone(), at);
        pass.quota.hold(self.quota_hold(key, at));
        let g = self.group_mut(key);
        let prev = g.state;
        g.reserved_at = Some(at);
        g.reason = reason;
        if prev == GroupState::Queued {
            self.step(key, GroupState::Reserved, Reason::Reserved { at }, None, pass.out);
        }
    }

    /// Satisfiability of a request on the empty cluster, cached per shape and graph structure.
    fn satisfiable(&mut self, shape: u64, req: &GroupRequest) -> Result<(), String> {
        let k = (shape, req.min_members);
        if let Some(r) = self.sat_cache.get(&k) {
            return r.clone();
        }
        self.last_stats.match_calls += 1;
        let r = self.graph.satisfiability(req);
        self.sat_cache.insert(k, r.clone());
        r
    }

    fn mark_unsatisfiable(&mut self, key: &GroupKey, message: String, out: &mut Vec<Transition>) {
        let v = self.structure_version;
        let g = self.group_mut(key);
        let known = g.unsatisfiable.as_ref().is_some_and(|(m, _)| *m == message);
        g.unsatisfiable = Some((message.clone(), v));
        g.reason = format!("unsatisfiable: {message}");
        if !known {
            let state = g.state;
            self.step(key, state, Reason::Unsatisfiable { message }, None, out);
        }
    }
}

/// [`Engine::backfill_only_tail`] of group `g` at `now`, in a queue under `policy` whose tail
/// is `queue_tail`: over the parts of the engine it reads, so that a caller may hold others.
pub(super) fn backfill_tail<'t>(queue_tail: &'t str, policy: QueuePolicy, now: i64, g: &Group) -> Cow<'t, str> {
    let not_due = reservation_due_at(g, policy).filter(|&t| now < t);
    match (not_due, policy) {
        (Some(t), QueuePolicy::Selective { slowdown, .. }) => Cow::Owned(format!(
            "; it may only backfill until its slowdown reaches {slowdown} at {}, when it gets a reservation",
            clock::show(t)
        )),
        _ => Cow::Borrowed(queue_tail),
    }
}
