//! What the webhook rule tests share: requests as the apiserver sends them, objects, a cluster state.
#![allow(dead_code, unused_imports)] // each test file uses its own part

pub use json_patch::Patch;
pub use k8s_openapi::jiff::Timestamp;
pub use kube::core::DynamicObject;
pub use kube::core::admission::{AdmissionRequest, AdmissionReview};
pub use muster_k8s::labels::{MANAGED_NAMESPACE, POD_GROUP_ALIAS, QUEUE, RESUME_REQUESTED, SUSPEND_REQUESTED};
pub use muster_k8s::{Group, GroupSpec, Queue, QueueSpec};
pub use muster_webhook::{
    DEFAULT_CONTROLLER_USER, DEFAULT_JOB_CONTROLLER_USER, Hook, MemoryState, WebhookConfig, mutate, review, validate,
};
pub use serde_json::{Value, json};

pub const TENANT: &str = "tenant";
pub const MUSTER: &str = DEFAULT_CONTROLLER_USER;
pub const JOB_CONTROLLER: &str = DEFAULT_JOB_CONTROLLER_USER;
pub type Kind = (&'static str, &'static str, &'static str, &'static str);
pub const JOB: Kind = ("batch", "v1", "Job", "jobs");
pub const POD: Kind = ("", "v1", "Pod", "pods");
pub const GROUP: Kind = ("muster.dev", "v1alpha1", "Group", "groups");

pub fn request(op: &str, user: &str, kind: Kind, obj: &Value, old: Option<&Value>) -> AdmissionRequest<DynamicObject> {
    let (group, version, k, resource) = kind;
    let review = json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "0b1c", "kind": {"group": group, "version": version, "kind": k},
            "resource": {"group": group, "version": version, "resource": resource},
            "name": obj["metadata"]["name"], "namespace": obj["metadata"]["namespace"], "operation": op,
            "userInfo": {"username": user, "groups": ["system:authenticated"]},
            "object": obj, "oldObject": old, "dryRun": false,
        }
    });
    serde_json::from_value::<AdmissionReview<DynamicObject>>(review).unwrap().try_into().unwrap()
}

pub fn job(name: &str, queue: Option<&str>, parallelism: i64, cpu: &str) -> Value {
    let mut j = json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": "ml", "labels": {}},
        "spec": {"parallelism": parallelism, "completions": parallelism, "suspend": false, "template": {
            "metadata": {"labels": {"app": name}},
            "spec": {"restartPolicy": "Never", "schedulerName": "default-scheduler", "containers": [
                {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]}}}
    });
    if let Some(q) = queue {
        j["metadata"]["labels"][QUEUE] = json!(q);
    }
    j
}

/// The job as the mutating webhook leaves it.
pub fn held(mut j: Value) -> Value {
    j["spec"]["suspend"] = json!(true);
    j["spec"]["template"]["spec"]["schedulerName"] = json!("muster");
    j
}

pub fn pod(name: &str, ns: &str, labels: Value) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": labels},
        "spec": {"containers": [{"name": "main", "image": "busybox",
                                 "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}
    })
}

/// A plain group pod as the mutating webhook leaves it.
pub fn gated(mut p: Value) -> Value {
    p["spec"]["schedulerName"] = json!("muster");
    p["spec"]["schedulingGates"] = json!([{"name": "muster.dev/admission"}]);
    p
}

pub fn job_owned(mut p: Value, job: &str) -> Value {
    p["metadata"]["ownerReferences"] =
        json!([{"apiVersion": "batch/v1", "kind": "Job", "name": job, "uid": "123", "controller": true}]);
    p
}

pub fn queue(name: &str, yaml: &str) -> Queue {
    let spec: QueueSpec = if yaml.is_empty() { QueueSpec::default() } else { serde_yaml_ng::from_str(yaml).unwrap() };
    Queue::new(name, spec)
}

pub fn group_object(ns: &str, name: &str, phase: &str) -> Group {
    let spec: GroupSpec = serde_yaml_ng::from_str("queue: team-a\nmembers: {min: 4}").unwrap();
    let mut g = Group::new(name, spec);
    g.metadata.namespace = Some(ns.into());
    g.status = Some(serde_json::from_value(json!({"phase": phase})).unwrap());
    g
}

pub fn state() -> MemoryState {
    MemoryState::default()
        .with_namespace("ml", &[("team", "a"), (MANAGED_NAMESPACE, "true")])
        .with_namespace("web", &[])
        .with_queue(queue(
            "team-a",
            "quotas: {cpu: {nominal: 8}, memory: {nominal: 64Gi}}\nnamespaceSelector: {matchLabels: {team: a}}",
        ))
        .with_queue(queue("open", ""))
        .with_queue(queue("broken", "quotas: {gpu: {nominal: 1}}"))
}

pub async fn check_with(
    r: &AdmissionRequest<DynamicObject>,
    config: &WebhookConfig,
    s: &MemoryState,
) -> Result<(), String> {
    validate(r, config, s, now()).await.map_err(|e| e.to_string())
}

pub async fn check(r: &AdmissionRequest<DynamicObject>) -> Result<(), String> {
    check_with(r, &WebhookConfig::default(), &state()).await
}

pub fn now() -> Timestamp {
    "2026-03-04T05:06:07Z".parse().unwrap()
}

pub fn patch_of(r: &AdmissionRequest<DynamicObject>, config: &WebhookConfig) -> Patch {
    patch_with(r, config, &state()).unwrap()
}

pub fn patch_with(
    r: &AdmissionRequest<DynamicObject>,
    config: &WebhookConfig,
    s: &MemoryState,
) -> Result<Patch, String> {
    // MemoryState answers at once, so a plain executor serves.
    futures::executor::block_on(mutate(r, config, s, now())).map_err(|e| e.to_string())
}

/// The object after the mutating webhook's patch.
pub fn patched(obj: &Value, patch: &Patch) -> Value {
    let mut out = obj.clone();
    json_patch::patch(&mut out, patch).unwrap();
    out
}

/// A scheduler-plugins PodGroup in namespace ml.
pub fn pod_group(name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "ml"}, "spec": spec,
    }))
    .unwrap()
}
