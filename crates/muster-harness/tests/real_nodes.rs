//! Gangs of real containers on real kubelets (hack/real-nodes.sh: two nodes, each a kubelet with
//! its own containerd, 1500m CPU allocatable, labelled `muster.dev/real-node=true`).
//!
//! On KWOK nodes only muster's own count says a node is not over-committed; here the kubelet
//! judges too: it refuses a pod that does not fit what it has left (`OutOfcpu`, `OutOfmemory`,
//! `UnexpectedAdmissionError`, ...), and a refused pod fails every part. The parts:
//! - a gang of four pods is bound whole, two to a node, and each pod's container runs to its end;
//! - a second gang that fits only once the first has ended waits for it, and then runs;
//! - the refusal check bites: a pod bound by hand against a node's labels is refused by the
//!   kubelet, and the check names it.
//!
//! hack/e2e/test-muster-real-nodes.sh starts the real nodes, muster and the over-commit checker
//! around this test.

mod e2e;

use std::collections::BTreeMap;

use e2e::eventually;
use e2e::objects::pods;
use e2e::parts::Parts;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

const NS: &str = "e2e-real-nodes";
const REAL_NODE: &str = "muster.dev/real-node";
/// The image hack/node-image.sh builds and every real node has imported.
const IMAGE: &str = "muster.local/pod:v1";

/// A Job of `pods` pods in queue `default`, each asking `cpu` and 64Mi and running a real
/// container for `seconds` on a real node.
fn job(name: &str, pods: u32, cpu: &str, seconds: u32) -> Value {
    json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "labels": {"muster.dev/queue": "default"}},
        "spec": {"parallelism": pods, "completions": pods, "backoffLimit": 0, "template": {
            "metadata": {"annotations": {"e2e.muster.dev/test": "true"}},
            "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
                     "nodeSelector": {REAL_NODE: "true"},
                     "containers": [{"name": "main", "image": IMAGE, "imagePullPolicy": "Never",
                                     "command": ["/muster-pod", "run", seconds.to_string()],
                                     "resources": {"requests": {"cpu": cpu, "memory": "64Mi"},
                                                   "limits": {"cpu": cpu, "memory": "64Mi"}}}]}}}
    })
}

async fn submit(client: &Client, doc: Value) {
    let job: Job = serde_json::from_value(doc).unwrap();
    let name = job.name_any();
    Api::<Job>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &job)
        .await
        .unwrap_or_else(|e| panic!("Job {name} is created: {e}"));
}

/// Pods a kubelet refused at admission: it fails them with "Pod was rejected: ..." and a reason
/// such as OutOfcpu, OutOfmemory, OutOfpods, NodeAffinity or UnexpectedAdmissionError.
fn refused_by_kubelet(pods: &[Pod]) -> Vec<String> {
    pods.iter()
        .filter_map(|p| {
            let status = p.status.as_ref()?;
            let message = status.message.as_deref()?;
            (status.phase.as_deref() == Some("Failed") && message.starts_with("Pod was rejected")).then(|| {
                let node = p.spec.as_ref().and_then(|s| s.node_name.as_deref()).unwrap_or("?");
                format!("{} on {node}: {} ({message})", p.name_any(), status.reason.as_deref().unwrap_or("?"))
            })
        })
        .collect()
}

async fn assert_no_refusals(client: &Client) {
    let refused = refused_by_kubelet(&pods(client, NS, "").await);
    assert!(refused.is_empty(), "the kubelet refused pods muster bound: {refused:?}");
    eprintln!("  ok   no pod was refused by a kubelet");
}

/// When the pod was bound (its PodScheduled condition turned true).
fn bound_at(pod: &Pod) -> Option<Timestamp> {
    let conditions = pod.status.as_ref()?.conditions.as_ref()?;
    let scheduled = conditions.iter().find(|c| c.type_ == "PodScheduled" && c.status == "True")?;
    Some(scheduled.last_transition_time.as_ref()?.0)
}

/// When the pod's container ended, with exit code 0 (None if it has not, or failed).
fn finished_at(pod: &Pod) -> Option<Timestamp> {
    let statuses = pod.status.as_ref()?.container_statuses.as_ref()?;
    let ended = statuses.first()?.state.as_ref()?.terminated.as_ref()?;
    (ended.exit_code == 0).then_some(ended.finished_at.as_ref()?.0)
}

/// Waits until the `count` pods of Job `name` have ended with exit code 0, and returns them.
async fn wait_succeeded(client: &Client, name: &str, count: usize, secs: u64) -> Vec<Pod> {
    let selector = format!("job-name={name}");
    eventually(secs, &format!("the {count} containers of Job {name} ran to their end (exit code 0)"), || async {
        let all = pods(client, NS, &selector).await;
        (all.len() == count && all.iter().all(|p| finished_at(p).is_some())).then_some(all)
    })
    .await
}

async fn gang_runs_whole(client: &Client) {
    submit(client, job("gang", 4, "600m", 6)).await;
    let selector = "job-name=gang";
    let placed: BTreeMap<String, String> = eventually(60, "the four pods of gang are bound", || async {
        let all = pods(client, NS, selector).await;
        let bound: BTreeMap<String, String> =
            all.iter().filter_map(|p| Some((p.name_any(), p.spec.as_ref()?.node_name.clone()?))).collect();
        (bound.len() == 4).then_some(bound)
    })
    .await;
    let mut per_node: BTreeMap<&str, usize> = BTreeMap::new();
    for node in placed.values() {
        *per_node.entry(node).or_default() += 1;
    }
    assert_eq!(per_node.values().copied().collect::<Vec<_>>(), [2, 2], "two 600m pods on each 1500m node: {placed:?}");
    assert!(per_node.keys().all(|n| n.starts_with("muster-real-")), "only real nodes: {placed:?}");
    let done = wait_succeeded(client, "gang", 4, 90).await;
    for pod in &done {
        let id = pod.status.as_ref().and_then(|s| s.container_statuses.as_ref()?.first()?.container_id.clone());
        assert!(
            id.as_deref().is_some_and(|id| id.starts_with("containerd://")),
            "{} ran in a containerd container: {id:?}",
            pod.name_any()
        );
    }
    eprintln!("  ok   each pod ran in its own containerd container");
    assert_no_refusals(client).await;
}

async fn second_gang_waits_for_room(client: &Client) {
    // Each node has 1500m: one 1-CPU pod of `first` leaves 500m, too little for one of `second`.
    submit(client, job("first", 2, "1", 10)).await;
    eventually(60, "both pods of first are bound", || async {
        let bound = pods(client, NS, "job-name=first").await;
        bound.iter().filter(|p| p.spec.as_ref().is_some_and(|s| s.node_name.is_some())).count().eq(&2).then_some(())
    })
    .await;
    submit(client, job("second", 2, "1", 3)).await;
    let first = wait_succeeded(client, "first", 2, 90).await;
    let second = wait_succeeded(client, "second", 2, 90).await;
    let first_end = first.iter().filter_map(finished_at).max().expect("first's pods ended");
    let second_start = second.iter().filter_map(bound_at).min().expect("second's pods were bound");
    assert!(
        second_start >= first_end,
        "second was bound at {second_start}, before first ended at {first_end}: it did not fit beside it"
    );
    eprintln!("  ok   second was bound at {second_start}, after first ended at {first_end}");
    assert_no_refusals(client).await;
}

async fn refusal_check_bites(client: &Client) {
    // Bound by hand, past every scheduler, to a node whose labels it does not match: the kubelet
    // refuses it at admission (NodeAffinity), without over-committing anything.
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "refused", "labels": {"e2e.muster.dev/hand-bound": "true"}},
        "spec": {"nodeName": "muster-real-1", "nodeSelector": {REAL_NODE: "false"}, "restartPolicy": "Never",
                 "containers": [{"name": "main", "image": IMAGE, "imagePullPolicy": "Never",
                                 "command": ["/muster-pod", "run", "1"]}]}
    }))
    .unwrap();
    Api::<Pod>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &pod)
        .await
        .expect("pod refused is created");
    let refused = eventually(30, "the kubelet refuses the hand-bound pod, and the check names it", || async {
        let refused = refused_by_kubelet(&pods(client, NS, "e2e.muster.dev/hand-bound=true").await);
        (!refused.is_empty()).then_some(refused)
    })
    .await;
    assert!(refused[0].contains("NodeAffinity"), "refused for its node selector: {refused:?}");
    eprintln!("       {}", refused[0]);
}

#[tokio::test]
async fn gangs_of_real_containers_run_whole_and_no_kubelet_refuses_a_pod() {
    let Some(client) = e2e::client().await else { return };
    e2e::fresh_namespace(&client, NS, json!({})).await;
    let mut parts = Parts::new(&client, &[NS]);
    parts.run("a", "a gang of four real containers is bound whole and runs", gang_runs_whole(&client)).await;
    parts.run("b", "a gang that fits only after another waits for it", second_gang_waits_for_room(&client)).await;
    parts.run("c", "a pod a kubelet refuses is seen", refusal_check_bites(&client)).await;
    parts.finish().await;
}
