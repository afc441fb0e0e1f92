//! scheduler-plugins coscheduling as a model: each job is a PodGroup with minMember = the job's
//! min members. QueueSort keeps a group's pods together (priority, group creation, group);
//! PreFilter holds pods until the group has minMember pods; placed pods wait at Permit holding
//! their node resources until minMember are placed, then all bind. A group that waits longer than
//! the permit timeout, or whose member fails Filter before the quorum (PostFilter, unless at most
//! a tenth of minMember is missing), is rejected. When a group's first pod waits at Permit, its
//! other pods are activated: they leave backoff and the unschedulable pods for the active queue at
//! once, where QueueSort keeps them together (scheduler-plugins v0.32.7, `ActivateSiblings`).
//!
//! What happens to a rejected group follows the kube-scheduler the plugin is built on
//! (k8s.io/kubernetes v1.32.7, queueing hints on by default):
//! - A waiting pod is rejected inside its own binding goroutine, which gives its node back
//!   (Unreserve, ForgetPod) apart from the scheduling loop. The model gives the nodes back when
//!   the loop next has no pod to try: until then the group's other activated pods are tried
//!   against a cluster that still holds them, fail, and the gang stops re-taking the nodes it
//!   just lost. (Given back at once, a gang's activated pods re-take them in turn and hold them
//!   as long as any sibling is active.)
//! - A pod Coscheduling rejected (PreFilter: the group lacks pods; Permit: the group was rejected
//!   or timed out) waits in the unschedulable pool for an event the plugin registers: a pod bound
//!   anywhere, a PodGroup added or its status written by the PodGroup controller (minMember pods
//!   created, a member running, succeeding or gone); or for its group's activation, or the
//!   5-minute flush. A rejected waiting pod that saw such an event, or its group's activation,
//!   while it waited goes to backoff at once (the queue's in-flight events).
//! - A pod that failed Filter waits for freed resources (NodeResourcesFit's hint).

use std::cmp::Reverse;
use std::collections::{BTreeSet, HashMap};

use crate::models::gang;
use crate::models::kube::{KubeCore, QKey};
use crate::models::start_unheld;
use crate::scheduler::{Action, ClusterView, JobId, NodeId, PodId, PodPhase, Scheduler, SimEvent};

#[derive(Debug, Default)]
struct Group {
    /// Pods placed and waiting at Permit, with when each was tried.
    waiting: Vec<(QKey, NodeId, i64)>,
    /// minMember reached for this start: later pods bind directly.
    permitted: bool,
    /// When the waiting pods are rejected.
    deadline: Option<i64>,
    /// When the group's pods were last activated.
    activated: Option<i64>,
}

pub struct Coscheduling {
    core: KubeCore,
    permit_timeout_ms: i64,
    groups: HashMap<JobId, Group>,
    deadlines: BTreeSet<(i64, JobId)>,
    to_start: Vec<JobId>,
    /// When the last event the plugin registers happened (a pod bound, a PodGroup added or its
    /// status written).
    last_plugin_event: Option<i64>,
    /// Rejected waiting pods whose nodes are not yet given back, with when each was tried.
    releasing: Vec<(QKey, i64)>,
}

impl Coscheduling {
    pub fn new(permit_timeout_ms: i64) -> Self {
        Coscheduling {
            core: KubeCore::new(false),
            permit_timeout_ms,
            groups: HashMap::new(),
            deadlines: BTreeSet::new(),
            to_start: vec![],
            last_plugin_event: None,
            releasing: vec![],
        }
    }

    fn key(view: &ClusterView<'_>, pod: PodId) -> QKey {
        let p = view.pod(pod);
        let j = view.job(p.job);
        (Reverse(j.spec.priority), j.started_ms.unwrap_or(0), p.job, p.created_ms, pod)
    }

    /// Rejects every waiting pod of the group; their nodes are given back by `release`.
    fn reject(&mut self, job: JobId) {
        let Some(g) = self.groups.get_mut(&job) else { return };
        if let Some(d) = g.deadline.take() {
            self.deadlines.remove(&(d, job));
        }
        self.releasing.extend(g.waiting.drain(..).map(|(key, _, tried)| (key, tried)));
    }

    /// The rejected pods' binding goroutines run: each gives its node back and is requeued. Its
    /// rejector is Coscheduling, so it waits for one of the plugin's events, unless one came (or
    /// its group was activated) while it waited: then it goes to backoff. A pod deleted meanwhile
    /// (its Job failed, at its deadline) has nothing to give back.
    fn release(&mut self, view: &ClusterView<'_>, now: i64, actions: &mut Vec<Action>) {
        for (key, tried) in std::mem::take(&mut self.releasing) {
            match view.pod(key.4).phase {
                PodPhase::Deleted => continue,
                PodPhase::Reserved => actions.push(Action::Unreserve { pod: key.4 }),
                other => unreachable!("a pod waiting at Permit is reserved or deleted, not {other:?}"),
            }
            let activated = self.groups.get(&key.2).and_then(|g| g.activated);
            if self.last_plugin_event.is_some_and(|e| e > tried) || activated.is_some_and(|a| a > tried) {
                self.core.queue.retry_later(key, now);
            } else {
                self.core.queue.park_for_plugin_event(key, now);
            }
        }
        // Forgetting an assumed pod is an assigned-pod delete: pods that failed Filter requeue.
        self.core.queue.cluster_changed();
    }

    /// Whether the event is one the plugin registers (EventsToRegister: Pod add, PodGroup add or
    /// update), counting the PodGroup controller's status writes as PodGroup updates.
    fn is_plugin_event(event: &SimEvent, view: &ClusterView<'_>) -> bool {
        match event {
            // A PodGroup added; a pod bound (an assigned-pod add).
            SimEvent::JobSubmitted { .. } | SimEvent::PodBound { .. } => true,
            // The controller's status writes: Pending to Scheduling once minMember pods exist,
            // then the counts of running, succeeded and failed pods.
            SimEvent::PodCreated { pod } => {
                let j = view.job(view.pod(*pod).job);
                j.pods.len() as u32 == j.spec.min_members
            }
            SimEvent::PodReady { .. } | SimEvent::PodFinished { .. } => true,
            _ => false,
        }
    }

    /// One scheduling attempt for the pod.
    fn attempt(&mut self, key: QKey, view: &ClusterView<'_>, now: i64, actions: &mut Vec<Action>) {
        let (pod, job) = (key.4, key.2);
        let min = view.job(job).spec.min_members;
        // PreFilter: the group must have minMember pods before any is tried.
        if !gang::group_complete(view, job) {
            self.core.queue.park_for_plugin_event(key, now);
            return;
        }
        let placed = self.core.place(view, pod);
        let g = self.groups.entry(job).or_default();
        match placed {
            Some(node) if g.permitted => {
                self.core.queue.forget(pod);
                actions.push(Action::Bind { pod, node });
            }
            Some(node) => {
                actions.push(Action::Reserve { pod, node });
                g.waiting.push((key, node, now));
                if g.waiting.len() as u32 >= min {
                    g.permitted = true;
                    if let Some(d) = g.deadline.take() {
                        self.deadlines.remove(&(d, job));
                    }
                    for (k, n, _) in std::mem::take(&mut g.waiting) {
                        self.core.queue.forget(k.4);
                        actions.push(Action::Bind { pod: k.4, node: n });
                    }
                } else if g.deadline.is_none() {
                    let d = now + self.permit_timeout_ms;
                    g.deadline = Some(d);
                    g.activated = Some(now);
                    self.deadlines.insert((d, job));
                    self.core.queue.activate(|k| k.2 == job);
                }
            }
            None => {
                self.core.queue.park(key, now);
                // PostFilter lets a gang that lacks at most a tenth of minMember keep waiting.
                let missing = min.saturating_sub(g.waiting.len() as u32);
                if !g.permitted && !g.waiting.is_empty() && missing * 10 > min {
                    self.reject(job);
                }
            }
        }
    }
}

impl Scheduler for Coscheduling {
    fn name(&self) -> String {
        "coscheduling".into()
    }

    fn on_event(&mut self, event: &SimEvent, view: &ClusterView<'_>, now: i64) {
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
        if Self::is_plugin_event(event, view) {
            self.last_plugin_event = Some(now);
            self.core.queue.plugin_event(now);
        }
    }

    fn decide(&mut self, view: &ClusterView<'_>, now: i64) -> Vec<Action> {
        let mut actions = start_unheld(&mut self.to_start, view);
        while let Some(&(d, job)) = self.deadlines.first() {
            if d > now {
                break;
            }
            self.reject(job);
        }
        if !actions.is_empty() {
            return actions;
        }
        if let Some(key) = self.core.next_pod(view, now) {
            self.attempt(key, view, now, &mut actions);
        }
        // The loop has nothing left to try: the rejected pods' goroutines get to run.
        if !self.releasing.is_empty() && !self.core.queue.has_ready(now) {
            self.release(view, now, &mut actions);
        }
        actions
    }

    fn next_wakeup(&self) -> Option<i64> {
        let d = self.deadlines.first().map(|(d, _)| *d);
        [self.core.next_wakeup(), d].into_iter().flatten().min()
    }
}
