//! A device a driver publishes, and the CEL value a selector sees of it.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, OnceLock};

use cel::Value;
use serde::{Deserialize, Serialize};

use super::selector::{Quantity, Semver};

/// The name the graph gives a published device (`driver/pool/device`): unique on its node across
/// drivers and pools, and what a claim's allocation names.
pub fn graph_name(driver: &str, pool: &str, device: &str) -> String {
    format!("{driver}/{pool}/{device}")
}

/// The typed value of one device attribute (exactly one of a ResourceSlice's `int`, `bool`,
/// `string` and `version`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub enum AttributeValue {
    Int(i64),
    Bool(bool),
    String(String),
    /// A semantic version (2.0.0), such as a driver or firmware version.
    Version(String),
}

/// One device as its driver publishes it. Attribute and capacity names are qualified
/// (`gpu.example.com/model`); a name without a domain belongs to the driver's.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PublishedDevice {
    pub driver: String,
    /// The pool the driver published it in; with `name`, what names the device in a claim's
    /// allocation.
    pub pool: String,
    pub name: String,
    #[serde(default)]
    pub attributes: BTreeMap<String, AttributeValue>,
    /// Capacities as Kubernetes quantities (`80Gi`).
    #[serde(default)]
    pub capacity: BTreeMap<String, String>,
    /// What selectors see of it, built on first use.
    #[serde(skip)]
    value: OnceLock<Value>,
}

impl PartialEq for PublishedDevice {
    fn eq(&self, other: &Self) -> bool {
        (&self.driver, &self.pool, &self.name, &self.attributes, &self.capacity)
            == (&other.driver, &other.pool, &other.name, &other.attributes, &other.capacity)
    }
}

impl Eq for PublishedDevice {}

impl PublishedDevice {
    pub fn new(driver: &str, pool: &str, name: &str) -> Self {
        Self {
            driver: driver.to_string(),
            pool: pool.to_string(),
            name: name.to_string(),
            attributes: BTreeMap::new(),
            capacity: BTreeMap::new(),
            value: OnceLock::new(),
        }
    }

    pub fn with_attribute(mut self, name: &str, value: AttributeValue) -> Self {
        self.attributes.insert(name.to_string(), value);
        self.value = OnceLock::new();
        self
    }

    pub fn with_capacity(mut self, name: &str, quantity: &str) -> Self {
        self.capacity.insert(name.to_string(), quantity.to_string());
        self.value = OnceLock::new();
        self
    }

    /// The domain and identifier of a qualified name, the driver's domain when it has none.
    pub(crate) fn split_name<'a>(&'a self, name: &'a str) -> (&'a str, &'a str) {
        name.split_once('/').unwrap_or((&self.driver, name))
    }

    /// The `device` variable of a selector: `driver`, and `attributes` and `capacity` as maps
    /// of domain to a map of identifier to value. A version is a semver value, a capacity a
    /// quantity, as in Kubernetes' CEL environment. Values that do not parse are left out: a
    /// selector reading one fails on that device, which then does not match.
    pub(crate) fn cel_value(&self) -> &Value {
        self.value.get_or_init(|| {
            let mut attributes: HashMap<String, HashMap<String, Value>> = HashMap::new();
            for (name, v) in &self.attributes {
                let value = match v {
                    AttributeValue::Int(i) => Value::Int(*i),
                    AttributeValue::Bool(b) => Value::Bool(*b),
                    AttributeValue::String(s) => Value::String(Arc::new(s.clone())),
                    AttributeValue::Version(s) => match Semver::parse(s) {
                        Some(v) => v.into_value(),
                        None => continue,
                    },
                };
                let (domain, id) = self.split_name(name);
                attributes.entry(domain.to_string()).or_default().insert(id.to_string(), value);
            }
            let mut capacity: HashMap<String, HashMap<String, Value>> = HashMap::new();
            for (name, q) in &self.capacity {
                let Some(q) = Quantity::parse(q) else { continue };
                let (domain, id) = self.split_name(name);
                capacity.entry(domain.to_string()).or_default().insert(id.to_string(), q.into_value());
            }
            let maps = |m: HashMap<String, HashMap<String, Value>>| {
                Value::from(m.into_iter().map(|(k, v)| (k, Value::from(v))).collect::<HashMap<String, Value>>())
            };
            let mut device: HashMap<String, Value> = HashMap::new();
            device.insert("driver".into(), Value::String(Arc::new(self.driver.clone())));
            device.insert("attributes".into(), maps(attributes));
            device.insert("capacity".into(), maps(capacity));
            Value::from(device)
        })
    }
}
