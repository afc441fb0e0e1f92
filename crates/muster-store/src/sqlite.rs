//! The embedded backend: one SQLite file in WAL mode with `synchronous=FULL`, so a batch that
//! `apply` reported committed survives a power loss (the caller releases pods right after).

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, ErrorCode, OpenFlags, OptionalExtension, Row, Transaction, TransactionBehavior, params};
use serde_json::Value;

use crate::common::{self, FREE, LeaseRow, Sums};
use crate::migrate::{self, SQLITE_MIGRATIONS};
use crate::{
    Allocation, Fence, Group, HistoryEntry, PutResult, RunRecord, RunTimeRecord, Snapshot, Store, StoreError,
    StoredGroup, UsageRecord, UsageSum, WindowHeld, Write,
};

/// How long a writer waits for another connection's write lock before giving up (Unavailable).
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// A store in one SQLite file. Several `SqliteStore`s (in one process or several) may open the
/// same file; their writes are serialised by SQLite's write lock and fenced by the lease.
pub struct SqliteStore {
    conn: Connection,
    path: PathBuf,
}

impl SqliteStore {
    /// Opens (creating if needed) the database file and brings its schema up to date.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        let path = path.as_ref().to_path_buf();
        let conn = Connection::open(&path).map_err(|e| sql_err(&path, e))?;
        let mut store = SqliteStore { conn, path };
        store.configure().map_err(|e| sql_err(&store.path, e))?;
        store.migrate()?;
        Ok(store)
    }

    /// Opens an existing store only to read it, changing nothing, its schema included (as
    /// `muster history export` and `muster sim --history` do). A file that is not a muster store,
    /// or one whose schema a controller has not brought up to date, is refused, saying so.
    pub fn open_read_only(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        let path = path.as_ref().to_path_buf();
        let not_a_store = |why: String| StoreError::NotAStore { path: path.display().to_string(), why };
        let conn =
            Connection::open_with_flags(&path, OpenFlags::SQLITE_OPEN_READ_ONLY).map_err(|e| sql_err(&path, e))?;
        conn.busy_timeout(BUSY_TIMEOUT).map_err(|e| sql_err(&path, e))?;
        let applied = applied_versions(&conn).map_err(|e| not_a_store(e.to_string()))?;
        if !migrate::pending(SQLITE_MIGRATIONS, &applied)?.is_empty() {
            return Err(StoreError::Migration(format!(
                "{}: its schema is older than this muster's; let the controller open it once (it migrates the \
                 schema), then read it",
                path.display()
            )));
        }
        Ok(SqliteStore { conn, path })
    }

    fn configure(&self) -> rusqlite::Result<()> {
        self.conn.busy_timeout(BUSY_TIMEOUT)?;
        let mode: String = self.conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
        if !mode.eq_ignore_ascii_case("wal") {
            // e.g. an in-memory database: still correct, only without concurrent readers.
            self.conn.execute_batch("PRAGMA journal_mode = DELETE")?;
        }
        self.conn.execute_batch("PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON;")
    }

    fn migrate(&mut self) -> Result<(), StoreError> {
        let path = self.path.clone();
        let err = |e| sql_err(&path, e);
        let migration_err = |e: rusqlite::Error| StoreError::Migration(e.to_string());
        // IMMEDIATE: two instances opening one new file at once must not both apply a migration.
        let tx = self.conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(err)?;
        tx.execute_batch(
            "CREATE TABLE IF NOT EXISTS schema_migrations (
                version    INTEGER PRIMARY KEY,
                name       TEXT NOT NULL,
                applied_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP
            )",
        )
        .map_err(err)?;
        let applied = applied_versions(&tx).map_err(migration_err)?;
        for m in migrate::pending(SQLITE_MIGRATIONS, &applied)? {
            tx.execute_batch(m.sql).map_err(|e| StoreError::Migration(format!("{} {}: {e}", m.version, m.name)))?;
            tx.execute("INSERT INTO schema_migrations (version, name) VALUES (?1, ?2)", params![m.version, m.name])
                .map_err(migration_err)?;
        }
        tx.commit().map_err(err)
    }

    fn write_tx(&mut self) -> Result<Transaction<'_>, StoreError> {
        self.conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(|e| sql_err(&self.path, e))
    }
}

impl Store for SqliteStore {
    fn apply(&mut self, fence: &Fence, now: i64, batch: &[Write]) -> Result<Vec<PutResult>, StoreError> {
        let path = self.path.clone();
        let tx = self.write_tx()?;
        let lease = lease_row(&tx, &fence.name).map_err(|e| sql_err(&path, e))?;
        common::check_fence(fence, now, lease)?;
        let mut puts = Vec::new();
        for write in batch {
            if let Some(put) = apply_one(&tx, write, &path)? {
                puts.push(put);
            }
        }
        tx.commit().map_err(|e| sql_err(&path, e))?;
        Ok(puts)
    }

    fn load(&mut self) -> Result<Snapshot, StoreError> {
        let path = self.path.clone();
        let err = |e| sql_err(&path, e);
        // One read transaction: the groups and allocations come from the same commit.
        let tx = self.conn.transaction().map_err(err)?;
        let mut groups = Vec::new();
        {
            let mut stmt = tx
                .prepare_cached(
                    "SELECT key, queue, priority, submitted_at, seq, state, spec, status, requeue_count, \
                     requeue_at, version FROM groups ORDER BY seq",
                )
                .map_err(err)?;
            let mut rows = stmt.query([]).map_err(err)?;
            while let Some(row) = rows.next().map_err(err)? {
                groups.push(decode_group(row)?);
            }
        }
        let mut allocations = Vec::new();
        {
            let mut stmt = tx
                .prepare_cached(
                    "SELECT group_key, alloc_id, placement, start_at, end_at FROM allocations ORDER BY alloc_id",
                )
                .map_err(err)?;
            let mut rows = stmt.query([]).map_err(err)?;
            while let Some(row) = rows.next().map_err(err)? {
                allocations.push(decode_allocation(row)?);
            }
        }
        let mut windows_held = Vec::new();
        {
            let mut stmt = tx
                .prepare_cached(
                    "SELECT reservation, window_start, window_end, nodes FROM windows_held \
                     ORDER BY reservation, window_start",
                )
                .map_err(err)?;
            let mut rows = stmt.query([]).map_err(err)?;
            while let Some(row) = rows.next().map_err(err)? {
                windows_held.push(decode_window_held(row)?);
            }
        }
        tx.commit().map_err(err)?;
        Ok(Snapshot { groups, allocations, windows_held })
    }

    fn acquire_lease(&mut self, name: &str, holder: &str, now: i64, ttl: i64) -> Result<Option<Fence>, StoreError> {
        let path = self.path.clone();
        let err = |e| sql_err(&path, e);
        let tx = self.write_tx()?;
        tx.execute(
            "INSERT OR IGNORE INTO leases (name, holder, epoch, expires_at) VALUES (?1, '', 0, ?2)",
            params![name, FREE],
        )
        .map_err(err)?;
        let row = lease_row(&tx, name).map_err(err)?.ok_or_else(|| missing_lease(name))?;
        let Some(epoch) = common::acquire_epoch(&row, holder, now) else {
            return Ok(None);
        };
        tx.execute(
            "UPDATE leases SET holder = ?2, epoch = ?3, expires_at = ?4 WHERE name = ?1",
            params![name, holder, epoch, now.saturating_add(ttl)],
        )
        .map_err(err)?;
        tx.commit().map_err(err)?;
        Ok(Some(Fence { name: name.to_string(), holder: holder.to_string(), epoch }))
    }

    fn renew_lease(&mut self, fence: &Fence, now: i64, ttl: i64) -> Result<bool, StoreError> {
        let changed = self
            .conn
            .execute(
                "UPDATE leases SET expires_at = ?5 WHERE name = ?1 AND holder = ?2 AND epoch = ?3 AND expires_at > ?4",
                params![fence.name, fence.holder, fence.epoch, now, now.saturating_add(ttl)],
            )
            .map_err(|e| sql_err(&self.path, e))?;
        Ok(changed == 1)
    }

    fn release_lease(&mut self, fence: &Fence) -> Result<bool, StoreError> {
        let changed = self
            .conn
            .execute(
                "UPDATE leases SET expires_at = ?4 WHERE name = ?1 AND holder = ?2 AND epoch = ?3",
                params![fence.name, fence.holder, fence.epoch, FREE],
            )
            .map_err(|e| sql_err(&self.path, e))?;
        Ok(changed == 1)
    }

    fn usage_since(&mut self, queue: Option<&str>, since: i64) -> Result<Vec<UsageSum>, StoreError> {
        let path = self.path.clone();
        let err = |e| sql_err(&path, e);
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT queue, resource, SUM(amount) FROM usage WHERE at >= ?1 AND (?2 IS NULL OR queue = ?2) \
                 GROUP BY queue, resource",
            )
            .map_err(err)?;
        let mut rows = stmt.query(params![since, queue]).map_err(err)?;
        let mut sums = Sums::default();
        while let Some(row) = rows.next().map_err(err)? {
            let (queue, resource) = usage_key(row)?;
            sums.add(queue.clone(), resource, get(row, 2, "usage", &queue)?);
        }
        Ok(sums.into_vec())
    }

    fn decayed_usage(&mut self, now: i64, half_life_seconds: i64) -> Result<Vec<UsageSum>, StoreError> {
        decayed_sums(&self.conn, now, half_life_seconds, &self.path)
    }

    fn history(&mut self, group_key: &str) -> Result<Vec<HistoryEntry>, StoreError> {
        let path = self.path.clone();
        let err = |e| sql_err(&path, e);
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT at, from_state, to_state, reason, message FROM history WHERE group_key = ?1 ORDER BY id",
            )
            .map_err(err)?;
        let mut rows = stmt.query(params![group_key]).map_err(err)?;
        let mut entries = Vec::new();
        while let Some(row) = rows.next().map_err(err)? {
            entries.push(HistoryEntry {
                group_key: group_key.to_string(),
                at: get(row, 0, "history", group_key)?,
                from_state: get(row, 1, "history", group_key)?,
                to_state: get(row, 2, "history", group_key)?,
                reason: get(row, 3, "history", group_key)?,
                message: get(row, 4, "history", group_key)?,
            });
        }
        Ok(entries)
    }

    fn recent_run_times(&mut self, per_shape: usize) -> Result<Vec<RunTimeRecord>, StoreError> {
        let path = self.path.clone();
        let err = |e| sql_err(&path, e);
        let mut stmt = self.conn.prepare_cached(&common::recent_run_times_sql("?1")).map_err(err)?;
        let mut rows = stmt.query(params![common::row_limit(per_shape)]).map_err(err)?;
        let mut records = Vec::new();
        while let Some(row) = rows.next().map_err(err)? {
            let queue: String = get(row, 0, "run_times", "")?;
            records.push(RunTimeRecord {
                shape: get(row, 1, "run_times", &queue)?,
                at: get(row, 2, "run_times", &queue)?,
                seconds: get(row, 3, "run_times", &queue)?,
                queue,
            });
        }
        Ok(records)
    }

    fn runs(&mut self, since: i64, until: i64) -> Result<Vec<RunRecord>, StoreError> {
        let path = self.path.clone();
        let err = |e| sql_err(&path, e);
        let mut stmt = self.conn.prepare_cached(&common::runs_sql("?1", "?2")).map_err(err)?;
        let mut rows = stmt.query(params![since, until]).map_err(err)?;
        let mut runs = Vec::new();
        while let Some(row) = rows.next().map_err(err)? {
            let key: String = get(row, 0, "runs", "")?;
            runs.push(RunRecord {
                queue: get(row, 1, "runs", &key)?,
                priority: get(row, 2, "runs", &key)?,
                submitted_at: get(row, 3, "runs", &key)?,
                started_at: get(row, 4, "runs", &key)?,
                ended_at: get(row, 5, "runs", &key)?,
                members: get(row, 6, "runs", &key)?,
                outcome: get(row, 7, "runs", &key)?,
                request: json(row, 8, "runs", &key)?,
                group_key: key,
            });
        }
        Ok(runs)
    }
}

fn lease_row(tx: &Transaction<'_>, name: &str) -> rusqlite::Result<Option<LeaseRow>> {
    tx.prepare_cached("SELECT holder, epoch, expires_at FROM leases WHERE name = ?1")?
        .query_row(params![name], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .optional()
}

fn missing_lease(name: &str) -> StoreError {
    StoreError::Corrupt {
        table: "leases".into(),
        key: name.into(),
        message: "row vanished inside a transaction".into(),
    }
}

/// [`Store::decayed_usage`] on `conn` (the store's connection, or a transaction of it).
fn decayed_sums(conn: &Connection, now: i64, half_life_seconds: i64, path: &Path) -> Result<Vec<UsageSum>, StoreError> {
    common::check_half_life(half_life_seconds)?;
    let err = |e| sql_err(path, e);
    // The bundled SQLite has no pow(): SQL sums per timestamp, Rust applies the weights.
    let mut stmt = conn
        .prepare_cached(
            "SELECT queue, resource, at, SUM(amount) FROM usage WHERE at <= ?1 AND at >= ?2 \
             GROUP BY queue, resource, at",
        )
        .map_err(err)?;
    let mut rows = stmt.query(params![now, common::decay_horizon(now, half_life_seconds)]).map_err(err)?;
    let mut sums = Sums::default();
    while let Some(row) = rows.next().map_err(err)? {
        let (queue, resource) = usage_key(row)?;
        let at = get(row, 2, "usage", &queue)?;
        let amount = get(row, 3, "usage", &queue)?;
        sums.add_decayed(queue, resource, amount, at, now, half_life_seconds);
    }
    Ok(sums.into_vec())
}

const INSERT_USAGE: &str = "INSERT INTO usage (queue, resource, at, amount) VALUES (?1, ?2, ?3, ?4)";

fn apply_one(tx: &Transaction<'_>, write: &Write, path: &Path) -> Result<Option<PutResult>, StoreError> {
    let err = |e| sql_err(path, e);
    match write {
        Write::PutGroup { group, expected_version } => put_group(tx, group, *expected_version, path).map(Some),
        Write::DeleteGroup { key } => {
            tx.prepare_cached("DELETE FROM groups WHERE key = ?1")
                .and_then(|mut s| s.execute(params![key]))
                .map_err(err)?;
            Ok(None)
        }
        Write::PutAllocation(a) => {
            tx.prepare_cached(
                "INSERT INTO allocations (group_key, alloc_id, placement, start_at, end_at) VALUES (?1, ?2, ?3, ?4, ?5) \
                 ON CONFLICT (group_key) DO UPDATE SET alloc_id = excluded.alloc_id, placement = excluded.placement, \
                 start_at = excluded.start_at, end_at = excluded.end_at",
            )
            .and_then(|mut s| s.execute(params![a.group_key, a.alloc_id, a.placement.to_string(), a.start, a.end]))
            .map_err(err)?;
            Ok(None)
        }
        Write::DeleteAllocation { group_key } => {
            tx.prepare_cached("DELETE FROM allocations WHERE group_key = ?1")
                .and_then(|mut s| s.execute(params![group_key]))
                .map_err(err)?;
            Ok(None)
        }
        Write::AppendHistory(h) => {
            tx.prepare_cached(
                "INSERT INTO history (group_key, at, from_state, to_state, reason, message) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )
            .and_then(|mut s| s.execute(params![h.group_key, h.at, h.from_state, h.to_state, h.reason, h.message]))
            .map_err(err)?;
            Ok(None)
        }
        Write::AddUsage(UsageRecord { queue, resource, at, amount }) => {
            tx.prepare_cached(INSERT_USAGE)
                .and_then(|mut s| s.execute(params![queue, resource, at, amount]))
                .map_err(err)?;
            Ok(None)
        }
        Write::FoldUsage { at, half_life_seconds, span_seconds } => {
            let oldest: Option<i64> = tx.query_row("SELECT MIN(at) FROM usage", [], |r| r.get(0)).map_err(err)?;
            let Some(oldest) = oldest else { return Ok(None) };
            let point = (*at).min(oldest.saturating_add(*span_seconds));
            let folded = decayed_sums(tx, point, *half_life_seconds, path)?;
            tx.prepare_cached("DELETE FROM usage WHERE at <= ?1")
                .and_then(|mut s| s.execute(params![point]))
                .map_err(err)?;
            for u in folded {
                tx.prepare_cached(INSERT_USAGE)
                    .and_then(|mut s| s.execute(params![u.queue, u.resource, point, u.amount]))
                    .map_err(err)?;
            }
            Ok(None)
        }
        Write::AddRunTime(RunTimeRecord { queue, shape, at, seconds }) => {
            tx.prepare_cached("INSERT INTO run_times (queue, shape, at, seconds) VALUES (?1, ?2, ?3, ?4)")
                .and_then(|mut s| s.execute(params![queue, shape, at, seconds]))
                .map_err(err)?;
            Ok(None)
        }
        Write::PutWindowHeld(w) => {
            tx.prepare_cached(
                "INSERT INTO windows_held (reservation, window_start, window_end, nodes) VALUES (?1, ?2, ?3, ?4) \
                 ON CONFLICT (reservation, window_start) DO UPDATE SET window_end = excluded.window_end, \
                 nodes = excluded.nodes",
            )
            .and_then(|mut s| {
                s.execute(params![w.reservation, w.start, w.end, common::nodes_json(&w.nodes).to_string()])
            })
            .map_err(err)?;
            Ok(None)
        }
        Write::DeleteWindowHeld { reservation, start } => {
            tx.prepare_cached("DELETE FROM windows_held WHERE reservation = ?1 AND window_start = ?2")
                .and_then(|mut s| s.execute(params![reservation, start]))
                .map_err(err)?;
            Ok(None)
        }
        Write::AddRun(r) => {
            tx.prepare_cached(&common::insert_run_sql(|i| format!("?{i}")))
                .and_then(|mut s| {
                    s.execute(params![
                        r.group_key,
                        r.queue,
                        r.priority,
                        r.submitted_at,
                        r.started_at,
                        r.ended_at,
                        r.members,
                        r.outcome,
                        r.request.to_string()
                    ])
                })
                .map_err(err)?;
            Ok(None)
        }
    }
}

fn put_group(tx: &Transaction<'_>, g: &Group, expected: Option<i64>, path: &Path) -> Result<PutResult, StoreError> {
    let err = |e| sql_err(path, e);
    let current: Option<(i64, i64)> = tx
        .prepare_cached("SELECT seq, version FROM groups WHERE key = ?1")
        .and_then(|mut s| s.query_row(params![g.key], |r| Ok((r.get(0)?, r.get(1)?))).optional())
        .map_err(err)?;
    common::check_version(&g.key, expected, current.map_or(0, |(_, v)| v))?;
    let (seq, version) = match current {
        Some((seq, version)) => (seq, version + 1),
        None => {
            let seq = tx
                .prepare_cached("UPDATE counters SET value = value + 1 WHERE name = 'group_seq' RETURNING value")
                .and_then(|mut s| s.query_row([], |r| r.get(0)))
                .map_err(err)?;
            (seq, 1)
        }
    };
    tx.prepare_cached(
        "INSERT INTO groups (key, queue, priority, submitted_at, seq, state, spec, status, requeue_count, requeue_at, \
         version) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11) \
         ON CONFLICT (key) DO UPDATE SET queue = excluded.queue, priority = excluded.priority, \
         submitted_at = excluded.submitted_at, state = excluded.state, spec = excluded.spec, \
         status = excluded.status, requeue_count = excluded.requeue_count, requeue_at = excluded.requeue_at, \
         version = excluded.version",
    )
    .and_then(|mut s| {
        s.execute(params![
            g.key,
            g.queue,
            g.priority,
            g.submitted_at,
            seq,
            g.state,
            g.spec.to_string(),
            g.status.to_string(),
            g.requeue_count,
            g.requeue_at,
            version
        ])
    })
    .map_err(err)?;
    Ok(PutResult { key: g.key.clone(), seq, version })
}

fn decode_group(row: &Row<'_>) -> Result<StoredGroup, StoreError> {
    let key: String = get(row, 0, "groups", "?")?;
    let k = key.as_str();
    let group = Group {
        queue: get(row, 1, "groups", k)?,
        priority: get(row, 2, "groups", k)?,
        submitted_at: get(row, 3, "groups", k)?,
        state: get(row, 5, "groups", k)?,
        spec: json(row, 6, "groups", k)?,
        status: json(row, 7, "groups", k)?,
        requeue_count: get(row, 8, "groups", k)?,
        requeue_at: get(row, 9, "groups", k)?,
        key: key.clone(),
    };
    Ok(StoredGroup { seq: get(row, 4, "groups", k)?, version: get(row, 10, "groups", k)?, group })
}

fn decode_allocation(row: &Row<'_>) -> Result<Allocation, StoreError> {
    let group_key: String = get(row, 0, "allocations", "?")?;
    let k = group_key.as_str();
    Ok(Allocation {
        alloc_id: get(row, 1, "allocations", k)?,
        placement: json(row, 2, "allocations", k)?,
        start: get(row, 3, "allocations", k)?,
        end: get(row, 4, "allocations", k)?,
        group_key: group_key.clone(),
    })
}

fn decode_window_held(row: &Row<'_>) -> Result<WindowHeld, StoreError> {
    let reservation: String = get(row, 0, "windows_held", "?")?;
    let r = reservation.as_str();
    Ok(WindowHeld {
        start: get(row, 1, "windows_held", r)?,
        end: get(row, 2, "windows_held", r)?,
        nodes: common::nodes_from_json(json(row, 3, "windows_held", r)?, r)?,
        reservation: reservation.clone(),
    })
}

fn usage_key(row: &Row<'_>) -> Result<(String, String), StoreError> {
    let queue: String = get(row, 0, "usage", "?")?;
    let resource = get(row, 1, "usage", &queue)?;
    Ok((queue, resource))
}

/// Reads a column; a value of the wrong type (SQLite does not enforce column types) is a corrupt
/// row, named by table and key.
fn get<T: rusqlite::types::FromSql>(row: &Row<'_>, idx: usize, table: &str, key: &str) -> Result<T, StoreError> {
    row.get(idx).map_err(|e| corrupt(table, key, e.to_string()))
}

fn json(row: &Row<'_>, idx: usize, table: &str, key: &str) -> Result<Value, StoreError> {
    let text: String = get(row, idx, table, key)?;
    serde_json::from_str(&text).map_err(|e| corrupt(table, key, format!("column {idx}: {e}")))
}

fn corrupt(table: &str, key: &str, message: String) -> StoreError {
    StoreError::Corrupt { table: table.to_string(), key: key.to_string(), message }
}

/// The schema versions the database has applied.
fn applied_versions(conn: &Connection) -> rusqlite::Result<Vec<i64>> {
    conn.prepare("SELECT version FROM schema_migrations")?.query_map([], |r| r.get(0))?.collect()
}

fn sql_err(path: &Path, e: rusqlite::Error) -> StoreError {
    match e.sqlite_error_code() {
        Some(
            ErrorCode::DatabaseBusy
            | ErrorCode::DatabaseLocked
            | ErrorCode::SystemIoFailure
            | ErrorCode::CannotOpen
            | ErrorCode::DiskFull
            | ErrorCode::OutOfMemory
            | ErrorCode::FileLockingProtocolFailed
            | ErrorCode::ReadOnly
            | ErrorCode::PermissionDenied,
        ) => StoreError::Unavailable(format!("{}: {e}", path.display())),
        Some(ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase) => {
            StoreError::Corrupt { table: "(file)".into(), key: path.display().to_string(), message: e.to_string() }
        }
        _ => StoreError::Rejected(e.to_string()),
    }
}
