//! Declared run times are limits (`runTimeLimit`), and learned ones are estimates: no group delays
//! a reservation by running past the run time it was backfilled on.

mod common;

use common::*;
use muster_queue::config::{RunTimeLimitConfig, RunTimeLimitMode};
use muster_queue::{Engine, EngineConfig, GroupState, QueuePolicy, Reason};

const GRACE: i64 = 10;

fn config(mode: RunTimeLimitMode) -> EngineConfig {
    let mut c = EngineConfig::single_queue("q");
    c.queues[0].policy = QueuePolicy::Easy;
    c.queues[0].run_time_limit = RunTimeLimitConfig { mode, grace_s: GRACE };
    c
}

/// Two 4-cpu nodes. `filler` holds one until 50 (as it declared); `gang` needs both, so it is
/// reserved at 50; `liar` declares `declared` seconds, is backfilled at 2 onto the other node,
/// and never ends by itself.
fn liar_backfilled(mode: RunTimeLimitMode, declared: u64) -> Engine {
    let mut e = engine(graph(2, 4), config(mode));
    e.submit(spec("filler", "q", 1, 4, Some(50), 0), 0).unwrap();
    let ts = e.schedule(0);
    ready_all(&mut e, &ts, 0);
    e.submit(spec("gang", "q", 2, 4, Some(100), 1), 1).unwrap();
    e.schedule(1);
    assert_eq!(e.group(&key("gang")).unwrap().reserved_at, Some(50));
    e.submit(spec("liar", "q", 1, 4, Some(declared), 2), 2).unwrap();
    let ts = e.schedule(2);
    let admitted = ts.iter().find(|t| &*t.key.name == "liar").expect("liar is backfilled");
    assert_eq!(admitted.reason, Reason::Admitted { backfill: true });
    ready_all(&mut e, &ts, 2);
    e
}

/// Runs the engine second by second from `from` to `to`, `filler` ending at 50 as it declared;
/// returns when `gang` was admitted.
fn run_until(e: &mut Engine, from: i64, to: i64) -> Option<i64> {
    let mut admitted = None;
    for t in from..=to {
        if t == 50 {
            e.finished(&key("filler"), true, t).unwrap();
        }
        let ts = e.schedule(t);
        if ts.iter().any(|x| &*x.key.name == "gang" && x.to == GroupState::Admitted) {
            admitted = Some(t);
        }
        e.check_invariants().unwrap();
    }
    admitted
}

#[test]
fn a_group_that_outruns_its_declared_run_time_is_ended_after_the_grace() {
    let mut e = liar_backfilled(RunTimeLimitMode::Enforce, 1);
    assert!(run_until(&mut e, 3, 2 + 1 + GRACE - 1).is_none());
    assert_eq!(state(&e, "liar"), GroupState::Running, "still within its run time and grace");
    let ts = e.schedule(2 + 1 + GRACE);
    let ended = ts.iter().find(|t| &*t.key.name == "liar").expect("liar is ended at 1 s + grace");
    assert_eq!((ended.from, ended.to), (GroupState::Running, GroupState::Failed));
    assert_eq!(ended.reason, Reason::RunTimeExceeded { run_time_s: 1, grace_s: GRACE as u64 });
    assert!(ended.allocation.is_some(), "its room is released");
    let liar = e.group(&key("liar")).unwrap();
    assert_eq!(liar.run_time_exceeded, Some(1 + GRACE as u64));
    assert!(ended.reason.message().contains("declared run time of 1 s"), "{}", ended.reason.message());
    assert_eq!(e.group(&key("gang")).unwrap().reserved_at, Some(50), "the reservation never moved");
    assert_eq!(run_until(&mut e, 2 + 1 + GRACE + 1, 60), Some(50), "the gang starts when it was reserved to");
}

#[test]
fn a_reservation_starts_at_most_the_grace_late() {
    // Declared 45 s from 2: its run ends at 47, before the reservation at 50, and its limit at 57.
    let mut e = liar_backfilled(RunTimeLimitMode::Enforce, 45);
    let started = run_until(&mut e, 3, 80).expect("the gang starts");
    assert_eq!(started, 2 + 45 + GRACE, "ended at its limit, and the gang starts at once");
    assert!(started <= 50 + GRACE);
    assert_eq!(state(&e, "liar"), GroupState::Failed);
}

#[test]
fn an_advisory_run_time_only_plans() {
    let mut e = liar_backfilled(RunTimeLimitMode::Advisory, 1);
    assert_eq!(run_until(&mut e, 3, 120), None, "the liar holds its node: the gang waits for as long as it runs");
    assert_eq!(state(&e, "liar"), GroupState::Running);
    assert_eq!(state(&e, "gang"), GroupState::Reserved);
    // Its start, planned for the second after the liar's expected end, has passed: no cycle runs
    // for it every second, and its reason says what it waits for.
    assert!(e.group(&key("gang")).unwrap().reserved_at.unwrap() < 120, "no cycle every second");
    let why = e.explain(&key("gang"), 120).unwrap().reason;
    assert!(why.contains("now past: waiting for groups that run past their expected end"), "{why}");
    // A group that declares nothing has no limit under Enforce either.
    let mut e = engine(graph(1, 4), config(RunTimeLimitMode::Enforce));
    e.submit(spec("open", "q", 1, 4, None, 0), 0).unwrap();
    let ts = e.schedule(0);
    ready_all(&mut e, &ts, 0);
    assert!(e.schedule(100_000).is_empty());
    assert_eq!(state(&e, "open"), GroupState::Running);
}

#[test]
fn the_limit_survives_a_restore() {
    let e = liar_backfilled(RunTimeLimitMode::Enforce, 1);
    let json = serde_json::to_string(&e.snapshot()).unwrap();
    let mut back = Engine::restore(graph(2, 4), serde_json::from_str(&json).unwrap()).unwrap();
    assert_eq!(back.next_timer(), Some(2 + 1 + GRACE), "the limit is a timer of the restored engine");
    let ts = back.schedule(100);
    assert!(ts.iter().any(|t| &*t.key.name == "liar" && matches!(t.reason, Reason::RunTimeExceeded { .. })), "{ts:?}");
}

#[test]
fn a_group_shrunk_below_its_size_is_allowed_its_stretched_run_time() {
    // 2..4 members declaring 10 s with all 4: placed with 2 it is planned for 20 s, and so limited.
    let mut e = engine(graph(2, 4), config(RunTimeLimitMode::Enforce));
    e.submit(elastic("e", "q", 2, 4, 4, Some(10), 0), 0).unwrap();
    let ts = e.schedule(0);
    ready_all(&mut e, &ts, 0);
    assert_eq!(e.group(&key("e")).unwrap().member_count(), 2);
    assert!(e.schedule(20 + GRACE - 1).is_empty());
    let ts = e.schedule(20 + GRACE);
    assert_eq!(ts[0].reason, Reason::RunTimeExceeded { run_time_s: 20, grace_s: GRACE as u64 });
}

/// `u0`, declaring no run time, ran 5 s on an idle node, so its kind is learned as 5 s; then
/// `gang` is reserved at 50 on both nodes and `u1` of the same kind arrives at 7.
fn learned_short(policy: QueuePolicy) -> Engine {
    let mut c = config(RunTimeLimitMode::Enforce);
    c.queues[0].policy = policy;
    let mut e = engine(graph(2, 4), c);
    e.submit(spec("filler", "q", 1, 4, Some(50), 0), 0).unwrap();
    e.submit(spec("u0", "q", 1, 4, None, 0), 0).unwrap();
    let ts = e.schedule(0);
    ready_all(&mut e, &ts, 0);
    e.finished(&key("u0"), true, 5).unwrap();
    e.submit(spec("gang", "q", 2, 4, Some(100), 6), 6).unwrap();
    e.schedule(6);
    e.submit(spec("u1", "q", 1, 4, None, 7), 7).unwrap();
    e.schedule(7);
    e
}

#[test]
fn a_learned_run_time_is_no_promise_to_backfill_on() {
    let e = learned_short(QueuePolicy::Easy);
    assert_eq!(e.group(&key("gang")).unwrap().reserved_at, Some(50));
    assert_eq!(
        state(&e, "u1"),
        GroupState::Queued,
        "5 s learned would end before 50, but nothing holds u1 to it: it would delay the gang for as long as it ran"
    );
    let x = e.explain(&key("u1"), 7).unwrap();
    assert!(x.reason.contains("delays no reservation however long it runs"), "{}", x.reason);
    // Where no reservation is in the way it starts, and is planned with what was learned.
    let e = learned_short(QueuePolicy::BestEffortFifo);
    let u1 = e.group(&key("u1")).unwrap();
    assert_eq!(u1.state, GroupState::Admitted);
    let a = u1.allocation.as_ref().unwrap();
    assert_eq!(a.end - a.start, 5, "planned with its learned run time");
    assert_eq!(e.next_timer().filter(|t| *t <= 7 + 5 + GRACE), None, "and not limited by it");
}
