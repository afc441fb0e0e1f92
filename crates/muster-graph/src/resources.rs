//! The resource types a graph knows, each with a dense index so per-node amounts are flat arrays.

use std::collections::HashMap;

use crate::quantity::{self, QuantityError, Unit};

/// Dense index of a resource type within one graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ResourceId(pub u16);

impl ResourceId {
    pub fn index(self) -> usize {
        usize::from(self.0)
    }
}

/// Pooled resources are divisible amounts; devices are whole items with ids, given out exclusively.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResourceKind {
    Pooled,
    Device,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceDef {
    pub name: String,
    pub unit: Unit,
    pub kind: ResourceKind,
}

/// The resource types of one graph, in order of first appearance.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResourceTable {
    defs: Vec<ResourceDef>,
    by_name: HashMap<String, ResourceId>,
}

/// Checks a Kubernetes resource name and returns its unit, or a message saying what is allowed.
pub fn unit_of(name: &str) -> Result<Unit, String> {
    match name {
        "cpu" => Ok(Unit::Millicores),
        "memory" | "ephemeral-storage" => Ok(Unit::Bytes),
        "pods" => Ok(Unit::Count),
        _ if name.starts_with("hugepages-") => Ok(Unit::Bytes),
        _ if crate::names::is_qualified_resource(name) => Ok(Unit::Count),
        // The devices a DRA driver publishes, counted under its name (a quota on them).
        _ if name.contains('.') && crate::names::is_dns_subdomain(name) => Ok(Unit::Count),
        _ => Err(format!(
            "unknown resource {name:?}; allowed: cpu, memory, pods, ephemeral-storage, hugepages-<size>, \
             an extended resource with a domain such as nvidia.com/gpu, or a DRA driver such as gpu.example.com"
        )),
    }
}

/// Parses an amount of the named resource into its base unit.
pub fn parse_amount(unit: Unit, text: &str) -> Result<u64, QuantityError> {
    match unit {
        Unit::Millicores => quantity::parse_scaled(text, 1000),
        Unit::Bytes => quantity::parse_scaled(text, 1),
        Unit::Count => quantity::parse_whole(text),
    }
}

impl ResourceTable {
    pub fn len(&self) -> usize {
        self.defs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.defs.is_empty()
    }

    pub fn get(&self, name: &str) -> Option<ResourceId> {
        self.by_name.get(name).copied()
    }

    pub fn def(&self, id: ResourceId) -> &ResourceDef {
        &self.defs[id.index()]
    }

    pub fn iter(&self) -> impl Iterator<Item = (ResourceId, &ResourceDef)> {
        self.defs.iter().enumerate().map(|(i, d)| (ResourceId(i as u16), d))
    }

    /// Returns the id of `name`, adding it with `kind` if new. A name already known with the
    /// other kind is an error: a resource is either pooled or a device everywhere in one graph.
    pub fn intern(&mut self, name: &str, unit: Unit, kind: ResourceKind) -> Result<ResourceId, String> {
        if let Some(id) = self.get(name) {
            let def = self.def(id);
            if def.kind != kind {
                return Err(format!(
                    "resource {name:?} is declared both as pooled capacity and as discrete devices; pick one"
                ));
            }
            return Ok(id);
        }
        if self.defs.len() >= usize::from(u16::MAX) {
            return Err("more than 65535 resource types".to_string());
        }
        let id = ResourceId(self.defs.len() as u16);
        self.defs.push(ResourceDef { name: name.to_string(), unit, kind });
        self.by_name.insert(name.to_string(), id);
        Ok(id)
    }

    /// Formats `amount` of resource `id` the way kubectl would.
    pub fn format(&self, id: ResourceId, amount: u64) -> String {
        quantity::format_amount(amount, self.def(id).unit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_names_follow_kubernetes_rules() {
        assert_eq!(unit_of("cpu"), Ok(Unit::Millicores));
        assert_eq!(unit_of("hugepages-2Mi"), Ok(Unit::Bytes));
        assert_eq!(unit_of("nvidia.com/gpu"), Ok(Unit::Count));
        assert!(unit_of("gpu").unwrap_err().contains("nvidia.com/gpu"));
        assert!(unit_of("cpus").is_err());
        assert!(unit_of("nodomain/x").is_err());
    }

    #[test]
    fn a_name_keeps_one_kind() {
        let mut t = ResourceTable::default();
        let a = t.intern("nvidia.com/gpu", Unit::Count, ResourceKind::Device).unwrap();
        assert_eq!(t.intern("nvidia.com/gpu", Unit::Count, ResourceKind::Device), Ok(a));
        assert!(t.intern("nvidia.com/gpu", Unit::Count, ResourceKind::Pooled).is_err());
    }
}
