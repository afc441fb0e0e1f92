//! Growing a graph node by node: used by the cluster description, by `add node`, and by tests.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::dra::PublishedDevice;
use crate::error::InputError;
use crate::graph::{DeviceSlot, Graph, Node, NodeId, Role, Taint, Vertex, VertexId, VertexMeta};
use crate::quantity::Unit;
use crate::resources::{self, ResourceKind, ResourceTable};

/// One node as the cluster description or a node watcher sees it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodeSpec {
    pub name: String,
    /// Topology domains above the node, outermost first: (level, domain name).
    pub topology: Vec<(String, String)>,
    /// Pooled capacity in base units, by Kubernetes resource name.
    pub pooled: Vec<(String, u64)>,
    /// Discrete devices, by resource name: how many.
    pub devices: Vec<(String, u32)>,
    /// Devices drivers publish for the node (Dynamic Resource Allocation): each counts as one
    /// device of the resource named after its driver.
    pub published: Vec<PublishedDevice>,
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    pub unschedulable: bool,
}

fn meta(vtype: &str, basename: &str, name: &str, id: i64, uniq_id: u64) -> VertexMeta {
    VertexMeta {
        vtype: vtype.to_string(),
        basename: basename.to_string(),
        name: name.to_string(),
        id,
        uniq_id,
        rank: -1,
        exclusive: false,
        unit: String::new(),
        size: 1,
        properties: BTreeMap::new(),
    }
}

/// The vertex type used for a resource leaf: the part after the domain (`nvidia.com/gpu` -> `gpu`).
pub fn leaf_type(resource: &str) -> &str {
    resource.rsplit('/').next().unwrap_or(resource)
}

impl Graph {
    /// A graph with only its root (type `cluster`).
    pub fn empty(cluster_name: &str) -> Self {
        let root = Vertex {
            meta: meta("cluster", cluster_name, cluster_name, 0, 0),
            role: Role::Domain,
            parent: None,
            children: vec![],
        };
        Graph::from_parts(ResourceTable::default(), vec![root], VertexId(0), vec![])
    }

    /// A graph of `nodes` (as a controller sees them), indexed and ready to match on. Refuses
    /// them all if it refuses one.
    pub fn from_nodes(cluster_name: &str, nodes: &[NodeSpec]) -> Result<Self, InputError> {
        let (graph, refused) = Self::from_nodes_leaving_out(cluster_name, nodes);
        match refused.into_iter().next() {
            Some(e) => Err(e),
            None => Ok(graph),
        }
    }

    /// A graph of the `nodes` it can take, each node it refuses left out and returned with why (a
    /// topology label missing, a device published twice): one node that cannot be described must
    /// not keep the others from being scheduled on.
    pub fn from_nodes_leaving_out(cluster_name: &str, nodes: &[NodeSpec]) -> (Self, Vec<InputError>) {
        let mut graph = Graph::empty(cluster_name);
        let mut refused = Vec::new();
        for n in nodes {
            if let Err(m) = graph.insert_node(n) {
                refused.push(InputError::new("cluster", format!("node {}", n.name), m));
            }
        }
        graph.rebuild_index();
        (graph, refused)
    }

    fn push_vertex(&mut self, mut meta: VertexMeta, role: Role, parent: VertexId) -> VertexId {
        let id = VertexId(self.vertices.len() as u32);
        meta.uniq_id = u64::from(id.0);
        self.vertices.push(Vertex { meta, role, parent: Some(parent), children: vec![] });
        self.vertices[parent.0 as usize].children.push(id);
        id
    }

    /// The topology vertex `name` of type `level` under `parent`, created if missing.
    fn domain_vertex(&mut self, parent: VertexId, level: &str, name: &str) -> Result<VertexId, String> {
        if let Some(&v) = self.domain_child.get(&(parent, name.to_string())) {
            let found = &self.vertex(v).meta.vtype;
            if found != level {
                return Err(format!("domain {name:?} is a {found} and cannot also be a {level}"));
            }
            return Ok(v);
        }
        let id = self.levels_count(level);
        let v = self.push_vertex(meta(level, name, name, id, 0), Role::Domain, parent);
        self.domain_child.insert((parent, name.to_string()), v);
        Ok(v)
    }

    fn levels_count(&self, level: &str) -> i64 {
        self.domain_child.values().filter(|v| self.vertex(**v).meta.vtype == level).count() as i64
    }

    /// The resources a node description brings, checked against the graph: each listed once, each
    /// of the kind (pooled or device) it has elsewhere, and its topology domains of their levels.
    pub(crate) fn check_node<'a>(&self, spec: &'a NodeSpec) -> Result<Vec<(&'a str, Unit, ResourceKind, u64)>, String> {
        let mut resources = Vec::new();
        for (name, amount) in &spec.pooled {
            resources.push((name.as_str(), resources::unit_of(name)?, ResourceKind::Pooled, *amount));
        }
        for (name, count) in &spec.devices {
            if *count > crate::cluster::MAX_DEVICES_PER_NODE {
                return Err(format!(
                    "{count} devices of {name}: a node has at most {} of one resource, each placed by name; offer a \
                     larger count as pooled capacity",
                    crate::cluster::MAX_DEVICES_PER_NODE
                ));
            }
            resources.push((name.as_str(), resources::unit_of(name)?, ResourceKind::Device, u64::from(*count)));
        }
        for (i, d) in spec.published.iter().enumerate() {
            let same = |e: &PublishedDevice| (&e.driver, &e.pool, &e.name) == (&d.driver, &d.pool, &d.name);
            if spec.published[..i].iter().any(same) {
                return Err(format!("device {}/{} of driver {} is published twice", d.pool, d.name, d.driver));
            }
            if !crate::names::is_dns_subdomain(&d.driver) {
                return Err(format!(
                    "driver {:?} of device {} is not a DNS subdomain such as gpu.example.com",
                    d.driver, d.name
                ));
            }
            if !spec.published[..i].iter().any(|e| e.driver == d.driver) {
                // A driver's devices are counted as one resource named after it.
                let count = spec.published.iter().filter(|e| e.driver == d.driver).count() as u64;
                resources.push((d.driver.as_str(), Unit::Count, ResourceKind::Device, count));
            }
        }
        for (i, (name, ..)) in resources.iter().enumerate() {
            if resources[..i].iter().any(|(n, ..)| n == name) {
                return Err(format!("resource {name:?} is listed twice"));
            }
            if let Some(id) = self.resources.get(name) {
                let kind = self.resources.def(id).kind;
                if kind != resources[i].2 {
                    return Err(format!("resource {name:?} is pooled on some nodes and a device on others; pick one"));
                }
            }
        }
        let mut existing = Some(self.root);
        for (level, name) in &spec.topology {
            existing = existing.and_then(|p| self.domain_child.get(&(p, name.clone())).copied());
            if let Some(v) = existing
                && self.vertex(v).meta.vtype != *level
            {
                return Err(format!("domain {name:?} is a {} and cannot also be a {level}", self.vertex(v).meta.vtype));
            }
        }
        Ok(resources)
    }

    /// Adds a node's vertices without rebuilding the matching index; callers rebuild once after a
    /// batch. On error nothing was added.
    pub(crate) fn insert_node(&mut self, spec: &NodeSpec) -> Result<NodeId, String> {
        if spec.name.is_empty() {
            return Err("node name is empty".to_string());
        }
        if self.node_by_name.contains_key(&spec.name) {
            return Err(format!("a node named {:?} already exists; node names must be unique", spec.name));
        }
        // Validate everything before the first change, so a refusal leaves the graph as it was.
        let resources = self.check_node(spec)?;
        let mut parent = self.root;
        for (level, name) in &spec.topology {
            parent = self.domain_vertex(parent, level, name)?;
        }
        let node_id = NodeId(self.nodes.len() as u32);
        let node_index = self.nodes.len() as i64;
        let vertex = self.push_vertex(meta("node", &spec.name, &spec.name, node_index, 0), Role::Node(node_id), parent);
        let r_before = self.resources.len();
        let mut node = Node {
            name: spec.name.clone(),
            vertex,
            domain: self.root_domain,
            labels: spec.labels.clone(),
            taints: spec.taints.clone(),
            unschedulable: spec.unschedulable,
            up: true,
            removed: false,
            capacity: vec![0; r_before],
            free: vec![0; r_before],
            used: vec![0; r_before],
            devices: vec![],
            spans: vec![],
            sockets: vec![],
        };
        for (name, unit, kind, amount) in resources {
            let rid = self.ensure_resource(name, unit, kind)?;
            node.capacity.resize(self.resources.len(), 0);
            node.free.resize(self.resources.len(), 0);
            node.used.resize(self.resources.len(), 0);
            node.capacity[rid.index()] = amount;
            node.free[rid.index()] = amount;
            let vtype = leaf_type(name);
            let mut m = meta(vtype, vtype, vtype, 0, 0);
            match kind {
                ResourceKind::Pooled => {
                    m.name = format!("{vtype}0");
                    m.size = amount;
                    m.unit = unit.jgf_name().to_string();
                    self.push_vertex(m, Role::Pooled { node: node_id, resource: rid, amount }, vertex);
                }
                ResourceKind::Device => {
                    let mut published = spec.published.iter().filter(|d| d.driver == name);
                    for i in 0..amount {
                        let mut dm = m.clone();
                        dm.id = i as i64;
                        let published = published.next().map(|d| Arc::new(d.clone()));
                        dm.name = published.as_ref().map_or_else(
                            || format!("{vtype}{i}"),
                            |d| crate::dra::graph_name(&d.driver, &d.pool, &d.name),
                        );
                        let dv = self.push_vertex(dm, Role::Device { node: node_id, resource: rid }, vertex);
                        node.devices.push(DeviceSlot {
                            resource: rid,
                            vertex: dv,
                            holder: None,
                            socket: None,
                            published,
                        });
                    }
                }
            }
        }
        self.node_by_name.insert(spec.name.clone(), node_id);
        self.nodes.push(node);
        Ok(node_id)
    }
}

/// What a node's vertices are built from, apart from amounts: its place in the topology and the
/// resources under it. Changing any of it means rebuilding the node's vertices.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct NodeShape {
    topology: Vec<(String, String)>,
    pooled: Vec<String>,
    devices: Vec<(String, u32)>,
    published: Vec<PublishedDevice>,
}

impl NodeShape {
    pub(crate) fn of_spec(spec: &NodeSpec) -> Self {
        let mut pooled: Vec<String> = spec.pooled.iter().map(|(r, _)| r.clone()).collect();
        pooled.sort();
        let mut devices = spec.devices.clone();
        devices.extend(published_counts(spec.published.iter()));
        devices.sort();
        let mut published = spec.published.clone();
        published.sort_by(|a, b| (&a.driver, &a.pool, &a.name).cmp(&(&b.driver, &b.pool, &b.name)));
        NodeShape { topology: spec.topology.clone(), pooled, devices, published }
    }

    pub(crate) fn of_node(g: &Graph, n: NodeId) -> Self {
        let node = g.node(n);
        let mut topology = Vec::new();
        let mut cur = g.vertex(node.vertex).parent;
        while let Some(v) = cur.filter(|&v| v != g.root) {
            topology.push((g.vertex(v).meta.vtype.clone(), g.vertex(v).meta.name.clone()));
            cur = g.vertex(v).parent;
        }
        topology.reverse();
        let mut pooled = Vec::new();
        let mut devices: BTreeMap<String, u32> = BTreeMap::new();
        for &c in &g.vertex(node.vertex).children {
            match g.vertex(c).role {
                Role::Pooled { resource, .. } => pooled.push(g.resources.def(resource).name.clone()),
                Role::Device { resource, .. } => {
                    *devices.entry(g.resources.def(resource).name.clone()).or_default() += 1
                }
                _ => {}
            }
        }
        pooled.sort();
        let mut published: Vec<PublishedDevice> =
            node.devices.iter().filter_map(|s| s.published.as_deref().cloned()).collect();
        published.sort_by(|a, b| (&a.driver, &a.pool, &a.name).cmp(&(&b.driver, &b.pool, &b.name)));
        NodeShape { topology, pooled, devices: devices.into_iter().collect(), published }
    }
}

/// How many devices each driver publishes, by driver.
fn published_counts<'a>(published: impl Iterator<Item = &'a PublishedDevice>) -> Vec<(String, u32)> {
    let mut counts: BTreeMap<String, u32> = BTreeMap::new();
    for d in published {
        *counts.entry(d.driver.clone()).or_default() += 1;
    }
    counts.into_iter().collect()
}

impl Graph {
    /// Sets a node's labels, taints, cordon and pooled amounts in place (its shape unchanged).
    /// Running allocations stay where they are, even when the capacity shrank under them.
    pub(crate) fn update_node_in_place(&mut self, n: NodeId, spec: &NodeSpec) {
        let vertex = self.node(n).vertex;
        for c in self.vertex(vertex).children.clone() {
            if let Role::Pooled { node, resource, .. } = self.vertex(c).role {
                let amount = spec.pooled.iter().find(|(r, _)| *r == self.resources.def(resource).name).map(|&(_, a)| a);
                if let Some(amount) = amount {
                    let v = &mut self.vertices[c.0 as usize];
                    v.role = Role::Pooled { node, resource, amount };
                    v.meta.size = amount;
                    self.nodes[n.0 as usize].capacity[resource.index()] = amount;
                }
            }
        }
        let node = self.node_mut(n);
        node.labels = spec.labels.clone();
        node.taints = spec.taints.clone();
        node.unschedulable = spec.unschedulable;
        node.recompute_free();
        self.refresh_node(n);
    }
}
