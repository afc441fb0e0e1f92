//! A workload muster holds again (evicted with its group, or suspended by its user) is released
//! only once its controller has acted on the hold: every pod of its earlier run that was bound has
//! stopped or is being deleted. Kueue likewise waits for an evicted job to be inactive before
//! admitting it again. Released sooner (a group placed again in the cycle that evicted it, when a
//! node is deleted under it), its controller may never see it held: it keeps the pods still
//! running, counts those of the lost node as failed once they are removed (a Job with
//! `backoffLimit: 0` fails), and the group looks running through pods bound where its new
//! placement is not. A pod the Job controller deletes for a suspension loses its tracking
//! finalizer first and is never counted as failed, so one still terminating (on a node that
//! stopped answering, for as long as it takes) need not be waited for.

use muster_queue::GroupKey;
use muster_store::Store;

use super::Brain;

impl<S: Store> Brain<S> {
    /// Whether muster holds `key`'s workload: its suspend is on its way, or it is seen suspended
    /// with no release on its way.
    pub(super) fn suspend_held(&self, key: &GroupKey) -> bool {
        match self.suspend_sent.get(key) {
            Some(&suspend) => suspend,
            None => self.workload(&key.to_string()).is_some_and(|w| w.suspended),
        }
    }

    /// How many pods of its earlier run still hold a node, not being deleted, while `key`'s
    /// workload is held (0 when it is not held; an unbound pod is simply bound to the new
    /// placement).
    pub(super) fn earlier_run_pods(&self, key: &GroupKey) -> usize {
        if !self.suspend_held(key) {
            return 0;
        }
        let pods = self.group_pods.get(key).into_iter().flatten().filter_map(|u| self.pods.items.get(u));
        pods.filter(|p| p.holds_capacity() && !p.deleting).count()
    }

    /// Whether `key`'s workload is held while a pod of its earlier run still holds a node and is
    /// not being deleted.
    pub(super) fn earlier_run_stopping(&self, key: &GroupKey) -> bool {
        self.earlier_run_pods(key) > 0
    }
}
