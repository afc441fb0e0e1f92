//! The comparison of one scenario across schedulers: a side-by-side table, JSON and CSV.

use std::collections::BTreeSet;
use std::fmt::Write;

use serde::Serialize;

use crate::metrics::{RunResult, Stats};

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClusterSummary {
    pub name: String,
    pub nodes: usize,
    pub cpu_cores: f64,
    pub memory_gib: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IdealResult {
    /// Jobs whose gang fits the empty cluster (all of them complete in the ideal schedule).
    pub completed: usize,
    /// Jobs larger than the cluster.
    pub infeasible: usize,
    pub makespan_s: f64,
    pub wait: Stats,
    pub bounded_slowdown: f64,
    /// End times of its jobs, ascending.
    pub completion_times_s: Vec<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    pub scenario: String,
    pub description: String,
    pub seed: u64,
    pub cluster: ClusterSummary,
    pub jobs: usize,
    pub ideal_fifo_gang: IdealResult,
    /// max(total work / capacity, longest submit + run time).
    pub lower_bound_s: f64,
    pub runs: Vec<RunResult>,
}

pub(crate) fn f(x: f64, d: usize) -> String {
    format!("{x:.d$}")
}

/// Columns padded to their widest cell: the first left-aligned, the others right-aligned.
pub(crate) fn aligned(head: &[String], rows: &[Vec<String>]) -> String {
    let widths: Vec<usize> =
        (0..head.len()).map(|c| rows.iter().map(|r| r[c].len()).chain([head[c].len()]).max().unwrap_or(0)).collect();
    let line = |cells: &[String]| {
        let mut s = format!("{:<w$}", cells[0], w = widths[0]);
        for (k, cell) in cells.iter().enumerate().skip(1) {
            let _ = write!(s, "  {:>w$}", cell, w = widths[k]);
        }
        s
    };
    let mut out = String::new();
    let _ = writeln!(out, "{}", line(head));
    for r in rows {
        let _ = writeln!(out, "{}", line(r));
    }
    out
}

impl Report {
    /// Rows are metrics, columns the ideal FIFO gang schedule and each scheduler.
    pub fn render_table(&self) -> String {
        let mut head = vec!["metric".to_string(), "ideal-fifo".to_string()];
        head.extend(self.runs.iter().map(|r| r.scheduler.clone()));
        let mut rows: Vec<Vec<String>> = vec![];
        let mut row = |name: &str, ideal: String, each: &dyn Fn(&RunResult) -> String| {
            let mut r = vec![name.to_string(), ideal];
            r.extend(self.runs.iter().map(each));
            rows.push(r);
        };
        let i = &self.ideal_fifo_gang;
        let dash = || "-".to_string();
        row("jobs completed", i.completed.to_string(), &|r| r.completed.to_string());
        row("jobs failed", "0".into(), &|r| r.failed.to_string());
        row("jobs unfinished", i.infeasible.to_string(), &|r| {
            if r.horizon_hit { format!("{} (horizon)", r.unfinished) } else { r.unfinished.to_string() }
        });
        row("makespan (s)", f(i.makespan_s, 1), &|r| r.makespan_s.map_or("never".into(), |m| f(m, 1)));
        let ideal_tp = if i.makespan_s > 0.0 { i.completed as f64 * 600.0 / i.makespan_s } else { 0.0 };
        row("throughput (jobs/10 min)", f(ideal_tp, 1), &|r| f(r.throughput_per_10min, 1));
        row("wait mean (s)", f(i.wait.mean_s, 1), &|r| f(r.wait.mean_s, 1));
        row("wait p50 (s)", f(i.wait.p50_s, 1), &|r| f(r.wait.p50_s, 1));
        row("wait p95 (s)", f(i.wait.p95_s, 1), &|r| f(r.wait.p95_s, 1));
        row("wait max (s)", f(i.wait.max_s, 1), &|r| f(r.wait.max_s, 1));
        row("bounded slowdown", f(i.bounded_slowdown, 2), &|r| f(r.bounded_slowdown, 2));
        row("cpu util mean (%)", dash(), &|r| f(r.occupancy.mean_util_cpu * 100.0, 1));
        row("memory util mean (%)", dash(), &|r| f(r.occupancy.mean_util_memory * 100.0, 1));
        if self.runs.iter().any(|r| r.occupancy.mean_util_gpu.is_some()) {
            row("gpu util mean (%)", dash(), &|r| r.occupancy.mean_util_gpu.map_or(dash(), |u| f(u * 100.0, 1)));
        }
        let others: BTreeSet<&String> = self.runs.iter().flat_map(|r| r.occupancy.mean_util_other.keys()).collect();
        for name in others {
            let util = |r: &RunResult| r.occupancy.mean_util_other.get(name).map_or(dash(), |u| f(u * 100.0, 1));
            row(&format!("{name} util mean (%)"), dash(), &util);
        }
        row("clog cpu (core-h)", "0.0".into(), &|r| f(r.occupancy.clog_cpu_core_s / 3600.0, 1));
        row("clog memory (GiB-h)", "0.0".into(), &|r| f(r.occupancy.clog_memory_gib_s / 3600.0, 1));
        if self.runs.iter().any(|r| r.occupancy.clog_gpu_s.is_some()) {
            row("clog gpu (GPU-h)", "0.0".into(), &|r| r.occupancy.clog_gpu_s.map_or(dash(), |c| f(c / 3600.0, 1)));
        }
        row("clog share (%)", "0.0".into(), &|r| f(r.occupancy.clog_share * 100.0, 2));
        row("evictions", "0".into(), &|r| r.suspensions.to_string());
        if self.runs.iter().any(|r| r.topology.is_some()) {
            row("topology: ran spread / constrained", "-".into(), &|r| {
                r.topology.map_or(dash(), |t| format!("{} / {}", t.spread, t.constrained))
            });
        }
        if self.runs.iter().any(|r| r.estimates.is_some()) {
            row("estimated start: jobs estimated / compared", dash(), &|r| {
                r.estimates.map_or(dash(), |e| format!("{} / {}", e.estimated, e.compared))
            });
            row("estimated start: median error (s / % of wait)", dash(), &|r| {
                r.estimates.map_or(dash(), |e| {
                    format!("{} / {}", f(e.median_error_s, 1), f(e.median_error_of_wait * 100.0, 1))
                })
            });
        }
        row("events", dash(), &|r| r.events.to_string());
        let classes = self.runs.first().map(|r| r.classes.clone()).unwrap_or_default();
        for (k, c) in classes.iter().enumerate() {
            let name = &c.class;
            row(&format!("{name}: completed / failed"), dash(), &|r| {
                format!("{} / {}", r.classes[k].completed, r.classes[k].failed)
            });
            row(&format!("{name}: wait mean / p95 (s)"), dash(), &|r| {
                format!("{} / {}", f(r.classes[k].wait.mean_s, 1), f(r.classes[k].wait.p95_s, 1))
            });
            if c.probe {
                let tts = |r: &RunResult| r.classes[k].time_to_schedule.clone().unwrap_or_default();
                row(&format!("{name}: time to schedule p50 / p95 / max (s)"), dash(), &|r| {
                    let s = tts(r);
                    format!("{} / {} / {}", f(s.p50_s, 2), f(s.p95_s, 2), f(s.max_s, 2))
                });
            }
        }
        let tenants = self.runs.first().map(|r| r.tenants.clone()).unwrap_or_default();
        for (k, t) in tenants.iter().enumerate() {
            let name = &t.queue;
            let unit = if t.resource == "cpu" { "core" } else { "GPU" };
            row(&format!("{name}: completed / jobs"), dash(), &|r| {
                format!("{} / {}", r.tenants[k].completed, r.tenants[k].jobs)
            });
            row(&format!("{name}: shortfall ({unit}-h / % of entitled)"), dash(), &|r| {
                let t = &r.tenants[k];
                format!("{} / {}", f(t.shortfall_h, 1), f(t.shortfall_share * 100.0, 1))
            });
            row(&format!("{name}: wait within quota p50 / max (s)"), dash(), &|r| {
                let w = &r.tenants[k].wait_within_quota;
                format!("{} / {}", f(w.p50_s, 1), f(w.max_s, 1))
            });
            row(&format!("{name}: work lost ({unit}-h) / evictions"), dash(), &|r| {
                format!("{} / {}", f(r.tenants[k].lost_h, 1), r.tenants[k].evictions)
            });
        }
        let reservations = self.runs.first().map(|r| r.reservations.clone()).unwrap_or_default();
        for (k, v) in reservations.iter().enumerate() {
            let name = &v.reservation;
            let unit = if v.resource == "cpu" { "core" } else { "GPU" };
            let of = |r: &RunResult| r.reservations[k].clone();
            row(&format!("{name}: held / windows / users' jobs"), dash(), &|r| {
                let v = of(r);
                format!("{} / {} / {}", if v.held { "yes" } else { "no" }, v.windows, v.jobs)
            });
            row(&format!("{name}: start delay p50 / max (s)"), "0.0 / 0.0".into(), &|r| {
                let d = of(r).start_delay;
                format!("{} / {}", f(d.p50_s, 1), f(d.max_s, 1))
            });
            row(&format!("{name}: others on its room ({unit}-s)"), "0.0".into(), &|r| f(of(r).others_on_room_s, 1));
            row(&format!("{name}: room idle ({unit}-h)"), dash(), &|r| f(of(r).idle_h, 1));
            row(&format!("{name}: evictions at window start"), "0".into(), &|r| of(r).evictions.to_string());
        }
        let mut out = String::new();
        let c = &self.cluster;
        let _ = writeln!(
            out,
            "scenario {} (seed {}): {} jobs on {} ({} nodes, {} cpu, {} GiB)",
            self.scenario,
            self.seed,
            self.jobs,
            c.name,
            c.nodes,
            f(c.cpu_cores, 0),
            f(c.memory_gib, 0)
        );
        out.push_str(&aligned(&head, &rows));
        let _ = writeln!(
            out,
            "lower bound on makespan: {} s (max of total work / capacity and the latest job's submit + run time)",
            f(self.lower_bound_s, 1)
        );
        if !reservations.is_empty() {
            let _ = writeln!(
                out,
                "calendar reservations: held by muster's models only (not under --ignore-reservations); the peers have none and run the same jobs without them"
            );
        }
        out
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("report serializes") + "\n"
    }

    /// A line per job and scheduler ([`crate::metrics::jobs::CSV_HEADER`]), without the header.
    pub fn jobs_csv(&self) -> String {
        let mut out = String::new();
        for r in &self.runs {
            for j in &r.jobs {
                crate::metrics::jobs::csv_row(&mut out, &self.scenario, &r.scheduler, j);
            }
        }
        out
    }

    /// Long format: scheduler,class,metric,value (class `*` for whole-run metrics).
    pub fn to_csv(&self) -> String {
        let mut out = String::from("scheduler,class,metric,value\n");
        let mut put = |s: &str, c: &str, m: &str, v: String| {
            let _ = writeln!(out, "{s},{c},{m},{v}");
        };
        let i = &self.ideal_fifo_gang;
        put("ideal-fifo", "*", "completed", i.completed.to_string());
        put("ideal-fifo", "*", "makespan_s", f(i.makespan_s, 3));
        put("ideal-fifo", "*", "wait_mean_s", f(i.wait.mean_s, 3));
        put("ideal-fifo", "*", "wait_p95_s", f(i.wait.p95_s, 3));
        put("ideal-fifo", "*", "bounded_slowdown", f(i.bounded_slowdown, 3));
        put("lower-bound", "*", "makespan_s", f(self.lower_bound_s, 3));
        for r in &self.runs {
            let s = r.scheduler.as_str();
            put(s, "*", "completed", r.completed.to_string());
            put(s, "*", "failed", r.failed.to_string());
            put(s, "*", "unfinished", r.unfinished.to_string());
            put(s, "*", "makespan_s", r.makespan_s.map_or(String::new(), |m| f(m, 3)));
            put(s, "*", "throughput_per_10min", f(r.throughput_per_10min, 3));
            put(s, "*", "wait_mean_s", f(r.wait.mean_s, 3));
            put(s, "*", "wait_p50_s", f(r.wait.p50_s, 3));
            put(s, "*", "wait_p95_s", f(r.wait.p95_s, 3));
            put(s, "*", "wait_max_s", f(r.wait.max_s, 3));
            put(s, "*", "bounded_slowdown", f(r.bounded_slowdown, 3));
            put(s, "*", "util_cpu_mean", f(r.occupancy.mean_util_cpu, 3));
            put(s, "*", "util_memory_mean", f(r.occupancy.mean_util_memory, 3));
            if let Some(u) = r.occupancy.mean_util_gpu {
                put(s, "*", "util_gpu_mean", f(u, 3));
            }
            for (name, u) in &r.occupancy.mean_util_other {
                put(s, "*", &format!("util_mean[{name}]"), f(*u, 3));
            }
            put(s, "*", "clog_cpu_core_s", f(r.occupancy.clog_cpu_core_s, 3));
            put(s, "*", "clog_memory_gib_s", f(r.occupancy.clog_memory_gib_s, 3));
            if let Some(c) = r.occupancy.clog_gpu_s {
                put(s, "*", "clog_gpu_s", f(c, 3));
            }
            put(s, "*", "clog_share", f(r.occupancy.clog_share, 3));
            put(s, "*", "evictions", r.suspensions.to_string());
            if let Some(e) = r.estimates {
                put(s, "*", "estimated_jobs", e.estimated.to_string());
                put(s, "*", "estimate_compared_jobs", e.compared.to_string());
                put(s, "*", "estimate_median_error_s", f(e.median_error_s, 3));
                put(s, "*", "estimate_median_error_of_wait", f(e.median_error_of_wait, 3));
            }
            put(s, "*", "events", r.events.to_string());
            for c in &r.classes {
                put(s, &c.class, "completed", c.completed.to_string());
                put(s, &c.class, "failed", c.failed.to_string());
                put(s, &c.class, "wait_mean_s", f(c.wait.mean_s, 3));
                put(s, &c.class, "wait_p50_s", f(c.wait.p50_s, 3));
                put(s, &c.class, "wait_p95_s", f(c.wait.p95_s, 3));
                put(s, &c.class, "wait_max_s", f(c.wait.max_s, 3));
                put(s, &c.class, "bounded_slowdown", f(c.bounded_slowdown, 3));
                if let Some(t) = &c.time_to_schedule {
                    put(s, &c.class, "time_to_schedule_p50_s", f(t.p50_s, 3));
                    put(s, &c.class, "time_to_schedule_p95_s", f(t.p95_s, 3));
                    put(s, &c.class, "time_to_schedule_max_s", f(t.max_s, 3));
                }
            }
            // Tenants' rows name the queue in the class column, prefixed so that no class is
            // mistaken for one.
            for t in &r.tenants {
                let q = format!("queue:{}", t.queue);
                put(s, &q, "completed", t.completed.to_string());
                put(s, &q, "entitled_h", f(t.entitled_h, 3));
                put(s, &q, "held_h", f(t.held_h, 3));
                put(s, &q, "shortfall_h", f(t.shortfall_h, 3));
                put(s, &q, "shortfall_share", f(t.shortfall_share, 3));
                put(s, &q, "wait_within_quota_p50_s", f(t.wait_within_quota.p50_s, 3));
                put(s, &q, "wait_within_quota_max_s", f(t.wait_within_quota.max_s, 3));
                put(s, &q, "lost_h", f(t.lost_h, 3));
                put(s, &q, "evictions", t.evictions.to_string());
            }
            for v in &r.reservations {
                let q = format!("reservation:{}", v.reservation);
                put(s, &q, "held", v.held.to_string());
                put(s, &q, "windows", v.windows.to_string());
                put(s, &q, "jobs", v.jobs.to_string());
                put(s, &q, "start_delay_p50_s", f(v.start_delay.p50_s, 3));
                put(s, &q, "start_delay_max_s", f(v.start_delay.max_s, 3));
                put(s, &q, "others_on_room_s", f(v.others_on_room_s, 3));
                put(s, &q, "idle_h", f(v.idle_h, 3));
                put(s, &q, "evictions", v.evictions.to_string());
            }
        }
        out
    }
}
