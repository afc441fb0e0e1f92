//! Which workload a pod belongs to, and which member of its group it fills.
//!
//! Each kind says which pods are its own ([`super::Kind::place_of`]), from what its controllers
//! write on them: the controlling owner and the labels. A group's members are numbered by pod set
//! in the workload's order, then by child object (a JobSet's child Jobs), then by the pod's index
//! there (a completion index, an MPIJob worker's replica index): [`member_of`].

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use super::{HELD_KINDS, Kind, PodSet, job};

/// Where a pod is in its workload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodPlace {
    /// The workload's name, which is its group's name.
    pub workload: String,
    /// Its pod set, by name ("" for a kind with one set).
    pub set: String,
    /// The child object of the set that made it (a JobSet's child Job by index); 0 where none.
    pub child: u32,
    /// Its index among the child's pods, where the pod says it.
    pub index: Option<u32>,
}

/// How a workload numbers its members: per pod set in order, `children` objects of `pods` pods.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetLayout {
    pub name: String,
    pub children: u32,
    pub pods: u32,
}

/// The layout of a workload's pod sets.
pub fn layout(sets: &[PodSet<'_>]) -> Vec<SetLayout> {
    let n = |v: i64| u32::try_from(v.max(0)).unwrap_or(u32::MAX);
    sets.iter().map(|s| SetLayout { name: s.name.clone(), children: n(s.children), pods: n(s.pods) }).collect()
}

/// The member a pod fills: the members of the sets before its own, then its child's siblings',
/// then its index. None for a pod without an index or one outside the layout.
pub fn member_of(layout: &[SetLayout], place: &PodPlace) -> Option<u32> {
    let (set, first) = set_of(layout, place)?;
    let index = place.index.filter(|i| *i < set.pods && place.child < set.children)?;
    u32::try_from(u64::from(first) + u64::from(place.child) * u64::from(set.pods) + u64::from(index)).ok()
}

/// The members of the pod set a pod belongs to: where a pod without an index (a RayJob's
/// worker) goes, so that it never takes the member of another set's pod (the head's).
pub fn set_members(layout: &[SetLayout], place: &PodPlace) -> Option<std::ops::Range<u32>> {
    let (set, first) = set_of(layout, place)?;
    let size = u32::try_from(u64::from(set.children) * u64::from(set.pods)).ok()?;
    Some(first..first.checked_add(size)?)
}

/// The pod set a pod names, and the number of its first member.
fn set_of<'a>(layout: &'a [SetLayout], place: &PodPlace) -> Option<(&'a SetLayout, u32)> {
    let mut offset = 0u64;
    for set in layout {
        if set.name == place.set {
            return Some((set, u32::try_from(offset).ok()?));
        }
        offset += u64::from(set.children) * u64::from(set.pods);
    }
    None
}

/// The held kind whose workload a pod belongs to, and its place there. The Job is asked last:
/// other kinds' pods may come through Jobs they control (a JobSet's, an MPIJob's launcher).
pub fn place_of(pod: &ObjectMeta) -> Option<(&'static Kind, PodPlace)> {
    let owner = controller(pod)?;
    let others = HELD_KINDS.into_iter().filter(|k| **k != job::KIND);
    others.chain([&job::KIND]).find_map(|k| (k.place_of)(pod, owner).map(|p| (k, p)))
}

/// The controlling owner of an object.
pub fn controller(meta: &ObjectMeta) -> Option<&OwnerReference> {
    meta.owner_references.iter().flatten().find(|o| o.controller == Some(true))
}

/// Whether `owner` is an object of `kind` (any version of its API group).
pub fn is_kind(owner: &OwnerReference, kind: &Kind) -> bool {
    owner.kind == kind.kind && owner.api_version.rsplit_once('/').map_or("", |(g, _)| g) == kind.group
}

/// A label of the pod.
pub fn label<'a>(pod: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    pod.labels.as_ref()?.get(key).map(String::as_str)
}
