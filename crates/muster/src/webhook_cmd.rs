//! `muster webhook`: the admission webhook as a standalone server (see crates/muster-webhook).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use muster_webhook::{
    DEFAULT_ALIAS_QUEUE, DEFAULT_CONTROLLER_USER, DEFAULT_JOB_CONTROLLER_USER, ServeOptions, WebhookConfig,
};

#[derive(Args, Debug)]
pub struct WebhookArgs {
    /// Address to serve HTTPS on; port 0 takes any free port (see --port-file).
    #[arg(long, default_value = "127.0.0.1:8443")]
    addr: SocketAddr,
    /// PEM serving certificate (chain); re-read when it changes.
    #[arg(long, value_name = "FILE")]
    tls_cert: PathBuf,
    /// PEM private key of the certificate.
    #[arg(long, value_name = "FILE")]
    tls_key: PathBuf,
    /// Write the port served on to FILE once listening.
    #[arg(long, value_name = "FILE")]
    port_file: Option<PathBuf>,
    /// A principal that is muster itself (repeat for several) [default: system:serviceaccount:muster-system:muster].
    #[arg(long = "controller-user", value_name = "USER")]
    controller_users: Vec<String>,
    /// The principal of the Job controller, the only one that may create a Job's pods.
    #[arg(long, value_name = "USER", default_value = DEFAULT_JOB_CONTROLLER_USER)]
    job_controller_user: String,
    /// Treat pods labelled scheduling.x-k8s.io/pod-group as muster groups.
    #[arg(long)]
    accept_pod_group_alias: bool,
    /// Queue of pod-group pods without a muster.dev/queue label.
    #[arg(long, value_name = "QUEUE", default_value = DEFAULT_ALIAS_QUEUE)]
    alias_queue: String,
    /// Kubeconfig to read Queues, Namespaces and Groups with (default: in-cluster, else $KUBECONFIG).
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
}

/// A client from `--kubeconfig`, or the in-cluster account, or $KUBECONFIG; and its config.
pub(crate) async fn client(kubeconfig: Option<&Path>) -> Result<(Client, Config)> {
    let mut config = match kubeconfig {
        Some(path) => {
            let kc =
                Kubeconfig::read_from(path).with_context(|| format!("cannot read kubeconfig {}", path.display()))?;
            Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await.context("invalid kubeconfig")?
        }
        None => Config::infer().await.context("no usable kubeconfig (in-cluster, $KUBECONFIG or --kubeconfig)")?,
    };
    config.connect_timeout = Some(Duration::from_secs(10));
    let client = Client::try_from(config.clone()).context("cannot build a Kubernetes client")?;
    Ok((client, config))
}

/// Completes on SIGINT or SIGTERM.
pub(crate) async fn stop_signal() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = term => {}
    }
}

pub fn run(args: &WebhookArgs) -> Result<ExitCode> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,kube=warn")),
        )
        .init();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let controller_users = if args.controller_users.is_empty() {
        vec![DEFAULT_CONTROLLER_USER.to_string()]
    } else {
        args.controller_users.clone()
    };
    let opts = ServeOptions {
        addr: args.addr,
        cert_file: args.tls_cert.clone(),
        key_file: args.tls_key.clone(),
        port_file: args.port_file.clone(),
        config: WebhookConfig {
            controller_users,
            job_controller_user: args.job_controller_user.clone(),
            accept_pod_group_alias: args.accept_pod_group_alias,
            alias_queue: args.alias_queue.clone(),
        },
    };
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("cannot start the runtime")?;
    rt.block_on(async {
        let (client, _) = client(args.kubeconfig.as_deref()).await?;
        muster_webhook::serve(opts, client, stop_signal()).await.context("webhook")?;
        Ok(ExitCode::SUCCESS)
    })
}
