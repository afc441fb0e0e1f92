//! The PostgreSQL backend, for production and for two engine instances sharing one database.
//! The connection is re-opened on the next call after it was lost, so a database restart costs
//! the calls made while it was down (each returns Unavailable) and nothing else.

use std::time::Duration;

use postgres::error::SqlState;
use postgres::{Client, GenericClient, IsolationLevel, NoTls, Row, Statement, Transaction};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::common::{self, FREE, Sums};
use crate::migrate::{self, PG_MIGRATIONS};
use crate::pg_tls;
use crate::{
    Allocation, Fence, Group, HistoryEntry, PutResult, RunRecord, RunTimeRecord, Snapshot, Store, StoreError,
    StoredGroup, UsageRecord, UsageSum, WindowHeld, Write,
};

/// Any constant: it only has to be the same for every muster that migrates one database.
const MIGRATION_LOCK: i64 = 0x6d75_7374_6572;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A store in one PostgreSQL database.
pub struct PgStore {
    config: postgres::Config,
    /// None: `sslmode=disable`.
    tls: Option<MakeRustlsConnect>,
    conn: Option<Conn>,
}

struct Conn {
    client: Client,
    stmts: Stmts,
}

/// The statements of `apply`, prepared once per connection to save a round trip per write.
struct Stmts {
    lock_lease: Statement,
    group_version: Statement,
    next_seq: Statement,
    upsert_group: Statement,
    delete_group: Statement,
    upsert_allocation: Statement,
    delete_allocation: Statement,
    append_history: Statement,
    add_usage: Statement,
    fold_usage: Statement,
    add_run_time: Statement,
    add_run: Statement,
    put_window_held: Statement,
    delete_window_held: Statement,
}

impl PgStore {
    /// Connects with a libpq-style connection string (`host=... port=... user=... dbname=...`, or
    /// a `postgres://` URL), TLS as its `sslmode` and `sslrootcert` say (`pg_tls`), and brings
    /// the schema up to date.
    pub fn connect(params: &str) -> Result<Self, StoreError> {
        let (params, tls) = pg_tls::split(params)?;
        let mut config: postgres::Config =
            params.parse().map_err(|e| StoreError::Rejected(format!("connection string: {e}")))?;
        config.connect_timeout(CONNECT_TIMEOUT).ssl_mode(tls.wire_mode());
        let mut store = PgStore { config, tls: tls.connector()?, conn: None };
        store.with_conn(|_| Ok(()))?;
        Ok(store)
    }

    /// Runs `f` on a live connection, connecting (and migrating) first when there is none; a
    /// connection that failed is dropped so that the next call reconnects.
    fn with_conn<T>(&mut self, f: impl FnOnce(&mut Conn) -> Result<T, StoreError>) -> Result<T, StoreError> {
        let conn = match self.conn.take() {
            Some(conn) if !conn.client.is_closed() => conn,
            _ => open(&self.config, self.tls.clone())?,
        };
        let conn = self.conn.insert(conn);
        let result = f(conn);
        if matches!(result, Err(StoreError::Unavailable(_))) {
            self.conn = None;
        }
        result
    }
}

fn open(config: &postgres::Config, tls: Option<MakeRustlsConnect>) -> Result<Conn, StoreError> {
    let connected = match tls {
        Some(tls) => config.connect(tls),
        None => config.connect(NoTls),
    };
    let mut client = connected.map_err(pg_err)?;
    migrate(&mut client)?;
    let stmts = Stmts::prepare(&mut client).map_err(pg_err)?;
    Ok(Conn { client, stmts })
}

fn migrate(client: &mut Client) -> Result<(), StoreError> {
    let migration_err = |e: postgres::Error| match pg_err(e) {
        StoreError::Unavailable(m) => StoreError::Unavailable(m),
        other => StoreError::Migration(other.to_string()),
    };
    let mut tx = client.transaction().map_err(pg_err)?;
    // Two instances starting at once: the second waits, then finds everything applied.
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK]).map_err(pg_err)?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations (
            version    BIGINT PRIMARY KEY,
            name       TEXT NOT NULL,
            applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
        )",
    )
    .map_err(migration_err)?;
    let applied: Vec<i64> = tx
        .query("SELECT version FROM schema_migrations", &[])
        .map_err(migration_err)?
        .iter()
        .map(|r| r.try_get(0))
        .collect::<Result<_, _>>()
        .map_err(migration_err)?;
    for m in migrate::pending(PG_MIGRATIONS, &applied)? {
        tx.batch_execute(m.sql).map_err(|e| StoreError::Migration(format!("{} {}: {e}", m.version, m.name)))?;
        tx.execute("INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", &[&m.version, &m.name])
            .map_err(migration_err)?;
    }
    tx.commit().map_err(pg_err)
}

impl Stmts {
    fn prepare(client: &mut Client) -> Result<Self, postgres::Error> {
        Ok(Stmts {
            lock_lease: client.prepare("SELECT holder, epoch, expires_at FROM leases WHERE name = $1 FOR UPDATE")?,
            group_version: client.prepare("SELECT seq, version FROM groups WHERE key = $1")?,
            next_seq: client.prepare("SELECT nextval('group_seq')")?,
            upsert_group: client.prepare(
                "INSERT INTO groups (key, queue, priority, submitted_at, seq, state, spec, status, requeue_count, \
                 requeue_at, version) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) \
                 ON CONFLICT (key) DO UPDATE SET queue = excluded.queue, priority = excluded.priority, \
                 submitted_at = excluded.submitted_at, state = excluded.state, spec = excluded.spec, \
                 status = excluded.status, requeue_count = excluded.requeue_count, \
                 requeue_at = excluded.requeue_at, version = excluded.version",
            )?,
            delete_group: client.prepare("DELETE FROM groups WHERE key = $1")?,
            upsert_allocation: client.prepare(
                "INSERT INTO allocations (group_key, alloc_id, placement, start_at, end_at) \
                 VALUES ($1, $2, $3, $4, $5) ON CONFLICT (group_key) DO UPDATE SET alloc_id = excluded.alloc_id, \
                 placement = excluded.placement, start_at = excluded.start_at, end_at = excluded.end_at",
            )?,
            delete_allocation: client.prepare("DELETE FROM allocations WHERE group_key = $1")?,
            append_history: client.prepare(
                "INSERT INTO history (group_key, at, from_state, to_state, reason, message) \
                 VALUES ($1, $2, $3, $4, $5, $6)",
            )?,
            add_usage: client.prepare("INSERT INTO usage (queue, resource, at, amount) VALUES ($1, $2, $3, $4)")?,
            fold_usage: client.prepare("DELETE FROM usage WHERE at <= $1")?,
            add_run_time: client
                .prepare("INSERT INTO run_times (queue, shape, at, seconds) VALUES ($1, $2, $3, $4)")?,
            add_run: client.prepare(&common::insert_run_sql(|i| format!("${i}")))?,
            put_window_held: client.prepare(
                "INSERT INTO windows_held (reservation, window_start, window_end, nodes) VALUES ($1, $2, $3, $4) \
                 ON CONFLICT (reservation, window_start) DO UPDATE SET window_end = excluded.window_end, \
                 nodes = excluded.nodes",
            )?,
            delete_window_held: client
                .prepare("DELETE FROM windows_held WHERE reservation = $1 AND window_start = $2")?,
        })
    }
}

impl Store for PgStore {
    fn apply(&mut self, fence: &Fence, now: i64, batch: &[Write]) -> Result<Vec<PutResult>, StoreError> {
        self.with_conn(|c| {
            let mut tx = c.client.transaction().map_err(pg_err)?;
            // The row lock makes a concurrent acquire wait for this batch, so no batch can
            // commit after another instance took the lease.
            let lease = tx.query_opt(&c.stmts.lock_lease, &[&fence.name]).map_err(pg_err)?;
            let lease = lease.map(|r| lease_row(&r, &fence.name)).transpose()?;
            common::check_fence(fence, now, lease)?;
            let mut puts = Vec::new();
            for write in batch {
                if let Some(put) = apply_one(&mut tx, &c.stmts, write)? {
                    puts.push(put);
                }
            }
            tx.commit().map_err(pg_err)?;
            Ok(puts)
        })
    }

    fn load(&mut self) -> Result<Snapshot, StoreError> {
        self.with_conn(|c| {
            let mut tx = c
                .client
                .build_transaction()
                .isolation_level(IsolationLevel::RepeatableRead)
                .read_only(true)
                .start()
                .map_err(pg_err)?;
            let groups = tx
                .query(
                    "SELECT key, queue, priority, submitted_at, seq, state, spec, status, requeue_count, \
                     requeue_at, version FROM groups ORDER BY seq",
                    &[],
                )
                .map_err(pg_err)?
                .iter()
                .map(decode_group)
                .collect::<Result<_, _>>()?;
            let allocations = tx
                .query(
                    "SELECT group_key, alloc_id, placement, start_at, end_at FROM allocations ORDER BY alloc_id",
                    &[],
                )
                .map_err(pg_err)?
                .iter()
                .map(decode_allocation)
                .collect::<Result<_, _>>()?;
            let windows_held = tx
                .query(
                    "SELECT reservation, window_start, window_end, nodes FROM windows_held \
                     ORDER BY reservation, window_start",
                    &[],
                )
                .map_err(pg_err)?
                .iter()
                .map(decode_window_held)
                .collect::<Result<_, _>>()?;
            tx.commit().map_err(pg_err)?;
            Ok(Snapshot { groups, allocations, windows_held })
        })
    }

    fn acquire_lease(&mut self, name: &str, holder: &str, now: i64, ttl: i64) -> Result<Option<Fence>, StoreError> {
        self.with_conn(|c| {
            let mut tx = c.client.transaction().map_err(pg_err)?;
            tx.execute(
                "INSERT INTO leases (name, holder, epoch, expires_at) VALUES ($1, '', 0, $2) ON CONFLICT DO NOTHING",
                &[&name, &FREE],
            )
            .map_err(pg_err)?;
            let row = tx.query_one(&c.stmts.lock_lease, &[&name]).map_err(pg_err)?;
            let Some(epoch) = common::acquire_epoch(&lease_row(&row, name)?, holder, now) else {
                return Ok(None);
            };
            tx.execute(
                "UPDATE leases SET holder = $2, epoch = $3, expires_at = $4 WHERE name = $1",
                &[&name, &holder, &epoch, &now.saturating_add(ttl)],
            )
            .map_err(pg_err)?;
            tx.commit().map_err(pg_err)?;
            Ok(Some(Fence { name: name.to_string(), holder: holder.to_string(), epoch }))
        })
    }

    fn renew_lease(&mut self, fence: &Fence, now: i64, ttl: i64) -> Result<bool, StoreError> {
        self.with_conn(|c| {
            let changed = c
                .client
                .execute(
                    "UPDATE leases SET expires_at = $5 WHERE name = $1 AND holder = $2 AND epoch = $3 \
                     AND expires_at > $4",
                    &[&fence.name, &fence.holder, &fence.epoch, &now, &now.saturating_add(ttl)],
                )
                .map_err(pg_err)?;
            Ok(changed == 1)
        })
    }

    fn release_lease(&mut self, fence: &Fence) -> Result<bool, StoreError> {
        self.with_conn(|c| {
            let changed = c
                .client
                .execute(
                    "UPDATE leases SET expires_at = $4 WHERE name = $1 AND holder = $2 AND epoch = $3",
                    &[&fence.name, &fence.holder, &fence.epoch, &FREE],
                )
                .map_err(pg_err)?;
            Ok(changed == 1)
        })
    }

    fn usage_since(&mut self, queue: Option<&str>, since: i64) -> Result<Vec<UsageSum>, StoreError> {
        self.with_conn(|c| {
            let rows = c
                .client
                .query(
                    "SELECT queue, resource, SUM(amount) FROM usage WHERE at >= $1 \
                     AND ($2::text IS NULL OR queue = $2) GROUP BY queue, resource",
                    &[&since, &queue],
                )
                .map_err(pg_err)?;
            let mut sums = Sums::default();
            for row in &rows {
                let (queue, resource) = usage_key(row)?;
                sums.add(queue.clone(), resource, get(row, 2, "usage", &queue)?);
            }
            Ok(sums.into_vec())
        })
    }

    fn decayed_usage(&mut self, now: i64, half_life_seconds: i64) -> Result<Vec<UsageSum>, StoreError> {
        common::check_half_life(half_life_seconds)?;
        self.with_conn(|c| decayed_sums(&mut c.client, now, half_life_seconds))
    }

    fn history(&mut self, group_key: &str) -> Result<Vec<HistoryEntry>, StoreError> {
        self.with_conn(|c| {
            c.client
                .query(
                    "SELECT at, from_state, to_state, reason, message FROM history WHERE group_key = $1 ORDER BY id",
                    &[&group_key],
                )
                .map_err(pg_err)?
                .iter()
                .map(|row| {
                    Ok(HistoryEntry {
                        group_key: group_key.to_string(),
                        at: get(row, 0, "history", group_key)?,
                        from_state: get(row, 1, "history", group_key)?,
                        to_state: get(row, 2, "history", group_key)?,
                        reason: get(row, 3, "history", group_key)?,
                        message: get(row, 4, "history", group_key)?,
                    })
                })
                .collect()
        })
    }

    fn recent_run_times(&mut self, per_shape: usize) -> Result<Vec<RunTimeRecord>, StoreError> {
        self.with_conn(|c| {
            c.client
                .query(&common::recent_run_times_sql("$1"), &[&common::row_limit(per_shape)])
                .map_err(pg_err)?
                .iter()
                .map(|row| {
                    let queue: String = get(row, 0, "run_times", "")?;
                    Ok(RunTimeRecord {
                        shape: get(row, 1, "run_times", &queue)?,
                        at: get(row, 2, "run_times", &queue)?,
                        seconds: get(row, 3, "run_times", &queue)?,
                        queue,
                    })
                })
                .collect()
        })
    }

    fn runs(&mut self, since: i64, until: i64) -> Result<Vec<RunRecord>, StoreError> {
        self.with_conn(|c| {
            c.client
                .query(&common::runs_sql("$1", "$2"), &[&since, &until])
                .map_err(pg_err)?
                .iter()
                .map(|row| {
                    let key: String = get(row, 0, "runs", "")?;
                    Ok(RunRecord {
                        queue: get(row, 1, "runs", &key)?,
                        priority: get(row, 2, "runs", &key)?,
                        submitted_at: get(row, 3, "runs", &key)?,
                        started_at: get(row, 4, "runs", &key)?,
                        ended_at: get(row, 5, "runs", &key)?,
                        members: get(row, 6, "runs", &key)?,
                        outcome: get(row, 7, "runs", &key)?,
                        request: get(row, 8, "runs", &key)?,
                        group_key: key,
                    })
                })
                .collect()
        })
    }
}

/// [`Store::decayed_usage`] on `client` (a connection, or a transaction of it).
fn decayed_sums(
    client: &mut impl GenericClient,
    now: i64,
    half_life_seconds: i64,
) -> Result<Vec<UsageSum>, StoreError> {
    common::check_half_life(half_life_seconds)?;
    // Same split as SQLite (sums per timestamp in SQL, weights in Rust) so both backends return
    // bit-identical figures.
    let rows = client
        .query(
            "SELECT queue, resource, at, SUM(amount) FROM usage WHERE at <= $1 AND at >= $2 \
             GROUP BY queue, resource, at",
            &[&now, &common::decay_horizon(now, half_life_seconds)],
        )
        .map_err(pg_err)?;
    let mut sums = Sums::default();
    for row in &rows {
        let (queue, resource) = usage_key(row)?;
        let at = get(row, 2, "usage", &queue)?;
        let amount = get(row, 3, "usage", &queue)?;
        sums.add_decayed(queue, resource, amount, at, now, half_life_seconds);
    }
    Ok(sums.into_vec())
}

fn apply_one(tx: &mut Transaction<'_>, st: &Stmts, write: &Write) -> Result<Option<PutResult>, StoreError> {
    match write {
        Write::PutGroup { group, expected_version } => return put_group(tx, st, group, *expected_version).map(Some),
        Write::DeleteGroup { key } => tx.execute(&st.delete_group, &[key]),
        Write::PutAllocation(a) => {
            tx.execute(&st.upsert_allocation, &[&a.group_key, &a.alloc_id, &a.placement, &a.start, &a.end])
        }
        Write::DeleteAllocation { group_key } => tx.execute(&st.delete_allocation, &[group_key]),
        Write::AppendHistory(h) => {
            tx.execute(&st.append_history, &[&h.group_key, &h.at, &h.from_state, &h.to_state, &h.reason, &h.message])
        }
        Write::AddUsage(UsageRecord { queue, resource, at, amount }) => {
            tx.execute(&st.add_usage, &[queue, resource, at, amount])
        }
        Write::FoldUsage { at, half_life_seconds, span_seconds } => {
            let row = tx.query_one("SELECT MIN(at) FROM usage", &[]).map_err(pg_err)?;
            let Some(oldest) = get::<Option<i64>>(&row, 0, "usage", "MIN(at)")? else { return Ok(None) };
            let point = (*at).min(oldest.saturating_add(*span_seconds));
            let folded = decayed_sums(tx, point, *half_life_seconds)?;
            tx.execute(&st.fold_usage, &[&point]).map_err(pg_err)?;
            for u in folded {
                tx.execute(&st.add_usage, &[&u.queue, &u.resource, &point, &u.amount]).map_err(pg_err)?;
            }
            Ok(0)
        }
        Write::AddRunTime(RunTimeRecord { queue, shape, at, seconds }) => {
            tx.execute(&st.add_run_time, &[queue, shape, at, seconds])
        }
        Write::PutWindowHeld(w) => {
            let nodes = common::nodes_json(&w.nodes);
            tx.execute(&st.put_window_held, &[&w.reservation, &w.start, &w.end, &nodes])
        }
        Write::DeleteWindowHeld { reservation, start } => tx.execute(&st.delete_window_held, &[reservation, start]),
        Write::AddRun(r) => tx.execute(
            &st.add_run,
            &[
                &r.group_key,
                &r.queue,
                &r.priority,
                &r.submitted_at,
                &r.started_at,
                &r.ended_at,
                &r.members,
                &r.outcome,
                &r.request,
            ],
        ),
    }
    .map_err(pg_err)?;
    Ok(None)
}

fn put_group(tx: &mut Transaction<'_>, st: &Stmts, g: &Group, expected: Option<i64>) -> Result<PutResult, StoreError> {
    let current = tx.query_opt(&st.group_version, &[&g.key]).map_err(pg_err)?;
    let current: Option<(i64, i64)> = match current {
        Some(row) => Some((get(&row, 0, "groups", &g.key)?, get(&row, 1, "groups", &g.key)?)),
        None => None,
    };
    common::check_version(&g.key, expected, current.map_or(0, |(_, v)| v))?;
    let (seq, version) = match current {
        Some((seq, version)) => (seq, version + 1),
        None => (get(&tx.query_one(&st.next_seq, &[]).map_err(pg_err)?, 0, "groups", &g.key)?, 1),
    };
    tx.execute(
        &st.upsert_group,
        &[
            &g.key,
            &g.queue,
            &g.priority,
            &g.submitted_at,
            &seq,
            &g.state,
            &g.spec,
            &g.status,
            &g.requeue_count,
            &g.requeue_at,
            &version,
        ],
    )
    .map_err(pg_err)?;
    Ok(PutResult { key: g.key.clone(), seq, version })
}

fn lease_row(row: &Row, name: &str) -> Result<common::LeaseRow, StoreError> {
    Ok((get(row, 0, "leases", name)?, get(row, 1, "leases", name)?, get(row, 2, "leases", name)?))
}

fn decode_group(row: &Row) -> Result<StoredGroup, StoreError> {
    let key: String = get(row, 0, "groups", "?")?;
    let k = key.as_str();
    let group = Group {
        queue: get(row, 1, "groups", k)?,
        priority: get(row, 2, "groups", k)?,
        submitted_at: get(row, 3, "groups", k)?,
        state: get(row, 5, "groups", k)?,
        spec: get(row, 6, "groups", k)?,
        status: get(row, 7, "groups", k)?,
        requeue_count: get(row, 8, "groups", k)?,
        requeue_at: get(row, 9, "groups", k)?,
        key: key.clone(),
    };
    Ok(StoredGroup { seq: get(row, 4, "groups", k)?, version: get(row, 10, "groups", k)?, group })
}

fn decode_allocation(row: &Row) -> Result<Allocation, StoreError> {
    let group_key: String = get(row, 0, "allocations", "?")?;
    let k = group_key.as_str();
    Ok(Allocation {
        alloc_id: get(row, 1, "allocations", k)?,
        placement: get(row, 2, "allocations", k)?,
        start: get(row, 3, "allocations", k)?,
        end: get(row, 4, "allocations", k)?,
        group_key: group_key.clone(),
    })
}

fn decode_window_held(row: &Row) -> Result<WindowHeld, StoreError> {
    let reservation: String = get(row, 0, "windows_held", "?")?;
    let r = reservation.as_str();
    Ok(WindowHeld {
        start: get(row, 1, "windows_held", r)?,
        end: get(row, 2, "windows_held", r)?,
        nodes: common::nodes_from_json(get(row, 3, "windows_held", r)?, r)?,
        reservation: reservation.clone(),
    })
}

fn usage_key(row: &Row) -> Result<(String, String), StoreError> {
    let queue: String = get(row, 0, "usage", "?")?;
    let resource = get(row, 1, "usage", &queue)?;
    Ok((queue, resource))
}

/// Reads a column; a value that does not decode (e.g. after someone changed a column's type) is a
/// corrupt row, named by table and key.
fn get<'a, T: postgres::types::FromSql<'a>>(row: &'a Row, idx: usize, table: &str, key: &str) -> Result<T, StoreError> {
    row.try_get(idx).map_err(|e| StoreError::Corrupt {
        table: table.to_string(),
        key: key.to_string(),
        message: format!("column {idx}: {e}"),
    })
}

/// Connection trouble and transient server states are retryable; everything else the server
/// said is a refusal of the batch.
fn pg_err(e: postgres::Error) -> StoreError {
    let Some(db) = e.as_db_error() else {
        // No server answer: the connection failed or was lost. The causes say why (a TLS
        // handshake's names the certificate's fault).
        let mut message = e.to_string();
        let mut cause = std::error::Error::source(&e);
        while let Some(c) = cause {
            message = format!("{message}: {c}");
            cause = c.source();
        }
        return StoreError::Unavailable(message);
    };
    let code = db.code();
    let retryable = code.code().starts_with("08")
        || code.code().starts_with("53")
        || [
            SqlState::ADMIN_SHUTDOWN,
            SqlState::CRASH_SHUTDOWN,
            SqlState::CANNOT_CONNECT_NOW,
            SqlState::T_R_SERIALIZATION_FAILURE,
            SqlState::T_R_DEADLOCK_DETECTED,
            SqlState::LOCK_NOT_AVAILABLE,
            SqlState::READ_ONLY_SQL_TRANSACTION,
        ]
        .contains(code);
    if retryable { StoreError::Unavailable(e.to_string()) } else { StoreError::Rejected(e.to_string()) }
}
