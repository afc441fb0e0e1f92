//! What the schedulable nodes have free in total at each moment after now, as planned: running
//! allocations end at their expected ends, reservations start at theirs.
//!
//! A placement over a window holds on every node no more than that node has free at every moment
//! of the window, so a group whose total ask is more than the total free at some moment of its
//! window does not fit, whatever the nodes. With thousands of groups waiting behind a reservation,
//! most that fit the free room now fail this way (they would run into the reservation); a queue
//! settles them with this test instead of a match.

use crate::graph::Graph;

/// Total free room of the schedulable nodes after `now`, by moment: the least so far at each.
#[derive(Debug, Clone, Default)]
pub struct FreeAhead {
    /// The moments after now when some node's free room changes, in order.
    times: Vec<i64>,
    /// Per moment, per resource: the least total free at any moment in (now, that moment].
    least: Vec<u64>,
    resources: usize,
    /// Working space kept between builds: (moment, resource, change) for one node, and for all.
    node_events: Vec<(i64, usize, i128)>,
    changes: Vec<(i64, usize, i128)>,
}

impl FreeAhead {
    /// The least total free of each resource (by resource index) at any moment after now and
    /// before `end`; None when nothing changes in between (then the room now is what counts).
    pub fn least_before(&self, end: i64) -> Option<&[u64]> {
        let i = self.times.partition_point(|&t| t < end);
        let r = self.resources;
        (i > 0).then(|| &self.least[(i - 1) * r..i * r])
    }
}

impl Graph {
    /// The cluster's free room after `now`, as [`FreeAhead`] keeps it. Each node's room is
    /// counted as the matcher counts it in a window that starts now (`spans_at`, after the
    /// window's start): what its spans active at a moment hold, taken from its capacity and
    /// never below zero. Costs a sort of the spans that end after now and before the last start.
    pub fn free_ahead(&self, now: i64) -> FreeAhead {
        let mut ahead = FreeAhead::default();
        self.free_ahead_into(now, &mut ahead);
        ahead
    }

    /// [`Graph::free_ahead`] into `ahead`, whose room is reused.
    pub fn free_ahead_into(&self, now: i64, ahead: &mut FreeAhead) {
        let r = self.resources.len();
        ahead.times.clear();
        ahead.least.clear();
        ahead.resources = r;
        let schedulable = || self.live_nodes().filter(|(_, n)| n.schedulable());
        // After the last moment a span starts, the room only grows: no later moment is the least.
        let starts = schedulable().flat_map(|(_, n)| &n.spans).map(|s| s.start).filter(|&t| t > now);
        let Some(last_start) = starts.max() else { return };
        let mut total = vec![0i128; r];
        let (mut events, mut changes) = (std::mem::take(&mut ahead.node_events), std::mem::take(&mut ahead.changes));
        changes.clear();
        let mut used = vec![0i128; r];
        for (_, node) in schedulable() {
            events.clear();
            used.fill(0);
            for s in node.spans.iter().filter(|s| s.end > now) {
                for (k, &a) in s.amounts.iter().enumerate().filter(|(_, a)| **a > 0) {
                    if s.start > now {
                        events.push((s.start, k, i128::from(a)));
                    } else {
                        used[k] += i128::from(a);
                    }
                    if s.end <= last_start {
                        events.push((s.end, k, -i128::from(a)));
                    }
                }
            }
            let room = |k: usize, used: i128| (i128::from(node.capacity[k]) - used).max(0);
            for (k, t) in total.iter_mut().enumerate() {
                *t += room(k, used[k]);
            }
            events.sort_unstable_by_key(|&(t, k, _)| (t, k));
            // What saturation leaves of each step is the change of the node's free room.
            for &(t, k, delta) in &events {
                let before = room(k, used[k]);
                used[k] += delta;
                let after = room(k, used[k]);
                if after != before {
                    changes.push((t, k, after - before));
                }
            }
        }
        changes.sort_unstable_by_key(|&(t, k, _)| (t, k));
        let mut i = 0;
        while i < changes.len() {
            let t = changes[i].0;
            while let Some(&(_, k, delta)) = changes.get(i).filter(|c| c.0 == t) {
                total[k] += delta;
                i += 1;
            }
            let at = ahead.least.len();
            ahead.least.extend(total.iter().map(|&f| u64::try_from(f.max(0)).unwrap_or(u64::MAX)));
            if at >= r {
                for k in 0..r {
                    ahead.least[at + k] = ahead.least[at + k].min(ahead.least[at - r + k]);
                }
            }
            ahead.times.push(t);
        }
        (ahead.node_events, ahead.changes) = (events, changes);
    }
}
