//! A suite: several scenarios under the same schedulers, summed up in one table per measure (what
//! `muster sim` prints by default, so the difference between schedulers shows at a glance).

use std::fmt::Write;

use crate::metrics::RunResult;
use crate::report::{Report, aligned, f};

/// Three tables with a row per scenario and a column per scheduler: makespan over the scenario's
/// lower bound, mean bounded slowdown, and the longest wait; a fourth for the scenarios with
/// topology constraints: how many constrained jobs ran spread. A scheduler that left jobs unfinished
/// reads "never" with how many of them completed; failed jobs (deadline passed) are counted beside
/// the figure, which then flatters it: a failed job stops early.
pub fn render_table(reports: &[Report]) -> String {
    let schedulers: Vec<String> =
        reports.first().map(|r| r.runs.iter().map(|x| x.scheduler.clone()).collect()).unwrap_or_default();
    let table_of = |title: &str, reports: &[&Report], cell: &dyn Fn(&Report, &RunResult) -> String| {
        let mut head = vec!["SCENARIO".to_string(), "JOBS".into(), "LOWER BOUND (s)".into()];
        head.extend(schedulers.iter().map(|s| s.to_uppercase()));
        let rows: Vec<Vec<String>> = reports
            .iter()
            .map(|&rep| {
                let mut row = vec![rep.scenario.clone(), rep.jobs.to_string(), f(rep.lower_bound_s, 1)];
                row.extend(rep.runs.iter().map(|run| match (run.makespan_s, run.failed) {
                    (None, _) => format!("never ({}/{})", run.completed, rep.jobs),
                    (Some(_), 0) => cell(rep, run),
                    (Some(_), failed) => format!("{} ({failed} failed)", cell(rep, run)),
                }));
                row
            })
            .collect();
        format!("{title}\n{}", aligned(&head, &rows))
    };
    let all: Vec<&Report> = reports.iter().collect();
    let table = |title: &str, cell: &dyn Fn(&Report, &RunResult) -> String| table_of(title, &all, cell);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}",
        table("makespan / lower bound (1.00 is a perfect schedule)", &|rep, run| {
            f(run.makespan_s.unwrap_or_default() / rep.lower_bound_s.max(1e-9), 2)
        })
    );
    let _ = writeln!(
        out,
        "{}",
        table("mean bounded slowdown ((wait + run) / run; 1.00 is no wait)", &|_, run| f(run.bounded_slowdown, 2))
    );
    out.push_str(&table("longest wait (s)", &|_, run| f(run.wait.max_s, 0)));
    let constrained: Vec<&Report> = reports.iter().filter(|r| r.runs.iter().any(|x| x.topology.is_some())).collect();
    if !constrained.is_empty() {
        let spread = |_: &Report, run: &RunResult| {
            run.topology.map_or("-".into(), |t| format!("{} / {}", t.spread, t.constrained))
        };
        let _ = write!(
            out,
            "\n{}",
            table_of("jobs with a topology constraint run spread across domains / run", &constrained, &spread)
        );
    }
    out
}
