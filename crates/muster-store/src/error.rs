use thiserror::Error;

/// Why a store call failed. Only [`StoreError::Unavailable`] is worth retrying as is.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum StoreError {
    /// The database cannot be reached or is busy (connection refused or lost, I/O error, lock
    /// timeout). Nothing of the failed call was written; retry later.
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// The caller no longer holds the lease it wrote under; nothing was written.
    #[error("fenced: {holder} does not hold lease {name} at epoch {epoch}")]
    Fenced { name: String, holder: String, epoch: i64 },
    /// A put's expected version did not match (`found` 0: the key is absent); nothing of the batch
    /// was written.
    #[error("conflict on group {key}: expected version {expected}, found {found}")]
    Conflict { key: String, expected: i64, found: i64 },
    /// A stored row (or the database file) cannot be decoded.
    #[error("corrupt row in {table} (key {key}): {message}")]
    Corrupt { table: String, key: String, message: String },
    /// A file opened to be read is not a muster store.
    #[error("{path} is not a muster store ({why}); name the file the controller's --store writes")]
    NotAStore { path: String, why: String },
    /// The schema could not be brought up to date.
    #[error("migration failed: {0}")]
    Migration(String),
    /// The database refused a write (a constraint such as an allocation for an unknown group or a
    /// duplicate alloc_id); nothing of the batch was written. Retrying the same batch fails again.
    #[error("batch rejected: {0}")]
    Rejected(String),
}
