//! The webhook's rules for Kubeflow Trainer TrainJobs: a queued TrainJob is created suspended and
//! names its queue on the JobSet the trainer makes (the group, held as a JobSet), and muster alone
//! suspends and resumes it.

mod common;

use common::*;

const TRAINJOB: Kind = ("trainer.kubeflow.org", "v1alpha1", "TrainJob", "trainjobs");
const JOBSET: Kind = ("jobset.x-k8s.io", "v1alpha2", "JobSet", "jobsets");
const TRAINER: &str = "system:serviceaccount:kubeflow-system:kubeflow-trainer-controller-manager";

fn trainjob(queue: &str) -> Value {
    json!({
        "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
        "metadata": {"name": "llama", "namespace": "ml", "labels": {QUEUE: queue}},
        "spec": {"runtimeRef": {"name": "torch-distributed"}, "trainer": {"numNodes": 3}}
    })
}

/// A TrainJob in `queue` as the mutating webhook leaves it.
fn held_trainjob(queue: &str) -> Value {
    let tj = trainjob(queue);
    patched(&tj, &patch_of(&request("CREATE", TENANT, TRAINJOB, &tj, None), &WebhookConfig::default()))
}

#[tokio::test]
async fn a_queued_trainjob_is_created_suspended_with_its_queue_on_its_jobset() {
    let c = WebhookConfig::default();
    let tj = trainjob("open");
    let create = request("CREATE", TENANT, TRAINJOB, &tj, None);
    let after = patched(&tj, &patch_of(&create, &c));
    assert_eq!((&after["spec"]["suspend"], &after["spec"]["labels"][QUEUE]), (&json!(true), &json!("open")));
    assert_eq!(check(&request("CREATE", TENANT, TRAINJOB, &after, None)).await, Ok(()));
    // Not held back (another webhook undid ours), or its JobSet in another queue: refused, by field.
    let e = check(&create).await.unwrap_err();
    assert!(e.contains("spec.suspend: a TrainJob in queue open must be created suspended"), "{e}");
    assert!(e.contains("spec.labels[muster.dev/queue]: the JobSet of a TrainJob in queue open is its group"), "{e}");
    // A queue that does not exist is named at once (the JobSet would be refused later, out of sight).
    let mut nowhere = held_trainjob("nowhere");
    nowhere["metadata"]["name"] = json!("llama2");
    let e = check(&request("CREATE", TENANT, TRAINJOB, &nowhere, None)).await.unwrap_err();
    assert!(e.starts_with("metadata.labels[muster.dev/queue]: queue \"nowhere\" does not exist"), "{e}");
    // muster's keys stay off the JobSet.
    let mut forged = after.clone();
    forged["spec"]["labels"]["muster.dev/member"] = json!("0");
    let e = check(&request("CREATE", TENANT, TRAINJOB, &forged, None)).await.unwrap_err();
    assert!(e.starts_with("spec.labels[muster.dev/member]: the key is reserved for muster"), "{e}");
    // Without the queue label, nothing.
    let mut plain = trainjob("open");
    plain["metadata"]["labels"] = json!({});
    assert!(patch_of(&request("CREATE", TENANT, TRAINJOB, &plain, None), &c).0.is_empty());
}

#[tokio::test]
async fn only_muster_suspends_and_resumes_a_queued_trainjob() {
    let held = held_trainjob("open");
    let mut resumed = held.clone();
    resumed["spec"]["suspend"] = json!(false);
    let e = check(&request("UPDATE", TENANT, TRAINJOB, &resumed, Some(&held))).await.unwrap_err();
    assert!(
        e.starts_with("spec.suspend: muster resumes a TrainJob in queue open once its whole group is placed"),
        "{e}"
    );
    assert_eq!(check(&request("UPDATE", MUSTER, TRAINJOB, &resumed, Some(&held))).await, Ok(()));
    let e = check(&request("UPDATE", TENANT, TRAINJOB, &held, Some(&resumed))).await.unwrap_err();
    assert!(e.contains("suspending or resuming it yourself is not supported yet"), "{e}");
    // It stays in its queue, and so does its JobSet.
    let mut moved = held.clone();
    moved["metadata"]["labels"][QUEUE] = json!("team-a");
    let e = check(&request("UPDATE", TENANT, TRAINJOB, &moved, Some(&held))).await.unwrap_err();
    assert!(e.contains("metadata.labels[muster.dev/queue]"), "{e}");
}

#[tokio::test]
async fn a_trainjobs_jobset_follows_the_trainjob() {
    // The trainer makes the JobSet (its queue label from spec.labels) suspended and controls it;
    // muster's webhook names muster its pods' scheduler, and leaves its suspension to the trainer,
    // which mirrors the TrainJob's (a resume is not turned into a resume request).
    let c = WebhookConfig::default();
    let js = json!({
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
        "metadata": {"name": "llama", "namespace": "ml", "labels": {QUEUE: "open"}, "ownerReferences": [
            {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "name": "llama", "uid": "t",
             "controller": true}]},
        "spec": {"suspend": true, "replicatedJobs": [{"name": "node", "replicas": 1, "template": {"spec": {
            "parallelism": 3, "completions": 3, "template": {"spec": {"restartPolicy": "Never", "containers": [
                {"name": "node", "image": "pytorch", "resources": {"requests": {"cpu": "1"}}}]}}}}}]}
    });
    let created = patched(&js, &patch_of(&request("CREATE", TRAINER, JOBSET, &js, None), &c));
    let template = &created["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"];
    assert_eq!(template["schedulerName"], json!("muster"));
    assert_eq!(check(&request("CREATE", TRAINER, JOBSET, &created, None)).await, Ok(()));
    let mut resumed = created.clone();
    resumed["spec"]["suspend"] = json!(false);
    let update = request("UPDATE", TRAINER, JOBSET, &resumed, Some(&created));
    assert!(patch_of(&update, &c).0.is_empty(), "the trainer's resume is not a resume request");
    assert_eq!(check(&update).await, Ok(()));
}

#[tokio::test]
async fn a_running_trainjob_keeps_its_spec() {
    // Changed while it runs, its JobSet could no longer be suspended (the JobSet webhook refuses
    // the trainer's apply), so muster could not evict it.
    let c = WebhookConfig::default();
    let held = held_trainjob("open");
    let mut running = held.clone();
    running["spec"]["suspend"] = json!(false);
    let mut wider = running.clone();
    wider["spec"]["trainer"]["numNodes"] = json!(5);
    let placed = state().with_group(group_object("ml", "llama", "Running"));
    let e = check_with(&request("UPDATE", TENANT, TRAINJOB, &wider, Some(&running)), &c, &placed).await.unwrap_err();
    assert!(e.starts_with("spec: TrainJob llama runs (its Group is Running)"), "{e}");
    // Queued, it may change (the trainer re-applies its JobSet while it is suspended).
    let queued = state().with_group(group_object("ml", "llama", "Queued"));
    let mut wider_held = held.clone();
    wider_held["spec"]["trainer"]["numNodes"] = json!(5);
    assert_eq!(check_with(&request("UPDATE", TENANT, TRAINJOB, &wider_held, Some(&held)), &c, &queued).await, Ok(()));
}
