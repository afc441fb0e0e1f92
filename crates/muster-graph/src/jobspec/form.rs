//! The Kubernetes-shaped group form: one set of alike members (`members`, `resources`, where they
//! may run), or `sets` of them with sub-groups, each field checked and named when refused.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::{Count, GroupRequest, MemberSet, SHRINKABLE_NEEDS_ELASTIC, SubGroup, TopologyConstraint, check_duration};
use crate::dra::{DeviceRequest, check_devices};
use crate::error::InputError;
use crate::filter::{NodeFilter, NodeSelectorTerm, Toleration};
use crate::policy::Policy;
use crate::resources;

/// The Kubernetes-shaped group form.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct GroupForm {
    name: String,
    #[serde(default)]
    members: Option<Count>,
    #[serde(default)]
    resources: Option<BTreeMap<String, serde_yaml_ng::Value>>,
    #[serde(default)]
    devices: Vec<DeviceRequest>,
    /// Members that differ, in sets; instead of `members` and `resources`.
    #[serde(default)]
    sets: Vec<SetForm>,
    /// Sets kept within a domain of their own; only beside `sets`.
    #[serde(default)]
    subgroups: Vec<SubGroup>,
    #[serde(default)]
    node_selector: BTreeMap<String, String>,
    #[serde(default)]
    affinity: Vec<NodeSelectorTerm>,
    #[serde(default)]
    tolerations: Vec<Toleration>,
    #[serde(default)]
    topology: Option<TopologyConstraint>,
    #[serde(default)]
    duration: Option<i64>,
    #[serde(default)]
    policy: Option<Policy>,
    #[serde(default)]
    shrinkable: bool,
}

/// One set of a group form's `sets`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct SetForm {
    name: String,
    members: Count,
    resources: BTreeMap<String, serde_yaml_ng::Value>,
    #[serde(default)]
    devices: Vec<DeviceRequest>,
    #[serde(default)]
    node_selector: BTreeMap<String, String>,
    #[serde(default)]
    affinity: Vec<NodeSelectorTerm>,
    #[serde(default)]
    tolerations: Vec<Toleration>,
    #[serde(default)]
    topology: Option<TopologyConstraint>,
    /// A gang of its own the group may start without: all its members or none.
    #[serde(default)]
    optional: bool,
}

fn parse_requests(
    file: &str,
    path: &str,
    resources: &BTreeMap<String, serde_yaml_ng::Value>,
) -> Result<Vec<(String, u64)>, InputError> {
    let mut out = Vec::new();
    for (name, value) in resources {
        let p = format!("{path}.{name}");
        let unit = resources::unit_of(name).map_err(|m| InputError::new(file, &p, m))?;
        let text = match value {
            serde_yaml_ng::Value::String(s) => s.clone(),
            serde_yaml_ng::Value::Number(n) => n.to_string(),
            _ => {
                return Err(InputError::new(file, &p, "must be a quantity such as 2 or 2Gi"));
            }
        };
        let amount = resources::parse_amount(unit, &text).map_err(|e| InputError::new(file, &p, e.to_string()))?;
        if amount > 0 {
            out.push((name.clone(), amount));
        }
    }
    Ok(out)
}

fn check_affinity(file: &str, path: &str, affinity: &[NodeSelectorTerm]) -> Result<(), InputError> {
    for (ti, term) in affinity.iter().enumerate() {
        for (ei, e) in term.match_expressions.iter().enumerate() {
            e.validate().map_err(|m| InputError::new(file, format!("{path}[{ti}].matchExpressions[{ei}]"), m))?;
        }
    }
    Ok(())
}

/// `path`: the tolerations' field, such as `sets[1].tolerations`.
fn check_tolerations(file: &str, path: &str, tolerations: &[Toleration]) -> Result<(), InputError> {
    for (i, t) in tolerations.iter().enumerate() {
        t.validate().map_err(|(field, m)| InputError::new(file, format!("{path}[{i}].{field}"), m))?;
    }
    Ok(())
}

pub(super) fn from_form(file: &str, form: &GroupForm) -> Result<GroupRequest, InputError> {
    if form.name.is_empty() {
        return Err(InputError::new(file, "name", "a group needs a name"));
    }
    // Names are printed and logged as given: no control characters (a terminal would act on
    // them), and no longer than a Kubernetes object's.
    if form.name.len() > 253 || form.name.chars().any(char::is_control) {
        return Err(InputError::new(
            file,
            "name",
            "a group's name has 1 to 253 characters and none of them control characters, such as mpi-16",
        ));
    }
    // What a constraint says on its own is checked here, by field; which levels the cluster has,
    // the matcher checks.
    let topologies = (form.topology.iter().map(|t| ("topology".to_string(), t)))
        .chain(
            form.sets
                .iter()
                .enumerate()
                .filter_map(|(i, s)| Some((format!("sets[{i}].topology"), s.topology.as_ref()?))),
        )
        .chain(form.subgroups.iter().enumerate().map(|(i, g)| (format!("subgroups[{i}].topology"), &g.topology)));
    for (path, t) in topologies {
        t.check_shape().map_err(|m| InputError::new(file, path, m))?;
    }
    if !form.sets.is_empty() {
        return from_set_forms(file, form);
    }
    if !form.subgroups.is_empty() {
        return Err(InputError::new(file, "subgroups", "sub-groups gather sets; give the group sets, or drop them"));
    }
    let Some(members) = &form.members else {
        return Err(InputError::new(file, "members", "a group needs members (or sets of them)"));
    };
    let (min_members, max_members) = members.bounds(file, "members")?;
    let Some(resources) = &form.resources else {
        return Err(InputError::new(file, "resources", "say what each member asks, such as {cpu: 1}"));
    };
    let requests = parse_requests(file, "resources", resources)?;
    check_devices(&form.devices).map_err(|(path, m)| InputError::new(file, format!("devices{path}"), m))?;
    check_affinity(file, "affinity", &form.affinity)?;
    check_tolerations(file, "tolerations", &form.tolerations)?;
    let duration = match form.duration {
        Some(d) => check_duration(file, "duration", d as f64)?,
        None => None,
    };
    if form.shrinkable && min_members == max_members {
        return Err(InputError::new(file, "shrinkable", SHRINKABLE_NEEDS_ELASTIC));
    }
    Ok(GroupRequest {
        name: form.name.clone(),
        min_members,
        max_members,
        requests,
        devices: form.devices.clone(),
        filter: NodeFilter {
            node_selector: form.node_selector.clone(),
            affinity: form.affinity.clone(),
            tolerations: form.tolerations.clone(),
        },
        members_per_node: None,
        exclusive: false,
        topology: form.topology.clone(),
        sockets: None,
        duration,
        policy: form.policy,
        shrinkable: form.shrinkable,
        sets: Vec::new(),
        subgroups: Vec::new(),
        reservations: Vec::new(),
    })
}

/// A group form with `sets`. The elastic set, if any, is numbered last whatever its place in
/// the file: it is the one that grows.
fn from_set_forms(file: &str, form: &GroupForm) -> Result<GroupRequest, InputError> {
    let beside = [
        ("members", form.members.is_some()),
        ("resources", form.resources.is_some()),
        ("devices", !form.devices.is_empty()),
        ("nodeSelector", !form.node_selector.is_empty()),
        ("affinity", !form.affinity.is_empty()),
        ("tolerations", !form.tolerations.is_empty()),
    ];
    if let Some((field, _)) = beside.iter().find(|(_, set)| *set) {
        return Err(InputError::new(file, *field, "a group of sets says this in each set; move it into the sets"));
    }
    let mut sets = Vec::new();
    for (i, f) in form.sets.iter().enumerate() {
        let path = |field: &str| format!("sets[{i}].{field}");
        let (min_members, max_members) = match f.members.bounds(file, &path("members"))? {
            (min, max) if f.optional && min < max => {
                return Err(InputError::new(
                    file,
                    path("members"),
                    format!(
                        "{min}..{max}: an optional set is placed whole, all its members or none; give it one count"
                    ),
                ));
            }
            (_, max) if f.optional => (0, max),
            bounds => bounds,
        };
        check_affinity(file, &path("affinity"), &f.affinity)?;
        check_tolerations(file, &path("tolerations"), &f.tolerations)?;
        check_devices(&f.devices).map_err(|(p, m)| InputError::new(file, format!("{}{p}", path("devices")), m))?;
        sets.push(MemberSet {
            name: f.name.clone(),
            min_members,
            max_members,
            requests: parse_requests(file, &path("resources"), &f.resources)?,
            devices: f.devices.clone(),
            filter: NodeFilter {
                node_selector: f.node_selector.clone(),
                affinity: f.affinity.clone(),
                tolerations: f.tolerations.clone(),
            },
            topology: f.topology.clone(),
        });
    }
    let duration = match form.duration {
        Some(d) => check_duration(file, "duration", d as f64)?,
        None => None,
    };
    let mut group = GroupRequest::simple(&form.name, 1, &[]);
    group.topology = form.topology.clone();
    group.duration = duration;
    group.policy = form.policy;
    group.shrinkable = form.shrinkable;
    group
        .with_sets(sets)
        .and_then(|g| g.with_subgroups(form.subgroups.clone()))
        .map_err(|e| InputError::new(file, e.path, e.message))
}
