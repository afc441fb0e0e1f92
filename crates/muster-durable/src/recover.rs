//! Recovery: replay the store into a fresh engine, then reconcile it with what the cluster runs.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use muster_graph::ResourceGraph;
use muster_queue::engine::{LearnedRunTimes, QueueUsage, RUN_TIMES_KEPT, RunTimeSample};
use muster_queue::{
    AllocationRecord, Engine, EngineConfig, EngineError, Group, GroupKey, GroupState, MemberPlacement, Reason,
    ReservationWindow, Snapshot, Transition,
};
use muster_store::{Fence, HistoryEntry, Store, StoreError};
use thiserror::Error;

use crate::rows::{self, group_map};
use crate::{DurableEngine, EncodeError, Options};

/// What the cluster runs at start-up (the Kubernetes controller builds it from pods and group
/// objects).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterReport {
    /// Pods of muster's groups that exist now: per group, one placement per member.
    pub running: BTreeMap<GroupKey, Vec<MemberPlacement>>,
    /// Groups whose pods finished while no instance led, and whether they succeeded.
    pub finished: BTreeMap<GroupKey, bool>,
    /// Groups whose objects were deleted while no instance led.
    pub deleted: BTreeSet<GroupKey>,
    /// Groups whose missing pods the cluster recreates (a Job's controller does): a member of
    /// theirs without a pod is still being placed, not lost; only one whose node is gone is.
    pub pods_recreated: BTreeSet<GroupKey>,
}

/// Something the store and the cluster disagree on that recovery did not resolve. `subject` is a
/// group key or a queue name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    pub subject: String,
    pub message: String,
}

/// What recovery changed (already written to the store: act on these transitions as on any
/// other) and what it could not resolve.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recovery {
    pub transitions: Vec<Transition>,
    pub conflicts: Vec<Conflict>,
}

#[derive(Debug, Error)]
pub enum RecoverError {
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A stored row that does not decode, or groups and allocation rows that disagree.
    #[error("stored group {key}: {message}")]
    Corrupt { key: String, message: String },
    /// The stored allocations do not fit the graph given (it must not hold our own pods).
    #[error("the stored state does not fit the cluster: {0}")]
    Engine(#[from] EngineError),
    #[error(transparent)]
    Encode(#[from] EncodeError),
}

fn corrupt(key: &str, message: impl Into<String>) -> RecoverError {
    RecoverError::Corrupt { key: key.to_string(), message: message.into() }
}

/// An engine snapshot of `groups` at `now`. Counters come from the groups (the store keeps no
/// others); every unsatisfiable mark is made stale so that it is checked against today's graph.
/// `windows_held`: the stored nodes of reservation windows, where the engine makes them again.
fn snapshot(
    config: &EngineConfig,
    now: i64,
    groups: &BTreeMap<GroupKey, Group>,
    learned: LearnedRunTimes,
    windows_held: &[ReservationWindow],
) -> Snapshot {
    Snapshot {
        config: config.clone(),
        now,
        seq: groups.values().map(|g| g.seq).max().unwrap_or(0),
        next_alloc_id: next_alloc_id(groups),
        structure_version: groups
            .values()
            .filter_map(|g| g.unsatisfiable.as_ref())
            .map(|(_, v)| v + 1)
            .max()
            .unwrap_or(0),
        dirty: true,
        last_full_cycle: Snapshot::NO_CYCLE_YET,
        groups: groups.values().cloned().collect(),
        // Decay starts now; past usage comes from the store's usage table.
        usage: config
            .queues
            .iter()
            .map(|q| (q.name.clone(), QueueUsage { decayed: BTreeMap::new(), last_update: now }))
            .collect(),
        namespaces: BTreeMap::new(),
        cordoned: BTreeSet::new(),
        down: BTreeSet::new(),
        external: BTreeMap::new(),
        learned_run_times: learned,
        windows_held: windows_held.to_vec(),
    }
}

/// `config` with a closed queue for each queue that stored groups name but `config` does not
/// define ([`EngineConfig::close_undefined_queues`]), each reported.
fn with_closed_queues(
    mut config: EngineConfig,
    groups: &BTreeMap<GroupKey, Group>,
    conflicts: &mut Vec<Conflict>,
) -> EngineConfig {
    for (name, count) in config.close_undefined_queues(groups.values().map(|g| &g.spec)) {
        conflicts.push(Conflict {
            message: format!(
                "queue {name:?} is not defined, but {count} group(s) still name it: it is kept closed (its placed \
                 groups run on, its waiting ones wait, nothing new enters) until none does"
            ),
            subject: name,
        });
    }
    config
}

fn next_alloc_id(groups: &BTreeMap<GroupKey, Group>) -> u64 {
    groups.values().filter_map(|g| g.allocation.as_ref()).map(|a| a.alloc_id).max().unwrap_or(0) + 1
}

/// Clears what an allocation leaves on a group when it is released (as the engine does).
fn release(g: &mut Group) -> Option<AllocationRecord> {
    g.ready_members = 0;
    g.not_ready_since = None;
    g.admitted_at = None;
    g.allocation.take()
}

/// Reconciliation of the stored groups with the cluster report, recorded as transitions.
struct Reconcile<'a> {
    graph: &'a ResourceGraph,
    now: i64,
    transitions: Vec<Transition>,
    history: Vec<HistoryEntry>,
    conflicts: Vec<Conflict>,
}

impl Reconcile<'_> {
    fn step(&mut self, g: &mut Group, to: GroupState, reason: Reason, allocation: Option<AllocationRecord>) {
        let message = reason.message();
        self.step_with(g, to, reason, allocation, message);
    }

    fn step_with(
        &mut self,
        g: &mut Group,
        to: GroupState,
        reason: Reason,
        allocation: Option<AllocationRecord>,
        message: String,
    ) {
        let t = Transition { at: self.now, key: g.spec.key.clone(), from: g.state, to, reason, allocation };
        g.state = to;
        self.history.push(rows::history_entry(&t, message));
        self.transitions.push(t);
    }

    fn conflict(&mut self, key: &GroupKey, message: String) {
        self.conflicts.push(Conflict { subject: key.to_string(), message });
    }

    fn node_exists(&self, name: &str) -> bool {
        self.graph.graph.node_id(name).is_ok_and(|id| !self.graph.graph.node(id).removed)
    }

    /// Applies deletions, finishes and lost pods; returns the groups whose running pods may be
    /// imported (pending in the store, running in the cluster).
    fn run(
        &mut self,
        groups: &mut BTreeMap<GroupKey, Group>,
        cluster: &ClusterReport,
    ) -> Vec<(GroupKey, Vec<MemberPlacement>)> {
        let mut handled = BTreeSet::new();
        for key in &cluster.deleted {
            let Some(mut g) = groups.remove(key) else { continue };
            let state = g.state;
            g.reserved_at = None;
            g.requeue_at = None;
            let rec = if state.holds_allocation() { release(&mut g) } else { None };
            self.step(&mut g, GroupState::Deleted, Reason::Deleted, rec);
            handled.insert(key.clone());
        }
        for (key, &succeeded) in &cluster.finished {
            let to = if succeeded { GroupState::Succeeded } else { GroupState::Failed };
            match groups.get_mut(key) {
                Some(g) if g.state.holds_allocation() => {
                    let rec = release(g);
                    self.step(g, to, Reason::Finished { succeeded }, rec);
                }
                Some(g) if g.state == to => {}
                Some(g) => {
                    let state = g.state;
                    self.conflict(key, format!("the cluster reports it finished; the store says {state}"));
                }
                None if handled.contains(key) => {}
                None => self.conflict(key, "the cluster reports it finished; the store does not know it".into()),
            }
            handled.insert(key.clone());
        }
        for (key, g) in groups.iter_mut() {
            if !g.state.holds_allocation() || handled.contains(key) {
                continue;
            }
            handled.insert(key.clone());
            let pods: BTreeMap<u32, &MemberPlacement> =
                cluster.running.get(key).into_iter().flatten().map(|m| (m.index, m)).collect();
            let Some(rec) = g.allocation.clone() else { continue };
            let mut lost = Vec::new();
            for m in &rec.members {
                match pods.get(&m.index) {
                    Some(p) if p.node != m.node => self.conflict(
                        key,
                        format!("member {} runs on {}, its allocation says {}", m.index, p.node, m.node),
                    ),
                    Some(_) if self.node_exists(&m.node) => {}
                    None if cluster.pods_recreated.contains(key) && self.node_exists(&m.node) => {}
                    _ => lost.push(m.index),
                }
            }
            for (index, p) in &pods {
                if !rec.members.iter().any(|m| m.index == *index) {
                    self.conflict(key, format!("member {index} runs on {} outside the group's allocation", p.node));
                }
            }
            if lost.is_empty() {
                continue;
            }
            // As the engine's members_lost: an elastic group at or above its minimum shrinks;
            // otherwise the whole group is released and queued again at once (not its fault).
            let remaining = rec.members.len() - lost.len();
            let state = g.state;
            if remaining > 0 && remaining >= g.spec.request.min_members as usize {
                let mut kept = rec;
                kept.members.retain(|m| !lost.contains(&m.index));
                g.allocation = Some(kept.clone());
                g.ready_members = g.ready_members.min(remaining as u32);
                self.step(g, state, Reason::Shrunk { members: lost }, Some(kept));
            } else {
                let released = release(g);
                g.evictions += 1;
                g.requeue_at = None;
                self.step(g, GroupState::Evicted, Reason::MembersLost { members: lost }, released);
                self.step(g, GroupState::Queued, Reason::Requeued, None);
            }
        }
        let mut orphans = Vec::new();
        for (key, pods) in &cluster.running {
            if handled.contains(key) {
                continue;
            }
            match groups.get(key) {
                None => self.conflict(key, format!("{} pods run for a group the store does not know", pods.len())),
                Some(g) if g.state.is_pending() => orphans.push((key.clone(), pods.clone())),
                Some(g) => {
                    let state = g.state;
                    self.conflict(key, format!("{} pods still run; the store says {state}: delete them", pods.len()));
                }
            }
        }
        orphans
    }

    /// The group `g` admitted with the pods that run for it, or why it cannot be.
    fn imported(&self, g: &Group, pods: &[MemberPlacement], alloc_id: u64) -> Result<Group, String> {
        let mut members = pods.to_vec();
        members.sort_by_key(|m| m.index);
        members.dedup_by_key(|m| m.index);
        let req = &g.spec.request;
        if members.len() != pods.len() {
            return Err("two pods claim the same member".into());
        }
        if members.len() < req.min_members as usize || members.len() > req.max_members as usize {
            return Err(format!(
                "{} pods run, the group needs {}..={}",
                members.len(),
                req.min_members,
                req.max_members
            ));
        }
        let end = req.duration.map_or(i64::MAX, |d| self.now.saturating_add(d as i64));
        let mut cand = g.clone();
        cand.state = GroupState::Admitted;
        cand.allocation = Some(AllocationRecord { alloc_id, members, start: self.now, end });
        cand.admitted_at = Some(self.now);
        cand.ready_members = 0;
        cand.not_ready_since = None;
        cand.reserved_at = None;
        cand.requeue_at = None;
        cand.unsatisfiable = None;
        Ok(cand)
    }
}

impl<S: Store> DurableEngine<S> {
    /// Rebuilds the engine from the store and reconciles it with the cluster: groups whose pods are
    /// gone lose those members (evicted and queued again below their minimum); pods running for a
    /// pending group are imported if they fit (capacity and quota), else reported; groups finished
    /// or deleted while no instance led are finished or deleted. What recovery changed is written
    /// (fenced) before this returns. `graph` holds the cluster's nodes without muster's pods.
    /// `fence` must be a lease this instance holds (from `acquire_lease`).
    pub fn recover(
        graph: ResourceGraph,
        config: EngineConfig,
        mut store: S,
        fence: Fence,
        options: Options,
        cluster: &ClusterReport,
        now: i64,
    ) -> Result<(Self, Recovery), RecoverError> {
        // A stale instance must not act on what it reads: check the fence first.
        if !store.renew_lease(&fence, now, options.lease.ttl_s)? {
            return Err(StoreError::Fenced { name: fence.name, holder: fence.holder, epoch: fence.epoch }.into());
        }
        let stored = store.load()?;
        let mut versions = BTreeMap::new();
        let mut groups = BTreeMap::new();
        for sg in &stored.groups {
            let g = rows::decode_group(&sg.group).map_err(|m| corrupt(&sg.group.key, m))?;
            versions.insert(sg.group.key.clone(), sg.version);
            groups.insert(g.spec.key.clone(), g);
        }
        let mut placed = BTreeMap::new();
        for a in &stored.allocations {
            placed.insert(a.group_key.clone(), rows::decode_allocation(a).map_err(|m| corrupt(&a.group_key, m))?);
        }
        // Group rows and allocation rows are written in one batch: they must agree.
        for (key, g) in &groups {
            let row = placed.remove(&key.to_string());
            let held = g.allocation.as_ref().filter(|_| g.state.holds_allocation());
            if row.as_ref() != held || (g.state.holds_allocation() && held.is_none()) {
                return Err(corrupt(
                    &key.to_string(),
                    format!("state {} with allocation {held:?}, allocation row {row:?}", g.state),
                ));
            }
        }
        if let Some(key) = placed.keys().next() {
            return Err(corrupt(key, "allocation row without a group"));
        }

        let learned = LearnedRunTimes::from_samples(store.recent_run_times(RUN_TIMES_KEPT)?.into_iter().map(|r| {
            RunTimeSample { queue: r.queue, shape: r.shape as u64, seconds: u64::try_from(r.seconds).unwrap_or(0) }
        }));
        let before = groups.clone();
        let mut rec =
            Reconcile { graph: &graph, now, transitions: Vec::new(), history: Vec::new(), conflicts: Vec::new() };
        let orphans = rec.run(&mut groups, cluster);
        let config = with_closed_queues(config, &groups, &mut rec.conflicts);
        let windows: Vec<ReservationWindow> = stored.windows_held.iter().map(rows::decode_window).collect();
        let mut engine = Engine::restore(graph.clone(), snapshot(&config, now, &groups, learned.clone(), &windows))?;
        // One at a time, each checked (capacity and quota) with the ones accepted before it.
        for (key, pods) in orphans {
            // The stored groups may hold more than a node that shrank has; a candidate must add
            // nothing over any node's capacity.
            let over_before = engine.graph().graph.over_committed();
            let trial = rec.imported(&groups[&key], &pods, next_alloc_id(&groups)).and_then(|cand| {
                let mut trial = groups.clone();
                trial.insert(key.clone(), cand);
                let e = Engine::restore(graph.clone(), snapshot(&config, now, &trial, learned.clone(), &windows))
                    .map_err(|e| e.to_string())?;
                e.check_invariants()?;
                let over = e.graph().graph.over_committed();
                if let Some((node, held)) = over.iter().find(|o| !over_before.contains(o)) {
                    return Err(format!("no room for them on node {node}: {held}"));
                }
                Ok((trial, e))
            });
            match trial {
                Ok((trial, e)) => {
                    let mut g = groups[&key].clone();
                    let cand = &trial[&key];
                    let message = "imported: its pods were found running at recovery".to_string();
                    rec.step_with(
                        &mut g,
                        GroupState::Admitted,
                        Reason::Admitted { backfill: false },
                        cand.allocation.clone(),
                        message,
                    );
                    groups = trial;
                    engine = e;
                }
                Err(m) => {
                    rec.conflict(&key, format!("{} pods run for this queued group; not imported: {m}", pods.len()))
                }
            }
        }

        for g in groups.values().filter(|g| g.state.holds_allocation()) {
            if graph.graph.known_part(&g.spec.request) != g.spec.request {
                rec.conflict(
                    &g.spec.key,
                    "it asks for a resource, a driver's devices or a topology level that no node has now: it runs on \
                     where it is, holding what the nodes still have"
                        .into(),
                );
            }
        }
        for (node, held) in engine.graph().graph.over_committed() {
            let message =
                format!("its running groups hold more than it has ({held}): nothing more goes there until enough ends");
            rec.conflicts.push(Conflict { subject: node, message });
        }
        let writes = rows::diff(
            &group_map(before.values()),
            &group_map(groups.values()),
            &rec.transitions,
            rec.history,
            now,
            &versions,
        )?;
        if !writes.is_empty() {
            let puts = store.apply(&fence, now, &writes)?;
            rows::note_versions(&mut versions, &writes, puts);
        }
        // Read after our own usage records landed, so that a second recovery reads the same.
        let half_life = config.fair_share_half_life_s;
        if half_life > 0 {
            let mut per_queue: BTreeMap<String, BTreeMap<String, f64>> = BTreeMap::new();
            for u in store.decayed_usage(now, half_life)? {
                per_queue.entry(u.queue).or_default().insert(u.resource, u.amount);
            }
            for (queue, amounts) in per_queue {
                if engine.add_usage_history(&queue, &amounts, now, now).is_err() {
                    rec.conflicts.push(Conflict {
                        subject: queue,
                        message: "usage is recorded for a queue that is not configured; ignored".into(),
                    });
                }
            }
        }
        let durable = DurableEngine {
            engine,
            store,
            status: crate::Status::Leading {
                holder: fence.holder.clone(),
                epoch: fence.epoch,
                lease_expires_at: now.saturating_add(options.lease.ttl_s),
            },
            fence,
            versions,
            renewed_at: now,
            lease_expires_at: now.saturating_add(options.lease.ttl_s),
            usage_folded_at: i64::MIN,
            options,
            waiting: VecDeque::new(),
        };
        Ok((durable, Recovery { transitions: rec.transitions, conflicts: rec.conflicts }))
    }
}
