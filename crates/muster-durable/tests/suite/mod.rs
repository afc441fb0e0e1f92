//! The suite, written once over a [`Backend`] and run against SQLite and PostgreSQL.

use muster_durable::{ClusterReport, DurableEngine, DurableError, Status};
use muster_graph::jobspec::TopologyConstraint;
use muster_graph::{Policy, ResourceGraph};
use muster_queue::config::DEFAULT_FAIR_SHARE_HALF_LIFE_S;
use muster_queue::{AtStart, EngineConfig, GroupState, MemberPlacement, Reason, ReservationConfig, ReservedAmount};
use muster_store::Store;

use crate::support::*;

fn state<S: Store>(d: &DurableEngine<S>, name: &str) -> Option<GroupState> {
    d.engine().group(&key(name)).map(|g| g.state)
}

/// An Admitted transition comes back only once the group row and its allocation are stored;
/// every transition is in the history; finishing records resource-seconds and drops the row.
pub fn admission_written_before_returned<B: Backend>(b: &B) {
    let (mut d, _) = start(b.open(), "a", &ClusterReport::default(), 0);
    d.submit(spec("g", "a", 2, 2, 2, Some(100), 0), 0).unwrap();
    let ts = d.schedule(1).unwrap();
    let adm = ts.iter().find(|t| t.to == GroupState::Admitted).expect("admitted");
    // A second connection sees the admission and its placement the moment it is returned.
    let mut other = b.open();
    let stored = check_store(&mut other);
    assert_eq!(stored.get("ns/g"), adm.allocation.as_ref());
    let snap = other.load().unwrap();
    assert_eq!(snap.groups[0].group.state, "Admitted");
    d.pods_ready(&key("g"), 2, 5).unwrap();
    d.finished(&key("g"), true, 11).unwrap();
    assert!(check_store(&mut other).is_empty(), "allocation row dropped on finish");
    let states: Vec<_> = other.history("ns/g").unwrap().into_iter().map(|h| (h.from_state, h.to_state)).collect();
    let s = |x: &str| Some(x.to_string());
    assert_eq!(
        states,
        [
            (None, "Queued".into()),
            (s("Queued"), "Admitted".into()),
            (s("Admitted"), "Running".into()),
            (s("Running"), "Succeeded".into())
        ]
    );
    // 2 members x 2000 millicores x 10 s (admitted at 1, finished at 11).
    let usage = other.usage_since(Some("a"), 0).unwrap();
    let cpu = usage.iter().find(|u| u.resource == "cpu").unwrap();
    assert_eq!(cpu.amount, 40_000.0);
}

/// Usage older than a day is folded, as fair share reads it, into one record per (queue,
/// resource) by the first batch an instance writes and at most once an hour after that.
/// Runs group `name` of 1 cpu in queue a from `at` + 1 to `at` + 11.
fn run_for_ten_seconds<S: Store>(d: &mut DurableEngine<S>, name: &str, at: i64) {
    d.submit(spec(name, "a", 1, 1, 1, Some(10), at), at).unwrap();
    d.schedule(at + 1).unwrap();
    d.pods_ready(&key(name), 1, at + 2).unwrap();
    d.finished(&key(name), true, at + 11).unwrap();
}

/// The cpu-seconds recorded since `since`, all queues.
fn cpu_since<S: Store>(s: &mut S, since: i64) -> Option<f64> {
    s.usage_since(None, since).unwrap().into_iter().find(|u| u.resource == "cpu").map(|u| u.amount)
}

/// `amount` decayed from `from` to `to` with half-life `half_life`.
fn decayed(amount: f64, from: i64, to: i64, half_life: i64) -> f64 {
    amount * 0.5f64.powf((to - from) as f64 / half_life as f64)
}

pub fn older_usage_is_folded_as_fair_share_reads_it<B: Backend>(b: &B) {
    let half_life = config().fair_share_half_life_s;
    let run = run_for_ten_seconds::<B::S>;
    let mut other = b.open();
    let cpu = cpu_since::<B::S>;
    let decay = |amount: f64, from: i64, to: i64| decayed(amount, from, to, half_life);
    let (mut d, _) = start(b.open(), "a", &ClusterReport::default(), 0);
    run(&mut d, "first", 0);
    run(&mut d, "second", 100);
    assert_eq!(cpu(&mut other, 0), Some(20_000.0), "two runs of 1 cpu for 10 s, as recorded");
    // Two days on, another instance leads: its first batch folds what ended more than a day ago.
    let later = 2 * 86_400;
    let (mut d, _) = start(b.open(), "b", &ClusterReport::default(), later);
    let read = other.decayed_usage(later, half_life).unwrap();
    d.submit(spec("third", "a", 1, 1, 1, Some(10), later), later).unwrap();
    let folded = decay(10_000.0, 11, 86_400) + decay(10_000.0, 111, 86_400);
    let got = cpu(&mut other, 0).unwrap();
    assert!((got - folded).abs() < 1e-9 * folded, "{got} where the two runs decayed to a day are {folded}");
    let now_read = other.decayed_usage(later, half_life).unwrap();
    assert!((now_read[0].amount - read[0].amount).abs() < 1e-9 * read[0].amount, "fair share reads the same");
    // The third run, less than a day old at every fold, stays as recorded.
    d.schedule(later + 1).unwrap();
    d.pods_ready(&key("third"), 1, later + 2).unwrap();
    d.finished(&key("third"), true, later + 11).unwrap();
    assert_eq!(cpu(&mut other, later), Some(10_000.0), "the third run as recorded");
    // A day and an hour on, the third run is folded too, decayed to the day before.
    let (mut d, _) = start(b.open(), "c", &ClusterReport::default(), later + 90_000);
    d.submit(spec("fourth", "a", 1, 1, 1, Some(10), later + 90_000), later + 90_000).unwrap();
    let got = cpu(&mut other, later).unwrap();
    let want = decay(10_000.0, later + 11, later + 3_600) + decay(folded, 86_400, later + 3_600);
    assert!((got - want).abs() < 1e-9 * want, "{got} where {want} was expected");
}

/// Without fair share nothing reads usage, and it is folded all the same, as the default
/// half-life reads it: the table does not grow with every group that ends.
pub fn usage_is_folded_without_fair_share<B: Backend>(b: &B) {
    let off = EngineConfig { fair_share_half_life_s: 0, ..config() };
    let (mut d, _) = start_with(off.clone(), b.open(), "a", &ClusterReport::default(), 0);
    run_for_ten_seconds(&mut d, "first", 0);
    assert_eq!(cpu_since(&mut b.open(), 0), Some(10_000.0), "as recorded");
    let later = 2 * 86_400;
    let (mut d, _) = start_with(off, b.open(), "b", &ClusterReport::default(), later);
    d.submit(spec("second", "a", 1, 1, 1, Some(10), later), later).unwrap();
    let want = decayed(10_000.0, 11, 86_400, DEFAULT_FAIR_SHARE_HALF_LIFE_S);
    let got = cpu_since(&mut b.open(), 0).unwrap();
    assert!((got - want).abs() < 1e-9 * want, "{got} where the run decayed a day at the default half-life is {want}");
}

/// A batch the store refuses leaves the engine exactly as before the input; the input waits and
/// is retried with doubling backoff on tick, and then nothing is lost.
pub fn failed_apply_rolls_back_and_retries<B: Backend>(b: &B) {
    let (store, plan) = Flaky::new(b.open());
    let (mut d, _) = start(store, "a", &ClusterReport::default(), 0);
    d.submit(spec("g", "a", 1, 1, 1, None, 0), 0).unwrap();
    let before = d.engine().snapshot();
    plan.borrow_mut().fail_after = Some(0);
    let err = d.schedule(1).unwrap_err();
    assert!(matches!(err, DurableError::Unavailable { kept: false, .. }), "{err}");
    assert_eq!(d.engine().snapshot(), before, "rolled back");
    assert_eq!(state(&d, "g"), Some(GroupState::Queued));
    assert!(!d.status().is_admitting());
    assert!(d.status().to_string().contains("store unavailable since 1: "), "{}", d.status());
    // While unavailable, inputs wait in order; a cycle is not kept.
    plan.borrow_mut().fail_after = Some(0);
    assert!(matches!(d.submit(spec("h", "a", 1, 1, 1, None, 2), 2), Err(DurableError::Unavailable { kept: true, .. })));
    assert!(matches!(d.schedule(2), Err(DurableError::Unavailable { kept: false, .. })));
    assert_eq!(d.waiting().count(), 1);
    assert!(d.tick(1).transitions.is_empty(), "backoff not over");
    // The retry at 2 fails (injected): the next attempt is 2 s later, then succeeds.
    let t = d.tick(2);
    assert!(t.transitions.is_empty());
    let Status::StoreUnavailable { attempts, next_attempt, waiting_inputs, since, .. } = d.status().clone() else {
        panic!("{}", d.status())
    };
    assert_eq!((attempts, next_attempt, waiting_inputs, since), (2, 4, 1, 1));
    let t = d.tick(4);
    assert_eq!(t.transitions.len(), 1);
    assert_eq!(t.transitions[0].key, key("h"));
    assert!(d.status().is_admitting(), "{}", d.status());
    let ts = d.schedule(5).unwrap();
    assert_eq!(ts.iter().filter(|t| t.to == GroupState::Admitted).count(), 2);
    let mut other = b.open();
    assert_eq!(check_store(&mut other).len(), 2);
    assert_eq!(other.load().unwrap().groups.len(), 2);
}

/// A sequence of inputs, then a recovery on a new connection: the same groups (state, order,
/// allocations, requeue state), fair share from the stored usage, and two recoveries agree.
pub fn recovery_replays_the_store<B: Backend>(b: &B) {
    let (mut d, _) = start(b.open(), "a", &ClusterReport::default(), 0);
    let mut cluster = Cluster::default();
    for (i, (q, members, cpu)) in
        [("a", 2, 4), ("a", 4, 2), ("b", 1, 3), ("b", 2, 1), ("a", 1, 4)].into_iter().enumerate()
    {
        let ts = d.submit(spec(&format!("g{i}"), q, members, members, cpu, Some(50), i as i64), i as i64).unwrap();
        cluster.act(&ts);
    }
    cluster.act(&d.schedule(5).unwrap());
    cluster.act(&d.pods_ready(&key("g0"), 2, 6).unwrap());
    cluster.act(&d.finished(&key("g0"), true, 20).unwrap());
    cluster.act(&d.schedule(21).unwrap());
    // g1 never gets ready: readiness timeout -> Evicted with a requeue time.
    cluster.act(&d.schedule(60).unwrap());
    let evicted: Vec<_> =
        d.engine().groups().filter(|g| g.state == GroupState::Evicted).map(|g| g.spec.key.clone()).collect();
    assert!(!evicted.is_empty(), "a readiness timeout happened");
    let row = b.open().load().unwrap().groups.into_iter().find(|g| g.group.key == evicted[0].to_string()).unwrap();
    assert!(row.group.requeue_at.is_some() && row.group.requeue_count == 1, "{row:?}");
    let live = durable_groups(d.engine());
    drop(d);

    let (r1, rec) = start(b.open(), "a", &cluster.report(), 61);
    assert!(rec.transitions.is_empty() && rec.conflicts.is_empty(), "{rec:?}");
    assert_eq!(durable_groups(r1.engine()), live);
    r1.engine().check_invariants().unwrap();
    assert!(r1.engine().fair_share("a") > 0.0, "usage of g0 fed back into fair share");
    let (r2, _) = start(b.open(), "a", &cluster.report(), 61);
    assert_eq!(r1.engine().snapshot(), r2.engine().snapshot(), "deterministic replay");
    drop(r1);
    // The recovered engine goes on: the evicted group is queued again after its backoff.
    let (mut r, _) = start(b.open(), "a", &cluster.report(), 61);
    let ts = r.schedule(100).unwrap();
    assert!(ts.iter().any(|t| t.key == evicted[0] && t.reason == Reason::BackoffExpired), "{ts:?}");
    check_store(&mut b.open());
}

/// Recovery against a cluster that changed while nobody led.
pub fn recovery_reconciles_with_the_cluster<B: Backend>(b: &B) {
    let (mut d, _) = start(b.open(), "a", &ClusterReport::default(), 0);
    let mut cluster = Cluster::default();
    // gone: rigid, its pods vanish. shrinks: elastic 1..2, loses one. done: finishes. del: deleted.
    for (i, s) in [
        spec("gone", "a", 2, 2, 1, None, 0),
        spec("shrinks", "a", 1, 2, 1, None, 0),
        spec("done", "b", 1, 1, 1, None, 0),
        spec("del", "b", 1, 1, 1, None, 0),
    ]
    .into_iter()
    .enumerate()
    {
        cluster.act(&d.submit(s, i as i64).unwrap());
    }
    cluster.act(&d.schedule(5).unwrap());
    for n in ["gone", "shrinks", "done", "del"] {
        assert_eq!(state(&d, n), Some(GroupState::Admitted), "{n}");
    }
    // Queued groups: `fits` and `too_big` (whose pods some other hand started), `empty`.
    d.submit(spec("fits", "b", 1, 1, 2, None, 6), 6).unwrap();
    d.submit(spec("too_big", "b", 1, 1, 4, None, 6), 6).unwrap();
    drop(d);
    let mut report = cluster.report();
    report.running.remove(&key("gone"));
    report.running.get_mut(&key("shrinks")).unwrap().pop();
    report.running.remove(&key("done"));
    report.finished.insert(key("done"), true);
    report.running.remove(&key("del"));
    report.deleted.insert(key("del"));
    let pod = |index, n: usize| MemberPlacement { index, node: node(n), devices: vec![] };
    report.running.insert(key("fits"), vec![pod(0, 3)]);
    report.running.insert(key("too_big"), vec![pod(0, 3)]);
    report.running.insert(key("stranger"), vec![pod(0, 2)]);

    let (r, rec) = start(b.open(), "a", &report, 10);
    let moves: Vec<_> = rec.transitions.iter().map(|t| (t.key.name.as_ref(), t.from, t.to)).collect();
    use GroupState::*;
    assert_eq!(
        moves,
        [
            ("del", Admitted, Deleted),
            ("done", Admitted, Succeeded),
            ("gone", Admitted, Evicted),
            ("gone", Evicted, Queued),
            ("shrinks", Admitted, Admitted),
            ("fits", Queued, Admitted),
        ]
    );
    let conflicts: Vec<_> = rec.conflicts.iter().map(|c| c.subject.as_str()).collect();
    assert_eq!(conflicts, ["ns/stranger", "ns/too_big"], "{:?}", rec.conflicts);
    r.engine().check_invariants().unwrap();
    assert_eq!(r.engine().group(&key("shrinks")).unwrap().member_count(), 1);
    let mut other = b.open();
    let stored = check_store(&mut other);
    let keys: Vec<_> = stored.keys().map(String::as_str).collect();
    assert_eq!(keys, ["ns/fits", "ns/shrinks"]);
    let hist = other.history("ns/fits").unwrap();
    assert!(hist.last().unwrap().message.starts_with("imported"), "{hist:?}");
    // The store now says what recovery decided: a second recovery changes nothing more.
    let snap = r.engine().snapshot();
    drop(r);
    let (r2, rec2) = start(b.open(), "a", &report, 10);
    assert!(rec2.transitions.is_empty(), "{rec2:?}");
    assert_eq!(r2.engine().snapshot(), snap);
}

/// A run time learned from a group that declared none is stored with the group's finish, and a
/// recovered engine plans with it as the engine that learned it did.
pub fn learned_run_times_survive_recovery<B: Backend>(b: &B) {
    let (mut d, _) = start(b.open(), "a", &ClusterReport::default(), 0);
    d.submit(spec("first", "a", 2, 2, 1, None, 0), 0).unwrap();
    d.schedule(1).unwrap();
    d.pods_ready(&key("first"), 2, 3).unwrap();
    d.finished(&key("first"), true, 31).unwrap();
    d.submit(spec("second", "a", 2, 2, 1, None, 32), 32).unwrap();
    let learned = d.engine().learned_run_time(d.engine().group(&key("second")).unwrap());
    assert_eq!(learned.map(|l| (l.seconds, l.runs)), Some((30, 1)), "held from 1 to 31");
    let stored = b.open().recent_run_times(8).unwrap();
    assert_eq!(stored.iter().map(|r| (r.queue.as_str(), r.at, r.seconds)).collect::<Vec<_>>(), [("a", 31, 30)]);
    drop(d);

    let (r, _) = start(b.open(), "a", &ClusterReport::default(), 40);
    assert_eq!(r.engine().learned_run_time(r.engine().group(&key("second")).unwrap()), learned);
    assert_eq!(r.engine().snapshot().learned_run_times, {
        let (again, _) = start(b.open(), "a", &ClusterReport::default(), 41);
        again.engine().snapshot().learned_run_times
    });
}

/// Every placement that ends is recorded as a run (what it asked, when it was submitted, started
/// and ended, and how), for what-if replays; a group evicted and run again has two.
pub fn runs_recorded_as_they_end<B: Backend>(b: &B) {
    let (mut d, _) = start(b.open(), "a", &ClusterReport::default(), 0);
    d.submit(spec("job", "a", 2, 2, 1, Some(100), 0), 0).unwrap();
    d.schedule(5).unwrap();
    d.pods_ready(&key("job"), 2, 6).unwrap();
    d.finished(&key("job"), false, 50).unwrap();
    let runs = b.open().runs(0, i64::MAX).unwrap();
    let got: Vec<_> =
        runs.iter().map(|r| (r.group_key.as_str(), r.submitted_at, r.started_at, r.ended_at, r.members)).collect();
    assert_eq!(got, [("ns/job", 0, 5, 50, 2)]);
    assert_eq!(runs[0].outcome, "Failed");
    assert_eq!(runs[0].request["min"], 2, "{}", runs[0].request);
}

/// A group that declares a run time is ended at it plus the grace (the default Queue enforces
/// it) by an instance that recovered while it ran: the limit is the stored allocation's end, not
/// something the last instance kept in memory.
pub fn run_time_limits_survive_recovery<B: Backend>(b: &B) {
    let mut cluster = Cluster::default();
    let (mut d, _) = start(b.open(), "a", &ClusterReport::default(), 0);
    d.submit(spec("liar", "a", 2, 2, 1, Some(10), 0), 0).unwrap();
    cluster.act(&d.schedule(1).unwrap());
    d.pods_ready(&key("liar"), 2, 3).unwrap();
    let grace = config().queues[0].run_time_limit.grace_s;
    drop(d);

    // Recovered before the limit, with the group's pods still running: ended on time.
    let (mut r, rec) = start(b.open(), "a", &cluster.report(), 20);
    assert!(rec.conflicts.is_empty(), "{rec:?}");
    assert_eq!(state(&r, "liar"), Some(GroupState::Running));
    assert_eq!(r.engine().next_timer(), Some(1 + 10 + grace), "the same limit");
    assert!(r.schedule(1 + 10 + grace - 1).unwrap().iter().all(|t| t.key != key("liar")));
    let ts = r.schedule(1 + 10 + grace).unwrap();
    let ended = ts.iter().find(|t| t.key == key("liar")).expect("ended at its limit");
    assert_eq!(ended.to, GroupState::Failed);
    assert_eq!(ended.reason, Reason::RunTimeExceeded { run_time_s: 10, grace_s: grace as u64 });
    assert!(check_store(&mut b.open()).is_empty(), "its allocation row is dropped");
    drop(r);

    // A later instance knows it was ended at its limit (its pods must not run on).
    let (again, _) = start(b.open(), "a", &ClusterReport::default(), 100);
    let g = again.engine().group(&key("liar")).unwrap();
    assert_eq!((g.state, g.run_time_exceeded), (GroupState::Failed, Some(10 + grace as u64)));
}

/// Reservation `training`: a node's worth of cpu (4) for queue a over [1000, 1100).
fn a_node_for_queue_a() -> ReservationConfig {
    let amount = ReservedAmount { members: 1, resources: [("cpu".to_string(), "4".into())].into(), topology: None };
    ReservationConfig {
        name: "training".into(),
        queues: vec!["a".into()],
        namespaces: Vec::new(),
        node_selector: Default::default(),
        amount: Some(amount),
        start: 1000,
        end: 1100,
        every_s: 0,
        at_start: AtStart::Wait,
    }
}

/// A calendar reservation's window keeps its nodes across a restart: made again where it was,
/// its user's work inside it, not on another node beside that work (which would keep a second
/// node from others until the window ends).
pub fn reservation_windows_keep_their_nodes_across_recovery<B: Backend>(b: &B) {
    let mut c = config();
    c.reservations = vec![a_node_for_queue_a()];
    let recover =
        |store: B::S, cluster: &Cluster, now: i64| start_with(c.clone(), store, "a", &cluster.report(), now).0;
    let mut cluster = Cluster::default();
    let mut d = recover(b.open(), &cluster, 0);
    d.submit(spec("long", "a", 1, 1, 4, Some(5000), 0), 0).unwrap();
    cluster.act(&d.schedule(0).unwrap());
    d.pods_ready(&key("long"), 1, 1).unwrap();
    let windows = |d: &DurableEngine<B::S>| d.engine().reservation_windows();
    let [held] = &windows(&d)[..] else { panic!("one window") };
    assert_eq!(held.nodes, [cluster.pods[&key("long")][0].node.clone()], "its user runs inside it");
    let stored = b.open().load().unwrap().windows_held;
    assert_eq!(stored.iter().map(|w| (w.start, w.end, &w.nodes)).collect::<Vec<_>>(), [(1000, 1100, &held.nodes)]);
    let held = held.clone();
    drop(d);

    let mut d = recover(b.open(), &cluster, 40);
    d.schedule(41).unwrap();
    assert_eq!(state(&d, "long"), Some(GroupState::Running));
    assert_eq!(windows(&d), [held], "made again on its node");
    drop(d);

    // The Reservation removed: the first cycle after the recovery drops its stored nodes.
    let (mut d, _) = start(b.open(), "a", &cluster.report(), 50);
    assert_eq!(b.open().load().unwrap().windows_held.len(), 1, "kept until a cycle knows better");
    d.schedule(51).unwrap();
    assert_eq!(b.open().load().unwrap().windows_held, []);
}

/// A Queue removed while groups still name it: recovery keeps it, closed, rather than fail. Its
/// running group runs on and its waiting one waits; once none is left, a recovery leaves it out.
pub fn a_removed_queue_is_kept_closed_while_groups_name_it<B: Backend>(b: &B) {
    let mut cluster = Cluster::default();
    let (mut d, _) = start(b.open(), "a", &cluster.report(), 0);
    d.submit(spec("runs", "b", 4, 4, 4, Some(100), 0), 0).unwrap();
    d.submit(spec("waits", "b", 1, 1, 1, Some(100), 0), 0).unwrap();
    cluster.act(&d.schedule(1).unwrap());
    d.pods_ready(&key("runs"), 4, 2).unwrap();
    drop(d);

    let without_b =
        EngineConfig { queues: config().queues.into_iter().filter(|q| q.name != "b").collect(), ..config() };
    let (mut d, rec) = start_with(without_b.clone(), b.open(), "a", &cluster.report(), 10);
    let [conflict] = &rec.conflicts[..] else { panic!("one conflict: {:?}", rec.conflicts) };
    assert_eq!(conflict.subject, "b");
    assert!(conflict.message.contains("2 group(s) still name it"), "{}", conflict.message);
    assert_eq!((state(&d, "runs"), state(&d, "waits")), (Some(GroupState::Running), Some(GroupState::Queued)));
    cluster.act(&d.finished(&key("runs"), true, 100).unwrap());
    cluster.act(&d.schedule(101).unwrap());
    assert_eq!(state(&d, "waits"), Some(GroupState::Queued), "a closed queue admits nothing");
    let refused = d.submit(spec("new", "b", 1, 1, 1, Some(10), 102), 102);
    assert!(refused.is_err_and(|e| e.to_string().contains("closed")));
    // A finished group still names it until its object goes.
    for name in ["runs", "waits"] {
        cluster.act(&d.delete(&key(name), 103).unwrap());
    }
    drop(d);

    let (d, rec) = start_with(without_b, b.open(), "a", &cluster.report(), 110);
    assert!(rec.conflicts.iter().all(|c| !c.message.contains("kept closed")), "{:?}", rec.conflicts);
    assert!(d.engine().config().queues.iter().all(|q| q.name != "b"), "no group names it any more");
}

/// A new configuration taken by the running engine (`DurableEngine::reconfigure`) is what a
/// recovery under it gives: the same groups, the same windows, stored. Queue b removed while
/// its groups remain is kept closed; a reservation added is held and its nodes stored. A
/// configuration the engine refuses changes neither the engine nor the store.
pub fn a_reconfigured_engine_is_what_a_recovery_under_its_configuration_gives<B: Backend>(b: &B) {
    let mut cluster = Cluster::default();
    let (mut d, _) = start(b.open(), "a", &cluster.report(), 0);
    d.submit(spec("runs", "b", 2, 2, 4, Some(100), 0), 0).unwrap();
    d.submit(spec("waits", "b", 4, 4, 4, Some(500), 0), 0).unwrap();
    d.submit(spec("mine", "a", 1, 1, 4, Some(5000), 0), 0).unwrap();
    cluster.act(&d.schedule(1).unwrap());
    d.pods_ready(&key("runs"), 2, 2).unwrap();
    d.pods_ready(&key("mine"), 1, 2).unwrap();

    let mut bad = config();
    bad.fair_share_half_life_s = -1;
    let stored = b.open().load().unwrap();
    let groups = durable_groups(d.engine());
    let refused = d.reconfigure(bad, 3).unwrap_err().to_string();
    assert!(refused.contains("fairShareHalfLifeS"), "{refused}");
    assert_eq!(durable_groups(d.engine()), groups);
    assert_eq!(b.open().load().unwrap(), stored, "nothing written");

    let mut next = EngineConfig { queues: config().queues.into_iter().filter(|q| q.name != "b").collect(), ..config() };
    next.reservations = vec![a_node_for_queue_a()];
    d.reconfigure(next.clone(), 4).unwrap();
    cluster.act(&d.schedule(5).unwrap());
    assert!(d.engine().config().queues.iter().any(|q| q.name == "b" && q.closed), "b kept closed");
    assert_eq!((state(&d, "runs"), state(&d, "waits")), (Some(GroupState::Running), Some(GroupState::Queued)));
    let windows = d.engine().reservation_windows();
    let [held] = &windows[..] else { panic!("one window: {windows:?}") };
    assert_eq!(held.nodes.len(), 1, "{held:?}");
    let stored = b.open().load().unwrap().windows_held;
    assert_eq!(stored.iter().map(|w| (w.start, &w.nodes)).collect::<Vec<_>>(), [(1000, &held.nodes)]);
    let groups = durable_groups(d.engine());
    drop(d);

    let (mut r, _) = start_with(next, b.open(), "a", &cluster.report(), 6);
    r.schedule(6).unwrap();
    assert_eq!(durable_groups(r.engine()), groups, "a recovery reads what the reconfigured engine had");
    assert_eq!(r.engine().reservation_windows(), windows);
}

/// A resource and a topology level gone from every node while no instance led (patched out of
/// the nodes' status, labels removed): the group that asks for them and runs is recovered as it
/// runs, holding what the nodes still have, and reported; it no longer stops the recovery.
pub fn a_group_asking_what_no_node_has_any_more_is_recovered_as_it_runs<B: Backend>(b: &B) {
    let cluster_of = |extra: &str, spread: &str| {
        let text = format!(
            "name: t\nnodeClasses:\n  - name: n\n    count: {NODES}\n    capacity: {{cpu: {NODE_CPU}, memory: 64Gi, pods: 110{extra}}}\n{spread}"
        );
        ResourceGraph::new(muster_graph::cluster::load("t.yaml", &text).unwrap(), Policy::First)
    };
    let before = || cluster_of(", example.com/fpga: 2", "    spread: {rack: 2}\n");
    let mut cluster = Cluster::default();
    let (mut d, _) = start_on(before(), config(), b.open(), "a", &cluster.report(), 0);
    let mut g = spec("fpga", "a", 2, 2, 1, Some(100), 0);
    g.request.requests.push(("example.com/fpga".into(), 1));
    g.request.topology = Some(TopologyConstraint::required("rack"));
    d.submit(g, 0).unwrap();
    cluster.act(&d.schedule(1).unwrap());
    d.pods_ready(&key("fpga"), 2, 2).unwrap();
    assert_eq!(state(&d, "fpga"), Some(GroupState::Running));
    drop(d);

    let (mut d, rec) = start_on(cluster_of("", ""), config(), b.open(), "a", &cluster.report(), 10);
    assert_eq!(state(&d, "fpga"), Some(GroupState::Running), "it runs on");
    let conflict = rec.conflicts.iter().find(|c| c.subject == "ns/fpga").expect("reported");
    assert!(conflict.message.contains("no node has now"), "{}", conflict.message);
    // The cpu it holds still counts: two more cpus than the nodes have left are refused.
    d.submit(spec("full", "a", NODES, NODES, NODE_CPU, Some(10), 11), 11).unwrap();
    d.schedule(12).unwrap();
    assert_eq!(state(&d, "full"), Some(GroupState::Queued));
    d.engine().check_invariants().unwrap();
}

/// Nodes that shrank while no instance led (an unhealthy device, more set aside for the system):
/// the group running on them is recovered as it runs, not refused, each such node is reported,
/// and nothing more goes there until enough has ended.
pub fn nodes_that_shrank_under_a_running_group_are_recovered_over_committed<B: Backend>(b: &B) {
    let mut cluster = Cluster::default();
    let (mut d, _) = start(b.open(), "a", &cluster.report(), 0);
    d.submit(spec("big", "a", 4, 4, 4, Some(100), 0), 0).unwrap();
    cluster.act(&d.schedule(1).unwrap());
    d.pods_ready(&key("big"), 4, 2).unwrap();
    drop(d);

    let (mut d, rec) = start_on(graph_of(NODE_CPU / 2), config(), b.open(), "a", &cluster.report(), 10);
    assert_eq!(state(&d, "big"), Some(GroupState::Running));
    let subjects: Vec<&str> = rec.conflicts.iter().map(|c| c.subject.as_str()).collect();
    assert_eq!(subjects, (0..NODES as usize).map(node).collect::<Vec<_>>());
    assert!(rec.conflicts[0].message.contains("cpu 4 held of 2"), "{}", rec.conflicts[0].message);
    d.submit(spec("small", "a", 1, 1, 1, Some(10), 11), 11).unwrap();
    d.schedule(12).unwrap();
    assert_eq!(state(&d, "small"), Some(GroupState::Queued), "no room on nodes that hold more than they have");
    cluster.act(&d.finished(&key("big"), true, 100).unwrap());
    d.schedule(101).unwrap();
    assert_eq!(state(&d, "small"), Some(GroupState::Admitted), "room once big ended");
}
