//! What the long-running commands (controller, webhook) and install share: the client, the
//! runtime, logging and the stop signal.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, anyhow};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

/// Logging to stderr (RUST_LOG overrides) and the TLS provider every client and server uses.
pub fn init() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,kube=warn")),
        )
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let _ = rustls::crypto::ring::default_provider().install_default();
}

pub fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread().enable_all().build().context("cannot start the runtime")
}

/// A client from `--kubeconfig`, or the in-cluster account, or $KUBECONFIG; and its config.
pub async fn client(kubeconfig: Option<&Path>) -> Result<(Client, Config)> {
    let config = config(kubeconfig, None).await?;
    let client = Client::try_from(config.clone()).context("cannot build a Kubernetes client")?;
    Ok((client, config))
}

/// The cluster's config as kubectl picks it: `--kubeconfig` (and `--context`), else the
/// in-cluster account or $KUBECONFIG. A dead apiserver fails the connection within 10 s.
pub async fn config(kubeconfig: Option<&Path>, context: Option<&str>) -> Result<Config> {
    let options = KubeConfigOptions { context: context.map(str::to_string), cluster: None, user: None };
    let mut config = match kubeconfig {
        Some(path) => {
            let kc =
                Kubeconfig::read_from(path).with_context(|| format!("cannot read kubeconfig {}", path.display()))?;
            Config::from_custom_kubeconfig(kc, &options).await.context("invalid kubeconfig")?
        }
        None if context.is_none() => Config::infer()
            .await
            .map_err(|e| anyhow!("no usable kubeconfig (in-cluster, $KUBECONFIG or --kubeconfig): {e}"))?,
        None => Config::from_kubeconfig(&options).await.context("cannot load the kubeconfig")?,
    };
    config.connect_timeout = Some(Duration::from_secs(10));
    Ok(config)
}

/// Completes on SIGINT or SIGTERM.
pub async fn stop_signal() {
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
