//! Volcano (1.15, the Helm chart's configuration: actions enqueue, allocate, backfill; plugins
//! gang, proportion, overcommit among others) as a model, for plain batch/v1 Jobs given to it:
//! each job gets a PodGroup with minMember = the job's min members and minResources = minMember x
//! its pod's requests, in the one queue `default`, or with tenants in its tenant's queue under
//! the `capacity` plugin in place of `proportion` (capacity.rs). The scheduler runs a session
//! every `schedulePeriod`:
//! - enqueue: PodGroups still Pending, by priority then creation (with tenants, queue by queue
//!   in the capacity plugin's queue order), go Inqueue when their minResources fit; the rest wait
//!   (a group that does not fit does not block those behind it).
//!   `proportion`: the queue's allocated + Inqueue-but-unallocated + minResources must not exceed
//!   the cluster (the queue's capability); with tenants `capacity`'s check against the queue's
//!   realCapability instead; `overcommit`: Inqueue-but-unallocated + minResources must not
//!   exceed factor x the cluster minus what pods use.
//! - allocate: Inqueue and running groups, by priority, unready ones first, then creation: a group
//!   with fewer than minMember pods is skipped (not valid); otherwise its pending pods are placed
//!   one after the other on the session's snapshot and kept only if the group then has minMember
//!   placed (the statement is committed) or it had them already; else discarded. Committed pods
//!   bind (through the binder at `bindQps`). With tenants, queues take turns by share, and a pod
//!   is placed only while its queue stays within its realCapability.
//! - backfill places only pods without requests: none here.
//! - reclaim, with tenants and `reclaim` on (reclaim.rs): lent room taken back pod by pod.
//!
//! Node choice: the default model's Filter and least-allocated score (the chart's `binpack` and
//! `nodeorder`'s least-requested weigh the same and pull opposite ways). No preemption,
//! pipelining onto releasing resources or drf; sessions take no time. A job with a
//! topology constraint is placed as network-topology-aware scheduling places a PodGroup whose
//! HyperNodes follow the cluster's levels: hard mode for required, soft for preferred
//! (`topology::place_gang`).

mod capacity;
pub mod queue_specs;
mod reclaim;

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};

use capacity::Queues;

use crate::models::gang::{self, Snapshot};
use crate::models::kube::Placer;
use crate::models::start_unheld;
use crate::models::topology::{self, Domains, Honours};
use crate::scenario::{Tenants, VolcanoConfig};
use crate::scheduler::{Action, ClusterView, JobId, PodPhase, Scheduler, SimEvent};

/// Job order: priority (high first), then creation.
type Key = (Reverse<i32>, i64, JobId);
/// Allocate's job order within a queue: priority, then gang (groups below minMember first),
/// then creation.
type AllocKey = (Reverse<i32>, bool, i64, JobId);

pub struct Volcano {
    cfg: VolcanoConfig,
    placer: Option<Placer>,
    to_start: Vec<JobId>,
    /// PodGroups Pending (not yet enqueued), in job order.
    pending: BTreeSet<Key>,
    /// PodGroups Inqueue or Running (enqueue admitted them), in job order.
    inqueue: BTreeSet<Key>,
    /// Inqueue groups that have had minMember placed (they count nothing more at enqueue).
    allocated: BTreeSet<JobId>,
    /// Inqueue groups with every pod of the job placed: nothing for allocate to do.
    placed_all: BTreeSet<JobId>,
    /// Cluster capacity and what pods hold, by resource index (pods are placed by this model
    /// only, so what it binds and what ends keep the count).
    total: Vec<u64>,
    used: Vec<u64>,
    next_session: i64,
    domains: Domains,
    tenants: Tenants,
    /// The tenants' queues under the capacity plugin; none without tenants (one queue,
    /// `proportion`).
    queues: Option<Queues>,
}

impl Volcano {
    pub fn new(cfg: &VolcanoConfig, tenants: &Tenants) -> Self {
        Volcano {
            cfg: cfg.clone(),
            placer: None,
            to_start: vec![],
            pending: BTreeSet::new(),
            inqueue: BTreeSet::new(),
            allocated: BTreeSet::new(),
            placed_all: BTreeSet::new(),
            total: vec![],
            used: vec![],
            next_session: 0,
            domains: Domains::default(),
            tenants: tenants.clone(),
            queues: None,
        }
    }

    fn key(view: &ClusterView<'_>, job: JobId) -> Key {
        let j = view.job(job);
        (Reverse(j.spec.priority), j.spec.submit_ms, job)
    }

    /// A group's minResources: what its first minMember pods ask, set by set.
    fn min_resources(view: &ClusterView<'_>, job: JobId) -> Vec<u64> {
        let j = view.job(job);
        (0..view.resources().len()).map(|r| j.total(j.spec.min_members, r)).collect()
    }

    /// What the Inqueue groups of `queue` (every group when None) still need of their
    /// minResources (allocated pods count against it).
    fn inqueue_unallocated(&self, view: &ClusterView<'_>, queue: Option<usize>) -> Vec<u64> {
        let mut sum = vec![0u64; self.total.len()];
        for &(_, _, job) in &self.inqueue {
            if self.allocated.contains(&job) || queue.is_some_and(|q| view.job(job).spec.queue != Some(q)) {
                continue;
            }
            let mut left = Self::min_resources(view, job);
            for &pod in &view.job(job).pods {
                let phase = view.pod(pod).phase;
                if phase.holds() || phase == PodPhase::Succeeded {
                    for (l, r) in left.iter_mut().zip(view.request(pod)) {
                        *l = l.saturating_sub(*r);
                    }
                }
            }
            for (s, l) in sum.iter_mut().zip(left) {
                *s += l;
            }
        }
        sum
    }

    /// The capacity plugin's elastic part of queue `q`: what its groups hold beyond their
    /// minResources.
    fn elastic(&self, view: &ClusterView<'_>, q: usize) -> Vec<u64> {
        let mut sum = vec![0u64; self.total.len()];
        for &(_, _, job) in &self.inqueue {
            let j = view.job(job);
            let placed = gang::placed_members(view, job);
            if j.spec.queue == Some(q) && placed > j.spec.min_members {
                for (r, s) in sum.iter_mut().enumerate() {
                    *s += j.total(placed, r) - j.total(j.spec.min_members, r);
                }
            }
        }
        sum
    }

    /// At a session's start: what each queue's pods hold.
    fn open_queues(&mut self, view: &ClusterView<'_>) {
        let Some(queues) = &mut self.queues else { return };
        for a in &mut queues.allocated {
            a.fill(0);
        }
        for &(_, _, job) in &self.inqueue {
            let Some(q) = view.job(job).spec.queue else { continue };
            for &pod in &view.job(job).pods {
                if view.pod(pod).phase.holds() {
                    queues.hold(q, view.request(pod), true);
                }
            }
        }
    }

    fn enqueue(&mut self, view: &ClusterView<'_>) {
        let pods = view.resource_index("pods");
        let mut inqueue = self.inqueue_unallocated(view, None);
        // Per tenant's queue: what its Inqueue groups still need, and its elastic part.
        let n = self.queues.as_ref().map_or(0, Queues::len);
        let mut queue_inqueue: Vec<Vec<u64>> = (0..n).map(|q| self.inqueue_unallocated(view, Some(q))).collect();
        let elastic: Vec<Vec<u64>> = (0..n).map(|q| self.elastic(view, q)).collect();
        let mut admitted = vec![];
        for key in self.enqueue_order(view) {
            let job = key.2;
            let j = view.job(job);
            // The PodGroup exists once the Job controller created a pod (the PodGroup controller
            // makes it from the pod's owner).
            if j.pods.is_empty() {
                continue;
            }
            let min = Self::min_resources(view, job);
            let asked = || (0..min.len()).filter(|&r| Some(r) != pods && min[r] > 0);
            let overcommit = asked().all(|r| {
                let limit = (self.total[r] as f64 * self.cfg.overcommit_factor) as u64;
                !self.cfg.overcommit || inqueue[r] + min[r] <= limit.saturating_sub(self.used[r])
            });
            // The queue's check: `capacity` for a tenant's queue, else `proportion` (the cluster
            // is the one queue's capability).
            let queue_ok = match (&self.queues, j.spec.queue) {
                (Some(queues), Some(q)) => queues.enqueueable(q, &min, &queue_inqueue, &elastic),
                _ => asked().all(|r| self.used[r] + inqueue[r] + min[r] <= self.total[r]),
            };
            if overcommit && queue_ok {
                admitted.push(key);
                for (q, m) in inqueue.iter_mut().zip(&min) {
                    *q += m;
                }
                if let Some(q) = j.spec.queue.filter(|&q| q < n) {
                    for (i, m) in queue_inqueue[q].iter_mut().zip(&min) {
                        *i += m;
                    }
                }
            }
        }
        for key in admitted {
            self.pending.remove(&key);
            self.inqueue.insert(key);
        }
    }

    /// The Pending groups in the order enqueue tries them (enqueue.go): queue by queue in
    /// QueueOrderFn's order (shares do not move while groups only go Inqueue), each queue's in
    /// job order; one queue without tenants.
    fn enqueue_order(&self, view: &ClusterView<'_>) -> Vec<Key> {
        let Some(queues) = &self.queues else { return self.pending.iter().copied().collect() };
        let queue_of = |key: &Key| view.job(key.2).spec.queue.unwrap_or(0);
        let mut waiting: Vec<usize> = self.pending.iter().map(queue_of).collect();
        waiting.sort_unstable();
        waiting.dedup();
        let order = queues.ordered(waiting);
        order.into_iter().flat_map(|q| self.pending.iter().filter(move |k| queue_of(k) == q).copied()).collect()
    }

    /// The allocate action; returns the session's snapshot of what it placed.
    fn allocate(&mut self, view: &ClusterView<'_>, actions: &mut Vec<Action>) -> Snapshot {
        let mut snap = Snapshot::default();
        // Jobs by queue (one list without tenants), each in tier 1's order: priority, then gang
        // (groups below minMember first), then creation.
        let mut by_queue: BTreeMap<usize, Vec<AllocKey>> = BTreeMap::new();
        for &(prio, submit, job) in self.inqueue.iter().filter(|k| !self.placed_all.contains(&k.2)) {
            let q = if self.queues.is_some() { view.job(job).spec.queue.unwrap_or(0) } else { 0 };
            by_queue.entry(q).or_default().push((prio, self.allocated.contains(&job), submit, job));
        }
        for jobs in by_queue.values_mut() {
            jobs.sort_unstable_by(|a, b| b.cmp(a));
        }
        // Each turn the queue first in QueueOrderFn (its share as placed so far) gives its next
        // job (allocate.go).
        loop {
            let next = match &self.queues {
                Some(queues) => queues.first(by_queue.iter().filter(|(_, j)| !j.is_empty()).map(|(q, _)| q)),
                None => by_queue.keys().next().copied(),
            };
            let Some((_, ready, _, job)) = next.and_then(|q| by_queue.get_mut(&q)).and_then(Vec::pop) else {
                break;
            };
            self.allocate_job(view, &mut snap, job, ready, actions);
        }
        snap
    }

    fn allocate_job(
        &mut self,
        view: &ClusterView<'_>,
        snap: &mut Snapshot,
        job: JobId,
        ready: bool,
        actions: &mut Vec<Action>,
    ) {
        // Gang's JobValid: fewer than minMember pods exist, the group is skipped.
        if !gang::group_complete(view, job) {
            return;
        }
        let j = view.job(job);
        let placed_before = gang::placed_members(view, job);
        let need = if ready { 0 } else { j.spec.min_members.saturating_sub(placed_before) };
        let before = snap.clone();
        let mut result =
            topology::place_gang(view, snap, job, need, &mut self.placer, &mut self.domains, Honours::Both);
        if let (Some(queues), Some(q)) = (&mut self.queues, j.spec.queue) {
            // AllocatableFn: pods are placed one by one while the queue stays within its
            // realCapability; the job keeps them only if it then has minMember.
            let allowed = result
                .placed
                .iter()
                .take_while(|&&(pod, _)| {
                    let ok = queues.allocatable(q, view.request(pod));
                    if ok {
                        queues.hold(q, view.request(pod), true);
                    }
                    ok
                })
                .count();
            if allowed < result.placed.len() {
                for &(pod, _) in &result.placed[..allowed] {
                    queues.hold(q, view.request(pod), false);
                }
                *snap = before;
                result.placed.truncate(if (allowed as u32) < need { 0 } else { allowed });
                for &(pod, node) in &result.placed {
                    snap.take(view.request(pod), node);
                    queues.hold(q, view.request(pod), true);
                }
            }
        }
        let placed = placed_before + result.placed.len() as u32;
        if placed >= j.spec.min_members {
            self.allocated.insert(job);
        }
        let pending_left = gang::pending_pods(view, job).len() - result.placed.len();
        if pending_left == 0 && j.pods.len() as u32 == j.members {
            self.placed_all.insert(job);
        }
        for (pod, node) in result.placed {
            for (u, r) in self.used.iter_mut().zip(view.request(pod)) {
                *u += r;
            }
            actions.push(Action::Bind { pod, node });
        }
    }
}

impl Scheduler for Volcano {
    fn name(&self) -> String {
        "volcano".into()
    }

    fn on_event(&mut self, event: &SimEvent, view: &ClusterView<'_>, now: i64) {
        if self.total.is_empty() {
            let dims = view.resources().len();
            self.total = (0..dims).map(|r| view.nodes().iter().map(|n| n.capacity[r]).sum()).collect();
            self.used = vec![0; dims];
            if !self.tenants.is_empty() {
                self.queues = Some(Queues::new(&self.tenants, view.resources(), &self.total));
            }
        }
        match event {
            SimEvent::JobSubmitted { job } => {
                // Idle, the scheduler was not woken: the next session is the next period boundary.
                if self.pending.is_empty() && self.inqueue.is_empty() {
                    let p = self.cfg.schedule_period.0;
                    self.next_session = self.next_session.max((now + p - 1).div_euclid(p) * p);
                }
                self.to_start.push(*job);
                self.pending.insert(Self::key(view, *job));
            }
            SimEvent::PodCreated { pod } => {
                self.placed_all.remove(&view.pod(*pod).job);
            }
            SimEvent::PodFinished { pod, .. } => {
                let p = view.pod(*pod);
                if p.node.is_some() {
                    for (u, r) in self.used.iter_mut().zip(view.request(*pod)) {
                        *u -= r;
                    }
                }
            }
            SimEvent::JobFinished { job, .. } => {
                let key = Self::key(view, *job);
                self.pending.remove(&key);
                self.inqueue.remove(&key);
                self.allocated.remove(job);
                self.placed_all.remove(job);
            }
            _ => {}
        }
    }

    fn decide(&mut self, view: &ClusterView<'_>, now: i64) -> Vec<Action> {
        let mut actions = start_unheld(&mut self.to_start, view);
        if !actions.is_empty() || now < self.next_session {
            return actions;
        }
        let period = self.cfg.schedule_period.0;
        self.next_session = (now.div_euclid(period) + 1) * period;
        self.open_queues(view);
        self.enqueue(view);
        let snap = self.allocate(view, &mut actions);
        if self.cfg.reclaim && self.queues.is_some() {
            self.reclaim(view, snap, &mut actions);
        }
        actions
    }

    fn next_wakeup(&self) -> Option<i64> {
        (!self.pending.is_empty() || !self.inqueue.is_empty()).then_some(self.next_session)
    }
}
