//! RayJob (`ray.io/v1`, KubeRay): one group of its Ray cluster's head and every worker, held with
//! `spec.suspend`. While it is suspended KubeRay creates no Ray cluster; released, it creates a
//! RayCluster named `<rayjob>-<5 random characters>` that it controls, whose pods are the group.
//! The cluster's pod sets are `super::ray`'s.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use super::place::{is_kind, label};
use super::{Kind, PodPlace, PodSet, Workload, ray, raycluster};
use crate::external::{RAY_CLUSTER_LABEL, RayJob};
use crate::labels;

pub const KIND: Kind = Kind {
    group: "ray.io",
    version: "v1",
    kind: "RayJob",
    plural: "rayjobs",
    verbs: &["list", "watch", "patch"],
    why: "one group each of its Ray cluster's head and workers (when their CRD is installed), suspended by the \
          webhook and resumed (or suspended again on eviction) by muster",
    hold_field: "spec.suspend",
    place_of,
    pod_label: None,
};

/// A pod of the Ray cluster a RayJob made: controlled by a RayCluster named after the RayJob
/// (`<rayjob>-<5 characters>`), labelled with that cluster by KubeRay, and without the label of a
/// RayCluster muster holds on its own.
fn place_of(pod: &ObjectMeta, owner: &OwnerReference) -> Option<PodPlace> {
    if !is_kind(owner, &raycluster::KIND)
        || label(pod, RAY_CLUSTER_LABEL) != Some(owner.name.as_str())
        || label(pod, labels::RAY_CLUSTER).is_some()
    {
        return None;
    }
    let (rayjob, suffix) = owner.name.rsplit_once('-')?;
    if suffix.len() != 5 || !suffix.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()) {
        return None;
    }
    let (set, index) = ray::set_of(pod)?;
    Some(PodPlace { workload: rayjob.to_string(), set, child: 0, index })
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

    fn pod_sets(&self) -> Result<Vec<PodSet<'_>>, String> {
        if !self.spec.cluster_selector.is_empty() {
            return Err("spec.clusterSelector: the RayJob runs on an existing Ray cluster, whose pods muster does \
                        not hold; give it a spec.rayClusterSpec instead, or remove the queue label"
                .into());
        }
        let cluster = self.spec.ray_cluster_spec.as_ref().ok_or("spec.rayClusterSpec is missing")?;
        ray::pod_sets(cluster, "spec.rayClusterSpec")
    }

    fn size_field() -> &'static str {
        "spec.rayClusterSpec.workerGroupSpecs"
    }

    fn release_deadline(&self) -> Option<String> {
        self.spec.active_deadline_seconds.map(|_| "spec.activeDeadlineSeconds".into())
    }

    fn elastic() -> bool {
        false
    }
}
