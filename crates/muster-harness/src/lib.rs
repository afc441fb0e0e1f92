//! muster's real-cluster harness (not published): what hack/sim-vs-real.sh, hack/e2e/test-scale.sh
//! and hack/bench-bind.sh run against a control plane, on kube-rs, and the scenario Jobs for muster
//! and each real peer (docs/peers.md).
//!
//! - [`workload`]: a scenario's jobs as muster-sim's own generator draws them
//!   (`muster_sim::scenario::load`), and the batch/v1 Jobs they become.
//! - [`peers`]: those Jobs decorated for the scheduler that runs them, with the companion objects
//!   it needs, so muster and every real peer get the same Jobs (`--peer` of `objects` and `run`):
//!   `default` (plain Jobs), `muster` (`muster.dev/queue`, declared run time; `--queue` alone),
//!   `kueue` (suspended, `kueue.x-k8s.io/queue-name`; `objects --peer kueue --setup` prints the
//!   ResourceFlavor, the ClusterQueue with the scenario cluster's allocatable x
//!   `kueue.quotaFactor` and the LocalQueue), `coscheduling` (a scheduler-plugins PodGroup per
//!   Job), `volcano` (`schedulerName: volcano`, `group-min-member`) and `native` (kube-scheduler
//!   1.37's Workload and PodGroup per Job). Companions come before their Job; elastic jobs get
//!   each peer's own minimum (the module says what each peer does not support).
//! - [`peer_sets`]: a job of several member sets (a launcher beside its workers) as each peer's
//!   users submit one: a JobSet (muster, Kueue), a Volcano Job of a task per set, a Job per set
//!   in one gang (coscheduling, native).
//! - [`job_groups`]: the Jobs of a job of several sets read as the one Job `run` measures.
//! - [`tenants`]: a scenario's tenants (queues with quotas in cohorts) as muster's, Kueue's and
//!   Volcano's own objects, a namespace per tenant.
//! - [`tenant_figures`]: per tenant, a real run's shortfall, wait within quota, work lost and
//!   evictions, measured by the simulator's own code.
//! - [`simreal`]: those Jobs created at their submit times on a real cluster, the control plane's
//!   rates on a calibration burst, the comparison with `muster sim`, kube-scheduler's metrics.
//! - [`outcome`]: what a real run's Jobs went through: waits, bounded slowdown, topology spread.
//! - [`occupancy`]: how a real run used the cluster (GPU, cpu and memory held; held by jobs not
//!   yet running), as `muster sim` reports it.
//! - [`timeline`]: where a real run's time went, job by job (pods made, bound, Ready, ended).
//! - [`summary`]: the real runs of one scenario as one table, each figure with its spread.
//! - [`scale`]: seed 002's scale experiment and the bind-rate bursts, followed through watches.
//! - [`overcommit`]: the e2e tests' over-commit checker: no node ever has more requested by its
//!   bound pods than it has allocatable (its own quantity parser, apart from muster's).
//!
//! Quantities are parsed by muster's own parser (`muster_graph::resources`).

pub mod cluster;
pub mod job_groups;
pub mod occupancy;
pub mod outcome;
pub mod overcommit;
pub mod peer_sets;
pub mod peers;
pub mod scale;
pub mod simreal;
pub mod stats;
pub mod summary;
pub mod tenant_figures;
pub mod tenants;
pub mod timeline;
pub mod workload;

/// Why a harness command failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    Input(String),
    #[error(transparent)]
    Sim(#[from] muster_sim::SimError),
    #[error("{path}: {message}")]
    File { path: String, message: String },
    #[error("{what}: {source}")]
    Kube { what: String, source: kube::Error },
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub(crate) fn file(path: &std::path::Path, e: impl std::fmt::Display) -> Self {
        Error::File { path: path.display().to_string(), message: e.to_string() }
    }

    pub(crate) fn kube(what: impl Into<String>) -> impl FnOnce(kube::Error) -> Self {
        let what = what.into();
        move |source| Error::Kube { what, source }
    }
}

/// Reads a JSON file into `T`.
pub fn read_json<T: serde::de::DeserializeOwned>(path: &std::path::Path) -> Result<T> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::file(path, e))?;
    serde_json::from_str(&text).map_err(|e| Error::file(path, e))
}

/// Writes `value` as JSON indented by `indent` spaces, with a final newline.
pub fn write_json<T: serde::Serialize>(path: &std::path::Path, value: &T, indent: usize) -> Result<()> {
    let mut out = Vec::new();
    let fmt = serde_json::ser::PrettyFormatter::with_indent(&b"    "[..indent.min(4)]);
    let mut ser = serde_json::Serializer::with_formatter(&mut out, fmt);
    value.serialize(&mut ser).map_err(|e| Error::file(path, e))?;
    out.push(b'\n');
    std::fs::write(path, out).map_err(|e| Error::file(path, e))
}
