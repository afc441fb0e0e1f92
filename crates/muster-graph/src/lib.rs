//! muster-graph: the resource graph of a cluster and the all-or-nothing matcher.
//!
//! A cluster is a containment tree (cluster > zone > block > rack > node > resources). A group asks
//! for N identical members; the matcher places every member on exact nodes at once, or reserves
//! the earliest time the whole group fits, or changes nothing. Pure, synchronous, deterministic:
//! time is always passed in.

pub mod allocations;
pub mod builder;
pub mod cluster;
pub mod dra;
pub mod error;
pub mod filter;
pub mod free_ahead;
pub mod graph;
pub mod jgf;
pub mod jobspec;
mod known_part;
pub mod matcher;
pub mod names;
pub mod policy;
mod preference;
pub mod quantity;
pub mod resources;
pub mod sockets;

pub use allocations::{Allocation, ImportedMember, MatchOutcome, Member, NodeUpdate, ResourceGraph, Stat};
pub use builder::NodeSpec;
pub use error::{GraphError, InputError};
pub use graph::{AllocId, Graph, NodeId};
pub use jobspec::GroupRequest;
pub use policy::Policy;

/// Loads a graph from a file's text: JGF when it is a JSON object with a `graph` key, else a
/// cluster description (which may be written in JSON or YAML flow style too).
pub fn load_graph(file: &str, text: &str) -> Result<Graph, InputError> {
    let is_jgf = text.trim_start().starts_with('{')
        && serde_json::from_str::<serde_json::Value>(text).is_ok_and(|v| v.get("graph").is_some());
    if is_jgf { jgf::import(file, text) } else { cluster::load(file, text) }
}
