//! muster's admission webhook.
//!
//! The mutating half holds managed work back for the queue: a Job with a `muster.dev/queue` label
//! is created suspended with `schedulerName: muster`, a plain pod of a group gets muster's
//! scheduling gate, and a user who unsuspends a managed Job gets a resume request instead (the
//! queue can never be bypassed). The validating half refuses what would let a tenant forge a
//! placement or escape the queue, and groups that could never start. Every refusal names the
//! field and says what to change (docs/webhook.md lists them).
//!
//! The rules ([`mutate`], [`validate`]) work on `AdmissionRequest`s and read cluster state only
//! through [`ClusterState`], so they are tested without a cluster; [`serve`] runs them behind
//! axum over rustls with [`KubeState`] (reflector stores of Queues, Namespaces, Groups and, once
//! their CRD is installed, PodGroups) and counts every review (`/metrics`).

mod alike;
mod cert_secret;
mod certs;
mod composite;
mod config;
mod files;
mod fit;
mod metrics;
mod mutate;
mod object;
pub mod registration;
mod renew;
mod review;
mod server;
mod state;
mod tls;
mod validate;

pub use cert_secret::{CertOrigin, ensure_in_secret, hosts_line};
pub use certs::ServingCert;
pub use config::{
    DEFAULT_ALIAS_QUEUE, DEFAULT_CONTROLLER_USER, DEFAULT_GARBAGE_COLLECTOR_USER, DEFAULT_JOB_CONTROLLER_USER,
    DEFAULT_NAMESPACE_CONTROLLER_USER, WebhookConfig,
};
pub use files::replace_file;
pub use metrics::Metrics as WebhookMetrics;
pub use mutate::mutate;
pub use object::Refusal;
pub use renew::{RENEW_EVERY, Renewal, keep_renewed, renew_once};
pub use review::{Hook, Verdict, review};
pub use server::{MAX_REVIEW_BYTES, MAX_REVIEWS_IN_FLIGHT, REVIEW_DEADLINE, ServeOptions, serve, serve_with_state};
pub use state::{ClusterState, KubeState, LookupError, MemoryState, PodGroupTrees};
pub use tls::{Pem, TlsFiles, server_config};
pub use validate::validate;

use std::path::PathBuf;

/// What can go wrong starting or running the webhook server, or making its certificates.
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("TLS: {0}")]
    Tls(String),
    #[error("certificate: {0}")]
    Cert(#[from] rcgen::Error),
    #[error("cannot listen on {addr}: {source}")]
    Bind { addr: std::net::SocketAddr, source: std::io::Error },
    #[error("server: {0}")]
    Serve(std::io::Error),
    #[error("secret {namespace}/{name}: {source}")]
    Secret { namespace: String, name: String, source: kube::Error },
    #[error(
        "secret {namespace}/{name} does not exist: muster's Helm chart creates it; without the chart, create it \
         empty (kubectl -n {namespace} create secret generic {name}) and muster fills it"
    )]
    NoSecret { namespace: String, name: String },
    #[error(
        "secret {namespace}/{name} was changed by someone else while muster wrote a certificate to it, and holds \
         none for these hosts; run again"
    )]
    SecretChanged { namespace: String, name: String },
}
