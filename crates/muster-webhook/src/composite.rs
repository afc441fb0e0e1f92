//! A queued pod's Kubernetes PodGroup and, when the PodGroup has a parent, the gang of gangs it
//! belongs to (`muster_k8s::composite`): one group named after the tree's root, the PodGroup its
//! set.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::scheduling::v1beta1::PodGroup as NativePodGroup;
use muster_graph::jobspec::MAX_MEMBERS;
use muster_k8s::composite::{Composite, CompositeSet, resolve};
use muster_k8s::external::{native_pod_group_level, native_pod_group_min_count};

use crate::object::{NATIVE_GROUP_FIELD, Refusal, native_group};
use crate::state::ClusterState;

/// The PodGroup a queued pod names, and the tree it belongs to.
pub(crate) struct NativeGang {
    pub pod_group: Arc<NativePodGroup>,
    /// The tree (None: the PodGroup is a gang of its own), or why muster cannot place it.
    pub composite: Result<Option<Composite>, String>,
}

impl NativeGang {
    fn name(&self) -> &str {
        self.pod_group.metadata.name.as_deref().unwrap_or_default()
    }

    /// The muster group: the tree's root, or the PodGroup.
    pub fn group(&self) -> &str {
        match &self.composite {
            Ok(Some(c)) => &c.root,
            _ => self.name(),
        }
    }

    /// The pod's set in the tree.
    pub fn set(&self) -> Option<&CompositeSet> {
        self.composite.as_ref().ok()?.as_ref()?.set(self.name())
    }

    /// The group's members: the whole tree's, or the PodGroup's gang `minCount`.
    pub fn size(&self) -> Result<u32, String> {
        match &self.composite {
            Ok(Some(c)) => Ok(c.members()),
            Ok(None) => native_pod_group_min_count(&self.pod_group, MAX_MEMBERS),
            Err(e) => Err(e.clone()),
        }
    }

    /// The level the whole group keeps within: the root's, or the PodGroup's.
    pub fn level(&self) -> Result<Option<&'static str>, String> {
        match &self.composite {
            Ok(Some(c)) => Ok(c.level),
            Ok(None) => native_pod_group_level(&self.pod_group),
            Err(e) => Err(e.clone()),
        }
    }
}

/// The gang of the Kubernetes PodGroup a queued pod names; None when it names none or the
/// PodGroup does not exist. Refuses when the cluster cannot be read.
pub(crate) async fn native_gang<S: ClusterState>(
    pod: &Pod,
    state: &S,
    ns: &str,
) -> Result<Option<NativeGang>, Refusal> {
    let Some(name) = native_group(pod) else { return Ok(None) };
    let unread = |e| Refusal::new(format!("{NATIVE_GROUP_FIELD}: {e}; try again"));
    let Some(pod_group) = state.native_pod_group(ns, name).await.map_err(unread)? else { return Ok(None) };
    let composite = match pod_group.spec.parent_composite_pod_group_name {
        None => Ok(None),
        Some(_) => {
            let trees = state.pod_group_trees(ns).await.map_err(unread)?;
            resolve(&pod_group, &trees.composites, &trees.pod_groups, MAX_MEMBERS)
        }
    };
    Ok(Some(NativeGang { pod_group, composite }))
}
