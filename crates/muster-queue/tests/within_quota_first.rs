//! In a cycle, a group its queue's nominal quota holds is taken before one of another queue that
//! would borrow, whatever their order times: the borrower cannot take the owner's room just
//! before the owner's group, which would then reclaim it, evicting what was just admitted.

mod common;

use common::*;
use muster_queue::config::QuotaSpec;
use muster_queue::{EngineConfig, GroupState, QueuePolicy};

/// Queues `borrower` and `owner`, 2 cpu of nominal each, in one cohort, both reclaiming. The
/// borrower weighs ten times as much in fair share, so its share stays below the owner's even
/// while it borrows: the order by share alone would take its groups first.
fn cohort() -> EngineConfig {
    let mut c = EngineConfig::single_queue("unused");
    c.queues.clear();
    for name in ["borrower", "owner"] {
        let mut q = muster_queue::QueueConfig::new(name);
        q.cohort = Some("org".into());
        q.policy = QueuePolicy::BestEffortFifo;
        q.preemption.reclaim_within_cohort = true;
        q.quotas.insert("cpu".into(), QuotaSpec { nominal: 2.into(), borrowing_limit: None, lending_limit: None });
        q.fair_share_weight = if name == "borrower" { 10.0 } else { 1.0 };
        c.queues.push(q);
    }
    c
}

#[test]
fn the_owners_group_takes_free_room_before_an_older_borrower() {
    // 4 cpu on 4 nodes of 1. The owner runs one group, the borrower two (its nominal); one node
    // is free.
    let mut e = engine(graph(4, 1), cohort());
    e.submit(spec("o0", "owner", 1, 1, None, 0), 0).unwrap();
    for i in 0..2 {
        e.submit(spec(&format!("b{i}"), "borrower", 1, 1, None, 0), 0).unwrap();
    }
    let ts = e.schedule(0);
    ready_all(&mut e, &ts, 0);
    // A borrower's group that would borrow (older) and an owner's group within its nominal
    // (newer) wait for the free node.
    e.submit(spec("b2", "borrower", 1, 1, None, 5), 5).unwrap();
    e.submit(spec("o1", "owner", 1, 1, None, 10), 10).unwrap();
    let ts = e.schedule(10);
    e.check_invariants().unwrap();
    assert_eq!(state(&e, "o1"), GroupState::Admitted, "{ts:?}");
    assert_eq!(state(&e, "b2"), GroupState::Queued, "{ts:?}");
    let evicted: Vec<&str> = ts.iter().filter(|t| t.to == GroupState::Evicted).map(|t| t.key.name.as_ref()).collect();
    assert!(evicted.is_empty(), "nothing is admitted only to be evicted: {ts:?}");
}
