//! Groups, their lifecycle state machine, and the transitions the engine reports.

use std::fmt;

use muster_graph::GroupRequest;
use serde::{Deserialize, Serialize};

use crate::clock;

/// A group's identity: the namespace and name of the Job/JobSet/pod group it stands for.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct GroupKey {
    pub namespace: std::sync::Arc<str>,
    pub name: std::sync::Arc<str>,
}

impl GroupKey {
    pub fn new(namespace: &str, name: &str) -> Self {
        Self { namespace: namespace.into(), name: name.into() }
    }
}

impl fmt::Display for GroupKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// Where a group is in its life: the engine's state, and the `phase` of a Group object's status
/// (which never shows `New` or `Deleted`, so the API schema leaves them out).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub enum GroupState {
    /// Not yet known to the engine (the `from` of a submission).
    #[cfg_attr(feature = "schema", schemars(skip))]
    New,
    /// Waiting for capacity or quota.
    Queued,
    /// Waiting, with a future start reserved on the graph.
    Reserved,
    /// Placed: every member has a node; pods are being released.
    Admitted,
    /// Every member ready.
    Running,
    Succeeded,
    Failed,
    /// Allocation released (timeout, preemption, lost members); waits for its requeue time.
    Evicted,
    /// Evicted too often; waits for the user to resume it.
    Deactivated,
    /// Held by the user.
    Suspended,
    #[cfg_attr(feature = "schema", schemars(skip))]
    Deleted,
}

impl GroupState {
    /// The phase a Group object shows: None for `New` and `Deleted`, which no object has.
    pub fn shown(self) -> Option<Self> {
        (!matches!(self, GroupState::New | GroupState::Deleted)).then_some(self)
    }

    /// Waiting for a place (in a queue's pending set).
    pub fn is_pending(self) -> bool {
        matches!(self, GroupState::Queued | GroupState::Reserved)
    }

    /// Holding an allocation.
    pub fn holds_allocation(self) -> bool {
        matches!(self, GroupState::Admitted | GroupState::Running)
    }

    pub fn is_terminal(self) -> bool {
        matches!(self, GroupState::Succeeded | GroupState::Failed | GroupState::Deleted)
    }

    /// Checks one step of the lifecycle. A self-step is legal only where it reports a change that
    /// keeps the state (a reservation that moves, a group that grows or shrinks, a group marked
    /// unsatisfiable).
    pub fn transition(from: GroupState, to: GroupState) -> Result<(), IllegalTransition> {
        use GroupState::*;
        let ok = match from {
            New => matches!(to, Queued),
            Queued => matches!(to, Queued | Reserved | Admitted | Suspended | Deleted),
            Reserved => matches!(to, Queued | Reserved | Admitted | Suspended | Deleted),
            Admitted => matches!(to, Admitted | Running | Evicted | Succeeded | Failed | Suspended | Deleted),
            Running => matches!(to, Running | Evicted | Succeeded | Failed | Suspended | Deleted),
            Evicted => matches!(to, Queued | Deactivated | Suspended | Deleted),
            // Staying put: a waiting group reshaped (Engine::update).
            Deactivated => matches!(to, Queued | Deactivated | Suspended | Deleted),
            Suspended => matches!(to, Queued | Suspended | Deleted),
            Succeeded | Failed => matches!(to, Deleted),
            Deleted => false,
        };
        if ok { Ok(()) } else { Err(IllegalTransition { from, to }) }
    }
}

impl fmt::Display for GroupState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("illegal transition {from} -> {to}")]
pub struct IllegalTransition {
    pub from: GroupState,
    pub to: GroupState,
}

/// What a user submits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupSpec {
    pub key: GroupKey,
    pub queue: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class: Option<String>,
    pub request: GroupRequest,
    pub submitted_at: i64,
}

/// One member's placement, by names a binder can use.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberPlacement {
    pub index: u32,
    pub node: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<String>,
}

/// A placement as persisted: the engine's allocation id, every member's node and devices, and the
/// expected window.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllocationRecord {
    pub alloc_id: u64,
    pub members: Vec<MemberPlacement>,
    pub start: i64,
    /// Expected end (`i64::MAX`: runs until it finishes).
    pub end: i64,
}

/// Why a transition happened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum Reason {
    Submitted,
    /// Placed now; `backfill` when it started ahead of a group that holds a reservation.
    Admitted {
        backfill: bool,
    },
    /// Placed after evicting these groups.
    AdmittedByPreemption {
        victims: Vec<GroupKey>,
    },
    Reserved {
        at: i64,
    },
    /// The reservation could not be kept (a running group overran, a node left, a higher-priority
    /// group came first, or the group fell beyond the reservation depth).
    ReservationDropped,
    AllReady,
    ReadinessLost,
    /// Not all members ready within the timeout after admission.
    PodsReadyTimeout {
        requeue_at: i64,
        requeues: u32,
    },
    /// A running group stayed below full readiness longer than the recovery timeout.
    RecoveryTimeout {
        requeue_at: i64,
        requeues: u32,
    },
    /// Evicted to make room for a higher-priority group of the same queue.
    Preempted {
        by: GroupKey,
    },
    /// Evicted because another queue of the cohort reclaimed quota this group borrowed.
    Reclaimed {
        by: GroupKey,
    },
    /// Evicted because a calendar reservation's window opened on room it held (`atStart: Evict`).
    ReservationStarted {
        reservation: String,
    },
    /// Lost members below its minimum (a node left or pods failed).
    MembersLost {
        members: Vec<u32>,
    },
    /// An elastic group lost members but keeps running at or above its minimum.
    Shrunk {
        members: Vec<u32>,
    },
    /// An elastic group got more members.
    Grown {
        members: Vec<u32>,
    },
    /// A shrinkable group is asked to give back these members (their pods are to be deleted) so
    /// that `to`, first in line, starts now; it keeps running, and loses them once the pods are gone.
    GivingWay {
        members: Vec<u32>,
        to: GroupKey,
    },
    BackoffExpired,
    /// Queued again at once after an eviction that was not the group's fault (preemption, reclaim,
    /// lost members).
    Requeued,
    BackoffLimitExceeded {
        requeues: u32,
    },
    Unsatisfiable {
        message: String,
    },
    Finished {
        succeeded: bool,
    },
    /// Ended (Failed) by its queue: it held its nodes past its declared run time (`run_time_s`,
    /// stretched for fewer members) and the queue's grace, delaying the groups planned after it.
    RunTimeExceeded {
        run_time_s: u64,
        grace_s: u64,
    },
    Suspended,
    Resumed,
    Deleted,
    /// Its job was reshaped while it waited, or resized (its pods came, or went) while it was
    /// placed: now `min`..=`max` members.
    Reshaped {
        min: u32,
        max: u32,
    },
}

impl Reason {
    /// A plain sentence.
    pub fn message(&self) -> String {
        match self {
            Reason::Submitted => "submitted".into(),
            Reason::Admitted { backfill: false } => "admitted: all members placed".into(),
            Reason::Admitted { backfill: true } => {
                "admitted by backfill: all members placed without delaying any reservation".into()
            }
            Reason::AdmittedByPreemption { victims } => format!(
                "admitted after preempting {}",
                victims.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
            ),
            Reason::Reserved { at } => format!("reserved to start at {}", clock::show(*at)),
            Reason::ReservationDropped => "reservation dropped; waiting again".into(),
            Reason::AllReady => "all members ready".into(),
            Reason::ReadinessLost => "a member is no longer ready; recovery timer started".into(),
            Reason::PodsReadyTimeout { requeue_at, requeues } => {
                format!(
                    "not all members ready in time; allocation released, requeue #{requeues} at {}",
                    clock::show(*requeue_at)
                )
            }
            Reason::RecoveryTimeout { requeue_at, requeues } => {
                format!(
                    "readiness not recovered in time; allocation released, requeue #{requeues} at {}",
                    clock::show(*requeue_at)
                )
            }
            Reason::Preempted { by } => format!("preempted by higher-priority {by}"),
            Reason::Reclaimed { by } => format!("borrowed quota reclaimed by {by}"),
            Reason::ReservationStarted { reservation } => {
                format!("evicted: the window of reservation {reservation} opened on its nodes; queued again")
            }
            Reason::MembersLost { members } => {
                format!("lost members {members:?}, below the group's minimum; allocation released")
            }
            Reason::Shrunk { members } => format!("lost members {members:?}; keeps running"),
            Reason::Grown { members } => format!("grew by members {members:?}"),
            Reason::GivingWay { members, to } => {
                format!("giving back members {members:?} so that {to} starts now; keeps running with fewer")
            }
            Reason::BackoffExpired => "backoff over; queued again".into(),
            Reason::Requeued => "queued again at once (no backoff: the eviction was not its fault)".into(),
            Reason::BackoffLimitExceeded { requeues } => {
                format!("deactivated after {requeues} requeues (backoff limit); resume to retry")
            }
            Reason::Unsatisfiable { message } => format!("unsatisfiable: {message}"),
            Reason::Finished { succeeded: true } => "succeeded".into(),
            Reason::Finished { succeeded: false } => "failed".into(),
            Reason::RunTimeExceeded { run_time_s, grace_s } => format!(
                "failed: ran past its declared run time of {run_time_s} s and the queue's grace of {grace_s} s; \
                 its pods are stopped and its room freed"
            ),
            Reason::Suspended => "suspended by the user".into(),
            Reason::Resumed => "resumed by the user".into(),
            Reason::Deleted => "deleted".into(),
            Reason::Reshaped { min, max } if min == max => format!("reshaped: now {min} members"),
            Reason::Reshaped { min, max } => format!("reshaped: now {min} to {max} members"),
        }
    }
}

/// One change of one group, to be persisted before it is acted on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transition {
    pub at: i64,
    pub key: GroupKey,
    pub from: GroupState,
    pub to: GroupState,
    pub reason: Reason,
    /// The placement after the change: full on Admitted (and after grow or shrink), the released
    /// one on leaving Admitted/Running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocation: Option<AllocationRecord>,
}

/// A group as the engine keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Group {
    pub spec: GroupSpec,
    pub priority: i32,
    pub state: GroupState,
    /// Submission order, for ties.
    pub seq: u64,
    /// The time that orders the group in its queue (submission, or eviction on requeue).
    pub order_time: i64,
    pub allocation: Option<AllocationRecord>,
    pub reserved_at: Option<i64>,
    pub admitted_at: Option<i64>,
    pub ready_members: u32,
    /// Since when a running group is below full readiness.
    pub not_ready_since: Option<i64>,
    /// Evictions counted for backoff (readiness timeouts).
    pub requeues: u32,
    /// Evictions of any kind.
    pub evictions: u32,
    pub requeue_at: Option<i64>,
    /// Set when the group could never fit; with the graph structure version it was checked at.
    pub unsatisfiable: Option<(String, u64)>,
    /// The latest reason it waits (for explanations).
    pub reason: String,
    /// Set when its queue ended it at its run-time limit: the seconds it was allowed from
    /// admission (declared run time, stretched for fewer members, plus the grace). Its pods must
    /// not run on, whatever became of the workload meanwhile (a restart finds them stopped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_time_exceeded: Option<u64>,
    /// The queue whose reclaim evicted it last, until it runs again: while that queue has groups
    /// waiting, it borrows no room (what it borrowed would be reclaimed again).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reclaimed_for: Option<String>,
}

impl Group {
    /// A group as just submitted: not yet in a state, placed nowhere, no timers.
    pub fn submitted(spec: GroupSpec, priority: i32, seq: u64) -> Self {
        Group {
            priority,
            state: GroupState::New,
            seq,
            order_time: spec.submitted_at,
            allocation: None,
            reserved_at: None,
            admitted_at: None,
            ready_members: 0,
            not_ready_since: None,
            requeues: 0,
            evictions: 0,
            requeue_at: None,
            unsatisfiable: None,
            reason: "not yet considered".into(),
            run_time_exceeded: None,
            reclaimed_for: None,
            spec,
        }
    }

    pub fn member_count(&self) -> u32 {
        self.allocation.as_ref().map_or(0, |a| a.members.len() as u32)
    }

    /// The numbers of the members its allocation holds.
    pub fn member_indices(&self) -> Vec<u32> {
        self.allocation.as_ref().map_or_else(Vec::new, |a| a.members.iter().map(|m| m.index).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::GroupState::*;
    use super::*;

    #[test]
    fn lifecycle_edges() {
        for (a, b) in [
            (New, Queued),
            (Queued, Reserved),
            (Reserved, Admitted),
            (Admitted, Running),
            (Running, Succeeded),
            (Running, Evicted),
            (Evicted, Queued),
            (Evicted, Deactivated),
            (Deactivated, Queued),
            (Suspended, Queued),
            (Succeeded, Deleted),
        ] {
            assert_eq!(GroupState::transition(a, b), Ok(()), "{a} -> {b}");
        }
        for (a, b) in [
            (New, Running),
            (Queued, Running),
            (Queued, Evicted),
            (Running, Queued),
            (Running, Admitted),
            (Evicted, Running),
            (Succeeded, Queued),
            (Failed, Running),
            (Deleted, Queued),
            (Deleted, Deleted),
            (Suspended, Running),
        ] {
            assert_eq!(GroupState::transition(a, b), Err(IllegalTransition { from: a, to: b }), "{a} -> {b}");
        }
    }
}
