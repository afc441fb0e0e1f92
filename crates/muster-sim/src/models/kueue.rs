//! Kueue v0.19.2 as a model. One ClusterQueue per tenant's queue (without tenants, one covering
//! the cluster), BestEffortFIFO, one ResourceFlavor; each covers every resource the jobs request
//! (as the harness writes it), not the pod count, with the tenant's nominalQuota, borrowingLimit
//! and lendingLimit, and a resource the tenant does not name with a nominal quota of the whole
//! cluster's allocatable (times `kueue.quotaFactor`, the single queue's quota). Cohorts form a
//! tree (v1beta1 Cohorts with `parentName`); a queue borrows what the tree has unused and
//! lendable, within its borrowingLimit (`kueue/quota.rs`).
//!
//! Scheduling cycles as Kueue's (`cycle.rs`): the head of every ClusterQueue is a candidate,
//! candidates are taken in Kueue's order and admitted if they still fit. Preemption as Kueue's
//! classical preemption (`kueue/preemption.rs`): a tenant's `reclaimWithinCohort: true` is
//! `reclaimWithinCohort: Any` (false: Never), `withinQueue: LowerPriority` is
//! `withinClusterQueue: LowerPriority`; victims are evicted whole (suspended, their pods deleted)
//! and requeued at their creation time, and the preemptor, held at the head of its queue, is
//! admitted once their quota is free. Kueue preempts by quota alone: whether the freed nodes suit
//! the preemptor is not its concern.
//!
//! An admitted job is unsuspended and its pods go to the default scheduler model. Optionally
//! waitForPodsReady: admission blocks while an admitted workload is not PodsReady, and a workload
//! not ready within the timeout is evicted (suspended, pods deleted) and requeued after an
//! exponential backoff, or deactivated after `backoffLimitCount` requeues. A job with a topology
//! constraint goes through Topology-Aware Scheduling: admitted only with an assignment of its pods
//! to nodes of one domain, each PodSet with a level of its own to one of that level
//! (`topology::assign`; constraints all preferred that no domain meets are admitted unassigned);
//! preemption does not look at topology.
//!
//! With `kueue.fairSharing` (or as `kueue-fair`), Kueue's fair sharing: heads taken by a
//! tournament of dominant resource shares, each tenant's `fairShareWeight` as its ClusterQueue's
//! weight (`kueue/fair_share.rs`), and fair-sharing preemption by the configured strategies
//! (`kueue/fair_preemption.rs`).
//!
//! Not modelled: `borrowWithinCohort`, quotas and fair-sharing weights of cohorts themselves
//! (cohorts weigh 1), admission fair sharing. Without
//! tenants every pending workload is reconsidered after any event, as this model always did;
//! with them, a workload set aside as inadmissible waits until quota is released in its cohort
//! tree, as in Kueue.

mod cycle;
mod fair_preemption;
mod fair_share;
mod preemption;
mod quota;

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};

use muster_queue::config::WithinQueue;

use crate::models::gang::Snapshot;
use crate::models::kube::{KubeCore, pod_key};
use crate::models::topology::Domains;
use crate::scenario::{KueueConfig, RequeueTimestamp, Tenants};
use crate::scheduler::{Action, ClusterView, JobId, Scheduler, SimEvent};
use fair_preemption::FairSharing;
use preemption::Policy;
use quota::{QuotaTree, ResourceQuota};

/// A pending workload's place in its ClusterQueue: priority, then the queue timestamp.
type Key = (Reverse<i32>, i64, JobId);

#[derive(Debug, Clone)]
struct Admitted {
    queue: usize,
    ready: bool,
    /// waitForPodsReady deadline.
    deadline: Option<i64>,
    admitted_ms: i64,
    /// Preempted; its quota is held until its pods are gone.
    evicting: bool,
    /// Per covered resource.
    usage: Vec<i64>,
}

/// A ClusterQueue's own state; its quota lives in the tree.
#[derive(Debug, Clone, Default)]
struct ClusterQueue {
    policy: Policy,
    pending: BTreeSet<Key>,
    /// Workloads found inadmissible, set aside until quota is released in the cohort tree
    /// (`pkg/cache/queue/inadmissible_workloads.go`).
    inadmissible: BTreeSet<Key>,
    /// Per covered resource, the smallest demand of any of its jobs: below it nothing more fits.
    min_demand: Vec<i64>,
    /// The workload whose preemptions are under way: BestEffortFIFO keeps it at the head
    /// (`pkg/cache/queue/cluster_queue.go`, preemptorWorkload).
    preemptor: Option<Key>,
}

pub struct Kueue {
    name: &'static str,
    core: KubeCore,
    cfg: KueueConfig,
    wait_for_pods_ready: bool,
    tenants: Tenants,
    /// View resource index of each covered resource; empty until the first event.
    covered: Vec<usize>,
    tree: QuotaTree,
    queues: Vec<ClusterQueue>,
    backoff: BinaryHeap<Reverse<(i64, JobId)>>,
    admitted: BTreeMap<JobId, Admitted>,
    requeues: BTreeMap<JobId, u32>,
    /// waitForPodsReady deadlines of admitted, not yet ready workloads.
    deadlines: BTreeSet<(i64, JobId)>,
    dirty: bool,
    domains: Domains,
    /// Kueue's fair sharing, when the scenario turns it on.
    fair: Option<FairSharing>,
}

impl Kueue {
    /// Without tenants: one ClusterQueue for every job.
    pub fn new(cfg: KueueConfig, wait_for_pods_ready: bool) -> Self {
        Self::with_tenants(cfg, wait_for_pods_ready, Tenants::default())
    }

    /// A ClusterQueue per tenant's queue, in its cohorts.
    pub fn with_tenants(cfg: KueueConfig, wait_for_pods_ready: bool, tenants: Tenants) -> Self {
        Kueue {
            name: if wait_for_pods_ready { "kueue-wfpr" } else { "kueue" },
            // Kueue admits; the cluster's own kube-scheduler (1.35 and later here) places the pods.
            core: KubeCore::new_v135(),
            cfg,
            wait_for_pods_ready,
            tenants,
            covered: vec![],
            tree: QuotaTree::new(vec![], &[]),
            queues: vec![],
            backoff: BinaryHeap::new(),
            admitted: BTreeMap::new(),
            requeues: BTreeMap::new(),
            deadlines: BTreeSet::new(),
            dirty: false,
            domains: Domains::default(),
            fair: None,
        }
    }

    /// `kueue-fair`: fair sharing on, with the scenario's `kueue.fairSharing` or Kueue's default
    /// preemption strategies.
    pub fn fair_sharing(mut cfg: KueueConfig, tenants: Tenants) -> Self {
        cfg.fair_sharing.get_or_insert_default();
        Kueue { name: "kueue-fair", ..Self::with_tenants(cfg, false, tenants) }
    }

    /// The ClusterQueues and Cohorts, from the cluster and the tenants.
    fn set_up(&mut self, view: &ClusterView<'_>) {
        let names = view.resources();
        self.covered = (0..names.len())
            .filter(|&r| names[r] != "pods" && view.jobs().iter().any(|j| j.sets.iter().any(|s| s.request[r] > 0)))
            .collect();
        let cluster_wide: Vec<ResourceQuota> = self
            .covered
            .iter()
            .map(|&r| {
                let total: u64 = view.nodes().iter().map(|n| n.capacity[r]).sum();
                let nominal = (total as f64 * self.cfg.quota_factor).floor() as i64;
                ResourceQuota { nominal, borrowing_limit: None, lending_limit: None }
            })
            .collect();
        let t = &self.tenants;
        let (queues, cohorts) = if t.is_empty() {
            (vec![(cluster_wide, None)], vec![])
        } else {
            // Declared cohorts, then those only queues name (roots of their own).
            let mut cohorts: Vec<(String, Option<String>)> =
                t.cohorts.iter().map(|c| (c.name.clone(), c.parent.clone())).collect();
            for name in t.queues.iter().filter_map(|q| q.cohort.clone()) {
                if !cohorts.iter().any(|(c, _)| *c == name) {
                    cohorts.push((name, None));
                }
            }
            let index = |name: &str| cohorts.iter().position(|(c, _)| c == name);
            // A Cohort's own quota (resourceGroups); a resource it does not list: nominal 0.
            let parents = cohorts.iter().map(|(name, p)| {
                let quotas = self
                    .covered
                    .iter()
                    .map(|&r| t.cohort_quota(name, &names[r]).map_or(ResourceQuota::default(), resource_quota));
                (quotas.collect(), p.as_deref().and_then(index))
            });
            let parents: Vec<(Vec<ResourceQuota>, Option<usize>)> = parents.collect();
            let queues = (0..t.queues.len())
                .map(|q| {
                    let quotas = self
                        .covered
                        .iter()
                        .zip(&cluster_wide)
                        .map(|(&r, &wide)| t.quota(q, &names[r]).map_or(wide, resource_quota));
                    (quotas.collect(), t.queues[q].cohort.as_deref().and_then(index))
                })
                .collect();
            (queues, parents)
        };
        self.queues = (0..queues.len())
            .map(|q| {
                let policy = self.tenants.queues.get(q).map_or(Policy::default(), |t| Policy {
                    reclaim_within_cohort: t.preemption.reclaim_within_cohort,
                    within_queue_lower_priority: t.preemption.within_queue == WithinQueue::LowerPriority,
                });
                let jobs = (0..view.jobs().len() as u32).map(JobId).filter(|&j| Self::queue_of(view, j) == q);
                let jobs: Vec<JobId> = jobs.collect();
                let min_demand = (0..self.covered.len())
                    .map(|k| jobs.iter().map(|&j| self.demand(view, j)[k]).min().unwrap_or(0))
                    .collect();
                ClusterQueue { policy, min_demand, ..ClusterQueue::default() }
            })
            .collect();
        self.fair = self.cfg.fair_sharing.as_ref().map(|f| {
            // Cohorts weigh 1: the scenario's cohorts name no weight.
            let weights = (0..queues.len()).map(|q| self.tenants.queues.get(q).map_or(1.0, |t| t.fair_share_weight));
            let weights = weights.chain(std::iter::repeat_n(1.0, cohorts.len()));
            FairSharing { weights: weights.collect(), strategies: f.preemption_strategies.clone() }
        });
        self.tree = QuotaTree::with_cohort_quotas(queues, cohorts);
    }

    fn queue_of(view: &ClusterView<'_>, job: JobId) -> usize {
        view.job(job).spec.queue.unwrap_or(0)
    }

    /// What the workload asks of each covered resource: the sum over its PodSets, all pods counted.
    fn demand(&self, view: &ClusterView<'_>, job: JobId) -> Vec<i64> {
        let j = view.job(job);
        self.covered.iter().map(|&r| j.total(j.spec.max_members, r) as i64).collect()
    }

    /// Queues the workload in its ClusterQueue at `ts`.
    fn enqueue(&mut self, view: &ClusterView<'_>, job: JobId, ts: i64) {
        let q = Self::queue_of(view, job);
        self.queues[q].pending.insert((Reverse(view.job(job).spec.priority), ts, job));
        self.dirty = true;
    }

    /// The cluster as TAS sees it: free resources minus the pods assigned but not yet bound.
    fn assigned_snapshot(&self, view: &ClusterView<'_>) -> Snapshot {
        let mut snap = Snapshot::default();
        for (&job, slots) in &self.core.assigned {
            for slot in slots {
                (0..slot.left).for_each(|_| snap.take(&view.job(job).sets[slot.set].request, slot.node));
            }
        }
        snap
    }

    fn release(&mut self, job: JobId) {
        self.core.assigned.remove(&job);
        if let Some(a) = self.admitted.remove(&job) {
            if let Some(d) = a.deadline {
                self.deadlines.remove(&(d, job));
            }
            self.tree.charge(a.queue, &a.usage, false);
            self.dirty = true;
            // Quota was released: every queue of the cohort tree tries its set-aside workloads
            // again (`QueueAssociatedInadmissibleWorkloadsAfter`).
            let root = |q: usize| self.tree.ancestors(q).last().unwrap_or(q);
            let tree_root = root(a.queue);
            let associated: Vec<usize> = (0..self.queues.len()).filter(|&q| root(q) == tree_root).collect();
            associated.into_iter().for_each(|q| self.requeue_inadmissible(q));
        }
    }

    /// Moves the queue's inadmissible workloads back to its pending ones.
    fn requeue_inadmissible(&mut self, q: usize) {
        let cq = &mut self.queues[q];
        cq.pending.append(&mut cq.inadmissible);
    }
}

impl Scheduler for Kueue {
    fn name(&self) -> String {
        self.name.into()
    }

    fn on_event(&mut self, event: &SimEvent, view: &ClusterView<'_>, _now: i64) {
        if self.queues.is_empty() {
            self.set_up(view);
        }
        match event {
            SimEvent::JobSubmitted { job } => self.enqueue(view, *job, view.job(*job).spec.submit_ms),
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
            SimEvent::JobFinished { job, .. } => self.release(*job),
            SimEvent::JobSuspended { job } if self.admitted.get(job).is_some_and(|a| a.evicting) => {
                // A preempted workload's quota is released once its pods are gone; it is
                // requeued at its creation time.
                self.release(*job);
                self.enqueue(view, *job, view.job(*job).spec.submit_ms);
            }
            _ => {}
        }
        self.core.on_event(event, view, |p| pod_key(view, p));
    }

    fn decide(&mut self, view: &ClusterView<'_>, now: i64) -> Vec<Action> {
        let mut actions = vec![];
        while self.backoff.peek().is_some_and(|Reverse((t, _))| *t <= now) {
            let Reverse((_, job)) = self.backoff.pop().expect("checked");
            let ts = match self.cfg.requeue_timestamp {
                RequeueTimestamp::Eviction => now,
                RequeueTimestamp::Creation => view.job(job).spec.submit_ms,
            };
            self.enqueue(view, job, ts);
        }
        while let Some(&(d, job)) = self.deadlines.first() {
            if d > now {
                break;
            }
            self.release(job);
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

/// A tenant's quota as Kueue's ResourceQuota.
fn resource_quota(quota: muster_queue::config::Quota) -> ResourceQuota {
    ResourceQuota {
        nominal: quota.nominal as i64,
        borrowing_limit: quota.borrowing_limit.map(|l| l as i64),
        lending_limit: quota.lending_limit.map(|l| l as i64),
    }
}
