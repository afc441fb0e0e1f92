#![allow(dead_code)]

use muster_graph::{GroupRequest, Policy, ResourceGraph};
use muster_queue::{Engine, EngineConfig, GroupKey, GroupSpec, GroupState, Transition};

/// `n` nodes of `cpu` cores, 64Gi, 110 pods, 4 per rack.
pub fn graph(n: u32, cpu: u32) -> ResourceGraph {
    let rack = n.min(4);
    let text = format!(
        "name: t\nnodeClasses:\n  - name: n\n    count: {n}\n    capacity: {{cpu: {cpu}, memory: 64Gi, pods: 110}}\n    spread: {{rack: {rack}}}\n"
    );
    ResourceGraph::new(muster_graph::cluster::load("t.yaml", &text).unwrap(), Policy::First)
}

pub fn key(name: &str) -> GroupKey {
    GroupKey::new("ns", name)
}

/// A group of `members` x `cpu` cores in `queue`.
pub fn spec(name: &str, queue: &str, members: u32, cpu: u64, duration: Option<u64>, at: i64) -> GroupSpec {
    let mut request = GroupRequest::simple(name, members, &[("cpu", cpu * 1000)]);
    request.duration = duration;
    GroupSpec { key: key(name), queue: queue.into(), priority_class: None, request, submitted_at: at }
}

pub fn elastic(name: &str, queue: &str, min: u32, max: u32, cpu: u64, duration: Option<u64>, at: i64) -> GroupSpec {
    let mut s = spec(name, queue, min, cpu, duration, at);
    s.request.max_members = max;
    s
}

pub fn engine(graph: ResourceGraph, config: EngineConfig) -> Engine {
    Engine::new(graph, config).unwrap()
}

pub fn state(e: &Engine, name: &str) -> GroupState {
    e.group(&key(name)).map_or(GroupState::Deleted, |g| g.state)
}

pub fn to(ts: &[Transition], name: &str) -> Vec<GroupState> {
    ts.iter().filter(|t| &*t.key.name == name).map(|t| t.to).collect()
}

/// Admits and marks all members ready for every group admitted by `ts`.
pub fn ready_all(e: &mut Engine, ts: &[Transition], now: i64) {
    for t in ts {
        if t.to == GroupState::Admitted {
            let n = t.allocation.as_ref().unwrap().members.len() as u32;
            e.pods_ready(&t.key, n, now).unwrap();
        }
    }
}
