//! Reclaim on a real control plane, with victims slow to stop. Two teams share 4 KWOK nodes of 8
//! cpu (scenarios/clusters/tenant-4x8.yaml) in one cohort, 16 cpu each, both reclaiming. Team A
//! fills all four nodes with whole-node Jobs whose pods carry a finalizer, so that once deleted
//! they stay on their nodes, holding their cpu, until the test lets them go. Team B then asks for
//! its own 16 cpu: muster evicts two of A's Jobs whole (their Jobs suspended, their pods
//! deleted) and admits B on their nodes, but binds none of B's pods while A's stopping pods are
//! still there; once they are gone, B's pods are bound on exactly those nodes and B completes. The
//! other two of A's Jobs never stop; the evicted two run again once B is done.
//!
//! hack/e2e/test-muster-reclaim.sh starts muster and the over-commit checker (`muster-harness
//! overcommit`) around this test: the checker fails the run if any node ever had more cpu
//! requested than allocatable.

mod e2e;

use std::collections::BTreeSet;
use std::time::Duration;

use e2e::eventually;
use e2e::objects::{group_phase, wait_phase};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::ApiResource;
use kube::{Client, ResourceExt};
use muster_k8s::{Group, Queue};
use serde_json::{Value, json};

const A: &str = "e2e-reclaim-a";
const B: &str = "e2e-reclaim-b";
const COHORT: &str = "e2e-reclaim";
/// Holds a deleted pod on its node until the test removes it: a pod slow to stop.
const FINALIZER: &str = "e2e.muster.dev/slow-stop";
const MANAGER: &str = "muster-e2e";

#[tokio::test]
async fn a_reclaiming_team_is_bound_only_once_the_borrowers_pods_are_gone() {
    let Some(client) = e2e::client().await else { return };
    for ns in [A, B] {
        release_held_pods(&client, ns).await;
        e2e::fresh_namespace(&client, ns, json!({})).await;
        apply_queue(&client, ns).await;
    }
    // Team A: four whole-node Jobs, which borrow B's half of the cluster.
    for i in 0..4 {
        create_job(&client, A, &format!("a{i}"), 1, 600, true).await;
    }
    for i in 0..4 {
        wait_phase(&client, A, &format!("a{i}"), 90, &["Running"]).await;
    }
    let a_nodes = eventually(60, "A's four pods are bound, one per node", || nodes_of(&client, A)).await;
    assert_eq!(a_nodes.len(), 4, "{a_nodes:?}");

    // Team B comes for its own 16 cpu: two of A's Jobs are evicted whole.
    create_job(&client, B, "b", 2, 20, false).await;
    wait_phase(&client, B, "b", 90, &["Admitted", "Running", "Succeeded"]).await;
    let evicted: Vec<String> =
        eventually(30, "two of A's groups are evicted", || evicted_groups(&client)).await.into_iter().collect();
    assert_eq!(evicted.len(), 2, "{evicted:?}");
    let stopping = eventually(30, "the evicted Jobs' pods are being deleted, held by the finalizer", || {
        stopping_pods(&client, &evicted)
    })
    .await;
    assert_eq!(stopping.len(), 2, "{stopping:?}");

    // While they stop, B's pods wait: the engine placed B on their nodes, which are full.
    let pods_b = Api::<Pod>::namespaced(client.clone(), B);
    for _ in 0..16 {
        let bound: Vec<String> = pods_b
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .iter()
            .filter_map(|p| p.spec.as_ref()?.node_name.clone())
            .collect();
        assert!(bound.is_empty(), "B's pods bound beside A's stopping pods: {bound:?}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    // Let A's pods go: B's pods are bound where they were, and B runs to the end.
    let freed: BTreeSet<String> = stopping.iter().map(|(_, node)| node.clone()).collect();
    let pods_a = Api::<Pod>::namespaced(client.clone(), A);
    for (pod, _) in &stopping {
        drop_finalizer(&pods_a, pod).await;
    }
    let b_nodes = eventually(60, "B's two pods are bound", || nodes_of(&client, B)).await;
    assert_eq!(b_nodes, freed, "B runs on the nodes its victims left");
    wait_phase(&client, B, "b", 90, &["Succeeded"]).await;

    // The other two ran on throughout; the evicted ones run again, whole, once B is done.
    for i in 0..4 {
        let name = format!("a{i}");
        if !evicted.contains(&name) {
            assert_eq!(group_phase(&client, A, &name).await.as_deref(), Some("Running"), "{name}");
        }
    }
    for name in &evicted {
        wait_phase(&client, A, name, 90, &["Running"]).await;
    }
    for ns in [A, B] {
        release_held_pods(&client, ns).await;
        let _ = Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone())
            .delete(ns, &DeleteParams::default())
            .await;
        let _ = Api::<Queue>::all(client.clone()).delete(ns, &DeleteParams::default()).await;
    }
}

/// Queue `ns` for namespace `ns`: 16 cpu in the cohort, reclaiming what it lends.
async fn apply_queue(client: &Client, ns: &str) {
    let queues = Api::<DynamicObject>::all_with(client.clone(), &ApiResource::erase::<Queue>(&()));
    let doc = json!({
        "apiVersion": "muster.dev/v1alpha1", "kind": "Queue", "metadata": {"name": ns},
        "spec": {"cohort": COHORT, "quotas": {"cpu": {"nominal": 16}}, "namespaceSelector": {"namespaces": [ns]},
                 "policy": {"kind": "bestEffortFifo"}, "preemption": {"reclaimWithinCohort": true}}
    });
    queues.patch(ns, &PatchParams::apply(MANAGER).force(), &Patch::Apply(&doc)).await.expect("the Queue is accepted");
}

/// A Job of `pods` whole-node pods (8 cpu) in queue `ns`, each running `run` seconds on KWOK; with
/// `held`, its pods carry the finalizer.
async fn create_job(client: &Client, ns: &str, name: &str, pods: i32, run: u32, held: bool) {
    let finalizers: Vec<&str> = if held { vec![FINALIZER] } else { vec![] };
    let job: Value = json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "labels": {"muster.dev/queue": ns}},
        "spec": {"parallelism": pods, "completions": pods, "backoffLimit": 0, "template": {
            "metadata": {"annotations": {"kwok.muster.dev/run-seconds": run.to_string(), "e2e.muster.dev/test": "true"},
                         "finalizers": finalizers},
            "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 0, "containers": [{
                "name": "main", "image": "kwok-fake", "resources": {"requests": {"cpu": "8", "memory": "1Gi"}}}]}}}
    });
    let job: Job = serde_json::from_value(job).unwrap();
    Api::<Job>::namespaced(client.clone(), ns).create(&PostParams::default(), &job).await.expect("the Job is created");
}

/// A's groups that were evicted and wait again: Queued, with an eviction counted.
async fn evicted_groups(client: &Client) -> Option<BTreeSet<String>> {
    let groups = Api::<Group>::namespaced(client.clone(), A).list(&ListParams::default()).await.ok()?.items;
    let evicted: BTreeSet<String> = groups
        .iter()
        .filter(|g| {
            let s = g.status.as_ref();
            s.and_then(|s| s.phase).is_some_and(|p| p.to_string() == "Queued")
                && s.and_then(|s| s.requeue.as_ref()).is_some_and(|r| r.count > 0)
        })
        .map(|g| g.name_any())
        .collect();
    (evicted.len() >= 2).then_some(evicted)
}

/// (pod, node) of the evicted Jobs' pods still on their nodes while being deleted.
async fn stopping_pods(client: &Client, jobs: &[String]) -> Option<Vec<(String, String)>> {
    let pods = Api::<Pod>::namespaced(client.clone(), A).list(&ListParams::default()).await.ok()?.items;
    let stopping: Vec<(String, String)> = pods
        .iter()
        .filter(|p| p.labels().get("job-name").is_some_and(|j| jobs.contains(j)))
        .filter(|p| p.metadata.deletion_timestamp.is_some())
        .filter_map(|p| Some((p.name_any(), p.spec.as_ref()?.node_name.clone()?)))
        .collect();
    (stopping.len() == jobs.len()).then_some(stopping)
}

/// Nodes of the bound, unfinished pods of namespace `ns`; None until there are any.
async fn nodes_of(client: &Client, ns: &str) -> Option<BTreeSet<String>> {
    let pods = Api::<Pod>::namespaced(client.clone(), ns).list(&ListParams::default()).await.ok()?.items;
    let nodes: BTreeSet<String> =
        pods.iter().filter(|p| holds(p)).filter_map(|p| p.spec.as_ref()?.node_name.clone()).collect();
    let bound = pods.iter().filter(|p| holds(p)).count();
    (bound > 0 && bound == pods.len()).then_some(nodes)
}

/// Bound and neither Succeeded nor Failed.
fn holds(p: &Pod) -> bool {
    let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
    p.spec.as_ref().is_some_and(|s| s.node_name.is_some()) && !matches!(phase, Some("Succeeded" | "Failed"))
}

async fn drop_finalizer(pods: &Api<Pod>, name: &str) {
    let Ok(p) = pods.get(name).await else { return };
    let kept: Vec<String> = p.finalizers().iter().filter(|f| *f != FINALIZER).cloned().collect();
    let patch = json!({"metadata": {"finalizers": kept, "resourceVersion": p.resource_version()}});
    pods.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await.expect("the finalizer is removed");
}

/// Lets every pod of `ns` a finalizer of this test holds go (left by an earlier, failed run).
async fn release_held_pods(client: &Client, ns: &str) {
    let pods = Api::<Pod>::namespaced(client.clone(), ns);
    let Ok(list) = pods.list(&ListParams::default()).await else { return };
    for p in list.items.iter().filter(|p| p.finalizers().iter().any(|f| f == FINALIZER)) {
        drop_finalizer(&pods, &p.name_any()).await;
    }
}
