//! Durable transitions per second on SQLite and PostgreSQL, for batch sizes 1, 10 and 100.
//!
//! `cargo run --release -p muster-store --example store_throughput [seconds per case]`
//!
//! A transition is what the engine writes when one group changes state: the group row (with its
//! expected version) and a history entry; admissions also write the allocation. Groups cycle
//! Queued (created) -> Admitted (+ allocation) -> Finished (deleted, + usage). Every batch is one
//! `apply`, i.e. one fenced, committed transaction (SQLite: WAL, synchronous=FULL; PostgreSQL:
//! a throwaway server with default durability, fsync and synchronous_commit on).

use std::time::{Duration, Instant};

use muster_store::testing::PgServer;
use muster_store::{Allocation, Group, HistoryEntry, PgStore, SqliteStore, Store, UsageRecord, Write};
use serde_json::json;

fn main() {
    let seconds: f64 = std::env::args().nth(1).map_or(3.0, |s| s.parse().expect("seconds per case"));
    let per_case = Duration::from_secs_f64(seconds);
    let dir = std::env::temp_dir().join(format!("muster-store-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let server = PgServer::start().unwrap_or_else(|e| panic!("cannot start PostgreSQL: {e}"));
    println!("{:<10} {:>6} {:>14} {:>14}", "backend", "batch", "transitions/s", "ms per apply");
    for batch in [1, 10, 100] {
        let path = dir.join(format!("batch-{batch}.db"));
        let sqlite = SqliteStore::open(&path).expect("open sqlite");
        report("sqlite", batch, run(sqlite, batch, per_case));
        let pg = PgStore::connect(&server.create_database().expect("create database")).expect("connect");
        report("postgres", batch, run(pg, batch, per_case));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn report(backend: &str, batch: usize, (transitions, applies, elapsed): (usize, usize, Duration)) {
    let secs = elapsed.as_secs_f64();
    println!("{backend:<10} {batch:>6} {:>14.0} {:>14.3}", transitions as f64 / secs, secs * 1000.0 / applies as f64);
}

/// Applies batches of `batch` transitions for `per_case`; returns (transitions, applies, elapsed).
fn run<S: Store>(mut store: S, batch: usize, per_case: Duration) -> (usize, usize, Duration) {
    let fence = store.acquire_lease("engine", "bench", 0, i64::MAX / 2).expect("lease").expect("free");
    let mut next = 0usize;
    let (mut transitions, mut applies) = (0, 0);
    let started = Instant::now();
    while started.elapsed() < per_case {
        let writes: Vec<Write> = (next..next + batch).flat_map(transition).collect();
        store.apply(&fence, 1, &writes).expect("apply");
        next += batch;
        transitions += batch;
        applies += 1;
    }
    (transitions, applies, started.elapsed())
}

/// The writes of transition `n`: group `n / 3` takes its `n % 3`-th step.
fn transition(n: usize) -> Vec<Write> {
    let id = (n / 3) as i64;
    let key = format!("bench/g{id}");
    let (from, to) = [(None, "Queued"), (Some("Queued"), "Admitted"), (Some("Admitted"), "Finished")][n % 3];
    let history = Write::AppendHistory(HistoryEntry {
        group_key: key.clone(),
        at: id,
        from_state: from.map(str::to_string),
        to_state: to.to_string(),
        reason: format!("bench {to}"),
        message: String::new(),
    });
    let group = Group {
        key: key.clone(),
        queue: "default".into(),
        priority: 0,
        submitted_at: id,
        state: to.into(),
        spec: json!({"members": 10, "request": {"cpu": "2", "memory": "4Gi"}}),
        status: json!({"reason": to}),
        requeue_count: 0,
        requeue_at: None,
    };
    match n % 3 {
        0 => vec![Write::PutGroup { group, expected_version: Some(0) }, history],
        1 => {
            let placement: serde_json::Map<_, _> =
                (0..10).map(|m| (m.to_string(), json!({"node": format!("node-{}", (id + m) % 100)}))).collect();
            vec![
                Write::PutGroup { group, expected_version: Some(1) },
                Write::PutAllocation(Allocation {
                    group_key: key,
                    alloc_id: id,
                    placement: placement.into(),
                    start: id,
                    end: None,
                }),
                history,
            ]
        }
        _ => vec![
            Write::DeleteGroup { key },
            history,
            Write::AddUsage(UsageRecord { queue: "default".into(), resource: "cpu".into(), at: id, amount: 20.0 }),
        ],
    }
}
