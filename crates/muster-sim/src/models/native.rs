//! kube-scheduler's native gang scheduling (1.37, Workload and PodGroup, the `GangScheduling`
//! plugin) as a model: each job is a gang PodGroup with minCount = the job's min members. Its pods
//! enter the scheduling queue only once minCount of them exist (PreEnqueue); the group is then
//! scheduled as a unit in one pod-group cycle against one snapshot of the cluster: its pending pods
//! are placed one after the other, and unless at least minCount (with those already placed) find
//! a node, the whole attempt is reverted and the group backs off as a whole before its next cycle
//! ([`group_backoff`]; no cluster event shortens it). Placed pods are released to binding together
//! (Permit). Once a group was scheduled, pods it still lacks are placed as they fit. No queue,
//! quota or reservation for groups: the scheduling queue orders them by priority and the time
//! they were last queued, as PrioritySort orders pods. With TopologyAwareWorkloadScheduling (alpha,
//! on in the harness), a required topology constraint keeps the group within one domain
//! (`topology::place_gang`); the API has no preferred constraint.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};

use crate::models::gang::{self, Snapshot};
use crate::models::kube::{KubeCore, pod_key};
use crate::models::start_unheld;
use crate::models::topology::{self, Domains, Honours};
use crate::scenario::NativeConfig;
use crate::scheduler::{Action, ClusterView, JobId, Scheduler, SimEvent};

pub struct Native {
    core: KubeCore,
    cfg: NativeConfig,
    /// Rejected pod-group cycles of each group since its last successful one.
    rejections: BTreeMap<JobId, u32>,
    to_start: Vec<JobId>,
    /// Groups with an entry in the scheduling queue or waiting for their retry.
    queued: BTreeSet<JobId>,
    /// Groups whose first pod-group cycle succeeded (PodGroupInitiallyScheduled=True).
    scheduled: BTreeSet<JobId>,
    retries: BinaryHeap<Reverse<(i64, JobId)>>,
    domains: Domains,
}

impl Native {
    pub fn new(cfg: &NativeConfig) -> Self {
        Native {
            // PrioritySort (priority, then the time last queued); a rejected group's pods do not
            // go through the per-pod backoff and unschedulable pool: the group backs off whole.
            core: KubeCore::new(true),
            cfg: cfg.clone(),
            rejections: BTreeMap::new(),
            to_start: vec![],
            queued: BTreeSet::new(),
            scheduled: BTreeSet::new(),
            retries: BinaryHeap::new(),
            domains: Domains::default(),
        }
    }

    /// Queues the group under its first pending pod, if it has one and is not queued already.
    fn enqueue(&mut self, view: &ClusterView<'_>, job: JobId, now: i64) {
        if self.queued.contains(&job) {
            return;
        }
        if let Some(&pod) = gang::pending_pods(view, job).first() {
            let k = pod_key(view, pod);
            self.core.queue.add((k.0, now, k.2, now, k.4));
            self.queued.insert(job);
        }
    }
}

impl Scheduler for Native {
    fn name(&self) -> String {
        "native".into()
    }

    fn on_event(&mut self, event: &SimEvent, view: &ClusterView<'_>, now: i64) {
        match event {
            SimEvent::JobSubmitted { job } => self.to_start.push(*job),
            // PreEnqueue: nothing of the group is queued until minCount pods exist.
            SimEvent::PodCreated { pod } => {
                let job = view.pod(*pod).job;
                if self.scheduled.contains(&job) || gang::group_complete(view, job) {
                    self.enqueue(view, job, now);
                }
            }
            SimEvent::JobFinished { job, .. } => {
                self.scheduled.remove(job);
            }
            _ => {}
        }
    }

    fn decide(&mut self, view: &ClusterView<'_>, now: i64) -> Vec<Action> {
        let mut actions = start_unheld(&mut self.to_start, view);
        while self.retries.peek().is_some_and(|Reverse((t, _))| *t <= now) {
            let Reverse((_, job)) = self.retries.pop().expect("checked");
            self.queued.remove(&job);
            if !view.job(job).phase.is_terminal() {
                self.enqueue(view, job, now);
            }
        }
        if !actions.is_empty() {
            return actions;
        }
        let Some(key) = self.core.next_pod(view, now) else { return actions };
        let job = view.pod(key.4).job;
        self.queued.remove(&job);
        let need = if self.scheduled.contains(&job) {
            0
        } else {
            view.job(job).spec.min_members.saturating_sub(gang::placed_members(view, job))
        };
        let result = topology::place_gang(
            view,
            &mut Snapshot::default(),
            job,
            need,
            &mut self.core.placer,
            &mut self.domains,
            Honours::RequiredOnly,
        );
        // The cycle's loop time: one attempt per pod evaluated (next_pod charged the first).
        let per_pod = view.timing().attempt_cost.map_or(view.timing().bind_interval_ms() * 1000, |c| c.0);
        self.core.charge(per_pod * (i64::from(result.evaluated) - 1).max(0));
        if result.accepted && !result.placed.is_empty() {
            self.scheduled.insert(job);
            self.rejections.remove(&job);
            actions.extend(result.placed.into_iter().map(|(pod, node)| Action::Bind { pod, node }));
        }
        // Pods left over (the gang was rejected, or a scheduled group still lacks some) try again
        // once the group's backoff is over, counted from the end of this cycle.
        let left = gang::pending_pods(view, job).len().saturating_sub(actions.len());
        if left > 0 {
            let count = self.rejections.entry(job).or_default();
            *count += 1;
            let at = group_backoff(&self.cfg, *count, left, (self.core.next_attempt_us / 1000).max(now));
            self.queued.insert(job);
            self.retries.push(Reverse((at, job)));
        }
        actions
    }

    fn next_wakeup(&self) -> Option<i64> {
        let r = self.retries.peek().map(|Reverse((t, _))| *t);
        [self.core.next_wakeup(), r].into_iter().flatten().min()
    }
}

/// When a pod group rejected for the `count`th time in a row at `end` (ms) with `pods` pods still
/// unscheduled is tried again, as kube-scheduler 1.37 computes it (backend/queue/backoff_queue.go):
/// the group's own backoff, initial x 2^(count-1), capped at max x sqrt(pods); its expiry is
/// rounded down to the whole second, and the backoff queue is flushed on the next whole second.
/// No cluster event (a pod ending, a node added) moves a group out of backoff early.
pub fn group_backoff(cfg: &NativeConfig, count: u32, pods: usize, end: i64) -> i64 {
    let doubled = cfg.pod_initial_backoff.0.saturating_mul(1i64 << count.saturating_sub(1).min(40));
    let cap = (cfg.pod_max_backoff.0 as f64 * (pods.max(1) as f64).sqrt()) as i64;
    let expiry = end.saturating_add(doubled.min(cap));
    (expiry / 1000) * 1000 + 1000
}
