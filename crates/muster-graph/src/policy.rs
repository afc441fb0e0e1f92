//! How the matcher chooses among nodes that fit: a group's own choice or the graph's default.

use serde::{Deserialize, Serialize};

/// How to choose among nodes that fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Policy {
    /// First nodes in tree order (lowest ids first) that fit.
    #[default]
    First,
    /// Highest ids first.
    HighId,
    /// Fewest nodes: the nodes that can take the most of the members still to place first, and of
    /// those the fullest, so a small group fills a node in use before it takes an empty one.
    Pack,
    /// Most nodes: one member per node, on the least allocated nodes first (Fluxion's hinode).
    Spread,
    /// The innermost topology level (rack, then block, zone, cluster) with a domain that fits the
    /// whole group; of those, the one with the least free capacity; packed within it.
    Locality,
    /// Nodes with the least free amount of the group's scarcest resource first.
    BestFit,
}

impl Policy {
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "first" | "low" | "lowid" | "first-fit" => Self::First,
            "high" | "highid" | "high-id" => Self::HighId,
            "pack" | "lonode" => Self::Pack,
            "spread" | "hinode" => Self::Spread,
            "locality" => Self::Locality,
            "best-fit" | "bestfit" => Self::BestFit,
            _ => return None,
        })
    }

    pub const NAMES: &'static str = "first, high-id, pack, spread, locality, best-fit";
}
