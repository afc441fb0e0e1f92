//! Cohorts with quotas of their own on a real control plane: 4 KWOK nodes of 8 cpu
//! (scenarios/clusters/reservation-4.yaml). Queue A (8 cpu nominal) is in Cohort `e2e-research`,
//! which may borrow at most 8 cpu from the rest of Cohort `e2e-org`; queue B (24 cpu nominal, idle)
//! is in `e2e-org`. A's four whole-node Jobs: two run (its own 8 and the 8 its cohort may
//! borrow), the others wait, their Group naming the cohort's limit. Raising the limit to 16 lets a
//! third run. A Cohort the engine refuses is left out, and so is the queue below it; the
//! `Accepted` condition of each Queue and Cohort says which muster honours, and why not.
//!
//! hack/e2e/test-muster-cohort.sh starts muster and the over-commit checker around this test.

mod e2e;

use std::collections::BTreeSet;

use e2e::eventually;
use e2e::objects::{group, nodes_of};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::Client;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use muster_k8s::{Cohort, Queue};
use serde_json::{Value, json};

const A: &str = "e2e-cohort-a";
const B: &str = "e2e-cohort-b";
const C: &str = "e2e-cohort-c";
const ORG: &str = "e2e-org";
const RESEARCH: &str = "e2e-research";
const BAD: &str = "e2e-bad";
const MANAGER: &str = "muster-e2e";

#[tokio::test]
async fn a_cohort_caps_what_its_queues_borrow_from_the_rest_of_the_tree() {
    let Some(client) = e2e::client().await else { return };
    clean_up(&client).await;
    for ns in [A, B, C] {
        e2e::fresh_namespace(&client, ns, json!({})).await;
    }
    apply_cohort(&client, ORG, json!({})).await;
    apply_cohort(&client, RESEARCH, json!({"parent": ORG, "quotas": {"cpu": {"nominal": 0, "borrowingLimit": 8}}}))
        .await;
    // A root cannot borrow: the engine refuses it, and queue C below it is left out.
    apply_cohort(&client, BAD, json!({"quotas": {"cpu": {"nominal": 0, "borrowingLimit": 8}}})).await;
    apply_queue(&client, A, RESEARCH, 8).await;
    apply_queue(&client, B, ORG, 24).await;
    apply_queue(&client, C, BAD, 32).await;

    for i in 0..4 {
        create_job(&client, A, &format!("a{i}")).await;
    }
    create_job(&client, C, "c0").await;
    let running = eventually(60, "two of A's Jobs are bound", || async {
        let held = bound_jobs(&client, A).await;
        (held.len() == 2).then_some(held)
    })
    .await;
    let waiting: Vec<String> = (0..4).map(|i| format!("a{i}")).filter(|j| !running.contains(j)).collect();
    let why = eventually(30, "a waiting Job's Group names its cohort's borrowing limit", || async {
        let m = message(&client, A, &waiting[0]).await?;
        m.contains(&format!("cohort {RESEARCH} may borrow at most")).then_some(m)
    })
    .await;
    // Holding for a few seconds more: nothing else is bound while the limit holds.
    tokio::time::sleep(std::time::Duration::from_secs(5)).await;
    assert_eq!(bound_jobs(&client, A).await, running, "{why}");
    assert!(nodes_of(&client, C, "job-name=c0").await.is_empty(), "queue C is left out with its cohort");
    let (status, reason, says, _) = cohort_accepted(&client, BAD).await;
    assert_eq!((status.as_str(), reason.as_str()), ("False", "InvalidSpec"), "{says}");
    assert!(says.starts_with("spec.quotas.cpu.borrowingLimit: "), "the message names the field: {says}");
    let (status, reason, says, _) = queue_accepted(&client, C).await;
    assert_eq!((status.as_str(), reason.as_str()), ("False", "CohortLeftOut"), "{says}");
    assert!(says.contains(BAD), "{says}");
    for name in [ORG, RESEARCH] {
        assert_eq!(cohort_accepted(&client, name).await.0, "True", "Cohort {name}");
    }

    // The admin raises the limit: muster reads the change and a third Job runs.
    apply_cohort(&client, RESEARCH, json!({"parent": ORG, "quotas": {"cpu": {"nominal": 0, "borrowingLimit": 16}}}))
        .await;
    eventually(60, "three of A's Jobs are bound once the limit is 16", || async {
        (bound_jobs(&client, A).await.len() == 3).then_some(())
    })
    .await;
    tokio::time::sleep(std::time::Duration::from_secs(5)).await;
    assert_eq!(bound_jobs(&client, A).await.len(), 3, "A holds its 8 and the 16 its cohort may borrow");
    assert!(nodes_of(&client, C, "job-name=c0").await.is_empty());
    let generation = Api::<Cohort>::all(client.clone()).get(RESEARCH).await.unwrap().metadata.generation;
    eventually(30, "Accepted observes the Cohort's new generation", || async {
        let accepted = cohort_accepted(&client, RESEARCH).await;
        (accepted.0 == "True" && accepted.3 == generation).then_some(())
    })
    .await;
    // The queue reports of the running engine (every 5 s) leave the condition be.
    let a = eventually(30, "queue A's report counts three admitted groups", || async {
        let a = Api::<Queue>::all(client.clone()).get(A).await.ok()?.status?;
        (a.admitted_groups == 3).then_some(a)
    })
    .await;
    assert_eq!(queue_accepted(&client, A).await.0, "True", "{a:?}");

    clean_up(&client).await;
}

/// Status, reason, message and observed generation of an `Accepted` condition.
type Accepted = (String, String, String, Option<i64>);

fn accepted_of(conditions: &[Condition]) -> Option<Accepted> {
    let c = conditions.iter().find(|c| c.type_ == "Accepted")?;
    Some((c.status.clone(), c.reason.clone(), c.message.clone(), c.observed_generation))
}

/// Cohort `name`'s `Accepted` condition, once muster has written it.
async fn cohort_accepted(client: &Client, name: &str) -> Accepted {
    eventually(30, "the Cohort has its Accepted condition", || async {
        let c = Api::<Cohort>::all(client.clone()).get(name).await.ok()?;
        accepted_of(&c.status?.conditions)
    })
    .await
}

/// Queue `name`'s `Accepted` condition, once muster has written it.
async fn queue_accepted(client: &Client, name: &str) -> Accepted {
    eventually(30, "the Queue has its Accepted condition", || async {
        let q = Api::<Queue>::all(client.clone()).get(name).await.ok()?;
        accepted_of(&q.status?.conditions)
    })
    .await
}

/// What the test leaves: namespaces, Queues and Cohorts.
async fn clean_up(client: &Client) {
    let dp = DeleteParams::default();
    for ns in [A, B, C] {
        let _ = Api::<Namespace>::all(client.clone()).delete(ns, &dp).await;
        let _ = Api::<Queue>::all(client.clone()).delete(ns, &dp).await;
    }
    for name in [RESEARCH, ORG, BAD] {
        let _ = Api::<Cohort>::all(client.clone()).delete(name, &dp).await;
    }
}

/// Applies Cohort `name` with `spec` as the admin.
async fn apply_cohort(client: &Client, name: &str, spec: Value) {
    let doc = json!({"apiVersion": "muster.dev/v1alpha1", "kind": "Cohort", "metadata": {"name": name}, "spec": spec});
    let pp = PatchParams::apply(MANAGER).force();
    let r = Api::<Cohort>::all(client.clone()).patch(name, &pp, &Patch::Apply(&doc)).await;
    r.unwrap_or_else(|e| panic!("the Cohort {name} is accepted: {e}"));
}

/// Applies queue `ns` for namespace `ns` in `cohort`, best effort, with `cpu` cores nominal.
async fn apply_queue(client: &Client, ns: &str, cohort: &str, cpu: u32) {
    let doc = json!({"apiVersion": "muster.dev/v1alpha1", "kind": "Queue", "metadata": {"name": ns},
                     "spec": {"namespaceSelector": {"namespaces": [ns]}, "cohort": cohort,
                              "policy": {"kind": "bestEffortFifo"}, "quotas": {"cpu": {"nominal": cpu}}}});
    let pp = PatchParams::apply(MANAGER).force();
    let r = Api::<Queue>::all(client.clone()).patch(ns, &pp, &Patch::Apply(&doc)).await;
    r.unwrap_or_else(|e| panic!("the Queue {ns} is accepted: {e}"));
}

/// A Job of one whole-node pod (8 cpu) in queue `ns`, running 600 s on KWOK.
async fn create_job(client: &Client, ns: &str, name: &str) {
    let job: Job = serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "labels": {"muster.dev/queue": ns}},
        "spec": {"parallelism": 1, "completions": 1, "backoffLimit": 0, "template": {
            "metadata": {"annotations": {"kwok.muster.dev/run-seconds": "600", "e2e.muster.dev/test": "true"}},
            "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 0, "containers": [{
                "name": "main", "image": "kwok-fake", "resources": {"requests": {"cpu": "8", "memory": "1Gi"}}}]}}}
    }))
    .unwrap();
    Api::<Job>::namespaced(client.clone(), ns).create(&PostParams::default(), &job).await.expect("the Job is created");
}

/// The Jobs of namespace `ns` (a0..a3) whose pod is bound.
async fn bound_jobs(client: &Client, ns: &str) -> BTreeSet<String> {
    let mut held = BTreeSet::new();
    for i in 0..4 {
        let job = format!("a{i}");
        if !nodes_of(client, ns, &format!("job-name={job}")).await.is_empty() {
            held.insert(job);
        }
    }
    held
}

/// The message of Group `ns/name`'s status.
async fn message(client: &Client, ns: &str, name: &str) -> Option<String> {
    Some(group(client, ns, name).await?["status"]["message"].as_str()?.to_string())
}
