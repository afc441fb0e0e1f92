//! The three input parsers (cluster description, JGF, jobspec) and `load_graph`: they never panic,
//! every refusal names the file, the path to the field and what is allowed, and JGF round-trips.

use std::collections::BTreeMap;
use std::path::PathBuf;

use muster_graph::cluster::{self, ClusterDescription};
use muster_graph::{Graph, InputError, jgf, jobspec, load_graph};
use proptest::prelude::*;
use serde_json::{Value, json};

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// A file of the repository, relative to its root.
fn repo_file(rel: &str) -> (String, String) {
    let path: PathBuf = [env!("CARGO_MANIFEST_DIR"), "..", "..", rel].iter().collect();
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    (rel.to_string(), text)
}

/// The cluster descriptions shipped with the repository.
fn scenario_clusters() -> Vec<(String, String)> {
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
fn check_error(file: &str, e: &InputError) {
    assert_eq!(e.file, file, "wrong file in {e:?}");
    assert!(!e.path.is_empty(), "empty path in {e:?}");
    assert!(!e.message.is_empty(), "empty message in {e:?}");
}

fn check_result<T>(file: &str, r: &Result<T, InputError>) {
    if let Err(e) = r {
        check_error(file, e);
    }
}

/// Asserts an exact refusal: file, path, and a distinctive part of the message.
#[track_caller]
fn expect_err<T: std::fmt::Debug>(r: Result<T, InputError>, file: &str, path: &str, part: &str) -> InputError {
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
type NodeView = (BTreeMap<String, String>, Vec<String>, bool, bool, BTreeMap<String, u64>, usize);

fn node_views(g: &Graph) -> BTreeMap<String, NodeView> {
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
fn check_round_trip(what: &str, g: &Graph) {
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

fn cap(g: &Graph, node: &str, resource: &str) -> u64 {
    let n = g.node(g.node_id(node).unwrap());
    let id = g.resources.get(resource).unwrap_or_else(|| panic!("no resource {resource}"));
    n.capacity[id.index()]
}

// ---------------------------------------------------------------------------------------------
// JGF documents written by hand
// ---------------------------------------------------------------------------------------------

fn vertex(uniq: u64, vtype: &str, id: i64, path: &str) -> Value {
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

fn contains(s: u64, t: u64) -> Value {
    json!({"source": s.to_string(), "target": t.to_string(), "metadata": {"name": {"containment": "contains"}}})
}

/// Fluxion's JGF of cluster0 > rack0 > node0..1 > socket0 > core0..3 + memory0 (16 GB) + gpu0..1.
/// The first edge uses the older `subsystem`/`relationship` spelling. With `reverse_in`, every
/// containment edge also has the `{"name": {"containment": "in"}}` edge back, as some writers emit.
fn fluxion_jgf(reverse_in: bool) -> String {
    let mut nodes = vec![vertex(0, "cluster", 0, "/cluster0"), vertex(1, "rack", 0, "/cluster0/rack0")];
    let mut edges = vec![json!({"source": "0", "target": "1",
        "metadata": {"subsystem": "containment", "relationship": "contains"}})];
    let mut uniq = 2;
    for n in 0..2i64 {
        let node_path = format!("/cluster0/rack0/node{n}");
        let node = uniq;
        nodes.push(vertex(node, "node", n, &node_path));
        edges.push(contains(1, node));
        let socket = node + 1;
        nodes.push(vertex(socket, "socket", 0, &format!("{node_path}/socket0")));
        edges.push(contains(node, socket));
        uniq = socket + 1;
        for c in 0..4 {
            nodes.push(vertex(uniq, "core", c, &format!("{node_path}/socket0/core{c}")));
            edges.push(contains(socket, uniq));
            uniq += 1;
        }
        let mut mem = vertex(uniq, "memory", 0, &format!("{node_path}/socket0/memory0"));
        mem["metadata"]["size"] = json!(16);
        mem["metadata"]["unit"] = json!("GB");
        nodes.push(mem);
        edges.push(contains(socket, uniq));
        uniq += 1;
        for d in 0..2 {
            nodes.push(vertex(uniq, "gpu", d, &format!("{node_path}/socket0/gpu{d}")));
            edges.push(contains(socket, uniq));
            uniq += 1;
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
fn small_jgf() -> Value {
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
// Round trips
// ---------------------------------------------------------------------------------------------

#[test]
fn scenario_clusters_round_trip_through_jgf() {
    for (file, text) in scenario_clusters() {
        let g = cluster::load(&file, &text).unwrap_or_else(|e| panic!("{e}"));
        let nodes = ClusterDescription::parse(&file, &text).unwrap().expand(&file).unwrap();
        assert_eq!(g.live_nodes().count(), nodes.len(), "{file}");
        assert!(!nodes.is_empty(), "{file}");
        check_round_trip(&file, &g);
        // load_graph takes both forms and gives the same graph.
        let via_load = load_graph(&file, &text).unwrap();
        assert_eq!(jgf::export(&via_load), jgf::export(&g), "{file}");
        let exported = jgf::export(&g);
        let via_jgf = load_graph("exported.json", &exported).unwrap();
        assert!(jgf::export(&via_jgf) == exported, "{file}: load_graph of an export differs");
    }
}

#[test]
fn match_cluster_round_trip_keeps_labels_taints_and_capacity() {
    let (file, text) = repo_file("scenarios/match/cluster.yaml");
    let g = cluster::load(&file, &text).unwrap();
    let again = jgf::import("x.json", &jgf::export(&g)).unwrap();
    assert_eq!(again.live_nodes().count(), 24);
    let gpu = again.node(again.node_id("gpu-0").unwrap());
    assert_eq!(gpu.labels.get("node-type").map(String::as_str), Some("gpu"));
    assert_eq!(gpu.labels.get("muster.dev/rack").map(String::as_str), Some("gpu-rack-0"));
    assert_eq!(gpu.taints.len(), 1);
    assert_eq!((gpu.taints[0].key.as_str(), gpu.taints[0].value.as_str()), ("nvidia.com/gpu", "present"));
    assert_eq!(cap(&again, "gpu-0", "cpu"), 64_000);
    assert_eq!(cap(&again, "gpu-0", "memory"), 512 << 30);
    assert_eq!(cap(&again, "gpu-0", "nvidia.com/gpu"), 4);
    assert_eq!(cap(&again, "cpu-15", "pods"), 110);
    assert!(again.node(again.node_id("cpu-3").unwrap()).taints.is_empty());
}

#[test]
fn fluxion_jgf_imports_with_per_node_capacity_and_round_trips() {
    let text = fluxion_jgf(false);
    let g = jgf::import("fluxion.json", &text).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(g.live_nodes().count(), 2);
    for node in ["node0", "node1"] {
        assert_eq!(cap(&g, node, "cpu"), 4000, "{node}");
        assert_eq!(cap(&g, node, "memory"), 16 << 30, "{node}");
        assert_eq!(cap(&g, node, "nvidia.com/gpu"), 2, "{node}");
        assert_eq!(g.node(g.node_id(node).unwrap()).devices.len(), 2, "{node}");
    }
    assert_eq!(g.vertex(g.root).meta.name, "cluster0");
    check_round_trip("fluxion.json", &g);
    // load_graph recognises it as JGF.
    assert_eq!(jgf::export(&load_graph("fluxion.json", &text).unwrap()), jgf::export(&g));
}

/// jgf::export lists each vertex's containment edges in reverse child order, so import reverses
/// the siblings and every export -> import flips the order of racks, nodes and leaves.
#[test]
fn jgf_round_trip_is_byte_identical() {
    for (file, text) in scenario_clusters() {
        check_round_trip(&file, &cluster::load(&file, &text).unwrap());
    }
    let g = jgf::import("fluxion.json", &fluxion_jgf(false)).unwrap();
    check_round_trip("fluxion.json", &g);
}

#[test]
fn fluxion_jgf_with_reverse_in_edges_imports() {
    let g = jgf::import("fluxion-in.json", &fluxion_jgf(true)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(g.live_nodes().count(), 2);
    assert_eq!(cap(&g, "node1", "cpu"), 4000);
}

#[test]
fn jgf_without_uniq_ids_round_trips() {
    let g = jgf::import("small.json", &small_jgf().to_string()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(cap(&g, "n0", "cpu"), 1000);
    check_round_trip("small.json", &g);
}

#[test]
fn zero_capacity_round_trips() {
    let text = "name: z\nnodeClasses:\n  - name: a\n    count: 1\n    capacity: {cpu: 1, example.com/fpga: 0}\n";
    let g = cluster::load("z.yaml", text).unwrap();
    check_round_trip("z.yaml", &g);
}

#[test]
fn taints_and_labels_follow_kubernetes_name_rules() {
    let class =
        |extra: &str| format!("name: t\nnodeClasses:\n  - name: a\n    count: 1\n    capacity: {{cpu: 1}}\n{extra}");
    let e =
        cluster::load("t.yaml", &class("    taints:\n      - {key: a=b, value: c, effect: NoSchedule}\n")).unwrap_err();
    assert_eq!((e.file.as_str(), e.path.as_str()), ("t.yaml", "nodeClasses[0].taints[0].key"));
    let e = cluster::load("t.yaml", &class("    taints:\n      - {key: k, value: 'x,y', effect: NoExecute}\n"))
        .unwrap_err();
    assert_eq!(e.path, "nodeClasses[0].taints[0].value");
    let e = cluster::load("t.yaml", &class("    labels: {'bad key': x}\n")).unwrap_err();
    assert_eq!(e.path, "nodeClasses[0].labels.bad key");
    assert!(e.message.contains("[prefix/]name"), "{e}");
}

#[test]
fn reserved_label_names_round_trip() {
    let text = "name: t\nnodeClasses:\n  - name: a\n    count: 1\n    capacity: {cpu: 1}\n    labels: {muster.dev/down: 'true', muster.dev/unschedulable: 'false'}\n";
    let g = cluster::load("t.yaml", text).unwrap();
    check_round_trip("t.yaml", &g);
}

/// `load_graph` documents "JGF when it parses as a JSON object with `graph`, else a cluster
/// description"; a cluster description written as JSON (or YAML flow style) starts with `{` too.
#[test]
fn load_graph_takes_a_cluster_description_in_json() {
    let text = r#"{"name": "t", "nodeClasses": [{"name": "a", "count": 2, "capacity": {"cpu": 1}}]}"#;
    let g = cluster::load("c.json", text).unwrap();
    assert_eq!(g.live_nodes().count(), 2);
    let g = load_graph("c.json", text).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(g.live_nodes().count(), 2);
    let g = load_graph("c.yaml", "{name: t, nodeClasses: [{name: a, count: 1, capacity: {cpu: 1}}]}")
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(g.live_nodes().count(), 1);
}

// ---------------------------------------------------------------------------------------------
// Required error messages: file, exact path, what is allowed
// ---------------------------------------------------------------------------------------------

fn cluster_with(class_fields: &str) -> String {
    format!("name: t\nnodeClasses:\n  - name: a\n{class_fields}")
}

#[test]
fn cluster_counts_out_of_range() {
    for count in ["0", "-1", "-9223372036854775808", "100001", "1000000000000", "9223372036854775807"] {
        let text = cluster_with(&format!("    count: {count}\n    capacity: {{cpu: 1}}\n"));
        for r in [cluster::load("c.yaml", &text).map(|_| ()), ClusterDescription::parse("c.yaml", &text).map(|_| ())] {
            let e = expect_err(r, "c.yaml", "nodeClasses[0].count", "out of range");
            assert!(e.message.contains("allowed 1..=100000"), "{e}");
            assert!(e.message.contains(count), "{e}");
        }
    }
    // Beyond i64: refused by the parser, still at the field.
    let text = cluster_with("    count: 99999999999999999999999\n    capacity: {cpu: 1}\n");
    expect_err(cluster::load("c.yaml", &text), "c.yaml", "nodeClasses[0].count", "");
    // The second class is named in the path.
    let text = "name: t\nnodeClasses:\n  - {name: a, count: 1, capacity: {cpu: 1}}\n  - {name: b, count: 0, capacity: {cpu: 1}}\n";
    expect_err(cluster::load("c.yaml", text), "c.yaml", "nodeClasses[1].count", "allowed 1..=100000");
}

#[test]
fn cluster_unknown_resource_and_duplicates() {
    let text = cluster_with("    count: 1\n    capacity: {cpu: 1, gpu: 1}\n");
    let e =
        expect_err(cluster::load("c.yaml", &text), "c.yaml", "nodeClasses[0].capacity.gpu", "unknown resource \"gpu\"");
    assert!(e.message.contains("nvidia.com/gpu"), "says what is allowed: {e}");
    let text = cluster_with("    count: 1\n    capacity: {cpu: 1}\n    devices: {gpu: 2}\n");
    expect_err(cluster::load("c.yaml", &text), "c.yaml", "nodeClasses[0].devices.gpu", "unknown resource \"gpu\"");
    let text = cluster_with("    count: 1\n    capacity: {cpu: 1}\n    devices: {nvidia.com/gpu: 0}\n");
    expect_err(cluster::load("c.yaml", &text), "c.yaml", "nodeClasses[0].devices.nvidia.com/gpu", "allowed 1..=1024");
    let text = "name: t\nnodeClasses:\n  - {name: a, count: 1, capacity: {cpu: 1}}\n  - {name: b, count: 1, capacity: {cpu: 1}}\n  - {name: a, count: 1, capacity: {cpu: 1}}\n";
    expect_err(cluster::load("c.yaml", text), "c.yaml", "nodeClasses[2].name", "declared twice");
    let text = cluster_with("    count: 1\n    capacity: {cpu: -2}\n");
    expect_err(cluster::load("c.yaml", &text), "c.yaml", "nodeClasses[0].capacity.cpu", "negative");
    let text = cluster_with("    count: 1\n    capacity: {cpu: 1}\n    colour: red\n");
    expect_err(cluster::load("c.yaml", &text), "c.yaml", "nodeClasses[0].colour", "unknown field `colour`");
    expect_err(cluster::load("c.yaml", "name: t\nnodeClasses: []\n"), "c.yaml", "nodeClasses", "at least one");
    expect_err(cluster::load("c.yaml", "name: T_T\nnodeClasses: []\n"), "c.yaml", "name", "not a valid name");
}

#[test]
fn jobspec_counts_out_of_range() {
    for members in ["0", "-1", "1000001", "99999999999", "{min: 0, max: 4}", "{min: 2, max: 2000000}"] {
        let text = format!("name: x\nmembers: {members}\nresources: {{cpu: 1}}\n");
        let e = expect_err(jobspec::parse("g.yaml", &text), "g.yaml", "members", "out of range");
        assert!(e.message.contains("allowed 1..=1000000"), "{e}");
    }
    expect_err(
        jobspec::parse("g.yaml", "name: x\nmembers: {min: 4, max: 2}\nresources: {cpu: 1}\n"),
        "g.yaml",
        "members",
        "below min",
    );
    let flux = |top: &str, slot: &str| {
        format!(
            "version: 1\nresources:\n  - type: node\n    count: {top}\n    with:\n      - type: slot\n        count: 1\n        with:\n          - type: core\n            count: {slot}\n"
        )
    };
    for bad in ["0", "-3", "1000001", "18446744073709551615"] {
        let r = jobspec::parse("j.yaml", &flux(bad, "1"));
        let e = expect_err(r, "j.yaml", "resources[0].count", "");
        if bad != "18446744073709551615" {
            assert!(e.message.contains("allowed 1..=1000000"), "{e}");
        }
        let r = jobspec::parse("j.yaml", &flux("1", bad));
        expect_err(r, "j.yaml", "resources[0].with[0].with[0].count", "");
    }
    // Members in all: nodes x slots per node beyond the maximum.
    let text = "version: 1\nresources:\n  - type: node\n    count: 1000\n    with:\n      - type: slot\n        count: 1001\n        with:\n          - type: core\n            count: 1\n";
    expect_err(jobspec::parse("j.yaml", text), "j.yaml", "resources", "more than 1000000 members");
}

/// Sockets inside a slot multiply what is under them; each count is within 1..=1000000 but the
/// product is not, and must be refused (or saturated), not overflow.
#[test]
fn flux_socket_products_do_not_overflow() {
    let slot = |inner: &str| format!("version: 1\nresources:\n  - type: slot\n    count: 1\n    with:\n{inner}");
    let cases = [
        // 1e6 sockets x 1e6 TB of memory: 2^40 * 1e12 bytes.
        "      - type: socket\n        count: 1000000\n        with:\n          - type: memory\n            count: 1000000\n            unit: TB\n",
        // 1e6^3 cores, in millicores.
        "      - type: socket\n        count: 1000000\n        with:\n          - type: socket\n            count: 1000000\n            with:\n              - type: core\n                count: 1000000\n",
        // Four levels of sockets overflow the multiplier itself.
        "      - type: socket\n        count: 1000000\n        with:\n          - type: socket\n            count: 1000000\n            with:\n              - type: socket\n                count: 1000000\n                with:\n                  - type: socket\n                    count: 1000000\n                    with:\n                      - type: gpu\n                        count: 1\n",
    ];
    let mut panicked = Vec::new();
    for (i, inner) in cases.iter().enumerate() {
        let text = slot(inner);
        match std::panic::catch_unwind(|| jobspec::parse("j.yaml", &text)) {
            Err(_) => panicked.push(i),
            Ok(Ok(g)) => assert!(g.requests.iter().all(|(_, a)| *a <= 1 << 60), "case {i}: {g:?}"),
            Ok(Err(e)) => check_error("j.yaml", &e),
        }
    }
    assert!(panicked.is_empty(), "jobspec::parse panicked on cases {panicked:?}");
}

#[test]
fn jobspec_unknown_resources() {
    let e = expect_err(
        jobspec::parse("g.yaml", "name: x\nmembers: 2\nresources: {cpu: 1, gpu: 1}\n"),
        "g.yaml",
        "resources.gpu",
        "unknown resource \"gpu\"",
    );
    assert!(e.message.contains("nvidia.com/gpu"), "{e}");
    let text =
        "version: 1\nresources:\n  - type: slot\n    count: 1\n    with:\n      - type: widget\n        count: 1\n";
    let e = expect_err(
        jobspec::parse("j.yaml", text),
        "j.yaml",
        "resources[0].with[0].type",
        "unknown resource \"widget\"",
    );
    assert!(e.message.contains("core, gpu, memory and socket"), "{e}");
    let text =
        "version: 2\nresources:\n  - type: slot\n    count: 1\n    with:\n      - type: core\n        count: 1\n";
    expect_err(jobspec::parse("j.yaml", text), "j.yaml", "version", "only 1");
    let text = "version: 1\nresources:\n  - type: slot\n    count: 1\n    with:\n      - type: memory\n        count: 1\n        unit: parsec\n";
    expect_err(jobspec::parse("j.yaml", text), "j.yaml", "resources[0].with[0].unit", "allowed B, KB, MB, GB");
}

#[test]
fn jgf_unknown_leaf_type() {
    let mut doc = small_jgf();
    doc["graph"]["nodes"][2]["metadata"]["type"] = json!("widget");
    let e = expect_err(
        jgf::import("g.json", &doc.to_string()),
        "g.json",
        "graph.nodes[2].metadata.type",
        "unknown resource type \"widget\"",
    );
    assert!(e.message.contains("core, memory, gpu"), "{e}");
    let mut doc = small_jgf();
    doc["graph"]["nodes"][2]["metadata"]["properties"] = json!({"muster.dev/resource": "gpu"});
    expect_err(
        jgf::import("g.json", &doc.to_string()),
        "g.json",
        "graph.nodes[2].metadata.type",
        "unknown resource \"gpu\"",
    );
    let mut doc = small_jgf();
    doc["graph"]["nodes"][2]["metadata"]["type"] = json!("memory");
    doc["graph"]["nodes"][2]["metadata"]["unit"] = json!("parsec");
    expect_err(
        jgf::import("g.json", &doc.to_string()),
        "g.json",
        "graph.nodes[2].metadata.type",
        "allowed B, KB, MB, GB",
    );
}

#[test]
fn jgf_duplicates() {
    let mut doc = small_jgf();
    doc["graph"]["nodes"][2]["id"] = json!("b");
    expect_err(jgf::import("g.json", &doc.to_string()), "g.json", "graph.nodes[2].id", "duplicate vertex id \"b\"");
    // Two nodes of the same name under the cluster.
    let mut doc = small_jgf();
    let nodes = doc["graph"]["nodes"].as_array_mut().unwrap();
    nodes.push(json!({"id": "d", "metadata": {"type": "node", "basename": "n", "name": "n0"}}));
    nodes.push(json!({"id": "e", "metadata": {"type": "core", "basename": "core", "name": "core0"}}));
    let edges = doc["graph"]["edges"].as_array_mut().unwrap();
    edges.push(json!({"source": "a", "target": "d"}));
    edges.push(json!({"source": "d", "target": "e"}));
    expect_err(
        jgf::import("g.json", &doc.to_string()),
        "g.json",
        "graph.nodes[3].metadata.name",
        "duplicate node name \"n0\"",
    );
    let mut doc = small_jgf();
    doc["graph"]["nodes"][1]["metadata"]["uniq_id"] = json!(7);
    doc["graph"]["nodes"][2]["metadata"]["uniq_id"] = json!(7);
    expect_err(
        jgf::import("g.json", &doc.to_string()),
        "g.json",
        "graph.nodes[2].metadata.uniq_id",
        "duplicate uniq_id 7",
    );
}

#[test]
fn jgf_cycles_and_dangling_edges() {
    // b and c contain each other; a is the only root and cannot reach them.
    let mut doc = small_jgf();
    doc["graph"]["edges"] = json!([{"source": "b", "target": "c"}, {"source": "c", "target": "b"}]);
    expect_err(jgf::import("g.json", &doc.to_string()), "g.json", "graph.nodes[1]", "cycle");
    // Every vertex has a parent: no root at all.
    let mut doc = small_jgf();
    doc["graph"]["edges"].as_array_mut().unwrap().push(json!({"source": "c", "target": "a"}));
    expect_err(jgf::import("g.json", &doc.to_string()), "g.json", "graph.edges", "cycle");
    // A vertex containing itself.
    let mut doc = small_jgf();
    doc["graph"]["edges"].as_array_mut().unwrap().push(json!({"source": "c", "target": "c"}));
    expect_err(jgf::import("g.json", &doc.to_string()), "g.json", "graph.edges[2]", "contains itself");
    // An edge to a missing id, in either position.
    let mut doc = small_jgf();
    doc["graph"]["edges"][1]["target"] = json!("zz");
    expect_err(jgf::import("g.json", &doc.to_string()), "g.json", "graph.edges[1]", "dangling edge \"b\" -> \"zz\"");
    let mut doc = small_jgf();
    doc["graph"]["edges"][0]["source"] = json!("nowhere");
    expect_err(jgf::import("g.json", &doc.to_string()), "g.json", "graph.edges[0]", "dangling edge");
    // Two parents; two roots.
    let mut doc = small_jgf();
    doc["graph"]["edges"].as_array_mut().unwrap().push(json!({"source": "a", "target": "c"}));
    expect_err(jgf::import("g.json", &doc.to_string()), "g.json", "graph.edges[2]", "two containment parents");
    let mut doc = small_jgf();
    doc["graph"]["edges"].as_array_mut().unwrap().pop();
    expect_err(jgf::import("g.json", &doc.to_string()), "g.json", "graph.edges", "2 roots");
}

#[test]
fn jgf_sizes_and_shapes() {
    // Size 0 is a real capacity (a node advertising none of a resource) and imports.
    let mut doc = small_jgf();
    doc["graph"]["nodes"][2]["metadata"]["size"] = json!(0);
    assert!(jgf::import("g.json", &doc.to_string()).is_ok());
    let mut doc = small_jgf();
    doc["graph"]["nodes"][2]["metadata"]["size"] = json!(-4);
    expect_err(jgf::import("g.json", &doc.to_string()), "g.json", "graph.nodes[2].metadata.size", "");
    expect_err(jgf::import("g.json", "{\"graph\": {\"nodes\": []}}"), "g.json", "graph.nodes", "no vertices");
    let mut doc = small_jgf();
    doc["graph"]["nodes"][2]["metadata"]["paths"] = json!({"containment": "/c/elsewhere/core0"});
    expect_err(
        jgf::import("g.json", &doc.to_string()),
        "g.json",
        "graph.nodes[2].metadata.paths.containment",
        "disagrees",
    );
    let e = jgf::import("g.json", "{\"graph\": ").unwrap_err();
    check_error("g.json", &e);
    let e = load_graph("g.json", "{\"graph\": 3}").unwrap_err();
    check_error("g.json", &e);
}

// ---------------------------------------------------------------------------------------------
// Never panic: arbitrary input
// ---------------------------------------------------------------------------------------------

/// Runs every parser on `text`; each returns Ok or a well-formed error naming `file`.
fn all_parsers(file: &str, text: &str) {
    check_result(file, &cluster::load(file, text));
    check_result(file, &ClusterDescription::parse(file, text));
    check_result(file, &jgf::import(file, text));
    check_result(file, &jobspec::parse(file, text));
    check_result(file, &load_graph(file, text));
}

fn config(cases: u32) -> ProptestConfig {
    ProptestConfig { cases, failure_persistence: None, ..ProptestConfig::default() }
}

proptest! {
    #![proptest_config(config(512))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        all_parsers("bytes.bin", &String::from_utf8_lossy(&bytes));
    }

    #[test]
    fn arbitrary_strings_never_panic(text in "\\PC{0,300}") {
        all_parsers("text.yaml", &text);
    }

    #[test]
    fn yamlish_strings_never_panic(text in "[-{}\\[\\]:,\"' \\n0-9a-z_./]{0,200}") {
        all_parsers("yamlish.yaml", &text);
    }
}

// ---------------------------------------------------------------------------------------------
// Never panic: structured documents with hostile values
// ---------------------------------------------------------------------------------------------

/// Integers of every awkward kind: 0, negative, small, at and beyond the limits, huge.
fn nasty_int(small_max: i64) -> impl Strategy<Value = Value> {
    prop_oneof![
        4 => (1..=small_max).prop_map(|n| json!(n)),
        1 => Just(json!(0)),
        1 => (-5i64..0).prop_map(|n| json!(n)),
        1 => prop::sample::select(vec![
            json!(100_001), json!(1_000_000), json!(1_000_001), json!(1024), json!(1025),
            json!(4_294_967_296u64), json!(i64::MAX), json!(i64::MIN), json!(u64::MAX),
            json!(1.5), json!(1e300), json!("3"), Value::Null, json!(true),
        ]),
    ]
}

fn pick(items: &[&'static str]) -> impl Strategy<Value = String> + use<> {
    prop::sample::select(items.to_vec()).prop_map(str::to_string)
}

const RESOURCE_NAMES: &[&str] = &[
    "cpu",
    "memory",
    "pods",
    "ephemeral-storage",
    "hugepages-2Mi",
    "nvidia.com/gpu",
    "example.com/fpga",
    "gpu",
    "",
    "cpus",
    "a/b",
    "x.io/",
    "core",
    "socket",
];
const QUANTITIES: &[&str] = &[
    "0",
    "1",
    "32",
    "500m",
    "128Gi",
    "1.5",
    "-1",
    "1e3",
    "abc",
    "",
    "99999999999999999999Ei",
    "0.0001m",
    "+5",
    "1Ei",
    "16E",
    "1.",
    ".5",
    "8Ki",
    "1000000000000000000000000",
];

fn quantity() -> impl Strategy<Value = Value> {
    prop_oneof![
        3 => pick(QUANTITIES).prop_map(Value::String),
        1 => nasty_int(64),
    ]
}

/// Whether the generated documents may hit the round-trip bugs recorded in the ignored tests.
#[derive(Clone, Copy)]
enum Mode {
    Hostile,
    Benign,
}

fn cluster_doc(mode: Mode) -> impl Strategy<Value = Value> {
    let (taint_keys, taint_values, label_keys, quantities): (&[&str], &[&str], &[&str], &[&str]) = match mode {
        Mode::Hostile => (
            &["dedicated", "nvidia.com/gpu", "", "a=b", "a,b", "k:x"],
            &["", "batch", "x=y", "p,q", "a:b"],
            &[
                "node-type",
                "muster.dev/rack",
                "kubernetes.io/hostname",
                "muster.dev/down",
                "muster.dev/unschedulable",
                "muster.dev/taints",
                "x",
            ],
            QUANTITIES,
        ),
        Mode::Benign => (
            &["dedicated", "nvidia.com/gpu", "k:x"],
            &["", "batch", "x=y", "a:b"],
            &["node-type", "muster.dev/rack", "kubernetes.io/hostname", "x"],
            &["1", "32", "500m", "128Gi", "1.5", "-1", "abc", "8Ki", "1Ei"],
        ),
    };
    let taint = (pick(taint_keys), pick(taint_values), pick(&["NoSchedule", "PreferNoSchedule", "NoExecute", "Bogus"]))
        .prop_map(|(key, value, effect)| json!({"key": key, "value": value, "effect": effect}));
    let quantity = prop_oneof![
        3 => pick(quantities).prop_map(Value::String),
        1 => (1i64..64).prop_map(|n| json!(n)),
        1 => Just(json!(-3)),
    ];
    let count = prop_oneof![
        6 => (1i64..6).prop_map(|n| json!(n)),
        1 => prop::sample::select(vec![
            json!(0), json!(-1), json!(100_001), json!(i64::MAX), json!(i64::MIN), json!(u64::MAX),
            json!(1.5), json!("2"), Value::Null,
        ]),
    ];
    let class = (
        pick(&["a", "b", "gpu", "a", "Bad", "", "a-1"]),
        count,
        prop::collection::btree_map(pick(RESOURCE_NAMES), quantity, 0..4),
        prop::collection::btree_map(pick(&["nvidia.com/gpu", "example.com/nic", "gpu", "cpu"]), nasty_int(4), 0..2),
        prop::collection::btree_map(
            pick(label_keys),
            pick(&["cpu", "true", "false", "", "a,b", "k=v:NoSchedule"]),
            0..3,
        ),
        prop::collection::vec(taint, 0..3),
        any::<bool>(),
        prop::collection::btree_map(pick(&["zone", "rack", "block", "row"]), nasty_int(6), 0..3),
        0u8..8,
    )
        .prop_map(|(name, count, capacity, devices, labels, taints, unschedulable, spread, extras)| {
            let mut c = json!({"name": name, "count": count, "capacity": capacity});
            if extras & 1 != 0 {
                c["devices"] = json!(devices);
            }
            if extras & 2 != 0 {
                c["labels"] = json!(labels);
                c["taints"] = json!(taints);
            }
            if extras & 4 != 0 {
                c["spread"] = json!(spread);
                c["unschedulable"] = json!(unschedulable);
            }
            c
        });
    let level = (
        pick(&["zone", "rack", "block", "node", "cluster", "Rack", ""]),
        pick(&["l/zone", "l/rack", "muster.dev/rack", ""]),
    )
        .prop_map(|(level, label)| json!({"level": level, "label": label}));
    (
        pick(&["demo", "", "Bad_Name", "a", "x-y-z"]),
        prop::option::of(prop::collection::vec(level, 0..4)),
        prop::collection::vec(class, 0..4),
        0u8..12,
    )
        .prop_map(|(name, topology, classes, extra)| {
            let mut d = json!({"name": name, "nodeClasses": classes});
            if let Some(t) = topology {
                d["topology"] = json!(t);
            }
            if extra == 0 {
                d["colour"] = json!("red");
            }
            if extra == 1 {
                d.as_object_mut().unwrap().remove("nodeClasses");
            }
            d
        })
}

/// A JGF graph: a random tree (each vertex's parent comes before it) with random types, sizes,
/// units and properties, then mutated with extra edges and duplicated ids.
fn jgf_doc(mode: Mode) -> impl Strategy<Value = Value> {
    let size = prop_oneof![
        6 => (1u64..64).prop_map(|n| json!(n)),
        1 => prop::sample::select(vec![
            json!(0), json!(-1), json!(u64::MAX), json!(1u64 << 60), json!(1u64 << 62), json!(1.5), json!("4"),
        ]),
    ];
    let props = prop::collection::btree_map(
        pick(&[
            "muster.dev/resource",
            "muster.dev/kind",
            "muster.dev/taints",
            "muster.dev/down",
            "muster.dev/unschedulable",
            "node-type",
        ]),
        pick(&[
            "cpu",
            "memory",
            "nvidia.com/gpu",
            "gpu",
            "device",
            "true",
            "k=v:NoSchedule",
            "k:Bogus",
            "a,b",
            "",
            "example.com/fpga",
        ]),
        0..3,
    );
    let vertex = (
        pick(&["cluster", "rack", "zone", "node", "node", "node", "socket", "core", "core", "memory", "gpu", "widget"]),
        pick(&["n0", "n1", "n2", "rack0", "core0", "gpu0", "memory0"]),
        size,
        pick(&["", "GB", "B", "TB", "KB", "m", "parsec"]),
        props,
        any::<prop::sample::Index>(),
        0u8..16,
    );
    let edge_meta = prop::sample::select(vec![
        Value::Null,
        json!({"name": {"containment": "contains"}}),
        json!({"subsystem": "containment", "relationship": "contains"}),
        json!({"name": {"network": "contains"}}),
        json!({"name": {"containment": "in"}}),
        json!(7),
    ]);
    let extra_edge = (any::<prop::sample::Index>(), any::<prop::sample::Index>(), edge_meta, 0u8..4);
    (prop::collection::vec(vertex, 1..12), prop::collection::vec(extra_edge, 0..3), 0u8..8).prop_map(
        move |(vertices, extra_edges, flags)| {
            let n = vertices.len();
            let mut nodes = Vec::new();
            let mut edges = Vec::new();
            for (i, (vtype, name, size, unit, props, parent, knobs)) in vertices.into_iter().enumerate() {
                let vtype = if i == 0 && matches!(mode, Mode::Benign) { "cluster".to_string() } else { vtype };
                let name = if vtype == "node" && matches!(mode, Mode::Benign) { format!("node{i}") } else { name };
                let mut meta = json!({"type": vtype, "basename": name, "name": name, "size": size, "unit": unit});
                if knobs & 1 != 0 || matches!(mode, Mode::Benign) {
                    meta["uniq_id"] = json!(i);
                }
                if knobs & 2 != 0 {
                    meta["properties"] = json!(props);
                }
                if knobs & 4 != 0 {
                    meta["paths"] = json!({"containment": format!("/{name}")});
                }
                let id = if knobs == 15 && matches!(mode, Mode::Hostile) { "0".to_string() } else { i.to_string() };
                nodes.push(json!({"id": id, "metadata": meta}));
                if i > 0 {
                    let p = parent.index(i);
                    edges.push(json!({"source": p.to_string(), "target": i.to_string(),
                        "metadata": {"name": {"containment": "contains"}}}));
                }
            }
            if matches!(mode, Mode::Hostile) {
                for (s, t, meta, kind) in extra_edges {
                    let (s, t) = (s.index(n + 1), t.index(n + 1));
                    let e = json!({"source": s.to_string(), "target": t.to_string(), "metadata": meta});
                    match kind {
                        0 => edges.push(e),
                        _ if !edges.is_empty() => {
                            let k = s % edges.len();
                            edges[k] = e;
                        }
                        _ => {}
                    }
                }
            }
            let mut doc = json!({"graph": {"nodes": nodes, "edges": edges}});
            if flags == 0 && matches!(mode, Mode::Hostile) {
                doc["graph"]["directed"] = json!("yes");
            }
            doc
        },
    )
}

fn flux_count() -> impl Strategy<Value = Value> {
    prop_oneof![
        4 => nasty_int(4),
        1 => (nasty_int(4), prop::option::of(nasty_int(8)), prop::option::of(pick(&["+", "*", "^"])), prop::option::of(nasty_int(2)))
            .prop_map(|(min, max, operator, operand)| {
                let mut c = json!({"min": min});
                if let Some(m) = max { c["max"] = m; }
                if let Some(o) = operator { c["operator"] = json!(o); }
                if let Some(o) = operand { c["operand"] = o; }
                c
            }),
    ]
}

fn flux_resource() -> impl Strategy<Value = Value> {
    let leaf_type = pick(&["core", "gpu", "memory", "nvidia.com/gpu", "example.com/x", "pods", "widget", "cpu"]);
    let leaf = (leaf_type, flux_count(), prop::option::of(pick(&["B", "KB", "MB", "GB", "TB", "parsec"]))).prop_map(
        |(t, count, unit)| {
            let mut r = json!({"type": t, "count": count});
            if let Some(u) = unit {
                r["unit"] = json!(u);
            }
            r
        },
    );
    leaf.prop_recursive(5, 40, 4, |inner| {
        (
            pick(&["cluster", "rack", "zone", "node", "slot", "slot", "socket", "core", "widget"]),
            flux_count(),
            prop::collection::vec(inner, 0..4),
            prop::option::of(pick(&["ranks", "task"])),
            prop::option::of(any::<bool>()),
        )
            .prop_map(|(t, count, with, label, exclusive)| {
                let mut r = json!({"type": t, "count": count, "with": with});
                if let Some(l) = label {
                    r["label"] = json!(l);
                }
                if let Some(x) = exclusive {
                    r["exclusive"] = json!(x);
                }
                r
            })
    })
}

fn flux_doc() -> impl Strategy<Value = Value> {
    (
        prop_oneof![4 => Just(json!(1)), 1 => nasty_int(3)],
        prop::collection::vec(flux_resource(), 0..3),
        prop::option::of(prop_oneof![
            Just(json!(0)),
            Just(json!(3600)),
            Just(json!(-1)),
            Just(json!(1e300)),
            Just(json!(0.5)),
            Just(json!(u64::MAX)),
            Just(json!("1h")),
            Just(json!(315_360_001)),
        ]),
    )
        .prop_map(|(version, resources, duration)| {
            let mut d = json!({"version": version, "resources": resources, "tasks": [{"command": ["app"]}]});
            if let Some(s) = duration {
                d["attributes"] = json!({"system": {"duration": s}});
            }
            d
        })
}

fn group_doc() -> impl Strategy<Value = Value> {
    (
        pick(&["train", "", "x"]),
        flux_count(),
        prop::collection::btree_map(pick(RESOURCE_NAMES), quantity(), 0..4),
        prop::option::of(pick(&["rack", "zone", ""]).prop_flat_map(|l| {
            pick(&["required", "preferred", "maybe"]).prop_map(move |m| json!({"level": l, "mode": m}))
        })),
        prop::option::of(nasty_int(7200)),
        prop::option::of(pick(&["first", "pack", "spread", "high-id", "best"])),
        prop::collection::vec(
            (pick(&["k", "", "node-type"]), pick(&["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Bogus"]), prop::collection::vec(pick(&["1", "a", ""]), 0..3))
                .prop_map(|(key, operator, values)| json!({"matchExpressions": [{"key": key, "operator": operator, "values": values}]})),
            0..2,
        ),
        prop::collection::vec(
            (pick(&["", "k"]), pick(&["Exists", "Equal", "Bogus"]), pick(&["", "NoSchedule", "Bogus"]))
                .prop_map(|(key, operator, effect)| json!({"key": key, "operator": operator, "effect": effect})),
            0..2,
        ),
    )
        .prop_map(|(name, members, resources, topology, duration, policy, affinity, tolerations)| {
            let mut d = json!({"name": name, "members": members, "resources": resources});
            if let Some(t) = topology {
                d["topology"] = t;
            }
            if let Some(x) = duration {
                d["duration"] = x;
            }
            if let Some(p) = policy {
                d["policy"] = json!(p);
            }
            if !affinity.is_empty() {
                d["affinity"] = json!(affinity);
            }
            if !tolerations.is_empty() {
                d["tolerations"] = json!(tolerations);
            }
            d
        })
}

/// The same document as YAML or as JSON (YAML parsers read both; JGF only reads JSON).
fn render(doc: &Value, yaml: bool) -> String {
    if yaml { serde_yaml_ng::to_string(doc).unwrap() } else { doc.to_string() }
}

/// A document with one byte-level mutation: truncated, or a character replaced.
fn mutated(text: &str, at: prop::sample::Index, byte: u8, how: u8) -> String {
    let mut bytes = text.as_bytes().to_vec();
    if bytes.is_empty() {
        return String::new();
    }
    let i = at.index(bytes.len());
    match how % 3 {
        0 => bytes.truncate(i),
        1 => bytes[i] = byte,
        _ => bytes.insert(i, byte),
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

proptest! {
    #![proptest_config(config(384))]

    #[test]
    fn cluster_documents_never_panic(doc in cluster_doc(Mode::Hostile), yaml in any::<bool>(),
                                     at in any::<prop::sample::Index>(), byte in any::<u8>(), how in 0u8..6) {
        let text = render(&doc, yaml);
        all_parsers("c.yaml", &text);
        if let Ok(g) = cluster::load("c.yaml", &text) {
            // Whatever loads exports, and the export is accepted again.
            let out = jgf::export(&g);
            check_result("x.json", &jgf::import("x.json", &out));
        }
        if how < 3 {
            all_parsers("c.yaml", &mutated(&text, at, byte, how));
        }
    }

    #[test]
    fn cluster_documents_round_trip(doc in cluster_doc(Mode::Benign)) {
        let text = render(&doc, true);
        if let Ok(g) = cluster::load("c.yaml", &text) {
            check_round_trip(&text, &g);
        }
    }

    #[test]
    fn jgf_documents_never_panic(doc in jgf_doc(Mode::Hostile), at in any::<prop::sample::Index>(),
                                 byte in any::<u8>(), how in 0u8..6) {
        let text = doc.to_string();
        check_result("g.json", &jgf::import("g.json", &text));
        check_result("g.json", &load_graph("g.json", &text));
        if let Ok(g) = jgf::import("g.json", &text) {
            let out = jgf::export(&g);
            check_result("x.json", &jgf::import("x.json", &out));
        }
        if how < 3 {
            let m = mutated(&text, at, byte, how);
            check_result("g.json", &jgf::import("g.json", &m));
            check_result("g.json", &load_graph("g.json", &m));
        }
    }

    #[test]
    fn jgf_documents_round_trip(doc in jgf_doc(Mode::Benign)) {
        if let Ok(g) = jgf::import("g.json", &doc.to_string()) {
            check_round_trip(&doc.to_string(), &g);
        }
    }

    #[test]
    fn jobspec_documents_never_panic(flux in flux_doc(), group in group_doc(), yaml in any::<bool>(),
                                     at in any::<prop::sample::Index>(), byte in any::<u8>(), how in 0u8..6) {
        for doc in [&flux, &group] {
            let text = render(doc, yaml);
            match jobspec::parse("j.yaml", &text) {
                Ok(g) => {
                    prop_assert!(g.min_members >= 1 && g.min_members <= g.max_members, "{g:?}");
                    prop_assert!(g.max_members <= jobspec::MAX_MEMBERS, "{g:?}");
                }
                Err(e) => check_error("j.yaml", &e),
            }
            if how < 3 {
                check_result("j.yaml", &jobspec::parse("j.yaml", &mutated(&text, at, byte, how)));
            }
        }
    }
}
