//! Devices as Dynamic Resource Allocation publishes them: members ask for a number of one
//! driver's devices that CEL selectors accept, and a gang gets them on every node at once or
//! not at all, each device to one member only.

mod common;

use std::collections::{BTreeMap, BTreeSet};

use common::{check_invariants, fingerprint};
use muster_graph::dra::{AttributeValue, DeviceRequest, PublishedDevice};
use muster_graph::graph::VertexId;
use muster_graph::jobspec::parse;
use muster_graph::{Graph, GroupRequest, MatchOutcome, NodeSpec, Policy, ResourceGraph};

const DRIVER: &str = "gpu.example.com";
const H100: &str = r#"device.attributes["gpu.example.com"].model == "h100""#;

/// A GPU as a driver publishes it: its model, a per-device uuid (so that no two devices are
/// published alike), a driver version and its memory.
fn gpu(node: &str, i: usize, model: &str) -> PublishedDevice {
    PublishedDevice::new(DRIVER, node, &format!("gpu-{i}"))
        .with_attribute("model", AttributeValue::String(model.into()))
        .with_attribute("uuid", AttributeValue::String(format!("GPU-{node}-{i}")))
        .with_attribute("driverVersion", AttributeValue::Version("550.54.15".into()))
        .with_capacity("memory", if model == "h100" { "80Gi" } else { "40Gi" })
}

fn node(name: &str, models: &[&str]) -> NodeSpec {
    NodeSpec {
        name: name.into(),
        pooled: vec![("cpu".into(), 64_000), ("memory".into(), 512 << 30)],
        published: models.iter().enumerate().map(|(i, m)| gpu(name, i, m)).collect(),
        ..NodeSpec::default()
    }
}

/// `a100` nodes of 8 A100s, then `h100` nodes of 8 H100s.
fn cluster(a100: usize, h100: usize) -> ResourceGraph {
    let mut nodes: Vec<NodeSpec> = (0..a100).map(|i| node(&format!("a-{i}"), &["a100"; 8])).collect();
    nodes.extend((0..h100).map(|i| node(&format!("h-{i}"), &["h100"; 8])));
    ResourceGraph::new(Graph::from_nodes("dra", &nodes).unwrap(), Policy::First)
}

fn devices(count: u32, selectors: &[&str]) -> DeviceRequest {
    DeviceRequest {
        name: "gpus".into(),
        driver: DRIVER.into(),
        count,
        selectors: selectors.iter().map(|s| s.to_string()).collect(),
        extended_resource: None,
    }
}

fn gang(name: &str, members: u32, request: DeviceRequest) -> GroupRequest {
    let mut g = GroupRequest::simple(name, members, &[("cpu", 1000)]);
    g.devices = vec![request];
    g
}

/// Each member's devices, as (node name, published device) pairs, by member index.
fn held(r: &ResourceGraph, id: u64) -> BTreeMap<u32, Vec<(String, PublishedDevice)>> {
    let a = r.allocation(id).unwrap();
    let by_vertex: BTreeMap<VertexId, (String, PublishedDevice)> = (r.graph.nodes.iter())
        .flat_map(|n| {
            n.devices.iter().map(move |s| (s.vertex, (n.name.clone(), (**s.published.as_ref().unwrap()).clone())))
        })
        .collect();
    a.members.iter().map(|m| (m.index, m.devices.iter().map(|v| by_vertex[v].clone()).collect())).collect()
}

fn model(d: &PublishedDevice) -> &AttributeValue {
    &d.attributes["model"]
}

#[test]
fn a_gang_claiming_eight_selected_gpus_each_lands_whole_on_the_nodes_whose_devices_match() {
    let mut r = cluster(4, 4);
    let MatchOutcome::Allocated(id) = r.allocate(&gang("train", 4, devices(8, &[H100])), 0) else {
        panic!("four H100 nodes take four members of eight H100s");
    };
    let held = held(&r, id);
    let mut seen = BTreeSet::new();
    for (index, devices) in &held {
        let member = r.allocation(id).unwrap().members.iter().find(|m| m.index == *index).unwrap();
        let node = &r.graph.node(member.node).name;
        assert_eq!(devices.len(), 8, "member {index} holds eight devices");
        for (on, d) in devices {
            assert_eq!(on, node, "member {index}'s devices are on its own node");
            assert_eq!(model(d), &AttributeValue::String("h100".into()), "member {index} got {}", d.name);
            assert!(seen.insert((on.clone(), d.name.clone())), "{on}/{} is given twice", d.name);
        }
    }
    assert_eq!(seen.len(), 32);
    check_invariants(&r);

    // The A100 nodes are all free, yet none serves another member: it does not fit now, and
    // asking changes nothing.
    let before = fingerprint(&r.graph);
    match r.allocate(&gang("more", 1, devices(8, &[H100])), 0) {
        MatchOutcome::Busy(why) => {
            assert!(why.contains("the free devices its selectors accept serve 0"), "{why}");
        }
        other => panic!("no H100 is free: {other:?}"),
    }
    assert_eq!(fingerprint(&r.graph), before);
}

#[test]
fn a_gang_that_needs_more_matching_devices_than_exist_is_unsatisfiable_and_changes_nothing() {
    let mut r = cluster(4, 4);
    let before = fingerprint(&r.graph);
    match r.allocate(&gang("big", 5, devices(8, &[H100])), 0) {
        MatchOutcome::Unsatisfiable(why) => assert!(why.contains("needs 5 members"), "{why}"),
        other => panic!("four H100 nodes cannot take five members: {other:?}"),
    }
    assert_eq!(fingerprint(&r.graph), before);
    match r.allocate(&gang("nine", 1, devices(9, &[])), 0) {
        MatchOutcome::Unsatisfiable(why) => assert!(why.contains("9 gpu.example.com"), "{why}"),
        other => panic!("no node has nine devices: {other:?}"),
    }
    assert_eq!(fingerprint(&r.graph), before);
}

#[test]
fn a_node_of_two_models_serves_members_by_its_matching_devices_and_plain_counts_take_the_rest() {
    let nodes = [node("mixed", &["a100", "h100", "a100", "h100", "a100", "h100", "a100", "h100"])];
    let mut r = ResourceGraph::new(Graph::from_nodes("dra", &nodes).unwrap(), Policy::First);
    // Elastic 1..8 members of two H100s each: the node's four H100s take two of them.
    let mut elastic = gang("pairs", 1, devices(2, &[H100]));
    elastic.max_members = 8;
    let MatchOutcome::Allocated(id) = r.allocate(&elastic, 0) else { panic!("the node takes pairs of H100s") };
    let pairs = held(&r, id);
    assert_eq!(pairs.len(), 2, "four H100s make two pairs");
    for devices in pairs.values() {
        assert!(devices.iter().all(|(_, d)| model(d) == &AttributeValue::String("h100".into())), "{devices:?}");
    }
    // A member asking one H100 by selector and one more device of the driver by count: no
    // H100 is left, so it does not fit, though four devices are free.
    let mut both = gang("both", 1, devices(1, &[H100]));
    both.requests.push((DRIVER.into(), 1));
    assert!(matches!(r.allocate(&both, 0), MatchOutcome::Busy(_)));
    r.cancel(id).unwrap();
    // Now it does: its selected device is an H100 and its counted one whatever is left first,
    // which the selector's pick does not take from it.
    let MatchOutcome::Allocated(id) = r.allocate(&both, 0) else { panic!("both fit on the idle node") };
    let got: Vec<AttributeValue> = held(&r, id)[&0].iter().map(|(_, d)| model(d).clone()).collect();
    assert_eq!(got.len(), 2);
    assert!(got.contains(&AttributeValue::String("h100".into())), "{got:?}");
    check_invariants(&r);
}

#[test]
fn selectors_read_quantities_versions_and_absent_domains_as_kubernetes_does() {
    let fits = |selector: &str| {
        let mut r = cluster(1, 1);
        match r.allocate(&gang("probe", 1, devices(8, &[selector])), 0) {
            MatchOutcome::Allocated(id) => Some(r.graph.node(r.allocation(id).unwrap().members[0].node).name.clone()),
            MatchOutcome::Unsatisfiable(_) => None,
            other => panic!("{selector}: {other:?}"),
        }
    };
    let h100_only = Some("h-0".to_string());
    let either = Some("a-0".to_string());
    assert_eq!(fits(r#"device.capacity["gpu.example.com"].memory.compareTo(quantity("64Gi")) >= 0"#), h100_only);
    assert_eq!(fits(r#"device.capacity["gpu.example.com"].memory.isLessThan(quantity("41Gi"))"#), either);
    assert_eq!(fits(r#"device.attributes["gpu.example.com"].driverVersion.isGreaterThan(semver("550.0.0"))"#), either);
    assert_eq!(fits(r#"device.attributes["gpu.example.com"].driverVersion.isLessThan(semver("550.0.0"))"#), None);
    assert_eq!(
        fits(r#"device.driver == "gpu.example.com" && device.attributes["gpu.example.com"].model != "a100""#),
        h100_only
    );
    // cel.bind names the domain once, as Kubernetes' environment allows.
    assert_eq!(
        fits(r#"cel.bind(g, device.attributes["gpu.example.com"], g.model == "h100" && g.uuid != "")"#),
        h100_only
    );
    // A domain no device has is an empty map, not an error: nothing is in it.
    assert_eq!(fits(r#"!("model" in device.attributes["other.example.com"])"#), either);
    assert_eq!(fits(r#"has(device.attributes["other.example.com"].model)"#), None);
    // A selector that reads the whole device (so that its result cannot be shared between
    // devices alike on fixed paths) decides the same.
    assert_eq!(
        fits(
            r#"device.attributes["gpu.example.com"].exists(k, k == "model") && device.attributes["gpu.example.com"]["model"] == "h100""#
        ),
        h100_only
    );
}

#[test]
fn a_selector_that_fails_on_every_device_is_unsatisfiable_and_says_why() {
    let mut r = cluster(1, 1);
    match r.allocate(&gang("typo", 1, devices(1, &[r#"device.attributes["gpu.example.com"].modle == "h100""#])), 0) {
        MatchOutcome::Unsatisfiable(why) => {
            assert!(why.contains("no matching node has the devices one member asks for"), "{why}");
            assert!(why.contains("modle"), "the error names what failed: {why}");
        }
        other => panic!("{other:?}"),
    }
    match r.allocate(&gang("other", 1, DeviceRequest { driver: "fpga.example.com".into(), ..devices(1, &[]) }), 0) {
        MatchOutcome::Unsatisfiable(why) => assert!(why.contains("driver fpga.example.com"), "{why}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_selector_too_costly_or_too_long_is_refused_before_any_device_is_tried() {
    // Macros nested over a list of ten: each level multiplies the work per device by ten. Four
    // levels (10^4) are evaluated; seven (10^7) would take seconds per device and are refused as
    // Kubernetes refuses them, by an estimate made when the selector compiles.
    let nested = |depth: usize| {
        let vars: Vec<String> = (0..depth).map(|i| format!("v{i}")).collect();
        let mut body = format!("{} > 0", vars.join(" + "));
        for v in vars.iter().rev() {
            body = format!("[1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all({v}, {body})");
        }
        format!("{body} && {H100}")
    };
    let mut r = cluster(1, 1);
    assert!(matches!(r.allocate(&gang("four", 1, devices(1, &[&nested(4)])), 0), MatchOutcome::Allocated(_)));
    let started = std::time::Instant::now();
    match r.allocate(&gang("seven", 1, devices(1, &[&nested(7)])), 0) {
        MatchOutcome::Unsatisfiable(why) => assert!(why.contains("more than the 1000000"), "{why}"),
        other => panic!("{other:?}"),
    }
    assert!(started.elapsed() < std::time::Duration::from_secs(1), "refused without evaluating");
    let long = format!("{H100}{}", " && true".repeat(1300));
    match r.allocate(&gang("long", 1, devices(1, &[&long])), 0) {
        MatchOutcome::Unsatisfiable(why) => assert!(why.contains("at most 10240"), "{why}"),
        other => panic!("{other:?}"),
    }
    check_invariants(&r);
}

#[test]
fn a_gang_waits_for_the_selected_devices_to_free_up_not_for_others() {
    let mut r = cluster(2, 2);
    let mut busy = gang("busy", 2, devices(8, &[H100]));
    busy.duration = Some(100);
    assert!(matches!(r.allocate(&busy, 0), MatchOutcome::Allocated(_)));
    let next = gang("next", 2, devices(8, &[H100]));
    let MatchOutcome::Reserved { id, at } = r.allocate_orelse_reserve(&next, 10) else {
        panic!("the H100s free up at 100");
    };
    assert_eq!(at, 100, "the A100 nodes, free now, do not serve it");
    let a = r.allocation(id).unwrap();
    assert!(a.members.iter().all(|m| r.graph.node(m.node).name.starts_with("h-")), "{:?}", a.members);
    check_invariants(&r);
}

#[test]
fn the_group_form_reads_device_requests_and_refuses_bad_ones_by_path() {
    let ok = parse(
        "g.yaml",
        r#"
name: train
members: 4
resources: {cpu: 1}
devices:
  - {name: gpus, driver: gpu.example.com, count: 8, selectors: ['device.attributes["gpu.example.com"].model == "h100"']}
"#,
    )
    .unwrap();
    assert_eq!(ok.devices, vec![devices(8, &[H100])]);
    let refused = |devices: &str| {
        let text = format!("name: t\nmembers: 1\nresources: {{cpu: 1}}\ndevices: [{devices}]\n");
        parse("g.yaml", &text).unwrap_err().to_string()
    };
    let e = refused("{name: g, driver: gpu.example.com, count: 1, selectors: ['device.model ==']}");
    assert!(e.contains("devices[0].selectors[0]"), "{e}");
    let e = refused("{name: g, driver: gpu.example.com, count: 0}");
    assert!(e.contains("devices[0].count") && e.contains("at least one"), "{e}");
    let e = refused("{name: g, driver: gpu.example.com, count: 1}, {name: g, driver: gpu.example.com, count: 1}");
    assert!(e.contains("devices[1].name"), "{e}");
}

#[test]
fn a_cluster_description_publishes_devices_that_the_group_form_selects() {
    let cluster = r#"
name: dra
nodeClasses:
  - name: old
    count: 2
    capacity: {cpu: 64, memory: 512Gi}
    published:
      - {driver: gpu.example.com, count: 8, attributes: {model: a100, driverVersion: {version: 535.0.0}}, capacity: {memory: 40Gi}}
  - name: new
    count: 2
    capacity: {cpu: 64, memory: 512Gi}
    published:
      - {driver: gpu.example.com, count: 8, attributes: {model: h100, driverVersion: {version: 550.54.15}}, capacity: {memory: 80Gi}}
      - {driver: nic.example.com, count: 2, attributes: {rdma: true, numa: 1}}
"#;
    let graph = muster_graph::load_graph("cluster.yaml", cluster).unwrap();
    let node = graph.node(graph.node_id("new-1").unwrap());
    let names: Vec<&str> = node.devices.iter().map(|s| s.published.as_ref().unwrap().name.as_str()).collect();
    assert_eq!(names.len(), 10);
    assert!(names.contains(&"gpu-7") && names.contains(&"nic-1"), "{names:?}");
    let mut r = ResourceGraph::new(graph, Policy::First);
    let group = parse(
        "g.yaml",
        r#"
name: train
members: 2
resources: {cpu: 1}
devices:
  - {name: gpus, driver: gpu.example.com, count: 8, selectors: ['device.attributes["gpu.example.com"].driverVersion.isGreaterThan(semver("540.0.0"))']}
  - {name: nic, driver: nic.example.com, count: 1, selectors: ['device.attributes["nic.example.com"].rdma && device.attributes["nic.example.com"].numa == 1']}
"#,
    )
    .unwrap();
    let MatchOutcome::Allocated(id) = r.allocate(&group, 0) else { panic!("both new nodes serve a member") };
    for (index, devices) in held(&r, id) {
        assert_eq!(devices.len(), 9, "member {index}: eight GPUs and a NIC");
        assert!(devices.iter().all(|(node, _)| node.starts_with("new-")), "{devices:?}");
    }
    let refused = |published: &str| {
        let text = format!(
            "name: c\nnodeClasses:\n  - {{name: n, count: 1, capacity: {{cpu: 1}}, published: [{published}]}}\n"
        );
        muster_graph::load_graph("cluster.yaml", &text).unwrap_err().to_string()
    };
    let e = refused("{driver: gpu.example.com, count: 1, attributes: {model: [a, b]}}");
    assert!(e.contains("published[0].attributes.model"), "{e}");
    let e = refused("{driver: gpu.example.com, count: 1, attributes: {v: {version: not-a-version}}}");
    assert!(e.contains("{version: 1.2.3}"), "{e}");
    let e = refused("{driver: gpu, count: 1}");
    assert!(e.contains("published[0].driver"), "{e}");
}
