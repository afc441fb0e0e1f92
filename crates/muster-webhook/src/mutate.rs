//! The mutating rules: hold managed work back for the queue, and nothing more.

use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, Patch, PatchOperation};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, Operation};
use muster_k8s::labels::{
    GROUP, POD_GROUP_ALIAS, QUEUE, RESUME_REQUESTED, SCHEDULER_NAME, SCHEDULING_GATE, SUSPEND_REQUESTED,
};
use serde_json::{Value, json};

use crate::config::WebhookConfig;
use crate::object::{Refusal, Target, get, job_owner, target, typed, user};

/// The JSON patch for a request (empty when the object needs nothing). `now` stamps resume
/// requests. Refuses only a request whose object cannot be read.
///
/// - A Job created with `muster.dev/queue`: `spec.suspend=true`, `schedulerName: muster` in the
///   pod template.
/// - A managed Job unsuspended by anyone but muster: it stays suspended and gets
///   `muster.dev/resume-requested=<now>`; muster resumes it in its queue.
/// - A managed Job suspended by anyone but muster: `muster.dev/suspend-requested=<now>`, so that
///   muster tells the user's suspension from its own and releases the group at once.
/// - A pod created with `muster.dev/group` (or the pod-group alias, when accepted) that no Job
///   controls: muster's scheduling gate and `schedulerName: muster`; alias pods also get
///   `muster.dev/group`, and `muster.dev/queue` if they have none.
pub fn mutate(req: &AdmissionRequest<DynamicObject>, config: &WebhookConfig, now: Timestamp) -> Result<Patch, Refusal> {
    let Some(obj) = req.object.as_ref() else { return Ok(Patch(Vec::new())) };
    let ops = match (target(req), &req.operation) {
        (Target::Job, Operation::Create) => job_create(&typed(obj, "Job")?),
        (Target::Job, Operation::Update) if !config.is_muster(user(req)) => match req.old_object.as_ref() {
            Some(old) => job_user_suspension(&typed(old, "Job")?, &typed(obj, "Job")?, now),
            None => Vec::new(),
        },
        (Target::Pod, Operation::Create) => pod_create(&typed(obj, "Pod")?, config),
        _ => Vec::new(),
    };
    Ok(Patch(ops))
}

fn add(path: &[&str], value: Value) -> PatchOperation {
    // `add` replaces a member that exists, so it serves for set-or-create alike.
    PatchOperation::Add(AddOperation { path: PointerBuf::from_tokens(path.iter().copied()), value })
}

fn job_create(job: &Job) -> Vec<PatchOperation> {
    if get(job.metadata.labels.as_ref(), QUEUE).is_none() {
        return Vec::new();
    }
    // A Job without a spec or template is refused by the apiserver itself; patching it would
    // only turn that clear error into a patch failure.
    let Some(spec) = job.spec.as_ref() else { return Vec::new() };
    let Some(pod) = spec.template.spec.as_ref() else { return Vec::new() };
    let mut ops = Vec::new();
    if spec.suspend != Some(true) {
        ops.push(add(&["spec", "suspend"], json!(true)));
    }
    if pod.scheduler_name.as_deref() != Some(SCHEDULER_NAME) {
        ops.push(add(&["spec", "template", "spec", "schedulerName"], json!(SCHEDULER_NAME)));
    }
    ops
}

fn suspended(job: &Job) -> bool {
    job.spec.as_ref().and_then(|s| s.suspend) == Some(true)
}

fn job_user_suspension(old: &Job, new: &Job, now: Timestamp) -> Vec<PatchOperation> {
    let queued = [old, new].iter().any(|j| get(j.metadata.labels.as_ref(), QUEUE).is_some());
    if !queued || suspended(old) == suspended(new) || new.spec.is_none() {
        return Vec::new();
    }
    let stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
    let key = if suspended(old) { RESUME_REQUESTED } else { SUSPEND_REQUESTED };
    let annotation = match new.metadata.annotations {
        Some(_) => add(&["metadata", "annotations", key], json!(stamp)),
        None => add(&["metadata", "annotations"], json!({ key: stamp })),
    };
    if suspended(old) {
        // Unsuspending is muster's to do: the Job stays held and asks to be queued again.
        vec![add(&["spec", "suspend"], json!(true)), annotation]
    } else {
        vec![annotation]
    }
}

fn pod_create(pod: &Pod, config: &WebhookConfig) -> Vec<PatchOperation> {
    let labels = pod.metadata.labels.as_ref();
    let group = get(labels, GROUP);
    let alias = get(labels, POD_GROUP_ALIAS).filter(|_| config.accept_pod_group_alias);
    // Pods of a managed Job come from its template, which already names muster's scheduler.
    if (group.is_none() && alias.is_none()) || job_owner(pod.metadata.owner_references.as_ref()).is_some() {
        return Vec::new();
    }
    let Some(spec) = pod.spec.as_ref() else { return Vec::new() };
    let mut ops = Vec::new();
    if let (None, Some(alias)) = (group, alias) {
        ops.push(add(&["metadata", "labels", GROUP], json!(alias)));
        if get(labels, QUEUE).is_none() {
            ops.push(add(&["metadata", "labels", QUEUE], json!(config.alias_queue)));
        }
    }
    if spec.scheduler_name.as_deref() != Some(SCHEDULER_NAME) {
        ops.push(add(&["spec", "schedulerName"], json!(SCHEDULER_NAME)));
    }
    // A preset nodeName with a gate is an apiserver error; leave it to the validating rule,
    // whose message says what to do.
    if spec.node_name.as_deref().is_none_or(str::is_empty) {
        let gate = json!({ "name": SCHEDULING_GATE });
        match spec.scheduling_gates.as_ref() {
            None => ops.push(add(&["spec", "schedulingGates"], json!([gate]))),
            Some(gates) if !gates.iter().any(|g| g.name == SCHEDULING_GATE) => {
                ops.push(add(&["spec", "schedulingGates", "-"], gate))
            }
            Some(_) => {}
        }
    }
    ops
}
