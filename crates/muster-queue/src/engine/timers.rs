//! Timers: readiness and recovery timeouts (release, then requeue after an exponential backoff or
//! deactivate), run-time limits (`run_limit.rs`), the end of a backoff, and when the next timer
//! fires.

use std::cmp::Reverse;
use std::collections::BTreeSet;

use super::Engine;
use crate::config::RequeueOrder;
use crate::group::{Group, GroupKey, GroupState, Reason, Transition};

impl Engine {
    /// Expires readiness and recovery timeouts and backoffs.
    pub(super) fn expire_timers(&mut self, out: &mut Vec<Transition>) {
        let mut due = BTreeSet::new();
        while let Some(Reverse((t, _))) = self.timers.peek()
            && *t <= self.now
        {
            let Some(Reverse((t, key))) = self.timers.pop() else { break };
            if let Some(g) = self.groups.get(&key)
                && self.timer_of(g) == Some(t)
            {
                due.insert((t, key));
            }
        }
        for (_, key) in due {
            let g = &self.groups[&key];
            if self.run_time_limit(g).is_some_and(|t| t <= self.now) {
                self.end_over_limit(&key, out);
                continue;
            }
            match g.state {
                GroupState::Admitted => self.timeout(&key, false, out),
                GroupState::Running => self.timeout(&key, true, out),
                GroupState::Evicted => {
                    let g = self.group_mut(&key);
                    g.requeue_at = None;
                    self.step(&key, GroupState::Queued, Reason::BackoffExpired, None, out);
                    self.add_pending(&key);
                    self.replan();
                }
                _ => {}
            }
        }
    }

    /// When a live group's own timer fires: its readiness timeout (admitted), its recovery
    /// timeout (running, not all ready), the end of its backoff (evicted), and for a placed
    /// group its run-time limit, whichever is first.
    pub(super) fn timer_of(&self, g: &Group) -> Option<i64> {
        let r = &self.queue_cfg(&g.spec.queue).readiness;
        let own = match g.state {
            GroupState::Admitted => r.timeout_s.zip(g.admitted_at).map(|(t, a)| a.saturating_add(t)),
            GroupState::Running => r.recovery_timeout_s.zip(g.not_ready_since).map(|(t, s)| s.saturating_add(t)),
            GroupState::Evicted => g.requeue_at,
            _ => None,
        };
        own.into_iter().chain(self.run_time_limit(g)).min()
    }

    /// A readiness (or recovery) timeout: release, then requeue after backoff or deactivate.
    fn timeout(&mut self, key: &GroupKey, recovery: bool, out: &mut Vec<Transition>) {
        let now = self.now;
        let rcfg = self.queue_cfg(&self.groups[key].spec.queue).readiness.clone();
        let rec = self.release(key);
        let g = self.group_mut(key);
        g.evictions += 1;
        let over_limit = rcfg.backoff_limit.is_some_and(|l| g.requeues >= l);
        if over_limit {
            let requeues = g.requeues;
            let reason = if recovery {
                Reason::RecoveryTimeout { requeue_at: now, requeues }
            } else {
                Reason::PodsReadyTimeout { requeue_at: now, requeues }
            };
            self.step(key, GroupState::Evicted, reason, rec, out);
            self.step(key, GroupState::Deactivated, Reason::BackoffLimitExceeded { requeues }, None, out);
            return;
        }
        g.requeues += 1;
        let requeues = g.requeues;
        let requeue_at = now.saturating_add(rcfg.backoff(requeues));
        g.requeue_at = Some(requeue_at);
        if rcfg.requeue_order == RequeueOrder::Eviction {
            g.order_time = now;
        }
        let reason = if recovery {
            Reason::RecoveryTimeout { requeue_at, requeues }
        } else {
            Reason::PodsReadyTimeout { requeue_at, requeues }
        };
        self.step(key, GroupState::Evicted, reason, rec, out);
    }

    /// The earliest time (seconds) at which a timer fires: a readiness or recovery timeout, the end
    /// of a backoff, a reservation's start, an elastic group's wait for max, a group becoming due
    /// a reservation under selective reservation, a calendar window. A driver with nothing else
    /// to report may sleep until then.
    pub fn next_timer(&self) -> Option<i64> {
        // The earliest entry, stale or not, is never later than the earliest live timer: at
        // worst the driver wakes once for nothing. A due one waits for the next cycle.
        let live = self.timers.peek().map(|Reverse((t, _))| (*t).max(self.now.saturating_add(1)));
        let reserved = self.reserved_starts_to_wake_for();
        let elastic = self
            .pending
            .iter()
            .map(|(q, p)| (self.queue_cfg(q).elastic_max_wait_s, p))
            .filter(|(wait, _)| *wait > 0)
            .flat_map(|(wait, p)| {
                p.values().filter_map(move |k| {
                    let g = &self.groups[k];
                    (g.spec.request.min_members < g.spec.request.max_members)
                        .then(|| g.spec.submitted_at.saturating_add(wait))
                })
            });
        let due = self.reservations_due_after(self.now).next();
        let calendar = self.next_calendar_time();
        live.into_iter().chain(reserved).chain(elastic).chain(due).chain(calendar).filter(|&t| t > self.now).min()
    }

    /// Queued groups of selective queues that become due a reservation after `after`, with
    /// when, earliest first.
    fn reservations_due_after(&self, after: i64) -> impl Iterator<Item = i64> {
        let from = (after.saturating_add(1), GroupKey::new("", ""));
        self.due_reservation.range(from..).filter(|(_, k)| self.groups[k].state == GroupState::Queued).map(|(t, _)| *t)
    }

    /// The reservations' starts a cycle is due at. Not one in the second after the last cycle:
    /// that is where a group waits for one that runs past its expected end
    /// (`ResourceGraph::reserve`), and the end it waits for is an input, which makes a cycle due
    /// anyway. Were it a timer, such a group would run a cycle every second until then.
    fn reserved_starts_to_wake_for(&self) -> impl Iterator<Item = i64> {
        let next_second = self.last_full_cycle.saturating_add(1);
        self.reserved.iter().filter_map(|k| self.groups[k].reserved_at).filter(move |&t| t > next_second)
    }

    /// True if a time-driven event (a reservation's start, a calendar window's start or end, an
    /// elastic group's wait, a group become due a reservation since the last cycle) is due.
    pub(super) fn timer_due(&self) -> bool {
        let now = self.now;
        self.reserved_starts_to_wake_for().any(|t| t <= now)
            || self.calendar_due()
            || self.reservations_due_after(self.last_full_cycle).next().is_some_and(|t| t <= now)
            || self.pending.iter().any(|(q, p)| {
                let wait = self.queue_cfg(q).elastic_max_wait_s;
                wait > 0
                    && p.values().any(|k| {
                        let g = &self.groups[k];
                        g.spec.request.min_members < g.spec.request.max_members
                            && g.spec.submitted_at.saturating_add(wait) <= now
                            && g.reason.starts_with("elastic:")
                    })
            })
    }
}
