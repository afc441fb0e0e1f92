//! A pod with a field muster does not place (a device claim shared by name, a host port, ...) is never bound, even when it got past the webhook (made before
//! the webhook was registered): an event on the pod says why.

mod common;

use common::*;
use k8s_openapi::api::core::v1::Pod;
use muster_controller::convert::pod_view;
use serde_json::json;

/// A pod of Job `train` sharing a GPU claim by name, as the apiserver returns it.
fn claiming_pod(index: u32) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": format!("train-{index}"), "namespace": NS, "uid": format!("train-{index}"),
            "creationTimestamp": "2026-03-04T05:06:07Z",
            "labels": {"batch.kubernetes.io/job-name": "train", "job-name": "train",
                       "batch.kubernetes.io/job-completion-index": index.to_string()},
            "annotations": {"batch.kubernetes.io/job-completion-index": index.to_string()},
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "job-train",
                                 "controller": true, "blockOwnerDeletion": true}]
        },
        "spec": {
            "schedulerName": "muster", "restartPolicy": "Never",
            "resourceClaims": [{"name": "gpu", "resourceClaimName": "shared-gpu"}],
            "containers": [{"name": "main", "image": "cuda",
                            "resources": {"requests": {"cpu": "2"}, "claims": [{"name": "gpu"}]}}]
        },
        "status": {"phase": "Pending"}
    }))
    .unwrap()
}

#[test]
fn a_pod_for_muster_sharing_a_claim_is_seen_as_unsupported() {
    let view = pod_view(&claiming_pod(0)).unwrap();
    let why = view.unsupported.as_deref().expect("unsupported");
    assert!(why.contains("spec.resourceClaims[0]: muster places claims made from a template"), "{why}");
    // Another scheduler's pod is its own business.
    let mut theirs = claiming_pod(1);
    theirs.spec.as_mut().unwrap().scheduler_name = Some("default-scheduler".into());
    assert_eq!(pod_view(&theirs).unwrap().unsupported, None);
}

#[test]
fn a_pod_with_a_field_muster_does_not_place_is_never_bound() {
    let mut h = Harness::new(&[node("n1", 8)], &[job("train", 2, 2)], &[]);
    h.brain.take_actions();
    h.cycle();
    let mut a = Vec::new();
    for i in 0..2 {
        let claiming = pod_view(&claiming_pod(i)).unwrap();
        let p = PodView { unsupported: claiming.unsupported, ..pod("train", i, 2) };
        a.extend(h.send(Event::Pod(Change::Apply(p))));
    }
    assert!(binds(&a).is_empty(), "{a:?}");
    let told = told(&a, "UnsupportedPodField");
    assert_eq!(told.len(), 2, "each pod told once: {a:?}");
    assert!(
        told[0].contains("is not bound: spec.resourceClaims[0]: muster places claims made from a template"),
        "{}",
        told[0]
    );
    // The same pods without the claim are bound.
    let a: Vec<Action> = (0..2).flat_map(|i| h.send(Event::Pod(Change::Apply(pod("train", i, 2))))).collect();
    assert_eq!(binds(&a).len(), 2, "{a:?}");
}
