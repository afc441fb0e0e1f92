//! A job of several member sets (an MPI launcher beside its GPU workers, a Ray head beside its
//! worker groups) as each scheduler's users submit one. Every set's pods are made from that set
//! alone ([`JobRecord::set_job`]: its own requests, the job's run time, node selector,
//! tolerations and priority), so no pod asks for what another set's pods need:
//!
//! | peer | the job | its gang |
//! |---|---|---|
//! | `default` | a Job `<job>-<set>` per set | none: kube-scheduler places pods one by one |
//! | `muster` | a JobSet `jobset.x-k8s.io/v1alpha2`: a replicated Job per set (1 replica, parallelism = completions = the set's pods), label `muster.dev/queue`, annotation `muster.dev/duration-seconds` | muster's: one group, a set per replicated Job, placed whole |
//! | `kueue` | the same JobSet, suspended, label `kueue.x-k8s.io/queue-name` (Kueue's JobSet integration: a PodSet per replicated Job) | one Workload admitted whole |
//! | `coscheduling` | a Job per set, pods labelled `scheduling.x-k8s.io/pod-group: <job>` | one PodGroup `<job>`, `minMember` = all the sets' pods |
//! | `volcano` | a Volcano Job `batch.volcano.sh/v1alpha1` `<job>` with a task per set | its PodGroup, `minAvailable` = all the sets' pods |
//! | `native` | a Job per set, pods naming the PodGroup `<job>-workers` | one Workload (no controllerRef: no one object makes all the pods) and its PodGroup, gang `minCount` = all the sets' pods |
//!
//! Every set's Job and pod carries `harness.muster.dev/job: <job>`, by which `run` reads the
//! job's Jobs as one; a Volcano Job's pods (no Job owns them) carry KWOK's gang label and size,
//! so that their run starts once all of them are Ready. Elsewhere KWOK's run starts once a
//! set's own pods are Ready, which the gang makes the same moment give or take KWOK's lag.
//!
//! Sets are rigid ([`crate::workload::record`] refuses an elastic set): every peer starts the
//! group whole.

use serde_json::{Value, json};

use crate::cluster::{HARNESS_JOB_LABEL, KWOK_GANG_LABEL, KWOK_GANG_SIZE};
use crate::peers::{
    COSCHED_POD_GROUP, KUEUE_QUEUE, Object, Peer, PeerOptions, cosched_pod_group, metadata, native_gang, set,
};
use crate::workload::{JobRecord, ManifestOptions, manifest};

/// The objects of a job of several sets for the peer, in creation order (companions first).
pub fn objects(job: &JobRecord, opts: &PeerOptions) -> Vec<Object> {
    let total = job.sets.iter().map(|s| s.pods).sum::<u32>();
    let mut jobs = set_jobs(job, opts);
    let pod_label = |jobs: &mut Vec<Value>, key: &str, value: &str| {
        for j in jobs.iter_mut() {
            set(j, &["spec", "template", "metadata", "labels"], key, json!(value));
        }
    };
    let mut out = Vec::new();
    match opts.peer {
        Peer::Default => {}
        Peer::Muster => return vec![jobset(job, jobs, opts)],
        Peer::Kueue => {
            let mut js = jobset(job, jobs, opts);
            set(&mut js.value, &["metadata", "labels"], KUEUE_QUEUE, json!(opts.queue()));
            js.value["spec"]["suspend"] = json!(true);
            return vec![js];
        }
        Peer::Volcano => return vec![volcano_job(job, jobs, total, opts)],
        Peer::Coscheduling => {
            out.push(cosched_pod_group(&job.name, total, opts));
            pod_label(&mut jobs, COSCHED_POD_GROUP, &job.name);
        }
        Peer::Native => {
            let (companions, group) = native_gang(job, total, None, opts);
            out.extend(companions);
            for j in &mut jobs {
                set(j, &["spec", "template", "spec", "schedulingGroup"], "podGroupName", json!(group));
            }
        }
    }
    out.extend(jobs.into_iter().map(|j| Object::new(j, "jobs", true)));
    out
}

/// The plain batch/v1 Job of each set, `<job>-<set>`, with the peer's scheduler name.
fn set_jobs(job: &JobRecord, opts: &PeerOptions) -> Vec<Value> {
    let base =
        ManifestOptions { queue: None, scheduler_name: opts.scheduler_name(), namespace: opts.namespace.clone() };
    job.sets
        .iter()
        .map(|s| {
            let mut j = serde_json::to_value(manifest(&job.set_job(s), &base)).expect("a Job is plain data");
            set(&mut j, &["metadata", "labels"], HARNESS_JOB_LABEL, json!(job.name));
            set(&mut j, &["spec", "template", "metadata", "labels"], HARNESS_JOB_LABEL, json!(job.name));
            j
        })
        .collect()
}

/// A JobSet of a replicated Job per set (one replica each, named after the set). Under muster it
/// carries the queue and declared run time a Job would.
fn jobset(job: &JobRecord, set_jobs: Vec<Value>, opts: &PeerOptions) -> Object {
    let muster = (opts.peer == Peer::Muster).then(|| opts.queue()).flatten();
    let whole = ManifestOptions { queue: muster, scheduler_name: None, namespace: opts.namespace.clone() };
    let meta = serde_json::to_value(manifest(job, &whole).metadata).expect("metadata is plain data");
    let replicated: Vec<Value> = job
        .sets
        .iter()
        .zip(set_jobs)
        .map(|(s, j)| {
            let template = json!({ "metadata": { "labels": j["metadata"]["labels"] }, "spec": j["spec"] });
            json!({ "name": s.name, "replicas": 1, "template": template })
        })
        .collect();
    let js = json!({
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": meta,
        "spec": { "replicatedJobs": replicated },
    });
    Object::new(js, "jobsets", true)
}

/// Volcano's own Job: a task per set (its pods' template), `minAvailable` = every set's pods, no
/// retries (a scenario's job runs once, as its Jobs' backoffLimit 0 says).
fn volcano_job(job: &JobRecord, set_jobs: Vec<Value>, total: u32, opts: &PeerOptions) -> Object {
    let tasks: Vec<Value> = job
        .sets
        .iter()
        .zip(set_jobs)
        .map(|(s, mut j)| {
            // No Job owns these pods: KWOK's all-ready stamp goes by the gang label.
            let pod_meta = ["spec", "template", "metadata"];
            set(&mut j, &[&pod_meta[..], &["labels"]].concat(), KWOK_GANG_LABEL, json!(job.name));
            set(&mut j, &[&pod_meta[..], &["annotations"]].concat(), KWOK_GANG_SIZE, json!(total.to_string()));
            json!({ "name": s.name, "replicas": s.pods, "template": j["spec"]["template"] })
        })
        .collect();
    let vj = json!({
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": metadata(&job.name, opts),
        "spec": {
            "schedulerName": opts.scheduler_name(),
            "queue": opts.queue(),
            "minAvailable": total,
            "maxRetry": 0,
            "tasks": tasks,
        },
    });
    Object::new(vj, "jobs", true)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::peers::tests::{decoded, kinds};
    use crate::workload;

    /// ai-sets' first MPI job (a launcher of 1 cpu, 4 workers of 8 GPUs) and first driver job.
    fn mpi_and_driver() -> [JobRecord; 2] {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/suite/ai-sets-sixtieth.yaml");
        let jobs = workload::jobs(&path, 1).unwrap();
        let find = |class: &str| jobs.iter().find(|j| j.class == class).unwrap().clone();
        [find("mpi"), find("driver")]
    }

    /// Each set's pod count and what each of its pods asks, from a Job spec (or a task).
    fn pods_of(spec: &Value, count: &str) -> (u64, Value) {
        (spec[count].as_u64().unwrap(), spec["template"]["spec"]["containers"][0]["resources"]["requests"].clone())
    }

    #[test]
    fn every_pod_asks_its_own_sets_requests_under_every_peer() {
        let [mpi, _] = mpi_and_driver();
        let want = vec![
            (1, json!({"cpu": "1", "memory": "2Gi"})),
            (4, json!({"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8"})),
        ];
        let set_jobs = |objs: &[Value]| -> Vec<(u64, Value)> {
            objs.iter().filter(|o| o["kind"] == "Job").map(|j| pods_of(&j["spec"], "parallelism")).collect()
        };
        for peer in [Peer::Default, Peer::Coscheduling, Peer::Native] {
            let objs = decoded(&mpi, peer);
            assert_eq!(set_jobs(&objs), want, "{peer:?}");
            let names: Vec<&str> =
                objs.iter().filter(|o| o["kind"] == "Job").map(|j| j["metadata"]["name"].as_str().unwrap()).collect();
            assert_eq!(names, [format!("{}-launcher", mpi.name), format!("{}-worker", mpi.name)]);
        }
        for peer in [Peer::Muster, Peer::Kueue] {
            let js = decoded(&mpi, peer).pop().unwrap();
            let got: Vec<(u64, Value)> = js["spec"]["replicatedJobs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| {
                    assert_eq!(r["replicas"], 1);
                    assert_eq!(r["template"]["spec"]["completions"], r["template"]["spec"]["parallelism"]);
                    pods_of(&r["template"]["spec"], "parallelism")
                })
                .collect();
            assert_eq!(got, want, "{peer:?}");
        }
        let vj = decoded(&mpi, Peer::Volcano).pop().unwrap();
        let got: Vec<(u64, Value)> =
            vj["spec"]["tasks"].as_array().unwrap().iter().map(|t| pods_of(t, "replicas")).collect();
        assert_eq!(got, want);
        // GPUs keep their equal limits; the launcher has none.
        let gpu_limits = &vj["spec"]["tasks"][1]["template"]["spec"]["containers"][0]["resources"]["limits"];
        assert_eq!(gpu_limits, &json!({"nvidia.com/gpu": "8"}));
        assert!(vj["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["resources"].get("limits").is_none());
    }

    #[test]
    fn each_peer_gangs_all_the_sets_together() {
        let [mpi, driver] = mpi_and_driver();
        for job in [&mpi, &driver] {
            let total = job.sets.iter().map(|s| s.pods).sum::<u32>();
            assert_eq!(total, job.pods);
            let run_seconds = workload::seconds(job.run_ms);

            let muster = decoded(job, Peer::Muster);
            assert_eq!(kinds(&muster), ["JobSet"]);
            let js = &muster[0];
            assert_eq!(js["apiVersion"], "jobset.x-k8s.io/v1alpha2");
            assert_eq!(js["metadata"]["name"], job.name.as_str());
            assert_eq!(js["metadata"]["namespace"], "ns");
            assert_eq!(js["metadata"]["labels"]["muster.dev/queue"], "default");
            assert!(js["metadata"]["annotations"]["muster.dev/duration-seconds"].is_string());
            assert!(js["metadata"]["annotations"].get("muster.dev/min-members").is_none(), "a JobSet starts whole");
            assert!(js["spec"].get("suspend").is_none(), "muster's webhook holds it");
            let rj = &js["spec"]["replicatedJobs"];
            assert_eq!(rj.as_array().unwrap().len(), job.sets.len());
            for (r, s) in rj.as_array().unwrap().iter().zip(&job.sets) {
                assert_eq!(r["name"], s.name.as_str());
                let t = &r["template"]["spec"]["template"];
                assert_eq!(t["metadata"]["annotations"]["kwok.muster.dev/run-seconds"], run_seconds.as_str());
                assert!(t["spec"].get("schedulerName").is_none());
            }

            let kueue = decoded(job, Peer::Kueue);
            assert_eq!(kinds(&kueue), ["JobSet"]);
            assert_eq!(kueue[0]["metadata"]["labels"][KUEUE_QUEUE], "user-queue");
            assert!(kueue[0]["metadata"]["labels"].get("muster.dev/queue").is_none());
            assert!(kueue[0]["metadata"].get("annotations").is_none());
            assert_eq!(kueue[0]["spec"]["suspend"], true);
            assert_eq!(kueue[0]["spec"]["replicatedJobs"], js["spec"]["replicatedJobs"]);

            let volcano = decoded(job, Peer::Volcano);
            assert_eq!(kinds(&volcano), ["Job"]);
            let vj = &volcano[0];
            assert_eq!(vj["apiVersion"], "batch.volcano.sh/v1alpha1");
            assert_eq!(vj["spec"]["minAvailable"], total);
            assert_eq!(vj["spec"]["schedulerName"], "volcano");
            assert_eq!(vj["spec"]["queue"], "default");
            assert_eq!(vj["spec"]["tasks"].as_array().unwrap().len(), job.sets.len());
            assert_eq!(vj["spec"]["tasks"][0]["template"]["spec"]["schedulerName"], "volcano");

            let cosched = decoded(job, Peer::Coscheduling);
            assert_eq!(kinds(&cosched), ["PodGroup", "Job", "Job"]);
            assert_eq!(cosched[0]["metadata"]["name"], job.name.as_str());
            assert_eq!(cosched[0]["spec"]["minMember"], total);
            for j in &cosched[1..] {
                assert_eq!(j["spec"]["template"]["metadata"]["labels"][COSCHED_POD_GROUP], job.name.as_str());
                assert_eq!(j["spec"]["template"]["spec"]["schedulerName"], "coscheduling");
            }

            let native = decoded(job, Peer::Native);
            assert_eq!(kinds(&native), ["Workload", "PodGroup", "Job", "Job"]);
            let (w, pg) = (&native[0], &native[1]);
            assert_eq!(w["spec"]["podGroupTemplates"][0]["schedulingPolicy"]["gang"]["minCount"], total);
            assert!(w["spec"].get("controllerRef").is_none());
            assert_eq!(pg["spec"]["schedulingPolicy"]["gang"]["minCount"], total);
            for j in &native[2..] {
                assert_eq!(j["spec"]["template"]["spec"]["schedulingGroup"]["podGroupName"], pg["metadata"]["name"]);
            }

            let plain = decoded(job, Peer::Default);
            assert_eq!(kinds(&plain), ["Job", "Job"]);
            // Every set's Job and pods name the scenario job, however the peer wraps them.
            for j in plain.iter().chain(&cosched[1..]).chain(&native[2..]) {
                assert_eq!(j["metadata"]["labels"][HARNESS_JOB_LABEL], job.name.as_str());
                assert_eq!(j["spec"]["template"]["metadata"]["labels"][HARNESS_JOB_LABEL], job.name.as_str());
            }
            for r in js["spec"]["replicatedJobs"].as_array().unwrap() {
                assert_eq!(r["template"]["metadata"]["labels"][HARNESS_JOB_LABEL], job.name.as_str());
            }
            let task_meta = &vj["spec"]["tasks"][0]["template"]["metadata"];
            assert_eq!(task_meta["labels"][KWOK_GANG_LABEL], job.name.as_str());
            assert_eq!(task_meta["annotations"][KWOK_GANG_SIZE], total.to_string());
        }
    }
}
