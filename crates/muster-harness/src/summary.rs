//! One table of the real runs `hack/suite-real.sh` left in one or more directories: per
//! scheduler, each figure as the mean of its runs with the lowest and highest beside it, so a
//! difference between schedulers reads against the spread of each.
//!
//! A run is `PEER.json` (or `PEER.ROUND.json`, from `ROUNDS=N`) with `PEER[.ROUND].cost.json`
//! beside it; `jobs.json` is the scenario's jobs, not a run.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::Path;

use serde::Deserialize;

use crate::simreal::RealResult;
use crate::{Error, Result, read_json};

/// What the script measured around one run.
#[derive(Debug, Clone, Deserialize)]
struct Cost {
    scheduler_cpu_s: f64,
    apiserver_writes: f64,
}

/// One run of one scheduler.
struct Run {
    result: RealResult,
    cost: Option<Cost>,
}

/// The runs found in `dirs`, by scheduler.
fn runs(dirs: &[impl AsRef<Path>]) -> Result<BTreeMap<String, Vec<Run>>> {
    let mut by: BTreeMap<String, Vec<Run>> = BTreeMap::new();
    for dir in dirs {
        let dir = dir.as_ref();
        let entries = std::fs::read_dir(dir).map_err(|e| Error::file(dir, e))?;
        let mut names: Vec<String> =
            entries.filter_map(|e| e.ok()?.file_name().into_string().ok()).filter(|n| n.ends_with(".json")).collect();
        names.sort();
        for name in names {
            let stem = name.trim_end_matches(".json");
            if stem == "jobs" || stem.ends_with(".cost") || stem.ends_with(".calibration") {
                continue;
            }
            let peer = stem.split('.').next().unwrap_or(stem).to_string();
            let cost_file = dir.join(format!("{stem}.cost.json"));
            let cost = cost_file.exists().then(|| read_json(&cost_file)).transpose()?;
            by.entry(peer).or_default().push(Run { result: read_json(&dir.join(&name))?, cost });
        }
    }
    if by.is_empty() {
        return Err(Error::Input("no runs (PEER.json) in the directories given".into()));
    }
    Ok(by)
}

/// Mean, lowest and highest of the figures that exist: `mean (low-high)`, or the one value,
/// with `digits` decimals and `unit` after each; `-` when no run has it.
fn spread(xs: &[Option<f64>], digits: usize, unit: &str) -> String {
    let xs: Vec<f64> = xs.iter().flatten().copied().collect();
    let Some(low) = xs.iter().copied().reduce(f64::min) else { return "-".into() };
    let high = xs.iter().copied().fold(low, f64::max);
    let mean = xs.iter().sum::<f64>() / xs.len() as f64;
    if xs.len() == 1 {
        format!("{mean:.digits$}{unit}")
    } else {
        format!("{mean:.digits$}{unit} ({low:.digits$}{unit}-{high:.digits$}{unit})")
    }
}

/// The markdown table of the runs in `dirs`; makespans also as multiples of `lower_bound` (s).
pub fn table(dirs: &[impl AsRef<Path>], lower_bound: Option<f64>) -> Result<String> {
    let by = runs(dirs)?;
    let gpus = by.values().flatten().any(|r| r.result.occupancy.as_ref().is_some_and(|o| o.mean_util_gpu.is_some()));
    let (util, clog) = if gpus {
        ("GPU occupancy", "GPU-s held by partial gangs")
    } else {
        ("cpu occupancy", "core-s held by partial gangs")
    };
    let mut out = String::new();
    let lb = lower_bound.map_or(String::new(), |lb| format!(" x LB ({lb:.1} s) |"));
    let _ = writeln!(
        out,
        "| scheduler | runs | done / jobs | makespan s |{lb} last pod end s | wait mean s | wait p95 s | bounded \
         slowdown | {util} | {clog} | longest partial gang s | scheduler CPU s | apiserver writes |"
    );
    let _ = writeln!(
        out,
        "|---|---|---|---|{}---|---|---|---|---|---|---|---|---|",
        if lb.is_empty() { "" } else { "---|" }
    );
    for (peer, rs) in &by {
        let figure = |get: &dyn Fn(&Run) -> Option<f64>, digits, unit| {
            spread(&rs.iter().map(get).collect::<Vec<_>>(), digits, unit)
        };
        let f = |get: &dyn Fn(&Run) -> Option<f64>, digits| figure(get, digits, "");
        let done: Vec<String> = rs.iter().map(|r| format!("{}/{}", r.result.completed, r.result.jobs)).collect();
        let mut makespan = f(&|r| r.result.makespan_s, 0);
        if let Some(lb) = lower_bound {
            let _ = write!(makespan, " | {}", f(&|r| r.result.makespan_s.map(|m| m / lb), 2));
        }
        let waits = |get: fn(&crate::outcome::WaitStats) -> Option<f64>| {
            move |r: &Run| r.result.waits.as_ref().and_then(|w| get(&w.overall))
        };
        let occ = |r: &Run| r.result.occupancy.clone();
        let _ = writeln!(
            out,
            "| {peer} | {} | {} | {makespan} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            rs.len(),
            done.join(", "),
            f(&|r| r.result.last_pod_end_s(), 2),
            f(&waits(|w| w.mean_s), 1),
            f(&waits(|w| w.p95_s), 1),
            f(&waits(|w| w.bounded_slowdown), 2),
            figure(
                &|r| occ(r).map(|o| 100.0 * if gpus { o.mean_util_gpu.unwrap_or(0.0) } else { o.mean_util_cpu }),
                1,
                "%"
            ),
            f(
                &|r| r.result.partial_gangs.as_ref().map(|p| if gpus { p.gpu_s.unwrap_or(0.0) } else { p.cpu_core_s }),
                0
            ),
            f(&|r| r.result.partial_gangs.as_ref().and_then(|p| p.longest_s), 1),
            f(&|r| r.cost.as_ref().map(|c| c.scheduler_cpu_s), 1),
            f(&|r| r.cost.as_ref().map(|c| c.apiserver_writes), 0),
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spreads_read_as_mean_and_range() {
        assert_eq!(spread(&[Some(1.0), None, Some(3.0), Some(2.0)], 1, ""), "2.0 (1.0-3.0)");
        assert_eq!(spread(&[Some(61.25)], 1, "%"), "61.2%");
        assert_eq!(spread(&[None], 1, "%"), "-");
    }

    #[test]
    fn a_directory_of_runs_becomes_one_row_per_scheduler() {
        let dir = std::env::temp_dir().join(format!("muster-summary-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let run = |makespan: f64, gpu: f64| {
            serde_json::json!({
                "jobs": 2, "completed": 2, "failed": 0, "unfinished": 0, "makespan_s": makespan,
                "last_end_s": makespan, "first_submit_offset_s": 0.0, "submit_lag_s": {"mean": null, "max": null},
                "measured": {"job_to_last_pod_created_s": null, "last_pod_bound_to_all_ready_s": null,
                             "peak_pod_creates_per_s": 0.0, "peak_bindings_per_s": 0.0, "pods_seen": 0},
                "occupancy": {"mean_util_cpu": 0.5, "mean_util_memory": 0.5, "mean_util_gpu": gpu,
                              "clog_cpu_core_s": 0.0, "clog_memory_gib_s": 0.0, "clog_gpu_s": 10.0, "clog_share": 0.01},
                "partial_gangs": {"cpu_core_s": 1.0, "gpu_s": 10.0, "share": 0.01, "longest_s": makespan / 100.0}
            })
            .to_string()
        };
        // Runs with a timeline have the last pod's end to the millisecond.
        let with_timeline = |makespan: f64, gpu: f64| {
            let mut v: serde_json::Value = serde_json::from_str(&run(makespan, gpu)).unwrap();
            v["timeline"] = serde_json::json!([
                {"job": "a", "submitted_s": 0.0, "made_s": 0.5, "bound_s": 0.6, "running_s": 1.0,
                 "first_end_s": 90.0, "last_end_s": 99.25},
                {"job": "b", "submitted_s": 0.0, "made_s": null, "bound_s": null, "running_s": null,
                 "first_end_s": null, "last_end_s": null}
            ]);
            v.to_string()
        };
        std::fs::write(dir.join("muster.1.json"), with_timeline(100.0, 0.8)).unwrap();
        std::fs::write(dir.join("muster.2.json"), with_timeline(120.0, 0.6)).unwrap();
        std::fs::write(dir.join("muster.1.cost.json"), r#"{"scheduler_cpu_s": 4.0, "apiserver_writes": 10}"#).unwrap();
        std::fs::write(dir.join("kueue.json"), run(200.0, 0.4)).unwrap();
        std::fs::write(dir.join("jobs.json"), "[]").unwrap();
        let t = table(&[&dir], Some(100.0)).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        let rows: Vec<&str> = t.lines().collect();
        assert_eq!(rows.len(), 4, "{t}");
        assert_eq!(rows[0].matches('|').count(), rows[1].matches('|').count(), "{t}");
        assert!(rows[0].contains("GPU occupancy") && rows[0].contains("GPU-s held by partial gangs"), "{t}");
        assert_eq!(rows[2], "| kueue | 1 | 2/2 | 200 | 2.00 | - | - | - | - | 40.0% | 10 | 2.0 | - | - |");
        assert_eq!(
            rows[3],
            "| muster | 2 | 2/2, 2/2 | 110 (100-120) | 1.10 (1.00-1.20) | 99.25 (99.25-99.25) | - | - | - | 70.0% \
             (60.0%-80.0%) | 10 (10-10) | 1.1 (1.0-1.2) | 4.0 | 10 |"
        );
        assert!(table(&[std::env::temp_dir().join("muster-summary-none")], None).is_err());
    }
}
