//! RayCluster (`ray.io/v1`, KubeRay) on its own: one group of its head and every worker, held
//! with `spec.suspend` (while it is suspended KubeRay creates no pod, and deletes them all when
//! it is suspended again). A Ray cluster serves until it is deleted: its group never finishes,
//! and follows its worker groups' `replicas` while it serves, as the autoscaler sets them.
//!
//! A RayJob's (or a RayService's) clusters are part of that workload, not groups of their own.
//! Their pods look like a RayCluster's, so the webhook labels the pod templates of a cluster it
//! holds ([`labels::RAY_CLUSTER`]), and only pods with that label are this kind's.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use super::place::{controller, is_kind, label};
use super::{Kind, PodPlace, PodSet, Workload, ray};
use crate::external::{RAY_CLUSTER_LABEL, RayCluster};
use crate::labels;

pub const KIND: Kind = Kind {
    group: "ray.io",
    version: "v1",
    kind: "RayCluster",
    plural: "rayclusters",
    verbs: &["list", "watch", "patch"],
    why: "one group each of a Ray cluster's head and workers (when their CRD is installed), suspended by the \
          webhook and resumed (or suspended again on eviction) by muster",
    hold_field: "spec.suspend",
    place_of,
    pod_label: Some(labels::RAY_CLUSTER),
};

/// A pod KubeRay made for a cluster muster holds: controlled by it, labelled with it by KubeRay,
/// and with muster's label from the cluster's templates.
fn place_of(pod: &ObjectMeta, owner: &OwnerReference) -> Option<PodPlace> {
    if !is_kind(owner, &KIND)
        || label(pod, RAY_CLUSTER_LABEL) != Some(owner.name.as_str())
        || label(pod, labels::RAY_CLUSTER).is_none()
    {
        return None;
    }
    let (set, index) = ray::set_of(pod)?;
    Some(PodPlace { workload: owner.name.clone(), set, child: 0, index })
}

impl Workload for RayCluster {
    fn kind() -> &'static Kind {
        &KIND
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn held(&self) -> bool {
        self.spec.suspend == Some(true)
    }

    fn finished(&self) -> Option<bool> {
        None
    }

    fn pod_sets(&self) -> Result<Vec<PodSet<'_>>, String> {
        ray::pod_sets(&self.spec, "spec")
    }

    fn size_field() -> &'static str {
        "spec.workerGroupSpecs"
    }

    fn elastic() -> bool {
        false
    }

    /// A worker group's `replicas` changes while the cluster serves (the Ray autoscaler writes
    /// it, or its user): the group grows, or releases the members of the workers KubeRay deletes.
    fn resizes_while_placed() -> bool {
        true
    }

    /// A cluster KubeRay made for a RayJob or a RayService (it controls it).
    fn part_of_another(&self) -> bool {
        controller(&self.metadata).is_some_and(|o| o.api_version.starts_with("ray.io/"))
    }
}
