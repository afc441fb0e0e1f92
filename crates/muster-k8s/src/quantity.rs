//! A resource amount as Kubernetes writes it: an integer or a quantity string.

use std::borrow::Cow;

use muster_graph::resources;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

/// An amount of a resource: `32`, `"500m"`, `"128Gi"`. In the schema it is int-or-string with the
/// Kubernetes quantity pattern, so the apiserver refuses `"lots"` or `"-1"` (negative integers
/// pass the schema and are refused by the conversions).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Quantity {
    Int(i64),
    Text(String),
}

impl Quantity {
    /// The amount of resource `name` in base units (millicores, bytes, count).
    pub fn amount(&self, name: &str) -> Result<u64, String> {
        let unit = resources::unit_of(name)?;
        let text = match self {
            Quantity::Int(i) => i.to_string(),
            Quantity::Text(s) => s.clone(),
        };
        resources::parse_amount(unit, &text).map_err(|e| e.to_string())
    }

    /// The same amount in `muster_queue`'s form.
    pub fn to_queue(&self) -> muster_queue::config::Quantity {
        match self {
            Quantity::Int(i) => muster_queue::config::Quantity::Int(*i),
            Quantity::Text(s) => muster_queue::config::Quantity::Text(s.clone()),
        }
    }
}

impl From<i64> for Quantity {
    fn from(v: i64) -> Self {
        Quantity::Int(v)
    }
}

impl From<&str> for Quantity {
    fn from(s: &str) -> Self {
        Quantity::Text(s.to_string())
    }
}

impl JsonSchema for Quantity {
    fn schema_name() -> Cow<'static, str> {
        "Quantity".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "A non-negative resource amount: an integer or a Kubernetes quantity such as 500m or 128Gi.",
            "pattern": "^(\\+)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))))?$",
            "x-kubernetes-int-or-string": true
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts_in_base_units() {
        assert_eq!(Quantity::from(2).amount("cpu"), Ok(2000));
        assert_eq!(Quantity::from("500m").amount("cpu"), Ok(500));
        assert_eq!(Quantity::from("1Gi").amount("memory"), Ok(1 << 30));
        assert!(Quantity::from(-1).amount("cpu").is_err());
        assert!(Quantity::from("lots").amount("memory").is_err());
        assert!(Quantity::from(1).amount("gpu").is_err(), "unknown resource names are refused");
    }

    #[test]
    fn ints_and_strings_round_trip() {
        let q: Vec<Quantity> = serde_json::from_str(r#"[4, "4Gi"]"#).unwrap();
        assert_eq!(q, [Quantity::Int(4), Quantity::Text("4Gi".into())]);
        assert_eq!(serde_json::to_string(&q).unwrap(), r#"[4,"4Gi"]"#);
    }
}
