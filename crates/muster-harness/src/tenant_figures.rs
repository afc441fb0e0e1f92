//! Per tenant, from a real run: how far its share fell short of its entitlement, how long its
//! jobs waited for quota it was guaranteed, the work it lost to evictions and how many it had.
//! The run is turned into the simulator's record ([`RunRecord`]) from the pod watch ([`Ledger`])
//! and the Jobs, and measured by the simulator's own code
//! ([`muster_sim::metrics::tenants::summarize`]), so the figures are defined as the sim's.
//!
//! From the watch (sub-second): a pod's requests count as its tenant's share while its job runs
//! (at least its gang's size of its pods Ready at once) and the pod is Ready, until the event that
//! shows it ended, as the simulator counts only running jobs' room; a job is placed when its gang's last member is first seen bound
//! (the sim's `scheduled_ms`) and ends with its Job's Complete or Failed condition (1 s). A pod
//! that ended without succeeding after it was bound was evicted: the work lost is its requests
//! times how long it had been Ready, and the ends of one job's evicted pods within
//! [`EVICTION_GAP_S`] of each other are one eviction.

use std::collections::HashMap;

use k8s_openapi::api::batch::v1::Job;
use muster_sim::engine::{JobRecord as SimJob, RunRecord};
use muster_sim::metrics::{PerResource, TenantResult};
use muster_sim::scenario::Workload;
use muster_sim::scheduler::JobPhase;
use muster_sim::tenant_meter::TenantRecord;

use crate::occupancy::{Ledger, PodSpan, RESOURCES, nth};
use crate::simreal::{JobState, job_end};
use crate::workload::JobRecord;

/// Buckets of the held resources, as the simulator samples them.
const SAMPLE_MS: i64 = 1000;
/// Evicted pods of one job that end this close together went in one eviction.
pub const EVICTION_GAP_S: f64 = 2.0;

/// The per-tenant figures of a real run whose scenario time 0 is `t0` and which was measured up to
/// `to` (seconds since the epoch); empty without tenants. `jobs` are the run's records, in the
/// workload's order; `items` its Jobs as read at the end.
pub fn tenant_figures(
    w: &Workload,
    jobs: &[JobRecord],
    ledger: &Ledger,
    items: &[Job],
    capacity: PerResource,
    t0: f64,
    to: f64,
) -> Vec<TenantResult> {
    if w.tenants.is_empty() {
        return vec![];
    }
    muster_sim::metrics::tenants::summarize(w, &record(w, jobs, ledger, items, capacity, t0, to))
}

/// The real run as the simulator's record: what the per-tenant measures read of it.
fn record(
    w: &Workload,
    jobs: &[JobRecord],
    ledger: &Ledger,
    items: &[Job],
    capacity: PerResource,
    t0: f64,
    to: f64,
) -> RunRecord {
    let ms = |t: f64| ((t - t0) * 1000.0).round() as i64;
    let end_ms = ms(to).max(1);
    let buckets = (end_ms as usize).div_ceil(SAMPLE_MS as usize).max(1);
    let queues = w.tenants.queues.len();
    let tenant_of: HashMap<&str, usize> =
        jobs.iter().filter_map(|j| Some((j.name.as_str(), w.tenants.index_of(j.tenant.as_deref()?)?))).collect();
    let mut pods_of: HashMap<&str, Vec<&PodSpan>> = HashMap::new();
    for p in ledger.pods.values() {
        if let Some(job) = p.job.as_deref() {
            pods_of.entry(job).or_default().push(p);
        }
    }
    let ends: HashMap<&str, (JobState, Option<f64>)> =
        items.iter().filter_map(|j| Some((j.metadata.name.as_deref()?, job_end(j)))).collect();
    let mut tenants = TenantRecord {
        held: vec![vec![vec![0.0; RESOURCES.len()]; queues]; buckets],
        lost: vec![vec![0.0; RESOURCES.len()]; queues],
        evictions: vec![0; queues],
    };
    let mut sim_jobs = Vec::with_capacity(jobs.len());
    for j in jobs {
        let pods = pods_of.get(j.name.as_str()).map_or(&[][..], Vec::as_slice);
        let (state, end) = ends.get(j.name.as_str()).copied().unwrap_or((JobState::Active, None));
        let placed = nth(pods.iter().map(|p| p.bound), j.min());
        sim_jobs.push(SimJob {
            class_index: 0,
            submit_ms: j.submit_ms,
            scheduled_ms: placed.map(ms),
            run_started_ms: nth(pods.iter().map(|p| p.ready), j.min()).map(ms),
            ended_ms: end.map(ms),
            phase: match state {
                JobState::Complete => JobPhase::Succeeded,
                JobState::Failed => JobPhase::Failed,
                JobState::Active if placed.is_some() => JobPhase::Running,
                JobState::Active => JobPhase::Suspended,
            },
            starts: 0,
            spread: None,
            estimated_start_ms: None,
        });
        let Some(&q) = tenant_of.get(j.name.as_str()) else { continue };
        let running = running_spans(pods, j.min(), to);
        let mut evicted_at = vec![];
        for p in pods {
            if p.bound.is_none() {
                continue;
            }
            let end = p.end.unwrap_or(to).min(to);
            if let Some(ready) = p.ready {
                for (from, until) in &running {
                    let (a, b) = (ready.max(*from), end.min(*until));
                    if a < b {
                        hold(&mut tenants.held[..], q, &p.requests, ms(a), ms(b));
                    }
                }
            }
            if p.end.is_some() && !p.succeeded {
                let ran_ms = p.ready.map_or(0.0, |r| (end - r).max(0.0) * 1000.0);
                for (lost, r) in tenants.lost[q].iter_mut().zip(p.requests) {
                    *lost += r * ran_ms;
                }
                evicted_at.push(end);
            }
        }
        evicted_at.sort_by(f64::total_cmp);
        tenants.evictions[q] += evicted_at.windows(2).filter(|w| w[1] - w[0] > EVICTION_GAP_S).count() as u64
            + u64::from(!evicted_at.is_empty());
    }
    RunRecord {
        scheduler: "real".into(),
        jobs: sim_jobs,
        end_ms,
        sample_ms: SAMPLE_MS,
        capacity: capacity.iter().map(|c| *c as u64).collect(),
        resources: RESOURCES.iter().map(|r| r.to_string()).collect(),
        held: vec![],
        clog: vec![0.0; RESOURCES.len()],
        events: 0,
        suspensions: 0,
        horizon_hit: false,
        estimates: false,
        tenants,
        reservations: vec![],
        evictions: vec![],
    }
}

/// When a job ran: the spans in which at least `size` of its pods were Ready at once (a gang
/// starting, or one left partial by an eviction, does no work with what it holds).
fn running_spans(pods: &[&PodSpan], size: u32, to: f64) -> Vec<(f64, f64)> {
    let mut steps: Vec<(f64, i32)> =
        pods.iter().filter_map(|p| Some([(p.ready?, 1), (p.end.unwrap_or(to).min(to), -1)])).flatten().collect();
    // In time order; at one instant an end before a Ready.
    steps.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let (mut ready, mut since, mut spans) = (0i32, None, vec![]);
    for (t, step) in steps {
        ready += step;
        match (since, ready >= size.max(1) as i32) {
            (None, true) => since = Some(t),
            (Some(from), false) => {
                spans.push((from, t));
                since = None;
            }
            _ => {}
        }
    }
    spans
}

/// Adds `requests` held over [`from`, `to`) ms to queue `q`'s buckets.
fn hold(held: &mut [Vec<Vec<f64>>], q: usize, requests: &PerResource, from: i64, to: i64) {
    let mut t = from.max(0);
    while t < to {
        let b = (t / SAMPLE_MS) as usize;
        let Some(bucket) = held.get_mut(b) else { return };
        let next = ((b as i64 + 1) * SAMPLE_MS).min(to);
        for (h, r) in bucket[q].iter_mut().zip(requests) {
            *h += r * (next - t) as f64;
        }
        t = next;
    }
}

/// The figures as a markdown table, a row per tenant.
pub fn table(figures: &[TenantResult]) -> String {
    let mut out = String::from(
        "| tenant | nominal | jobs | completed | entitled (h) | held (h) | shortfall | wait within quota mean / p95 / max (s) | lost (h) | evictions |\n\
         |---|---|---|---|---|---|---|---|---|---|\n",
    );
    for t in figures {
        let nominal = t.nominal.map_or("-".to_string(), |n| format!("{n} {}", t.resource));
        let w = &t.wait_within_quota;
        out.push_str(&format!(
            "| {} | {nominal} | {} | {} | {} | {} | {:.1}% | {} / {} / {} ({} jobs) | {} | {} |\n",
            t.queue,
            t.jobs,
            t.completed,
            t.entitled_h,
            t.held_h,
            t.shortfall_share * 100.0,
            w.mean_s,
            w.p95_s,
            w.max_s,
            w.count,
            t.lost_h,
            t.evictions
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::parse_time;

    /// Two tenants of 8 GPUs in one cohort: team a's job of 2 pods x 4 GPUs at 0 s, team b's
    /// one pod of 4 GPUs at 5 s.
    fn workload(test: &str) -> (Workload, Vec<JobRecord>) {
        let cluster = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/clusters/gpu-8.yaml");
        let path = std::env::temp_dir().join(format!("harness-{test}-{}.yaml", std::process::id()));
        let text = format!(
            "name: two\ncluster: {}\nhorizon: 1h\ntenants:\n  queues:\n\
             \x20   - {{name: a, cohort: lab, quotas: {{nvidia.com/gpu: {{nominal: 8}}}}}}\n\
             \x20   - {{name: b, cohort: lab, quotas: {{nvidia.com/gpu: {{nominal: 8}}}}}}\n\
             jobClasses:\n\
             \x20 - {{name: a, queue: a, count: 1, members: 2, resources: {{nvidia.com/gpu: 4}}, runTime: 10s}}\n\
             \x20 - {{name: b, queue: b, count: 1, members: 1, resources: {{nvidia.com/gpu: 4}}, runTime: 10s,\n\
             \x20     arrival: {{pattern: uniform, start: 5s, interval: 1s}}}}\n",
            cluster.display()
        );
        std::fs::write(&path, text).unwrap();
        let out = (muster_sim::scenario::load(&path, 1).unwrap(), crate::workload::jobs(&path, 1).unwrap());
        std::fs::remove_file(path).unwrap();
        out
    }

    fn pod(job: &str, bound: f64, ready: f64, end: f64, succeeded: bool) -> PodSpan {
        PodSpan {
            job: Some(job.into()),
            requests: [0.0, 0.0, 4.0],
            seen: bound,
            bound: Some(bound),
            ready: Some(ready),
            end: Some(end),
            succeeded,
        }
    }

    fn complete(name: &str, at: &str) -> Job {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": name},
            "spec": {"template": {}},
            "status": {"conditions": [{"type": "Complete", "status": "True", "lastTransitionTime": at}], "completionTime": at}
        }))
        .unwrap()
    }

    #[test]
    fn a_real_run_is_measured_per_tenant_as_the_sim_measures_it() {
        let (w, jobs) = workload("measured");
        let (a, b) = (jobs[0].name.clone(), jobs[1].name.clone());
        assert_eq!(
            (jobs[0].tenant.as_deref(), jobs[1].tenant.as_deref(), jobs[1].submit_ms),
            (Some("a"), Some("b"), 5000)
        );
        let t0 = parse_time("2026-01-01T00:00:00Z").unwrap();
        let mut ledger = Ledger::default();
        // a: both pods bound at 1 s (the second a moment later), done at 11 s.
        ledger.pods.insert("a0".into(), pod(&a, t0 + 1.0, t0 + 1.5, t0 + 11.0, true));
        ledger.pods.insert("a1".into(), pod(&a, t0 + 1.2, t0 + 1.5, t0 + 11.0, true));
        // b: bound at 6 s, evicted at 8 s after 1 s Ready; again at 9 s, done at 19 s.
        ledger.pods.insert("b0".into(), pod(&b, t0 + 6.0, t0 + 7.0, t0 + 8.0, false));
        ledger.pods.insert("b1".into(), pod(&b, t0 + 9.0, t0 + 9.0, t0 + 19.0, true));
        // A pod of another namespace's Job is none of the tenants'.
        ledger.pods.insert("x".into(), pod("other", t0, t0, t0 + 20.0, true));
        let items = [complete(&a, "2026-01-01T00:00:11Z"), complete(&b, "2026-01-01T00:00:19Z")];
        let figures = tenant_figures(&w, &jobs, &ledger, &items, [0.0, 0.0, 64.0], t0, t0 + 20.0);
        let (fa, fb) = (&figures[0], &figures[1]);
        assert_eq!((fa.queue.as_str(), fa.resource.as_str(), fa.nominal), ("a", "nvidia.com/gpu", Some(8.0)));
        // a placed when its second pod was bound: 1.2 s after it came.
        assert_eq!((fa.wait_within_quota.count, fa.wait_within_quota.max_s), (1, 1.2));
        assert_eq!((fb.wait_within_quota.count, fb.wait_within_quota.max_s), (1, 1.0));
        assert_eq!((fa.completed, fb.completed), (1, 1));
        // Held while running (every pod Ready): a 2 x 4 x 9.5 GPU-s; b 4 x 1 + 4 x 10.
        assert_eq!((fa.held_h, fb.held_h), (round(76.0 / 3600.0), round(44.0 / 3600.0)));
        // b lost its first run: 4 GPUs for the 1 s it was Ready; one eviction.
        assert_eq!((fa.lost_h, fa.evictions), (0.0, 0));
        assert_eq!((fb.lost_h, fb.evictions), (round(4.0 / 3600.0), 1));
        // b was entitled to 4 GPUs from 5 s to 19 s and ran with them for 11 of the 14 s.
        assert_eq!(fb.entitled_h, round(56.0 / 3600.0));
        assert_eq!(fb.shortfall_h, round(12.0 / 3600.0));
        assert!(table(&figures).contains("| b | 8 nvidia.com/gpu | 1 | 1 |"), "{}", table(&figures));
    }

    #[test]
    fn evicted_pods_ending_together_are_one_eviction() {
        let (w, jobs) = workload("evictions");
        let a = jobs[0].name.clone();
        let t0 = 1000.0;
        let mut ledger = Ledger::default();
        // Evicted at 5 s (two pods, 0.5 s apart), run again and evicted at 10 s, then done.
        ledger.pods.insert("1".into(), pod(&a, t0 + 1.0, t0 + 1.0, t0 + 5.0, false));
        ledger.pods.insert("2".into(), pod(&a, t0 + 1.0, t0 + 1.0, t0 + 5.5, false));
        ledger.pods.insert("3".into(), pod(&a, t0 + 6.0, t0 + 6.0, t0 + 10.0, false));
        ledger.pods.insert("4".into(), pod(&a, t0 + 11.0, t0 + 11.0, t0 + 21.0, true));
        let figures = tenant_figures(&w, &jobs, &ledger, &[], [0.0, 0.0, 64.0], t0, t0 + 30.0);
        assert_eq!(figures[0].evictions, 2);
        // 4 GPUs for 4, 4.5 and 4 s.
        assert_eq!(figures[0].lost_h, round(50.0 / 3600.0));
        // The gang of 2 ran only while pods 1 and 2 were both Ready (1 s to 5 s); pods 3 and 4,
        // each alone, were a partial gang and count nothing.
        assert_eq!(figures[0].held_h, round(32.0 / 3600.0));
    }

    fn round(x: f64) -> f64 {
        muster_sim::metrics::round3(x)
    }
}
