//! Other projects' APIs that muster reads when their CRDs are installed: scheduler-plugins'
//! PodGroup (its `minMember` sizes a pod group named by the alias label), JobSet (one group
//! spanning every pod of its child Jobs), Kubeflow's MPIJob (one group of its launcher and
//! workers) and KubeRay's RayJob and RayCluster (one group of a Ray cluster's head and workers). muster never
//! installs these CRDs, so every reader first asks discovery whether the API is served ([`served`]) and works without it. Also Kubernetes'
//! own PodGroup (`scheduling.k8s.io/v1beta1`, 1.37 with the GenericWorkload gate), whose gang
//! `minCount` sizes the group of the pods that name it in `spec.schedulingGroup`.

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::JobTemplateSpec;
use k8s_openapi::api::core::v1::{PodSpec, PodTemplateSpec, ResourceRequirements};
use k8s_openapi::api::scheduling::v1beta1::PodGroup as NativePodGroup;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, OwnerReference};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use kube::{Client, CustomResource, Resource};
use schemars::JsonSchema;

use crate::labels;
use serde::{Deserialize, Serialize};

/// scheduler-plugins' PodGroup: `scheduling.x-k8s.io/v1alpha1`, namespaced.
pub fn pod_group_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("scheduling.x-k8s.io", "v1alpha1", "PodGroup"),
        "podgroups",
    )
}

/// The members of a pod group as its PodGroup says: `spec.minMember`, from 1 to `max`.
/// Errors name the field and the PodGroup.
pub fn pod_group_min_member(pg: &DynamicObject, max: u32) -> Result<u32, String> {
    let name = format!(
        "PodGroup {}/{}",
        pg.metadata.namespace.as_deref().unwrap_or(""),
        pg.metadata.name.as_deref().unwrap_or("")
    );
    match pg.data.pointer("/spec/minMember") {
        None => Err(format!("{name} has no spec.minMember; set it to the number of pods in the group")),
        Some(v) => match v.as_u64().and_then(|n| u32::try_from(n).ok()).filter(|n| (1..=max).contains(n)) {
            Some(n) => Ok(n),
            None => Err(format!(
                "{name} has spec.minMember {v}, not a whole number from 1 to {max}; set it to the number of pods \
                 in the group"
            )),
        },
    }
}

/// The Kubernetes PodGroup a pod names (`spec.schedulingGroup.podGroupName`).
pub fn native_pod_group_name(spec: &PodSpec) -> Option<&str> {
    spec.scheduling_group.as_ref()?.pod_group_name.as_deref().filter(|n| !n.is_empty())
}

/// The members of a pod group as its Kubernetes PodGroup says: the gang policy's `minCount`,
/// from 1 to `max`. A basic policy asks for pods placed one by one, which is not a group; the
/// error names the field and the fix.
pub fn native_pod_group_min_count(pg: &NativePodGroup, max: u32) -> Result<u32, String> {
    let name = format!(
        "PodGroup {}/{} (scheduling.k8s.io)",
        pg.metadata.namespace.as_deref().unwrap_or(""),
        pg.metadata.name.as_deref().unwrap_or("")
    );
    let Some(gang) = pg.spec.scheduling_policy.gang.as_ref() else {
        return Err(format!(
            "{name} has no spec.schedulingPolicy.gang: muster places a PodGroup's pods all at once; give it a gang \
             policy with minCount, or leave its pods to kube-scheduler (remove schedulerName and the queue label)"
        ));
    };
    u32::try_from(gang.min_count).ok().filter(|n| (1..=max).contains(n)).ok_or_else(|| {
        format!(
            "{name} has spec.schedulingPolicy.gang.minCount {}, not a whole number from 1 to {max}; set it to the \
             number of pods in the group",
            gang.min_count
        )
    })
}

/// The topology level a Kubernetes PodGroup keeps its pods within
/// (`spec.schedulingConstraints.topology`, a node label key; 1.37 with the
/// TopologyAwareWorkloadScheduling gate), as one of muster's levels; the error names the field
/// and the node labels muster places by.
pub fn native_pod_group_level(pg: &NativePodGroup) -> Result<Option<&'static str>, String> {
    let topology = pg.spec.scheduling_constraints.as_ref().and_then(|c| c.topology.as_deref()).unwrap_or_default();
    let Some(first) = topology.first() else { return Ok(None) };
    let field = "spec.schedulingConstraints.topology";
    if topology.len() > 1 {
        return Err(format!("{field}: muster keeps a group within one topology domain; keep one constraint"));
    }
    match labels::level_of_node_label(&first.key) {
        Some(level) => Ok(Some(level)),
        None => Err(labels::unknown_node_label(&format!("{field}[0].key"), &first.key)),
    }
}

/// A JobSet (`jobset.x-k8s.io/v1alpha2`), as far as muster reads it: the replicated Jobs, the
/// suspension muster holds it back with, and whether it finished. Only read and merge-patched,
/// never written whole, so the fields muster does not know are kept.
#[derive(CustomResource, Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[kube(group = "jobset.x-k8s.io", version = "v1alpha2", kind = "JobSet", namespaced, status = "JobSetStatus")]
#[serde(rename_all = "camelCase")]
pub struct JobSetSpec {
    #[serde(default)]
    pub replicated_jobs: Vec<ReplicatedJob>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspend: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct ReplicatedJob {
    pub name: String,
    /// Child Jobs made from the template (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    pub template: JobTemplateSpec,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct JobSetStatus {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// Labels the JobSet controller puts on child Jobs and (through their template) their pods.
pub const JOBSET_NAME_LABEL: &str = "jobset.sigs.k8s.io/jobset-name";
pub const REPLICATED_JOB_LABEL: &str = "jobset.sigs.k8s.io/replicatedjob-name";
pub const JOB_INDEX_LABEL: &str = "jobset.sigs.k8s.io/job-index";

impl ReplicatedJob {
    pub fn replicas(&self) -> i64 {
        self.replicas.map_or(1, i64::from)
    }
}

/// The JobSet that controls an object (its controller ownerReference), by name.
pub fn jobset_owner(refs: Option<&Vec<OwnerReference>>) -> Option<&OwnerReference> {
    refs?.iter().find(|r| {
        r.controller == Some(true)
            && r.kind == JobSet::kind(&())
            && r.api_version.split('/').next() == Some(JobSet::group(&()).as_ref())
    })
}

/// An MPIJob (`kubeflow.org/v2beta1`, Kubeflow's mpi-operator), as far as muster reads it: the
/// launcher and worker replica specs, the suspension muster holds it back with (`spec.runPolicy`),
/// and whether it finished. Only read and merge-patched, so unknown fields are kept.
#[derive(CustomResource, Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[kube(group = "kubeflow.org", version = "v2beta1", kind = "MPIJob", namespaced, status = "MpiJobStatus")]
#[serde(rename_all = "camelCase")]
pub struct MpiJobSpec {
    /// By replica type: `Launcher` (one pod, run by a Job the operator creates) and `Worker`.
    #[serde(default)]
    pub mpi_replica_specs: BTreeMap<String, MpiReplicaSpec>,
    #[serde(default)]
    pub run_policy: MpiRunPolicy,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct MpiReplicaSpec {
    /// Pods of the replica type (the operator's defaults: 1 launcher, 0 workers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    #[serde(default)]
    pub template: PodTemplateSpec,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct MpiRunPolicy {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspend: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_deadline_seconds: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct MpiJobStatus {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<MpiJobCondition>,
}

/// The operator's condition (its own type, not metav1.Condition): `Succeeded`, `Failed`, ...
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct MpiJobCondition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
}

/// Labels the mpi-operator puts on an MPIJob's pods: the MPIJob, the role (`launcher` or
/// `worker`) and a worker's index.
pub const MPI_JOB_NAME_LABEL: &str = "training.kubeflow.org/job-name";
pub const MPI_JOB_ROLE_LABEL: &str = "training.kubeflow.org/job-role";
pub const MPI_REPLICA_INDEX_LABEL: &str = "training.kubeflow.org/replica-index";

/// A RayJob (`ray.io/v1`, KubeRay), as far as muster reads it: the Ray cluster it runs on (a
/// head and worker groups), the suspension muster holds it back with, and whether it finished.
#[derive(CustomResource, Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[kube(group = "ray.io", version = "v1", kind = "RayJob", namespaced, status = "RayJobStatus")]
#[serde(rename_all = "camelCase")]
pub struct RayJobSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ray_cluster_spec: Option<RayClusterSpec>,
    /// Run on an existing cluster instead (muster then has no pods to hold).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub cluster_selector: BTreeMap<String, String>,
    #[serde(default)]
    pub suspend: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_deadline_seconds: Option<i32>,
}

/// A Kubeflow Trainer TrainJob (`trainer.kubeflow.org/v1alpha1`), as far as muster reads it: the
/// suspension the trainer mirrors onto the JobSet it makes (of the same name, which it controls),
/// and the labels it puts on that JobSet.
#[derive(CustomResource, Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[kube(group = "trainer.kubeflow.org", version = "v1alpha1", kind = "TrainJob", namespaced)]
#[serde(rename_all = "camelCase")]
pub struct TrainJobSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspend: Option<bool>,
    /// Labels of the JobSet the trainer makes (not of its Jobs or pods).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
    /// The rest (the runtime, the trainer's settings, overrides): muster only tells whether it
    /// changed.
    #[serde(flatten)]
    pub rest: BTreeMap<String, serde_json::Value>,
}

/// A RayCluster (`ray.io/v1`, KubeRay) on its own, as far as muster reads it: a head and worker
/// groups, held with `spec.suspend`. (A RayJob's or RayService's clusters are theirs.)
#[derive(CustomResource, Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[kube(group = "ray.io", version = "v1", kind = "RayCluster", namespaced)]
#[serde(rename_all = "camelCase")]
pub struct RayClusterSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspend: Option<bool>,
    pub head_group_spec: RayHeadGroupSpec,
    #[serde(default)]
    pub worker_group_specs: Vec<RayWorkerGroupSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_in_tree_autoscaling: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autoscaler_options: Option<RayAutoscalerOptions>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct RayAutoscalerOptions {
    /// The autoscaler container's resources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct RayHeadGroupSpec {
    #[serde(default)]
    pub template: PodTemplateSpec,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RayWorkerGroupSpec {
    pub group_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_replicas: Option<i32>,
    /// Pods per replica (multi-host workers; default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_of_hosts: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspend: Option<bool>,
    #[serde(default)]
    pub template: PodTemplateSpec,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RayJobStatus {
    /// `Complete` or `Failed` once it ended (`Running`, `Suspended`, ... before).
    #[serde(default)]
    pub job_deployment_status: String,
    /// The Ray job's own status: `SUCCEEDED`, `FAILED`, `STOPPED`, ...
    #[serde(default)]
    pub job_status: String,
}

/// Labels KubeRay puts on a Ray cluster's pods: the cluster, the node type (`head` or `worker`)
/// and the group (`headgroup` for the head).
pub const RAY_CLUSTER_LABEL: &str = "ray.io/cluster";
pub const RAY_NODE_TYPE_LABEL: &str = "ray.io/node-type";
pub const RAY_GROUP_LABEL: &str = "ray.io/group";

/// Whether the API server serves `resource` (its CRD is installed and established).
pub async fn served(client: &Client, resource: &ApiResource) -> Result<bool, kube::Error> {
    match client.list_api_group_resources(&resource.api_version).await {
        Ok(list) => Ok(list.resources.iter().any(|r| r.name == resource.plural)),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(false),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::Workload;
    use serde_json::json;

    fn pg(spec: serde_json::Value) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": "ring", "namespace": "ml"}, "spec": spec,
        }))
        .unwrap()
    }

    #[test]
    fn pod_group_min_member_is_read_and_bad_values_name_the_field() {
        assert_eq!(pod_group_min_member(&pg(json!({"minMember": 4, "scheduleTimeoutSeconds": 10})), 10), Ok(4));
        assert_eq!(
            pod_group_min_member(&pg(json!({})), 10).unwrap_err(),
            "PodGroup ml/ring has no spec.minMember; set it to the number of pods in the group"
        );
        for bad in [json!(0), json!(11), json!("4"), json!(-1)] {
            let e = pod_group_min_member(&pg(json!({"minMember": bad})), 10).unwrap_err();
            assert!(e.starts_with(&format!("PodGroup ml/ring has spec.minMember {bad}, not a whole number")), "{e}");
        }
        let r = pod_group_resource();
        assert_eq!(
            (r.api_version.as_str(), r.plural.as_str(), r.kind.as_str()),
            ("scheduling.x-k8s.io/v1alpha1", "podgroups", "PodGroup")
        );
    }

    #[test]
    fn a_native_pod_group_is_sized_by_its_gang_policy_and_a_basic_one_is_refused() {
        let native = |policy: serde_json::Value| -> NativePodGroup {
            serde_json::from_value(json!({
                "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
                "metadata": {"name": "ring", "namespace": "ml"}, "spec": {"schedulingPolicy": policy},
            }))
            .unwrap()
        };
        assert_eq!(native_pod_group_min_count(&native(json!({"gang": {"minCount": 4}})), 10), Ok(4));
        let e = native_pod_group_min_count(&native(json!({"basic": {}})), 10).unwrap_err();
        assert!(e.starts_with("PodGroup ml/ring (scheduling.k8s.io) has no spec.schedulingPolicy.gang"), "{e}");
        let e = native_pod_group_min_count(&native(json!({"gang": {"minCount": 11}})), 10).unwrap_err();
        assert!(e.contains("minCount 11, not a whole number from 1 to 10"), "{e}");
        let pod: PodSpec =
            serde_json::from_value(json!({"containers": [], "schedulingGroup": {"podGroupName": "ring"}})).unwrap();
        assert_eq!(native_pod_group_name(&pod), Some("ring"));
        assert_eq!(native_pod_group_name(&PodSpec::default()), None);
        // Its topology constraint, a node label key, as muster's level.
        let constrained = |keys: &[&str]| {
            let mut pg = native(json!({"gang": {"minCount": 4}}));
            let topology: Vec<_> = keys.iter().map(|k| json!({"key": k})).collect();
            pg.spec.scheduling_constraints = Some(serde_json::from_value(json!({"topology": topology})).unwrap());
            pg
        };
        assert_eq!(native_pod_group_level(&native(json!({"gang": {"minCount": 4}}))), Ok(None));
        assert_eq!(native_pod_group_level(&constrained(&["topology.kubernetes.io/zone"])), Ok(Some("zone")));
        let e = native_pod_group_level(&constrained(&["kubernetes.io/hostname"])).unwrap_err();
        assert!(e.starts_with("spec.schedulingConstraints.topology[0].key: \"kubernetes.io/hostname\" is no"), "{e}");
        let e = native_pod_group_level(&constrained(&["muster.dev/rack", "muster.dev/block"])).unwrap_err();
        assert!(e.contains("keep one constraint"), "{e}");
    }

    #[test]
    fn jobsets_read_replicas_finish_and_ownership() {
        let js: JobSet = serde_json::from_value(json!({
            "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": "train", "namespace": "ml"},
            "spec": {"suspend": true, "network": {"enableDNSHostnames": true}, "replicatedJobs": [
                {"name": "workers", "replicas": 2, "template": {"spec": {"parallelism": 4, "completions": 3,
                    "template": {"spec": {"containers": []}}}}},
                {"name": "driver", "template": {"spec": {"template": {"spec": {"containers": []}}}}}]},
            "status": {"conditions": [
                {"type": "Completed", "status": "True", "reason": "r", "message": "m", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
        }))
        .unwrap();
        let rj = &js.spec.replicated_jobs;
        assert_eq!((rj[0].replicas(), rj[1].replicas()), (2, 1));
        assert_eq!((js.held(), js.finished()), (true, Some(true)));
        let owner = |kind: &str, api: &str| {
            vec![OwnerReference {
                api_version: api.into(),
                kind: kind.into(),
                name: "train".into(),
                uid: "u".into(),
                controller: Some(true),
                block_owner_deletion: None,
            }]
        };
        assert!(jobset_owner(Some(&owner("JobSet", "jobset.x-k8s.io/v1alpha2"))).is_some());
        assert!(jobset_owner(Some(&owner("JobSet", "example.com/v1"))).is_none());
        assert!(jobset_owner(Some(&owner("Job", "batch/v1"))).is_none());
    }
}
