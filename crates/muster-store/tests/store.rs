//! The store's test suite: `suite` runs against SQLite and a real PostgreSQL (started by
//! `muster_store::testing::PgServer`, one server per test binary, one database per test).

mod suite;
mod support;

use std::time::{Duration, Instant};

use muster_store::testing::PgServer;
use muster_store::{PgStore, SqliteStore, Store, StoreError, Write};

use muster_store::testing::TempDir;
use support::{CHILD_ENV, Sqlite, group, lead, put};

/// Groups per batch written by `child_writer`.
pub const CHILD_BATCH: usize = 40;
/// The child's lease runs from 0 for this long: it never expires while the child writes.
pub const CHILD_LEASE_TTL: i64 = i64::MAX / 2;

macro_rules! both_backends {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(#[test] fn $name() { crate::suite::$name(&crate::support::Sqlite::new()) })*
        }
        mod postgres {
            $(#[test] fn $name() { crate::suite::$name(&crate::support::Pg::new()) })*
        }
    };
}

both_backends!(
    put_and_load,
    windows_held_replaced_and_deleted,
    seq_is_never_reused,
    version_conflict_writes_nothing,
    constraint_failure_mid_batch_writes_nothing,
    delete_group_drops_allocation_keeps_history,
    history_in_order,
    usage_sums_and_decay,
    usage_folded_as_fair_share_reads_it,
    recent_run_times_per_shape,
    runs_by_end,
    lease_lifecycle,
    fencing_two_instances,
    racing_instances,
    migrations_applied_once,
    older_schema_upgraded,
    newer_schema_refused,
    corrupt_row_named,
    killed_writer_leaves_whole_batches,
);

/// Not a test of its own: the body of the child process that `killed_writer_leaves_whole_batches`
/// starts (this binary, run with CHILD_ENV set) and kills. Without CHILD_ENV it returns at once.
#[test]
fn child_writer() {
    let Ok(target) = std::env::var(CHILD_ENV) else { return };
    let mut store = support::open_target(&target);
    let fence = store.acquire_lease("engine", "child", 0, CHILD_LEASE_TTL).unwrap().unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    for batch in 0.. {
        if Instant::now() > deadline {
            break;
        }
        let writes: Vec<Write> = (0..CHILD_BATCH)
            .flat_map(|i| {
                let key = format!("{batch}/{i}");
                let entry = muster_store::HistoryEntry {
                    group_key: key.clone(),
                    at: batch,
                    from_state: None,
                    to_state: "Queued".into(),
                    reason: "Submitted".into(),
                    message: String::new(),
                };
                [put(group(&key, "Queued"), Some(0)), Write::AppendHistory(entry)]
            })
            .collect();
        store.apply(&fence, 1, &writes).unwrap();
    }
}

#[test]
fn sqlite_file_is_in_wal_mode() {
    let db = Sqlite::new();
    drop(support::Backend::open(&db));
    let conn = rusqlite::Connection::open(db.path()).unwrap();
    let mode: String = conn.query_row("PRAGMA journal_mode", [], |r| r.get(0)).unwrap();
    assert_eq!(mode, "wal");
}

#[test]
fn sqlite_read_only_open_changes_nothing_and_names_what_is_not_a_store() {
    let dir = TempDir::new("muster-store-ro");
    // An empty file and one of other bytes are refused as no store, and left as they were.
    for (name, bytes) in [("empty.db", &b""[..]), ("garbage.db", &[7u8; 4096][..])] {
        let path = dir.0.join(name);
        std::fs::write(&path, bytes).unwrap();
        match SqliteStore::open_read_only(&path) {
            Err(e @ StoreError::NotAStore { .. }) => assert!(e.to_string().contains("--store"), "{e}"),
            Err(e) => panic!("{name}: {e}"),
            Ok(_) => panic!("{name}: opened as a store"),
        }
        assert_eq!(std::fs::read(&path).unwrap(), bytes, "{name} is unchanged");
    }
    // A store the controller wrote reads the same as through a writable open, and cannot be
    // written through the read-only one.
    let db = Sqlite::new();
    let mut writer = support::Backend::open(&db);
    let fence = lead(&mut writer);
    writer.apply(&fence, 1, &[put(group("ns/a", "Pending"), None)]).unwrap();
    drop(writer);
    let before = std::fs::read(db.path()).unwrap();
    let mut reader = SqliteStore::open_read_only(db.path()).unwrap();
    assert!(reader.runs(0, i64::MAX).unwrap().is_empty());
    assert!(reader.load().unwrap().groups.iter().any(|g| g.group.key == "ns/a"));
    assert!(matches!(
        reader.apply(&fence, 2, &[Write::DeleteGroup { key: "ns/a".into() }]),
        Err(StoreError::Unavailable(_))
    ));
    assert_eq!(std::fs::read(db.path()).unwrap(), before);
}

#[test]
fn sqlite_unreachable_file_is_unavailable() {
    let dir = TempDir::new("muster-store-test");
    let missing = dir.0.join("no/such/dir/muster.db");
    assert!(matches!(SqliteStore::open(missing), Err(StoreError::Unavailable(_))));
}

/// PostgreSQL stopped under a connected store: every call says Unavailable, nothing of a failed
/// batch lands, and the same store works again once the server is back.
#[test]
fn postgres_down_then_back() {
    let server = PgServer::start().unwrap();
    let params = server.create_database().unwrap();
    let mut s = PgStore::connect(&params).unwrap();
    let f = lead(&mut s);
    s.apply(&f, 1, &[put(group("ns/before", "Queued"), None)]).unwrap();

    server.stop().unwrap();
    let unavailable = |r: Result<(), StoreError>| matches!(r, Err(StoreError::Unavailable(_)));
    assert!(unavailable(s.apply(&f, 2, &[put(group("ns/during", "Queued"), None)]).map(drop)));
    assert!(unavailable(s.load().map(drop)));
    assert!(unavailable(s.renew_lease(&f, 2, 1000).map(drop)));
    assert!(unavailable(s.acquire_lease("engine", "b", 2, 10).map(drop)));
    assert!(unavailable(s.history("ns/before").map(drop)));
    assert!(unavailable(s.usage_since(None, 0).map(drop)));
    assert!(unavailable(PgStore::connect(&params).map(drop)));

    server.restart().unwrap();
    s.apply(&f, 3, &[put(group("ns/after", "Queued"), None)]).unwrap();
    let keys: Vec<_> = s.load().unwrap().groups.into_iter().map(|g| g.group.key).collect();
    assert_eq!(keys, ["ns/before", "ns/after"]);

    // The server dies while a large batch is in flight: it lands whole or not at all.
    let big: Vec<Write> = (0..3000).map(|i| put(group(&format!("big/{i}"), "Queued"), None)).collect();
    let outcome = std::thread::scope(|scope| {
        let writer = scope.spawn(|| s.apply(&f, 4, &big));
        std::thread::sleep(Duration::from_millis(100));
        server.stop().unwrap();
        writer.join().unwrap()
    });
    server.restart().unwrap();
    let landed = s.load().unwrap().groups.iter().filter(|g| g.group.key.starts_with("big/")).count();
    match outcome {
        Ok(_) => assert_eq!(landed, 3000),
        Err(StoreError::Unavailable(_)) => assert_eq!(landed, 0),
        Err(e) => panic!("unexpected {e}"),
    }
}
