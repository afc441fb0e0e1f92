//! A workload's group finished by its pods. The Job controller marks a Job Complete a second or
//! more after its last pod ended (it batches pod updates), and the group's nodes would stay
//! reserved for it meanwhile, idle, with the next group waiting. Where a kind says how many
//! successes finish its work ([`WorkloadView::succeeded_pods_to_finish`]), the group finishes as
//! soon as that many of its pods have succeeded and none is left pending or running; the
//! Complete condition that follows finds it finished already.

use std::collections::BTreeSet;

use muster_durable::Input;
use muster_queue::GroupKey;
use muster_store::Store;

use super::Brain;
use crate::convert::PodPhase;

impl<S: Store> Brain<S> {
    /// Finishes `key`'s group (successfully) if its pods say its work is done; returns whether
    /// they do. Called for a group that holds its allocation.
    pub(super) fn finish_if_done_by_pods(&mut self, key: &GroupKey) -> bool {
        let Some(needed) = self.workload(&key.to_string()).and_then(|w| w.succeeded_pods_to_finish) else {
            return false;
        };
        let pods: Vec<_> =
            self.group_pods.get(key).into_iter().flatten().filter_map(|u| self.pods.items.get(u)).collect();
        if pods.is_empty() || pods.iter().any(|p| !p.phase.is_terminal()) {
            return false;
        }
        // By completion index where the pods carry one: a retried index counts once.
        let succeeded: BTreeSet<String> = pods
            .iter()
            .filter(|p| p.phase == PodPhase::Succeeded)
            .map(|p| p.place.as_ref().and_then(|at| at.index).map_or_else(|| p.uid.clone(), |i| i.to_string()))
            .collect();
        if succeeded.len() < needed as usize {
            return false;
        }
        let queued = self.inputs.iter().any(|i| matches!(i, Input::Finished { key: k, .. } if k == key));
        if !queued {
            self.inputs.push(Input::Finished { key: key.clone(), succeeded: true });
        }
        true
    }
}
