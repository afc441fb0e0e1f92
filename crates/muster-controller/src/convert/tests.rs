//! The views from real object shapes (JSON as the apiserver serves them).

use super::*;
use muster_k8s::Quantity;
use muster_k8s::external::{JobSet, MPIJob};
use muster_k8s::group::{TopologyConstraint, TopologyMode};
use serde_json::json;

fn job(extra: serde_json::Value) -> Job {
    let mut base = json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "train", "namespace": "ml", "uid": "u1",
                     "creationTimestamp": "2026-01-01T00:00:10Z",
                     "labels": {"muster.dev/queue": "gpu"}},
        "spec": {"parallelism": 4, "suspend": true, "template": {"spec": {
            "restartPolicy": "Never",
            "containers": [
                {"name": "a", "image": "x", "resources": {"requests": {"cpu": "1500m", "memory": "1Gi"}}},
                {"name": "b", "image": "x", "resources": {"limits": {"cpu": "500m", "nvidia.com/gpu": "1"}}}],
            "initContainers": [{"name": "i", "image": "x", "resources": {"requests": {"cpu": "3"}}}],
            "nodeSelector": {"pool": "a"},
            "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]}}}
    });
    json_merge(&mut base, extra);
    serde_json::from_value(base).unwrap()
}

fn json_merge(a: &mut serde_json::Value, b: serde_json::Value) {
    match (a, b) {
        (serde_json::Value::Object(a), serde_json::Value::Object(b)) => {
            for (k, v) in b {
                json_merge(a.entry(k).or_insert(serde_json::Value::Null), v);
            }
        }
        (a, b) => *a = b,
    }
}

#[test]
fn a_job_becomes_a_group_of_its_parallelism_with_summed_requests() {
    let v = job_view(&job(json!({}))).unwrap();
    assert_eq!(v.key, GroupKey::new("ml", "train"));
    assert_eq!(v.queue, "gpu");
    assert!(v.suspended);
    assert_eq!(v.created, 1_767_225_610);
    let g = v.group.unwrap();
    assert_eq!(g.members, Members { min: 4, max: None });
    // cpu: max(1.5 + 0.5, init 3) = 3 cores; gpu from a limit.
    assert_eq!(g.resources["cpu"], Quantity::Text("3000m".into()));
    assert_eq!(g.resources["memory"], Quantity::Int(1 << 30));
    assert_eq!(g.resources["nvidia.com/gpu"], Quantity::Int(1));
    assert_eq!(g.tolerations.len(), 1);
    let req = g.to_request("train").unwrap();
    assert_eq!(req.min_members, 4);
    assert!(req.requests.contains(&("cpu".to_string(), 3000)));
}

#[test]
fn a_job_holds_no_more_members_than_pods_it_will_create() {
    let v = job_view(&job(json!({"spec": {"completions": 2}}))).unwrap();
    assert_eq!(v.group.unwrap().members, Members { min: 2, max: None }, "parallelism 4, completions 2");
    let v = job_view(&job(json!({"spec": {"completions": 9}}))).unwrap();
    assert_eq!(v.group.unwrap().members, Members { min: 4, max: None });
}

#[test]
fn a_native_sidecar_counts_beside_the_containers() {
    let sidecar = json!({"spec": {"template": {"spec": {"initContainers": [
        {"name": "side", "image": "x", "restartPolicy": "Always", "resources": {"requests": {"cpu": "4"}}}]}}}});
    let g = job_view(&job(sidecar)).unwrap().group.unwrap();
    // Containers 1.5 + 0.5 plus the sidecar's 4: what the kubelet counts, not the largest init.
    assert_eq!(g.resources["cpu"], Quantity::Text("6000m".into()));
}

#[test]
fn elastic_and_bad_annotations() {
    let v = job_view(&job(json!({"metadata": {"annotations": {"muster.dev/min-members": "2"}}}))).unwrap();
    assert_eq!(v.group.unwrap().members, Members { min: 2, max: Some(4) });
    let v = job_view(&job(json!({"metadata": {"annotations": {"muster.dev/duration-seconds": "soon"}}}))).unwrap();
    let e = v.group.unwrap_err();
    assert!(e.contains("muster.dev/duration-seconds") && e.contains("not a whole number of seconds"), "{e}");
}

#[test]
fn a_topology_annotation_becomes_the_groups_constraint() {
    let ann = |k: &str, v: &str| job(json!({"metadata": {"annotations": {k: v}}}));
    let g = job_view(&ann("muster.dev/required-topology", "rack")).unwrap().group.unwrap();
    assert_eq!(
        g.topology,
        Some(TopologyConstraint {
            level: "rack".into(),
            mode: TopologyMode::Required,
            within: None,
            weights: Default::default()
        })
    );
    let g = job_view(&ann("muster.dev/preferred-topology", "block")).unwrap().group.unwrap();
    assert_eq!(
        g.topology,
        Some(TopologyConstraint {
            level: "block".into(),
            mode: TopologyMode::Preferred,
            within: None,
            weights: Default::default()
        })
    );
    // Both: the preferred level kept within the required one.
    let both = job(json!({"metadata": {"annotations": {
        "muster.dev/preferred-topology": "rack", "muster.dev/required-topology": "block"}}}));
    let g = job_view(&both).unwrap().group.unwrap();
    let want = TopologyConstraint {
        level: "rack".into(),
        mode: TopologyMode::Preferred,
        within: Some("block".into()),
        weights: Default::default(),
    };
    assert_eq!(g.topology, Some(want));
    assert_eq!(job_view(&job(json!({}))).unwrap().group.unwrap().topology, None);
    let e = job_view(&ann("muster.dev/required-topology", "")).unwrap().group.unwrap_err();
    assert!(e.contains("muster.dev/required-topology") && e.contains("not a topology level"), "{e}");
}

#[test]
fn jobs_without_the_queue_label_are_not_ours_and_finish_states_are_read() {
    let mut j = job(json!({}));
    j.metadata.labels = None;
    assert!(job_view(&j).is_none());
    let done = job(json!({"status": {"conditions": [{"type": "Complete", "status": "True"}]}}));
    assert_eq!(job_view(&done).unwrap().finished, Some(true));
    let failed = job(json!({"status": {"conditions": [{"type": "Failed", "status": "True"}]}}));
    assert_eq!(job_view(&failed).unwrap().finished, Some(false));
}

#[test]
fn nodes_split_pooled_resources_from_devices_and_read_readiness() {
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": "n1", "labels": {"topology.kubernetes.io/zone": "z1", "muster.dev/rack": "r3"}},
        "spec": {"unschedulable": true, "taints": [
            {"key": "k", "value": "v", "effect": "NoSchedule"},
            {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"},
            {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}]},
        "status": {"allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110", "nvidia.com/gpu": "2"},
                   "conditions": [{"type": "Ready", "status": "True"}]}
    }))
    .unwrap();
    let v = node_view(&node, &default_levels()).unwrap();
    assert!(v.ready);
    assert!(v.spec.unschedulable);
    assert_eq!(v.spec.topology, [("zone".to_string(), "z1".to_string()), ("rack".into(), "r3".into())]);
    assert!(v.spec.pooled.contains(&("cpu".to_string(), 8000)));
    assert_eq!(v.spec.devices, [("nvidia.com/gpu".to_string(), 2)]);
    // The cordon and readiness taints are read as `unschedulable` and `ready` instead.
    assert_eq!(v.spec.taints.iter().map(|t| t.key.as_str()).collect::<Vec<_>>(), ["k"]);
}

#[test]
fn an_extended_resource_offered_by_the_thousand_is_pooled_not_one_device_per_unit() {
    // Intel's SGX plugin offers its enclave memory in bytes; KubeVirt offers /dev/kvm by the 1000.
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": "n1"},
        "status": {"allocatable": {"cpu": "8", "sgx.intel.com/epc": "98566144", "devices.kubevirt.io/kvm": "1k",
                                   "example.com/huge": "1e12"}}
    }))
    .unwrap();
    let v = node_view(&node, &default_levels()).unwrap();
    assert_eq!(v.spec.devices, [("devices.kubevirt.io/kvm".to_string(), 1000)]);
    assert!(v.spec.pooled.contains(&("sgx.intel.com/epc".to_string(), 98_566_144)), "{:?}", v.spec.pooled);
    assert!(v.spec.pooled.contains(&("example.com/huge".to_string(), 1_000_000_000_000)), "{:?}", v.spec.pooled);
    // And the graph takes the node, with one vertex per kvm device and none per byte.
    let g = muster_graph::Graph::from_nodes("t", &[v.spec]).unwrap();
    assert!(g.vertices.len() < 1100, "{} vertices", g.vertices.len());
}

#[test]
fn a_node_under_pressure_is_read_as_cordoned_not_as_tainted() {
    let node = |taint: &str| -> Node {
        serde_json::from_value(json!({
            "metadata": {"name": "n1"},
            "spec": {"taints": [{"key": taint, "effect": "NoSchedule"}]},
            "status": {"allocatable": {"cpu": "8"}, "conditions": [{"type": "Ready", "status": "True"}]}
        }))
        .unwrap()
    };
    for taint in ["node.kubernetes.io/memory-pressure", "node.kubernetes.io/disk-pressure"] {
        let v = node_view(&node(taint), &default_levels()).unwrap();
        assert!(v.spec.unschedulable, "{taint}");
        assert!(v.spec.taints.is_empty(), "{taint}");
    }
    let v = node_view(&node("example.com/dedicated"), &default_levels()).unwrap();
    assert!(!v.spec.unschedulable);
    assert_eq!(v.spec.taints.len(), 1);
}

#[test]
fn pods_read_owner_member_and_phase() {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "train-0", "namespace": "ml", "uid": "p1",
                     "annotations": {"muster.dev/member": "3", "batch.kubernetes.io/job-completion-index": "0"},
                     "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "u1", "controller": true}]},
        "spec": {"schedulerName": "muster", "nodeName": "n1",
                 "containers": [{"name": "a", "image": "x", "resources": {"requests": {"cpu": "2"}}}]},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    }))
    .unwrap();
    let v = pod_view(&pod).unwrap();
    assert!(v.ours && v.ready && v.holds_capacity());
    assert_eq!(v.group_key(), Some(GroupKey::new("ml", "train")));
    assert_eq!((v.member, v.place.and_then(|p| p.index)), (Some(3), Some(0)));
    assert_eq!(v.requests, [("cpu".to_string(), 2000)]);
}

fn plain_pod(extra: serde_json::Value) -> Pod {
    let mut base = json!({
        "metadata": {"name": "w-0", "namespace": "ml", "uid": "p1",
                     "creationTimestamp": "2026-01-01T00:00:10Z",
                     "labels": {"muster.dev/group": "ring", "muster.dev/group-size": "4",
                                "muster.dev/group-min": "2", "muster.dev/queue": "gpu"},
                     "annotations": {"muster.dev/duration-seconds": "600"}},
        "spec": {"schedulerName": "muster", "schedulingGates": [{"name": "muster.dev/admission"}],
                 "priorityClassName": "high",
                 "containers": [{"name": "a", "image": "x", "resources": {"requests": {"cpu": "2"}}}]}
    });
    json_merge(&mut base, extra);
    serde_json::from_value(base).unwrap()
}

#[test]
fn a_plain_pods_pod_group_api_is_the_one_its_group_came_from() {
    let api = |extra| pod_view(&plain_pod(extra)).unwrap().pod_group;
    assert_eq!(api(json!({})), None);
    // Kubernetes' own: spec.schedulingGroup names the group's PodGroup.
    assert_eq!(api(json!({"spec": {"schedulingGroup": {"podGroupName": "ring"}}})), Some(PodGroupApi::Kubernetes));
    // scheduler-plugins': the alias label the group came from.
    assert_eq!(
        api(json!({"metadata": {"labels": {"scheduling.x-k8s.io/pod-group": "ring"}}})),
        Some(PodGroupApi::SchedulerPlugins)
    );
    // An alias label naming another group than the pod's own is not its group's PodGroup.
    assert_eq!(api(json!({"metadata": {"labels": {"scheduling.x-k8s.io/pod-group": "other"}}})), None);
}

#[test]
fn plain_pods_read_their_group_and_make_its_spec() {
    let v = pod_view(&plain_pod(json!({}))).unwrap();
    assert!(v.is_plain() && v.gated && v.ours);
    assert_eq!(v.group_key(), Some(GroupKey::new("ml", "ring")));
    assert_eq!(v.members.as_deref(), Some(&Ok(Members { min: 2, max: Some(4) })));
    assert_eq!(v.queue.as_deref(), Some("gpu"));
    assert_eq!((v.created, v.duration, v.priority_class.as_deref()), (1_767_225_610, Some(600), Some("high")));
    let g = plain_group_spec(&v).unwrap();
    assert_eq!(g.members, Members { min: 2, max: Some(4) });
    assert_eq!(g.resources["cpu"], Quantity::Text("2000m".into()));
    assert_eq!((g.owner, g.duration_seconds, g.queue.as_str()), (None, Some(600), "gpu"));
    // Ungated; a bad size; a min above the size; no queue.
    let v = pod_view(&plain_pod(json!({"spec": {"schedulingGates": []},
        "metadata": {"labels": {"muster.dev/group-size": "many"}}})))
    .unwrap();
    assert!(!v.gated);
    let e = plain_group_spec(&v).unwrap_err();
    assert!(e.starts_with("pod w-0: metadata.labels[muster.dev/group-size]: \"many\" is not a whole number"), "{e}");
    let v = pod_view(&plain_pod(json!({"metadata": {"labels": {"muster.dev/group-min": "9"}}}))).unwrap();
    assert!(plain_group_spec(&v).unwrap_err().contains("muster.dev/group-min"));
    let mut noq = plain_pod(json!({}));
    noq.metadata.labels.as_mut().unwrap().remove("muster.dev/queue");
    let v = pod_view(&noq).unwrap();
    assert!(plain_group_spec(&v).unwrap_err().contains("muster.dev/queue"));
    // Where the pods may run comes from the pod, as a Job's from its template.
    let v = pod_view(&plain_pod(json!({"spec": {"nodeSelector": {"pool": "a"},
        "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]}})))
    .unwrap();
    let g = plain_group_spec(&v).unwrap();
    assert_eq!((g.node_selector["pool"].as_str(), g.tolerations.len()), ("a", 1));
    let odd = json!({"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "k", "operator": "Sometimes", "values": ["v"]}]}]}}}}});
    let v = pod_view(&plain_pod(odd)).unwrap();
    assert!(plain_group_spec(&v).unwrap_err().contains("spec.affinity: node affinity operator \"Sometimes\""));
    // A topology level, as a Job's annotations say it (the webhook writes a Kubernetes PodGroup's).
    let racked = |level: &str| {
        pod_view(&plain_pod(json!({"metadata": {"annotations": {"muster.dev/required-topology": level}}}))).unwrap()
    };
    let g = plain_group_spec(&racked("rack")).unwrap();
    assert_eq!(
        g.topology,
        Some(TopologyConstraint {
            level: "rack".into(),
            mode: TopologyMode::Required,
            within: None,
            weights: Default::default()
        })
    );
    let e = plain_group_spec(&racked("Rack 1")).unwrap_err();
    assert!(e.starts_with("pod w-0: metadata.annotations[muster.dev/required-topology]: \"Rack 1\""), "{e}");
    let first = pod_view(&plain_pod(json!({}))).unwrap();
    let spec = plain_group_spec(&first).unwrap();
    let other = racked("rack");
    let differ = plain_pods_differ(&first, &spec, &other, plain_group_spec(&other).as_ref()).unwrap();
    assert!(differ.starts_with("annotations muster.dev/required-topology and preferred-topology: pod w-0"), "{differ}");
    // A Job's pod keeps its Job's group whatever its labels say, and pays nothing for them.
    let owned = plain_pod(json!({"metadata": {"ownerReferences": [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "u1", "controller": true}]}}));
    let v = pod_view(&owned).unwrap();
    assert!(!v.is_plain());
    assert_eq!(v.group_key(), Some(GroupKey::new("ml", "train")));
    assert_eq!((v.group, v.queue, v.members, v.duration), (None, None, None, None));
    assert!(v.placement.is_none());
}

fn jobset(extra: serde_json::Value) -> JobSet {
    let pod = |cpu: &str| {
        json!({"spec": {"containers": [{"name": "a", "image": "x", "resources": {"requests": {"cpu": cpu}}}],
                        "schedulerName": "muster", "nodeSelector": {"pool": "a"}}})
    };
    let mut base = json!({
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
        "metadata": {"name": "train", "namespace": "ml", "uid": "js1",
                     "creationTimestamp": "2026-01-01T00:00:10Z",
                     "labels": {"muster.dev/queue": "gpu"},
                     "annotations": {"muster.dev/duration-seconds": "60"}},
        "spec": {"suspend": true, "replicatedJobs": [
            {"name": "workers", "replicas": 2, "template": {"spec": {"parallelism": 3, "completionMode": "Indexed",
                "template": pod("1")}}},
            {"name": "driver", "template": {"spec": {"template": pod("2500m")}}}]}
    });
    json_merge(&mut base, extra);
    serde_json::from_value(base).unwrap()
}

#[test]
fn a_jobset_is_one_group_of_every_pod_of_its_child_jobs() {
    let j = workload_view(&jobset(json!({}))).unwrap();
    let layout = |name: &str, children, pods| SetLayout { name: name.into(), children, pods };
    assert_eq!(j.layout, [layout("workers", 2, 3), layout("driver", 1, 1)]);
    assert_eq!((j.key.clone(), j.uid.as_str(), j.queue.as_str()), (GroupKey::new("ml", "train"), "js1", "gpu"));
    assert!(j.suspended && j.finished.is_none());
    let g = j.group.clone().unwrap();
    // 2 x 3 workers + 1 driver, each set asking what its own pods ask.
    assert_eq!(g.members, Members { min: 7, max: None });
    let sets: Vec<_> = g.sets.iter().map(|s| (s.name.as_str(), s.members.min, s.resources["cpu"].clone())).collect();
    let cpu = |m: &str| Quantity::Text(m.into());
    assert_eq!(sets, [("workers", 6, cpu("1000m")), ("driver", 1, cpu("2500m"))]);
    assert_eq!((g.sets[0].node_selector["pool"].as_str(), g.duration_seconds), ("a", Some(60)));
    let request = g.to_request("train").unwrap();
    assert_eq!(request.member_requests(6), [("cpu".to_string(), 2500)], "the driver is member 6");
    let owner = g.owner.unwrap();
    assert_eq!(
        (owner.api_version.as_str(), owner.kind.as_str(), owner.uid.as_deref()),
        ("jobset.x-k8s.io/v1alpha2", "JobSet", Some("js1"))
    );
    // Members: workers Job 1's completion 2 is 1*3+2; the driver's pod is the 7th.
    let at = |set: &str, child, index| PodPlace { workload: "train".into(), set: set.into(), child, index };
    assert_eq!(j.member_of(&at("workers", 1, Some(2))), Some(5));
    assert_eq!(j.member_of(&at("driver", 0, Some(0))), Some(6));
    assert_eq!(j.member_of(&at("workers", 2, Some(0))), None, "no third workers Job");
    assert_eq!(j.member_of(&at("workers", 0, Some(3))), None, "three pods per workers Job");
    assert_eq!(j.member_of(&at("workers", 0, None)), None, "not indexed: any free member");
    assert_eq!(j.member_of(&at("other", 0, Some(0))), None);
    // Finished; replicated Jobs asking for other nodes; no queue label.
    let done = jobset(json!({"status": {"conditions": [{"type": "Failed", "status": "True", "reason": "r",
        "message": "m", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}));
    assert_eq!(workload_view(&done).unwrap().finished, Some(false));
    let mut odd = jobset(json!({}));
    odd.spec.replicated_jobs[1].template.spec.as_mut().unwrap().template.spec.as_mut().unwrap().node_selector = None;
    let g = workload_view(&odd).unwrap().group.unwrap();
    let selectors: Vec<_> = g.sets.iter().map(|s| s.node_selector.get("pool").map(String::as_str)).collect();
    assert_eq!(selectors, [Some("a"), None], "each set runs where its own pods may");
    let mut unqueued = jobset(json!({}));
    unqueued.metadata.labels = None;
    assert!(workload_view(&unqueued).is_none());
    // Its own hold; a TrainJob's JobSet is held through the TrainJob (the trainer controls it).
    assert_eq!(j.hold.kind, "JobSet");
    let trained = jobset(json!({"metadata": {"ownerReferences": [{"apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob", "name": "train", "uid": "t", "controller": true}]}}));
    let t = workload_view(&trained).unwrap();
    assert_eq!((t.kind.kind, t.hold.kind), ("JobSet", "TrainJob"));
}

#[test]
fn pods_of_a_jobsets_child_jobs_belong_to_the_jobset_and_its_child_jobs_are_no_groups() {
    let pod = |job: &str| -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": format!("{job}-1-x"), "namespace": "ml", "uid": "p1",
                         "labels": {"jobset.sigs.k8s.io/jobset-name": "train",
                                    "jobset.sigs.k8s.io/replicatedjob-name": "workers",
                                    "jobset.sigs.k8s.io/job-index": "1"},
                         "annotations": {"batch.kubernetes.io/job-completion-index": "1"},
                         "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": job, "uid": "j", "controller": true}]},
            "spec": {"schedulerName": "muster", "containers": []}
        }))
        .unwrap()
    };
    let v = pod_view(&pod("train-workers-1")).unwrap();
    assert_eq!(v.group_key(), Some(GroupKey::new("ml", "train")));
    let place = PodPlace { workload: "train".into(), set: "workers".into(), child: 1, index: Some(1) };
    assert_eq!(v.place.as_deref(), Some(&place));
    // A Job of one's own labelled as another JobSet's child stays its own Job's.
    let v = pod_view(&pod("mine")).unwrap();
    assert_eq!(v.group_key(), Some(GroupKey::new("ml", "mine")));
    assert_eq!(v.place.map(|p| p.set), Some(String::new()));
    // The child Job carries the queue label from the JobSet's template, and is no group.
    let child = job(json!({"metadata": {"ownerReferences": [
        {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": "train", "uid": "js1", "controller": true}]}}));
    assert!(job_view(&child).is_none());
}

fn mpijob() -> MPIJob {
    let replica = |replicas: i32, cpu: &str| {
        json!({"replicas": replicas, "template": {"spec": {"schedulerName": "muster",
            "containers": [{"name": "a", "image": "x", "resources": {"requests": {"cpu": cpu}}}]}}})
    };
    serde_json::from_value(json!({
        "apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
        "metadata": {"name": "pi", "namespace": "ml", "uid": "m1", "labels": {"muster.dev/queue": "gpu"}},
        "spec": {"slotsPerWorker": 1, "runPolicy": {"suspend": true, "cleanPodPolicy": "Running"},
                 "mpiReplicaSpecs": {"Launcher": replica(1, "500m"), "Worker": replica(3, "2")}},
        "status": {"conditions": [{"type": "Succeeded", "status": "True", "lastUpdateTime": "2026-01-01T00:00:00Z"}]}
    }))
    .unwrap()
}

#[test]
fn an_mpijob_is_one_group_of_its_launcher_and_workers() {
    let v = workload_view(&mpijob()).unwrap();
    assert_eq!(
        (v.kind, v.key.clone(), v.suspended, v.finished),
        (&workload::mpijob::KIND, GroupKey::new("ml", "pi"), true, Some(true))
    );
    let g = v.group.clone().unwrap();
    assert_eq!(g.members, Members { min: 4, max: None }, "the launcher counts in the gang");
    let sets: Vec<_> = g.sets.iter().map(|s| (s.name.as_str(), s.members.min)).collect();
    assert_eq!(sets, [("launcher", 1), ("worker", 3)]);
    assert_eq!(g.sets[1].resources["cpu"], Quantity::Text("2000m".into()));
    assert_eq!(g.owner.map(|o| (o.api_version, o.kind)), Some(("kubeflow.org/v2beta1".into(), "MPIJob".into())));
    // The launcher is member 0, worker i is member 1 + i.
    let pod = |name: &str, labels: serde_json::Value, owner: serde_json::Value| -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ml", "uid": name, "labels": labels, "ownerReferences": [owner]},
            "spec": {"schedulerName": "muster", "containers": []}
        }))
        .unwrap()
    };
    let mpi =
        json!({"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "name": "pi", "uid": "m1", "controller": true});
    let launcher_job =
        json!({"apiVersion": "batch/v1", "kind": "Job", "name": "pi-launcher", "uid": "j1", "controller": true});
    let worker = |i: &str| {
        json!({"training.kubeflow.org/job-name": "pi", "training.kubeflow.org/job-role": "worker",
                                  "training.kubeflow.org/replica-index": i})
    };
    let launcher = json!({"training.kubeflow.org/job-name": "pi", "training.kubeflow.org/job-role": "launcher"});
    let member = |p: &Pod| {
        let p = pod_view(p).unwrap();
        (p.group_key(), p.place.and_then(|at| v.member_of(&at)))
    };
    let pi = Some(GroupKey::new("ml", "pi"));
    assert_eq!(member(&pod("pi-worker-2", worker("2"), mpi.clone())), (pi.clone(), Some(3)));
    assert_eq!(member(&pod("pi-launcher-x", launcher.clone(), launcher_job.clone())), (pi, Some(0)));
    // Pods that claim the MPIJob without the operator's names stay out of its group.
    let other = json!({"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "name": "other", "uid": "m2", "controller": true});
    assert_eq!(member(&pod("w", worker("0"), other)).0, None);
    let mine = json!({"apiVersion": "batch/v1", "kind": "Job", "name": "mine", "uid": "j2", "controller": true});
    assert_eq!(member(&pod("l", launcher, mine)), (Some(GroupKey::new("ml", "mine")), None));
}

#[test]
fn plain_pods_naming_their_sets_make_a_group_of_sets() {
    // A leader of 500m on cpu nodes and three workers of 2 cpu: a rigid group of 4.
    let pod = |name: &str, set: &str, cpu: &str, at: u32| {
        let mut extra = json!({"metadata": {"name": name, "uid": name,
            "creationTimestamp": format!("2026-01-01T00:00:{at:02}Z"),
            "labels": {"muster.dev/set": set, "muster.dev/group-min": "4"}},
            "spec": {"containers": [{"name": "a", "image": "x", "resources": {"requests": {"cpu": cpu}}}]}});
        if set == "leader" {
            extra["spec"]["nodeSelector"] = json!({"pool": "cpu"});
        }
        pod_view(&plain_pod(extra)).unwrap()
    };
    let pods = [
        pod("l", "leader", "500m", 1),
        pod("w1", "worker", "2", 2),
        pod("w2", "worker", "2", 3),
        pod("w3", "worker", "2", 4),
    ];
    let refs: Vec<&PodView> = pods.iter().collect();
    let g = plain_sets_spec(&refs).unwrap();
    let sets: Vec<_> = g.sets.iter().map(|s| (s.name.as_str(), s.members.min, s.resources["cpu"].clone())).collect();
    let cpu = |m: &str| Quantity::Text(m.into());
    assert_eq!(sets, [("leader", 1, cpu("500m")), ("worker", 3, cpu("2000m"))]);
    assert_eq!(
        (g.sets[0].node_selector.get("pool").map(String::as_str), g.sets[1].node_selector.is_empty()),
        (Some("cpu"), true)
    );
    assert!(g.resources.is_empty() && g.node_selector.is_empty(), "said per set");
    let request = g.to_request("ring").unwrap();
    assert_eq!(
        (request.set_members("worker"), request.member_requests(0)),
        (Some(1..4), &[("cpu".to_string(), 500)][..])
    );
    // A worker asking otherwise than the set's first; a pod naming no set; an elastic group.
    let mut odd = pods.clone();
    odd[3] = pod("w3", "worker", "3", 4);
    let refs: Vec<&PodView> = odd.iter().collect();
    let e = plain_sets_spec(&refs).unwrap_err();
    assert!(e.contains("pod w3") && e.contains("(pods of set worker must agree)"), "{e}");
    let mut unnamed = pods.clone();
    unnamed[2].set = None;
    let refs: Vec<&PodView> = unnamed.iter().collect();
    assert!(plain_sets_spec(&refs).unwrap_err().contains("pod w2 of group ring names no set"));
    let mut elastic = pods.clone();
    for p in &mut elastic {
        p.members = Some(Box::new(Ok(Members { min: 2, max: Some(4) })));
    }
    let refs: Vec<&PodView> = elastic.iter().collect();
    assert!(plain_sets_spec(&refs).unwrap_err().contains("a group of sets starts with each set's minimum"));
    // Sets that ask alike and run alike are one set of alike members.
    let alike = [pod("a", "x", "1", 1), pod("b", "y", "1", 2), pod("c", "y", "1", 3), pod("d", "y", "1", 4)];
    let refs: Vec<&PodView> = alike.iter().collect();
    let g = plain_sets_spec(&refs).unwrap();
    assert!(g.sets.is_empty() && g.resources["cpu"] == cpu("1000m"), "{g:?}");
}

#[test]
fn a_plain_sets_size_and_topology_come_from_its_pods_labels() {
    // Two PodGroups of a CompositePodGroup as the webhook labels their pods: prefill (2 of 2 cpu,
    // in a rack) and decode (1 of 1 cpu); a third prefill pod beyond its set's size.
    let pod = |name: &str, set: &str, size: &str, cpu: &str, rack: Option<&str>| {
        let mut extra = json!({"metadata": {"name": name, "uid": name,
            "labels": {"muster.dev/group-size": "3", "muster.dev/group-min": "3",
                       "muster.dev/set": set, "muster.dev/set-size": size}},
            "spec": {"containers": [{"name": "a", "image": "x", "resources": {"requests": {"cpu": cpu}}}]}});
        if let Some(level) = rack {
            extra["metadata"]["annotations"] = json!({"muster.dev/set-topology": level});
        }
        pod_view(&plain_pod(extra)).unwrap()
    };
    let pods = [
        pod("p0", "prefill", "2", "2", Some("rack")),
        pod("p1", "prefill", "2", "2", Some("rack")),
        pod("p2", "prefill", "2", "2", Some("rack")),
        pod("d0", "decode", "1", "1", None),
    ];
    let refs: Vec<&PodView> = pods.iter().collect();
    let g = plain_sets_spec(&refs).unwrap();
    let sets: Vec<_> = g
        .sets
        .iter()
        .map(|s| (s.name.as_str(), s.members.min, s.topology.as_ref().map(|t| t.level.as_str())))
        .collect();
    assert_eq!(sets, [("decode", 1, None), ("prefill", 2, Some("rack"))]);
    assert_eq!(g.to_request("serve").unwrap().min_members, 3);
    // Pods of a set that disagree on its size, or a size that is no number, are named.
    let mut odd = pods.clone();
    odd[1] = pod("p1", "prefill", "3", "2", Some("rack"));
    let e = plain_sets_spec(&odd.iter().collect::<Vec<_>>()).unwrap_err();
    assert!(e.contains("pod p1: muster.dev/set-size is \"3\" where pod p0 of set prefill has \"2\""), "{e}");
    let bad = [pod("d0", "decode", "many", "1", None)];
    let e = plain_sets_spec(&bad.iter().collect::<Vec<_>>()).unwrap_err();
    assert!(e.contains("label muster.dev/set-size: \"many\" is not a number of members"), "{e}");
}

#[test]
fn a_plain_sets_minimum_comes_from_its_pods_label_and_makes_it_elastic() {
    // A head, `small` (3 pods, at least 1) and `big` (4 pods, at least 2): group-size 8.
    let pod = |name: &str, set: &str, size: &str, min: Option<&str>, cpu: &str| {
        let mut labels = json!({"muster.dev/group-size": "8", "muster.dev/group-min": "8", "muster.dev/set": set,
                                "muster.dev/set-size": size});
        if let Some(min) = min {
            labels["muster.dev/set-min"] = json!(min);
        }
        pod_view(&plain_pod(json!({"metadata": {"name": name, "uid": name, "labels": labels},
            "spec": {"containers": [{"name": "a", "image": "x", "resources": {"requests": {"cpu": cpu}}}]}})))
        .unwrap()
    };
    let mut pods = vec![pod("h0", "head", "1", None, "4")];
    pods.extend((0..3).map(|i| pod(&format!("s{i}"), "small", "3", Some("1"), "1")));
    pods.extend((0..4).map(|i| pod(&format!("b{i}"), "big", "4", Some("2"), "2")));
    let g = plain_sets_spec(&pods.iter().collect::<Vec<_>>()).unwrap();
    let sets: Vec<_> = g.sets.iter().map(|s| (s.name.as_str(), s.members.min, s.members.max)).collect();
    assert_eq!(sets, [("big", 2, Some(4)), ("head", 1, None), ("small", 1, Some(3))]);
    assert_eq!((g.members.min, g.members.max), (4, Some(8)), "the sets' sums");
    let r = g.to_request("serve").unwrap();
    assert_eq!(r.split(6), [4, 1, 1], "big's extra members first: it is listed first");
    // Sets alike in what they ask stay apart when one is elastic: each keeps its minimum.
    let mut alike = pods.clone();
    for p in alike.iter_mut().filter(|p| p.name.starts_with('s')) {
        *p = pod(&p.name, "small", "3", Some("1"), "2");
    }
    let h = plain_sets_spec(&alike.iter().collect::<Vec<_>>()).unwrap();
    assert_eq!(h.sets.len(), 3, "{h:?}");
    // A minimum above the set's size, or pods of a set that disagree on it, are named.
    let mut over = pods.clone();
    for p in over.iter_mut().filter(|p| p.name.starts_with('s')) {
        *p = pod(&p.name, "small", "3", Some("4"), "1");
    }
    let e = plain_sets_spec(&over.iter().collect::<Vec<_>>()).unwrap_err();
    assert!(e.contains("label muster.dev/set-min: 4 is more than the 3 members of set small"), "{e}");
    let mut odd = pods.clone();
    odd[2] = pod("s1", "small", "3", Some("2"), "1");
    let e = plain_sets_spec(&odd.iter().collect::<Vec<_>>()).unwrap_err();
    assert!(e.contains("pod s1: muster.dev/set-min is \"2\" where pod s0 of set small has \"1\""), "{e}");
}

#[test]
fn a_plain_set_of_minimum_zero_is_optional_and_placed_whole() {
    // Two replicas of 2 pods, the second optional: the group starts with 2 and may take 4.
    let pod = |name: &str, set: &str, min: Option<&str>| {
        let mut labels = json!({"muster.dev/group-size": "4", "muster.dev/group-min": "4", "muster.dev/set": set,
                                "muster.dev/set-size": "2"});
        if let Some(min) = min {
            labels["muster.dev/set-min"] = json!(min);
        }
        pod_view(&plain_pod(json!({"metadata": {"name": name, "uid": name, "labels": labels},
            "spec": {"containers": [{"name": "a", "image": "x", "resources": {"requests": {"cpu": "1"}}}]}})))
        .unwrap()
    };
    let pods = [pod("a0", "a", None), pod("a1", "a", None), pod("b0", "b", Some("0")), pod("b1", "b", Some("0"))];
    let g = plain_sets_spec(&pods.iter().collect::<Vec<_>>()).unwrap();
    let sets: Vec<_> = g.sets.iter().map(|s| (s.name.as_str(), s.members.min, s.members.max, s.optional)).collect();
    assert_eq!(sets, [("a", 2, None, false), ("b", 2, None, true)], "alike, yet apart: b is optional");
    assert_eq!((g.members.min, g.members.max), (2, Some(4)));
    let r = g.to_request("serve").unwrap();
    assert!(r.is_optional(1) && !r.is_optional(0));
    assert_eq!(r.whole_count(3), 2, "all of b or none of it");
    // In a Group object an optional set takes one count.
    let mut form = g.clone();
    form.sets[1].members.max = Some(3);
    let e = form.to_request("serve").unwrap_err().to_string();
    assert!(e.contains("spec.sets[1].members.max: an optional set is placed whole"), "{e}");
}

#[test]
fn a_plain_groups_sub_groups_come_from_its_pods_annotations() {
    // A leader and workers kept in one rack, beside a set of no sub-group: alike in what they
    // ask, the sets stay apart because the sub-group names two of them.
    let pod = |name: &str, set: &str, subgroup: Option<(&str, &str)>| {
        let mut extra = json!({"metadata": {"name": name, "uid": name,
            "labels": {"muster.dev/group-size": "4", "muster.dev/group-min": "4", "muster.dev/set": set}},
            "spec": {"containers": [{"name": "a", "image": "x", "resources": {"requests": {"cpu": "1"}}}]}});
        if let Some((name, level)) = subgroup {
            extra["metadata"]["annotations"] =
                json!({"muster.dev/subgroup": name, "muster.dev/subgroup-topology": level});
        }
        pod_view(&plain_pod(extra)).unwrap()
    };
    let pods = [
        pod("l0", "leader", Some(("replica", "rack"))),
        pod("w0", "workers", Some(("replica", "rack"))),
        pod("w1", "workers", Some(("replica", "rack"))),
        pod("s0", "sidecar", None),
    ];
    let g = plain_sets_spec(&pods.iter().collect::<Vec<_>>()).unwrap();
    assert_eq!(g.sets.len(), 3, "{g:?}");
    let subgroups: Vec<_> =
        g.subgroups.iter().map(|s| (s.name.as_str(), s.sets.clone(), s.topology.level.as_str())).collect();
    assert_eq!(subgroups, [("replica", vec!["leader".to_string(), "workers".to_string()], "rack")]);
    let request = g.to_request("serve").unwrap();
    assert_eq!(request.subgroup_of(0).map(|s| s.name.as_str()), Some("replica"));
    // Sets of one sub-group that name different levels, and a sub-group without a level, are named.
    let mut odd = pods.clone();
    odd[0] = pod("l0", "leader", Some(("replica", "block")));
    let e = plain_sets_spec(&odd.iter().collect::<Vec<_>>()).unwrap_err();
    assert!(
        e.contains("muster.dev/subgroup-topology is \"rack\" where pod l0 of sub-group replica has \"block\""),
        "{e}"
    );
    let mut bare = pods.clone();
    bare[0].set.as_mut().unwrap().subgroup_topology = None;
    let e = plain_sets_spec(&bare.iter().collect::<Vec<_>>()).unwrap_err();
    assert!(e.contains("pod l0: annotation muster.dev/subgroup names sub-group \"replica\" without a level"), "{e}");
}
