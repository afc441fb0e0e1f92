//! From a run's record to its metrics. Percentiles use the nearest-rank method; every figure is
//! rounded to fixed decimals so output is byte-identical for the same inputs.

use std::collections::BTreeMap;

use muster_graph::names::is_qualified_resource;
use serde::{Deserialize, Serialize};

use crate::engine::RunRecord;

pub mod evictions;
pub mod jobs;
pub mod reservations;
pub mod tenants;
use crate::scenario::Workload;
use crate::scheduler::JobPhase;
pub use evictions::EvictionResult;
pub use reservations::ReservationResult;
pub use tenants::TenantResult;

/// Bounded slowdown's threshold: runs shorter than this count as this long (Feitelson's 10 s).
pub const SLOWDOWN_BOUND_MS: i64 = 10_000;

pub fn round3(x: f64) -> f64 {
    // + 0.0 turns the -0.0 of a sum a hair below zero into 0.0, which is what it means.
    (x * 1000.0).round() / 1000.0 + 0.0
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    pub count: usize,
    pub mean_s: f64,
    pub p50_s: f64,
    pub p95_s: f64,
    pub max_s: f64,
}

/// Nearest rank: the p-th percentile is the value at rank ceil(p/100 * n).
pub fn percentile(sorted: &[i64], p: f64) -> i64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil().max(1.0) as usize;
    sorted[rank.min(sorted.len()) - 1]
}

pub fn stats(values_ms: &[i64]) -> Stats {
    let mut v = values_ms.to_vec();
    v.sort_unstable();
    if v.is_empty() {
        return Stats::default();
    }
    let mean = v.iter().map(|x| *x as f64).sum::<f64>() / v.len() as f64;
    Stats {
        count: v.len(),
        mean_s: round3(mean / 1000.0),
        p50_s: round3(percentile(&v, 50.0) as f64 / 1000.0),
        p95_s: round3(percentile(&v, 95.0) as f64 / 1000.0),
        max_s: round3(*v.last().expect("non-empty") as f64 / 1000.0),
    }
}

/// max(1, (wait + run) / max(run, 10 s)), averaged.
pub fn bounded_slowdown(wait_run_ms: &[(i64, i64)]) -> f64 {
    if wait_run_ms.is_empty() {
        return 0.0;
    }
    let sum: f64 = wait_run_ms.iter().map(|&(w, r)| ((w + r) as f64 / r.max(SLOWDOWN_BOUND_MS) as f64).max(1.0)).sum();
    round3(sum / wait_run_ms.len() as f64)
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClassResult {
    pub class: String,
    pub probe: bool,
    pub jobs: usize,
    pub completed: usize,
    pub failed: usize,
    /// From submission to the start of the successful run, over completed jobs.
    pub wait: Stats,
    pub bounded_slowdown: f64,
    /// From submission until every pod of the job was bound; reported for probe classes.
    pub time_to_schedule: Option<Stats>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Utilization {
    pub sample_s: f64,
    /// Per sample: share of the cluster's cpu / memory held by pods.
    pub cpu: Vec<f64>,
    pub memory: Vec<f64>,
    /// The same for each extended resource the cluster has (GPUs and any other), by name.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub extended: BTreeMap<String, Vec<f64>>,
}

impl Utilization {
    /// Per sample, the largest share of any resource held: the cluster's scarce resource at
    /// that moment (GPUs on a GPU cluster), which a chart of its use shows.
    pub fn peak_shares(&self) -> Vec<f64> {
        let series = [&self.cpu, &self.memory].into_iter().chain(self.extended.values());
        let mut peak: Vec<f64> = vec![];
        for s in series {
            peak.resize(peak.len().max(s.len()), 0.0);
            for (p, v) in peak.iter_mut().zip(s) {
                *p = p.max(*v);
            }
        }
        peak
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunResult {
    pub scheduler: String,
    pub completed: usize,
    pub failed: usize,
    /// Neither completed nor failed when the run stopped (stuck, or the horizon came first).
    pub unfinished: usize,
    /// From time 0 to the last job's end; None when jobs were left unfinished.
    pub makespan_s: Option<f64>,
    pub end_s: f64,
    pub horizon_hit: bool,
    pub throughput_per_10min: f64,
    /// Jobs completed in each 10-minute window.
    pub throughput_series: Vec<u32>,
    pub wait: Stats,
    pub bounded_slowdown: f64,
    #[serde(flatten)]
    pub occupancy: Occupancy,
    pub suspensions: u64,
    /// Jobs with a topology constraint that ran, and those of them whose pods spanned more than
    /// one domain of its level; absent when no job has a constraint.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub topology: Option<TopologyResult>,
    /// Absent for schedulers that predict no starts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub estimates: Option<EstimateAccuracy>,
    pub events: u64,
    pub classes: Vec<ClassResult>,
    /// Per tenant's queue; empty when the scenario declares no tenants.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tenants: Vec<TenantResult>,
    /// Per calendar reservation; empty when the scenario declares none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub reservations: Vec<ReservationResult>,
    /// Every run cut short, in order; empty when none was.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub evictions: Vec<EvictionResult>,
    pub utilization: Utilization,
    /// End times of completed jobs, ascending.
    pub completion_times_s: Vec<f64>,
    /// Wait times of completed jobs, ascending.
    pub waits_s: Vec<f64>,
    /// Each job's outcome, in the scenario's order, when `RunOptions::jobs` asks for it (`muster
    /// sim --jobs`; not in the JSON); else empty.
    #[serde(skip)]
    pub jobs: Vec<jobs::JobOutcome>,
    /// Wall-clock time of the run; left out of every output so that output is reproducible.
    #[serde(skip)]
    pub wall_ms: u64,
}

/// How a run used the cluster: the share of each resource held by pods, and the resource-seconds
/// held by pods whose job was not running (a partial gang, or a whole one whose run has not
/// begun). muster-harness reports a real run's in the same shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Occupancy {
    pub mean_util_cpu: f64,
    pub mean_util_memory: f64,
    /// Share of the cluster's GPUs (`nvidia.com/gpu`) held by pods; absent without GPUs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_util_gpu: Option<f64>,
    pub clog_cpu_core_s: f64,
    pub clog_memory_gib_s: f64,
    /// Absent without GPUs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clog_gpu_s: Option<f64>,
    /// Largest of cpu, memory and GPUs: clogged resource-seconds / (capacity x run length).
    pub clog_share: f64,
    /// Share held of each extended resource other than GPUs, by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub mean_util_other: BTreeMap<String, f64>,
}

/// cpu, memory and GPUs, the resources [`Occupancy`] reports.
pub type PerResource = [f64; 3];

impl Occupancy {
    /// From what pods held and clogged over a run of `span_s` seconds, in base-unit seconds
    /// (millicore-s, byte-s, GPU-s), on a cluster of `capacity` (base units; a zero GPU
    /// capacity means the cluster has no GPUs).
    pub fn new(capacity: PerResource, held: PerResource, clog: PerResource, span_s: f64) -> Self {
        let share = |x: f64, r: usize| x / (capacity[r].max(1.0) * span_s.max(1e-3));
        let gpus = capacity[2] > 0.0;
        let shares = (0..3).filter(|r| *r < 2 || gpus).map(|r| share(clog[r], r));
        Occupancy {
            mean_util_cpu: round3(share(held[0], 0)),
            mean_util_memory: round3(share(held[1], 1)),
            mean_util_gpu: gpus.then(|| round3(share(held[2], 2))),
            clog_cpu_core_s: round3(clog[0] / 1000.0),
            clog_memory_gib_s: round3(clog[1] / (1024.0 * 1024.0 * 1024.0)),
            clog_gpu_s: gpus.then(|| round3(clog[2])),
            clog_share: round3(shares.fold(0.0, f64::max)),
            mean_util_other: BTreeMap::new(),
        }
    }
}

/// How well a scheduler's first predicted start foretold when each job was placed.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct EstimateAccuracy {
    /// Jobs given a predicted start while they waited.
    pub estimated: usize,
    /// Of those, the jobs placed after waiting at least a second: the ones compared.
    pub compared: usize,
    /// Median of |predicted start - placement| (s), placement being when all pods were bound.
    pub median_error_s: f64,
    /// Median of that error as a share of the job's wait (submission to placement).
    pub median_error_of_wait: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TopologyResult {
    pub constrained: usize,
    pub spread: usize,
}

/// The scarce resource of a GPU cluster, reported beside cpu and memory when a node has it.
const GPU: &str = "nvidia.com/gpu";

fn res(rec: &RunRecord, name: &str) -> Option<usize> {
    rec.resources.iter().position(|r| r == name)
}

pub fn summarize(w: &Workload, rec: &RunRecord) -> RunResult {
    let end = rec.end_ms.max(1);
    let mut completed_at = vec![];
    let mut waits = vec![];
    let mut wr = vec![];
    let mut classes: Vec<ClassResult> = w
        .classes
        .iter()
        .map(|c| ClassResult {
            class: c.name.clone(),
            probe: c.probe,
            jobs: 0,
            completed: 0,
            failed: 0,
            wait: Stats::default(),
            bounded_slowdown: 0.0,
            time_to_schedule: None,
        })
        .collect();
    let mut class_waits: Vec<Vec<i64>> = vec![vec![]; classes.len()];
    let mut class_wr: Vec<Vec<(i64, i64)>> = vec![vec![]; classes.len()];
    let mut class_sched: Vec<Vec<i64>> = vec![vec![]; classes.len()];
    let (mut completed, mut failed) = (0, 0);
    for j in &rec.jobs {
        let c = j.class_index;
        classes[c].jobs += 1;
        if let Some(s) = j.scheduled_ms {
            class_sched[c].push(s - j.submit_ms);
        }
        match j.phase {
            JobPhase::Succeeded => {
                completed += 1;
                classes[c].completed += 1;
                let (start, stop) = (j.run_started_ms.expect("ran"), j.ended_ms.expect("ended"));
                let wait = start - j.submit_ms;
                waits.push(wait);
                wr.push((wait, stop - start));
                class_waits[c].push(wait);
                class_wr[c].push((wait, stop - start));
                completed_at.push(stop);
            }
            JobPhase::Failed => {
                failed += 1;
                classes[c].failed += 1;
            }
            _ => {}
        }
    }
    for (i, c) in classes.iter_mut().enumerate() {
        c.wait = stats(&class_waits[i]);
        c.bounded_slowdown = bounded_slowdown(&class_wr[i]);
        if c.probe {
            c.time_to_schedule = Some(stats(&class_sched[i]));
        }
    }
    let unfinished = rec.jobs.len() - completed - failed;
    let last_end = rec.jobs.iter().filter_map(|j| j.ended_ms).max().unwrap_or(0);
    let makespan = (unfinished == 0).then_some(last_end);
    completed_at.sort_unstable();
    let windows = (end as usize).div_ceil(600_000);
    let mut series = vec![0u32; windows.max(1)];
    for t in &completed_at {
        series[(*t / 600_000) as usize] += 1;
    }
    let span = makespan.unwrap_or(end).max(1);
    let (cpu, mem, gpu) = (res(rec, "cpu"), res(rec, "memory"), res(rec, GPU));
    let sample = rec.sample_ms;
    let share = |r: Option<usize>| -> Vec<f64> {
        let Some(r) = r else { return vec![] };
        let cap = rec.capacity[r].max(1) as f64;
        rec.held
            .iter()
            .enumerate()
            .map(|(i, b)| {
                let len = (end - i as i64 * sample).clamp(1, sample) as f64;
                round3(b[r] / (len * cap))
            })
            .collect()
    };
    // Held and clogged base-unit milliseconds, in base-unit seconds.
    let per = |r: Option<usize>, f: &dyn Fn(usize) -> f64| r.map_or(0.0, |r| f(r) / 1000.0);
    let capacity = [cpu, mem, gpu].map(|r| r.map_or(0.0, |r| rec.capacity[r] as f64));
    let held = [cpu, mem, gpu].map(|r| per(r, &|r| rec.held.iter().map(|b| b[r]).sum()));
    let clog = [cpu, mem, gpu].map(|r| per(r, &|r| rec.clog[r]));
    let mut occupancy = Occupancy::new(capacity, held, clog, end as f64 / 1000.0);
    // Extended resources the cluster has: GPUs and any other (cpu, memory and the like are not).
    let extended: Vec<(usize, &String)> =
        rec.resources.iter().enumerate().filter(|(r, n)| is_qualified_resource(n) && rec.capacity[*r] > 0).collect();
    occupancy.mean_util_other = extended
        .iter()
        .filter(|(r, _)| Some(*r) != gpu)
        .map(|(r, n)| {
            let total: f64 = rec.held.iter().map(|b| b[*r]).sum();
            (n.to_string(), round3(total / (rec.capacity[*r] as f64 * end as f64)))
        })
        .collect();
    let mut waits_s: Vec<f64> = waits.iter().map(|w| round3(*w as f64 / 1000.0)).collect();
    waits_s.sort_by(f64::total_cmp);
    RunResult {
        scheduler: rec.scheduler.clone(),
        completed,
        failed,
        unfinished,
        makespan_s: makespan.map(|m| round3(m as f64 / 1000.0)),
        end_s: round3(rec.end_ms as f64 / 1000.0),
        horizon_hit: rec.horizon_hit,
        throughput_per_10min: round3(completed as f64 * 600_000.0 / span as f64),
        throughput_series: series,
        wait: stats(&waits),
        bounded_slowdown: bounded_slowdown(&wr),
        occupancy,
        suspensions: rec.suspensions,
        topology: {
            let ran: Vec<bool> = rec.jobs.iter().filter_map(|j| j.spread).collect();
            w.jobs
                .iter()
                .any(|j| j.topology.is_some())
                .then(|| TopologyResult { constrained: ran.len(), spread: ran.iter().filter(|s| **s).count() })
        },
        estimates: estimate_accuracy(rec),
        events: rec.events,
        tenants: tenants::summarize(w, rec),
        reservations: reservations::summarize(w, rec),
        evictions: evictions::list(w, rec),
        classes,
        utilization: Utilization {
            sample_s: round3(sample as f64 / 1000.0),
            cpu: share(cpu),
            memory: share(mem),
            extended: extended.iter().map(|(r, n)| (n.to_string(), share(Some(*r)))).collect(),
        },
        completion_times_s: completed_at.iter().map(|t| round3(*t as f64 / 1000.0)).collect(),
        waits_s,
        jobs: Vec::new(),
        wall_ms: 0,
    }
}

/// Compares each job's first predicted start with its placement, over jobs that waited.
fn estimate_accuracy(rec: &RunRecord) -> Option<EstimateAccuracy> {
    if !rec.estimates {
        return None;
    }
    let mut errors = vec![];
    let mut shares = vec![];
    for j in &rec.jobs {
        let (Some(predicted), Some(placed)) = (j.estimated_start_ms, j.scheduled_ms) else { continue };
        let wait = placed - j.submit_ms;
        if wait >= 1000 {
            let error = (predicted - placed).abs();
            errors.push(error);
            shares.push(error as f64 / wait as f64);
        }
    }
    errors.sort_unstable();
    shares.sort_by(f64::total_cmp);
    let median_share = match shares.len() {
        0 => 0.0,
        n => shares[n.div_ceil(2) - 1],
    };
    Some(EstimateAccuracy {
        estimated: rec.jobs.iter().filter(|j| j.estimated_start_ms.is_some()).count(),
        compared: errors.len(),
        median_error_s: round3(percentile(&errors, 50.0) as f64 / 1000.0),
        median_error_of_wait: round3(median_share),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounding_never_prints_minus_zero() {
        assert_eq!(round3(1.23456), 1.235);
        assert!(round3(-1e-9).is_sign_positive(), "a sum a hair below zero is 0, not -0");
        assert_eq!(format!("{:.1}", round3(-1e-12)), "0.0");
        assert_eq!(round3(-0.5), -0.5);
    }

    #[test]
    fn nearest_rank_percentiles_and_slowdown() {
        let v = [1000, 2000, 3000, 4000, 10_000];
        let s = stats(&v);
        assert_eq!((s.count, s.mean_s, s.p50_s, s.p95_s, s.max_s), (5, 4.0, 3.0, 10.0, 10.0));
        assert_eq!(percentile(&[5], 95.0), 5);
        // (0+5)/10 -> 1 (bounded); (30+30)/30 = 2; (10+100)/100 = 1.1 -> mean 4.1/3.
        assert_eq!(bounded_slowdown(&[(0, 5_000), (30_000, 30_000), (10_000, 100_000)]), round3(4.1 / 3.0));
    }
}
