//! LeaderWorkerSet (`leaderworkerset.x-k8s.io/v1`, sigs.k8s.io/lws): each replica group, a
//! leader and its `size - 1` workers, is one gang.
//!
//! A LeaderWorkerSet cannot be suspended, so muster holds its pods instead, as it holds a plain
//! pod group's: the webhook copies the LeaderWorkerSet's queue label into its pod templates, and
//! each pod gets muster's scheduling gate and joins the group named after its leader pod
//! (`<lws>-<group index>`, which is also the name of the workers' StatefulSet), sized by the
//! `leaderworkerset.sigs.k8s.io/size` annotation LWS puts on every pod. The leader and its workers
//! are two member sets of the group (label `muster.dev/set`: `leader`, `worker`), so the leader
//! template may ask for other resources and nodes than the workers'; [`check`] refuses a
//! LeaderWorkerSet whose pods could never all join.

use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::CustomResource;
use muster_graph::jobspec::MAX_MEMBERS;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::labels;
use crate::pod::{placement, requests};
use crate::workload::place::{controller, label};

/// The API group, as admission requests name it.
pub const API_GROUP: &str = "leaderworkerset.x-k8s.io";
/// LWS's labels and annotations on the pods it makes.
pub const NAME_LABEL: &str = "leaderworkerset.sigs.k8s.io/name";
pub const WORKER_INDEX_LABEL: &str = "leaderworkerset.sigs.k8s.io/worker-index";
pub const SIZE_ANNOTATION: &str = "leaderworkerset.sigs.k8s.io/size";
pub const LEADER_NAME_ANNOTATION: &str = "leaderworkerset.sigs.k8s.io/leader-name";
/// On a LeaderWorkerSet: the node label whose domain each group keeps to itself (LWS then waits
/// for a leader to be scheduled before it creates the workers).
pub const EXCLUSIVE_TOPOLOGY_ANNOTATION: &str = "leaderworkerset.sigs.k8s.io/exclusive-topology";
/// On a LeaderWorkerSet with a `subGroupPolicy`: the node label whose domain each sub-group keeps
/// to itself (LWS's webhook then gives every pod required pod affinity and anti-affinity).
pub const SUBGROUP_EXCLUSIVE_TOPOLOGY_ANNOTATION: &str = "leaderworkerset.sigs.k8s.io/subgroup-exclusive-topology";

/// The startup policy that creates the workers only once the leader is ready: a held leader
/// never is before its workers exist.
const LEADER_READY: &str = "LeaderReady";

/// A LeaderWorkerSet, as far as muster reads it.
#[derive(CustomResource, Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[kube(group = "leaderworkerset.x-k8s.io", version = "v1", kind = "LeaderWorkerSet", namespaced)]
#[serde(rename_all = "camelCase")]
pub struct LeaderWorkerSetSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    #[serde(default)]
    pub leader_worker_template: LeaderWorkerTemplate,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub startup_policy: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LeaderWorkerTemplate {
    /// Pods per group, the leader included (LWS's default: 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<i32>,
    /// The leader's template; the worker template when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader_template: Option<PodTemplateSpec>,
    #[serde(default)]
    pub worker_template: PodTemplateSpec,
}

/// Where the templates are, as messages and patches name them.
pub const LEADER_TEMPLATE_FIELD: &str = "spec.leaderWorkerTemplate.leaderTemplate";
pub const WORKER_TEMPLATE_FIELD: &str = "spec.leaderWorkerTemplate.workerTemplate";
pub const SIZE_FIELD: &str = "spec.leaderWorkerTemplate.size";

impl LeaderWorkerSet {
    /// Pods per group.
    pub fn size(&self) -> i64 {
        self.spec.leader_worker_template.size.map_or(1, i64::from)
    }

    /// Its pod templates with their fields: the leader's (when it has its own) and the workers'.
    pub fn templates(&self) -> Vec<(&'static str, &PodTemplateSpec)> {
        let t = &self.spec.leader_worker_template;
        let leader = t.leader_template.as_ref().map(|l| (LEADER_TEMPLATE_FIELD, l));
        leader.into_iter().chain([(WORKER_TEMPLATE_FIELD, &t.worker_template)]).collect()
    }
}

/// The gang a pod of a LeaderWorkerSet belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodGang {
    /// The group's name: its leader pod's.
    pub group: String,
    pub size: u32,
    /// Its member set: [`LEADER_SET`] or [`WORKER_SET`].
    pub set: &'static str,
}

/// The member sets of a LeaderWorkerSet's group (label [`crate::labels::SET`]): its leader may
/// ask for other resources or nodes than its workers.
pub const LEADER_SET: &str = "leader";
pub const WORKER_SET: &str = "worker";

/// The gang of a pod that a LeaderWorkerSet's StatefulSets made (LWS's name label and a
/// StatefulSet controlling it), or what is wrong with its LWS metadata; None for other pods.
pub fn pod_gang(pod: &ObjectMeta) -> Option<Result<PodGang, String>> {
    label(pod, NAME_LABEL)?;
    let owner = controller(pod)?;
    if owner.kind != "StatefulSet" || !owner.api_version.starts_with("apps/") {
        return None;
    }
    let annotation = |k: &str| pod.annotations.as_ref().and_then(|a| a.get(k));
    let leader = label(pod, WORKER_INDEX_LABEL) == Some("0");
    let group = if leader { pod.name.clone() } else { annotation(LEADER_NAME_ANNOTATION).cloned() };
    let set = if leader { LEADER_SET } else { WORKER_SET };
    let Some(group) = group.filter(|g| !g.is_empty()) else {
        return Some(Err(format!(
            "metadata.annotations[{LEADER_NAME_ANNOTATION}]: a worker pod of a LeaderWorkerSet names no leader, so \
             muster cannot tell its group; its pods come from the LeaderWorkerSet controller, which sets it"
        )));
    };
    let size = annotation(SIZE_ANNOTATION).map(|v| v.trim().parse::<u32>());
    Some(match size {
        Some(Ok(size)) if (1..=MAX_MEMBERS).contains(&size) => Ok(PodGang { group, size, set }),
        _ => Err(format!(
            "metadata.annotations[{SIZE_ANNOTATION}]: missing or not a whole number from 1 to {MAX_MEMBERS}; the \
             LeaderWorkerSet controller sets it to spec.leaderWorkerTemplate.size"
        )),
    })
}

/// What muster needs of a queued LeaderWorkerSet, each problem naming its field; empty when all
/// its groups can be placed.
pub fn check(lws: &LeaderWorkerSet) -> Vec<String> {
    let mut errors = Vec::new();
    let size = lws.size();
    if !(1..=i64::from(MAX_MEMBERS)).contains(&size) {
        errors.push(format!(
            "{SIZE_FIELD}: {size} is not a group size muster can place (1 to {MAX_MEMBERS} pods); set the pods per \
             group within it"
        ));
    }
    if lws.metadata.annotations.as_ref().is_some_and(|a| a.contains_key(EXCLUSIVE_TOPOLOGY_ANNOTATION)) {
        errors.push(format!(
            "metadata.annotations[{EXCLUSIVE_TOPOLOGY_ANNOTATION}]: LWS then creates a group's workers only once its \
             leader is scheduled, but muster starts a group only when all its pods exist, so neither would ever \
             start; remove it, and keep each group within one domain with the annotation {}: <level> (zone, block \
             or rack) in both pod templates",
            labels::REQUIRED_TOPOLOGY
        ));
    }
    if lws.metadata.annotations.as_ref().is_some_and(|a| a.contains_key(SUBGROUP_EXCLUSIVE_TOPOLOGY_ANNOTATION)) {
        errors.push(format!(
            "metadata.annotations[{SUBGROUP_EXCLUSIVE_TOPOLOGY_ANNOTATION}]: LWS then gives every pod required pod \
             affinity and anti-affinity, which muster does not read, so their pods would be refused; remove it, and \
             keep each group within one domain with the annotation {}: <level> (zone, block or rack) in both pod \
             templates",
            labels::REQUIRED_TOPOLOGY
        ));
    }
    if size > 1 && lws.spec.startup_policy.as_deref() == Some(LEADER_READY) {
        errors.push(format!(
            "spec.startupPolicy: {LEADER_READY} creates the workers only once the leader is ready, but muster starts \
             a group only when all its pods exist, so neither would ever start; use LeaderCreated (the default)"
        ));
    }
    let mut priorities = Vec::new();
    for (field, template) in lws.templates() {
        let Some(spec) = template.spec.as_ref() else {
            errors.push(format!("{field}.spec is missing"));
            continue;
        };
        if let Some(node) = spec.node_name.as_deref().filter(|n| !n.is_empty()) {
            errors.push(format!(
                "{field}.spec.nodeName: a pod of a queued LeaderWorkerSet cannot choose its node ({node}): muster \
                 places every pod of a group at once; remove spec.nodeName"
            ));
        }
        let spec_field = format!("{field}.spec");
        if let Err(e) = requests(spec) {
            errors.push(e.under(&spec_field).to_string());
        }
        if let Err(e) = placement(spec, &spec_field) {
            errors.push(e);
        }
        if spec.resource_claims.as_ref().is_some_and(|c| !c.is_empty()) {
            errors.push(format!(
                "{spec_field}.resourceClaims: muster allocates the device claims of Jobs, JobSets, MPIJobs, RayJobs \
                 and RayClusters, not of a LeaderWorkerSet's pods yet; remove the claims, or run the \
                 LeaderWorkerSet without muster (no muster.dev/queue label)"
            ));
        }
        priorities.push(spec.priority_class_name.clone());
    }
    // The leader and its workers are sets of one group, which may ask and run differently; a
    // group starts at one priority.
    if let [leader, worker] = priorities.as_slice()
        && leader != worker
    {
        errors.push(format!(
            "{LEADER_TEMPLATE_FIELD}.spec.priorityClassName: differs from {WORKER_TEMPLATE_FIELD}.spec's; muster \
             starts a group's pods at once at one priority, so give both templates the same one"
        ));
    }
    errors
}

/// What a group's pods ask, as (pods, one pod's requests): the leader, then its workers. None
/// where a template's requests cannot be counted ([`check`] names it).
pub fn group_asks(lws: &LeaderWorkerSet) -> Option<Vec<(u64, crate::pod::Amounts)>> {
    let t = &lws.spec.leader_worker_template;
    let asks = |template: &PodTemplateSpec| template.spec.as_ref().and_then(|s| requests(s).ok());
    let worker = asks(&t.worker_template)?;
    let leader = match &t.leader_template {
        Some(l) => asks(l)?,
        None => worker.clone(),
    };
    let workers = u64::try_from(lws.size()).ok()?.checked_sub(1)?;
    Some(vec![(1, leader), (workers, worker)])
}

#[cfg(test)]
mod tests;
