//! The graph with its allocations and reservations: every operation that changes who holds what.
//! Each operation either completes or leaves the state exactly as it was.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::builder::{NodeShape, NodeSpec};
use crate::dra::DeviceMatcher;
use crate::error::{GraphError, InputError};
use crate::graph::{AllocId, Graph, NodeId, Span, VertexId};
use crate::jobspec::{ConstraintMode, GroupRequest, TopologyConstraint};
use crate::matcher::{Demand, Placement, Window, placed_units};
use crate::policy::Policy;

mod devices;
mod planner;
mod set_aside;
mod sets;

/// "Runs until cancelled": the end of an allocation without a duration.
pub const FOREVER: i64 = i64::MAX;

/// Why a group that fits the cluster's free room in total does not fit now.
pub const NOT_ON_THE_NODES: &str =
    "enough is free in total but not on the nodes (or in the one domain) the group needs";

/// One member of an allocation and where it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub index: u32,
    pub node: NodeId,
    /// Device vertices held by this member (empty for reservations).
    pub devices: Vec<VertexId>,
    /// Socket vertices the member holds whole (planned, for a reservation), when its group asks
    /// for sockets.
    pub sockets: Vec<VertexId>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allocation {
    pub id: AllocId,
    pub request: GroupRequest,
    /// Per member of each set (by the set's position in [`GroupRequest::member_sets`]), by
    /// resource index.
    pub per_set: Vec<Vec<u64>>,
    pub members: Vec<Member>,
    pub start: i64,
    pub end: i64,
    pub reserved: bool,
    /// The topology domain holding all its members, where it was placed within one (or grew
    /// into an enclosing one): growth tries it first, and a required level never leaves it.
    pub domain: Option<VertexId>,
}

/// What a match does when the group does not fit now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Otherwise {
    /// Says why: unsatisfiable, or busy.
    Explain,
    /// Says busy; the caller knows the group is satisfiable.
    Busy,
    /// Reserves the group's earliest start.
    Reserve,
}

/// The result of a match request.
impl Allocation {
    /// What member `index` holds, by resource index.
    pub fn member_amounts(&self, index: u32) -> &[u64] {
        &self.per_set[if self.per_set.len() > 1 { self.request.set_of(index).0 } else { 0 }]
    }

    /// What its members hold in all (whole nodes and sockets aside), by resource index.
    pub fn held(&self) -> Vec<u64> {
        let mut total = vec![0u64; self.per_set.first().map_or(0, Vec::len)];
        self.add_held_to(&mut total);
        total
    }

    /// Adds [`Allocation::held`] to `total` without allocating.
    pub fn add_held_to(&self, total: &mut [u64]) {
        if let [per_member] = self.per_set.as_slice() {
            let members = self.members.len() as u64;
            for (t, &q) in total.iter_mut().zip(per_member) {
                *t = t.saturating_add(q * members);
            }
            return;
        }
        for m in &self.members {
            for (t, &q) in total.iter_mut().zip(self.member_amounts(m.index)) {
                *t = t.saturating_add(q);
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MatchOutcome {
    /// Placed now.
    Allocated(AllocId),
    /// Reserved to start at `at`.
    Reserved { id: AllocId, at: i64 },
    /// Does not fit now (and no reservation was asked for); the reason names the shortfall.
    Busy(String),
    /// Could never fit on this cluster, even empty.
    Unsatisfiable(String),
}

/// Summary counts for `stat`.
/// What [`ResourceGraph::update_node`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeUpdate {
    /// The node is as described.
    Applied,
    /// Labels, taints, cordon and pooled amounts are as described; the new topology place or
    /// set of resources waits until nothing runs on the node.
    ShapeDeferred,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stat {
    pub nodes: usize,
    pub schedulable_nodes: usize,
    pub vertices: usize,
    pub allocations: usize,
    pub reservations: usize,
    /// (resource name, capacity, free), formatted.
    pub resources: Vec<(String, String, String)>,
}

/// A member placement given back on import: which node, and optionally which device ids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportedMember {
    pub index: u32,
    pub node: String,
    /// Names of device vertices the member holds and, for a group that asks for sockets, of the
    /// socket vertices it holds whole (the others it needs are taken from idle ones).
    pub devices: Vec<String>,
}

/// The resource graph and everything allocated or reserved on it.
#[derive(Debug, Clone)]
pub struct ResourceGraph {
    pub graph: Graph,
    /// Shared with copies of the graph (the durable layer copies the engine before each batch):
    /// only a changed allocation is copied.
    allocations: BTreeMap<AllocId, Arc<Allocation>>,
    next_id: AllocId,
    pub policy: Policy,
}

impl ResourceGraph {
    pub fn new(graph: Graph, policy: Policy) -> Self {
        Self { graph, allocations: BTreeMap::new(), next_id: 1, policy }
    }

    pub fn allocation(&self, id: AllocId) -> Result<&Allocation, GraphError> {
        self.allocations.get(&id).map(|a| &**a).ok_or(GraphError::UnknownAllocation(id))
    }

    pub fn allocations(&self) -> impl Iterator<Item = &Allocation> {
        self.allocations.values().map(|a| &**a)
    }

    /// When a placement of `members` members started at `now` is expected to end (see
    /// [`GroupRequest::run_time_with`]; [`FOREVER`] without a duration): the end to import an
    /// allocation with when nothing better is known.
    pub fn end_of(now: i64, req: &GroupRequest, members: u32) -> i64 {
        req.run_time_with(members).map_or(FOREVER, |d| now.saturating_add(d as i64))
    }

    /// Places every member now, or nothing.
    pub fn allocate(&mut self, req: &GroupRequest, now: i64) -> MatchOutcome {
        self.match_request(req, now, Otherwise::Explain)
    }

    /// [`ResourceGraph::allocate`] for a group its caller knows to be satisfiable (a queue
    /// checks that once per shape): a miss is `Busy`, without the search of the whole empty
    /// cluster that tells an unsatisfiable group apart.
    pub fn allocate_satisfiable(&mut self, req: &GroupRequest, now: i64) -> MatchOutcome {
        self.match_request(req, now, Otherwise::Busy)
    }

    /// Places every member now, or reserves the earliest time the whole group will fit.
    pub fn allocate_orelse_reserve(&mut self, req: &GroupRequest, now: i64) -> MatchOutcome {
        self.match_request(req, now, Otherwise::Reserve)
    }

    /// Checks whether the group could ever fit on this cluster when empty. Changes nothing.
    pub fn satisfiability(&self, req: &GroupRequest) -> Result<(), String> {
        if !req.sets.is_empty() {
            return self.satisfiability_sets(req);
        }
        let d = Demand::resolve(&self.graph, req).map_err(|u| u.0)?;
        let policy = req.policy.unwrap_or(self.policy);
        let (p, _) = self.graph.search(&d, Window::Empty, policy, None);
        if d.max_units > 0 && placed_units(&p) >= d.min_units {
            Ok(())
        } else {
            Err(self.graph.explain_unsatisfiable(&d))
        }
    }

    fn match_request(&mut self, req: &GroupRequest, now: i64, otherwise: Otherwise) -> MatchOutcome {
        if !req.sets.is_empty() {
            return self.match_sets(req, now, otherwise);
        }
        let d = match Demand::resolve(&self.graph, req) {
            Ok(d) => d,
            Err(u) => return MatchOutcome::Unsatisfiable(u.0),
        };
        let policy = req.policy.unwrap_or(self.policy);
        // Searched until the end of the fewest members (the latest end), so that whatever number
        // is placed never runs into a reservation; the allocation then ends when its members do.
        let end = Self::end_of(now, req, d.members(d.min_units));
        let (p, domain) = self.graph.search(&d, Window::Now { now, end }, policy, None);
        if placed_units(&p) >= d.min_units && d.max_units > 0 {
            let id = self.take_id();
            let end = Self::end_of(now, req, d.members(placed_units(&p)));
            let alloc = self.commit(id, &d, &p, now, end, false, domain);
            self.allocations.insert(id, Arc::new(alloc));
            return MatchOutcome::Allocated(id);
        }
        if otherwise != Otherwise::Busy
            && let Err(reason) = self.satisfiability(req)
        {
            return MatchOutcome::Unsatisfiable(reason);
        }
        if otherwise != Otherwise::Reserve {
            return MatchOutcome::Busy(self.busy_reason(&d, now));
        }
        self.reserve_demand(&d, now)
    }

    fn busy_reason(&self, d: &Demand, now: i64) -> String {
        if let Some(sd) = &d.sockets {
            let idle: usize = (self.graph.live_nodes())
                .filter(|(_, n)| n.schedulable() && d.request.filter.admits(n))
                .map(|(id, n)| {
                    self.graph
                        .pool_room(id, Window::Now { now, end: now + 1 }, &d.request.reservations)
                        .usable(&n.sockets, sd)
                        .len()
                })
                .sum();
            let need = u64::from(sd.count) * u64::from(d.members(d.min_units));
            return format!("needs {need} whole sockets, each idle and large enough; {idle} such sockets are idle now");
        }
        let (_, free) = self.graph.totals();
        for (i, &q) in d.per_member.iter().enumerate() {
            let need = q.saturating_mul(u64::from(d.members(d.min_units)));
            if need > free[i] {
                let id = crate::resources::ResourceId(i as u16);
                return format!(
                    "needs {} {} in all, {} is free",
                    self.graph.resources.format(id, need),
                    self.graph.resources.def(id).name,
                    self.graph.resources.format(id, free[i])
                );
            }
        }
        if let Some(m) = &d.devices {
            let window = Window::Now { now, end: now + 1 };
            let served: u64 = (self.graph.live_nodes())
                .filter(|(_, n)| n.schedulable() && d.request.filter.admits(n))
                .map(|(id, _)| u64::from(self.graph.device_units(id, d, m, window, u32::MAX).0))
                .sum();
            let need = d.members(d.min_units);
            if served < u64::from(need) {
                return format!(
                    "needs devices for {need} members ({} each); the free devices its selectors accept serve {served}",
                    m.describe(&self.graph)
                );
            }
        }
        NOT_ON_THE_NODES.to_string()
    }

    fn take_id(&mut self) -> AllocId {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    /// Writes a placement into the graph. Cannot fail: the search proved it fits.
    #[allow(clippy::too_many_arguments)]
    fn commit(
        &mut self,
        id: AllocId,
        d: &Demand,
        p: &Placement,
        start: i64,
        end: i64,
        reserved: bool,
        domain: Option<VertexId>,
    ) -> Allocation {
        let mut members = Vec::with_capacity(p.iter().map(|&(_, units)| d.members(units) as usize).sum());
        let mut index = 0;
        for &(n, units) in p {
            let count = d.members(units);
            for _ in 0..count {
                members.push(Member { index, node: n, devices: Vec::new(), sockets: Vec::new() });
                index += 1;
            }
        }
        let mut alloc = Allocation {
            id,
            request: d.request.clone(),
            per_set: vec![d.per_member.clone()],
            members,
            start,
            end,
            reserved,
            domain,
        };
        self.apply_nodes(&mut alloc, p.iter().map(|&(n, _)| n), None);
        alloc
    }

    /// Amounts allocation `a` holds on node `n` for its members `on_node` (indexes into `a.members`).
    fn amounts_on(&self, a: &Allocation, n: NodeId, on_node: &[usize]) -> Vec<u64> {
        if a.request.exclusive {
            return self.graph.node(n).capacity.clone();
        }
        if let [per_member] = a.per_set.as_slice() {
            return per_member.iter().map(|q| q * on_node.len() as u64).collect();
        }
        let mut total = vec![0u64; self.graph.node(n).capacity.len()];
        for &mi in on_node {
            for (t, &q) in total.iter_mut().zip(a.member_amounts(a.members[mi].index)) {
                *t += q;
            }
        }
        total
    }

    /// Brings the spans, free amounts and devices of `nodes` in line with `a`'s members on them.
    /// A span keeps its start unless `since` says from when the new amounts hold (members added by
    /// grow use the node from now on, not from the allocation's start).
    fn apply_nodes(&mut self, a: &mut Allocation, nodes: impl IntoIterator<Item = NodeId>, since: Option<i64>) {
        let mut by_node: BTreeMap<NodeId, Vec<usize>> = nodes.into_iter().map(|n| (n, Vec::new())).collect();
        for (i, m) in a.members.iter().enumerate() {
            if let Some(v) = by_node.get_mut(&m.node) {
                v.push(i);
            }
        }
        // Once for all nodes: what one device match decides holds on every node. The search
        // that placed the members compiled the same selectors.
        let matchers: Vec<Option<DeviceMatcher>> = if a.reserved {
            Vec::new()
        } else {
            (a.request.member_sets().iter())
                .map(|s| (!s.devices.is_empty()).then(|| DeviceMatcher::new(&self.graph, &s.devices).ok()).flatten())
                .collect()
        };
        for (n, on_node) in by_node {
            self.apply_node(a, n, &on_node, since, &matchers);
        }
    }

    /// `apply_nodes` for one node; `on_node` are the indexes into `a.members` placed there.
    fn apply_node(
        &mut self,
        a: &mut Allocation,
        n: NodeId,
        on_node: &[usize],
        since: Option<i64>,
        matchers: &[Option<DeviceMatcher>],
    ) {
        let device_resources: Vec<usize> =
            (0..self.graph.resources.len()).filter(|&i| self.graph.is_device(i)).collect();
        let node = self.graph.node_mut(n);
        // Give back what the allocation held here, then take what it holds now.
        let mut span_start = since.unwrap_or(a.start);
        // A reservation's span changes neither what the node uses nor its domains' aggregates.
        let mut use_changed = !a.reserved && !on_node.is_empty();
        if let Some(pos) = node.spans.iter().position(|s| s.alloc == a.id) {
            let old = node.spans.swap_remove(pos);
            span_start = since.unwrap_or(old.start);
            use_changed |= !old.reserved;
            if !old.reserved {
                for (u, o) in node.used.iter_mut().zip(&old.amounts) {
                    *u -= o;
                }
            }
        }
        let taken = if on_node.is_empty() { None } else { Some(self.take_on_node(a, n, on_node, span_start)) };
        let node = self.graph.node_mut(n);
        if let Some((amounts, sockets)) = taken {
            if !a.reserved {
                for (u, o) in node.used.iter_mut().zip(&amounts) {
                    *u += o;
                }
                devices::take_devices(node, a, on_node, (&device_resources, matchers), &sockets);
            }
            node.spans.push(Span {
                alloc: a.id,
                start: span_start,
                end: a.end,
                amounts,
                reserved: a.reserved,
                sockets,
            });
        }
        let held: BTreeSet<VertexId> =
            a.members.iter().filter(|m| m.node == n).flat_map(|m| m.devices.iter().copied()).collect();
        for slot in node.devices.iter_mut().filter(|s| s.holder == Some(a.id)) {
            if !held.contains(&slot.vertex) {
                slot.holder = None;
            }
        }
        if use_changed {
            node.recompute_free();
            self.graph.refresh_node(n);
        }
    }

    /// What `a`'s members `on_node` take on node `n` from `start` (its old span already given
    /// back): the amounts and, on a node with sockets, the part from each socket. Members that
    /// ask for sockets keep theirs and take idle ones for the rest, whole.
    fn take_on_node(&self, a: &mut Allocation, n: NodeId, on_node: &[usize], start: i64) -> (Vec<u64>, Vec<Vec<u64>>) {
        let node = self.graph.node(n);
        if node.sockets.is_empty() {
            return (self.amounts_on(a, n, on_node), Vec::new());
        }
        let window =
            if a.reserved { Window::Future { start, end: a.end } } else { Window::Now { now: start, end: a.end } };
        let mut room = self.graph.pool_room(n, window, &a.request.reservations);
        let demand = Demand::resolve(&self.graph, &a.request).ok().and_then(|d| d.sockets);
        let Some(demand) = demand else {
            // Devices the members keep stay in their sockets; the rest is split over the pools.
            let amounts = self.amounts_on(a, n, on_node);
            let mut kept = vec![vec![0; amounts.len()]; node.sockets.len()];
            let held = on_node.iter().flat_map(|&mi| &a.members[mi].devices);
            for slot in held.filter_map(|v| node.devices.iter().find(|s| s.vertex == *v)) {
                if let Some(x) = slot.socket.map(usize::from) {
                    kept[x][slot.resource.index()] += 1;
                    room.sockets[x][slot.resource.index()] = room.sockets[x][slot.resource.index()].saturating_sub(1);
                    room.idle[x] = false;
                }
            }
            let mut rest = amounts.clone();
            for (r, left) in rest.iter_mut().enumerate() {
                *left = left.saturating_sub(kept.iter().map(|k| k[r]).sum());
            }
            let mut sockets = room.split(&rest);
            for (split, kept) in sockets.iter_mut().zip(&kept) {
                split.iter_mut().zip(kept).for_each(|(s, k)| *s += k);
            }
            return (amounts, sockets);
        };
        let held: BTreeSet<VertexId> = on_node.iter().flat_map(|&mi| a.members[mi].sockets.iter().copied()).collect();
        // Sockets free for the whole window first; then, for a running group recorded as it
        // is, those only reservations plan to use (`import` checked there are enough).
        let window_idle = room.usable(&node.sockets, &demand);
        let running_idle = if a.reserved { Vec::new() } else { self.graph.idle_while_running(n, &demand) };
        let mut idle = (window_idle.iter().chain(running_idle.iter().filter(|s| !window_idle.contains(s))))
            .copied()
            .filter(|&s| !held.contains(&node.sockets[s].vertex));
        for &mi in on_node {
            let missing = (demand.count as usize).saturating_sub(a.members[mi].sockets.len());
            let more: Vec<VertexId> = idle.by_ref().take(missing).map(|s| node.sockets[s].vertex).collect();
            a.members[mi].sockets.extend(more);
        }
        if a.request.exclusive {
            // The whole node is the group's: every socket with it.
            return (node.capacity.clone(), node.sockets.iter().map(|s| s.capacity.clone()).collect());
        }
        let mut amounts = vec![0; node.capacity.len()];
        let mut sockets = vec![vec![0; node.capacity.len()]; node.sockets.len()];
        for v in on_node.iter().flat_map(|&mi| &a.members[mi].sockets) {
            if let Some(s) = self.graph.socket_index(n, *v) {
                sockets[s].clone_from(&node.sockets[s].capacity);
                for (t, c) in amounts.iter_mut().zip(&node.sockets[s].capacity) {
                    *t += c;
                }
            }
        }
        (amounts, sockets)
    }

    /// Releases everything an allocation or reservation holds.
    pub fn cancel(&mut self, id: AllocId) -> Result<Allocation, GraphError> {
        let mut alloc = Arc::unwrap_or_clone(self.allocations.remove(&id).ok_or(GraphError::UnknownAllocation(id))?);
        self.graph.set_asides.remove(&id);
        let members = std::mem::take(&mut alloc.members);
        self.apply_nodes(&mut alloc, members.iter().map(|m| m.node), None);
        alloc.members = members;
        Ok(alloc)
    }

    /// A copy of the graph with every allocation, reservation, hold and set-aside released: the
    /// cluster's nodes as they are now (cordoned, down or removed as here), as a fresh graph of
    /// them would be, for an engine to be rebuilt on.
    pub fn without_allocations(&self) -> ResourceGraph {
        let mut bare = self.clone();
        let ids: Vec<AllocId> = bare.allocations.keys().copied().collect();
        for id in ids {
            // Known ids: a cancel cannot fail.
            let _ = bare.cancel(id);
        }
        bare
    }

    /// Releases some members (shrink). Releasing all of them is a cancel. The expected end stays:
    /// moving it later could overlap reservations planned after it, and a group that outruns its
    /// end is re-planned as any overrun is.
    pub fn shrink(&mut self, id: AllocId, members: &[u32]) -> Result<(), GraphError> {
        let alloc = self.allocation(id)?;
        if alloc.reserved {
            return Err(GraphError::NotAllocated(id));
        }
        for &m in members {
            if !alloc.members.iter().any(|x| x.index == m) {
                return Err(GraphError::UnknownMember { alloc: id, member: m });
            }
        }
        let mut alloc = Arc::unwrap_or_clone(self.allocations.remove(&id).expect("checked above"));
        let released: BTreeSet<u32> = members.iter().copied().collect();
        let nodes: Vec<NodeId> = alloc.members.iter().filter(|x| released.contains(&x.index)).map(|x| x.node).collect();
        alloc.members.retain(|x| !released.contains(&x.index));
        self.apply_nodes(&mut alloc, nodes, None);
        if !alloc.members.is_empty() {
            self.allocations.insert(id, Arc::new(alloc));
        }
        Ok(())
    }

    /// Sets how many members a running allocation may have (its group was resized while it ran):
    /// its members stay, and must be within the new bounds; [`Self::grow`] then grows it up to `max`.
    pub fn set_member_bounds(&mut self, id: AllocId, min: u32, max: u32) -> Result<(), GraphError> {
        let alloc = self.allocation(id)?;
        let held = alloc.members.len() as u32;
        if held > max {
            return Err(GraphError::TooManyMembers { alloc: id, wanted: held, max });
        }
        if held < min || min == 0 {
            return Err(GraphError::TooFewMembers { alloc: id, held, min });
        }
        let mut alloc = Arc::unwrap_or_clone(self.allocations.remove(&id).expect("checked above"));
        alloc.request.set_bounds(min, max);
        self.allocations.insert(id, Arc::new(alloc));
        Ok(())
    }

    /// Adds `count` members to a running allocation, all or none, to the set that grows next
    /// ([`GroupRequest::growing_set`]; more than it may take is an error), as close to its members
    /// as its topology allows (`growth_scopes`). Returns the new members' indices, or
    /// None if they do not fit now.
    pub fn grow(&mut self, id: AllocId, count: u32, now: i64) -> Result<Option<Vec<u32>>, GraphError> {
        let alloc = self.allocation(id)?;
        if alloc.reserved {
            return Err(GraphError::NotAllocated(id));
        }
        if alloc.request.members_per_node.is_some() {
            return Err(GraphError::FixedShape(id));
        }
        // One set grows at a time, the first below its share of the group's max (the workers,
        // never a launcher at its count).
        let held = alloc.members.len() as u32;
        let (k, room) = alloc.request.growing_set(alloc.members.iter().map(|m| m.index)).unwrap_or((0, 0));
        if count > room {
            return Err(GraphError::TooManyMembers { alloc: id, wanted: held.saturating_add(count), max: held + room });
        }
        if count < room && alloc.request.is_optional(k) {
            return Err(GraphError::PartOfOptionalSet { alloc: id, wanted: count, whole: room });
        }
        let (extra, first) = Self::grow_request(alloc, k, count);
        let d = Demand::resolve(&self.graph, &extra).map_err(|u| GraphError::UnknownResource(u.0))?;
        let policy = extra.policy.unwrap_or(self.policy);
        let window = Window::Now { now, end: alloc.end };
        let found = self.extra_scopes(alloc, k, &d, window).into_iter().find_map(|scope| {
            let (p, _) = self.graph.search(&d, window, policy, scope);
            (placed_units(&p) >= d.min_units).then_some((p, scope))
        });
        let Some((p, scope)) = found else { return Ok(None) };
        let mut alloc = Arc::unwrap_or_clone(self.allocations.remove(&id).expect("checked above"));
        // The group's domain widens when its new members go outside it, never narrows to a
        // set's or a sub-group's.
        if !scope.is_some_and(|s| self.graph.is_within(s, alloc.domain)) {
            alloc.domain = scope;
        }
        // New members take the lowest free indices, as an indexed Job refills completion indexes.
        let used: BTreeSet<u32> = alloc.members.iter().map(|m| m.index).collect();
        let mut free_indices = (first..).filter(|i| !used.contains(i));
        let mut added = Vec::new();
        for &(n, units) in &p {
            for _ in 0..d.members(units) {
                let index = free_indices.next().expect("unbounded range");
                alloc.members.push(Member { index, node: n, devices: Vec::new(), sockets: Vec::new() });
                added.push(index);
            }
        }
        self.apply_nodes(&mut alloc, p.iter().map(|&(n, _)| n), Some(now));
        // The work left is done by more members from now on, so the group ends sooner.
        let before = (alloc.members.len() - added.len()) as i64;
        if alloc.end != FOREVER && alloc.end > now && alloc.request.duration.is_some() {
            let (left, after) = ((alloc.end - now).saturating_mul(before), alloc.members.len() as i64);
            self.set_end(&mut alloc, now + (left + after - 1) / after);
        }
        self.allocations.insert(id, Arc::new(alloc));
        Ok(Some(added))
    }

    /// Where a running allocation may grow, in the order to try: the domain its growing members
    /// share ([`Self::growth_anchors`], innermost); then, unless that constraint is required, each
    /// enclosing domain outward, up to the constraint's `within` level and never out of a domain
    /// an outer constraint requires (a sub-group's rack, the group's block) and, with neither,
    /// the whole cluster. A preferred level keeps new members close where there is room, as it
    /// did the first ones, but never holds the group back as a required one would.
    fn growth_scopes(&self, alloc: &Allocation, k: usize) -> Vec<Option<VertexId>> {
        let anchors = self.growth_anchors(alloc, k);
        let Some(&(domain, topology)) = anchors.first() else { return vec![None] };
        if topology.is_some_and(|t| t.mode == ConstraintMode::Required) {
            return vec![Some(domain)];
        }
        let fence = anchors[1..].iter().find(|(_, t)| t.is_some_and(|t| t.mode == ConstraintMode::Required));
        let within = topology.and_then(|t| t.within.as_deref());
        let mut scopes = vec![Some(domain)];
        let mut at = domain;
        while within != Some(self.graph.vertex(at).meta.vtype.as_str()) {
            if fence.is_some_and(|&(d, _)| d == at) {
                break;
            }
            let Some(parent) = self.graph.vertex(at).parent else { break };
            // The root is the whole cluster, which the search reaches without a scope.
            scopes.push(self.graph.vertex(parent).parent.map(|_| parent));
            at = parent;
        }
        scopes
    }

    /// The domains a running allocation's new members are anchored to, innermost first, each
    /// with its constraint: the one the growing set `k`'s members share at the set's own level,
    /// the one its sub-group's members share at the sub-group's, and the group's. A level whose
    /// members span several domains (a preferred one that fell back) anchors nothing.
    fn growth_anchors<'a>(&self, alloc: &'a Allocation, k: usize) -> Vec<(VertexId, Option<&'a TopologyConstraint>)> {
        let req = &alloc.request;
        let mut anchors = Vec::new();
        if let Some(set) = req.sets.get(k) {
            let subgroup = req.subgroup_of(k);
            let levels =
                [(set.topology.as_ref(), None)].into_iter().chain(subgroup.map(|g| (Some(&g.topology), Some(g))));
            for (t, subgroup) in levels {
                let Some(t) = t else { continue };
                let member_of = |j: usize| subgroup.map_or(j == k, |g| req.subgroup_of(j) == Some(g));
                let shared: BTreeSet<Option<VertexId>> = (alloc.members.iter())
                    .filter(|m| member_of(req.set_of(m.index).0))
                    .map(|m| self.graph.ancestor_at_level(m.node, &t.level))
                    .collect();
                if let [Some(domain)] = shared.into_iter().collect::<Vec<_>>()[..] {
                    anchors.push((domain, Some(t)));
                }
            }
        }
        anchors.extend(alloc.domain.map(|d| (d, req.topology.as_ref())));
        anchors
    }

    /// Moves the expected end of running allocation `id` later, to `end` (fewer members are left
    /// to do its work). Refused, changing nothing, where a reservation on one of its nodes would
    /// then overlap it: the caller drops the reservations and plans them again.
    pub fn extend_end(&mut self, id: AllocId, end: i64) -> Result<(), GraphError> {
        let alloc = self.allocation(id)?;
        if alloc.reserved {
            return Err(GraphError::NotAllocated(id));
        }
        let (old, nodes): (i64, BTreeSet<NodeId>) = (alloc.end, alloc.members.iter().map(|m| m.node).collect());
        if end <= old {
            return Ok(());
        }
        for &n in &nodes {
            let node = self.graph.node(n);
            if node.spans.iter().any(|s| s.reserved && s.start < end && s.end > old) {
                return Err(GraphError::ReservationInTheWay { alloc: id, node: node.name.clone() });
            }
        }
        let mut alloc = Arc::unwrap_or_clone(self.allocations.remove(&id).expect("checked above"));
        self.set_end(&mut alloc, end);
        self.allocations.insert(id, Arc::new(alloc));
        Ok(())
    }

    /// Moves the expected end of allocation `a` (on every node it uses).
    fn set_end(&mut self, a: &mut Allocation, end: i64) {
        a.end = end;
        let nodes: BTreeSet<NodeId> = a.members.iter().map(|m| m.node).collect();
        for n in nodes {
            if let Some(span) = self.graph.node_mut(n).spans.iter_mut().find(|s| s.alloc == a.id) {
                span.end = end;
            }
            self.graph.refresh_node(n);
        }
    }

    /// Records an allocation that already exists (pods running at restart) under its old id,
    /// from `start` to its expected `end` (see [`ResourceGraph::end_of`]). Checks capacity and
    /// device availability first; on error nothing changes.
    pub fn import(
        &mut self,
        id: AllocId,
        req: &GroupRequest,
        members: &[ImportedMember],
        (start, end): (i64, i64),
    ) -> Result<(), GraphError> {
        self.record(id, req, members, (start, end), true)
    }

    /// Puts back an allocation exactly as it was before [`ResourceGraph::cancel`] took it out (a
    /// what-if that was undone, such as a preemption that does not go ahead), or one whose pods
    /// run on a node that shrank since. Capacity is not checked: the allocation held this room a
    /// moment ago, and a node that others over-committed meanwhile (a pod of another scheduler is
    /// counted whatever the room) must not make the undo fail.
    pub fn restore(
        &mut self,
        id: AllocId,
        req: &GroupRequest,
        members: &[ImportedMember],
        (start, end): (i64, i64),
    ) -> Result<(), GraphError> {
        self.record(id, req, members, (start, end), false)
    }

    /// [`ResourceGraph::import`], checking capacity only with `check_capacity`.
    fn record(
        &mut self,
        id: AllocId,
        req: &GroupRequest,
        members: &[ImportedMember],
        (start, end): (i64, i64),
        check_capacity: bool,
    ) -> Result<(), GraphError> {
        if self.allocations.contains_key(&id) {
            return Err(GraphError::DuplicateAllocation(id));
        }
        let d = Demand::resolve(&self.graph, req).map_err(|u| GraphError::UnknownResource(u.0))?;
        let mut resolved = Vec::new();
        let mut per_node: BTreeMap<NodeId, u64> = BTreeMap::new();
        for m in members {
            let n = self.graph.node_id(&m.node)?;
            let node = self.graph.node(n);
            let (mut devices, mut sockets) = (Vec::new(), Vec::new());
            for name in &m.devices {
                let is = |v: VertexId| self.graph.vertex(v).meta.name == *name;
                let device =
                    node.devices.iter().find(|s| is(s.vertex) && s.holder.is_none() && !devices.contains(&s.vertex));
                // A socket of a group that asks for sockets, held by no other member listed.
                let socket = node.sockets.iter().find(|s| {
                    d.sockets.is_some()
                        && is(s.vertex)
                        && !sockets.contains(&s.vertex)
                        && !resolved.iter().any(|r: &Member| r.sockets.contains(&s.vertex))
                });
                match (device, socket) {
                    (Some(slot), _) => devices.push(slot.vertex),
                    (None, Some(socket)) => sockets.push(socket.vertex),
                    (None, None) => {
                        return Err(GraphError::DeviceUnavailable {
                            node: m.node.clone(),
                            resource: if d.sockets.is_some() { "device or socket" } else { "device" }.into(),
                            device: name.clone(),
                        });
                    }
                }
            }
            *per_node.entry(n).or_default() += 1;
            resolved.push(Member { index: m.index, node: n, devices, sockets });
        }
        // A group placed within one domain stays confined to it when it grows later.
        let domain = req.topology.as_ref().and_then(|t| {
            let domains: BTreeSet<_> =
                resolved.iter().map(|m| self.graph.ancestor_at_level(m.node, &t.level)).collect();
            if domains.len() == 1 { domains.into_iter().next().flatten() } else { None }
        });
        let mut alloc = Allocation {
            id,
            request: req.clone(),
            per_set: self.per_set(req).map_err(|u| GraphError::UnknownResource(u.0))?,
            members: resolved,
            start,
            end,
            reserved: false,
            domain,
        };
        for &n in per_node.keys().filter(|_| check_capacity) {
            let node = self.graph.node(n);
            if let Some(sd) = &d.sockets {
                // Sockets listed must be unused by any other running group; the members' other
                // sockets come from the unused rest. What reservations plan there does not count:
                // the group runs, and they are planned around it again.
                let usable = self.graph.idle_while_running(n, sd);
                let usable: BTreeSet<VertexId> = usable.into_iter().map(|s| node.sockets[s].vertex).collect();
                let on_node = alloc.members.iter().filter(|m| m.node == n);
                let listed: Vec<VertexId> = on_node.clone().flat_map(|m| m.sockets.iter().copied()).collect();
                let missing: usize = on_node.map(|m| (sd.count as usize).saturating_sub(m.sockets.len())).sum();
                let busy = listed.iter().find(|v| !usable.contains(v));
                if busy.is_some() || usable.len() - listed.len() < missing {
                    return Err(GraphError::Insufficient {
                        node: node.name.clone(),
                        resource: "sockets (whole, idle, large enough)".into(),
                        free: usable.len().to_string(),
                        needed: (listed.len() + missing).to_string(),
                    });
                }
            }
            let on_node: Vec<usize> = (0..alloc.members.len()).filter(|&i| alloc.members[i].node == n).collect();
            let need = self.amounts_on(&alloc, n, &on_node);
            for (i, (&want, &free)) in need.iter().zip(&node.free).enumerate() {
                if want > free {
                    let rid = crate::resources::ResourceId(i as u16);
                    return Err(GraphError::Insufficient {
                        node: node.name.clone(),
                        resource: self.graph.resources.def(rid).name.clone(),
                        free: self.graph.resources.format(rid, free),
                        needed: self.graph.resources.format(rid, want),
                    });
                }
            }
        }
        self.apply_nodes(&mut alloc, per_node.into_keys(), None);
        self.next_id = self.next_id.max(id + 1);
        self.allocations.insert(id, Arc::new(alloc));
        Ok(())
    }

    /// Records capacity used on `node` by something the matcher did not place (a pod of another
    /// scheduler), under a fresh id; release it with [`ResourceGraph::cancel`]. Resources the
    /// graph does not know are ignored: nothing here can be allocated to them anyway.
    ///
    /// Recorded even beyond the node's free capacity: the pod is there, whatever the graph
    /// thought was free. The node then has nothing free until enough ends, so a release never
    /// hands room to a group that the pod already uses. Errors only for an unknown node.
    pub fn hold(
        &mut self,
        node: &str,
        requests: &[(String, u64)],
        devices: &[String],
        now: i64,
    ) -> Result<AllocId, GraphError> {
        let known: Vec<(String, u64)> =
            requests.iter().filter(|(r, _)| self.graph.resources.get(r).is_some()).cloned().collect();
        let mut req = GroupRequest::simple(&format!("hold on {node}"), 1, &[]);
        req.requests = known;
        let id = self.next_id;
        // Devices named but not free here (not published yet, or held already) are left to the
        // count: another free device of their resource is held instead.
        let n = self.graph.node_id(node)?;
        let free = |name: &String| {
            let g = &self.graph;
            g.node(n).devices.iter().any(|s| s.holder.is_none() && g.vertex(s.vertex).meta.name == *name)
        };
        let devices = devices.iter().filter(|d| free(d)).cloned().collect();
        let member = ImportedMember { index: 0, node: node.to_string(), devices };
        self.record(id, &req, &[member], (now, FOREVER), false)?;
        Ok(id)
    }

    /// Adds a node while allocations exist.
    pub fn add_node(&mut self, spec: &NodeSpec) -> Result<NodeId, GraphError> {
        let n = self
            .graph
            .insert_node(spec)
            .map_err(|m| GraphError::Input(InputError::new("add node", format!("node {}", spec.name), m)))?;
        self.graph.rebuild_index();
        Ok(n)
    }

    /// Brings a node in line with its new description. Labels, taints, cordon and pooled amounts
    /// change in place, under running allocations (a capacity that shrank below what they hold
    /// leaves the node with nothing free until enough of them end). A new place in the topology
    /// or a new set of resources rebuilds the node, which only happens while nothing runs on it:
    /// until then the old shape stays and [`NodeUpdate::ShapeDeferred`] says so; call again later.
    pub fn update_node(&mut self, spec: &NodeSpec) -> Result<NodeUpdate, GraphError> {
        let n = self.graph.node_id(&spec.name)?;
        if NodeShape::of_node(&self.graph, n) == NodeShape::of_spec(spec) {
            self.graph.update_node_in_place(n, spec);
            return Ok(NodeUpdate::Applied);
        }
        if self.graph.node(n).runs_something() {
            self.graph.update_node_in_place(n, spec);
            return Ok(NodeUpdate::ShapeDeferred);
        }
        // Check the new shape before dropping the old one, so a refusal changes nothing.
        self.graph
            .check_node(spec)
            .map_err(|m| GraphError::Input(InputError::new("update node", format!("node {}", spec.name), m)))?;
        let up = self.graph.node(n).up;
        self.remove_node(&spec.name)?;
        self.add_node(spec)?;
        self.set_up(&spec.name, up)?;
        Ok(NodeUpdate::Applied)
    }

    /// Removes a node. Members placed on it are dropped from their allocations (they are gone);
    /// returns the affected (allocation, member indices) so the caller can shrink or requeue.
    pub fn remove_node(&mut self, name: &str) -> Result<Vec<(AllocId, Vec<u32>)>, GraphError> {
        let n = self.graph.node_id(name)?;
        let mut affected = Vec::new();
        for a in self.allocations.values() {
            let lost: Vec<u32> = a.members.iter().filter(|m| m.node == n).map(|m| m.index).collect();
            if !lost.is_empty() {
                affected.push((a.id, lost));
            }
        }
        for (id, lost) in &affected {
            let mut alloc = Arc::unwrap_or_clone(self.allocations.remove(id).expect("listed above"));
            alloc.members.retain(|m| !lost.contains(&m.index));
            self.apply_nodes(&mut alloc, [n], None);
            if !alloc.members.is_empty() {
                self.allocations.insert(*id, Arc::new(alloc));
            }
        }
        let node = self.graph.node_mut(n);
        node.removed = true;
        let vertex = node.vertex;
        self.graph.node_by_name.remove(name);
        if let Some(parent) = self.graph.vertex(vertex).parent {
            self.graph.vertices[parent.0 as usize].children.retain(|&c| c != vertex);
        }
        self.graph.rebuild_index();
        Ok(affected)
    }

    /// Cordons (true) or uncordons a node. Running allocations are untouched.
    pub fn set_unschedulable(&mut self, name: &str, unschedulable: bool) -> Result<(), GraphError> {
        let n = self.graph.node_id(name)?;
        self.graph.node_mut(n).unschedulable = unschedulable;
        self.graph.refresh_node(n);
        Ok(())
    }

    /// Marks a node up or down (not ready). Running allocations are untouched.
    pub fn set_up(&mut self, name: &str, up: bool) -> Result<(), GraphError> {
        let n = self.graph.node_id(name)?;
        self.graph.node_mut(n).up = up;
        self.graph.refresh_node(n);
        Ok(())
    }

    pub fn stat(&self) -> Stat {
        let (cap, free) = self.graph.totals();
        let resources = self
            .graph
            .resources
            .iter()
            .map(|(id, def)| {
                (
                    def.name.clone(),
                    self.graph.resources.format(id, cap[id.index()]),
                    self.graph.resources.format(id, free[id.index()]),
                )
            })
            .collect();
        Stat {
            nodes: self.graph.live_nodes().count(),
            schedulable_nodes: self.graph.live_nodes().filter(|(_, n)| n.schedulable()).count(),
            vertices: self.graph.vertices.len(),
            allocations: self.allocations.values().filter(|a| !a.reserved).count(),
            reservations: self.allocations.values().filter(|a| a.reserved).count(),
            resources,
        }
    }
}
