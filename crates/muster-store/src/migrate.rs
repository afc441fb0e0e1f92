//! Versioned schema migrations: numbered SQL files per backend, applied in order at open. The
//! versions applied are recorded in `schema_migrations`, so an open applies only what is missing.

use crate::StoreError;

/// One schema step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Migration {
    pub version: i64,
    pub name: &'static str,
    pub sql: &'static str,
}

pub const SQLITE_MIGRATIONS: &[Migration] = &[
    Migration { version: 1, name: "init", sql: include_str!("../migrations/sqlite/0001_init.sql") },
    Migration { version: 2, name: "usage", sql: include_str!("../migrations/sqlite/0002_usage.sql") },
    Migration { version: 3, name: "run_times", sql: include_str!("../migrations/sqlite/0003_run_times.sql") },
    Migration { version: 4, name: "runs", sql: include_str!("../migrations/sqlite/0004_runs.sql") },
    Migration { version: 5, name: "windows_held", sql: include_str!("../migrations/sqlite/0005_windows_held.sql") },
];

pub const PG_MIGRATIONS: &[Migration] = &[
    Migration { version: 1, name: "init", sql: include_str!("../migrations/postgres/0001_init.sql") },
    Migration { version: 2, name: "usage", sql: include_str!("../migrations/postgres/0002_usage.sql") },
    Migration { version: 3, name: "run_times", sql: include_str!("../migrations/postgres/0003_run_times.sql") },
    Migration { version: 4, name: "runs", sql: include_str!("../migrations/postgres/0004_runs.sql") },
    Migration { version: 5, name: "windows_held", sql: include_str!("../migrations/postgres/0005_windows_held.sql") },
];

/// The migrations still to apply, given the versions already applied. A database written by a
/// newer muster (a version this build does not know) is refused rather than used half-understood.
pub(crate) fn pending<'m>(all: &'m [Migration], applied: &[i64]) -> Result<Vec<&'m Migration>, StoreError> {
    if let Some(unknown) = applied.iter().find(|v| !all.iter().any(|m| m.version == **v)) {
        let known = all.last().map_or(0, |m| m.version);
        return Err(StoreError::Migration(format!(
            "the database has schema version {unknown}, which this muster does not know (it knows up to {known})"
        )));
    }
    Ok(all.iter().filter(|m| !applied.contains(&m.version)).collect())
}
