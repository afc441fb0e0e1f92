//! Run times learned from finished groups. A group without a duration would run "forever" for
//! the planner: no reservation could be made behind it and no start estimated. Instead it is
//! planned with the mean time its kind of group (same queue, same request) held its nodes over
//! the last runs, from admission to the end, start-up included.
//! A declared duration is always used as given by the planner: it is the user's promise, which
//! the queue enforces (`run_limit.rs`), and the plans' guarantee rests on it. A learned one is an
//! estimate: it plans the groups behind a running group, never a backfill. Groups that declare
//! one are learned from too, for the forecast only: most end well before their limit, and a
//! predicted start that assumed every limit would be reached would be late.

use std::collections::{BTreeMap, VecDeque};

use muster_graph::GroupRequest;
use muster_graph::jobspec::MAX_DURATION;
use serde::{Deserialize, Serialize};

use super::Engine;
use super::state::request_shape;
use crate::group::Group;

/// Runs remembered per kind of group: recent enough to follow a change of workload, enough to
/// average out one odd run.
pub const RUN_TIMES_KEPT: usize = 8;

/// Recent run times (seconds, at the group's full size) by queue and request shape.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LearnedRunTimes(BTreeMap<String, BTreeMap<u64, VecDeque<u64>>>);

/// What one group that succeeded teaches: how long it held its nodes, at its full size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunTimeSample {
    pub queue: String,
    /// [`request_shape`] of its request.
    pub shape: u64,
    pub seconds: u64,
}

impl RunTimeSample {
    /// The sample of group `g` (as it was while placed) that succeeded at `at`; none for a group
    /// never admitted. Scaled to its full size as the planner scales a run time (the same work
    /// on fewer members takes longer).
    pub fn of(g: &Group, at: i64) -> Option<Self> {
        Self::of_shape(g, at, request_shape(&g.spec.request))
    }

    /// As [`RunTimeSample::of`], with the request's shape already known.
    fn of_shape(g: &Group, at: i64, shape: u64) -> Option<Self> {
        let admitted = g.admitted_at?;
        let held = u64::try_from(at.saturating_sub(admitted)).unwrap_or(0);
        let at_max = held.saturating_mul(u64::from(g.member_count())) / u64::from(g.spec.request.max_members.max(1));
        Some(Self { queue: g.spec.queue.clone(), shape, seconds: at_max.max(1) })
    }
}

/// A learned run time and how many runs it comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LearnedRunTime {
    pub seconds: u64,
    pub runs: usize,
}

impl LearnedRunTimes {
    /// What the given samples teach, oldest first (as a store gives them back).
    pub fn from_samples(samples: impl IntoIterator<Item = RunTimeSample>) -> Self {
        let mut learned = Self::default();
        for s in samples {
            learned.record(&s.queue, s.shape, s.seconds);
        }
        learned
    }

    fn record(&mut self, queue: &str, shape: u64, seconds: u64) {
        let runs = self.0.entry(queue.to_string()).or_default().entry(shape).or_default();
        if runs.len() == RUN_TIMES_KEPT {
            runs.pop_front();
        }
        // No longer than a group may declare: a stored row cannot make the plan absurd.
        runs.push_back(seconds.min(MAX_DURATION));
    }

    fn get(&self, queue: &str, shape: u64) -> Option<LearnedRunTime> {
        let runs = self.0.get(queue)?.get(&shape).filter(|r| !r.is_empty())?;
        let total: u64 = runs.iter().sum();
        Some(LearnedRunTime { seconds: total.div_ceil(runs.len() as u64).max(1), runs: runs.len() })
    }
}

impl Engine {
    /// The run time learned for a group that declares none.
    pub fn learned_run_time(&self, g: &Group) -> Option<LearnedRunTime> {
        if g.spec.request.duration.is_some() {
            return None;
        }
        self.learned.get(&g.spec.queue, self.shapes.get(&g.spec.key).copied()?)
    }

    /// How long a group placed with `members` members is expected to hold them, for the
    /// forecast: the mean of its kind's recent runs where there are any, else what it declares.
    pub(super) fn expected_run_time(&self, g: &Group, members: u32) -> Option<u64> {
        let learned = self.shapes.get(&g.spec.key).and_then(|s| self.learned.get(&g.spec.queue, *s));
        let run_time = learned.map(|l| l.seconds).or(g.spec.request.duration)?;
        Some(g.spec.request.stretched(run_time, members))
    }

    /// The request the planner works with: the group's own, with the learned run time where it
    /// declares none.
    pub(super) fn planned_request(&self, g: &Group) -> GroupRequest {
        let mut req = g.spec.request.clone();
        if let Some(l) = self.learned_run_time(g) {
            req.duration = Some(l.seconds);
        }
        req
    }

    /// Learns from a group that succeeded at `now`.
    pub(super) fn learn_run_time(&mut self, g: &Group, now: i64) {
        // The shape worked out at submission, while the group is in play: hashing the request's
        // text again costs as much as the rest of a group's end.
        let shape = self.shapes.get(&g.spec.key).copied().unwrap_or_else(|| request_shape(&g.spec.request));
        if let Some(s) = RunTimeSample::of_shape(g, now, shape) {
            self.learned.record(&s.queue, s.shape, s.seconds);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mean_of_the_last_runs_per_queue_and_shape() {
        let mut l = LearnedRunTimes::default();
        assert_eq!(l.get("q", 2), None);
        l.record("q", 2, 100);
        l.record("q", 2, 201);
        assert_eq!(l.get("q", 2), Some(LearnedRunTime { seconds: 151, runs: 2 }));
        assert_eq!((l.get("q", 4), l.get("other", 2)), (None, None));
        for _ in 0..RUN_TIMES_KEPT {
            l.record("q", 2, 10);
        }
        assert_eq!(l.get("q", 2), Some(LearnedRunTime { seconds: 10, runs: RUN_TIMES_KEPT }), "old runs are forgotten");
        // Absurd samples (a corrupt row) are capped, and their sum cannot overflow.
        let huge = LearnedRunTimes::from_samples((0..RUN_TIMES_KEPT).map(|_| RunTimeSample {
            queue: "q".into(),
            shape: 2,
            seconds: u64::MAX,
        }));
        assert_eq!(huge.get("q", 2).map(|l| l.seconds), Some(MAX_DURATION));
    }
}
