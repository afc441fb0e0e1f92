//! The pods of a job class: alike (`members`, `resources`, `nodeSelector`, `tolerations`), or
//! several sets of alike pods (`sets`: an MPI launcher and its workers, a Ray head and its worker
//! groups), each with its own count, requests and nodes.

use std::collections::BTreeMap;

use muster_graph::GroupRequest;
use muster_graph::filter::{NodeFilter, Toleration};
use muster_graph::jobspec::MemberSet;
use serde::Deserialize;

use super::{JobClass, MAX_MEMBERS, Members, input, parse_requests};
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
}

/// What a class's jobs are made of: the bounds over all pods, what one pod asks (with sets, the
/// most any set's pod asks, per resource), where the pods run, and the sets (empty when alike).
pub(super) struct ClassPods {
    pub min: u32,
    pub max: u32,
    pub requests: Vec<(String, u64)>,
    pub filter: NodeFilter,
    pub sets: Vec<MemberSet>,
}

/// Reads and checks the pods of class `c` (fields at `at`, such as `jobClasses[2]`).
pub(super) fn class_pods(
    file: &str,
    at: &str,
    c: &JobClass,
    offered: &BTreeMap<String, ()>,
) -> Result<ClassPods, SimError> {
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
        });
    }
    let alike_fields = [
        ("members", c.members.is_some()),
        ("resources", c.resources.is_some()),
        ("nodeSelector", !c.node_selector.is_empty()),
        ("tolerations", !c.tolerations.is_empty()),
        ("topology", c.topology.is_some()),
    ];
    if let Some((field, _)) = alike_fields.iter().find(|(_, given)| *given) {
        let fix = if *field == "topology" {
            "a class of several sets has no topology constraint in the simulator; drop topology or the sets"
        } else {
            "a class gives its pods either alike (members, resources, nodeSelector, tolerations) or as sets, each \
             with its own; move it into each set, or drop the sets"
        };
        return Err(input(file, format!("{at}.{field}"), fix));
    }
    let mut sets = Vec::with_capacity(c.sets.len());
    for (k, s) in c.sets.iter().enumerate() {
        let here = format!("{at}.sets[{k}]");
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
            topology: None,
        });
    }
    // The graph's own rules for sets (names, the total), as muster
    // would check the group.
    let group = GroupRequest::simple(&c.name, 1, &[])
        .with_sets(sets)
        .map_err(|e| input(file, format!("{at}.{}", e.path), e.message))?;
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
        if tol.key.is_empty() && tol.operator == muster_graph::filter::TolerationOperator::Equal {
            return Err(input(file, format!("{at}.tolerations[{i}].key"), "an empty key needs operator Exists"));
        }
    }
    Ok(())
}
