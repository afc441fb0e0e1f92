//! What flows through the brain: changes the watchers saw in, actions for the executor out.

use muster_k8s::workload::Kind;
use muster_k8s::{GroupSpec as GroupObjectSpec, GroupStatus, QueueStatus};
use muster_queue::GroupKey;

use crate::allocate::ClaimAllocation;
use crate::convert::{
    ClaimView, ClassView, GroupObjectView, NamespaceView, NodeView, PodView, SliceView, TemplateView, WorkloadView,
};

/// One change seen by a watcher. A relist (`Init` .. `InitDone`) replaces everything of its kind.
#[derive(Debug, Clone)]
pub enum Change<T> {
    Init,
    Apply(T),
    Delete(T),
    InitDone,
}

// Events move once through a channel; boxing the big variant would only add an allocation.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum Event {
    Node(Change<NodeView>),
    /// ResourceSlices: the devices DRA drivers publish, folded into their nodes.
    Slice(Change<SliceView>),
    /// ResourceClaims: the devices other schedulers allocated, held as their pods are.
    Claim(Change<ClaimView>),
    /// ResourceClaimTemplates: what muster's pods claim.
    Template(Change<TemplateView>),
    /// DeviceClasses: the kinds of device claims name.
    Class(Change<ClassView>),
    Pod(Change<PodView>),
    /// Workloads of a held kind with the queue label (a kind whose CRD is not installed is
    /// reported as one empty listing).
    Workload(&'static Kind, Change<WorkloadView>),
    /// Namespaces: only whether one is being deleted matters (nothing is written into it then).
    Namespace(Change<NamespaceView>),
    /// Group objects: their statuses are muster's, so one changed or deleted by anyone else is
    /// repaired.
    GroupObject(Change<GroupObjectView>),
    /// The binding of a pod was refused: the group must not run in part.
    BindFailed {
        key: GroupKey,
        pod: String,
        message: String,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Normal,
    Warning,
}

/// What an event is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subject {
    /// The group's Group object (plain-pod groups).
    Group,
    /// The group's workload (a Job, a JobSet, ...), by uid, with its Group as the related object.
    Workload { kind: &'static Kind, uid: String },
    /// A pod of no group, by uid (the event's key then names the pod).
    Pod { uid: String },
}

/// What the executor does against the API server.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Write the status of Queue `name` (its groups and what they hold).
    QueueStatus {
        name: String,
        status: Box<QueueStatus>,
    },
    /// Create or update the Group object of a Job (owned by it), or of a plain-pod group
    /// (`job_uid` empty: no owner; muster deletes it with [`Action::DeleteGroup`]).
    EnsureGroup {
        key: GroupKey,
        spec: Box<GroupObjectSpec>,
        job_uid: String,
    },
    /// Delete the Group object of a group that is gone (a plain group's pods are all gone).
    DeleteGroup {
        key: GroupKey,
    },
    /// Remove muster's scheduling gate from a plain pod. Always directly followed by the pod's
    /// [`Action::Bind`] (the apiserver refuses a binding while gates remain).
    Ungate {
        key: GroupKey,
        namespace: String,
        pod: String,
        uid: String,
    },
    /// Delete pods of a plain group (evicted: pods cannot be suspended). (name, uid) each.
    DeletePods {
        key: GroupKey,
        namespace: String,
        pods: Vec<(String, String)>,
    },
    Status {
        key: GroupKey,
        status: Box<GroupStatus>,
    },
    /// Replace a Group's whole status with muster's, over one someone else wrote.
    RestoreStatus {
        key: GroupKey,
        status: Box<GroupStatus>,
    },
    /// Hold (`suspend`) or release a workload of a held kind (a Job's or JobSet's spec.suspend).
    Suspend {
        key: GroupKey,
        kind: &'static Kind,
        suspend: bool,
    },
    /// End a Job that ran past its run-time limit: its `spec.activeDeadlineSeconds` set to the
    /// seconds it was allowed, which it has run already, so the Job controller fails it
    /// (reason DeadlineExceeded) and deletes its pods.
    JobDeadline {
        key: GroupKey,
        seconds: u64,
    },
    /// Remove the user's suspend- and resume-requested annotations once they are recorded.
    ClearRequests {
        key: GroupKey,
        kind: &'static Kind,
    },
    /// Mark the Kubernetes PodGroups the group's pods name (in the group's namespace) as scheduled
    /// (condition `PodGroupInitiallyScheduled`, as kube-scheduler sets it): every member is bound
    /// or binding.
    PodGroupScheduled {
        key: GroupKey,
        pod_groups: Vec<String>,
        message: String,
    },
    /// Bind a pod, having first allocated its claims.
    Bind {
        key: GroupKey,
        namespace: String,
        pod: String,
        uid: String,
        node: String,
        member: u32,
        claims: Vec<ClaimAllocation>,
    },
    /// An event about `key`'s group, or about the pod `key` names when the subject is a pod.
    Event {
        key: GroupKey,
        subject: Subject,
        kind: EventType,
        reason: String,
        message: String,
    },
}

impl Action {
    /// The group an action is for (all but a Queue's status).
    pub fn group(&self) -> Option<&GroupKey> {
        match self {
            Action::QueueStatus { .. } => None,
            Action::EnsureGroup { key, .. }
            | Action::DeleteGroup { key }
            | Action::Ungate { key, .. }
            | Action::DeletePods { key, .. }
            | Action::Status { key, .. }
            | Action::RestoreStatus { key, .. }
            | Action::Suspend { key, .. }
            | Action::JobDeadline { key, .. }
            | Action::ClearRequests { key, .. }
            | Action::Bind { key, .. }
            | Action::PodGroupScheduled { key, .. }
            | Action::Event { key, .. } => Some(key),
        }
    }
}
