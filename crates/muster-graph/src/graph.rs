//! The resource graph: a containment tree of vertices (cluster > zone > ... > node > resources)
//! plus an index for matching: per-node amounts and per-domain aggregates that let a search skip
//! whole subtrees where no single node could host a member.

use std::collections::{BTreeMap, HashMap};

use crate::error::GraphError;
use crate::resources::{ResourceId, ResourceKind, ResourceTable};

/// Index of a vertex in the graph's arena. Stable for the vertex's lifetime.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct VertexId(pub u32);

/// Index of a node in the graph's node arena. Stable; removed nodes leave a tombstone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub u32);

/// Index of a matching domain (a real topology vertex or a virtual fan-out group).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DomainId(pub u32);

/// Allocation ids are assigned by the graph and may be given back by an import.
pub type AllocId = u64;

/// The JGF attributes of a vertex, kept as given so export is lossless.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VertexMeta {
    pub vtype: String,
    pub basename: String,
    pub name: String,
    pub id: i64,
    pub uniq_id: u64,
    pub rank: i64,
    pub exclusive: bool,
    pub unit: String,
    pub size: u64,
    pub properties: BTreeMap<String, String>,
}

/// What a vertex means to the matcher.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// A topology level above nodes (cluster, zone, block, rack, ...).
    Domain,
    Node(NodeId),
    /// A leaf under a node adding `amount` of a pooled resource.
    Pooled {
        node: NodeId,
        resource: ResourceId,
        amount: u64,
    },
    /// A leaf under a node that is one discrete device.
    Device {
        node: NodeId,
        resource: ResourceId,
    },
    /// Structure under a node with no capacity of its own (socket, numa): a vertex of type
    /// `socket` is also one of the node's sockets.
    Container,
}

#[derive(Debug, Clone)]
pub struct Vertex {
    pub meta: VertexMeta,
    pub role: Role,
    pub parent: Option<VertexId>,
    pub children: Vec<VertexId>,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Taint {
    pub key: String,
    pub value: String,
    pub effect: TaintEffect,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TaintEffect {
    NoSchedule,
    PreferNoSchedule,
    NoExecute,
}

impl TaintEffect {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "NoSchedule" => Some(Self::NoSchedule),
            "PreferNoSchedule" => Some(Self::PreferNoSchedule),
            "NoExecute" => Some(Self::NoExecute),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::NoSchedule => "NoSchedule",
            Self::PreferNoSchedule => "PreferNoSchedule",
            Self::NoExecute => "NoExecute",
        }
    }
}

/// A device under a node and which allocation holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceSlot {
    pub resource: ResourceId,
    pub vertex: VertexId,
    pub holder: Option<AllocId>,
    /// Index into the node's `sockets` of the socket the device sits in, if any.
    pub socket: Option<u16>,
    /// The device as its driver publishes it (Dynamic Resource Allocation); None for a device
    /// only counted (a device plugin's).
    pub published: Option<std::sync::Arc<crate::dra::PublishedDevice>>,
}

/// An allocation's or reservation's use of one node over a time window `[start, end)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Span {
    pub alloc: AllocId,
    pub start: i64,
    pub end: i64,
    /// Amounts by resource index; devices counted.
    pub amounts: Vec<u64>,
    /// True for a reservation: it does not reduce `free` until it becomes an allocation.
    pub reserved: bool,
    /// On a node with sockets, the part of `amounts` taken from each of them (by socket index,
    /// then resource index); the rest comes from resources outside any socket. Empty otherwise.
    pub sockets: Vec<Vec<u64>>,
}

#[derive(Debug, Clone)]
pub struct Node {
    pub name: String,
    pub vertex: VertexId,
    pub domain: DomainId,
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    pub unschedulable: bool,
    pub up: bool,
    pub removed: bool,
    /// Capacity by resource index (devices counted).
    pub capacity: Vec<u64>,
    /// Capacity minus running allocations (never below zero: a node whose capacity shrank under
    /// its running allocations has nothing free until enough of them end).
    pub free: Vec<u64>,
    /// What running allocations hold, by resource index. Kept apart from `free` because a
    /// capacity change may leave it above the capacity.
    pub used: Vec<u64>,
    pub devices: Vec<DeviceSlot>,
    pub spans: Vec<Span>,
    /// The node's sockets (NUMA domains) as its graph gives them; empty when it gives none, and
    /// then every resource of the node is one pool.
    pub sockets: Vec<crate::sockets::Socket>,
}

impl Node {
    /// A node outside any graph, with only what filters look at (labels, taints, cordon): for
    /// checking `NodeFilter::admits` against nodes another model keeps.
    pub fn for_filtering(
        name: &str,
        labels: BTreeMap<String, String>,
        taints: Vec<Taint>,
        unschedulable: bool,
    ) -> Self {
        Node {
            name: name.to_string(),
            vertex: VertexId(0),
            domain: DomainId(0),
            labels,
            taints,
            unschedulable,
            up: true,
            removed: false,
            capacity: vec![],
            free: vec![],
            used: vec![],
            devices: vec![],
            spans: vec![],
            sockets: vec![],
        }
    }

    /// Takes new placements: present, up and not cordoned.
    pub fn schedulable(&self) -> bool {
        self.up && !self.unschedulable && !self.removed
    }

    pub fn has_reservations(&self) -> bool {
        self.spans.iter().any(|s| s.reserved)
    }

    /// Has no running allocation at all (for exclusive placements).
    pub fn idle(&self) -> bool {
        self.used.iter().all(|&u| u == 0)
    }

    /// `free` from `capacity` and `used`.
    pub(crate) fn recompute_free(&mut self) {
        for ((f, c), u) in self.free.iter_mut().zip(&self.capacity).zip(&self.used) {
            *f = c.saturating_sub(*u);
        }
    }

    /// Holds a running allocation (reservations do not count).
    pub fn runs_something(&self) -> bool {
        self.spans.iter().any(|s| !s.reserved)
    }
}

/// A matching domain: aggregates over the nodes below it, for pruning.
#[derive(Debug, Clone)]
pub struct Domain {
    /// The topology vertex, or None for a virtual group that only bounds fan-out.
    pub vertex: Option<VertexId>,
    pub parent: Option<DomainId>,
    pub child_domains: Vec<DomainId>,
    pub child_nodes: Vec<NodeId>,
    /// Sum of schedulable nodes' free amounts.
    pub sum_free: Vec<u64>,
    /// Largest free amount of each resource on any one schedulable node.
    pub max_free: Vec<u64>,
    /// Largest capacity of each resource on any one node, schedulable or not.
    pub max_cap: Vec<u64>,
    /// Sum of all nodes' capacity.
    pub sum_cap: Vec<u64>,
    /// Schedulable nodes with nothing allocated (candidates for exclusive groups).
    pub idle_nodes: u32,
    /// Earliest expected end of a running allocation on a schedulable node below: before then,
    /// nothing below frees up, so a future window there has no more room than `max_free`.
    pub min_end: i64,
}

/// Largest number of children a domain has before virtual groups are put under it, so that
/// recomputing a maximum after an allocation touches at most this many entries per level.
const FAN_OUT: usize = 32;

/// The whole graph. Searches live in `matcher`; operations that change who holds what in
/// `allocations` (now) and `planner` (reservations).
#[derive(Debug, Clone)]
pub struct Graph {
    pub resources: ResourceTable,
    pub vertices: Vec<Vertex>,
    pub root: VertexId,
    pub nodes: Vec<Node>,
    pub node_by_name: HashMap<String, NodeId>,
    pub domains: Vec<Domain>,
    pub root_domain: DomainId,
    /// Topology vertices by level name (vertex type), with their matching domains, in tree order.
    pub levels: BTreeMap<String, Vec<(VertexId, DomainId)>>,
    /// The domain of each topology vertex.
    pub domain_of_vertex: HashMap<VertexId, DomainId>,
    /// Topology vertices by (parent, name), so inserting a node finds its rack without a scan.
    pub domain_child: HashMap<(VertexId, String), VertexId>,
    /// Calendar reservations' allocations, with the reservation each belongs to: their spans
    /// hold room against every group but those naming it (`GroupRequest::reservations`).
    pub set_asides: BTreeMap<AllocId, String>,
}

impl Graph {
    /// Builds the index over a vertex tree. `vertices[root]` is the root; every vertex with role
    /// `Node` must have an entry in `nodes` pointing back at it.
    pub fn from_parts(resources: ResourceTable, vertices: Vec<Vertex>, root: VertexId, nodes: Vec<Node>) -> Self {
        let node_by_name = nodes.iter().enumerate().map(|(i, n)| (n.name.clone(), NodeId(i as u32))).collect();
        let domain_child = vertices
            .iter()
            .enumerate()
            .filter(|(_, v)| v.role == Role::Domain)
            .filter_map(|(i, v)| v.parent.map(|p| ((p, v.meta.name.clone()), VertexId(i as u32))))
            .collect();
        let mut g = Graph {
            resources,
            vertices,
            root,
            nodes,
            node_by_name,
            domains: Vec::new(),
            root_domain: DomainId(0),
            levels: BTreeMap::new(),
            domain_of_vertex: HashMap::new(),
            domain_child,
            set_asides: BTreeMap::new(),
        };
        g.rebuild_index();
        g
    }

    /// The spans of `node` that hold room at point `p` of a window starting at `start`, for a
    /// group that may use the calendar reservations `usable`: their set-asides hold nothing
    /// against it. With `starts_now`, an allocation that outran its expected end still holds
    /// what it holds at the window's start: it is running, whatever the estimate said.
    pub(crate) fn spans_at<'a>(
        &'a self,
        node: &'a Node,
        (p, start, starts_now): (i64, i64, bool),
        usable: &'a [String],
    ) -> impl Iterator<Item = &'a Span> + 'a {
        let usable_set_aside =
            move |s: &Span| s.reserved && self.set_asides.get(&s.alloc).is_some_and(|name| usable.contains(name));
        node.spans
            .iter()
            .filter(move |s| s.start <= p && (p < s.end || (starts_now && p == start && !s.reserved)))
            .filter(move |s| usable.is_empty() || !usable_set_aside(s))
    }

    pub fn vertex(&self, id: VertexId) -> &Vertex {
        &self.vertices[id.0 as usize]
    }

    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id.0 as usize]
    }

    pub fn node_mut(&mut self, id: NodeId) -> &mut Node {
        &mut self.nodes[id.0 as usize]
    }

    pub fn domain(&self, id: DomainId) -> &Domain {
        &self.domains[id.0 as usize]
    }

    pub fn node_id(&self, name: &str) -> Result<NodeId, GraphError> {
        self.node_by_name.get(name).copied().ok_or_else(|| GraphError::UnknownNode(name.to_string()))
    }

    /// Whether node `node` has a device or socket vertex named `name`, held or not.
    pub fn node_has(&self, node: &str, name: &str) -> bool {
        let Ok(n) = self.node_id(node) else { return false };
        let n = self.node(n);
        let named = |v: VertexId| self.vertex(v).meta.name == name;
        n.devices.iter().any(|s| named(s.vertex)) || n.sockets.iter().any(|s| named(s.vertex))
    }

    /// Every node whose running allocations hold more than it has (its capacity shrank under
    /// them), by name, with each such resource as `cpu 4 held of 2`.
    pub fn over_committed(&self) -> Vec<(String, String)> {
        let over = |n: &Node| {
            let each = (0..self.resources.len()).filter(|&i| n.used[i] > n.capacity[i]).map(|i| {
                let id = ResourceId(i as u16);
                let (held, has) = (self.resources.format(id, n.used[i]), self.resources.format(id, n.capacity[i]));
                format!("{} {held} held of {has}", self.resources.def(id).name)
            });
            each.collect::<Vec<_>>().join(", ")
        };
        (self.live_nodes()).map(|(_, n)| (n.name.clone(), over(n))).filter(|(_, o)| !o.is_empty()).collect()
    }

    /// Nodes that exist (not removed), in id order.
    pub fn live_nodes(&self) -> impl Iterator<Item = (NodeId, &Node)> {
        self.nodes.iter().enumerate().filter(|(_, n)| !n.removed).map(|(i, n)| (NodeId(i as u32), n))
    }

    /// The same cluster with nothing on it: every node up, schedulable and idle, no calendar
    /// set-asides. What a group "could ever" get is placed on it.
    pub fn emptied(&self) -> Graph {
        let mut g = self.clone();
        for n in &mut g.nodes {
            n.spans.clear();
            n.used.fill(0);
            n.devices.iter_mut().for_each(|d| d.holder = None);
            (n.unschedulable, n.up) = (false, true);
            n.recompute_free();
        }
        g.set_asides.clear();
        g.rebuild_index();
        g
    }

    /// The containment path of a vertex, as JGF writes it: `/cluster0/rack1/node3`.
    pub fn path_of(&self, id: VertexId) -> String {
        let mut names = Vec::new();
        let mut cur = Some(id);
        while let Some(v) = cur {
            names.push(self.vertex(v).meta.name.as_str());
            cur = self.vertex(v).parent;
        }
        names.reverse();
        format!("/{}", names.join("/"))
    }

    /// The topology vertex of level `level` that contains `node`, if any.
    pub fn ancestor_at_level(&self, node: NodeId, level: &str) -> Option<VertexId> {
        let mut cur = self.vertex(self.node(node).vertex).parent;
        while let Some(v) = cur {
            if self.vertex(v).meta.vtype == level {
                return Some(v);
            }
            cur = self.vertex(v).parent;
        }
        None
    }

    /// Recomputes domains and aggregates from the vertex tree. Linear in the graph's size; called
    /// after structural changes (build, add or remove nodes), never per allocation.
    pub fn rebuild_index(&mut self) {
        self.domains.clear();
        self.levels.clear();
        self.domain_of_vertex.clear();
        let root = self.root;
        self.root_domain = self.build_domain(root, None);
        self.recompute_subtree(self.root_domain);
    }

    fn recompute_subtree(&mut self, id: DomainId) {
        for c in self.domain(id).child_domains.clone() {
            self.recompute_subtree(c);
        }
        self.recompute_domain(id);
    }

    fn build_domain(&mut self, vertex: VertexId, parent: Option<DomainId>) -> DomainId {
        let id = self.push_domain(Some(vertex), parent);
        self.domain_of_vertex.insert(vertex, id);
        self.levels.entry(self.vertex(vertex).meta.vtype.clone()).or_default().push((vertex, id));
        let mut child_domains = Vec::new();
        let mut child_nodes = Vec::new();
        for c in self.vertex(vertex).children.clone() {
            match self.vertex(c).role {
                Role::Domain => child_domains.push(self.build_domain(c, Some(id))),
                Role::Node(n) if !self.node(n).removed => child_nodes.push(n),
                _ => {}
            }
        }
        self.attach_children(id, child_domains, child_nodes);
        id
    }

    fn push_domain(&mut self, vertex: Option<VertexId>, parent: Option<DomainId>) -> DomainId {
        let r = self.resources.len();
        let id = DomainId(self.domains.len() as u32);
        self.domains.push(Domain {
            vertex,
            parent,
            child_domains: Vec::new(),
            child_nodes: Vec::new(),
            sum_free: vec![0; r],
            max_free: vec![0; r],
            max_cap: vec![0; r],
            sum_cap: vec![0; r],
            idle_nodes: 0,
            min_end: i64::MAX,
        });
        id
    }

    /// Puts children under `id`, splitting them into virtual groups of at most FAN_OUT.
    fn attach_children(&mut self, id: DomainId, mut child_domains: Vec<DomainId>, child_nodes: Vec<NodeId>) {
        if child_domains.len() + child_nodes.len() <= FAN_OUT {
            for &n in &child_nodes {
                self.nodes[n.0 as usize].domain = id;
            }
            for &d in &child_domains {
                self.domains[d.0 as usize].parent = Some(id);
            }
            let dom = &mut self.domains[id.0 as usize];
            dom.child_domains = child_domains;
            dom.child_nodes = child_nodes;
            return;
        }
        // Nodes go into virtual groups (kept ahead of the real domains, as nodes are when the
        // fan-out is small), then real and virtual domains share the fan-out.
        let mut node_groups = Vec::new();
        for chunk in child_nodes.chunks(FAN_OUT) {
            let v = self.push_domain(None, Some(id));
            for &n in chunk {
                self.nodes[n.0 as usize].domain = v;
            }
            self.domains[v.0 as usize].child_nodes = chunk.to_vec();
            node_groups.push(v);
        }
        node_groups.append(&mut child_domains);
        let mut child_domains = node_groups;
        while child_domains.len() > FAN_OUT {
            let mut grouped = Vec::new();
            for chunk in child_domains.chunks(FAN_OUT) {
                let v = self.push_domain(None, Some(id));
                for &d in chunk {
                    self.domains[d.0 as usize].parent = Some(v);
                }
                self.domains[v.0 as usize].child_domains = chunk.to_vec();
                grouped.push(v);
            }
            child_domains = grouped;
        }
        for &d in &child_domains {
            self.domains[d.0 as usize].parent = Some(id);
        }
        self.domains[id.0 as usize].child_domains = child_domains;
    }

    /// Recomputes one domain's aggregates from its direct children.
    fn recompute_domain(&mut self, id: DomainId) {
        let r = self.resources.len();
        // Reuse the domain's own vectors: this runs for every level above every node an
        // allocation touches.
        let dom = &mut self.domains[id.0 as usize];
        let mut sum_free = std::mem::take(&mut dom.sum_free);
        let mut max_free = std::mem::take(&mut dom.max_free);
        let mut max_cap = std::mem::take(&mut dom.max_cap);
        let mut sum_cap = std::mem::take(&mut dom.sum_cap);
        for v in [&mut sum_free, &mut max_free, &mut max_cap, &mut sum_cap] {
            v.clear();
            v.resize(r, 0);
        }
        let mut idle_nodes = 0;
        let mut min_end = i64::MAX;
        let dom = &self.domains[id.0 as usize];
        for &n in &dom.child_nodes {
            let node = &self.nodes[n.0 as usize];
            let live = node.schedulable();
            idle_nodes += u32::from(live && node.idle());
            if live {
                min_end = node.spans.iter().filter(|s| !s.reserved).map(|s| s.end).fold(min_end, i64::min);
            }
            for i in 0..r {
                let cap = node.capacity.get(i).copied().unwrap_or(0);
                let free = if live { node.free.get(i).copied().unwrap_or(0) } else { 0 };
                sum_free[i] += free;
                max_free[i] = max_free[i].max(free);
                max_cap[i] = max_cap[i].max(cap);
                sum_cap[i] += cap;
            }
        }
        for &c in &dom.child_domains {
            let child = &self.domains[c.0 as usize];
            idle_nodes += child.idle_nodes;
            min_end = min_end.min(child.min_end);
            for i in 0..r {
                sum_free[i] += child.sum_free[i];
                max_free[i] = max_free[i].max(child.max_free[i]);
                max_cap[i] = max_cap[i].max(child.max_cap[i]);
                sum_cap[i] += child.sum_cap[i];
            }
        }
        let dom = &mut self.domains[id.0 as usize];
        dom.sum_free = sum_free;
        dom.max_free = max_free;
        dom.max_cap = max_cap;
        dom.sum_cap = sum_cap;
        dom.idle_nodes = idle_nodes;
        dom.min_end = min_end;
    }

    /// Refreshes the aggregates on the path from a node to the root after its free amounts or
    /// schedulability changed.
    pub fn refresh_node(&mut self, node: NodeId) {
        let mut cur = Some(self.node(node).domain);
        while let Some(d) = cur {
            self.recompute_domain(d);
            cur = self.domain(d).parent;
        }
    }

    /// Adds a resource type after build (a new node brings an extended resource): every per-node
    /// and per-domain vector grows by one.
    pub fn ensure_resource(
        &mut self,
        name: &str,
        unit: crate::quantity::Unit,
        kind: ResourceKind,
    ) -> Result<ResourceId, String> {
        let before = self.resources.len();
        let id = self.resources.intern(name, unit, kind)?;
        if self.resources.len() > before {
            for n in &mut self.nodes {
                n.capacity.push(0);
                n.free.push(0);
                n.used.push(0);
                for s in &mut n.spans {
                    s.amounts.push(0);
                    s.sockets.iter_mut().for_each(|u| u.push(0));
                }
                n.sockets.iter_mut().for_each(|s| s.capacity.push(0));
            }
            for d in &mut self.domains {
                d.sum_free.push(0);
                d.max_free.push(0);
                d.max_cap.push(0);
                d.sum_cap.push(0);
            }
        }
        Ok(id)
    }

    /// Total capacity and free amounts of the cluster, by resource (free counts only schedulable
    /// nodes).
    pub fn totals(&self) -> (&[u64], &[u64]) {
        let d = self.domain(self.root_domain);
        (&d.sum_cap, &d.sum_free)
    }
}
