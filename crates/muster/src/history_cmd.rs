//! `muster history export`: the runs muster's store recorded, as JSON Lines that `muster sim`
//! replays (a scenario's `history` section, or `muster sim --history`). Names are hidden by
//! default: an export can leave the cluster.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use muster_sim::history::{self, RecordedRun};
use muster_store::{PgStore, RunRecord, SqliteStore, Store, StoreUrl};

use crate::cluster_cmd::emit;
use crate::store_url;

#[derive(clap::Args)]
pub struct ExportArgs {
    /// The store to read (`sqlite:PATH` or a PostgreSQL URL); default: --store-url-file,
    /// $MUSTER_STORE_URL, then sqlite:muster.db.
    #[arg(long)]
    store: Option<String>,
    /// A file holding the store URL (keeps a password off the command line).
    #[arg(long)]
    store_url_file: Option<PathBuf>,
    /// Only runs that ended at or after this Unix second.
    #[arg(long, default_value_t = 0)]
    since: i64,
    /// Only runs that ended before this Unix second.
    #[arg(long, default_value_t = i64::MAX)]
    until: i64,
    /// Keep group names as they are (by default each is replaced by a hash keyed afresh for
    /// every export).
    #[arg(long)]
    keep_names: bool,
    /// Hide queue names too (kept by default, so that a replay can give them quotas).
    #[arg(long)]
    hide_queues: bool,
}

pub fn export(args: &ExportArgs) -> Result<ExitCode> {
    let url =
        store_url::resolve(args.store.as_deref(), args.store_url_file.as_deref(), std::env::var(store_url::ENV).ok())?;
    let mut runs = read_runs(&url, args.since, args.until)?;
    if !args.keep_names {
        history::hide_names(&mut runs, args.hide_queues);
    } else if args.hide_queues {
        bail!("--keep-names and --hide-queues together: hide the queues' names only with the groups' hidden too");
    }
    emit(history::write(&runs).trim_end())?;
    Ok(ExitCode::SUCCESS)
}

/// Is `source` a store URL rather than a file of exported runs?
pub fn is_store_url(source: &str) -> bool {
    StoreUrl::parse(source).is_some()
}

/// The runs that ended in `[since, until)` in the store at `url`, with their names.
pub fn read_runs(url: &str, since: i64, until: i64) -> Result<Vec<RecordedRun>> {
    let records = match StoreUrl::parse(url) {
        Some(StoreUrl::Sqlite(path)) => {
            if !Path::new(&path).exists() {
                bail!("store {url}: no such file; name the controller's store (its --store)");
            }
            SqliteStore::open_read_only(&path)?.runs(since, until)?
        }
        Some(StoreUrl::Postgres(url)) => PgStore::connect(&url)?.runs(since, until)?,
        None => bail!("store {url}: not a store URL; give sqlite:PATH or a PostgreSQL URL"),
    };
    records.into_iter().map(recorded).collect()
}

fn recorded(r: RunRecord) -> Result<RecordedRun> {
    let request = serde_json::from_value(r.request)
        .with_context(|| format!("run of {} ending at {}: its request cannot be read", r.group_key, r.ended_at))?;
    Ok(RecordedRun {
        group: r.group_key,
        queue: r.queue,
        priority: i32::try_from(r.priority).unwrap_or(0),
        submitted: r.submitted_at,
        started: r.started_at,
        ended: r.ended_at,
        members: u32::try_from(r.members).unwrap_or(0),
        outcome: r.outcome,
        request,
    })
}
