//! The forecast behind estimated starts: a copy of the engine run forward from now, with no new
//! arrivals. Its own cycle decides, so the forecast follows the policy (reservations, backfill,
//! out-of-order starts, preemption, elastic sizes) rather than stacking the queue in order; and
//! placed groups end when they are expected to (their kind's recent runs, else what they
//! declare), not at the latest time they promise, which is what the plans must assume.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};

use super::Engine;
use crate::group::{GroupKey, GroupState, Reason};

/// Where and when the forecast starts one pending group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ForecastStart {
    pub at: i64,
    /// The node of each member, in member order.
    pub nodes: Vec<String>,
    /// When it is expected to end; none when nothing says how long it runs.
    pub end: Option<i64>,
}

/// The forecast for the groups asked about: a start for those the copy started within its
/// budget, and for the rest a lower bound from the cluster's totals where it stopped.
#[derive(Debug, Default)]
pub(super) struct Forecast {
    pub starts: BTreeMap<GroupKey, ForecastStart>,
    pub not_before: BTreeMap<GroupKey, i64>,
}

impl Engine {
    /// Runs a copy of the engine forward from `now` until every group of `wanted` has started,
    /// nothing more can happen, or `forecast_cycles` cycles have run.
    pub(super) fn forecast(&self, now: i64, wanted: &BTreeSet<GroupKey>) -> Forecast {
        let mut copy = self.clone();
        copy.groups.keep_history_shared();
        // Groups behind those asked about are left out: they could only backfill ahead of them,
        // and leaving them costs the copy's cycles most of their work on a long queue.
        for pending in copy.pending.values_mut() {
            pending.retain(|_, k| wanted.contains(&**k));
        }
        let mut now = now.max(self.now);
        let mut ends = BinaryHeap::new();
        // Whatever is placed is taken as running with every member ready (no timeout fires).
        for key in self.live.iter().filter(|k| self.groups[*k].state.holds_allocation()) {
            let g = &self.groups[key];
            let _ = copy.pods_ready(key, g.member_count(), now);
            let planned = g.allocation.as_ref().map_or(i64::MAX, |a| a.end);
            let expected = self
                .expected_run_time(g, g.member_count())
                .and_then(|r| g.admitted_at.map(|a| a.saturating_add_unsigned(r)));
            // Past its expected end it runs until its planned end; past that, it ends now.
            let end = match expected {
                Some(e) if e > now => e.min(planned),
                _ if planned > now => planned,
                _ => now,
            };
            if end < i64::MAX {
                ends.push(Reverse((end, key.clone(), g.admitted_at)));
            }
        }
        let mut left = wanted.clone();
        let mut out = Forecast::default();
        copy.dirty = true;
        for _ in 0..self.config.forecast_cycles {
            // Members given back are taken as gone at once; the group they make room for starts
            // in the next cycle, at the same time.
            let mut given = Vec::new();
            for t in copy.schedule(now) {
                if let Reason::GivingWay { members, .. } = t.reason {
                    given.push((t.key, members));
                    continue;
                }
                if t.to != GroupState::Admitted {
                    continue;
                }
                let g = &copy.groups[&t.key];
                let members = g.member_count();
                let end = copy.expected_run_time(g, members).map(|r| now.saturating_add_unsigned(r));
                let nodes = t.allocation.map(|a| a.members.into_iter().map(|m| m.node).collect()).unwrap_or_default();
                if let Some(end) = end {
                    ends.push(Reverse((end, t.key.clone(), g.admitted_at)));
                }
                let _ = copy.pods_ready(&t.key, members, now);
                if left.remove(&t.key) {
                    out.starts.insert(t.key, ForecastStart { at: now, nodes, end });
                }
            }
            if left.is_empty() {
                break;
            }
            if !given.is_empty() {
                for (key, members) in given {
                    let _ = copy.members_lost(&key, &members, now);
                }
                copy.dirty = true;
                continue;
            }
            let next_end = ends.peek().map(|Reverse((t, ..))| *t);
            let Some(next) = next_end.into_iter().chain(copy.next_timer()).min() else { break };
            now = now.max(next);
            // End every group due by `now`; an entry of a placement the copy has since evicted or
            // ended is stale and skipped.
            while let Some(Reverse((t, key, admitted))) = ends.peek().cloned()
                && t <= now
            {
                ends.pop();
                if copy.groups.get(&key).is_some_and(|g| g.state.holds_allocation() && g.admitted_at == admitted) {
                    let _ = copy.finished(&key, true, t.max(copy.now));
                }
            }
            copy.dirty = true;
        }
        let profile = copy.end_profile();
        for key in left {
            if let Some(t) = copy.aggregate_estimate(&profile, &copy.groups[&key], now) {
                out.not_before.insert(key, t);
            }
        }
        out
    }
}
