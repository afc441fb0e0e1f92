//! Groups of member sets (a head and its workers) in the controller's decisions, against a real
//! SQLite store.

mod common;

use common::*;
use muster_k8s::group::GroupSet;

/// A RayCluster `rc` of a 1-cpu head and `workers` 2-cpu workers, as its watcher sends it.
fn ray_cluster(workers: u32, suspended: bool) -> WorkloadView {
    let kind = &workload::raycluster::KIND;
    let set = |name: &str, members: u32, cpu: i64| GroupSet {
        name: name.into(),
        members: Members { min: members.into(), max: None },
        resources: BTreeMap::from([("cpu".to_string(), Quantity::Int(cpu))]),
        node_selector: BTreeMap::new(),
        affinity: vec![],
        tolerations: vec![],
        topology: None,
    };
    let mut view = job("rc", 1 + i64::from(workers), 0);
    let group = view.group.as_mut().unwrap();
    group.resources.clear();
    group.sets = vec![set("head", 1, 1), set("worker", workers, 2)];
    group.owner =
        Some(OwnerReference { api_version: kind.api_version(), kind: kind.kind.into(), name: "rc".into(), uid: None });
    view.layout = vec![
        SetLayout { name: "head".into(), children: 1, pods: 1 },
        SetLayout { name: "worker".into(), children: 1, pods: workers },
    ];
    WorkloadView { kind, hold: kind, suspended, ..view }
}

/// Its pod `index` of set `set`, asking `cpu`.
fn ray_pod(set: &str, index: u32, cpu: u64) -> PodView {
    let p = pod("rc", index, cpu);
    let place = PodPlace { workload: "rc".into(), set: set.into(), child: 0, index: Some(index) };
    PodView { name: format!("rc-{set}-{index}"), uid: format!("rc-{set}-{index}"), place: Some(Box::new(place)), ..p }
}

#[test]
fn a_running_group_of_sets_grows_its_last_set_when_its_workload_scales_up() {
    let mut h = Harness::new(&[node("n1", 8)], &[ray_cluster(2, true)], &[]);
    h.cycle();
    let pods = [ray_pod("head", 0, 1), ray_pod("worker", 0, 2), ray_pod("worker", 1, 2)];
    let mut a = Vec::new();
    for p in &pods {
        a.extend(h.send(Event::Pod(Change::Apply(p.clone()))));
    }
    let first = binds(&a);
    assert_eq!(first.len(), 3, "{a:?}");
    for ((name, node, member), p) in first.iter().zip(&pods) {
        assert_eq!(name, &p.name);
        h.send(Event::Pod(Change::Apply(bound(p, node, *member, true))));
    }
    assert_eq!(h.state("rc"), Some(GroupState::Running));
    // Scaled to 3 workers while it runs: the last set grows by one member, and its pod is bound.
    let a = [h.send(job_event(Change::Apply(ray_cluster(3, false)))), h.cycle()].concat();
    let group = h.brain.engine().unwrap().engine().group(&GroupKey::new(NS, "rc")).unwrap().clone();
    assert_eq!((group.state, group.member_count()), (GroupState::Running, 4), "{a:?}");
    // Its bounds went as far as the 3 members it held allowed (3..=4): the last set's 2..=3.
    let sets: Vec<_> = group.spec.request.sets.iter().map(|s| (s.min_members, s.max_members)).collect();
    assert_eq!(sets, [(1, 1), (2, 3)]);
    let a = h.send(Event::Pod(Change::Apply(ray_pod("worker", 2, 2))));
    assert_eq!(binds(&a).iter().map(|b| b.2).collect::<Vec<_>>(), [3], "{a:?}");
}
