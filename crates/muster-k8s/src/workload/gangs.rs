//! Gangs inside a workload's group, from its pod templates' annotations, as a plain pod's set
//! takes them: a set whose template says [`labels::SET_TOPOLOGY`] keeps its pods within one domain
//! of that level, and sets whose templates name one [`labels::SUBGROUP`] (each with the same
//! [`labels::SUBGROUP_TOPOLOGY`]) keep within one domain together, inside the group's own domain
//! (a JobSet's prefill and decode Jobs each in a rack, the JobSet in one block). A set whose
//! template says [`labels::REPLICA_TOPOLOGY`] keeps each of its replicas (a JobSet's child Jobs)
//! within one domain: [`super::shape`] makes each replica a set of its own.

use std::collections::BTreeMap;

use super::PodSet;
use crate::group::{GroupSubGroup, TopologyConstraint, TopologyMode};
use crate::labels;

/// Each set's own level (by set, in order) and the sub-groups of sets.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Gangs {
    pub set_topology: Vec<Option<TopologyConstraint>>,
    /// By set, in order: the level each of its replicas keeps within (a set of several replicas).
    pub replica_topology: Vec<Option<TopologyConstraint>>,
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
        let own = level(labels::SET_TOPOLOGY, &mut errors);
        let replicas = level(labels::REPLICA_TOPOLOGY, &mut errors);
        let (own, replicas) = match (own, replicas) {
            (Some(own), Some(_)) => {
                errors.push(format!(
                    "{}: the set already keeps all its replicas within one domain ({}); give one of the two",
                    field(labels::REPLICA_TOPOLOGY),
                    labels::SET_TOPOLOGY
                ));
                (Some(own), None)
            }
            (None, Some(_)) if set.children <= 1 => {
                errors.push(format!(
                    "{}: the set makes no replicas of its own (a JobSet's replicated Job with replicas above 1 \
                     does); use {} to keep its pods within one domain",
                    field(labels::REPLICA_TOPOLOGY),
                    labels::SET_TOPOLOGY
                ));
                (None, None)
            }
            (own, replicas) => (own, replicas),
        };
        if replicas.is_some() && get(labels::SUBGROUP).is_some() {
            errors.push(format!(
                "{}: a sub-group keeps whole sets together, and this set's replicas are gangs of their own; drop \
                 one of {} and {}",
                field(labels::REPLICA_TOPOLOGY),
                labels::REPLICA_TOPOLOGY,
                labels::SUBGROUP
            ));
        }
        gangs.set_topology.push(own);
        gangs.replica_topology.push(replicas);
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
