//! muster's dashboard of the plan: what muster alone knows (when each waiting group will start,
//! where, and what it waits for) for people who would rather look than read. The controller
//! serves it (`muster controller --dashboard-addr`), read-only, from the plan its leader publishes
//! ([`muster_queue::Plan`], refreshed with the queue view).
//!
//! Where to start: [`serve`] and its routes (`server.rs`); who may see what ([`access`]: open on
//! loopback, otherwise the caller's Kubernetes token, reviewed by the API server); what a viewer
//! sees of the plan (`visible.rs`); the pages (`page.rs`) and the timeline (`timeline.rs`), HTML and
//! SVG made on the server, with a few lines of script that reload the content every few seconds.

mod access;
mod format;
mod page;
mod server;
mod timeline;
mod visible;

pub use access::Access;
pub use server::serve;

/// The plan the controller's leader publishes; none while this replica does not lead.
pub type PlanWatch = tokio::sync::watch::Receiver<Option<std::sync::Arc<muster_queue::Plan>>>;
pub use visible::{Namespaces, Viewer};

/// What can go wrong serving the dashboard.
#[derive(Debug, thiserror::Error)]
pub enum DashboardError {
    #[error("dashboard: {0}")]
    Serve(std::io::Error),
}
