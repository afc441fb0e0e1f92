//! muster-durable: the queue engine made durable. Every decision is written to the store before it
//! is acted on; recovery replays the store.
//!
//! [`DurableEngine`] wraps a [`muster_queue::Engine`] and a [`muster_store::Store`]. Each input runs
//! on a copy of the engine; the changes it made (group rows, allocation rows, history, usage) go to
//! the store in one fenced `apply`, and only when that commits does the copy become the engine and
//! the transitions go back to the caller. If the store refuses or cannot be reached, the engine is
//! as it was before the input: fail closed. Inputs that failed because the store was unavailable are
//! kept and retried, in order, with exponential backoff on [`DurableEngine::tick`]. Time is always
//! passed in; nothing sleeps. See docs/durability.md.

mod recover;
mod rows;

use std::collections::{BTreeMap, VecDeque};
use std::fmt;

use muster_graph::NodeSpec;
use muster_queue::config::DEFAULT_FAIR_SHARE_HALF_LIFE_S;
use muster_queue::{Engine, EngineConfig, EngineError, ExternalHold, GroupKey, GroupSpec, Transition};
use muster_store::{Fence, Store, StoreError, Write};
use thiserror::Error;

pub use recover::{ClusterReport, Conflict, RecoverError, Recovery};

/// How often, in engine seconds, a batch also folds the older usage records.
const USAGE_FOLD_EVERY_S: i64 = 3600;
/// Usage records younger than this are kept as recorded, each group's own.
const USAGE_KEPT_AS_RECORDED_S: i64 = 24 * 3600;
/// The most of the oldest usage one fold reads: a store that kept every record (as muster did
/// before folding) is caught up a week an hour, never in one long batch.
const USAGE_FOLD_SPAN_S: i64 = 7 * 24 * 3600;

/// Leader lease settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseConfig {
    /// The lease's name in the store (all instances of one scheduler share it).
    pub name: String,
    /// Seconds a lease lasts without renewal.
    pub ttl_s: i64,
    /// Renew once the last renewal is this old (well below `ttl_s`).
    pub renew_every_s: i64,
}

/// Backoff between attempts while the store is unavailable: `base_s`, doubled per failed attempt,
/// at most `max_s`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    pub base_s: i64,
    pub max_s: i64,
}

impl RetryPolicy {
    fn delay(&self, attempts: u32) -> i64 {
        let doublings = attempts.saturating_sub(1).min(62);
        self.base_s.saturating_mul(1i64 << doublings).min(self.max_s)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    pub lease: LeaseConfig,
    pub retry: RetryPolicy,
}

impl Options {
    /// Lease `name` for `ttl_s`, renewed every third of it; retries from 1 s up to 60 s.
    pub fn new(name: &str, ttl_s: i64) -> Self {
        Options {
            lease: LeaseConfig { name: name.to_string(), ttl_s, renew_every_s: (ttl_s / 3).max(1) },
            // Every few seconds at most: an attempt is one connection, and admissions wait on it.
            retry: RetryPolicy { base_s: 1, max_s: 5 },
        }
    }
}

/// One input of the engine, as kept for a retry.
#[derive(Debug, Clone, PartialEq)]
pub enum Input {
    Submit(GroupSpec),
    /// A waiting group's job was reshaped: its new spec.
    Update(GroupSpec),
    PodsReady {
        key: GroupKey,
        ready: u32,
    },
    Finished {
        key: GroupKey,
        succeeded: bool,
    },
    MembersLost {
        key: GroupKey,
        members: Vec<u32>,
    },
    Suspend(GroupKey),
    Resume(GroupKey),
    Delete(GroupKey),
    NodeAdded(NodeSpec),
    NodeRemoved(String),
    /// Labels, taints, capacity or topology of a known node changed.
    NodeChanged(NodeSpec),
    NodeCordoned {
        name: String,
        cordoned: bool,
    },
    NodeUp {
        name: String,
        up: bool,
    },
    /// A pod of another scheduler, or a claim another scheduler allocated, holds capacity (not
    /// persisted: the cluster re-reports it).
    Occupy {
        id: String,
        hold: ExternalHold,
    },
    Vacate(String),
    /// The Queues, Cohorts, Reservations or PriorityClasses changed: the whole new
    /// configuration ([`Engine::reconfigure`]).
    Reconfigure(Box<EngineConfig>),
    /// A scheduling cycle. Never kept for a retry: the next cycle does the same work.
    Schedule,
}

impl Input {
    fn run(&self, e: &mut Engine, at: i64) -> Result<Vec<Transition>, EngineError> {
        match self {
            Input::Submit(spec) => e.submit(spec.clone(), at),
            Input::Update(spec) => e.update(spec.clone(), at),
            Input::PodsReady { key, ready } => e.pods_ready(key, *ready, at),
            Input::Finished { key, succeeded } => e.finished(key, *succeeded, at),
            Input::MembersLost { key, members } => e.members_lost(key, members, at),
            Input::Suspend(key) => e.suspend(key, at),
            Input::Resume(key) => e.resume(key, at),
            Input::Delete(key) => e.delete(key, at),
            Input::NodeAdded(spec) => e.node_added(spec, at),
            Input::NodeRemoved(name) => e.node_removed(name, at),
            Input::NodeChanged(spec) => e.node_changed(spec, at),
            Input::NodeCordoned { name, cordoned } => e.node_cordoned(name, *cordoned, at),
            Input::NodeUp { name, up } => e.node_up(name, *up, at),
            Input::Occupy { id, hold } => e.occupy(id, hold.clone(), at),
            Input::Vacate(id) => e.vacate(id, at),
            Input::Reconfigure(config) => e.reconfigure(EngineConfig::clone(config)).map(|()| Vec::new()),
            Input::Schedule => Ok(e.schedule(at)),
        }
    }
}

/// Whether the engine admits, and if not, why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    Leading {
        holder: String,
        epoch: i64,
        lease_expires_at: i64,
    },
    /// The store cannot be reached; inputs wait in order and are retried with backoff.
    StoreUnavailable {
        since: i64,
        error: String,
        attempts: u32,
        next_attempt: i64,
        waiting_inputs: usize,
    },
    /// The lease is lost (expired and taken, or refused); recover from the store to lead again.
    NotLeader {
        since: i64,
        lease: String,
        holder: String,
        epoch: i64,
    },
    /// The store refused a batch for a reason a retry cannot fix (a version conflict: someone else
    /// wrote under our feet; a corrupt row; a rejected write). Recover from the store.
    Halted {
        since: i64,
        error: String,
    },
}

impl Status {
    pub fn is_admitting(&self) -> bool {
        matches!(self, Status::Leading { .. })
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Status::Leading { holder, epoch, lease_expires_at } => {
                write!(f, "admitting: {holder} leads (epoch {epoch}), lease runs until {lease_expires_at}")
            }
            Status::StoreUnavailable { since, error, attempts, next_attempt, waiting_inputs } => write!(
                f,
                "admissions stopped: store unavailable since {since}: {error}; retrying with backoff \
                 (failed attempts: {attempts}), next attempt at {next_attempt}; {waiting_inputs} inputs waiting"
            ),
            Status::NotLeader { since, lease, holder, epoch } => write!(
                f,
                "admissions stopped: not the leader since {since}: {holder} no longer holds lease {lease} \
                 at epoch {epoch} (it expired and another instance took it, or renewal was refused); \
                 recover from the store to lead again"
            ),
            Status::Halted { since, error } => {
                write!(
                    f,
                    "admissions stopped since {since}: the store refused a batch: {error}; recover from the store"
                )
            }
        }
    }
}

/// Why an input did not go through.
#[derive(Debug, Error)]
pub enum DurableError {
    /// The engine refused the input; nothing changed and nothing was written.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// The store is unavailable. Nothing was acted on; the input waits for a retry if `kept`.
    #[error("{status}")]
    Unavailable { status: Status, kept: bool },
    /// Not leading (lease lost) or halted; nothing was written. See the status.
    #[error("{0}")]
    Stopped(Status),
    #[error(transparent)]
    Encode(#[from] EncodeError),
}

/// A group that does not serialize to JSON (cannot happen with the engine's own types, but serde
/// says it may).
#[derive(Debug, Error)]
#[error("cannot encode group {key}: {source}")]
pub struct EncodeError {
    pub key: String,
    pub source: serde_json::Error,
}

/// What a [`DurableEngine::tick`] did: transitions of retried inputs that committed, and retried
/// inputs the engine now refuses (their time passed: the group was deleted meanwhile, ...).
#[derive(Debug, Default)]
pub struct Tick {
    pub transitions: Vec<Transition>,
    pub refused: Vec<(Input, DurableError)>,
}

/// The queue engine, durable: see the crate documentation.
pub struct DurableEngine<S: Store> {
    engine: Engine,
    store: S,
    fence: Fence,
    options: Options,
    /// Stored version of every group, for conditional puts.
    versions: BTreeMap<String, i64>,
    renewed_at: i64,
    lease_expires_at: i64,
    /// Engine time of the last batch that folded the older usage records.
    usage_folded_at: i64,
    status: Status,
    /// Inputs that failed on an unavailable store, with their times, oldest first.
    waiting: VecDeque<(Input, i64)>,
}

impl<S: Store> DurableEngine<S> {
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    pub fn status(&self) -> &Status {
        &self.status
    }

    pub fn fence(&self) -> &Fence {
        &self.fence
    }

    /// Read access for queries (history, usage) that do not change state.
    pub fn store_mut(&mut self) -> &mut S {
        &mut self.store
    }

    /// Positions, estimated starts and reasons of the waiting groups (`Engine::queue_view`).
    /// Only derived state changes, so nothing is written.
    pub fn queue_view(&mut self, now: i64) -> Vec<muster_queue::Explanation> {
        self.engine.queue_view(now)
    }

    /// The plan for people to look at (`Engine::plan`): the queue view with the windows behind
    /// it. Nothing is written either.
    pub fn plan(&mut self, now: i64) -> muster_queue::Plan {
        self.engine.plan(now)
    }

    /// Gives the store back, e.g. to recover again after stepping down.
    pub fn into_store(self) -> S {
        self.store
    }

    /// Sets a namespace's labels (for queues' namespace selectors). Not stored: the controller
    /// reads them from the cluster after every start.
    pub fn set_namespace_labels(&mut self, namespace: &str, labels: BTreeMap<String, String>) {
        self.engine.set_namespace_labels(namespace, labels);
    }

    pub fn submit(&mut self, spec: GroupSpec, now: i64) -> Result<Vec<Transition>, DurableError> {
        self.input(Input::Submit(spec), now)
    }

    pub fn pods_ready(&mut self, key: &GroupKey, ready: u32, now: i64) -> Result<Vec<Transition>, DurableError> {
        self.input(Input::PodsReady { key: key.clone(), ready }, now)
    }

    pub fn finished(&mut self, key: &GroupKey, succeeded: bool, now: i64) -> Result<Vec<Transition>, DurableError> {
        self.input(Input::Finished { key: key.clone(), succeeded }, now)
    }

    pub fn members_lost(&mut self, key: &GroupKey, members: &[u32], now: i64) -> Result<Vec<Transition>, DurableError> {
        self.input(Input::MembersLost { key: key.clone(), members: members.to_vec() }, now)
    }

    pub fn suspend(&mut self, key: &GroupKey, now: i64) -> Result<Vec<Transition>, DurableError> {
        self.input(Input::Suspend(key.clone()), now)
    }

    pub fn resume(&mut self, key: &GroupKey, now: i64) -> Result<Vec<Transition>, DurableError> {
        self.input(Input::Resume(key.clone()), now)
    }

    pub fn delete(&mut self, key: &GroupKey, now: i64) -> Result<Vec<Transition>, DurableError> {
        self.input(Input::Delete(key.clone()), now)
    }

    pub fn node_added(&mut self, spec: &NodeSpec, now: i64) -> Result<Vec<Transition>, DurableError> {
        self.input(Input::NodeAdded(spec.clone()), now)
    }

    pub fn node_removed(&mut self, name: &str, now: i64) -> Result<Vec<Transition>, DurableError> {
        self.input(Input::NodeRemoved(name.to_string()), now)
    }

    pub fn node_cordoned(&mut self, name: &str, cordoned: bool, now: i64) -> Result<Vec<Transition>, DurableError> {
        self.input(Input::NodeCordoned { name: name.to_string(), cordoned }, now)
    }

    pub fn node_up(&mut self, name: &str, up: bool, now: i64) -> Result<Vec<Transition>, DurableError> {
        self.input(Input::NodeUp { name: name.to_string(), up }, now)
    }

    pub fn reconfigure(&mut self, config: EngineConfig, now: i64) -> Result<Vec<Transition>, DurableError> {
        self.input(Input::Reconfigure(Box::new(config)), now)
    }

    pub fn schedule(&mut self, now: i64) -> Result<Vec<Transition>, DurableError> {
        self.input(Input::Schedule, now)
    }

    /// Runs one input: on a copy of the engine, then persisted, then made current. While the store
    /// is unavailable the input waits (in order) for [`DurableEngine::tick`] to retry it.
    pub fn input(&mut self, input: Input, now: i64) -> Result<Vec<Transition>, DurableError> {
        match &self.status {
            Status::NotLeader { .. } | Status::Halted { .. } => return Err(DurableError::Stopped(self.status.clone())),
            // Later inputs wait behind earlier ones: only `tick` retries, in order.
            Status::StoreUnavailable { .. } => return Err(self.defer(input, now)),
            Status::Leading { .. } => {}
        }
        if let Err(e) = self.ensure_lease(now) {
            return Err(self.store_failed(e, Some((input, now)), now));
        }
        match self.commit(&input, now, now) {
            Err(Failure::Store(e)) => Err(self.store_failed(e, Some((input, now)), now)),
            Err(Failure::Input(e)) => Err(e),
            Ok(ts) => Ok(ts),
        }
    }
}

/// What [`DurableEngine::input_batch`] did: the transitions of the inputs that ran, and the
/// inputs refused with why. Inputs kept for a retry (store unavailable) are listed too: they run
/// later through [`DurableEngine::tick`].
#[derive(Debug, Default)]
pub struct BatchOutcome {
    pub transitions: Vec<Transition>,
    pub refused: Vec<(Input, String)>,
}

impl<S: Store> DurableEngine<S> {
    /// Runs many inputs on one copy of the engine and persists them in one fenced transaction:
    /// the same result as running them one by one (the engine changes nothing on a refused
    /// input), at the cost of one copy and one write instead of one per input. A controller feeds
    /// each batch of watch events through here.
    pub fn input_batch(&mut self, inputs: Vec<Input>, now: i64) -> BatchOutcome {
        let mut out = BatchOutcome::default();
        if inputs.is_empty() {
            return out;
        }
        let unavailable = match &self.status {
            Status::NotLeader { .. } | Status::Halted { .. } => {
                let e = DurableError::Stopped(self.status.clone()).to_string();
                out.refused = inputs.into_iter().map(|i| (i, e.clone())).collect();
                return out;
            }
            Status::StoreUnavailable { .. } => None,
            Status::Leading { .. } => self.ensure_lease(now).err(),
        };
        if matches!(self.status, Status::StoreUnavailable { .. }) || unavailable.is_some() {
            if let Some(e) = unavailable {
                self.store_failed(e, None, now);
            }
            for i in inputs {
                let e = self.defer(i.clone(), now).to_string();
                out.refused.push((i, e));
            }
            return out;
        }
        let mut next = self.engine.clone();
        let mut ran = Vec::new();
        for input in inputs {
            match input.run(&mut next, now) {
                Ok(ts) => {
                    out.transitions.extend(ts);
                    ran.push(input);
                }
                Err(e) => out.refused.push((input, e.to_string())),
            }
        }
        let writes = match self.writes_to(&next, &out.transitions) {
            Ok(w) => w,
            Err(e) => {
                let e = DurableError::from(e).to_string();
                out.refused.extend(ran.into_iter().map(|i| (i, e.clone())));
                out.transitions.clear();
                return out;
            }
        };
        if !writes.is_empty() {
            match self.store.apply(&self.fence, now, &writes) {
                Ok(puts) => rows::note_versions(&mut self.versions, &writes, puts),
                Err(e) => {
                    let first = self.store_failed(e, None, now).to_string();
                    out.transitions.clear();
                    for i in ran {
                        let e = if matches!(self.status, Status::StoreUnavailable { .. }) {
                            self.defer(i.clone(), now).to_string()
                        } else {
                            first.clone()
                        };
                        out.refused.push((i, e));
                    }
                    return out;
                }
            }
        }
        self.engine = next;
        out
    }
}

/// Why a commit failed: the input itself, or the store (handled by the caller of `commit`).
enum Failure {
    Input(DurableError),
    Store(StoreError),
}

impl<S: Store> DurableEngine<S> {
    /// Periodic upkeep: renews the lease when due and, once the backoff has passed, retries the
    /// inputs that waited on an unavailable store, in order. Read [`DurableEngine::status`] after.
    pub fn tick(&mut self, now: i64) -> Tick {
        match &self.status {
            Status::Leading { .. } => {
                if let Err(e) = self.ensure_lease(now) {
                    self.store_failed(e, None, now);
                }
                Tick::default()
            }
            Status::StoreUnavailable { next_attempt, .. } if now >= *next_attempt => self.retry(now),
            _ => Tick::default(),
        }
    }

    /// The inputs waiting for the store, oldest first, with their times.
    pub fn waiting(&self) -> impl Iterator<Item = &(Input, i64)> {
        self.waiting.iter()
    }

    fn leading(&self) -> Status {
        Status::Leading {
            holder: self.fence.holder.clone(),
            epoch: self.fence.epoch,
            lease_expires_at: self.lease_expires_at,
        }
    }

    fn retry(&mut self, now: i64) -> Tick {
        let mut tick = Tick::default();
        if let Err(e) = self.ensure_lease(now) {
            self.store_failed(e, None, now);
            return tick;
        }
        while let Some((input, at)) = self.waiting.front().cloned() {
            match self.commit(&input, at, now) {
                Ok(ts) => tick.transitions.extend(ts),
                Err(Failure::Input(e)) => tick.refused.push((input, e)),
                Err(Failure::Store(e)) => {
                    self.store_failed(e, None, now);
                    return tick;
                }
            }
            self.waiting.pop_front();
        }
        self.status = self.leading();
        tick
    }

    /// Keeps an input for the retry; a cycle is not kept, the next cycle does its work.
    fn defer(&mut self, input: Input, at: i64) -> DurableError {
        let kept = input != Input::Schedule;
        if kept {
            self.waiting.push_back((input, at));
        }
        if let Status::StoreUnavailable { waiting_inputs, .. } = &mut self.status {
            *waiting_inputs = self.waiting.len();
        }
        DurableError::Unavailable { status: self.status.clone(), kept }
    }

    /// Moves to the status a store failure calls for. `input` (not yet waiting) is kept when the
    /// store was only unavailable.
    fn store_failed(&mut self, e: StoreError, input: Option<(Input, i64)>, now: i64) -> DurableError {
        match e {
            StoreError::Unavailable(error) => {
                let (since, attempts) = match &self.status {
                    Status::StoreUnavailable { since, attempts, .. } => (*since, attempts + 1),
                    _ => (now, 1),
                };
                self.status = Status::StoreUnavailable {
                    since,
                    error,
                    attempts,
                    next_attempt: now.saturating_add(self.options.retry.delay(attempts)),
                    waiting_inputs: self.waiting.len(),
                };
                match input {
                    Some((input, at)) => self.defer(input, at),
                    None => DurableError::Unavailable { status: self.status.clone(), kept: false },
                }
            }
            // Whoever leads now recovers from the store and the cluster: waiting inputs are its
            // business, and acting on them here could double-book.
            StoreError::Fenced { name, holder, epoch } => {
                self.waiting.clear();
                self.status = Status::NotLeader { since: now, lease: name, holder, epoch };
                DurableError::Stopped(self.status.clone())
            }
            other => {
                self.waiting.clear();
                self.status = Status::Halted { since: now, error: other.to_string() };
                DurableError::Stopped(self.status.clone())
            }
        }
    }

    /// Renews the lease when due. An expired lease is taken again only if nobody held it in
    /// between (the epoch moved by exactly one); otherwise our state may be stale: `Fenced`.
    fn ensure_lease(&mut self, now: i64) -> Result<(), StoreError> {
        let lease = &self.options.lease;
        if now < self.lease_expires_at && now - self.renewed_at < lease.renew_every_s {
            return Ok(());
        }
        let renewed = now < self.lease_expires_at && self.store.renew_lease(&self.fence, now, lease.ttl_s)?;
        if !renewed {
            let fenced = StoreError::Fenced {
                name: self.fence.name.clone(),
                holder: self.fence.holder.clone(),
                epoch: self.fence.epoch,
            };
            match self.store.acquire_lease(&lease.name, &self.fence.holder, now, lease.ttl_s)? {
                Some(f) if f.epoch <= self.fence.epoch + 1 => self.fence = f,
                Some(f) => {
                    // Give back what we just took, so that a recovering instance can have it.
                    let _ = self.store.release_lease(&f);
                    return Err(fenced);
                }
                None => return Err(fenced),
            }
        }
        self.renewed_at = now;
        self.lease_expires_at = now.saturating_add(self.options.lease.ttl_s);
        if self.status.is_admitting() {
            self.status = self.leading();
        }
        Ok(())
    }

    /// Adds to a batch that writes anyway, at most once an hour of engine time, the folding of the
    /// usage older than a day into one record per (queue, resource), as fair share reads it:
    /// without it the table grows with every group that ends. Without fair share (half-life 0)
    /// nothing reads usage, and it is folded as the default half-life reads it, so that fair
    /// share turned on later with that half-life finds the history it would have had.
    fn fold_usage_when_due(&mut self, now: i64, writes: &mut Vec<Write>) {
        if writes.is_empty() || now < self.usage_folded_at.saturating_add(USAGE_FOLD_EVERY_S) {
            return;
        }
        let half_life_seconds = match self.engine.config().fair_share_half_life_s {
            off if off <= 0 => DEFAULT_FAIR_SHARE_HALF_LIFE_S,
            configured => configured,
        };
        let at = now.saturating_sub(USAGE_KEPT_AS_RECORDED_S);
        writes.push(Write::FoldUsage { at, half_life_seconds, span_seconds: USAGE_FOLD_SPAN_S });
        self.usage_folded_at = now;
    }

    /// Every write that takes the store from the engine to `next`, which `transitions` led to.
    fn writes_to(&mut self, next: &Engine, transitions: &[Transition]) -> Result<Vec<Write>, EncodeError> {
        let history = transitions.iter().map(|t| rows::history_entry(t, t.reason.message())).collect();
        let before = rows::group_map(self.engine.groups());
        let after = rows::group_map(next.groups());
        let mut writes = rows::diff(&before, &after, transitions, history, next.now(), &self.versions)?;
        writes.extend(rows::ended_runs(&before, transitions));
        writes.extend(rows::windows_held(&self.engine, next));
        self.fold_usage_when_due(next.now(), &mut writes);
        Ok(writes)
    }

    /// Runs `input` at `at` on a copy of the engine, writes what changed in one fenced batch at
    /// `now`, and only then makes the copy the engine.
    fn commit(&mut self, input: &Input, at: i64, now: i64) -> Result<Vec<Transition>, Failure> {
        let mut next = self.engine.clone();
        let ts = input.run(&mut next, at).map_err(|e| Failure::Input(e.into()))?;
        let writes = self.writes_to(&next, &ts).map_err(|e| Failure::Input(e.into()))?;
        if !writes.is_empty() {
            let puts = self.store.apply(&self.fence, now, &writes).map_err(Failure::Store)?;
            rows::note_versions(&mut self.versions, &writes, puts);
        }
        self.engine = next;
        Ok(ts)
    }
}
