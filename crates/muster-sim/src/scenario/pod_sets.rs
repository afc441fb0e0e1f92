//! The pods of a job class: alike (`members`, `resources`, `nodeSelector`, `tolerations`), or
//! several sets of alike pods (`sets`: an MPI launcher and its workers, a Ray head and its worker
//! groups), each with its own count, requests and nodes, and gangs inside the job kept to one
//! domain each (a set's own `topology`, or `subGroups` of sets).

use std::collections::BTreeMap;

use muster_graph::GroupRequest;
use muster_graph::filter::{NodeFilter, Toleration};
use muster_graph::jobspec::{MemberSet, SubGroup};
use serde::Deserialize;

use super::{
    ClassTopology, ClusterDescription, JobClass, JobTopology, JobUnit, MAX_MEMBERS, Members, class_topology, input,
    parse_requests,
};
use crate::SimError;

/// One set of alike pods of a class.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PodSetClass {
    pub name: String,
    /// A count, or `{min, max}` for the last set only (the one that grows and gives back pods).
    pub members: Members,
    /// Per pod of this set, Kubernetes quantities; `pods: 1` is implied.
    pub resources: BTreeMap<String, serde_yaml_ng::Value>,
    #[serde(default)]
    pub node_selector: BTreeMap<String, String>,
    #[serde(default)]
    pub tolerations: Vec<Toleration>,
    /// The set's pods within one domain of a level, usually one inside the group's own (prefill
    /// in one rack, decode in another, both in the group's block). The set is then a gang of its
    /// own within the group. A level as wide as the group's, or wider, holds already where the
    /// group's is required, as muster's matcher takes it.
    #[serde(default)]
    pub topology: Option<ClassTopology>,
}

/// Several sets of a class kept to one domain of a level together: a gang inside the job (a
/// prefill leader and its workers in one rack).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SubGroupClass {
    pub name: String,
    /// The names of its sets; a set belongs to at most one sub-group.
    pub sets: Vec<String>,
    pub topology: ClassTopology,
}

/// What a class's jobs are made of: the bounds over all pods, what one pod asks (with sets, the
/// most any set's pod asks, per resource), where the pods run, and the sets (empty when alike).
pub(super) struct ClassPods {
    pub min: u32,
    pub max: u32,
    pub requests: Vec<(String, u64)>,
    pub filter: NodeFilter,
    pub sets: Vec<MemberSet>,
    /// The gangs inside the job kept to one domain each: sets with a topology of their own, then
    /// sub-groups (empty when alike).
    pub units: Vec<JobUnit>,
}

/// Reads and checks the pods of class `c` (fields at `at`, such as `jobClasses[2]`); levels are
/// resolved against `cluster`.
pub(super) fn class_pods(
    file: &str,
    at: &str,
    c: &JobClass,
    cluster: &ClusterDescription,
    offered: &BTreeMap<String, ()>,
) -> Result<ClassPods, SimError> {
    if !c.sub_groups.is_empty() && c.sets.is_empty() {
        return Err(input(
            file,
            format!("{at}.subGroups"),
            "sub-groups gather sets; give the class sets, or drop its sub-groups",
        ));
    }
    if c.sets.is_empty() {
        let members = c.members.as_ref().ok_or_else(|| {
            input(file, format!("{at}.members"), "missing; give members and resources, or sets of pods")
        })?;
        let resources = c.resources.as_ref().ok_or_else(|| {
            input(file, format!("{at}.resources"), "missing; give members and resources, or sets of pods")
        })?;
        let (min, max) = bounds(file, &format!("{at}.members"), members)?;
        check_tolerations(file, at, &c.tolerations)?;
        return Ok(ClassPods {
            min,
            max,
            requests: parse_requests(file, &format!("{at}.resources"), resources, offered)?,
            filter: NodeFilter {
                node_selector: c.node_selector.clone(),
                affinity: vec![],
                tolerations: c.tolerations.clone(),
            },
            sets: vec![],
            units: vec![],
        });
    }
    let alike_fields = [
        ("members", c.members.is_some()),
        ("resources", c.resources.is_some()),
        ("nodeSelector", !c.node_selector.is_empty()),
        ("tolerations", !c.tolerations.is_empty()),
    ];
    if let Some((field, _)) = alike_fields.iter().find(|(_, given)| *given) {
        return Err(input(
            file,
            format!("{at}.{field}"),
            "a class gives its pods either alike (members, resources, nodeSelector, tolerations) or as sets, each \
             with its own; move it into each set, or drop the sets",
        ));
    }
    let mut sets = Vec::with_capacity(c.sets.len());
    let mut units = Vec::new();
    for (k, s) in c.sets.iter().enumerate() {
        let here = format!("{at}.sets[{k}]");
        // A set becomes a pod set of the job (pod names and labels carry it), as a class's name does.
        if !muster_graph::names::is_dns_label(&s.name) {
            return Err(input(file, format!("{here}.name"), format!("{:?}: use 1-63 of a-z, 0-9 and '-'", s.name)));
        }
        let (min, max) = bounds(file, &format!("{here}.members"), &s.members)?;
        if min < max && k + 1 < c.sets.len() {
            // The simulated job numbers its pods as one Indexed Job whose count changes at its end.
            return Err(input(
                file,
                format!("{here}.members"),
                "in the simulator only the last set of a class may be elastic (a job's pods are numbered as one \
                 Indexed Job's, and only its last ones come and go); give this set a fixed count, or list it last",
            ));
        }
        check_tolerations(file, &here, &s.tolerations)?;
        let topology =
            s.topology.as_ref().map(|t| class_topology(file, &format!("{here}.topology"), t, cluster)).transpose()?;
        if let Some(g) = topology.as_ref().and(c.sub_groups.iter().find(|g| g.sets.contains(&s.name))) {
            return Err(input(
                file,
                format!("{here}.topology"),
                format!(
                    "set {:?} is in sub-group {:?}, which keeps it to one domain; the simulator takes no level of \
                     a set's own inside a sub-group: drop it, or the set from the sub-group",
                    s.name, g.name
                ),
            ));
        }
        sets.push(MemberSet {
            name: s.name.clone(),
            min_members: min,
            max_members: max,
            requests: parse_requests(file, &format!("{here}.resources"), &s.resources, offered)?,
            devices: Vec::new(),
            filter: NodeFilter {
                node_selector: s.node_selector.clone(),
                affinity: vec![],
                tolerations: s.tolerations.clone(),
            },
            topology: topology.as_ref().map(JobTopology::constraint),
        });
        if let Some(topology) = topology {
            units.push(JobUnit { name: s.name.clone(), sets: vec![k], topology, sub_group: false });
        }
    }
    let mut subgroups = Vec::with_capacity(c.sub_groups.len());
    for (i, g) in c.sub_groups.iter().enumerate() {
        let topology = class_topology(file, &format!("{at}.subGroups[{i}].topology"), &g.topology, cluster)?;
        subgroups.push(SubGroup { name: g.name.clone(), sets: g.sets.clone(), topology: topology.constraint() });
        let sets = (g.sets.iter()).filter_map(|name| c.sets.iter().position(|s| s.name == *name)).collect();
        units.push(JobUnit { name: g.name.clone(), sets, topology, sub_group: true });
    }
    // The graph's own rules for sets (names, the total), as muster
    // would check the group.
    let group = GroupRequest::simple(&c.name, 1, &[])
        .with_sets(sets)
        .and_then(|g| g.with_subgroups(subgroups))
        .map_err(|e| input(file, format!("{at}.{}", e.path.replacen("subgroups", "subGroups", 1)), e.message))?;
    if i64::from(group.max_members) > MAX_MEMBERS {
        return Err(input(
            file,
            format!("{at}.sets"),
            format!("{} pods in all; at most {MAX_MEMBERS}", group.max_members),
        ));
    }
    Ok(ClassPods {
        min: group.min_members,
        max: group.max_members,
        requests: group.requests,
        filter: group.filter,
        sets: group.sets,
        units,
    })
}

fn bounds(file: &str, at: &str, members: &Members) -> Result<(u32, u32), SimError> {
    let (min, max) = match *members {
        Members::Exact(n) => (n, n),
        Members::Range { min, max } => (min, max),
    };
    if !(1..=MAX_MEMBERS).contains(&min) || !(1..=MAX_MEMBERS).contains(&max) || min > max {
        return Err(input(
            file,
            at,
            format!("{min}..{max} is out of range; allowed 1..={MAX_MEMBERS} with min <= max"),
        ));
    }
    Ok((min as u32, max as u32))
}

fn check_tolerations(file: &str, at: &str, tolerations: &[Toleration]) -> Result<(), SimError> {
    for (i, tol) in tolerations.iter().enumerate() {
        tol.validate().map_err(|(field, m)| input(file, format!("{at}.tolerations[{i}].{field}"), m))?;
    }
    Ok(())
}
