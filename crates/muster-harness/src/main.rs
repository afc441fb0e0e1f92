//! muster-harness: the real-cluster side of hack/sim-vs-real.sh, hack/e2e/test-scale.sh and
//! hack/bench-bind.sh (see the crate's documentation and docs/control-plane.md).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};
use muster_harness::peers::{self, Peer, PeerOptions};
use muster_harness::{overcommit, scale, simreal, summary, tenants, workload};

#[derive(Parser)]
#[command(
    name = "muster-harness",
    about = "muster's real-cluster harness: scenario Jobs, sim-vs-real, scale and bind runs"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// The scenario's jobs as muster-sim draws them for SEED, as JSON (what `run` reads).
    Jobs { scenario: PathBuf, seed: u64, out: PathBuf },
    /// The scenario's jobs as batch/v1 Job manifests decorated for a scheduler (--peer), each after
    /// the companion objects it needs (a YAML stream for kubectl apply).
    Objects {
        scenario: PathBuf,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        #[command(flatten)]
        peer: PeerArgs,
        #[arg(long)]
        namespace: Option<String>,
        /// Only the cluster-wide objects the peer needs for this scenario (kueue: ResourceFlavor,
        /// ClusterQueue with the cluster's allocatable x kueue.quotaFactor, LocalQueue; volcano:
        /// HyperNodes of the jobs' topology level), no Jobs. With tenants in the scenario: a
        /// namespace and the peer's queue per tenant (muster, kueue and volcano).
        #[arg(long)]
        setup: bool,
    },
    /// Submit each Job of JOBS at its time (with its companions, for --peer), wait until all are
    /// Complete/Failed (or TIMEOUT s), read the objects into OUT (scrapes $SCHEDULER_METRICS_URL
    /// once a second if set). Kueue's setup (objects --peer kueue --setup) must exist already.
    Run {
        jobs: PathBuf,
        kubeconfig: PathBuf,
        namespace: String,
        out: PathBuf,
        timeout: f64,
        #[command(flatten)]
        peer: PeerArgs,
        /// The scenario JOBS was drawn from (with --seed): its tenants' figures are measured.
        #[arg(long)]
        scenario: Option<PathBuf>,
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// Volcano's scheduler configuration for SCENARIO's tenants: reclaim and preempt, the
    /// capacity plugin, hierarchical when its cohorts form a tree (what hack/peers/volcano.sh
    /// takes as VOLCANO_SCHEDULER_CONF).
    VolcanoTenantsConf { scenario: PathBuf },
    /// Rates of the control plane on a burst of JOBS Jobs x PODS pods that fits.
    Calibrate { kubeconfig: PathBuf, namespace: String, jobs: usize, pods: u32, out: PathBuf },
    /// Real and sim side by side; exit status 1 beyond TOLERANCE (0.10) on completed or makespan.
    Compare { real: PathBuf, sim: PathBuf, jobs: PathBuf, tolerance: f64 },
    /// kube-scheduler's own counters over a run (from `run`'s REAL.json).
    Metrics { real: PathBuf },
    /// The runs hack/suite-real.sh left in DIRS as one markdown table: per scheduler, each figure's
    /// mean with its lowest and highest.
    Summary {
        #[arg(required = true)]
        dirs: Vec<PathBuf>,
        /// The scenario's lower bound on makespan (s), to read makespans against.
        #[arg(long)]
        lower_bound: Option<f64>,
    },
    /// Seed 002's scale experiment: N Jobs x P pods, one JSON line of figures.
    Scale(scale::ScaleArgs),
    /// A burst of pods, Jobs or one gang Job; how fast they are bound, as one JSON line.
    Bind(scale::BindArgs),
    /// Checks every INTERVAL s, until SIGTERM, that no node has more requested by its bound pods
    /// than it has allocatable; each violation logged once (--log), a JSON summary of polls,
    /// errors and violations rewritten after every poll (--state).
    Overcommit {
        #[arg(long)]
        kubeconfig: PathBuf,
        #[arg(long, default_value_t = 0.5)]
        interval: f64,
        #[arg(long)]
        log: Option<PathBuf>,
        #[arg(long)]
        state: Option<PathBuf>,
    },
}

/// Which scheduler the Jobs are for (see the crate's `peers` module).
#[derive(clap::Args)]
struct PeerArgs {
    /// default, muster, kueue, coscheduling, volcano or native [default: default; muster with --queue].
    #[arg(long, value_enum)]
    peer: Option<Peer>,
    /// The peer's queue: muster's Queue (default "default"), Kueue's LocalQueue ("user-queue"),
    /// Volcano's queue ("default"). Alone, it means --peer muster.
    #[arg(long)]
    queue: Option<String>,
    /// spec.template.spec.schedulerName, instead of the peer's own.
    #[arg(long)]
    scheduler_name: Option<String>,
}

impl PeerArgs {
    fn options(self, namespace: Option<String>) -> PeerOptions {
        let peer = self.peer.unwrap_or(if self.queue.is_some() { Peer::Muster } else { Peer::Default });
        PeerOptions { peer, queue: self.queue, scheduler_name: self.scheduler_name, namespace }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli.cmd) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cmd: Cmd) -> anyhow::Result<u8> {
    let rt = || tokio::runtime::Builder::new_multi_thread().enable_all().build().context("cannot start the runtime");
    Ok(match cmd {
        Cmd::Jobs { scenario, seed, out } => {
            let jobs = workload::jobs(&scenario, seed)?;
            muster_harness::write_json(&out, &jobs, 1)?;
            0
        }
        Cmd::Objects { scenario, seed, peer, namespace, setup } => {
            let jobs = workload::jobs(&scenario, seed)?;
            let opts = peer.options(namespace);
            let w = || muster_sim::scenario::load(&scenario, seed).map_err(muster_harness::Error::from);
            let yaml = match (setup, opts.peer) {
                (false, _) => peers::objects_yaml(&jobs, &opts),
                // A scenario's tenants are its queues, with a namespace each.
                (true, peer) if !w()?.tenants.is_empty() => {
                    let w = w()?;
                    let mut objects = tenants::setup(peer, &w, &jobs)?;
                    if peer == Peer::Volcano {
                        objects.extend(peers::volcano_setup(&w, &jobs)?);
                    }
                    peers::yaml(&objects)
                }
                (true, Peer::Kueue) => {
                    let w = muster_sim::scenario::load(&scenario, seed).map_err(muster_harness::Error::from)?;
                    peers::yaml(&peers::kueue_setup(&w, &jobs, &opts)?)
                }
                (true, Peer::Volcano) => {
                    let w = muster_sim::scenario::load(&scenario, seed).map_err(muster_harness::Error::from)?;
                    peers::yaml(&peers::volcano_setup(&w, &jobs)?)
                }
                (true, p) => {
                    eprintln!("peer {p:?} needs no cluster-wide objects");
                    String::new()
                }
            };
            // A closed pipe (| head) is not an error.
            let _ = std::io::Write::write_all(&mut std::io::stdout(), yaml.as_bytes());
            0
        }
        Cmd::Run { jobs, kubeconfig, namespace, out, timeout, peer, scenario, seed } => {
            let opts = peer.options(None);
            let w = scenario
                .map(|s| muster_sim::scenario::load(&s, seed))
                .transpose()
                .map_err(muster_harness::Error::from)?;
            rt()?.block_on(simreal::run(&jobs, &kubeconfig, &namespace, &out, timeout, &opts, w.as_ref()))?;
            0
        }
        Cmd::VolcanoTenantsConf { scenario } => {
            let w = muster_sim::scenario::load(&scenario, 1).map_err(muster_harness::Error::from)?;
            print!("{}", tenants::volcano_scheduler_conf(&w));
            0
        }
        Cmd::Calibrate { kubeconfig, namespace, jobs, pods, out } => {
            rt()?.block_on(simreal::calibrate(&kubeconfig, &namespace, jobs, pods, &out))?;
            0
        }
        Cmd::Compare { real, sim, jobs, tolerance } => u8::from(!simreal::compare(&real, &sim, &jobs, tolerance)?),
        Cmd::Metrics { real } => u8::from(!simreal::metrics_report(&real, 10.0)?),
        Cmd::Summary { dirs, lower_bound } => {
            print!("{}", summary::table(&dirs, lower_bound)?);
            0
        }
        Cmd::Scale(a) => rt()?.block_on(scale::scale(&a))? as u8,
        Cmd::Bind(a) => rt()?.block_on(scale::bind(&a))? as u8,
        Cmd::Overcommit { kubeconfig, interval, log, state } => {
            if !(interval > 0.0 && interval.is_finite()) {
                anyhow::bail!("--interval {interval}: give a number of seconds above 0, e.g. 0.5");
            }
            let opts = overcommit::Options { kubeconfig, interval: Duration::from_secs_f64(interval), log, state };
            rt()?.block_on(overcommit::watch(&opts))?;
            0
        }
    })
}
