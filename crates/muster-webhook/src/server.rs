//! The HTTPS server: axum over rustls, `/mutate`, `/validate`, `/metrics` and `/healthz`.
//!
//! Anyone who can reach the port can send a review (the apiserver presents no client
//! certificate), so what one caller can make the server hold is bounded: a review's body
//! ([`MAX_REVIEW_BYTES`]), the reviews answered at once ([`MAX_REVIEWS_IN_FLIGHT`]; more are
//! turned away at once with 429, not queued) and the time one takes ([`REVIEW_DEADLINE`]).

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum_server::accept::NoDelayAcceptor;
use axum_server::tls_rustls::{RustlsAcceptor, RustlsConfig};
use k8s_openapi::jiff::Timestamp;
use kube::core::DynamicObject;
use kube::core::admission::AdmissionReview;
use tokio::sync::Semaphore;

use crate::WebhookError;
use crate::config::WebhookConfig;
use crate::metrics::{self, Metrics};
use crate::review::{Hook, answer};
use crate::state::{ClusterState, KubeState};
use crate::tls::TlsFiles;

/// Where and how to serve.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// Port 0 picks a free port (see `port_file`).
    pub addr: SocketAddr,
    /// PEM certificate chain and private key. They are re-read when they change on disk, so a
    /// rotated certificate needs no restart.
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
    /// Write the bound port here once listening (for port 0).
    pub port_file: Option<PathBuf>,
    pub config: WebhookConfig,
}

/// The largest review body read: a review holds the object and, on update, the old object, and
/// the apiserver takes no request body over 3 MiB, so no object it admits is larger; two of
/// them and the review around them stay under 6 MiB. A larger body is no review the apiserver
/// sends, and is refused with 413 before it is read whole.
pub const MAX_REVIEW_BYTES: usize = 6 << 20;
/// Reviews read and answered at once; one more is refused at once with 429 (the apiserver
/// counts it a failed call, and its failure policy refuses the object). The apiserver's calls
/// take milliseconds each from the watch caches, so this is far above what it sends; it bounds
/// the memory bodies take ([`MAX_REVIEW_BYTES`] each) below the container's limit.
pub const MAX_REVIEWS_IN_FLIGHT: usize = 32;
/// A review not answered within the apiserver's timeout is of no use to it; a caller that sends
/// its body slowly gives its place back then (503).
pub const REVIEW_DEADLINE: Duration = Duration::from_secs(crate::registration::TIMEOUT_SECONDS as u64);

/// Serves the webhook with cluster state from `client` until `shutdown` completes.
pub async fn serve(
    opts: ServeOptions,
    client: kube::Client,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), WebhookError> {
    serve_with_state(opts, KubeState::start(client), shutdown).await
}

/// Serves the webhook with the given cluster state until `shutdown` completes.
pub async fn serve_with_state<S: ClusterState + 'static>(
    opts: ServeOptions,
    state: S,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), WebhookError> {
    // kube's client and anything else in the process that asks rustls for its default provider
    // gets ring; an error only means one is installed already.
    let _ = rustls::crypto::ring::default_provider().install_default();
    // HTTP/2 first: the apiserver then sends every review over one connection, where HTTP/1.1
    // costs it a TLS handshake for each call beyond its few idle connections.
    let files = TlsFiles {
        cert: opts.cert_file.clone(),
        key: opts.key_file.clone(),
        alpn: vec![b"h2".to_vec(), b"http/1.1".to_vec()],
    };
    let tls = RustlsConfig::from_config(files.load()?);
    let listener =
        std::net::TcpListener::bind(opts.addr).map_err(|source| WebhookError::Bind { addr: opts.addr, source })?;
    listener.set_nonblocking(true).map_err(WebhookError::Serve)?;
    let bound = listener.local_addr().map_err(WebhookError::Serve)?;
    if let Some(path) = &opts.port_file {
        // Renamed into place, so a reader never sees an empty file.
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, format!("{}\n", bound.port()))
            .and_then(|()| std::fs::rename(&tmp, path))
            .map_err(|source| WebhookError::Io { path: path.clone(), source })?;
    }
    tracing::info!(addr = %bound, "webhook serving");

    let reviews = Router::new()
        .route("/mutate", post(handle::<S, true>))
        .route("/validate", post(handle::<S, false>))
        .layer(DefaultBodyLimit::max(MAX_REVIEW_BYTES))
        .layer(middleware::from_fn_with_state(Arc::new(Semaphore::new(MAX_REVIEWS_IN_FLIGHT)), bounded));
    let app = reviews
        .route("/metrics", get(metrics_text::<S>))
        .route("/healthz", get(|| async { "ok" }))
        .with_state(Arc::new(App { config: opts.config.clone(), state, metrics: Metrics::new() }));

    let handle = axum_server::Handle::new();
    let stopper = handle.clone();
    let stop = tokio::spawn(async move {
        shutdown.await;
        stopper.graceful_shutdown(Some(Duration::from_secs(10)));
    });
    let reload = tokio::spawn(files.reload_on_change(tls.clone()));
    // A response goes out in pieces (TLS records, HTTP/2 frames); without TCP_NODELAY a piece
    // can wait for the apiserver's delayed ACK. (The 40 ms reviews seen under load were the
    // busy apiserver's own queueing, docs/benchmarks.md; this only rules the socket out.)
    let acceptor = RustlsAcceptor::new(tls).acceptor(NoDelayAcceptor);
    let result = axum_server::from_tcp(listener)
        .map_err(WebhookError::Serve)?
        .acceptor(acceptor)
        .handle(handle)
        .serve(app.into_make_service())
        .await
        .map_err(WebhookError::Serve);
    stop.abort();
    reload.abort();
    result
}

struct App<S> {
    config: WebhookConfig,
    state: S,
    metrics: Metrics,
}

/// Runs a review if one of the places is free, within [`REVIEW_DEADLINE`]; otherwise answers at
/// once (429, or 503 past the deadline), so that no caller can make reviews wait in line.
async fn bounded(State(places): State<Arc<Semaphore>>, req: Request, next: Next) -> Response {
    let Ok(_place) = places.try_acquire() else {
        let message = format!("more than {MAX_REVIEWS_IN_FLIGHT} reviews at once; try again");
        return (StatusCode::TOO_MANY_REQUESTS, [(header::RETRY_AFTER, "1")], message).into_response();
    };
    match tokio::time::timeout(REVIEW_DEADLINE, next.run(req)).await {
        Ok(response) => response,
        Err(_) => (StatusCode::SERVICE_UNAVAILABLE, format!("no answer within {REVIEW_DEADLINE:?}")).into_response(),
    }
}

async fn handle<S: ClusterState + 'static, const MUTATE: bool>(
    State(app): State<Arc<App<S>>>,
    body: Bytes,
) -> axum::Json<AdmissionReview<DynamicObject>> {
    let hook = if MUTATE { Hook::Mutate } else { Hook::Validate };
    let started = Instant::now();
    let a = answer(hook, &body, &app.config, &app.state, Timestamp::now()).await;
    app.metrics.review(hook, a.kind, a.verdict, started.elapsed());
    axum::Json(a.review)
}

async fn metrics_text<S: ClusterState + 'static>(State(app): State<Arc<App<S>>>) -> Response {
    match app.metrics.encode() {
        Ok(text) => ([(header::CONTENT_TYPE, metrics::CONTENT_TYPE)], text).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, format!("encoding the metrics: {e}")).into_response(),
    }
}
