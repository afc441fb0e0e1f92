//! RayJob (`ray.io/v1`, KubeRay): one group of its Ray cluster's head and every worker, held with
//! `spec.suspend`. While it is suspended KubeRay creates no Ray cluster; released, it creates a
//! RayCluster named `<rayjob>-<5 random characters>` that it controls, whose pods are the group.
//!
//! Worker groups count at `replicas` (KubeRay's own default: `minReplicas`) times `numOfHosts`
//! pods. Autoscaling past that is not placed by muster: the group is what the RayJob asks at start.
//!
//! KubeRay adds containers to the pods beyond their templates, and a member must hold what the
//! pod really asks: every worker gets an init container that waits for the head (`wait-gcs-ready`,
//! 200m cpu and 256Mi memory, unless the operator runs with ENABLE_INIT_CONTAINER_INJECTION=false:
//! then muster holds that much too many), and with in-tree autoscaling the head gets the
//! autoscaler (500m cpu and 512Mi memory unless `autoscalerOptions.resources` says otherwise).

use k8s_openapi::api::core::v1::{Container, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use super::place::{is_kind, label};
use super::{AddedContainers, Kind, PodPlace, PodSet, Workload};
use crate::external::{RAY_CLUSTER_LABEL, RAY_GROUP_LABEL, RAY_NODE_TYPE_LABEL, RayClusterSpec, RayJob};
use crate::pod::{Amounts, requests};

pub const KIND: Kind = Kind {
    group: "ray.io",
    version: "v1",
    kind: "RayJob",
    plural: "rayjobs",
    verbs: &["get", "list", "watch", "patch"],
    why: "one group each of its Ray cluster's head and workers (when their CRD is installed), suspended by the \
          webhook and resumed (or suspended again on eviction) by muster",
    hold_field: "spec.suspend",
    place_of,
};

/// The RayCluster kind, which controls a RayJob's pods.
const RAY_CLUSTER: Kind = Kind { kind: "RayCluster", plural: "rayclusters", ..KIND };

/// The head's group, as KubeRay labels its pod.
const HEAD_GROUP: &str = "headgroup";

const MI: u64 = 1 << 20;

/// KubeRay's worker init container: (millicores, bytes).
const WAIT_GCS_READY: (u64, u64) = (200, 256 * MI);

/// KubeRay's autoscaler sidecar on the head, when `autoscalerOptions.resources` is not set.
const AUTOSCALER: (u64, u64) = (500, 512 * MI);

fn cpu_memory((cpu, memory): (u64, u64)) -> Amounts {
    Amounts::from([("cpu".to_string(), cpu), ("memory".to_string(), memory)])
}

/// A pod of the Ray cluster a RayJob made: controlled by a RayCluster named after the RayJob
/// (`<rayjob>-<5 characters>`) and labelled with that cluster by KubeRay. Workers carry no index:
/// any free member of their group's set.
fn place_of(pod: &ObjectMeta, owner: &OwnerReference) -> Option<PodPlace> {
    if !is_kind(owner, &RAY_CLUSTER) || label(pod, RAY_CLUSTER_LABEL) != Some(owner.name.as_str()) {
        return None;
    }
    let (rayjob, suffix) = owner.name.rsplit_once('-')?;
    if suffix.len() != 5 || !suffix.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()) {
        return None;
    }
    let set = match label(pod, RAY_NODE_TYPE_LABEL)? {
        "head" => HEAD_GROUP.to_string(),
        "worker" => label(pod, RAY_GROUP_LABEL)?.to_string(),
        _ => return None,
    };
    let index = (set == HEAD_GROUP).then_some(0);
    Some(PodPlace { workload: rayjob.to_string(), set, child: 0, index })
}

/// The autoscaler KubeRay adds to the head with in-tree autoscaling: its own resources if the
/// RayJob sets them, else KubeRay's default.
fn autoscaler(cluster: &RayClusterSpec) -> Amounts {
    if cluster.enable_in_tree_autoscaling != Some(true) {
        return Amounts::new();
    }
    match cluster.autoscaler_options.as_ref().and_then(|o| o.resources.clone()) {
        Some(resources) => {
            let container = Container { resources: Some(resources), ..Container::default() };
            requests(&PodSpec { containers: vec![container], ..PodSpec::default() })
        }
        None => cpu_memory(AUTOSCALER),
    }
}

impl Workload for RayJob {
    fn kind() -> &'static Kind {
        &KIND
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn held(&self) -> bool {
        self.spec.suspend
    }

    /// `Complete` with the Ray job SUCCEEDED is a success; `Complete` otherwise, or `Failed`, not.
    fn finished(&self) -> Option<bool> {
        let status = self.status.as_ref()?;
        match status.job_deployment_status.as_str() {
            "Complete" => Some(status.job_status == "SUCCEEDED"),
            "Failed" => Some(false),
            _ => None,
        }
    }

    /// The head (one pod) and each worker group, in the RayJob's order.
    fn pod_sets(&self) -> Result<Vec<PodSet<'_>>, String> {
        if !self.spec.cluster_selector.is_empty() {
            return Err("spec.clusterSelector: the RayJob runs on an existing Ray cluster, whose pods muster does \
                        not hold; give it a spec.rayClusterSpec instead, or remove the queue label"
                .into());
        }
        let cluster = self.spec.ray_cluster_spec.as_ref().ok_or("spec.rayClusterSpec is missing")?;
        let head = cluster.head_group_spec.template.spec.as_ref();
        let head = head.ok_or("spec.rayClusterSpec.headGroupSpec.template.spec is missing")?;
        let mut sets = vec![PodSet {
            field: "spec.rayClusterSpec.headGroupSpec".into(),
            template_field: "spec.rayClusterSpec.headGroupSpec.template.spec".into(),
            name: HEAD_GROUP.into(),
            children: 1,
            pods: 1,
            template: head,
            copied_metadata: vec![(
                "spec.rayClusterSpec.headGroupSpec.template.metadata".into(),
                cluster.head_group_spec.template.metadata.as_ref(),
            )],
            added: AddedContainers { init: Amounts::new(), sidecars: autoscaler(cluster) },
        }];
        for (i, group) in cluster.worker_group_specs.iter().enumerate() {
            let field = format!("spec.rayClusterSpec.workerGroupSpecs[{i}]");
            let template = group.template.spec.as_ref().ok_or(format!("{field}.template.spec is missing"))?;
            let replicas = match group.suspend {
                Some(true) => 0,
                _ => group.replicas.or(group.min_replicas).map_or(0, i64::from),
            };
            sets.push(PodSet {
                template_field: format!("{field}.template.spec"),
                name: group.group_name.clone(),
                children: replicas,
                pods: group.num_of_hosts.map_or(1, i64::from),
                template,
                copied_metadata: vec![(format!("{field}.template.metadata"), group.template.metadata.as_ref())],
                added: AddedContainers { init: cpu_memory(WAIT_GCS_READY), sidecars: Amounts::new() },
                field,
            });
        }
        Ok(sets)
    }

    fn size_field() -> &'static str {
        "spec.rayClusterSpec.workerGroupSpecs"
    }

    fn elastic() -> bool {
        false
    }
}
