//! Flux jobspecs (version 1, and the versions Fluxion reads): their resource tree walked into one
//! group, or a group of sets when it holds several slots.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::{Count, GroupRequest, MAX_MEMBERS, MemberSet, SocketRequest, TopologyConstraint, check_duration};
use crate::error::InputError;
use crate::filter::NodeFilter;
use crate::quantity::Unit;
use crate::resources;

/// Flux jobspec version 1.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FluxJobspec {
    version: i64,
    resources: Vec<FluxResource>,
    /// Accepted and ignored: muster runs what the pods say.
    #[serde(default, rename = "tasks")]
    _tasks: Option<serde_yaml_ng::Value>,
    #[serde(default)]
    attributes: Option<FluxAttributes>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct FluxResource {
    #[serde(rename = "type")]
    rtype: String,
    count: Count,
    #[serde(default)]
    with: Vec<FluxResource>,
    #[serde(default)]
    label: Option<String>,
    #[serde(default)]
    exclusive: Option<bool>,
    #[serde(default)]
    unit: Option<String>,
    /// Accepted and ignored: ids are for Flux's own bookkeeping.
    #[serde(default, rename = "id")]
    _id: Option<serde_yaml_ng::Value>,
}

#[derive(Debug, Clone, Deserialize)]
struct FluxAttributes {
    #[serde(default)]
    system: Option<FluxSystem>,
}

#[derive(Debug, Clone, Deserialize)]
struct FluxSystem {
    #[serde(default)]
    duration: Option<f64>,
}

/// Flux resource types that are topology levels above nodes.
fn is_level(rtype: &str) -> bool {
    !matches!(rtype, "node" | "slot" | "core" | "gpu" | "memory" | "socket") && resources::unit_of(rtype).is_err()
}

/// The shape found while walking a Flux resource tree.
#[derive(Default)]
struct FluxShape {
    level: Option<String>,
    nodes: Option<((u32, u32), bool)>,
    slot: Option<(u32, u32)>,
    slot_is_whole_node: bool,
    exclusive: bool,
    requests: BTreeMap<String, u64>,
    /// Sockets per member and where the socket resource is, when the slot has one.
    sockets: Option<(u32, String)>,
    /// Within each socket.
    socket_requests: BTreeMap<String, u64>,
    /// The walk is inside the socket.
    in_socket: bool,
    /// In a jobspec of several slots, the path of the one slot this walk reads: other branches
    /// are other sets' and skipped.
    only: Option<String>,
}

/// Jobspec versions Fluxion accepts (resource/libjobspec/jobspec.cpp): muster reads the same
/// fields in each.
const FLUX_VERSIONS: std::ops::RangeInclusive<i64> = 1..=9999;

pub(super) fn from_flux(file: &str, spec: &FluxJobspec) -> Result<GroupRequest, InputError> {
    if !FLUX_VERSIONS.contains(&spec.version) {
        return Err(InputError::new(
            file,
            "version",
            format!(
                "version {} is not a Flux jobspec version; allowed {}..={}",
                spec.version,
                FLUX_VERSIONS.start(),
                FLUX_VERSIONS.end()
            ),
        ));
    }
    let mut slots = Vec::new();
    for (i, r) in spec.resources.iter().enumerate() {
        slot_paths(r, &format!("resources[{i}]"), &mut slots);
    }
    if spec.resources.len() == 1 && slots.len() <= 1 {
        let mut shape = FluxShape::default();
        walk_flux(file, "resources[0]", &spec.resources[0], &mut shape, false)?;
        return from_flux_shape(file, spec, shape);
    }
    from_flux_slots(file, spec, &slots)
}

/// A jobspec of several slots (several top-level resources, or a level holding several): each
/// slot is a set of members of its own size, named by its label.
fn from_flux_slots(file: &str, spec: &FluxJobspec, slots: &[String]) -> Result<GroupRequest, InputError> {
    if slots.is_empty() {
        return Err(InputError::new(
            file,
            "resources",
            "no slot: a jobspec needs a slot, the unit that becomes one member",
        ));
    }
    let mut level: Option<Option<String>> = None;
    let mut sets = Vec::new();
    for (k, slot) in slots.iter().enumerate() {
        let top: usize = slot["resources[".len()..].split(']').next().and_then(|i| i.parse().ok()).unwrap_or(0);
        let mut shape = FluxShape { only: Some(slot.clone()), ..FluxShape::default() };
        walk_flux(file, &format!("resources[{top}]"), &spec.resources[top], &mut shape, false)?;
        let r = from_flux_shape(file, spec, shape)?;
        if r.members_per_node.is_some() || r.exclusive || r.sockets.is_some() {
            return Err(InputError::new(
                file,
                slot,
                "in a jobspec of several slots each slot is a set of members that ask amounts (cores, gpus, \
                 memory); whole nodes, slots per node and sockets are for a jobspec of one slot",
            ));
        }
        let this_level = r.topology.as_ref().map(|t| t.level.clone());
        if level.get_or_insert_with(|| this_level.clone()) != &this_level {
            return Err(InputError::new(
                file,
                slot,
                "the slots are under different topology levels; put every slot under one level (or none)",
            ));
        }
        let name = spec_label(spec, slot).unwrap_or_else(|| format!("slot{k}"));
        sets.push(MemberSet {
            name,
            min_members: r.min_members,
            max_members: r.max_members,
            requests: r.requests,
            devices: Vec::new(),
            filter: NodeFilter::default(),
            topology: None,
        });
    }
    // Named as a one-slot jobspec is: its first label.
    let mut group = GroupRequest::simple(&shape_name(spec), 1, &[]);
    group.duration = flux_duration(file, spec)?;
    group.topology = level.flatten().map(TopologyConstraint::required);
    group.with_sets(sets).map_err(|e| InputError::new(file, "resources", e.to_string()))
}

/// The paths of the slots under `r`.
fn slot_paths(r: &FluxResource, path: &str, out: &mut Vec<String>) {
    if r.rtype == "slot" {
        out.push(path.to_string());
        return;
    }
    for (i, c) in r.with.iter().enumerate() {
        slot_paths(c, &format!("{path}.with[{i}]"), out);
    }
}

/// Whether the resource at `at` is `only` or encloses it.
fn on_the_way(only: &str, at: &str) -> bool {
    only.strip_prefix(at).is_some_and(|rest| rest.is_empty() || rest.starts_with('.'))
}

/// The label of the slot at `path`.
fn spec_label(spec: &FluxJobspec, path: &str) -> Option<String> {
    let mut parts = path.split('.');
    let top: usize = parts.next()?.strip_prefix("resources[")?.strip_suffix(']')?.parse().ok()?;
    let mut r = spec.resources.get(top)?;
    for part in parts {
        let i: usize = part.strip_prefix("with[")?.strip_suffix(']')?.parse().ok()?;
        r = r.with.get(i)?;
    }
    r.label.clone()
}

/// The group the one slot `shape` describes.
fn from_flux_shape(file: &str, spec: &FluxJobspec, mut shape: FluxShape) -> Result<GroupRequest, InputError> {
    let Some(slot) = shape.slot else {
        return Err(InputError::new(
            file,
            "resources",
            "no slot: a jobspec needs one slot, the unit that becomes one member",
        ));
    };
    let (min_members, max_members, members_per_node) = match shape.nodes {
        Some(((lo, hi), true)) => {
            if slot.0 != slot.1 {
                return Err(InputError::new(file, "resources", "a slot under a node must have a fixed count"));
            }
            let per = slot.0;
            let total = |n: u32| n.checked_mul(per).filter(|t| *t <= MAX_MEMBERS);
            let (Some(a), Some(b)) = (total(lo), total(hi)) else {
                return Err(InputError::new(file, "resources", format!("more than {MAX_MEMBERS} members in all")));
            };
            (a, b, Some(per))
        }
        _ => (slot.0, slot.1, if shape.slot_is_whole_node { Some(1) } else { None }),
    };
    let duration = flux_duration(file, spec)?;
    let sockets = match shape.sockets {
        None => None,
        Some((count, path)) => {
            if let Some(beside) = shape.requests.keys().next() {
                return Err(InputError::new(
                    file,
                    path,
                    format!(
                        "a member holds its sockets whole: put every resource of the slot inside the socket \
                         ({beside} is beside it)"
                    ),
                ));
            }
            for (name, amount) in &shape.socket_requests {
                let total = amount.checked_mul(u64::from(count)).filter(|t| *t <= crate::quantity::MAX_AMOUNT);
                let total = total.ok_or_else(|| InputError::new(file, &path, "absurdly much in all sockets"))?;
                shape.requests.insert(name.clone(), total);
            }
            let requests = shape.socket_requests.into_iter().filter(|(_, a)| *a > 0).collect();
            Some(SocketRequest { count, requests })
        }
    };
    Ok(GroupRequest {
        name: shape_name(spec),
        min_members,
        max_members,
        requests: shape.requests.into_iter().filter(|(_, a)| *a > 0).collect(),
        devices: Vec::new(),
        filter: NodeFilter::default(),
        members_per_node,
        exclusive: shape.exclusive || shape.slot_is_whole_node,
        topology: shape.level.map(TopologyConstraint::required),
        sockets,
        duration,
        policy: None,
        shrinkable: false,
        sets: Vec::new(),
        subgroups: Vec::new(),
        reservations: Vec::new(),
    })
}

fn flux_duration(file: &str, spec: &FluxJobspec) -> Result<Option<u64>, InputError> {
    match spec.attributes.as_ref().and_then(|a| a.system.as_ref()).and_then(|s| s.duration) {
        Some(d) => check_duration(file, "attributes.system.duration", d),
        None => Ok(None),
    }
}

fn shape_name(spec: &FluxJobspec) -> String {
    fn find_label(r: &FluxResource) -> Option<String> {
        r.label.clone().or_else(|| r.with.iter().find_map(find_label))
    }
    spec.resources.first().and_then(find_label).unwrap_or_else(|| "jobspec".to_string())
}

/// Walks one resource; amounts inside a socket go to `socket_requests`, per socket.
fn walk_flux(file: &str, path: &str, r: &FluxResource, shape: &mut FluxShape, in_slot: bool) -> Result<(), InputError> {
    let count_path = format!("{path}.count");
    let (lo, hi) = r.count.bounds(file, &count_path)?;
    let children = |shape: &mut FluxShape, in_slot: bool| -> Result<(), InputError> {
        for (i, c) in r.with.iter().enumerate() {
            let at = format!("{path}.with[{i}]");
            if !in_slot && shape.only.as_ref().is_some_and(|only| !on_the_way(only, &at)) {
                continue;
            }
            walk_flux(file, &at, c, shape, in_slot)?;
        }
        Ok(())
    };
    match r.rtype.as_str() {
        "slot" => {
            if in_slot || shape.slot.is_some() {
                return Err(InputError::new(file, path, "only one slot is supported, and slots do not nest"));
            }
            if r.with.is_empty() {
                return Err(InputError::new(file, format!("{path}.with"), "a slot must say what each member gets"));
            }
            shape.slot = Some((lo, hi));
            children(shape, true)
        }
        "node" if in_slot => {
            if lo != 1 || hi != 1 {
                return Err(InputError::new(
                    file,
                    count_path,
                    "a node inside a slot must have count 1 (one whole node per member)",
                ));
            }
            shape.slot_is_whole_node = true;
            children(shape, true)
        }
        "node" => {
            if shape.nodes.is_some() {
                return Err(InputError::new(file, path, "only one node level is supported"));
            }
            if r.with.iter().all(|c| c.rtype != "slot") {
                return Err(InputError::new(file, format!("{path}.with"), "a node must contain the slot"));
            }
            shape.nodes = Some(((lo, hi), true));
            shape.exclusive |= r.exclusive.unwrap_or(false);
            children(shape, false)
        }
        "socket" if in_slot => {
            if lo != hi {
                return Err(InputError::new(file, count_path, "counts inside a slot must be fixed"));
            }
            if shape.sockets.is_some() {
                return Err(InputError::new(
                    file,
                    path,
                    "one socket resource per slot: sockets neither nest nor come in several shapes",
                ));
            }
            shape.sockets = Some((lo, path.to_string()));
            shape.in_socket = true;
            let walked = children(shape, true);
            shape.in_socket = false;
            walked
        }
        t if in_slot => {
            if lo != hi {
                return Err(InputError::new(file, count_path, "counts inside a slot must be fixed"));
            }
            if !r.with.is_empty() {
                return Err(InputError::new(
                    file,
                    format!("{path}.with"),
                    format!("{t} cannot contain other resources"),
                ));
            }
            let too_large = || {
                InputError::new(
                    file,
                    &count_path,
                    format!("absurdly large; at most {} base units per member", crate::quantity::MAX_AMOUNT),
                )
            };
            let scaled = |factor: u64| {
                u64::from(lo).checked_mul(factor).filter(|a| *a <= crate::quantity::MAX_AMOUNT).ok_or_else(too_large)
            };
            let (name, amount) = match t {
                "core" => ("cpu".to_string(), scaled(1000)?),
                "gpu" => ("nvidia.com/gpu".to_string(), scaled(1)?),
                "memory" => ("memory".to_string(), scaled(memory_unit(file, path, r.unit.as_deref())?)?),
                // A count is of whole units: `cpu` as `core`, in thousandths.
                other => match resources::unit_of(other) {
                    Ok(unit) => (other.to_string(), scaled(if unit == Unit::Millicores { 1000 } else { 1 })?),
                    Err(m) => {
                        return Err(InputError::new(
                            file,
                            format!("{path}.type"),
                            format!("{m}; Flux types core, gpu, memory and socket are accepted too"),
                        ));
                    }
                },
            };
            let into = if shape.in_socket { &mut shape.socket_requests } else { &mut shape.requests };
            let slot = into.entry(name).or_insert(0);
            *slot = slot.checked_add(amount).filter(|a| *a <= crate::quantity::MAX_AMOUNT).ok_or_else(too_large)?;
            Ok(())
        }
        t if is_level(t) && !in_slot => {
            if lo != 1 || hi != 1 {
                return Err(InputError::new(
                    file,
                    count_path,
                    format!("a group is placed within one {t}; its count must be 1"),
                ));
            }
            shape.level = Some(t.to_string());
            children(shape, false)
        }
        t => Err(InputError::new(
            file,
            format!("{path}.type"),
            format!("{t:?} cannot appear here; outside a slot use topology levels (cluster, zone, rack, ...) or node"),
        )),
    }
}

fn memory_unit(file: &str, path: &str, unit: Option<&str>) -> Result<u64, InputError> {
    Ok(match unit.unwrap_or("GB") {
        "B" => 1,
        "KB" => 1 << 10,
        "MB" => 1 << 20,
        "GB" => 1 << 30,
        "TB" => 1 << 40,
        other => {
            return Err(InputError::new(
                file,
                format!("{path}.unit"),
                format!("{other:?}: allowed B, KB, MB, GB (default), TB"),
            ));
        }
    })
}
