//! How a real run used the cluster, in the shape `muster sim` reports it
//! ([`muster_sim::metrics::Occupancy`]): the share of cpu, memory and GPUs held by pods, and the
//! resource-seconds held by pods whose job was not running yet (a partial gang, or a whole one
//! whose run has not begun), followed through a watch on the run's pods ([`Ledger`]).
//!
//! Times are when the watch delivered an event (sub-second), so a pod deleted mid-run (an
//! eviction, a preemption) counts too. A pod holds its requests from the event that shows it
//! bound to the one that shows it Succeeded, Failed or deleted. A job runs from the moment its
//! gang's last member was seen Ready: the simulator's moment of `JobRunning`, and what KWOK's
//! all-ready stamp marks (hack/kwok/stages.yaml), which has whole seconds only.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::{Node, Pod};
use muster_sim::metrics::{Occupancy, PerResource, round3};
use serde::{Deserialize, Serialize};

use crate::cluster::{amount, true_condition};
use crate::outcome::job_name;
use crate::workload::JobRecord;

/// The extended resource that counts as GPUs (as in the simulator).
const GPU: &str = "nvidia.com/gpu";
/// The resources of [`PerResource`], in its order.
pub(crate) const RESOURCES: [&str; 3] = ["cpu", "memory", GPU];

/// One pod's life as the watch showed it (seconds since the epoch).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct PodSpan {
    pub(crate) job: Option<String>,
    /// Base units (millicores, bytes, GPUs), in [`RESOURCES`] order.
    pub(crate) requests: PerResource,
    /// First seen: about when it was made.
    pub(crate) seen: f64,
    pub(crate) bound: Option<f64>,
    pub(crate) ready: Option<f64>,
    pub(crate) end: Option<f64>,
    /// It ended Succeeded (else, once ended, it failed or was deleted: an eviction's pods).
    pub(crate) succeeded: bool,
}

/// Every pod of a run by uid, fed by [`crate::cluster::watch`] through [`Ledger::observe`].
#[derive(Debug, Default)]
pub struct Ledger {
    pub(crate) pods: HashMap<String, PodSpan>,
}

impl Ledger {
    /// Records what `pod` shows at `now`; `deleted` when the watch saw it go.
    /// Pods of no Job are none of the run's (a run over every namespace sees the cluster's own).
    pub fn observe(&mut self, deleted: bool, pod: &Pod, now: f64) {
        if job_name(pod).is_none() {
            return;
        }
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let span = self.pods.entry(uid).or_insert_with(|| {
            // An amount muster cannot count counts as nothing: no scheduler places such a pod.
            let r = pod.spec.as_ref().and_then(|s| muster_k8s::pod::requests(s).ok()).unwrap_or_default();
            PodSpan {
                job: job_name(pod),
                requests: RESOURCES.map(|name| r.get(name).copied().unwrap_or(0) as f64),
                seen: now,
                ..PodSpan::default()
            }
        });
        if span.end.is_some() {
            return;
        }
        if span.bound.is_none() && pod.spec.as_ref().is_some_and(|s| s.node_name.is_some()) {
            span.bound = Some(now);
        }
        let status = pod.status.as_ref();
        let conditions = status.and_then(|s| s.conditions.as_deref()).unwrap_or_default();
        if span.ready.is_none() && true_condition(conditions, "Ready").is_some() {
            span.ready = Some(now);
        }
        let phase = status.and_then(|s| s.phase.as_deref());
        if deleted || matches!(phase, Some("Succeeded" | "Failed")) {
            span.end = Some(now);
            span.succeeded = phase == Some("Succeeded");
        }
    }

    /// The occupancy of `capacity` ([`capacity`]) over [`from`, `to`), and what partial gangs
    /// held in it: a pod still holding at `to` counts until then. A job's gang is its record's
    /// minimum (else all of its pods).
    pub fn usage(&self, capacity: PerResource, jobs: &[JobRecord], from: f64, to: f64) -> (Occupancy, PartialGangs) {
        let gang: HashMap<&str, u32> = jobs.iter().map(|j| (j.name.as_str(), j.min_pods.unwrap_or(j.pods))).collect();
        let mut by_job: HashMap<Option<&str>, Vec<&PodSpan>> = HashMap::new();
        for p in self.pods.values() {
            by_job.entry(p.job.as_deref()).or_default().push(p);
        }
        let within = |a: f64, b: f64| (b.min(to) - a.max(from)).max(0.0);
        let (mut held, mut clog, mut partial) = ([0.0; 3], [0.0; 3], [0.0; 3]);
        let mut longest_partial: f64 = 0.0;
        for (job, pods) in by_job {
            let size = job.and_then(|j| gang.get(j).copied()).unwrap_or(pods.len() as u32);
            let runs_from = runs_from(&pods, size);
            for p in &pods {
                let Some(bound) = p.bound else { continue };
                let end = p.end.unwrap_or(to);
                let (holding, clogging) = (within(bound, end), within(bound, end.min(runs_from)));
                for r in 0..3 {
                    held[r] += p.requests[r] * holding;
                    clog[r] += p.requests[r] * clogging;
                }
            }
            let mut sweep = GangSweep::default();
            let mut steps: Vec<(f64, bool, &PerResource)> = pods
                .iter()
                .filter_map(|p| Some([(p.bound?, true, &p.requests), (p.end.unwrap_or(to), false, &p.requests)]))
                .flatten()
                .collect();
            // In time order; at one instant a pod's end before another's bind.
            steps.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            for (t, bound, requests) in steps {
                if !sweep.complete && sweep.bound > 0 {
                    let dt = within(sweep.since, t);
                    (0..3).for_each(|r| partial[r] += sweep.holding[r] * dt);
                }
                sweep.step(t, bound, requests, size);
            }
            longest_partial = longest_partial.max(sweep.longest);
        }
        let span = to - from;
        let share = |r: usize| partial[r] / (capacity[r].max(1.0) * span.max(1e-3));
        let gpus = capacity[2] > 0.0;
        let partial_gangs = PartialGangs {
            cpu_core_s: round3(partial[0] / 1000.0),
            gpu_s: gpus.then(|| round3(partial[2])),
            share: round3(if gpus { share(0).max(share(2)) } else { share(0) }),
            longest_s: Some(round3(longest_partial)),
        };
        (Occupancy::new(capacity, held, clog, span), partial_gangs)
    }

    /// The latest moment any pod was seen to end; none before one has.
    pub fn last_end(&self) -> Option<f64> {
        self.pods.values().filter_map(|p| p.end).reduce(f64::max)
    }
}

/// Resource-seconds held by the pods of gangs that did not have every member bound yet: from a
/// gang's first pod bound until its last is (again after all of its pods have gone, as after an
/// eviction). A scheduler that binds gangs whole holds next to none.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PartialGangs {
    pub cpu_core_s: f64,
    /// Absent without GPUs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_s: Option<f64>,
    /// The larger of cpu and GPUs: held by partial gangs / (capacity x the run).
    pub share: f64,
    /// The longest any gang stayed partial: binding a whole gang takes a moment; a gang that
    /// holds part of its nodes while it waits for the rest stays so for seconds or more. Absent
    /// in runs made before it was measured.
    #[serde(default)]
    pub longest_s: Option<f64>,
}

/// One gang's pods followed through their binds and ends, in time order.
#[derive(Debug, Default)]
struct GangSweep {
    bound: u32,
    holding: PerResource,
    /// Every member has been bound at once since the gang last had none.
    complete: bool,
    since: f64,
    /// Since when it has been partial, while it is.
    partial_from: Option<f64>,
    longest: f64,
}

impl GangSweep {
    fn step(&mut self, t: f64, bound: bool, requests: &PerResource, size: u32) {
        for (h, q) in self.holding.iter_mut().zip(requests) {
            *h += if bound { *q } else { -*q };
        }
        self.bound = if bound { self.bound + 1 } else { self.bound.saturating_sub(1) };
        if self.bound >= size.max(1) {
            self.complete = true;
        } else if self.bound == 0 {
            self.complete = false;
        }
        match (self.partial_from, !self.complete && self.bound > 0) {
            (None, true) => self.partial_from = Some(t),
            (Some(from), false) => {
                self.longest = self.longest.max(t - from);
                self.partial_from = None;
            }
            _ => {}
        }
        self.since = t;
    }
}

/// When a job of `pods` (gang of `size`) began to run: the moment its `size`-th pod was seen
/// Ready; never (infinity) when fewer were.
fn runs_from(pods: &[&PodSpan], size: u32) -> f64 {
    nth(pods.iter().map(|p| p.ready), size).unwrap_or(f64::INFINITY)
}

/// The `size`-th earliest of `times` (the moment a gang of `size` had all of them); none when
/// fewer happened.
pub(crate) fn nth(times: impl Iterator<Item = Option<f64>>, size: u32) -> Option<f64> {
    let mut sorted: Vec<f64> = times.flatten().collect();
    sorted.sort_by(f64::total_cmp);
    sorted.get((size.max(1) - 1) as usize).copied()
}

/// The nodes' allocatable cpu, memory and GPUs, in [`PerResource`] order.
pub fn capacity(nodes: &[Node]) -> PerResource {
    let mut total = [0.0; 3];
    for n in nodes {
        let a = n.status.as_ref().and_then(|s| s.allocatable.as_ref());
        for (r, name) in RESOURCES.iter().enumerate() {
            total[r] += amount(name, a.and_then(|a| a.get(*name)), 0) as f64;
        }
    }
    total
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::workload::test_record as record;
    use serde_json::json;

    pub(crate) fn pod(uid: &str, job: &str, gpus: u32) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": uid, "uid": uid, "labels": {"batch.kubernetes.io/job-name": job}},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": gpus.to_string()}}}]}
        }))
        .unwrap()
    }

    pub(crate) fn bound(mut p: Pod) -> Pod {
        p.spec.as_mut().unwrap().node_name = Some("n1".into());
        p
    }

    pub(crate) fn ready(p: Pod) -> Pod {
        let mut v = serde_json::to_value(bound(p)).unwrap();
        v["status"] = json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]});
        serde_json::from_value(v).unwrap()
    }

    pub(crate) fn succeeded(p: Pod) -> Pod {
        let mut v = serde_json::to_value(p).unwrap();
        v["status"]["phase"] = json!("Succeeded");
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn a_partial_gang_clogs_until_its_run_begins_and_a_deleted_pod_until_it_goes() {
        let t0 = 1_767_225_600.0;
        let mut l = Ledger::default();
        // Gang a (2 pods, 8 GPUs each): one bound at 0 and Ready at 1, the other bound at 4 and
        // Ready at 5 (the gang runs from then); both end at 10.
        let (a0, a1) = (pod("a0", "a", 8), pod("a1", "a", 8));
        l.observe(false, &a0, t0);
        l.observe(false, &bound(a0.clone()), t0);
        l.observe(false, &bound(a1.clone()), t0 + 4.0);
        l.observe(false, &ready(a0.clone()), t0 + 1.0);
        l.observe(false, &ready(a1.clone()), t0 + 5.0);
        l.observe(false, &succeeded(ready(a0)), t0 + 10.0);
        l.observe(false, &succeeded(ready(a1)), t0 + 10.0);
        // Gang b (2 pods): one bound at 2 and deleted at 6 (evicted); the other never bound.
        let b0 = pod("b0", "b", 8);
        l.observe(false, &bound(b0.clone()), t0 + 2.0);
        l.observe(true, &bound(b0), t0 + 6.0);
        l.observe(false, &pod("b1", "b", 8), t0 + 2.0);
        // A single-pod job: Ready at 1, still running at 10.
        let c0 = pod("c0", "c", 0);
        l.observe(false, &bound(c0.clone()), t0);
        l.observe(false, &ready(c0), t0 + 1.0);
        let gang = |name: &str| JobRecord { pods: 2, ..record(name, "x") };
        let jobs = [gang("a"), gang("b"), record("c", "x")];
        let (o, partial) = l.usage([32_000.0, 1e12, 32.0], &jobs, t0, t0 + 10.0);
        // GPU-seconds held: a 8 x (10 + 6) + b 8 x 4 = 160; clogged: a0 8 x 5 + a1 8 x 1 + b0 8 x 4 = 80.
        assert_eq!(o.mean_util_gpu, Some(0.5)); // 160 / (32 x 10)
        assert_eq!(o.clog_gpu_s, Some(80.0));
        // cpu: a 1 x 16 + b 1 x 4 + c 1 x 10 = 30 core-s held; clogged 6 + 4 + 1 = 11.
        assert_eq!(o.mean_util_cpu, round3(30.0 / 320.0));
        assert_eq!(o.clog_cpu_core_s, 11.0);
        assert_eq!(o.clog_share, 0.25); // GPUs: 80 / 320
        assert_eq!(l.last_end(), Some(t0 + 10.0));
        // Partial gangs: a0 alone from 0 to 4, b0 alone from 2 to 6 (b never complete); c is
        // complete with its one pod.
        assert_eq!(partial, PartialGangs { cpu_core_s: 8.0, gpu_s: Some(64.0), share: 0.2, longest_s: Some(4.0) });
        // Without GPUs in the cluster, no GPU figures.
        let (o, partial) = l.usage([32_000.0, 1e12, 0.0], &jobs, t0, t0 + 10.0);
        assert_eq!((o.mean_util_gpu, o.clog_gpu_s, partial.gpu_s), (None, None, None));
    }

    #[test]
    fn a_gang_is_partial_again_only_after_all_of_its_pods_went() {
        let mut l = Ledger::default();
        // Gang of 2 whole at 1; one pod replaced (ends at 3, its successor bound at 4): whole
        // since 1, not partial; both evicted at 6, rebound one at 7, the other at 9.
        let p = |uid: &str| pod(uid, "g", 1);
        l.observe(false, &bound(p("a")), 0.0);
        l.observe(false, &bound(p("b")), 1.0);
        l.observe(true, &bound(p("a")), 3.0);
        l.observe(false, &bound(p("c")), 4.0);
        l.observe(true, &bound(p("b")), 6.0);
        l.observe(true, &bound(p("c")), 6.0);
        l.observe(false, &bound(p("d")), 7.0);
        l.observe(false, &bound(p("e")), 9.0);
        let jobs = [JobRecord { pods: 2, ..record("g", "x") }];
        let (_, partial) = l.usage([1000.0, 1.0, 8.0], &jobs, 0.0, 10.0);
        // 1 GPU x (0..1) + 1 GPU x (7..9) = 3 GPU-s; share 3 / 80.
        assert_eq!(partial.gpu_s, Some(3.0));
        assert_eq!(partial.share, 0.3, "cpu: 3 core-s of 1 core x 10 s");
        assert_eq!(partial.longest_s, Some(2.0), "7..9");
    }
}
