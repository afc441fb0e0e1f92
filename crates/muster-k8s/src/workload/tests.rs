use k8s_openapi::api::batch::v1::Job;
use serde_json::json;

use super::*;
use crate::external::{JobSet, MPIJob, RayCluster, RayJob};
use crate::group::TopologyMode;

fn job(annotations: serde_json::Value, spec: serde_json::Value) -> Job {
    serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "train", "namespace": "ml", "uid": "u1", "labels": {"muster.dev/queue": "gpu"},
                     "annotations": annotations},
        "spec": spec,
    }))
    .unwrap()
}

fn pod(cpu: &str, selector: serde_json::Value) -> serde_json::Value {
    json!({"nodeSelector": selector, "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]})
}

fn jobset(jobs: serde_json::Value) -> JobSet {
    serde_json::from_value(json!({
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
        "metadata": {"name": "ring", "namespace": "ml", "uid": "u2"},
        "spec": {"suspend": true, "replicatedJobs": jobs},
    }))
    .unwrap()
}

fn replicated(name: &str, replicas: i32, parallelism: i32, pod: serde_json::Value) -> serde_json::Value {
    json!({"name": name, "replicas": replicas, "template": {"spec": {"parallelism": parallelism, "template": {"spec": pod}}}})
}

#[test]
fn a_jobset_whose_sizes_add_up_past_an_i64_is_refused_naming_the_field() {
    // Three sets of i32::MAX replicas of i32::MAX pods: each fits an i64, their sum does not
    // (and wrapped around, it could have looked small).
    let most = i32::MAX;
    let js = jobset(json!([
        replicated("a", most, most, pod("1", json!({}))),
        replicated("b", most, most, pod("1", json!({}))),
        replicated("c", most, most, pod("1", json!({}))),
    ]));
    let errors = shape(&js).unwrap_err();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].starts_with("spec.replicatedJobs: the JobSet's pods at once add up past what can be counted"),
        "{errors:?}"
    );
}

#[test]
fn an_elastic_job_is_sized_from_parallelism_and_its_annotations() {
    let j = job(
        json!({"muster.dev/min-members": "2", "muster.dev/duration-seconds": "600", "muster.dev/required-topology": "rack"}),
        json!({"parallelism": 4, "completions": 8, "suspend": true, "template": {"spec": pod("1500m", json!({"pool": "a"}))}}),
    );
    let s = shape(&j).unwrap();
    assert_eq!(s.members, Members { min: 2, max: Some(4) });
    assert_eq!(asks(&s), [("", 4, Amounts::from([("cpu".to_string(), 1500)]))]);
    assert_eq!(s.count_field, "metadata.annotations[muster.dev/min-members]");
    assert_eq!((s.duration_seconds, s.topology.clone().map(|t| t.mode)), (Some(600), Some(TopologyMode::Required)));
    let g = s.group_spec(&j, "gpu");
    assert_eq!(g.resources["cpu"], Quantity::Text("1500m".into()));
    assert_eq!(g.node_selector["pool"], "a");
    let owner = g.owner.unwrap();
    assert_eq!(
        (owner.api_version.as_str(), owner.kind.as_str(), owner.name.as_str(), owner.uid.as_deref()),
        ("batch/v1", "Job", "train", Some("u1"))
    );
    assert!(j.held() && j.finished().is_none() && !j.part_of_another());
    assert_eq!(j.queue(), Some("gpu"));
}

#[test]
fn every_bad_field_is_named_at_once() {
    let j = job(
        json!({"muster.dev/min-members": "5", "muster.dev/duration-seconds": "1h",
               "muster.dev/required-topology": "rack", "muster.dev/preferred-topology": "rack"}),
        json!({"parallelism": 2, "template": {"spec": pod("1", json!({}))}}),
    );
    let errors = shape(&j).unwrap_err();
    assert_eq!(errors.len(), 3, "{errors:?}");
    assert!(errors[0].starts_with("metadata.annotations[muster.dev/min-members]: 5 is outside 1..=2"), "{errors:?}");
    assert!(errors[1].starts_with("metadata.annotations[muster.dev/duration-seconds]: \"1h\" is not a whole number"));
    assert!(errors[2].contains("both name \"rack\""), "{errors:?}");
    let empty = job(json!({}), json!({"parallelism": 0, "template": {"spec": pod("1", json!({}))}}));
    assert_eq!(
        shape(&empty).unwrap_err(),
        ["spec.parallelism: the Job has no pods to run at once; muster needs at least 1"]
    );
    let huge = job(json!({}), json!({"parallelism": 2_000_000, "template": {"spec": pod("1", json!({}))}}));
    assert_eq!(
        shape(&huge).unwrap_err(),
        ["spec.parallelism: 2000000 pods are more than one group may have (at most 1000000); split the Job"]
    );
    let no_template = job(json!({}), json!({"parallelism": 1, "template": {}}));
    assert_eq!(shape(&no_template).unwrap_err(), ["spec.template.spec is missing"]);
}

/// Each set's name, pods and what one of its pods asks.
fn asks(s: &Shape) -> Vec<(&str, u32, Amounts)> {
    s.sets.iter().map(|x| (x.name.as_str(), x.pods, x.requests.clone())).collect()
}

#[test]
fn a_jobset_is_one_group_of_its_replicated_jobs_as_member_sets() {
    let js = jobset(json!([
        replicated("workers", 2, 4, pod("2", json!({"pool": "a"}))),
        replicated(
            "driver",
            1,
            1,
            json!({"nodeSelector": {"pool": "a"}, "containers": [
            {"name": "c", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}]})
        ),
    ]));
    let s = shape(&js).unwrap();
    assert_eq!(s.members, Members { min: 9, max: None });
    let driver = Amounts::from([("cpu".to_string(), 500), ("memory".to_string(), 1 << 30)]);
    assert_eq!(
        asks(&s),
        [("workers", 8, Amounts::from([("cpu".to_string(), 2000)])), ("driver", 1, driver)],
        "each replicated Job is a set asking what its pods ask, not the most any pod asks"
    );
    let g = s.group_spec(&js, "q");
    assert_eq!(
        g.owner.as_ref().map(|o| (o.api_version.as_str(), o.kind.as_str())),
        Some(("jobset.x-k8s.io/v1alpha2", "JobSet"))
    );
    assert!(g.resources.is_empty(), "said per set");
    let sets: Vec<_> = g.sets.iter().map(|s| (s.name.as_str(), s.members, s.resources["cpu"].clone())).collect();
    let (eight, one) = (Members { min: 8, max: None }, Members { min: 1, max: None });
    assert_eq!(
        sets,
        [("workers", eight, Quantity::Text("2000m".into())), ("driver", one, Quantity::Text("500m".into()))]
    );
    let request = g.to_request("train").unwrap();
    assert_eq!(
        (request.min_members, request.max_members, request.member_requests(8)),
        (9, 9, &[("cpu".to_string(), 500), ("memory".to_string(), 1 << 30)][..])
    );

    // Sets on other nodes are placed on their own nodes; alike sets stay one set.
    let apart = jobset(json!([
        replicated("workers", 1, 1, pod("1", json!({"pool": "a"}))),
        replicated("driver", 1, 1, pod("1", json!({"pool": "b"}))),
    ]));
    let g = shape(&apart).unwrap().group_spec(&apart, "q");
    assert_eq!(g.sets.iter().map(|s| s.node_selector["pool"].as_str()).collect::<Vec<_>>(), ["a", "b"]);
    let alike = jobset(json!([
        replicated("workers", 1, 2, pod("1", json!({"pool": "a"}))),
        replicated("driver", 1, 1, pod("1", json!({"pool": "a"}))),
    ]));
    let g = shape(&alike).unwrap().group_spec(&alike, "q");
    assert!(g.sets.is_empty() && g.node_selector["pool"] == "a" && g.members.min == 3, "{g:?}");
    let mut shrunk = jobset(json!([replicated("w", 1, 2, pod("1", json!({})))]));
    shrunk.metadata.annotations = Some([("muster.dev/min-members".to_string(), "1".to_string())].into());
    assert_eq!(
        shape(&shrunk).unwrap_err(),
        ["metadata.annotations[muster.dev/min-members]: JobSets start with all their pods (muster does not shrink \
             them); remove it"]
    );
    assert_eq!(
        shape(&jobset(json!([]))).unwrap_err(),
        ["spec.replicatedJobs: the JobSet has no pods to run at once; muster needs at least 1"]
    );
}

#[test]
fn kinds_name_their_api() {
    assert_eq!(job::KIND.api_version(), "batch/v1");
    let plurals: Vec<_> = HELD_KINDS.iter().map(|k| k.plural).collect();
    assert_eq!(plurals, ["jobs", "jobsets", "mpijobs", "rayjobs", "rayclusters"]);
    assert_eq!(job::KIND.hold_patch(true), json!({"spec": {"suspend": true}}));
    assert_eq!(mpijob::KIND.hold_patch(false), json!({"spec": {"runPolicy": {"suspend": false}}}));
    let r = jobset::KIND.resource();
    assert_eq!((r.api_version.as_str(), r.plural.as_str()), ("jobset.x-k8s.io/v1alpha2", "jobsets"));
}

fn mpijob(specs: serde_json::Value) -> MPIJob {
    serde_json::from_value(json!({
        "apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
        "metadata": {"name": "pi", "namespace": "ml", "uid": "u3", "labels": {"muster.dev/queue": "gpu"}},
        "spec": {"runPolicy": {"suspend": true}, "mpiReplicaSpecs": specs},
    }))
    .unwrap()
}

#[test]
fn an_mpijob_is_one_group_of_its_launcher_and_workers() {
    let m = mpijob(json!({
        "Launcher": {"template": {"spec": pod("500m", json!({"pool": "a"}))}},
        "Worker": {"replicas": 3, "template": {"spec": pod("2", json!({"pool": "a"}))}},
    }));
    assert!(m.held());
    let s = shape(&m).unwrap();
    assert_eq!(s.members, Members { min: 4, max: None }, "one launcher (the default) and three workers");
    let cpu = |m: u64| Amounts::from([("cpu".to_string(), m)]);
    assert_eq!(
        asks(&s),
        [("launcher", 1, cpu(500)), ("worker", 3, cpu(2000))],
        "the launcher holds no worker-sized slot"
    );
    let sets = m.pod_sets().unwrap();
    let layout = place::layout(&sets);
    assert_eq!(layout.iter().map(|l| (l.name.as_str(), l.pods)).collect::<Vec<_>>(), [("launcher", 1), ("worker", 3)]);
    assert_eq!(sets[1].copied_metadata[0].0, "spec.mpiReplicaSpecs.Worker.template.metadata");
    // Workers default to none: the launcher alone is a group of one.
    let alone = mpijob(
        json!({"Launcher": {"template": {"spec": pod("1", json!({}))}}, "Worker": {"template": {"spec": pod("1", json!({}))}}}),
    );
    assert_eq!(shape(&alone).unwrap().members, Members { min: 1, max: None });

    for (specs, error) in [
        (
            json!({"Worker": {"replicas": 2, "template": {"spec": pod("1", json!({}))}}}),
            "spec.mpiReplicaSpecs.Launcher is missing; an MPIJob needs a launcher",
        ),
        (
            json!({"Launcher": {"replicas": 2, "template": {"spec": pod("1", json!({}))}}}),
            "spec.mpiReplicaSpecs.Launcher.replicas: 2; an MPIJob has exactly one launcher, set it to 1",
        ),
        (
            json!({"Launcher": {"template": {"spec": pod("1", json!({}))}}, "Chief": {"template": {}}}),
            "spec.mpiReplicaSpecs.Chief: an MPIJob has only the replica types Launcher and Worker; remove it",
        ),
        (json!({"Launcher": {"template": {}}}), "spec.mpiReplicaSpecs.Launcher.template.spec is missing"),
    ] {
        assert_eq!(shape(&mpijob(specs)).unwrap_err(), [error]);
    }
    let mut elastic = m.clone();
    elastic.metadata.annotations = Some([("muster.dev/min-members".to_string(), "2".to_string())].into());
    assert!(shape(&elastic).unwrap_err()[0].contains("MPIJobs start with all their pods"));
}

fn rayjob(cluster: serde_json::Value) -> RayJob {
    serde_json::from_value(json!({
        "apiVersion": "ray.io/v1", "kind": "RayJob",
        "metadata": {"name": "tune", "namespace": "ml", "uid": "u4", "labels": {"muster.dev/queue": "gpu"}},
        "spec": {"suspend": true, "entrypoint": "python tune.py", "rayClusterSpec": cluster},
    }))
    .unwrap()
}

#[test]
fn a_rayjob_is_one_group_of_its_clusters_head_and_workers() {
    let r = rayjob(json!({
        "headGroupSpec": {"rayStartParams": {}, "template": {"spec": pod("1", json!({}))}},
        "workerGroupSpecs": [
            {"groupName": "cpu", "replicas": 2, "minReplicas": 1, "maxReplicas": 4, "rayStartParams": {},
             "template": {"spec": pod("4", json!({}))}},
            {"groupName": "tpu", "minReplicas": 1, "numOfHosts": 2, "rayStartParams": {},
             "template": {"spec": pod("2", json!({}))}},
            {"groupName": "off", "replicas": 3, "suspend": true, "rayStartParams": {},
             "template": {"spec": pod("2", json!({}))}},
        ],
    }));
    assert!(r.held());
    // 1 head + 2 cpu workers + 1 replica of 2 hosts (replicas defaults to minReplicas) + none of a
    // suspended group.
    let s = shape(&r).unwrap();
    assert_eq!(s.members, Members { min: 5, max: None });
    // KubeRay's init container on every worker (200m, 256Mi) is a floor under what a pod asks.
    let worker = |cpu: u64| Amounts::from([("cpu".to_string(), cpu), ("memory".to_string(), 256 << 20)]);
    let head = Amounts::from([("cpu".to_string(), 1000)]);
    assert_eq!(asks(&s), [("headgroup", 1, head), ("cpu", 2, worker(4000)), ("tpu", 2, worker(2000))]);
    // With in-tree autoscaling the head also runs the autoscaler (500m, 512Mi by default).
    let mut scaled = r.clone();
    let cluster = scaled.spec.ray_cluster_spec.as_mut().unwrap();
    cluster.enable_in_tree_autoscaling = Some(true);
    cluster.worker_group_specs.clear();
    assert_eq!(
        asks(&shape(&scaled).unwrap()),
        [("headgroup", 1, Amounts::from([("cpu".to_string(), 1500), ("memory".to_string(), 512 << 20)]))]
    );
    let layout = place::layout(&r.pod_sets().unwrap());
    let sets: Vec<_> = layout.iter().map(|l| (l.name.as_str(), l.children, l.pods)).collect();
    assert_eq!(sets, [("headgroup", 1, 1), ("cpu", 2, 1), ("tpu", 1, 2), ("off", 0, 1)]);

    // Pods of the RayCluster KubeRay made for it (`tune-<5 characters>`) are its own.
    let pod = |owner: &str, labels: serde_json::Value| -> ObjectMeta {
        serde_json::from_value(json!({"name": "p", "labels": labels, "ownerReferences": [
            {"apiVersion": "ray.io/v1", "kind": "RayCluster", "name": owner, "uid": "c", "controller": true}]}))
        .unwrap()
    };
    let worker = json!({"ray.io/cluster": "tune-x7k2q", "ray.io/node-type": "worker", "ray.io/group": "cpu"});
    let (kind, at) = place::place_of(&pod("tune-x7k2q", worker.clone())).unwrap();
    assert_eq!((kind.kind, at.workload.as_str(), at.set.as_str(), at.index), ("RayJob", "tune", "cpu", None));
    // A worker has no index: it goes to a member of its own set (after the head), never the head's.
    assert_eq!(place::member_of(&layout, &at), None);
    assert_eq!(place::set_members(&layout, &at), Some(1..3));
    let head = json!({"ray.io/cluster": "tune-x7k2q", "ray.io/node-type": "head", "ray.io/group": "headgroup"});
    let at = place::place_of(&pod("tune-x7k2q", head)).unwrap().1;
    assert_eq!(place::member_of(&layout, &at), Some(0), "the head is member 0");
    // Not KubeRay's naming, or a cluster label that is not the owner's: not a RayJob's pod.
    assert_eq!(place::place_of(&pod("standalone", worker.clone())), None);
    assert_eq!(place::place_of(&pod("tune-X7K2Q", worker)), None);

    for (cluster, error) in [
        (json!(null), "spec.rayClusterSpec is missing"),
        (json!({"headGroupSpec": {"template": {}}}), "spec.rayClusterSpec.headGroupSpec.template.spec is missing"),
    ] {
        assert_eq!(shape(&rayjob(cluster)).unwrap_err(), [error]);
    }
    let mut existing = r.clone();
    existing.spec.cluster_selector = [("ray.io/cluster".to_string(), "shared".to_string())].into();
    assert!(
        shape(&existing).unwrap_err()[0]
            .starts_with("spec.clusterSelector: the RayJob runs on an existing Ray cluster")
    );
}

#[test]
fn a_held_raycluster_is_one_group_and_only_its_labelled_pods_are_its_own() {
    let c: RayCluster = serde_json::from_value(json!({
        "apiVersion": "ray.io/v1", "kind": "RayCluster",
        "metadata": {"name": "serve", "namespace": "ml", "uid": "u5", "labels": {"muster.dev/queue": "gpu"}},
        "spec": {"suspend": true,
                 "headGroupSpec": {"rayStartParams": {}, "template": {"spec": pod("1", json!({}))}},
                 "workerGroupSpecs": [{"groupName": "gpu", "replicas": 3, "rayStartParams": {},
                                       "template": {"spec": pod("4", json!({}))}}]},
    }))
    .unwrap();
    assert!(c.held() && c.finished().is_none() && !c.part_of_another());
    let s = shape(&c).unwrap();
    assert_eq!(s.members, Members { min: 4, max: None });
    let sets = c.pod_sets().unwrap();
    assert_eq!(sets[1].template_field, "spec.workerGroupSpecs[0].template.spec");
    let layout = place::layout(&sets);
    // A pod of the cluster: controlled by it, with KubeRay's cluster label and muster's.
    let pod = |owner: &str, labels: serde_json::Value| -> ObjectMeta {
        serde_json::from_value(json!({"name": "p", "labels": labels, "ownerReferences": [
            {"apiVersion": "ray.io/v1", "kind": "RayCluster", "name": owner, "uid": "c", "controller": true}]}))
        .unwrap()
    };
    let head = json!({"ray.io/cluster": "serve", "ray.io/node-type": "head", "muster.dev/ray-cluster": "true"});
    let (kind, at) = place::place_of(&pod("serve", head)).unwrap();
    assert_eq!((kind.kind, at.workload.as_str(), place::member_of(&layout, &at)), ("RayCluster", "serve", Some(0)));
    // A cluster named like a RayJob's (`<name>-<5 characters>`) is still its own with the label,
    // and a RayJob's without it.
    let worker = |labelled: bool| {
        let mut l = json!({"ray.io/cluster": "tune-x7k2q", "ray.io/node-type": "worker", "ray.io/group": "gpu"});
        if labelled {
            l["muster.dev/ray-cluster"] = json!("true");
        }
        l
    };
    let (kind, at) = place::place_of(&pod("tune-x7k2q", worker(true))).unwrap();
    assert_eq!((kind.kind, at.workload.as_str(), at.set.as_str()), ("RayCluster", "tune-x7k2q", "gpu"));
    let (kind, at) = place::place_of(&pod("tune-x7k2q", worker(false))).unwrap();
    assert_eq!((kind.kind, at.workload.as_str()), ("RayJob", "tune"));
    // A cluster a RayJob made is the RayJob's group, not one of its own.
    let mut made: RayCluster = c.clone();
    made.metadata.owner_references = Some(vec![
        serde_json::from_value(json!(
        {"apiVersion": "ray.io/v1", "kind": "RayJob", "name": "tune", "uid": "r", "controller": true}))
        .unwrap(),
    ]);
    assert!(made.part_of_another());
    assert_eq!(raycluster::KIND.hold_patch(false), json!({"spec": {"suspend": false}}));
}

#[test]
fn a_shrinkable_job_must_be_elastic_and_say_true_or_false() {
    let spec = json!({"parallelism": 4, "template": {"spec": pod("1", json!({}))}});
    let s = shape(&job(json!({"muster.dev/min-members": "2", "muster.dev/shrinkable": "true"}), spec.clone())).unwrap();
    assert!(s.shrinkable);
    let j = job(json!({"muster.dev/min-members": "2", "muster.dev/shrinkable": "true"}), spec.clone());
    assert!(s.group_spec(&j, "q").shrinkable);
    assert!(!shape(&job(json!({"muster.dev/shrinkable": "false"}), spec.clone())).unwrap().shrinkable);
    let rigid = shape(&job(json!({"muster.dev/shrinkable": "true"}), spec.clone())).unwrap_err();
    assert_eq!(rigid.len(), 1);
    assert!(rigid[0].starts_with("metadata.annotations[muster.dev/shrinkable]: only an elastic Job"), "{rigid:?}");
    let word = shape(&job(json!({"muster.dev/min-members": "2", "muster.dev/shrinkable": "yes"}), spec)).unwrap_err();
    assert!(word[0].contains("\"yes\" is neither \"true\" nor \"false\""), "{word:?}");
}

#[test]
fn amounts_in_the_apiservers_canonical_forms_count_and_an_uncountable_one_is_named() {
    let mem = |memory: &str| {
        json!({"parallelism": 2, "suspend": true, "template": {"spec": {"containers": [
            {"name": "c", "resources": {"requests": {"cpu": "1500u", "memory": memory}}}]}}})
    };
    let s = shape(&job(json!({}), mem("1500e6"))).unwrap();
    assert_eq!(asks(&s), [("", 2, Amounts::from([("cpu".into(), 2), ("memory".into(), 1_500_000_000)]))]);
    let e = shape(&job(json!({}), mem("4Ei"))).unwrap_err();
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(e[0].starts_with("spec.template.spec.containers[0].resources.requests[memory]: "), "{e:?}");
    assert!(e[0].contains("will not place"), "{e:?}");
}

/// A replicated Job of one replica whose pod template carries `annotations`.
fn annotated(name: &str, parallelism: i32, annotations: serde_json::Value) -> serde_json::Value {
    annotated_replicas(name, 1, parallelism, annotations)
}

/// A replicated Job of `replicas` child Jobs of `parallelism` pods, its template carrying `annotations`.
fn annotated_replicas(
    name: &str,
    replicas: i32,
    parallelism: i32,
    annotations: serde_json::Value,
) -> serde_json::Value {
    json!({"name": name, "replicas": replicas, "template": {"spec": {"parallelism": parallelism, "template": {
        "metadata": {"annotations": annotations}, "spec": pod("1", json!({}))}}}})
}

#[test]
fn pod_templates_make_gangs_inside_the_group_as_a_plain_pods_set_does() {
    // Prefill and decode each in a rack, the JobSet in one block: the sets stay apart though
    // their pods ask alike.
    let mut js = jobset(json!([
        annotated("prefill", 4, json!({"muster.dev/set-topology": "rack"})),
        annotated("decode", 3, json!({"muster.dev/set-topology": "rack"})),
    ]));
    js.metadata.annotations = Some([("muster.dev/required-topology".to_string(), "block".to_string())].into());
    let g = shape(&js).unwrap().group_spec(&js, "q");
    assert_eq!(g.topology.as_ref().map(|t| t.level.as_str()), Some("block"));
    let sets: Vec<(&str, Option<&str>)> =
        g.sets.iter().map(|s| (s.name.as_str(), s.topology.as_ref().map(|t| t.level.as_str()))).collect();
    assert_eq!(sets, [("prefill", Some("rack")), ("decode", Some("rack"))]);
    let request = g.to_request("ring").unwrap();
    assert_eq!(
        request.sets[0].topology.as_ref().map(|t| t.mode),
        Some(muster_graph::jobspec::ConstraintMode::Required)
    );

    // A leader and its workers as one sub-group in a rack, a second sub-group in another.
    let sub = |group: &str| json!({"muster.dev/subgroup": group, "muster.dev/subgroup-topology": "rack"});
    let js = jobset(json!([
        annotated("prefill-leader", 1, sub("prefill")),
        annotated("prefill-workers", 2, sub("prefill")),
        annotated("decode-leader", 1, sub("decode")),
        annotated("decode-workers", 2, sub("decode")),
    ]));
    let g = shape(&js).unwrap().group_spec(&js, "q");
    let groups: Vec<(&str, Vec<&str>, &str)> = (g.subgroups.iter())
        .map(|s| (s.name.as_str(), s.sets.iter().map(String::as_str).collect(), s.topology.level.as_str()))
        .collect();
    assert_eq!(
        groups,
        [
            ("prefill", vec!["prefill-leader", "prefill-workers"], "rack"),
            ("decode", vec!["decode-leader", "decode-workers"], "rack")
        ]
    );
    assert_eq!(g.to_request("ring").unwrap().subgroups.len(), 2);

    // Any kind whose sets have templates: an MPIJob's workers in a rack, its launcher anywhere.
    let m = mpijob(json!({
        "Launcher": {"template": {"spec": pod("500m", json!({}))}},
        "Worker": {"replicas": 4, "template": {"metadata": {"annotations": {"muster.dev/set-topology": "rack"}},
                                               "spec": pod("2", json!({}))}},
    }));
    let g = shape(&m).unwrap().group_spec(&m, "q");
    let levels: Vec<Option<&str>> = g.sets.iter().map(|s| s.topology.as_ref().map(|t| t.level.as_str())).collect();
    assert_eq!(levels, [None, Some("rack")]);
}

#[test]
fn each_replica_of_a_set_is_a_gang_of_its_own_and_keeps_the_members_its_pods_fill() {
    // A driver anywhere, and 2 replicas of 3 workers, each replica within a rack.
    let js = jobset(json!([
        annotated_replicas("driver", 1, 1, json!({})),
        annotated_replicas("workers", 2, 3, json!({"muster.dev/replica-topology": "rack"})),
    ]));
    let g = shape(&js).unwrap().group_spec(&js, "q");
    let sets: Vec<(&str, i64, Option<&str>)> = g
        .sets
        .iter()
        .map(|s| (s.name.as_str(), s.members.min, s.topology.as_ref().map(|t| t.level.as_str())))
        .collect();
    assert_eq!(sets, [("driver", 1, None), ("workers-0", 3, Some("rack")), ("workers-1", 3, Some("rack"))]);
    assert_eq!(g.members.min, 7);
    // The pod of child Job 1, completion index 2, fills member 1 + 3 + 2: the last of workers-1's.
    let layout = place::layout(&js.pod_sets().unwrap());
    let pod = PodPlace { workload: "js".into(), set: "workers".into(), child: 1, index: Some(2) };
    assert_eq!(place::member_of(&layout, &pod), Some(6));
    let request = g.to_request("ring").unwrap();
    assert_eq!(request.sets.len(), 3);
    assert!(request.sets[1..].iter().all(|s| s.topology.as_ref().is_some_and(|t| t.level == "rack")));
}

#[test]
fn replica_gangs_that_cannot_be_told_apart_are_refused_naming_the_annotation() {
    let at = "spec.replicatedJobs[0].template.spec.template.metadata.annotations[muster.dev/replica-topology]";
    let both = json!({"muster.dev/replica-topology": "rack", "muster.dev/set-topology": "block"});
    let e = shape(&jobset(json!([annotated_replicas("w", 2, 2, both)]))).unwrap_err();
    assert!(e.len() == 1 && e[0].starts_with(at) && e[0].contains("give one of the two"), "{e:?}");
    let in_sub_group = json!({"muster.dev/replica-topology": "rack", "muster.dev/subgroup": "s",
                              "muster.dev/subgroup-topology": "block"});
    let e = shape(&jobset(json!([annotated_replicas("w", 2, 2, in_sub_group)]))).unwrap_err();
    assert!(e.len() == 1 && e[0].starts_with(at) && e[0].contains("drop one of"), "{e:?}");
    // A set of one replica, and an MPIJob's workers (pods, not child objects).
    let one = json!({"muster.dev/replica-topology": "rack"});
    let e = shape(&jobset(json!([annotated_replicas("w", 1, 2, one.clone())]))).unwrap_err();
    assert!(e.len() == 1 && e[0].starts_with(at) && e[0].contains("makes no replicas of its own"), "{e:?}");
    let m = mpijob(json!({
        "Launcher": {"template": {"spec": pod("500m", json!({}))}},
        "Worker": {"replicas": 4, "template": {"metadata": {"annotations": one}, "spec": pod("2", json!({}))}},
    }));
    let e = shape(&m).unwrap_err();
    assert!(e.len() == 1 && e[0].contains("[muster.dev/replica-topology]: the set makes no replicas"), "{e:?}");
    // A replica's set name taken by another replicated Job.
    let js = jobset(json!([
        annotated_replicas("w", 2, 2, json!({"muster.dev/replica-topology": "rack"})),
        annotated_replicas("w-1", 1, 1, json!({})),
    ]));
    let e = shape(&js).unwrap_err();
    assert!(e.len() == 1 && e[0].starts_with("spec.replicatedJobs: two sets would be named \"w-1\""), "{e:?}");
}

#[test]
fn gangs_a_template_cannot_say_are_refused_naming_the_annotation() {
    let field = |k: usize, key: &str| {
        format!("spec.replicatedJobs[{k}].template.spec.template.metadata.annotations[muster.dev/{key}]")
    };
    for (a, b, at, hint) in [
        (json!({"muster.dev/set-topology": "a rack"}), json!({}), field(0, "set-topology"), "not a topology level"),
        (json!({"muster.dev/subgroup": "p"}), json!({}), field(0, "subgroup"), "has no level"),
        (
            json!({"muster.dev/subgroup-topology": "rack"}),
            json!({}),
            field(0, "subgroup-topology"),
            "names no sub-group",
        ),
        (
            json!({"muster.dev/subgroup": "p", "muster.dev/subgroup-topology": "rack"}),
            json!({"muster.dev/subgroup": "p", "muster.dev/subgroup-topology": "block"}),
            field(1, "subgroup-topology"),
            "name one level",
        ),
    ] {
        let js = jobset(json!([annotated("x", 1, a), annotated("y", 1, b)]));
        let e = shape(&js).unwrap_err();
        assert!(e.len() == 1 && e[0].starts_with(&at) && e[0].contains(hint), "{e:?}");
    }
}
