//! What a real run's Jobs went through, read off their objects once they are done: how long each
//! waited for its first bind and how it ran ([`waits`]), and which topology-constrained jobs ran
//! spread across domains ([`topology_spread`]).

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Node, Pod};
use serde::{Deserialize, Serialize};

use crate::cluster::{Condition, HARNESS_JOB_LABEL, HARNESS_SET_LABEL, JOB_NAME_LABEL, secs, true_condition};
use crate::simreal::job_end;
use crate::workload::JobRecord;

/// Each Job's wait (its creation -> the first of its pods bound) and run (that bind -> the Job's
/// end), overall and by the class of its job record (1 s timestamps).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Waits {
    pub overall: WaitStats,
    /// Keyed by [`JobRecord::class`]; a Job without a record counts only in `overall`.
    pub classes: BTreeMap<String, WaitStats>,
}

/// The figures of `muster sim`'s report ([`muster_sim::metrics::stats`], nearest-rank p95, and
/// [`muster_sim::metrics::bounded_slowdown`]), so that the two compare directly.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WaitStats {
    /// Jobs that had a pod bound: the waits.
    pub count: usize,
    /// Jobs that never had a pod bound (left out of every figure here).
    pub unbound: usize,
    pub mean_s: Option<f64>,
    pub p95_s: Option<f64>,
    pub max_s: Option<f64>,
    /// Mean of max(1, (wait + run) / max(run, 10 s)) over the jobs of `count` that ended
    /// (Complete or Failed); none when none did.
    pub bounded_slowdown: Option<f64>,
}

/// The waits and runs of `items` (see [`Waits`]), classed by the records of the same name.
///
/// The slowdown bound is muster-sim's `SLOWDOWN_BOUND_MS` (10 s), not scaled: a scenario carries
/// no time scale (the `-sixtieth` copies have their run times and arrival gaps written at 1/60,
/// and the jobs file holds those scaled times), and `muster sim` applies the same 10 s bound to
/// the same scenario, so the two slowdowns stay comparable. At 1/60 a 10 s bound stands for
/// 10 min of the full-scale scenario: it bounds more of the short jobs than there.
pub fn waits(items: &[Job], pods: &[Pod], jobs: &[JobRecord]) -> Option<Waits> {
    use muster_sim::metrics::{bounded_slowdown, stats};
    if items.is_empty() {
        return None;
    }
    let mut first_bind: HashMap<String, f64> = HashMap::new();
    for p in pods {
        if let (Some(name), Some(b)) = (job_name(p), bound_at(p)) {
            let t = first_bind.entry(name).or_insert(b);
            *t = t.min(b);
        }
    }
    let class_of: HashMap<&str, &str> = jobs.iter().map(|j| (j.name.as_str(), j.class.as_str())).collect();
    let ms = |s: f64| (s * 1000.0).round() as i64;
    // (unbound, waits, (wait, run) of those that ended), overall and per class.
    type Acc = (usize, Vec<i64>, Vec<(i64, i64)>);
    let (mut all, mut by_class): (Acc, BTreeMap<&str, Acc>) = Default::default();
    for j in items {
        let name = j.metadata.name.as_deref().unwrap_or_default();
        let bind = first_bind.get(name).copied();
        let wait_run = bind.map(|b| (ms(b - created(&j.metadata)), job_end(j).1.map(|e| ms(e - b))));
        for a in std::iter::once(&mut all).chain(class_of.get(name).map(|c| by_class.entry(c).or_default())) {
            match wait_run {
                None => a.0 += 1,
                Some((wait, run)) => {
                    a.1.push(wait);
                    a.2.extend(run.map(|r| (wait, r)));
                }
            }
        }
    }
    let figures = |(unbound, w, wr): &Acc| {
        let s = stats(w);
        let some = |x: f64| (!w.is_empty()).then_some(x);
        WaitStats {
            count: w.len(),
            unbound: *unbound,
            mean_s: some(s.mean_s),
            p95_s: some(s.p95_s),
            max_s: some(s.max_s),
            bounded_slowdown: (!wr.is_empty()).then(|| bounded_slowdown(wr)),
        }
    };
    Some(Waits { overall: figures(&all), classes: by_class.iter().map(|(k, v)| (k.to_string(), figures(v))).collect() })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopologySpread {
    pub constrained: usize,
    pub spread: usize,
    /// Of `spread`, the jobs whose constraint was required.
    pub spread_required: usize,
}

/// A bound pod's set (a job of several sets) and its node's labels.
type PlacedPod<'a> = (Option<&'a String>, &'a BTreeMap<String, String>);

/// How many of the topology-constrained jobs ran with a constraint broken (the job's pods, or the
/// pods of one of its gangs, across domains of the constraint's level), read off where their pods
/// were bound (the Job controller keeps finished pods) and the nodes' labels.
pub fn topology_spread(jobs: &[JobRecord], pods: &[Pod], nodes: &[Node]) -> Option<TopologySpread> {
    let label_of: HashMap<&str, &BTreeMap<String, String>> =
        nodes.iter().filter_map(|n| Some((n.metadata.name.as_deref()?, n.metadata.labels.as_ref()?))).collect();
    let mut count = TopologySpread { constrained: 0, spread: 0, spread_required: 0 };
    let mut any = false;
    for job in jobs.iter().filter(|j| j.constrained()) {
        any = true;
        // Each pod's set and its node's labels; none unless every pod of the job was bound.
        let placed: Option<Vec<PlacedPod>> = pods
            .iter()
            .filter(|p| job_name(p).as_deref() == Some(job.name.as_str()))
            .map(|p| {
                let node = p.spec.as_ref()?.node_name.as_deref()?;
                let set = p.metadata.labels.as_ref().and_then(|l| l.get(HARNESS_SET_LABEL));
                Some((set, *label_of.get(node)?))
            })
            .collect();
        let Some(placed) = placed.filter(|p| p.len() as u32 == job.pods) else { continue };
        let spans = |label: &str, sets: Option<&[String]>| {
            let mut domains = placed
                .iter()
                .filter(|(set, _)| sets.is_none_or(|s| set.is_some_and(|set| s.contains(set))))
                .map(|(_, labels)| labels.get(label));
            let first = domains.next();
            domains.any(|d| Some(d) != first)
        };
        let own = job.topology.iter().filter(|t| spans(&t.label, None)).map(|t| t.required);
        let gangs = job.gangs.iter().filter(|g| spans(&g.label, Some(&g.sets))).map(|_| true);
        let broken: Vec<bool> = own.chain(gangs).collect();
        count.constrained += 1;
        count.spread += usize::from(!broken.is_empty());
        count.spread_required += usize::from(broken.contains(&true));
    }
    any.then_some(count)
}

pub(crate) fn created(meta: &kube::api::ObjectMeta) -> f64 {
    meta.creation_timestamp.as_ref().map_or(0.0, secs)
}

/// The scenario job of a pod: the harness's label on a job of several objects, else its Job.
pub(crate) fn job_name(p: &Pod) -> Option<String> {
    let labels = p.metadata.labels.as_ref()?;
    labels.get(HARNESS_JOB_LABEL).or_else(|| labels.get(JOB_NAME_LABEL)).cloned()
}

pub(crate) fn bound_at(p: &Pod) -> Option<f64> {
    let conds = p.status.as_ref().and_then(|s| s.conditions.as_deref()).unwrap_or_default();
    true_condition(conds, "PodScheduled").and_then(|c| c.last_transition())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::test_record as record;
    use serde_json::Value;

    #[test]
    fn a_job_spans_domains_when_its_pods_sit_in_two_racks() {
        let node = |name: &str, rack: &str| -> Node {
            serde_json::from_value(serde_json::json!({"metadata": {"name": name, "labels": {"muster.dev/rack": rack}}}))
                .unwrap()
        };
        let pod = |job: &str, node: Option<&str>| -> Pod {
            serde_json::from_value(serde_json::json!({
                "metadata": {"labels": {JOB_NAME_LABEL: job}}, "spec": {"containers": [], "nodeName": node}}))
            .unwrap()
        };
        let rec = |name: &str, topology: bool| JobRecord {
            pods: 2,
            topology: topology.then(|| crate::workload::RecordTopology {
                level: "rack".into(),
                label: "muster.dev/rack".into(),
                required: true,
                within: None,
            }),
            ..record(name, "c")
        };
        let nodes = [node("a", "r0"), node("b", "r0"), node("c", "r1")];
        let pods = [
            pod("kept", Some("a")),
            pod("kept", Some("b")),
            pod("spread", Some("a")),
            pod("spread", Some("c")),
            pod("unbound", Some("a")),
            pod("unbound", None),
            pod("free", Some("a")),
            pod("free", Some("c")),
        ];
        let jobs = [rec("kept", true), rec("spread", true), rec("unbound", true), rec("free", false)];
        // The job with a pod never bound is not counted; the one without a constraint neither.
        let want = TopologySpread { constrained: 2, spread: 1, spread_required: 1 };
        assert_eq!(topology_spread(&jobs, &pods, &nodes), Some(want));
        assert_eq!(topology_spread(&jobs[3..], &pods, &nodes), None);
    }

    #[test]
    fn a_job_breaks_a_constraint_when_one_of_its_gangs_spans_domains() {
        let node = |name: &str, rack: &str, block: &str| -> Node {
            serde_json::from_value(serde_json::json!({"metadata": {"name": name,
                "labels": {"muster.dev/rack": rack, "muster.dev/block": block}}}))
            .unwrap()
        };
        let pod = |job: &str, set: &str, node: &str| -> Pod {
            serde_json::from_value(serde_json::json!({
                "metadata": {"labels": {HARNESS_JOB_LABEL: job, HARNESS_SET_LABEL: set}},
                "spec": {"containers": [], "nodeName": node}}))
            .unwrap()
        };
        // A router anywhere in the block, a prefill gang of 2 within one rack.
        let rec = |name: &str| JobRecord {
            pods: 3,
            topology: Some(crate::workload::RecordTopology {
                level: "block".into(),
                label: "muster.dev/block".into(),
                required: true,
                within: None,
            }),
            gangs: vec![crate::workload::GangRecord {
                name: "prefill".into(),
                sets: vec!["prefill".into()],
                sub_group: false,
                level: "rack".into(),
                label: "muster.dev/rack".into(),
            }],
            ..record(name, "pd")
        };
        let nodes = [node("a", "r0", "b0"), node("b", "r0", "b0"), node("c", "r1", "b0"), node("d", "r2", "b1")];
        let pods = [
            // The router in another rack of the block: nothing broken.
            pod("kept", "router", "c"),
            pod("kept", "prefill", "a"),
            pod("kept", "prefill", "b"),
            // The prefill gang over two racks of one block: its gang's constraint broken.
            pod("gang", "router", "a"),
            pod("gang", "prefill", "a"),
            pod("gang", "prefill", "c"),
        ];
        let jobs = [rec("kept"), rec("gang")];
        assert_eq!(
            topology_spread(&jobs, &pods, &nodes),
            Some(TopologySpread { constrained: 2, spread: 1, spread_required: 1 })
        );
        // The router in the other block: the job's own constraint broken.
        let pods = [pod("block", "router", "d"), pod("block", "prefill", "a"), pod("block", "prefill", "b")];
        assert_eq!(
            topology_spread(&[rec("block")], &pods, &nodes),
            Some(TopologySpread { constrained: 1, spread: 1, spread_required: 1 })
        );
    }

    #[test]
    fn waits_run_from_job_creation_to_its_first_bind_by_class() {
        let at = |s: u32| format!("2026-01-01T00:{:02}:{:02}Z", s / 60, s % 60);
        // A Job created at `created`, ended `Complete` or `Failed` at `end` (or still active).
        let job = |name: &str, created: u32, end: Option<(&str, u32)>| -> Job {
            let conditions: Vec<Value> = end
                .iter()
                .map(|(kind, t)| serde_json::json!({"type": kind, "status": "True", "lastTransitionTime": at(*t)}))
                .collect();
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": name, "creationTimestamp": at(created)},
                "spec": {"template": {}},
                "status": {"conditions": conditions}
            }))
            .unwrap()
        };
        // A pod of `job`, bound at `bound` or still pending.
        let pod = |job: &str, bound: Option<u32>| -> Pod {
            let cond = match bound {
                Some(t) => serde_json::json!({"type": "PodScheduled", "status": "True", "lastTransitionTime": at(t)}),
                None => serde_json::json!({"type": "PodScheduled", "status": "False", "lastTransitionTime": at(0)}),
            };
            serde_json::from_value(serde_json::json!({
                "metadata": {"labels": {JOB_NAME_LABEL: job}},
                "spec": {"containers": []},
                "status": {"conditions": [cond]}
            }))
            .unwrap()
        };
        let mut items = vec![
            // wait 2 (the first of its pods), run 30: slowdown 32/30.
            job("a-0", 0, Some(("Complete", 32))),
            // wait 20, run 5: slowdown 25/10 (the 10 s bound).
            job("a-1", 10, Some(("Complete", 35))),
            // Never bound: unbound, in no figure.
            job("a-2", 20, None),
            // wait 60, run 1 before it failed: slowdown 61/10.
            job("b-0", 0, Some(("Failed", 61))),
            // wait 4, still running: a wait but no slowdown.
            job("b-1", 5, None),
            // No record: overall only; wait 1, run 99: slowdown 100/99.
            job("x-0", 0, Some(("Complete", 100))),
        ];
        let mut pods = vec![
            pod("a-0", Some(5)),
            pod("a-0", Some(2)),
            pod("a-1", Some(30)),
            pod("a-2", None),
            pod("b-0", Some(60)),
            pod("b-1", Some(9)),
            pod("x-0", Some(1)),
        ];
        let mut jobs: Vec<JobRecord> = ["a-0", "a-1", "a-2", "b-0", "b-1"].iter().map(|n| record(n, &n[..1])).collect();
        // Class c: 20 jobs waiting 1..=20 s and running 10 s each; nearest-rank p95 is the 19th.
        for i in 1..=20 {
            let name = format!("c-{i}");
            items.push(job(&name, 0, Some(("Complete", i + 10))));
            pods.push(pod(&name, Some(i)));
            jobs.push(record(&name, "c"));
        }
        let stats = |count, unbound, mean, p95, max, slowdown| WaitStats {
            count,
            unbound,
            mean_s: Some(mean),
            p95_s: Some(p95),
            max_s: Some(max),
            bounded_slowdown: Some(slowdown),
        };
        let w = waits(&items, &pods, &jobs).unwrap();
        // (32/30 + 2.5) / 2
        assert_eq!(w.classes["a"], stats(2, 1, 11.0, 20.0, 20.0, 1.783));
        assert_eq!(w.classes["b"], stats(2, 0, 32.0, 60.0, 60.0, 6.1));
        // 1 + mean wait / 10
        assert_eq!(w.classes["c"], stats(20, 0, 10.5, 19.0, 20.0, 2.05));
        assert_eq!(w.classes.keys().collect::<Vec<_>>(), ["a", "b", "c"]);
        // 25 waits summing to 297 s, the 24th 20 s; (32/30 + 2.5 + 6.1 + 100/99 + 20 * 2.05) / 24.
        assert_eq!(w.overall, stats(25, 1, 11.88, 20.0, 60.0, 2.153));
        // Only unbound jobs: counted, no figures.
        let none = waits(&items[2..3], &pods, &jobs).unwrap();
        let empty = WaitStats { count: 0, unbound: 1, mean_s: None, p95_s: None, max_s: None, bounded_slowdown: None };
        assert_eq!(none.overall, empty);
        let v = serde_json::to_value(&w).unwrap();
        assert_eq!(v["classes"]["b"]["p95_s"], 60.0);
        assert_eq!(serde_json::from_value::<Waits>(v).unwrap(), w);
    }
}
