//! `muster controller`: the Kubernetes controller (crates/muster-controller), and with
//! `--webhook-addr` the admission webhook in the same process (it serves on every replica; only
//! the leader schedules).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Args;
use muster_controller::Options;
use muster_controller::metrics::{self, Metrics};
use muster_webhook::registration::{self, CaBundle};
use muster_webhook::{DEFAULT_CONTROLLER_USER, ServeOptions, WebhookConfig};

#[derive(Args, Debug)]
pub struct ControllerArgs {
    /// Kubeconfig to use (default: in-cluster service account, else $KUBECONFIG).
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// The store: sqlite:PATH, or a PostgreSQL connection string (needed for two replicas)
    /// [default: $MUSTER_STORE_URL, else sqlite:muster.db]. A password here is visible to every
    /// local user: prefer --store-url-file or $MUSTER_STORE_URL.
    #[arg(long, value_name = "URL")]
    store: Option<String>,
    /// A file holding the store URL (a mounted Secret), instead of --store.
    #[arg(long, value_name = "FILE")]
    store_url_file: Option<PathBuf>,
    /// This instance's name in leases (default: $POD_NAME, else the host name).
    #[arg(long)]
    identity: Option<String>,
    /// muster's own namespace: its leader-election Lease, and the Secret whose ca.crt is the
    /// webhook registration's caBundle.
    #[arg(long, alias = "lease-namespace", default_value = "muster-system")]
    namespace: String,
    /// Seconds a leader's lease lasts without renewal.
    #[arg(long, default_value_t = 15)]
    lease_seconds: u64,
    /// Bindings and writes in flight at once.
    #[arg(long, default_value_t = muster_controller::DEFAULT_CONCURRENCY)]
    concurrency: usize,
    /// Also serve the admission webhook on this address (with --tls-cert and --tls-key).
    #[arg(long, value_name = "ADDR")]
    webhook_addr: Option<SocketAddr>,
    /// PEM serving certificate of the webhook.
    #[arg(long, value_name = "FILE")]
    tls_cert: Option<PathBuf>,
    /// PEM private key of the webhook's certificate.
    #[arg(long, value_name = "FILE")]
    tls_key: Option<PathBuf>,
    /// A principal that is muster itself, for the webhook (repeat for several)
    /// [default: system:serviceaccount:muster-system:muster].
    #[arg(long = "controller-user", value_name = "USER")]
    controller_users: Vec<String>,
    /// Webhook: treat scheduler-plugins' scheduling.x-k8s.io/pod-group label as muster.dev/group
    /// on plain pods (register it with `muster install --accept-pod-group-alias`).
    #[arg(long)]
    accept_pod_group_alias: bool,
    /// Webhook: the queue of alias pods without a muster.dev/queue label.
    #[arg(long, value_name = "QUEUE", default_value = muster_webhook::DEFAULT_ALIAS_QUEUE)]
    alias_queue: String,
    #[command(flatten)]
    dashboard: crate::dashboard_args::DashboardArgs,
    /// Serve /metrics (Prometheus) and /healthz over plain HTTP here; "" or "off" disables.
    #[arg(long, value_name = "ADDR", default_value = "0.0.0.0:8080", value_parser = parse_metrics_addr)]
    metrics_addr: MetricsAddr,
    /// Answer /metrics only to a Kubernetes bearer token whose user may `get` the non-resource
    /// URL /metrics (TokenReview and SubjectAccessReview); /healthz stays open.
    #[arg(long)]
    metrics_auth: bool,
}

/// `--metrics-addr`: an address, or none when disabled.
#[derive(Debug, Clone)]
struct MetricsAddr(Option<SocketAddr>);

fn parse_metrics_addr(s: &str) -> Result<MetricsAddr, String> {
    match s.trim() {
        "" | "off" => Ok(MetricsAddr(None)),
        a => a
            .parse()
            .map(|a| MetricsAddr(Some(a)))
            .map_err(|e| format!("{e} (an address such as 0.0.0.0:8080, or off)")),
    }
}

fn identity(args: &ControllerArgs) -> String {
    args.identity
        .clone()
        .or_else(|| std::env::var("POD_NAME").ok())
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok().map(|h| h.trim().to_string()))
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "muster".into())
}

fn webhook_options(args: &ControllerArgs) -> Result<Option<ServeOptions>> {
    let Some(addr) = args.webhook_addr else { return Ok(None) };
    let (Some(cert), Some(key)) = (&args.tls_cert, &args.tls_key) else {
        bail!("--webhook-addr needs --tls-cert and --tls-key (muster install writes them)");
    };
    let controller_users = if args.controller_users.is_empty() {
        vec![DEFAULT_CONTROLLER_USER.to_string()]
    } else {
        args.controller_users.clone()
    };
    Ok(Some(ServeOptions {
        addr,
        cert_file: cert.clone(),
        key_file: key.clone(),
        port_file: None,
        config: WebhookConfig {
            controller_users,
            accept_pod_group_alias: args.accept_pod_group_alias,
            alias_queue: args.alias_queue.clone(),
            ..WebhookConfig::default()
        },
    }))
}

pub fn run(args: &ControllerArgs) -> Result<ExitCode> {
    let webhook = webhook_options(args)?;
    let dashboard = args.dashboard.plan()?;
    crate::server::init();
    let store = crate::store_url::resolve(
        args.store.as_deref(),
        args.store_url_file.as_deref(),
        std::env::var(crate::store_url::ENV).ok(),
    )?;
    crate::server::runtime()?.block_on(async {
        let (client, _) = crate::server::client(args.kubeconfig.as_deref()).await?;
        match registration::fill_ca_bundle(&client, &args.namespace).await {
            Ok(CaBundle::Patched(0)) => {}
            Ok(CaBundle::Patched(n)) => tracing::info!(webhooks = n, "caBundle of the webhook registration updated"),
            Ok(CaBundle::NoSecret) => tracing::debug!("no webhook CA Secret; the registration's caBundle is kept"),
            // Not fatal: the registration may be managed by other means (cert-manager's injector).
            Err(e) => tracing::warn!(error = %e, "cannot update the caBundle of the webhook registration"),
        }
        let mut opts = Options::new(&store, &identity(args));
        opts.lease_namespace = args.namespace.clone();
        opts.lease_ttl = Duration::from_secs(args.lease_seconds.max(3));
        opts.concurrency = args.concurrency.max(1);
        // SIGTERM/SIGINT stop both; the controller stops cleanly (hands its leases over) rather
        // than being dropped mid-way.
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let stopped = move || {
            let mut rx = stop_rx.clone();
            async move {
                let _ = rx.wait_for(|s| *s).await;
            }
        };
        let stop_tx = std::sync::Arc::new(stop_tx);
        let signal = {
            let stop_tx = stop_tx.clone();
            tokio::spawn(async move {
                crate::server::stop_signal().await;
                let _ = stop_tx.send(true);
            })
        };
        let metrics = Arc::new(Metrics::new());
        let metrics_server = match args.metrics_addr.0 {
            Some(addr) => {
                let auth = args.metrics_auth.then(|| muster_controller::metrics_auth::MetricsAuth::new(client.clone()));
                Some(serve_metrics(addr, metrics.clone(), auth, stopped()).await?)
            }
            None => None,
        };
        let dashboard = match dashboard {
            Some(plan) => {
                let addr = plan.addr;
                let options = plan.options(&client, &args.namespace).await?;
                Some(serve_dashboard(addr, options, opts.plan.subscribe(), client.clone(), stopped()).await?)
            }
            None => None,
        };
        let webhook = webhook.map(|w| tokio::spawn(muster_webhook::serve(w, client.clone(), stopped())));
        let result = muster_controller::run(client, opts, metrics, stopped()).await.context("controller");
        signal.abort();
        for server in metrics_server.into_iter().chain(dashboard) {
            server.abort();
        }
        let _ = stop_tx.send(true);
        if let Some(w) = webhook {
            w.await.context("webhook task")?.context("webhook")?;
        }
        result.map(|()| ExitCode::SUCCESS)
    })
}

/// Listens on `addr` (a taken port fails the start) and serves the dashboard in a task.
async fn serve_dashboard(
    addr: SocketAddr,
    options: muster_dashboard::ServeOptions,
    plan: muster_dashboard::PlanWatch,
    client: kube::Client,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<tokio::task::JoinHandle<()>> {
    let listener = std::net::TcpListener::bind(addr).with_context(|| format!("--dashboard-addr {addr}"))?;
    Ok(tokio::spawn(async move {
        if let Err(e) = muster_dashboard::serve(listener, plan, client, options, shutdown).await {
            tracing::warn!(error = %e, "the dashboard stopped");
        }
    }))
}

/// Listens on `addr` (a taken port fails the start) and serves the metrics in a task.
async fn serve_metrics(
    addr: SocketAddr,
    metrics: Arc<Metrics>,
    auth: Option<Arc<muster_controller::metrics_auth::MetricsAuth>>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<tokio::task::JoinHandle<()>> {
    let listener = tokio::net::TcpListener::bind(addr).await.with_context(|| format!("--metrics-addr {addr}"))?;
    let reviewed = if auth.is_some() { " (Kubernetes tokens reviewed)" } else { "" };
    tracing::info!(addr = %addr, "metrics serving on /metrics{reviewed}");
    Ok(tokio::spawn(async move {
        if let Err(e) = metrics::serve(listener, metrics, auth, shutdown).await {
            tracing::warn!(error = %e, "the metrics server stopped");
        }
    }))
}
