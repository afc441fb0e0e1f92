//! Decisions shared by both backends, so that SQLite and PostgreSQL behave the same.

use std::collections::BTreeMap;

use crate::{Fence, StoreError, UsageSum};

/// `expires_at` of a lease nobody holds: expired at any time.
pub(crate) const FREE: i64 = i64::MIN;

/// A lease row as stored: (holder, epoch, expires_at).
pub(crate) type LeaseRow = (String, i64, i64);

/// Checks, on the locked lease row, that `fence` still holds the lease at `now`.
pub(crate) fn check_fence(fence: &Fence, now: i64, row: Option<LeaseRow>) -> Result<(), StoreError> {
    match row {
        Some((holder, epoch, expires_at)) if holder == fence.holder && epoch == fence.epoch && expires_at > now => {
            Ok(())
        }
        _ => Err(StoreError::Fenced { name: fence.name.clone(), holder: fence.holder.clone(), epoch: fence.epoch }),
    }
}

/// What an acquire does with the locked lease row: the epoch to write, or `None` to refuse.
/// The holder keeps its epoch while its lease runs; any hand-over (even back to the same holder
/// after a lapse) takes a new epoch, so writes fenced by the old epoch can never land again.
pub(crate) fn acquire_epoch(row: &LeaseRow, holder: &str, now: i64) -> Option<i64> {
    let (current, epoch, expires_at) = row;
    if *expires_at <= now {
        Some(epoch + 1)
    } else if current == holder {
        Some(*epoch)
    } else {
        None
    }
}

/// Checks a put's expected version against the stored one (0 when the key is absent).
pub(crate) fn check_version(key: &str, expected: Option<i64>, found: i64) -> Result<(), StoreError> {
    match expected {
        Some(expected) if expected != found => Err(StoreError::Conflict { key: key.to_string(), expected, found }),
        _ => Ok(()),
    }
}

pub(crate) fn check_half_life(half_life_seconds: i64) -> Result<(), StoreError> {
    if half_life_seconds > 0 {
        Ok(())
    } else {
        Err(StoreError::Rejected(format!("half-life must be positive, got {half_life_seconds} s")))
    }
}

/// Records older than this many half-lives weigh less than 2^-64 and are not read.
const HORIZON_HALF_LIVES: i64 = 64;

/// The oldest `at` a decayed sum reads.
pub(crate) fn decay_horizon(now: i64, half_life_seconds: i64) -> i64 {
    now.saturating_sub(half_life_seconds.saturating_mul(HORIZON_HALF_LIVES))
}

/// Accumulates sums per (queue, resource), in a fixed order independent of database collation.
#[derive(Default)]
pub(crate) struct Sums(BTreeMap<(String, String), f64>);

impl Sums {
    pub(crate) fn add(&mut self, queue: String, resource: String, amount: f64) {
        *self.0.entry((queue, resource)).or_default() += amount;
    }

    /// Adds `amount` recorded at `at`, weighted by its age at `now`.
    pub(crate) fn add_decayed(&mut self, queue: String, resource: String, amount: f64, at: i64, now: i64, half: i64) {
        let age = (now - at) as f64 / half as f64;
        self.add(queue, resource, amount * 0.5f64.powf(age));
    }

    pub(crate) fn into_vec(self) -> Vec<UsageSum> {
        self.0.into_iter().map(|((queue, resource), amount)| UsageSum { queue, resource, amount }).collect()
    }
}

/// The latest `param` rows of each (queue, shape) of `run_times`, oldest first within each: one
/// query for both backends, `param` being the backend's first placeholder (`?1`, `$1`).
pub(crate) fn recent_run_times_sql(param: &str) -> String {
    format!(
        "SELECT queue, shape, at, seconds FROM (SELECT queue, shape, at, seconds, id, \
         ROW_NUMBER() OVER (PARTITION BY queue, shape ORDER BY at DESC, id DESC) AS n FROM run_times) AS latest \
         WHERE n <= {param} ORDER BY queue, shape, at, id"
    )
}

/// A row count as SQL takes it.
pub(crate) fn row_limit(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The columns of `runs`, in the order [`run_from`] readers take them.
pub(crate) const RUN_COLUMNS: &str =
    "group_key, queue, priority, submitted_at, started_at, ended_at, members, outcome, request";

/// The runs that ended in `[since, until)`, by end then as written; `since`/`until` are the
/// backend's placeholders.
pub(crate) fn runs_sql(since: &str, until: &str) -> String {
    format!("SELECT {RUN_COLUMNS} FROM runs WHERE ended_at >= {since} AND ended_at < {until} ORDER BY ended_at, id")
}

/// `INSERT` of one run with the backend's placeholders `p(1)..p(9)`.
pub(crate) fn insert_run_sql(p: impl Fn(usize) -> String) -> String {
    let values: Vec<String> = (1..=9).map(p).collect();
    format!("INSERT INTO runs ({RUN_COLUMNS}) VALUES ({})", values.join(", "))
}

/// A window's nodes as stored: a JSON array of node names.
pub(crate) fn nodes_json(nodes: &[String]) -> serde_json::Value {
    serde_json::Value::from(nodes.to_vec())
}

/// A window's nodes read back; anything but an array of strings is a corrupt row.
pub(crate) fn nodes_from_json(v: serde_json::Value, reservation: &str) -> Result<Vec<String>, StoreError> {
    serde_json::from_value(v).map_err(|e| StoreError::Corrupt {
        table: "windows_held".into(),
        key: reservation.to_string(),
        message: format!("nodes: {e}"),
    })
}
