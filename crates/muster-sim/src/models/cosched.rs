//! scheduler-plugins coscheduling as a model: each job is a PodGroup with minMember = the job's
//! min members. QueueSort keeps a group's pods together (priority, group creation, group);
//! PreFilter holds pods until the group has minMember pods; placed pods wait at Permit holding
//! their node resources until minMember are placed, then all bind. A group that waits longer than
//! the permit timeout, or whose member fails Filter before the quorum (PostFilter, unless at most
//! a tenth of minMember is missing), is rejected: every waiting pod gives back its resources and
//! goes to backoff. When a group's first pod waits at Permit, its other pods are activated: they
//! leave backoff and the unschedulable pods for the active queue at once, where QueueSort keeps
//! them together (scheduler-plugins v0.32.7, `ActivateSiblings`).

use std::cmp::Reverse;
use std::collections::{BTreeSet, HashMap};

use crate::models::gang;
use crate::models::kube::{KubeCore, QKey};
use crate::models::start_unheld;
use crate::scheduler::{Action, ClusterView, JobId, PodId, Scheduler, SimEvent};

#[derive(Debug, Default)]
struct Group {
    /// Pods placed and waiting at Permit.
    waiting: Vec<(QKey, crate::scheduler::NodeId)>,
    /// minMember reached for this start: later pods bind directly.
    permitted: bool,
    /// When the waiting pods are rejected.
    deadline: Option<i64>,
}

pub struct Coscheduling {
    core: KubeCore,
    permit_timeout_ms: i64,
    groups: HashMap<JobId, Group>,
    deadlines: BTreeSet<(i64, JobId)>,
    to_start: Vec<JobId>,
}

impl Coscheduling {
    pub fn new(permit_timeout_ms: i64) -> Self {
        Coscheduling {
            core: KubeCore::new(false),
            permit_timeout_ms,
            groups: HashMap::new(),
            deadlines: BTreeSet::new(),
            to_start: vec![],
        }
    }

    fn key(view: &ClusterView<'_>, pod: PodId) -> QKey {
        let p = view.pod(pod);
        let j = view.job(p.job);
        (Reverse(j.spec.priority), j.started_ms.unwrap_or(0), p.job, p.created_ms, pod)
    }

    /// Gives back every waiting pod of the group and sends them to backoff.
    fn reject(&mut self, job: JobId, now: i64, actions: &mut Vec<Action>) {
        let Some(g) = self.groups.get_mut(&job) else { return };
        if let Some(d) = g.deadline.take() {
            self.deadlines.remove(&(d, job));
        }
        for (key, _) in std::mem::take(&mut g.waiting) {
            actions.push(Action::Unreserve { pod: key.4 });
            self.core.queue.retry_later(key, now);
        }
        self.core.queue.cluster_changed();
    }
}

impl Scheduler for Coscheduling {
    fn name(&self) -> String {
        "coscheduling".into()
    }

    fn on_event(&mut self, event: &SimEvent, view: &ClusterView<'_>, _now: i64) {
        match event {
            SimEvent::JobSubmitted { job } => self.to_start.push(*job),
            SimEvent::JobFinished { job, .. } => {
                if let Some(g) = self.groups.remove(job)
                    && let Some(d) = g.deadline
                {
                    self.deadlines.remove(&(d, *job));
                }
            }
            _ => {}
        }
        self.core.on_event(event, view, |p| Self::key(view, p));
    }

    fn decide(&mut self, view: &ClusterView<'_>, now: i64) -> Vec<Action> {
        let mut actions = start_unheld(&mut self.to_start, view);
        while let Some(&(d, job)) = self.deadlines.first() {
            if d > now {
                break;
            }
            self.reject(job, now, &mut actions);
        }
        if !actions.is_empty() {
            return actions;
        }
        let Some(key) = self.core.next_pod(view, now) else { return actions };
        let (pod, job) = (key.4, key.2);
        let min = view.job(job).spec.min_members;
        // PreFilter: the group must have minMember pods before any is tried.
        if !gang::group_complete(view, job) {
            self.core.queue.retry_later(key, now);
            return actions;
        }
        let placed = self.core.place(view, job);
        let g = self.groups.entry(job).or_default();
        match placed {
            Some(node) if g.permitted => {
                self.core.queue.forget(pod);
                actions.push(Action::Bind { pod, node });
            }
            Some(node) => {
                actions.push(Action::Reserve { pod, node });
                g.waiting.push((key, node));
                if g.waiting.len() as u32 >= min {
                    g.permitted = true;
                    if let Some(d) = g.deadline.take() {
                        self.deadlines.remove(&(d, job));
                    }
                    for (k, n) in std::mem::take(&mut g.waiting) {
                        self.core.queue.forget(k.4);
                        actions.push(Action::Bind { pod: k.4, node: n });
                    }
                } else if g.deadline.is_none() {
                    let d = now + self.permit_timeout_ms;
                    g.deadline = Some(d);
                    self.deadlines.insert((d, job));
                    self.core.queue.activate(|k| k.2 == job);
                }
            }
            None => {
                self.core.queue.park(key, now);
                // PostFilter lets a gang that lacks at most a tenth of minMember keep waiting.
                let missing = min.saturating_sub(g.waiting.len() as u32);
                if !g.permitted && !g.waiting.is_empty() && missing * 10 > min {
                    self.reject(job, now, &mut actions);
                }
            }
        }
        actions
    }

    fn next_wakeup(&self) -> Option<i64> {
        let d = self.deadlines.first().map(|(d, _)| *d);
        [self.core.next_wakeup(), d].into_iter().flatten().min()
    }
}
