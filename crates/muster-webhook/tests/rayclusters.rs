//! The webhook's rules for RayClusters of their own: held as one group of head and workers
//! through `spec.suspend`, their pod templates labelled so that their pods are told from a
//! RayJob's cluster's; a RayJob's clusters are left to the RayJob.

mod common;

use common::*;

const RAYCLUSTER: Kind = ("ray.io", "v1", "RayCluster", "rayclusters");

/// A RayCluster of a head and `workers` workers, each pod asking `cpu`.
fn raycluster(name: &str, workers: i64, cpu: &str) -> Value {
    let template = || {
        json!({"metadata": {"labels": {"app": name}}, "spec": {"containers": [
            {"name": "ray", "image": "rayproject/ray", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]}})
    };
    json!({
        "apiVersion": "ray.io/v1", "kind": "RayCluster",
        "metadata": {"name": name, "namespace": "ml", "labels": {QUEUE: "open"}},
        "spec": {"headGroupSpec": {"rayStartParams": {}, "template": template()},
                 "workerGroupSpecs": [{"groupName": "gpu", "replicas": workers, "rayStartParams": {},
                                       "template": template()}]}
    })
}

#[tokio::test]
async fn a_queued_raycluster_is_held_with_its_pods_labelled() {
    let c = WebhookConfig::default();
    let r = raycluster("serve", 3, "1");
    let create = request("CREATE", TENANT, RAYCLUSTER, &r, None);
    let after = patched(&r, &patch_of(&create, &c));
    assert_eq!(after["spec"]["suspend"], json!(true));
    for t in [&after["spec"]["headGroupSpec"]["template"], &after["spec"]["workerGroupSpecs"][0]["template"]] {
        assert_eq!(t["spec"]["schedulerName"], json!("muster"));
        assert_eq!(t["metadata"]["labels"]["muster.dev/ray-cluster"], json!("true"));
        assert_eq!(t["metadata"]["labels"]["app"], json!("serve"), "the template's own labels stay");
    }
    assert_eq!(check(&request("CREATE", TENANT, RAYCLUSTER, &after, None)).await, Ok(()));
    // Not held back (another webhook undid ours): the hold field is named.
    let e = check(&create).await.unwrap_err();
    assert!(e.starts_with("spec.suspend: a RayCluster in queue open must be created suspended"), "{e}");
    // The pods KubeRay makes from the templates carry muster's label: they may.
    let ray_pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "serve-head", "namespace": "ml", "labels": {
            "ray.io/cluster": "serve", "ray.io/node-type": "head", "muster.dev/ray-cluster": "true"},
            "ownerReferences": [{"apiVersion": "ray.io/v1", "kind": "RayCluster", "name": "serve", "uid": "c",
                                 "controller": true}]},
        "spec": {"schedulerName": "muster", "containers": [{"name": "ray", "image": "rayproject/ray"}]}
    });
    assert_eq!(check(&request("CREATE", "system:serviceaccount:ray:kuberay", POD, &ray_pod, None)).await, Ok(()));
    // Without a RayCluster owning it, the label is muster's reserved key.
    let mut forged = ray_pod.clone();
    forged["metadata"]["ownerReferences"] = json!([]);
    let e = check(&request("CREATE", TENANT, POD, &forged, None)).await.unwrap_err();
    assert!(e.contains("metadata.labels[muster.dev/ray-cluster]: the key is reserved"), "{e}");
}

#[tokio::test]
async fn a_rayjobs_cluster_is_left_to_the_rayjob() {
    // KubeRay copies the RayJob's labels (the queue too) onto the cluster it makes and controls,
    // unsuspended: the RayJob's group holds it.
    let c = WebhookConfig::default();
    let mut r = raycluster("tune-x7k2q", 3, "1");
    r["metadata"]["ownerReferences"] =
        json!([{"apiVersion": "ray.io/v1", "kind": "RayJob", "name": "tune", "uid": "j", "controller": true}]);
    let create = request("CREATE", "system:serviceaccount:ray:kuberay", RAYCLUSTER, &r, None);
    assert!(patch_of(&create, &c).0.is_empty());
    assert_eq!(check(&create).await, Ok(()));
}

#[tokio::test]
async fn a_hostile_raycluster_is_refused_by_field() {
    let c = WebhookConfig::default();
    let mut r = raycluster("serve", 2, "1");
    r["spec"]["workerGroupSpecs"][0]["template"]["spec"]["nodeName"] = json!("n1");
    let held = patched(&r, &patch_of(&request("CREATE", TENANT, RAYCLUSTER, &r, None), &c));
    let e = check(&request("CREATE", TENANT, RAYCLUSTER, &held, None)).await.unwrap_err();
    assert!(
        e.contains("spec.workerGroupSpecs[0].template.spec.nodeName: the pods of a RayCluster in queue open cannot choose their node (n1)"),
        "{e}"
    );
    // Too big for its queue's quota (8 cpu): 1 head + 9 workers of 1 cpu.
    let mut big = raycluster("big", 9, "1");
    big["metadata"]["labels"][QUEUE] = json!("team-a");
    let held = patched(&big, &patch_of(&request("CREATE", TENANT, RAYCLUSTER, &big, None), &c));
    let e = check(&request("CREATE", TENANT, RAYCLUSTER, &held, None)).await.unwrap_err();
    assert!(e.starts_with("spec.workerGroupSpecs: 10 pods x"), "{e}");
    // The label is the RayCluster's: a RayJob's template cannot claim it.
    let rayjob = json!({
        "apiVersion": "ray.io/v1", "kind": "RayJob",
        "metadata": {"name": "tune", "namespace": "ml", "labels": {QUEUE: "open"}},
        "spec": {"suspend": true, "rayClusterSpec": {"headGroupSpec": {"template": {
            "metadata": {"labels": {"muster.dev/ray-cluster": "true"}},
            "spec": {"schedulerName": "muster", "containers": [{"name": "ray", "image": "rayproject/ray"}]}}}}}
    });
    let e = check(&request("CREATE", TENANT, ("ray.io", "v1", "RayJob", "rayjobs"), &rayjob, None)).await.unwrap_err();
    assert!(
        e.contains(
            "spec.rayClusterSpec.headGroupSpec.template.metadata.labels[muster.dev/ray-cluster]: the key is reserved"
        ),
        "{e}"
    );
}

#[tokio::test]
async fn a_serving_raycluster_scales_but_keeps_its_requests() {
    // Its Group runs; the autoscaler (or its user) changes a worker group's replicas.
    let c = WebhookConfig::default();
    let s = state().with_group(group_object("ml", "serve", "Running"));
    let r = raycluster("serve", 2, "1");
    let mut old = patched(&r, &patch_of(&request("CREATE", TENANT, RAYCLUSTER, &r, None), &c));
    old["spec"]["suspend"] = json!(false);
    let mut scaled = old.clone();
    scaled["spec"]["workerGroupSpecs"][0]["replicas"] = json!(5);
    assert_eq!(check_with(&request("UPDATE", TENANT, RAYCLUSTER, &scaled, Some(&old)), &c, &s).await, Ok(()));
    let mut bigger = old.clone();
    bigger["spec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] =
        json!("2");
    let e = check_with(&request("UPDATE", TENANT, RAYCLUSTER, &bigger, Some(&old)), &c, &s).await.unwrap_err();
    assert!(e.contains("raycluster serve is running (its Group is Running)"), "{e}");
}
