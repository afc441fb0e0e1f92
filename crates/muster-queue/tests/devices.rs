//! Devices DRA drivers publish, asked by selector: a queue's quota on a driver's name bounds
//! them as any resource, for admission, for elastic groups and in the reason.

mod common;

use common::*;
use muster_graph::dra::DeviceRequest;
use muster_graph::{Policy, ResourceGraph};
use muster_queue::config::QuotaSpec;
use muster_queue::{Engine, EngineConfig, GroupState};

/// Two nodes of 8 H100s a driver publishes.
fn gpu_graph() -> ResourceGraph {
    let text = "name: t\nnodeClasses:\n  - name: n\n    count: 2\n    capacity: {cpu: 64, memory: 512Gi, pods: 110}\n    published:\n      - {driver: gpu.example.com, count: 8, attributes: {model: h100}}\n";
    ResourceGraph::new(muster_graph::cluster::load("t.yaml", text).unwrap(), Policy::First)
}

/// `min..max` members of eight selected GPUs each.
fn gpu_gang(name: &str, min: u32, max: u32, at: i64) -> muster_queue::GroupSpec {
    let mut s = elastic(name, "q", min, max, 1, None, at);
    s.request.devices = vec![DeviceRequest {
        name: "gpus".into(),
        driver: "gpu.example.com".into(),
        count: 8,
        selectors: vec![r#"device.attributes["gpu.example.com"].model == "h100""#.into()],
        extended_resource: None,
    }];
    s
}

#[test]
fn a_quota_on_a_drivers_devices_bounds_what_its_selectors_may_take() {
    let mut c = EngineConfig::single_queue("q");
    c.queues[0]
        .quotas
        .insert("gpu.example.com".into(), QuotaSpec { nominal: 8.into(), borrowing_limit: None, lending_limit: None });
    let mut e = engine(gpu_graph(), c);
    // Two members of 8 GPUs fit the cluster, not the quota of 8: the rigid gang waits, and says so.
    e.submit(gpu_gang("rigid", 2, 2, 0), 0).unwrap();
    e.schedule(0);
    assert_eq!(state(&e, "rigid"), GroupState::Queued);
    let reason = &e.group(&key("rigid")).unwrap().reason;
    assert!(reason.contains("gpu.example.com"), "{reason}");
    // An elastic one gets what the quota allows: one member.
    e.delete(&key("rigid"), 1).unwrap();
    e.submit(gpu_gang("elastic", 1, 2, 1), 1).unwrap();
    let ts = e.schedule(1);
    ready_all(&mut e, &ts, 1);
    assert_eq!(state(&e, "elastic"), GroupState::Running);
    assert_eq!(e.group(&key("elastic")).unwrap().member_count(), 1);
    e.check_invariants().unwrap();
}

#[test]
fn a_quota_on_an_extended_resource_bounds_the_devices_that_serve_it() {
    // Pods ask nvidia.com/gpu; a DeviceClass serves that name with the driver's devices. The
    // team's quota is written on the name its pods use, and bounds the devices all the same.
    let mut c = EngineConfig::single_queue("q");
    c.queues[0]
        .quotas
        .insert("nvidia.com/gpu".into(), QuotaSpec { nominal: 8.into(), borrowing_limit: None, lending_limit: None });
    let mut e = engine(gpu_graph(), c);
    let mut gang = gpu_gang("elastic", 1, 2, 0);
    gang.request.devices[0].extended_resource = Some("nvidia.com/gpu".into());
    e.submit(gang, 0).unwrap();
    let ts = e.schedule(0);
    ready_all(&mut e, &ts, 0);
    assert_eq!(state(&e, "elastic"), GroupState::Running);
    assert_eq!(e.group(&key("elastic")).unwrap().member_count(), 1, "the quota of 8 allows one member of 8");
    e.check_invariants().unwrap();
    // The plan (the dashboard's) says what each member asks of devices.
    let plan = e.plan(0);
    let g = plan.groups.iter().find(|g| g.key == key("elastic")).unwrap();
    assert_eq!(g.devices, [r#"8 gpu.example.com devices where device.attributes["gpu.example.com"].model == "h100""#]);
}

#[test]
fn a_group_whose_device_is_gone_is_restored_on_the_devices_left() {
    let mut e = engine(gpu_graph(), EngineConfig::single_queue("q"));
    e.submit(gpu_gang("runs", 1, 1, 0), 0).unwrap();
    let ts = e.schedule(0);
    ready_all(&mut e, &ts, 0);
    let node = e.group(&key("runs")).unwrap().allocation.as_ref().unwrap().members[0].node.clone();
    // The driver no longer publishes one of the GPUs the group holds (found unhealthy while no
    // instance led): the group runs on and is restored on the seven left, its node over-committed.
    let text = "name: t\nnodeClasses:\n  - name: n\n    count: 2\n    capacity: {cpu: 64, memory: 512Gi, pods: 110}\n    published:\n      - {driver: gpu.example.com, count: 7, attributes: {model: h100}}\n";
    let fewer = ResourceGraph::new(muster_graph::cluster::load("t.yaml", text).unwrap(), Policy::First);
    let e = Engine::restore(fewer, e.snapshot()).unwrap();
    assert_eq!(state(&e, "runs"), GroupState::Running);
    let over = e.graph().graph.over_committed();
    assert_eq!(over, [(node, "gpu.example.com 8 held of 7".to_string())]);
    e.check_invariants().unwrap();
}
