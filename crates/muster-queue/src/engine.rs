//! The engine: takes inputs (each with the current time), decides, and reports every change as a
//! list of `Transition`s. Pure and deterministic: no wall clock, no hash-order iteration in
//! decisions.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::hash::{Hash, Hasher};
use std::ops::Bound;
use std::sync::Arc;

use muster_graph::{
    AllocId, GraphError, GroupRequest, ImportedMember, MatchOutcome, NodeSpec, NodeUpdate, ResourceGraph,
};
use serde::{Deserialize, Serialize};

use crate::config::{Compiled, EngineConfig, QueuePolicy, RequeueOrder, WithinQueue};
use crate::group::{
    AllocationRecord, Group, GroupKey, GroupSpec, GroupState, IllegalTransition, MemberPlacement, Reason, Transition,
};
use crate::quota::{self, Usage};

/// Why an input was refused. The engine is unchanged after any of these.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Config(#[from] muster_graph::InputError),
    #[error("no group {0}")]
    UnknownGroup(GroupKey),
    #[error("group {0} already exists (delete it first)")]
    DuplicateGroup(GroupKey),
    #[error("group {key}: {source}")]
    IllegalTransition { key: GroupKey, source: IllegalTransition },
    /// A submitted group is wrong; `field` names the field of the spec.
    #[error("group {key}: {field}: {message}")]
    InvalidGroup { key: GroupKey, field: String, message: String },
    #[error("group {key}: member {member} does not exist")]
    UnknownMember { key: GroupKey, member: u32 },
    #[error(transparent)]
    Graph(#[from] GraphError),
}

/// Key of a pending group within its queue: priority (higher first), order time, submission order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct PendingKey {
    pub neg_priority: i64,
    pub order_time: i64,
    pub seq: u64,
}

/// Per-queue accounting.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct QueueUsage {
    /// Past usage in resource-seconds, decayed by the half-life (f64 bits, for exact round trips).
    #[serde(with = "f64_bits")]
    pub decayed: BTreeMap<String, f64>,
    pub last_update: i64,
}

mod f64_bits {
    use std::collections::BTreeMap;

    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(m: &BTreeMap<String, f64>, s: S) -> Result<S::Ok, S::Error> {
        m.iter().map(|(k, v)| (k.clone(), v.to_bits())).collect::<BTreeMap<String, u64>>().serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<String, f64>, D::Error> {
        Ok(BTreeMap::<String, u64>::deserialize(d)?.into_iter().map(|(k, v)| (k, f64::from_bits(v))).collect())
    }
}

/// The engine's whole state, serializable. `Engine::restore` rebuilds an engine from it and a graph
/// of the cluster's nodes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    pub config: EngineConfig,
    pub now: i64,
    pub seq: u64,
    pub next_alloc_id: u64,
    pub structure_version: u64,
    /// Something changed since the last full cycle.
    pub dirty: bool,
    pub groups: Vec<Group>,
    pub usage: BTreeMap<String, QueueUsage>,
    pub namespaces: BTreeMap<String, BTreeMap<String, String>>,
    pub cordoned: BTreeSet<String>,
    pub down: BTreeSet<String>,
    /// Capacity held by pods of other schedulers, by the caller's id (a pod uid).
    #[serde(default)]
    pub external: BTreeMap<String, ExternalHold>,
}

/// Capacity used on a node by a pod the engine did not place.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExternalHold {
    pub node: String,
    /// Requests in base units by resource name.
    pub requests: Vec<(String, u64)>,
}

/// What one pending group is waiting for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Explanation {
    pub key: GroupKey,
    pub queue: String,
    pub state: GroupState,
    /// 1-based position in its queue (pending groups only; 0 otherwise).
    pub position: usize,
    pub estimated_start: Option<i64>,
    pub reason: String,
}

/// Counters of the last cycle, for benchmarks and metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CycleStats {
    pub ran: bool,
    pub examined: usize,
    pub admitted: usize,
    pub reserved: usize,
    pub match_calls: usize,
    pub preemptions: usize,
}

/// How a cycle left a group.
enum Attempt {
    Admitted,
    Reserved,
    /// Did not fit (capacity or quota); blocks a strict FIFO queue.
    Blocked,
    /// Its queue's start window is full: the groups behind it wait too, so that smaller ones
    /// do not keep a large one out of the window.
    WindowFull,
    /// Never fits, or not tried: does not block the queue.
    Skipped,
}

/// The queue engine.
#[derive(Debug, Clone)]
pub struct Engine {
    graph: ResourceGraph,
    config: EngineConfig,
    compiled: Compiled,
    now: i64,
    seq: u64,
    next_alloc_id: u64,
    structure_version: u64,
    dirty: bool,
    /// Shared with the copies the durable layer takes before each batch: a group is copied only
    /// when changed, and an unchanged one is the same allocation in both (which is how the
    /// store's diff skips it).
    groups: BTreeMap<GroupKey, Arc<Group>>,
    usage_hist: BTreeMap<String, QueueUsage>,
    namespaces: BTreeMap<String, BTreeMap<String, String>>,
    cordoned: BTreeSet<String>,
    down: BTreeSet<String>,
    external: BTreeMap<String, (ExternalHold, AllocId)>,
    // Derived, rebuilt on restore.
    usage: Usage,
    pending: BTreeMap<String, BTreeMap<PendingKey, GroupKey>>,
    /// Groups holding an allocation or in backoff (have timers).
    live: BTreeSet<GroupKey>,
    graph_alloc: BTreeMap<GroupKey, AllocId>,
    by_graph_alloc: BTreeMap<AllocId, GroupKey>,
    reservations: BTreeMap<GroupKey, AllocId>,
    shapes: BTreeMap<GroupKey, u64>,
    /// Groups that may run with fewer members than they ask (min < max): the only ones a cycle
    /// tries to grow, so that it does not look up every running group to find them.
    elastic: BTreeSet<GroupKey>,
    /// Satisfiability by (shape, min members), valid for the current structure version.
    sat_cache: BTreeMap<(u64, u32), Result<(), String>>,
    /// Nodes whose new topology place or resource set waits until nothing runs on them. Not in
    /// the snapshot: a restore builds the graph from the nodes as they are now.
    deferred_reshapes: BTreeMap<String, NodeSpec>,
    /// Per queue, members admitted and not yet ready (for its start window); counted at the
    /// start of each cycle and as the cycle admits.
    starting: BTreeMap<String, u32>,
    /// Per queue, the first group its start window held in the last cycle: it and the groups
    /// behind it start when members become ready, which no plan can tell.
    window_held: BTreeMap<String, PendingKey>,
    last_stats: CycleStats,
}

/// A fingerprint of a request without its name: groups with equal shapes fit or fail alike.
fn shape_of(req: &GroupRequest) -> u64 {
    #[derive(Serialize)]
    struct W(#[serde(with = "crate::wire")] GroupRequest);
    let mut r = req.clone();
    r.name.clear();
    let text = serde_json::to_string(&W(r)).unwrap_or_default();
    let mut h = std::hash::DefaultHasher::new();
    text.hash(&mut h);
    h.finish() & !1
}

impl Engine {
    /// An engine over `graph` (which may already hold allocations of other schedulers).
    pub fn new(graph: ResourceGraph, config: EngineConfig) -> Result<Self, EngineError> {
        let compiled = config.compile("config")?;
        let usage_hist = config.queues.iter().map(|q| (q.name.clone(), QueueUsage::default())).collect();
        let pending = config.queues.iter().map(|q| (q.name.clone(), BTreeMap::new())).collect();
        Ok(Self {
            graph,
            config,
            compiled,
            now: i64::MIN,
            seq: 0,
            next_alloc_id: 1,
            structure_version: 0,
            dirty: true,
            groups: BTreeMap::new(),
            usage_hist,
            namespaces: BTreeMap::new(),
            cordoned: BTreeSet::new(),
            down: BTreeSet::new(),
            external: BTreeMap::new(),
            usage: BTreeMap::new(),
            pending,
            live: BTreeSet::new(),
            graph_alloc: BTreeMap::new(),
            by_graph_alloc: BTreeMap::new(),
            reservations: BTreeMap::new(),
            shapes: BTreeMap::new(),
            elastic: BTreeSet::new(),
            sat_cache: BTreeMap::new(),
            deferred_reshapes: BTreeMap::new(),
            starting: BTreeMap::new(),
            window_held: BTreeMap::new(),
            last_stats: CycleStats::default(),
        })
    }

    pub fn graph(&self) -> &ResourceGraph {
        &self.graph
    }

    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    pub fn group(&self, key: &GroupKey) -> Option<&Group> {
        self.groups.get(key).map(|g| &**g)
    }

    pub fn groups(&self) -> impl Iterator<Item = &Group> {
        self.groups.values().map(|g| &**g)
    }

    /// Admitted usage per queue, by resource name, in base units.
    pub fn usage(&self) -> &Usage {
        &self.usage
    }

    pub fn compiled(&self) -> &Compiled {
        &self.compiled
    }

    pub fn last_cycle(&self) -> CycleStats {
        self.last_stats
    }

    /// The engine's clock: the latest time any input carried.
    pub fn now(&self) -> i64 {
        self.now
    }

    // ----- time and fair share -----

    /// Moves the clock forward (never back) and accrues decayed usage.
    fn advance(&mut self, now: i64) -> i64 {
        if now <= self.now {
            return self.now;
        }
        let h = self.config.fair_share_half_life_s;
        for (q, hist) in &mut self.usage_hist {
            if h > 0 && now > hist.last_update {
                let dt = (now - hist.last_update) as f64;
                let f = (-dt / h as f64).exp2();
                let scale = h as f64 / std::f64::consts::LN_2 * (1.0 - f);
                for v in hist.decayed.values_mut() {
                    *v *= f;
                }
                if let Some(u) = self.usage.get(q) {
                    for (r, amount) in u {
                        *hist.decayed.entry(r.clone()).or_insert(0.0) += *amount as f64 * scale;
                    }
                }
            }
            hist.last_update = now;
        }
        self.now = now;
        now
    }

    /// Adds past usage (resource-seconds at time `at`, e.g. from the store's history) to a queue.
    pub fn add_usage_history(
        &mut self,
        queue: &str,
        resource_seconds: &BTreeMap<String, f64>,
        at: i64,
        now: i64,
    ) -> Result<(), EngineError> {
        let now = self.advance(now);
        if !self.compiled.queues.contains_key(queue) {
            return Err(self.unknown_queue_err(&GroupKey::new("", ""), queue));
        }
        let h = self.config.fair_share_half_life_s;
        let f = if h > 0 { (-((now - at).max(0) as f64) / h as f64).exp2() } else { 0.0 };
        let hist = self.usage_hist.entry(queue.to_string()).or_default();
        for (r, v) in resource_seconds {
            *hist.decayed.entry(r.clone()).or_insert(0.0) += v * f;
        }
        Ok(())
    }

    /// Dominant-resource share of a queue divided by its weight: the largest, over resources, of
    /// (recent average use + current use) / cluster capacity.
    pub fn fair_share(&self, queue: &str) -> f64 {
        let (cap, _) = self.graph.graph.totals();
        let h = self.config.fair_share_half_life_s;
        let weight = self.config.queues[self.compiled.queues[queue].index].fair_share_weight;
        let mut share: f64 = 0.0;
        let mut consider = |r: &str, amount: f64| {
            if r == "pods" {
                return;
            }
            if let Some(id) = self.graph.graph.resources.get(r) {
                let c = cap[id.index()];
                if c > 0 {
                    share = share.max(amount / c as f64);
                }
            }
        };
        let mut amounts: BTreeMap<&str, f64> = BTreeMap::new();
        if let Some(u) = self.usage.get(queue) {
            for (r, a) in u {
                *amounts.entry(r).or_insert(0.0) += *a as f64;
            }
        }
        if h > 0
            && let Some(hist) = self.usage_hist.get(queue)
        {
            for (r, v) in &hist.decayed {
                *amounts.entry(r).or_insert(0.0) += v * std::f64::consts::LN_2 / h as f64;
            }
        }
        for (r, a) in amounts {
            consider(r, a);
        }
        share / weight
    }

    // ----- bookkeeping helpers -----

    fn unknown_queue_err(&self, key: &GroupKey, queue: &str) -> EngineError {
        EngineError::InvalidGroup {
            key: key.clone(),
            field: "queue".into(),
            message: format!(
                "unknown queue {queue:?}; known: {:?}",
                self.config.queues.iter().map(|q| q.name.as_str()).collect::<Vec<_>>()
            ),
        }
    }

    fn queue_cfg(&self, q: &str) -> &crate::config::QueueConfig {
        &self.config.queues[self.compiled.queues[q].index]
    }

    fn pending_key(g: &Group) -> PendingKey {
        PendingKey { neg_priority: -i64::from(g.priority), order_time: g.order_time, seq: g.seq }
    }

    fn add_pending(&mut self, key: &GroupKey) {
        let g = &self.groups[key];
        let pk = Self::pending_key(g);
        self.pending.entry(g.spec.queue.clone()).or_default().insert(pk, key.clone());
    }

    fn remove_pending(&mut self, key: &GroupKey) {
        let g = &self.groups[key];
        let pk = Self::pending_key(g);
        if let Some(p) = self.pending.get_mut(&g.spec.queue) {
            p.remove(&pk);
        }
    }

    /// Records a state change after checking it against the lifecycle.
    fn set_state(
        &mut self,
        key: &GroupKey,
        to: GroupState,
        reason: Reason,
        allocation: Option<AllocationRecord>,
        out: &mut Vec<Transition>,
    ) -> Result<(), EngineError> {
        let g = Arc::make_mut(self.groups.get_mut(key).ok_or_else(|| EngineError::UnknownGroup(key.clone()))?);
        let from = g.state;
        GroupState::transition(from, to)
            .map_err(|source| EngineError::IllegalTransition { key: key.clone(), source })?;
        g.state = to;
        if matches!(to, GroupState::Admitted | GroupState::Running | GroupState::Evicted) {
            self.live.insert(key.clone());
        } else {
            self.live.remove(key);
        }
        out.push(Transition { at: self.now, key: key.clone(), from, to, reason, allocation });
        Ok(())
    }

    /// Internal transitions the engine itself chose: legal by construction.
    fn step(
        &mut self,
        key: &GroupKey,
        to: GroupState,
        reason: Reason,
        allocation: Option<AllocationRecord>,
        out: &mut Vec<Transition>,
    ) {
        self.set_state(key, to, reason, allocation, out).expect("engine-chosen transition is legal");
    }

    fn record_of(&self, id: AllocId, alloc_id: u64) -> AllocationRecord {
        let a = self.graph.allocation(id).expect("allocation exists");
        let g = &self.graph.graph;
        AllocationRecord {
            alloc_id,
            members: a
                .members
                .iter()
                .map(|m| MemberPlacement {
                    index: m.index,
                    node: g.node(m.node).name.clone(),
                    devices: m.devices.iter().map(|&v| g.vertex(v).meta.name.clone()).collect(),
                })
                .collect(),
            start: a.start,
            end: a.end,
        }
    }

    fn add_usage(&mut self, key: &GroupKey, members: u32, sign: i64) {
        let g = &self.groups[key];
        let q = g.spec.queue.clone();
        let amounts = quota::per_member(&g.spec.request);
        let u = self.usage.entry(q).or_default();
        for (r, per) in amounts {
            let delta = per.saturating_mul(u64::from(members));
            let e = u.entry(r).or_insert(0);
            if sign > 0 {
                *e = e.saturating_add(delta);
            } else {
                *e = e.saturating_sub(delta);
            }
        }
    }

    /// Releases a group's allocation (graph and quota); returns the released record.
    fn release(&mut self, key: &GroupKey) -> Option<AllocationRecord> {
        let members = self.groups[key].member_count();
        if let Some(id) = self.graph_alloc.remove(key) {
            self.by_graph_alloc.remove(&id);
            let _ = self.graph.cancel(id);
        }
        self.add_usage(key, members, -1);
        self.dirty = true;
        let g = self.group_mut(key);
        g.ready_members = 0;
        g.not_ready_since = None;
        g.admitted_at = None;
        g.allocation.take()
    }

    fn drop_reservation(&mut self, key: &GroupKey) {
        if let Some(id) = self.reservations.remove(key) {
            let _ = self.graph.cancel(id);
        }
    }

    fn get(&self, key: &GroupKey) -> Result<&Group, EngineError> {
        self.groups.get(key).map(|g| &**g).ok_or_else(|| EngineError::UnknownGroup(key.clone()))
    }

    // ----- inputs -----

    /// Sets the labels of a namespace (for queues' namespace selectors).
    pub fn set_namespace_labels(&mut self, namespace: &str, labels: BTreeMap<String, String>) {
        self.namespaces.insert(namespace.to_string(), labels);
    }

    /// Checks that `namespace` may use `queue`.
    pub fn check_namespace(&self, key: &GroupKey, queue: &str) -> Result<(), EngineError> {
        if !self.compiled.queues.contains_key(queue) {
            return Err(self.unknown_queue_err(key, queue));
        }
        let sel = &self.queue_cfg(queue).namespace_selector;
        if sel.is_empty() {
            return Ok(());
        }
        let mut labels = self.namespaces.get(&key.namespace).cloned().unwrap_or_default();
        labels.insert("kubernetes.io/metadata.name".into(), key.namespace.clone());
        if sel.admits(&key.namespace, &labels) {
            Ok(())
        } else {
            Err(EngineError::InvalidGroup {
                key: key.clone(),
                field: "queue".into(),
                message: format!("queue {queue:?} does not admit namespace {:?} (namespaceSelector)", key.namespace),
            })
        }
    }

    /// Queues a group.
    pub fn submit(&mut self, spec: GroupSpec, now: i64) -> Result<Vec<Transition>, EngineError> {
        let key = spec.key.clone();
        let invalid = |field: &str, message: String| EngineError::InvalidGroup {
            key: key.clone(),
            field: field.to_string(),
            message,
        };
        if self.groups.contains_key(&key) {
            return Err(EngineError::DuplicateGroup(key));
        }
        if key.namespace.is_empty() || key.name.is_empty() {
            return Err(invalid("key", "namespace and name must not be empty".into()));
        }
        self.check_namespace(&key, &spec.queue)?;
        let priority =
            self.config.priority_of(spec.priority_class.as_deref()).map_err(|m| invalid("priorityClass", m))?;
        let r = &spec.request;
        if r.min_members == 0 || r.max_members < r.min_members {
            return Err(invalid(
                "request.members",
                format!("min {} max {}: need 1 <= min <= max", r.min_members, r.max_members),
            ));
        }
        self.advance(now);
        self.seq += 1;
        let g = Group {
            priority,
            state: GroupState::New,
            seq: self.seq,
            order_time: spec.submitted_at,
            allocation: None,
            reserved_at: None,
            admitted_at: None,
            ready_members: 0,
            not_ready_since: None,
            requeues: 0,
            evictions: 0,
            requeue_at: None,
            unsatisfiable: None,
            reason: "not yet considered".into(),
            spec,
        };
        self.index_spec(&key, &g.spec.request);
        self.groups.insert(key.clone(), Arc::new(g));
        let mut out = Vec::new();
        self.step(&key, GroupState::Queued, Reason::Submitted, None, &mut out);
        self.add_pending(&key);
        self.dirty = true;
        Ok(out)
    }

    /// Reports how many members are ready. All ready: Admitted -> Running. A running group that
    /// drops below all-ready starts its recovery timer.
    pub fn pods_ready(&mut self, key: &GroupKey, ready: u32, now: i64) -> Result<Vec<Transition>, EngineError> {
        let g = self.get(key)?;
        let state = g.state;
        if !state.holds_allocation() {
            return Err(EngineError::IllegalTransition {
                key: key.clone(),
                source: IllegalTransition { from: state, to: GroupState::Running },
            });
        }
        let members = g.member_count();
        let recovering = g.not_ready_since.is_some();
        // Members ready leave the start window: room for the groups waiting on it.
        let windowed = self.queue_cfg(&g.spec.queue).readiness.max_starting_members.is_some();
        self.advance(now);
        let ready = ready.min(members);
        let mut out = Vec::new();
        self.group_mut(key).ready_members = ready;
        match state {
            GroupState::Admitted if ready >= members => {
                self.step(key, GroupState::Running, Reason::AllReady, None, &mut out);
                self.dirty |= self.config.block_admission || windowed;
            }
            GroupState::Admitted => self.dirty |= windowed,
            GroupState::Running if ready < members && !recovering => {
                self.group_mut(key).not_ready_since = Some(self.now);
                self.step(key, GroupState::Running, Reason::ReadinessLost, None, &mut out);
            }
            GroupState::Running if ready >= members && recovering => {
                self.group_mut(key).not_ready_since = None;
                self.step(key, GroupState::Running, Reason::AllReady, None, &mut out);
            }
            _ => {}
        }
        Ok(out)
    }

    /// The group's pods finished: releases the allocation.
    pub fn finished(&mut self, key: &GroupKey, succeeded: bool, now: i64) -> Result<Vec<Transition>, EngineError> {
        let to = if succeeded { GroupState::Succeeded } else { GroupState::Failed };
        let state = self.get(key)?.state;
        GroupState::transition(state, to)
            .map_err(|source| EngineError::IllegalTransition { key: key.clone(), source })?;
        self.advance(now);
        let rec = self.release(key);
        let mut out = Vec::new();
        self.step(key, to, Reason::Finished { succeeded }, rec, &mut out);
        Ok(out)
    }

    /// Members of a placed group are gone (pods failed or evicted by the node). An elastic group at
    /// or above its minimum keeps running with fewer; otherwise the whole group is released and
    /// queued again at once (lost members are not the group's fault, so no backoff).
    pub fn members_lost(&mut self, key: &GroupKey, members: &[u32], now: i64) -> Result<Vec<Transition>, EngineError> {
        let g = self.get(key)?;
        if !g.state.holds_allocation() {
            return Err(EngineError::IllegalTransition {
                key: key.clone(),
                source: IllegalTransition { from: g.state, to: GroupState::Evicted },
            });
        }
        let alloc = g.allocation.as_ref().expect("placed group has an allocation");
        for &m in members {
            if !alloc.members.iter().any(|x| x.index == m) {
                return Err(EngineError::UnknownMember { key: key.clone(), member: m });
            }
        }
        self.advance(now);
        let lost: BTreeSet<u32> = members.iter().copied().collect();
        let mut out = Vec::new();
        let id = self.graph_alloc[key];
        self.lose_members(key, id, &lost, false, &mut out);
        Ok(out)
    }

    /// Shared by `members_lost` and `node_removed` (where the graph already dropped them).
    fn lose_members(
        &mut self,
        key: &GroupKey,
        id: AllocId,
        lost: &BTreeSet<u32>,
        already_dropped: bool,
        out: &mut Vec<Transition>,
    ) {
        let g = &self.groups[key];
        let remaining = g.member_count() - lost.len() as u32;
        let state = g.state;
        let min = g.spec.request.min_members;
        let alloc_id = g.allocation.as_ref().map_or(0, |a| a.alloc_id);
        let members: Vec<u32> = lost.iter().copied().collect();
        if remaining >= min && remaining > 0 {
            if !already_dropped {
                self.graph.shrink(id, &members).expect("members checked");
            }
            self.add_usage(key, lost.len() as u32, -1);
            let rec = self.record_of(id, alloc_id);
            let g = self.group_mut(key);
            g.allocation = Some(rec.clone());
            g.ready_members = g.ready_members.min(remaining);
            self.dirty = true;
            self.step(key, state, Reason::Shrunk { members }, Some(rec), out);
            return;
        }
        if already_dropped {
            // The graph removed these members; make the record agree before releasing the rest.
            let g = self.group_mut(key);
            if let Some(a) = g.allocation.as_mut() {
                a.members.retain(|m| !lost.contains(&m.index));
            }
            self.add_usage(key, lost.len() as u32, -1);
            if self.graph.allocation(id).is_err() {
                self.graph_alloc.remove(key);
                self.by_graph_alloc.remove(&id);
            }
        }
        let rec = self.release(key);
        let g = self.group_mut(key);
        g.evictions += 1;
        self.step(key, GroupState::Evicted, Reason::MembersLost { members }, rec, out);
        self.requeue_now(key, out);
    }

    fn requeue_now(&mut self, key: &GroupKey, out: &mut Vec<Transition>) {
        let g = self.group_mut(key);
        g.requeue_at = None;
        self.step(key, GroupState::Queued, Reason::Requeued, None, out);
        self.add_pending(key);
    }

    /// Holds a group: a pending one leaves the queue, a placed one is released.
    pub fn suspend(&mut self, key: &GroupKey, now: i64) -> Result<Vec<Transition>, EngineError> {
        self.move_out(key, GroupState::Suspended, Reason::Suspended, now)
    }

    /// Moves a group from wherever it is to `to` (Suspended or Deleted), releasing what it holds.
    fn move_out(
        &mut self,
        key: &GroupKey,
        to: GroupState,
        reason: Reason,
        now: i64,
    ) -> Result<Vec<Transition>, EngineError> {
        let state = self.get(key)?.state;
        GroupState::transition(state, to)
            .map_err(|source| EngineError::IllegalTransition { key: key.clone(), source })?;
        self.advance(now);
        let mut out = Vec::new();
        let rec = self.leave(key, state);
        self.step(key, to, reason, rec, &mut out);
        Ok(out)
    }

    /// Takes a group out of wherever it is (pending set, reservation, allocation).
    fn leave(&mut self, key: &GroupKey, state: GroupState) -> Option<AllocationRecord> {
        if state.is_pending() {
            self.remove_pending(key);
            self.drop_reservation(key);
            self.group_mut(key).reserved_at = None;
            self.dirty = true;
        }
        let g = self.group_mut(key);
        g.requeue_at = None;
        if state.holds_allocation() { self.release(key) } else { None }
    }

    /// Queues a suspended or deactivated group again (a deactivated one starts a fresh backoff).
    pub fn resume(&mut self, key: &GroupKey, now: i64) -> Result<Vec<Transition>, EngineError> {
        let state = self.get(key)?.state;
        if !matches!(state, GroupState::Suspended | GroupState::Deactivated) {
            return Err(EngineError::IllegalTransition {
                key: key.clone(),
                source: IllegalTransition { from: state, to: GroupState::Queued },
            });
        }
        self.advance(now);
        let g = self.group_mut(key);
        if state == GroupState::Deactivated {
            g.requeues = 0;
        }
        g.unsatisfiable = None;
        let mut out = Vec::new();
        self.step(key, GroupState::Queued, Reason::Resumed, None, &mut out);
        self.add_pending(key);
        self.dirty = true;
        Ok(out)
    }

    /// Deletes a group in any state; releases what it holds and forgets it.
    pub fn delete(&mut self, key: &GroupKey, now: i64) -> Result<Vec<Transition>, EngineError> {
        let out = self.move_out(key, GroupState::Deleted, Reason::Deleted, now)?;
        self.groups.remove(key);
        self.shapes.remove(key);
        self.elastic.remove(key);
        Ok(out)
    }

    // ----- nodes -----

    pub fn node_added(&mut self, spec: &NodeSpec, now: i64) -> Result<Vec<Transition>, EngineError> {
        self.advance(now);
        self.graph.add_node(spec)?;
        self.structure_changed();
        Ok(Vec::new())
    }

    /// A node left: members on it are lost (see `members_lost`).
    pub fn node_removed(&mut self, name: &str, now: i64) -> Result<Vec<Transition>, EngineError> {
        self.advance(now);
        let affected = self.graph.remove_node(name)?;
        self.external.retain(|_, (h, _)| h.node != name);
        self.cordoned.remove(name);
        self.down.remove(name);
        self.deferred_reshapes.remove(name);
        self.structure_changed();
        let mut out = Vec::new();
        for (id, lost) in affected {
            if let Some(key) = self.by_graph_alloc.get(&id).cloned() {
                let lost: BTreeSet<u32> = lost.into_iter().collect();
                self.lose_members(&key, id, &lost, true, &mut out);
            }
            // Reservations on the node are recomputed in the next cycle.
        }
        Ok(out)
    }

    /// A node's labels, taints, capacity or topology changed (see [`ResourceGraph::update_node`]).
    /// Running groups stay where they are; what placement reads changes at once, except a new
    /// topology place or resource set, which each cycle applies once nothing runs on the node.
    pub fn node_changed(&mut self, spec: &NodeSpec, now: i64) -> Result<Vec<Transition>, EngineError> {
        self.advance(now);
        self.deferred_reshapes.remove(&spec.name);
        if self.graph.update_node(spec)? == NodeUpdate::ShapeDeferred {
            self.deferred_reshapes.insert(spec.name.clone(), spec.clone());
        }
        if spec.unschedulable {
            self.cordoned.insert(spec.name.clone());
        } else {
            self.cordoned.remove(&spec.name);
        }
        self.structure_changed();
        Ok(Vec::new())
    }

    /// Rebuilds the nodes whose deferred new shape can now be applied.
    fn apply_deferred_reshapes(&mut self) {
        let specs: Vec<NodeSpec> = self.deferred_reshapes.values().cloned().collect();
        for spec in specs {
            // An error here means the node is gone, which its removal handles.
            if !matches!(self.graph.update_node(&spec), Ok(NodeUpdate::ShapeDeferred)) {
                self.deferred_reshapes.remove(&spec.name);
                self.structure_changed();
            }
        }
    }

    /// Nodes were added, removed or reshaped: cached satisfiability no longer holds.
    fn structure_changed(&mut self) {
        self.structure_version += 1;
        self.sat_cache.clear();
        self.dirty = true;
    }

    pub fn node_cordoned(&mut self, name: &str, cordoned: bool, now: i64) -> Result<Vec<Transition>, EngineError> {
        self.advance(now);
        self.graph.set_unschedulable(name, cordoned)?;
        if cordoned {
            self.cordoned.insert(name.to_string());
        } else {
            self.cordoned.remove(name);
        }
        self.dirty = true;
        Ok(Vec::new())
    }

    pub fn node_up(&mut self, name: &str, up: bool, now: i64) -> Result<Vec<Transition>, EngineError> {
        self.advance(now);
        self.graph.set_up(name, up)?;
        if up {
            self.down.remove(name);
        } else {
            self.down.insert(name.to_string());
        }
        self.dirty = true;
        Ok(Vec::new())
    }

    /// A pod the engine did not place (another scheduler's) uses capacity on `node`; `id` names it
    /// for [`Engine::vacate`]. Idempotent for an unchanged pod. Counted even where the graph saw
    /// no room (the pod is there; the node then has nothing free until enough of it ends), so a
    /// group released in the same batch never hands that room to another group. Errors, changing
    /// nothing, only when the node is unknown (the caller retries once the node is known).
    pub fn occupy(
        &mut self,
        id: &str,
        node: &str,
        requests: &[(String, u64)],
        now: i64,
    ) -> Result<Vec<Transition>, EngineError> {
        self.advance(now);
        let hold = ExternalHold { node: node.to_string(), requests: requests.to_vec() };
        if self.external.get(id).is_some_and(|(h, _)| *h == hold) {
            return Ok(Vec::new());
        }
        // Hold first: on an unknown node nothing changes, not even the pod's old hold.
        let alloc = self.graph.hold(node, requests, now)?;
        // A changed pod (resized, or moved by a restart of its scheduler) replaces its old hold.
        if let Some((_, old)) = self.external.insert(id.to_string(), (hold, alloc)) {
            self.graph.cancel(old)?;
        }
        self.dirty = true;
        Ok(Vec::new())
    }

    /// The pod `id` of [`Engine::occupy`] is gone (or finished): its capacity is free again.
    /// Unknown ids are ignored (the node may have left with it).
    pub fn vacate(&mut self, id: &str, now: i64) -> Result<Vec<Transition>, EngineError> {
        self.advance(now);
        if let Some((_, alloc)) = self.external.remove(id) {
            self.graph.cancel(alloc)?;
            self.dirty = true;
        }
        Ok(Vec::new())
    }

    /// Pods of other schedulers the engine counts, by id.
    pub fn external(&self) -> impl Iterator<Item = (&String, &ExternalHold)> {
        self.external.iter().map(|(id, (h, _))| (id, h))
    }

    // ----- the cycle -----

    /// A group to change: copied first if a copy of the engine still shares it (see `groups`).
    fn group_mut(&mut self, key: &GroupKey) -> &mut Group {
        Arc::make_mut(self.groups.get_mut(key).expect("exists"))
    }

    /// Rewritten every cycle for every waiting group, but mostly to the same text: only a new
    /// text copies the group (see `groups`).
    fn set_reason(&mut self, key: &GroupKey, reason: String) {
        let g = self.groups.get_mut(key).expect("exists");
        if g.reason != reason {
            Arc::make_mut(g).reason = reason;
        }
    }

    /// The groups in `live`, found by state in one pass over all groups: cheaper than looking
    /// each one up by its key (string comparisons) when thousands run.
    fn live_groups(&self) -> impl Iterator<Item = (&GroupKey, &Group)> {
        self.groups
            .iter()
            .filter(|(_, g)| matches!(g.state, GroupState::Admitted | GroupState::Running | GroupState::Evicted))
            .map(|(k, g)| (k, &**g))
    }

    /// Expires readiness and recovery timeouts and backoffs.
    fn expire_timers(&mut self, out: &mut Vec<Transition>) {
        let now = self.now;
        let keys: Vec<GroupKey> = self.live_groups().map(|(k, _)| k.clone()).collect();
        for key in keys {
            let g = &self.groups[&key];
            let r = &self.queue_cfg(&g.spec.queue).readiness;
            match g.state {
                GroupState::Admitted => {
                    if let (Some(t), Some(a)) = (r.timeout_s, g.admitted_at)
                        && now >= a.saturating_add(t)
                    {
                        self.timeout(&key, false, out);
                    }
                }
                GroupState::Running => {
                    if let (Some(t), Some(s)) = (r.recovery_timeout_s, g.not_ready_since)
                        && now >= s.saturating_add(t)
                    {
                        self.timeout(&key, true, out);
                    }
                }
                GroupState::Evicted if g.requeue_at.is_some_and(|t| now >= t) => {
                    let g = self.group_mut(&key);
                    g.requeue_at = None;
                    self.step(&key, GroupState::Queued, Reason::BackoffExpired, None, out);
                    self.add_pending(&key);
                    self.dirty = true;
                }
                _ => {}
            }
        }
    }

    /// A readiness (or recovery) timeout: release, then requeue after backoff or deactivate.
    fn timeout(&mut self, key: &GroupKey, recovery: bool, out: &mut Vec<Transition>) {
        let now = self.now;
        let rcfg = self.queue_cfg(&self.groups[key].spec.queue).readiness.clone();
        let rec = self.release(key);
        let g = self.group_mut(key);
        g.evictions += 1;
        let over_limit = rcfg.backoff_limit.is_some_and(|l| g.requeues >= l);
        if over_limit {
            let requeues = g.requeues;
            let reason = if recovery {
                Reason::RecoveryTimeout { requeue_at: now, requeues }
            } else {
                Reason::PodsReadyTimeout { requeue_at: now, requeues }
            };
            self.step(key, GroupState::Evicted, reason, rec, out);
            self.step(key, GroupState::Deactivated, Reason::BackoffLimitExceeded { requeues }, None, out);
            return;
        }
        g.requeues += 1;
        let requeues = g.requeues;
        let requeue_at = now.saturating_add(rcfg.backoff(requeues));
        g.requeue_at = Some(requeue_at);
        if rcfg.requeue_order == RequeueOrder::Eviction {
            g.order_time = now;
        }
        let reason = if recovery {
            Reason::RecoveryTimeout { requeue_at, requeues }
        } else {
            Reason::PodsReadyTimeout { requeue_at, requeues }
        };
        self.step(key, GroupState::Evicted, reason, rec, out);
    }

    /// The earliest time (seconds) at which a timer fires: a readiness or recovery timeout, the end
    /// of a backoff, a reservation's start, an elastic group's wait for max. A driver with nothing
    /// else to report may sleep until then.
    pub fn next_timer(&self) -> Option<i64> {
        let live = self.live_groups().filter_map(|(_, g)| {
            let r = &self.queue_cfg(&g.spec.queue).readiness;
            match g.state {
                GroupState::Admitted => r.timeout_s.zip(g.admitted_at).map(|(t, a)| a.saturating_add(t)),
                GroupState::Running => r.recovery_timeout_s.zip(g.not_ready_since).map(|(t, s)| s.saturating_add(t)),
                GroupState::Evicted => g.requeue_at,
                _ => None,
            }
        });
        let reserved = self.reservations.keys().filter_map(|k| self.groups[k].reserved_at);
        let elastic = self
            .pending
            .iter()
            .map(|(q, p)| (self.queue_cfg(q).elastic_max_wait_s, p))
            .filter(|(wait, _)| *wait > 0)
            .flat_map(|(wait, p)| {
                p.values().filter_map(move |k| {
                    let g = &self.groups[k];
                    (g.spec.request.min_members < g.spec.request.max_members)
                        .then(|| g.spec.submitted_at.saturating_add(wait))
                })
            });
        live.chain(reserved).chain(elastic).filter(|&t| t > self.now).min()
    }

    /// True if a time-driven event (a reservation's start, an elastic group's wait) is due.
    fn timer_due(&self) -> bool {
        let now = self.now;
        self.groups.values().any(|g| g.state == GroupState::Reserved && g.reserved_at.is_some_and(|t| t <= now))
            || self.pending.iter().any(|(q, p)| {
                let wait = self.queue_cfg(q).elastic_max_wait_s;
                wait > 0
                    && p.values().any(|k| {
                        let g = &self.groups[k];
                        g.spec.request.min_members < g.spec.request.max_members
                            && g.spec.submitted_at.saturating_add(wait) <= now
                            && g.reason.starts_with("elastic:")
                    })
            })
    }

    /// One scheduling cycle at `now`: expire timers, then for each queue admit what fits by
    /// policy, reserve for blocked heads, backfill, preempt where allowed, grow elastic groups.
    pub fn schedule(&mut self, now: i64) -> Vec<Transition> {
        self.advance(now);
        let mut out = Vec::new();
        self.last_stats = CycleStats::default();
        self.expire_timers(&mut out);
        if !self.deferred_reshapes.is_empty() {
            self.apply_deferred_reshapes();
        }
        if !self.dirty && !self.timer_due() {
            return out;
        }
        if self.config.block_admission
            && let Some(k) = self.groups.values().find(|g| g.state == GroupState::Admitted).map(|g| g.spec.key.clone())
        {
            self.mark_blocked_heads(&k);
            self.dirty = false;
            return out;
        }
        self.dirty = false;
        self.last_stats.ran = true;
        let old_reserved: BTreeMap<GroupKey, i64> = self
            .groups
            .values()
            .filter(|g| g.state == GroupState::Reserved)
            .map(|g| (g.spec.key.clone(), g.reserved_at.unwrap_or(0)))
            .collect();
        for (_, id) in std::mem::take(&mut self.reservations) {
            let _ = self.graph.cancel(id);
        }
        let mut new_reserved: BTreeMap<GroupKey, i64> = BTreeMap::new();
        self.cycle(&mut out, &mut new_reserved);
        for (key, old_at) in old_reserved {
            let Some(g) = self.groups.get(&key) else { continue };
            if g.state != GroupState::Reserved {
                continue;
            }
            match new_reserved.get(&key) {
                Some(&at) if at != old_at => {
                    self.step(&key, GroupState::Reserved, Reason::Reserved { at }, None, &mut out);
                }
                Some(_) => {}
                None => {
                    self.group_mut(&key).reserved_at = None;
                    self.step(&key, GroupState::Queued, Reason::ReservationDropped, None, &mut out);
                }
            }
        }
        self.grow_elastic(&mut out);
        out
    }

    /// blockAdmission: the head of every queue waits for `k` to be ready.
    fn mark_blocked_heads(&mut self, k: &GroupKey) {
        let msg = format!("blockAdmission: waiting for {k} to have all members ready before admitting another group");
        let heads: Vec<GroupKey> = self.pending.values().filter_map(|p| p.values().next().cloned()).collect();
        for h in heads {
            self.set_reason(&h, msg.clone());
        }
    }

    /// The merge of all queues in global order: priority, then fair share, then order time.
    fn cycle(&mut self, out: &mut Vec<Transition>, new_reserved: &mut BTreeMap<GroupKey, i64>) {
        #[derive(Clone, Copy, PartialEq)]
        struct Share(f64);
        impl Eq for Share {}
        impl PartialOrd for Share {
            fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
                Some(self.cmp(o))
            }
        }
        impl Ord for Share {
            fn cmp(&self, o: &Self) -> Ordering {
                self.0.total_cmp(&o.0)
            }
        }
        struct Cursor {
            last: Option<PendingKey>,
            blocked: bool,
            reservations: u32,
            first_blocked: Option<GroupKey>,
        }
        self.count_starting();
        let queue_names: Vec<String> = self.config.queues.iter().map(|q| q.name.clone()).collect();
        let mut cursors: Vec<Cursor> = queue_names
            .iter()
            .map(|_| Cursor { last: None, blocked: false, reservations: 0, first_blocked: None })
            .collect();
        let mut heads: BTreeSet<(i64, Share, i64, u64, usize)> = BTreeSet::new();
        let next_of = |this: &Self, qi: usize, last: Option<PendingKey>| -> Option<PendingKey> {
            let p = &this.pending[&queue_names[qi]];
            match last {
                None => p.keys().next().copied(),
                Some(l) => p.range((Bound::Excluded(l), Bound::Unbounded)).next().map(|(k, _)| *k),
            }
        };
        for (qi, name) in queue_names.iter().enumerate() {
            if let Some(pk) = next_of(self, qi, None) {
                let share = Share(self.fair_share(name));
                heads.insert((pk.neg_priority, share, pk.order_time, pk.seq, qi));
            }
        }
        let mut failed_shapes: BTreeSet<(u64, u32, u32)> = BTreeSet::new();
        let mut backfill_budget = self.config.backfill_attempts_per_cycle;
        let mut preempt_budget = self.config.preemption_attempts_per_cycle;
        let mut any_reservation = false;
        while let Some(head) = heads.pop_first() {
            let qi = head.4;
            let q = queue_names[qi].clone();
            let pk = PendingKey { neg_priority: head.0, order_time: head.2, seq: head.3 };
            cursors[qi].last = Some(pk);
            let Some(key) = self.pending[&q].get(&pk).cloned() else { continue };
            let policy = self.queue_cfg(&q).policy;
            let is_backfill = cursors[qi].blocked;
            let mut stop_queue = false;
            let mut window_full = false;
            if is_backfill {
                if backfill_budget == 0 {
                    stop_queue = true;
                } else {
                    backfill_budget -= 1;
                }
            }
            if !stop_queue {
                self.last_stats.examined += 1;
                let depth_left = cursors[qi].reservations < policy.reservation_depth();
                let attempt = self.attempt(
                    &key,
                    depth_left,
                    any_reservation,
                    &mut failed_shapes,
                    &mut preempt_budget,
                    out,
                    new_reserved,
                );
                match attempt {
                    Attempt::Admitted => {
                        if self.config.block_admission {
                            // One group at a time: nothing else this cycle.
                            self.last_stats.admitted += 1;
                            self.mark_blocked_heads(&key);
                            break;
                        }
                        self.last_stats.admitted += 1;
                    }
                    Attempt::Reserved => {
                        cursors[qi].reservations += 1;
                        any_reservation = true;
                        self.last_stats.reserved += 1;
                        cursors[qi].blocked = true;
                        cursors[qi].first_blocked.get_or_insert(key.clone());
                        if policy == QueuePolicy::StrictFifo {
                            stop_queue = true;
                        }
                    }
                    Attempt::Blocked => {
                        cursors[qi].blocked = true;
                        cursors[qi].first_blocked.get_or_insert(key.clone());
                        if policy == QueuePolicy::StrictFifo {
                            stop_queue = true;
                        }
                    }
                    Attempt::WindowFull => {
                        self.window_held.insert(q.clone(), pk);
                        cursors[qi].blocked = true;
                        cursors[qi].first_blocked.get_or_insert(key.clone());
                        window_full = true;
                        stop_queue = true;
                    }
                    Attempt::Skipped => {}
                }
            }
            if stop_queue {
                // Everything behind stays where it is; explanations derive their reason.
                if let Some(fb) = cursors[qi].first_blocked.clone() {
                    let mut n = 0;
                    let behind: Vec<GroupKey> = self.pending[&q]
                        .range((Bound::Excluded(pk), Bound::Unbounded))
                        .map(|(_, k)| k.clone())
                        .take(self.config.estimate_depth)
                        .collect();
                    for k in behind {
                        n += 1;
                        if self.groups[&k].unsatisfiable.is_none() {
                            let reason = if window_full {
                                // The group the window held, not an earlier one blocked otherwise.
                                format!("waiting behind {key} for the start window of queue {q}")
                            } else if policy == QueuePolicy::StrictFifo {
                                format!("waiting behind {fb} (queue {q} is strict FIFO)")
                            } else {
                                format!("waiting behind {fb}; not tried this cycle (backfill attempts used up)")
                            };
                            self.set_reason(&k, reason);
                        }
                    }
                    let _ = n;
                }
                continue;
            }
            if let Some(nk) = next_of(self, qi, Some(pk)) {
                let share = Share(self.fair_share(&q));
                heads.insert((nk.neg_priority, share, nk.order_time, nk.seq, qi));
            }
        }
    }

    /// Counts the members admitted and not yet ready per queue with a start window.
    fn count_starting(&mut self) {
        self.starting.clear();
        self.window_held.clear();
        if self.config.queues.iter().all(|q| q.readiness.max_starting_members.is_none()) {
            return;
        }
        for k in &self.live {
            let g = &self.groups[k];
            if g.state == GroupState::Admitted {
                *self.starting.entry(g.spec.queue.clone()).or_default() +=
                    g.member_count().saturating_sub(g.ready_members);
            }
        }
    }

    /// The member count an elastic group asks for now: all of max while it waits for max.
    fn effective_min(&self, g: &Group) -> u32 {
        let r = &g.spec.request;
        let wait = self.queue_cfg(&g.spec.queue).elastic_max_wait_s;
        if r.min_members < r.max_members && wait > 0 && self.now < g.spec.submitted_at.saturating_add(wait) {
            r.max_members
        } else {
            r.min_members
        }
    }

    /// Necessary condition for a fit now, from the cluster's aggregates (cheap).
    fn may_fit_now(&self, req: &GroupRequest) -> Result<(), String> {
        let g = &self.graph.graph;
        let (_, free) = g.totals();
        let root = g.domain(g.root_domain);
        for (r, per) in quota::per_member(req) {
            let Some(id) = g.resources.get(&r) else { continue };
            let i = id.index();
            let need = per.saturating_mul(u64::from(req.min_members));
            if need > free[i] {
                return Err(format!(
                    "needs {} {r} in all, {} is free",
                    g.resources.format(id, need),
                    g.resources.format(id, free[i])
                ));
            }
            if per > root.max_free[i] {
                return Err(format!(
                    "each member needs {} {r}; no schedulable node has that much free now",
                    g.resources.format(id, per)
                ));
            }
        }
        Ok(())
    }

    /// Satisfiability of a request on the empty cluster, cached per shape and graph structure.
    fn satisfiable(&mut self, shape: u64, req: &GroupRequest) -> Result<(), String> {
        let k = (shape, req.min_members);
        if let Some(r) = self.sat_cache.get(&k) {
            return r.clone();
        }
        self.last_stats.match_calls += 1;
        let r = self.graph.satisfiability(req);
        self.sat_cache.insert(k, r.clone());
        r
    }

    fn mark_unsatisfiable(&mut self, key: &GroupKey, message: String, out: &mut Vec<Transition>) {
        let v = self.structure_version;
        let g = self.group_mut(key);
        let known = g.unsatisfiable.as_ref().is_some_and(|(m, _)| *m == message);
        g.unsatisfiable = Some((message.clone(), v));
        g.reason = format!("unsatisfiable: {message}");
        if !known {
            let state = g.state;
            self.step(key, state, Reason::Unsatisfiable { message }, None, out);
        }
    }

    /// Tries one pending group: quota, placement now, preemption, reservation.
    #[allow(clippy::too_many_arguments)]
    fn attempt(
        &mut self,
        key: &GroupKey,
        may_reserve: bool,
        behind_reservation: bool,
        failed_shapes: &mut BTreeSet<(u64, u32, u32)>,
        preempt_budget: &mut usize,
        out: &mut Vec<Transition>,
        new_reserved: &mut BTreeMap<GroupKey, i64>,
    ) -> Attempt {
        let g = &self.groups[key];
        // Unsatisfiable: decided once per graph structure version, never retried in between.
        if g.unsatisfiable.as_ref().is_some_and(|(_, v)| *v == self.structure_version) {
            return Attempt::Skipped;
        }
        let shape = self.shapes[key];
        let request = g.spec.request.clone();
        let q = g.spec.queue.clone();
        let submitted_at = g.spec.submitted_at;
        let had_unsat = g.unsatisfiable.is_some();
        match self.satisfiable(shape, &request) {
            Err(message) => {
                self.mark_unsatisfiable(key, message, out);
                return Attempt::Skipped;
            }
            Ok(()) if had_unsat => self.group_mut(key).unsatisfiable = None,
            Ok(()) => {}
        }
        let mut eff_min = self.effective_min(&self.groups[key]);
        if eff_min > request.min_members {
            // Waiting for max makes sense only if max could ever fit.
            let mut full = request.clone();
            full.min_members = full.max_members;
            if self.satisfiable(shape ^ 1, &full).is_err() {
                eff_min = request.min_members;
            }
        }
        let waiting_max = eff_min > request.min_members;
        let window = self.queue_cfg(&q).readiness.max_starting_members;
        let starting = self.starting.get(&q).copied().unwrap_or(0);
        if let Some(limit) = window
            && starting > 0
            && starting.saturating_add(eff_min) > limit
        {
            self.set_reason(
                key,
                format!(
                    "start window: {starting} members of queue {q} are starting \
                     (readiness.maxStartingMembers {limit}); waiting for them to be ready"
                ),
            );
            return Attempt::WindowFull;
        }
        let amounts = quota::per_member(&request);
        let (qmax, qreason) = {
            let resources = &self.graph.graph.resources;
            let fmt = |r: &str, a: u64| match resources.get(r) {
                Some(id) => resources.format(id, a),
                None => match muster_graph::resources::unit_of(r) {
                    Ok(u) => muster_graph::quantity::format_amount(a, u),
                    Err(_) => a.to_string(),
                },
            };
            quota::max_members(&self.compiled, &self.usage, &q, &amounts, request.max_members, &fmt)
        };
        let mut req = request.clone();
        req.min_members = eff_min;
        if qmax < eff_min {
            let reason = qreason.unwrap_or_else(|| "quota".into());
            if *preempt_budget > 0
                && let Some(a) = self.try_preempt(key, &req, out, preempt_budget)
            {
                failed_shapes.clear();
                return a;
            }
            self.set_reason(key, reason);
            return Attempt::Blocked;
        }
        req.max_members = qmax.max(eff_min);
        if let Some(limit) = window {
            req.max_members = req.max_members.min(limit.saturating_sub(starting).max(eff_min));
        }
        let shape_key = (shape, req.min_members, req.max_members);
        let mut busy = if failed_shapes.contains(&shape_key) {
            Some("a group of the same shape ahead of it did not fit".to_string())
        } else {
            self.may_fit_now(&req).err()
        };
        if busy.is_none() {
            self.last_stats.match_calls += 1;
            match self.graph.allocate(&req, self.now) {
                MatchOutcome::Allocated(id) => {
                    self.admit(key, id, Reason::Admitted { backfill: behind_reservation }, out);
                    return Attempt::Admitted;
                }
                MatchOutcome::Unsatisfiable(message) => {
                    self.mark_unsatisfiable(key, message, out);
                    return Attempt::Skipped;
                }
                MatchOutcome::Busy(r) => busy = Some(r),
                MatchOutcome::Reserved { id, .. } => {
                    let _ = self.graph.cancel(id);
                    busy = Some("busy".into());
                }
            }
            failed_shapes.insert(shape_key);
        }
        let busy = busy.unwrap_or_default();
        if *preempt_budget > 0
            && let Some(a) = self.try_preempt(key, &req, out, preempt_budget)
        {
            failed_shapes.clear();
            return a;
        }
        let prefix = if waiting_max {
            let until = submitted_at + self.queue_cfg(&q).elastic_max_wait_s;
            format!("elastic: waiting until {until} for all {} members; ", req.min_members)
        } else {
            String::new()
        };
        if may_reserve {
            self.last_stats.match_calls += 1;
            match self.graph.reserve(&req, self.now) {
                MatchOutcome::Reserved { id, at } => {
                    self.reservations.insert(key.clone(), id);
                    new_reserved.insert(key.clone(), at);
                    let g = self.group_mut(key);
                    let prev = g.state;
                    g.reserved_at = Some(at);
                    g.reason = format!("{prefix}waiting for capacity ({busy}); reserved to start at {at}");
                    if prev == GroupState::Queued {
                        self.step(key, GroupState::Reserved, Reason::Reserved { at }, None, out);
                    }
                    return Attempt::Reserved;
                }
                MatchOutcome::Allocated(id) => {
                    self.admit(key, id, Reason::Admitted { backfill: behind_reservation }, out);
                    return Attempt::Admitted;
                }
                MatchOutcome::Busy(r) => {
                    self.set_reason(key, format!("{prefix}waiting for capacity: {r}"));
                    return Attempt::Blocked;
                }
                MatchOutcome::Unsatisfiable(m) => {
                    self.set_reason(key, format!("{prefix}unsatisfiable now: {m}"));
                    return Attempt::Blocked;
                }
            }
        }
        let depth = self.queue_cfg(&q).policy.reservation_depth();
        let tail = if depth == 0 {
            String::new()
        } else {
            format!("; beyond the reservation depth {depth}, so it can only backfill")
        };
        self.set_reason(key, format!("{prefix}waiting for capacity: {busy}{tail}"));
        Attempt::Blocked
    }

    /// Places a group: records the allocation, moves it to Admitted.
    fn admit(&mut self, key: &GroupKey, id: AllocId, reason: Reason, out: &mut Vec<Transition>) {
        // The matcher was given a narrowed request (quota cap, waiting for max); the allocation
        // must carry the group's own request so it can grow to its real max later, exactly as an
        // allocation imported on restore does.
        let spec_req = &self.groups[key].spec.request;
        if self.graph.allocation(id).is_ok_and(|a| a.request != *spec_req) {
            let spec_req = spec_req.clone();
            let saved = self.saved_alloc(id);
            let _ = self.graph.cancel(id);
            self.graph.import(id, &spec_req, &saved.members, saved.start).expect("same placement fits again");
        }
        self.remove_pending(key);
        if let Some(rid) = self.reservations.remove(key) {
            let _ = self.graph.cancel(rid);
        }
        let alloc_id = self.next_alloc_id;
        self.next_alloc_id += 1;
        let rec = self.record_of(id, alloc_id);
        let members = rec.members.len() as u32;
        self.graph_alloc.insert(key.clone(), id);
        self.by_graph_alloc.insert(id, key.clone());
        let now = self.now;
        let g = self.group_mut(key);
        g.allocation = Some(rec.clone());
        g.admitted_at = Some(now);
        g.reserved_at = None;
        g.ready_members = 0;
        g.not_ready_since = None;
        g.reason = String::new();
        let queue = g.spec.queue.clone();
        *self.starting.entry(queue).or_default() += members;
        self.add_usage(key, members, 1);
        self.step(key, GroupState::Admitted, reason, Some(rec), out);
    }

    /// Gang-aware preemption: evict whole lower-priority groups of the same queue and/or groups
    /// borrowing in the cohort, the fewest that let `key` fit; admits `key` on success.
    fn try_preempt(
        &mut self,
        key: &GroupKey,
        req: &GroupRequest,
        out: &mut Vec<Transition>,
        budget: &mut usize,
    ) -> Option<Attempt> {
        let g = &self.groups[key];
        let q = g.spec.queue.clone();
        let cfg = self.queue_cfg(&q).preemption;
        if cfg.within_queue == WithinQueue::Never && !cfg.reclaim_within_cohort {
            return None;
        }
        let prio = g.priority;
        let amounts = quota::per_member(&g.spec.request);
        let root = self.compiled.queues[&q].root_cohort.clone();
        let can_reclaim = cfg.reclaim_within_cohort
            && root.is_some()
            && quota::within_nominal(&self.compiled, &self.usage, &q, &amounts, req.min_members);
        // Candidates: borrowers of other queues first, then lowest priority, fewest members, most
        // recently admitted (least work lost), key.
        let mut cands: Vec<(bool, i32, u32, i64, GroupKey, bool)> = Vec::new();
        for k in &self.live {
            let v = &self.groups[k];
            if !v.state.holds_allocation() || !self.graph_alloc.contains_key(k) {
                continue;
            }
            let entry = |reclaim: bool| {
                (!reclaim, v.priority, v.member_count(), -v.admitted_at.unwrap_or(0), k.clone(), reclaim)
            };
            if v.spec.queue == q {
                if cfg.within_queue == WithinQueue::LowerPriority && v.priority < prio {
                    cands.push(entry(false));
                }
            } else if can_reclaim
                && self.compiled.queues[&v.spec.queue].root_cohort == root
                && quota::borrows(&self.compiled, &self.usage, &v.spec.queue, &amounts)
            {
                cands.push(entry(true));
            }
        }
        if cands.is_empty() {
            return None;
        }
        *budget -= 1;
        cands.sort();
        cands.truncate(256);
        // One victim is the smallest set: try each candidate alone first (best first).
        let mut victims: Vec<(GroupKey, bool)> = Vec::new();
        for (.., vk, reclaim) in cands.iter().take(64) {
            let saved = self.take_out(vk);
            let ok = self.fits_now(key, req);
            self.put_back(vk, saved);
            if ok {
                self.take_out(vk);
                victims.push((vk.clone(), *reclaim));
                break;
            }
        }
        if victims.is_empty() {
            // Take candidates away in order until the group fits...
            let mut removed: Vec<(GroupKey, SavedAlloc, bool)> = Vec::new();
            let mut fits = false;
            for (.., vk, reclaim) in &cands {
                let saved = self.take_out(vk);
                removed.push((vk.clone(), saved, *reclaim));
                if self.fits_now(key, req) {
                    fits = true;
                    break;
                }
            }
            if !fits {
                for (vk, saved, _) in removed.into_iter().rev() {
                    self.put_back(&vk, saved);
                }
                return None;
            }
            // ...then give back every victim the group can do without, latest taken first.
            let last = removed.len() - 1;
            for (i, (vk, saved, reclaim)) in removed.into_iter().enumerate().rev() {
                if i < last {
                    self.put_back(&vk, saved);
                    if self.fits_now(key, req) {
                        continue;
                    }
                    self.take_out(&vk);
                }
                victims.push((vk, reclaim));
            }
        }
        victims.sort();
        // Commit: evict the victims (already out of the graph and quota), then admit.
        for (vk, reclaim) in &victims {
            let rec = self.group_mut(vk).allocation.take();
            let g = self.group_mut(vk);
            g.ready_members = 0;
            g.not_ready_since = None;
            g.admitted_at = None;
            g.evictions += 1;
            let reason =
                if *reclaim { Reason::Reclaimed { by: key.clone() } } else { Reason::Preempted { by: key.clone() } };
            self.step(vk, GroupState::Evicted, reason, rec, out);
            self.requeue_now(vk, out);
        }
        self.last_stats.preemptions += victims.len();
        self.dirty = true;
        let capped = self.fitting_request(key, req).expect("the fit was checked on the same state");
        self.last_stats.match_calls += 1;
        match self.graph.allocate(&capped, self.now) {
            MatchOutcome::Allocated(id) => {
                let victims = victims.into_iter().map(|(k, _)| k).collect();
                self.admit(key, id, Reason::AdmittedByPreemption { victims }, out);
                Some(Attempt::Admitted)
            }
            _ => unreachable!("the fit was checked on the same state"),
        }
    }

    /// Would `key` (as `req`) fit now, quota and placement? Changes nothing.
    fn fits_now(&mut self, key: &GroupKey, req: &GroupRequest) -> bool {
        self.fitting_request(key, req).is_some()
    }

    /// `req` with its max capped by the quota now, if that fits now (quota and placement).
    fn fitting_request(&mut self, key: &GroupKey, req: &GroupRequest) -> Option<GroupRequest> {
        let g = &self.groups[key];
        let amounts = quota::per_member(&g.spec.request);
        let (qmax, _) =
            quota::max_members(&self.compiled, &self.usage, &g.spec.queue, &amounts, req.max_members, &|_, a| {
                a.to_string()
            });
        if qmax < req.min_members {
            return None;
        }
        let mut r = req.clone();
        r.max_members = qmax;
        if self.may_fit_now(&r).is_err() {
            return None;
        }
        self.last_stats.match_calls += 1;
        match self.graph.allocate(&r, self.now) {
            MatchOutcome::Allocated(id) => {
                let _ = self.graph.cancel(id);
                Some(r)
            }
            MatchOutcome::Reserved { id, .. } => {
                let _ = self.graph.cancel(id);
                None
            }
            _ => None,
        }
    }

    /// Temporarily removes a placed group from the graph and the quota (for preemption).
    fn take_out(&mut self, key: &GroupKey) -> SavedAlloc {
        let id = self.graph_alloc.remove(key).expect("placed");
        self.by_graph_alloc.remove(&id);
        let saved = self.saved_alloc(id);
        let _ = self.graph.cancel(id);
        let n = self.groups[key].member_count();
        self.add_usage(key, n, -1);
        saved
    }

    /// What it takes to import allocation `id` again exactly.
    fn saved_alloc(&self, id: AllocId) -> SavedAlloc {
        let a = self.graph.allocation(id).expect("exists");
        let g = &self.graph.graph;
        let members = a
            .members
            .iter()
            .map(|m| ImportedMember {
                index: m.index,
                node: g.node(m.node).name.clone(),
                devices: m.devices.iter().map(|&v| g.vertex(v).meta.name.clone()).collect(),
            })
            .collect();
        SavedAlloc { id, request: a.request.clone(), members, start: a.start }
    }

    fn put_back(&mut self, key: &GroupKey, saved: SavedAlloc) {
        self.graph.import(saved.id, &saved.request, &saved.members, saved.start).expect("state restored exactly");
        self.graph_alloc.insert(key.clone(), saved.id);
        self.by_graph_alloc.insert(saved.id, key.clone());
        let n = self.groups[key].member_count();
        self.add_usage(key, n, 1);
    }

    /// Grows running elastic groups toward max where capacity (and quota) allow, without touching
    /// any reservation.
    /// What is kept about a group's request for fast lookups: its shape, and whether it is elastic.
    fn index_spec(&mut self, key: &GroupKey, request: &GroupRequest) {
        self.shapes.insert(key.clone(), shape_of(request));
        if request.min_members < request.max_members {
            self.elastic.insert(key.clone());
        } else {
            self.elastic.remove(key);
        }
    }

    fn grow_elastic(&mut self, out: &mut Vec<Transition>) {
        let keys: Vec<GroupKey> = self
            .elastic
            .iter()
            .filter(|k| self.live.contains(*k))
            .filter(|k| {
                let g = &self.groups[*k];
                g.state == GroupState::Running
                    && g.not_ready_since.is_none()
                    && g.spec.request.members_per_node.is_none()
                    && g.member_count() < g.spec.request.max_members
            })
            .cloned()
            .collect();
        for key in keys {
            let g = &self.groups[&key];
            let cur = g.member_count();
            let amounts = quota::per_member(&g.spec.request);
            let (qmax, _) =
                quota::max_members(&self.compiled, &self.usage, &g.spec.queue, &amounts, u32::MAX, &|_, a| {
                    a.to_string()
                });
            let mut want = (g.spec.request.max_members - cur).min(qmax);
            let alloc_id = g.allocation.as_ref().map_or(0, |a| a.alloc_id);
            let id = self.graph_alloc[&key];
            while want > 0 {
                self.last_stats.match_calls += 1;
                match self.graph.grow(id, want, self.now) {
                    Ok(Some(added)) => {
                        let rec = self.record_of(id, alloc_id);
                        self.add_usage(&key, added.len() as u32, 1);
                        let g = self.group_mut(&key);
                        g.allocation = Some(rec.clone());
                        self.step(&key, GroupState::Running, Reason::Grown { members: added }, Some(rec), out);
                        break;
                    }
                    Ok(None) => want /= 2,
                    Err(_) => break,
                }
            }
        }
    }

    // ----- explanations -----

    /// Every pending group, queue by queue in configuration order and in queue order, with its
    /// position, estimated start (for the first `estimate_depth` of each queue) and reason.
    /// Estimates come from the planner: each group in turn is placed or reserved on the graph
    /// assuming running groups end when expected, so later groups queue behind earlier ones; all of
    /// it is undone before returning.
    pub fn queue_view(&mut self, now: i64) -> Vec<Explanation> {
        let now = now.max(self.now);
        let mut temps = Vec::new();
        let mut out = Vec::new();
        // Walk in global order (priority, then fair share, then time), so estimates stack up as
        // the scheduler would take them.
        let mut order: Vec<(PendingKey, String, usize, GroupKey)> = Vec::new();
        for q in self.config.queues.iter().map(|q| q.name.clone()) {
            for (i, (pk, k)) in self.pending[&q].iter().enumerate() {
                order.push((*pk, q.clone(), i + 1, k.clone()));
            }
        }
        let shares: BTreeMap<String, f64> =
            self.config.queues.iter().map(|q| (q.name.clone(), self.fair_share(&q.name))).collect();
        order.sort_by(|a, b| {
            (a.0.neg_priority, shares[&a.1], a.0.order_time, a.0.seq)
                .partial_cmp(&(b.0.neg_priority, shares[&b.1], b.0.order_time, b.0.seq))
                .unwrap_or(Ordering::Equal)
        });
        let depth = self.config.estimate_depth;
        let mut planner_left = self.config.planner_estimates;
        let profile = self.end_profile();
        for (pk, q, position, key) in order {
            let g = &self.groups[&key];
            let mut reason = g.reason.clone();
            let mut aggregate = false;
            let estimated_start = if position > depth {
                reason = format!("position {position} in queue {q}; estimate not computed (beyond the first {depth})");
                None
            } else if g.unsatisfiable.is_some() || self.window_held.get(&q).is_some_and(|held| pk >= *held) {
                None
            } else if let Some(at) = g.reserved_at.filter(|_| self.reservations.contains_key(&key)) {
                Some(at)
            } else if planner_left > 0 {
                planner_left -= 1;
                let mut req = g.spec.request.clone();
                req.min_members = self.effective_min(g);
                match self.graph.allocate_orelse_reserve(&req, now) {
                    MatchOutcome::Allocated(id) => {
                        temps.push(id);
                        Some(now)
                    }
                    MatchOutcome::Reserved { id, at } => {
                        temps.push(id);
                        Some(at)
                    }
                    MatchOutcome::Busy(_) | MatchOutcome::Unsatisfiable(_) => None,
                }
            } else {
                aggregate = true;
                self.aggregate_estimate(&profile, g, now)
            };
            if aggregate && let Some(t) = estimated_start {
                reason = format!("{reason}; not before {t} (estimate from cluster totals)");
            }
            if reason.is_empty() || reason == "considered" || reason == "not yet considered" {
                reason = match estimated_start {
                    Some(t) if t <= now => "fits now; starts at the next cycle".into(),
                    Some(t) => format!("waiting for capacity; estimated start {t}"),
                    None => "waiting; no estimate (running groups without an expected end)".into(),
                };
            }
            out.push(Explanation { key, queue: q, state: g.state, position, estimated_start, reason });
        }
        for id in temps {
            let _ = self.graph.cancel(id);
        }
        out
    }

    /// Running allocations' expected ends with what they free, by resource index, in time order.
    fn end_profile(&self) -> Vec<(i64, Vec<u64>)> {
        let mut v: Vec<(i64, Vec<u64>)> = self
            .graph
            .allocations()
            .filter(|a| !a.reserved && a.end != i64::MAX)
            .map(|a| (a.end, a.per_member.iter().map(|q| q * a.members.len() as u64).collect()))
            .collect();
        v.sort();
        v
    }

    /// Earliest time the cluster's free totals could hold the group: a lower bound that ignores
    /// fragmentation and other pending groups (cheap; used beyond the planner's budget).
    fn aggregate_estimate(&self, profile: &[(i64, Vec<u64>)], g: &Group, now: i64) -> Option<i64> {
        let gr = &self.graph.graph;
        let (_, free) = gr.totals();
        let mut free = free.to_vec();
        let min = u64::from(self.effective_min(g));
        let need: Vec<(usize, u64)> = quota::per_member(&g.spec.request)
            .into_iter()
            .filter_map(|(r, per)| gr.resources.get(&r).map(|id| (id.index(), per.saturating_mul(min))))
            .collect();
        let fits = |free: &[u64]| need.iter().all(|&(i, n)| free.get(i).is_some_and(|f| *f >= n));
        if fits(&free) {
            return Some(now);
        }
        for (t, amounts) in profile {
            for (f, a) in free.iter_mut().zip(amounts) {
                *f += a;
            }
            if fits(&free) {
                return Some((*t).max(now));
            }
        }
        None
    }

    /// Why one group is where it is.
    pub fn explain(&mut self, key: &GroupKey, now: i64) -> Result<Explanation, EngineError> {
        let g = self.get(key)?;
        if g.state.is_pending() {
            return Ok(self
                .queue_view(now)
                .into_iter()
                .find(|e| &e.key == key)
                .expect("pending groups are in the view"));
        }
        let r = &self.queue_cfg(&g.spec.queue).readiness;
        let reason = match g.state {
            GroupState::Admitted => {
                let deadline = r.timeout_s.and_then(|t| g.admitted_at.map(|a| a + t));
                format!(
                    "admitted at {}; {} of {} members ready{}",
                    g.admitted_at.unwrap_or(0),
                    g.ready_members,
                    g.member_count(),
                    deadline.map_or(String::new(), |d| format!("; must be all ready by {d}"))
                )
            }
            GroupState::Running => match g.not_ready_since {
                Some(s) => format!(
                    "running; {} of {} members ready since {s}{}",
                    g.ready_members,
                    g.member_count(),
                    r.recovery_timeout_s.map_or(String::new(), |t| format!("; released at {} unless recovered", s + t))
                ),
                None => format!("running with {} members", g.member_count()),
            },
            GroupState::Evicted => format!(
                "evicted {} time(s); queued again at {}",
                g.evictions,
                g.requeue_at.map_or("once released".to_string(), |t| t.to_string())
            ),
            GroupState::Deactivated => {
                format!("deactivated after {} requeues (backoff limit); resume to retry", g.requeues)
            }
            GroupState::Suspended => "suspended by the user".into(),
            s => format!("{s}"),
        };
        Ok(Explanation {
            key: key.clone(),
            queue: g.spec.queue.clone(),
            state: g.state,
            position: 0,
            estimated_start: None,
            reason,
        })
    }

    // ----- snapshot -----

    /// The engine's full state. Reservations are not part of it: every cycle recomputes them.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            config: self.config.clone(),
            now: self.now,
            seq: self.seq,
            next_alloc_id: self.next_alloc_id,
            structure_version: self.structure_version,
            dirty: self.dirty,
            groups: self.groups.values().map(|g| Group::clone(g)).collect(),
            usage: self.usage_hist.clone(),
            namespaces: self.namespaces.clone(),
            cordoned: self.cordoned.clone(),
            down: self.down.clone(),
            external: self.external.iter().map(|(id, (h, _))| (id.clone(), h.clone())).collect(),
        }
    }

    /// Rebuilds an engine from a snapshot and a graph of the cluster's nodes (without this engine's
    /// allocations; it may hold other schedulers' pods). Placed groups are imported onto the graph
    /// under their recorded nodes and devices; an import that no longer fits is an error.
    pub fn restore(mut graph: ResourceGraph, snap: Snapshot) -> Result<Self, EngineError> {
        for n in &snap.cordoned {
            if graph.graph.node_id(n).is_ok() {
                graph.set_unschedulable(n, true)?;
            }
        }
        for n in &snap.down {
            if graph.graph.node_id(n).is_ok() {
                graph.set_up(n, false)?;
            }
        }
        let mut e = Engine::new(graph, snap.config)?;
        e.now = snap.now;
        e.seq = snap.seq;
        e.next_alloc_id = snap.next_alloc_id;
        e.structure_version = snap.structure_version;
        e.dirty = snap.dirty;
        e.namespaces = snap.namespaces;
        e.cordoned = snap.cordoned;
        e.down = snap.down;
        for (q, u) in snap.usage {
            e.usage_hist.insert(q, u);
        }
        let mut next_graph_id = e.graph.allocations().map(|a| a.id).max().unwrap_or(0) + 1;
        for g in snap.groups {
            let key = g.spec.key.clone();
            if !e.compiled.queues.contains_key(&g.spec.queue) {
                return Err(e.unknown_queue_err(&key, &g.spec.queue));
            }
            e.index_spec(&key, &g.spec.request);
            let state = g.state;
            let alloc = g.allocation.clone();
            e.groups.insert(key.clone(), Arc::new(g));
            if state.is_pending() {
                e.add_pending(&key);
            }
            if matches!(state, GroupState::Admitted | GroupState::Running | GroupState::Evicted) {
                e.live.insert(key.clone());
            }
            if state.holds_allocation()
                && let Some(a) = alloc
            {
                let members: Vec<ImportedMember> = a
                    .members
                    .iter()
                    .map(|m| ImportedMember { index: m.index, node: m.node.clone(), devices: m.devices.clone() })
                    .collect();
                let req = e.groups[&key].spec.request.clone();
                let id = next_graph_id;
                next_graph_id += 1;
                e.graph.import(id, &req, &members, a.start)?;
                e.graph_alloc.insert(key.clone(), id);
                e.by_graph_alloc.insert(id, key.clone());
                e.add_usage(&key, a.members.len() as u32, 1);
            }
        }
        // Other schedulers' pods after ours: the recorded placements were made around them.
        for (id, hold) in snap.external {
            e.occupy(&id, &hold.node, &hold.requests, e.now)?;
        }
        Ok(e)
    }

    /// Checks internal invariants (for tests): quotas, all-or-nothing placements, indices.
    pub fn check_invariants(&self) -> Result<(), String> {
        quota::check(&self.compiled, &self.usage)?;
        for g in self.groups.values() {
            let placed = self.graph_alloc.get(&g.spec.key);
            if g.state.holds_allocation() {
                let id = placed.ok_or_else(|| format!("{} is {} without an allocation", g.spec.key, g.state))?;
                let a = self.graph.allocation(*id).map_err(|e| e.to_string())?;
                let n = a.members.len() as u32;
                if n < g.spec.request.min_members || n > g.spec.request.max_members {
                    return Err(format!(
                        "{} holds {n} members outside {}..={}",
                        g.spec.key, g.spec.request.min_members, g.spec.request.max_members
                    ));
                }
                if g.member_count() != n {
                    return Err(format!("{} record has {} members, graph {n}", g.spec.key, g.member_count()));
                }
                if a.reserved {
                    return Err(format!("{} holds a reservation as allocation", g.spec.key));
                }
            } else if placed.is_some() {
                return Err(format!("{} is {} but holds an allocation", g.spec.key, g.state));
            }
            let in_pending =
                self.pending.get(&g.spec.queue).is_some_and(|p| p.get(&Self::pending_key(g)) == Some(&g.spec.key));
            if g.state.is_pending() != in_pending {
                return Err(format!("{} is {} but pending index says {in_pending}", g.spec.key, g.state));
            }
        }
        // Quota usage equals the sum of placed groups.
        let mut usage: Usage = BTreeMap::new();
        for g in self.groups.values().filter(|g| g.state.holds_allocation()) {
            let u = usage.entry(g.spec.queue.clone()).or_default();
            for (r, per) in quota::per_member(&g.spec.request) {
                *u.entry(r).or_insert(0) += per * u64::from(g.member_count());
            }
        }
        for (q, u) in &self.usage {
            for (r, a) in u {
                let want = usage.get(q).and_then(|m| m.get(r)).copied().unwrap_or(0);
                if *a != want {
                    return Err(format!("queue {q} usage {r} is {a}, placed groups sum to {want}"));
                }
            }
        }
        Ok(())
    }
}

/// What preemption keeps to put a group back exactly.
#[derive(Debug, Clone)]
struct SavedAlloc {
    id: AllocId,
    request: GroupRequest,
    members: Vec<ImportedMember>,
    start: i64,
}
