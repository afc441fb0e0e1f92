//! One test per scheduling rule.

mod common;

use common::*;
use muster_queue::config::{CohortConfig, PreemptionConfig, QuotaSpec, WithinQueue};
use muster_queue::{
    Engine, EngineConfig, EngineError, ExternalHold, GroupKey, GroupState, QueuePolicy, Reason, RequeueOrder,
};

fn one_queue(policy: QueuePolicy) -> EngineConfig {
    let mut c = EngineConfig::single_queue("q");
    c.queues[0].policy = policy;
    c
}

/// Two 4-cpu nodes; `filler`, admitted and ready at 0, holds one of them until `filler_end`.
fn half_busy(policy: QueuePolicy, filler_end: u64) -> Engine {
    let mut e = engine(graph(2, 4), one_queue(policy));
    e.submit(spec("filler", "q", 1, 4, Some(filler_end), 0), 0).unwrap();
    let ts = e.schedule(0);
    ready_all(&mut e, &ts, 0);
    e
}

/// `half_busy` until t=50; `big` needs both nodes, so it is reserved at 50. Returns the engine
/// after that cycle.
fn blocked_head(policy: QueuePolicy) -> Engine {
    let mut e = half_busy(policy, 50);
    e.submit(spec("big", "q", 2, 4, Some(100), 1), 1).unwrap();
    e.schedule(1);
    e
}

#[test]
fn strict_fifo_nothing_passes_a_blocked_head() {
    let mut e = blocked_head(QueuePolicy::StrictFifo);
    assert_eq!(state(&e, "big"), GroupState::Reserved);
    assert_eq!(e.group(&key("big")).unwrap().reserved_at, Some(50));
    e.submit(spec("small", "q", 1, 1, Some(10), 2), 2).unwrap();
    let ts = e.schedule(2);
    assert!(ts.is_empty(), "{ts:?}");
    assert_eq!(state(&e, "small"), GroupState::Queued);
    let x = e.explain(&key("small"), 2).unwrap();
    assert!(x.reason.contains("waiting behind ns/big (queue q is strict FIFO)"), "{}", x.reason);
    assert_eq!(x.position, 2);
}

#[test]
fn easy_backfills_only_what_does_not_delay_the_reservation() {
    let mut e = blocked_head(QueuePolicy::Easy);
    e.submit(spec("long", "q", 1, 1, Some(100), 2), 2).unwrap();
    e.submit(spec("short", "q", 1, 1, Some(10), 3), 3).unwrap();
    let ts = e.schedule(3);
    assert_eq!(state(&e, "long"), GroupState::Queued, "would run past 50 on big's node");
    assert_eq!(state(&e, "short"), GroupState::Admitted);
    let adm = ts.iter().find(|t| &*t.key.name == "short").unwrap();
    assert_eq!(adm.reason, Reason::Admitted { backfill: true });
    assert_eq!(e.group(&key("big")).unwrap().reserved_at, Some(50));
    // EASY reserves only the head: `long` gets no reservation.
    assert!(e.group(&key("long")).unwrap().reason.contains("reservation depth 1"));
}

#[test]
fn best_effort_fifo_starts_anything_that_fits() {
    let mut e = blocked_head(QueuePolicy::BestEffortFifo);
    assert_eq!(state(&e, "big"), GroupState::Queued, "no reservations in best-effort FIFO");
    e.submit(spec("long", "q", 1, 1, Some(100), 2), 2).unwrap();
    e.schedule(2);
    assert_eq!(state(&e, "long"), GroupState::Admitted);
}

#[test]
fn conservative_reserves_up_to_depth() {
    for (depth, expect) in [(1, GroupState::Queued), (2, GroupState::Reserved)] {
        let mut e = blocked_head(QueuePolicy::Conservative { depth });
        e.submit(spec("big2", "q", 2, 4, Some(100), 2), 2).unwrap();
        e.schedule(2);
        assert_eq!(state(&e, "big"), GroupState::Reserved);
        assert_eq!(state(&e, "big2"), expect, "depth {depth}");
        if depth == 2 {
            assert_eq!(e.group(&key("big2")).unwrap().reserved_at, Some(150));
        }
    }
}

#[test]
fn selective_reserves_only_once_a_group_has_waited_to_its_slowdown() {
    // filler holds one of two 4-cpu nodes until 200; big (both nodes, 100 s, submitted at 1) is due
    // a reservation under slowdown 2 once it has waited its run time, at 101.
    let mut e = half_busy(QueuePolicy::Selective { depth: 16, slowdown: 2 }, 200);
    e.submit(spec("big", "q", 2, 4, Some(100), 1), 1).unwrap();
    e.submit(spec("long", "q", 1, 1, Some(300), 2), 2).unwrap();
    e.schedule(2);
    assert_eq!(state(&e, "big"), GroupState::Queued, "not due a reservation yet");
    assert_eq!(state(&e, "long"), GroupState::Admitted, "big is not protected yet: long may delay it");
    e.submit(spec("late", "q", 1, 1, Some(300), 101), 101).unwrap();
    e.schedule(101);
    assert_eq!(state(&e, "big"), GroupState::Reserved, "waited 100 s of a 100 s run: slowdown 2");
    assert_eq!(e.group(&key("big")).unwrap().reserved_at, Some(302));
    assert_eq!(state(&e, "late"), GroupState::Queued, "would delay big's reservation");
    // Conservative backfill protects big from the start: long waits, with a reservation of its own.
    let mut c = half_busy(QueuePolicy::Conservative { depth: 16 }, 200);
    c.submit(spec("big", "q", 2, 4, Some(100), 1), 1).unwrap();
    c.submit(spec("long", "q", 1, 1, Some(300), 2), 2).unwrap();
    c.schedule(2);
    assert_eq!((state(&c, "big"), state(&c, "long")), (GroupState::Reserved, GroupState::Reserved));
    assert_eq!(c.group(&key("long")).unwrap().reserved_at, Some(300));
}

#[test]
fn selective_reserves_when_the_slowdown_is_reached_though_nothing_else_happens() {
    // filler holds one of two nodes until 200; big (both nodes, 100 s, submitted at 1) becomes
    // due a reservation at 101 under slowdown 2. No event comes in between: the time alone must
    // bring a cycle, as a reservation's start does.
    let mut e = half_busy(QueuePolicy::Selective { depth: 16, slowdown: 2 }, 200);
    e.submit(spec("big", "q", 2, 4, Some(100), 1), 1).unwrap();
    e.schedule(1);
    assert_eq!(state(&e, "big"), GroupState::Queued);
    let reason = &e.group(&key("big")).unwrap().reason;
    assert!(reason.contains("until its slowdown reaches 2 at t=101 s"), "{reason}");
    assert_eq!(e.next_timer(), Some(101), "the driver is told when to wake");
    assert!(e.schedule(50).is_empty(), "nothing due yet: the cycle is skipped");
    assert_eq!(to(&e.schedule(101), "big"), vec![GroupState::Reserved]);
    assert_eq!(e.group(&key("big")).unwrap().reserved_at, Some(200));
}

#[test]
fn selective_orders_by_when_each_group_reaches_its_slowdown() {
    let policy = QueuePolicy::Selective { depth: 16, slowdown: 3 };
    // One node free; long (300 s) and short (20 s) queued together: short reaches slowdown 3
    // first (at 41, long at 601), so it goes first though submitted second.
    let mut e = half_busy(policy, 100);
    e.submit(spec("long", "q", 1, 4, Some(300), 1), 1).unwrap();
    e.submit(spec("short", "q", 1, 4, Some(20), 1), 1).unwrap();
    e.schedule(1);
    assert_eq!((state(&e, "short"), state(&e, "long")), (GroupState::Admitted, GroupState::Queued));
    // Queued earlier, a group stays ahead of one that reaches the bound later: early (30 s, at 1)
    // is due at 61, late (10 s, at 50) at 70.
    let mut e = half_busy(policy, 100);
    e.submit(spec("early", "q", 1, 4, Some(30), 1), 1).unwrap();
    e.submit(spec("late", "q", 1, 4, Some(10), 50), 50).unwrap();
    e.schedule(50);
    assert_eq!((state(&e, "early"), state(&e, "late")), (GroupState::Admitted, GroupState::Queued));
    // Conservative backfill keeps submission order.
    let mut c = half_busy(QueuePolicy::Conservative { depth: 16 }, 100);
    c.submit(spec("long", "q", 1, 4, Some(300), 1), 1).unwrap();
    c.submit(spec("short", "q", 1, 4, Some(20), 1), 1).unwrap();
    c.schedule(1);
    assert_eq!((state(&c, "long"), state(&c, "short")), (GroupState::Admitted, GroupState::Reserved));
}

#[test]
fn selective_protects_at_once_a_group_that_declares_no_run_time() {
    let mut e = half_busy(QueuePolicy::Selective { depth: 16, slowdown: 3 }, 50);
    e.submit(spec("big", "q", 2, 4, None, 1), 1).unwrap();
    e.schedule(1);
    assert_eq!(state(&e, "big"), GroupState::Reserved, "no run time, no slowdown to wait for");
}

#[test]
fn a_reserved_group_of_fixed_size_is_starting_soon_within_its_queues_lead() {
    let soon = |e: &Engine, now: i64| e.starting_soon(now).map(|g| g.spec.key.name.to_string()).collect::<Vec<_>>();
    for (ahead, at_40) in [(10, vec!["big".to_string()]), (0, vec![])] {
        let mut c = one_queue(QueuePolicy::Conservative { depth: 16 });
        c.queues[0].create_pods_ahead_s = ahead;
        let mut e = engine(graph(2, 4), c);
        e.submit(spec("filler", "q", 1, 4, Some(50), 0), 0).unwrap();
        let ts = e.schedule(0);
        ready_all(&mut e, &ts, 0);
        e.submit(spec("big", "q", 2, 4, Some(100), 1), 1).unwrap();
        e.submit(elastic("stretch", "q", 2, 3, 4, Some(100), 1), 1).unwrap();
        e.schedule(1);
        assert_eq!(e.group(&key("big")).unwrap().reserved_at, Some(50));
        assert_eq!(state(&e, "stretch"), GroupState::Reserved);
        assert!(soon(&e, 39).is_empty(), "11 s ahead of its start: not yet");
        // The elastic group's size is chosen at admission; 0 s ahead turns it off.
        assert_eq!(soon(&e, 40), at_40, "{ahead} s ahead");
    }
}

#[test]
fn the_first_in_line_behind_a_group_without_a_run_time_is_starting_soon_and_only_it() {
    let soon = |e: &Engine| e.starting_soon(5).map(|g| g.spec.key.name.to_string()).collect::<Vec<_>>();
    for (ahead, first) in [(60, vec!["next".to_string()]), (0, vec![])] {
        let mut c = one_queue(QueuePolicy::Conservative { depth: 16 });
        c.queues[0].create_pods_ahead_s = ahead;
        let mut e = engine(graph(2, 4), c);
        e.submit(spec("running", "q", 2, 4, None, 0), 0).unwrap();
        let ts = e.schedule(0);
        ready_all(&mut e, &ts, 0);
        e.submit(spec("next", "q", 2, 4, None, 1), 1).unwrap();
        e.submit(spec("after", "q", 2, 4, None, 2), 2).unwrap();
        e.schedule(5);
        assert_eq!(state(&e, "next"), GroupState::Queued, "no start can be planned behind a group without an end");
        assert_eq!(soon(&e), first, "{ahead} s ahead");
        let next = e.group(&key("next")).unwrap();
        assert_eq!(e.starts_soon(next, 5), ahead > 0);
        assert!(!e.starts_soon(e.group(&key("after")).unwrap(), 5), "second in line");
    }
    // An elastic group first in line is sized at admission: its pods are not made ahead.
    let mut e = engine(graph(2, 4), one_queue(QueuePolicy::Conservative { depth: 16 }));
    e.submit(spec("running", "q", 2, 4, None, 0), 0).unwrap();
    let ts = e.schedule(0);
    ready_all(&mut e, &ts, 0);
    e.submit(elastic("stretch", "q", 2, 3, 4, None, 1), 1).unwrap();
    e.schedule(5);
    assert!(soon(&e).is_empty());
}

#[test]
fn a_gang_that_reserved_a_rack_starts_on_time_while_backfill_takes_only_other_racks() {
    // 4 racks of 2 nodes, every node busy with a job ending at 10, 20, .., 80 s in node order.
    let mut e = engine(graph(8, 4), one_queue(QueuePolicy::Conservative { depth: 16 }));
    for i in 0..8 {
        e.submit(spec(&format!("f{i}"), "q", 1, 4, Some(10 * (i + 1)), 0), 0).unwrap();
    }
    let ts = e.schedule(0);
    ready_all(&mut e, &ts, 0);
    let mut gang = spec("gang", "q", 2, 4, Some(100), 1);
    gang.request.topology = Some(muster_graph::jobspec::TopologyConstraint::required("rack"));
    e.submit(gang, 1).unwrap();
    e.schedule(1);
    let at = e.group(&key("gang")).unwrap().reserved_at.expect("a rack frees at a known time");
    // As each node frees, a long job asks for one node: it may backfill any node but the
    // reserved rack's, since it would still run when the gang is due.
    let mut backfilled = 0;
    for i in 0..8 {
        let t = 10 * (i + 1);
        if t > at {
            break;
        }
        e.finished(&key(&format!("f{i}")), true, t).unwrap();
        e.submit(spec(&format!("long{i}"), "q", 1, 4, Some(1000), t), t).unwrap();
        let ts = e.schedule(t);
        backfilled += ts.iter().filter(|x| x.key.name.starts_with("long") && x.to == GroupState::Admitted).count();
        ready_all(&mut e, &ts, t);
        if t < at {
            assert_eq!(state(&e, "gang"), GroupState::Reserved, "t={t}");
            assert_eq!(e.group(&key("gang")).unwrap().reserved_at, Some(at), "the promise holds at t={t}");
        }
    }
    assert!(matches!(state(&e, "gang"), GroupState::Admitted | GroupState::Running), "admitted at its reserved {at}");
    let nodes = |name: &str| -> Vec<String> {
        e.group(&key(name)).unwrap().allocation.as_ref().unwrap().members.iter().map(|m| m.node.clone()).collect()
    };
    let gang_nodes = nodes("gang");
    for i in 0..8 {
        if let Some(g) = e.group(&key(&format!("long{i}"))).filter(|g| g.allocation.is_some()) {
            assert!(!gang_nodes.contains(&nodes(&g.spec.key.name)[0]), "long{i} took a node of the gang's rack");
        }
    }
    // Where the gang's rack was not the first to free, long jobs filled the racks in between.
    assert_eq!(backfilled > 0, at > 20, "at {at}: {backfilled} backfilled");
    e.check_invariants().unwrap();
}

#[test]
fn reservation_turns_into_admission_when_its_time_comes() {
    let mut e = blocked_head(QueuePolicy::Easy);
    assert!(e.schedule(20).is_empty(), "nothing changed: the cycle is skipped");
    e.finished(&key("filler"), true, 50).unwrap();
    let ts = e.schedule(50);
    assert_eq!(to(&ts, "big"), vec![GroupState::Admitted]);
    assert_eq!(ts[0].allocation.as_ref().unwrap().members.len(), 2);
}

#[test]
fn overrun_moves_the_reservation_and_says_so() {
    let mut e = blocked_head(QueuePolicy::Easy);
    // filler overran its expected end (50): at 60 it is due any moment, so the reservation
    // moves to the next second rather than being dropped (which would let backfill take its nodes).
    let ts = e.schedule(60);
    assert!(
        ts.iter()
            .any(|t| &*t.key.name == "big" && t.to == GroupState::Reserved && t.reason == Reason::Reserved { at: 61 }),
        "{ts:?}"
    );
    assert!(e.explain(&key("big"), 60).unwrap().reason.contains("reserved to start at t=61 s"));
    // Still overrunning at 70: the promise is kept, not dropped; a small group that would run past
    // the reservation's start cannot take the room.
    e.submit(spec("small", "q", 1, 1, Some(30), 65), 65).unwrap();
    e.schedule(70);
    assert_eq!(state(&e, "big"), GroupState::Reserved);
    assert_eq!(e.group(&key("big")).unwrap().reserved_at, Some(71));
    assert_eq!(state(&e, "small"), GroupState::Queued);
}

#[test]
fn priority_orders_within_a_queue() {
    let mut c = one_queue(QueuePolicy::BestEffortFifo);
    c.priority_classes.insert("high".into(), 100);
    let mut e = engine(graph(1, 4), c);
    e.submit(spec("low", "q", 1, 4, None, 0), 0).unwrap();
    let mut hi = spec("hi", "q", 1, 4, None, 5);
    hi.priority_class = Some("high".into());
    e.submit(hi, 5).unwrap();
    e.schedule(5);
    assert_eq!(state(&e, "hi"), GroupState::Admitted);
    assert_eq!(state(&e, "low"), GroupState::Queued);
}

fn quota_cfg() -> EngineConfig {
    let mut c = EngineConfig::single_queue("a");
    let mut b = c.queues[0].clone();
    b.name = "b".into();
    c.queues.push(b);
    for q in &mut c.queues {
        q.cohort = Some("co".into());
        q.policy = QueuePolicy::BestEffortFifo;
    }
    c.queues[0]
        .quotas
        .insert("cpu".into(), QuotaSpec { nominal: 4.into(), borrowing_limit: None, lending_limit: None });
    c.queues[1]
        .quotas
        .insert("cpu".into(), QuotaSpec { nominal: 4.into(), borrowing_limit: None, lending_limit: None });
    c
}

#[test]
fn quota_nominal_and_borrowing() {
    // 16 cpu cluster; a and b have 4 each in one cohort.
    let mut c = quota_cfg();
    c.queues[0].cohort = None;
    c.queues[1].cohort = None;
    let mut e = engine(graph(4, 4), c.clone());
    e.submit(spec("a1", "a", 1, 4, None, 0), 0).unwrap();
    e.submit(spec("a2", "a", 1, 4, None, 0), 0).unwrap();
    e.schedule(0);
    assert_eq!(state(&e, "a1"), GroupState::Admitted);
    assert_eq!(state(&e, "a2"), GroupState::Queued, "no cohort: nominal is the limit");
    let r = e.explain(&key("a2"), 0).unwrap().reason;
    assert!(r.contains("quota: queue a uses 4 of cpu (nominal 4)"), "{r}");

    // In a cohort, a borrows b's unused 4, not more.
    let mut e = engine(graph(4, 4), quota_cfg());
    for i in 0..3 {
        e.submit(spec(&format!("a{i}"), "a", 1, 4, None, 0), 0).unwrap();
    }
    e.schedule(0);
    assert_eq!(
        [state(&e, "a0"), state(&e, "a1"), state(&e, "a2")],
        [GroupState::Admitted, GroupState::Admitted, GroupState::Queued]
    );
    assert!(e.explain(&key("a2"), 0).unwrap().reason.contains("cohort co has 0 left to lend"));
    e.check_invariants().unwrap();
}

#[test]
fn borrowing_and_lending_limits() {
    let mut c = quota_cfg();
    c.queues[0].quotas.get_mut("cpu").unwrap().borrowing_limit = Some(2.into());
    let mut e = engine(graph(4, 4), c);
    e.submit(spec("a1", "a", 1, 4, None, 0), 0).unwrap();
    e.submit(spec("a2", "a", 1, 2, None, 0), 0).unwrap();
    e.submit(spec("a3", "a", 1, 1, None, 0), 0).unwrap();
    e.schedule(0);
    assert_eq!(state(&e, "a2"), GroupState::Admitted);
    assert_eq!(state(&e, "a3"), GroupState::Queued, "4 nominal + 2 borrowing limit used");

    let mut c = quota_cfg();
    c.queues[1].quotas.get_mut("cpu").unwrap().lending_limit = Some(1.into());
    let mut e = engine(graph(4, 4), c);
    e.submit(spec("a1", "a", 1, 4, None, 0), 0).unwrap();
    e.submit(spec("a2", "a", 2, 1, None, 0), 0).unwrap();
    e.submit(spec("a3", "a", 1, 1, None, 0), 0).unwrap();
    e.schedule(0);
    assert_eq!(state(&e, "a2"), GroupState::Queued, "b lends only 1 cpu");
    assert_eq!(state(&e, "a3"), GroupState::Admitted);
    e.check_invariants().unwrap();
}

#[test]
fn fair_share_orders_queues_and_decays() {
    let mut c = quota_cfg();
    for q in &mut c.queues {
        q.quotas.clear();
        q.cohort = None;
    }
    c.fair_share_half_life_s = 3600;
    let mut e = engine(graph(1, 4), c);
    // a used the whole cluster for an hour.
    let hist = [("cpu".to_string(), 4000.0 * 3600.0)].into();
    e.add_usage_history("a", &hist, 0, 0).unwrap();
    assert!(e.fair_share("a") > 0.5 && e.fair_share("b") == 0.0);
    e.submit(spec("a1", "a", 1, 4, None, 0), 0).unwrap();
    e.submit(spec("b1", "b", 1, 4, None, 10), 10).unwrap();
    e.schedule(10);
    assert_eq!(state(&e, "b1"), GroupState::Admitted, "b has the smaller share, so it goes first");
    assert_eq!(state(&e, "a1"), GroupState::Queued);
    // Decay: after 10 half-lives a's history weighs ~0.1%.
    let before = e.fair_share("a");
    e.finished(&key("b1"), true, 36000).unwrap();
    assert!(e.fair_share("a") < before / 500.0, "{} vs {before}", e.fair_share("a"));
    // Weight: b with weight 4 counts its usage a quarter.
}

#[test]
fn fair_share_weight_divides_share() {
    let mut c = EngineConfig::single_queue("a");
    let mut b = c.queues[0].clone();
    b.name = "b".into();
    b.fair_share_weight = 4.0;
    c.queues.push(b);
    let mut e = engine(graph(4, 4), c);
    e.submit(spec("a1", "a", 1, 4, None, 0), 0).unwrap();
    e.submit(spec("b1", "b", 1, 4, None, 0), 0).unwrap();
    e.schedule(0);
    assert!((e.fair_share("a") - 0.25).abs() < 1e-9);
    assert!((e.fair_share("b") - 0.0625).abs() < 1e-9);
}

fn preempt_cfg() -> EngineConfig {
    let mut c = one_queue(QueuePolicy::BestEffortFifo);
    c.priority_classes.insert("high".into(), 100);
    c.queues[0].preemption = PreemptionConfig { within_queue: WithinQueue::LowerPriority, ..Default::default() };
    c
}

#[test]
fn preemption_evicts_the_fewest_whole_groups() {
    // 4 nodes x 4 cpu. Low groups: wide (2 members x 4 cpu, nodes 0-1), s1 and s2 (1 x 4 cpu each).
    let mut e = engine(graph(4, 4), preempt_cfg());
    e.submit(spec("wide", "q", 2, 4, None, 0), 0).unwrap();
    e.submit(spec("s1", "q", 1, 4, None, 1), 1).unwrap();
    e.submit(spec("s2", "q", 1, 4, None, 2), 2).unwrap();
    let ts = e.schedule(2);
    ready_all(&mut e, &ts, 2);
    // hi needs 2 whole nodes: evicting `wide` alone is the smallest set (s1 + s2 would be 2).
    let mut hi = spec("hi", "q", 2, 4, None, 3);
    hi.priority_class = Some("high".into());
    e.submit(hi, 3).unwrap();
    let ts = e.schedule(3);
    assert_eq!(state(&e, "hi"), GroupState::Admitted);
    let victims: Vec<_> = ts.iter().filter(|t| t.to == GroupState::Evicted).map(|t| t.key.name.to_string()).collect();
    assert_eq!(victims, vec!["wide"], "{ts:?}");
    let evicted = &ts.iter().find(|t| t.to == GroupState::Evicted).unwrap();
    assert_eq!(evicted.allocation.as_ref().unwrap().members.len(), 2);
    // The victim is whole: it holds nothing and is queued again.
    let v = e.group(&key(&victims[0])).unwrap();
    assert_eq!(v.state, GroupState::Queued);
    assert!(v.allocation.is_none());
    e.check_invariants().unwrap();
}

#[test]
fn preemption_minimises_after_greedy() {
    // No single victim frees 3 nodes. Greedy takes s2, s1 (fewest members, most recent first), then
    // wide; minimisation gives s1 back: wide + s2 is the smallest set.
    let mut e = engine(graph(4, 4), preempt_cfg());
    e.submit(spec("wide", "q", 2, 4, None, 0), 0).unwrap();
    e.schedule(0);
    e.submit(spec("s1", "q", 1, 4, None, 1), 1).unwrap();
    e.schedule(1);
    e.submit(spec("s2", "q", 1, 4, None, 2), 2).unwrap();
    e.schedule(2);
    let mut hi = spec("hi", "q", 3, 4, None, 3);
    hi.priority_class = Some("high".into());
    e.submit(hi, 3).unwrap();
    let ts = e.schedule(3);
    let victims: Vec<_> = ts.iter().filter(|t| t.to == GroupState::Evicted).map(|t| t.key.name.to_string()).collect();
    assert_eq!(victims, vec!["s2", "wide"], "{ts:?}");
    assert_eq!(state(&e, "s1"), GroupState::Admitted);
    let adm = ts.iter().find(|t| &*t.key.name == "hi").unwrap();
    assert!(matches!(&adm.reason, Reason::AdmittedByPreemption { victims } if victims.len() == 2));
    e.check_invariants().unwrap();
}

#[test]
fn preemption_loses_the_least_work_rather_than_evicting_the_fewest_groups() {
    // 4 nodes x 4 cpu. `old` (2 members) has run 100 s, s1 and s2 (1 member each) 10 s. hi needs
    // 2 whole nodes: `old` alone would do, but throws away 200 member-seconds; s1 and s2 together
    // throw away 20.
    let mut e = engine(graph(4, 4), preempt_cfg());
    e.submit(spec("old", "q", 2, 4, None, 0), 0).unwrap();
    let ts = e.schedule(0);
    ready_all(&mut e, &ts, 0);
    for name in ["s1", "s2"] {
        e.submit(spec(name, "q", 1, 4, None, 90), 90).unwrap();
    }
    let ts = e.schedule(90);
    ready_all(&mut e, &ts, 90);
    let mut hi = spec("hi", "q", 2, 4, None, 100);
    hi.priority_class = Some("high".into());
    e.submit(hi, 100).unwrap();
    let ts = e.schedule(100);
    assert_eq!(state(&e, "hi"), GroupState::Admitted);
    let victims: Vec<_> = ts.iter().filter(|t| t.to == GroupState::Evicted).map(|t| t.key.name.to_string()).collect();
    assert_eq!(victims, vec!["s1", "s2"], "{ts:?}");
    assert_eq!(state(&e, "old"), GroupState::Running);
    e.check_invariants().unwrap();
}

#[test]
fn a_preemption_tried_on_a_node_others_over_committed_is_undone_cleanly() {
    // n-0 runs `a` (4 of 4 cpu); another scheduler's pod lands there too (2 cpu: 6 of 4). Taking
    // `a` out leaves 2 free, too little for `hi`: the what-if is undone, over the over-commit.
    let mut e = engine(graph(1, 4), preempt_cfg());
    e.submit(spec("a", "q", 1, 4, None, 0), 0).unwrap();
    e.schedule(0);
    e.occupy("pod-x", ExternalHold::pod("n-0", &[("cpu".into(), 2000)]), 1).unwrap();
    let mut hi = spec("hi", "q", 1, 4, None, 1);
    hi.priority_class = Some("high".into());
    e.submit(hi, 1).unwrap();
    e.schedule(1);
    assert_eq!(state(&e, "a"), GroupState::Admitted, "not evicted for nothing");
    assert_ne!(state(&e, "hi"), GroupState::Admitted);
    e.vacate("pod-x", 2).unwrap();
    let ts = e.schedule(2);
    assert_eq!(to(&ts, "hi"), [GroupState::Admitted], "with the room back, preemption goes ahead");
    assert_eq!(to(&ts, "a"), [GroupState::Evicted, GroupState::Queued]);
}

#[test]
fn no_preemption_of_equal_priority_or_when_disabled() {
    let mut e = engine(graph(1, 4), preempt_cfg());
    e.submit(spec("a", "q", 1, 4, None, 0), 0).unwrap();
    e.schedule(0);
    e.submit(spec("b", "q", 1, 4, None, 1), 1).unwrap();
    e.schedule(1);
    assert_eq!(state(&e, "a"), GroupState::Admitted);
    let mut c = preempt_cfg();
    c.queues[0].preemption.within_queue = WithinQueue::Never;
    let mut e = engine(graph(1, 4), c);
    e.submit(spec("a", "q", 1, 4, None, 0), 0).unwrap();
    e.schedule(0);
    let mut hi = spec("hi", "q", 1, 4, None, 3);
    hi.priority_class = Some("high".into());
    e.submit(hi, 1).unwrap();
    e.schedule(1);
    assert_eq!(state(&e, "a"), GroupState::Admitted);
}

#[test]
fn reclaim_evicts_the_borrower_that_loses_the_least_work() {
    let mut c = quota_cfg();
    c.queues[0].preemption.reclaim_within_cohort = true;
    let mut e = engine(graph(2, 4), c);
    // b runs a long job on one node and, later, a 2-member job on the other: 8 cpu, 4 borrowed.
    e.submit(spec("b-long", "b", 1, 4, None, 0), 0).unwrap();
    let ts = e.schedule(0);
    ready_all(&mut e, &ts, 0);
    e.submit(spec("b-new", "b", 2, 2, None, 100), 100).unwrap();
    let ts = e.schedule(100);
    ready_all(&mut e, &ts, 100);
    // a takes its nominal back: either victim frees a node. b-long has run 110 member-seconds,
    // b-new 2 x 10 = 20: b-new goes, though it has more members.
    e.submit(spec("a1", "a", 1, 4, None, 110), 110).unwrap();
    let ts = e.schedule(110);
    let victims: Vec<_> = ts.iter().filter(|t| t.to == GroupState::Evicted).map(|t| t.key.name.to_string()).collect();
    assert_eq!(victims, vec!["b-new"], "{ts:?}");
    assert_eq!(state(&e, "a1"), GroupState::Admitted);
    assert_eq!(state(&e, "b-long"), GroupState::Running);
}

#[test]
fn a_group_may_preempt_in_its_queue_and_reclaim_in_the_cohort_at_once() {
    // a and b: 4 cpu each on 2 nodes of 4. a runs `a-low` (2 cpu); b borrows 2 of a's cpu
    // (`b-new`, besides its own 4). `hi` in a needs a whole node's 4: a is within its nominal only
    // once its own a-low is gone (2 + 4 > 4), and the node needs b's borrowed 2 back too.
    let mut c = quota_cfg();
    c.priority_classes.insert("high".into(), 100);
    c.queues[0].preemption = PreemptionConfig {
        within_queue: WithinQueue::LowerPriority,
        reclaim_within_cohort: true,
        ..Default::default()
    };
    let mut e = engine(graph(2, 4), c);
    e.submit(spec("a-low", "a", 1, 2, None, 0), 0).unwrap();
    e.submit(spec("b-own", "b", 1, 4, None, 0), 0).unwrap();
    e.submit(spec("b-new", "b", 1, 2, None, 0), 0).unwrap();
    let ts = e.schedule(0);
    ready_all(&mut e, &ts, 0);
    let mut hi = spec("hi", "a", 1, 4, None, 10);
    hi.priority_class = Some("high".into());
    e.submit(hi, 10).unwrap();
    let ts = e.schedule(10);
    let mut victims: Vec<_> =
        ts.iter().filter(|t| t.to == GroupState::Evicted).map(|t| t.key.name.to_string()).collect();
    victims.sort();
    assert_eq!(victims, ["a-low", "b-new"], "{ts:?}");
    assert_eq!(state(&e, "hi"), GroupState::Admitted);
    assert_eq!(state(&e, "b-own"), GroupState::Running, "b keeps its own nominal");
    e.check_invariants().unwrap();
}

#[test]
fn a_group_its_queue_can_never_hold_is_unsatisfiable_and_says_which_limit() {
    // a: 4 cpu, b lends its 4: a holds at most 8; with a borrowing limit of 2, at most 6.
    let mut e = engine(graph(4, 4), quota_cfg());
    e.submit(spec("big", "a", 3, 4, None, 0), 0).unwrap();
    e.submit(spec("fits", "a", 2, 4, None, 0), 0).unwrap();
    let ts = e.schedule(0);
    let g = e.group(&key("big")).unwrap();
    assert_eq!(
        g.reason,
        "unsatisfiable: quota: its 3 members need cpu 12, but queue a can hold at most 8 (its nominal 4 + 4 the rest of cohort co can lend)"
    );
    assert!(ts.iter().any(|t| &*t.key.name == "big" && matches!(t.reason, Reason::Unsatisfiable { .. })), "{ts:?}");
    assert_eq!(state(&e, "fits"), GroupState::Admitted, "8 cpu is within reach");
    let view = e.queue_view(0);
    assert!(
        view.iter().all(|x| x.key.name.as_ref() != "big" || x.estimated_start.is_none()),
        "no estimate for what can never start: {view:?}"
    );
    let mut c = quota_cfg();
    c.queues[0].quotas.get_mut("cpu").unwrap().borrowing_limit = Some(2.into());
    let mut e = engine(graph(4, 4), c);
    e.submit(spec("big", "a", 2, 4, None, 0), 0).unwrap();
    e.schedule(0);
    assert!(e.group(&key("big")).unwrap().reason.ends_with("can hold at most 6 (its nominal 4 + borrowing limit 2)"));
}

#[test]
fn reclaim_lent_quota_within_cohort() {
    let mut c = quota_cfg();
    c.queues[0].preemption.reclaim_within_cohort = true;
    let mut e = engine(graph(2, 4), c);
    // b borrows a's whole nominal: 8 cpu.
    e.submit(spec("b1", "b", 1, 4, None, 0), 0).unwrap();
    e.schedule(0);
    e.submit(spec("b2", "b", 1, 4, None, 1), 1).unwrap();
    e.schedule(1);
    assert_eq!(state(&e, "b2"), GroupState::Admitted);
    e.submit(spec("a1", "a", 1, 4, None, 5), 5).unwrap();
    let ts = e.schedule(5);
    assert_eq!(state(&e, "a1"), GroupState::Admitted);
    let ev: Vec<_> = ts.iter().filter(|t| t.to == GroupState::Evicted).collect();
    assert_eq!(ev.len(), 1);
    assert_eq!(ev[0].key.name.as_ref(), "b2", "the most recently admitted borrower");
    assert!(matches!(ev[0].reason, Reason::Reclaimed { .. }));
    e.check_invariants().unwrap();
}

/// Queues a and b (4 cpu each, cohort co, a reclaiming) on 2 nodes of 4: b's elastic `b-el`
/// (2..8 one-cpu members, shrinkable as given) holds all 8 cpu, 4 of them a's; then a's `a1`
/// (one 4-cpu member) comes for a's own.
fn reclaim_from_elastic(shrinkable: bool) -> (Engine, Vec<muster_queue::Transition>) {
    let mut c = quota_cfg();
    c.queues[0].preemption.reclaim_within_cohort = true;
    let mut e = engine(graph(2, 4), c);
    let mut el = elastic("b-el", "b", 2, 8, 1, None, 0);
    el.request.shrinkable = shrinkable;
    e.submit(el, 0).unwrap();
    let ts = e.schedule(0);
    ready_all(&mut e, &ts, 0);
    assert_eq!(e.group(&key("b-el")).unwrap().member_count(), 8);
    e.submit(spec("a1", "a", 1, 4, None, 10), 10).unwrap();
    let ts = e.schedule(10);
    (e, ts)
}

#[test]
fn reclaim_asks_a_shrinkable_borrower_for_its_surplus_members_instead_of_evicting_it() {
    let (mut e, ts) = reclaim_from_elastic(true);
    assert!(!ts.iter().any(|t| t.to == GroupState::Evicted), "nothing starts over: {ts:?}");
    let given = ts.iter().find(|t| matches!(t.reason, Reason::GivingWay { .. })).expect("asked back");
    let Reason::GivingWay { members, to: waiting } = &given.reason else { unreachable!() };
    assert_eq!((given.key.name.as_ref(), &*waiting.name, members.len()), ("b-el", "a1", 4));
    // a1 waits for the pods to go, and another cycle asks nothing more of anyone.
    assert_ne!(state(&e, "a1"), GroupState::Admitted);
    assert!(e.explain(&key("a1"), 10).unwrap().reason.contains("asked back for it (preemption)"));
    let again = e.schedule(11);
    assert!(!again.iter().any(|t| t.to == GroupState::Evicted || matches!(t.reason, Reason::GivingWay { .. })));
    // The pods are gone: b-el runs on with its 4, a1 starts on the node they left.
    let ts = e.members_lost(&key("b-el"), members, 12).unwrap();
    assert!(matches!(ts[0].reason, Reason::Shrunk { .. }));
    let ts = e.schedule(12);
    assert_eq!(to(&ts, "a1"), vec![GroupState::Admitted]);
    assert_eq!((state(&e, "b-el"), e.group(&key("b-el")).unwrap().member_count()), (GroupState::Running, 4));
    e.check_invariants().unwrap();
}

#[test]
fn reclaim_evicts_an_elastic_borrower_whole_unless_it_is_shrinkable() {
    let (e, ts) = reclaim_from_elastic(false);
    assert_eq!(to(&ts, "b-el"), vec![GroupState::Evicted, GroupState::Queued], "{ts:?}");
    assert_eq!(state(&e, "a1"), GroupState::Admitted);
    e.check_invariants().unwrap();
}

#[test]
fn elastic_starts_at_min_grows_and_shrinks() {
    let mut e = engine(graph(2, 4), one_queue(QueuePolicy::Easy));
    e.submit(spec("f", "q", 1, 4, None, 0), 0).unwrap();
    e.schedule(0);
    e.submit(elastic("el", "q", 2, 8, 1, None, 1), 1).unwrap();
    let ts = e.schedule(1);
    ready_all(&mut e, &ts, 1);
    assert_eq!(e.group(&key("el")).unwrap().member_count(), 4, "start with what fits (>= min)");
    e.finished(&key("f"), true, 10).unwrap();
    let ts = e.schedule(10);
    let grown = ts.iter().find(|t| matches!(t.reason, Reason::Grown { .. })).expect("grows");
    assert_eq!(grown.allocation.as_ref().unwrap().members.len(), 8);
    // Lose 3 members: 5 >= min 2, keeps running.
    let ts = e.members_lost(&key("el"), &[0, 1, 2], 20).unwrap();
    assert!(matches!(ts[0].reason, Reason::Shrunk { .. }));
    assert_eq!(state(&e, "el"), GroupState::Running);
    // Lose 4 more: 1 < min 2, evicted whole and queued again.
    let ts = e.members_lost(&key("el"), &[3, 4, 5, 6], 21).unwrap();
    assert_eq!(to(&ts, "el"), vec![GroupState::Evicted, GroupState::Queued]);
    assert!(e.group(&key("el")).unwrap().allocation.is_none());
    e.check_invariants().unwrap();
}

#[test]
fn elastic_waits_for_max_up_to_the_configured_time() {
    let mut c = one_queue(QueuePolicy::Easy);
    c.queues[0].elastic_max_wait_s = 100;
    let mut e = engine(graph(2, 4), c);
    e.submit(spec("f", "q", 1, 4, Some(500), 0), 0).unwrap();
    e.schedule(0);
    e.submit(elastic("el", "q", 2, 8, 1, None, 0), 0).unwrap();
    e.schedule(1);
    assert_eq!(state(&e, "el"), GroupState::Reserved, "waits for all 8");
    assert!(e.explain(&key("el"), 1).unwrap().reason.starts_with("elastic: waiting until t=100 s"));
    assert!(e.schedule(50).is_empty());
    let ts = e.schedule(100);
    assert_eq!(to(&ts, "el"), vec![GroupState::Admitted]);
    assert_eq!(e.group(&key("el")).unwrap().member_count(), 4);
}

/// Two 4-cpu nodes, one held by `f` until t=50; an elastic group of 2..8 one-cpu members that
/// runs `duration` seconds with all 8 (twice that with the 4 that fit now).
fn elastic_beside_a_filler(duration: u64) -> Engine {
    let mut e = engine(graph(2, 4), one_queue(QueuePolicy::Conservative { depth: 4 }));
    e.submit(spec("f", "q", 1, 4, Some(50), 0), 0).unwrap();
    let ts = e.schedule(0);
    ready_all(&mut e, &ts, 0);
    e.submit(elastic("el", "q", 2, 8, 1, Some(duration), 1), 1).unwrap();
    e.schedule(1);
    e
}

#[test]
fn an_elastic_group_waits_for_all_members_when_that_finishes_sooner() {
    // 4 now: ends at 1 + 2 x 100 = 201; all 8 from 50: ends at 150.
    let mut e = elastic_beside_a_filler(100);
    assert_eq!(state(&e, "el"), GroupState::Reserved);
    let why = e.explain(&key("el"), 1).unwrap().reason;
    assert!(
        why.starts_with("elastic: all 8 members from t=50 s finish at t=150 s, sooner than 4 now (at t=201 s)"),
        "{why}"
    );
    e.finished(&key("f"), true, 50).unwrap();
    let ts = e.schedule(50);
    assert_eq!(to(&ts, "el"), vec![GroupState::Admitted]);
    assert_eq!(e.group(&key("el")).unwrap().member_count(), 8);
    e.check_invariants().unwrap();
}

#[test]
fn an_elastic_group_starts_with_fewer_members_when_that_finishes_sooner() {
    // 4 now: ends at 1 + 2 x 20 = 41; all 8 from 50: ends at 70.
    let mut e = elastic_beside_a_filler(20);
    assert_eq!(to(&e.schedule(1), "el"), vec![], "decided in the cycle before");
    assert_eq!(state(&e, "el"), GroupState::Admitted);
    let g = e.group(&key("el")).unwrap();
    assert_eq!(g.member_count(), 4);
    assert_eq!(g.allocation.as_ref().unwrap().end, 41, "planned with its run time on 4 members, not 8");
    e.pods_ready(&key("el"), 4, 2).unwrap();
    // The filler ends early: the group grows to 8 at 11, and the 30 s left on 4 take 15 on 8.
    e.finished(&key("f"), true, 11).unwrap();
    let ts = e.schedule(11);
    let grown = ts.iter().find(|t| matches!(t.reason, Reason::Grown { .. })).expect("grows");
    assert_eq!(grown.allocation.as_ref().unwrap().members.len(), 8);
    assert_eq!(e.group(&key("el")).unwrap().allocation.as_ref().unwrap().end, 26);
    e.check_invariants().unwrap();
}

/// Two 4-cpu nodes, all 8 cpus held from 0 by `el` (2..8 one-cpu members, 100 s with all 8,
/// shrinkable as given, ready); at `at`, `big` (one 4-cpu member, 20 s) comes.
fn shrinkable_beside(shrinkable: bool, at: i64) -> (Engine, Vec<muster_queue::Transition>) {
    let mut e = engine(graph(2, 4), one_queue(QueuePolicy::Conservative { depth: 4 }));
    let mut el = elastic("el", "q", 2, 8, 1, Some(100), 0);
    el.request.shrinkable = shrinkable;
    e.submit(el, 0).unwrap();
    let ts = e.schedule(0);
    ready_all(&mut e, &ts, 0);
    assert_eq!(e.group(&key("el")).unwrap().member_count(), 8);
    e.submit(spec("big", "q", 1, 4, Some(20), at), at).unwrap();
    let ts = e.schedule(at);
    (e, ts)
}

#[test]
fn a_shrinkable_group_gives_back_members_and_the_first_in_line_starts_once_they_are_gone() {
    let (mut e, ts) = shrinkable_beside(true, 10);
    // Without giving way, big would start at 100; with it, now, and el loses 4 x 20 / 8 = 10 s.
    let given = ts.iter().find(|t| matches!(t.reason, Reason::GivingWay { .. })).expect("asked to give way");
    let Reason::GivingWay { members, to: waiting } = &given.reason else { unreachable!() };
    assert_eq!((given.key.name.as_ref(), given.to, &*waiting.name), ("el", GroupState::Running, "big"));
    assert_eq!(members.len(), 4);
    let alloc = e.group(&key("el")).unwrap().allocation.clone().unwrap();
    let nodes: std::collections::BTreeSet<_> =
        alloc.members.iter().filter(|m| members.contains(&m.index)).map(|m| m.node.clone()).collect();
    assert_eq!(nodes.len(), 1, "the members of one node: where big goes");
    // Nothing is freed before the pods are gone: big waits, reserved, and says why.
    assert_eq!(state(&e, "big"), GroupState::Reserved);
    assert!(e.explain(&key("big"), 10).unwrap().reason.contains("giving back members for it"));
    assert_eq!(e.leaving(&key("el")), Some(&members.iter().copied().collect()));
    assert!(!e.schedule(10).iter().any(|t| matches!(t.reason, Reason::GivingWay { .. })), "asked once");
    // Their pods are being deleted: nobody waits for them to be ready.
    assert_eq!(e.pods_ready(&key("el"), 4, 10).unwrap(), vec![], "no readiness lost");
    assert!(e.group(&key("el")).unwrap().not_ready_since.is_none());
    // The pods are gone: el runs on with 4, big starts where they were.
    let ts = e.members_lost(&key("el"), members, 11).unwrap();
    assert!(matches!(ts[0].reason, Reason::Shrunk { .. }));
    assert_eq!((state(&e, "el"), e.group(&key("el")).unwrap().member_count()), (GroupState::Running, 4));
    // 89 s of 8-member work left at 11: 178 s on 4.
    assert_eq!(e.group(&key("el")).unwrap().allocation.as_ref().unwrap().end, 11 + 178);
    assert_eq!(e.leaving(&key("el")), None);
    let ts = e.schedule(11);
    assert_eq!(to(&ts, "big"), vec![GroupState::Admitted]);
    let big = e.group(&key("big")).unwrap().allocation.clone().unwrap();
    assert_eq!(big.members[0].node, *nodes.first().unwrap());
    e.check_invariants().unwrap();
}

#[test]
fn no_group_gives_way_unless_it_allows_it_and_the_start_gained_outweighs_its_loss() {
    let asked = |ts: &[muster_queue::Transition]| ts.iter().any(|t| matches!(t.reason, Reason::GivingWay { .. }));
    let (e, ts) = shrinkable_beside(false, 10);
    assert!(!asked(&ts), "not shrinkable");
    assert_eq!(e.group(&key("big")).unwrap().reserved_at, Some(100));
    // At 95 big would gain 5 s and el lose 10 s.
    let (_, ts) = shrinkable_beside(true, 95);
    assert!(!asked(&ts), "not worth it");
    // A group of higher priority is not shrunk for a lower one.
    let mut el = elastic("el", "q", 2, 8, 1, Some(100), 0);
    el.request.shrinkable = true;
    let mut c = one_queue(QueuePolicy::Conservative { depth: 4 });
    c.priority_classes.insert("high".into(), 10);
    let mut e = engine(graph(2, 4), c);
    el.priority_class = Some("high".into());
    e.submit(el, 0).unwrap();
    let ts = e.schedule(0);
    ready_all(&mut e, &ts, 0);
    e.submit(spec("big", "q", 1, 4, Some(20), 10), 10).unwrap();
    assert!(!asked(&e.schedule(10)), "higher priority");
}

fn readiness_cfg(limit: Option<u32>) -> EngineConfig {
    let mut c = one_queue(QueuePolicy::Easy);
    c.queues[0].readiness.backoff_limit = limit;
    c
}

#[test]
fn readiness_timeout_backoff_then_deactivate() {
    let mut e = engine(graph(2, 4), readiness_cfg(Some(3)));
    e.submit(spec("g", "q", 2, 4, None, 0), 0).unwrap();
    let mut now = 0;
    let mut delays = Vec::new();
    let mut ts = e.schedule(now);
    for round in 1..=4 {
        assert_eq!(to(&ts, "g").last(), Some(&GroupState::Admitted), "round {round}");
        e.pods_ready(&key("g"), 1, now + 10).unwrap();
        assert!(e.schedule(now + 299).iter().all(|t| t.key.name.as_ref() != "g"));
        let out = e.schedule(now + 300);
        if round == 4 {
            assert_eq!(to(&out, "g"), vec![GroupState::Evicted, GroupState::Deactivated]);
            assert!(matches!(out[1].reason, Reason::BackoffLimitExceeded { requeues: 3 }));
            break;
        }
        assert_eq!(to(&out, "g"), vec![GroupState::Evicted]);
        assert!(out[0].allocation.is_some(), "the released placement is reported");
        assert_eq!(e.graph().stat().allocations, 0, "the whole allocation is released");
        let at = e.group(&key("g")).unwrap().requeue_at.unwrap();
        delays.push(at - (now + 300));
        assert!(e.schedule(at - 1).is_empty());
        ts = e.schedule(at);
        assert_eq!(ts[0].to, GroupState::Queued);
        assert_eq!(ts[0].reason, Reason::BackoffExpired);
        now = at;
    }
    assert_eq!(delays, vec![60, 120, 240]);
    // Deactivated: only resume brings it back, with a fresh backoff count.
    assert!(e.schedule(100_000).is_empty());
    e.resume(&key("g"), 100_000).unwrap();
    assert_eq!(e.group(&key("g")).unwrap().requeues, 0);
    assert_eq!(to(&e.schedule(100_000), "g"), vec![GroupState::Admitted]);
}

#[test]
fn backoff_caps_at_max() {
    let mut c = readiness_cfg(None);
    c.queues[0].readiness.backoff_max_s = 200;
    let mut e = engine(graph(2, 4), c);
    e.submit(spec("g", "q", 2, 4, None, 0), 0).unwrap();
    let mut now = 0;
    let mut delays = Vec::new();
    for _ in 0..4 {
        e.schedule(now);
        e.schedule(now + 300);
        let at = e.group(&key("g")).unwrap().requeue_at.unwrap();
        delays.push(at - (now + 300));
        e.schedule(at);
        now = at;
    }
    assert_eq!(delays, vec![60, 120, 200, 200]);
}

#[test]
fn requeue_order_eviction_or_creation() {
    for (order, first) in [(RequeueOrder::Eviction, "other"), (RequeueOrder::Creation, "g")] {
        let mut c = one_queue(QueuePolicy::StrictFifo);
        c.queues[0].readiness.requeue_order = order;
        let mut e = engine(graph(2, 4), c);
        e.submit(spec("g", "q", 2, 4, None, 0), 0).unwrap();
        e.schedule(0);
        e.submit(spec("other", "q", 2, 4, None, 10), 10).unwrap();
        e.schedule(300); // g times out, other admitted
        assert_eq!(state(&e, "other"), GroupState::Admitted);
        e.finished(&key("other"), true, 301).unwrap();
        e.submit(spec("other2", "q", 2, 4, None, 20), 301).unwrap();
        e.schedule(360); // g back in the queue
        let _ = first;
        let admitted = if state(&e, "g") == GroupState::Admitted { "g" } else { "other2" };
        assert_eq!(admitted, if order == RequeueOrder::Creation { "g" } else { "other2" }, "{order:?}");
    }
}

#[test]
fn recovery_timeout_releases_a_running_group() {
    let mut e = engine(graph(2, 4), readiness_cfg(None));
    e.submit(spec("g", "q", 2, 4, None, 0), 0).unwrap();
    e.schedule(0);
    e.pods_ready(&key("g"), 2, 5).unwrap();
    assert_eq!(state(&e, "g"), GroupState::Running);
    let ts = e.pods_ready(&key("g"), 1, 100).unwrap();
    assert_eq!(ts[0].reason, Reason::ReadinessLost);
    // The admission's readiness deadline (300) is stale now: it may wake the driver, never fires.
    assert!(e.next_timer().is_some_and(|t| t <= 400), "{:?}", e.next_timer());
    assert!(e.schedule(300).is_empty());
    assert_eq!(e.next_timer(), Some(400));
    assert!(e.schedule(399).is_empty());
    let ts = e.schedule(400);
    assert!(matches!(ts[0].reason, Reason::RecoveryTimeout { requeue_at: 460, requeues: 1 }), "{ts:?}");
    // Recovered in time: nothing happens.
    let mut e = engine(graph(2, 4), readiness_cfg(None));
    e.submit(spec("g", "q", 2, 4, None, 0), 0).unwrap();
    e.schedule(0);
    e.pods_ready(&key("g"), 2, 5).unwrap();
    e.pods_ready(&key("g"), 1, 100).unwrap();
    e.pods_ready(&key("g"), 2, 200).unwrap();
    assert!(e.schedule(1000).iter().all(|t| t.to != GroupState::Evicted));
}

#[test]
fn block_admission_admits_one_at_a_time() {
    let mut c = one_queue(QueuePolicy::BestEffortFifo);
    c.block_admission = true;
    let mut e = engine(graph(4, 4), c);
    e.submit(spec("a", "q", 1, 4, None, 0), 0).unwrap();
    e.submit(spec("b", "q", 1, 4, None, 0), 0).unwrap();
    let ts = e.schedule(0);
    assert_eq!(ts.iter().filter(|t| t.to == GroupState::Admitted).count(), 1);
    assert!(e.schedule(1).is_empty());
    assert!(e.explain(&key("b"), 1).unwrap().reason.contains("blockAdmission"));
    e.pods_ready(&key("a"), 1, 2).unwrap();
    assert_eq!(to(&e.schedule(2), "b"), vec![GroupState::Admitted]);
}

/// A queue with a start window of `window` members, on 8 nodes of 4 cpu (room for all groups).
fn windowed(window: Option<u32>) -> Engine {
    let mut c = one_queue(QueuePolicy::BestEffortFifo);
    c.queues[0].readiness.max_starting_members = window;
    engine(graph(8, 4), c)
}

#[test]
fn a_start_window_holds_groups_until_the_started_ones_are_ready() {
    let mut e = windowed(Some(10));
    e.submit(spec("a", "q", 6, 1, None, 0), 0).unwrap();
    e.submit(spec("b", "q", 6, 1, None, 1), 1).unwrap();
    e.submit(spec("c", "q", 3, 1, None, 2), 2).unwrap();
    e.schedule(2);
    assert_eq!(state(&e, "a"), GroupState::Admitted);
    assert_eq!(state(&e, "b"), GroupState::Queued, "6 starting + 6 > 10");
    let held = e.explain(&key("b"), 2).unwrap();
    assert!(held.reason.contains("start window: 6 members of queue q are starting"), "{}", held.reason);
    assert_eq!(held.estimated_start, None, "it starts when members become ready, which no plan knows");
    // c would fit the window (6 + 3) but waits behind b: smaller groups must not keep b out.
    assert_eq!(state(&e, "c"), GroupState::Queued);
    let behind = e.explain(&key("c"), 2).unwrap();
    assert!(behind.reason.contains("for the start window of queue q"), "{}", behind.reason);
    assert_eq!(behind.estimated_start, None);
    // Members ready leave the window: 4 of a's 6 ready leave 2 starting, room for b (6) but not c.
    e.pods_ready(&key("a"), 4, 3).unwrap();
    e.schedule(3);
    assert_eq!(state(&e, "b"), GroupState::Admitted);
    assert_eq!(state(&e, "c"), GroupState::Queued, "2 + 6 starting + 3 > 10");
    e.pods_ready(&key("a"), 6, 4).unwrap();
    e.schedule(4);
    assert_eq!(state(&e, "c"), GroupState::Admitted, "6 + 3 <= 10");
    e.check_invariants().unwrap();
}

#[test]
fn groups_behind_a_start_window_name_the_group_it_holds() {
    let mut e = windowed(Some(20));
    e.submit(spec("a", "q", 6, 1, None, 0), 0).unwrap();
    // Needs 7 whole nodes while a takes parts of two: blocked by capacity, not by the window.
    e.submit(spec("wide", "q", 7, 4, None, 1), 1).unwrap();
    e.submit(spec("b", "q", 15, 1, None, 2), 2).unwrap();
    e.submit(spec("c", "q", 1, 1, None, 3), 3).unwrap();
    e.schedule(3);
    assert_eq!(state(&e, "wide"), GroupState::Queued);
    assert!(e.explain(&key("b"), 3).unwrap().reason.starts_with("start window: 6 members"));
    let behind = e.explain(&key("c"), 3).unwrap().reason;
    assert!(behind.contains("waiting behind ns/b for the start window of queue q"), "{behind}");
}

#[test]
fn a_group_larger_than_the_start_window_starts_alone() {
    let mut e = windowed(Some(4));
    e.submit(spec("big", "q", 12, 1, None, 0), 0).unwrap();
    e.submit(spec("small", "q", 1, 1, None, 1), 1).unwrap();
    e.schedule(1);
    assert_eq!(state(&e, "big"), GroupState::Admitted, "nothing else starting: never held forever");
    assert_eq!(state(&e, "small"), GroupState::Queued);
    e.pods_ready(&key("big"), 12, 2).unwrap();
    e.schedule(2);
    assert_eq!(state(&e, "small"), GroupState::Admitted);
}

#[test]
fn without_a_start_window_every_group_that_fits_starts_at_once() {
    let mut e = windowed(None);
    for (i, n) in ["a", "b", "c"].iter().enumerate() {
        e.submit(spec(n, "q", 6, 1, None, i as i64), i as i64).unwrap();
    }
    let ts = e.schedule(3);
    assert_eq!(ts.iter().filter(|t| t.to == GroupState::Admitted).count(), 3);
}

#[test]
fn an_elastic_group_takes_no_more_than_the_start_window_leaves() {
    let mut e = windowed(Some(10));
    e.submit(spec("a", "q", 4, 1, None, 0), 0).unwrap();
    e.submit(elastic("el", "q", 2, 12, 1, None, 1), 1).unwrap();
    e.schedule(1);
    assert_eq!(state(&e, "el"), GroupState::Admitted);
    assert_eq!(e.group(&key("el")).unwrap().member_count(), 6, "10 - 4 starting");
}

#[test]
fn suspend_resume_delete_in_every_state() {
    use GroupState::*;
    // Bring a group to each state, then try suspend, resume and delete there.
    let make = |target: GroupState| -> Engine {
        let mut c = readiness_cfg(Some(0));
        c.queues[0].policy = QueuePolicy::Easy;
        let mut e = engine(graph(2, 4), c);
        e.submit(spec("f", "q", 1, 4, Some(50), 0), 0).unwrap();
        e.schedule(0);
        e.pods_ready(&key("f"), 1, 0).unwrap();
        // Declared long enough that its readiness timeout (300) comes before its run-time limit.
        let (members, dur) = if target == Reserved { (2, Some(10)) } else { (1, Some(400)) };
        e.submit(spec("g", "q", members, 4, dur, 1), 1).unwrap();
        match target {
            Queued => {
                e.suspend(&key("f"), 1).unwrap();
                e.resume(&key("f"), 1).unwrap();
            }
            Reserved => {
                e.schedule(1);
            }
            Admitted => {
                e.schedule(1);
            }
            Running => {
                e.schedule(1);
                e.pods_ready(&key("g"), 1, 2).unwrap();
            }
            Evicted => {
                let mut c = readiness_cfg(None);
                c.queues[0].policy = QueuePolicy::Easy;
                let mut e2 = engine(graph(2, 4), c);
                e2.submit(spec("g", "q", 1, 4, None, 1), 1).unwrap();
                e2.schedule(1);
                e2.schedule(301);
                return e2;
            }
            Deactivated => {
                e.schedule(1);
                e.schedule(301);
            }
            Suspended => {
                e.suspend(&key("g"), 1).unwrap();
            }
            Succeeded => {
                e.schedule(1);
                e.finished(&key("g"), true, 5).unwrap();
            }
            Failed => {
                e.schedule(1);
                e.finished(&key("g"), false, 5).unwrap();
            }
            _ => unreachable!(),
        }
        e
    };
    for s in [Queued, Reserved, Admitted, Running, Evicted, Deactivated, Suspended, Succeeded, Failed] {
        let e = make(s);
        assert_eq!(state(&e, "g"), s, "setup for {s}");
        let k = key("g");
        let mut e1 = e.clone();
        let r = e1.suspend(&k, 400);
        assert_eq!(r.is_ok(), GroupState::transition(s, Suspended).is_ok(), "suspend in {s}: {r:?}");
        if r.is_ok() {
            assert_eq!(state(&e1, "g"), Suspended);
            assert!(e1.group(&k).unwrap().allocation.is_none());
            e1.check_invariants().unwrap();
        } else {
            assert!(matches!(r, Err(EngineError::IllegalTransition { .. })));
            assert_eq!(state(&e1, "g"), s, "unchanged after a refused input");
        }
        let mut e2 = e.clone();
        let r = e2.resume(&k, 400);
        assert_eq!(r.is_ok(), matches!(s, Suspended | Deactivated), "resume in {s}");
        let mut e3 = e.clone();
        let ts = e3.delete(&k, 400).unwrap();
        assert_eq!(ts.last().unwrap().to, Deleted);
        assert!(e3.group(&k).is_none());
        assert_eq!(e3.graph().stat().allocations, usize::from(state(&e, "f") == Running || state(&e, "f") == Admitted));
        assert!(e3.delete(&k, 400).is_err(), "deleting twice");
        e3.check_invariants().unwrap();
    }
}

#[test]
fn illegal_inputs_are_errors() {
    let mut e = engine(graph(2, 4), one_queue(QueuePolicy::Easy));
    e.submit(spec("g", "q", 1, 4, None, 0), 0).unwrap();
    assert!(matches!(e.finished(&key("g"), true, 1), Err(EngineError::IllegalTransition { .. })));
    assert!(matches!(e.pods_ready(&key("g"), 1, 1), Err(EngineError::IllegalTransition { .. })));
    assert!(matches!(e.resume(&key("g"), 1), Err(EngineError::IllegalTransition { .. })));
    assert!(matches!(e.submit(spec("g", "q", 1, 4, None, 0), 0), Err(EngineError::DuplicateGroup(_))));
    assert!(matches!(e.finished(&key("nope"), true, 1), Err(EngineError::UnknownGroup(_))));
    e.schedule(1);
    assert!(matches!(e.members_lost(&key("g"), &[7], 2), Err(EngineError::UnknownMember { member: 7, .. })));
    e.finished(&key("g"), true, 3).unwrap();
    assert!(e.finished(&key("g"), true, 4).is_err());
    assert!(e.suspend(&key("g"), 4).is_err());
}

#[test]
fn bad_submissions_name_the_field() {
    let mut c = one_queue(QueuePolicy::Easy);
    c.queues[0].namespace_selector.match_labels.insert("team".into(), "a".into());
    let mut e = engine(graph(2, 4), c);
    let err = |r: Result<_, EngineError>| match r {
        Err(EngineError::InvalidGroup { field, message, .. }) => (field, message),
        other => panic!("{other:?}"),
    };
    let (f, m) = err(e.submit(spec("g", "q", 1, 1, None, 0), 0));
    assert_eq!(f, "queue");
    assert!(m.contains("does not admit namespace \"ns\""), "{m}");
    e.set_namespace_labels("ns", [("team".to_string(), "a".to_string())].into());
    e.submit(spec("g", "q", 1, 1, None, 0), 0).unwrap();
    let (f, m) = err(e.submit(spec("h", "nope", 1, 1, None, 0), 0));
    assert_eq!(f, "queue");
    assert!(m.contains("unknown queue \"nope\""));
    let mut s = spec("h", "q", 1, 1, None, 0);
    s.priority_class = Some("gold".into());
    let (f, m) = err(e.submit(s, 0));
    assert_eq!(f, "priorityClass");
    assert!(m.contains("unknown priority class \"gold\""));
    let mut s = spec("h", "q", 3, 1, None, 0);
    s.request.max_members = 2;
    assert_eq!(err(e.submit(s, 0)).0, "request.members");
}

#[test]
fn unsatisfiable_is_marked_once_and_not_retried() {
    let mut e = engine(graph(8, 4), one_queue(QueuePolicy::StrictFifo));
    let mut s = spec("huge", "q", 40, 1, None, 0);
    s.request.topology = Some(muster_graph::jobspec::TopologyConstraint::required("rack"));
    s.request.requests = vec![("cpu".into(), 1000)];
    e.submit(s, 0).unwrap();
    e.submit(spec("ok", "q", 1, 1, None, 0), 0).unwrap();
    let ts = e.schedule(0);
    let u: Vec<_> = ts.iter().filter(|t| matches!(t.reason, Reason::Unsatisfiable { .. })).collect();
    assert_eq!(u.len(), 1);
    assert_eq!(u[0].reason.message(), "unsatisfiable: needs 40 members in one rack; the largest rack holds 16");
    assert_eq!(state(&e, "ok"), GroupState::Admitted, "an unsatisfiable head does not block a strict FIFO queue");
    // Not retried: later cycles do not call the matcher for it.
    e.submit(spec("ok2", "q", 1, 1, None, 5), 5).unwrap();
    let ts = e.schedule(5);
    assert!(ts.iter().all(|t| t.key.name.as_ref() != "huge"));
    assert_eq!(e.last_cycle().match_calls, 1, "only ok2 was matched");
    let x = e.explain(&key("huge"), 5).unwrap();
    assert!(x.reason.starts_with("unsatisfiable: needs 40 members in one rack"), "{}", x.reason);
    assert_eq!(x.estimated_start, None);
    // A new node may make it fit: checked again, once.
    let spec_n = muster_graph::NodeSpec {
        name: "extra".into(),
        topology: vec![("rack".into(), "n-rack-0".into())],
        pooled: vec![("cpu".into(), 32000), ("memory".into(), 1 << 30), ("pods".into(), 110)],
        devices: vec![],
        published: Vec::new(),
        labels: Default::default(),
        taints: vec![],
        unschedulable: false,
    };
    e.node_added(&spec_n, 6).unwrap();
    let ts = e.schedule(6);
    assert_eq!(to(&ts, "huge"), vec![GroupState::Admitted], "{ts:?}");
}

#[test]
fn explanations_give_position_estimate_and_reason() {
    let mut e = engine(graph(2, 4), one_queue(QueuePolicy::Conservative { depth: 1 }));
    e.submit(spec("run", "q", 2, 4, Some(100), 0), 0).unwrap();
    e.schedule(0);
    e.submit(spec("a", "q", 2, 4, Some(100), 1), 1).unwrap();
    e.submit(spec("b", "q", 2, 4, Some(100), 2), 2).unwrap();
    e.schedule(2);
    let view = e.queue_view(2);
    assert_eq!(view.len(), 2);
    assert_eq!((view[0].position, view[0].estimated_start), (1, Some(100)));
    assert!(view[0].reason.contains("reserved to start at t=100 s"), "{}", view[0].reason);
    assert!(view[0].reason.contains("needs 8 cpu in all, more than is free"), "{}", view[0].reason);
    // b has no reservation (depth 1) but still gets an estimate from the planner: after a.
    assert_eq!((view[1].position, view[1].estimated_start), (2, Some(200)));
    assert!(view[1].reason.contains("beyond the reservation depth 1"), "{}", view[1].reason);
    // The view changed nothing.
    assert_eq!(e.graph().stat().reservations, 1);
    let x = e.explain(&key("run"), 2).unwrap();
    assert!(x.reason.contains("0 of 2 members ready; must be all ready by 300"), "{}", x.reason);
}

#[test]
fn estimate_depth_bounds_the_view() {
    let mut c = one_queue(QueuePolicy::StrictFifo);
    c.estimate_depth = 2;
    let mut e = engine(graph(1, 4), c);
    for i in 0..5 {
        e.submit(spec(&format!("g{i}"), "q", 1, 4, Some(10), i), i).unwrap();
    }
    e.schedule(5);
    let view = e.queue_view(5);
    assert_eq!(view.len(), 4);
    assert_eq!(view[0].estimated_start, Some(15));
    assert_eq!(view[1].estimated_start, Some(25));
    assert_eq!(view[2].estimated_start, None);
    assert_eq!(view[2].reason, "position 3 in queue q; estimate not computed (beyond the first 2)");
}

#[test]
fn node_removal_shrinks_or_requeues() {
    let mut e = engine(graph(4, 4), one_queue(QueuePolicy::Easy));
    e.submit(elastic("el", "q", 2, 3, 4, None, 0), 0).unwrap();
    e.submit(spec("rigid", "q", 1, 4, None, 0), 0).unwrap();
    let ts = e.schedule(0);
    ready_all(&mut e, &ts, 0);
    let node_of = |e: &Engine, n: &str| e.group(&key(n)).unwrap().allocation.as_ref().unwrap().members[0].node.clone();
    assert_eq!(e.group(&key("el")).unwrap().member_count(), 3);
    let n = node_of(&e, "el");
    let ts = e.node_removed(&n, 5).unwrap();
    assert!(matches!(ts[0].reason, Reason::Shrunk { .. }), "{ts:?}");
    let n = node_of(&e, "rigid");
    let ts = e.node_removed(&n, 6).unwrap();
    assert_eq!(to(&ts, "rigid"), vec![GroupState::Evicted, GroupState::Queued]);
    e.check_invariants().unwrap();
}

#[test]
fn snapshot_round_trips_through_json() {
    let mut e = blocked_head(QueuePolicy::Easy);
    e.submit(spec("s", "q", 1, 1, Some(10), 3), 3).unwrap();
    e.schedule(3);
    let snap = e.snapshot();
    let json = serde_json::to_string(&snap).unwrap();
    let back: muster_queue::Snapshot = serde_json::from_str(&json).unwrap();
    assert_eq!(back, snap);
    let mut r = Engine::restore(graph(2, 4), back).unwrap();
    r.check_invariants().unwrap();
    assert_eq!(r.snapshot(), snap);
    let mut e2 = e.clone();
    e2.finished(&key("filler"), true, 50).unwrap();
    r.finished(&key("filler"), true, 50).unwrap();
    assert_eq!(e2.schedule(50), r.schedule(50));
    let _ = GroupKey::new("a", "b");
    let _ = CohortConfig::new("x", None);
}

#[test]
fn pods_of_other_schedulers_hold_capacity_until_they_go() {
    // 2 nodes of 4 cores; a foreign pod of 3 cores on node 0 leaves room for one 4-core member.
    let mut e = engine(graph(2, 4), EngineConfig::single_queue("q"));
    let node0 = e.graph().graph.node(muster_graph::NodeId(0)).name.clone();
    e.occupy("pod-a", ExternalHold::pod(&node0, &[("cpu".into(), 3000), ("unknown.example/thing".into(), 1)]), 1)
        .unwrap();
    e.submit(spec("two", "q", 2, 4, None, 1), 1).unwrap();
    let ts = e.schedule(1);
    assert!(to(&ts, "two").is_empty(), "must wait for the foreign pod: {ts:?}");
    // Idempotent for an unchanged pod. A resize, or another pod, is counted even beyond the free
    // room: the pods are there, whatever the graph thought was free.
    e.occupy("pod-a", ExternalHold::pod(&node0, &[("cpu".into(), 3000), ("unknown.example/thing".into(), 1)]), 2)
        .unwrap();
    e.occupy("pod-a", ExternalHold::pod(&node0, &[("cpu".into(), 5000)]), 2).unwrap();
    e.occupy("pod-b", ExternalHold::pod(&node0, &[("cpu".into(), 2000)]), 2).unwrap();
    let err = e.occupy("pod-c", ExternalHold::pod("no-such-node", &[("cpu".into(), 1)]), 2).unwrap_err();
    assert!(err.to_string().contains("no-such-node"), "{err}");
    assert_eq!(e.external().count(), 2);
    let snap = e.snapshot();
    assert_eq!(snap.external.len(), 2);
    e.vacate("pod-a", 3).unwrap();
    e.vacate("pod-a", 3).unwrap();
    assert!(to(&e.schedule(3), "two").is_empty(), "pod-b still holds 2 of node 0's 4 cores");
    e.vacate("pod-b", 3).unwrap();
    let ts = e.schedule(3);
    assert_eq!(to(&ts, "two"), [GroupState::Admitted]);
    e.check_invariants().unwrap();
}

#[test]
fn a_node_gaining_devices_is_rebuilt_once_its_group_ends_and_then_runs_device_groups() {
    let mut e = engine(graph(1, 4), one_queue(QueuePolicy::BestEffortFifo));
    e.submit(spec("cpu-job", "q", 1, 4, None, 0), 0).unwrap();
    let ts = e.schedule(0);
    ready_all(&mut e, &ts, 0);
    let mut gpu = spec("gpu-job", "q", 1, 1, None, 1);
    gpu.request.requests.push(("nvidia.com/gpu".into(), 1));
    e.submit(gpu, 1).unwrap();
    e.schedule(1);
    assert_ne!(e.group(&key("gpu-job")).unwrap().state, GroupState::Admitted);
    // The device plugin starts: the node now has 2 GPUs. Its group keeps running meanwhile.
    let with_gpus = muster_graph::NodeSpec {
        name: "n-0".into(),
        pooled: vec![("cpu".into(), 4000), ("memory".into(), 64 << 30), ("pods".into(), 110)],
        devices: vec![("nvidia.com/gpu".into(), 2)],
        ..Default::default()
    };
    e.node_changed(&with_gpus, 2).unwrap();
    e.schedule(2);
    assert_eq!(e.group(&key("cpu-job")).unwrap().state, GroupState::Running);
    assert_ne!(e.group(&key("gpu-job")).unwrap().state, GroupState::Admitted, "the node runs cpu-job");
    e.finished(&key("cpu-job"), true, 3).unwrap();
    e.schedule(3);
    let g = e.group(&key("gpu-job")).unwrap();
    assert_eq!(g.state, GroupState::Admitted, "{g:?}");
    assert_eq!(g.allocation.as_ref().unwrap().members[0].node, "n-0");
    e.check_invariants().unwrap();
}

/// The durable layer copies the engine before each batch and diffs the copy against the result;
/// both stay cheap only if a copy shares every group the batch leaves alone.
#[test]
fn a_copy_of_the_engine_shares_the_groups_a_batch_leaves_alone() {
    let mut e = blocked_head(QueuePolicy::BestEffortFifo);
    for i in 0..4 {
        e.submit(spec(&format!("w{i}"), "q", 1, 1, None, 5), 5).unwrap();
    }
    let ts = e.schedule(6);
    ready_all(&mut e, &ts, 6);
    e.schedule(7);
    let before = e.clone();
    let shared =
        |a: &Engine, b: &Engine, name: &str| std::ptr::eq(a.group(&key(name)).unwrap(), b.group(&key(name)).unwrap());
    // A cycle that changes nothing (the waiting groups' reasons are rewritten to the same text).
    e.schedule(8);
    let names: Vec<String> = e.groups().map(|g| g.spec.key.name.to_string()).collect();
    assert!(names.len() >= 6, "{names:?}");
    for n in &names {
        assert!(shared(&before, &e, n), "{n} was copied by a cycle that changed nothing");
    }
    // One group's readiness changes: that group alone is copied.
    e.pods_ready(&key("w0"), 0, 9).unwrap();
    assert!(!shared(&before, &e, "w0"));
    assert_eq!(before.group(&key("w0")).unwrap().ready_members, 1, "the copy keeps its own value");
    for n in names.iter().filter(|n| *n != "w0") {
        assert!(shared(&before, &e, n), "{n} was copied though only w0 changed");
    }
}

#[test]
fn a_running_group_resized_grows_to_its_new_max_and_shrinks_once_members_are_released() {
    // 4 members of 1 cpu run on 2 nodes of 4 cpu; its job asks for 6 at once, later 3.
    let mut e = engine(graph(2, 4), one_queue(QueuePolicy::Easy));
    e.submit(spec("w", "q", 4, 1, None, 0), 0).unwrap();
    let ts = e.schedule(0);
    ready_all(&mut e, &ts, 0);
    assert_eq!(state(&e, "w"), GroupState::Running);
    // Growing: it holds 4 of 4..=6 and grows where there is room, as an elastic group.
    let ts = e.update(elastic("w", "q", 4, 6, 1, None, 0), 1).unwrap();
    assert_eq!((to(&ts, "w"), &ts[0].reason), (vec![GroupState::Running], &Reason::Reshaped { min: 4, max: 6 }));
    assert_eq!(ts[0].allocation.as_ref().map(|a| a.members.len()), Some(4), "it keeps its members");
    let ts = e.schedule(2);
    let grown = ts.iter().find(|t| matches!(t.reason, Reason::Grown { .. })).expect("grows");
    assert_eq!(grown.allocation.as_ref().unwrap().members.len(), 6);
    e.check_invariants().unwrap();
    // Shrinking to 3: the min comes down first, members whose pods are gone are released, then
    // the max follows; never a size that excludes the members it holds.
    let err = e.update(spec("w", "q", 3, 1, None, 0), 3).unwrap_err();
    assert!(err.to_string().contains("holding 6 members cannot be sized 3..=3; release members first"), "{err}");
    e.update(elastic("w", "q", 3, 6, 1, None, 0), 3).unwrap();
    let ts = e.members_lost(&key("w"), &[3, 4, 5], 3).unwrap();
    assert!(matches!(ts[0].reason, Reason::Shrunk { .. }), "{ts:?}");
    e.update(spec("w", "q", 3, 1, None, 0), 3).unwrap();
    let g = e.group(&key("w")).unwrap();
    assert_eq!((g.state, g.member_count(), g.spec.request.max_members), (GroupState::Running, 3, 3));
    e.check_invariants().unwrap();
    // Only the counts: requests (or queue) are what it was placed for.
    let err = e.update(spec("w", "q", 3, 2, None, 0), 4).unwrap_err();
    assert!(err.to_string().contains("may change only how many members it has"), "{err}");
    assert!(e.update(spec("w", "other", 3, 1, None, 0), 4).is_err());
}

#[test]
fn a_waiting_group_reshaped_keeps_its_place_and_is_planned_for_its_new_size() {
    // big (2 nodes) is reserved at 50 behind filler; shrunk to 1 node, it fits now.
    let mut e = blocked_head(QueuePolicy::Conservative { depth: 4 });
    assert_eq!(state(&e, "big"), GroupState::Reserved);
    let seq = e.group(&key("big")).unwrap().seq;
    let ts = e.update(spec("big", "q", 1, 4, Some(100), 1), 3).unwrap();
    assert_eq!(to(&ts, "big"), [GroupState::Queued], "the reservation is dropped: {ts:?}");
    assert_eq!(ts[0].reason, Reason::Reshaped { min: 1, max: 1 });
    let g = e.group(&key("big")).unwrap();
    assert_eq!((g.seq, g.reserved_at, g.spec.request.min_members), (seq, None, 1));
    let ts = e.schedule(3);
    assert_eq!(to(&ts, "big"), [GroupState::Admitted]);
    e.check_invariants().unwrap();
    // Placed: only its member counts may change (it holds 1 member); and no group changes queue.
    let err = e.update(spec("big", "q", 2, 4, Some(100), 1), 4).unwrap_err();
    assert!(err.to_string().contains("holding 1 members cannot be sized 2..=2"), "{err}");
    e.suspend(&key("big"), 5).unwrap();
    assert!(e.update(spec("big", "other", 1, 4, None, 1), 6).is_err());
    // Suspended: reshaped in place, and queued with its new size once resumed.
    let ts = e.update(spec("big", "q", 2, 4, Some(100), 1), 6).unwrap();
    assert_eq!(to(&ts, "big"), [GroupState::Suspended]);
    assert_eq!(e.group(&key("big")).unwrap().spec.request.min_members, 2);
    assert!(matches!(e.update(spec("nope", "q", 1, 1, None, 1), 6), Err(EngineError::UnknownGroup(_))));
}

/// Two 4-cpu nodes; two groups of one 4-cpu member and no declared run time held a node for 100 s
/// and 200 s when `learn` is set. At 300 two more such groups take both nodes.
fn undeclared_busy(learn: bool) -> Engine {
    let mut e = engine(graph(2, 4), one_queue(QueuePolicy::Conservative { depth: 16 }));
    if learn {
        for (name, start, end) in [("w1", 0, 100), ("w2", 100, 300)] {
            e.submit(spec(name, "q", 1, 4, None, start), start).unwrap();
            let ts = e.schedule(start);
            ready_all(&mut e, &ts, start);
            e.finished(&key(name), true, end).unwrap();
        }
    }
    for name in ["run-a", "run-b"] {
        e.submit(spec(name, "q", 1, 4, None, 300), 300).unwrap();
    }
    let ts = e.schedule(300);
    ready_all(&mut e, &ts, 300);
    e.submit(spec("next", "q", 1, 4, None, 301), 301).unwrap();
    e.submit(spec("big", "q", 2, 4, None, 302), 302).unwrap();
    e.schedule(302);
    e
}

#[test]
fn a_group_without_a_run_time_is_planned_with_the_mean_of_its_kind() {
    let e = undeclared_busy(true);
    let next = e.explain(&key("next"), 302).unwrap();
    assert_eq!((state(&e, "next"), next.estimated_start), (GroupState::Reserved, Some(450)), "300 + (100 + 200) / 2");
    assert!(next.reason.contains("planned as 150 s, the mean of the last 2 like it in queue q"), "{}", next.reason);
    // Behind it, a group of another shape: reserved after `next`'s planned run, though nothing
    // was learned about its own.
    let big = e.explain(&key("big"), 302).unwrap();
    assert_eq!(big.estimated_start, Some(600));
    assert!(big.reason.contains("no run time declared and none learned yet"), "{}", big.reason);
    let running = e.explain(&key("run-a"), 302).unwrap();
    assert!(running.reason.ends_with("planned to end at 450 (learned run time)"), "{}", running.reason);
    // Snapshots keep what was learned.
    let restored = Engine::restore(common::graph(2, 4), e.snapshot()).unwrap();
    assert_eq!(restored.snapshot().learned_run_times, e.snapshot().learned_run_times);

    // Without the history, the running groups run "forever" for the planner: no reservation.
    let e = undeclared_busy(false);
    assert_eq!((state(&e, "next"), state(&e, "big")), (GroupState::Queued, GroupState::Queued));
}

/// Two 4-cpu nodes: `r1` runs until 100 and `r2` until 200 (declared); then `big` (both nodes)
/// and `small` (one node, 150 s) wait in that order.
fn forecast_case(policy: QueuePolicy) -> Engine {
    let mut e = engine(graph(2, 4), one_queue(policy));
    for (name, run) in [("r1", 100), ("r2", 200)] {
        e.submit(spec(name, "q", 1, 4, Some(run), 0), 0).unwrap();
    }
    let ts = e.schedule(0);
    ready_all(&mut e, &ts, 0);
    e.submit(spec("big", "q", 2, 4, Some(1000), 1), 1).unwrap();
    e.submit(spec("small", "q", 1, 4, Some(150), 2), 2).unwrap();
    e.schedule(2);
    e
}

#[test]
fn estimated_starts_follow_the_policy_not_the_queue_order() {
    let starts = |e: &Engine| {
        let view = e.queue_view(2);
        let at = |name: &str| view.iter().find(|x| &*x.key.name == name).and_then(|x| x.estimated_start);
        (at("big"), at("small"))
    };
    // Best effort: `small` takes r1's node at 100 and holds it until 250, so `big` starts then.
    assert_eq!(starts(&forecast_case(QueuePolicy::BestEffortFifo)), (Some(250), Some(100)));
    // Conservative: `big` is reserved from 200; `small` cannot end by then, so it goes after.
    assert_eq!(starts(&forecast_case(QueuePolicy::Conservative { depth: 16 })), (Some(200), Some(1200)));
}

#[test]
fn estimated_starts_expect_the_run_times_of_past_runs_while_reservations_keep_the_declared_ones() {
    let mut e = engine(graph(1, 4), one_queue(QueuePolicy::Conservative { depth: 16 }));
    // Two earlier runs of the same kind (declared 1000 s) ended after 100 and 300 s.
    for (name, start, end) in [("w1", 0, 100), ("w2", 100, 400)] {
        e.submit(spec(name, "q", 1, 4, Some(1000), start), start).unwrap();
        let ts = e.schedule(start);
        ready_all(&mut e, &ts, start);
        e.finished(&key(name), true, end).unwrap();
    }
    e.submit(spec("run", "q", 1, 4, Some(1000), 400), 400).unwrap();
    let ts = e.schedule(400);
    ready_all(&mut e, &ts, 400);
    e.submit(spec("next", "q", 1, 4, Some(1000), 401), 401).unwrap();
    e.schedule(401);
    // The promise: reserved from run's declared end. The estimate: run's expected end.
    assert_eq!(e.group(&key("next")).unwrap().reserved_at, Some(1400));
    assert_eq!(e.explain(&key("next"), 401).unwrap().estimated_start, Some(400 + 200));
    let plan = e.plan(401);
    let window = plan.groups.iter().find(|g| &*g.key.name == "next").and_then(|g| g.window.clone()).unwrap();
    assert_eq!(
        (window.kind, window.start),
        (muster_queue::WindowKind::Reserved, 1400),
        "the plan shows the reservation held"
    );
}
