//! A workload muster holds again (evicted with its group, or suspended by its user) is released
//! only once the bound pods of its earlier run have stopped, as Kueue waits for an evicted job to be
//! inactive before admitting it again. Released sooner (a group placed again in the cycle that
//! evicted it, when a node is deleted under it), its controller may never see it held: it keeps
//! the pods still running, counts those of the lost node as failed (a Job with `backoffLimit: 0`
//! fails), and the group looks running through pods bound where its new placement is not.

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

    /// How many pods of its earlier run still hold a node while `key`'s workload is held (0 when
    /// it is not held; an unbound pod is simply bound to the new placement).
    pub(super) fn earlier_run_pods(&self, key: &GroupKey) -> usize {
        if !self.suspend_held(key) {
            return 0;
        }
        let pods = self.group_pods.get(key).into_iter().flatten().filter_map(|u| self.pods.items.get(u));
        pods.filter(|p| p.holds_capacity()).count()
    }

    /// Whether `key`'s workload is held while a pod of its earlier run still holds a node.
    pub(super) fn earlier_run_stopping(&self, key: &GroupKey) -> bool {
        self.earlier_run_pods(key) > 0
    }
}
