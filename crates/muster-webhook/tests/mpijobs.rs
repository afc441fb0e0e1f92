//! The webhook's rules for MPIJobs: held as one group of launcher and workers through
//! `spec.runPolicy.suspend`, with the rules every held kind has.

mod common;

use common::*;

const MPIJOB: Kind = ("kubeflow.org", "v2beta1", "MPIJob", "mpijobs");

/// An MPIJob of one launcher and `workers` workers, each pod asking `cpu`.
fn mpijob(name: &str, queue: Option<&str>, workers: i64, cpu: &str) -> Value {
    let template = || {
        json!({"metadata": {"labels": {"app": name}}, "spec": {"containers": [
            {"name": "main", "image": "mpi", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]}})
    };
    let mut m = json!({
        "apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
        "metadata": {"name": name, "namespace": "ml", "labels": {}},
        "spec": {"slotsPerWorker": 1, "mpiReplicaSpecs": {
            "Launcher": {"replicas": 1, "template": template()},
            "Worker": {"replicas": workers, "template": template()}}}
    });
    if let Some(q) = queue {
        m["metadata"]["labels"][QUEUE] = json!(q);
    }
    m
}

#[tokio::test]
async fn a_queued_mpijob_is_held_as_one_group_of_launcher_and_workers() {
    let c = WebhookConfig::default();
    let m = mpijob("pi", Some("open"), 3, "1");
    let create = request("CREATE", TENANT, MPIJOB, &m, None);
    let after = patched(&m, &patch_of(&create, &c));
    assert_eq!(after["spec"]["runPolicy"]["suspend"], json!(true));
    for t in ["Launcher", "Worker"] {
        assert_eq!(after["spec"]["mpiReplicaSpecs"][t]["template"]["spec"]["schedulerName"], json!("muster"), "{t}");
    }
    assert_eq!(check(&request("CREATE", TENANT, MPIJOB, &after, None)).await, Ok(()));
    // Not held back (another webhook undid ours): the hold field is named.
    let e = check(&create).await.unwrap_err();
    assert!(e.starts_with("spec.runPolicy.suspend: an MPIJob in queue open must be created suspended"), "{e}");
    assert!(e.contains("spec.mpiReplicaSpecs.Worker.template.spec.schedulerName: the pods of an MPIJob"), "{e}");
    // Without the queue label, nothing.
    let plain = mpijob("plain", None, 3, "1");
    assert!(patch_of(&request("CREATE", TENANT, MPIJOB, &plain, None), &c).0.is_empty());
}

#[tokio::test]
async fn a_hostile_mpijob_is_refused_by_field() {
    let c = WebhookConfig::default();
    let held = |m: &Value| patched(m, &patch_of(&request("CREATE", TENANT, MPIJOB, m, None), &c));
    // A worker pinned to a node, and a worker template claiming the member muster binds it to.
    let mut m = mpijob("pi", Some("open"), 2, "1");
    m["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["nodeName"] = json!("n1");
    m["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["metadata"]["annotations"] = json!({"muster.dev/member": "0"});
    let e = check(&request("CREATE", TENANT, MPIJOB, &held(&m), None)).await.unwrap_err();
    assert!(
        e.contains("spec.mpiReplicaSpecs.Worker.template.metadata.annotations[muster.dev/member]: the key is reserved"),
        "{e}"
    );
    assert!(e.contains("spec.mpiReplicaSpecs.Worker.template.spec.nodeName: the pods of an MPIJob in queue open cannot choose their node (n1)"), "{e}");
    // Two launchers; a group the queue's quota can never hold.
    let mut m = mpijob("pi", Some("open"), 2, "1");
    m["spec"]["mpiReplicaSpecs"]["Launcher"]["replicas"] = json!(2);
    let e = check(&request("CREATE", TENANT, MPIJOB, &held(&m), None)).await.unwrap_err();
    assert_eq!(e, "spec.mpiReplicaSpecs.Launcher.replicas: 2; an MPIJob has exactly one launcher, set it to 1");
    let big = held(&mpijob("pi", Some("team-a"), 63, "1"));
    let e = check(&request("CREATE", TENANT, MPIJOB, &big, None)).await.unwrap_err();
    assert!(e.contains("spec.mpiReplicaSpecs.Worker.replicas"), "{e}");
    // The queue cannot change, and a running MPIJob cannot be resized.
    let moved = {
        let mut m = held(&mpijob("pi", Some("open"), 2, "1"));
        m["metadata"]["labels"][QUEUE] = json!("other");
        m
    };
    let e = check(&request("UPDATE", TENANT, MPIJOB, &moved, Some(&held(&mpijob("pi", Some("open"), 2, "1"))))).await;
    assert!(e.unwrap_err().contains("an MPIJob cannot move from queue open to queue other"));
}
