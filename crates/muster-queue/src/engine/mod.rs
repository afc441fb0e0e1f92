//! The engine: takes inputs (each with the current time), decides, and reports every change as a
//! list of `Transition`s. Pure and deterministic: no wall clock, no hash-order iteration in
//! decisions.
//!
//! **Where to start reading.** This file holds the [`Engine`] struct: every field, what it means
//! and which are derived. Then [`Engine::schedule`] in `cycle.rs`: one scheduling cycle, which
//! merges the queues in global order and hands each group to `attempt.rs`, where the attempt runs
//! as named steps (satisfiable, start window, quota, match now, preempt, reserve). Everything else
//! either feeds the cycle (inputs, nodes, timers) or reads its results (explanations, snapshot).
//!
//! The rooms, one job each:
//!
//! | file | holds |
//! |---|---|
//! | `state.rs` | bookkeeping every room shares: group access, the pending index, checked state changes, invariants |
//! | `group_table.rs` | the groups, each in a slot that the pending index points at |
//! | `placement.rs` | allocations in the graph and the quota: admit, release, take out and put back |
//! | `fair_share.rs` | the clock, decayed usage history and each queue's fair share |
//! | `fair_share_preemption.rs` | the rule fair-share preemption between borrowing queues keeps (shares of use above nominal) |
//! | `inputs.rs` | a group's inputs: submit, pods ready, members lost, finished, suspend, resume, delete |
//! | `nodes.rs` | node inputs (added, removed, changed, cordoned, up/down) and other schedulers' pods |
//! | `timers.rs` | readiness and recovery timeouts, requeue backoff (kept in a heap of deadlines), the next timer |
//! | `calendar.rs` | calendar reservations: their windows as set-asides in the graph, who may use them, evictions when one opens |
//! | `cycle.rs` | the scheduling cycle: the merge of the queues, reservations kept or dropped |
//! | `attempt.rs` | one group's attempt, as a pipeline of small steps |
//! | `demand.rs` | the cheap aggregate test before a match: what a request asks against what is free |
//! | `failed_requests.rs` | what failed to match in the cycle: the same request, or one contained in it, is not matched again |
//! | `repeat_misfit.rs` | attempts settled at once because a request like theirs failed earlier in the cycle, or more is asked than is free; runs of them behind a blocked head settled in one go |
//! | `quota_holds.rs` | quota along the planned timeline: what reservations hold of it, and when a group short of it may start |
//! | `preemption.rs` | gang-aware preemption: candidates, the fewest victims, eviction |
//! | `elastic.rs` | elastic groups: how many members they ask for now, growing running ones |
//! | `give_way.rs` | shrinkable groups giving back members so that the first group in line starts now |
//! | `run_times.rs` | run times learned from finished groups: planned for those that declare none, expected for all |
//! | `run_limit.rs` | declared run times as limits (groups that outrun them are ended); learned ones matched as estimates |
//! | `forecast.rs` | when pending groups start: a copy of the engine run forward, groups ending when expected |
//! | `explanations.rs` | reasons, the queue view with estimated starts, `explain` |
//! | `plan.rs` | the plan for the dashboard: groups with their windows, queues, nodes |
//! | `snapshot.rs` | the serializable state: snapshot and restore |

mod attempt;
mod calendar;
mod cycle;
mod demand;
mod elastic;
mod explanations;
mod failed_requests;
mod fair_share;
mod fair_share_preemption;
mod forecast;
mod give_way;
mod group_table;
mod inputs;
mod nodes;
mod placement;
mod plan;
mod preemption;
mod quota_holds;
mod reconfigure;
mod repeat_misfit;
mod run_limit;
mod run_times;
mod snapshot;
mod state;
mod timers;

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};

use muster_graph::{AllocId, GraphError, NodeSpec, ResourceGraph};
use serde::{Deserialize, Serialize};

pub use self::calendar::ReservationWindow;
pub use self::cycle::CycleStats;
pub use self::explanations::Explanation;
pub use self::fair_share::QueueUsage;
use self::group_table::{GroupTable, PendingGroup, Slot};
pub use self::nodes::ExternalHold;
pub use self::plan::{NodePlan, Plan, PlanWindow, PlannedGroup, PlannedSet, QueuePlan, WindowKind};
pub use self::run_times::{LearnedRunTime, LearnedRunTimes, RUN_TIMES_KEPT, RunTimeSample};
pub use self::snapshot::Snapshot;
pub use self::state::request_shape;
use crate::config::{Compiled, EngineConfig, QueuePolicy};
use crate::group::{Group, GroupKey, IllegalTransition};
use crate::quota::Usage;

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
    /// The reservations on the graph are still the earliest starts their groups can have:
    /// since the cycle that made them nothing freed room, dropped a reservation, changed the
    /// cluster or came before them in line. A cycle then keeps them rather than planning them
    /// afresh (`cycle.rs`); anything else clears it (`replan`).
    reservations_current: bool,
    /// Shared with the copies the durable layer takes before each batch: a group is copied only
    /// when changed, and an unchanged one is the same allocation in both (which is how the
    /// store's diff skips it).
    groups: GroupTable,
    usage_hist: BTreeMap<String, QueueUsage>,
    /// Run times of finished groups that declared none.
    learned: LearnedRunTimes,
    namespaces: BTreeMap<String, BTreeMap<String, String>>,
    cordoned: BTreeSet<String>,
    down: BTreeSet<String>,
    external: BTreeMap<String, (ExternalHold, AllocId)>,
    // Derived, rebuilt on restore.
    usage: Usage,
    pending: BTreeMap<String, BTreeMap<PendingKey, PendingGroup>>,
    /// Groups holding an allocation or in backoff (have timers).
    live: BTreeSet<GroupKey>,
    /// Groups holding a reservation (state Reserved), so that a cycle finds them without walking
    /// every pending group.
    reserved: BTreeSet<GroupKey>,
    /// Pending groups of selective queues by when each becomes due a reservation (kept with the
    /// pending index), so that the timers find the next one without walking the queues.
    due_reservation: BTreeSet<(i64, GroupKey)>,
    /// Deadlines of live groups' own timers (readiness, recovery, backoff), earliest first. An
    /// entry may be stale (the group moved on): it counts only while the group's timer is still
    /// that deadline, so that a cycle looks at due timers only, not at every running group.
    timers: BinaryHeap<Reverse<(i64, GroupKey)>>,
    /// Only looked up, never walked: hashed.
    graph_alloc: foldhash::HashMap<GroupKey, AllocId>,
    by_graph_alloc: BTreeMap<AllocId, GroupKey>,
    reservations: BTreeMap<GroupKey, AllocId>,
    /// Only looked up, never walked: hashed, as a lookup per attempt is what a long queue costs.
    shapes: foldhash::HashMap<GroupKey, u64>,
    /// Groups that may run with fewer members than they ask (min < max): the only ones a cycle
    /// tries to grow, so that it does not look up every running group to find them.
    elastic: BTreeSet<GroupKey>,
    /// Satisfiability by (shape, min members), valid for the current structure version. Hashed:
    /// looked up at every attempt, never walked.
    sat_cache: foldhash::HashMap<(u64, u32), Result<(), String>>,
    /// What requests ask, for the aggregate test before a match; valid likewise.
    demands: demand::Demands,
    /// The room ahead as the last run of settled groups worked it out (`repeat_misfit.rs`): kept
    /// for its storage, which the next run reuses.
    room_ahead: muster_graph::free_ahead::FreeAhead,
    /// The batch of pending groups a run of settled groups takes at a time, kept likewise.
    run_batch: Vec<(PendingKey, Slot, u64)>,
    /// Nodes whose new topology place or resource set waits until nothing runs on them. Not in
    /// the snapshot: a restore builds the graph from the nodes as they are now.
    deferred_reshapes: BTreeMap<String, NodeSpec>,
    /// Per queue, members admitted and not yet ready (for its start window); counted at the
    /// start of each cycle and as the cycle admits.
    starting: BTreeMap<String, u32>,
    /// Per queue, the first group its start window held in the last cycle: it and the groups
    /// behind it start when members become ready, which no plan can tell.
    window_held: BTreeMap<String, PendingKey>,
    /// When the last cycle that was not skipped ran: a selective queue's group that became due a
    /// reservation since then calls for a cycle although nothing changed.
    last_full_cycle: i64,
    last_stats: CycleStats,
    /// Members running groups were asked to give back (`give_way.rs`), until their pods are gone.
    /// Not in snapshots: after a restart the groups keep them, which over-commits nothing.
    leaving: give_way::GiveBack,
    /// The group `leaving` is given back for (by giving way, or asked back by preemption).
    leaving_for: Option<GroupKey>,
    /// Calendar reservations' windows held in the graph. Not in snapshots: a restore makes them
    /// again from the configuration, on the nodes of `held_before`.
    calendar: calendar::Calendar,
    /// Where windows to be made again held their room (by reservation and start): they go back
    /// there first. Filled by a restore and by nodes that change.
    held_before: calendar::HeldBefore,
    /// Attempts sure to fail as one before them did are settled cheaply (`repeat_misfit.rs`);
    /// off only to check that doing so decides as attempting them in full.
    settle_repeat_misfits: bool,
    /// Requests that contain one that failed earlier in the cycle are settled without a match
    /// (`failed_requests.rs`); off only to check that a match would find the same.
    compare_by_size: bool,
    /// A configuration taken at a restore or a reconfigure set some quotas below what placed
    /// groups hold: they run on, and the queue admits nothing it asks for until it is back
    /// within (as any admission checks). Cleared by the first cycle that finds every quota kept;
    /// until then the quota invariant does not hold and is not checked.
    over_quota_from_config: bool,
    /// Per queue (by its index in the configuration), how the reason of a group beyond the
    /// reservation depth ends: written once, as thousands of such groups are tried every cycle.
    backfill_tails: Vec<String>,
}

/// What the reason of a group of a queue with `policy` ends with when the group is beyond the
/// queue's reservation depth.
fn backfill_tail(policy: QueuePolicy) -> String {
    match policy.reservation_depth() {
        0 => String::new(),
        depth => format!("; beyond the reservation depth {depth}, so it can only backfill"),
    }
}

impl Engine {
    /// An engine over `graph` (which may already hold allocations of other schedulers).
    pub fn new(graph: ResourceGraph, config: EngineConfig) -> Result<Self, EngineError> {
        let compiled = config.compile("config")?;
        let usage_hist = config.queues.iter().map(|q| (q.name.clone(), QueueUsage::default())).collect();
        let pending = config.queues.iter().map(|q| (q.name.clone(), BTreeMap::new())).collect();
        Ok(Self {
            graph,
            compiled,
            now: i64::MIN,
            seq: 0,
            next_alloc_id: 1,
            structure_version: 0,
            dirty: true,
            reservations_current: false,
            groups: GroupTable::default(),
            usage_hist,
            learned: LearnedRunTimes::default(),
            namespaces: BTreeMap::new(),
            cordoned: BTreeSet::new(),
            down: BTreeSet::new(),
            external: BTreeMap::new(),
            usage: BTreeMap::new(),
            pending,
            live: BTreeSet::new(),
            reserved: BTreeSet::new(),
            due_reservation: BTreeSet::new(),
            timers: BinaryHeap::new(),
            graph_alloc: foldhash::HashMap::default(),
            by_graph_alloc: BTreeMap::new(),
            reservations: BTreeMap::new(),
            shapes: foldhash::HashMap::default(),
            elastic: BTreeSet::new(),
            sat_cache: foldhash::HashMap::default(),
            demands: demand::Demands::default(),
            room_ahead: Default::default(),
            run_batch: Vec::new(),
            deferred_reshapes: BTreeMap::new(),
            starting: BTreeMap::new(),
            window_held: BTreeMap::new(),
            last_full_cycle: Snapshot::NO_CYCLE_YET,
            last_stats: CycleStats::default(),
            leaving: BTreeMap::new(),
            leaving_for: None,
            calendar: BTreeMap::new(),
            held_before: BTreeMap::new(),
            settle_repeat_misfits: true,
            compare_by_size: true,
            over_quota_from_config: false,
            backfill_tails: config.queues.iter().map(|q| backfill_tail(q.policy)).collect(),
            config,
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
}
