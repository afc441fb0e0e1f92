//! muster's dashboard of the plan: what muster alone knows (when each waiting group will start,
//! where, and what it waits for) for people who would rather look than read. The controller
//! serves it (`muster controller --dashboard-addr`), read-only, from the plan its leader publishes
//! ([`muster_queue::Plan`], refreshed with the queue view).
//!
//! Where to start: [`serve`] and its routes (`server.rs`); who may see what (`access.rs`: open on
//! loopback, otherwise the caller's Kubernetes token, reviewed by the API server, with refused
//! tokens remembered in `refused.rs` and token checks rate-limited per client in `rate.rs`); what
//! each connection and request may hold ([`Limits`], `conn.rs`, `guard.rs`), the cookies and the
//! login form's CSRF token (`cookies.rs`, `csrf.rs`); what a viewer sees of the plan
//! (`visible.rs`); the pages (`page.rs`, `assets.rs`) and the timeline (`timeline.rs`), HTML and
//! SVG made on the server, with a script file that reloads the content every few seconds.

mod access;
mod assets;
mod conn;
mod cookies;
mod csrf;
mod format;
mod guard;
mod limits;
mod page;
mod rate;
mod refused;
mod server;
mod timeline;
mod visible;

pub use access::DEFAULT_AUDIENCE;
pub use limits::Limits;
pub use server::{Certificate, PemPair, ServeOptions, serve};

/// The plan the controller's leader publishes; none while this replica does not lead.
pub type PlanWatch = tokio::sync::watch::Receiver<Option<std::sync::Arc<muster_queue::Plan>>>;
pub use visible::{Namespaces, Viewer};

/// What can go wrong serving the dashboard.
#[derive(Debug, thiserror::Error)]
pub enum DashboardError {
    #[error("dashboard: {0}")]
    Serve(std::io::Error),
    #[error(
        "the dashboard listens on {0}, not a loopback address: there it serves HTTPS only, and needs a certificate \
         (--dashboard-tls-cert and --dashboard-tls-key, or --dashboard-tls-secret); or listen on 127.0.0.1 and reach \
         it with kubectl port-forward"
    )]
    NeedsTls(std::net::SocketAddr),
    #[error("dashboard certificate: {0}")]
    Certificate(muster_webhook::WebhookError),
}
