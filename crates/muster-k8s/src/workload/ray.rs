//! The Ray cluster that a RayJob and a RayCluster describe alike (KubeRay's `RayClusterSpec`):
//! its pod sets, a head and worker groups, and where a pod of it stands.
//!
//! Worker groups count at `replicas` (KubeRay's own default: `minReplicas`) times `numOfHosts`
//! pods. Autoscaling past that is not placed by muster: the group is what the cluster asks at start.
//!
//! KubeRay adds containers to the pods beyond their templates, and a member must hold what the
//! pod really asks: every worker gets an init container that waits for the head (`wait-gcs-ready`,
//! 200m cpu and 256Mi memory, unless the operator runs with ENABLE_INIT_CONTAINER_INJECTION=false:
//! then muster holds that much too many), and with in-tree autoscaling the head gets the
//! autoscaler (500m cpu and 512Mi memory unless `autoscalerOptions.resources` says otherwise).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::place::label;
use super::{AddedContainers, PodSet};
use crate::external::{RAY_GROUP_LABEL, RAY_NODE_TYPE_LABEL, RayClusterSpec};
use crate::pod::{Amounts, container_requests};

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

/// The autoscaler KubeRay adds to the head with in-tree autoscaling: its own resources if the
/// cluster sets them, else KubeRay's default.
fn autoscaler(cluster: &RayClusterSpec, at: &str) -> Result<Amounts, String> {
    if cluster.enable_in_tree_autoscaling != Some(true) {
        return Ok(Amounts::new());
    }
    match cluster.autoscaler_options.as_ref().and_then(|o| o.resources.as_ref()) {
        Some(resources) => {
            container_requests(Some(resources), &format!("{at}.autoscalerOptions.resources")).map_err(|e| e.to_string())
        }
        None => Ok(cpu_memory(AUTOSCALER)),
    }
}

/// The head (one pod) and each worker group, in the cluster's order; `at` is the path of the
/// cluster's spec in its object (`spec.rayClusterSpec` in a RayJob, `spec` in a RayCluster).
pub(super) fn pod_sets<'a>(cluster: &'a RayClusterSpec, at: &str) -> Result<Vec<PodSet<'a>>, String> {
    let head = cluster.head_group_spec.template.spec.as_ref();
    let head = head.ok_or(format!("{at}.headGroupSpec.template.spec is missing"))?;
    let mut sets = vec![PodSet {
        field: format!("{at}.headGroupSpec"),
        template_field: format!("{at}.headGroupSpec.template.spec"),
        name: HEAD_GROUP.into(),
        children: 1,
        pods: 1,
        template: head,
        copied_metadata: vec![(
            format!("{at}.headGroupSpec.template.metadata"),
            cluster.head_group_spec.template.metadata.as_ref(),
        )],
        added: AddedContainers { init: Amounts::new(), sidecars: autoscaler(cluster, at)? },
    }];
    for (i, group) in cluster.worker_group_specs.iter().enumerate() {
        let field = format!("{at}.workerGroupSpecs[{i}]");
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

/// A Ray pod's set and index, as KubeRay labels it: the head is member 0 of its set; workers
/// carry no index (any free member of their group's set).
pub(super) fn set_of(pod: &ObjectMeta) -> Option<(String, Option<u32>)> {
    match label(pod, RAY_NODE_TYPE_LABEL)? {
        "head" => Some((HEAD_GROUP.to_string(), Some(0))),
        "worker" => Some((label(pod, RAY_GROUP_LABEL)?.to_string(), None)),
        _ => None,
    }
}
