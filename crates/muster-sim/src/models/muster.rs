//! muster itself in the simulator: the real queue engine (`muster-queue`) driving the modelled
//! cluster, as the controller will drive a real one. A group is admitted with an exact placement,
//! then its job is started and every pod bound to the node the placement names; nothing is placed
//! pod by pod, so no partial gang ever holds resources. As the controller does, a group reserved
//! to start within its queue's `createPodsAheadS` has its job started early: its pods are made
//! and wait unbound, and are bound as soon as the group is admitted. And as it does for a Job, a
//! group ends when every member's pod has succeeded, not a `jobCompleteDelay` later with the Job.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use muster_graph::ResourceGraph;
use muster_queue::{
    Engine, EngineConfig, GroupKey, GroupSpec, GroupState, MATCH_POLICY, QueuePolicy, Reason, Transition,
};

use crate::scenario::{DEFAULT_QUEUE, Workload};
use crate::scheduler::{Action, ClusterView, JobId, JobPhase, NodeId, PodPhase, Scheduler, SimEvent};
use crate::{RunOptions, SimError};

/// The scheduler names this adapter answers to, with the queue policy each runs.
pub const VARIANTS: [(&str, QueuePolicy); 5] = [
    ("muster", QueuePolicy::Selective { depth: 16, slowdown: 3 }),
    ("muster-conservative", QueuePolicy::Conservative { depth: 16 }),
    ("muster-easy", QueuePolicy::Easy),
    ("muster-fifo", QueuePolicy::StrictFifo),
    ("muster-besteffort", QueuePolicy::BestEffortFifo),
];

const NAMESPACE: &str = "sim";

pub struct Muster {
    name: String,
    engine: Engine,
    /// Node of each member, by job, for groups admitted and not yet finished.
    placements: BTreeMap<JobId, Vec<NodeId>>,
    /// Nodes of members a running group grew by, for its next pods in turn.
    grown: BTreeMap<JobId, VecDeque<NodeId>>,
    /// Actions waiting for the next `decide`.
    pending: Vec<Action>,
    /// Something happened that a scheduling cycle could act on.
    dirty: bool,
    /// The engine's next timer (requeue, reservation start, readiness deadline), in ms.
    next_timer: Option<i64>,
    /// Jobs started ahead of their reserved start, not yet admitted: their pods wait unbound.
    ahead: BTreeSet<JobId>,
    /// When the next reserved group comes within its lead to be started ahead, in ms.
    next_ahead: Option<i64>,
    /// When the last engine cycle ran, in ms.
    last_cycle_ms: Option<i64>,
    /// When the queue view was last refreshed, in ms.
    last_view_ms: Option<i64>,
    /// The first estimated start (ms) the queue view gave each job; none when not measured.
    estimates: Option<BTreeMap<JobId, i64>>,
    /// Jobs waiting without an estimate yet: the view is refreshed only while there are some,
    /// since only first estimates are measured (the forecast behind it is the costly part).
    unestimated: BTreeSet<JobId>,
    /// Groups evicted because a calendar reservation's window opened, by reservation; none when
    /// it holds no reservations.
    window_evictions: Option<BTreeMap<String, u64>>,
    /// Each job's group key, made once: pods report one event after another.
    keys: Vec<GroupKey>,
    /// The job and ready count the engine was last told, while nothing else has reached it
    /// since: the pods of a job ready at one instant are told once (the view gives each event
    /// the count of that instant, and telling the same count again changes nothing).
    ready_told: Option<(JobId, u32)>,
}

/// The least time between two cycles, in ms: the controller's floor (`cycle_gap` in
/// muster-controller), which it keeps to while events stream in. The engine's own run time is not
/// modelled, so the sim never paces slower than this.
const CYCLE_GAP_MS: i64 = 10;

/// How often the queue view with every pending group's estimated start is refreshed, in ms: the
/// controller's default (`queue_view_every`), so a job's first estimate is the one its user
/// would first see.
const QUEUE_VIEW_EVERY_MS: i64 = 5000;

fn key(job: JobId) -> GroupKey {
    GroupKey::new(NAMESPACE, &format!("job-{}", job.0))
}

/// `job`'s key, made the first time it is asked for.
fn key_in(keys: &mut Vec<GroupKey>, job: JobId) -> &GroupKey {
    let i = job.0 as usize;
    while keys.len() <= i {
        keys.push(key(JobId(keys.len() as u32)));
    }
    &keys[i]
}

fn job_of(key: &GroupKey) -> JobId {
    JobId(key.name.trim_start_matches("job-").parse().expect("keys are made by key()"))
}

fn seconds(ms: i64) -> i64 {
    ms.div_euclid(1000)
}

fn engine_error(name: &str, e: impl std::fmt::Display) -> SimError {
    SimError::BadAction { scheduler: name.to_string(), action: "engine".into(), reason: e.to_string() }
}

impl Muster {
    /// As `opts` says: whether it measures estimated starts (`RunOptions::estimates`) and holds
    /// the scenario's calendar reservations (`RunOptions::ignore_reservations`).
    pub fn new(name: &str, policy: QueuePolicy, w: &Workload, opts: &RunOptions) -> Result<Self, SimError> {
        let graph = w.cluster.build(&w.cluster_file)?;
        let mut config: EngineConfig = w.tenants.engine_config(policy);
        let holds = !opts.ignore_reservations && !w.reservations.is_empty();
        if holds {
            config.reservations = w.reservations.clone();
        }
        // Every priority in the workload becomes a class named after its value.
        for job in &w.jobs {
            config.priority_classes.insert(format!("p{}", job.priority), job.priority);
        }
        let engine = Engine::new(ResourceGraph::new(graph, MATCH_POLICY), config).map_err(|e| engine_error(name, e))?;
        Ok(Self {
            name: name.to_string(),
            engine,
            grown: BTreeMap::new(),
            placements: BTreeMap::new(),
            pending: Vec::new(),
            dirty: false,
            next_timer: None,
            ahead: BTreeSet::new(),
            next_ahead: None,
            last_cycle_ms: None,
            last_view_ms: None,
            estimates: opts.estimates.then(BTreeMap::new),
            unestimated: BTreeSet::new(),
            window_evictions: holds.then(BTreeMap::new),
            keys: Vec::new(),
            ready_told: None,
        })
    }

    /// Turns engine transitions into cluster actions.
    fn act(&mut self, transitions: Vec<Transition>, view: &ClusterView<'_>) {
        for t in transitions {
            let job = job_of(&t.key);
            match t.to {
                GroupState::Admitted => {
                    let Some(alloc) = &t.allocation else { continue };
                    let mut nodes = vec![NodeId(0); alloc.members.len()];
                    for m in &alloc.members {
                        nodes[m.index as usize] =
                            view.node_id(&m.node).expect("the engine's graph is the view's cluster");
                    }
                    if self.ahead.remove(&job) && view.job(job).phase == JobPhase::Started {
                        // Its pods made so far are bound now; the rest as they come.
                        for &pod in &view.job(job).pods {
                            let p = view.pod(pod);
                            if p.phase == PodPhase::Pending {
                                self.pending.push(Action::Bind { pod, node: nodes[p.index as usize] });
                            }
                        }
                    } else {
                        self.pending.push(Action::Start { job, members: nodes.len() as u32 });
                    }
                    self.unestimated.remove(&job);
                    self.placements.insert(job, nodes);
                }
                GroupState::Evicted | GroupState::Suspended if t.from.holds_allocation() => {
                    if let (Reason::ReservationStarted { reservation }, Some(counts)) =
                        (&t.reason, self.window_evictions.as_mut())
                    {
                        *counts.entry(reservation.clone()).or_default() += 1;
                    }
                    self.placements.remove(&job);
                    self.grown.remove(&job);
                    self.pending.push(Action::Suspend { job });
                }
                GroupState::Deactivated | GroupState::Failed if !view.job(job).phase.is_terminal() => {
                    self.placements.remove(&job);
                    self.grown.remove(&job);
                    self.ahead.remove(&job);
                    self.pending.push(Action::Fail { job });
                }
                GroupState::Running => match &t.reason {
                    Reason::Grown { members } => self.grow(job, members, &t, view),
                    Reason::GivingWay { members, .. } => self.give_back(job, members, &t, view),
                    _ => {}
                },
                _ => {}
            }
        }
    }

    /// The members' nodes, from the placement a transition carries.
    fn nodes_of(members: &[u32], t: &Transition, view: &ClusterView<'_>) -> Vec<NodeId> {
        let alloc = t.allocation.as_ref().expect("a grown or shrunk group has its placement");
        let node = |m: &u32| alloc.members.iter().find(|x| x.index == *m).map(|x| x.node.as_str());
        members
            .iter()
            .filter_map(node)
            .map(|n| view.node_id(n).expect("the engine's graph is the view's cluster"))
            .collect()
    }

    /// A running group grew: the Job gets as many pods as the group has members, and the new
    /// ones are bound to the new members' nodes.
    fn grow(&mut self, job: JobId, members: &[u32], t: &Transition, view: &ClusterView<'_>) {
        let total = t.allocation.as_ref().map_or(0, |a| a.members.len() as u32);
        self.grown.entry(job).or_default().extend(Self::nodes_of(members, t, view));
        self.pending.push(Action::Grow { job, members: total });
    }

    /// A running group gives back members: a pod of the job's last set (the only one that gives
    /// back) on each of their nodes is deleted (the sim deletes at once), and the engine hears
    /// they are gone.
    fn give_back(&mut self, job: JobId, members: &[u32], t: &Transition, view: &ClusterView<'_>) {
        let mut pods = Vec::new();
        for node in Self::nodes_of(members, t, view) {
            let pod = view.job(job).pods.iter().copied().find(|&p| {
                let s = view.pod(p);
                s.phase.holds() && s.node == Some(node) && view.job(job).in_last_set(s.index) && !pods.contains(&p)
            });
            pods.extend(pod);
        }
        self.pending.push(Action::Shrink { job, pods });
        self.dirty = true;
        match self.engine.members_lost(&t.key, members, t.at) {
            Ok(transitions) => self.act(transitions, view),
            Err(e) => panic!("{}: the engine refused members it asked back: {e}", self.name),
        }
    }

    fn refresh_timer(&mut self) {
        self.next_timer = self.engine.next_timer().map(|s| s * 1000);
    }

    /// Starts the jobs of the groups starting soon (none whose deadline counts from the start),
    /// and notes when the next one will be.
    fn start_ahead(&mut self, view: &ClusterView<'_>, now_ms: i64) {
        let may = |job: JobId| {
            let j = view.job(job);
            j.phase == JobPhase::Suspended && j.spec.deadline_ms.is_none()
        };
        for g in self.engine.starting_soon(seconds(now_ms)) {
            let job = job_of(&g.spec.key);
            if !self.ahead.contains(&job) && may(job) {
                self.ahead.insert(job);
                self.pending.push(Action::Start { job, members: g.spec.request.max_members });
            }
        }
        let lead = self.engine.config().queues[0].create_pods_ahead_s;
        self.next_ahead = self
            .engine
            .starting_soon(i64::MAX)
            .filter(|g| !self.ahead.contains(&job_of(&g.spec.key)) && may(job_of(&g.spec.key)))
            .filter_map(|g| g.reserved_at)
            .map(|t| t.saturating_sub(lead).saturating_mul(1000))
            .filter(|&t| t > now_ms)
            .min();
    }
}

impl Scheduler for Muster {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn on_event(&mut self, event: &SimEvent, view: &ClusterView<'_>, now_ms: i64) {
        let now = seconds(now_ms);
        if !matches!(event, SimEvent::PodReady { .. }) {
            self.ready_told = None;
        }
        let result = match *event {
            SimEvent::JobSubmitted { job } => {
                let spec = &view.job(job).spec;
                let queue = match spec.queue {
                    Some(q) => self.engine.config().queues[q].name.clone(),
                    None => DEFAULT_QUEUE.to_string(),
                };
                self.dirty = true;
                if self.estimates.is_some() {
                    self.unestimated.insert(job);
                }
                self.engine.submit(
                    GroupSpec {
                        key: key(job),
                        queue,
                        priority_class: Some(format!("p{}", spec.priority)),
                        request: spec.to_group_request(),
                        submitted_at: now,
                    },
                    now,
                )
            }
            SimEvent::PodCreated { pod } => {
                // The job controller made a pod of an admitted job: bind it where the placement says.
                let p = view.pod(pod);
                let placed = self.placements.get(&p.job).and_then(|n| n.get(p.index as usize)).copied();
                let node = placed.or_else(|| self.grown.get_mut(&p.job).and_then(|g| g.pop_front()));
                if let Some(node) = node {
                    self.pending.push(Action::Bind { pod, node });
                }
                Ok(Vec::new())
            }
            SimEvent::PodReady { pod } => {
                let job = view.pod(pod).job;
                let ready = view.job(job).ready;
                if self.ready_told == Some((job, ready)) {
                    Ok(Vec::new())
                } else {
                    self.ready_told = Some((job, ready));
                    self.engine.pods_ready(key_in(&mut self.keys, job), ready, now)
                }
            }
            SimEvent::PodFinished { pod, succeeded: true } => {
                // As the controller does for a Job: its group ends once every member's pod has
                // succeeded, before the Job is marked Complete.
                let job = view.pod(pod).job;
                let key = key_in(&mut self.keys, job);
                match view.all_succeeded(job).then(|| self.engine.group(key).map(|g| g.state)).flatten() {
                    Some(s) if s.holds_allocation() => {
                        self.placements.remove(&job);
                        self.grown.remove(&job);
                        self.dirty = true;
                        self.engine.finished(key, true, now)
                    }
                    _ => Ok(Vec::new()),
                }
            }
            SimEvent::JobFinished { job, succeeded } => {
                self.placements.remove(&job);
                self.grown.remove(&job);
                self.dirty = true;
                let key = key_in(&mut self.keys, job);
                let finished = match self.engine.group(key).map(|g| g.state) {
                    Some(s) if s.holds_allocation() => self.engine.finished(key, succeeded, now),
                    _ => Ok(Vec::new()),
                };
                // As the controller does when a finished Job is deleted: the engine forgets its
                // group (what it learned of the run is kept apart). Nothing in the sim asks for
                // an ended group, and a trace's history held would cost memory per job run.
                finished.and_then(|mut out| match self.engine.group(key) {
                    Some(_) => self.engine.delete(key, now).map(|deleted| {
                        out.extend(deleted);
                        out
                    }),
                    None => Ok(out),
                })
            }
            _ => Ok(Vec::new()),
        };
        match result {
            // Timers are set by cycles (admissions, evictions, reservations); an event can only
            // clear one, and a stale timer costs one idle wakeup, so only cycles refresh them.
            Ok(transitions) => self.act(transitions, view),
            Err(e) => panic!("{}: the engine refused a simulated event: {e}", self.name),
        }
    }

    fn decide(&mut self, view: &ClusterView<'_>, now_ms: i64) -> Vec<Action> {
        let now = seconds(now_ms);
        self.ready_told = None;
        let due = self.dirty || self.next_timer.is_some_and(|t| t <= now_ms);
        let earliest = self.last_cycle_ms.map_or(now_ms, |t| t + CYCLE_GAP_MS);
        if due && now_ms < earliest {
            // Events within the gap wait for the next cycle, as they do in the controller.
            self.next_timer = Some(match self.next_timer {
                Some(t) if t > now_ms => t.min(earliest),
                _ => earliest,
            });
        } else if due {
            self.dirty = false;
            self.last_cycle_ms = Some(now_ms);
            let transitions = self.engine.schedule(now);
            self.act(transitions, view);
            self.refresh_timer();
            self.start_ahead(view, now_ms);
        } else if self.next_ahead.is_some_and(|t| t <= now_ms) {
            self.start_ahead(view, now_ms);
        }
        if let Some(estimates) = self.estimates.as_mut()
            && !self.unestimated.is_empty()
            && self.last_view_ms.is_none_or(|t| now_ms >= t + QUEUE_VIEW_EVERY_MS)
        {
            self.last_view_ms = Some(now_ms);
            // Only first estimates are measured: a view that could give none is skipped.
            let news = |k: &GroupKey| self.unestimated.contains(&job_of(k));
            let views = if self.engine.estimable().any(news) { self.engine.queue_view(now) } else { Vec::new() };
            for e in views {
                if let Some(t) = e.estimated_start {
                    let job = job_of(&e.key);
                    if self.unestimated.remove(&job) {
                        estimates.insert(job, t * 1000);
                    }
                }
            }
        }
        std::mem::take(&mut self.pending)
    }

    fn next_wakeup(&self) -> Option<i64> {
        self.next_timer.into_iter().chain(self.next_ahead).min()
    }

    fn estimated_starts(&self) -> Option<&BTreeMap<JobId, i64>> {
        self.estimates.as_ref()
    }

    fn window_evictions(&self) -> Option<&BTreeMap<String, u64>> {
        self.window_evictions.as_ref()
    }
}
