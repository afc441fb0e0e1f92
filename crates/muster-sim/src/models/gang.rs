//! What the gang models share: a group is a job whose gang is its min members; it is tried only
//! once that many of its pods exist (coscheduling's PreFilter, Volcano's valid-task check,
//! kube-scheduler's PreEnqueue); and the all-or-nothing placement of a gang against one snapshot
//! (Volcano's allocate statement, kube-scheduler's pod-group cycle): pods are placed one after the
//! other on the cluster minus what the snapshot already took, and either at least the gang's
//! quorum is placed and kept, or nothing is.

use std::collections::BTreeMap;

use crate::scheduler::{ClusterView, JobId, NodeId, PodId, PodPhase};

/// Whether the job has as many pods as its gang needs (min members) in its current start.
pub fn group_complete(view: &ClusterView<'_>, job: JobId) -> bool {
    let j = view.job(job);
    j.pods.len() as u32 >= j.spec.min_members
}

/// Pods of the job's current start that count towards its quorum: holding resources (placed,
/// binding, bound) or already succeeded.
pub fn placed_members(view: &ClusterView<'_>, job: JobId) -> u32 {
    let held = |p: &PodId| {
        let phase = view.pod(*p).phase;
        phase.holds() || phase == PodPhase::Succeeded
    };
    view.job(job).pods.iter().filter(|p| held(p)).count() as u32
}

/// Pods of the job's current start not yet placed.
pub fn pending_pods(view: &ClusterView<'_>, job: JobId) -> Vec<PodId> {
    view.job(job).pods.iter().copied().filter(|p| view.pod(*p).phase == PodPhase::Pending).collect()
}

/// The cluster of a scheduling cycle: the view's free resources minus what the cycle has placed so
/// far (tentatively: nothing is reserved in the engine until the placement is committed).
#[derive(Debug, Default, Clone)]
pub struct Snapshot {
    taken: BTreeMap<NodeId, Vec<u64>>,
}

impl Snapshot {
    /// Free amount of resource `r` on the node in this snapshot.
    pub fn free(&self, view: &ClusterView<'_>, node: NodeId, r: usize) -> u64 {
        let free = view.node(node).free[r];
        self.taken.get(&node).map_or(free, |t| free.saturating_sub(t[r]))
    }

    /// Whether a pod asking `req` fits what the snapshot left of a node where it fits now
    /// (callers have checked eligibility and the view's own fit).
    pub fn fits(&self, view: &ClusterView<'_>, req: &[u64], node: NodeId) -> bool {
        let Some(t) = self.taken.get(&node) else { return true };
        let free = &view.node(node).free;
        req.iter().enumerate().all(|(r, req)| free[r].saturating_sub(t[r]) >= *req)
    }

    /// Takes a pod asking `req` on the node.
    pub fn take(&mut self, req: &[u64], node: NodeId) {
        let t = self.taken.entry(node).or_insert_with(|| vec![0; req.len()]);
        for (x, r) in t.iter_mut().zip(req) {
            *x += r;
        }
    }
}

/// What an all-or-nothing gang placement did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GangPlacement {
    /// The pods placed and their nodes; empty when the gang was rejected.
    pub placed: Vec<(PodId, NodeId)>,
    /// Pods tried (placed or not): the loop's cost.
    pub evaluated: u32,
    /// At least `need` pods were placed (then `placed` is kept in the snapshot).
    pub accepted: bool,
}

/// Places the job's pending pods one after the other (in completion-index order, so set after
/// set) on `snap` with `choose` (a node where the pod fits in the snapshot, or None), stopping as
/// soon as `need` can no longer be reached (the remaining pods could not make it up:
/// kube-scheduler's PlacementFeasible) or a pod finds no node (the gang needs every pod of the
/// sets before the last, and the last set's pods are alike). With at least `need` placed, the placements stay
/// in `snap` and are returned; otherwise `snap` is left as it was and nothing is placed.
pub fn place_gang(
    view: &ClusterView<'_>,
    snap: &mut Snapshot,
    job: JobId,
    need: u32,
    mut choose: impl FnMut(&ClusterView<'_>, PodId, &Snapshot) -> Option<NodeId>,
) -> GangPlacement {
    let pending = pending_pods(view, job);
    if (pending.len() as u32) < need {
        return GangPlacement { placed: vec![], evaluated: 0, accepted: false };
    }
    let mut trial = snap.clone();
    let mut placed = Vec::new();
    let mut evaluated = 0;
    for (i, &pod) in pending.iter().enumerate() {
        evaluated += 1;
        match choose(view, pod, &trial) {
            Some(node) => {
                trial.take(view.request(pod), node);
                placed.push((pod, node));
            }
            None => break,
        }
        let left = (pending.len() - i - 1) as u32;
        if (placed.len() as u32) + left < need {
            break;
        }
    }
    let accepted = placed.len() as u32 >= need;
    if accepted {
        *snap = trial;
    } else {
        placed.clear();
    }
    GangPlacement { placed, evaluated, accepted }
}
