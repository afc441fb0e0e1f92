//! The three input parsers (cluster description, JGF, jobspec) and `load_graph`: they never panic,
//! every refusal names the file, the path to the field and what is allowed, and JGF round-trips.

mod common;

use common::parse::*;

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

/// The serde form of a request is how muster-queue stores a group: every field must come back.
#[test]
fn a_group_request_survives_its_stored_form() {
    let text = "name: t\nmembers: {min: 2, max: 4}\nresources: {cpu: 2, memory: 1Gi}\nnodeSelector: {a: b}\n\
                affinity:\n  - matchExpressions:\n      - {key: z, operator: In, values: [x]}\n\
                tolerations:\n  - {key: g, operator: Exists, effect: NoSchedule}\n  - {key: h, value: v}\n\
                topology: {level: rack, mode: preferred}\nduration: 60\npolicy: best-fit\n";
    let request = muster_graph::jobspec::parse("g", text).unwrap();
    let json = serde_json::to_string(&request).unwrap();
    let back: muster_graph::GroupRequest = serde_json::from_str(&json).unwrap();
    assert_eq!(back, request);
    assert!(json.contains("\"policy\":\"best-fit\""), "{json}");
    assert!(json.contains("\"min\":2") && json.contains("\"max\":4"), "{json}");
}
