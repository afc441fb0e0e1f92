//! Fair-share preemption between borrowing queues (`preemption.fairShareWithinCohort`).

mod common;

use common::*;
use muster_queue::config::{FairShareStrategies, FairShareStrategy, FairShareWithinCohort, QuotaSpec};
use muster_queue::{Engine, EngineConfig, GroupState, QueuePolicy, Reason};

/// Queues a and b (nominal 2 cpu each) and `idle` (nominal 8, which nobody uses, so it lends
/// them all), in cohort co on 12 one-cpu nodes; a and b preempt for fair share with weights
/// `wa` and `wb`.
fn cohort(wa: f64, wb: f64) -> EngineConfig {
    let mut c = EngineConfig::single_queue("a");
    for (name, nominal, weight) in [("a", 2, wa), ("b", 2, wb), ("idle", 8, 1.0)] {
        if name != "a" {
            let mut q = c.queues[0].clone();
            q.name = name.into();
            c.queues.push(q);
        }
        let q = c.queues.last_mut().unwrap();
        q.cohort = Some("co".into());
        q.policy = QueuePolicy::BestEffortFifo;
        q.fair_share_weight = weight;
        q.preemption.fair_share_within_cohort = FairShareWithinCohort::LowerOrEqualPriority;
        q.quotas
            .insert("cpu".into(), QuotaSpec { nominal: nominal.into(), borrowing_limit: None, lending_limit: None });
    }
    c
}

/// a runs its nominal (a0, a1); then b, borrowing first, takes the other 10 cpu (b0..b9); then
/// a queues 8 more one-cpu groups. Runs 20 cycles, one a second, and returns the engine.
fn b_borrows_first(c: EngineConfig) -> Engine {
    let mut e = engine(graph(12, 1), c);
    submit_units(&mut e, "a", 0..2, 0);
    submit_units(&mut e, "b", 0..10, 1);
    let ts = e.schedule(1);
    ready_all(&mut e, &ts, 1);
    assert_eq!(held(&e, "b"), 10, "b borrows all that idle lends");
    submit_units(&mut e, "a", 2..10, 10);
    for now in 10..30 {
        let ts = e.schedule(now);
        ready_all(&mut e, &ts, now);
        e.check_invariants().unwrap();
    }
    e
}

/// Queues groups of one member of one cpu in queue `q`, named after it (`a0`, `a1`, ...), at `at`.
fn submit_units(e: &mut Engine, q: &str, names: std::ops::Range<u32>, at: i64) {
    for i in names {
        e.submit(spec(&format!("{q}{i}"), q, 1, 1, None, at), at).unwrap();
    }
}

/// Cpus queue `q`'s groups hold (every group here is one member of one cpu).
fn held(e: &Engine, q: &str) -> usize {
    e.groups().filter(|g| g.spec.queue == q && g.state.holds_allocation()).count()
}

#[test]
fn a_borrowing_queue_takes_back_its_share_from_the_queue_that_borrowed_first() {
    let e = b_borrows_first(cohort(1.0, 1.0));
    // Each eviction leaves a's share of the borrowed 8 at most b's: 4 and 4. b's evicted groups
    // wait: one back would put b above a.
    assert_eq!((held(&e, "a"), held(&e, "b")), (6, 6));
    let reclaimed = e.groups().filter(|g| g.spec.queue == "b" && g.evictions == 1).count();
    assert_eq!(reclaimed, 4, "only the 4 cpu b held above its share were taken");
    let waiting = e.groups().find(|g| g.spec.queue == "b" && g.state == GroupState::Queued).unwrap();
    assert!(!waiting.reason.is_empty(), "b's requeued group says why it waits");
}

#[test]
fn weights_split_the_borrowed_room() {
    // a weighs 2, b 1: a may take room while (a's borrowed + 1) / 2 <= b's borrowed - 1, which
    // ends at 5 and 3 of the 8.
    let e = b_borrows_first(cohort(2.0, 1.0));
    assert_eq!((held(&e, "a"), held(&e, "b")), (7, 5));
}

#[test]
fn nothing_is_evicted_when_the_preemptor_would_end_above_its_victim() {
    // b borrows 2 (b0..b3), a runs its nominal and asks for a gang of 4 more: a would borrow 4
    // and b none after evicting either of its borrowed groups.
    let mut e = engine(graph(8, 1), cohort(1.0, 1.0));
    submit_units(&mut e, "a", 0..2, 0);
    submit_units(&mut e, "b", 0..4, 0);
    let ts = e.schedule(0);
    ready_all(&mut e, &ts, 0);
    e.submit(spec("gang", "a", 4, 1, None, 5), 5).unwrap();
    let ts = e.schedule(5);
    assert!(ts.iter().all(|t| t.to != GroupState::Evicted), "{ts:?}");
    assert_eq!(state(&e, "gang"), GroupState::Queued);
    assert_eq!(held(&e, "b"), 4);
}

#[test]
fn a_victim_queue_keeps_its_nominal_and_higher_priorities_are_spared() {
    // b holds all 12 cpu in one gang: evicting it would take b below its nominal 2.
    let mut e = engine(graph(12, 1), cohort(1.0, 1.0));
    e.submit(spec("b-all", "b", 12, 1, None, 0), 0).unwrap();
    let ts = e.schedule(0);
    ready_all(&mut e, &ts, 0);
    e.submit(spec("a0", "a", 1, 1, None, 5), 5).unwrap();
    e.schedule(5);
    assert_eq!(state(&e, "a0"), GroupState::Queued);
    assert_eq!(state(&e, "b-all"), GroupState::Running);

    // b's ten borrowed cpu in groups of a higher priority than a's: LowerOrEqualPriority spares
    // them, Any takes them.
    for (rule, evicted) in [(FairShareWithinCohort::LowerOrEqualPriority, 0), (FairShareWithinCohort::Any, 1)] {
        let mut c = cohort(1.0, 1.0);
        c.priority_classes.insert("high".into(), 100);
        c.queues[0].preemption.fair_share_within_cohort = rule;
        let mut e = engine(graph(12, 1), c);
        submit_units(&mut e, "a", 0..2, 0);
        for i in 0..10 {
            let mut s = spec(&format!("b{i}"), "b", 1, 1, None, 0);
            s.priority_class = Some("high".into());
            e.submit(s, 0).unwrap();
        }
        let ts = e.schedule(0);
        ready_all(&mut e, &ts, 0);
        e.submit(spec("a2", "a", 1, 1, None, 5), 5).unwrap();
        let ts = e.schedule(5);
        let victims: Vec<_> = ts.iter().filter(|t| matches!(t.reason, Reason::Reclaimed { .. })).collect();
        assert_eq!(victims.len(), evicted, "{rule:?}: {ts:?}");
    }
}

/// a runs its nominal 2 cpu, b two groups of 5 (borrowing 8, all that idle lends); then a queues
/// a group of 4. Taking either of b's groups would leave b's borrowed share below a's (3 against
/// 4), so the first strategy refuses it; the second takes one, b's share before (8) being above
/// a's with the group, and b keeps its nominal.
fn two_big_groups_borrow(strategies: FairShareStrategies) -> Engine {
    let mut c = cohort(1.0, 1.0);
    for q in &mut c.queues {
        q.preemption.fair_share_strategies = strategies;
    }
    let mut e = engine(graph(12, 1), c);
    submit_units(&mut e, "a", 0..2, 0);
    e.submit(spec("b0", "b", 5, 1, None, 1), 1).unwrap();
    e.submit(spec("b1", "b", 5, 1, None, 1), 1).unwrap();
    let ts = e.schedule(1);
    ready_all(&mut e, &ts, 1);
    e.submit(spec("a-four", "a", 4, 1, None, 10), 10).unwrap();
    for now in 10..20 {
        let ts = e.schedule(now);
        ready_all(&mut e, &ts, now);
        e.check_invariants().unwrap();
    }
    e
}

#[test]
fn less_than_initial_share_takes_one_group_the_final_share_rule_would_not() {
    let final_only = two_big_groups_borrow(FairShareStrategies::default());
    assert_eq!((held(&final_only, "a"), held(&final_only, "b")), (2, 2), "a's group of 4 waits");
    let both = two_big_groups_borrow(FairShareStrategies { final_share: true, initial_share: true });
    assert_eq!((held(&both, "a"), held(&both, "b")), (3, 1), "one of b's groups taken for a's group of 4");
    let evicted: Vec<u32> = both.groups().filter(|g| g.spec.queue == "b").map(|g| g.evictions).collect();
    assert_eq!(evicted.iter().sum::<u32>(), 1, "one group only: {evicted:?}");
}

#[test]
fn fair_share_strategies_are_read_as_kueue_writes_them() {
    let parse = |yaml: &str| serde_yaml_ng::from_str::<FairShareStrategies>(yaml);
    assert_eq!(
        parse("[LessThanInitialShare]").unwrap(),
        FairShareStrategies { final_share: false, initial_share: true }
    );
    assert_eq!(
        parse("[LessThanOrEqualToFinalShare, LessThanInitialShare]").unwrap(),
        FairShareStrategies { final_share: true, initial_share: true }
    );
    let e = parse("[LessThanInitialShare, LessThanOrEqualToFinalShare]").unwrap_err().to_string();
    assert!(e.contains("use [LessThanOrEqualToFinalShare], [LessThanInitialShare] or"), "{e}");
    assert!(parse("[]").is_err());
    let back: Vec<FairShareStrategy> = FairShareStrategies::default().into();
    assert_eq!(back, [FairShareStrategy::LessThanOrEqualToFinalShare]);
}
