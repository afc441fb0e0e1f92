//! Every parser's refusals: the file, the exact path of the bad field, and what is allowed.

mod common;

use common::parse::*;

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
fn cluster_totals_past_what_a_count_holds_and_fractions_of_whole_units() {
    // 16 nodes of 1Ei memory hold 2^64 bytes: one more than a total can say.
    let text = cluster_with("    count: 16\n    capacity: {cpu: 8, memory: 1Ei}\n");
    let e = expect_err(cluster::load("c.yaml", &text).map(|_| ()), "c.yaml", "nodeClasses", "more memory in all");
    assert!(e.message.contains("fewer nodes or smaller capacities"), "{e}");
    assert!(cluster::load("c.yaml", &cluster_with("    count: 15\n    capacity: {cpu: 8, memory: 1Ei}\n")).is_ok());
    // Half a GPU, or half a pod, is no capacity Kubernetes would publish.
    for (resource, amount) in [("nvidia.com/gpu", "0.5"), ("pods", "500m")] {
        let text = cluster_with(&format!("    count: 1\n    capacity: {{cpu: 8, {resource}: \"{amount}\"}}\n"));
        let e = cluster::load("c.yaml", &text).unwrap_err();
        assert!(e.to_string().contains("not a whole number"), "{resource}: {e}");
    }
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

/// What a member asks of its sockets in all is the per-socket amount times the sockets; each
/// count is within 1..=1000000 but the product is not, and must be refused, not overflow.
#[test]
fn group_tolerations_names_and_yaml_paths_are_checked_as_kubernetes_would() {
    let group = |extra: &str| format!("name: x\nmembers: 2\nresources: {{cpu: 1}}\n{extra}");
    for (toleration, field, part) in [
        ("{key: gpu, operator: Exists, value: x}", "value", "Exists takes no value"),
        ("{operator: Equal, value: x}", "key", "Equal needs a key"),
        ("{key: gpu, operator: Exists, effect: Sometimes}", "effect", "allowed: NoSchedule"),
    ] {
        let text = group(&format!("tolerations: [{{key: ok, operator: Exists}}, {toleration}]\n"));
        expect_err(jobspec::parse("g.yaml", &text), "g.yaml", &format!("tolerations[1].{field}"), part);
        let sets = format!(
            "name: x\nsets:\n  - {{name: a, members: 1, resources: {{cpu: 1}}, tolerations: [{toleration}]}}\n"
        );
        expect_err(jobspec::parse("g.yaml", &sets), "g.yaml", &format!("sets[0].tolerations[0].{field}"), part);
    }
    assert!(jobspec::parse("g.yaml", &group("tolerations: [{operator: Exists, effect: NoExecute}]\n")).is_ok());
    for name in ["\"a\\nb\"", "\"a\\u001b[31m\"", &"n".repeat(254)] {
        let text = format!("name: {name}\nmembers: 2\nresources: {{cpu: 1}}\n");
        expect_err(jobspec::parse("g.yaml", &text), "g.yaml", "name", "control characters");
    }
    // A constraint that is wrong on any cluster is refused by field, not matched as unsatisfiable.
    let weights = group("topology: {level: rack, mode: preferred, weights: {rack: 0}}\n");
    expect_err(jobspec::parse("g.yaml", &weights), "g.yaml", "topology", "weight 0 of \"rack\" is out of range");
    let within = "name: x\nsets:\n  - {name: a, members: 1, resources: {cpu: 1}, \
                  topology: {level: rack, mode: required, within: zone}}\n";
    expect_err(jobspec::parse("g.yaml", within), "g.yaml", "sets[0].topology", "cannot also be kept within \"zone\"");
    let sub = "name: x\nsets:\n  - {name: a, members: 1, resources: {cpu: 1}}\n\
               subgroups: [{name: s, sets: [a], topology: {level: rack, mode: required, weights: {rack: 2}}}]\n";
    expect_err(
        jobspec::parse("g.yaml", sub),
        "g.yaml",
        "subgroups[0].topology",
        "a required \"rack\" constraint has none",
    );
    // The YAML reader's own path is not said twice.
    let e = jobspec::parse("g.yaml", &group("topology: {level: rack, mode: sometimes}\n")).unwrap_err();
    assert_eq!(e.path, "topology.mode", "{e}");
    assert!(!e.message.starts_with("topology.mode"), "{e}");
}

#[test]
fn deeply_nested_brackets_are_refused_at_once() {
    // 200,000 levels took the YAML reader minutes to refuse; quoted and commented brackets do
    // not count, and 128 levels are still read (and refused for what they hold).
    let deep = format!("a: {}{}\n", "[".repeat(200_000), "]".repeat(200_000));
    let started = std::time::Instant::now();
    let e = jobspec::parse("g.yaml", &deep).unwrap_err();
    assert!(e.message.contains("nested more than 128 deep"), "{e}");
    assert!(started.elapsed() < std::time::Duration::from_secs(1));
    let quoted = format!("name: \"{}\" # {}\nmembers: 2\nresources: {{cpu: 1}}\n", "[".repeat(200), "{".repeat(300));
    assert!(jobspec::parse("g.yaml", &quoted).is_ok());
    let at_limit = format!("a: {}{}\n", "[".repeat(128), "]".repeat(128));
    assert!(!jobspec::parse("g.yaml", &at_limit).unwrap_err().message.contains("nested more than"));
}

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
    // Fluxion reads versions 1 to 9999 alike (resource/libjobspec/jobspec.cpp), and so does muster.
    let versioned = |v: i64| {
        format!(
            "version: {v}\nresources:\n  - type: slot\n    count: 1\n    with:\n      - type: core\n        count: 1\n"
        )
    };
    for v in [2, 9999] {
        let g = jobspec::parse("j.yaml", &versioned(v)).unwrap_or_else(|e| panic!("version {v}: {e}"));
        assert_eq!(g.requests, vec![("cpu".to_string(), 1000)]);
    }
    for v in [0, 10000, -1] {
        expect_err(jobspec::parse("j.yaml", &versioned(v)), "j.yaml", "version", "allowed 1..=9999");
    }
    let text = "version: 1\nresources:\n  - type: slot\n    count: 1\n    with:\n      - type: memory\n        count: 1\n        unit: parsec\n";
    expect_err(jobspec::parse("j.yaml", text), "j.yaml", "resources[0].with[0].unit", "allowed B, KB, MB, GB");
}

#[test]
fn jobspec_slot_whose_leaves_sum_beyond_the_limit_is_refused() {
    let slot = |second: u64| {
        format!(
            "version: 1\nresources:\n  - type: slot\n    count: 1\n    with:\n      - type: memory\n        count: 1000000\n        \
             unit: TB\n      - type: memory\n        count: {second}\n        unit: TB\n"
        )
    };
    // 1,000,000 + 48,576 TB is exactly the limit, 2^60 bytes.
    let g = jobspec::parse("j.yaml", &slot(48_576)).unwrap();
    assert_eq!(g.requests, vec![("memory".to_string(), 1 << 60)]);
    expect_err(jobspec::parse("j.yaml", &slot(48_577)), "j.yaml", "resources[0].with[1].count", "absurdly large");
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
        "graph.nodes[2].metadata.properties[\"muster.dev/resource\"]",
        "unknown resource \"gpu\"",
    );
    let mut doc = small_jgf();
    doc["graph"]["nodes"][2]["metadata"]["type"] = json!("memory");
    doc["graph"]["nodes"][2]["metadata"]["unit"] = json!("parsec");
    expect_err(
        jgf::import("g.json", &doc.to_string()),
        "g.json",
        "graph.nodes[2].metadata.unit",
        "allowed B, KB, MB, GB",
    );
}

#[test]
fn jgf_amounts_beyond_the_limit_are_refused_not_clamped() {
    const LIMIT: u64 = 1 << 60;
    // The largest size that fits and one more, for each way a leaf counts its size.
    let cases = [
        (json!({"type": "core"}), LIMIT / 1000),
        (json!({"type": "memory", "unit": "TB"}), LIMIT >> 40),
        (json!({"type": "memory", "unit": "B"}), LIMIT),
        (json!({"type": "widget", "properties": {"muster.dev/resource": "memory"}}), LIMIT),
    ];
    for (meta, largest) in cases {
        let leaf = |size: u64| {
            let mut doc = small_jgf();
            let m = &mut doc["graph"]["nodes"][2]["metadata"];
            for (k, v) in meta.as_object().unwrap() {
                m[k] = v.clone();
            }
            m["size"] = json!(size);
            doc
        };
        jgf::import("g.json", &leaf(largest).to_string()).unwrap_or_else(|e| panic!("{meta} size {largest}: {e}"));
        for size in [largest + 1, u64::MAX] {
            expect_err(
                jgf::import("g.json", &leaf(size).to_string()),
                "g.json",
                "graph.nodes[2].metadata.size",
                &format!("{size} is absurdly large"),
            );
        }
    }
    // Two leaves each within the limit whose sum on one node is not.
    let mut doc = small_jgf();
    doc["graph"]["nodes"][2]["metadata"] =
        json!({"type": "memory", "basename": "memory", "unit": "B", "size": LIMIT, "name": "m0"});
    doc["graph"]["nodes"].as_array_mut().unwrap().push(
        json!({"id": "d", "metadata": {"type": "memory", "basename": "memory", "unit": "B", "size": 1, "name": "m1"}}),
    );
    doc["graph"]["edges"].as_array_mut().unwrap().push(json!({"source": "b", "target": "d"}));
    expect_err(
        jgf::import("g.json", &doc.to_string()),
        "g.json",
        "graph.nodes[3].metadata.size",
        "node \"n0\" holds more than 1152921504606846976 base units of memory",
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

#[test]
fn a_node_with_more_devices_of_a_resource_than_are_placed_by_name_is_refused() {
    let node = |count: u32| muster_graph::NodeSpec {
        name: "n".into(),
        pooled: vec![("cpu".into(), 8000)],
        devices: vec![("example.com/x".into(), count)],
        ..muster_graph::NodeSpec::default()
    };
    let e = muster_graph::Graph::from_nodes("t", &[node(u32::MAX)]).unwrap_err();
    assert_eq!(e.path, "node n");
    assert!(e.message.contains("at most 1024") && e.message.contains("pooled"), "{e}");
    let g = muster_graph::Graph::from_nodes("t", &[node(1024)]).unwrap();
    assert_eq!(g.nodes[0].devices.len(), 1024);
}
