//! Dynamic Resource Allocation as the apiserver sends it. The devices DRA drivers publish
//! (ResourceSlices) reach the engine's graph as part of their nodes: in whatever order slices
//! and nodes are listed, a newer generation of a pool replacing the older, a deleted slice taking
//! its devices away. Devices kube-scheduler allocated to claims are held, exactly those, until
//! the claim lets them go.

mod common;

use common::*;
use k8s_openapi::api::resource::v1::ResourceSlice;
use muster_controller::convert::slice_view;

fn slice(name: &str, node: &str, generation: i64, gpus: usize) -> ResourceSlice {
    muster_k8s::testing::resource_slice(name, node, generation, &vec!["h100"; gpus])
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

fn claim(uid: &str, node: &str, devices: &[&str]) -> k8s_openapi::api::resource::v1::ResourceClaim {
    let results: Vec<serde_json::Value> = (devices.iter())
        .map(|d| serde_json::json!({"request": "gpus", "driver": "gpu.example.com", "pool": node, "device": d}))
        .collect();
    serde_json::from_value(serde_json::json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": format!("pod-{uid}-gpus"), "namespace": "other", "uid": uid},
        "spec": {"devices": {"requests": [{"name": "gpus", "exactly": {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": devices.len()}}]}},
        "status": {"allocation": {
            "devices": {"results": results},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}
        }}
    }))
    .unwrap()
}

/// The devices of `node` something holds, by graph name.
fn held(h: &Harness, node: &str) -> Vec<String> {
    let g = &h.brain.engine().unwrap().engine().graph().graph;
    let n = g.node(g.node_id(node).unwrap());
    n.devices.iter().filter(|s| s.holder.is_some()).map(|s| g.vertex(s.vertex).meta.name.clone()).collect()
}

#[test]
fn devices_other_schedulers_allocated_to_claims_are_held_until_the_claim_lets_go() {
    let mut h = Harness::new(&[node("n1", 8)], &[], &[]);
    h.send(apply(&slice("n1-gpus", "n1", 1, 8)));
    h.cycle();
    let c = claim("c1", "n1", &["gpu-3", "gpu-5"]);
    h.send(Event::Claim(Change::Apply(muster_controller::convert::claim_view(&c).unwrap())));
    h.cycle();
    assert_eq!(held(&h, "n1"), ["gpu.example.com/n1/gpu-3", "gpu.example.com/n1/gpu-5"], "exactly the claim's devices");
    // Deallocated (its pod is done): the devices are free again.
    let mut done = c.clone();
    done.status = None;
    h.send(Event::Claim(Change::Apply(muster_controller::convert::claim_view(&done).unwrap())));
    h.cycle();
    assert!(held(&h, "n1").is_empty());
    // A claim on a node the engine does not know yet is counted once the node and its slice come.
    let c2 = claim("c2", "n2", &["gpu-0"]);
    h.send(Event::Claim(Change::Apply(muster_controller::convert::claim_view(&c2).unwrap())));
    h.cycle();
    h.send(apply(&slice("n2-gpus", "n2", 1, 8)));
    h.send(Event::Node(Change::Apply(node("n2", 8))));
    h.cycle();
    h.cycle();
    assert_eq!(held(&h, "n2"), ["gpu.example.com/n2/gpu-0"]);
    h.send(Event::Claim(Change::Delete(muster_controller::convert::claim_view(&c2).unwrap())));
    h.cycle();
    assert!(held(&h, "n2").is_empty());
}
