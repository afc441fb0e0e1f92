//! Quotas over a cohort tree: cohorts with quotas and limits of their own, so that a team borrows
//! first what its department has idle and a department takes from the organisation no more than
//! its limit.

mod common;

use common::*;
use muster_queue::config::{CohortConfig, QuotaSpec};
use muster_queue::{Engine, EngineConfig, GroupState, QueuePolicy};

fn quota(nominal: i64, borrowing: Option<i64>, lending: Option<i64>) -> QuotaSpec {
    QuotaSpec {
        nominal: nominal.into(),
        borrowing_limit: borrowing.map(Into::into),
        lending_limit: lending.map(Into::into),
    }
}

/// Queues `(name, cohort, cpu nominal)`, best-effort FIFO, and the cohorts `(name, parent, cpu
/// quota)`.
fn config(queues: &[(&str, &str, i64)], cohorts: &[(&str, Option<&str>, Option<QuotaSpec>)]) -> EngineConfig {
    let mut c = EngineConfig::single_queue("unused");
    c.queues.clear();
    for (name, cohort, nominal) in queues {
        let mut q = muster_queue::QueueConfig::new(name);
        q.cohort = Some((*cohort).into());
        q.policy = QueuePolicy::BestEffortFifo;
        q.quotas.insert("cpu".into(), quota(*nominal, None, None));
        c.queues.push(q);
    }
    for (name, parent, q) in cohorts {
        let mut cohort = CohortConfig::new(name, *parent);
        if let Some(q) = q {
            cohort.quotas.insert("cpu".into(), q.clone());
        }
        c.cohorts.push(cohort);
    }
    c
}

/// Queues `n` groups of one member of one cpu in queue `q` (`q0`, `q1`, ...), schedules, and
/// returns how many of queue `q`'s groups hold room.
fn run_units(e: &mut Engine, q: &str, n: u32, now: i64) -> usize {
    for i in 0..n {
        e.submit(spec(&format!("{q}{i}"), q, 1, 1, None, now), now).unwrap();
    }
    let ts = e.schedule(now);
    ready_all(e, &ts, now);
    e.check_invariants().unwrap();
    held(e, q)
}

fn held(e: &Engine, q: &str) -> usize {
    e.groups().filter(|g| g.spec.queue == q && g.state.holds_allocation()).count()
}

/// Two departments under org: research (team a, nominal 2) and ops (team b, nominal 8, idle).
fn departments(research: Option<QuotaSpec>, ops: Option<QuotaSpec>) -> EngineConfig {
    config(
        &[("a", "research", 2), ("b", "ops", 8)],
        &[("org", None, None), ("research", Some("org"), research), ("ops", Some("org"), ops)],
    )
}

#[test]
fn without_cohort_quotas_a_tree_is_one_pool() {
    let mut e = engine(graph(12, 1), departments(None, None));
    assert_eq!(run_units(&mut e, "a", 12, 0), 10, "a takes its 2 and all 8 that b lends, across departments");
}

#[test]
fn a_department_borrows_no_more_than_its_limit() {
    let mut e = engine(graph(12, 1), departments(Some(quota(0, Some(3), None)), None));
    assert_eq!(run_units(&mut e, "a", 12, 0), 5, "its own 2 and the 3 research may borrow");
    let waiting = e.groups().find(|g| g.spec.queue == "a" && g.state == GroupState::Queued).unwrap();
    assert!(waiting.reason.contains("cohort research may borrow at most 3"), "{}", waiting.reason);
    // b has the 5 of its 8 that research does not hold (it does not reclaim here).
    assert_eq!(run_units(&mut e, "b", 8, 1), 5);
}

#[test]
fn a_department_lends_no_more_than_its_lending_limit_but_its_own_teams_borrow_all() {
    // ops lends 3 of its 8 to the rest of org; ops' second team c may use all of b's idle 8.
    let mut c = departments(None, Some(quota(0, None, Some(3))));
    let mut team_c = c.queues[1].clone();
    team_c.name = "c".into();
    team_c.quotas.insert("cpu".into(), quota(0, None, None));
    c.queues.push(team_c);
    let mut e = engine(graph(16, 1), c.clone());
    assert_eq!(run_units(&mut e, "a", 12, 0), 5, "its own 2 and the 3 ops lends");
    let mut e = engine(graph(16, 1), c);
    assert_eq!(run_units(&mut e, "c", 12, 0), 10, "b's 8 and a's 2 (research lends all it has)");
}

#[test]
fn a_cohort_nominal_is_shared_by_everything_below_it() {
    // Teams with no quota of their own share the 4 cpu their department holds.
    let c = config(&[("a", "dept", 0), ("b", "dept", 0)], &[("dept", None, Some(quota(4, None, None)))]);
    let mut e = engine(graph(8, 1), c);
    assert_eq!(run_units(&mut e, "a", 3, 0), 3);
    assert_eq!(run_units(&mut e, "b", 3, 1), 1, "the department's fourth cpu");
}

#[test]
fn a_group_larger_than_its_tree_allows_is_unsatisfiable_naming_the_limit() {
    let mut e = engine(graph(12, 1), departments(Some(quota(0, Some(3), None)), None));
    e.submit(spec("big", "a", 6, 1, None, 0), 0).unwrap();
    let ts = e.schedule(0);
    assert!(to(&ts, "big").is_empty() || state(&e, "big") == GroupState::Queued);
    let g = e.group(&key("big")).unwrap();
    let (message, _) = g.unsatisfiable.as_ref().expect("marked unsatisfiable");
    assert!(message.contains("queue a can hold at most 5"), "{message}");
    assert!(message.contains("cohort research may borrow at most 3"), "{message}");
}

#[test]
fn limits_need_a_parent_and_name_the_field() {
    let mut c = departments(None, None);
    c.cohorts[0].quotas.insert("cpu".into(), quota(4, Some(2), None));
    let e = c.compile("engine.yaml").unwrap_err();
    assert_eq!(e.path, "cohorts[0].quotas.cpu.borrowingLimit");
    assert!(e.message.contains("only a cohort with a parent can borrow; set parent"), "{}", e.message);
    c.cohorts[0].quotas.insert("cpu".into(), quota(4, None, Some(2)));
    let e = c.compile("engine.yaml").unwrap_err();
    assert_eq!(e.path, "cohorts[0].quotas.cpu.lendingLimit");
    c.cohorts[0].quotas.insert("cpu".into(), quota(-1, None, None));
    assert_eq!(c.compile("engine.yaml").unwrap_err().path, "cohorts[0].quotas.cpu.nominal");
}

#[test]
fn a_cohort_tree_with_quotas_reads_from_yaml() {
    let text = "queues:\n  - {name: a, cohort: research, quotas: {cpu: {nominal: 2}}}\ncohorts:\n  - {name: org, quotas: {cpu: {nominal: 4}}}\n  - {name: research, parent: org, quotas: {cpu: {nominal: 0, borrowingLimit: \"1500m\", lendingLimit: 1}}}\n";
    let c = EngineConfig::parse("engine.yaml", text).unwrap();
    let compiled = c.compile("engine.yaml").unwrap();
    let research = &compiled.cohorts["research"];
    assert_eq!(research.parent.as_deref(), Some("org"));
    assert_eq!(research.quotas["cpu"].borrowing_limit, Some(1500));
    assert_eq!(compiled.cohorts["org"].child_cohorts, vec!["research".to_string()]);
    assert_eq!(compiled.queues["a"].root_cohort.as_deref(), Some("org"));
}
