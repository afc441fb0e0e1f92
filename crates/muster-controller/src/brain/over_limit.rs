//! Groups their queue ended at their run-time limit (`runTimeLimit`; muster-queue's
//! `run_limit.rs`): their room is free for the groups planned after them, so their pods must
//! stop, whatever kind made them. A Job is given an `activeDeadlineSeconds` it has already run
//! past, so that it fails as a Job fails at its deadline (reason DeadlineExceeded, its pods
//! deleted by the Job controller); other kinds are held as on an eviction (their controllers
//! delete the pods); a plain group's pods are deleted. Level-triggered: a workload found still
//! running after a restart is stopped again.

use muster_k8s::workload::job;

use super::*;

impl<S: Store> Brain<S> {
    /// On the transition that ended `key`'s group: a warning event, and its pods stopped.
    pub(super) fn ended_over_limit(&mut self, key: &GroupKey, message: &str) {
        self.event(key, EventType::Warning, "RunTimeExceeded", &format!("{message}; stopping its pods"));
        self.stop_over_limit(key);
    }

    /// Stops what still runs of a group ended at its limit (none for any other group): a
    /// workload once per process, a plain group's live pods whenever some are left.
    pub(super) fn stop_over_limit(&mut self, key: &GroupKey) {
        let engine = self.engine.as_ref().map(|e| e.engine());
        let Some(allowed) = engine.and_then(|e| e.group(key)).and_then(|g| g.run_time_exceeded) else { return };
        if let Some(w) = self.workload(&key.to_string()) {
            let is_job = *w.kind == job::KIND;
            if w.finished.is_some() || !self.over_limit_stopped.insert(key.clone()) {
                return;
            }
            if is_job {
                self.actions.push(Action::JobDeadline { key: key.clone(), seconds: allowed });
            } else {
                self.set_suspend(key, true);
            }
            return;
        }
        let pods: Vec<(String, String)> = self.live_plain_pods(key).map(|p| (p.name.clone(), p.uid.clone())).collect();
        if !pods.is_empty() {
            self.actions.push(Action::DeletePods { key: key.clone(), namespace: key.namespace.to_string(), pods });
        }
    }
}
