//! A reservation holds its group's quota as well as its nodes: a group behind it in line that
//! fits now, on nodes the reservation does not need and within its queue's quota, still waits if
//! it would hold, at the reserved start, quota the reserved group needs then. One that ends
//! before that start is backfilled.

mod common;

use common::*;
use muster_queue::config::QuotaSpec;
use muster_queue::{EngineConfig, GroupState, QueueConfig, QueuePolicy};

/// Queue `q` (EASY, 8 cpu of quota) and queue `other` (no quota).
fn queues() -> EngineConfig {
    let mut c = EngineConfig::single_queue("q");
    c.queues[0].policy = QueuePolicy::Easy;
    c.queues[0]
        .quotas
        .insert("cpu".into(), QuotaSpec { nominal: 8.into(), borrowing_limit: None, lending_limit: None });
    c.queues.push(QueueConfig::new("other"));
    c
}

#[test]
fn backfill_leaves_the_quota_a_reservation_needs_at_its_start() {
    // 4 nodes of 4 cpu. Another queue's group fills three until t=10.
    let mut e = engine(graph(4, 4), queues());
    e.submit(spec("x", "other", 3, 4, Some(10), 0), 0).unwrap();
    let ts = e.schedule(0);
    ready_all(&mut e, &ts, 0);
    // r needs two whole nodes (all of q's quota): reserved for t=10. b and c each fit on the
    // free node now and within the quota now; b would still run at t=10, c would not.
    e.submit(spec("r", "q", 2, 4, Some(10), 1), 1).unwrap();
    e.submit(spec("b", "q", 1, 4, Some(20), 1), 1).unwrap();
    e.submit(spec("c", "q", 1, 4, Some(5), 1), 1).unwrap();
    let ts = e.schedule(1);
    ready_all(&mut e, &ts, 1);
    e.check_invariants().unwrap();
    assert_eq!(e.group(&key("r")).unwrap().reserved_at, Some(10), "{ts:?}");
    assert_eq!(to(&ts, "c"), vec![GroupState::Admitted], "ends at t=6, before r starts: {ts:?}");
    assert_eq!(state(&e, "b"), GroupState::Queued, "{ts:?}");
    let reason = &e.group(&key("b")).unwrap().reason;
    assert!(
        reason.contains("waiting for quota: queue q's quota at t=10 s is held for ns/r, reserved ahead of it"),
        "{reason}"
    );

    // c ends at 6 and x at 10: r starts when reserved, and b waits for the quota r uses.
    e.finished(&key("c"), true, 6).unwrap();
    e.schedule(6);
    assert_eq!(state(&e, "b"), GroupState::Queued);
    e.finished(&key("x"), true, 10).unwrap();
    let ts = e.schedule(10);
    assert_eq!(to(&ts, "r"), vec![GroupState::Admitted], "{ts:?}");
    let b = e.group(&key("b")).unwrap();
    assert_eq!(b.state, GroupState::Queued, "{ts:?}");
    assert!(b.reason.starts_with("quota: queue q uses 8 of cpu (nominal 8)"), "{}", b.reason);
}
