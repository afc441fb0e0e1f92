//! Helpers of the parser tests: files of the repository, refusal checks, JGF documents by hand.

pub use std::collections::BTreeMap;
pub use std::path::PathBuf;

pub use muster_graph::cluster::{self, ClusterDescription};
pub use muster_graph::{Graph, InputError, jgf, jobspec, load_graph};
pub use proptest::prelude::*;
pub use serde_json::{Value, json};

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// A file of the repository, relative to its root.
pub fn repo_file(rel: &str) -> (String, String) {
    let path: PathBuf = [env!("CARGO_MANIFEST_DIR"), "..", "..", rel].iter().collect();
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    (rel.to_string(), text)
}

/// The cluster descriptions shipped with the repository.
pub fn scenario_clusters() -> Vec<(String, String)> {
    let dir: PathBuf = [env!("CARGO_MANIFEST_DIR"), "..", "..", "scenarios", "clusters"].iter().collect();
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".yaml"))
        .collect();
    names.sort();
    let mut out = vec![repo_file("scenarios/match/cluster.yaml")];
    out.extend(names.iter().map(|n| repo_file(&format!("scenarios/clusters/{n}"))));
    assert!(out.len() >= 2, "no scenarios/clusters/*.yaml found");
    out
}

/// A refusal must name the file it was given, a non-empty path and a non-empty message.
pub fn check_error(file: &str, e: &InputError) {
    assert_eq!(e.file, file, "wrong file in {e:?}");
    assert!(!e.path.is_empty(), "empty path in {e:?}");
    assert!(!e.message.is_empty(), "empty message in {e:?}");
}

pub fn check_result<T>(file: &str, r: &Result<T, InputError>) {
    if let Err(e) = r {
        check_error(file, e);
    }
}

/// Asserts an exact refusal: file, path, and a distinctive part of the message.
#[track_caller]
pub fn expect_err<T: std::fmt::Debug>(r: Result<T, InputError>, file: &str, path: &str, part: &str) -> InputError {
    let e = match r {
        Ok(v) => panic!("accepted, expected an error at {path:?} containing {part:?}: {v:?}"),
        Err(e) => e,
    };
    assert_eq!(e.file, file, "{e}");
    assert_eq!(e.path, path, "{e}");
    assert!(e.message.contains(part), "message of {e} does not contain {part:?}");
    e
}

/// What a node looks like to the scheduler, with resources by name (resource ids differ by graph).
pub type NodeView = (BTreeMap<String, String>, Vec<String>, bool, bool, BTreeMap<String, u64>, usize);

pub fn node_views(g: &Graph) -> BTreeMap<String, NodeView> {
    g.live_nodes()
        .map(|(_, n)| {
            let mut taints: Vec<String> =
                n.taints.iter().map(|t| format!("{:?}|{:?}|{}", t.key, t.value, t.effect.as_str())).collect();
            taints.sort();
            let capacity = g
                .resources
                .iter()
                .map(|(id, def)| (def.name.clone(), n.capacity.get(id.index()).copied().unwrap_or(0)))
                .filter(|(_, a)| *a > 0)
                .collect();
            (n.name.clone(), (n.labels.clone(), taints, n.unschedulable, n.up, capacity, n.devices.len()))
        })
        .collect()
}

/// export -> import -> export gives the same document, byte for byte, and the imported graph has
/// the same nodes.
pub fn check_round_trip(what: &str, g: &Graph) {
    let first = jgf::export(g);
    let again = jgf::import("round-trip.json", &first).unwrap_or_else(|e| panic!("{what}: re-import failed: {e}"));
    let second = jgf::export(&again);
    assert!(first == second, "{what}: export -> import -> export is not byte-identical");
    assert_eq!(g.live_nodes().count(), again.live_nodes().count(), "{what}: node count");
    let (a, b) = (node_views(g), node_views(&again));
    for (name, view) in &a {
        assert_eq!(Some(view), b.get(name), "{what}: node {name} differs after the round trip");
    }
    assert_eq!(a.len(), b.len(), "{what}: node names");
}

pub fn cap(g: &Graph, node: &str, resource: &str) -> u64 {
    let n = g.node(g.node_id(node).unwrap());
    let id = g.resources.get(resource).unwrap_or_else(|| panic!("no resource {resource}"));
    n.capacity[id.index()]
}

// ---------------------------------------------------------------------------------------------
// JGF documents written by hand
// ---------------------------------------------------------------------------------------------

pub fn vertex(uniq: u64, vtype: &str, id: i64, path: &str) -> Value {
    let name = path.rsplit('/').next().unwrap();
    let basename = name.trim_end_matches(|c: char| c.is_ascii_digit());
    json!({
        "id": uniq.to_string(),
        "metadata": {
            "type": vtype, "basename": basename, "name": name, "id": id, "uniq_id": uniq,
            "rank": -1, "exclusive": false, "unit": "", "size": 1,
            "paths": {"containment": path}
        }
    })
}

pub fn contains(s: u64, t: u64) -> Value {
    json!({"source": s.to_string(), "target": t.to_string(), "metadata": {"name": {"containment": "contains"}}})
}

/// Fluxion's JGF of cluster0 > rack0 > node0..1 > socket0 > core0..3 + memory0 (16 GB) + gpu0..1.
/// The first edge uses the older `subsystem`/`relationship` spelling. With `reverse_in`, every
/// containment edge also has the `{"name": {"containment": "in"}}` edge back, as some writers emit.
pub fn fluxion_jgf(reverse_in: bool) -> String {
    socket_jgf(2, 1, reverse_in)
}

/// A Fluxion-style graph of `node_count` nodes in one rack, each with `sockets` sockets of 4 cores,
/// 16 GB of memory and 2 GPUs.
pub fn socket_jgf(node_count: i64, sockets: i64, reverse_in: bool) -> String {
    let mut nodes = vec![vertex(0, "cluster", 0, "/cluster0"), vertex(1, "rack", 0, "/cluster0/rack0")];
    let mut edges = vec![json!({"source": "0", "target": "1",
        "metadata": {"subsystem": "containment", "relationship": "contains"}})];
    let mut uniq = 2;
    for n in 0..node_count {
        let node_path = format!("/cluster0/rack0/node{n}");
        let node = uniq;
        nodes.push(vertex(node, "node", n, &node_path));
        edges.push(contains(1, node));
        uniq += 1;
        for s in 0..sockets {
            let socket = uniq;
            let socket_path = format!("{node_path}/socket{s}");
            nodes.push(vertex(socket, "socket", s, &socket_path));
            edges.push(contains(node, socket));
            uniq += 1;
            // Leaves numbered across the node's sockets: core4..7 in socket1.
            for (vtype, count) in [("core", 4), ("memory", 1), ("gpu", 2)] {
                for i in s * count..(s + 1) * count {
                    let mut leaf = vertex(uniq, vtype, i, &format!("{socket_path}/{vtype}{i}"));
                    if vtype == "memory" {
                        leaf["metadata"]["size"] = json!(16);
                        leaf["metadata"]["unit"] = json!("GB");
                    }
                    nodes.push(leaf);
                    edges.push(contains(socket, uniq));
                    uniq += 1;
                }
            }
        }
    }
    if reverse_in {
        let back: Vec<Value> = edges
            .iter()
            .map(|e| json!({"source": e["target"], "target": e["source"], "metadata": {"name": {"containment": "in"}}}))
            .collect();
        edges.extend(back);
    }
    serde_json::to_string_pretty(&json!({"graph": {"directed": true, "nodes": nodes, "edges": edges}})).unwrap()
}

/// A small valid JGF: cluster "c" (id a) > node "n0" (id b) > core (id c). Tests mutate it.
pub fn small_jgf() -> Value {
    json!({"graph": {"nodes": [
        {"id": "a", "metadata": {"type": "cluster", "basename": "c", "name": "c"}},
        {"id": "b", "metadata": {"type": "node", "basename": "n", "name": "n0"}},
        {"id": "c", "metadata": {"type": "core", "basename": "core", "name": "core0"}}
    ], "edges": [
        {"source": "a", "target": "b"},
        {"source": "b", "target": "c"}
    ]}})
}

// ---------------------------------------------------------------------------------------------
