//! Reclaim over a cohort tree: a queue takes quota back for itself when its own nominal covers
//! the group, or the unused own nominal of a cohort above it does, and only from subtrees that
//! borrow from above where the two paths meet.

mod common;

use common::*;
use muster_queue::config::{CohortConfig, QuotaSpec};
use muster_queue::{Engine, EngineConfig, GroupState, QueuePolicy};

fn nominal(cpu: i64) -> QuotaSpec {
    QuotaSpec { nominal: cpu.into(), borrowing_limit: None, lending_limit: None }
}

/// Queues `(name, cohort, cpu nominal)` that reclaim, best-effort FIFO, under the cohorts
/// `(name, parent, cpu nominal of the cohort itself)`.
fn tree(queues: &[(&str, &str, i64)], cohorts: &[(&str, Option<&str>, i64)]) -> EngineConfig {
    let mut c = EngineConfig::single_queue("unused");
    c.queues.clear();
    for (name, cohort, cpu) in queues {
        let mut q = muster_queue::QueueConfig::new(name);
        q.cohort = Some((*cohort).into());
        q.policy = QueuePolicy::BestEffortFifo;
        q.preemption.reclaim_within_cohort = true;
        q.quotas.insert("cpu".into(), nominal(*cpu));
        c.queues.push(q);
    }
    for (name, parent, cpu) in cohorts {
        let mut cohort = CohortConfig::new(name, *parent);
        if *cpu > 0 {
            cohort.quotas.insert("cpu".into(), nominal(*cpu));
        }
        c.cohorts.push(cohort);
    }
    c
}

/// research (teams a, d) and ops (teams b, c) under org, the teams' cpu nominals as given; none
/// of the cohorts holds quota of its own.
fn departments(a: i64, d: i64, b: i64, c: i64) -> EngineConfig {
    tree(
        &[("a", "research", a), ("d", "research", d), ("b", "ops", b), ("c", "ops", c)],
        &[("org", None, 0), ("research", Some("org"), 0), ("ops", Some("org"), 0)],
    )
}

/// Submits `n` one-cpu groups `{q}{first}..` of queue `q` at `now` and schedules until nothing
/// changes, every admitted group running; returns the names evicted on the way.
fn submit_units(e: &mut Engine, q: &str, first: u32, n: u32, now: i64) -> Vec<String> {
    for i in first..first + n {
        e.submit(spec(&format!("{q}{i}"), q, 1, 1, None, now), now).unwrap();
    }
    let mut evicted = Vec::new();
    for step in 0..4 {
        let ts = e.schedule(now + step);
        ready_all(e, &ts, now + step);
        e.check_invariants().unwrap();
        evicted.extend(ts.iter().filter(|t| t.to == GroupState::Evicted).map(|t| t.key.name.to_string()));
    }
    evicted
}

fn holding(e: &Engine, q: &str) -> usize {
    e.groups().filter(|g| g.spec.queue == q && g.state.holds_allocation()).count()
}

#[test]
fn a_cohort_nominal_is_reclaimed_for_the_teams_below_it() {
    // research holds 4 cpu of its own for team a (nominal 0); ops' team b (4) borrows them while
    // a is idle. When a comes, research's subtree is within what it brings: b gives them back.
    let c = tree(
        &[("a", "research", 0), ("b", "ops", 4)],
        &[("org", None, 0), ("research", Some("org"), 4), ("ops", Some("org"), 0)],
    );
    let mut e = engine(graph(8, 1), c);
    assert!(submit_units(&mut e, "b", 0, 8, 0).is_empty());
    assert_eq!(holding(&e, "b"), 8);
    let evicted = submit_units(&mut e, "a", 0, 4, 10);
    assert_eq!(evicted.len(), 4, "{evicted:?}");
    assert!(evicted.iter().all(|v| v.starts_with('b')), "{evicted:?}");
    assert_eq!((holding(&e, "a"), holding(&e, "b")), (4, 4));
}

#[test]
fn a_teammates_idle_quota_is_reclaimed_by_the_teammate_not_by_a_team_past_its_nominal() {
    // research: a (2) and d (2, idle); ops: b (4), borrowing research's 4. a takes its own 2
    // back; its third and fourth groups would take d's quota, lent, not a's: they wait. When d
    // comes, it takes its 2 back.
    let c = tree(
        &[("a", "research", 2), ("d", "research", 2), ("b", "ops", 4)],
        &[("org", None, 0), ("research", Some("org"), 0), ("ops", Some("org"), 0)],
    );
    let mut e = engine(graph(8, 1), c);
    submit_units(&mut e, "b", 0, 8, 0);
    let evicted = submit_units(&mut e, "a", 0, 4, 10);
    assert_eq!(evicted.len(), 2, "{evicted:?}");
    assert_eq!((holding(&e, "a"), holding(&e, "b")), (2, 6));
    let evicted = submit_units(&mut e, "d", 0, 2, 20);
    assert_eq!(evicted.len(), 2, "{evicted:?}");
    assert!(evicted.iter().all(|v| v.starts_with('b')), "{evicted:?}");
    assert_eq!((holding(&e, "a"), holding(&e, "d"), holding(&e, "b")), (2, 2, 4));
}

#[test]
fn quota_a_department_holds_within_its_guarantee_is_not_reclaimed_for_another() {
    // research: a (2, idle) and d (2); ops: b (2) and c (2, idle). d borrows a's 2 and b borrows
    // c's 2, each within its own department. a takes its 2 back from d, its neighbour, though b's
    // groups are younger (less work lost): ops as a whole borrows nothing.
    let mut e = engine(graph(8, 1), departments(2, 2, 2, 2));
    submit_units(&mut e, "d", 0, 4, 0);
    submit_units(&mut e, "b", 0, 4, 100);
    assert_eq!((holding(&e, "d"), holding(&e, "b")), (4, 4));
    let evicted = submit_units(&mut e, "a", 0, 2, 110);
    assert_eq!(evicted.len(), 2, "{evicted:?}");
    assert!(evicted.iter().all(|v| v.starts_with('d')), "{evicted:?}");
    assert_eq!((holding(&e, "a"), holding(&e, "d"), holding(&e, "b")), (2, 2, 4));
}

#[test]
fn a_gang_reclaims_from_a_subtree_only_what_it_borrows_and_the_rest_elsewhere() {
    // research: a (4, idle) and d (0), d running 2; ops: b (2) and c (2, idle), b running 6, so
    // ops borrows 2. a's gang of 4 takes b's two youngest-but-borrowed units and d's two: a third
    // of b's would take ops below the 4 it brings.
    let mut e = engine(graph(8, 1), departments(4, 0, 2, 2));
    submit_units(&mut e, "d", 0, 2, 0);
    submit_units(&mut e, "b", 0, 6, 100);
    e.submit(spec("gang", "a", 4, 1, None, 110), 110).unwrap();
    let ts = e.schedule(110);
    e.check_invariants().unwrap();
    let mut evicted: Vec<String> =
        ts.iter().filter(|t| t.to == GroupState::Evicted).map(|t| t.key.name.to_string()).collect();
    evicted.sort();
    assert_eq!(evicted.iter().filter(|v| v.starts_with('b')).count(), 2, "{evicted:?}");
    assert_eq!(evicted.iter().filter(|v| v.starts_with('d')).count(), 2, "{evicted:?}");
    assert_eq!(state(&e, "gang"), GroupState::Admitted);
    assert_eq!((holding(&e, "b"), holding(&e, "d")), (4, 0));
}
