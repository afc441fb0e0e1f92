//! The cluster-scoped `Cohort`: a node of a tree of queues, with quotas of its own. Queues name
//! their cohort (`spec.cohort`), cohorts their parent; a department's Cohort can cap what its
//! teams borrow from the rest of the organisation, keep part of its quota for them, or hold quota
//! they share. Mirrors `muster_queue::CohortConfig`; [`CohortSpec::to_config`] converts with the
//! engine's own checks, and [`assemble`] builds the tree the engine is given.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use muster_graph::InputError;
use muster_queue::config::{CohortConfig, QuotaSpec};
use muster_queue::{EngineConfig, QueueConfig};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::condition::Refusal;

/// A cohort of queues (and of other cohorts) that lend each other unused quota.
#[derive(CustomResource, Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "muster.dev",
    version = "v1alpha1",
    kind = "Cohort",
    doc = "A muster Cohort: a node of the tree queues borrow and lend quota in, with quotas of its own.",
    status = "CohortStatus",
    category = "muster",
    derive = "PartialEq",
    printcolumn = r#"{"name": "Parent", "type": "string", "jsonPath": ".spec.parent"}"#,
    printcolumn = r#"{"name": "Accepted", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Accepted\")].status"}"#,
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

/// What the controller reports about a cohort.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CohortStatus {
    /// `Accepted`: whether muster honours it (False: the message says why, naming the field to
    /// fix). A Cohort left out takes every queue and cohort below it out too.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
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

/// A Queue or Cohort object [`assemble`] leaves out of the configuration, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeftOut {
    pub kind: ConfigKind,
    pub name: String,
    pub refusal: Refusal,
}

/// The kinds of configuration objects whose `Accepted` condition muster writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ConfigKind {
    Queue,
    Cohort,
}

impl std::fmt::Display for ConfigKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ConfigKind::Queue => "Queue",
            ConfigKind::Cohort => "Cohort",
        })
    }
}

impl std::fmt::Display for LeftOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {} left out: {}", self.kind, self.name, self.refusal.message)
    }
}

/// The cohorts the engine is given, from the Cohort objects (each already converted, or refused)
/// and the queues that name them; queues below a cohort left out are taken out of `queues`.
/// Every object left out is returned with why.
///
/// A cohort named by a queue or as a parent but declared by no object is a root without quota,
/// as a Queue's cohort always was. A refused Cohort, or one on a cycle of parents, is left out,
/// and so is every queue below it: placed in a tree without the limits its admin set, such a
/// queue could borrow more than it may. Its groups then wait for a queue, as for any unknown one.
pub fn assemble(
    objects: Vec<(String, Result<CohortConfig, InputError>)>,
    queues: &mut Vec<QueueConfig>,
) -> (Vec<CohortConfig>, Vec<LeftOut>) {
    let mut left_out = Vec::new();
    let mut cohorts: BTreeMap<String, CohortConfig> = BTreeMap::new();
    let mut refused: BTreeSet<String> = BTreeSet::new();
    for (name, converted) in objects {
        match converted {
            Ok(c) => {
                cohorts.insert(name, c);
            }
            Err(e) => {
                left_out.push(LeftOut {
                    kind: ConfigKind::Cohort,
                    name: name.clone(),
                    refusal: Refusal::invalid_spec(&e),
                });
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
    // Where a cohort's chain of parents breaks: the first link that is refused or closes a
    // cycle; None when every link is declared or a plain root.
    let break_in = |start: &str| {
        let mut seen = BTreeSet::new();
        let mut cur = Some(start.to_string());
        while let Some(c) = cur {
            if refused.contains(&c) {
                return Some(Refusal {
                    reason: "CohortLeftOut",
                    message: format!("its parent chain passes Cohort {c}, which is left out"),
                });
            }
            if !seen.insert(c.clone()) {
                return Some(Refusal {
                    reason: "ParentCycle",
                    message: format!("its parents form a cycle through {c}; change spec.parent"),
                });
            }
            cur = cohorts.get(&c).and_then(|x| x.parent.clone());
        }
        None
    };
    let broken: BTreeMap<String, Refusal> =
        cohorts.keys().filter_map(|c| break_in(c).map(|r| (c.clone(), r))).collect();
    for (name, refusal) in &broken {
        left_out.push(LeftOut { kind: ConfigKind::Cohort, name: name.clone(), refusal: refusal.clone() });
    }
    cohorts.retain(|name, _| !broken.contains_key(name));
    queues.retain(|q| match &q.cohort {
        Some(c) if !cohorts.contains_key(c) => {
            let message = format!("its cohort {c} is left out (see that Cohort's Accepted condition)");
            left_out.push(LeftOut {
                kind: ConfigKind::Queue,
                name: q.name.clone(),
                refusal: Refusal { reason: "CohortLeftOut", message },
            });
            false
        }
        _ => true,
    });
    (cohorts.into_values().collect(), left_out)
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
        let (cohorts, left_out) = assemble(objects, &mut queues);
        let messages: Vec<String> = left_out.iter().map(ToString::to_string).collect();
        let names: Vec<&str> = cohorts.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["lab", "org", "research"]);
        let kept: Vec<&str> = queues.iter().map(|q| q.name.as_str()).collect();
        assert_eq!(kept, ["a", "e"]);
        assert!(messages.iter().any(|m| m.starts_with("Cohort bad left out: spec.parent")), "{messages:?}");
        assert!(messages.iter().any(|m| m.starts_with("Cohort x left out: its parents form a cycle")), "{messages:?}");
        assert!(
            messages.iter().any(|m| m.starts_with("Cohort under-bad left out: its parent chain passes Cohort bad")),
            "{messages:?}"
        );
        assert!(messages.iter().any(|m| m.starts_with("Queue d left out: its cohort bad is left out")), "{messages:?}");
        let reasons: BTreeSet<(ConfigKind, &str, &str)> =
            left_out.iter().map(|l| (l.kind, l.name.as_str(), l.refusal.reason)).collect();
        let expected = [
            (ConfigKind::Cohort, "bad", "InvalidSpec"),
            (ConfigKind::Cohort, "under-bad", "CohortLeftOut"),
            (ConfigKind::Cohort, "x", "ParentCycle"),
            (ConfigKind::Cohort, "y", "ParentCycle"),
            (ConfigKind::Queue, "b", "CohortLeftOut"),
            (ConfigKind::Queue, "c", "CohortLeftOut"),
            (ConfigKind::Queue, "d", "CohortLeftOut"),
        ];
        assert_eq!(reasons, BTreeSet::from(expected));
        // What is left compiles.
        let mut cfg = EngineConfig::single_queue("unused");
        cfg.queues = queues;
        cfg.cohorts = cohorts;
        cfg.compile("test").unwrap();
    }
}
