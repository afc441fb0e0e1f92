//! Each job's own outcome under one scheduler, in the scenario's order: when it was submitted,
//! placed, started and ended. The run's figures are sorted distributions; this list is what one
//! compares job for job, between two schedulers or between a what-if and the recorded history
//! (`muster sim --jobs`).

use std::fmt::Write;

use super::round3;
use crate::engine::RunRecord;
use crate::scenario::Workload;
use crate::scheduler::JobPhase;

#[derive(Debug, Clone, PartialEq)]
pub struct JobOutcome {
    pub job: String,
    pub class: String,
    /// Its tenant's queue; none without tenants.
    pub queue: Option<String>,
    pub submitted_s: f64,
    /// When all the pods of its first start were bound; none if it never started.
    pub placed_s: Option<f64>,
    /// When its last run began (its quorum Ready).
    pub run_started_s: Option<f64>,
    pub ended_s: Option<f64>,
    pub outcome: Outcome,
    /// Runs begun: more than one after an eviction.
    pub starts: u32,
    /// The start the scheduler first predicted for it; none where it predicts none.
    pub estimated_start_s: Option<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Completed,
    Failed,
    /// Neither when the run stopped (stuck, or the horizon came first).
    Unfinished,
}

impl Outcome {
    fn name(self) -> &'static str {
        match self {
            Outcome::Completed => "completed",
            Outcome::Failed => "failed",
            Outcome::Unfinished => "unfinished",
        }
    }
}

pub fn list(w: &Workload, rec: &RunRecord) -> Vec<JobOutcome> {
    let s = |ms: i64| round3(ms as f64 / 1000.0);
    (w.jobs.iter().zip(&rec.jobs))
        .map(|(spec, j)| JobOutcome {
            job: spec.name.clone(),
            class: spec.class.clone(),
            queue: spec.queue.and_then(|q| w.tenants.queues.get(q)).map(|q| q.name.clone()),
            submitted_s: s(j.submit_ms),
            placed_s: j.scheduled_ms.map(s),
            run_started_s: j.run_started_ms.map(s),
            ended_s: j.ended_ms.map(s),
            outcome: match j.phase {
                JobPhase::Succeeded => Outcome::Completed,
                JobPhase::Failed => Outcome::Failed,
                _ => Outcome::Unfinished,
            },
            starts: j.starts,
            estimated_start_s: j.estimated_start_ms.map(s),
        })
        .collect()
}

/// The CSV columns of [`csv_row`].
pub const CSV_HEADER: &str = "scenario,scheduler,job,class,queue,submitted_s,placed_s,run_started_s,ended_s,wait_s,\
                              outcome,starts,estimated_start_s";

/// One job's line: times in seconds, empty where there is none; `wait_s` is from submission to
/// the start of its last run, as the run's wait figures count it.
pub fn csv_row(out: &mut String, scenario: &str, scheduler: &str, j: &JobOutcome) {
    let opt = |x: Option<f64>| x.map_or(String::new(), |v| v.to_string());
    let wait = j.run_started_s.map(|r| round3(r - j.submitted_s));
    let _ = writeln!(
        out,
        "{},{},{},{},{},{},{},{},{},{},{},{},{}",
        field(scenario),
        field(scheduler),
        field(&j.job),
        field(&j.class),
        field(j.queue.as_deref().unwrap_or("")),
        j.submitted_s,
        opt(j.placed_s),
        opt(j.run_started_s),
        opt(j.ended_s),
        opt(wait),
        j.outcome.name(),
        j.starts,
        opt(j.estimated_start_s),
    );
}

/// A CSV field, quoted when it holds a comma, a quote or a line break (RFC 4180).
fn field(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) { format!("\"{}\"", text.replace('"', "\"\"")) } else { text.to_string() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_with_separators_are_quoted() {
        assert_eq!(field("swf-12"), "swf-12");
        assert_eq!(field("a,b"), "\"a,b\"");
        assert_eq!(field("say \"hi\""), "\"say \"\"hi\"\"\"");
    }
}
