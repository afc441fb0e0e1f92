//! Small helpers over admission requests and the objects in them.

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::core::DynamicObject;
use kube::core::admission::AdmissionRequest;
use muster_k8s::workload::{HELD_KINDS, Kind, job, trainjob};
use serde::de::DeserializeOwned;

/// Why a request is refused: one or more messages, each naming a field and what to change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub messages: Vec<String>,
}

impl Refusal {
    pub fn new(message: impl Into<String>) -> Self {
        Refusal { messages: vec![message.into()] }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.messages.join("; "))
    }
}

impl std::error::Error for Refusal {}

/// The kinds of object the webhook has rules for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Target {
    Job,
    /// A held kind other than the Job (a JobSet, an MPIJob).
    Held(&'static Kind),
    /// A LeaderWorkerSet: never held itself; its pods are.
    LeaderWorkerSet,
    /// A TrainJob: holds the JobSet the trainer makes for it, which is the group.
    TrainJob,
    Pod,
    Group,
    Other,
}

pub(crate) fn target(req: &AdmissionRequest<DynamicObject>) -> Target {
    // Subresources (status, binding, scale) are not the object's metadata or spec.
    if req.sub_resource.as_deref().is_some_and(|s| !s.is_empty()) {
        return Target::Other;
    }
    let held = HELD_KINDS.into_iter().find(|k| (k.group, k.kind) == (req.kind.group.as_str(), req.kind.kind.as_str()));
    match (held, req.kind.group.as_str(), req.kind.kind.as_str()) {
        (Some(k), ..) if *k == job::KIND => Target::Job,
        (Some(k), ..) => Target::Held(k),
        (None, "", "Pod") => Target::Pod,
        (None, muster_k8s::lws::API_GROUP, "LeaderWorkerSet") => Target::LeaderWorkerSet,
        (None, group, "TrainJob") if group == trainjob::KIND.group => Target::TrainJob,
        (None, muster_k8s::API_GROUP, "Group") => Target::Group,
        _ => Target::Other,
    }
}

/// The review's objects must be in the namespace it is for: the rules read the cluster only in
/// that namespace, so that a review (forged or not) learns nothing of another. The apiserver
/// always sends them so (it sets an object's namespace from the request's before admission).
pub(crate) fn one_namespace(req: &AdmissionRequest<DynamicObject>) -> Result<(), Refusal> {
    let ns = req.namespace.as_deref().unwrap_or("");
    let objects = [req.object.as_ref(), req.old_object.as_ref()];
    match objects.into_iter().flatten().filter_map(|o| o.metadata.namespace.as_deref()).find(|n| *n != ns) {
        Some(other) => Err(Refusal::new(format!(
            "metadata.namespace: the object is in namespace {other:?}, but the review is for namespace {ns:?}; \
             the webhook answers only reviews the apiserver sends"
        ))),
        None => Ok(()),
    }
}

pub(crate) fn user(req: &AdmissionRequest<DynamicObject>) -> &str {
    req.user_info.username.as_deref().unwrap_or("")
}

/// The object as a typed Kubernetes value (the apiserver has decoded and defaulted it already,
/// so this fails only on a request that is not what its kind says).
pub(crate) fn typed<T: DeserializeOwned>(obj: &DynamicObject, kind: &str) -> Result<T, Refusal> {
    serde_json::to_value(obj)
        .and_then(serde_json::from_value)
        .map_err(|e| Refusal::new(format!("the webhook cannot read this {kind}: {e}")))
}

/// The controlling owner reference if it is a Job.
pub(crate) fn job_owner(refs: Option<&Vec<OwnerReference>>) -> Option<&OwnerReference> {
    refs?.iter().find(|r| r.controller == Some(true) && r.kind == "Job" && r.api_version.starts_with("batch/"))
}

/// The PodGroup an alias pod names, when the alias is accepted and the pod's group comes from it
/// (no `muster.dev/group`, or the same name).
pub(crate) fn alias_group<'a>(
    labels: Option<&'a BTreeMap<String, String>>,
    config: &crate::config::WebhookConfig,
) -> Option<&'a str> {
    let alias = get(labels, muster_k8s::labels::POD_GROUP_ALIAS).filter(|_| config.accept_pod_group_alias)?;
    get(labels, muster_k8s::labels::GROUP).is_none_or(|g| g == alias).then_some(alias)
}

/// Where a pod names its Kubernetes PodGroup.
pub(crate) const NATIVE_GROUP_FIELD: &str = "spec.schedulingGroup.podGroupName";

/// The Kubernetes PodGroup a queued pod names: muster gang-schedules it as the pod group of that
/// name. Without the queue label the pod is kube-scheduler's (its own gang scheduling).
pub(crate) fn native_group(pod: &k8s_openapi::api::core::v1::Pod) -> Option<&str> {
    get(pod.metadata.labels.as_ref(), muster_k8s::labels::QUEUE)?;
    muster_k8s::external::native_pod_group_name(pod.spec.as_ref()?)
}

/// The gang of a queued pod that a LeaderWorkerSet made (a bad size or leader reads as none:
/// the validating rules name it).
pub(crate) fn queued_gang(pod: &k8s_openapi::api::core::v1::Pod) -> Option<muster_k8s::lws::PodGang> {
    get(pod.metadata.labels.as_ref(), muster_k8s::labels::QUEUE)?;
    muster_k8s::lws::pod_gang(&pod.metadata)?.ok()
}

pub(crate) fn label_field(key: &str) -> String {
    format!("metadata.labels[{key}]")
}

pub(crate) fn get<'a>(map: Option<&'a BTreeMap<String, String>>, key: &str) -> Option<&'a str> {
    map.and_then(|m| m.get(key)).map(String::as_str)
}

/// Whether `s` can name a Kubernetes object (a DNS subdomain: lowercase letters, digits, '-' and
/// '.', starting and ending alphanumeric, at most 253 characters).
pub(crate) fn is_object_name(s: &str) -> bool {
    let alnum = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    !s.is_empty()
        && s.len() <= 253
        && s.bytes().all(|c| alnum(c) || c == b'-' || c == b'.')
        && s.as_bytes().first().copied().is_some_and(alnum)
        && s.as_bytes().last().copied().is_some_and(alnum)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_names() {
        for ok in ["a", "train-1", "a.b"] {
            assert!(is_object_name(ok), "{ok}");
        }
        for bad in ["", "A", "-a", "a-", "a_b", &"a".repeat(254)] {
            assert!(!is_object_name(bad), "{bad}");
        }
    }
}
