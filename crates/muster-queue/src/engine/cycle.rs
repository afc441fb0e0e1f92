//! The scheduling cycle. `schedule` expires timers, then `cycle` merges every queue's pending
//! groups in global order ([`HeadKey`]: priority, then fair share, then order time) and hands each
//! head to `attempt.rs`; what the outcome means for its queue (a strict FIFO queue stops, the
//! groups behind a blocked head are backfill with a budget) is decided here. Reservations are made
//! afresh every cycle: those that moved or were not made again are reported at the end, and
//! running elastic groups grow last.

use std::cmp::{Ordering, Reverse};
use std::collections::{BTreeMap, BinaryHeap};
use std::ops::Bound;
use std::sync::Arc;

use super::attempt::Attempt;
use super::failed_requests::FailedRequests;
use super::group_table::PendingGroup;
use super::quota_holds::QuotaTimeline;
use super::{Engine, PendingKey};
use crate::config::QueuePolicy;
use crate::group::{Group, GroupKey, GroupState, Reason, Transition};

/// Counters of the last cycle, for benchmarks and metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CycleStats {
    pub ran: bool,
    pub examined: usize,
    pub admitted: usize,
    pub reserved: usize,
    pub match_calls: usize,
    pub preemptions: usize,
}

/// A queue's fair share as an ordering key (`f64::total_cmp`).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Share(f64);

impl Eq for Share {}

impl PartialOrd for Share {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

impl Ord for Share {
    fn cmp(&self, o: &Self) -> Ordering {
        self.0.total_cmp(&o.0)
    }
}

/// Where a queue's next group stands in the global order, compared field by field: a group its
/// queue's nominal quota holds before one that would borrow (as Kueue orders its heads: else a
/// borrower could take the room just before the group that owns it, which would then have to
/// reclaim it, evicting what was just admitted), then higher priority, then the queue with the
/// lower fair share, then the earlier order time, then submission order. The queue's index (in
/// the configuration) says whose head it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct HeadKey {
    borrows: bool,
    neg_priority: i64,
    share: Share,
    order_time: i64,
    seq: u64,
    queue: usize,
}

impl HeadKey {
    pub(super) fn new(pk: PendingKey, borrows: bool, share: f64, queue: usize) -> Self {
        Self {
            borrows,
            neg_priority: pk.neg_priority,
            share: Share(share),
            order_time: pk.order_time,
            seq: pk.seq,
            queue,
        }
    }

    pub(super) fn pending_key(&self) -> PendingKey {
        PendingKey { neg_priority: self.neg_priority, order_time: self.order_time, seq: self.seq }
    }
}

/// The merge of the queues: at most one head per queue, taken in [`HeadKey`] order. A queue's next
/// group becomes its head only once the cycle is done with the one before, at the queue's fair
/// share by then (what the cycle admitted raises it).
struct Heads {
    queues: Vec<String>,
    /// A heap, not an ordered set: a set of one head would allocate a node at every insert.
    next: BinaryHeap<Reverse<HeadKey>>,
}

impl Heads {
    /// Every open queue's first pending group (a closed queue admits nothing).
    fn new(e: &Engine) -> Self {
        let queues: Vec<String> = e.config.queues.iter().map(|q| q.name.clone()).collect();
        let mut heads = Self { queues, next: BinaryHeap::new() };
        for qi in (0..heads.queues.len()).filter(|&qi| !e.config.queues[qi].closed) {
            heads.push_after(e, qi, None);
        }
        heads
    }

    /// Makes queue `qi`'s group after `after` (its first, for `None`) its head, if there is one.
    fn push_after(&mut self, e: &Engine, qi: usize, after: Option<PendingKey>) {
        let name = &self.queues[qi];
        let p = &e.pending[name];
        let next = match after {
            None => p.keys().next().copied(),
            Some(l) => p.range((Bound::Excluded(l), Bound::Unbounded)).next().map(|(k, _)| *k),
        };
        if let Some(pk) = next {
            // Borrowing and shares order queues among themselves: one queue needs neither.
            let (borrows, share) = match self.queues.len() > 1 {
                true => (e.would_borrow(&p[&pk]), e.fair_share(name)),
                false => (false, 0.0),
            };
            self.next.push(Reverse(HeadKey::new(pk, borrows, share, qi)));
        }
    }

    fn pop(&mut self) -> Option<HeadKey> {
        self.next.pop().map(|Reverse(h)| h)
    }
}

impl Engine {
    /// Whether admitting pending group `p` (its minimum) would take its queue past its nominal
    /// quota of something it asks.
    fn would_borrow(&self, p: &PendingGroup) -> bool {
        self.group_would_borrow(self.groups.at(p.slot))
    }

    fn group_would_borrow(&self, g: &Group) -> bool {
        if !self.queue_has_quota(&g.spec.queue) {
            return false;
        }
        let request = &g.spec.request;
        let asks = crate::quota::Asks::of(request).with(request.min_members);
        crate::quota::would_borrow(&self.compiled, &self.usage, &g.spec.queue, &asks)
    }
}

/// What the cycle knows about one queue so far.
#[derive(Debug, Clone, Default)]
struct Cursor {
    /// A group of the queue did not start: the groups behind it are backfill.
    blocked: bool,
    reservations: u32,
    /// The first group that blocked the queue; the groups behind it name it in their reasons.
    first_blocked: Option<GroupKey>,
}

impl Cursor {
    fn block(&mut self, key: &GroupKey) {
        self.blocked = true;
        if self.first_blocked.is_none() {
            self.first_blocked = Some(key.clone());
        }
    }
}

/// What a cycle carries from one attempt to the next.
pub(super) struct Pass<'o> {
    pub(super) out: &'o mut Vec<Transition>,
    /// The start of every reservation made in this cycle, by group.
    pub(super) reserved: BTreeMap<GroupKey, i64>,
    /// Requests that did not fit now: the same request behind one does not either, nor one that
    /// contains it, until a preemption frees room.
    pub(super) failed: FailedRequests,
    pub(super) backfill_budget: usize,
    pub(super) preempt_budget: usize,
    /// A reservation was made earlier in this cycle: a group admitted now is backfill.
    pub(super) any_reservation: bool,
    /// The reservations the last cycle made are kept, not made afresh.
    pub(super) keep: bool,
    /// What the reservations made (or kept) so far in this cycle hold of their queues' quotas:
    /// the groups behind them in line may not take it (`quota_holds.rs`).
    pub(super) quota: QuotaTimeline,
    /// A group found its earliest start on the graph and waits because its quota is held then.
    /// That start moves with the reservations behind it: a next cycle that kept those would
    /// search it again around them, so any reservation after this one is planned afresh.
    pub(super) start_refused_for_quota: bool,
}

/// What the cycle does with a queue after taking one of its groups.
enum Then {
    /// Take the queue's next group in turn.
    NextInQueue,
    /// Nothing more from this queue in this cycle (`window_full`: its start window is full).
    StopQueue { window_full: bool },
    /// Nothing more at all (blockAdmission admitted a group).
    EndCycle,
}

impl Engine {
    /// One scheduling cycle at `now`: expire timers, then for each queue admit what fits by
    /// policy, reserve for blocked heads, backfill, preempt where allowed, grow elastic groups.
    pub fn schedule(&mut self, now: i64) -> Vec<Transition> {
        self.advance(now);
        let mut out = Vec::new();
        self.last_stats = CycleStats::default();
        self.expire_timers(&mut out);
        if !self.deferred_reshapes.is_empty() {
            self.apply_deferred_reshapes();
        }
        if self.over_quota_from_config {
            self.over_quota_from_config = crate::quota::check(&self.compiled, &self.usage).is_err();
        }
        if !self.dirty && !self.timer_due() {
            return out;
        }
        self.last_full_cycle = self.now;
        if self.config.block_admission {
            let admitted = self.groups.values().find(|g| g.state == GroupState::Admitted).map(|g| g.spec.key.clone());
            if let Some(k) = admitted {
                self.mark_blocked_heads(&k);
                self.dirty = false;
                return out;
            }
        }
        self.dirty = false;
        self.last_stats.ran = true;
        let keep = self.reservations_still_best();
        let old_reserved = self.reserved_groups().map(|g| (g.spec.key.clone(), g.reserved_at.unwrap_or(0))).collect();
        if !keep {
            self.cancel_reservations();
        }
        // From here on, whatever frees room (a preemption in this very cycle) clears it again.
        self.reservations_current = true;
        self.refresh_calendar(&mut out);
        let (new_reserved, mut quota) = self.cycle(keep, &mut out);
        self.settle_reservations(old_reserved, &new_reserved, &mut out);
        self.grow_elastic(&mut quota, &mut out);
        out
    }

    /// Cancels every reservation on the graph, for the cycle to make them afresh.
    fn cancel_reservations(&mut self) {
        for (_, id) in std::mem::take(&mut self.reservations) {
            let _ = self.graph.cancel(id);
        }
    }

    /// Whether this cycle may keep the reservations the last one made: they are still the
    /// earliest starts (`reservations_current`), none is due, no group of another queue could
    /// come before one of them (queues of one priority are ordered by their fair shares, which
    /// move with time), each group's quota still holds its minimum (groups admitted since may
    /// have used it: planned afresh, such a group waits for quota, unreserved), and nothing the
    /// cycle does besides placing groups could move them (elastic groups growing or giving way,
    /// start windows, calendar windows to make, a reclaimed group's hold).
    fn reservations_still_best(&self) -> bool {
        let heads: Vec<(&str, bool, i64)> = (self.pending.iter())
            .filter_map(|(q, p)| p.iter().next().map(|(pk, h)| (q.as_str(), self.would_borrow(h), -pk.neg_priority)))
            .collect();
        // A queue's groups become heads one after another, so another queue's head is taken
        // before `r` unless every group of `r`'s queue up to `r` comes before it: that group does
        // not borrow and the head would, or both alike and the head has the lower priority
        // (`HeadKey`'s first fields; equal ones are ordered by fair share, which moves).
        let alone_in_line = |r: &Group| {
            let others = heads.iter().filter(|(q, ..)| *q != r.spec.queue);
            // The highest priority among the other heads that would not borrow, and among all.
            let (mut lending, mut any) = (None::<i64>, None::<i64>);
            for &(_, borrows, priority) in others {
                any = any.max(Some(priority));
                if !borrows {
                    lending = lending.max(Some(priority));
                }
            }
            let Some(any) = any else { return true };
            let Some(line) = self.pending.get(&r.spec.queue) else { return false };
            for (pk, x) in line {
                let priority = -pk.neg_priority;
                // While every other head would borrow, a group comes first if it would not, or if
                // its priority is above theirs; else only if it would not borrow and its priority
                // is above the heads' that would not.
                let first = match lending {
                    None => priority > any || !self.would_borrow(x),
                    Some(l) => priority > l && !self.would_borrow(x),
                };
                if !first {
                    return false;
                }
                if *x.key == r.spec.key {
                    return true;
                }
            }
            false
        };
        let mut running = QuotaTimeline::default();
        self.reservations_current
            && self.elastic.is_empty()
            && self.config.queues.iter().all(|q| q.readiness.max_starting_members.is_none())
            && self.calendar_settled()
            && self.reserved.iter().all(|k| {
                let r = &self.groups[k];
                self.reservations.contains_key(k)
                    && r.reserved_at.is_some_and(|t| t > self.now)
                    && alone_in_line(r)
                    && r.reclaimed_for.is_none()
                    && self.quota_holds_at_start(r, &mut running)
            })
    }

    /// Whether reserved group `r`'s queue's quota still holds its minimum from its reserved start
    /// to its planned end, as what runs now ends (groups admitted since may have used it: planned
    /// afresh, such a group is reserved from when the quota frees, or waits).
    fn quota_holds_at_start(&self, r: &Group, tl: &mut QuotaTimeline) -> bool {
        let Some(at) = r.reserved_at else { return false };
        let mut req = self.planned_request(r);
        let min = self.effective_min(r);
        req.set_bounds(min, req.max_members);
        self.quota_held_against(&r.spec.key, &r.spec.queue, &req, at, tl).is_none()
    }

    /// Reports the reservations the cycle moved, and drops those it did not make again.
    fn settle_reservations(
        &mut self,
        old_reserved: BTreeMap<GroupKey, i64>,
        new_reserved: &BTreeMap<GroupKey, i64>,
        out: &mut Vec<Transition>,
    ) {
        for (key, old_at) in old_reserved {
            let Some(g) = self.groups.get(&key) else { continue };
            if g.state != GroupState::Reserved {
                continue;
            }
            match new_reserved.get(&key) {
                Some(&at) if at != old_at => {
                    self.step(&key, GroupState::Reserved, Reason::Reserved { at }, None, out);
                }
                Some(_) => {}
                None => {
                    self.group_mut(&key).reserved_at = None;
                    self.step(&key, GroupState::Queued, Reason::ReservationDropped, None, out);
                }
            }
        }
    }

    /// blockAdmission: the head of every queue waits for `k` to be ready.
    fn mark_blocked_heads(&mut self, k: &GroupKey) {
        let msg = format!("blockAdmission: waiting for {k} to have all members ready before admitting another group");
        let heads: Vec<Arc<GroupKey>> =
            self.pending.values().filter_map(|p| p.values().next().map(|h| Arc::clone(&h.key))).collect();
        for h in heads {
            self.set_reason(&h, &msg);
        }
    }

    /// The merge of all queues in global order; returns the reservations it made and what they
    /// hold of their queues' quotas.
    fn cycle(&mut self, keep: bool, out: &mut Vec<Transition>) -> (BTreeMap<GroupKey, i64>, QuotaTimeline) {
        self.count_starting();
        let mut heads = Heads::new(self);
        let mut cursors = vec![Cursor::default(); heads.queues.len()];
        let mut pass = Pass {
            out,
            reserved: BTreeMap::new(),
            failed: FailedRequests::default(),
            backfill_budget: self.config.backfill_attempts_per_cycle,
            preempt_budget: self.config.preemption_attempts_per_cycle,
            any_reservation: false,
            keep,
            quota: QuotaTimeline::default(),
            start_refused_for_quota: false,
        };
        while let Some(head) = heads.pop() {
            let qi = head.queue;
            let q = &heads.queues[qi];
            let pk = head.pending_key();
            let Some(head) = self.pending[q].get(&pk).cloned() else { continue };
            match self.take_head(&head, q, pk, &mut cursors[qi], &mut pass) {
                Then::NextInQueue => {
                    let cursor = &cursors[qi];
                    let policy = self.queue_cfg(q).policy;
                    // The last queue with groups left, blocked: what follows is backfill, and
                    // the misfits among it are settled in a run.
                    let last = match cursor.blocked && heads.next.is_empty() && policy != QueuePolicy::StrictFifo {
                        true => {
                            let may_reserve_more = cursor.reservations < policy.reservation_depth();
                            self.settle_misfit_run(q, policy, may_reserve_more, pk, &mut pass)
                        }
                        false => pk,
                    };
                    heads.push_after(self, qi, Some(last))
                }
                Then::StopQueue { window_full } => self.explain_stopped_queue(q, pk, &head, &cursors[qi], window_full),
                Then::EndCycle => break,
            }
        }
        (pass.reserved, pass.quota)
    }

    /// Takes one head: spends a backfill attempt if its queue is blocked, attempts the group, and
    /// notes the outcome on the queue's cursor.
    fn take_head(
        &mut self,
        head: &PendingGroup,
        q: &str,
        pk: PendingKey,
        cursor: &mut Cursor,
        pass: &mut Pass<'_>,
    ) -> Then {
        let key = &*head.key;
        let policy = self.queue_cfg(q).policy;
        if cursor.blocked {
            if pass.backfill_budget == 0 {
                return Then::StopQueue { window_full: false };
            }
            pass.backfill_budget -= 1;
        }
        self.last_stats.examined += 1;
        let may_reserve = cursor.reservations < policy.reservation_depth() && self.due_a_reservation(key, policy);
        // Looked up only when kept: with thousands waiting, most cycles plan afresh.
        let outcome = match pass.keep && self.reservations.contains_key(key) {
            true => {
                // Kept: still its earliest start, so planning it again would find the same.
                let at = self.groups[key].reserved_at.unwrap_or(self.now);
                pass.reserved.insert(key.clone(), at);
                pass.quota.hold(self.quota_hold(key, at));
                Attempt::Reserved
            }
            false => self.attempt(head, may_reserve, pass),
        };
        let stops_queue = match outcome {
            Attempt::Admitted => {
                self.last_stats.admitted += 1;
                pass.quota.runs_changed();
                if self.config.block_admission {
                    // One group at a time: nothing else this cycle.
                    self.mark_blocked_heads(key);
                    return Then::EndCycle;
                }
                false
            }
            Attempt::Reserved => {
                if pass.start_refused_for_quota {
                    self.reservations_current = false;
                }
                cursor.reservations += 1;
                pass.any_reservation = true;
                self.last_stats.reserved += 1;
                cursor.block(key);
                policy == QueuePolicy::StrictFifo
            }
            Attempt::Blocked => {
                cursor.block(key);
                policy == QueuePolicy::StrictFifo
            }
            Attempt::WindowFull => {
                self.window_held.insert(q.to_string(), pk);
                cursor.block(key);
                return Then::StopQueue { window_full: true };
            }
            Attempt::Skipped => false,
        };
        if stops_queue { Then::StopQueue { window_full: false } } else { Then::NextInQueue }
    }

    /// Whether the policy lets this group hold a reservation yet: always, except under selective
    /// reservation before its slowdown so far reaches the policy's threshold.
    fn due_a_reservation(&self, key: &GroupKey, policy: QueuePolicy) -> bool {
        reservation_due_at(&self.groups[key], policy).is_none_or(|t| self.now >= t)
    }

    /// A queue stopped at `key` (its head `pk`): everything behind stays where it is, and the
    /// first groups behind (up to the estimate depth) say what they wait for.
    fn explain_stopped_queue(&mut self, q: &str, pk: PendingKey, key: &GroupKey, cursor: &Cursor, window_full: bool) {
        let Some(fb) = &cursor.first_blocked else { return };
        let policy = self.queue_cfg(q).policy;
        let reason = if window_full {
            // The group the window held, not an earlier one blocked otherwise.
            format!("waiting behind {key} for the start window of queue {q}")
        } else if policy == QueuePolicy::StrictFifo {
            format!("waiting behind {fb} (queue {q} is strict FIFO)")
        } else {
            format!("waiting behind {fb}; not tried this cycle (backfill attempts used up)")
        };
        // Every cycle that stops a queue comes here: each group reached by its slot, nothing
        // copied unless its reason changes.
        let Self { pending, groups, config, .. } = self;
        for p in pending[q].range((Bound::Excluded(pk), Bound::Unbounded)).map(|(_, p)| p).take(config.estimate_depth) {
            let g = groups.at_mut(p.slot);
            if g.unsatisfiable.is_none() && g.reason != reason {
                Arc::make_mut(g).reason = reason.clone();
            }
        }
    }

    /// Counts the members admitted and not yet ready per queue with a start window.
    fn count_starting(&mut self) {
        self.starting.clear();
        self.window_held.clear();
        if self.config.queues.iter().all(|q| q.readiness.max_starting_members.is_none()) {
            return;
        }
        for k in &self.live {
            let g = &self.groups[k];
            if g.state == GroupState::Admitted {
                *self.starting.entry(g.spec.queue.clone()).or_default() +=
                    g.member_count().saturating_sub(g.ready_members);
            }
        }
    }
}

/// When a group becomes due a reservation under selective reservation: once it has waited its
/// run time times (slowdown - 1), so that (wait + run) / run reaches the slowdown. None: due at
/// once (another policy, or no declared run time to measure the slowdown by).
pub(super) fn reservation_due_at(g: &Group, policy: QueuePolicy) -> Option<i64> {
    slowdown_reached(g, policy, g.spec.submitted_at)
}

/// What orders a group within its priority in its queue (submission order breaks ties): the time
/// it was queued (its order time), or under selective reservation the time its slowdown, counted
/// from then, reaches the queue's bound. So of groups queued together the one with the shorter
/// run goes first, as it reaches the bound sooner, and a long group queued earlier stays ahead of
/// every group that would reach it later: the order serves the bound, not the arrival alone.
/// A group that declares no run time is due at once: its order time.
pub(super) fn queue_order_time(g: &Group, policy: QueuePolicy) -> i64 {
    slowdown_reached(g, policy, g.order_time).unwrap_or(g.order_time)
}

/// Under selective reservation, when a group waiting since `from` reaches the queue's slowdown.
fn slowdown_reached(g: &Group, policy: QueuePolicy, from: i64) -> Option<i64> {
    let QueuePolicy::Selective { slowdown, .. } = policy else { return None };
    let run = i64::try_from(g.spec.request.duration?).unwrap_or(i64::MAX);
    Some(from.saturating_add(run.saturating_mul(i64::from(slowdown).saturating_sub(1))))
}
