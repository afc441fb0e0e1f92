//! What muster tells: Group statuses (conditions, allocation, position, estimated start), Queue
//! statuses, events; and the repair of Group objects someone else wrote or deleted.

use super::*;

/// How long a Group object may disagree with muster before it is repaired: muster's own writes
/// come back through the watch a little later, and a deleted Job's Group goes with it.
const REPAIR_AFTER_SECS: i64 = 2;

use std::collections::VecDeque;

use muster_k8s::EstimateAccuracy;
use muster_queue::{Engine, Explanation};

/// Admissions whose estimate errors a Queue's status sums up: enough for a stable median, recent
/// enough to follow a change of workload.
const ESTIMATES_SCORED: usize = 50;

/// The latest errors of each queue's first estimated starts (|admission - estimate| / wait).
#[derive(Debug, Default)]
pub(super) struct EstimateErrors(BTreeMap<String, VecDeque<f64>>);

impl EstimateErrors {
    pub(super) fn record(&mut self, queue: &str, error: f64) {
        let errors = self.0.entry(queue.to_string()).or_default();
        if errors.len() == ESTIMATES_SCORED {
            errors.pop_front();
        }
        errors.push_back(error);
    }

    /// The queue's accuracy as its status reports it; none before its first scored admission.
    pub(super) fn accuracy(&self, queue: &str) -> Option<EstimateAccuracy> {
        let mut errors: Vec<f64> = self.0.get(queue)?.iter().copied().collect();
        errors.sort_by(f64::total_cmp);
        let n = errors.len();
        let median = match n {
            0 => return None,
            _ if n % 2 == 1 => errors[n / 2],
            _ => (errors[n / 2 - 1] + errors[n / 2]) / 2.0,
        };
        let percent = (median * 100.0).round().clamp(0.0, f64::from(u32::MAX)) as u32;
        Some(EstimateAccuracy { groups: n as u32, median_error_percent: percent })
    }
}

/// The waiting groups with their positions, estimated starts and reasons, and the plan behind
/// them when a dashboard asks for it.
#[derive(Debug)]
pub struct QueueView {
    pub waiting: Vec<Explanation>,
    pub plan: Option<Plan>,
}

impl QueueView {
    /// The view of `engine` at `now`; with `with_plan`, from the whole plan.
    pub fn of(engine: &Engine, now: i64, with_plan: bool) -> Self {
        if !with_plan {
            return Self { waiting: engine.queue_view(now), plan: None };
        }
        let plan = engine.plan(now);
        let waiting = plan
            .groups
            .iter()
            .filter(|g| g.position > 0)
            .map(|g| Explanation {
                key: g.key.clone(),
                queue: g.queue.clone(),
                state: g.state,
                position: g.position,
                estimated_start: g.estimated_start,
                reason: g.reason.clone(),
            })
            .collect();
        Self { waiting, plan: Some(plan) }
    }
}

impl<S: Store> Brain<S> {
    /// Positions and estimated starts of waiting groups into their statuses, and each Queue's
    /// counts and usage into its status, computed here and now (the controller computes the view
    /// off this thread: [`Brain::queue_view_input`], [`QueueView::of`], [`Brain::apply_queue_view`]).
    /// With `with_plan` (someone watches the dashboard) the view comes from the whole plan, which
    /// is returned; otherwise nothing more is computed or kept.
    pub fn refresh_queue_view(&mut self, now: i64, with_plan: bool) -> Option<Plan> {
        let engine = self.queue_view_input()?;
        let view = QueueView::of(&engine, now, with_plan);
        self.apply_queue_view(view.waiting);
        view.plan
    }

    /// Refreshes the Queue statuses and gives a copy of the engine to compute the view from.
    pub fn queue_view_input(&mut self) -> Option<Engine> {
        self.refresh_queue_statuses();
        self.engine.as_ref().map(|e| e.engine().clone())
    }

    /// Positions, estimated starts and reasons into the statuses of the groups that still wait
    /// (the view may come from a copy a little older than the engine).
    pub fn apply_queue_view(&mut self, waiting: Vec<Explanation>) {
        for x in waiting {
            let still_waiting =
                self.engine.as_ref().and_then(|e| e.engine().group(&x.key)).is_some_and(|g| g.state.is_pending());
            if !still_waiting {
                continue;
            }
            if let Some(t) = x.estimated_start.filter(|t| *t < i64::MAX / 2) {
                self.metrics.estimated(&x.key, t);
            }
            let mut st = self.statuses.get(&x.key).cloned().unwrap_or_default();
            st.queue_position = (x.position > 0).then_some(x.position as u32);
            st.estimated_start = x.estimated_start.filter(|t| *t < i64::MAX / 2).map(time);
            if !x.reason.is_empty() {
                st.message = Some(x.reason);
            }
            self.push_status(&x.key, st);
        }
    }

    pub(super) fn refresh_queue_statuses(&mut self) {
        let Some(e) = self.engine.as_ref() else { return };
        let mut fresh: BTreeMap<String, QueueStatus> =
            self.cfg.engine.queues.iter().map(|q| (q.name.clone(), QueueStatus::default())).collect();
        for g in e.engine().groups() {
            let Some(st) = fresh.get_mut(&g.spec.queue) else { continue };
            if g.state.is_pending() {
                st.pending_groups += 1;
            } else if g.state.holds_allocation() {
                st.admitted_groups += 1;
            }
        }
        for (queue, held) in e.engine().usage() {
            if let Some(st) = fresh.get_mut(queue) {
                let amounts: Vec<(String, u64)> =
                    held.iter().filter(|(_, a)| **a > 0).map(|(r, a)| (r.clone(), *a)).collect();
                st.usage = muster_k8s::workload::requests_to_resources(amounts.iter().map(|(r, a)| (r, a)));
            }
        }
        for (queue, st) in fresh.iter_mut() {
            st.estimates = self.estimate_errors.accuracy(queue);
        }
        self.metrics.set_groups(&fresh);
        for (name, status) in fresh {
            if self.queue_statuses.get(&name) != Some(&status) {
                self.queue_statuses.insert(name.clone(), status.clone());
                self.actions.push(Action::QueueStatus { name, status: Box::new(status) });
            }
        }
    }

    pub(super) fn transition_actions(&mut self, t: &Transition) {
        let key = &t.key;
        let message = t.reason.message();
        match (&t.reason, t.to) {
            (_, GroupState::Admitted) if t.from != GroupState::Admitted => {
                let nodes: BTreeSet<&str> =
                    t.allocation.iter().flat_map(|a| a.members.iter().map(|m| m.node.as_str())).collect();
                let members = t.allocation.as_ref().map_or(0, |a| a.members.len());
                // A workload released ahead of its start has its pods already.
                let released =
                    self.ahead.contains(key) && self.workload(&key.to_string()).is_some_and(|w| !w.suspended);
                // A workload whose earlier run still stops is released once it has (`pods_changed`).
                let stopping = if self.is_plain(key) { 0 } else { self.earlier_run_pods(key) };
                if !self.is_plain(key) && !released && stopping == 0 {
                    self.set_suspend(key, false);
                }
                let mut text = format!("{message}: {members} members on {} nodes", nodes.len());
                if stopping > 0 {
                    text += &format!("; its pods are made once the {stopping} pods of its earlier run are deleted");
                }
                self.event(key, EventType::Normal, "Admitted", &text);
            }
            (_, GroupState::Evicted) if self.is_plain(key) => {
                // Pods cannot be suspended: the group's pods go, and the group with them once
                // they are gone. Users create them again.
                let pods: Vec<(String, String)> =
                    self.plain_pods(key).filter(|p| !p.deleting).map(|p| (p.name.clone(), p.uid.clone())).collect();
                let n = pods.len();
                if n > 0 {
                    self.actions.push(Action::DeletePods {
                        key: key.clone(),
                        namespace: key.namespace.to_string(),
                        pods,
                    });
                }
                let text =
                    format!("{message}; deleting its {n} pods (plain pods cannot be suspended; create them again)");
                self.event(key, EventType::Warning, "Evicted", &text);
            }
            (_, GroupState::Evicted) => {
                self.set_suspend(key, true);
                self.event(key, EventType::Warning, "Evicted", &message);
            }
            (Reason::Submitted, _) => {
                let queue = self.state_queue(key);
                self.event(key, EventType::Normal, "Queued", &format!("queued in {queue}"));
            }
            (Reason::Unsatisfiable { .. }, _) => self.event(key, EventType::Warning, "Unsatisfiable", &message),
            (Reason::Reserved { .. }, _) => self.event(key, EventType::Normal, "Reserved", &message),
            (Reason::AllReady, GroupState::Running) => self.event(key, EventType::Normal, "PodsReady", &message),
            (Reason::RunTimeExceeded { .. }, _) => self.ended_over_limit(key, &message),
            (Reason::Finished { succeeded }, _) => {
                let reason = if *succeeded { "Succeeded" } else { "Failed" };
                self.event(key, EventType::Normal, reason, &message);
            }
            (Reason::BackoffLimitExceeded { .. }, _) => self.event(key, EventType::Warning, "Deactivated", &message),
            (Reason::GivingWay { members, .. }, _) => {
                // The members are lost once these pods are gone (`pods_changed`); a Job's
                // controller makes new ones, which wait unbound until the group grows again.
                let pods: Vec<(String, String)> = self
                    .group_pods
                    .get(key)
                    .into_iter()
                    .flatten()
                    .filter_map(|u| self.pods.items.get(u))
                    .filter(|p| !p.deleting && p.holds_capacity() && p.member.is_some_and(|m| members.contains(&m)))
                    .map(|p| (p.name.clone(), p.uid.clone()))
                    .collect();
                let text = format!("{message}; deleting {} pods", pods.len());
                if !pods.is_empty() {
                    self.actions.push(Action::DeletePods {
                        key: key.clone(),
                        namespace: key.namespace.to_string(),
                        pods,
                    });
                }
                self.event(key, EventType::Normal, "GivingWay", &text);
            }
            (Reason::Suspended | Reason::Resumed | Reason::Shrunk { .. } | Reason::Grown { .. }, _) => {
                let reason = format!("{:?}", t.reason).split([' ', '{']).next().unwrap_or("Changed").to_string();
                self.event(key, EventType::Normal, &reason, &message);
            }
            _ => {}
        }
    }

    pub(super) fn state_queue(&self, key: &GroupKey) -> String {
        self.engine.as_ref().and_then(|e| e.engine().group(key)).map(|g| g.spec.queue.clone()).unwrap_or_default()
    }

    pub(super) fn event(&mut self, key: &GroupKey, kind: EventType, reason: &str, message: &str) {
        // Events name the workload by uid, with its Group as the related object.
        let subject = match self.workload(&key.to_string()) {
            Some(w) => Subject::Workload { kind: w.kind, uid: w.uid.clone() },
            None => Subject::Group,
        };
        self.actions.push(Action::Event {
            key: key.clone(),
            subject,
            kind,
            reason: reason.to_string(),
            message: message.to_string(),
        });
    }

    /// A warning event on a pod muster will not bind, once per pod.
    pub(super) fn tell_pod(
        &mut self,
        key: &GroupKey,
        namespace: &str,
        pod: &str,
        uid: &str,
        reason: &str,
        message: &str,
    ) {
        if self.told_pods.insert(uid.to_string()) {
            self.actions.push(Action::Event {
                key: GroupKey::new(namespace, pod),
                subject: Subject::Pod { uid: uid.to_string() },
                kind: EventType::Warning,
                reason: reason.to_string(),
                message: message.to_string(),
            });
            warn!(group = %key, pod, "{message}");
        }
    }

    /// The Group object's status from the engine's group.
    /// `message` says what happened last, for when the engine keeps no waiting reason.
    pub(super) fn update_status(&mut self, key: &GroupKey, message: &str, now: i64) {
        let Some(g) = self.engine.as_ref().and_then(|e| e.engine().group(key)).cloned() else { return };
        let mut st = self.statuses.get(key).cloned().unwrap_or_default();
        let at = time(now);
        let s = g.state;
        st.phase = s.shown();
        let reason = |on: bool, yes: &str, no: &str| if on { yes.to_string() } else { no.to_string() };
        let msg = if g.reason.is_empty() || !s.is_pending() { message.to_string() } else { g.reason.clone() };
        st.set_condition(
            Cond::Queued,
            s.is_pending(),
            &reason(s.is_pending(), "Waiting", "NotWaiting"),
            &msg,
            None,
            at.clone(),
        );
        let reserved = s == GroupState::Reserved;
        st.set_condition(
            Cond::Reserved,
            reserved,
            &reason(reserved, "Reserved", "NotReserved"),
            &msg,
            None,
            at.clone(),
        );
        let admitted = s.holds_allocation();
        st.set_condition(Cond::Admitted, admitted, &reason(admitted, "Placed", "NotPlaced"), &msg, None, at.clone());
        let ready = s == GroupState::Running && g.not_ready_since.is_none();
        st.set_condition(Cond::PodsReady, ready, &reason(ready, "AllReady", "NotAllReady"), &msg, None, at.clone());
        if s.is_terminal() {
            let ok = s == GroupState::Succeeded;
            st.set_condition(Cond::Finished, true, &reason(ok, "Succeeded", "Failed"), &msg, None, at.clone());
        }
        if let Some(allowed) = g.run_time_exceeded {
            let text = format!(
                "ran past its declared run time and its queue's grace ({allowed} s from admission in all); muster \
                 stopped its pods"
            );
            st.set_condition(Cond::RunTimeExceeded, true, "RunTimeExceeded", &text, None, at.clone());
        }
        if g.evictions > 0 || st.condition(Cond::Evicted).is_some() {
            let ev = s == GroupState::Evicted;
            st.set_condition(Cond::Evicted, ev, &reason(ev, "Evicted", "NotEvicted"), &msg, None, at.clone());
        }
        if let Some((m, _)) = &g.unsatisfiable {
            st.set_condition(Cond::Unsatisfiable, true, "Unsatisfiable", m, None, at.clone());
        } else if st.condition(Cond::Unsatisfiable).is_some() {
            st.set_condition(Cond::Unsatisfiable, false, "Satisfiable", &msg, None, at.clone());
        }
        st.allocation = g
            .allocation
            .as_ref()
            .filter(|_| admitted)
            .map(|a| a.members.iter().map(|m| MemberAllocation { member: m.index, node: m.node.clone() }).collect())
            .unwrap_or_default();
        st.requeue = (g.requeues > 0 || g.evictions > 0)
            .then(|| RequeueState { count: g.evictions, requeue_at: g.requeue_at.map(time) });
        if !s.is_pending() {
            st.queue_position = None;
            st.estimated_start = None;
        }
        st.message = Some(msg);
        self.push_status(key, st);
    }

    pub(super) fn push_status(&mut self, key: &GroupKey, st: GroupStatus) {
        if self.statuses.get(key) == Some(&st) || !(self.workload(&key.to_string()).is_some() || self.is_plain(key)) {
            return;
        }
        self.statuses.insert(key.clone(), st.clone());
        self.actions.push(Action::Status { key: key.clone(), status: Box::new(st) });
    }

    /// Group objects that still disagree with muster: a status someone else wrote gets muster's
    /// back; a deleted one is created again while its Job (or a plain group's pods) lives.
    pub(super) fn repair_group_objects(&mut self, now: i64) {
        let due: Vec<GroupKey> = self
            .suspect
            .iter()
            .filter(|(_, since)| now - **since >= REPAIR_AFTER_SECS)
            .map(|(k, _)| k.clone())
            .collect();
        for key in due {
            self.suspect.remove(&key);
            let Some(ours) = self.statuses.get(&key).cloned() else { continue };
            let mirror = key.to_string();
            let live = self.workload(&mirror).map_or_else(|| self.is_plain(&key), |j| !j.deleting);
            if !live {
                continue;
            }
            match self.group_objects.items.get(&mirror) {
                None => {
                    warn!(group = %key, "the Group object was deleted, not by muster; creating it again");
                    self.ensured.remove(&key);
                    self.dirty_jobs.insert(mirror);
                    self.dirty_plain.insert(key.clone());
                    self.actions.push(Action::Status { key, status: Box::new(ours) });
                }
                Some(g) if g.status == convert::status_fingerprint(&ours) => {}
                Some(_) => {
                    warn!(group = %key, "the Group status was written, not by muster; writing muster's back");
                    self.actions.push(Action::RestoreStatus { key, status: Box::new(ours) });
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_queues_accuracy_is_the_median_of_its_latest_errors() {
        let mut e = EstimateErrors::default();
        assert_eq!(e.accuracy("q"), None, "nothing scored yet");
        for error in [0.5, 0.1, 0.2] {
            e.record("q", error);
        }
        assert_eq!(e.accuracy("q"), Some(EstimateAccuracy { groups: 3, median_error_percent: 20 }));
        e.record("q", 0.3);
        assert_eq!(e.accuracy("q").map(|a| a.median_error_percent), Some(25), "even: the mean of the middle two");
        // Only the latest 50 count: fifty exact estimates push the old errors out.
        for _ in 0..ESTIMATES_SCORED {
            e.record("q", 0.0);
        }
        assert_eq!(e.accuracy("q"), Some(EstimateAccuracy { groups: 50, median_error_percent: 0 }));
        assert_eq!(e.accuracy("other"), None);
    }
}
