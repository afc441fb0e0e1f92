//! A workload muster holds again (evicted with its group, or suspended by its user) is released
//! only once the bound pods of its earlier run have stopped, as Kueue waits for an evicted job to be
//! inactive before admitting it again. Released sooner (a group placed again in the cycle that
//! evicted it, when a node is deleted under it), its controller may never see it held: it keeps
//! the pods still running, counts those of the lost node as failed (a Job with `backoffLimit: 0`
//! fails), and the group looks running through pods bound where its new placement is not.

use muster_queue::GroupKey;
use muster_store::Store;

use super::Brain;
use crate::convert::PodView;

impl<S: Store> Brain<S> {
    /// Whether muster holds `key`'s workload: its suspend is on its way, or it is seen suspended
    /// with no release on its way.
    pub(super) fn suspend_held(&self, key: &GroupKey) -> bool {
        match self.suspend_sent.get(key) {
            Some(&suspend) => suspend,
            None => self.workload(&key.to_string()).is_some_and(|w| w.suspended),
        }
    }

    /// Whether `key`'s workload is held while a pod of its earlier run still holds a node (an
    /// unbound one is simply bound to the new placement).
    pub(super) fn earlier_run_stopping(&self, key: &GroupKey) -> bool {
        let mut pods = self.group_pods.get(key).into_iter().flatten().filter_map(|u| self.pods.items.get(u));
        self.suspend_held(key) && pods.any(PodView::holds_capacity)
    }
}
