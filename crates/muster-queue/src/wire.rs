//! Serde for `muster_graph::GroupRequest` (which has no Serialize of its own): a mirror with the
//! same fields, used through `#[serde(with = "crate::wire")]`.

use std::collections::BTreeMap;

use muster_graph::filter::{
    MatchExpression, NodeFilter, NodeSelectorTerm, SelectorOperator, Toleration, TolerationOperator,
};
use muster_graph::jobspec::{ConstraintMode, TopologyConstraint};
use muster_graph::{GroupRequest, Policy};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

#[derive(Serialize, Deserialize)]
struct Req {
    name: String,
    min: u32,
    max: u32,
    requests: Vec<(String, u64)>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    node_selector: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    affinity: Vec<Vec<(String, String, Vec<String>)>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    tolerations: Vec<Tol>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    members_per_node: Option<u32>,
    #[serde(default)]
    exclusive: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    topology: Option<(String, bool)>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    duration: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    policy: Option<String>,
}

#[derive(Serialize, Deserialize)]
struct Tol {
    key: String,
    exists: bool,
    value: String,
    effect: Option<String>,
}

fn op_name(o: SelectorOperator) -> &'static str {
    match o {
        SelectorOperator::In => "In",
        SelectorOperator::NotIn => "NotIn",
        SelectorOperator::Exists => "Exists",
        SelectorOperator::DoesNotExist => "DoesNotExist",
        SelectorOperator::Gt => "Gt",
        SelectorOperator::Lt => "Lt",
    }
}

fn op_parse(s: &str) -> Option<SelectorOperator> {
    Some(match s {
        "In" => SelectorOperator::In,
        "NotIn" => SelectorOperator::NotIn,
        "Exists" => SelectorOperator::Exists,
        "DoesNotExist" => SelectorOperator::DoesNotExist,
        "Gt" => SelectorOperator::Gt,
        "Lt" => SelectorOperator::Lt,
        _ => return None,
    })
}

fn policy_name(p: Policy) -> &'static str {
    match p {
        Policy::First => "first",
        Policy::HighId => "high-id",
        Policy::Pack => "pack",
        Policy::Spread => "spread",
        Policy::Locality => "locality",
        Policy::BestFit => "best-fit",
    }
}

pub fn serialize<S: Serializer>(r: &GroupRequest, s: S) -> Result<S::Ok, S::Error> {
    Req {
        name: r.name.clone(),
        min: r.min_members,
        max: r.max_members,
        requests: r.requests.clone(),
        node_selector: r.filter.node_selector.clone(),
        affinity: r
            .filter
            .affinity
            .iter()
            .map(|t| {
                t.match_expressions
                    .iter()
                    .map(|e| (e.key.clone(), op_name(e.operator).into(), e.values.clone()))
                    .collect()
            })
            .collect(),
        tolerations: r
            .filter
            .tolerations
            .iter()
            .map(|t| Tol {
                key: t.key.clone(),
                exists: t.operator == TolerationOperator::Exists,
                value: t.value.clone(),
                effect: t.effect.clone(),
            })
            .collect(),
        members_per_node: r.members_per_node,
        exclusive: r.exclusive,
        topology: r.topology.as_ref().map(|t| (t.level.clone(), t.mode == ConstraintMode::Required)),
        duration: r.duration,
        policy: r.policy.map(|p| policy_name(p).to_string()),
    }
    .serialize(s)
}

pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<GroupRequest, D::Error> {
    use serde::de::Error;
    let r = Req::deserialize(d)?;
    let mut affinity = Vec::new();
    for term in r.affinity {
        let mut match_expressions = Vec::new();
        for (key, op, values) in term {
            let operator = op_parse(&op).ok_or_else(|| D::Error::custom(format!("unknown operator {op:?}")))?;
            match_expressions.push(MatchExpression { key, operator, values });
        }
        affinity.push(NodeSelectorTerm { match_expressions });
    }
    let policy = match r.policy {
        Some(p) => Some(Policy::parse(&p).ok_or_else(|| D::Error::custom(format!("unknown policy {p:?}")))?),
        None => None,
    };
    Ok(GroupRequest {
        name: r.name,
        min_members: r.min,
        max_members: r.max,
        requests: r.requests,
        filter: NodeFilter {
            node_selector: r.node_selector,
            affinity,
            tolerations: r
                .tolerations
                .into_iter()
                .map(|t| Toleration {
                    key: t.key,
                    operator: if t.exists { TolerationOperator::Exists } else { TolerationOperator::Equal },
                    value: t.value,
                    effect: t.effect,
                })
                .collect(),
        },
        members_per_node: r.members_per_node,
        exclusive: r.exclusive,
        topology: r.topology.map(|(level, required)| TopologyConstraint {
            level,
            mode: if required { ConstraintMode::Required } else { ConstraintMode::Preferred },
        }),
        duration: r.duration,
        policy,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize, Deserialize, PartialEq, Debug)]
    struct W(#[serde(with = "crate::wire")] GroupRequest);

    #[test]
    fn round_trip() {
        let text = "name: t\nmembers: {min: 2, max: 4}\nresources: {cpu: 2, memory: 1Gi}\nnodeSelector: {a: b}\n\
                    affinity:\n  - matchExpressions:\n      - {key: z, operator: In, values: [x]}\n\
                    tolerations:\n  - {key: g, operator: Exists, effect: NoSchedule}\n\
                    topology: {level: rack, mode: preferred}\nduration: 60\npolicy: pack\n";
        let r = muster_graph::jobspec::parse("g", text).unwrap();
        let json = serde_json::to_string(&W(r.clone())).unwrap();
        let back: W = serde_json::from_str(&json).unwrap();
        assert_eq!(back.0, r);
    }
}
