//! JSON Graph Format, as Fluxion reads and writes it: import (Fluxion's own graphs and muster's),
//! export, and allocations as JGF subgraphs.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::{Deserialize, Serialize};

use crate::allocations::Allocation;
use crate::error::InputError;
use crate::graph::{DeviceSlot, Graph, Node, NodeId, Role, Taint, TaintEffect, Vertex, VertexId, VertexMeta};
use crate::quantity::MAX_AMOUNT;
use crate::resources::{self, ResourceKind, ResourceTable};
use crate::sockets::Socket;

/// JGF property naming the Kubernetes resource a leaf vertex stands for, written on export when
/// the vertex type alone does not say it (Fluxion's core, memory and gpu do).
const PROP_RESOURCE: &str = "muster.dev/resource";
/// JGF property marking a leaf as a discrete device (value "device") rather than pooled capacity.
const PROP_KIND: &str = "muster.dev/kind";
/// Node vertex properties that carry node state rather than labels. The ':' makes them invalid
/// as label keys, so no label can be mistaken for state.
const PROP_TAINTS: &str = "muster:taints";
const PROP_UNSCHEDULABLE: &str = "muster:unschedulable";
const PROP_DOWN: &str = "muster:down";
/// Largest graph accepted, in vertices.
pub const MAX_VERTICES: usize = 20_000_000;

#[derive(Debug, Serialize, Deserialize)]
struct Doc {
    graph: DocGraph,
}

#[derive(Debug, Serialize, Deserialize)]
struct DocGraph {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    directed: Option<bool>,
    nodes: Vec<DocNode>,
    #[serde(default)]
    edges: Vec<DocEdge>,
}

#[derive(Debug, Serialize, Deserialize)]
struct DocNode {
    id: String,
    metadata: DocMeta,
}

fn minus_one() -> i64 {
    -1
}
fn one() -> u64 {
    1
}

#[derive(Debug, Serialize, Deserialize)]
struct DocMeta {
    #[serde(rename = "type")]
    vtype: String,
    basename: String,
    name: String,
    #[serde(default)]
    id: i64,
    #[serde(default)]
    uniq_id: u64,
    #[serde(default = "minus_one")]
    rank: i64,
    #[serde(default)]
    exclusive: bool,
    #[serde(default)]
    unit: String,
    #[serde(default = "one")]
    size: u64,
    #[serde(default)]
    paths: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    properties: BTreeMap<String, String>,
}

#[derive(Debug, Serialize, Deserialize)]
struct DocEdge {
    source: String,
    target: String,
    #[serde(default)]
    metadata: serde_json::Value,
}

/// True for a parent-to-child containment edge in either of Fluxion's spellings; `in` edges
/// (child to parent) and other subsystems are not.
fn is_containment(meta: &serde_json::Value) -> bool {
    fn text(v: Option<&serde_json::Value>) -> Option<&str> {
        v.and_then(|s| s.as_str())
    }
    meta.is_null()
        || (text(meta.get("subsystem")) == Some("containment")
            && matches!(text(meta.get("relationship")), None | Some("contains")))
        || text(meta.get("name").and_then(|n| n.get("containment"))) == Some("contains")
}

fn memory_multiplier(unit: &str) -> Option<u64> {
    Some(match unit {
        "B" => 1,
        "KB" => 1 << 10,
        "MB" => 1 << 20,
        "" | "GB" => 1 << 30,
        "TB" => 1 << 40,
        _ => return None,
    })
}

/// What a leaf vertex under a node stands for: (resource name, kind, amount). An error names the
/// field of the vertex's metadata at fault.
fn classify_leaf(meta: &VertexMeta) -> Result<(String, ResourceKind, u64), (String, String)> {
    if let Some(name) = meta.properties.get(PROP_RESOURCE) {
        resources::unit_of(name).map_err(|m| (format!("properties[{PROP_RESOURCE:?}]"), m))?;
        let kind = if meta.properties.get(PROP_KIND).map(String::as_str) == Some("device") {
            ResourceKind::Device
        } else {
            ResourceKind::Pooled
        };
        let amount = if kind == ResourceKind::Device { 1 } else { within_limit(meta.size, 1)? };
        return Ok((name.clone(), kind, amount));
    }
    match meta.vtype.as_str() {
        "core" => Ok(("cpu".into(), ResourceKind::Pooled, within_limit(meta.size, 1000)?)),
        "memory" => {
            let m = memory_multiplier(&meta.unit).ok_or_else(|| {
                ("unit".to_string(), format!("memory unit {:?}: allowed B, KB, MB, GB (default), TB", meta.unit))
            })?;
            Ok(("memory".into(), ResourceKind::Pooled, within_limit(meta.size, m)?))
        }
        "gpu" => Ok(("nvidia.com/gpu".into(), ResourceKind::Device, 1)),
        other => Err((
            "type".to_string(),
            format!(
                "unknown resource type {other:?} under a node; allowed: core, memory, gpu, or a vertex with \
                 property {PROP_RESOURCE:?} naming a Kubernetes resource"
            ),
        )),
    }
}

/// A leaf's `size` in base units (`per_unit` of them each), refused above the largest amount
/// muster accepts, as a quantity string that large is: clamped, it would stand for less than written.
fn within_limit(size: u64, per_unit: u64) -> Result<u64, (String, String)> {
    size.checked_mul(per_unit).filter(|&a| a <= MAX_AMOUNT).ok_or_else(|| {
        (
            "size".to_string(),
            format!("{size} is absurdly large for this vertex; the limit is {MAX_AMOUNT} base units (of which one unit is {per_unit})"),
        )
    })
}

/// A node's labels and state, read back from its vertex properties.
struct NodeState {
    labels: BTreeMap<String, String>,
    taints: Vec<Taint>,
    unschedulable: bool,
    up: bool,
}

fn node_state_from_properties(props: &BTreeMap<String, String>) -> Result<NodeState, String> {
    let mut labels = props.clone();
    let mut taints = Vec::new();
    if let Some(list) = labels.remove(PROP_TAINTS) {
        for t in list.split(',').filter(|s| !s.is_empty()) {
            let (kv, effect) = t.rsplit_once(':').ok_or_else(|| format!("taint {t:?}: write key=value:Effect"))?;
            let (key, value) = kv.split_once('=').unwrap_or((kv, ""));
            let effect = TaintEffect::parse(effect)
                .ok_or_else(|| format!("taint effect {effect:?}: allowed NoSchedule, PreferNoSchedule, NoExecute"))?;
            taints.push(Taint { key: key.to_string(), value: value.to_string(), effect });
        }
    }
    let flag = |labels: &mut BTreeMap<String, String>, key: &str| labels.remove(key).is_some_and(|v| v == "true");
    let unschedulable = flag(&mut labels, PROP_UNSCHEDULABLE);
    let down = flag(&mut labels, PROP_DOWN);
    Ok(NodeState { labels, taints, unschedulable, up: !down })
}

fn to_vertex_meta(m: DocMeta) -> VertexMeta {
    VertexMeta {
        vtype: m.vtype,
        basename: m.basename,
        name: m.name,
        id: m.id,
        uniq_id: m.uniq_id,
        rank: m.rank,
        exclusive: m.exclusive,
        unit: m.unit,
        size: m.size,
        properties: m.properties,
    }
}

/// Reads a JGF document into a graph. Errors name the file and the vertex or edge at fault.
pub fn import(file: &str, text: &str) -> Result<Graph, InputError> {
    let de = &mut serde_json::Deserializer::from_str(text);
    let doc: Doc = serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        InputError::new(file, if path == "." { String::new() } else { path }, e.into_inner().to_string())
    })?;
    let err = |path: String, msg: String| InputError::new(file, path, msg);
    let n = doc.graph.nodes.len();
    if n == 0 {
        return Err(err("graph.nodes".into(), "the graph has no vertices".into()));
    }
    if n > MAX_VERTICES {
        return Err(err("graph.nodes".into(), format!("{n} vertices; at most {MAX_VERTICES} are accepted")));
    }
    let mut index: HashMap<&str, usize> = HashMap::with_capacity(n);
    for (i, v) in doc.graph.nodes.iter().enumerate() {
        if index.insert(v.id.as_str(), i).is_some() {
            return Err(err(
                format!("graph.nodes[{i}].id"),
                format!("duplicate vertex id {:?}; ids must be unique", v.id),
            ));
        }
    }
    let mut parent: Vec<Option<usize>> = vec![None; n];
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, e) in doc.graph.edges.iter().enumerate() {
        let at = format!("graph.edges[{i}]");
        let (Some(&s), Some(&t)) = (index.get(e.source.as_str()), index.get(e.target.as_str())) else {
            return Err(err(
                at,
                format!("dangling edge {:?} -> {:?}: both ends must be vertex ids", e.source, e.target),
            ));
        };
        if !is_containment(&e.metadata) {
            continue;
        }
        if s == t {
            return Err(err(at, format!("vertex {:?} contains itself (a cycle)", e.source)));
        }
        if parent[t].is_some() {
            return Err(err(
                at,
                format!("vertex {:?} has two containment parents; the graph must be a tree", e.target),
            ));
        }
        parent[t] = Some(s);
        children[s].push(t);
    }
    let roots: Vec<usize> = (0..n).filter(|&i| parent[i].is_none()).collect();
    if roots.len() != 1 {
        let what = if roots.is_empty() {
            "no root (every vertex has a parent: a cycle)".to_string()
        } else {
            format!("{} roots; exactly one is allowed", roots.len())
        };
        return Err(err("graph.edges".into(), what));
    }
    if doc.graph.nodes[roots[0]].metadata.vtype == "node" {
        return Err(err(
            format!("graph.nodes[{}]", roots[0]),
            "the root is a node; it must be a cluster (or another level) containing nodes".into(),
        ));
    }
    // Depth-first order from the root becomes the arena order, so ids follow the tree.
    let mut order = Vec::with_capacity(n);
    let mut stack = vec![roots[0]];
    while let Some(v) = stack.pop() {
        order.push(v);
        stack.extend(children[v].iter().rev());
    }
    if order.len() != n {
        let stray = (0..n).find(|i| !order.contains(i)).unwrap_or(0);
        return Err(err(
            format!("graph.nodes[{stray}]"),
            "not reachable from the root: the containment edges form a cycle".into(),
        ));
    }
    let new_id: HashMap<usize, u32> = order.iter().enumerate().map(|(k, &old)| (old, k as u32)).collect();
    let mut metas: Vec<Option<DocMeta>> = doc.graph.nodes.into_iter().map(|v| Some(v.metadata)).collect();
    let mut vertices: Vec<Vertex> = Vec::with_capacity(n);
    let mut nodes: Vec<Node> = Vec::new();
    let mut table = ResourceTable::default();
    let mut owner: Vec<Option<NodeId>> = vec![None; n];
    // The socket (index in its node's `sockets`) each vertex under a node lies in.
    let mut socket_of: Vec<Option<u16>> = vec![None; n];
    let mut seen_names = BTreeSet::new();
    let mut uniq = BTreeSet::new();
    for &old in &order {
        let meta = metas[old].take().expect("each vertex visited once");
        let at = format!("graph.nodes[{old}]");
        if !uniq.insert(meta.uniq_id) && meta.uniq_id != 0 {
            return Err(err(format!("{at}.metadata.uniq_id"), format!("duplicate uniq_id {}", meta.uniq_id)));
        }
        let paths = meta.paths.clone();
        let vmeta = to_vertex_meta(meta);
        let p = parent[old];
        let under_node = p.and_then(|p| owner[p]);
        let role = if vmeta.vtype == "node" {
            if under_node.is_some() {
                return Err(err(at, "a node inside another node".into()));
            }
            let nid = NodeId(nodes.len() as u32);
            if !seen_names.insert(vmeta.name.clone()) {
                return Err(err(format!("{at}.metadata.name"), format!("duplicate node name {:?}", vmeta.name)));
            }
            let NodeState { labels, taints, unschedulable, up } = node_state_from_properties(&vmeta.properties)
                .map_err(|m| err(format!("{at}.metadata.properties"), m))?;
            nodes.push(Node {
                name: vmeta.name.clone(),
                vertex: VertexId(new_id[&old]),
                domain: crate::graph::DomainId(0),
                labels,
                taints,
                unschedulable,
                up,
                removed: false,
                capacity: vec![],
                free: vec![],
                used: vec![],
                devices: vec![],
                spans: vec![],
                sockets: vec![],
            });
            owner[old] = Some(nid);
            Role::Node(nid)
        } else if let Some(nid) = under_node {
            owner[old] = Some(nid);
            socket_of[old] = p.and_then(|p| socket_of[p]);
            if children[old].is_empty() {
                let (name, kind, amount) =
                    classify_leaf(&vmeta).map_err(|(field, m)| err(format!("{at}.metadata.{field}"), m))?;
                let unit = resources::unit_of(&name).map_err(|m| err(at.clone(), m))?;
                let rid = table.intern(&name, unit, kind).map_err(|m| err(at.clone(), m))?;
                let node = &mut nodes[nid.0 as usize];
                node.capacity.resize(table.len(), 0);
                let total = node.capacity[rid.index()] + amount;
                if total > MAX_AMOUNT {
                    return Err(err(
                        format!("{at}.metadata.size"),
                        format!(
                            "node {:?} holds more than {MAX_AMOUNT} base units of {name} with this vertex; a node's total \
                             must stay within that limit",
                            node.name
                        ),
                    ));
                }
                node.capacity[rid.index()] = total;
                // A socket's share is part of its node's total, so it is within the limit too.
                if let Some(s) = socket_of[old] {
                    let socket = &mut node.sockets[usize::from(s)].capacity;
                    socket.resize(table.len(), 0);
                    socket[rid.index()] += amount;
                }
                match kind {
                    ResourceKind::Pooled => Role::Pooled { node: nid, resource: rid, amount },
                    ResourceKind::Device => {
                        let vertex = VertexId(new_id[&old]);
                        node.devices.push(DeviceSlot {
                            resource: rid,
                            vertex,
                            holder: None,
                            socket: socket_of[old],
                            published: None,
                        });
                        Role::Device { node: nid, resource: rid }
                    }
                }
            } else {
                if vmeta.vtype == "socket" {
                    if socket_of[old].is_some() {
                        return Err(err(at, "a socket inside another socket".into()));
                    }
                    let node = &mut nodes[nid.0 as usize];
                    let index = u16::try_from(node.sockets.len())
                        .map_err(|_| err(at.clone(), format!("more than {} sockets in one node", u16::MAX)))?;
                    node.sockets.push(Socket { vertex: VertexId(new_id[&old]), capacity: vec![] });
                    socket_of[old] = Some(index);
                }
                Role::Container
            }
        } else {
            Role::Domain
        };
        let vid = VertexId(new_id[&old]);
        let vparent = p.map(|p| VertexId(new_id[&p]));
        let vchildren = children[old].iter().map(|c| VertexId(new_id[c])).collect();
        vertices.push(Vertex { meta: vmeta, role, parent: vparent, children: vchildren });
        if let Some(path) = paths.get("containment") {
            let mut names = vec![vertices[vid.0 as usize].meta.name.clone()];
            let mut cur = vparent;
            while let Some(v) = cur {
                names.push(vertices[v.0 as usize].meta.name.clone());
                cur = vertices[v.0 as usize].parent;
            }
            names.reverse();
            let derived = format!("/{}", names.join("/"));
            if *path != derived {
                return Err(err(
                    format!("{at}.metadata.paths.containment"),
                    format!("{path:?} disagrees with the edges, which place it at {derived:?}"),
                ));
            }
        }
    }
    for node in &mut nodes {
        node.capacity.resize(table.len(), 0);
        node.sockets.iter_mut().for_each(|s| s.capacity.resize(table.len(), 0));
        node.free = node.capacity.clone();
        node.used = vec![0; node.capacity.len()];
    }
    Ok(Graph::from_parts(table, vertices, VertexId(0), nodes))
}

fn doc_meta(g: &Graph, v: VertexId, size: Option<u64>) -> DocMeta {
    let vx = g.vertex(v);
    let m = &vx.meta;
    let mut properties = m.properties.clone();
    let leaf = match vx.role {
        Role::Pooled { resource, amount, .. } => Some((resource, ResourceKind::Pooled, amount)),
        Role::Device { resource, .. } => Some((resource, ResourceKind::Device, 1)),
        _ => None,
    };
    if let Some((resource, kind, amount)) = leaf {
        let name = &g.resources.def(resource).name;
        if classify_leaf(m).ok() != Some((name.clone(), kind, amount)) {
            properties.insert(PROP_RESOURCE.into(), name.clone());
            if kind == ResourceKind::Device {
                properties.insert(PROP_KIND.into(), "device".into());
            }
        }
    }
    if let Role::Node(n) = vx.role {
        let node = g.node(n);
        properties.extend(node.labels.iter().map(|(k, v)| (k.clone(), v.clone())));
        if !node.taints.is_empty() {
            let list: Vec<String> =
                node.taints.iter().map(|t| format!("{}={}:{}", t.key, t.value, t.effect.as_str())).collect();
            properties.insert(PROP_TAINTS.into(), list.join(","));
        }
        if node.unschedulable {
            properties.insert(PROP_UNSCHEDULABLE.into(), "true".into());
        }
        if !node.up {
            properties.insert(PROP_DOWN.into(), "true".into());
        }
    }
    DocMeta {
        vtype: m.vtype.clone(),
        basename: m.basename.clone(),
        name: m.name.clone(),
        id: m.id,
        uniq_id: m.uniq_id,
        rank: m.rank,
        exclusive: m.exclusive,
        unit: m.unit.clone(),
        size: size.unwrap_or(m.size),
        paths: BTreeMap::from([("containment".to_string(), g.path_of(v))]),
        properties,
    }
}

fn edge(source: usize, target: usize) -> DocEdge {
    DocEdge {
        source: source.to_string(),
        target: target.to_string(),
        metadata: serde_json::json!({"name": {"containment": "contains"}}),
    }
}

fn render(nodes: Vec<DocNode>, edges: Vec<DocEdge>) -> String {
    let doc = Doc { graph: DocGraph { directed: Some(true), nodes, edges } };
    serde_json::to_string_pretty(&doc).expect("JGF documents always serialize")
}

/// Writes the whole graph (removed nodes left out) as JGF. Vertex ids are positions in
/// depth-first order, which is also the order import gives vertices, so an export of an import
/// of an export is the same document.
pub fn export(g: &Graph) -> String {
    let mut order = Vec::new();
    let mut stack = vec![g.root];
    while let Some(v) = stack.pop() {
        order.push(v);
        stack.extend(g.vertex(v).children.iter().rev());
    }
    let position: HashMap<VertexId, usize> = order.iter().enumerate().map(|(i, &v)| (v, i)).collect();
    let nodes =
        order.iter().map(|&v| DocNode { id: position[&v].to_string(), metadata: doc_meta(g, v, None) }).collect();
    // Edges in child order: import rebuilds the order of siblings from them.
    let edges = order
        .iter()
        .flat_map(|&v| g.vertex(v).children.iter().map(move |c| (v, *c)))
        .map(|(p, c)| edge(position[&p], position[&c]))
        .collect();
    render(nodes, edges)
}

/// Writes an allocation as a JGF subgraph: the paths to its nodes and, under each node, the
/// sockets, devices and pooled amounts the allocation holds there, each leaf sized in its own unit
/// (so that the subgraph reads back as a graph of exactly what was allocated).
pub fn export_allocation(g: &Graph, a: &Allocation) -> String {
    let mut keep: BTreeMap<VertexId, Option<u64>> = BTreeMap::new();
    for m in &a.members {
        for &v in m.devices.iter().chain(&m.sockets) {
            keep.insert(v, None);
        }
    }
    let nodes: BTreeSet<NodeId> = a.members.iter().map(|m| m.node).collect();
    for &n in &nodes {
        let node = g.node(n);
        keep.insert(node.vertex, None);
        let Some(span) = node.spans.iter().find(|s| s.alloc == a.id) else { continue };
        let mut outside = span.amounts.clone();
        for (si, used) in span.sockets.iter().enumerate() {
            for (o, u) in outside.iter_mut().zip(used) {
                *o = o.saturating_sub(*u);
            }
            if used.iter().any(|&u| u > 0) {
                keep_pooled(g, node.sockets[si].vertex, used.clone(), &mut keep);
            }
        }
        keep_pooled(g, node.vertex, outside, &mut keep);
    }
    // Every kept vertex with its path up to the root.
    for v in keep.keys().copied().collect::<Vec<_>>() {
        let mut cur = g.vertex(v).parent;
        while let Some(p) = cur {
            keep.entry(p).or_insert(None);
            cur = g.vertex(p).parent;
        }
    }
    let mut nodes = Vec::new();
    let mut edges = Vec::new();
    for (&v, &size) in &keep {
        nodes.push(DocNode { id: v.0.to_string(), metadata: doc_meta(g, v, size) });
        if let Some(p) = g.vertex(v).parent
            && keep.contains_key(&p)
        {
            edges.push(edge(p.0 as usize, v.0 as usize));
        }
    }
    render(nodes, edges)
}

/// Keeps, under `root` but not inside a socket below it, pooled leaves in tree order until
/// `amounts` (by resource index, base units) are covered; a leaf partly used is kept with the size
/// used, in its own unit, rounded up.
fn keep_pooled(g: &Graph, root: VertexId, mut amounts: Vec<u64>, keep: &mut BTreeMap<VertexId, Option<u64>>) {
    let mut stack = vec![root];
    while let Some(v) = stack.pop() {
        let vx = g.vertex(v);
        if v != root && vx.meta.vtype == "socket" {
            continue;
        }
        if let Role::Pooled { resource, amount, .. } = vx.role {
            let left = &mut amounts[resource.index()];
            let take = (*left).min(amount);
            if take > 0 {
                *left -= take;
                let size = u128::from(take) * u128::from(vx.meta.size);
                keep.insert(v, Some(u64::try_from(size.div_ceil(u128::from(amount.max(1)))).unwrap_or(u64::MAX)));
            }
        }
        stack.extend(vx.children.iter().rev());
    }
}
