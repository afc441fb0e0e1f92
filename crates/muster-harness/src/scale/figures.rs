//! The figures of a run, from what the watches saw: bind rates, node use, Job starts.

use super::*;

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BindDetail {
    pub first_bind_seconds: f64,
    pub last_bind_seconds: f64,
    pub pods_bound_per_second: f64,
    pub pods_bound_per_second_between_first_and_last: Option<f64>,
    pub pods_bound_per_second_best10s: f64,
    /// From when a pod could be placed (seen, or released) to bound.
    pub wait_to_bind_seconds: Option<Quantiles>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BindFigures {
    pub pods_bound: usize,
    #[serde(flatten)]
    pub detail: Option<BindDetail>,
}

/// Pods bound per second: overall from `t0` (the first create request, or the release of a held
/// burst), between the first and the last bind, and the best 10 s window; and each pod's wait.
pub fn bind_figures(pods: &[PodLife], t0: f64) -> BindFigures {
    let mut binds: Vec<f64> = pods.iter().filter_map(|p| p.bound).collect();
    binds.sort_by(f64::total_cmp);
    let (Some(&first), Some(&last)) = (binds.first(), binds.last()) else {
        return BindFigures { pods_bound: 0, detail: None };
    };
    let span = last - first;
    // Over a burst shorter than 10 s the best window is the whole burst.
    let window = if span.min(10.0) == 0.0 { 1.0 } else { span.min(10.0) };
    let (mut best, mut j) = (0usize, 0usize);
    for (i, b) in binds.iter().enumerate() {
        while binds[j] < b - window {
            j += 1;
        }
        best = best.max(i - j + 1);
    }
    let n = binds.len();
    BindFigures {
        pods_bound: n,
        detail: Some(BindDetail {
            first_bind_seconds: round(first - t0, 3),
            last_bind_seconds: round(last - t0, 3),
            pods_bound_per_second: round(n as f64 / (last - t0).max(1e-3), 1),
            pods_bound_per_second_between_first_and_last: (span > 0.0).then(|| round((n - 1) as f64 / span, 1)),
            pods_bound_per_second_best10s: round(best as f64 / window, 1),
            wait_to_bind_seconds: quantiles(pods.iter().filter_map(|p| p.bound.map(|b| b - p.seen.max(t0))).collect()),
        }),
    }
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeFigures {
    pub nodes: usize,
    pub nodes_used: usize,
    pub pods_per_node_capacity: i64,
    pub peak_pods_on_a_node: i64,
    pub peak_cpu_fraction_on_a_node: Option<f64>,
    pub peak_pods_running: i64,
    pub cluster_pod_capacity: Option<i64>,
    pub overcommitted_nodes: usize,
    pub overcommit_events: usize,
}

/// The peak use of the nodes against their allocatable, for pods of `pod_cpu` / `pod_mem`.
pub fn node_figures(t: &Tracker, pod_cpu: i64, pod_mem: i64) -> NodeFigures {
    let fits = |a: &Amounts| {
        let by_cpu = if pod_cpu > 0 { a.cpu / pod_cpu } else { a.pods };
        let by_mem = if pod_mem > 0 { a.mem / pod_mem } else { a.pods };
        by_cpu.min(by_mem).min(a.pods)
    };
    let used: Vec<(&String, &Amounts)> = t.peak.iter().filter(|(_, pk)| pk.pods > 0).collect();
    // A node outside the selector counts against 1 cpu (and then has no fraction).
    let frac = |n: &String, pk: &Amounts| pk.cpu as f64 / t.alloc.get(n).map_or(1000, |a| a.cpu).max(1) as f64;
    let worst = used.iter().max_by(|a, b| frac(a.0, a.1).total_cmp(&frac(b.0, b.1)));
    let over: std::collections::BTreeSet<&String> = t.over.iter().map(|o| &o.1).collect();
    NodeFigures {
        nodes: t.alloc.len(),
        nodes_used: used.len(),
        pods_per_node_capacity: t.alloc.values().map(fits).min().unwrap_or(0),
        peak_pods_on_a_node: used.iter().map(|(_, pk)| pk.pods).max().unwrap_or(0),
        peak_cpu_fraction_on_a_node: worst
            .and_then(|(n, pk)| t.alloc.get(*n).map(|a| round(pk.cpu as f64 / a.cpu.max(1) as f64, 3))),
        peak_pods_running: t.peak_running,
        cluster_pod_capacity: (pod_cpu > 0 && pod_mem > 0).then(|| t.alloc.values().map(fits).sum()),
        overcommitted_nodes: over.len(),
        overcommit_events: t.over.len(),
    }
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JobStartFigures {
    pub start_to_pods_created_seconds_completed: Option<Quantiles>,
    pub start_to_all_ready_seconds_completed: Option<Quantiles>,
    pub start_to_pods_created_seconds_failed: Option<Quantiles>,
    pub start_to_all_ready_seconds_failed: Option<Quantiles>,
}

/// From a Job's start (its deadline's clock) to its last pod created and to its all-ready stamp,
/// for the Jobs that completed and those that failed: where a deadline went.
pub fn job_start_figures(
    jobs: &HashMap<&str, JobLife>,
    pods: &[PodLife],
    complete: &[&str],
    failed: &[&str],
) -> JobStartFigures {
    let (mut last_created, mut all_ready) = (HashMap::new(), HashMap::new());
    for p in pods {
        if let Some(j) = p.job.as_deref() {
            let e = last_created.entry(j).or_insert(0.0f64);
            *e = e.max(p.seen);
            if let Some(a) = p.all_ready {
                all_ready.insert(j, a);
            }
        }
    }
    let figures = |names: &[&str]| {
        let started: Vec<(&str, f64)> = names.iter().filter_map(|n| jobs[n].start.map(|s| (*n, s))).collect();
        let since =
            |m: &HashMap<&str, f64>| quantiles(started.iter().filter_map(|(n, s)| m.get(n).map(|t| t - s)).collect());
        (since(&last_created), since(&all_ready))
    };
    let (c1, c2) = figures(complete);
    let (f1, f2) = figures(failed);
    JobStartFigures {
        start_to_pods_created_seconds_completed: c1,
        start_to_all_ready_seconds_completed: c2,
        start_to_pods_created_seconds_failed: f1,
        start_to_all_ready_seconds_failed: f2,
    }
}
