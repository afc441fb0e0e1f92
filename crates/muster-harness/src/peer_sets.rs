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
//!
//! Gangs inside the job ([`JobRecord::gangs`]: a set kept to a rack, sets kept to a rack together)
//! and the job's own level reach each peer as far as its API goes:
//!
//! | peer | the job's level | a gang's level |
//! |---|---|---|
//! | `muster` | `muster.dev/required-topology` on the JobSet | `muster.dev/set-topology`, or `muster.dev/subgroup` and `muster.dev/subgroup-topology`, on the set's pod template |
//! | `kueue` | `podset-required-topology` on each PodSet in no gang, or on a leader-and-workers PodSet group (`podset-group-name`); Kueue has no constraint over several PodSets otherwise | `podset-required-topology` on each PodSet of the gang; a sub-group of a leader and its workers as a PodSet group |
//! | `native` | a CompositePodGroup `<job>` (`scheduling.k8s.io/v1alpha3`) over a PodGroup per set, with the level | the set's PodGroup's constraint; a sub-group as a CompositePodGroup of its sets' PodGroups |
//! | `default`, `coscheduling` | none: no API for it | none |
//! | `volcano` | the Volcano Job's `networkTopology`, hard, up to tier 2 around gangs ([`crate::peers::volcano_setup`]) | the set's task's `partitionPolicy`: one partition of all its pods, within tier 1; a sub-group is refused |

use serde_json::{Value, json};

use muster_k8s::labels;

use crate::cluster::{HARNESS_JOB_LABEL, HARNESS_SET_LABEL, KWOK_GANG_LABEL, KWOK_GANG_SIZE};
use crate::peers::{
    COSCHED_POD_GROUP, KUEUE_QUEUE, KUEUE_REQUIRED_TOPOLOGY, Object, Peer, PeerOptions, cosched_pod_group, metadata,
    native_gang, set, with_class, with_constraints,
};
use crate::workload::{self, GangRecord, JobRecord, ManifestOptions, manifest};

/// Kueue's PodSet group: PodSets whose pod templates name one group share a topology domain.
const KUEUE_PODSET_GROUP: &str = "kueue.x-k8s.io/podset-group-name";

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
        Peer::Muster => {
            muster_gangs(job, &mut jobs);
            return vec![jobset(job, jobs, opts)];
        }
        Peer::Kueue => {
            kueue_podset_topology(job, &mut jobs);
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
        Peer::Native if job.gangs.is_empty() && job.topology.is_none() => {
            let (companions, group) = native_gang(job, total, None, opts);
            out.extend(companions);
            for j in &mut jobs {
                set(j, &["spec", "template", "spec", "schedulingGroup"], "podGroupName", json!(group));
            }
        }
        Peer::Native => {
            out.extend(native_tree(job, opts));
            for (j, s) in jobs.iter_mut().zip(&job.sets) {
                let group = format!("{}-{}", job.name, s.name);
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
            set(&mut j, &["spec", "template", "metadata", "labels"], HARNESS_SET_LABEL, json!(s.name));
            j
        })
        .collect()
}

/// The gang a set is in, if any.
fn gang_of<'j>(job: &'j JobRecord, set: &str) -> Option<&'j GangRecord> {
    job.gangs.iter().find(|g| g.sets.iter().any(|s| s == set))
}

/// An annotation on the pod template of a set's Job.
fn annotate_pods(j: &mut Value, key: &str, value: &str) {
    set(j, &["spec", "template", "metadata", "annotations"], key, json!(value));
}

/// muster's gangs inside a JobSet: each set's pod template names its own level, or its
/// sub-group and the sub-group's level.
fn muster_gangs(job: &JobRecord, set_jobs: &mut [Value]) {
    for (j, s) in set_jobs.iter_mut().zip(&job.sets) {
        match gang_of(job, &s.name) {
            Some(g) if g.sub_group => {
                annotate_pods(j, labels::SUBGROUP, &g.name);
                annotate_pods(j, labels::SUBGROUP_TOPOLOGY, &g.level);
            }
            Some(g) => annotate_pods(j, labels::SET_TOPOLOGY, &g.level),
            None => {}
        }
    }
}

/// Whether `sets` are a leader and its workers: two sets, one of a single pod (the only PodSet
/// group Kueue takes).
fn leader_and_workers(job: &JobRecord, sets: &[String]) -> bool {
    let pods = |name: &String| job.sets.iter().find(|s| &s.name == name).map_or(0, |s| s.pods);
    sets.len() == 2 && sets.iter().any(|s| pods(s) == 1)
}

/// Kueue TAS on each PodSet (a replicated Job): its gang's level, or the job's when it is in no
/// gang; a leader and its workers as one PodSet group.
fn kueue_podset_topology(job: &JobRecord, set_jobs: &mut [Value]) {
    let own = job.topology.as_ref().map(|t| t.binding_label().unwrap_or(&t.label).to_string());
    let all: Vec<String> = job.sets.iter().map(|s| s.name.clone()).collect();
    let whole_job = job.gangs.is_empty() && (all.len() == 1 || leader_and_workers(job, &all));
    for (j, s) in set_jobs.iter_mut().zip(&job.sets) {
        let (label, group) = match gang_of(job, &s.name) {
            _ if whole_job => (own.clone(), own.as_ref().map(|_| job.name.clone())),
            None => (own.clone(), None),
            Some(g) if leader_and_workers(job, &g.sets) => (Some(g.label.clone()), Some(g.name.clone())),
            Some(g) => (Some(g.label.clone()), None),
        };
        if let Some(label) = label {
            annotate_pods(j, KUEUE_REQUIRED_TOPOLOGY, &label);
        }
        if let Some(group) = group.filter(|_| all.len() > 1) {
            annotate_pods(j, KUEUE_PODSET_GROUP, &group);
        }
    }
}

/// kube-scheduler's gang of gangs: a Workload whose root CompositePodGroup `<job>` (kept within
/// the job's level) holds a PodGroup per set (all its pods, within its own level), a sub-group's
/// sets under a CompositePodGroup of their own; then the objects made from its templates, parents
/// first, each named `<job>-<template>` (the root `<job>`).
fn native_tree(job: &JobRecord, opts: &PeerOptions) -> Vec<Object> {
    let class = (job.priority != 0).then(|| workload::priority_class(job.priority));
    let constraint = |label: Option<&str>| label.map(|l| json!({ "topology": [{ "key": l }] }));
    let pod_group_template = |set: &workload::SetRecord| {
        let label = gang_of(job, &set.name).filter(|g| !g.sub_group).map(|g| g.label.as_str());
        let policy = json!({ "gang": { "minCount": set.pods } });
        with_class(
            with_constraints(json!({ "name": set.name, "schedulingPolicy": policy }), &constraint(label)),
            &class,
        )
    };
    let composite_template = |name: &str, pod_groups: Vec<Value>, composites: Vec<Value>, label: Option<&str>| {
        let policy = json!({ "gang": { "minGroupCount": pod_groups.len() + composites.len() } });
        let mut t = json!({ "name": name, "schedulingPolicy": policy, "podGroupTemplates": pod_groups });
        if !composites.is_empty() {
            t["compositePodGroupTemplates"] = json!(composites);
        }
        with_class(with_constraints(t, &constraint(label)), &class)
    };
    let sub_groups: Vec<&GangRecord> = job.gangs.iter().filter(|g| g.sub_group).collect();
    let in_sub_group = |set: &str| sub_groups.iter().any(|g| g.sets.iter().any(|s| s == set));
    let composites = sub_groups
        .iter()
        .map(|g| {
            let sets = job.sets.iter().filter(|s| g.sets.contains(&s.name)).map(pod_group_template).collect();
            composite_template(&g.name, sets, vec![], Some(&g.label))
        })
        .collect();
    let root = composite_template(
        &job.name,
        job.sets.iter().filter(|s| !in_sub_group(&s.name)).map(pod_group_template).collect(),
        composites,
        job.topology.as_ref().and_then(|t| t.binding_label()),
    );
    let workload = json!({
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": metadata(&job.name, opts),
        "spec": { "compositePodGroupTemplates": [root] },
    });
    let mut out = vec![Object::new(workload.clone(), "workloads", true)];
    native_objects(job, &workload["spec"]["compositePodGroupTemplates"][0], None, opts, &mut out);
    out
}

/// The object of one template of [`native_tree`]'s Workload below `parent`, then its children's.
fn native_objects(job: &JobRecord, template: &Value, parent: Option<&str>, opts: &PeerOptions, out: &mut Vec<Object>) {
    let template_name = template["name"].as_str().expect("a template has a name");
    let name = if parent.is_none() { job.name.clone() } else { format!("{}-{template_name}", job.name) };
    let mut spec = json!({
        "workloadRef": { "workloadName": job.name, "templateName": template_name },
        "schedulingPolicy": template["schedulingPolicy"],
    });
    for key in ["schedulingConstraints", "priorityClassName"] {
        if let Some(v) = template.get(key) {
            spec[key] = v.clone();
        }
    }
    if let Some(p) = parent {
        spec["parentCompositePodGroupName"] = json!(p);
    }
    let composite = template.get("podGroupTemplates").is_some();
    let (api_version, kind, plural) = if composite {
        ("scheduling.k8s.io/v1alpha3", "CompositePodGroup", "compositepodgroups")
    } else {
        ("scheduling.k8s.io/v1beta1", "PodGroup", "podgroups")
    };
    let doc = json!({ "apiVersion": api_version, "kind": kind, "metadata": metadata(&name, opts), "spec": spec });
    out.push(Object::new(doc, plural, true));
    for key in ["podGroupTemplates", "compositePodGroupTemplates"] {
        for child in template[key].as_array().into_iter().flatten() {
            native_objects(job, child, Some(&name), opts, out);
        }
    }
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
/// retries (a scenario's job runs once, as its Jobs' backoffLimit 0 says). A set's own level is
/// its task's partition policy (one partition of all its pods, within a tier-1 HyperNode), the
/// job's level its `networkTopology` (tier 2 around gangs, [`crate::peers::volcano_setup`]).
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
            let mut task = json!({ "name": s.name, "replicas": s.pods, "template": j["spec"]["template"] });
            if gang_of(job, &s.name).is_some() {
                let topology = json!({ "mode": "hard", "highestTierAllowed": 1 });
                task["partitionPolicy"] =
                    json!({ "totalPartitions": 1, "partitionSize": s.pods, "networkTopology": topology });
            }
            task
        })
        .collect();
    let mut vj = json!({
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
    if let Some(t) = &job.topology {
        let mode = if t.binding_label().is_some() { "hard" } else { "soft" };
        let tier = if t.within.is_some() || !job.gangs.is_empty() { 2 } else { 1 };
        vj["spec"]["networkTopology"] = json!({ "mode": mode, "highestTierAllowed": tier });
    }
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

    /// A prefill/decode job and an MPI job of disaggregated-sixtieth.
    fn pd_and_mpi() -> [JobRecord; 2] {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/suite/disaggregated-sixtieth.yaml");
        let jobs = workload::jobs(&path, 1).unwrap();
        let find = |class: &str| jobs.iter().find(|j| j.class == class).unwrap().clone();
        [find("pd"), find("mpi")]
    }

    /// Each set's pod template annotations `keys` (by replicated Job or Job, in order).
    fn pod_annotations(templates: &[&Value], keys: &[&str]) -> Vec<Vec<Option<String>>> {
        templates
            .iter()
            .map(|t| keys.iter().map(|k| t["metadata"]["annotations"][k].as_str().map(String::from)).collect())
            .collect()
    }

    fn replicated_templates(js: &Value) -> Vec<&Value> {
        js["spec"]["replicatedJobs"].as_array().unwrap().iter().map(|r| &r["template"]["spec"]["template"]).collect()
    }

    fn some(v: &str) -> Option<String> {
        Some(v.to_string())
    }

    #[test]
    fn gangs_inside_a_job_reach_muster_kueue_and_native_gangs() {
        let [pd, mpi] = pd_and_mpi();
        let muster = decoded(&pd, Peer::Muster).pop().unwrap();
        assert_eq!(muster["metadata"]["annotations"]["muster.dev/required-topology"], "block");
        let keys = ["muster.dev/set-topology", "muster.dev/subgroup"];
        assert_eq!(
            pod_annotations(&replicated_templates(&muster), &keys),
            [vec![None, None], vec![some("rack"), None], vec![some("rack"), None]]
        );
        // Every set's pods name their job and set, for the spread count.
        for (t, set) in replicated_templates(&muster).iter().zip(["router", "prefill", "decode"]) {
            assert_eq!(t["metadata"]["labels"][HARNESS_SET_LABEL], set);
        }

        // Kueue: the router alone in a block, each gang in a rack; no PodSet group.
        let kueue = decoded(&pd, Peer::Kueue).pop().unwrap();
        let keys = [KUEUE_REQUIRED_TOPOLOGY, KUEUE_PODSET_GROUP];
        let (block, rack) = (some("muster.dev/block"), some("muster.dev/rack"));
        assert_eq!(
            pod_annotations(&replicated_templates(&kueue), &keys),
            [vec![block.clone(), None], vec![rack.clone(), None], vec![rack.clone(), None]]
        );
        // The MPI job: the launcher anywhere, the workers in a rack.
        let kueue = decoded(&mpi, Peer::Kueue).pop().unwrap();
        assert_eq!(pod_annotations(&replicated_templates(&kueue), &keys), [vec![None, None], vec![rack.clone(), None]]);

        // Native: a CompositePodGroup in a block over a PodGroup per set.
        let native = decoded(&pd, Peer::Native);
        assert_eq!(
            kinds(&native),
            ["Workload", "CompositePodGroup", "PodGroup", "PodGroup", "PodGroup", "Job", "Job", "Job"]
        );
        let root = &native[1];
        assert_eq!(root["apiVersion"], "scheduling.k8s.io/v1alpha3");
        assert_eq!(root["metadata"]["name"], pd.name.as_str());
        assert_eq!(root["spec"]["schedulingPolicy"]["gang"]["minGroupCount"], 3);
        assert_eq!(root["spec"]["schedulingConstraints"], json!({"topology": [{"key": "muster.dev/block"}]}));
        assert_eq!(root["spec"]["workloadRef"], json!({"workloadName": pd.name, "templateName": pd.name}));
        let template = &native[0]["spec"]["compositePodGroupTemplates"][0];
        assert_eq!(template["podGroupTemplates"].as_array().unwrap().len(), 3);
        for (pg, (set, pods, key)) in native[2..5].iter().zip([
            ("router", 1, None),
            ("prefill", 4, Some("muster.dev/rack")),
            ("decode", 3, Some("muster.dev/rack")),
        ]) {
            assert_eq!(pg["metadata"]["name"], format!("{}-{set}", pd.name));
            assert_eq!(pg["spec"]["parentCompositePodGroupName"], pd.name.as_str());
            assert_eq!(pg["spec"]["schedulingPolicy"]["gang"]["minCount"], pods);
            assert_eq!(pg["spec"]["workloadRef"]["templateName"], set);
            assert_eq!(pg["spec"]["schedulingConstraints"]["topology"][0]["key"].as_str(), key);
        }
        for (j, set) in native[5..].iter().zip(["router", "prefill", "decode"]) {
            assert_eq!(j["spec"]["template"]["spec"]["schedulingGroup"]["podGroupName"], format!("{}-{set}", pd.name));
        }

        // Volcano: the job within a tier-2 HyperNode (a block), each gang's task one partition
        // within a tier-1 one (a rack); the router's task free.
        let vj = decoded(&pd, Peer::Volcano).pop().unwrap();
        assert_eq!(vj["spec"]["networkTopology"], json!({"mode": "hard", "highestTierAllowed": 2}));
        let partitions: Vec<&Value> =
            vj["spec"]["tasks"].as_array().unwrap().iter().map(|t| &t["partitionPolicy"]).collect();
        let rack = |n: u32| json!({"totalPartitions": 1, "partitionSize": n, "networkTopology": {"mode": "hard", "highestTierAllowed": 1}});
        assert_eq!(partitions, [&Value::Null, &rack(4), &rack(3)]);
        let w = muster_sim::scenario::load(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/suite/disaggregated-sixtieth.yaml"),
            1,
        )
        .unwrap();
        let hyper: Vec<Value> =
            crate::peers::volcano_setup(&w, &[pd.clone(), mpi.clone()]).unwrap().into_iter().map(|o| o.value).collect();
        let tiers: Vec<u64> = hyper.iter().map(|h| h["spec"]["tier"].as_u64().unwrap()).collect();
        assert_eq!(tiers, [1, 1, 1, 1, 2, 2, 3], "4 racks, 2 blocks, the cluster");

        // Neither coscheduling nor the default scheduler can be told.
        for peer in [Peer::Coscheduling, Peer::Default] {
            let text = serde_json::to_string(&decoded(&pd, peer)).unwrap();
            assert!(!text.contains("topology") && !text.contains("muster.dev/rack"), "{peer:?}: {text}");
        }
    }

    #[test]
    fn a_sub_group_is_a_sub_group_of_muster_a_composite_of_native_and_for_a_leader_a_kueue_podset_group() {
        let [mut pd, mut mpi] = pd_and_mpi();
        let serve = GangRecord {
            name: "serve".into(),
            sets: vec!["prefill".into(), "decode".into()],
            sub_group: true,
            level: "rack".into(),
            label: "muster.dev/rack".into(),
        };
        pd.gangs = vec![serve];
        let muster = decoded(&pd, Peer::Muster).pop().unwrap();
        let keys = ["muster.dev/set-topology", "muster.dev/subgroup", "muster.dev/subgroup-topology"];
        assert_eq!(
            pod_annotations(&replicated_templates(&muster), &keys),
            [vec![None, None, None], vec![None, some("serve"), some("rack")], vec![None, some("serve"), some("rack")]]
        );
        let native = decoded(&pd, Peer::Native);
        assert_eq!(
            kinds(&native),
            [
                "Workload",
                "CompositePodGroup",
                "PodGroup",
                "CompositePodGroup",
                "PodGroup",
                "PodGroup",
                "Job",
                "Job",
                "Job"
            ]
        );
        assert_eq!(native[1]["spec"]["schedulingPolicy"]["gang"]["minGroupCount"], 2, "the router and the sub-group");
        let sub = &native[3];
        assert_eq!(sub["metadata"]["name"], format!("{}-serve", pd.name));
        assert_eq!(sub["spec"]["parentCompositePodGroupName"], pd.name.as_str());
        assert_eq!(sub["spec"]["schedulingConstraints"]["topology"][0]["key"], "muster.dev/rack");
        for pg in &native[4..6] {
            assert_eq!(pg["spec"]["parentCompositePodGroupName"], format!("{}-serve", pd.name));
            assert!(pg["spec"].get("schedulingConstraints").is_none(), "the sub-group holds the level");
        }
        // Kueue: prefill (4) and decode (3) are no leader and workers: each PodSet in a rack.
        let kueue = decoded(&pd, Peer::Kueue).pop().unwrap();
        let keys = [KUEUE_REQUIRED_TOPOLOGY, KUEUE_PODSET_GROUP];
        let rack = some("muster.dev/rack");
        assert_eq!(
            pod_annotations(&replicated_templates(&kueue), &keys)[1..],
            [vec![rack.clone(), None], vec![rack.clone(), None]]
        );
        // An MPI launcher and its workers in one rack: one PodSet group.
        mpi.gangs = vec![GangRecord {
            name: "mpi".into(),
            sets: vec!["launcher".into(), "worker".into()],
            ..mpi.gangs[0].clone()
        }];
        mpi.gangs[0].sub_group = true;
        let kueue = decoded(&mpi, Peer::Kueue).pop().unwrap();
        assert_eq!(
            pod_annotations(&replicated_templates(&kueue), &keys),
            [vec![rack.clone(), some("mpi")], vec![rack, some("mpi")]]
        );
        // A Volcano Job keeps one task to a domain, not several together.
        let w = muster_sim::scenario::load(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/suite/disaggregated-sixtieth.yaml"),
            1,
        )
        .unwrap();
        let e = crate::peers::volcano_setup(&w, &[pd]).unwrap_err().to_string();
        assert!(e.contains("sub-group serve keeps several sets within one domain together"), "{e}");
    }
}
