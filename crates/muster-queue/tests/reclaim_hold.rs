//! A group evicted to give back borrowed quota does not borrow again while the queue that
//! reclaimed it still has groups waiting and room in its nominal quota: that room would only be
//! reclaimed once more, the group's run so far lost each time.

mod common;

use common::*;
use muster_queue::config::QuotaSpec;
use muster_queue::{Engine, EngineConfig, GroupState, QueuePolicy};

/// Queues `borrower` and `lender`, 4 cpu of nominal each, in one cohort, both reclaiming.
fn cohort() -> EngineConfig {
    let mut c = EngineConfig::single_queue("unused");
    c.queues.clear();
    for name in ["borrower", "lender"] {
        let mut q = muster_queue::QueueConfig::new(name);
        q.cohort = Some("org".into());
        q.policy = QueuePolicy::BestEffortFifo;
        q.preemption.reclaim_within_cohort = true;
        q.quotas.insert("cpu".into(), QuotaSpec { nominal: 4.into(), borrowing_limit: None, lending_limit: None });
        c.queues.push(q);
    }
    c
}

/// Schedules at `now` until nothing changes, every admitted group running; the transitions.
fn settle(e: &mut Engine, now: i64) -> Vec<muster_queue::Transition> {
    let mut all = Vec::new();
    for step in 0..4 {
        let ts = e.schedule(now + step);
        ready_all(e, &ts, now + step);
        e.check_invariants().unwrap();
        all.extend(ts);
    }
    all
}

#[test]
fn a_reclaimed_group_borrows_again_only_once_the_lender_has_nothing_waiting() {
    // 8 cpu on 4 nodes of 2. The borrower fills them all, 4 cpu above its nominal.
    let mut e = engine(graph(4, 2), cohort());
    for i in 0..8 {
        e.submit(spec(&format!("b{i}"), "borrower", 1, 1, None, 0), 0).unwrap();
    }
    settle(&mut e, 0);
    // The lender takes 3 cpu back, then asks for a whole node, which it cannot have within its
    // nominal while its three groups run: that group waits.
    for i in 0..3 {
        e.submit(spec(&format!("l{i}"), "lender", 1, 1, None, 10), 10).unwrap();
    }
    let reclaimed: Vec<String> = (settle(&mut e, 10).into_iter())
        .filter(|t| t.to == GroupState::Evicted)
        .map(|t| t.key.name.to_string())
        .collect();
    assert_eq!(reclaimed.len(), 3, "{reclaimed:?}");
    e.submit(spec("node", "lender", 1, 2, None, 20), 20).unwrap();
    settle(&mut e, 20);
    assert_eq!(state(&e, "node"), GroupState::Queued);
    // One of the lender's groups ends: a cpu is free, which the borrower could borrow. It does
    // not, while the lender has a group waiting and room left in its nominal quota.
    e.finished(&key("l0"), true, 30).unwrap();
    let ts = settle(&mut e, 30);
    for name in &reclaimed {
        assert!(!to(&ts, name).contains(&GroupState::Admitted), "{name} borrowed the lender's room again: {ts:?}");
        assert!(matches!(state(&e, name), GroupState::Queued | GroupState::Evicted), "{name}");
    }
    let held = e.group(&key(&reclaimed[0])).unwrap();
    assert!(held.reason.contains("reclaimed by queue lender"), "{}", held.reason);
    // The whole node still waits: no node can be emptied of what the lender may take back. Once
    // it is withdrawn, the lender has nothing waiting, and the borrower borrows the free room.
    assert_eq!(state(&e, "node"), GroupState::Queued);
    e.delete(&key("node"), 40).unwrap();
    let ts = settle(&mut e, 40);
    let readmitted = reclaimed.iter().filter(|n| to(&ts, n).contains(&GroupState::Admitted)).count();
    assert!(readmitted >= 1, "a reclaimed group borrows again: {ts:?}");
}
