//! muster-store: the durable store of the queue engine.
//!
//! The store persists rows whose payloads (`spec`, `status`, `placement`) are JSON values written by
//! the engine; it knows nothing of scheduling rules. Every method is synchronous (the async
//! controller calls it through `spawn_blocking`). One trait, [`Store`], has two implementations:
//! [`SqliteStore`] (an embedded file) and [`PgStore`] (PostgreSQL). Writes go through
//! [`Store::apply`]: one batch is one transaction, and it lands only while the caller holds the
//! leader lease named by its [`Fence`], so two engine instances on one database never both write.

mod common;
mod error;
mod migrate;
mod pg;
pub mod pg_tls;
mod sqlite;
#[cfg(feature = "test-support")]
pub mod testing;

pub use error::StoreError;
pub use migrate::{Migration, PG_MIGRATIONS, SQLITE_MIGRATIONS};
pub use pg::PgStore;
pub use sqlite::SqliteStore;

use serde_json::Value;

/// The backend a store URL names: `sqlite:PATH`, or PostgreSQL (a `postgres://` URL or a
/// `host=... dbname=...` key-value string).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreUrl {
    Sqlite(String),
    Postgres(String),
}

impl StoreUrl {
    /// None when `url` names neither backend.
    pub fn parse(url: &str) -> Option<Self> {
        match url.strip_prefix("sqlite:") {
            Some(path) => Some(StoreUrl::Sqlite(path.to_string())),
            None if url.starts_with("postgres") || url.contains("host=") => Some(StoreUrl::Postgres(url.to_string())),
            None => None,
        }
    }
}

/// A group as the engine writes it. `seq` and `version` are assigned by the store (see
/// [`StoredGroup`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Group {
    /// `namespace/name`.
    pub key: String,
    pub queue: String,
    pub priority: i64,
    /// Seconds.
    pub submitted_at: i64,
    pub state: String,
    pub spec: Value,
    pub status: Value,
    pub requeue_count: i64,
    pub requeue_at: Option<i64>,
}

/// A group as stored: with its submit order and its version for optimistic concurrency.
#[derive(Clone, Debug, PartialEq)]
pub struct StoredGroup {
    pub group: Group,
    /// Monotonic submit order, assigned when the key is first written and kept on updates.
    pub seq: i64,
    /// 1 when created, +1 on every put.
    pub version: i64,
}

/// The placement of an admitted group. Written in the same batch as the group's admitted state.
#[derive(Clone, Debug, PartialEq)]
pub struct Allocation {
    pub group_key: String,
    pub alloc_id: i64,
    /// Member -> node and devices, as the engine encodes it.
    pub placement: Value,
    pub start: i64,
    pub end: Option<i64>,
}

/// One state transition of a group; history is append-only and outlives the group.
#[derive(Clone, Debug, PartialEq)]
pub struct HistoryEntry {
    pub group_key: String,
    pub at: i64,
    /// `None` for the first state of a group.
    pub from_state: Option<String>,
    pub to_state: String,
    pub reason: String,
    pub message: String,
}

/// Resource-seconds consumed by a queue, recorded at time `at`.
#[derive(Clone, Debug, PartialEq)]
pub struct UsageRecord {
    pub queue: String,
    pub resource: String,
    pub at: i64,
    pub amount: f64,
}

/// A sum of usage for one (queue, resource).
#[derive(Clone, Debug, PartialEq)]
pub struct UsageSum {
    pub queue: String,
    pub resource: String,
    pub amount: f64,
}

/// How long a group that declared no run time held its nodes (seconds, at its full size),
/// recorded at time `at`. `shape` is the engine's stable hash of the group's request.
#[derive(Clone, Debug, PartialEq)]
pub struct RunTimeRecord {
    pub queue: String,
    pub shape: i64,
    pub at: i64,
    pub seconds: i64,
}

/// One placement of a group that ended: what it asked and when it ran. `outcome` is the state
/// the placement ended in (`Succeeded`, `Failed`, `Evicted`, ...).
#[derive(Clone, Debug, PartialEq)]
pub struct RunRecord {
    /// `namespace/name`.
    pub group_key: String,
    pub queue: String,
    pub priority: i64,
    pub submitted_at: i64,
    pub started_at: i64,
    pub ended_at: i64,
    /// Members it held when it ended.
    pub members: i64,
    pub outcome: String,
    /// The group's request, as the engine writes it.
    pub request: Value,
}

/// The nodes a window of a calendar reservation holds its room on, kept so that a restart makes
/// the window again there, its users' work inside it, rather than on other nodes beside that work.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WindowHeld {
    pub reservation: String,
    /// The window, seconds.
    pub start: i64,
    pub end: i64,
    pub nodes: Vec<String>,
}

/// One write of a batch.
#[derive(Clone, Debug, PartialEq)]
pub enum Write {
    /// Create or replace a group. With `expected_version: Some(v)` the stored version must be `v`
    /// (`Some(0)`: the key must not exist), else the whole batch fails with
    /// [`StoreError::Conflict`]. `None` writes unconditionally.
    PutGroup {
        group: Group,
        expected_version: Option<i64>,
    },
    /// Removes the group and its allocation; history stays. Absent keys are ignored.
    DeleteGroup {
        key: String,
    },
    /// Create or replace the allocation of an existing group.
    PutAllocation(Allocation),
    DeleteAllocation {
        group_key: String,
    },
    AppendHistory(HistoryEntry),
    AddUsage(UsageRecord),
    /// Replaces the usage recorded at or before a point with one record per (queue, resource) at
    /// that point: what [`Store::decayed_usage`] with this half-life sums there. Its sums from
    /// then on stay the same (to rounding); records it no longer reads go. The point is `at`, or
    /// `span_seconds` after the oldest record if that is sooner, so that one batch reads a
    /// bounded stretch of records however many have piled up. [`Store::usage_since`] then counts
    /// the folded records decayed to the point.
    FoldUsage {
        at: i64,
        half_life_seconds: i64,
        span_seconds: i64,
    },
    AddRunTime(RunTimeRecord),
    AddRun(RunRecord),
    /// Create or replace the nodes of a reservation's window (keyed by reservation and start).
    PutWindowHeld(WindowHeld),
    /// Absent keys are ignored.
    DeleteWindowHeld {
        reservation: String,
        start: i64,
    },
}

/// Proof of leadership: writes carry it and land only while it is still the lease's current
/// holder and epoch and the lease has not expired.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fence {
    pub name: String,
    pub holder: String,
    /// Incremented every time the lease changes hands (or is taken again after it lapsed).
    pub epoch: i64,
}

/// The seq and new version of each group a batch put, in batch order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PutResult {
    pub key: String,
    pub seq: i64,
    pub version: i64,
}

/// Everything the engine needs to rebuild its state at start-up.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Snapshot {
    /// Ordered by `seq`.
    pub groups: Vec<StoredGroup>,
    /// Ordered by `alloc_id`.
    pub allocations: Vec<Allocation>,
    /// Ordered by reservation, then start.
    pub windows_held: Vec<WindowHeld>,
}

/// The durable store. Times are seconds, passed in by the caller (the store never reads a clock).
/// Every method returns a [`StoreError`] instead of panicking.
pub trait Store {
    /// Applies `batch` as one transaction, after checking under a lock that `fence` still holds
    /// its lease at time `now`. All of the batch lands, or none of it.
    fn apply(&mut self, fence: &Fence, now: i64, batch: &[Write]) -> Result<Vec<PutResult>, StoreError>;

    /// Reads every group and allocation in one consistent read.
    fn load(&mut self) -> Result<Snapshot, StoreError>;

    /// Takes lease `name` for `holder` until `now + ttl` if it is free, expired, or already held by
    /// `holder` (then it is extended with the same epoch). `None` if another holder has it.
    fn acquire_lease(&mut self, name: &str, holder: &str, now: i64, ttl: i64) -> Result<Option<Fence>, StoreError>;

    /// Extends the lease to `now + ttl`; `false` if the fence no longer holds it (expired or taken).
    fn renew_lease(&mut self, fence: &Fence, now: i64, ttl: i64) -> Result<bool, StoreError>;

    /// Gives the lease up at once so another instance can take it; `false` if it was not held.
    fn release_lease(&mut self, fence: &Fence) -> Result<bool, StoreError>;

    /// Usage recorded at or after `since`, summed per (queue, resource), for one queue or all;
    /// ordered by queue then resource.
    fn usage_since(&mut self, queue: Option<&str>, since: i64) -> Result<Vec<UsageSum>, StoreError>;

    /// Usage up to `now`, each record weighted by `0.5^((now - at) / half_life_seconds)`, summed per
    /// (queue, resource); ordered by queue then resource.
    fn decayed_usage(&mut self, now: i64, half_life_seconds: i64) -> Result<Vec<UsageSum>, StoreError>;

    /// The history of one group, oldest first.
    fn history(&mut self, group_key: &str) -> Result<Vec<HistoryEntry>, StoreError>;

    /// The latest `per_shape` run times of each (queue, shape), oldest first within each.
    fn recent_run_times(&mut self, per_shape: usize) -> Result<Vec<RunTimeRecord>, StoreError>;

    /// The runs that ended in `[since, until)`, by end then as written.
    fn runs(&mut self, since: i64, until: i64) -> Result<Vec<RunRecord>, StoreError>;
}

#[cfg(test)]
mod tests {
    use super::StoreUrl;

    #[test]
    fn a_store_url_names_its_backend() {
        assert_eq!(StoreUrl::parse("sqlite:/var/lib/muster.db"), Some(StoreUrl::Sqlite("/var/lib/muster.db".into())));
        let pg = "postgres://muster@db/muster";
        assert_eq!(StoreUrl::parse(pg), Some(StoreUrl::Postgres(pg.into())));
        assert_eq!(StoreUrl::parse("host=db dbname=muster"), Some(StoreUrl::Postgres("host=db dbname=muster".into())));
        assert_eq!(StoreUrl::parse("muster.db"), None);
    }
}
