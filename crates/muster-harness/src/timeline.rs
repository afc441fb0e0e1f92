//! Where a real run's time went, job by job: when its gang's pods were made, bound, all Ready (its
//! run began) and ended, from the same watch as the occupancy ([`Ledger`]). Side by side they show
//! each step a scheduler takes between a job's submission and its run, and the hand-over from one
//! gang to the next (the last pod of one ending, the next gang bound).

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::occupancy::{Ledger, PodSpan, nth};
use crate::stats::round;
use crate::workload::JobRecord;

/// One job's steps, in scenario seconds (0 is the scenario's start), to the millisecond. A step
/// not reached is absent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobTimeline {
    pub job: String,
    pub submitted_s: f64,
    /// Its gang's last member made (the gang-size-th pod seen).
    pub made_s: Option<f64>,
    /// Its gang's last member bound.
    pub bound_s: Option<f64>,
    /// Its gang's last member Ready: the job runs.
    pub running_s: Option<f64>,
    pub first_end_s: Option<f64>,
    pub last_end_s: Option<f64>,
}

impl Ledger {
    /// The steps of every job of `jobs` (in their order) in a run whose scenario time 0 is `t0`.
    /// A job's gang is its record's minimum (else all of its pods).
    pub fn timelines(&self, jobs: &[JobRecord], t0: f64) -> Vec<JobTimeline> {
        let mut by_job: HashMap<&str, Vec<&PodSpan>> = HashMap::new();
        for p in self.pods.values() {
            if let Some(job) = p.job.as_deref() {
                by_job.entry(job).or_default().push(p);
            }
        }
        jobs.iter()
            .map(|j| {
                let pods = by_job.get(j.name.as_str()).map_or(&[][..], Vec::as_slice);
                let size = j.min_pods.unwrap_or(j.pods);
                let at = |t: Option<f64>| t.map(|t| round(t - t0, 3));
                let ends = || pods.iter().filter_map(|p| p.end);
                JobTimeline {
                    job: j.name.clone(),
                    submitted_s: round(j.submit_ms as f64 / 1000.0, 3),
                    made_s: at(nth(pods.iter().map(|p| Some(p.seen)), size)),
                    bound_s: at(nth(pods.iter().map(|p| p.bound), size)),
                    running_s: at(nth(pods.iter().map(|p| p.ready), size)),
                    first_end_s: at(ends().reduce(f64::min)),
                    last_end_s: at(ends().reduce(f64::max)),
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::occupancy::tests::{bound, pod, ready, succeeded};
    use crate::workload::test_record as record;

    #[test]
    fn a_gangs_steps_are_its_last_members_and_a_step_not_reached_is_absent() {
        let t0 = 1_767_225_600.0;
        let mut l = Ledger::default();
        // Gang a of 2: made at 0.1 and 0.3, bound at 0.5 and 2.25, Ready at 1 and 3, ended at
        // 9 and 10.5.
        let (a0, a1) = (pod("a0", "a", 0), pod("a1", "a", 0));
        l.observe(false, &a0, t0 + 0.1);
        l.observe(false, &a1, t0 + 0.3);
        l.observe(false, &bound(a0.clone()), t0 + 0.5);
        l.observe(false, &bound(a1.clone()), t0 + 2.25);
        l.observe(false, &ready(a0.clone()), t0 + 1.0);
        l.observe(false, &ready(a1.clone()), t0 + 3.0);
        l.observe(false, &succeeded(ready(a0)), t0 + 9.0);
        l.observe(false, &succeeded(ready(a1)), t0 + 10.5);
        // Gang b of 2, submitted at 2 s: one pod made, never bound.
        l.observe(false, &pod("b0", "b", 0), t0 + 4.0);
        let jobs =
            [JobRecord { pods: 2, ..record("a", "x") }, JobRecord { pods: 2, submit_ms: 2000, ..record("b", "x") }];
        let t = l.timelines(&jobs, t0);
        assert_eq!(
            t[0],
            JobTimeline {
                job: "a".into(),
                submitted_s: 0.0,
                made_s: Some(0.3),
                bound_s: Some(2.25),
                running_s: Some(3.0),
                first_end_s: Some(9.0),
                last_end_s: Some(10.5),
            }
        );
        assert_eq!((t[1].submitted_s, t[1].made_s, t[1].bound_s, t[1].last_end_s), (2.0, None, None, None));
    }
}
