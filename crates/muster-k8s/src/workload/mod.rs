//! One interface for every kind of workload muster queues and holds back as a whole (a Job, a
//! JobSet, ...), and the registry of those kinds.
//!
//! A kind says what its object is made of ([`Workload`]: held or not, finished or not, its pod
//! sets); everything else is computed here once for the webhook and the controller alike:
//! [`shape`] is the one place a group's size and one member's requests come from, and
//! [`Shape::group_spec`] the Group object muster keeps for it. The webhook checks a new object
//! with the same function the controller later sizes its group with, so they cannot disagree.
//!
//! Adding a kind: one file here implementing [`Workload`] plus its entry in [`HELD_KINDS`];
//! the webhook's registration and the RBAC in `deploy/chart/templates/rbac.yaml` are generated from that entry.

mod gangs;
pub mod job;
pub mod jobset;
pub mod mpijob;
pub mod place;
mod ray;
pub mod raycluster;
pub mod rayjob;
pub mod rbac;
pub mod trainjob;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PodSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{self as meta, ObjectMeta};
use kube::core::ApiResource;
use muster_graph::dra::DeviceRequest;
use muster_graph::jobspec::MAX_MEMBERS;

use crate::dra::{DraError, PodDevices};
use crate::group::{
    GroupSet, GroupSubGroup, Members, OwnerReference, TopologyConstraint, annotated_duration, annotated_topology,
};
use crate::pod::{Amounts, Placement, Uncountable, placement, requests};
use crate::{GroupSpec, Quantity, labels};
pub use place::{PodPlace, SetLayout};

/// A kind of object muster queues, as the webhook registers it and RBAC grants it.
#[derive(Debug, Clone, Copy)]
pub struct Kind {
    /// API group ("" for the core group).
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    pub plural: &'static str,
    /// What muster does to objects of the kind, for RBAC (it never creates or deletes them).
    pub verbs: &'static [&'static str],
    /// Why muster needs those verbs, written above the rule in `deploy/chart/templates/rbac.yaml`.
    pub why: &'static str,
    /// The boolean field that holds an object of the kind back when true (`spec.suspend`).
    pub hold_field: &'static str,
    /// The workload of the kind a pod belongs to and its place there, from the pod's metadata
    /// and its controlling owner; None for other pods.
    pub place_of: fn(&ObjectMeta, &meta::OwnerReference) -> Option<PodPlace>,
    /// A label the webhook puts on every pod template of a held object (value "true"), by which
    /// `place_of` knows the kind's pods from another kind's that look alike (a RayCluster's from
    /// a RayJob's cluster's).
    pub pod_label: Option<&'static str>,
}

/// Kinds are one per API group and kind.
impl PartialEq for Kind {
    fn eq(&self, other: &Self) -> bool {
        (self.group, self.kind) == (other.group, other.kind)
    }
}

impl Eq for Kind {}

impl Kind {
    /// `group/version` (`version` for the core group), as in an object's apiVersion.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() { self.version.to_string() } else { format!("{}/{}", self.group, self.version) }
    }

    /// The kind as the dynamic API client addresses it.
    pub fn resource(&self) -> ApiResource {
        ApiResource {
            group: self.group.into(),
            version: self.version.into(),
            api_version: self.api_version(),
            kind: self.kind.into(),
            plural: self.plural.into(),
        }
    }

    /// The merge patch that sets [`Kind::hold_field`] to `hold`.
    pub fn hold_patch(&self, hold: bool) -> serde_json::Value {
        self.hold_field.rsplit('.').fold(serde_json::Value::Bool(hold), |inner, key| serde_json::json!({ key: inner }))
    }
}

/// The kinds muster holds back by suspending them until their whole group is admitted.
pub const HELD_KINDS: [&Kind; 5] = [&job::KIND, &jobset::KIND, &mpijob::KIND, &rayjob::KIND, &raycluster::KIND];

/// Kinds that hold a workload of a held kind for it, and that muster patches to hold or release
/// it ([`Workload::held_by`]): a TrainJob holds its JobSet.
pub const HOLDERS: [&Kind; 1] = [&trainjob::KIND];

/// Pods made from one template: where the template is and how many of its pods run at once.
#[derive(Debug, Clone, PartialEq)]
pub struct PodSet<'a> {
    /// The path of the set in the object, such as `spec.replicatedJobs[1]`.
    pub field: String,
    /// The path of its pod template's spec, such as `spec.replicatedJobs[1].template.spec.template.spec`.
    pub template_field: String,
    /// Its name as the kind's pods say it ([`PodPlace::set`]).
    pub name: String,
    /// Child objects of the set (a replicated Job's Jobs); 1 where the set makes pods itself.
    pub children: i64,
    /// Pods of one child that run at once (negative values read as 0).
    pub pods: i64,
    pub template: &'a PodSpec,
    /// Metadata the kind's controllers copy onto its pods (and child objects), by field: the
    /// webhook keeps muster's keys out of it.
    pub copied_metadata: Vec<(String, Option<&'a ObjectMeta>)>,
    /// Containers the kind's controller adds to each pod beyond the template.
    pub added: AddedContainers,
}

impl PodSet<'_> {
    /// The field of its pod template's metadata, such as `spec.template.metadata`.
    fn pod_metadata_field(&self) -> String {
        let template = self.template_field.strip_suffix(".spec").unwrap_or(&self.template_field);
        format!("{template}.metadata")
    }

    /// The annotations of its pod template (copied onto its pods).
    fn pod_annotations(&self) -> Option<&BTreeMap<String, String>> {
        let field = self.pod_metadata_field();
        self.copied_metadata.iter().find(|(f, _)| *f == field)?.1?.annotations.as_ref()
    }
}

/// What a kind's controller adds to each pod of a set (KubeRay's init container and autoscaler
/// sidecar), in base units: the pod asks for it too.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AddedContainers {
    pub init: Amounts,
    pub sidecars: Amounts,
}

impl PodSet<'_> {
    /// Pods of the set that run at once.
    pub fn count(&self) -> i64 {
        self.children.max(0).saturating_mul(self.pods.max(0))
    }

    /// What each pod of the set asks: its template's requests, with the sidecars the kind's
    /// controller adds on top and its init container as a floor. (When the template's own init
    /// containers are its largest need, adding the sidecars to it over-counts: safe.) An amount
    /// muster cannot count is an error naming its field in the object.
    pub fn requests(&self) -> Result<Amounts, Uncountable> {
        let mut asks = requests(self.template).map_err(|e| e.under(&self.template_field))?;
        for (r, a) in &self.added.sidecars {
            *asks.entry(r.clone()).or_default() += a;
        }
        for (r, a) in &self.added.init {
            let e = asks.entry(r.clone()).or_default();
            *e = (*e).max(*a);
        }
        Ok(asks)
    }
}

/// A kind of workload muster queues and holds back as a whole.
pub trait Workload {
    /// The kind's registry entry.
    fn kind() -> &'static Kind;

    fn meta(&self) -> &ObjectMeta;

    /// Held back (suspended): none of its pods exist or run.
    fn held(&self) -> bool;

    /// Some(succeeded) once it has finished.
    fn finished(&self) -> Option<bool>;

    /// Its pod sets, in the object's order, or what is missing (naming the field).
    fn pod_sets(&self) -> Result<Vec<PodSet<'_>>, String>;

    /// The field that sizes its group, for messages (`spec.parallelism`).
    fn size_field() -> &'static str;

    /// Whether the group may start with fewer members (annotation [`labels::MIN_MEMBERS`]).
    fn elastic() -> bool;

    /// The kind whose hold field holds it: its own, or its controller's where that controller
    /// would undo a change to its own (a TrainJob's JobSet, which the trainer suspends as long as
    /// the TrainJob is).
    fn held_by(&self) -> &'static Kind {
        Self::kind()
    }

    /// The field of a deadline that counts from its release (a Job's activeDeadlineSeconds), if
    /// one is set: its pods are then made only at admission, since waiting unbound for the
    /// group's start would use up the deadline.
    fn release_deadline(&self) -> Option<String> {
        None
    }

    /// How many of its pods succeeding finish its work (counted by completion index where its
    /// pods carry one): once that many have and none is left pending or running, its nodes are
    /// free, a moment before its controller marks it finished (the Job controller batches pod
    /// updates for a second). None where its end cannot be told from its pods.
    fn succeeded_pods_to_finish(&self) -> Option<u32> {
        None
    }

    /// Whether its pod count may change while its group is placed (the engine then grows the
    /// group, or releases the members its controller's deleted pods leave): an elastic Indexed
    /// Job's, a Ray cluster's as it scales. Other kinds are suspended to be resized.
    fn resizes_while_placed() -> bool {
        false
    }

    /// Whether it is part of another workload's group (a JobSet's child Job), and so no group
    /// of its own.
    fn part_of_another(&self) -> bool {
        false
    }

    /// The queue it names (label [`labels::QUEUE`]).
    fn queue(&self) -> Option<&str> {
        self.meta().labels.as_ref()?.get(labels::QUEUE).map(String::as_str)
    }
}

/// A workload's group as muster places it: how many members, what each pod set's member asks,
/// where the members may run, and what the owner's annotations add.
#[derive(Debug, Clone, PartialEq)]
pub struct Shape {
    pub members: Members,
    /// Its pod sets that run pods, in the workload's order (the order its members are numbered in).
    pub sets: Vec<SetShape>,
    pub priority_class_name: Option<String>,
    pub duration_seconds: Option<i64>,
    pub topology: Option<TopologyConstraint>,
    /// Sets kept within one domain together, inside the group's (pod template annotations).
    pub subgroups: Vec<GroupSubGroup>,
    pub shrinkable: bool,
    /// What sets the member count that must fit at once, for messages (`spec.parallelism` or the
    /// min-members annotation).
    pub count_field: String,
}

/// One pod set as its group's member set: its pods at once, what each asks and where it may run.
#[derive(Debug, Clone, PartialEq)]
pub struct SetShape {
    pub name: String,
    pub pods: u32,
    pub requests: Amounts,
    pub placement: Placement,
    /// What each pod asks of devices (claims from templates, extended resources devices may
    /// serve): its devices, once the templates and classes are read ([`fill_devices`]).
    pub devices: PodDevices,
    /// Its pods within one domain of this level, inside the group's (its template's annotation).
    pub topology: Option<TopologyConstraint>,
}

/// The one computation of a workload's group: size, one member's requests, placement and the
/// annotations. Errors name each field at fault and the fix, all of them at once.
pub fn shape<W: Workload>(w: &W) -> Result<Shape, Vec<String>> {
    let kind = W::kind().kind;
    let sets = w.pod_sets().map_err(|e| vec![e])?;
    let mut errors = Vec::new();
    let size_field = W::size_field();
    // Checked: each set's count is at most i32::MAX squared, and a few of them overflow an i64.
    let Some(size) = sets.iter().try_fold(0i64, |sum, s| sum.checked_add(s.count())) else {
        return Err(vec![format!(
            "{size_field}: the {kind}'s pods at once add up past what can be counted; muster takes at most \
             {MAX_MEMBERS} in one group, so lower the counts (or split the {kind})"
        )]);
    };
    if size < 1 {
        errors.push(format!("{size_field}: the {kind} has no pods to run at once; muster needs at least 1"));
    } else if size > i64::from(MAX_MEMBERS) {
        errors.push(format!(
            "{size_field}: {size} pods are more than one group may have (at most {MAX_MEMBERS}); split the {kind}"
        ));
    }
    let annotations = w.meta().annotations.as_ref();
    let annotation = |k: &str| annotations.and_then(|a| a.get(k));
    let (mut min, mut count_field) = (size, size_field.to_string());
    if let Some(v) = annotation(labels::MIN_MEMBERS) {
        let field = annotation_field(labels::MIN_MEMBERS);
        let most = size.max(1);
        match v.trim().parse::<i64>() {
            _ if !W::elastic() => errors
                .push(format!("{field}: {kind}s start with all their pods (muster does not shrink them); remove it")),
            Ok(m) if (1..=most).contains(&m) => (min, count_field) = (m.min(size), field),
            Ok(m) => errors.push(format!(
                "{field}: {m} is outside 1..={most}; set the fewest pods the job can start with, from 1 to \
                 {size_field} ({most}), or remove it for a job that starts with all its pods"
            )),
            Err(_) => errors.push(format!(
                "{field}: {v:?} is not a whole number; set the fewest pods the job can start with, from 1 to \
                 {size_field} ({most})"
            )),
        }
    }
    let duration_seconds = annotated_duration(annotations).unwrap_or_else(|e| {
        errors.push(e);
        None
    });
    let topology = annotated_topology(annotations).unwrap_or_else(|e| {
        errors.push(e);
        None
    });
    let shrinkable = match annotation(labels::SHRINKABLE).map(|v| v.trim()) {
        None | Some("false") => false,
        Some("true") if min < size => true,
        Some("true") => {
            errors.push(format!(
                "{}: only an elastic {kind} gives back pods while it runs; set {} below {size_field}, or remove it",
                annotation_field(labels::SHRINKABLE),
                labels::MIN_MEMBERS
            ));
            false
        }
        Some(v) => {
            errors.push(format!("{}: {v:?} is neither \"true\" nor \"false\"", annotation_field(labels::SHRINKABLE)));
            false
        }
    };
    let running: Vec<&PodSet> = sets.iter().filter(|s| s.count() > 0).collect();
    let gangs = gangs::of(&running).unwrap_or_else(|e| {
        errors.extend(e);
        gangs::Gangs::default()
    });
    let mut shapes = Vec::new();
    let mut priorities = Vec::new();
    for (k, set) in running.into_iter().enumerate() {
        let requests = set.requests().map_err(|e| errors.push(e.to_string()));
        let placement = placement(set.template, &set.template_field).map_err(|e| errors.push(e));
        let devices = PodDevices::of(set.template, &set.template_field).map_err(|e| errors.push(e));
        priorities.push((set, set.template.priority_class_name.clone()));
        if let (Ok(requests), Ok(placement), Ok(devices)) = (requests, placement, devices) {
            let shape = |name: String, pods: i64, topology| SetShape {
                name,
                pods: u32::try_from(pods).unwrap_or(u32::MAX),
                requests: requests.clone(),
                placement: placement.clone(),
                devices: devices.clone(),
                topology,
            };
            match gangs.replica_topology.get(k).cloned().flatten() {
                // Members are numbered by replica within a set, so each replica's members stay
                // the ones its pods fill ([`place::member_of`]).
                Some(t) => shapes.extend(
                    (0..set.children).map(|c| shape(format!("{}-{c}", set.name), set.pods.max(0), Some(t.clone()))),
                ),
                None => shapes.push(shape(set.name.clone(), set.count(), gangs.set_topology.get(k).cloned().flatten())),
            }
        }
    }
    let mut names = std::collections::BTreeSet::new();
    if let Some(twice) = shapes.iter().find(|s| !names.insert(s.name.as_str())) {
        errors.push(format!(
            "{size_field}: two sets would be named {:?}: a replica of a set whose template says {} is a set \
             named <set>-<replica>; rename the other",
            twice.name,
            labels::REPLICA_TOPOLOGY
        ));
    }
    if let Some((first, first_priority)) = priorities.first()
        && let Some((other, _)) = priorities.iter().find(|(_, p)| p != first_priority)
    {
        errors.push(format!(
            "{}: names another priorityClassName than {}; {} starts all its pods at once at one priority, so \
             give them the same one",
            other.template_field,
            first.template_field,
            a(kind)
        ));
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    let priority_class_name = priorities.into_iter().next().and_then(|(_, p)| p);
    Ok(Shape {
        members: Members { min, max: (size != min).then_some(size) },
        sets: shapes,
        priority_class_name,
        duration_seconds,
        topology,
        subgroups: gangs.subgroups,
        shrinkable,
        count_field,
    })
}

impl Shape {
    /// Whether every member asks the same and may run on the same nodes, and no set is a gang of
    /// its own: one set of alike members, as a group of one pod set is.
    pub fn alike(&self) -> bool {
        // Sets that are gangs of their own stay sets, however alike their pods.
        let gangs = !self.subgroups.is_empty() || self.sets.iter().any(|s| s.topology.is_some());
        !gangs
            && self.sets.windows(2).all(|w| {
                (&w[0].requests, &w[0].placement, &w[0].devices) == (&w[1].requests, &w[1].placement, &w[1].devices)
            })
    }

    /// What one member of each of the Group's sets asks of devices ([`Shape::group_spec`]'s;
    /// one for a Group of alike members).
    pub fn set_devices(&self) -> Vec<PodDevices> {
        let devices = self.sets.iter().map(|s| s.devices.clone());
        if self.alike() { devices.take(1).collect() } else { devices.collect() }
    }

    /// What the group's fewest members ask in all, by resource: each set whole, the last (the
    /// only one whose count may fall) down to the minimum.
    pub fn minimum(&self) -> Vec<(u64, &Amounts)> {
        let size: u64 = self.sets.iter().map(|s| u64::from(s.pods)).sum();
        let short = size.saturating_sub(u64::try_from(self.members.min).unwrap_or(0));
        let last = self.sets.len().saturating_sub(1);
        (self.sets.iter().enumerate())
            .map(|(k, s)| {
                (if k == last { u64::from(s.pods).saturating_sub(short) } else { u64::from(s.pods) }, &s.requests)
            })
            .collect()
    }

    /// The Group object muster keeps for the workload `w` in `queue`, owned by it. Pod sets
    /// that differ become the Group's sets, in the workload's order.
    pub fn group_spec<W: Workload>(self, w: &W, queue: &str) -> GroupSpec {
        let kind = W::kind();
        let meta = w.meta();
        let alike = self.alike();
        let size: i64 = self.sets.iter().map(|s| i64::from(s.pods)).sum();
        let short = size - self.members.min;
        let last = self.sets.len().saturating_sub(1);
        let mut sets: Vec<GroupSet> = (self.sets.iter().enumerate())
            .map(|(k, s)| {
                let pods = i64::from(s.pods);
                let min = if k == last { pods - short } else { pods };
                GroupSet {
                    name: s.name.clone(),
                    members: Members { min, max: (min != pods).then_some(pods) },
                    resources: requests_to_resources(&s.requests),
                    devices: Vec::new(),
                    node_selector: s.placement.node_selector.clone(),
                    affinity: s.placement.affinity.clone(),
                    tolerations: s.placement.tolerations.clone(),
                    topology: s.topology.clone(),
                    optional: false,
                }
            })
            .collect();
        let one = if alike { sets.drain(..).next() } else { None };
        let (resources, node_selector, affinity, tolerations) =
            one.map(|s| (s.resources, s.node_selector, s.affinity, s.tolerations)).unwrap_or_default();
        GroupSpec {
            queue: queue.to_string(),
            members: self.members,
            resources,
            devices: Vec::new(),
            node_selector,
            affinity,
            tolerations,
            sets,
            subgroups: self.subgroups,
            topology: self.topology,
            priority_class_name: self.priority_class_name,
            duration_seconds: self.duration_seconds,
            shrinkable: self.shrinkable,
            owner: Some(OwnerReference {
                api_version: kind.api_version(),
                kind: kind.kind.to_string(),
                name: meta.name.clone().unwrap_or_default(),
                uid: meta.uid.clone(),
            }),
        }
    }
}

/// Fills the devices of `spec` (a [`Shape::group_spec`]) from what its pods ask (`asks`, its
/// [`Shape::set_devices`]), as `resolve` reads them; an error names the set. An extended
/// resource the devices serve leaves the counted resources.
pub fn fill_devices(
    spec: &mut GroupSpec,
    asks: &[PodDevices],
    resolve: impl Fn(&PodDevices) -> Result<Vec<DeviceRequest>, DraError>,
) -> Result<(), String> {
    let fill = |resources: &mut BTreeMap<String, Quantity>, devices: &mut Vec<DeviceRequest>, asks: &PodDevices| {
        *devices = resolve(asks)?;
        for served in devices.iter().filter_map(|d| d.extended_resource.as_ref()) {
            resources.remove(served);
        }
        Ok::<_, DraError>(())
    };
    if spec.sets.is_empty() {
        let one = asks.first().cloned().unwrap_or_default();
        return fill(&mut spec.resources, &mut spec.devices, &one).map_err(|e| e.to_string());
    }
    for (set, asks) in spec.sets.iter_mut().zip(asks) {
        fill(&mut set.resources, &mut set.devices, asks).map_err(|e| format!("pod set {}: {e}", set.name))?;
    }
    Ok(())
}

/// Requests in base units as a Group object's `spec.resources` (cpu in millicores).
pub fn requests_to_resources<'a>(
    requests: impl IntoIterator<Item = (&'a String, &'a u64)>,
) -> BTreeMap<String, Quantity> {
    requests
        .into_iter()
        .map(|(r, a)| {
            let q = if r == "cpu" {
                Quantity::Text(format!("{a}m"))
            } else {
                Quantity::Int(i64::try_from(*a).unwrap_or(i64::MAX))
            };
            (r.clone(), q)
        })
        .collect()
}

/// The kind with the article its spoken name takes: "a Job", "an MPIJob" (an initialism is read
/// letter by letter, and "em" starts with a vowel sound).
pub fn a(kind: &str) -> String {
    let mut chars = kind.chars();
    let (first, second) = (chars.next().unwrap_or(' '), chars.next().unwrap_or(' '));
    let initialism = first.is_ascii_uppercase() && second.is_ascii_uppercase();
    let vowel_sound = "AEIOUaeiou".contains(first) || (initialism && "FHLMNRSX".contains(first));
    format!("{} {kind}", if vowel_sound { "an" } else { "a" })
}

fn annotation_field(key: &str) -> String {
    format!("metadata.annotations[{key}]")
}

#[cfg(test)]
mod tests;
