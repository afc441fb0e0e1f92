//! `muster controller`: the Kubernetes controller (see crates/muster-controller).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use muster_controller::Options;

#[derive(Args, Debug)]
pub struct ControllerArgs {
    /// Kubeconfig to use (default: in-cluster service account, else $KUBECONFIG).
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// The store: sqlite:PATH, or a PostgreSQL connection string (needed for two replicas).
    #[arg(long, default_value = "sqlite:muster.db")]
    store: String,
    /// This instance's name in leases (default: $POD_NAME, else the host name).
    #[arg(long)]
    identity: Option<String>,
    /// Namespace of the leader-election Lease.
    #[arg(long, default_value = "muster-system")]
    lease_namespace: String,
    /// Seconds a leader's lease lasts without renewal.
    #[arg(long, default_value_t = 15)]
    lease_seconds: u64,
    /// Bindings and writes in flight at once.
    #[arg(long, default_value_t = 64)]
    concurrency: usize,
}

fn identity(args: &ControllerArgs) -> String {
    args.identity
        .clone()
        .or_else(|| std::env::var("POD_NAME").ok())
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok().map(|h| h.trim().to_string()))
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "muster".into())
}

pub fn run(args: &ControllerArgs) -> Result<ExitCode> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,kube=warn")),
        )
        .init();
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("cannot start the runtime")?;
    rt.block_on(async {
        let mut config = match &args.kubeconfig {
            Some(path) => {
                let kc = Kubeconfig::read_from(path)
                    .with_context(|| format!("cannot read kubeconfig {}", path.display()))?;
                Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await.context("invalid kubeconfig")?
            }
            None => Config::infer().await.context("no usable kubeconfig (in-cluster, $KUBECONFIG or --kubeconfig)")?,
        };
        config.connect_timeout = Some(Duration::from_secs(10));
        let client = Client::try_from(config).context("cannot build a Kubernetes client")?;
        let mut opts = Options::new(&args.store, &identity(args));
        opts.lease_namespace = args.lease_namespace.clone();
        opts.lease_ttl = Duration::from_secs(args.lease_seconds.max(3));
        opts.concurrency = args.concurrency.max(1);
        let shutdown = async {
            let _ = tokio::signal::ctrl_c().await;
        };
        let term = async {
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(mut s) => {
                    s.recv().await;
                }
                Err(_) => std::future::pending::<()>().await,
            }
        };
        let stop = async {
            tokio::select! { () = shutdown => {}, () = term => {} }
        };
        muster_controller::run(client, opts, stop).await.context("controller")?;
        Ok(ExitCode::SUCCESS)
    })
}
