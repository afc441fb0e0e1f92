//! The durable engine's suite: `suite` and the tests below run against SQLite files and a real
//! PostgreSQL (started by `muster_store::testing::PgServer`, one database per test or case).

mod suite;
mod support;

use std::collections::BTreeSet;

use muster_durable::{ClusterReport, DurableEngine, DurableError, Input, Status};
use muster_queue::{Engine, GroupKey, GroupState, Transition};
use muster_store::testing::PgServer;
use muster_store::{PgStore, Store};
use proptest::prelude::*;

use support::*;

macro_rules! both_backends {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(#[test] fn $name() { crate::$name(&crate::support::Sqlite::new()) })*
        }
        mod postgres {
            $(#[test] fn $name() { crate::$name(&crate::support::Pg::new()) })*
        }
    };
}

both_backends!(
    a_group_asking_what_no_node_has_any_more_is_recovered_as_it_runs,
    a_reconfigured_engine_is_what_a_recovery_under_its_configuration_gives,
    nodes_that_shrank_under_a_running_group_are_recovered_over_committed,
    a_removed_queue_is_kept_closed_while_groups_name_it,
    admission_written_before_returned,
    failed_apply_rolls_back_and_retries,
    recovery_replays_the_store,
    recovery_reconciles_with_the_cluster,
    learned_run_times_survive_recovery,
    run_time_limits_survive_recovery,
    runs_recorded_as_they_end,
    two_instances_never_double_admit,
    two_instances_interleaved,
    older_usage_is_folded_as_fair_share_reads_it,
    reservation_windows_keep_their_nodes_across_recovery,
    usage_is_folded_without_fair_share,
);

use suite::{
    a_group_asking_what_no_node_has_any_more_is_recovered_as_it_runs,
    a_reconfigured_engine_is_what_a_recovery_under_its_configuration_gives,
    a_removed_queue_is_kept_closed_while_groups_name_it, admission_written_before_returned,
    failed_apply_rolls_back_and_retries, learned_run_times_survive_recovery,
    nodes_that_shrank_under_a_running_group_are_recovered_over_committed, older_usage_is_folded_as_fair_share_reads_it,
    recovery_reconciles_with_the_cluster, recovery_replays_the_store,
    reservation_windows_keep_their_nodes_across_recovery, run_time_limits_survive_recovery, runs_recorded_as_they_end,
    usage_is_folded_without_fair_share,
};

/// A leader, a follower that cannot take the lease, a hand-over after the lease lapses, the old
/// leader (its clock behind) refused by the store with no trace, and a hand-back.
fn two_instances_never_double_admit<B: Backend>(b: &B) {
    let mut cluster = Cluster::default();
    let (mut a, _) = start(b.open(), "a", &ClusterReport::default(), 0);
    for i in 0..3 {
        cluster.act(&a.submit(spec(&format!("a{i}"), "a", 2, 2, 2, None, 1), 1).unwrap());
    }
    cluster.act(&a.schedule(2).unwrap());
    let mut follower = b.open();
    assert_eq!(follower.acquire_lease("engine", "b", 5, 30).unwrap(), None, "a leads until 30");

    // a stops (a pause); its lease lapses; b takes over and recovers.
    let fence = follower.acquire_lease("engine", "b", 31, 30).unwrap().expect("lease lapsed");
    assert_eq!(fence.epoch, a.fence().epoch + 1);
    let (mut bb, rec) =
        DurableEngine::recover(graph(), config(), follower, fence, options(), &cluster.report(), 31).unwrap();
    assert!(rec.transitions.is_empty() && rec.conflicts.is_empty(), "{rec:?}");
    assert_eq!(durable_groups(bb.engine()), durable_groups(a.engine()));
    cluster.act(&bb.finished(&key("a0"), true, 32).unwrap());
    cluster.act(&bb.submit(spec("b0", "b", 2, 2, 2, None, 32), 32).unwrap());

    // a wakes up with its clock behind (it believes its lease runs): the store refuses its
    // admission of a2's successor and nothing of it lands.
    let before = (b.open().load().unwrap(), b.open().history("ns/a-late").unwrap());
    cluster.act(&[]);
    let late = a.submit(spec("a-late", "a", 1, 1, 1, None, 20), 20);
    assert!(matches!(late, Err(DurableError::Stopped(Status::NotLeader { .. }))), "{late:?}");
    assert!(a.status().to_string().contains("not the leader"), "{}", a.status());
    assert!(matches!(a.schedule(21), Err(DurableError::Stopped(_))));
    assert_eq!((b.open().load().unwrap(), b.open().history("ns/a-late").unwrap()), before);
    check_store(&mut b.open());

    // b goes on: b0 takes a0's place; nothing admitted twice, nothing over-committed.
    cluster.act(&bb.schedule(33).unwrap());
    assert_eq!(bb.engine().group(&key("b0")).unwrap().state, GroupState::Admitted);
    check_store(&mut b.open());
    // b's lease lapses; a recovers (new epoch) and continues without losing or duplicating.
    drop(bb);
    let (a2, rec) = start(a.into_store(), "a", &cluster.report(), 70);
    assert!(rec.transitions.is_empty(), "{rec:?}");
    let names: Vec<_> = a2.engine().groups().map(|g| g.spec.key.name.to_string()).collect();
    assert_eq!(names, ["a0", "a1", "a2", "b0"]);
    a2.engine().check_invariants().unwrap();
}

/// Two instances driven with interleaved inputs, pauses and skewed clocks: at no point do the
/// stored allocations over-commit a node, no group is admitted twice, and every acknowledged
/// submission survives every hand-over.
fn two_instances_interleaved<B: Backend>(b: &B) {
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let mut next = move |n: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % n
    };
    let mut cluster = Cluster::default();
    let mut insts: [Option<DurableEngine<B::S>>; 2] = [None, None];
    let mut stores: [Option<B::S>; 2] = [Some(b.open()), Some(b.open())];
    let holders = ["a", "b"];
    let mut acked: BTreeSet<GroupKey> = BTreeSet::new();
    let (mut now, mut takeovers, mut refused) = (0i64, 0, 0);
    for step in 0..160 {
        now += if next(12) == 0 { 35 } else { 1 + next(3) as i64 };
        let i = next(2) as usize;
        // Instance b's clock runs up to 10 s behind.
        let t = if i == 1 { now - next(11) as i64 } else { now };
        let Some(d) = insts[i].as_mut() else {
            let mut store = stores[i].take().unwrap();
            match store.acquire_lease("engine", holders[i], t, 30).unwrap() {
                Some(fence) => {
                    let (d, rec) =
                        DurableEngine::recover(graph(), config(), store, fence, options(), &cluster.report(), t)
                            .unwrap();
                    assert!(rec.transitions.is_empty(), "{rec:?}");
                    for k in &acked {
                        assert!(d.engine().group(k).is_some(), "{k} lost at hand-over");
                    }
                    insts[i] = Some(d);
                    takeovers += 1;
                }
                None => stores[i] = Some(store),
            }
            continue;
        };
        let placed: Vec<GroupKey> = cluster.pods.keys().cloned().collect();
        let r: Result<Vec<Transition>, DurableError> = match next(5) {
            0 | 1 => {
                let name = format!("g{step}");
                let r = d.submit(spec(&name, ["a", "b"][step % 2], 1, 2, 1 + next(3), None, t), t);
                if r.is_ok() {
                    acked.insert(key(&name));
                }
                r
            }
            2 if !placed.is_empty() => d.pods_ready(&placed[next(placed.len() as u64) as usize], 2, t),
            3 if !placed.is_empty() => d.finished(&placed[next(placed.len() as u64) as usize], true, t),
            _ => d.schedule(t),
        };
        match r {
            Ok(ts) => cluster.act(&ts),
            Err(DurableError::Stopped(_)) => {
                refused += 1;
                stores[i] = Some(insts[i].take().unwrap().into_store());
            }
            Err(DurableError::Engine(_)) => {}
            Err(e) => panic!("{e}"),
        }
        check_store(&mut b.open());
    }
    assert!(takeovers >= 3 && refused >= 1, "takeovers {takeovers}, refused {refused}");
}

#[derive(Debug, Clone)]
enum Op {
    Submit { queue: bool, min: u32, extra: u32, cpu: u64, duration: Option<u64> },
    Schedule(i64),
    Ready(usize),
    Finish(usize, bool),
    Lose(usize, u32),
    Suspend(usize),
    Resume(usize),
    Delete(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (any::<bool>(), 1u32..3, 0u32..2, 1u64..4, prop::option::of(5u64..40))
            .prop_map(|(queue, min, extra, cpu, duration)| Op::Submit { queue, min, extra, cpu, duration }),
        4 => (0i64..20).prop_map(Op::Schedule),
        2 => (0usize..32).prop_map(Op::Ready),
        2 => (0usize..32, any::<bool>()).prop_map(|(g, ok)| Op::Finish(g, ok)),
        1 => (0usize..32, 0u32..3).prop_map(|(g, m)| Op::Lose(g, m)),
        1 => (0usize..32).prop_map(Op::Suspend),
        1 => (0usize..32).prop_map(Op::Resume),
        1 => (0usize..32).prop_map(Op::Delete),
    ]
}

fn to_input(op: &Op, names: &[GroupKey], n: usize, now: i64) -> Input {
    let pick = |g: usize| names.get(g % names.len().max(1)).cloned().unwrap_or_else(|| key("none"));
    match op {
        Op::Submit { queue, min, extra, cpu, duration } => Input::Submit(spec(
            &format!("g{n}"),
            if *queue { "a" } else { "b" },
            *min,
            min + extra,
            *cpu,
            *duration,
            now,
        )),
        Op::Schedule(_) => Input::Schedule,
        Op::Ready(g) => Input::PodsReady { key: pick(*g), ready: 3 },
        Op::Finish(g, ok) => Input::Finished { key: pick(*g), succeeded: *ok },
        Op::Lose(g, m) => Input::MembersLost { key: pick(*g), members: vec![*m] },
        Op::Suspend(g) => Input::Suspend(pick(*g)),
        Op::Resume(g) => Input::Resume(pick(*g)),
        Op::Delete(g) => Input::Delete(pick(*g)),
    }
}

fn run_plain(e: &mut Engine, input: &Input, now: i64) -> Result<Vec<Transition>, muster_queue::EngineError> {
    match input {
        Input::Submit(s) => e.submit(s.clone(), now),
        Input::Schedule => Ok(e.schedule(now)),
        Input::PodsReady { key, ready } => e.pods_ready(key, *ready, now),
        Input::Finished { key, succeeded } => e.finished(key, *succeeded, now),
        Input::MembersLost { key, members } => e.members_lost(key, members, now),
        Input::Suspend(k) => e.suspend(k, now),
        Input::Resume(k) => e.resume(k, now),
        Input::Delete(k) => e.delete(k, now),
        other => panic!("not generated: {other:?}"),
    }
}

/// Random inputs; the store fails the `k`-th apply (after committing it when `commit_then_fail`:
/// a crash between commit and acknowledgement) and the instance is dropped. A plain engine
/// shadows every input the store holds. Recovery then has every acknowledged group, exactly the
/// shadow's state, nothing double-booked, and recovering twice gives identical engines.
fn crash_case<B: Backend>(b: &B, ops: &[Op], k: usize, commit_then_fail: bool) {
    let (store, plan) = Flaky::new(b.open());
    let (mut d, _) = start(store, "a", &ClusterReport::default(), 0);
    let mut shadow = d.engine().clone();
    *plan.borrow_mut() = Plan { fail_after: Some(k), commit_then_fail, failed: false };
    let mut cluster = Cluster::default();
    let (mut names, mut acked, mut now) = (Vec::new(), BTreeSet::new(), 0);
    for (n, op) in ops.iter().enumerate() {
        now += if let Op::Schedule(dt) = op { *dt } else { 1 };
        let input = to_input(op, &names, n, now);
        match d.input(input.clone(), now) {
            Ok(ts) => {
                assert_eq!(run_plain(&mut shadow, &input, now).unwrap(), ts, "durable and plain engines agree");
                cluster.act(&ts);
                match &input {
                    Input::Submit(s) => {
                        names.push(s.key.clone());
                        acked.insert(s.key.clone());
                    }
                    Input::Delete(k) => {
                        acked.remove(k);
                    }
                    _ => {}
                }
            }
            Err(DurableError::Engine(_)) => assert!(run_plain(&mut shadow, &input, now).is_err()),
            Err(DurableError::Unavailable { .. }) => {
                assert!(plan.borrow().failed);
                if commit_then_fail {
                    // It landed though nobody heard back: a delete among them is gone for good.
                    let ts = run_plain(&mut shadow, &input, now).unwrap();
                    cluster.act(&ts);
                    if let Input::Delete(k) = &input {
                        acked.remove(k);
                    }
                }
                break;
            }
            Err(e) => panic!("{e}"),
        }
    }
    drop(d);
    let (r1, rec) = start(b.open(), "a", &cluster.report(), now + 1);
    assert!(rec.transitions.is_empty() && rec.conflicts.is_empty(), "{rec:?}");
    r1.engine().check_invariants().unwrap();
    check_store(&mut b.open());
    for k in &acked {
        assert!(r1.engine().group(k).is_some(), "acknowledged {k} lost");
    }
    assert_eq!(durable_groups(r1.engine()), durable_groups(&shadow));
    let snap = r1.engine().snapshot();
    drop(r1);
    let (r2, _) = start(b.open(), "a", &cluster.report(), now + 1);
    assert_eq!(r2.engine().snapshot(), snap, "deterministic replay");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    #[test]
    fn crash_at_any_apply_sqlite(ops in prop::collection::vec(op(), 1..30), k in 0usize..30, ctf in any::<bool>()) {
        crash_case(&Sqlite::new(), &ops, k, ctf);
    }

    #[test]
    fn crash_at_any_apply_postgres(ops in prop::collection::vec(op(), 1..30), k in 0usize..30, ctf in any::<bool>()) {
        crash_case(&Pg::new(), &ops, k, ctf);
    }
}

/// PostgreSQL stopped mid-run: admissions stop, running groups are left alone, inputs wait and
/// are retried with backoff; after the restart they land and nothing is lost.
#[test]
fn postgres_down_stops_admissions_then_catches_up() {
    let server = PgServer::start().unwrap();
    let params = server.create_database().unwrap();
    let (mut d, _) = start(PgStore::connect(&params).unwrap(), "a", &ClusterReport::default(), 0);
    let mut cluster = Cluster::default();
    cluster.act(&d.submit(spec("run", "a", 2, 2, 4, None, 0), 0).unwrap());
    cluster.act(&d.submit(spec("other", "a", 2, 2, 4, None, 0), 0).unwrap());
    cluster.act(&d.schedule(1).unwrap());
    cluster.act(&d.pods_ready(&key("run"), 2, 2).unwrap());
    cluster.act(&d.pods_ready(&key("other"), 2, 2).unwrap());

    server.stop().unwrap();
    let err = d.finished(&key("other"), true, 5).unwrap_err();
    assert!(matches!(err, DurableError::Unavailable { kept: true, .. }), "{err}");
    assert!(matches!(
        d.submit(spec("late", "a", 1, 1, 4, None, 6), 6),
        Err(DurableError::Unavailable { kept: true, .. })
    ));
    assert!(matches!(d.schedule(7), Err(DurableError::Unavailable { kept: false, .. })));
    let status = d.status().to_string();
    assert!(status.starts_with("admissions stopped: store unavailable since 5: "), "{status}");
    assert!(status.contains("next attempt at 6") && status.contains("2 inputs waiting"), "{status}");
    // Retries fail while the server is down, with doubling backoff: 6 -> 8 -> 12.
    for (at, next) in [(6, 8), (8, 12)] {
        let t = d.tick(at);
        assert!(t.transitions.is_empty());
        assert!(
            matches!(d.status(), Status::StoreUnavailable { next_attempt, .. } if *next_attempt == next),
            "{}",
            d.status()
        );
    }
    // Running groups are untouched: still running, pods in place, no readiness timer fired.
    for n in ["run", "other"] {
        assert_eq!(d.engine().group(&key(n)).unwrap().state, GroupState::Running);
    }
    assert_eq!(cluster.pods.len(), 2);

    server.restart().unwrap();
    assert!(d.tick(11).transitions.is_empty(), "backoff not over yet");
    let t = d.tick(12);
    let moves: Vec<_> = t.transitions.iter().map(|t| (t.key.name.as_ref(), t.to)).collect();
    assert_eq!(moves, [("other", GroupState::Succeeded), ("late", GroupState::Queued)]);
    assert!(t.refused.is_empty());
    assert!(d.status().is_admitting(), "{}", d.status());
    cluster.act(&t.transitions);
    let ts = d.schedule(13).unwrap();
    assert!(ts.iter().any(|t| t.key == key("late") && t.to == GroupState::Admitted), "{ts:?}");
    cluster.act(&ts);
    let mut s = PgStore::connect(&params).unwrap();
    let stored = check_store(&mut s);
    assert_eq!(stored.keys().map(String::as_str).collect::<Vec<_>>(), ["ns/late", "ns/run"]);
    assert_eq!(s.history("ns/other").unwrap().last().unwrap().to_state, "Succeeded");
    drop(d);
    let (r, _) = start(PgStore::connect(&params).unwrap(), "a", &cluster.report(), 14);
    assert_eq!(r.engine().groups().count(), 3);
}

/// A batch of inputs leaves the engine and the store exactly as the same inputs one by one, and
/// refuses exactly the inputs the engine refuses.
fn batch_case(ops: &[Op], batch: usize) {
    let (one, many) = (support::Sqlite::new(), support::Sqlite::new());
    let (mut a, _) = start(one.open(), "a", &ClusterReport::default(), 0);
    let (mut b, _) = start(many.open(), "a", &ClusterReport::default(), 0);
    let mut names: Vec<GroupKey> = Vec::new();
    let mut now = 1;
    for (n, chunk) in ops.chunks(batch.max(1)).enumerate() {
        let inputs: Vec<Input> = chunk
            .iter()
            .enumerate()
            .map(|(i, op)| {
                let input = to_input(op, &names, n * 100 + i, now);
                if let Input::Submit(s) = &input {
                    names.push(s.key.clone());
                }
                input
            })
            .collect();
        let mut refused_one = Vec::new();
        for i in &inputs {
            if a.input(i.clone(), now).is_err() {
                refused_one.push(i.clone());
            }
        }
        let out = b.input_batch(inputs, now);
        let refused_many: Vec<Input> = out.refused.into_iter().map(|(i, _)| i).collect();
        assert_eq!(refused_many, refused_one);
        now += 3;
    }
    assert_eq!(durable_groups(b.engine()), durable_groups(a.engine()));
    assert_eq!(check_store(&mut many.open()), check_store(&mut one.open()));
    b.engine().check_invariants().unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]
    #[test]
    fn a_batch_is_the_same_as_its_inputs_one_by_one(ops in prop::collection::vec(op(), 1..40), batch in 1usize..12) {
        batch_case(&ops, batch);
    }
}

/// When the cluster recreates missing pods (Jobs), an admitted group whose pods are not all
/// bound yet is not evicted at recovery; a member whose node is gone still is lost.
#[test]
fn recovery_keeps_members_whose_pods_are_still_coming() {
    let b = support::Sqlite::new();
    let (mut d, _) = start(b.open(), "a", &ClusterReport::default(), 0);
    let mut cluster = Cluster::default();
    cluster.act(&d.submit(spec("coming", "a", 2, 2, 1, None, 0), 0).unwrap());
    cluster.act(&d.schedule(1).unwrap());
    assert_eq!(d.engine().group(&key("coming")).unwrap().state, GroupState::Admitted);
    drop(d);
    // No pod bound yet.
    let mut report = cluster.report();
    report.running.clear();
    let recreated = ClusterReport { pods_recreated: [key("coming")].into(), ..report.clone() };
    let (r, rec) = start(b.open(), "a", &recreated, 5);
    assert!(rec.transitions.is_empty(), "{:?}", rec.transitions);
    assert_eq!(r.engine().group(&key("coming")).unwrap().state, GroupState::Admitted);
    drop(r);
    // Without that promise (plain pods), the same report loses both members.
    let (r, rec) = start(b.open(), "a", &report, 6);
    assert!(rec.transitions.iter().any(|t| t.to == GroupState::Evicted), "{:?}", rec.transitions);
    assert_eq!(r.engine().group(&key("coming")).unwrap().state, GroupState::Queued);
}

/// The nodes of [`graph`], node `i` with `cpu[i]` cores, or gone where that is 0.
fn changed_nodes(cpu: &[u64]) -> muster_graph::ResourceGraph {
    let specs: Vec<muster_graph::NodeSpec> = (cpu.iter().enumerate())
        .filter(|(_, c)| **c > 0)
        .map(|(i, c)| muster_graph::NodeSpec {
            name: node(i),
            topology: vec![("rack".into(), format!("rack-{}", i / 2))],
            pooled: vec![("cpu".into(), c * 1000), ("memory".into(), 64 << 30), ("pods".into(), 110)],
            devices: vec![],
            published: Vec::new(),
            labels: Default::default(),
            taints: vec![],
            unschedulable: false,
        })
        .collect();
    let g = muster_graph::Graph::from_nodes("t", &specs).unwrap();
    muster_graph::ResourceGraph::new(g, muster_graph::Policy::First)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Whatever changed while no instance led (nodes that shrank or are gone, queue b's
    /// definition removed), recovery succeeds and the engine keeps its invariants.
    #[test]
    fn recovery_survives_what_changed_while_no_instance_led(
        ops in prop::collection::vec(op(), 1..40),
        cpu in prop::collection::vec(0u64..=NODE_CPU, NODES as usize),
        drop_b in any::<bool>(),
    ) {
        let b = Sqlite::new();
        let mut cluster = Cluster::default();
        let (mut d, _) = start(b.open(), "a", &cluster.report(), 0);
        let mut names = Vec::new();
        for (n, o) in ops.iter().enumerate() {
            let input = to_input(o, &names, n, n as i64);
            if let Input::Submit(s) = &input {
                names.push(s.key.clone());
            }
            if let Ok(ts) = d.input(input, n as i64) {
                cluster.act(&ts);
            }
        }
        drop(d);
        let mut c = config();
        if drop_b {
            c.queues.retain(|q| q.name != "b");
        }
        let (d, _) = start_on(changed_nodes(&cpu), c, b.open(), "a", &cluster.report(), 100);
        d.engine().check_invariants().map_err(TestCaseError::fail)?;
    }
}
