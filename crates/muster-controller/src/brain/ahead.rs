//! Pods made ahead of a group's start. A group reserved to start within its queue's
//! `createPodsAheadSeconds`, or first in its queue's line without a reservation (its start may
//! come with the next group to end), has its workload released early: the workload's controller
//! makes the pods while the nodes are still busy, they wait unbound (their scheduler is muster,
//! which binds only admitted groups), and they are bound the moment the group is admitted, rather
//! than only then being made. Not for elastic groups (sized at admission), nor for workloads whose
//! deadline counts from their release (waiting would use it up).

use muster_queue::{GroupKey, GroupState};
use muster_store::Store;

use super::{Brain, EventType};
use crate::convert::WorkloadView;

impl<S: Store> Brain<S> {
    /// Releases the workloads of the groups starting soon.
    pub(super) fn release_ahead(&mut self, now: i64) {
        let Some(e) = self.engine.as_ref() else { return };
        let due: Vec<(GroupKey, Option<i64>)> = e
            .engine()
            .starting_soon(now)
            .filter(|g| !self.ahead.contains(&g.spec.key))
            .map(|g| (g.spec.key.clone(), g.reserved_at))
            .collect();
        for (key, at) in due {
            // A plain group's pods exist already.
            let Some(w) = self.workload(&key.to_string()) else { continue };
            if !may_release_ahead(w) || !w.suspended || self.earlier_run_stopping(&key) {
                continue;
            }
            self.ahead.insert(key.clone());
            self.set_suspend(&key, false);
            let when = match at {
                Some(at) => format!("reserved to start in {} s", (at - now).max(0)),
                None => "first in its queue's line with no start planned".to_string(),
            };
            let message = format!("{when}: its pods are made now and wait unbound until the group is admitted");
            self.event(&key, EventType::Normal, "CreatingPodsAhead", &message);
        }
    }

    /// Whether `j`'s group wants its workload released: it holds its allocation, or it was
    /// released ahead of its start. A workload found released for a group starting soon (by an
    /// instance before this one) is kept so rather than suspended and released again.
    pub(super) fn wants_released(&mut self, j: &WorkloadView, state: GroupState, now: i64) -> bool {
        if state.holds_allocation() || self.ahead.contains(&j.key) {
            return true;
        }
        let soon = self.engine.as_ref().and_then(|e| {
            let engine = e.engine();
            engine.group(&j.key).map(|g| engine.starts_soon(g, now))
        });
        if soon == Some(true) && !j.suspended && may_release_ahead(j) {
            self.ahead.insert(j.key.clone());
            return true;
        }
        false
    }

    /// Forgets a group released ahead once it is admitted or leaves the queue.
    pub(super) fn settle_ahead(&mut self, key: &GroupKey, state: GroupState) {
        if !state.is_pending() {
            self.ahead.remove(key);
        }
    }
}

fn may_release_ahead(w: &WorkloadView) -> bool {
    w.release_deadline.is_none() && !w.suspend_requested && !w.deleting && w.finished.is_none()
}
