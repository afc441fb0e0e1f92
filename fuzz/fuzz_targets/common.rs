//! Shared checks for the fuzz targets.
#![allow(dead_code)]

use muster_graph::{Graph, InputError, jgf};

/// Every refusal names the file it was given and says where and what.
pub fn check_error(file: &str, e: &InputError) {
    assert_eq!(e.file, file, "error names the wrong file: {e}");
    assert!(!e.path.is_empty(), "error without a path: {e:?}");
    assert!(!e.message.is_empty(), "error without a message: {e:?}");
}

/// Larger graphs are only parsed: exporting and comparing them twice takes seconds under ASan.
pub const MAX_ROUND_TRIP_VERTICES: usize = 2_000;

/// A graph that loaded must export to JGF that imports again and exports identically.
pub fn check_round_trip(g: &Graph) {
    if g.vertices.len() > MAX_ROUND_TRIP_VERTICES {
        return;
    }
    let first = jgf::export(g);
    let again = match jgf::import("export.json", &first) {
        Ok(g) => g,
        Err(e) => panic!("re-import of an exported graph failed: {e}\n--- export ---\n{first}"),
    };
    let second = jgf::export(&again);
    assert!(first == second, "export -> import -> export differs\n--- first ---\n{first}\n--- second ---\n{second}");
    assert_eq!(g.nodes.len(), again.nodes.len(), "node count changed in the round trip");
}
