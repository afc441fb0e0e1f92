//! muster-graph: the resource graph of a cluster and the all-or-nothing matcher.
//!
//! A cluster is a containment tree (cluster > zone > block > rack > node > resources). A group asks
//! for N identical members; the matcher places every member on exact nodes at once, or reserves
//! the earliest time the whole group fits, or changes nothing. Pure, synchronous, deterministic:
//! time is always passed in.

pub mod allocations;
pub mod builder;
pub mod cluster;
pub mod error;
pub mod filter;
pub mod graph;
pub mod jgf;
pub mod jobspec;
pub mod matcher;
pub mod quantity;
pub mod resources;

pub use allocations::{Allocation, ImportedMember, MatchOutcome, Member, ResourceGraph, Stat};
pub use builder::NodeSpec;
pub use error::{GraphError, InputError};
pub use graph::{AllocId, Graph, NodeId};
pub use jobspec::GroupRequest;
pub use matcher::Policy;

/// Loads a graph from a file's text: JGF when it parses as a JSON object with `graph`, else a
/// cluster description.
pub fn load_graph(file: &str, text: &str) -> Result<Graph, InputError> {
    if text.trim_start().starts_with('{') { jgf::import(file, text) } else { cluster::load(file, text) }
}
