//! The behaviour every backend must have, written once (instantiated in `store.rs`).

use std::collections::BTreeMap;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use muster_store::{
    Allocation, Fence, HistoryEntry, RunRecord, RunTimeRecord, Store, StoreError, UsageRecord, UsageSum, WindowHeld,
    Write,
};
use serde_json::json;

use crate::support::{Backend, group, lead, put, spawn_writer};

fn alloc(key: &str, id: i64) -> Write {
    Write::PutAllocation(Allocation {
        group_key: key.to_string(),
        alloc_id: id,
        placement: json!({"0": {"node": "n1", "devices": ["gpu0"]}, "1": {"node": "n2", "devices": []}}),
        start: 20,
        end: None,
    })
}

fn event(key: &str, at: i64, from: Option<&str>, to: &str) -> Write {
    Write::AppendHistory(HistoryEntry {
        group_key: key.to_string(),
        at,
        from_state: from.map(str::to_string),
        to_state: to.to_string(),
        reason: format!("to {to}"),
        message: String::new(),
    })
}

fn usage(queue: &str, resource: &str, at: i64, amount: f64) -> Write {
    Write::AddUsage(UsageRecord { queue: queue.into(), resource: resource.into(), at, amount })
}

fn keys<S: Store>(store: &mut S) -> Vec<String> {
    store.load().unwrap().groups.into_iter().map(|g| g.group.key).collect()
}

fn fenced<T>(r: Result<T, StoreError>) -> bool {
    matches!(r, Err(StoreError::Fenced { .. }))
}

pub fn put_and_load<B: Backend>(b: &B) {
    let mut s = b.open();
    let f = lead(&mut s);
    let puts = s.apply(&f, 1, &[put(group("ns/b", "Queued"), Some(0)), put(group("ns/a", "Queued"), None)]).unwrap();
    let got: Vec<_> = puts.iter().map(|p| (p.key.as_str(), p.seq, p.version)).collect();
    assert_eq!(got, [("ns/b", 1, 1), ("ns/a", 2, 1)]);
    let mut admitted = group("ns/b", "Admitted");
    admitted.status = json!({"admitted_at": 20});
    admitted.requeue_count = 2;
    admitted.requeue_at = Some(99);
    let admit = [put(admitted.clone(), Some(1)), alloc("ns/b", 7), event("ns/b", 20, Some("Queued"), "Admitted")];
    s.apply(&f, 2, &admit).unwrap();

    // A second instance sees exactly what was committed, in submit order.
    let snap = b.open().load().unwrap();
    assert_eq!(snap.groups.len(), 2);
    assert_eq!((snap.groups[0].seq, snap.groups[0].version), (1, 2));
    assert_eq!(snap.groups[0].group, admitted);
    assert_eq!((snap.groups[1].group.key.as_str(), snap.groups[1].seq, snap.groups[1].version), ("ns/a", 2, 1));
    assert_eq!(snap.allocations.len(), 1);
    assert_eq!(snap.allocations[0].alloc_id, 7);
    assert_eq!(snap.allocations[0].placement["0"]["devices"][0], "gpu0");
}

pub fn windows_held_replaced_and_deleted<B: Backend>(b: &B) {
    let held = |reservation: &str, start: i64, nodes: &[&str]| WindowHeld {
        reservation: reservation.into(),
        start,
        end: start + 100,
        nodes: nodes.iter().map(|n| n.to_string()).collect(),
    };
    let mut s = b.open();
    let f = lead(&mut s);
    let (week2, week1, other) =
        (held("weekly", 700, &["n3"]), held("weekly", 0, &["n1", "n2"]), held("adhoc", 50, &[]));
    let puts = [week2.clone(), week1.clone(), other.clone()].map(Write::PutWindowHeld);
    s.apply(&f, 1, &puts).unwrap();
    assert_eq!(
        b.open().load().unwrap().windows_held,
        [other.clone(), week1, week2.clone()],
        "by reservation, then start"
    );
    let moved = held("weekly", 0, &["n4"]);
    let delete = Write::DeleteWindowHeld { reservation: "adhoc".into(), start: 50 };
    let absent = Write::DeleteWindowHeld { reservation: "gone".into(), start: 1 };
    s.apply(&f, 2, &[Write::PutWindowHeld(moved.clone()), delete, absent]).unwrap();
    assert_eq!(b.open().load().unwrap().windows_held, [moved, week2], "replaced in place, the deleted one gone");
}

pub fn seq_is_never_reused<B: Backend>(b: &B) {
    let mut s = b.open();
    let f = lead(&mut s);
    s.apply(&f, 1, &[put(group("ns/a", "Queued"), None), put(group("ns/b", "Queued"), None)]).unwrap();
    s.apply(&f, 2, &[Write::DeleteGroup { key: "ns/b".into() }]).unwrap();
    let puts = s.apply(&f, 3, &[put(group("ns/c", "Queued"), None)]).unwrap();
    assert_eq!(puts[0].seq, 3);
    // Recreating a deleted key is a new submission: new seq, version 1.
    let puts = s.apply(&f, 4, &[put(group("ns/b", "Queued"), Some(0))]).unwrap();
    assert_eq!((puts[0].seq, puts[0].version), (4, 1));
    assert_eq!(keys(&mut s), ["ns/a", "ns/c", "ns/b"]);
}

pub fn version_conflict_writes_nothing<B: Backend>(b: &B) {
    let mut s = b.open();
    let f = lead(&mut s);
    s.apply(&f, 1, &[put(group("ns/a", "Queued"), None)]).unwrap();
    let before = s.load().unwrap();
    let batch =
        [put(group("ns/new", "Queued"), Some(0)), event("ns/new", 2, None, "Queued"), put(group("ns/a", "x"), Some(5))];
    let err = s.apply(&f, 2, &batch).unwrap_err();
    assert_eq!(err, StoreError::Conflict { key: "ns/a".into(), expected: 5, found: 1 });
    // Creating a key that exists is a conflict too.
    let err = s.apply(&f, 2, &[put(group("ns/a", "Queued"), Some(0))]).unwrap_err();
    assert_eq!(err, StoreError::Conflict { key: "ns/a".into(), expected: 0, found: 1 });
    assert_eq!(s.load().unwrap(), before);
    assert!(s.history("ns/new").unwrap().is_empty());
    // The store is still usable after a refused batch.
    s.apply(&f, 3, &[put(group("ns/a", "Admitted"), Some(1))]).unwrap();
}

/// A write that breaks a constraint in the middle of a batch leaves none of the batch.
pub fn constraint_failure_mid_batch_writes_nothing<B: Backend>(b: &B) {
    let mut s = b.open();
    let f = lead(&mut s);
    s.apply(&f, 1, &[put(group("ns/a", "Admitted"), None), alloc("ns/a", 1)]).unwrap();
    let before = s.load().unwrap();
    let batches = [
        // An allocation for a group that does not exist.
        vec![put(group("ns/b", "Queued"), None), event("ns/b", 2, None, "Queued"), alloc("ns/ghost", 2)],
        // A duplicate alloc_id, after writes that would have succeeded.
        vec![
            put(group("ns/c", "Admitted"), None),
            usage("q", "cpu", 2, 1.0),
            alloc("ns/c", 1),
            event("ns/c", 2, None, "x"),
        ],
    ];
    for batch in batches {
        assert!(matches!(s.apply(&f, 2, &batch), Err(StoreError::Rejected(_))));
        assert_eq!(s.load().unwrap(), before);
    }
    assert!(s.history("ns/b").unwrap().is_empty());
    assert!(s.history("ns/c").unwrap().is_empty());
    assert!(s.usage_since(None, 0).unwrap().is_empty());
}

pub fn delete_group_drops_allocation_keeps_history<B: Backend>(b: &B) {
    let mut s = b.open();
    let f = lead(&mut s);
    s.apply(&f, 1, &[put(group("ns/a", "Admitted"), None), alloc("ns/a", 3), event("ns/a", 1, None, "Admitted")])
        .unwrap();
    s.apply(&f, 2, &[Write::DeleteAllocation { group_key: "ns/a".into() }]).unwrap();
    assert!(s.load().unwrap().allocations.is_empty());
    s.apply(&f, 3, &[alloc("ns/a", 4)]).unwrap();
    let deletes = [Write::DeleteGroup { key: "ns/a".into() }, Write::DeleteGroup { key: "ns/absent".into() }];
    s.apply(&f, 4, &deletes).unwrap();
    let snap = s.load().unwrap();
    assert!(snap.groups.is_empty() && snap.allocations.is_empty());
    assert_eq!(s.history("ns/a").unwrap().len(), 1);
    // The freed alloc_id may be used again.
    s.apply(&f, 5, &[put(group("ns/b", "Admitted"), None), alloc("ns/b", 4)]).unwrap();
}

pub fn history_in_order<B: Backend>(b: &B) {
    let mut s = b.open();
    let f = lead(&mut s);
    s.apply(&f, 1, &[event("ns/a", 1, None, "Queued"), event("ns/b", 1, None, "Queued")]).unwrap();
    s.apply(&f, 2, &[event("ns/a", 5, Some("Queued"), "Admitted"), event("ns/a", 5, Some("Admitted"), "Running")])
        .unwrap();
    let h = s.history("ns/a").unwrap();
    let path: Vec<_> = h.iter().map(|e| (e.at, e.from_state.as_deref(), e.to_state.as_str())).collect();
    assert_eq!(path, [(1, None, "Queued"), (5, Some("Queued"), "Admitted"), (5, Some("Admitted"), "Running")]);
    assert_eq!(h[1].reason, "to Admitted");
    assert_eq!(s.history("ns/b").unwrap().len(), 1);
    assert!(s.history("ns/none").unwrap().is_empty());
}

/// A store led by a fresh fence, holding the usage `records` (queue, resource, at, amount).
fn with_usage<B: Backend>(b: &B, records: &[(&str, &str, i64, f64)]) -> (B::S, muster_store::Fence) {
    let mut s = b.open();
    let f = lead(&mut s);
    let writes: Vec<Write> = records.iter().map(|&(q, r, at, amount)| usage(q, r, at, amount)).collect();
    s.apply(&f, 1, &writes).unwrap();
    (s, f)
}

pub fn usage_sums_and_decay<B: Backend>(b: &B) {
    let (mut s, _) = with_usage(
        b,
        &[
            ("research", "cpu", 0, 100.0),
            ("research", "cpu", 100, 50.0),
            ("research", "gpu", 100, 8.0),
            ("prod", "cpu", 200, 10.0),
            ("prod", "cpu", 200, 5.0),
            ("prod", "cpu", 400, 1000.0),
        ],
    );
    let sum = |q: &str, r: &str, amount: f64| UsageSum { queue: q.into(), resource: r.into(), amount };
    let all = s.usage_since(None, 100).unwrap();
    assert_eq!(all, [sum("prod", "cpu", 1015.0), sum("research", "cpu", 50.0), sum("research", "gpu", 8.0)]);
    let research = s.usage_since(Some("research"), 0).unwrap();
    assert_eq!(research, [sum("research", "cpu", 150.0), sum("research", "gpu", 8.0)]);
    assert!(s.usage_since(Some("nobody"), 0).unwrap().is_empty());

    // Half-life 100 s at t=300: weights 1/8 (t=0), 1/4 (t=100), 1/2 (t=200); t=400 is in the future.
    let decayed = s.decayed_usage(300, 100).unwrap();
    let got: BTreeMap<_, _> = decayed.iter().map(|u| ((u.queue.as_str(), u.resource.as_str()), u.amount)).collect();
    let want = [(("prod", "cpu"), 7.5), (("research", "cpu"), 12.5 + 12.5), (("research", "gpu"), 2.0)];
    assert_eq!(got.len(), want.len());
    for (k, v) in want {
        assert!((got[&k] - v).abs() < 1e-9, "{k:?}: {} != {v}", got[&k]);
    }
    assert!(matches!(s.decayed_usage(300, 0), Err(StoreError::Rejected(_))));
}

pub fn usage_folded_as_fair_share_reads_it<B: Backend>(b: &B) {
    // Half-life 10 s: folded at t=1000, records before 1000 - 64 x 10 = 360 are read by nothing.
    let (mut s, f) = with_usage(
        b,
        &[
            ("q", "cpu", 0, 1e30),
            ("q", "cpu", 359, 1e20),
            ("q", "cpu", 360, 4.0),
            ("q", "cpu", 990, 8.0),
            ("q", "gpu", 1000, 2.0),
            ("q", "cpu", 1001, 1.0),
        ],
    );
    let reads = |s: &mut B::S| -> Vec<Vec<UsageSum>> {
        [1000, 1005, 1100, 1500].into_iter().map(|now| s.decayed_usage(now, 10).unwrap()).collect()
    };
    let before = reads(&mut s);
    let fold = |at: i64, span_seconds: i64| Write::FoldUsage { at, half_life_seconds: 10, span_seconds };
    // At most 1,000 s after the oldest record: up to t=1000.
    s.apply(&f, 2, &[fold(5000, 1000)]).unwrap();
    for (a, b) in before.iter().flatten().zip(reads(&mut s).iter().flatten()) {
        assert_eq!((&a.queue, &a.resource), (&b.queue, &b.resource));
        assert!((a.amount - b.amount).abs() <= 1e-12 * a.amount.abs(), "{a:?} read as {b:?} once folded");
    }
    // What was recorded up to t=1000 is one record per resource, decayed to then; later records
    // are as written.
    let sum = |q: &str, r: &str, amount: f64| UsageSum { queue: q.into(), resource: r.into(), amount };
    let cpu_folded = 4.0 * 0.5f64.powi(64) + 8.0 * 0.5;
    let all = s.usage_since(None, 0).unwrap();
    assert_eq!(all.len(), 2);
    assert!((all[0].amount - (cpu_folded + 1.0)).abs() < 1e-12, "{all:?}");
    assert_eq!(all[1], sum("q", "gpu", 2.0));
    assert_eq!(s.usage_since(None, 1001).unwrap(), [sum("q", "cpu", 1.0)]);
    // Fenced as every write: an instance that lost the lease folds nothing.
    let stale = muster_store::Fence { epoch: f.epoch + 1, ..f.clone() };
    assert!(fenced(s.apply(&stale, 3, &[fold(5000, i64::MAX)])));
    assert_eq!(s.usage_since(None, 0).unwrap(), all);
    let zero = Write::FoldUsage { at: 5000, half_life_seconds: 0, span_seconds: 1 };
    assert!(matches!(s.apply(&f, 3, &[zero]), Err(StoreError::Rejected(_))));
    // Up to `at` when that is sooner than the span: the record at t=1001 joins the folded ones.
    s.apply(&f, 4, &[fold(1001, i64::MAX)]).unwrap();
    assert!(s.usage_since(None, 1001).unwrap().iter().all(|u| u.amount > 0.0));
    assert!(s.usage_since(None, 1002).unwrap().is_empty(), "nothing after t=1001");
}

pub fn recent_run_times_per_shape<B: Backend>(b: &B) {
    let mut s = b.open();
    let f = lead(&mut s);
    let run =
        |queue: &str, shape: i64, at: i64, seconds: i64| RunTimeRecord { queue: queue.into(), shape, at, seconds };
    // Shape 7 of q ran four times (two at t=30); the negative shape is a u64 hash past i64::MAX.
    let records = [
        run("q", 7, 10, 100),
        run("q", 7, 20, 200),
        run("q", 7, 30, 300),
        run("q", 7, 30, 301),
        run("q", -5, 5, 50),
        run("r", 7, 1, 9),
    ];
    s.apply(&f, 40, &records.iter().cloned().map(Write::AddRunTime).collect::<Vec<_>>()).unwrap();
    let latest = s.recent_run_times(2).unwrap();
    assert_eq!(latest, [run("q", -5, 5, 50), run("q", 7, 30, 300), run("q", 7, 30, 301), run("r", 7, 1, 9)]);
    assert_eq!(s.recent_run_times(10).unwrap().len(), records.len());
    assert!(s.recent_run_times(0).unwrap().is_empty());
}

pub fn runs_by_end<B: Backend>(b: &B) {
    let mut s = b.open();
    let f = lead(&mut s);
    let run = |key: &str, ended_at: i64, outcome: &str| RunRecord {
        group_key: key.into(),
        queue: "q".into(),
        priority: 5,
        submitted_at: 1,
        started_at: 2,
        ended_at,
        members: 3,
        outcome: outcome.into(),
        request: json!({"name": key, "min": 3, "max": 4, "requests": [["cpu", 1000]]}),
    };
    let records = [
        run("ns/b", 20, "Succeeded"),
        run("ns/a", 10, "Evicted"),
        run("ns/a", 30, "Failed"),
        run("ns/c", 20, "Succeeded"),
    ];
    s.apply(&f, 40, &records.iter().cloned().map(Write::AddRun).collect::<Vec<_>>()).unwrap();
    let [b2, a1, a3, c2] = records;
    assert_eq!(s.runs(0, 100).unwrap(), [a1, b2.clone(), c2.clone(), a3]);
    assert_eq!(s.runs(11, 30).unwrap(), [b2, c2], "ends in [since, until)");
    assert!(s.runs(31, 100).unwrap().is_empty());
}

pub fn lease_lifecycle<B: Backend>(b: &B) {
    let mut s = b.open();
    let a = s.acquire_lease("engine", "a", 100, 10).unwrap().unwrap();
    assert_eq!(a.epoch, 1);
    assert_eq!(s.acquire_lease("engine", "b", 105, 10).unwrap(), None);
    // Re-acquiring a lease one holds extends it under the same epoch.
    assert_eq!(s.acquire_lease("engine", "a", 105, 10).unwrap(), Some(a.clone()));
    assert!(s.renew_lease(&a, 110, 10).unwrap());
    assert_eq!(s.acquire_lease("engine", "b", 119, 10).unwrap(), None);
    // Lapsed at 120: a can no longer renew, b takes it with the next epoch.
    assert!(!s.renew_lease(&a, 120, 10).unwrap());
    let b2 = s.acquire_lease("engine", "b", 120, 10).unwrap().unwrap();
    assert_eq!(b2.epoch, 2);
    assert!(!s.release_lease(&a).unwrap());
    assert!(s.release_lease(&b2).unwrap());
    // Released: free at once, and even the same holder gets a new epoch.
    let b3 = s.acquire_lease("engine", "b", 121, 10).unwrap().unwrap();
    assert_eq!(b3.epoch, 3);
    // Leases are independent by name.
    assert_eq!(s.acquire_lease("other", "a", 121, 10).unwrap().unwrap().epoch, 1);
    assert!(fenced(s.apply(&a, 121, &[])));
}

/// Two instances on one database, one after the other: only the holder's writes land.
pub fn fencing_two_instances<B: Backend>(b: &B) {
    let (mut one, mut two) = (b.open(), b.open());
    let f1 = one.acquire_lease("engine", "one", 0, 30).unwrap().unwrap();
    assert_eq!(two.acquire_lease("engine", "two", 1, 30).unwrap(), None);
    // A fence with the holder's name but another epoch is refused, and so is a non-holder.
    let forged = Fence { epoch: 9, ..f1.clone() };
    assert!(fenced(two.apply(&forged, 2, &[put(group("ns/two", "Admitted"), None)])));
    let stranger = Fence { name: "engine".into(), holder: "two".into(), epoch: 1 };
    assert!(fenced(two.apply(&stranger, 2, &[put(group("ns/two", "Admitted"), None)])));
    one.apply(&f1, 2, &[put(group("ns/one", "Admitted"), None), alloc("ns/one", 1)]).unwrap();
    // One's lease has expired at 30, even though nobody took it yet.
    assert!(fenced(one.apply(&f1, 30, &[put(group("ns/late", "Admitted"), None)])));
    let f2 = two.acquire_lease("engine", "two", 31, 30).unwrap().unwrap();
    assert_eq!(f2.epoch, 2);
    // One's clock may lag and still think it leads: the epoch refuses it anyway.
    assert!(fenced(one.apply(&f1, 5, &[Write::DeleteGroup { key: "ns/one".into() }, alloc("ns/x", 2)])));
    two.apply(&f2, 32, &[put(group("ns/two", "Admitted"), None)]).unwrap();
    assert_eq!(keys(&mut one), ["ns/one", "ns/two"]);
    assert_eq!(one.load().unwrap().allocations.len(), 1);
}

/// Outcome of one racer: the fence it got, and how many of its writes landed or were fenced.
type Race = (Option<Fence>, usize, usize);

fn race_for_lease<S: Store + Send>(stores: &mut [S; 2], names: [&str; 2]) -> Vec<Race> {
    let barrier = Barrier::new(2);
    std::thread::scope(|scope| {
        let handles: Vec<_> = stores
            .iter_mut()
            .zip(names)
            .map(|(store, name)| {
                let barrier = &barrier;
                scope.spawn(move || {
                    barrier.wait();
                    let fence = store.acquire_lease("engine", name, 100, 50).unwrap();
                    // The loser writes with the fence it would have got.
                    let probe = fence.clone().unwrap_or(Fence { name: "engine".into(), holder: name.into(), epoch: 1 });
                    let (mut ok, mut refused) = (0, 0);
                    for i in 0..30 {
                        let key = format!("{name}/{i}");
                        match store.apply(&probe, 101, &[put(group(&key, "Admitted"), None), alloc(&key, i)]) {
                            Ok(_) => ok += 1,
                            Err(StoreError::Fenced { .. }) => refused += 1,
                            Err(e) => panic!("{name}: {e}"),
                        }
                    }
                    (fence, ok, refused)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

/// Two instances racing in threads for the lease and then for writes: exactly one leads, the
/// other's writes are all refused, and after a hand-over no write of the old leader lands.
pub fn racing_instances<B: Backend>(b: &B) {
    let names = ["one", "two"];
    let mut stores = [b.open(), b.open()];
    let results = race_for_lease(&mut stores, names);
    let leader = results.iter().position(|r| r.0.is_some()).expect("someone leads");
    assert!(results[1 - leader].0.is_none(), "both instances got the lease");
    assert_eq!((results[leader].1, results[leader].2), (30, 0));
    assert_eq!((results[1 - leader].1, results[1 - leader].2), (0, 30));
    let landed = keys(&mut stores[0]);
    assert_eq!(landed.len(), 30);
    assert!(landed.iter().all(|k| k.starts_with(names[leader])));

    // Hand-over while the old leader keeps writing with a clock that says it still leads.
    let old_fence = results[leader].0.clone().unwrap();
    let [first, second] = &mut stores;
    let (old, new) = if leader == 0 { (first, second) } else { (second, first) };
    let old_name = names[leader];
    let (successes, took_over, new_fence) = std::thread::scope(|scope| {
        let writer = scope.spawn(|| {
            let mut successes = Vec::new();
            let mut refused = 0;
            let deadline = Instant::now() + Duration::from_secs(10);
            for i in 100.. {
                assert!(Instant::now() < deadline, "the old leader was never fenced");
                // An engine pauses between batches; SQLite's lock is not fair to a waiting writer.
                std::thread::sleep(Duration::from_micros(500));
                let key = format!("{old_name}/{i}");
                let started = Instant::now();
                match old.apply(&old_fence, 120, &[put(group(&key, "Admitted"), None), alloc(&key, i)]) {
                    Ok(_) => successes.push(started),
                    Err(StoreError::Fenced { .. }) => {
                        refused += 1;
                        if refused == 10 {
                            break;
                        }
                    }
                    Err(e) => panic!("{e}"),
                }
            }
            successes
        });
        std::thread::sleep(Duration::from_millis(50));
        let fence = new.acquire_lease("engine", names[1 - leader], 151, 50).unwrap().expect("lease expired at 150");
        let took_over = Instant::now();
        (writer.join().unwrap(), took_over, fence)
    });
    assert_eq!(new_fence.epoch, 2);
    assert!(!successes.is_empty(), "the old leader wrote before the hand-over");
    assert!(successes.iter().all(|t| *t < took_over), "a write begun after the hand-over landed");
    new.apply(&new_fence, 152, &[put(group("new/0", "Admitted"), None)]).unwrap();
    assert_eq!(keys(new).len(), 30 + successes.len() + 1);
}

pub fn migrations_applied_once<B: Backend>(b: &B) {
    drop(b.open());
    let first = b.migrations();
    assert_eq!(
        first.iter().map(|m| (m.0, m.1.as_str())).collect::<Vec<_>>(),
        [(1, "init"), (2, "usage"), (3, "run_times"), (4, "runs"), (5, "windows_held")]
    );
    let mut s = b.open();
    assert_eq!(b.migrations(), first);
    let f = lead(&mut s);
    s.apply(&f, 1, &[put(group("ns/a", "Queued"), None)]).unwrap();
    assert_eq!(keys(&mut b.open()), ["ns/a"]);
    assert_eq!(b.migrations(), first);
}

pub fn older_schema_upgraded<B: Backend>(b: &B) {
    b.create_v1_schema();
    b.exec(
        "INSERT INTO history (group_key, at, from_state, to_state, reason, message) \
         VALUES ('ns/old', 5, NULL, 'Queued', 'Submitted', '')",
    );
    let mut s = b.open();
    assert_eq!(b.migrations().iter().map(|m| m.0).collect::<Vec<_>>(), [1, 2, 3, 4, 5]);
    assert_eq!(s.load().unwrap().windows_held, [], "a store written before holds no window's nodes");
    assert_eq!(s.history("ns/old").unwrap()[0].reason, "Submitted");
    let f = lead(&mut s);
    s.apply(&f, 6, &[usage("q", "cpu", 6, 2.0)]).unwrap();
    assert_eq!(s.usage_since(None, 0).unwrap()[0].amount, 2.0);
}

pub fn newer_schema_refused<B: Backend>(b: &B) {
    drop(b.open());
    b.exec("INSERT INTO schema_migrations (version, name) VALUES (999, 'from the future')");
    match b.open_result() {
        Err(StoreError::Migration(m)) => assert!(m.contains("999"), "{m}"),
        other => panic!("expected a migration error, got {:?}", other.map(|_| ())),
    }
}

pub fn corrupt_row_named<B: Backend>(b: &B) {
    let mut s = b.open();
    let f = lead(&mut s);
    // ns/bad first: PostgreSQL can only break a whole column, and load stops at the first bad row.
    s.apply(&f, 1, &[put(group("ns/bad", "Queued"), None), put(group("ns/ok", "Queued"), None)]).unwrap();
    b.corrupt_group("ns/bad");
    match b.open().load() {
        Err(StoreError::Corrupt { table, key, .. }) => assert_eq!((table.as_str(), key.as_str()), ("groups", "ns/bad")),
        other => panic!("expected a corrupt row, got {other:?}"),
    }
}

/// A writer process killed at an arbitrary point leaves every batch whole or absent.
pub fn killed_writer_leaves_whole_batches<B: Backend>(b: &B) {
    drop(b.open());
    let mut child = spawn_writer(&b.child_target());
    let mut reader = b.open();
    let deadline = Instant::now() + Duration::from_secs(20);
    while reader.load().unwrap().groups.len() < 3 * crate::CHILD_BATCH {
        assert!(Instant::now() < deadline, "the child wrote too little");
        assert!(child.try_wait().unwrap().is_none(), "the child exited early");
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(37));
    child.kill().unwrap();
    child.wait().unwrap();
    // Taking the lease over waits on the lease row (PostgreSQL) or the write lock (SQLite) for a
    // commit the server may still be finishing for the dead child; after it the data is final.
    let after_lease = crate::CHILD_LEASE_TTL + 1;
    assert!(reader.acquire_lease("engine", "reader", after_lease, 10).unwrap().is_some());
    let mut per_batch: BTreeMap<usize, usize> = BTreeMap::new();
    for key in keys(&mut reader) {
        *per_batch.entry(key.split('/').next().unwrap().parse().unwrap()).or_default() += 1;
    }
    let batches = per_batch.len();
    assert!(batches >= 3);
    // Batches 0..n are complete; nothing of batch n, the one the kill interrupted.
    assert_eq!(per_batch.keys().copied().collect::<Vec<_>>(), (0..batches).collect::<Vec<_>>());
    assert!(per_batch.values().all(|n| *n == crate::CHILD_BATCH), "{per_batch:?}");
    assert!(reader.history(&format!("{batches}/0")).unwrap().is_empty());
    assert_eq!(reader.history(&format!("{}/0", batches - 1)).unwrap().len(), 1);
}
