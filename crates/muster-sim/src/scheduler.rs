//! The interface every scheduler model implements, the built-in models and the muster adapter
//! alike: events in, actions out, a read-only view of the modelled cluster in between.
//!
//! Jobs arrive suspended. A scheduler unsuspends a job with `Start` (the job controller then
//! creates its pods), places pods with `Bind` (or `Reserve` first, as a permit stage would), and may
//! `Suspend` a started job (its pods are deleted, it waits suspended again) or `Fail` it.

use std::collections::BTreeMap;

use muster_graph::graph::Taint;

use crate::scenario::{JobSpec, Timing};

/// Index of a job in the workload (submission order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct JobId(pub u32);
/// Index of a pod; every start of a job creates new pods.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PodId(pub u32);
/// Index of a node, in the cluster description's order (`ClusterDescription::for_each_node`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeId(pub u32);

impl JobId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}
impl PodId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}
impl NodeId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// What happened in the cluster. Delivered in time order, ties in the order they happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SimEvent {
    /// The Job object exists, suspended.
    JobSubmitted {
        job: JobId,
    },
    /// The job was unsuspended (by `Start`); its deadline runs from now; pods follow.
    JobStarted {
        job: JobId,
    },
    /// The job controller created a pod (Pending, unbound).
    PodCreated {
        pod: PodId,
    },
    /// The binding of a pod completed; the pod is starting on `node`.
    PodBound {
        pod: PodId,
        node: NodeId,
    },
    PodReady {
        pod: PodId,
    },
    /// The pod is gone and holds nothing: it succeeded, or was deleted (job failed, finished
    /// without it, or was suspended).
    PodFinished {
        pod: PodId,
        succeeded: bool,
    },
    /// The job's run began (its quorum of pods is Ready).
    JobRunning {
        job: JobId,
    },
    /// After `Suspend`: every pod of the job is gone, the job waits suspended.
    JobSuspended {
        job: JobId,
    },
    /// Terminal: succeeded (`timing.jobCompleteDelay` after its last pod), or failed (deadline,
    /// or `Fail`).
    JobFinished {
        job: JobId,
        succeeded: bool,
    },
}

/// What a scheduler asks for. An action that breaks a rule (a pod that does not fit, a job in the
/// wrong phase) stops the run with `SimError::BadAction`: a model bug, never silently ignored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Unsuspend a submitted or suspended job with `members` pods (min..=max of its spec).
    Start { job: JobId, members: u32 },
    /// Hold the pod's requests on the node without binding (a permit stage); no other pod can use them.
    Reserve { pod: PodId, node: NodeId },
    /// Give back a reservation; the pod is Pending again.
    Unreserve { pod: PodId },
    /// Bind a Pending (or reserved on this node) pod. Resources are held from now; the binding
    /// completes through the API-rate-limited binder.
    Bind { pod: PodId, node: NodeId },
    /// Delete the job's pods and suspend it again (Kueue eviction, a muster readiness timeout).
    Suspend { job: JobId },
    /// End the job as failed (deactivated, or impossible to place).
    Fail { job: JobId },
    /// A running elastic job gets `members` pods in all (more than now, at most its max): the
    /// Job controller makes the new ones.
    Grow { job: JobId, members: u32 },
    /// Delete these pods of a running elastic job, which runs on with the rest (at least its
    /// min): the work left is done more slowly.
    Shrink { job: JobId, pods: Vec<PodId> },
    /// Evict one pod that holds room (Volcano's reclaim deletes pods one by one): the Job
    /// controller makes a replacement with the same completion index. A job left below its
    /// quorum of Ready pods has its run cut: the work so far is lost, and the run starts over
    /// once the quorum is Ready again.
    Evict { pod: PodId },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodPhase {
    /// Created, not placed.
    Pending,
    /// Holding resources on a node, not bound.
    Reserved,
    /// Bind issued; holding resources; binding in flight.
    Binding,
    /// Bound; container starting.
    Starting,
    Ready,
    Succeeded,
    Deleted,
}

impl PodPhase {
    /// True while the pod holds node resources.
    pub fn holds(self) -> bool {
        matches!(self, Self::Reserved | Self::Binding | Self::Starting | Self::Ready)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobPhase {
    /// Not yet arrived.
    Future,
    Suspended,
    /// Unsuspended; pods being created and placed.
    Started,
    /// Its run is progressing.
    Running,
    Succeeded,
    Failed,
}

impl JobState<'_> {
    /// The index of the set of the pod with completion index `index`: each set takes its count
    /// of indices in turn, the last set every index after (the pods an elastic job grows by).
    pub fn set_index(&self, index: u32) -> usize {
        let mut first = 0u32;
        for (k, s) in self.sets[..self.sets.len() - 1].iter().enumerate() {
            first = first.saturating_add(s.max_members);
            if index < first {
                return k;
            }
        }
        self.sets.len() - 1
    }

    /// The set of the pod with completion index `index`.
    pub fn set_of(&self, index: u32) -> &PodSetState {
        &self.sets[self.set_index(index)]
    }

    /// Whether the pod with completion index `index` is of the last set (the one that grows and
    /// gives back pods).
    pub fn in_last_set(&self, index: u32) -> bool {
        self.set_index(index) + 1 == self.sets.len()
    }

    /// Pods of every set but the last: the part of the job whose count never changes.
    pub fn fixed_members(&self) -> u32 {
        self.sets[..self.sets.len() - 1].iter().map(|s| s.max_members).sum()
    }

    /// What `members` pods of the job ask in all, of resource `r`: every set but the last whole,
    /// the rest of the pods in the last.
    pub fn total(&self, members: u32, r: usize) -> u64 {
        let (last, fixed) = self.sets.split_last().expect("a job has at least one set");
        let mut left = members;
        let mut sum = 0u64;
        for s in fixed {
            let n = s.max_members.min(left);
            sum += s.request[r] * u64::from(n);
            left -= n;
        }
        sum + last.request[r] * u64::from(left)
    }
}

impl JobPhase {
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Succeeded | Self::Failed)
    }
}

#[derive(Debug, Clone)]
pub struct NodeState {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    pub unschedulable: bool,
    /// By resource index (`ClusterView::resources`).
    pub capacity: Vec<u64>,
    /// Capacity minus what held pods request.
    pub free: Vec<u64>,
}

#[derive(Debug, Clone)]
pub struct PodState {
    pub job: JobId,
    /// Completion index within this start of the job (0..members).
    pub index: u32,
    pub phase: PodPhase,
    pub node: Option<NodeId>,
    pub created_ms: i64,
    /// When it became Ready (an evicted pod that runs its own run time loses the work since).
    pub ready_ms: Option<i64>,
}

/// One set of alike pods of a job (the only one when its pods are alike).
#[derive(Debug, Clone)]
pub struct PodSetState {
    /// Per pod, by resource index.
    pub request: Vec<u64>,
    /// Index into the view's filter table (sets with equal node filters share one).
    pub filter: usize,
    /// Completion indices it takes (the last set takes every index after the others').
    pub max_members: u32,
}

#[derive(Debug, Clone)]
pub struct JobState<'w> {
    /// The workload's own: the run never changes it.
    pub spec: &'w JobSpec,
    pub phase: JobPhase,
    /// Its sets of pods, in completion-index order; one when its pods are alike.
    pub sets: Vec<PodSetState>,
    /// Pods of the current start, by completion index (created so far).
    pub pods: Vec<PodId>,
    /// Pods of the current start (its parallelism); 0 while suspended.
    pub members: u32,
    /// Last unsuspension; the deadline counts from here.
    pub started_ms: Option<i64>,
    pub run_started_ms: Option<i64>,
    pub ended_ms: Option<i64>,
    pub ready: u32,
    /// Pods of the current start whose binding completed.
    pub bound: u32,
    /// Pods of the current start that were deleted, and that succeeded (kept by the engine as
    /// it ends pods, so the questions below need not walk every pod).
    pub deleted: u32,
    pub succeeded: u32,
    /// Times the job was started (more than 1 after suspensions).
    pub starts: u32,
    /// With a topology constraint: whether its last run's pods spanned more than one domain of its level.
    pub spread: Option<bool>,
}

/// Read-only view of the modelled cluster handed to schedulers.
pub struct ClusterView<'a> {
    pub(crate) resources: &'a [String],
    pub(crate) nodes: &'a [NodeState],
    pub(crate) node_by_name: &'a BTreeMap<String, NodeId>,
    pub(crate) jobs: &'a [JobState<'a>],
    pub(crate) pods: &'a [PodState],
    pub(crate) eligible: &'a [Vec<bool>],
    pub(crate) index: &'a crate::node_index::NodeIndex,
    pub(crate) timing: &'a Timing,
    pub(crate) binder_free_at: i64,
}

impl ClusterView<'_> {
    /// Resource names in index order (capacity and request vectors use these indices).
    pub fn resources(&self) -> &[String] {
        self.resources
    }
    pub fn resource_index(&self, name: &str) -> Option<usize> {
        self.resources.iter().position(|r| r == name)
    }
    pub fn nodes(&self) -> &[NodeState] {
        self.nodes
    }
    pub fn node(&self, id: NodeId) -> &NodeState {
        &self.nodes[id.index()]
    }
    /// The node with this name in the cluster description.
    pub fn node_id(&self, name: &str) -> Option<NodeId> {
        self.node_by_name.get(name).copied()
    }
    /// All jobs, indexed by `JobId` (future ones too: their specs are not to be peeked at).
    pub fn jobs(&self) -> &[JobState<'_>] {
        self.jobs
    }
    pub fn job(&self, id: JobId) -> &JobState<'_> {
        &self.jobs[id.index()]
    }
    pub fn pod(&self, id: PodId) -> &PodState {
        &self.pods[id.index()]
    }
    /// Whether every member of the job's current start has its pod and all of them succeeded:
    /// its run is over.
    pub fn all_succeeded(&self, id: JobId) -> bool {
        let j = self.job(id);
        let live = self.live_pods(id);
        debug_assert_eq!(
            j.succeeded as usize,
            j.pods.iter().filter(|&&p| self.pod(p).phase == PodPhase::Succeeded).count(),
            "succeeded pods counted as they end"
        );
        live == j.members && j.succeeded == live
    }

    /// Pods of the job's current start that were not deleted (a shrink deletes some).
    pub fn live_pods(&self, id: JobId) -> u32 {
        let j = self.job(id);
        debug_assert_eq!(
            j.deleted as usize,
            j.pods.iter().filter(|&&p| self.pod(p).phase == PodPhase::Deleted).count(),
            "deleted pods counted as they end"
        );
        j.pods.len() as u32 - j.deleted
    }
    /// The set of pods `pod` belongs to.
    pub fn set(&self, pod: PodId) -> &PodSetState {
        let p = &self.pods[pod.index()];
        self.jobs[p.job.index()].set_of(p.index)
    }
    /// What the pod asks, by resource index.
    pub fn request(&self, pod: PodId) -> &[u64] {
        &self.set(pod).request
    }
    /// True if the set's node filter (selector, tolerations) admits the node and it is not cordoned.
    pub fn set_eligible(&self, set: &PodSetState, node: NodeId) -> bool {
        self.eligible[set.filter][node.index()]
    }
    /// True if the pod's node filter admits the node and it is not cordoned.
    pub fn eligible(&self, pod: PodId, node: NodeId) -> bool {
        self.set_eligible(self.set(pod), node)
    }
    /// True if the pod fits the node's free resources now and the node is eligible.
    pub fn fits(&self, pod: PodId, node: NodeId) -> bool {
        let req = self.request(pod);
        self.eligible(pod, node) && self.nodes[node.index()].free.iter().zip(req).all(|(f, r)| f >= r)
    }
    /// Calls `f` on every node where `pod` fits now, in index order starting at `start` and
    /// wrapping; stops when `f` returns false. Skips whole ranges of nodes that cannot fit, so a
    /// full cluster costs O(log nodes).
    pub fn for_each_fitting(&self, pod: PodId, start: usize, mut f: impl FnMut(NodeId) -> bool) {
        let set = self.set(pod);
        let elig = &self.eligible[set.filter];
        self.index.for_each_fitting(&set.request, start, |n| if elig[n] { f(NodeId(n as u32)) } else { true });
    }
    pub fn timing(&self) -> &Timing {
        self.timing
    }
    /// When the binder finishes the bindings already issued; a bind issued now completes one
    /// binding interval after this (or after now, if later).
    pub fn binder_free_at(&self) -> i64 {
        self.binder_free_at
    }
}

/// A scheduler model. The engine calls `on_event` for each event, then `decide` (again while it
/// returns actions, at the same instant), and wakes the scheduler at `next_wakeup` even if nothing
/// happens. Implementations must be deterministic.
pub trait Scheduler: Send {
    fn name(&self) -> String;
    fn on_event(&mut self, event: &SimEvent, view: &ClusterView<'_>, now_ms: i64);
    fn decide(&mut self, view: &ClusterView<'_>, now_ms: i64) -> Vec<Action>;
    /// The next time this scheduler wants `decide` called without an event; None if none.
    fn next_wakeup(&self) -> Option<i64>;
    /// For a scheduler that predicts starts: the start (ms) each job was first told to expect
    /// while it waited.
    fn estimated_starts(&self) -> Option<&BTreeMap<JobId, i64>> {
        None
    }
    /// For a scheduler that holds the scenario's calendar reservations: by reservation, the jobs
    /// it evicted because a window opened (`atStart: Evict`). None for one that holds none.
    fn window_evictions(&self) -> Option<&BTreeMap<String, u64>> {
        None
    }
}
