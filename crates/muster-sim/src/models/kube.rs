//! The default kube-scheduler as a model: one pod at a time from a priority queue (priority, then
//! a creation timestamp), Filter (fit, selector, taints) over a rotating window of nodes, Score by
//! least-allocated cpu and memory, bind. No gang semantics: whatever pods fit, run.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap, HashMap, VecDeque};

use crate::models::gang::Snapshot;
use crate::models::start_unheld;
use crate::models::topology::Slot;
use crate::scheduler::{Action, ClusterView, JobId, NodeId, PodId, PodPhase, Scheduler, SimEvent};

/// Queue order: priority (high first), then the group's timestamp and id, then the pod's.
pub type QKey = (Reverse<i32>, i64, JobId, i64, PodId);

/// kube-scheduler's initial and maximum pod backoff (podInitialBackoffSeconds 1, podMaxBackoffSeconds 10).
const BACKOFF_INITIAL_MS: i64 = 1_000;
const BACKOFF_MAX_MS: i64 = 10_000;
/// podMaxInUnschedulablePodsDuration: unschedulable pods are retried at least this often.
const UNSCHEDULABLE_FLUSH_MS: i64 = 300_000;
/// backoffQOrderingWindowDuration (backend/queue/backoff_queue.go, SchedulerPopFromBackoffQ):
/// backoff expiries are truncated to whole seconds and the backoff queue is flushed on them.
const BACKOFF_WINDOW_MS: i64 = 1_000;

/// The scheduling queue: active (ordered), backoff (by expiry) and unschedulable (parked until a
/// cluster event frees resources, or the flush interval). Pods a plugin rejected for a reason no
/// freed resource can cure wait in a pool of their own for the events that plugin registers (see
/// `park_for_plugin_event`).
#[derive(Debug, Default)]
pub struct PodQueue {
    /// PrioritySort orders by the time a pod was last queued, not its creation: a failed pod
    /// goes behind pods queued after it (coscheduling keeps group order instead).
    pub restamp: bool,
    /// kube-scheduler 1.35's queue: queueing hints requeue unschedulable pods at the event
    /// itself (not at the next pop), backoff expiries are aligned to 1 s ordering windows, and
    /// the backoff queue's head is popped early when the active queue is empty.
    pub v135: bool,
    active: BTreeSet<QKey>,
    backoff: BinaryHeap<Reverse<(i64, QKey)>>,
    parked: VecDeque<(i64, QKey)>,
    /// Unschedulable pods whose rejecting plugin requeues them only on its own events (the
    /// coscheduling plugin: a pod bound, a PodGroup added or updated), not on freed resources.
    parked_plugin: VecDeque<(i64, QKey)>,
    attempts: HashMap<PodId, u32>,
    freed: bool,
}

impl PodQueue {
    pub fn add(&mut self, key: QKey) {
        self.active.insert(key);
    }

    fn backoff_ms(&self, pod: PodId) -> i64 {
        let n = self.attempts.get(&pod).copied().unwrap_or(1).clamp(1, 16);
        (BACKOFF_INITIAL_MS << (n - 1)).min(BACKOFF_MAX_MS)
    }

    fn stamp(&self, key: QKey, now: i64) -> QKey {
        if self.restamp { (key.0, now, key.2, now, key.4) } else { key }
    }

    /// A failed attempt: wait for a cluster event (or the flush).
    pub fn park(&mut self, key: QKey, now: i64) {
        let key = self.stamp(key, now);
        *self.attempts.entry(key.4).or_default() += 1;
        self.parked.push_back((now, key));
    }

    /// A failed attempt rejected by a plugin whose events are not freed resources: the pod waits
    /// in the unschedulable pool for `plugin_event` (or the flush).
    pub fn park_for_plugin_event(&mut self, key: QKey, now: i64) {
        let key = self.stamp(key, now);
        *self.attempts.entry(key.4).or_default() += 1;
        self.parked_plugin.push_back((now, key));
    }

    /// An event the plugin of `park_for_plugin_event` registers happened: with queueing hints
    /// (on by default since kube-scheduler 1.32) its pods move at once, to the active queue if
    /// their backoff is over and to the backoff queue otherwise.
    pub fn plugin_event(&mut self, now: i64) {
        for (at, key) in std::mem::take(&mut self.parked_plugin) {
            self.unpark(at, key, now);
        }
    }

    /// Retry after the pod's backoff, without waiting for an event.
    pub fn retry_later(&mut self, key: QKey, now: i64) {
        let key = self.stamp(key, now);
        *self.attempts.entry(key.4).or_default() += 1;
        let at = now + self.backoff_ms(key.4);
        self.backoff.push(Reverse((at, key)));
    }

    /// Moves the pods `is_sibling` picks from backoff and the unschedulable pods straight to the
    /// active queue, backoff or not (the framework's `Activate`, which coscheduling calls for a
    /// gang's other pods once its first one waits at Permit).
    pub fn activate(&mut self, is_sibling: impl Fn(&QKey) -> bool) {
        let (siblings, rest): (Vec<_>, Vec<_>) =
            std::mem::take(&mut self.backoff).into_iter().partition(|Reverse((_, k))| is_sibling(k));
        self.backoff = rest.into_iter().collect();
        self.active.extend(siblings.into_iter().map(|Reverse((_, k))| k));
        let (siblings, rest): (VecDeque<_>, VecDeque<_>) =
            std::mem::take(&mut self.parked).into_iter().partition(|(_, k)| is_sibling(k));
        self.parked = rest;
        self.active.extend(siblings.into_iter().map(|(_, k)| k));
        let (siblings, rest): (VecDeque<_>, VecDeque<_>) =
            std::mem::take(&mut self.parked_plugin).into_iter().partition(|(_, k)| is_sibling(k));
        self.parked_plugin = rest;
        self.active.extend(siblings.into_iter().map(|(_, k)| k));
    }

    /// Resources were freed somewhere: unschedulable pods move to backoff (or active) next time.
    pub fn cluster_changed(&mut self) {
        self.freed = true;
    }

    /// Whether resources were freed since the unschedulable pods last moved.
    pub fn has_freed(&self) -> bool {
        self.freed
    }

    /// Whether the pod has failed an attempt since it was queued.
    pub fn has_failed(&self, pod: PodId) -> bool {
        self.attempts.contains_key(&pod)
    }

    pub fn forget(&mut self, pod: PodId) {
        self.attempts.remove(&pod);
    }

    /// When a pod that failed at `at` is out of backoff. In 1.35 the expiry is truncated to its
    /// 1 s window and a pod counts as backing off while that window is not yet past
    /// (isPodBackingoff), so it is ready at the start of the next window.
    fn ready_at(&self, at: i64, pod: PodId) -> i64 {
        let expiry = at + self.backoff_ms(pod);
        if self.v135 { expiry.div_euclid(BACKOFF_WINDOW_MS) * BACKOFF_WINDOW_MS + BACKOFF_WINDOW_MS } else { expiry }
    }

    /// Queueing hints (1.35): an assigned pod was deleted or finished (the scheduler's pod
    /// informer drops terminal pods, so completion is a delete to it); NodeResourcesFit's hint
    /// for that is Queue for every pod it rejected, so every unschedulable pod moves now, to the
    /// active queue if its backoff is over and to the backoff queue otherwise.
    pub fn requeue_all(&mut self, now: i64) {
        self.freed = false;
        for (at, key) in std::mem::take(&mut self.parked) {
            self.unpark(at, key, now);
        }
    }

    fn unpark(&mut self, at: i64, key: QKey, now: i64) {
        let ready = self.ready_at(at, key.4);
        if ready <= now {
            self.active.insert(key);
        } else {
            self.backoff.push(Reverse((ready, key)));
        }
    }

    /// The first pod in order that is ready to be tried and still Pending.
    pub fn pop(&mut self, view: &ClusterView<'_>, now: i64) -> Option<QKey> {
        if std::mem::take(&mut self.freed) {
            for (at, key) in std::mem::take(&mut self.parked) {
                self.unpark(at, key, now);
            }
        }
        while self.parked.front().is_some_and(|(at, _)| at + UNSCHEDULABLE_FLUSH_MS <= now) {
            let (at, key) = self.parked.pop_front().expect("checked");
            self.unpark(at, key, now);
        }
        while self.parked_plugin.front().is_some_and(|(at, _)| at + UNSCHEDULABLE_FLUSH_MS <= now) {
            let (at, key) = self.parked_plugin.pop_front().expect("checked");
            self.unpark(at, key, now);
        }
        while self.backoff.peek().is_some_and(|Reverse((at, _))| *at <= now) {
            let Reverse((_, key)) = self.backoff.pop().expect("checked");
            self.active.insert(key);
        }
        while let Some(key) = self.active.pop_first() {
            if view.pod(key.4).phase == PodPhase::Pending {
                return Some(key);
            }
            self.attempts.remove(&key.4);
        }
        // SchedulerPopFromBackoffQ (active_queue.go, unlockedPop): with the active queue empty,
        // the head of the backoff queue is tried at once, backoff or not.
        while self.v135 {
            let Reverse((_, key)) = self.backoff.pop()?;
            if view.pod(key.4).phase == PodPhase::Pending {
                return Some(key);
            }
            self.attempts.remove(&key.4);
        }
        None
    }

    /// When a pod could next become ready to try without an event.
    pub fn next_ready(&self) -> Option<i64> {
        let b = self.backoff.peek().map(|Reverse((at, _))| *at);
        let p = self.parked.front().map(|(at, _)| at + UNSCHEDULABLE_FLUSH_MS);
        let q = self.parked_plugin.front().map(|(at, _)| at + UNSCHEDULABLE_FLUSH_MS);
        [b, p, q].into_iter().flatten().min()
    }

    /// Whether a pod could be tried now: one in the active queue, one out of backoff, or
    /// unschedulable pods about to move after freed resources.
    pub fn has_ready(&self, now: i64) -> bool {
        !self.active.is_empty()
            || (self.freed && !self.parked.is_empty())
            || self.backoff.peek().is_some_and(|Reverse((at, _))| *at <= now)
    }

    pub fn has_active(&self) -> bool {
        !self.active.is_empty() || (self.freed && !self.parked.is_empty()) || (self.v135 && !self.backoff.is_empty())
    }
}

/// Filter and score: the pod's node, or None if no node passes Filter.
pub struct Placer {
    start: usize,
    cpu: Option<usize>,
    mem: Option<usize>,
}

/// kube-scheduler's numFeasibleNodesToFind with the adaptive percentageOfNodesToScore.
pub fn feasible_nodes_to_find(n: usize) -> usize {
    if n < 100 {
        return n;
    }
    let pct = (50 - (n / 125) as i64).max(5) as usize;
    (n * pct / 100).max(100)
}

impl Placer {
    pub fn new(view: &ClusterView<'_>) -> Self {
        Placer { start: 0, cpu: view.resource_index("cpu"), mem: view.resource_index("memory") }
    }

    /// NodeResourcesFit least-allocated: mean over cpu and memory of free-after-placement share.
    fn score(&self, view: &ClusterView<'_>, pod: PodId, node: NodeId, snap: &Snapshot) -> i64 {
        let n = view.node(node);
        let req = view.request(pod);
        let mut sum = 0i64;
        let mut count = 0i64;
        for r in [self.cpu, self.mem].into_iter().flatten() {
            let cap = n.capacity[r] as i128;
            if cap > 0 {
                let used = cap - snap.free(view, node, r) as i128 + req[r] as i128;
                sum += ((cap - used) * 100 / cap) as i64;
                count += 1;
            }
        }
        if count == 0 { 0 } else { sum / count }
    }

    pub fn place(&mut self, view: &ClusterView<'_>, pod: PodId) -> Option<NodeId> {
        self.place_in(view, pod, &Snapshot::default())
    }

    /// `place` against a snapshot: the cluster as it is minus what the snapshot has taken (the
    /// pods a pod-group cycle or a session has placed so far but not yet bound).
    pub fn place_in(&mut self, view: &ClusterView<'_>, pod: PodId, snap: &Snapshot) -> Option<NodeId> {
        self.place_within(view, pod, snap, None)
    }

    /// `place_in` over the nodes `within` marks (all nodes when None): a topology domain.
    pub fn place_within(
        &mut self,
        view: &ClusterView<'_>,
        pod: PodId,
        snap: &Snapshot,
        within: Option<&[bool]>,
    ) -> Option<NodeId> {
        let total = view.nodes().len();
        let want = feasible_nodes_to_find(total);
        let mut found = 0;
        let mut best: Option<(i64, NodeId)> = None;
        let mut last = self.start;
        view.for_each_fitting(pod, self.start, |node| {
            last = node.index();
            if within.is_some_and(|w| !w[node.index()]) || !snap.fits(view, view.request(pod), node) {
                return true;
            }
            found += 1;
            let s = self.score(view, pod, node, snap);
            if best.is_none_or(|(b, _)| s > b) {
                best = Some((s, node));
            }
            found < want
        });
        // The next search starts after the last node examined, as nextStartNodeIndex does.
        if total > 0 {
            self.start = (last + 1) % total;
        }
        best.map(|(_, n)| n)
    }
}

/// The pod-level scheduling loop shared by the default, coscheduling and Kueue models. Without
/// `timing.attemptCost`, one attempt per binding interval, failed or not. With it, the loop runs
/// as kube-scheduler's does (schedule_one.go, ScheduleOne): an attempt costs the loop
/// `attemptCost` whether it binds (the binding goes on asynchronously, through the engine's
/// binder at `bindQps`) or fails (Filter, then DefaultPreemption's dry run); a pod's first
/// failure also writes its PodScheduled=False condition synchronously (handleSchedulingFailure,
/// updatePod; SchedulerAsyncAPICalls is off in 1.35), `statusWrite`, while a repeated identical
/// condition is no write. Time is kept in microseconds so that several
/// attempts fit in one millisecond of the engine.
pub struct KubeCore {
    pub queue: PodQueue,
    pub placer: Option<Placer>,
    /// When the loop is free for its next attempt, in microseconds.
    pub next_attempt_us: i64,
    /// Jobs whose pods were assigned to nodes before they existed (Kueue's TAS writes each pod's
    /// node selector): per node and set, pods still to bind there.
    pub assigned: HashMap<JobId, Vec<Slot>>,
}

impl KubeCore {
    /// `restamp`: order by last queueing time (PrioritySort) rather than by a fixed key.
    pub fn new(restamp: bool) -> Self {
        KubeCore {
            queue: PodQueue { restamp, ..PodQueue::default() },
            placer: None,
            next_attempt_us: 0,
            assigned: HashMap::new(),
        }
    }

    /// With kube-scheduler 1.35's queue (see `PodQueue::v135`); PrioritySort order.
    pub fn new_v135() -> Self {
        KubeCore {
            queue: PodQueue { restamp: true, v135: true, ..PodQueue::default() },
            placer: None,
            next_attempt_us: 0,
            assigned: HashMap::new(),
        }
    }

    /// Handles the pod events every pod-level model treats the same way.
    pub fn on_event(&mut self, event: &SimEvent, view: &ClusterView<'_>, key: impl Fn(PodId) -> QKey) {
        match event {
            SimEvent::PodCreated { pod } => self.queue.add(key(*pod)),
            SimEvent::PodFinished { pod, .. } => {
                self.queue.forget(*pod);
                if view.pod(*pod).node.is_some() {
                    self.queue.cluster_changed();
                }
            }
            _ => {}
        }
    }

    /// Scheduling attempts due by now: failed pods are parked; returns at the first binding.
    pub fn bind_next(&mut self, view: &ClusterView<'_>, now: i64) -> Option<Action> {
        loop {
            let start = self.attempt_start(now)?;
            let key = self.queue.pop(view, now)?;
            let pod = key.4;
            let interval_us = view.timing().bind_interval_ms() * 1000;
            let cost = view.timing().attempt_cost.map(|c| c.0);
            match self.place(view, pod) {
                Some(node) => {
                    self.next_attempt_us = start + cost.unwrap_or(interval_us);
                    self.queue.forget(pod);
                    return Some(Action::Bind { pod, node });
                }
                None => {
                    let write = if self.queue.has_failed(pod) {
                        0
                    } else {
                        view.timing().status_write.map_or(interval_us, |w| w.0)
                    };
                    self.next_attempt_us = start + cost.map_or(interval_us, |c| c + write);
                    self.queue.park(key, now);
                    // Paced by the binder: one attempt per wake-up, as before attemptCost.
                    cost?;
                }
            }
        }
    }

    /// When an attempt due by `now` (ms) starts: where the busy loop left off if that was within
    /// the last millisecond, else now; None if the loop is still busy.
    fn attempt_start(&self, now: i64) -> Option<i64> {
        let now_us = now * 1000;
        let start = if self.next_attempt_us + 1000 > now_us { self.next_attempt_us } else { now_us };
        (start <= now_us).then_some(start)
    }

    /// Takes the next pod to try, if an attempt is due now (one `1/bindQps` interval each).
    pub fn next_pod(&mut self, view: &ClusterView<'_>, now: i64) -> Option<QKey> {
        let start = self.attempt_start(now)?;
        let key = self.queue.pop(view, now)?;
        self.next_attempt_us = start + view.timing().bind_interval_ms() * 1000;
        Some(key)
    }

    /// The pod's node: one of its job's assigned nodes that still has room for it (taking it), or
    /// where the placer finds room.
    pub fn place(&mut self, view: &ClusterView<'_>, pod: PodId) -> Option<NodeId> {
        let p = view.pod(pod);
        if let Some(slots) = self.assigned.get_mut(&p.job) {
            let set = view.job(p.job).set_index(p.index);
            let slot = slots.iter_mut().find(|s| s.set == set && s.left > 0 && view.fits(pod, s.node))?;
            slot.left -= 1;
            return Some(slot.node);
        }
        self.placer.get_or_insert_with(|| Placer::new(view)).place(view, pod)
    }

    /// Adds loop time to the attempt in progress (a pod-group cycle evaluates several pods).
    pub fn charge(&mut self, extra_us: i64) {
        self.next_attempt_us += extra_us;
    }

    pub fn next_wakeup(&self) -> Option<i64> {
        let free = (self.next_attempt_us + 999).div_euclid(1000);
        let ready = if self.queue.has_active() { Some(free) } else { None };
        [ready, self.queue.next_ready().map(|t| t.max(free))].into_iter().flatten().min()
    }
}

/// The pod's first queue key: priority, then its creation time (pods of different jobs interleave).
pub fn pod_key(view: &ClusterView<'_>, pod: PodId) -> QKey {
    let p = view.pod(pod);
    let prio = view.job(p.job).spec.priority;
    (Reverse(prio), p.created_ms, JobId(0), p.created_ms, pod)
}

/// The default scheduler: every job starts at once with all its pods.
pub struct DefaultScheduler {
    core: KubeCore,
    to_start: Vec<JobId>,
}

impl Default for DefaultScheduler {
    fn default() -> Self {
        DefaultScheduler { core: KubeCore::new_v135(), to_start: vec![] }
    }
}

impl Scheduler for DefaultScheduler {
    fn name(&self) -> String {
        "default".into()
    }

    fn on_event(&mut self, event: &SimEvent, view: &ClusterView<'_>, now: i64) {
        if let SimEvent::JobSubmitted { job } = event {
            self.to_start.push(*job);
        }
        self.core.on_event(event, view, |p| pod_key(view, p));
        if matches!(event, SimEvent::PodFinished { .. }) && self.core.queue.has_freed() {
            self.core.queue.requeue_all(now);
        }
    }

    fn decide(&mut self, view: &ClusterView<'_>, now: i64) -> Vec<Action> {
        let mut actions = start_unheld(&mut self.to_start, view);
        actions.extend(self.core.bind_next(view, now));
        actions
    }

    fn next_wakeup(&self) -> Option<i64> {
        self.core.next_wakeup()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn feasible_nodes_follow_kube_scheduler() {
        assert_eq!(feasible_nodes_to_find(50), 50);
        assert_eq!(feasible_nodes_to_find(101), 100);
        assert_eq!(feasible_nodes_to_find(1000), 420);
        assert_eq!(feasible_nodes_to_find(10_000), 500);
    }
}
