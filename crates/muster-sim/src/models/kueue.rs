//! Kueue as a model: one ClusterQueue with BestEffortFIFO over workloads (priority, then the
//! queue timestamp), nominal quota on every resource the jobs request; an admitted job is unsuspended and its pods
//! go to the default scheduler model. Optionally waitForPodsReady: admission blocks while an
//! admitted workload is not PodsReady, and a workload not ready within the timeout is evicted
//! (suspended, pods deleted) and requeued after an exponential backoff, or deactivated after
//! `backoffLimitCount` requeues. A job with a topology constraint goes through Topology-Aware
//! Scheduling: admitted only with an assignment of its pods to nodes of one domain
//! (`topology::assign`; a preferred constraint that no domain meets is admitted unassigned).

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};

use crate::models::gang::Snapshot;
use crate::models::kube::{KubeCore, pod_key};
use crate::models::topology::{self, Domains};
use crate::scenario::{KueueConfig, RequeueTimestamp};
use crate::scheduler::{Action, ClusterView, JobId, Scheduler, SimEvent};

#[derive(Debug, Clone, Copy)]
struct Admitted {
    ready: bool,
    /// waitForPodsReady deadline.
    deadline: Option<i64>,
}

pub struct Kueue {
    core: KubeCore,
    cfg: KueueConfig,
    wait_for_pods_ready: bool,
    /// Covered resource indices and their nominal quota.
    quota: Vec<(usize, u64)>,
    usage: BTreeMap<usize, u64>,
    queue: BTreeSet<(Reverse<i32>, i64, JobId)>,
    backoff: BinaryHeap<Reverse<(i64, JobId)>>,
    admitted: BTreeMap<JobId, Admitted>,
    requeues: BTreeMap<JobId, u32>,
    /// waitForPodsReady deadlines of admitted, not yet ready workloads.
    deadlines: BTreeSet<(i64, JobId)>,
    /// Per covered resource, the smallest demand of any job: below it nothing more can be admitted.
    min_demand: Vec<u64>,
    dirty: bool,
    domains: Domains,
}

impl Kueue {
    pub fn new(cfg: KueueConfig, wait_for_pods_ready: bool) -> Self {
        Kueue {
            // Kueue admits; the cluster's own kube-scheduler (1.35 and later here) places the pods.
            core: KubeCore::new_v135(),
            cfg,
            wait_for_pods_ready,
            quota: vec![],
            usage: BTreeMap::new(),
            queue: BTreeSet::new(),
            backoff: BinaryHeap::new(),
            admitted: BTreeMap::new(),
            requeues: BTreeMap::new(),
            deadlines: BTreeSet::new(),
            min_demand: vec![],
            dirty: false,
            domains: Domains::default(),
        }
    }

    /// What the workload asks of resource `r`: the sum over its PodSets, all pods counted.
    fn demand(view: &ClusterView<'_>, job: JobId, r: usize) -> u64 {
        let j = view.job(job);
        j.total(j.spec.max_members, r)
    }

    /// The cluster as TAS sees it: free resources minus the pods assigned but not yet bound.
    fn assigned_snapshot(&self, view: &ClusterView<'_>) -> Snapshot {
        let mut snap = Snapshot::default();
        for (&job, slots) in &self.core.assigned {
            for &(node, left) in slots {
                // TAS assigns the pods of jobs of one set (see `topology::pods_fitting`).
                (0..left).for_each(|_| snap.take(&view.job(job).sets[0].request, node));
            }
        }
        snap
    }

    fn release(&mut self, view: &ClusterView<'_>, job: JobId) {
        self.core.assigned.remove(&job);
        if let Some(a) = self.admitted.remove(&job) {
            if let Some(d) = a.deadline {
                self.deadlines.remove(&(d, job));
            }
            for &(r, _) in &self.quota {
                *self.usage.entry(r).or_default() -= Self::demand(view, job, r);
            }
            self.dirty = true;
        }
    }

    fn admit(&mut self, view: &ClusterView<'_>, now: i64, actions: &mut Vec<Action>) {
        if self.wait_for_pods_ready && self.cfg.block_admission && self.admitted.values().any(|a| !a.ready) {
            return;
        }
        let mut admitted_now = vec![];
        for &(prio, ts, job) in &self.queue {
            let exhausted = self
                .quota
                .iter()
                .zip(&self.min_demand)
                .any(|(&(r, q), m)| self.usage.get(&r).copied().unwrap_or(0) + m > q);
            if exhausted {
                break;
            }
            let fits = self
                .quota
                .iter()
                .all(|&(r, q)| self.usage.get(&r).copied().unwrap_or(0) + Self::demand(view, job, r) <= q);
            if !fits {
                // BestEffortFIFO: a workload that does not fit does not block those behind it.
                continue;
            }
            if let Some(t) = &view.job(job).spec.topology {
                // TAS: the workload is admitted only with a topology assignment (per node, its
                // pods), unless its constraint is preferred (then the pods go anywhere). A
                // PodSet takes one constraint: a preferred level kept within another is given
                // as the enclosing level, required.
                let reserved = self.assigned_snapshot(view);
                let label = t.binding_label().unwrap_or(&t.label);
                match topology::assign(view, &reserved, job, view.job(job).spec.max_members, label, &mut self.domains) {
                    Some(slots) => {
                        self.core.assigned.insert(job, slots);
                    }
                    None if t.binding_label().is_some() => continue,
                    None => {}
                }
            }
            for &(r, _) in &self.quota {
                *self.usage.entry(r).or_default() += Self::demand(view, job, r);
            }
            admitted_now.push((prio, ts, job));
            let deadline = self.wait_for_pods_ready.then(|| now + self.cfg.pods_ready_timeout.0);
            self.admitted.insert(job, Admitted { ready: false, deadline });
            if let Some(d) = deadline {
                self.deadlines.insert((d, job));
            }
            actions.push(Action::Start { job, members: view.job(job).spec.max_members });
            if self.wait_for_pods_ready && self.cfg.block_admission {
                break;
            }
        }
        for k in admitted_now {
            self.queue.remove(&k);
        }
    }
}

impl Scheduler for Kueue {
    fn name(&self) -> String {
        if self.wait_for_pods_ready { "kueue-wfpr".into() } else { "kueue".into() }
    }

    fn on_event(&mut self, event: &SimEvent, view: &ClusterView<'_>, _now: i64) {
        if self.quota.is_empty() {
            // The ClusterQueue covers every resource a job requests (as the harness writes it),
            // not the pod count.
            let covered = (0..view.resources().len()).filter(|&r| {
                view.resources()[r] != "pods" && view.jobs().iter().any(|j| j.sets.iter().any(|s| s.request[r] > 0))
            });
            for r in covered {
                let total: u64 = view.nodes().iter().map(|n| n.capacity[r]).sum();
                self.quota.push((r, (total as f64 * self.cfg.quota_factor).floor() as u64));
                let jobs = view.jobs().iter().enumerate().map(|(i, _)| JobId(i as u32));
                self.min_demand.push(jobs.map(|j| Self::demand(view, j, r)).min().unwrap_or(0));
            }
        }
        match event {
            SimEvent::JobSubmitted { job } => {
                let j = view.job(*job);
                self.queue.insert((Reverse(j.spec.priority), j.spec.submit_ms, *job));
                self.dirty = true;
            }
            SimEvent::PodReady { pod } => {
                let job = view.pod(*pod).job;
                let j = view.job(job);
                if j.ready == j.members
                    && let Some(a) = self.admitted.get_mut(&job)
                {
                    a.ready = true;
                    if let Some(d) = a.deadline.take() {
                        self.deadlines.remove(&(d, job));
                    }
                    self.dirty = true;
                }
            }
            SimEvent::JobFinished { job, .. } => self.release(view, *job),
            _ => {}
        }
        self.core.on_event(event, view, |p| pod_key(view, p));
    }

    fn decide(&mut self, view: &ClusterView<'_>, now: i64) -> Vec<Action> {
        let mut actions = vec![];
        while self.backoff.peek().is_some_and(|Reverse((t, _))| *t <= now) {
            let Reverse((_, job)) = self.backoff.pop().expect("checked");
            let j = view.job(job);
            let ts = match self.cfg.requeue_timestamp {
                RequeueTimestamp::Eviction => now,
                RequeueTimestamp::Creation => j.spec.submit_ms,
            };
            self.queue.insert((Reverse(j.spec.priority), ts, job));
            self.dirty = true;
        }
        while let Some(&(d, job)) = self.deadlines.first() {
            if d > now {
                break;
            }
            self.release(view, job);
            let n = self.requeues.entry(job).or_default();
            *n += 1;
            if self.cfg.backoff_limit_count.is_some_and(|limit| *n > limit) {
                actions.push(Action::Fail { job });
                continue;
            }
            actions.push(Action::Suspend { job });
            let delay = (self.cfg.backoff_base.0 << (*n - 1).min(30)).min(self.cfg.backoff_max.0);
            self.backoff.push(Reverse((now + delay, job)));
        }
        if std::mem::take(&mut self.dirty) {
            self.admit(view, now, &mut actions);
        }
        if !actions.is_empty() {
            return actions;
        }
        actions.extend(self.core.bind_next(view, now));
        actions
    }

    fn next_wakeup(&self) -> Option<i64> {
        let b = self.backoff.peek().map(|Reverse((t, _))| *t);
        let d = self.deadlines.first().map(|(d, _)| *d);
        [self.core.next_wakeup(), b, d].into_iter().flatten().min()
    }
}
