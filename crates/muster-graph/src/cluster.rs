//! The compact cluster description (docs/cluster-description.md): node classes with counts,
//! capacities, labels, taints and topology spread, expanded into nodes and built into a graph.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::builder::NodeSpec;
use crate::dra::{AttributeValue, PublishedDevice};
use crate::error::InputError;
use crate::graph::{Graph, Taint, TaintEffect};
use crate::names::{self, is_dns_label};
use crate::resources;

/// Most nodes one class may declare; a typo of a few extra zeros gets an error, not an OOM.
pub const MAX_NODES_PER_CLASS: u64 = 100_000;

/// The most devices of one resource a node has. Each is a vertex of its own (a GPU a member holds
/// by name); a resource a node offers more of is a count, described as pooled capacity.
pub const MAX_DEVICES_PER_NODE: u32 = 1024;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ClusterDescription {
    pub name: String,
    #[serde(default = "default_topology")]
    pub topology: Vec<TopologyLevel>,
    pub node_classes: Vec<NodeClass>,
}

#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct TopologyLevel {
    pub level: String,
    pub label: String,
}

fn default_topology() -> Vec<TopologyLevel> {
    [("zone", "topology.kubernetes.io/zone"), ("block", "muster.dev/block"), ("rack", "muster.dev/rack")]
        .into_iter()
        .map(|(level, label)| TopologyLevel { level: level.to_string(), label: label.to_string() })
        .collect()
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NodeClass {
    pub name: String,
    pub count: i64,
    pub capacity: BTreeMap<String, serde_yaml_ng::Value>,
    #[serde(default)]
    pub devices: BTreeMap<String, i64>,
    /// Devices DRA drivers publish for each node of the class (in ResourceSlices).
    #[serde(default)]
    pub published: Vec<PublishedClass>,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    #[serde(default)]
    pub taints: Vec<TaintSpec>,
    #[serde(default)]
    pub unschedulable: bool,
    #[serde(default)]
    pub spread: BTreeMap<String, i64>,
}

/// `count` alike devices of one driver on every node of a class, named `<leaf>-<i>` (`gpu-0`
/// for driver `gpu.example.com`) in a pool named after the node.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PublishedClass {
    pub driver: String,
    pub count: i64,
    /// By name: a string, an integer, a boolean, or `{version: 1.2.3}`.
    #[serde(default)]
    pub attributes: BTreeMap<String, serde_yaml_ng::Value>,
    /// By name, Kubernetes quantities.
    #[serde(default)]
    pub capacity: BTreeMap<String, serde_yaml_ng::Value>,
}

impl PublishedClass {
    /// The devices of one node, or a message naming the field at fault (below `published[i]`).
    fn devices(&self, node: &str) -> Result<Vec<PublishedDevice>, (String, String)> {
        if !names::is_dns_subdomain(&self.driver) || !self.driver.contains('.') {
            return Err(("driver".into(), format!("{:?} is not a driver name such as gpu.example.com", self.driver)));
        }
        if !(1..=128).contains(&self.count) {
            return Err(("count".into(), format!("{} devices is out of range; allowed 1..=128", self.count)));
        }
        let mut template = PublishedDevice::new(&self.driver, node, "");
        for (name, v) in &self.attributes {
            let value = match v {
                serde_yaml_ng::Value::String(s) => AttributeValue::String(s.clone()),
                serde_yaml_ng::Value::Bool(b) => AttributeValue::Bool(*b),
                serde_yaml_ng::Value::Number(n) if n.is_i64() => AttributeValue::Int(n.as_i64().unwrap_or_default()),
                serde_yaml_ng::Value::Mapping(m) if m.len() == 1 => match m.get("version") {
                    Some(serde_yaml_ng::Value::String(v)) if semver::Version::parse(v).is_ok() => {
                        AttributeValue::Version(v.clone())
                    }
                    _ => return Err((format!("attributes.{name}"), "write a version as {version: 1.2.3}".into())),
                },
                _ => {
                    return Err((
                        format!("attributes.{name}"),
                        "must be a string, an integer, a boolean or {version: 1.2.3}".into(),
                    ));
                }
            };
            template = template.with_attribute(name, value);
        }
        for (name, v) in &self.capacity {
            let text = scalar_text(v)
                .filter(|t| crate::quantity::parse_scaled(t, 1).is_ok())
                .ok_or_else(|| (format!("capacity.{name}"), "must be a quantity such as 80Gi".to_string()))?;
            template = template.with_capacity(name, &text);
        }
        let leaf = self.driver.split('.').next().unwrap_or(&self.driver);
        Ok((0..self.count)
            .map(|i| {
                let mut d = template.clone();
                d.name = format!("{leaf}-{i}");
                d
            })
            .collect())
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaintSpec {
    pub key: String,
    #[serde(default)]
    pub value: String,
    pub effect: String,
}

/// A node of the expanded description, with the label values Kubernetes would show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribedNode {
    pub spec: NodeSpec,
    /// Capacity as Kubernetes quantity strings, for rendering Node objects.
    pub capacity: BTreeMap<String, String>,
}

/// A YAML scalar as the quantity text Kubernetes would read (numbers and strings both allowed).
fn scalar_text(v: &serde_yaml_ng::Value) -> Option<String> {
    match v {
        serde_yaml_ng::Value::String(s) => Some(s.clone()),
        serde_yaml_ng::Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

impl ClusterDescription {
    /// Parses a description; `file` names it in errors.
    pub fn parse(file: &str, text: &str) -> Result<Self, InputError> {
        let desc: Self = InputError::parse_yaml(file, text)?;
        desc.for_each_node(file, |_| Ok(()))?;
        Ok(desc)
    }

    /// Expands classes into nodes, validating every field.
    pub fn expand(&self, file: &str) -> Result<Vec<DescribedNode>, InputError> {
        let mut nodes = Vec::new();
        self.for_each_node(file, |n| {
            nodes.push(n);
            Ok(())
        })?;
        Ok(nodes)
    }

    /// Validates every field and hands each node to `f` as it is generated, so building a large
    /// cluster never holds the whole expanded list.
    pub fn for_each_node(
        &self,
        file: &str,
        mut f: impl FnMut(DescribedNode) -> Result<(), InputError>,
    ) -> Result<(), InputError> {
        let err = |path: String, msg: String| InputError::new(file, path, msg);
        if !is_dns_label(&self.name) {
            return Err(err(
                "name".into(),
                format!("{:?} is not a valid name; use 1-63 of a-z, 0-9 and '-'", self.name),
            ));
        }
        for (i, level) in self.topology.iter().enumerate() {
            if !is_dns_label(&level.level) || level.level == "node" || level.level == "cluster" {
                return Err(err(
                    format!("topology[{i}].level"),
                    format!("{:?} cannot be a level name; use a-z, 0-9 and '-', not 'node' or 'cluster'", level.level),
                ));
            }
            names::check_label_key(&level.label).map_err(|m| err(format!("topology[{i}].label"), m))?;
            if self.topology[..i].iter().any(|l| l.level == level.level || l.label == level.label) {
                return Err(err(format!("topology[{i}]"), "each level and each label may appear once".into()));
            }
        }
        if self.node_classes.is_empty() {
            return Err(err("nodeClasses".into(), "at least one node class is required".into()));
        }
        for (ci, class) in self.node_classes.iter().enumerate() {
            let at = |field: &str| format!("nodeClasses[{ci}].{field}");
            if !is_dns_label(&class.name) {
                return Err(err(
                    at("name"),
                    format!("{:?} is not a valid name; use 1-63 of a-z, 0-9 and '-'", class.name),
                ));
            }
            if self.node_classes[..ci].iter().any(|c| c.name == class.name) {
                return Err(err(
                    at("name"),
                    format!("class {:?} is declared twice; class names must be unique", class.name),
                ));
            }
            if class.count < 1 || class.count as u64 > MAX_NODES_PER_CLASS {
                return Err(err(
                    at("count"),
                    format!("{} is out of range; allowed 1..={MAX_NODES_PER_CLASS}", class.count),
                ));
            }
            let mut pooled = Vec::new();
            let mut capacity = BTreeMap::new();
            for (name, value) in &class.capacity {
                let path = at(&format!("capacity.{name}"));
                let unit = resources::unit_of(name).map_err(|m| err(path.clone(), m))?;
                let text = scalar_text(value)
                    .ok_or_else(|| err(path.clone(), "must be a quantity such as 32 or 128Gi".into()))?;
                let amount = resources::parse_amount(unit, &text).map_err(|e| err(path.clone(), e.to_string()))?;
                pooled.push((name.clone(), amount));
                capacity.insert(name.clone(), text);
            }
            if pooled.is_empty() {
                return Err(err(at("capacity"), "at least one resource is required, e.g. cpu: 32".into()));
            }
            let mut devices = Vec::new();
            for (name, &count) in &class.devices {
                let path = at(&format!("devices.{name}"));
                resources::unit_of(name).map_err(|m| err(path.clone(), m))?;
                if class.capacity.contains_key(name) {
                    return Err(err(path, "listed under capacity too; a resource is either pooled or devices".into()));
                }
                if !(1..=i64::from(MAX_DEVICES_PER_NODE)).contains(&count) {
                    return Err(err(
                        path,
                        format!(
                            "{count} devices is out of range; allowed 1..={MAX_DEVICES_PER_NODE} (list a larger count under \
                             capacity, as pooled)"
                        ),
                    ));
                }
                devices.push((name.clone(), count as u32));
                capacity.insert(name.clone(), count.to_string());
            }
            let mut taints = Vec::new();
            for (ti, t) in class.taints.iter().enumerate() {
                let effect = TaintEffect::parse(&t.effect).ok_or_else(|| {
                    err(
                        at(&format!("taints[{ti}].effect")),
                        format!("{:?}: allowed NoSchedule, PreferNoSchedule, NoExecute", t.effect),
                    )
                })?;
                names::check_label_key(&t.key).map_err(|m| err(at(&format!("taints[{ti}].key")), m))?;
                names::check_label_value(&t.value).map_err(|m| err(at(&format!("taints[{ti}].value")), m))?;
                taints.push(Taint { key: t.key.clone(), value: t.value.clone(), effect });
            }
            for (key, value) in &class.labels {
                let path = at(&format!("labels.{key}"));
                names::check_label_key(key).map_err(|m| err(path.clone(), m))?;
                names::check_label_value(value).map_err(|m| err(path, m))?;
            }
            let sizes = self.spread_sizes(class, file, ci)?;
            let mut counters = vec![0usize; self.topology.len()];
            for i in 0..class.count as usize {
                let name = format!("{}-{i}", class.name);
                let mut labels = class.labels.clone();
                labels.insert("kubernetes.io/hostname".to_string(), name.clone());
                let mut topology = Vec::new();
                for (li, level) in self.topology.iter().enumerate() {
                    if let Some(size) = sizes[li] {
                        counters[li] = i / size;
                        let domain = format!("{}-{}-{}", class.name, level.level, counters[li]);
                        labels.insert(level.label.clone(), domain.clone());
                        topology.push((level.level.clone(), domain));
                    }
                }
                let published = (class.published.iter().enumerate())
                    .map(|(pi, p)| {
                        p.devices(&name).map_err(|(field, m)| err(at(&format!("published[{pi}].{field}")), m))
                    })
                    .collect::<Result<Vec<_>, _>>()?
                    .concat();
                let spec = NodeSpec {
                    name,
                    topology,
                    pooled: pooled.clone(),
                    devices: devices.clone(),
                    published,
                    labels,
                    taints: taints.clone(),
                    unschedulable: class.unschedulable,
                };
                f(DescribedNode { spec, capacity: capacity.clone() })?;
            }
        }
        Ok(())
    }

    /// Nodes per domain at each level for one class; None where the class does not use a level.
    fn spread_sizes(&self, class: &NodeClass, file: &str, ci: usize) -> Result<Vec<Option<usize>>, InputError> {
        for key in class.spread.keys() {
            if !self.topology.iter().any(|l| &l.level == key) {
                let known: Vec<_> = self.topology.iter().map(|l| l.level.as_str()).collect();
                return Err(InputError::new(
                    file,
                    format!("nodeClasses[{ci}].spread.{key}"),
                    format!("no topology level {key:?}; levels are {known:?}"),
                ));
            }
        }
        let mut sizes = Vec::new();
        let mut outer: Option<(String, usize)> = None;
        for level in &self.topology {
            let Some(&size) = class.spread.get(&level.level) else {
                sizes.push(None);
                continue;
            };
            let path = format!("nodeClasses[{ci}].spread.{}", level.level);
            if size < 1 || size > class.count {
                return Err(InputError::new(
                    file,
                    path,
                    format!("{size} is out of range; allowed 1..={}", class.count),
                ));
            }
            let size = size as usize;
            if let Some((outer_level, outer_size)) = &outer
                && outer_size % size != 0
            {
                return Err(InputError::new(
                    file,
                    path,
                    format!(
                        "{size} does not divide the {outer_level} size {outer_size}; a {} may not straddle two {outer_level}s",
                        level.level
                    ),
                ));
            }
            outer = Some((level.level.clone(), size));
            sizes.push(Some(size));
        }
        Ok(sizes)
    }

    /// Builds the resource graph of this cluster.
    pub fn build(&self, file: &str) -> Result<Graph, InputError> {
        let mut graph = Graph::empty(&self.name);
        self.for_each_node(file, |n| {
            graph.insert_node(&n.spec).map(drop).map_err(|m| InputError::new(file, format!("node {}", n.spec.name), m))
        })?;
        check_totals(file, &graph)?;
        graph.rebuild_index();
        Ok(graph)
    }
}

/// Refuses a cluster whose nodes hold more of a resource in all than a count of base units can
/// say (2^64 - 1): its totals would wrap and read as nearly nothing free.
fn check_totals(file: &str, graph: &Graph) -> Result<(), InputError> {
    for (i, def) in (0..graph.resources.len()).map(|i| (i, graph.resources.def(crate::resources::ResourceId(i as u16))))
    {
        let total =
            graph.nodes.iter().try_fold(0u64, |sum, n| sum.checked_add(n.capacity.get(i).copied().unwrap_or(0)));
        if total.is_none() {
            return Err(InputError::new(
                file,
                "nodeClasses",
                format!(
                    "the nodes hold more {} in all than muster can count ({} base units); give fewer nodes or \
                     smaller capacities",
                    def.name,
                    u64::MAX
                ),
            ));
        }
    }
    Ok(())
}

/// Parses and builds in one step.
pub fn load(file: &str, text: &str) -> Result<Graph, InputError> {
    let desc: ClusterDescription = InputError::parse_yaml(file, text)?;
    desc.build(file)
}
