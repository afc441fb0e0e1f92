//! Calendar reservations: room set aside for some queues over time windows. Backfill ends
//! before a window, only its users run in it, windows repeat, and a window's opening evicts or
//! waits as configured.

mod common;

use std::collections::BTreeMap;

use common::*;
use muster_graph::{Policy, ResourceGraph};
use muster_queue::{
    AtStart, Engine, EngineConfig, GroupState, QueueConfig, QueuePolicy, Reason, ReservationConfig, ReservedAmount,
};
use proptest::prelude::*;

/// Two nodes labelled `pool: reserved` and one `pool: shared`, 4 cpu each.
fn cluster() -> ResourceGraph {
    let text = "name: t\nnodeClasses:\n  - name: r\n    count: 2\n    capacity: {cpu: 4, memory: 64Gi, pods: 110}\n    labels: {pool: reserved}\n  - name: s\n    count: 1\n    capacity: {cpu: 4, memory: 64Gi, pods: 110}\n    labels: {pool: shared}\n";
    ResourceGraph::new(muster_graph::cluster::load("t.yaml", text).unwrap(), Policy::First)
}

/// The two reserved nodes for queue `a` over [100, 200); queues `a` and `b`.
fn reservation() -> ReservationConfig {
    ReservationConfig {
        name: "training".into(),
        queues: vec!["a".into()],
        namespaces: Vec::new(),
        node_selector: [("pool".to_string(), "reserved".to_string())].into(),
        amount: None,
        start: 100,
        end: 200,
        every_s: 0,
        at_start: AtStart::Wait,
    }
}

/// The reservation, of an amount rather than nodes: one member of 4 cpu, a node's worth.
fn one_node_of_cpu() -> ReservationConfig {
    let amount = ReservedAmount { members: 1, resources: [("cpu".to_string(), "4".into())].into(), topology: None };
    ReservationConfig { node_selector: Default::default(), amount: Some(amount), ..reservation() }
}

/// Queues `a` and `b`, conservative backfill (every pending group gets its planned start).
fn config(r: ReservationConfig) -> EngineConfig {
    let mut c = EngineConfig::single_queue("a");
    c.queues.push(QueueConfig::new("b"));
    for q in &mut c.queues {
        q.policy = QueuePolicy::Conservative { depth: 16 };
    }
    c.reservations = vec![r];
    c
}

fn with(r: ReservationConfig) -> Engine {
    engine(cluster(), config(r))
}

/// The nodes a placed group's members are on.
fn nodes(e: &Engine, name: &str) -> Vec<String> {
    let g = e.group(&key(name)).unwrap();
    g.allocation.as_ref().map(|a| a.members.iter().map(|m| m.node.clone()).collect()).unwrap_or_default()
}

/// The cpus the placed groups of `queue` hold.
fn cpu_held(e: &Engine, queue: &str) -> u64 {
    let placed =
        e.groups().filter(|g| g.spec.queue == queue && matches!(g.state, GroupState::Admitted | GroupState::Running));
    let cpu = |g: &muster_queue::Group| g.spec.request.requests.iter().find(|(r, _)| r == "cpu").map_or(0, |(_, q)| *q);
    placed.map(|g| cpu(g) * g.allocation.as_ref().map_or(0, |a| a.members.len() as u64) / 1000).sum()
}

fn on_reserved(e: &Engine, name: &str) -> bool {
    nodes(e, name).iter().any(|n| n.starts_with("r"))
}

#[test]
fn before_the_window_only_work_that_ends_in_time_uses_its_nodes() {
    let mut e = with(reservation());
    e.submit(spec("long1", "b", 1, 4, Some(150), 0), 0).unwrap();
    e.submit(spec("long2", "b", 1, 4, Some(150), 0), 0).unwrap();
    e.submit(spec("forever", "b", 1, 4, None, 0), 0).unwrap();
    e.submit(spec("short", "b", 1, 4, Some(100), 0), 0).unwrap();
    e.schedule(0);
    assert_eq!(nodes(&e, "long1"), ["s-0"], "a group running into the window goes where nothing is set aside");
    assert_eq!(state(&e, "long2"), GroupState::Reserved, "no room outside the reservation until long1 ends");
    assert_ne!(state(&e, "forever"), GroupState::Admitted, "a group without a duration never ends in time");
    assert_eq!(state(&e, "short"), GroupState::Admitted);
    assert!(on_reserved(&e, "short"), "ending at 100, it backfills the reserved nodes");
    e.check_invariants().unwrap();
}

#[test]
fn in_the_window_only_its_users_run_on_its_nodes_and_others_are_told_why() {
    let mut e = with(reservation());
    e.submit(spec("theirs", "b", 1, 4, Some(10), 110), 110).unwrap();
    e.submit(spec("ours", "a", 2, 4, Some(50), 110), 110).unwrap();
    e.submit(spec("other", "b", 1, 4, Some(10), 110), 110).unwrap();
    e.schedule(110);
    assert_eq!(nodes(&e, "theirs"), ["s-0"]);
    assert_eq!(state(&e, "ours"), GroupState::Admitted);
    assert!(nodes(&e, "ours").iter().all(|n| n.starts_with("r")), "{:?}", nodes(&e, "ours"));
    e.submit(spec("late", "a", 1, 4, Some(10), 111), 111).unwrap();
    e.schedule(111);
    assert_eq!(state(&e, "other"), GroupState::Reserved, "the set-aside room is not for queue b");
    assert!(e.group(&key("other")).unwrap().reserved_at.unwrap() >= 120, "after theirs ends on the shared node");
    e.check_invariants().unwrap();
}

#[test]
fn a_group_that_fits_only_in_the_set_aside_room_names_the_reservation() {
    let mut e = with(reservation());
    e.submit(spec("fill", "b", 1, 4, None, 100), 100).unwrap();
    e.submit(spec("waiting", "b", 1, 4, Some(10), 100), 100).unwrap();
    e.schedule(100);
    assert_eq!(nodes(&e, "fill"), ["s-0"]);
    let why = e.explain(&key("waiting"), 100).unwrap().reason;
    assert!(why.contains("set aside by calendar reservation training"), "{why}");
}

#[test]
fn a_tenant_cannot_name_itself_into_a_reservation() {
    let mut e = with(reservation());
    e.submit(spec("fill", "b", 1, 4, None, 100), 100).unwrap();
    let mut forged = spec("forged", "b", 1, 4, Some(10), 100);
    forged.request.reservations = vec!["training".into()];
    e.submit(forged, 100).unwrap();
    e.schedule(100);
    assert!(e.group(&key("forged")).unwrap().spec.request.reservations.is_empty());
    assert_ne!(state(&e, "forged"), GroupState::Admitted);
}

#[test]
fn the_plan_puts_others_after_the_window() {
    let mut e = with(reservation());
    e.submit(spec("all", "b", 3, 4, Some(100), 50), 50).unwrap();
    e.submit(spec("quick", "b", 3, 4, Some(50), 50), 50).unwrap();
    e.schedule(50);
    assert_eq!(e.group(&key("all")).unwrap().reserved_at, Some(200), "its 3 nodes are free for b only from 200");
    assert_eq!(state(&e, "quick"), GroupState::Admitted, "it ends at 100, as the window opens");
}

#[test]
fn outrun_work_waits_or_is_evicted_when_the_window_opens() {
    for at_start in [AtStart::Wait, AtStart::Evict] {
        let mut e = with(ReservationConfig { at_start, ..reservation() });
        e.submit(spec("shared", "b", 1, 4, None, 0), 0).unwrap();
        e.submit(spec("overrun", "b", 2, 4, Some(90), 0), 0).unwrap();
        let ts = e.schedule(0);
        ready_all(&mut e, &ts, 0);
        assert!(on_reserved(&e, "overrun"));
        e.submit(spec("ours", "a", 2, 4, Some(50), 95), 95).unwrap();
        assert_eq!(e.next_timer(), Some(100), "the window's opening wakes the engine");
        let ts = e.schedule(100);
        match at_start {
            AtStart::Wait => {
                assert_eq!(state(&e, "overrun"), GroupState::Running);
                assert_ne!(state(&e, "ours"), GroupState::Admitted);
            }
            AtStart::Evict => {
                let evicted = ts.iter().find(|t| &*t.key.name == "overrun" && t.to == GroupState::Evicted).unwrap();
                assert_eq!(evicted.reason, Reason::ReservationStarted { reservation: "training".into() });
                assert_eq!(state(&e, "shared"), GroupState::Running, "only work on the set-aside room goes");
                e.schedule(101);
                assert_eq!(state(&e, "ours"), GroupState::Admitted);
            }
        }
        e.check_invariants().unwrap();
    }
}

#[test]
fn windows_repeat_and_work_fits_between_them() {
    let mut e = with(ReservationConfig { every_s: 300, ..reservation() });
    e.submit(spec("shared", "b", 1, 4, None, 210), 210).unwrap();
    e.submit(spec("between", "b", 1, 4, Some(150), 210), 210).unwrap();
    e.submit(spec("across", "b", 1, 4, Some(250), 210), 210).unwrap();
    e.schedule(210);
    assert!(on_reserved(&e, "between"), "ends at 360, before the next window at 400");
    assert_ne!(state(&e, "across"), GroupState::Admitted, "would run into the window at 400");
    assert_eq!(e.group(&key("across")).unwrap().reserved_at, Some(500), "after the next window");
}

#[test]
fn an_amount_is_set_aside_where_it_fits_and_the_rest_stays_open() {
    let r = one_node_of_cpu();
    let mut e = with(r);
    e.submit(spec("two", "b", 2, 4, Some(500), 0), 0).unwrap();
    e.submit(spec("third", "b", 1, 4, Some(500), 0), 0).unwrap();
    e.schedule(0);
    assert_eq!(state(&e, "two"), GroupState::Admitted, "two of the three nodes stay open to all");
    assert_ne!(state(&e, "third"), GroupState::Admitted, "one node's worth is set aside from 100");
}

#[test]
fn bad_reservations_are_refused_with_the_field() {
    let mut c = config(ReservationConfig { queues: vec!["nope".into()], ..reservation() });
    let e = Engine::new(cluster(), c.clone()).unwrap_err().to_string();
    assert!(e.contains("reservations[0].queues"), "{e}");
    c.reservations = vec![reservation(), reservation()];
    let e = Engine::new(cluster(), c).unwrap_err().to_string();
    assert!(e.contains("reservations[1].name"), "{e}");
}

#[test]
fn a_selector_that_matches_no_node_is_reported_and_holds_nothing() {
    let r = ReservationConfig { node_selector: [("pool".to_string(), "none".to_string())].into(), ..reservation() };
    let mut e = with(r);
    e.submit(spec("all", "b", 3, 4, Some(500), 0), 0).unwrap();
    e.schedule(0);
    assert_eq!(state(&e, "all"), GroupState::Admitted);
    let [w] = &e.reservation_windows()[..] else { panic!("one window") };
    assert!(w.nodes.is_empty());
    assert!(w.error.as_deref().unwrap().contains("nodeSelector selects no node"), "{w:?}");
    // Inside its window, it is not a reason for a cycle of its own on every call.
    e.schedule(150);
    e.schedule(151);
    assert!(!e.last_cycle().ran, "nothing changed since the cycle at 150");
}

#[test]
fn the_windows_held_name_their_nodes() {
    let mut e = with(ReservationConfig { every_s: 300, ..reservation() });
    e.schedule(150);
    let held: Vec<(i64, i64, Vec<String>)> =
        e.reservation_windows().into_iter().map(|w| (w.start, w.end, w.nodes)).collect();
    let nodes = vec!["r-0".to_string(), "r-1".to_string()];
    assert_eq!(held, [(100, 200, nodes.clone()), (400, 500, nodes)]);
}

/// A run where every group ends exactly when expected; returns every transition with its time.
struct Honest {
    e: Engine,
    log: Vec<(i64, muster_queue::Transition)>,
}

impl Honest {
    fn new(c: EngineConfig) -> Self {
        Self { e: engine(cluster(), c), log: Vec::new() }
    }

    /// Submits the jobs due at `now`, ends those due, and runs a cycle.
    fn step(&mut self, now: i64, jobs: &[(bool, u32, u64, u64, i64)]) -> Vec<muster_queue::Transition> {
        for (i, &(ours, members, cpu, duration, at)) in jobs.iter().enumerate() {
            if at == now {
                let q = if ours { "a" } else { "b" };
                self.e.submit(spec(&format!("g{i}"), q, members, cpu, Some(duration), at), now).unwrap();
            }
        }
        let ending: Vec<_> = (self.e.groups())
            .filter(|g| g.state == GroupState::Running && g.allocation.as_ref().is_some_and(|a| a.end <= now))
            .map(|g| g.spec.key.clone())
            .collect();
        for k in ending {
            self.e.finished(&k, true, now).unwrap();
        }
        let ts = self.e.schedule(now);
        ready_all(&mut self.e, &ts, now);
        self.log.extend(ts.iter().map(|t| (now, t.clone())));
        ts
    }
}

fn jobs() -> impl Strategy<Value = Vec<(bool, u32, u64, u64, i64)>> {
    prop::collection::vec((any::<bool>(), 1u32..3, 1u64..5, 5u64..80, 0i64..150), 1..25)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// A window is never entered by others' work: at every time inside a window, no group of a
    /// queue that may not use the reservation holds room on its nodes.
    #[test]
    fn a_window_is_never_entered_by_others_work(
        jobs in jobs(),
        start in 20i64..120,
        length in 10i64..80,
        repeat in any::<bool>(),
        evict in any::<bool>(),
    ) {
        let r = ReservationConfig {
            start,
            end: start + length,
            every_s: if repeat { length + 60 } else { 0 },
            at_start: if evict { AtStart::Evict } else { AtStart::Wait },
            ..reservation()
        };
        let windows = r.windows(0);
        let mut run = Honest::new(config(r.clone()));
        for now in 0..400 {
            run.step(now, &jobs);
            let open = r.windows(now).iter().any(|&(s, e)| s <= now && now < e);
            for g in run.e.groups().filter(|g| g.spec.queue == "b" && open) {
                prop_assert!(!on_reserved(&run.e, &g.spec.key.name), "{} inside a window at {now}: {windows:?}", g.spec.key);
            }
            run.e.check_invariants().map_err(TestCaseError::fail)?;
        }
    }

    /// An amount set aside is never entered by others' work, however often the engine is
    /// recovered from its snapshot (a controller restart) or given its configuration again (a
    /// Queue or Reservation edited) before or inside a window: while one is open, queue b holds
    /// at most the cluster less the node's worth set aside for queue a. And neither moves the
    /// window (its users' work stays inside it).
    #[test]
    fn an_amount_is_never_entered_by_others_work_across_restarts(
        jobs in jobs(),
        start in 20i64..120,
        length in 10i64..80,
        restarts in prop::collection::btree_map(0i64..250, any::<bool>(), 0..5),
        evict in any::<bool>(),
    ) {
        let r = ReservationConfig {
            start,
            end: start + length,
            at_start: if evict { AtStart::Evict } else { AtStart::Wait },
            ..one_node_of_cpu()
        };
        let mut run = Honest::new(config(r.clone()));
        let nodes_held = |e: &Engine| {
            e.reservation_windows().into_iter().map(|w| ((w.reservation, w.start), w.nodes)).collect::<BTreeMap<_, _>>()
        };
        for now in 0..250 {
            let before = restarts.get(&now).map(|&reconfigure| {
                let held = nodes_held(&run.e);
                if reconfigure {
                    run.e.reconfigure(config(r.clone())).unwrap();
                } else {
                    run.e = Engine::restore(cluster(), run.e.snapshot()).unwrap();
                }
                held
            });
            run.step(now, &jobs);
            for (window, nodes) in nodes_held(&run.e) {
                let was = before.as_ref().and_then(|b| b.get(&window));
                prop_assert!(was.is_none_or(|was| *was == nodes), "a restart or reconfiguration at {now} moved {window:?} from {was:?} to {nodes:?}");
            }
            if start <= now && now < start + length {
                let held = run.e.reservation_windows();
                prop_assert!(held.iter().all(|w| w.error.is_none()), "at {now}: {held:?}");
                prop_assert!(cpu_held(&run.e, "b") <= 8, "queue b holds {} cpu at {now}: {held:?}", cpu_held(&run.e, "b"));
            }
            run.e.check_invariants().map_err(TestCaseError::fail)?;
        }
    }

    /// No group waits for a reservation it would have ended before: with the same jobs, the
    /// engine decides exactly as it does without the reservation until, without it, some work
    /// would run (or be planned to run) into the window.
    #[test]
    fn work_that_ends_before_the_window_is_not_held_back(jobs in jobs(), start in 20i64..200, length in 10i64..80) {
        let r = ReservationConfig { start, end: start + length, ..reservation() };
        let mut with = Honest::new(config(r));
        let mut without = Honest::new(config(reservation()));
        without.e = engine(cluster(), EngineConfig { reservations: Vec::new(), ..config(reservation()) });
        for now in 0..400 {
            let a = with.step(now, &jobs);
            let b = without.step(now, &jobs);
            let into_window = b.iter().any(|t| {
                let g = without.e.group(&t.key).unwrap();
                let duration = g.spec.request.duration.unwrap_or(0) as i64;
                let from = match t.to {
                    GroupState::Admitted => now,
                    GroupState::Reserved => g.reserved_at.unwrap_or(now),
                    _ => return false,
                };
                from < start + length && start < from + duration
            });
            if into_window {
                break;
            }
            prop_assert_eq!(a, b, "at {}", now);
        }
    }
}

#[test]
fn an_open_windows_amount_made_again_counts_its_users_work_inside_it() {
    let r = one_node_of_cpu();
    let mut e = with(r);
    e.submit(spec("ours", "a", 1, 4, Some(50), 110), 110).unwrap();
    e.submit(spec("theirs", "b", 2, 4, Some(500), 110), 110).unwrap();
    let ts = e.schedule(110);
    ready_all(&mut e, &ts, 110);
    assert_eq!(state(&e, "ours"), GroupState::Running);
    assert_eq!(state(&e, "theirs"), GroupState::Running);
    let held = |e: &Engine| e.reservation_windows().into_iter().map(|w| (w.nodes, w.error)).collect::<Vec<_>>();
    let before = held(&e);
    assert_eq!(before, [(nodes(&e, "ours"), None)], "its user runs in the room set aside");
    // The controller recovers the engine from its store (a restart, a Queue changed): the window
    // is made again while its user runs in it.
    let mut e = Engine::restore(cluster(), e.snapshot()).unwrap();
    e.schedule(111);
    assert_eq!(held(&e), before, "the same room, its user's work inside it");
    // Once its user ends, the room stays set aside for the rest of the window.
    e.finished(&key("ours"), true, 160).unwrap();
    e.submit(spec("later", "b", 1, 4, Some(10), 160), 160).unwrap();
    e.schedule(160);
    assert_ne!(state(&e, "later"), GroupState::Admitted, "the window's room is not queue b's before 200");
    e.check_invariants().unwrap();
}

/// Queue a's long run (to 5000) placed at 0 inside the window [1000, 1100) of a node's worth.
fn user_running_inside_the_window() -> Engine {
    let mut c = config(one_node_of_cpu());
    c.reservations[0].start = 1000;
    c.reservations[0].end = 1100;
    let mut e = engine(cluster(), c);
    e.submit(spec("long", "a", 1, 4, Some(5000), 0), 0).unwrap();
    e.schedule(0);
    assert_eq!(nodes(&e, "long"), ["r-0"]);
    assert_eq!(window_nodes(&e), ["r-0"], "its user runs in the room set aside");
    e
}

fn window_nodes(e: &Engine) -> Vec<String> {
    let [w] = &e.reservation_windows()[..] else { panic!("one window") };
    w.nodes.clone()
}

#[test]
fn a_window_made_again_stays_on_its_nodes_with_its_users_work_inside() {
    let e = user_running_inside_the_window();
    // Made again after a restart (the second before any cycle made the window again), then
    // when a node is added.
    let e = Engine::restore(cluster(), e.snapshot()).unwrap();
    let mut e = Engine::restore(cluster(), e.snapshot()).unwrap();
    e.schedule(1);
    assert_eq!(window_nodes(&e), ["r-0"], "after a restart");
    let extra = muster_graph::NodeSpec {
        name: "extra".into(),
        topology: Vec::new(),
        pooled: vec![("cpu".into(), 1000), ("memory".into(), 1 << 30), ("pods".into(), 110)],
        devices: vec![],
        published: Vec::new(),
        labels: Default::default(),
        taints: vec![],
        unschedulable: false,
    };
    e.node_added(&extra, 2).unwrap();
    e.schedule(2);
    assert_eq!(window_nodes(&e), ["r-0"], "after a node was added");
    // So the other two nodes stay open to others through the window.
    e.submit(spec("theirs", "b", 2, 4, Some(2000), 3), 3).unwrap();
    e.schedule(3);
    assert_eq!(state(&e, "theirs"), GroupState::Admitted);
    e.check_invariants().unwrap();
}

#[test]
fn a_window_whose_nodes_are_not_known_goes_beside_its_users_work_where_there_is_room() {
    let e = user_running_inside_the_window();
    // A snapshot that kept no window's nodes (written before they were kept).
    let mut snap = e.snapshot();
    snap.windows_held.clear();
    let mut e = Engine::restore(cluster(), snap).unwrap();
    e.schedule(1);
    assert_eq!(window_nodes(&e), ["r-1"], "a node of its own while one is free, its user's run aside");
}
