//! Kubernetes objects to the compact views the controller keeps, and to the engine's inputs.
//!
//! Only these views are kept in memory, never whole objects: at 150k pods the difference is
//! gigabytes (see docs/benchmarks.md, controller memory).

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice};
use muster_graph::NodeSpec;
use muster_graph::cluster::MAX_DEVICES_PER_NODE;
use muster_graph::graph::{Taint, TaintEffect};
use muster_graph::jobspec::MAX_MEMBERS;
use muster_k8s::dra::{DraError, NodeSlice, PodDevices, claim_devices, node_slice};
use muster_k8s::external::native_pod_group_name;
use muster_k8s::group::{
    GroupSet, GroupSubGroup, Members, TopologyConstraint, TopologyMode, annotated_topology, plain_members,
};
use muster_k8s::pod::{self, Placement, amount_of, placement};
use muster_k8s::unsupported::unsupported_fields;
use muster_k8s::workload::place::{PodPlace, SetLayout, member_of, place_of, set_members};
use muster_k8s::workload::{self, Workload, requests_to_resources};
use muster_k8s::{Group, GroupSpec as GroupObjectSpec, GroupStatus, labels};
use muster_queue::{ExternalHold, GroupKey};

/// The annotation the binder sets (through the binding) with the member a pod fills.
pub const MEMBER: &str = "muster.dev/member";

/// A node as the graph needs it, and whether it is Ready.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeView {
    pub spec: NodeSpec,
    pub ready: bool,
}

/// A ResourceSlice: its name and what muster reads of it (one node's devices), or why it
/// cannot read it yet.
#[derive(Debug, Clone, PartialEq)]
pub struct SliceView {
    pub name: String,
    pub read: Result<NodeSlice, DraError>,
}

pub fn slice_view(slice: &ResourceSlice) -> Option<SliceView> {
    Some(SliceView { name: slice.metadata.name.clone()?, read: node_slice(slice) })
}

/// A ResourceClaim: what its allocation holds on a node, if it is allocated devices of one node,
/// and the pods it is reserved for (muster's own pods' claims are held by their group).
#[derive(Debug, Clone, PartialEq)]
pub struct ClaimView {
    pub uid: String,
    pub held: Option<ExternalHold>,
    /// The uids of the pods in status.reservedFor.
    pub reserved_for: Vec<String>,
}

pub fn claim_view(claim: &ResourceClaim) -> Option<ClaimView> {
    let uid = claim.metadata.uid.clone()?;
    let reserved = claim.status.as_ref().and_then(|s| s.reserved_for.as_ref()).into_iter().flatten();
    let reserved_for = reserved
        .filter(|r| r.resource == "pods" && r.api_group.as_deref().unwrap_or("").is_empty())
        .map(|r| r.uid.clone());
    let reserved_for = reserved_for.collect();
    let held = claim_devices(claim).map(|(node, devices)| {
        let mut per_driver: BTreeMap<String, u64> = BTreeMap::new();
        for (driver, _) in &devices {
            *per_driver.entry(driver.clone()).or_default() += 1;
        }
        ExternalHold {
            node,
            requests: per_driver.into_iter().collect(),
            devices: devices.into_iter().map(|(_, name)| name).collect(),
        }
    });
    Some(ClaimView { uid, held, reserved_for })
}

/// A ResourceClaimTemplate, kept whole (templates are few and small), by `namespace/name`.
#[derive(Debug, Clone, PartialEq)]
pub struct TemplateView {
    pub key: String,
    pub template: ResourceClaimTemplate,
}

pub fn template_view(t: &ResourceClaimTemplate) -> Option<TemplateView> {
    let key = format!("{}/{}", t.metadata.namespace.as_deref()?, t.metadata.name.as_deref()?);
    let mut template = t.clone();
    template.metadata.managed_fields = None;
    Some(TemplateView { key, template })
}

/// A DeviceClass, kept whole, by name.
#[derive(Debug, Clone, PartialEq)]
pub struct ClassView {
    pub name: String,
    pub class: DeviceClass,
}

pub fn class_view(c: &DeviceClass) -> Option<ClassView> {
    let mut class = c.clone();
    class.metadata.managed_fields = None;
    Some(ClassView { name: c.metadata.name.clone()?, class })
}

/// The claims a pod of muster's makes from templates, and the ResourceClaims made for it so far.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PodClaims {
    /// The pod's names for its claims (spec.resourceClaims[].name).
    pub wanted: Vec<String>,
    /// (the pod's name for a claim, the ResourceClaim made for it), from
    /// status.resourceClaimStatuses.
    pub made: Vec<(String, String)>,
}

impl PodClaims {
    /// Every claim the pod makes, with its ResourceClaim's name; None while one is not made yet.
    pub fn all_made(&self) -> Option<Vec<(String, String)>> {
        let made = |w: &String| self.made.iter().find(|(n, _)| n == w).cloned();
        self.wanted.iter().map(made).collect()
    }
}

/// Topology levels: (level, node label), outermost first.
pub type Levels = Vec<(String, String)>;

/// The default levels, the same as a cluster description's.
pub fn default_levels() -> Levels {
    labels::TOPOLOGY_LEVELS.iter().map(|(l, k)| (l.to_string(), k.to_string())).collect()
}

/// Taints the node lifecycle controller sets to mirror a cordon or the Ready condition, which
/// muster reads itself (`unschedulable`, `ready`): kept as taints they would make every group
/// that does not tolerate them look unsatisfiable while a cluster is cordoned or its nodes
/// restart, when they only have to wait.
const MIRRORED_TAINTS: [&str; 3] =
    ["node.kubernetes.io/unschedulable", "node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"];

/// Taints the node lifecycle controller sets while a node is under memory, disk or process
/// pressure or has no network yet. Like a cordon they keep new pods off the node for a while and
/// leave running ones alone, so they are read as a cordon: a group waits for the pressure to pass
/// instead of looking unsatisfiable.
const PASSING_TAINTS: [&str; 4] = [
    "node.kubernetes.io/memory-pressure",
    "node.kubernetes.io/disk-pressure",
    "node.kubernetes.io/pid-pressure",
    "node.kubernetes.io/network-unavailable",
];

pub fn node_view(node: &Node, levels: &Levels) -> Option<NodeView> {
    let name = node.metadata.name.clone()?;
    let labels = node.metadata.labels.clone().unwrap_or_default();
    let topology = levels.iter().filter_map(|(level, key)| Some((level.clone(), labels.get(key)?.clone()))).collect();
    let mut pooled = Vec::new();
    let mut devices = Vec::new();
    let status = node.status.as_ref();
    for (resource, q) in status.and_then(|s| s.allocatable.as_ref()).into_iter().flatten() {
        // What muster cannot count the node offers none of: pods asking for it wait, nothing is
        // over-committed.
        let Ok(amount) = amount_of(resource, q) else { continue };
        // Extended resources (nvidia.com/gpu) are discrete devices; the rest is pooled, and so is
        // an extended resource offered by the thousand or more (a byte count such as
        // sgx.intel.com/epc): as devices, each unit would be a vertex of its own.
        let devices_of = u32::try_from(amount).ok().filter(|&n| n <= MAX_DEVICES_PER_NODE);
        if let Some(count) = devices_of.filter(|_| resource.contains('/') && !resource.starts_with("hugepages-")) {
            devices.push((resource.clone(), count));
        } else {
            pooled.push((resource.clone(), amount));
        }
    }
    let spec = node.spec.as_ref();
    let node_taints = spec.and_then(|s| s.taints.as_ref()).into_iter().flatten();
    let under_pressure = node_taints.clone().any(|t| PASSING_TAINTS.contains(&t.key.as_str()));
    let taints = node_taints
        .filter(|t| !MIRRORED_TAINTS.contains(&t.key.as_str()) && !PASSING_TAINTS.contains(&t.key.as_str()))
        .filter_map(|t| {
            Some(Taint {
                key: t.key.clone(),
                value: t.value.clone().unwrap_or_default(),
                effect: TaintEffect::parse(&t.effect)?,
            })
        })
        .collect();
    let ready = status
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True");
    Some(NodeView {
        spec: NodeSpec {
            name,
            topology,
            pooled,
            devices,
            published: Vec::new(),
            labels,
            taints,
            unschedulable: under_pressure || spec.and_then(|s| s.unschedulable).unwrap_or(false),
        },
        ready,
    })
}

/// A namespace, as far as writes go: once it is being deleted muster writes nothing into it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamespaceView {
    pub name: String,
    pub terminating: bool,
}

pub fn namespace_view(ns: &Namespace) -> Option<NamespaceView> {
    Some(NamespaceView { name: ns.metadata.name.clone()?, terminating: ns.metadata.deletion_timestamp.is_some() })
}

/// A Group object as the controller checks it: only muster writes Group statuses, so one that
/// differs from what muster wrote was forged (or is muster's own write still coming back).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupObjectView {
    pub key: GroupKey,
    /// [`status_fingerprint`] of its status.
    pub status: u64,
    /// Someone other than muster has written its status (its managed fields say so).
    pub foreign_status: bool,
}

pub fn group_object_view(g: &Group) -> Option<GroupObjectView> {
    let meta = &g.metadata;
    let key = GroupKey::new(meta.namespace.as_deref()?, meta.name.as_deref()?);
    let foreign_status = meta
        .managed_fields
        .iter()
        .flatten()
        .any(|f| f.subresource.as_deref() == Some("status") && f.manager.as_deref() != Some(labels::FIELD_MANAGER));
    let status = status_fingerprint(&g.status.clone().unwrap_or_default());
    Some(GroupObjectView { key, status, foreign_status })
}

/// A hash of a Group status as written: equal statuses, equal fingerprints (a whole copy of
/// each observed status would double what the controller keeps per group).
pub fn status_fingerprint(status: &GroupStatus) -> u64 {
    use std::hash::{DefaultHasher, Hash, Hasher};
    let mut h = DefaultHasher::new();
    serde_json::to_vec(status).unwrap_or_default().hash(&mut h);
    h.finish()
}

/// A pod's phase, as far as capacity and readiness go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PodPhase {
    #[default]
    Pending,
    Running,
    Succeeded,
    Failed,
}

impl PodPhase {
    pub fn is_terminal(self) -> bool {
        matches!(self, PodPhase::Succeeded | PodPhase::Failed)
    }
}

/// What the controller keeps of a pod. The plain-group fields (`group` .. `placement`) are set
/// only on pods no Job controls, so Job pods pay no heap for them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PodView {
    pub uid: String,
    pub namespace: String,
    pub name: String,
    pub node: Option<String>,
    /// Whether muster schedules it (schedulerName muster).
    pub ours: bool,
    pub phase: PodPhase,
    pub ready: bool,
    pub requests: Vec<(String, u64)>,
    /// Why its requests cannot be counted (then `requests` is empty): such a pod is never bound,
    /// nor sizes a group. (One another scheduler bound counts as asking nothing: with an amount
    /// muster cannot count, past 2^60 or of a resource no node has, it cannot run there.)
    pub uncountable: Option<Box<String>>,
    /// Pods for muster's scheduler: the fields muster does not place (a claim through dynamic
    /// resource allocation, a host port, ...; muster_k8s::unsupported), which keep it from being
    /// bound. The webhook refuses such pods; this catches one made before it was registered.
    pub unsupported: Option<Box<String>>,
    /// Pods for muster's scheduler that claim devices: the claims, which muster allocates before
    /// it binds the pod (boxed: other pods pay one pointer).
    pub claims: Option<Box<PodClaims>>,
    /// Pods for muster's scheduler that ask for devices: the claims they make from templates,
    /// and what each container asks of extended resources devices may serve (from which muster
    /// makes the pod's claim for them).
    pub devices: Option<Box<PodDevices>>,
    /// The claim made for those, from status.extendedResourceClaimStatus.
    pub extended_claim: Option<String>,
    /// The workload of a held kind it belongs to (a Job, a JobSet, an MPIJob; its name is its
    /// group's) and where in it the pod is (boxed: plain pods pay one pointer).
    pub place: Option<Box<PodPlace>>,
    /// The member it fills (set by muster's binding).
    pub member: Option<u32>,
    pub deleting: bool,
    /// Plain pods: the group (label muster.dev/group).
    pub group: Option<String>,
    /// Plain pods: the member set it names (label muster.dev/set), boxed: other pods pay one
    /// pointer.
    pub set: Option<Box<PodSet>>,
    /// Plain pods: the group's members as their labels say (muster.dev/group-size and
    /// group-min), or why they cannot be read (boxed: other pods pay one pointer).
    pub members: Option<Box<Result<Members, String>>>,
    /// Plain pods: label muster.dev/queue.
    pub queue: Option<String>,
    /// Plain pods: spec.priorityClassName.
    pub priority_class: Option<String>,
    /// Plain pods: annotation muster.dev/duration-seconds.
    pub duration: Option<u32>,
    /// Plain pods: where the pod asks to run, or why that cannot be read.
    pub placement: Option<Box<Result<Placement, String>>>,
    /// Plain pods: the topology constraint of its annotations (for a Kubernetes PodGroup's pods,
    /// the webhook writes the PodGroup's there), or why it cannot be read.
    pub topology: Option<Box<Result<TopologyConstraint, String>>>,
    /// Held by muster's scheduling gate (muster.dev/admission).
    pub gated: bool,
    /// Plain pods: the PodGroup its group (or its set, in a CompositePodGroup) stands for, if
    /// any: the pod names it in `spec.schedulingGroup` (Kubernetes') or its group came from the
    /// accepted pod-group alias label (scheduler-plugins').
    pub pod_group: Option<PodGroupApi>,
    /// metadata.creationTimestamp, Unix seconds.
    pub created: i64,
}

/// The PodGroup API a plain pod's group stands for. Its gang is a minimum, not a size: pods
/// beyond it join the group once it runs, as room allows, as the scheduler of that API places
/// them (kube-scheduler's gang scheduling; scheduler-plugins' coscheduling, past minMember).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodGroupApi {
    /// `scheduling.k8s.io` PodGroup, named in `spec.schedulingGroup`: muster also keeps its
    /// status as kube-scheduler would.
    Kubernetes,
    /// `scheduling.x-k8s.io` PodGroup, named by the pod-group alias label.
    SchedulerPlugins,
}

/// The member set a plain pod names, as its labels and annotations say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodSet {
    /// Label muster.dev/set.
    pub name: String,
    /// Label muster.dev/set-size, unread.
    pub size: Option<String>,
    /// Label muster.dev/set-min, unread.
    pub min: Option<String>,
    /// Annotation muster.dev/set-topology, unread.
    pub topology: Option<String>,
    /// Annotation muster.dev/subgroup.
    pub subgroup: Option<String>,
    /// Annotation muster.dev/subgroup-topology, unread.
    pub subgroup_topology: Option<String>,
}

impl PodView {
    /// What its containers ask of extended resources devices may serve, if any.
    pub fn extended(&self) -> Option<&muster_k8s::dra::ExtendedAsks> {
        self.devices.as_deref().map(|d| &d.extended).filter(|e| !e.is_empty())
    }

    /// The name of the member set it names.
    pub fn set_name(&self) -> Option<&str> {
        self.set.as_deref().map(|s| s.name.as_str())
    }

    /// Whether it holds capacity on its node: bound and not finished.
    pub fn holds_capacity(&self) -> bool {
        self.node.is_some() && !self.phase.is_terminal()
    }

    /// namespace/name of its workload, namespace/group for plain pods.
    pub fn group_key(&self) -> Option<GroupKey> {
        self.workload().or(self.group.as_deref()).map(|g| GroupKey::new(&self.namespace, g))
    }

    /// The name of the workload it belongs to.
    pub fn workload(&self) -> Option<&str> {
        self.place.as_ref().map(|p| p.workload.as_str())
    }

    /// Whether it is a pod of a plain-pod group (no workload).
    pub fn is_plain(&self) -> bool {
        self.place.is_none() && self.group.is_some()
    }
}

pub fn pod_view(pod: &Pod) -> Option<PodView> {
    let meta = &pod.metadata;
    let spec = pod.spec.as_ref()?;
    let status = pod.status.as_ref();
    let phase = match status.and_then(|s| s.phase.as_deref()) {
        Some("Running") => PodPhase::Running,
        Some("Succeeded") => PodPhase::Succeeded,
        Some("Failed") => PodPhase::Failed,
        _ => PodPhase::Pending,
    };
    let ready = status
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True");
    let place = place_of(meta).map(|(_, place)| Box::new(place));
    let annotation = |k: &str| meta.annotations.as_ref().and_then(|a| a.get(k)).and_then(|v| v.parse().ok());
    let label = |k: &str| meta.labels.as_ref().and_then(|l| l.get(k));
    // Only pods of no held workload form plain groups.
    let group = label(labels::GROUP).filter(|_| place.is_none()).cloned();
    let plain = group.is_some();
    let gated = spec.scheduling_gates.iter().flatten().any(|g| g.name == labels::SCHEDULING_GATE);
    let (requests, uncountable) = match pod::requests(spec) {
        Ok(r) => (r.into_iter().collect(), None),
        Err(e) => (Vec::new(), Some(Box::new(e.under("spec").to_string()))),
    };
    let ours = spec.scheduler_name.as_deref() == Some(labels::SCHEDULER_NAME);
    let unsupported = Some(unsupported_fields(spec, "spec")).filter(|u| ours && !u.is_empty());
    let claim_statuses = status.and_then(|s| s.resource_claim_statuses.as_ref()).into_iter().flatten();
    let claims = PodClaims {
        wanted: spec.resource_claims.iter().flatten().map(|c| c.name.clone()).collect(),
        made: claim_statuses.filter_map(|c| Some((c.name.clone(), c.resource_claim_name.clone()?))).collect(),
    };
    Some(PodView {
        uid: meta.uid.clone()?,
        namespace: meta.namespace.clone()?,
        name: meta.name.clone()?,
        node: spec.node_name.clone().filter(|n| !n.is_empty()),
        ours,
        unsupported: unsupported.map(|u| Box::new(u.join("; "))),
        claims: Some(claims).filter(|c| ours && !c.wanted.is_empty()).map(Box::new),
        // A claim by name is refused as unsupported (above): such a pod asks nothing here.
        devices: PodDevices::of(spec, "spec").ok().filter(|d| ours && !d.is_empty()).map(Box::new),
        extended_claim: status
            .and_then(|s| s.extended_resource_claim_status.as_ref())
            .map(|s| s.resource_claim_name.clone()),
        phase,
        ready,
        requests,
        uncountable,
        place,
        member: annotation(MEMBER),
        deleting: meta.deletion_timestamp.is_some(),
        members: plain.then(|| Box::new(plain_members(meta.labels.as_ref()))),
        queue: label(labels::QUEUE).filter(|_| plain).cloned(),
        priority_class: spec.priority_class_name.clone().filter(|_| plain),
        duration: annotation(labels::DURATION).filter(|_| plain),
        placement: plain.then(|| Box::new(placement(spec, "spec"))),
        topology: annotated_topology(meta.annotations.as_ref()).transpose().filter(|_| plain).map(Box::new),
        pod_group: if native_pod_group_name(spec).is_some_and(|pg| {
            group.as_deref() == Some(pg) || label(labels::SET).filter(|_| plain).is_some_and(|s| s == pg)
        }) {
            Some(PodGroupApi::Kubernetes)
        } else if plain && group.is_some() && label(labels::POD_GROUP_ALIAS) == group.as_ref() {
            Some(PodGroupApi::SchedulerPlugins)
        } else {
            None
        },
        set: label(labels::SET).filter(|_| plain).map(|name| {
            let annotation = |k: &str| meta.annotations.as_ref().and_then(|a| a.get(k)).cloned();
            Box::new(PodSet {
                name: name.clone(),
                size: label(labels::SET_SIZE).cloned(),
                min: label(labels::SET_MIN).cloned(),
                topology: annotation(labels::SET_TOPOLOGY),
                subgroup: annotation(labels::SUBGROUP),
                subgroup_topology: annotation(labels::SUBGROUP_TOPOLOGY),
            })
        }),
        group,
        gated,
        created: meta.creation_timestamp.as_ref().map_or(0, |t| t.0.as_second()),
    })
}

/// The Group object of a plain-pod group, from one of its pods: `group-size` members (at least
/// `group-min`), each with the pod's requests. No owner: muster deletes the object once the
/// group's pods are gone. The group's pods run where this pod asks to (nodeSelector, required
/// node affinity, tolerations).
pub fn plain_group_spec(pod: &PodView) -> Result<GroupObjectSpec, String> {
    let group = pod.group.as_deref().ok_or("not a pod of a plain group")?;
    if let Some(why) = &pod.uncountable {
        return Err(format!("pod {}: {why}", pod.name));
    }
    let queue = pod.queue.clone().ok_or_else(|| {
        format!("pod {} of group {group} has no {} label: the group has no queue", pod.name, labels::QUEUE)
    })?;
    let members = match pod.members.as_deref() {
        Some(Ok(m)) => *m,
        Some(Err(e)) => return Err(format!("pod {}: {e}", pod.name)),
        None => Members { min: 1, max: None },
    };
    let placement = match pod.placement.as_deref() {
        Some(Err(e)) => return Err(format!("pod {}: {e}", pod.name)),
        Some(Ok(p)) => p.clone(),
        None => Placement::default(),
    };
    let topology = pod.topology.as_deref().cloned().transpose().map_err(|e| format!("pod {}: {e}", pod.name))?;
    Ok(GroupObjectSpec {
        queue,
        members,
        resources: requests_to_resources(pod.requests.iter().map(|(r, a)| (r, a))),
        devices: Vec::new(),
        node_selector: placement.node_selector,
        affinity: placement.affinity,
        tolerations: placement.tolerations,
        topology,
        priority_class_name: pod.priority_class.clone(),
        duration_seconds: pod.duration.map(i64::from),
        // Plain groups are not offered it: a deleted plain pod is not made again.
        shrinkable: false,
        owner: None,
        sets: Vec::new(),
        subgroups: Vec::new(),
    })
}

/// The Group object of a plain group whose pods name their sets (label `muster.dev/set`), from
/// all its `pods` (the group starts whole, so all of them exist): a set per name, in name order,
/// of as many members as pods name it, each asking what the set's first pod asks; the rest from
/// the group's first pod. A pod that disagrees with its set's first pod, or a set's first pod
/// with the group's on what the whole group shares, is named. Sets alike in requests and
/// placement are one set of alike members, as a workload's are.
pub fn plain_sets_spec(pods: &[&PodView]) -> Result<GroupObjectSpec, String> {
    let mut ordered: Vec<&PodView> = pods.to_vec();
    ordered.sort_by_key(|p| (p.created, p.name.clone()));
    let first = *ordered.first().ok_or("no pods")?;
    let group = first.group.as_deref().unwrap_or_default();
    if let Some(unnamed) = ordered.iter().find(|p| p.set.is_none()) {
        return Err(format!(
            "pod {} of group {group} names no set (label {}) while other pods of the group do; label every pod \
             of the group with its set, or none",
            unnamed.name,
            labels::SET
        ));
    }
    let spec = plain_group_spec(first)?;
    if spec.members.max.is_some_and(|max| max != spec.members.min) {
        return Err(format!(
            "pod {}: a group of sets starts with each set's minimum (label {} on the set's pods, default its \
             size); remove the label {}",
            first.name,
            labels::SET_MIN,
            labels::GROUP_MIN
        ));
    }
    let mut by_set: BTreeMap<&str, Vec<&PodView>> = BTreeMap::new();
    for p in &ordered {
        by_set.entry(p.set_name().unwrap_or_default()).or_default().push(p);
    }
    let mut sets = Vec::new();
    let mut set_devices = Vec::new();
    for (name, members) in &by_set {
        let set_first = members[0];
        let set_spec = plain_group_spec(set_first)?;
        // What the whole group shares is the group's first pod's.
        let mut shared = set_spec.clone();
        (shared.resources, shared.node_selector) = (spec.resources.clone(), spec.node_selector.clone());
        (shared.affinity, shared.tolerations) = (spec.affinity.clone(), spec.tolerations.clone());
        if let Some(d) = plain_pods_differ(first, &spec, set_first, Ok(&shared)) {
            return Err(d);
        }
        for p in &members[1..] {
            let differ = plain_pods_differ(set_first, &set_spec, p, plain_group_spec(p).as_ref());
            if let Some(d) = differ.or_else(|| devices_differ(set_first, p)) {
                return Err(format!("{d} (pods of set {name} must agree)"));
            }
        }
        let SetLabels { size, min, topology } = set_labels(name, members)?;
        let size = size.unwrap_or(members.len() as i64);
        let min = min.unwrap_or(size);
        if min > size {
            return Err(format!(
                "pod {}: label {}: {min} is more than the {size} members of set {name}; set it from 1 to {size}",
                members[0].name,
                labels::SET_MIN
            ));
        }
        set_devices.push(set_first.devices.clone());
        let optional = min == 0;
        let min = if optional { size } else { min };
        sets.push(GroupSet {
            name: name.to_string(),
            optional,
            members: Members { min, max: (min < size).then_some(size) },
            resources: set_spec.resources,
            devices: Vec::new(),
            node_selector: set_spec.node_selector,
            affinity: set_spec.affinity,
            tolerations: set_spec.tolerations,
            topology,
        });
    }
    let alike = sets.windows(2).all(|w| {
        (&w[0].resources, &w[0].node_selector, &w[0].affinity, &w[0].tolerations, &w[0].topology)
            == (&w[1].resources, &w[1].node_selector, &w[1].affinity, &w[1].tolerations, &w[1].topology)
    }) && set_devices.windows(2).all(|w| w[0] == w[1]);
    let subgroups = plain_subgroups(&by_set)?;
    let elastic = sets.iter().any(|s| s.members.max.is_some() || s.optional);
    if alike && subgroups.is_empty() && !elastic {
        return Ok(spec);
    }
    // The group's bounds are its sets' sums, its minimum without the optional sets.
    let min: i64 = sets.iter().filter(|s| !s.optional).map(|s| s.members.min).sum();
    let max: i64 = sets.iter().map(|s| s.members.max.unwrap_or(s.members.min)).sum();
    let members = if elastic { Members { min, max: Some(max) } } else { spec.members };
    Ok(GroupObjectSpec {
        members,
        resources: BTreeMap::new(),
        node_selector: BTreeMap::new(),
        affinity: Vec::new(),
        tolerations: Vec::new(),
        sets,
        subgroups,
        ..spec
    })
}

/// What a set's pods say of it (labels muster.dev/set-size and set-min, annotation
/// muster.dev/set-topology); None where they say nothing.
struct SetLabels {
    size: Option<i64>,
    min: Option<i64>,
    topology: Option<TopologyConstraint>,
}

/// A set's [`SetLabels`], which its pods must agree on.
fn set_labels(name: &str, pods: &[&PodView]) -> Result<SetLabels, String> {
    let first = pods[0].set.as_deref().ok_or("a pod of a set names it")?;
    for p in &pods[1..] {
        let theirs = p.set.as_deref().ok_or("a pod of a set names it")?;
        let agree = [
            (labels::SET_SIZE, &first.size, &theirs.size),
            (labels::SET_MIN, &first.min, &theirs.min),
            (labels::SET_TOPOLOGY, &first.topology, &theirs.topology),
            (labels::SUBGROUP, &first.subgroup, &theirs.subgroup),
            (labels::SUBGROUP_TOPOLOGY, &first.subgroup_topology, &theirs.subgroup_topology),
        ];
        for (key, a, b) in agree {
            if a != b {
                let show = |v: &Option<String>| v.as_ref().map_or("unset".to_string(), |v| format!("{v:?}"));
                return Err(format!(
                    "pod {}: {key} is {} where pod {} of set {name} has {}; the pods of a set must agree",
                    p.name,
                    show(b),
                    pods[0].name,
                    show(a)
                ));
            }
        }
    }
    let count = |key: &str, value: &Option<String>, least: i64, what: &str| -> Result<Option<i64>, String> {
        let Some(v) = value.as_deref() else { return Ok(None) };
        let n = v.trim().parse::<i64>().ok().filter(|n| (least..=i64::from(MAX_MEMBERS)).contains(n));
        n.map(Some).ok_or_else(|| {
            format!(
                "pod {}: label {key}: {v:?} is not a number of members from {least} to {MAX_MEMBERS}; set it to the \
                 {what} of set {name}",
                pods[0].name
            )
        })
    };
    let size = count(labels::SET_SIZE, &first.size, 1, "members")?;
    // 0: an optional set, all its pods or none.
    let min = count(labels::SET_MIN, &first.min, 0, "fewest members")?;
    let topology = first.topology.as_deref().map(|l| required_level(pods[0], labels::SET_TOPOLOGY, l)).transpose()?;
    Ok(SetLabels { size, min, topology })
}

/// The required constraint of the level a pod's annotation `key` names.
fn required_level(pod: &PodView, key: &str, level: &str) -> Result<TopologyConstraint, String> {
    if !muster_graph::names::is_dns_label(level) {
        return Err(format!(
            "pod {}: annotation {key}: {level:?} is not a topology level; name one, such as rack, block or zone",
            pod.name
        ));
    }
    Ok(TopologyConstraint {
        level: level.to_string(),
        mode: TopologyMode::Required,
        within: None,
        weights: BTreeMap::new(),
    })
}

/// The sub-groups the sets of a plain group name (annotations muster.dev/subgroup and
/// muster.dev/subgroup-topology), from each set's first pod: every set of a sub-group must name
/// the same level.
fn plain_subgroups(by_set: &BTreeMap<&str, Vec<&PodView>>) -> Result<Vec<GroupSubGroup>, String> {
    let mut subgroups: Vec<(GroupSubGroup, &PodView)> = Vec::new();
    for (set, pods) in by_set {
        let pod = pods[0];
        let Some(named) = pod.set.as_deref() else { continue };
        let (Some(name), level) = (&named.subgroup, &named.subgroup_topology) else {
            if named.subgroup_topology.is_some() {
                return Err(format!(
                    "pod {}: annotation {} names no sub-group to keep within a level; add {} too, or drop it",
                    pod.name,
                    labels::SUBGROUP_TOPOLOGY,
                    labels::SUBGROUP
                ));
            }
            continue;
        };
        let Some(level) = level else {
            return Err(format!(
                "pod {}: annotation {} names sub-group {name:?} without a level; add {} (such as rack)",
                pod.name,
                labels::SUBGROUP,
                labels::SUBGROUP_TOPOLOGY
            ));
        };
        let topology = required_level(pod, labels::SUBGROUP_TOPOLOGY, level)?;
        match subgroups.iter_mut().find(|(g, _)| g.name == *name) {
            Some((g, _)) if g.topology == topology => g.sets.push(set.to_string()),
            Some((g, other)) => {
                return Err(format!(
                    "pod {}: annotation {} is {level:?} where pod {} of sub-group {name} has {:?}; the sets of a \
                     sub-group must agree",
                    pod.name,
                    labels::SUBGROUP_TOPOLOGY,
                    other.name,
                    g.topology.level
                ));
            }
            None => subgroups.push((GroupSubGroup { name: name.clone(), sets: vec![set.to_string()], topology }, pod)),
        }
    }
    Ok(subgroups.into_iter().map(|(g, _)| g).collect())
}

/// How pod `p` of a plain group differs from the group's first pod `first`, whose Group spec
/// is `spec` (`theirs` is `p`'s, or why it has none), naming the field and both values; None
/// when they agree.
/// How pod `p` of a plain group (or set) asks for devices otherwise than `first`, which gives
/// them for all: its claims or its extended resources.
pub fn devices_differ(first: &PodView, p: &PodView) -> Option<String> {
    (first.devices != p.devices).then(|| {
        format!(
            "pod {}: spec.resourceClaims or extended resources differ from pod {}'s; the pods of a group (or of a \
             set) ask for the same devices",
            p.name, first.name
        )
    })
}

pub fn plain_pods_differ(
    first: &PodView,
    spec: &GroupObjectSpec,
    p: &PodView,
    theirs: Result<&GroupObjectSpec, &String>,
) -> Option<String> {
    let theirs = match theirs {
        Err(e) => return Some(e.clone()),
        Ok(t) if t == spec => return None,
        Ok(t) => t,
    };
    let group = p.group.as_deref().unwrap_or_default();
    let (field, mine, yours) = if theirs.resources != spec.resources {
        let show = |v: &PodView| pod::show_all(v.requests.iter().map(|(r, a)| (r, a)));
        ("spec.containers[*].resources", show(p), show(first))
    } else if theirs.node_selector != spec.node_selector {
        ("spec.nodeSelector", format!("{:?}", theirs.node_selector), format!("{:?}", spec.node_selector))
    } else if theirs.affinity != spec.affinity {
        ("spec.affinity.nodeAffinity", format!("{:?}", theirs.affinity), format!("{:?}", spec.affinity))
    } else if theirs.tolerations != spec.tolerations {
        ("spec.tolerations", format!("{:?}", theirs.tolerations), format!("{:?}", spec.tolerations))
    } else if theirs.members != spec.members {
        let show = |m: &Members| format!("{}..{}", m.min, m.max.unwrap_or(m.min));
        ("labels muster.dev/group-size and group-min", show(&theirs.members), show(&spec.members))
    } else if theirs.queue != spec.queue {
        ("label muster.dev/queue", theirs.queue.clone(), spec.queue.clone())
    } else if theirs.priority_class_name != spec.priority_class_name {
        let show = |c: &Option<String>| c.clone().unwrap_or_else(|| "none".into());
        ("spec.priorityClassName", show(&theirs.priority_class_name), show(&spec.priority_class_name))
    } else if theirs.topology != spec.topology {
        let show = |t: &Option<TopologyConstraint>| {
            t.as_ref().map_or("none".into(), |t| match &t.within {
                Some(w) => format!("{:?} {} within {w}", t.mode, t.level),
                None => format!("{:?} {}", t.mode, t.level),
            })
        };
        (
            "annotations muster.dev/required-topology and preferred-topology",
            show(&theirs.topology),
            show(&spec.topology),
        )
    } else {
        let show = |d: Option<i64>| d.map_or("none".into(), |d| d.to_string());
        ("annotation muster.dev/duration-seconds", show(theirs.duration_seconds), show(spec.duration_seconds))
    };
    Some(format!(
        "{field}: pod {} of group {group} has {mine}, but pod {} (the first, which sized the group) has {yours}",
        p.name, first.name
    ))
}

/// What a pod asks beyond one member of its group (`member`), as `cpu 7 where a member has cpu
/// 10m`; None when it fits within the member.
pub fn exceeds(requests: &[(String, u64)], member: &[(String, u64)]) -> Option<String> {
    let has = |r: &str| member.iter().find(|(m, _)| m == r).map_or(0, |(_, a)| *a);
    let over: Vec<String> = requests
        .iter()
        .filter(|(r, a)| *a > has(r))
        .map(|(r, a)| {
            let show = |v: u64| pod::show(r, u128::from(v));
            format!("{r} {} where a member has {r} {}", show(*a), show(has(r)))
        })
        .collect();
    (!over.is_empty()).then(|| over.join(", "))
}

/// What the controller keeps of a workload of a held kind (a Job, a JobSet, an MPIJob) with the
/// queue label: the group it is and how it is held.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkloadView {
    /// Its kind (batch/v1 Job, JobSet, ...).
    pub kind: &'static workload::Kind,
    /// The kind of the object of its name that muster suspends and resumes: its own, or a
    /// TrainJob's for the JobSet the trainer makes ([`workload::Workload::held_by`]).
    pub hold: &'static workload::Kind,
    pub key: GroupKey,
    pub uid: String,
    pub queue: String,
    pub suspended: bool,
    /// Some(succeeded) once the Job finished.
    pub finished: Option<bool>,
    pub resume_requested: bool,
    /// The user suspended it while it ran (stamped by the webhook).
    pub suspend_requested: bool,
    pub created: i64,
    /// Being deleted (its Group object goes with it: not to be recreated).
    pub deleting: bool,
    /// The Group object muster keeps for it, or why the Job cannot be one; its devices are
    /// filled from `devices` by the brain, which reads the templates and classes.
    pub group: Result<GroupObjectSpec, String>,
    /// What one pod of each of the Group's sets asks of devices (Shape::set_devices).
    pub devices: Vec<PodDevices>,
    /// How its pods number the group's members.
    pub layout: Vec<SetLayout>,
    /// The field of a deadline that counts from its release, if set ([`Workload::release_deadline`]).
    pub release_deadline: Option<String>,
    /// How many of its pods succeeding finish it ([`Workload::succeeded_pods_to_finish`]).
    pub succeeded_pods_to_finish: Option<u32>,
}

impl WorkloadView {
    /// The member a pod of the workload fills, where the pod says (its index in its pod set).
    pub fn member_of(&self, place: &PodPlace) -> Option<u32> {
        member_of(&self.layout, place)
    }

    /// The members of the pod's set (for a pod without an index).
    pub fn set_members(&self, place: &PodPlace) -> Option<std::ops::Range<u32>> {
        set_members(&self.layout, place)
    }
}

pub fn job_view(job: &Job) -> Option<WorkloadView> {
    workload_view(job)
}

/// The view of a workload of any held kind with the queue label.
pub fn workload_view<W: Workload>(w: &W) -> Option<WorkloadView> {
    let queue = w.queue()?.to_string();
    if w.part_of_another() {
        return None;
    }
    let meta = w.meta();
    let (namespace, name, uid) = (meta.namespace.clone()?, meta.name.clone()?, meta.uid.clone()?);
    let annotated = |k: &str| meta.annotations.as_ref().is_some_and(|a| a.contains_key(k));
    let shape = workload::shape(w);
    Some(WorkloadView {
        kind: W::kind(),
        hold: w.held_by(),
        key: GroupKey::new(&namespace, &name),
        uid,
        suspended: w.held(),
        finished: w.finished(),
        resume_requested: annotated(labels::RESUME_REQUESTED),
        suspend_requested: annotated(labels::SUSPEND_REQUESTED),
        created: meta.creation_timestamp.as_ref().map_or(0, |t| t.0.as_second()),
        deleting: meta.deletion_timestamp.is_some(),
        devices: shape.as_ref().map(|s| s.set_devices()).unwrap_or_default(),
        group: shape.map(|s| s.group_spec(w, &queue)).map_err(|e| e.join("; ")),
        layout: w.pod_sets().map(|sets| workload::place::layout(&sets)).unwrap_or_default(),
        release_deadline: w.release_deadline(),
        succeeded_pods_to_finish: w.succeeded_pods_to_finish(),
        queue,
    })
}

#[cfg(test)]
mod tests;
