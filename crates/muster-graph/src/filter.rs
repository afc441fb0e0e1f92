//! Node filters with Kubernetes semantics: node selector, required node affinity, taints and
//! tolerations, and whether a node takes new work at all.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::graph::{Node, Taint, TaintEffect};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Toleration {
    #[serde(default)]
    pub key: String,
    #[serde(default)]
    pub operator: TolerationOperator,
    #[serde(default)]
    pub value: String,
    /// Empty tolerates every effect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effect: Option<String>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub enum TolerationOperator {
    #[default]
    Equal,
    Exists,
}

impl Toleration {
    /// Checks Kubernetes' rules for a toleration: Err names the field at fault (`key`, `value`,
    /// `effect`) and what to write instead.
    pub fn validate(&self) -> Result<(), (&'static str, &'static str)> {
        match self.operator {
            TolerationOperator::Exists if !self.value.is_empty() => {
                return Err(("value", "operator Exists takes no value; drop it, or use operator Equal"));
            }
            TolerationOperator::Equal if self.key.is_empty() => {
                return Err(("key", "operator Equal needs a key; give one, or use operator Exists for every taint"));
            }
            _ => {}
        }
        match self.effect.as_deref() {
            None | Some("" | "NoSchedule" | "PreferNoSchedule" | "NoExecute") => Ok(()),
            Some(_) => Err(("effect", "allowed: NoSchedule, PreferNoSchedule, NoExecute, or none for every effect")),
        }
    }

    fn tolerates(&self, taint: &Taint) -> bool {
        if let Some(e) = &self.effect
            && !e.is_empty()
            && e != taint.effect.as_str()
        {
            return false;
        }
        match self.operator {
            TolerationOperator::Exists => self.key.is_empty() || self.key == taint.key,
            TolerationOperator::Equal => self.key == taint.key && self.value == taint.value,
        }
    }
}

/// One term of `requiredDuringSchedulingIgnoredDuringExecution`: all expressions must hold.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NodeSelectorTerm {
    pub match_expressions: Vec<MatchExpression>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MatchExpression {
    pub key: String,
    pub operator: SelectorOperator,
    #[serde(default)]
    pub values: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub enum SelectorOperator {
    In,
    NotIn,
    Exists,
    DoesNotExist,
    Gt,
    Lt,
}

impl MatchExpression {
    /// Checks the operator's arity rules; the message says what to write instead.
    pub fn validate(&self) -> Result<(), String> {
        use SelectorOperator::*;
        match (self.operator, self.values.len()) {
            (In | NotIn, 0) => Err(format!("operator {:?} needs at least one value", self.operator)),
            (Exists | DoesNotExist, n) if n > 0 => Err(format!("operator {:?} takes no values", self.operator)),
            (Gt | Lt, 1) if self.values[0].parse::<i64>().is_ok() => Ok(()),
            (Gt | Lt, _) => Err(format!("operator {:?} needs exactly one integer value", self.operator)),
            _ => Ok(()),
        }
    }

    fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let value = labels.get(&self.key);
        let int = |s: &String| s.parse::<i64>().ok();
        let bound = self.values.first().and_then(int);
        match self.operator {
            SelectorOperator::In => value.is_some_and(|v| self.values.contains(v)),
            SelectorOperator::NotIn => value.is_none_or(|v| !self.values.contains(v)),
            SelectorOperator::Exists => value.is_some(),
            SelectorOperator::DoesNotExist => value.is_none(),
            SelectorOperator::Gt => {
                matches!((value.and_then(int), bound), (Some(v), Some(b)) if v > b)
            }
            SelectorOperator::Lt => {
                matches!((value.and_then(int), bound), (Some(v), Some(b)) if v < b)
            }
        }
    }
}

/// What a member asks of a node besides capacity.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeFilter {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    /// Terms are ORed; no terms means no affinity requirement. A term without expressions matches
    /// no node, as in Kubernetes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub affinity: Vec<NodeSelectorTerm>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,
}

impl NodeFilter {
    /// True if the node's labels and taints admit the member (ignores cordon and health).
    pub fn admits(&self, node: &Node) -> bool {
        self.selects(node) && self.untolerated(node).is_none()
    }

    /// Whether the node selector and affinity take the node, its taints aside.
    pub fn selects(&self, node: &Node) -> bool {
        self.node_selector.iter().all(|(k, v)| node.labels.get(k) == Some(v))
            && (self.affinity.is_empty()
                || self.affinity.iter().any(|t| {
                    !t.match_expressions.is_empty() && t.match_expressions.iter().all(|e| e.matches(&node.labels))
                }))
    }

    /// The first of the node's taints that keeps the member off it, if any.
    pub fn untolerated<'n>(&self, node: &'n Node) -> Option<&'n Taint> {
        (node.taints.iter())
            .filter(|t| t.effect != TaintEffect::PreferNoSchedule)
            .find(|t| !self.tolerations.iter().any(|tol| tol.tolerates(t)))
    }

    pub fn is_trivial(&self) -> bool {
        self.node_selector.is_empty() && self.affinity.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(labels: &[(&str, &str)], taints: Vec<Taint>) -> Node {
        Node::for_filtering("n", labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(), taints, false)
    }

    fn expr(key: &str, operator: SelectorOperator, values: &[&str]) -> MatchExpression {
        MatchExpression { key: key.into(), operator, values: values.iter().map(|s| s.to_string()).collect() }
    }

    #[test]
    fn taints_need_matching_tolerations() {
        let taint = Taint { key: "gpu".into(), value: "yes".into(), effect: TaintEffect::NoSchedule };
        let n = node(&[], vec![taint]);
        assert!(!NodeFilter::default().admits(&n));
        let tol = |op, key: &str, value: &str, effect: Option<&str>| NodeFilter {
            tolerations: vec![Toleration {
                key: key.into(),
                operator: op,
                value: value.into(),
                effect: effect.map(str::to_string),
            }],
            ..Default::default()
        };
        assert!(tol(TolerationOperator::Equal, "gpu", "yes", None).admits(&n));
        assert!(!tol(TolerationOperator::Equal, "gpu", "no", None).admits(&n));
        assert!(tol(TolerationOperator::Exists, "", "", None).admits(&n));
        assert!(!tol(TolerationOperator::Exists, "gpu", "", Some("NoExecute")).admits(&n));
        let soft = Taint { key: "x".into(), value: String::new(), effect: TaintEffect::PreferNoSchedule };
        assert!(NodeFilter::default().admits(&node(&[], vec![soft])));
    }

    #[test]
    fn affinity_terms_or_expressions_and() {
        let n = node(&[("zone", "a"), ("gen", "5")], vec![]);
        let f = |terms: Vec<Vec<MatchExpression>>| NodeFilter {
            affinity: terms.into_iter().map(|e| NodeSelectorTerm { match_expressions: e }).collect(),
            ..Default::default()
        };
        use SelectorOperator::*;
        assert!(f(vec![vec![expr("zone", In, &["a", "b"]), expr("gen", Gt, &["4"])]]).admits(&n));
        assert!(!f(vec![vec![expr("zone", In, &["a"]), expr("gen", Lt, &["4"])]]).admits(&n));
        assert!(f(vec![vec![expr("zone", NotIn, &["a"])], vec![expr("gpu", DoesNotExist, &[])]]).admits(&n));
        assert!(!f(vec![vec![expr("zone", NotIn, &["a"])]]).admits(&n));
        // An empty term matches nothing (k8s.io/component-helpers nodeaffinity): alone it admits
        // no node, beside another it adds none.
        assert!(!f(vec![vec![]]).admits(&n));
        assert!(!f(vec![vec![], vec![expr("zone", In, &["b"])]]).admits(&n));
        assert!(f(vec![vec![], vec![expr("zone", In, &["a"])]]).admits(&n));
        assert!(expr("k", In, &[]).validate().is_err());
        assert!(expr("k", Gt, &["x"]).validate().is_err());
        let sel = NodeFilter { node_selector: [("zone".into(), "b".into())].into(), ..Default::default() };
        assert!(!sel.admits(&n));
    }
}
