//! Volcano's `reclaim` action (pkg/scheduler/actions/reclaim/reclaim.go, v1.15.1) with the
//! capacity plugin's tiers (gang and conformance in the first, capacity in the second):
//! - Queues take turns by QueueOrderFn; each gives its starving jobs (Inqueue or Running, valid,
//!   fewer than minMember placed), in job order, whose queue is Preemptive for the pod.
//! - For each pending pod, the nodes whose filter admits it are tried in order. The reclaimees
//!   on a node are the Running (Ready) pods of other queues' jobs. Victims are chosen by
//!   `Session.Reclaimable` (framework/session_plugins.go): the gang plugin (plugins/gang/gang.go)
//!   offers a job's pods only while it keeps more than minMember Ready; when it offers none the
//!   first tier decides nothing and the capacity plugin's choice stands alone: pods of queues
//!   above their deserved (or deserving none of what the pod asks), down to their guarantee. So
//!   a gang at exactly minMember does lose pods, one by one, and what is left of it keeps its
//!   nodes while its replacement pods wait.
//! - Victims go, in victim order, until the pod fits the node with what they free; the pod is
//!   pipelined there. The job's evictions are committed only if it then has minMember placed or
//!   pipelined, else all are undone. Pipelined pods bind in a later session's allocate.
//!
//! Victim order: the lowest-priority job first, then the newest, then its last pod (the reverse
//! of job order). Pods placed by this session's allocate count as placed.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};

use super::Volcano;
use super::capacity::Queues;
use crate::models::gang::{self, Snapshot};
use crate::scheduler::{Action, ClusterView, JobId, NodeId, PodId, PodPhase};

/// What the reclaim has changed so far in the session.
#[derive(Clone)]
struct Session {
    queues: Queues,
    /// Free room per node: the session's snapshot, plus what victims free, less what pipelined
    /// pods take.
    free: BTreeMap<NodeId, Vec<u64>>,
    evicted: BTreeSet<PodId>,
}

impl Session {
    fn free<'a>(&'a mut self, view: &ClusterView<'_>, snap: &Snapshot, node: NodeId) -> &'a mut Vec<u64> {
        self.free.entry(node).or_insert_with(|| (0..view.resources().len()).map(|r| snap.free(view, node, r)).collect())
    }
}

impl Volcano {
    pub(super) fn reclaim(&mut self, view: &ClusterView<'_>, snap: Snapshot, actions: &mut Vec<Action>) {
        let Some(queues) = self.queues.take() else { return };
        let bound_now: BTreeSet<PodId> =
            actions.iter().filter_map(|a| if let Action::Bind { pod, .. } = a { Some(*pod) } else { None }).collect();
        let placed = |job: JobId| {
            let now = view.job(job).pods.iter().filter(|p| bound_now.contains(p)).count() as u32;
            gang::placed_members(view, job) + now
        };
        let mut running_on: BTreeMap<NodeId, Vec<PodId>> = BTreeMap::new();
        let mut starving: BTreeMap<usize, Vec<JobId>> = BTreeMap::new();
        for &(_, _, job) in &self.inqueue {
            let j = view.job(job);
            let Some(q) = j.spec.queue else { continue };
            for &pod in &j.pods {
                if let (PodPhase::Ready, Some(node)) = (view.pod(pod).phase, view.pod(pod).node) {
                    running_on.entry(node).or_default().push(pod);
                }
            }
            if gang::group_complete(view, job) && placed(job) < j.spec.min_members {
                starving.entry(q).or_default().push(job);
            }
        }
        let mut s = Session { queues, free: BTreeMap::new(), evicted: BTreeSet::new() };
        while let Some(q) = s.queues.first(starving.keys()) {
            for job in starving.remove(&q).unwrap_or_default() {
                let before = s.clone();
                let mut pipelined = 0;
                let mut victims = vec![];
                let min = view.job(job).spec.min_members;
                for pod in gang::pending_pods(view, job).into_iter().filter(|p| !bound_now.contains(p)) {
                    if placed(job) + pipelined >= min {
                        break;
                    }
                    if !s.queues.preemptive(q, view.request(pod)) {
                        continue;
                    }
                    if let Some(taken) = reclaim_for_pod(view, &snap, &mut s, &running_on, q, pod, &placed) {
                        pipelined += 1;
                        victims.extend(taken);
                    }
                }
                if placed(job) + pipelined >= min {
                    self.commit(view, &s, &victims, actions);
                } else {
                    s = before;
                }
            }
        }
        self.queues = Some(s.queues);
    }

    /// Evicts the victims; a job they leave below minMember is a gang to be completed again.
    fn commit(&mut self, view: &ClusterView<'_>, s: &Session, victims: &[PodId], actions: &mut Vec<Action>) {
        for &pod in victims {
            actions.push(Action::Evict { pod });
            let job = view.pod(pod).job;
            let gone = view.job(job).pods.iter().filter(|p| s.evicted.contains(p)).count() as u32;
            if gang::placed_members(view, job).saturating_sub(gone) < view.job(job).spec.min_members {
                self.allocated.remove(&job);
            }
        }
    }
}

/// reclaimForTask: the first node where victims free room for `pod` of queue `q`; evicts
/// them and pipelines the pod there in the session. Returns the victims.
fn reclaim_for_pod(
    view: &ClusterView<'_>,
    snap: &Snapshot,
    s: &mut Session,
    running_on: &BTreeMap<NodeId, Vec<PodId>>,
    q: usize,
    pod: PodId,
    placed: &impl Fn(JobId) -> u32,
) -> Option<Vec<PodId>> {
    let req = view.request(pod);
    for (&node, pods) in running_on {
        if !view.eligible(pod, node) {
            continue;
        }
        let mut reclaimees: Vec<PodId> = pods
            .iter()
            .copied()
            .filter(|p| !s.evicted.contains(p) && view.job(view.pod(*p).job).spec.queue.is_some_and(|v| v != q))
            .collect();
        if reclaimees.is_empty() {
            continue;
        }
        reclaimees.sort_by_key(|&p| {
            let j = view.job(view.pod(p).job);
            (j.spec.priority, Reverse(j.spec.submit_ms), Reverse(view.pod(p).job), Reverse(p))
        });
        let victims = reclaimable(view, s, &reclaimees, req, placed);
        let free = s.free(view, snap, node).clone();
        let mut room = free.clone();
        for &v in &victims {
            for (r, x) in room.iter_mut().zip(view.request(v)) {
                *r += x;
            }
        }
        // ValidateVictims: even all of them would not make room.
        if req.iter().zip(&room).any(|(x, r)| x > r) {
            continue;
        }
        let mut room = free;
        let mut taken = vec![];
        for &v in &victims {
            if req.iter().zip(&room).all(|(x, r)| x <= r) {
                break;
            }
            for (r, x) in room.iter_mut().zip(view.request(v)) {
                *r += x;
            }
            s.evicted.insert(v);
            let vq = view.job(view.pod(v).job).spec.queue.expect("reclaimees are of a tenant's queue");
            s.queues.hold(vq, view.request(v), false);
            taken.push(v);
        }
        for (r, x) in room.iter_mut().zip(req) {
            *r -= x;
        }
        *s.free(view, snap, node) = room;
        s.queues.hold(q, req, true);
        return Some(taken);
    }
    None
}

/// Session.Reclaimable over the capacity plugin's tiers: the gang plugin's victims if it
/// offers any, else the capacity plugin's.
fn reclaimable(
    view: &ClusterView<'_>,
    s: &Session,
    reclaimees: &[PodId],
    req: &[u64],
    placed: &impl Fn(JobId) -> u32,
) -> Vec<PodId> {
    let mut ready: BTreeMap<JobId, u32> = BTreeMap::new();
    let gang: Vec<PodId> = reclaimees
        .iter()
        .copied()
        .filter(|&p| {
            let job = view.pod(p).job;
            let n = ready.entry(job).or_insert_with(|| {
                let gone = view.job(job).pods.iter().filter(|x| s.evicted.contains(x)).count() as u32;
                placed(job) - gone
            });
            let spare = *n > view.job(job).spec.min_members;
            *n -= u32::from(spare);
            spare
        })
        .collect();
    if !gang.is_empty() {
        return gang;
    }
    let mut allocated: BTreeMap<usize, Vec<u64>> = BTreeMap::new();
    reclaimees
        .iter()
        .copied()
        .filter(|&p| {
            let v = view.request(p);
            if !v.iter().zip(req).any(|(a, b)| *a > 0 && *b > 0) {
                return false;
            }
            let q = view.job(view.pod(p).job).spec.queue.expect("reclaimees are of a tenant's queue");
            let alloc = allocated.entry(q).or_insert_with(|| s.queues.allocated[q].clone());
            s.queues.take_victim(q, alloc, v)
        })
        .collect()
}
