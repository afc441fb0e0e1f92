//! The two backends behind one fixture, so that every test of `suite` runs against both.

use std::path::PathBuf;
use std::process::{Child, Command};

use muster_store::testing::{PgServer, TempDir};
use muster_store::{Fence, Group, PG_MIGRATIONS, PgStore, SQLITE_MIGRATIONS, SqliteStore, Store, StoreError, Write};
use serde_json::json;

/// A fresh, empty database of one backend, and raw access to it for set-up that the store
/// itself would refuse (old schemas, corrupt rows).
pub trait Backend {
    type S: Store + Send;
    /// A new connection ("instance") to this database.
    fn open_result(&self) -> Result<Self::S, StoreError>;
    fn open(&self) -> Self::S {
        self.open_result().unwrap()
    }
    /// Runs SQL through a raw connection.
    fn exec(&self, sql: &str);
    /// `schema_migrations` as (version, name, applied_at).
    fn migrations(&self) -> Vec<(i64, String, String)>;
    /// Creates the schema of migration 1 only, as an older muster would have left it.
    fn create_v1_schema(&self);
    /// Makes the stored row of group `key` undecodable.
    fn corrupt_group(&self, key: &str);
    /// What a child process needs to open this database (see `spawn_writer`).
    fn child_target(&self) -> String;
}

pub struct Sqlite {
    dir: TempDir,
}

impl Sqlite {
    pub fn new() -> Self {
        Sqlite { dir: TempDir::new("muster-store-test") }
    }

    pub fn path(&self) -> PathBuf {
        self.dir.0.join("muster.db")
    }

    fn raw(&self) -> rusqlite::Connection {
        rusqlite::Connection::open(self.path()).unwrap()
    }
}

impl Backend for Sqlite {
    type S = SqliteStore;

    fn open_result(&self) -> Result<SqliteStore, StoreError> {
        SqliteStore::open(self.path())
    }

    fn exec(&self, sql: &str) {
        self.raw().execute_batch(sql).unwrap();
    }

    fn migrations(&self) -> Vec<(i64, String, String)> {
        let conn = self.raw();
        let mut stmt =
            conn.prepare("SELECT version, name, applied_at FROM schema_migrations ORDER BY version").unwrap();
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).unwrap().map(Result::unwrap).collect()
    }

    fn create_v1_schema(&self) {
        self.exec(
            "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, \
             applied_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP)",
        );
        self.exec(SQLITE_MIGRATIONS[0].sql);
        self.exec("INSERT INTO schema_migrations (version, name) VALUES (1, 'init')");
    }

    fn corrupt_group(&self, key: &str) {
        self.raw().execute("UPDATE groups SET spec = 'not json {' WHERE key = ?1", [key]).unwrap();
    }

    fn child_target(&self) -> String {
        format!("sqlite:{}", self.path().display())
    }
}

pub struct Pg {
    params: String,
}

impl Pg {
    pub fn new() -> Self {
        Pg { params: PgServer::shared().create_database().unwrap() }
    }

    fn raw(&self) -> postgres::Client {
        postgres::Client::connect(&self.params, postgres::NoTls).unwrap()
    }
}

impl Backend for Pg {
    type S = PgStore;

    fn open_result(&self) -> Result<PgStore, StoreError> {
        PgStore::connect(&self.params)
    }

    fn exec(&self, sql: &str) {
        self.raw().batch_execute(sql).unwrap();
    }

    fn migrations(&self) -> Vec<(i64, String, String)> {
        let rows = self
            .raw()
            .query("SELECT version, name, applied_at::text FROM schema_migrations ORDER BY version", &[])
            .unwrap();
        rows.iter().map(|r| (r.get(0), r.get(1), r.get(2))).collect()
    }

    fn create_v1_schema(&self) {
        self.exec(
            "CREATE TABLE schema_migrations (version BIGINT PRIMARY KEY, name TEXT NOT NULL, \
             applied_at TIMESTAMPTZ NOT NULL DEFAULT now())",
        );
        self.exec(PG_MIGRATIONS[0].sql);
        self.exec("INSERT INTO schema_migrations (version, name) VALUES (1, 'init')");
    }

    fn corrupt_group(&self, key: &str) {
        // Postgres keeps JSON valid; what can break a row is a column changed under the store.
        self.exec("ALTER TABLE groups ALTER COLUMN priority TYPE text USING 'high'");
        assert_eq!(self.raw().execute("SELECT 1 FROM groups WHERE key = $1", &[&key]).unwrap(), 1);
    }

    fn child_target(&self) -> String {
        format!("pg:{}", self.params)
    }
}

/// Opens the store a child process was pointed at.
pub fn open_target(target: &str) -> Box<dyn Store> {
    match target.split_once(':') {
        Some(("sqlite", path)) => Box::new(SqliteStore::open(path).unwrap()),
        Some(("pg", params)) => Box::new(PgStore::connect(params).unwrap()),
        _ => panic!("unknown target {target}"),
    }
}

/// The environment variable that turns `child_writer` into a writer of `target`.
pub const CHILD_ENV: &str = "MUSTER_STORE_CHILD_TARGET";

/// Re-runs this test binary as a child process that only runs the `child_writer` test.
pub fn spawn_writer(target: &str) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["child_writer", "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, target)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

pub fn group(key: &str, state: &str) -> Group {
    Group {
        key: key.to_string(),
        queue: "default".to_string(),
        priority: 0,
        submitted_at: 10,
        state: state.to_string(),
        spec: json!({"members": 4, "request": {"cpu": "2"}}),
        status: json!({"reason": "waiting"}),
        requeue_count: 0,
        requeue_at: None,
    }
}

pub fn put(group: Group, expected_version: Option<i64>) -> Write {
    Write::PutGroup { group, expected_version }
}

/// Lease `engine` for holder `a` from t=0 to t=1000.
pub fn lead<S: Store>(store: &mut S) -> Fence {
    store.acquire_lease("engine", "a", 0, 1000).unwrap().expect("lease free")
}
