//! Choosing nodes for a group: policies over the graph's index, for one time window.
//!
//! A search never changes the graph; it returns how many placement units go on which node, or
//! fewer than the group's minimum, and the caller commits or gives up. That is what makes every
//! match all-or-nothing.

use std::cell::Cell;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::rc::Rc;

use crate::dra::DeviceMatcher;
use crate::graph::{DomainId, Graph, NodeId, VertexId};
use crate::jobspec::{ConstraintMode, GroupRequest, TopologyConstraint};
use crate::policy::Policy;
use crate::resources::ResourceKind;
use crate::sockets::SocketDemand;

/// The time window a search is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Window {
    /// From now for `end - now` seconds, against current free amounts (and reservations).
    Now { now: i64, end: i64 },
    /// A future window `[start, end)`, against running allocations' expected ends.
    Future { start: i64, end: i64 },
    /// The empty cluster, every node counted (satisfiability).
    Empty,
}

/// A group request resolved against one graph's resource table.
#[derive(Debug, Clone)]
pub struct Demand<'a> {
    pub request: &'a GroupRequest,
    /// Per member, by resource index.
    pub per_member: Vec<u64>,
    /// Members per placement unit (Flux `node > slot[M]`), else 1.
    pub unit_size: u32,
    /// Units per node at most.
    pub units_per_node: u32,
    pub min_units: u32,
    pub max_units: u32,
    /// Whole sockets each member holds, when it asks for sockets.
    pub sockets: Option<SocketDemand>,
    /// Which published devices serve each member, when it asks for some (shared by clones: what
    /// it has decided of a device holds for all of them).
    pub(crate) devices: Option<Rc<DeviceMatcher>>,
    /// By node id, the window start before which the node has been found to take no unit of
    /// this demand in a future window (see `Graph::node_units`); empty unless the caller searches
    /// the same unchanged graph at ascending future starts, as a reservation does.
    pub(crate) future_full_until: Vec<Cell<i64>>,
}

/// Why a demand cannot be resolved against this graph at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unsatisfiable(pub String);

impl<'a> Demand<'a> {
    pub fn resolve(graph: &Graph, request: &'a GroupRequest) -> Result<Self, Unsatisfiable> {
        let mut per_member = vec![0u64; graph.resources.len()];
        for (name, amount) in &request.requests {
            let Some(id) = graph.resources.get(name) else {
                return Err(Unsatisfiable(format!("no node in this cluster has any {name}")));
            };
            per_member[id.index()] = *amount;
        }
        let sockets = match &request.sockets {
            Some(sr) => {
                let mut per_socket = vec![0u64; graph.resources.len()];
                for (name, amount) in &sr.requests {
                    let Some(id) = graph.resources.get(name) else {
                        return Err(Unsatisfiable(format!("no node in this cluster has any {name}")));
                    };
                    per_socket[id.index()] = *amount;
                }
                Some(SocketDemand { count: sr.count, per_socket })
            }
            None => None,
        };
        let devices = if request.devices.is_empty() {
            None
        } else {
            let m = DeviceMatcher::new(graph, &request.devices).map_err(|e| Unsatisfiable(e.to_string()))?;
            for (r, count) in m.per_member() {
                per_member[r.index()] += count;
            }
            Some(Rc::new(m))
        };
        if let Some(pods) = graph.resources.get("pods")
            && per_member[pods.index()] == 0
            && sockets.is_none()
        {
            per_member[pods.index()] = 1;
        }
        if let Some(t) = &request.topology {
            graph.check_topology(t)?;
        }
        let (unit_size, units_per_node) = match request.members_per_node {
            Some(m) => (m.max(1), 1),
            None if request.exclusive => (1, 1),
            None => (1, u32::MAX),
        };
        Ok(Self {
            request,
            per_member,
            unit_size,
            units_per_node,
            min_units: request.min_members.div_ceil(unit_size),
            max_units: request.max_members / unit_size,
            sockets,
            devices,
            future_full_until: Vec::new(),
        })
    }

    pub fn members(&self, units: u32) -> u32 {
        units * self.unit_size
    }

    /// How many members fit in `amounts`: the smallest ratio over the requested resources.
    pub fn members_within(&self, amounts: &[u64]) -> u64 {
        self.per_member.iter().zip(amounts).filter_map(|(q, a)| a.checked_div(*q)).min().unwrap_or(u64::MAX)
    }

    /// Placement units one node with `amounts` can take.
    pub(crate) fn units_per_node_for(&self, amounts: &[u64]) -> u32 {
        // Most nodes a busy cluster's search looks at lack room for one unit: say so without
        // dividing.
        let unit = u64::from(self.unit_size);
        if self.per_member.iter().zip(amounts).any(|(&q, &a)| q > 0 && a < q.saturating_mul(unit)) {
            return 0;
        }
        let units = self.members_within(amounts) / u64::from(self.unit_size);
        units.min(u64::from(self.units_per_node)) as u32
    }
}

/// A search result: placement units per node, in the order chosen.
pub type Placement = Vec<(NodeId, u32)>;

impl Graph {
    /// Units of `demand` node `n` can take in `window`; `buf` is scratch space.
    pub fn node_units(&self, n: NodeId, d: &Demand, window: Window, buf: &mut Vec<u64>) -> u32 {
        let full_until = match window {
            Window::Future { .. } => d.future_full_until.get(n.0 as usize),
            Window::Now { .. } | Window::Empty => None,
        };
        if let (Some(until), Window::Future { start, .. }) = (full_until, window)
            && start < until.get()
        {
            return 0;
        }
        let (units, until) = self.node_units_until(n, d, window, buf);
        if let Some(full_until) = full_until
            && units == 0
        {
            full_until.set(until);
        }
        units
    }

    /// `node_units`, and when that is 0 for a future window, the time until which it stays 0 for
    /// every later window start with the same demand.
    fn node_units_until(&self, n: NodeId, d: &Demand, window: Window, buf: &mut Vec<u64>) -> (u32, i64) {
        let node = self.node(n);
        if node.removed || (window != Window::Empty && !node.schedulable()) {
            return (0, i64::MAX);
        }
        let (units, until) = match window {
            Window::Empty => (d.units_per_node_for(&node.capacity), i64::MAX),
            Window::Now { .. } if !node.has_reservations() => {
                if d.request.exclusive && !node.idle() {
                    return (0, i64::MAX);
                }
                (d.units_per_node_for(&node.free), i64::MAX)
            }
            Window::Now { now, end } => self.window_units(n, d, now, end, true, buf),
            Window::Future { start, end } => self.window_units(n, d, start, end, false, buf),
        };
        // Within the node's totals; its sockets, if it has any, may allow fewer.
        let (units, until) = match (units, node.sockets.is_empty(), &d.sockets) {
            (0, ..) => (units, until),
            (_, true, Some(_)) => (0, i64::MAX),
            (_, true, None) => (units, until),
            (_, false, _) => self.pool_units(n, d, window, units),
        };
        let (units, until) = match &d.devices {
            Some(m) if units > 0 => self.device_units(n, d, m, window, units),
            _ => (units, until),
        };
        // The filter is the dearest check; most nodes of a busy cluster fail on room first.
        if units == 0 || !d.request.filter.admits(node) {
            return (0, if units == 0 { until } else { i64::MAX });
        }
        (units, until)
    }

    /// Units of `d` node `n` can take over the window `[start, end)`: the fewest it can take at
    /// any point where the spans (allocations and reservations) overlapping it change, which is
    /// what capacity minus their peak gives, but stopping at the first point with no room. With
    /// `starts_now`, allocations that have outrun their expected end still hold what they hold at
    /// the window's start: they are running, whatever the estimate said.
    ///
    /// With no room, also returns the earliest end of the spans active at that point: a later
    /// window starting before then still contains that point or a fuller one.
    fn window_units(
        &self,
        n: NodeId,
        d: &Demand,
        start: i64,
        end: i64,
        starts_now: bool,
        used: &mut Vec<u64>,
    ) -> (u32, i64) {
        let node = self.node(n);
        if node.spans.is_empty() {
            return (d.units_per_node_for(&node.capacity), i64::MAX);
        }
        let mut units = u32::MAX;
        used.clear();
        used.resize(node.capacity.len(), 0);
        let points = std::iter::once(start).chain(node.spans.iter().map(|s| s.start).filter(|&p| p > start && p < end));
        for p in points {
            used.fill(0);
            let mut first_end = i64::MAX;
            for s in self.spans_at(node, (p, start, starts_now), &d.request.reservations) {
                first_end = first_end.min(s.end);
                for (u, a) in used.iter_mut().zip(&s.amounts) {
                    *u += a;
                }
            }
            // An exclusive group needs the whole node: nothing of any resource it has in use.
            if d.request.exclusive && used.iter().zip(&node.capacity).any(|(&u, &c)| u > 0 && c > 0) {
                return (0, first_end);
            }
            for (u, &c) in used.iter_mut().zip(&node.capacity) {
                *u = c.saturating_sub(*u);
            }
            units = units.min(d.units_per_node_for(used));
            if units == 0 {
                return (0, first_end);
            }
        }
        (units, i64::MAX)
    }

    /// Upper bound on units any one node in domain `dom` can take.
    fn domain_unit_bound(&self, dom: DomainId, d: &Demand, window: Window) -> u32 {
        let agg = self.domain(dom);
        if d.request.exclusive && matches!(window, Window::Now { .. }) && agg.idle_nodes == 0 {
            return 0;
        }
        let maxes = match window {
            Window::Now { .. } => &agg.max_free,
            // Nothing running below ends by the window's start: no node has more room than now.
            Window::Future { start, .. } if agg.min_end > start => &agg.max_free,
            Window::Future { .. } | Window::Empty => &agg.max_cap,
        };
        d.units_per_node_for(maxes)
    }

    /// Upper bound on units the whole domain can take, from its sums.
    pub(crate) fn domain_total_bound(&self, dom: DomainId, d: &Demand, window: Window) -> u64 {
        let agg = self.domain(dom);
        let sums = match window {
            Window::Now { .. } => &agg.sum_free,
            Window::Future { .. } | Window::Empty => &agg.sum_cap,
        };
        d.members_within(sums) / u64::from(d.unit_size)
    }

    /// Visits nodes under `scope` in tree order (or reversed), skipping domains where no node can
    /// take one unit. `visit` returns false to stop.
    fn walk_nodes(
        &self,
        scope: DomainId,
        d: &Demand,
        window: Window,
        reverse: bool,
        visit: &mut dyn FnMut(NodeId) -> bool,
    ) -> bool {
        if self.domain_unit_bound(scope, d, window) == 0 {
            return true;
        }
        let dom = self.domain(scope);
        let nodes_then_domains = |g: &Self, visit: &mut dyn FnMut(NodeId) -> bool| -> bool {
            for &n in &dom.child_nodes {
                if !visit(n) {
                    return false;
                }
            }
            for &c in &dom.child_domains {
                if !g.walk_nodes(c, d, window, reverse, visit) {
                    return false;
                }
            }
            true
        };
        if !reverse {
            return nodes_then_domains(self, visit);
        }
        for &c in dom.child_domains.iter().rev() {
            if !self.walk_nodes(c, d, window, reverse, visit) {
                return false;
            }
        }
        for &n in dom.child_nodes.iter().rev() {
            if !visit(n) {
                return false;
            }
        }
        true
    }

    /// Nodes under `scope` with at least one unit free, with their unit counts.
    pub(crate) fn candidates(&self, scope: DomainId, d: &Demand, window: Window) -> Vec<(NodeId, u32)> {
        let mut out = Vec::new();
        let mut buf = Vec::new();
        self.walk_nodes(scope, d, window, false, &mut |n| {
            let u = self.node_units(n, d, window, &mut buf);
            if u > 0 {
                out.push((n, u));
            }
            true
        });
        out
    }

    /// Takes units in tree order until `d.max_units` are placed.
    fn select_in_order(&self, scope: DomainId, d: &Demand, window: Window, reverse: bool) -> Placement {
        let mut placed = Vec::new();
        let mut left = d.max_units;
        let mut buf = Vec::new();
        self.walk_nodes(scope, d, window, reverse, &mut |n| {
            let u = self.node_units(n, d, window, &mut buf).min(left);
            if u > 0 {
                placed.push((n, u));
                left -= u;
            }
            left > 0
        });
        placed
    }

    /// Takes the nodes that can hold the most of the units still to place first: a best-first
    /// search where the units in a domain's key bound those of its nodes. At equal units the
    /// tighter node or domain goes first, so a small group fills a node in use before it breaks
    /// into an empty one (best fit among the domains entered, not over the whole cluster).
    pub(crate) fn select_pack(&self, scope: DomainId, d: &Demand, window: Window) -> Placement {
        #[derive(PartialEq, Eq, PartialOrd, Ord)]
        enum Item {
            Domain(Reverse<DomainId>),
            Node(Reverse<NodeId>),
        }
        // (units of those still to place, fewest units in all first, the item).
        let key = |units: u32, left: u32, item: Item| (units.min(left), Reverse(units), item);
        let mut heap = BinaryHeap::new();
        let mut buf = Vec::new();
        let mut left = d.max_units;
        heap.push(key(self.domain_unit_bound(scope, d, window), left, Item::Domain(Reverse(scope))));
        let mut placed = Vec::new();
        while left > 0 {
            let Some((_, Reverse(bound), item)) = heap.pop() else {
                break;
            };
            if bound == 0 {
                break;
            }
            match item {
                Item::Node(Reverse(n)) => {
                    let u = bound.min(left);
                    placed.push((n, u));
                    left -= u;
                }
                Item::Domain(Reverse(dom)) => {
                    let agg = self.domain(dom);
                    for &n in &agg.child_nodes {
                        let u = self.node_units(n, d, window, &mut buf);
                        if u > 0 {
                            heap.push(key(u, left, Item::Node(Reverse(n))));
                        }
                    }
                    for &c in &agg.child_domains {
                        let b = self.domain_unit_bound(c, d, window);
                        if b > 0 {
                            heap.push(key(b, left, Item::Domain(Reverse(c))));
                        }
                    }
                }
            }
        }
        placed
    }

    /// One unit per node per round, least allocated nodes first, until placed.
    fn select_spread(&self, scope: DomainId, d: &Demand, window: Window) -> Placement {
        let mut cands = self.candidates(scope, d, window);
        let score = |n: NodeId| -> u64 {
            // Free share summed over requested resources, in parts per million.
            let node = self.node(n);
            d.per_member
                .iter()
                .enumerate()
                .filter(|(_, q)| **q > 0)
                .map(|(i, _)| node.free[i].saturating_mul(1_000_000) / node.capacity[i].max(1))
                .sum()
        };
        cands.sort_by_key(|&(n, _)| (Reverse(score(n)), n));
        let mut taken = vec![0u32; cands.len()];
        let mut left = d.max_units;
        while left > 0 {
            let mut progressed = false;
            for (i, &(_, cap)) in cands.iter().enumerate() {
                if left > 0 && taken[i] < cap {
                    taken[i] += 1;
                    left -= 1;
                    progressed = true;
                }
            }
            if !progressed {
                break;
            }
        }
        cands.iter().zip(taken).filter(|(_, t)| *t > 0).map(|(&(n, _), t)| (n, t)).collect()
    }

    /// Tightest nodes first on the group's scarcest resource, to keep large holes for large groups.
    fn select_best_fit(&self, scope: DomainId, d: &Demand, window: Window) -> Placement {
        let (_, sum_free) = self.totals();
        let scarcest = d
            .per_member
            .iter()
            .enumerate()
            .filter(|(_, q)| **q > 0)
            .max_by_key(|&(i, q)| (u128::from(*q) << 64) / u128::from(sum_free[i].max(1)))
            .map(|(i, _)| i);
        let mut cands = self.candidates(scope, d, window);
        if let Some(s) = scarcest {
            cands.sort_by_key(|&(n, _)| (self.node(n).free[s], n));
        }
        take_in_order(cands, d.max_units)
    }

    /// The domains of `level`, with their matching domain ids, in tree order.
    pub(crate) fn level_domains(&self, level: &str) -> &[(VertexId, DomainId)] {
        self.levels.get(level).map_or(&[], Vec::as_slice)
    }

    /// Refuses a constraint on a level this graph lacks, or kept `within` a level that does not
    /// enclose its own; the message names the levels there are.
    pub(crate) fn check_topology(&self, t: &TopologyConstraint) -> Result<(), Unsatisfiable> {
        t.check_shape().map_err(Unsatisfiable)?;
        let known: Vec<_> = self.levels.keys().filter(|l| *l != "cluster").collect();
        for level in std::iter::once(&t.level).chain(&t.within).chain(t.weights.keys()) {
            if !self.levels.contains_key(level) {
                return Err(Unsatisfiable(format!("no topology level {level:?} in this cluster (levels: {known:?})")));
            }
        }
        self.check_weights(t)?;
        let Some(within) = &t.within else { return Ok(()) };
        let order = self.levels_innermost_first();
        let depth = |l: &String| order.iter().position(|x| x == l);
        if depth(within) <= depth(&t.level) {
            return Err(Unsatisfiable(format!(
                "{within:?} does not enclose {:?} (levels from the nodes out: {order:?}); keep the preferred level \
                 within one further out",
                t.level
            )));
        }
        Ok(())
    }

    /// Refuses weights (their shape checked) on a level inside `level` or outside `within`.
    fn check_weights(&self, t: &TopologyConstraint) -> Result<(), Unsatisfiable> {
        if t.weights.is_empty() {
            return Ok(());
        }
        let order = self.levels_innermost_first();
        let depth = |l: &String| order.iter().position(|x| x == l);
        let outermost = t.within.as_ref().map_or(order.len(), |w| depth(w).unwrap_or(order.len()));
        for level in t.weights.keys() {
            let at = depth(level);
            if at < depth(&t.level) || at.is_some_and(|a| a > outermost) {
                let bounds = t.within.as_ref().map_or(String::new(), |w| format!(" and at most {w:?}"));
                return Err(Unsatisfiable(format!(
                    "weighted level {level:?} is out of order (levels from the nodes out: {order:?}); weight {:?} or \
                     levels enclosing it{bounds}",
                    t.level
                )));
            }
        }
        Ok(())
    }

    /// Level names ordered innermost (closest to nodes) first.
    fn levels_innermost_first(&self) -> Vec<String> {
        let depth = |v: VertexId| {
            let mut n = 0;
            let mut cur = self.vertex(v).parent;
            while let Some(p) = cur {
                n += 1;
                cur = self.vertex(p).parent;
            }
            n
        };
        // The deepest domain of each level: while nodes are relabelled into a new level (blocks
        // added above racks), domains of the old shape stay behind higher up.
        let mut levels: Vec<(usize, String)> = self
            .levels
            .iter()
            .filter_map(|(name, vs)| vs.iter().map(|&(v, _)| depth(v)).max().map(|d| (d, name.clone())))
            .collect();
        levels.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        levels.into_iter().map(|(_, n)| n).collect()
    }

    /// Runs `policy` within `scope`, without topology handling.
    pub(crate) fn select_flat(&self, scope: DomainId, d: &Demand, window: Window, policy: Policy) -> Placement {
        match policy {
            Policy::First => self.select_in_order(scope, d, window, false),
            Policy::HighId => self.select_in_order(scope, d, window, true),
            Policy::Pack | Policy::Locality => self.select_pack(scope, d, window),
            Policy::Spread => self.select_spread(scope, d, window),
            Policy::BestFit => self.select_best_fit(scope, d, window),
        }
    }

    /// The domain of `level` with the least free capacity that still holds the whole group,
    /// packed within it. Domains are tried in order of their aggregate free capacity, so only the
    /// few that could be tightest are searched node by node.
    fn select_tightest_domain(
        &self,
        level: &str,
        under: Option<VertexId>,
        d: &Demand,
        window: Window,
    ) -> Option<(VertexId, Placement)> {
        let need = u64::from(d.max_units);
        let mut candidates: Vec<(u64, VertexId, DomainId)> = self
            .level_domains(level)
            .iter()
            .filter(|&&(v, _)| self.is_within(v, under))
            .map(|&(v, dom)| (self.domain_total_bound(dom, d, window), v, dom))
            .filter(|&(bound, ..)| bound >= need)
            .collect();
        candidates.sort_unstable_by_key(|&(bound, v, _)| (bound, v));
        candidates.into_iter().find_map(|(_, v, dom)| {
            let p = self.select_pack(dom, d, window);
            (placed_units(&p) >= d.max_units).then_some((v, p))
        })
    }

    /// Whether vertex `v` is `under` or inside it (anything is inside no vertex).
    pub(crate) fn is_within(&self, v: VertexId, under: Option<VertexId>) -> bool {
        let Some(u) = under else { return true };
        let mut at = Some(v);
        while let Some(x) = at {
            if x == u {
                return true;
            }
            at = self.vertex(x).parent;
        }
        false
    }

    /// The best placement of `d` within one domain of `level` (inside `under`, if given): all of
    /// it in the first domain that takes it (the tightest, under the locality policy), else the
    /// domain that takes the most of it, if at least its minimum.
    pub(crate) fn search_level(
        &self,
        level: &str,
        under: Option<VertexId>,
        d: &Demand,
        window: Window,
        policy: Policy,
    ) -> Option<(Placement, VertexId)> {
        if policy == Policy::Locality
            && let Some((v, p)) = self.select_tightest_domain(level, under, d, window)
        {
            return Some((p, v));
        }
        let mut best: Option<(Placement, VertexId)> = None;
        for &(v, dom) in self.level_domains(level).iter().filter(|&&(v, _)| self.is_within(v, under)) {
            if self.domain_total_bound(dom, d, window) < u64::from(d.min_units) {
                continue;
            }
            let p = self.select_flat(dom, d, window, policy);
            if placed_units(&p) >= d.max_units {
                return Some((p, v));
            }
            if placed_units(&p) >= d.min_units && best.as_ref().is_none_or(|(b, _)| placed_units(&p) > placed_units(b))
            {
                best = Some((p, v));
            }
        }
        best
    }

    /// The levels a constraint lets members share, in the order to try: a required level alone;
    /// a preferred one, then each level out (up to `within`), short of the whole cluster.
    pub(crate) fn constraint_levels(&self, t: &TopologyConstraint) -> Vec<String> {
        match t.mode {
            ConstraintMode::Required => vec![t.level.clone()],
            ConstraintMode::Preferred => {
                let mut outward: Vec<String> =
                    self.levels_innermost_first().into_iter().skip_while(|l| *l != t.level).collect();
                if let Some(w) = &t.within {
                    outward.truncate(outward.iter().position(|l| l == w).map_or(outward.len(), |i| i + 1));
                }
                outward.retain(|l| l != "cluster");
                outward
            }
        }
    }

    /// Searches for a placement of `d` in `window`. Returns the placement (possibly below the
    /// minimum, which means no fit) and the topology domain it was confined to.
    pub fn search(
        &self,
        d: &Demand,
        window: Window,
        policy: Policy,
        within: Option<VertexId>,
    ) -> (Placement, Option<VertexId>) {
        if d.max_units == 0 {
            return (Vec::new(), None);
        }
        if let Some(v) = within {
            let dom = self.domain_of_vertex[&v];
            return (self.select_flat(dom, d, window, policy), Some(v));
        }
        if let Some(t) = &d.request.topology {
            // A preferred constraint that cannot be met degrades level by level: a gang that
            // cannot share a rack should still share a block rather than spread over the cluster.
            // Kept within an enclosing level, it stops there.
            let levels = self.constraint_levels(t);
            if !t.weights.is_empty() {
                return self.search_weighted(d, window, policy, t, &levels);
            }
            for level in &levels {
                if let Some((p, v)) = self.search_level(level, None, d, window, policy) {
                    return (p, Some(v));
                }
            }
            if t.mode == ConstraintMode::Required || t.within.is_some() {
                return (Vec::new(), None);
            }
        } else if policy == Policy::Locality {
            for level in self.levels_innermost_first() {
                if let Some((v, p)) = self.select_tightest_domain(&level, None, d, window) {
                    return (p, Some(v).filter(|_| level != "cluster"));
                }
            }
        }
        (self.select_flat(self.root_domain, d, window, policy), None)
    }

    /// [`Graph::search`] inside `scope` (a domain of the group the demand is one set of): the
    /// set's own topology constraint picks a domain under it, a preferred one falling back to
    /// the whole scope.
    pub fn search_inside(
        &self,
        d: &Demand,
        window: Window,
        policy: Policy,
        scope: Option<VertexId>,
    ) -> (Placement, Option<VertexId>) {
        let (Some(scope), Some(t)) = (scope, &d.request.topology) else {
            return self.search(d, window, policy, scope);
        };
        // A set level as wide as the scope's, or wider, holds already: all of the scope is in one
        // of its domains.
        if self.level_domains(&t.level).iter().any(|&(v, _)| self.is_within(scope, Some(v))) {
            return self.search(d, window, policy, Some(scope));
        }
        let scope_level = &self.vertex(scope).meta.vtype;
        for level in self.constraint_levels(t).iter().take_while(|l| *l != scope_level) {
            if let Some((p, v)) = self.search_level(level, Some(scope), d, window, policy) {
                return (p, Some(v));
            }
        }
        if t.mode == ConstraintMode::Required && t.level != *scope_level {
            return (Vec::new(), None);
        }
        self.search(d, window, policy, Some(scope))
    }

    /// Explains why `d` could never be placed, even on the empty cluster.
    pub fn explain_unsatisfiable(&self, d: &Demand) -> String {
        let req = d.request;
        let mut buf = Vec::new();
        let admitted = self.live_nodes().filter(|(_, n)| req.filter.admits(n)).count();
        if admitted == 0 {
            return "no node matches the group's node selector, affinity and tolerations".to_string();
        }
        for (i, &q) in d.per_member.iter().enumerate() {
            let id = crate::resources::ResourceId(i as u16);
            let largest =
                self.live_nodes().filter(|(_, n)| req.filter.admits(n)).map(|(_, n)| n.capacity[i]).max().unwrap_or(0);
            let need = q * u64::from(d.unit_size);
            if need > largest {
                let what = if d.unit_size > 1 {
                    format!("{} members per node", d.unit_size)
                } else {
                    "each member".to_string()
                };
                // A node with that much that the group's own filter leaves out is the likelier fix.
                let left_out = self.live_nodes().find(|(_, n)| n.capacity[i] >= need && !req.filter.admits(n));
                let hint = match left_out {
                    Some((_, n)) => match req.filter.untolerated(n).filter(|_| req.filter.selects(n)) {
                        Some(t) => format!(
                            "; node {} has that much, but its taint {}={}:{} is not tolerated (add a toleration)",
                            n.name,
                            t.key,
                            t.value,
                            t.effect.as_str()
                        ),
                        None => format!(
                            "; node {} has that much, but the group's node selector or affinity leaves it out",
                            n.name
                        ),
                    },
                    None => String::new(),
                };
                return format!(
                    "{what} needs {} {}; the largest matching node has {}{hint}",
                    self.resources.format(id, need),
                    self.resources.def(id).name,
                    self.resources.format(id, largest)
                );
            }
        }
        if let Some(sd) = &d.sockets {
            let large_enough = |n: &crate::graph::Node| {
                n.sockets.iter().filter(|s| s.capacity.iter().zip(&sd.per_socket).all(|(c, q)| c >= q)).count()
            };
            let best = self.live_nodes().filter(|(_, n)| req.filter.admits(n)).map(|(_, n)| large_enough(n)).max();
            let best = best.unwrap_or(0) as u64;
            let need = u64::from(sd.count) * u64::from(d.unit_size);
            if best < need {
                let what: Vec<String> = (0..sd.per_socket.len())
                    .filter(|&i| sd.per_socket[i] > 0)
                    .map(|i| {
                        let id = crate::resources::ResourceId(i as u16);
                        format!("{} {}", self.resources.format(id, sd.per_socket[i]), self.resources.def(id).name)
                    })
                    .collect();
                let what = if what.is_empty() { String::new() } else { format!(" with {} each", what.join(", ")) };
                let who = if d.unit_size > 1 {
                    format!("{} members on one node need", d.unit_size)
                } else {
                    "each member needs".to_string()
                };
                return format!("{who} {need} whole sockets{what}; the best matching node has {best} such sockets");
            }
        }
        if let Some(m) = &d.devices {
            let served = |n: &crate::graph::Node| !crate::dra::pick(&n.devices, |_| true, m, 1).is_empty();
            if !self.live_nodes().any(|(_, n)| req.filter.admits(n) && served(n)) {
                let error = m.first_error().map(|e| format!(" ({e})")).unwrap_or_default();
                return format!("no matching node has the devices one member asks for: {}{error}", m.describe(self));
            }
        }
        let needed = d.min_units;
        let unit_word =
            if d.unit_size > 1 { format!("groups of {} members", d.unit_size) } else { "members".to_string() };
        // The level the members must share: a required one, or the one a preferred level is kept within.
        let binding = req.topology.as_ref().and_then(|t| match t.mode {
            ConstraintMode::Required => Some(&t.level),
            ConstraintMode::Preferred => t.within.as_ref(),
        });
        if let Some(level) = binding {
            let largest = self
                .level_domains(level)
                .iter()
                .map(|&(_, dom)| self.candidates(dom, d, Window::Empty).iter().map(|&(_, u)| u64::from(u)).sum::<u64>())
                .max()
                .unwrap_or(0);
            return format!("needs {needed} {unit_word} in one {level}; the largest {level} holds {largest}");
        }
        let total: u64 =
            self.live_nodes().map(|(n, _)| u64::from(self.node_units(n, d, Window::Empty, &mut buf))).sum();
        format!("needs {needed} {unit_word}; the whole cluster holds {total} when empty")
    }

    /// Which resource ids are devices.
    pub fn is_device(&self, i: usize) -> bool {
        self.resources.def(crate::resources::ResourceId(i as u16)).kind == ResourceKind::Device
    }
}

/// Units in a placement.
pub fn placed_units(p: &Placement) -> u32 {
    p.iter().map(|&(_, u)| u).sum()
}

fn take_in_order(cands: Vec<(NodeId, u32)>, mut left: u32) -> Placement {
    let mut out = Vec::new();
    for (n, u) in cands {
        if left == 0 {
            break;
        }
        let t = u.min(left);
        out.push((n, t));
        left -= t;
    }
    out
}
