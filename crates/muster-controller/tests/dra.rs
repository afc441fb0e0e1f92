//! Dynamic Resource Allocation as the apiserver sends it. The devices DRA drivers publish
//! (ResourceSlices) reach the engine's graph as part of their nodes: in whatever order slices
//! and nodes are listed, a newer generation of a pool replacing the older, a deleted slice taking
//! its devices away. Devices kube-scheduler allocated to claims are held, exactly those, until
//! the claim lets them go.

mod common;

use common::*;
use k8s_openapi::api::resource::v1::ResourceSlice;
use muster_controller::allocate::ClaimSource;
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

fn template_event(name: &str, count: u32, model: &str) -> Event {
    let t: k8s_openapi::api::resource::v1::ResourceClaimTemplate = serde_json::from_value(serde_json::json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpus", "exactly": {
            "deviceClassName": "gpu", "allocationMode": "ExactCount", "count": count,
            "selectors": [{"cel": {"expression": format!("device.attributes[\"gpu.example.com\"].model == \"{model}\"")}}]
        }}]}}}
    }))
    .unwrap();
    Event::Template(Change::Apply(muster_controller::convert::template_view(&t).unwrap()))
}

fn class_event() -> Event {
    class_serving(None)
}

/// DeviceClass gpu, serving the extended resource `extended` if given.
fn class_serving(extended: Option<&str>) -> Event {
    let c: k8s_openapi::api::resource::v1::DeviceClass = serde_json::from_value(serde_json::json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "gpu", "creationTimestamp": "2026-12-01T00:00:00Z"},
        "spec": {"extendedResourceName": extended, "selectors": [{"cel": {"expression": "device.driver == \"gpu.example.com\""}}]}
    }))
    .unwrap();
    Event::Class(Change::Apply(muster_controller::convert::class_view(&c).unwrap()))
}

/// A Job of `members` pods, each claiming through template `template` (its claim named gpus).
fn claiming_job(name: &str, members: i64, template: &str) -> WorkloadView {
    let mut j = job(name, members, 1);
    let claims = vec![muster_k8s::dra::PodClaim { name: "gpus".into(), template: template.into() }];
    j.devices = vec![muster_k8s::dra::PodDevices { claims, ..Default::default() }];
    j
}

/// Pod `index` of `job`, its claim made (status.resourceClaimStatuses) or not yet.
fn claiming_pod(job: &str, index: u32, made: bool) -> PodView {
    let mut p = pod(job, index, 1);
    let name = format!("{job}-{index}");
    p.claims = Some(Box::new(muster_controller::convert::PodClaims {
        wanted: vec!["gpus".into()],
        made: if made { vec![("gpus".into(), format!("{name}-gpus-x7k2p"))] } else { vec![] },
    }));
    p
}

fn bind_claims(actions: &[Action]) -> Vec<(String, String, Vec<String>)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Bind { pod, node, claims, .. } => Some((pod.clone(), node.clone(), claims.clone())),
            _ => None,
        })
        .flat_map(|(pod, node, claims)| {
            claims.into_iter().map(move |c| {
                assert_eq!(c.node, node, "a claim is allocated on its pod's node");
                assert!(c.classes.contains_key("gpu"), "the classes seen travel with it: no read per pod");
                assert!(c.devices.iter().all(|(r, _)| r == "gpus/gpus"), "{:?}", c.devices);
                let ClaimSource::Made(claim) = c.claim else { panic!("{:?} is not a template's claim", c.claim) };
                (pod.clone(), claim, c.devices.iter().map(|(_, d)| format!("{}/{}", d.pool, d.name)).collect())
            })
        })
        .collect()
}

#[test]
fn a_gang_whose_pods_claim_gpus_by_selector_is_placed_whole_and_each_claim_gets_its_members_devices() {
    let mut h = Harness::new(&[node("n1", 8), node("n2", 8), node("n3", 8)], &[], &[]);
    // n1 has A100s only; n2 and n3 H100s.
    h.send(Event::Slice(Change::Apply(
        slice_view(&muster_k8s::testing::resource_slice("n1-gpus", "n1", 1, &["a100"; 8])).unwrap(),
    )));
    h.send(apply(&slice("n2-gpus", "n2", 1, 8)));
    h.send(apply(&slice("n3-gpus", "n3", 1, 8)));
    h.send(class_event());
    h.cycle();
    // The template is not there yet: the Job waits, told why, and is not queued.
    let actions = h.send(job_event(Change::Apply(claiming_job("train", 2, "eight-h100"))));
    let actions = [actions, h.cycle()].concat();
    assert!(
        told(&actions, "InvalidJob").iter().any(|m| m.contains("no ResourceClaimTemplate \"eight-h100\"")),
        "{actions:?}"
    );
    assert_eq!(h.state("train"), None);
    // It comes: the Job is queued and placed, one member on each H100 node.
    h.send(template_event("eight-h100", 8, "h100"));
    h.cycle();
    let mut placed: Vec<String> = allocation(&h, "train").into_iter().map(|(_, n)| n).collect();
    placed.sort();
    assert_eq!(placed, ["n2", "n3"], "the A100 node serves no member");
    // Pods whose claims are not made yet wait; once made, each binds with its claim's devices.
    let actions = h.send(Event::Pod(Change::Apply(claiming_pod("train", 0, false))));
    let actions = [actions, h.cycle()].concat();
    assert!(binds(&actions).is_empty(), "{actions:?}");
    let mut actions = h.send(Event::Pod(Change::Apply(claiming_pod("train", 0, true))));
    actions.extend(h.send(Event::Pod(Change::Apply(claiming_pod("train", 1, true)))));
    actions.extend(h.cycle());
    let claims = bind_claims(&actions);
    assert_eq!(claims.len(), 2, "{actions:?}");
    let mut all: Vec<&String> = claims.iter().flat_map(|(_, _, d)| d).collect();
    assert_eq!(all.len(), 16);
    all.sort();
    all.dedup();
    assert_eq!(all.len(), 16, "no device given twice");
    assert!(claims.iter().any(|(p, c, _)| p == "train-0" && c == "train-0-gpus-x7k2p"));
    // Allocated for muster's own pods, the claims are not held a second time as another
    // scheduler's: once the Job is done, the next gang gets its devices.
    assert_eq!([held(&h, "n2"), held(&h, "n3")].concat().len(), 16);
    for (pod, claim_name, devices) in &claims {
        let node = &devices[0][..2];
        let names: Vec<&str> = devices.iter().map(|d| &d[3..]).collect();
        let mut c = claim(&format!("uid-{claim_name}"), node, &names);
        let uid = pod.clone();
        c.status.as_mut().unwrap().reserved_for = Some(vec![
            serde_json::from_value(serde_json::json!({"resource": "pods", "name": pod, "uid": uid})).unwrap(),
        ]);
        h.send(Event::Claim(Change::Apply(muster_controller::convert::claim_view(&c).unwrap())));
    }
    h.cycle();
    let mut done = claiming_job("train", 2, "eight-h100");
    done.finished = Some(true);
    h.send(job_event(Change::Apply(done)));
    h.cycle();
    h.send(job_event(Change::Apply(claiming_job("next", 2, "eight-h100"))));
    h.cycle();
    assert_eq!(allocation(&h, "next").len(), 2, "the next gang gets the H100s the first one freed");
}

#[test]
fn a_pod_claiming_devices_its_group_was_placed_without_is_not_bound() {
    // A group whose workload muster read no claims from (a kind whose claims it does not place).
    let mut h = Harness::new(&[node("n1", 8)], &[job("serve", 1, 1)], &[]);
    h.cycle();
    let actions = [h.send(Event::Pod(Change::Apply(claiming_pod("serve", 0, true)))), h.cycle()].concat();
    assert!(binds(&actions).is_empty(), "{actions:?}");
    let told = told(&actions, "ClaimsNotAllocated");
    assert!(told.iter().any(|m| m.contains("its group was placed without them")), "{actions:?}");
}

/// The spec of a pod of one container asking 1 cpu and `gpus` nvidia.com/gpu, as the apiserver
/// returns it (an extended resource's request equals its limit).
fn gpu_pod_spec(gpus: u32) -> k8s_openapi::api::core::v1::PodSpec {
    let asks = serde_json::json!({"cpu": "1", "nvidia.com/gpu": gpus.to_string()});
    serde_json::from_value(serde_json::json!({
        "schedulerName": "muster",
        "containers": [{"name": "worker", "image": "trainer", "resources": {"requests": asks, "limits": {"nvidia.com/gpu": gpus.to_string()}}}]
    }))
    .unwrap()
}

/// A Job of `members` pods each asking 8 nvidia.com/gpu, and its pod `index`.
fn gpu_job(name: &str, members: i64) -> WorkloadView {
    let mut j = job(name, members, 1);
    if let Ok(g) = j.group.as_mut() {
        g.resources.insert("nvidia.com/gpu".into(), muster_k8s::Quantity::Int(8));
    }
    let extended = muster_k8s::dra::ExtendedAsks::of(&gpu_pod_spec(8));
    j.devices = vec![muster_k8s::dra::PodDevices { extended, ..Default::default() }];
    j
}

fn gpu_pod(job: &str, index: u32) -> PodView {
    let mut p = pod(job, index, 1);
    p.requests.push(("nvidia.com/gpu".into(), 8));
    p.devices = Some(Box::new(muster_k8s::dra::PodDevices::of(&gpu_pod_spec(8), "spec").unwrap()));
    p
}

#[test]
fn pods_asking_an_extended_resource_a_device_class_serves_get_devices_through_a_claim_muster_makes() {
    // No node has nvidia.com/gpu: a driver publishes the GPUs, and class gpu serves the name.
    let mut h = Harness::new(&[node("n1", 8), node("n2", 8)], &[], &[]);
    h.send(apply(&slice("n1-gpus", "n1", 1, 8)));
    h.send(apply(&slice("n2-gpus", "n2", 1, 8)));
    h.cycle();
    // Before any class serves it, nothing can: the Job waits, unplaced.
    h.send(job_event(Change::Apply(gpu_job("train", 2))));
    h.cycle();
    let key = muster_queue::GroupKey::new(NS, "train");
    assert!(h.brain.engine().unwrap().engine().group(&key).is_none_or(|g| g.allocation.is_none()));
    h.send(class_serving(Some("nvidia.com/gpu")));
    h.cycle();
    let mut placed: Vec<String> = allocation(&h, "train").into_iter().map(|(_, n)| n).collect();
    placed.sort();
    assert_eq!(placed, ["n1", "n2"], "each member holds one node's 8 GPUs");
    let g = h.brain.engine().unwrap().engine().group(&muster_queue::GroupKey::new(NS, "train")).unwrap();
    let devices = g.spec.request.set_devices_of(0);
    assert_eq!(devices.len(), 1);
    assert_eq!(devices[0].name, "<extended-resources>/container-0-request-1", "cpu sorts before nvidia.com/gpu");
    assert_eq!((devices[0].count, devices[0].extended_resource.as_deref()), (8, Some("nvidia.com/gpu")));
    assert!(g.spec.request.requests.iter().all(|(r, _)| r != "nvidia.com/gpu"), "the devices hold it, not a count");
    // Each pod binds with the claim muster makes for it: the member's 8 devices, none twice.
    let mut actions = h.send(Event::Pod(Change::Apply(gpu_pod("train", 0))));
    actions.extend(h.send(Event::Pod(Change::Apply(gpu_pod("train", 1)))));
    actions.extend(h.cycle());
    let mut all = Vec::new();
    for a in &actions {
        let Action::Bind { pod, node, claims, .. } = a else { continue };
        let [c] = claims.as_slice() else { panic!("{pod}: one claim, for its extended resources: {claims:?}") };
        let ClaimSource::Extended { made: None, claim } = &c.claim else { panic!("{:?}", c.claim) };
        assert_eq!(claim.requests[0].name, "container-0-request-1");
        assert_eq!((claim.requests[0].class.as_str(), claim.requests[0].count), ("gpu", 8));
        assert_eq!(claim.mappings[0].container_name, "worker");
        assert_eq!(&c.node, node);
        assert_eq!(c.devices.len(), 8);
        all.extend(c.devices.iter().map(|(r, d)| {
            assert_eq!(r, "<extended-resources>/container-0-request-1");
            format!("{}/{}", d.pool, d.name)
        }));
    }
    assert_eq!(all.len(), 16, "{actions:?}");
    all.sort();
    all.dedup();
    assert_eq!(all.len(), 16, "no device given twice");
}

#[test]
fn an_extended_resource_a_node_has_stays_a_count_its_device_plugin_serves() {
    // n1's device plugin advertises nvidia.com/gpu: a class naming it changes nothing.
    let mut gpu_node = node("n1", 8);
    gpu_node.spec.devices = vec![("nvidia.com/gpu".into(), 8)];
    let mut h = Harness::new(&[gpu_node], &[], &[]);
    h.send(class_serving(Some("nvidia.com/gpu")));
    h.send(job_event(Change::Apply(gpu_job("train", 1))));
    h.cycle();
    assert_eq!(allocation(&h, "train").len(), 1);
    let g = h.brain.engine().unwrap().engine().group(&muster_queue::GroupKey::new(NS, "train")).unwrap();
    assert!(g.spec.request.set_devices_of(0).is_empty());
    let actions = [h.send(Event::Pod(Change::Apply(gpu_pod("train", 0)))), h.cycle()].concat();
    let binds: Vec<_> = actions
        .iter()
        .filter_map(|a| match a {
            Action::Bind { claims, .. } => Some(claims),
            _ => None,
        })
        .collect();
    assert_eq!(binds.len(), 1, "{actions:?}");
    assert!(binds[0].is_empty(), "no claim: the kubelet's device plugin serves it");
}

/// Pod `i` of plain group `group` of `size`, claiming through template `template` (claim gpus),
/// its claim made (status.resourceClaimStatuses) or not yet.
fn claiming_plain(group: &str, i: u32, size: u32, template: &str, made: bool) -> PodView {
    let mut p = plain(group, i, size, 1);
    let claims = vec![muster_k8s::dra::PodClaim { name: "gpus".into(), template: template.into() }];
    p.devices = Some(Box::new(muster_k8s::dra::PodDevices { claims, ..Default::default() }));
    let name = p.name.clone();
    p.claims = Some(Box::new(muster_controller::convert::PodClaims {
        wanted: vec!["gpus".into()],
        made: if made { vec![("gpus".into(), format!("{name}-gpus-x7k2p"))] } else { vec![] },
    }));
    p
}

#[test]
fn what_a_device_class_stands_for_is_read_again_once_devices_are_published() {
    // The class and template exist, no driver has published a device yet: the group waits, told
    // that the class stands for no driver.
    let mut h = Harness::new(&[node("n1", 8), node("n2", 8)], &[], &[]);
    h.send(class_event());
    h.send(template_event("eight-h100", 8, "h100"));
    h.cycle();
    let mut a = h.send(Event::Pod(Change::Apply(claiming_plain("ring", 0, 2, "eight-h100", true))));
    a.extend(h.send(Event::Pod(Change::Apply(claiming_plain("ring", 1, 2, "eight-h100", true)))));
    a.extend(h.cycle());
    assert_eq!(h.state("ring"), None, "{a:?}");
    let told_no_driver = a.iter().any(|x| {
        matches!(x, Action::Status { status, .. }
        if status.message.as_deref().is_some_and(|m| m.contains("exactly one driver")))
    });
    assert!(told_no_driver, "{a:?}");
    // The driver publishes: the class is read again, and the group placed whole with its devices.
    let mut a = h.send(apply(&slice("n1-gpus", "n1", 1, 8)));
    a.extend(h.send(apply(&slice("n2-gpus", "n2", 1, 8))));
    a.extend(h.cycle());
    a.extend(h.cycle());
    assert_eq!(bind_claims(&a).len(), 2, "{a:?}");
}

#[test]
fn a_plain_groups_pods_claiming_gpus_wait_for_their_template_then_bind_with_their_devices() {
    let mut h = Harness::new(&[node("n1", 8), node("n2", 8)], &[], &[]);
    h.send(apply(&slice("n1-gpus", "n1", 1, 8)));
    h.send(apply(&slice("n2-gpus", "n2", 1, 8)));
    h.send(class_event());
    h.cycle();
    // Both pods exist, their template does not yet: the group waits, queued nowhere.
    let mut a = h.send(Event::Pod(Change::Apply(claiming_plain("ring", 0, 2, "eight-h100", true))));
    a.extend(h.send(Event::Pod(Change::Apply(claiming_plain("ring", 1, 2, "eight-h100", true)))));
    a.extend(h.cycle());
    assert_eq!(h.state("ring"), None, "{a:?}");
    let waiting = a.iter().any(|x| {
        matches!(x, Action::Status { status, .. }
        if status.message.as_deref().is_some_and(|m| m.contains("no ResourceClaimTemplate \"eight-h100\"")))
    });
    assert!(waiting, "its status says what it waits for: {a:?}");
    // The template comes: queued, placed whole, each pod bound with its member's 8 devices.
    let mut a = h.send(template_event("eight-h100", 8, "h100"));
    a.extend(h.cycle());
    a.extend(h.cycle());
    let claims = bind_claims(&a);
    assert_eq!(claims.len(), 2, "{a:?}");
    let mut all: Vec<&String> = claims.iter().flat_map(|(_, _, d)| d).collect();
    all.sort();
    all.dedup();
    assert_eq!(all.len(), 16, "no device given twice");
    // A third pod asking other devices than its group's is told so, and the group left alone.
    let mut odd = claiming_plain("odd", 0, 2, "eight-h100", true);
    let other = claiming_plain("odd", 1, 2, "four-h100", true);
    odd.created = 10;
    let a = [h.send(Event::Pod(Change::Apply(odd))), h.send(Event::Pod(Change::Apply(other))), h.cycle()].concat();
    assert!(told(&a, "InvalidGroup").iter().any(|m| m.contains("spec.resourceClaims")), "{a:?}");
}
