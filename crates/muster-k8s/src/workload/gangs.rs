//! Gangs inside a workload's group, from its pod templates' annotations, as a plain pod's set
//! takes them: a set whose template says [`labels::SET_TOPOLOGY`] keeps its pods within one domain
//! of that level, and sets whose templates name one [`labels::SUBGROUP`] (each with the same
//! [`labels::SUBGROUP_TOPOLOGY`]) keep within one domain together, inside the group's own domain
//! (a JobSet's prefill and decode Jobs each in a rack, the JobSet in one block).

use std::collections::BTreeMap;

use super::PodSet;
use crate::group::{GroupSubGroup, TopologyConstraint, TopologyMode};
use crate::labels;

/// Each set's own level (by set, in order) and the sub-groups of sets.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Gangs {
    pub set_topology: Vec<Option<TopologyConstraint>>,
    pub subgroups: Vec<GroupSubGroup>,
}

/// The gangs the templates of `sets` ask for; the errors name each annotation at fault and the fix.
pub fn of(sets: &[&PodSet<'_>]) -> Result<Gangs, Vec<String>> {
    let mut errors = Vec::new();
    let mut gangs = Gangs::default();
    // Sub-group name -> the annotation that first gave its level, for messages.
    let mut first: BTreeMap<&str, String> = BTreeMap::new();
    for set in sets {
        let meta = set.pod_metadata_field();
        let annotations = set.pod_annotations();
        let get = |key: &str| annotations.and_then(|a| a.get(key)).map(String::as_str);
        let field = |key: &str| format!("{meta}.annotations[{key}]");
        let level = |key: &str, errors: &mut Vec<String>| {
            let l = get(key)?;
            if muster_graph::names::is_dns_label(l) {
                return Some(TopologyConstraint {
                    level: l.to_string(),
                    mode: TopologyMode::Required,
                    within: None,
                    weights: BTreeMap::new(),
                });
            }
            errors
                .push(format!("{}: {l:?} is not a topology level; name one, such as rack, block or zone", field(key)));
            None
        };
        gangs.set_topology.push(level(labels::SET_TOPOLOGY, &mut errors));
        let subgroup_level = level(labels::SUBGROUP_TOPOLOGY, &mut errors);
        match (get(labels::SUBGROUP), subgroup_level) {
            (None, None) => {}
            (None, Some(_)) => errors.push(format!(
                "{}: names no sub-group to keep within a level; add {} too, or drop it",
                field(labels::SUBGROUP_TOPOLOGY),
                labels::SUBGROUP
            )),
            (Some(name), None) if get(labels::SUBGROUP_TOPOLOGY).is_none() => errors.push(format!(
                "{}: sub-group {name:?} has no level; add {} (such as rack)",
                field(labels::SUBGROUP),
                labels::SUBGROUP_TOPOLOGY
            )),
            (Some(_), None) => {}
            (Some(name), Some(t)) => match gangs.subgroups.iter_mut().find(|g| g.name == name) {
                Some(g) if g.topology != t => errors.push(format!(
                    "{}: {:?} where {} says {:?} for sub-group {name}; the sets of a sub-group name one level",
                    field(labels::SUBGROUP_TOPOLOGY),
                    t.level,
                    first[name],
                    g.topology.level
                )),
                Some(g) => g.sets.push(set.name.clone()),
                None => {
                    first.insert(name, field(labels::SUBGROUP_TOPOLOGY));
                    let sets = vec![set.name.clone()];
                    gangs.subgroups.push(GroupSubGroup { name: name.to_string(), sets, topology: t });
                }
            },
        }
    }
    if errors.is_empty() { Ok(gangs) } else { Err(errors) }
}
