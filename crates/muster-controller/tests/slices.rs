//! The devices DRA drivers publish (ResourceSlices as the apiserver sends them) reach the
//! engine's graph as part of their nodes: in whatever order slices and nodes are listed, a
//! newer generation of a pool replacing the older, a deleted slice taking its devices away.

mod common;

use common::*;
use k8s_openapi::api::resource::v1::ResourceSlice;
use muster_controller::convert::slice_view;

fn slice(name: &str, node: &str, generation: i64, gpus: usize) -> ResourceSlice {
    let devices: Vec<serde_json::Value> = (0..gpus)
        .map(|i| serde_json::json!({"name": format!("gpu-{i}"), "attributes": {"model": {"string": "h100"}}}))
        .collect();
    serde_json::from_value(serde_json::json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name, "resourceVersion": "7"},
        "spec": {
            "driver": "gpu.example.com",
            "nodeName": node,
            "pool": {"name": node, "generation": generation, "resourceSliceCount": 1},
            "devices": devices
        }
    }))
    .unwrap()
}

/// The published devices the engine's graph holds on `node`.
fn published(h: &Harness, node: &str) -> Vec<String> {
    let g = &h.brain.engine().unwrap().engine().graph().graph;
    let n = g.node(g.node_id(node).unwrap());
    n.devices.iter().filter_map(|s| s.published.as_ref()).map(|d| format!("{}/{}", d.pool, d.name)).collect()
}

fn apply(s: &ResourceSlice) -> Event {
    Event::Slice(Change::Apply(slice_view(s).unwrap()))
}

#[test]
fn published_devices_reach_the_graph_with_their_nodes() {
    let mut h = Harness::new(&[node("n2", 8)], &[], &[]);
    assert!(published(&h, "n2").is_empty());
    // n1's slice comes before n1 itself; n2's after n2.
    h.send(apply(&slice("n1-gpus", "n1", 1, 8)));
    h.send(Event::Node(Change::Apply(node("n1", 8))));
    h.cycle();
    assert_eq!(published(&h, "n1").len(), 8);
    h.send(apply(&slice("n2-gpus", "n2", 1, 8)));
    h.cycle();
    assert_eq!(published(&h, "n2").len(), 8);
    let text = h.metrics.encode().unwrap();
    assert!(text.contains("muster_published_devices{driver=\"gpu.example.com\"} 16"), "{text}");
    // The driver republishes n2's pool with four devices in a new slice: the old generation
    // no longer counts, even before its slice is deleted.
    h.send(apply(&slice("n2-gpus-2", "n2", 2, 4)));
    h.cycle();
    assert_eq!(published(&h, "n2"), ["n2/gpu-0", "n2/gpu-1", "n2/gpu-2", "n2/gpu-3"]);
    h.send(Event::Slice(Change::Delete(slice_view(&slice("n2-gpus-2", "n2", 2, 4)).unwrap())));
    h.cycle();
    assert_eq!(published(&h, "n2").len(), 8, "generation 1 is the newest left");
    h.send(Event::Slice(Change::Delete(slice_view(&slice("n2-gpus", "n2", 1, 8)).unwrap())));
    h.cycle();
    assert!(published(&h, "n2").is_empty());
    // A slice muster cannot read yet (devices for all nodes) changes nothing.
    let mut all_nodes = slice("shared", "n1", 1, 2);
    all_nodes.spec.node_name = None;
    all_nodes.spec.all_nodes = Some(true);
    h.send(apply(&all_nodes));
    h.cycle();
    assert_eq!(published(&h, "n1").len(), 8);
    let text = h.metrics.encode().unwrap();
    assert!(text.contains("muster_published_devices{driver=\"gpu.example.com\"} 8"), "{text}");
    assert!(text.contains("muster_unread_resource_slices 1"), "{text}");
}
