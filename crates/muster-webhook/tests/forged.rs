//! Reviews anyone who reaches the webhook could forge: they learn nothing of a namespace but the
//! one the review is for, and not whose a group is even there; the webhook reads the cluster only
//! in that namespace.

mod common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use common::*;
use k8s_openapi::api::scheduling::v1beta1::PodGroup as NativePodGroup;
use muster_webhook::{ClusterState, LookupError, PodGroupTrees};

/// MemoryState that records the namespace of every namespaced lookup.
struct Recording {
    inner: MemoryState,
    namespaces: Mutex<Vec<String>>,
}

impl Recording {
    fn seen(&self, ns: &str) {
        self.namespaces.lock().unwrap().push(ns.to_string());
    }
}

impl ClusterState for Recording {
    async fn queue(&self, name: &str) -> Result<Option<Arc<Queue>>, LookupError> {
        self.inner.queue(name).await
    }
    async fn namespace_labels(&self, name: &str) -> Result<Option<BTreeMap<String, String>>, LookupError> {
        self.seen(name);
        self.inner.namespace_labels(name).await
    }
    async fn group(&self, ns: &str, name: &str) -> Result<Option<Arc<Group>>, LookupError> {
        self.seen(ns);
        self.inner.group(ns, name).await
    }
    async fn pod_group(&self, ns: &str, name: &str) -> Result<Option<Arc<DynamicObject>>, LookupError> {
        self.seen(ns);
        self.inner.pod_group(ns, name).await
    }
    async fn native_pod_group(&self, ns: &str, name: &str) -> Result<Option<Arc<NativePodGroup>>, LookupError> {
        self.seen(ns);
        self.inner.native_pod_group(ns, name).await
    }
    async fn pod_group_trees(&self, ns: &str) -> Result<PodGroupTrees, LookupError> {
        self.seen(ns);
        self.inner.pod_group_trees(ns).await
    }
}

/// Namespace `secret` has group `train`, of its Job `private-train`; namespace ml has group
/// `train` too, of a JobSet.
fn cluster() -> Recording {
    let owned = |ns: &str, api_version: &str, kind: &str, name: &str| {
        let mut g = group_object(ns, "train", "Running");
        let owner = json!({"apiVersion": api_version, "kind": kind, "name": name, "uid": "9"});
        g.spec.owner = Some(serde_json::from_value(owner).unwrap());
        g
    };
    let inner = state()
        .with_namespace("secret", &[])
        .with_group(owned("secret", "batch/v1", "Job", "private-train"))
        .with_group(owned("ml", "jobset.x-k8s.io/v1alpha2", "JobSet", "train"));
    Recording { inner, namespaces: Mutex::new(Vec::new()) }
}

async fn answer(r: &AdmissionRequest<DynamicObject>, s: &Recording) -> String {
    let body =
        serde_json::to_vec(&json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": r}))
            .unwrap();
    let out = review(Hook::Validate, &body, &WebhookConfig::default(), s, now()).await;
    serde_json::to_string(&out).unwrap()
}

#[tokio::test]
async fn a_review_for_namespace_ml_never_mentions_another_namespaces_group() {
    let s = cluster();
    // The object claims namespace secret; the review is for ml.
    let p = gated(pod("w-0", "secret", json!({"muster.dev/group": "train", QUEUE: "open"})));
    let mut r = request("CREATE", TENANT, POD, &p, None);
    r.namespace = Some("ml".into());
    let out = answer(&r, &s).await;
    assert!(
        out.contains(
            "metadata.namespace: the object is in namespace \\\"secret\\\", but the review is for namespace \\\"ml\\\""
        ),
        "{out}"
    );
    assert!(!out.contains("private-train"), "{out}");
    assert_eq!(*s.namespaces.lock().unwrap(), Vec::<String>::new(), "nothing read for such a review");
}

#[tokio::test]
async fn a_refusal_never_says_whose_group_it_is() {
    let s = cluster();
    // Forged or not, a review for namespace secret is answered about that namespace only, and
    // without the owner of its group.
    let p = gated(pod("w-0", "secret", json!({"muster.dev/group": "train", QUEUE: "open"})));
    let out = answer(&request("CREATE", TENANT, POD, &p, None), &s).await;
    assert!(out.contains("group train is a workload's group"), "{out}");
    assert!(!out.contains("private-train") && !out.contains("Job"), "{out}");
    // A workload named after another's group: refused without naming the other.
    let j = held(job("train", Some("open"), 1, "1"));
    let out = answer(&request("CREATE", TENANT, JOB, &j, None), &s).await;
    assert!(out.contains("of another workload or of plain pods"), "{out}");
    assert!(!out.contains("JobSet"), "{out}");
    assert!(s.namespaces.lock().unwrap().iter().all(|ns| ns == "secret" || ns == "ml"), "only the reviews' own");
    assert!(!s.namespaces.lock().unwrap().is_empty());
}

#[tokio::test]
async fn lookups_stay_in_the_reviews_namespace() {
    let s = cluster();
    let p = gated(pod("w-0", "ml", json!({"muster.dev/group": "g", QUEUE: "open", "muster.dev/group-size": "2"})));
    answer(&request("CREATE", TENANT, POD, &p, None), &s).await;
    let seen = s.namespaces.lock().unwrap().clone();
    assert!(!seen.is_empty());
    assert!(seen.iter().all(|ns| ns == "ml"), "{seen:?}");
}
