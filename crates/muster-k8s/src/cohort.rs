//! The cluster-scoped `Cohort`: a node of a tree of queues, with quotas of its own. Queues name
//! their cohort (`spec.cohort`), cohorts their parent; a department's Cohort can cap what its
//! teams borrow from the rest of the organisation, keep part of its quota for them, or hold quota
//! they share. Mirrors `muster_queue::CohortConfig`; [`CohortSpec::to_config`] converts with the
//! engine's own checks, and [`assemble`] builds the tree the engine is given.

use std::collections::{BTreeMap, BTreeSet};

use kube::CustomResource;
use muster_graph::InputError;
use muster_queue::config::{CohortConfig, QuotaSpec};
use muster_queue::{EngineConfig, QueueConfig};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A cohort of queues (and of other cohorts) that lend each other unused quota.
#[derive(CustomResource, Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "muster.dev",
    version = "v1alpha1",
    kind = "Cohort",
    doc = "A muster Cohort: a node of the tree queues borrow and lend quota in, with quotas of its own.",
    category = "muster",
    derive = "PartialEq",
    printcolumn = r#"{"name": "Parent", "type": "string", "jsonPath": ".spec.parent"}"#,
    printcolumn = r#"{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct CohortSpec {
    /// The cohort above this one; absent: a root. A parent no Cohort object declares is a root
    /// with no quota of its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// The cohort's own quota by resource: `nominal` is shared by every queue below it, on top
    /// of what they lend each other; `borrowingLimit` caps what the cohort's queues take from the
    /// rest of the parent's tree beyond what the cohort brings; `lendingLimit` caps how much of
    /// their unused quota the rest of the tree may use. Both limits need a parent.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub quotas: BTreeMap<String, QuotaSpec>,
}

impl CohortSpec {
    /// The engine's cohort, checked alone (names, amounts, limits without a parent), with errors
    /// naming the object's fields (`spec.quotas.cpu.borrowingLimit`).
    pub fn to_config(&self, name: &str) -> Result<CohortConfig, InputError> {
        let file = format!("Cohort/{name}");
        let cohort = CohortConfig { name: name.to_string(), parent: self.parent.clone(), quotas: self.quotas.clone() };
        let mut engine = EngineConfig::single_queue("check");
        engine.cohorts = vec![cohort];
        if let Some(parent) = &self.parent {
            engine.cohorts.push(CohortConfig::new(parent, None));
        }
        engine.compile(&file).map_err(|e| {
            let path = match e.path.strip_prefix("cohorts[0].") {
                Some("name") => "metadata.name".to_string(),
                Some(p) => format!("spec.{p}"),
                None if e.path.starts_with("cohorts[1].") => "spec.parent".to_string(),
                None => e.path.clone(),
            };
            InputError::new(&file, path, e.message)
        })?;
        Ok(engine.cohorts.remove(0))
    }
}

/// The cohorts the engine is given, from the Cohort objects (each already converted, or refused)
/// and the queues that name them; refused queues are taken out of `queues`. Every message says
/// what was left out and why.
///
/// A cohort named by a queue or as a parent but declared by no object is a root without quota,
/// as a Queue's cohort always was. A refused Cohort, or one on a cycle of parents, is left out,
/// and so is every queue below it: placed in a tree without the limits its admin set, such a
/// queue could borrow more than it may. Its groups then wait for a queue, as for any unknown one.
pub fn assemble(
    objects: Vec<(String, Result<CohortConfig, InputError>)>,
    queues: &mut Vec<QueueConfig>,
) -> (Vec<CohortConfig>, Vec<String>) {
    let mut messages = Vec::new();
    let mut cohorts: BTreeMap<String, CohortConfig> = BTreeMap::new();
    let mut refused: BTreeSet<String> = BTreeSet::new();
    for (name, converted) in objects {
        match converted {
            Ok(c) => {
                cohorts.insert(name, c);
            }
            Err(e) => {
                messages.push(format!("Cohort {name} left out: {e}"));
                refused.insert(name);
            }
        }
    }
    let named = cohorts.values().filter_map(|c| c.parent.clone()).chain(queues.iter().filter_map(|q| q.cohort.clone()));
    for name in named.collect::<Vec<_>>() {
        if !refused.contains(&name) {
            cohorts.entry(name.clone()).or_insert_with(|| CohortConfig::new(&name, None));
        }
    }
    // Whether a cohort's chain of parents is whole: every link declared or a plain root, no
    // cycle, nothing refused on the way.
    let whole = |start: &str| {
        let mut seen = BTreeSet::new();
        let mut cur = Some(start.to_string());
        while let Some(c) = cur {
            if refused.contains(&c) || !seen.insert(c.clone()) {
                return false;
            }
            cur = cohorts.get(&c).and_then(|x| x.parent.clone());
        }
        true
    };
    let broken: BTreeSet<String> = cohorts.keys().filter(|c| !whole(c)).cloned().collect();
    for c in &broken {
        messages.push(format!("Cohort {c} left out: its parents form a cycle or include a Cohort left out"));
    }
    cohorts.retain(|name, _| !broken.contains(name));
    queues.retain(|q| match &q.cohort {
        Some(c) if !cohorts.contains_key(c) => {
            messages.push(format!("Queue {} left out: its cohort {c} is left out", q.name));
            false
        }
        _ => true,
    });
    (cohorts.into_values().collect(), messages)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(yaml: &str) -> CohortSpec {
        serde_yaml_ng::from_str(yaml).unwrap()
    }

    fn queue(name: &str, cohort: &str) -> QueueConfig {
        let mut q = QueueConfig::new(name);
        q.cohort = Some(cohort.into());
        q
    }

    #[test]
    fn a_cohort_converts_with_its_quotas_in_base_units_and_errors_name_the_field() {
        let c =
            spec("parent: org\nquotas: {nvidia.com/gpu: {nominal: 8, borrowingLimit: 16}, cpu: {nominal: 1500e-3}}")
                .to_config("research")
                .unwrap();
        assert_eq!(c.parent.as_deref(), Some("org"));
        assert_eq!(c.quotas.len(), 2);
        let e = spec("quotas: {cpu: {nominal: 4, borrowingLimit: 2}}").to_config("org").unwrap_err();
        assert_eq!(e.path, "spec.quotas.cpu.borrowingLimit");
        assert!(e.message.contains("set parent"), "{}", e.message);
        assert_eq!(spec("parent: Not_A_Name").to_config("x").unwrap_err().path, "spec.parent");
        assert_eq!(spec("{}").to_config("Bad_Name").unwrap_err().path, "metadata.name");
        assert_eq!(spec("quotas: {cpu: {nominal: -1}}").to_config("x").unwrap_err().path, "spec.quotas.cpu.nominal");
    }

    #[test]
    fn undeclared_cohorts_are_roots_and_broken_chains_take_their_queues_out() {
        let ok = |name: &str, parent: Option<&str>| (name.to_string(), Ok(CohortConfig::new(name, parent)));
        let refused = ("bad".to_string(), spec("parent: Not_A_Name").to_config("bad").map(|_| unreachable!()));
        let objects = vec![
            ok("research", Some("org")),
            ok("x", Some("y")),
            ok("y", Some("x")),
            ok("under-bad", Some("bad")),
            refused,
        ];
        let mut queues = vec![
            queue("a", "research"),
            queue("b", "x"),
            queue("c", "under-bad"),
            queue("d", "bad"),
            queue("e", "lab"),
        ];
        let (cohorts, messages) = assemble(objects, &mut queues);
        let names: Vec<&str> = cohorts.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["lab", "org", "research"]);
        let kept: Vec<&str> = queues.iter().map(|q| q.name.as_str()).collect();
        assert_eq!(kept, ["a", "e"]);
        assert!(messages.iter().any(|m| m.starts_with("Cohort bad left out: Cohort/bad: spec.parent")), "{messages:?}");
        assert!(messages.iter().any(|m| m.starts_with("Cohort x left out: its parents form a cycle")), "{messages:?}");
        assert!(messages.contains(&"Queue d left out: its cohort bad is left out".to_string()), "{messages:?}");
        // What is left compiles.
        let mut cfg = EngineConfig::single_queue("unused");
        cfg.queues = queues;
        cfg.cohorts = cohorts;
        cfg.compile("test").unwrap();
    }
}
