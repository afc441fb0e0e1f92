//! kube-scheduler's native gang scheduling (1.37, Workload and PodGroup, the `GangScheduling`
//! plugin) as a model: each job is a gang PodGroup with minCount = the job's min members. Its pods
//! enter the scheduling queue only once minCount of them exist (PreEnqueue); the group is then
//! scheduled as a unit in one pod-group cycle against one snapshot of the cluster: its pending pods
//! are placed one after the other, and unless at least minCount (with those already placed) find
//! a node, the whole attempt is reverted and the group waits `gangRetry` before its next cycle
//! (measured; it is not moved by cluster events). Placed pods are released to binding together
//! (Permit). Once a group was scheduled, pods it still lacks are placed as they fit. No queue,
//! quota or reservation for groups: the scheduling queue orders them by priority and the time
//! they were last queued, as PrioritySort orders pods. With TopologyAwareWorkloadScheduling (alpha,
//! on in the harness), a required topology constraint keeps the group within one domain
//! (`topology::place_gang`); the API has no preferred constraint.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap};

use crate::models::gang::{self, Snapshot};
use crate::models::kube::{KubeCore, pod_key};
use crate::models::start_unheld;
use crate::models::topology::{self, Domains, Honours};
use crate::scenario::NativeConfig;
use crate::scheduler::{Action, ClusterView, JobId, Scheduler, SimEvent};

pub struct Native {
    core: KubeCore,
    retry_ms: i64,
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
            // go through the per-pod backoff and unschedulable pool, they wait `retry_ms`.
            core: KubeCore::new(true),
            retry_ms: cfg.gang_retry.0,
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
            actions.extend(result.placed.into_iter().map(|(pod, node)| Action::Bind { pod, node }));
        }
        // Pods left over (the gang was rejected, or a scheduled group still lacks some) try again.
        if actions.len() < gang::pending_pods(view, job).len() {
            self.queued.insert(job);
            self.retries.push(Reverse((now + self.retry_ms, job)));
        }
        actions
    }

    fn next_wakeup(&self) -> Option<i64> {
        let r = self.retries.peek().map(|Reverse((t, _))| *t);
        [self.core.next_wakeup(), r].into_iter().flatten().min()
    }
}
