//! muster-queue: the queue engine. It decides which group runs next, where, and when: group
//! lifecycle, cluster queues with quotas in cohorts, priorities and fair share, strict FIFO /
//! best-effort FIFO / EASY / conservative backfill, gang-aware preemption, elastic groups,
//! readiness timeouts with exponential backoff, and an explanation for every pending group.
//!
//! Pure, synchronous and deterministic: every input carries the time, every state change is
//! reported as a serializable `Transition` (persist it before acting on it), and the whole state
//! round-trips through `Engine::snapshot` / `Engine::restore`. See docs/queue.md.

pub mod clock;
pub mod config;
pub mod engine;
pub mod group;
pub mod quota;
pub mod reservation;
mod text;

pub use config::{EngineConfig, MATCH_POLICY, QueueConfig, QueuePolicy, ReadinessConfig, RequeueOrder};
pub use engine::{
    CycleStats, Engine, EngineError, Explanation, ExternalHold, NodePlan, Plan, PlanWindow, PlannedGroup, PlannedSet,
    QueuePlan, ReservationWindow, Snapshot, WindowKind,
};
pub use group::{AllocationRecord, Group, GroupKey, GroupSpec, GroupState, MemberPlacement, Reason, Transition};
pub use reservation::{AtStart, ReservationConfig, ReservedAmount};
