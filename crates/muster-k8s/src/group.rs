//! The namespaced `Group`: one per job group, owned by its job. The spec mirrors the group form of
//! `muster_graph` ([`GroupSpec::to_request`] converts); the status is what muster reports: phase,
//! conditions, allocation, estimated start and requeue state.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use muster_graph::GroupRequest;
use muster_graph::InputError;
use muster_graph::dra::{DeviceRequest, check_devices};
use muster_graph::filter::{
    MatchExpression, NodeFilter, NodeSelectorTerm as EngineTerm, Toleration as EngineToleration,
};
/// The operators are the matcher's own (with their schema), so a Group says what the graph reads.
pub use muster_graph::filter::{SelectorOperator as NodeSelectorOperator, TolerationOperator};
use muster_graph::jobspec::{
    ConstraintMode, MAX_DURATION, MAX_MEMBERS, MAX_TOPOLOGY_WEIGHT, MemberSet, SHRINKABLE_NEEDS_ELASTIC, SubGroup,
    TopologyConstraint as EngineTopology,
};
use muster_queue::GroupState;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{Quantity, labels};

/// A group of identical members that muster places all at once.
#[derive(CustomResource, Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "muster.dev",
    version = "v1alpha1",
    kind = "Group",
    namespaced,
    doc = "A muster Group: one job group that muster places all at once, and where it is in its life.",
    status = "GroupStatus",
    category = "muster",
    derive = "PartialEq",
    printcolumn = r#"{"name": "Queue", "type": "string", "jsonPath": ".spec.queue"}"#,
    printcolumn = r#"{"name": "Min", "type": "integer", "jsonPath": ".spec.members.min"}"#,
    printcolumn = r#"{"name": "Max", "type": "integer", "jsonPath": ".spec.members.max"}"#,
    printcolumn = r#"{"name": "Phase", "type": "string", "jsonPath": ".status.phase"}"#,
    printcolumn = r#"{"name": "Position", "type": "integer", "jsonPath": ".status.queuePosition"}"#,
    printcolumn = r#"{"name": "Estimated Start", "type": "date", "jsonPath": ".status.estimatedStart"}"#,
    printcolumn = r#"{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct GroupSpec {
    /// The Queue the group waits in.
    #[schemars(length(min = 1))]
    pub queue: String,
    pub members: Members,
    /// Requests of one member by resource name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub resources: BTreeMap<String, Quantity>,
    /// Devices one member takes of those DRA drivers publish (its pod's resource claims).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<DeviceRequest>,
    /// Labels a node must have (the pods' nodeSelector).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    /// Required node affinity: terms are ORed, the expressions of a term ANDed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub affinity: Vec<NodeSelectorTerm>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,
    /// All members within one domain of a topology level.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology: Option<TopologyConstraint>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class_name: Option<String>,
    /// Expected run time in seconds, for estimated starts; absent or 0 = until done.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub duration_seconds: Option<i64>,
    /// An elastic group that may give back members above its minimum while it runs (their pods
    /// are deleted) so that the first group in line starts sooner.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub shrinkable: bool,
    /// The job (or JobSet, or pod group) the group stands for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<OwnerReference>,
    /// Members that differ (a launcher and workers, a head and worker groups), set by set;
    /// `members` then holds their sums, and `resources`, `nodeSelector`, `affinity` and
    /// `tolerations` are said per set. Any set may be elastic: a member count fills every set's
    /// minimum, then each set's extra members in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sets: Vec<GroupSet>,
    /// Sets kept within one domain of a level of their own, inside the group's: a gang inside
    /// the gang (a prefill leader and its workers in one rack, a decode leader and its workers
    /// in another). Only beside `sets`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subgroups: Vec<GroupSubGroup>,
}

/// Sets of a Group that are a gang of their own inside it, within one domain of their level.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GroupSubGroup {
    #[schemars(length(min = 1))]
    pub name: String,
    /// The names of its sets; a set belongs to one sub-group at most.
    #[schemars(length(min = 1))]
    pub sets: Vec<String>,
    pub topology: TopologyConstraint,
}

/// One set of a Group's members: alike among themselves.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GroupSet {
    /// The set's name: the workload's pod set (`launcher`, `worker`, a Ray worker group's name).
    #[schemars(length(min = 1))]
    pub name: String,
    pub members: Members,
    /// Requests of one member of the set by resource name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub resources: BTreeMap<String, Quantity>,
    /// Devices one member of the set takes of those DRA drivers publish.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<DeviceRequest>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub affinity: Vec<NodeSelectorTerm>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,
    /// The set's members within one domain of a level, inside the group's own domain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology: Option<TopologyConstraint>,
    /// A gang of its own the Group may start without (one of k of n replicas beyond the first
    /// k): all `members.min` members, placed together, or none; the Group takes it on later as
    /// room comes. The Group's `members.min` leaves it out.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub optional: bool,
}

/// How many members: exactly `min`, or elastic up to `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Members {
    #[schemars(range(min = 1, max = 1_000_000))]
    pub min: i64,
    /// Absent = min.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1_000_000))]
    pub max: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeSelectorTerm {
    pub match_expressions: Vec<NodeSelectorRequirement>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct NodeSelectorRequirement {
    pub key: String,
    pub operator: NodeSelectorOperator,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Toleration {
    /// Empty with operator Exists tolerates every taint.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub key: String,
    /// Default Equal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator: Option<TolerationOperator>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub value: String,
    /// Absent tolerates every effect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effect: Option<TaintEffect>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum TaintEffect {
    NoSchedule,
    PreferNoSchedule,
    NoExecute,
}

impl TaintEffect {
    /// The name Kubernetes (and `muster_graph`) gives the effect.
    pub fn as_str(self) -> &'static str {
        match self {
            TaintEffect::NoSchedule => "NoSchedule",
            TaintEffect::PreferNoSchedule => "PreferNoSchedule",
            TaintEffect::NoExecute => "NoExecute",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TopologyConstraint {
    /// A level of the resource graph: rack, block, zone, ...
    #[schemars(length(min = 1))]
    pub level: String,
    pub mode: TopologyMode,
    /// For a preferred level: an enclosing level the members must share even when the preferred
    /// one cannot hold them (prefer a rack, require its block).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub within: Option<String>,
    /// For a preferred level: several levels (`level`, the innermost, among them) with what
    /// sharing a domain of each is worth, 1 to 100. When no domain of `level` holds the group, the
    /// placement where the most member pairs share domains, weighted so, is kept.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub weights: BTreeMap<String, u32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TopologyMode {
    Required,
    Preferred,
}

/// The topology constraint an object asks for with [`labels::REQUIRED_TOPOLOGY`],
/// [`labels::PREFERRED_TOPOLOGY`], or both (the preferred level kept within the required one);
/// the error names the annotation and the fix. Whether the levels exist, and whether the required
/// one encloses the preferred one, is the engine's to say (the levels are the cluster's).
pub fn annotated_topology(
    annotations: Option<&BTreeMap<String, String>>,
) -> Result<Option<TopologyConstraint>, String> {
    let level = |key: &str| -> Result<Option<String>, String> {
        let Some(level) = annotations.and_then(|a| a.get(key)) else { return Ok(None) };
        if !muster_graph::names::is_dns_label(level) {
            return Err(format!(
                "metadata.annotations[{key}]: {level:?} is not a topology level; name one, such as rack, block or zone"
            ));
        }
        Ok(Some(level.clone()))
    };
    let preferred = match annotations.and_then(|a| a.get(labels::PREFERRED_TOPOLOGY)) {
        Some(v) if v.contains(':') => Some(weighted_levels(v)?),
        _ => level(labels::PREFERRED_TOPOLOGY)?.map(|level| (level, BTreeMap::new())),
    };
    let constraint = |level, mode, within, weights| TopologyConstraint { level, mode, within, weights };
    Ok(match (level(labels::REQUIRED_TOPOLOGY)?, preferred) {
        (None, None) => None,
        (Some(level), None) => Some(constraint(level, TopologyMode::Required, None, BTreeMap::new())),
        (None, Some((level, weights))) => Some(constraint(level, TopologyMode::Preferred, None, weights)),
        (Some(required), Some((preferred, _))) if required == preferred => {
            return Err(format!(
                "metadata.annotations: {} and {} both name {required:?}; keep one, or prefer a level inside the \
                 required one (preferred rack, required block)",
                labels::REQUIRED_TOPOLOGY,
                labels::PREFERRED_TOPOLOGY
            ));
        }
        (Some(required), Some((preferred, weights))) => {
            Some(constraint(preferred, TopologyMode::Preferred, Some(required), weights))
        }
    })
}

/// Reads `rack:10,block:3` (levels of [`labels::TOPOLOGY_LEVELS`], weights 1 to 100) into the
/// innermost level named and the weights.
fn weighted_levels(value: &str) -> Result<(String, BTreeMap<String, u32>), String> {
    let field = format!("metadata.annotations[{}]", labels::PREFERRED_TOPOLOGY);
    let known: Vec<&str> = labels::TOPOLOGY_LEVELS.iter().map(|(l, _)| *l).collect();
    let mut weights = BTreeMap::new();
    for part in value.split(',') {
        let (level, weight) = part.split_once(':').unwrap_or((part, ""));
        let (level, weight) = (level.trim(), weight.trim());
        if !known.contains(&level) {
            return Err(format!(
                "{field}: {level:?} is not a topology level; weigh levels of {known:?}, as rack:10,block:3"
            ));
        }
        let weight = weight.parse::<u32>().ok().filter(|w| (1..=MAX_TOPOLOGY_WEIGHT).contains(w)).ok_or_else(|| {
            format!("{field}: weight {weight:?} of {level:?} is not a whole number from 1 to {MAX_TOPOLOGY_WEIGHT}")
        })?;
        if weights.insert(level.to_string(), weight).is_some() {
            return Err(format!("{field}: {level:?} is weighted twice; give each level one weight"));
        }
    }
    let innermost = known.iter().rev().find(|l| weights.contains_key(**l)).expect("at least one level parsed");
    Ok((innermost.to_string(), weights))
}

/// The members of a plain pod group, as its pods' labels say: [`labels::GROUP_SIZE`] pods (absent:
/// 1), of which at least [`labels::GROUP_MIN`] (absent: all) start together. The one reading of
/// those labels, for the webhook and the controller; the error names the label and the fix.
pub fn plain_members(labels: Option<&BTreeMap<String, String>>) -> Result<Members, String> {
    let label = |k: &str| labels.and_then(|l| l.get(k));
    let field = |k: &str| format!("metadata.labels[{k}]");
    let parse = |v: &str| v.trim().parse::<i64>().ok().filter(|n| (1..=i64::from(MAX_MEMBERS)).contains(n));
    let size = match label(labels::GROUP_SIZE) {
        None => 1,
        Some(v) => parse(v).ok_or_else(|| {
            format!(
                "{}: {v:?} is not a whole number from 1 to {MAX_MEMBERS}; set it to the number of pods in the group",
                field(labels::GROUP_SIZE)
            )
        })?,
    };
    let min = match label(labels::GROUP_MIN) {
        None => size,
        Some(v) => parse(v).filter(|m| *m <= size).ok_or_else(|| {
            format!(
                "{}: {v:?} is not a whole number from 1 to the group size {size}; set the fewest pods the group can \
                 start with, or remove it for a group that starts with all {size}",
                field(labels::GROUP_MIN)
            )
        })?,
    };
    Ok(Members { min, max: (size != min).then_some(size) })
}

/// The expected run time an object states with [`labels::DURATION`], in seconds; the error names
/// the annotation and the fix.
pub fn annotated_duration(annotations: Option<&BTreeMap<String, String>>) -> Result<Option<i64>, String> {
    let Some(v) = annotations.and_then(|a| a.get(labels::DURATION)) else { return Ok(None) };
    v.trim()
        .parse::<u64>()
        .ok()
        .filter(|d| *d <= MAX_DURATION)
        .and_then(|d| i64::try_from(d).ok())
        .map(Some)
        .ok_or_else(|| {
            format!(
                "metadata.annotations[{}]: {v:?} is not a whole number of seconds from 0 to {MAX_DURATION}; set the \
                 expected run time in seconds, such as \"3600\" (or remove it)",
                labels::DURATION
            )
        })
}

/// The object a group stands for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OwnerReference {
    pub api_version: String,
    pub kind: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
}

/// The condition types of a group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupConditionType {
    Queued,
    Reserved,
    Admitted,
    PodsReady,
    Finished,
    Evicted,
    Unsatisfiable,
    /// True once muster ended the group for running past its declared run time and the grace
    /// (its queue's `runTimeLimit`).
    RunTimeExceeded,
}

impl GroupConditionType {
    pub fn as_str(self) -> &'static str {
        match self {
            GroupConditionType::Queued => "Queued",
            GroupConditionType::Reserved => "Reserved",
            GroupConditionType::Admitted => "Admitted",
            GroupConditionType::PodsReady => "PodsReady",
            GroupConditionType::Finished => "Finished",
            GroupConditionType::Evicted => "Evicted",
            GroupConditionType::Unsatisfiable => "Unsatisfiable",
            GroupConditionType::RunTimeExceeded => "RunTimeExceeded",
        }
    }
}

/// What muster reports about a group.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GroupStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<GroupState>,
    /// Kubernetes conditions of the types in `GroupConditionType`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// The node of each member, once admitted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allocation: Vec<MemberAllocation>,
    /// When the group is expected to start, while it waits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimated_start: Option<Time>,
    /// Position among the pending groups of its queue (1 = next), while it waits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_position: Option<u32>,
    /// Why the group is where it is, in plain words (the latest reason of the engine).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requeue: Option<RequeueState>,
    /// The spec generation this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct MemberAllocation {
    pub member: u32,
    pub node: String,
}

/// Requeues after evictions (readiness timeout, preemption, lost members).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RequeueState {
    /// Requeues so far.
    pub count: u32,
    /// When the group may be queued again; absent once it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requeue_at: Option<Time>,
}

impl GroupStatus {
    /// Sets a condition the Kubernetes way: `lastTransitionTime` moves only when the status
    /// changes; reason, message and observedGeneration are always updated.
    pub fn set_condition(
        &mut self,
        kind: GroupConditionType,
        status: bool,
        reason: &str,
        message: &str,
        generation: Option<i64>,
        now: Time,
    ) {
        let status = if status { "True" } else { "False" }.to_string();
        let new = Condition {
            type_: kind.as_str().to_string(),
            status,
            reason: reason.to_string(),
            message: message.to_string(),
            observed_generation: generation,
            last_transition_time: now,
        };
        match self.conditions.iter_mut().find(|c| c.type_ == new.type_) {
            Some(c) if c.status == new.status => {
                *c = Condition { last_transition_time: c.last_transition_time.clone(), ..new };
            }
            Some(c) => *c = new,
            None => self.conditions.push(new),
        }
    }

    /// The condition of a type, if set.
    pub fn condition(&self, kind: GroupConditionType) -> Option<&Condition> {
        self.conditions.iter().find(|c| c.type_ == kind.as_str())
    }
}

/// A Group's member bounds at `path` (`spec.members`), checked.
fn member_bounds(file: &str, path: &str, members: &Members) -> Result<(u32, u32), InputError> {
    let bound = |v: i64, field: &str| {
        u32::try_from(v).ok().filter(|v| (1..=MAX_MEMBERS).contains(v)).ok_or_else(|| {
            InputError::new(file, format!("{path}.{field}"), format!("{v} is out of range; allowed 1..={MAX_MEMBERS}"))
        })
    };
    let min = bound(members.min, "min")?;
    let max = bound(members.max.unwrap_or(members.min), "max")?;
    if max < min {
        return Err(InputError::new(file, format!("{path}.max"), format!("{max} is below min {min}")));
    }
    Ok((min, max))
}

/// One member's requests at `path` (`spec.resources`), in base units.
fn requests(file: &str, path: &str, resources: &BTreeMap<String, Quantity>) -> Result<Vec<(String, u64)>, InputError> {
    let mut out = Vec::new();
    for (r, q) in resources {
        let amount = q.amount(r).map_err(|m| InputError::new(file, format!("{path}.{r}"), m))?;
        if amount > 0 {
            out.push((r.clone(), amount));
        }
    }
    Ok(out)
}

/// One member's device requests at `path` (`spec.devices`), checked as the group form checks
/// them.
fn devices(file: &str, path: &str, devices: &[DeviceRequest]) -> Result<Vec<DeviceRequest>, InputError> {
    check_devices(devices).map_err(|(at, m)| InputError::new(file, format!("{path}{at}"), m))?;
    Ok(devices.to_vec())
}

/// Where members may run, from the fields under `at` (`spec`, `spec.sets[1]`).
fn node_filter(
    file: &str,
    at: &str,
    node_selector: &BTreeMap<String, String>,
    terms: &[NodeSelectorTerm],
    tolerations: &[Toleration],
) -> Result<NodeFilter, InputError> {
    let err = |path: String, message: &str| InputError::new(file, path, message);
    let mut affinity = Vec::new();
    for (ti, term) in terms.iter().enumerate() {
        let mut exprs = Vec::new();
        for (ei, e) in term.match_expressions.iter().enumerate() {
            let expr = MatchExpression { key: e.key.clone(), operator: e.operator, values: e.values.clone() };
            expr.validate().map_err(|m| err(format!("{at}.affinity[{ti}].matchExpressions[{ei}]"), &m))?;
            exprs.push(expr);
        }
        affinity.push(EngineTerm { match_expressions: exprs });
    }
    let mut engine_tolerations = Vec::new();
    for (i, t) in tolerations.iter().enumerate() {
        let toleration = EngineToleration {
            key: t.key.clone(),
            operator: t.operator.unwrap_or_default(),
            value: t.value.clone(),
            effect: t.effect.map(|e| e.as_str().to_string()),
        };
        toleration.validate().map_err(|(field, m)| err(format!("{at}.tolerations[{i}].{field}"), m))?;
        engine_tolerations.push(toleration);
    }
    Ok(NodeFilter { node_selector: node_selector.clone(), affinity, tolerations: engine_tolerations })
}

fn engine_topology(t: &TopologyConstraint) -> EngineTopology {
    EngineTopology {
        level: t.level.clone(),
        mode: match t.mode {
            TopologyMode::Required => ConstraintMode::Required,
            TopologyMode::Preferred => ConstraintMode::Preferred,
        },
        within: t.within.clone(),
        weights: t.weights.clone(),
    }
}

impl GroupSpec {
    /// The matcher's request for the group `name`. Errors name the field of the Group object, such
    /// as `spec.members.max` or `spec.resources.cpu`.
    pub fn to_request(&self, name: &str) -> Result<GroupRequest, InputError> {
        let file = format!("Group/{name}");
        let err = |path: String, message: String| InputError::new(&file, path, message);
        let (min_members, max_members) = member_bounds(&file, "spec.members", &self.members)?;
        let duration = match self.duration_seconds {
            None | Some(0) => None,
            Some(d) => Some(u64::try_from(d).ok().filter(|d| *d <= MAX_DURATION).ok_or_else(|| {
                err("spec.durationSeconds".into(), format!("{d} is out of range; allowed 0..={MAX_DURATION}"))
            })?),
        };
        if self.shrinkable && min_members == max_members {
            return Err(err("spec.shrinkable".into(), SHRINKABLE_NEEDS_ELASTIC.into()));
        }
        let request = GroupRequest {
            shrinkable: self.shrinkable,
            name: name.to_string(),
            min_members,
            max_members,
            requests: requests(&file, "spec.resources", &self.resources)?,
            devices: devices(&file, "spec.devices", &self.devices)?,
            filter: node_filter(&file, "spec", &self.node_selector, &self.affinity, &self.tolerations)?,
            members_per_node: None,
            exclusive: false,
            topology: self.topology.as_ref().map(engine_topology),
            // Kubernetes gives a pod no socket; the kubelet's topology manager aligns it.
            sockets: None,
            duration,
            policy: None,
            sets: Vec::new(),
            subgroups: Vec::new(),
            reservations: Vec::new(),
        };
        if self.sets.is_empty() {
            if !self.subgroups.is_empty() {
                return Err(err(
                    "spec.subgroups".into(),
                    "sub-groups gather sets; give the Group sets, or drop them".into(),
                ));
            }
            return Ok(request);
        }
        let beside = [
            ("resources", !self.resources.is_empty()),
            ("devices", !self.devices.is_empty()),
            ("nodeSelector", !self.node_selector.is_empty()),
            ("affinity", !self.affinity.is_empty()),
            ("tolerations", !self.tolerations.is_empty()),
        ];
        if let Some((field, _)) = beside.iter().find(|(_, set)| *set) {
            return Err(err(format!("spec.{field}"), "a Group of sets says this in each set; move it there".into()));
        }
        let mut sets = Vec::new();
        for (i, s) in self.sets.iter().enumerate() {
            let at = format!("spec.sets[{i}]");
            let (min_members, max_members) = match member_bounds(&file, &format!("{at}.members"), &s.members)? {
                (min, max) if s.optional && min < max => {
                    return Err(err(
                        format!("{at}.members.max"),
                        format!(
                            "an optional set is placed whole, all its members or none; drop max, or make {min}..{max} \
                             a required elastic set"
                        ),
                    ));
                }
                (_, max) if s.optional => (0, max),
                bounds => bounds,
            };
            sets.push(MemberSet {
                name: s.name.clone(),
                min_members,
                max_members,
                requests: requests(&file, &format!("{at}.resources"), &s.resources)?,
                devices: devices(&file, &format!("{at}.devices"), &s.devices)?,
                filter: node_filter(&file, &at, &s.node_selector, &s.affinity, &s.tolerations)?,
                topology: s.topology.as_ref().map(engine_topology),
            });
        }
        let subgroups = (self.subgroups.iter())
            .map(|g| SubGroup { name: g.name.clone(), sets: g.sets.clone(), topology: engine_topology(&g.topology) })
            .collect();
        let request = (request.with_sets(sets).and_then(|r| r.with_subgroups(subgroups)))
            .map_err(|e| err(format!("spec.{}", e.path), e.message))?;
        if (request.min_members, request.max_members) != (min_members, max_members) {
            return Err(err(
                "spec.members".into(),
                format!(
                    "{min_members}..{max_members} differs from the sets' sums {}..{}; set it to those",
                    request.min_members, request.max_members
                ),
            ));
        }
        Ok(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_groups_members_are_read_from_its_labels_once_for_everyone() {
        let of = |pairs: &[(&str, &str)]| {
            let l: BTreeMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
            plain_members(Some(&l))
        };
        assert_eq!(plain_members(None), Ok(Members { min: 1, max: None }), "a pod alone is a group of one");
        assert_eq!(of(&[(labels::GROUP_SIZE, " 4 ")]), Ok(Members { min: 4, max: None }));
        assert_eq!(of(&[(labels::GROUP_SIZE, "4"), (labels::GROUP_MIN, "2")]), Ok(Members { min: 2, max: Some(4) }));
        for bad in ["0", "-1", "1000001", "many"] {
            let e = of(&[(labels::GROUP_SIZE, bad)]).unwrap_err();
            assert!(
                e.starts_with(&format!(
                    "metadata.labels[muster.dev/group-size]: {bad:?} is not a whole number from 1 to 1000000"
                )),
                "{e}"
            );
        }
        let e = of(&[(labels::GROUP_SIZE, "4"), (labels::GROUP_MIN, "5")]).unwrap_err();
        assert!(
            e.starts_with(
                "metadata.labels[muster.dev/group-min]: \"5\" is not a whole number from 1 to the group size 4"
            ),
            "{e}"
        );
    }

    fn spec(yaml: &str) -> GroupSpec {
        serde_yaml_ng::from_str(yaml).unwrap()
    }

    fn err(yaml: &str) -> InputError {
        spec(&format!("queue: q\n{yaml}")).to_request("ns/g").unwrap_err()
    }

    #[test]
    fn full_spec_converts_field_by_field() {
        let r = spec(
            "queue: team-a\nmembers: {min: 4, max: 8}\nresources: {cpu: 2, memory: 4Gi, nvidia.com/gpu: '1', pods: 0}\n\
             nodeSelector: {pool: gpu}\n\
             affinity: [{matchExpressions: [{key: zone, operator: In, values: [a, b]}, {key: gen, operator: Gt, values: ['3']}]}]\n\
             tolerations: [{key: gpu, operator: Exists, effect: NoSchedule}, {key: team, value: a}]\n\
             topology: {level: rack, mode: required}\npriorityClassName: high\ndurationSeconds: 600\n\
             owner: {apiVersion: batch/v1, kind: Job, name: train, uid: abc}\n",
        )
        .to_request("ns/g")
        .unwrap();
        assert_eq!((r.name.as_str(), r.min_members, r.max_members), ("ns/g", 4, 8));
        assert_eq!(
            r.requests,
            [("cpu".to_string(), 2000), ("memory".to_string(), 4 << 30), ("nvidia.com/gpu".to_string(), 1)]
        );
        assert_eq!(r.filter.node_selector["pool"], "gpu");
        assert_eq!(r.filter.affinity[0].match_expressions[1].operator, NodeSelectorOperator::Gt);
        assert_eq!(
            r.filter.tolerations,
            [
                EngineToleration {
                    key: "gpu".into(),
                    operator: TolerationOperator::Exists,
                    value: String::new(),
                    effect: Some("NoSchedule".into()),
                },
                EngineToleration {
                    key: "team".into(),
                    operator: TolerationOperator::Equal,
                    value: "a".into(),
                    effect: None,
                },
            ]
        );
        assert_eq!(r.topology, Some(EngineTopology::required("rack")));
        assert_eq!(r.duration, Some(600));
    }

    #[test]
    fn minimal_spec_is_a_rigid_group() {
        let r = spec("queue: q\nmembers: {min: 3}\nresources: {cpu: 500m}").to_request("g").unwrap();
        assert_eq!(r, GroupRequest::simple("g", 3, &[("cpu", 500)]));
    }

    #[test]
    fn bad_input_names_the_field() {
        for (yaml, path, says) in [
            ("members: {min: 0}", "spec.members.min", "out of range"),
            ("members: {min: -2}", "spec.members.min", "out of range"),
            ("members: {min: 2000000}", "spec.members.min", "out of range"),
            ("members: {min: 4, max: 2}", "spec.members.max", "below min 4"),
            ("members: {min: 1}\nresources: {cpu: -1}", "spec.resources.cpu", "negative"),
            ("members: {min: 1}\nresources: {memory: lots}", "spec.resources.memory", "lots"),
            ("members: {min: 1}\nresources: {gpu: 1}", "spec.resources.gpu", "unknown resource"),
            (
                "members: {min: 1}\naffinity: [{matchExpressions: [{key: k, operator: In}]}]",
                "spec.affinity[0].matchExpressions[0]",
                "at least one value",
            ),
            (
                "members: {min: 1}\naffinity: [{matchExpressions: [{key: k, operator: Lt, values: [x]}]}]",
                "spec.affinity[0].matchExpressions[0]",
                "integer",
            ),
            (
                "members: {min: 1}\ntolerations: [{key: k, operator: Exists, value: v}]",
                "spec.tolerations[0].value",
                "no value",
            ),
            ("members: {min: 1}\ntolerations: [{value: v}]", "spec.tolerations[0].key", "needs a key"),
            ("members: {min: 1}\ndurationSeconds: -3", "spec.durationSeconds", "out of range"),
            (
                "members: {min: 1}\ndevices: [{name: gpu/gpus, driver: gpu.example.com, count: 1, selectors: ['device.driver =']}]",
                "spec.devices[0].selectors[0]",
                "",
            ),
            (
                "members: {min: 1}\nsets: [{name: w, members: {min: 1}, devices: [{name: g, driver: gpu.example.com, count: 0}]}]",
                "spec.sets[0].devices[0].count",
                "at least one device",
            ),
            (
                "members: {min: 1}\ndevices: [{name: g, driver: gpu.example.com, count: 1}]\nsets: [{name: w, members: {min: 1}}]",
                "spec.devices",
                "in each set",
            ),
        ] {
            let e = err(yaml);
            assert_eq!(e.path, path, "{yaml}: {e}");
            assert!(e.message.contains(says), "{yaml}: {e}");
            assert_eq!(e.file, "Group/ns/g");
        }
    }

    #[test]
    fn unknown_enum_values_do_not_parse() {
        for yaml in [
            "queue: q\nmembers: {min: 1}\ntopology: {level: rack, mode: sometimes}",
            "queue: q\nmembers: {min: 1}\ntolerations: [{key: k, effect: NoRun}]",
            "queue: q\nmembers: {min: 1}\naffinity: [{matchExpressions: [{key: k, operator: Near}]}]",
        ] {
            assert!(serde_yaml_ng::from_str::<GroupSpec>(yaml).is_err(), "{yaml}");
        }
    }

    #[test]
    fn an_object_as_the_apiserver_returns_it_deserializes() {
        let g: Group = serde_json::from_str(
            r#"{"apiVersion": "muster.dev/v1alpha1", "kind": "Group",
                "metadata": {"name": "train", "namespace": "ml", "generation": 1, "uid": "u-1",
                             "creationTimestamp": "2026-01-01T00:00:00Z", "resourceVersion": "42"},
                "spec": {"queue": "team-a", "members": {"min": 4, "max": 8}, "resources": {"cpu": 2, "memory": "4Gi"}},
                "status": {"phase": "Reserved", "observedGeneration": 1, "estimatedStart": "2020-01-02T03:04:05Z",
                           "conditions": [{"type": "Queued", "status": "True", "reason": "Reserved", "message": "start reserved",
                                           "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 1}],
                           "requeue": {"count": 1}, "allocation": [{"member": 0, "node": "node-1"}]}}"#,
        )
        .unwrap();
        let status = g.status.as_ref().unwrap();
        assert_eq!(status.phase, Some(GroupState::Reserved));
        assert_eq!(status.condition(GroupConditionType::Queued).unwrap().reason, "Reserved");
        assert_eq!(status.allocation, [MemberAllocation { member: 0, node: "node-1".into() }]);
        assert_eq!(status.requeue, Some(RequeueState { count: 1, requeue_at: None }));
        let r = g.spec.to_request("ml/train").unwrap();
        assert_eq!((r.min_members, r.max_members), (4, 8));
        let back: Group = serde_json::from_value(serde_json::to_value(&g).unwrap()).unwrap();
        assert_eq!(back, g);
    }

    #[test]
    fn every_engine_state_but_new_and_deleted_has_a_phase() {
        assert_eq!(GroupState::New.shown(), None);
        assert_eq!(GroupState::Deleted.shown(), None);
        assert_eq!(GroupState::Reserved.shown(), Some(GroupState::Reserved));
        assert_eq!(GroupState::Deactivated.shown(), Some(GroupState::Deactivated));
    }

    #[test]
    fn conditions_keep_their_transition_time_until_the_status_changes() {
        let t = |s: i64| Time(k8s_openapi::jiff::Timestamp::from_second(s).unwrap());
        let mut s = GroupStatus::default();
        s.set_condition(GroupConditionType::Queued, true, "Pending", "waiting for 8 cpu", Some(1), t(10));
        s.set_condition(GroupConditionType::Queued, true, "Pending", "waiting for 4 cpu", Some(2), t(20));
        let c = s.condition(GroupConditionType::Queued).unwrap();
        assert_eq!(
            (c.last_transition_time.clone(), c.message.as_str(), c.observed_generation),
            (t(10), "waiting for 4 cpu", Some(2))
        );
        s.set_condition(GroupConditionType::Queued, false, "Admitted", "placed", Some(2), t(30));
        s.set_condition(GroupConditionType::Admitted, true, "Placed", "placed on 2 nodes", Some(2), t(30));
        let c = s.condition(GroupConditionType::Queued).unwrap();
        assert_eq!((c.status.as_str(), c.last_transition_time.clone()), ("False", t(30)));
        assert_eq!(s.conditions.len(), 2);
        assert!(s.condition(GroupConditionType::Finished).is_none());
    }

    #[test]
    fn weighted_topology_annotations_name_the_innermost_level_and_refuse_what_they_cannot_read() {
        let read = |pairs: &[(&str, &str)]| {
            let a: BTreeMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
            annotated_topology(Some(&a))
        };
        let t = read(&[(labels::PREFERRED_TOPOLOGY, "block:3, rack:10"), (labels::REQUIRED_TOPOLOGY, "zone")])
            .unwrap()
            .unwrap();
        assert_eq!((t.level.as_str(), t.mode, t.within.as_deref()), ("rack", TopologyMode::Preferred, Some("zone")));
        assert_eq!(t.weights, BTreeMap::from([("block".to_string(), 3), ("rack".to_string(), 10)]));
        assert_eq!(read(&[(labels::PREFERRED_TOPOLOGY, "rack")]).unwrap().unwrap().weights, BTreeMap::new());
        let field = "metadata.annotations[muster.dev/preferred-topology]";
        for (value, want) in [
            ("rack:10,row:2", "\"row\" is not a topology level; weigh levels of [\"zone\", \"block\", \"rack\"]"),
            ("rack:0", "weight \"0\" of \"rack\" is not a whole number from 1 to 100"),
            ("rack:ten", "weight \"ten\""),
            ("rack:1,rack:2", "\"rack\" is weighted twice"),
        ] {
            let e = read(&[(labels::PREFERRED_TOPOLOGY, value)]).unwrap_err();
            assert!(e.starts_with(field) && e.contains(want), "{value}: {e}");
        }
    }
}
