//! Groups of member sets (a head and its workers) in the controller's decisions, against a real
//! SQLite store.

mod common;

use common::*;
use muster_controller::convert::{PodGroupApi, PodSet};
use muster_k8s::group::GroupSet;

/// A RayCluster `rc` of a 1-cpu head and `workers` 2-cpu workers, as its watcher sends it.
fn ray_cluster(workers: u32, suspended: bool) -> WorkloadView {
    let kind = &workload::raycluster::KIND;
    let set = |name: &str, members: u32, cpu: i64| GroupSet {
        name: name.into(),
        members: Members { min: members.into(), max: None },
        resources: BTreeMap::from([("cpu".to_string(), Quantity::Int(cpu))]),
        devices: vec![],
        node_selector: BTreeMap::new(),
        affinity: vec![],
        tolerations: vec![],
        topology: None,
        optional: false,
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
    // Its bounds went as far as the 3 members it held allowed (3..=4): the last set's share 2..=3.
    assert_eq!(group.spec.request.set_bounds_within(), [(1, 1), (2, 3)]);
    let a = h.send(Event::Pod(Change::Apply(ray_pod("worker", 2, 2))));
    assert_eq!(binds(&a).iter().map(|b| b.2).collect::<Vec<_>>(), [3], "{a:?}");
}

/// Pod `i` of plain group `serve`, in set `set` of `size` members (labels muster.dev/set and
/// set-size, as the webhook writes them for a CompositePodGroup's PodGroups: the pod names the
/// PodGroup of its set), asking `cpu`.
fn set_pod(set: &str, size: &str, i: u32, cpu: u64) -> PodView {
    let p = plain("serve", i, 3, cpu);
    let set = PodSet {
        name: set.into(),
        size: Some(size.into()),
        min: None,
        topology: None,
        subgroup: None,
        subgroup_topology: None,
    };
    PodView {
        name: format!("serve-{i}-{}", set.name),
        set: Some(Box::new(set)),
        pod_group: Some(PodGroupApi::Kubernetes),
        ..p
    }
}

#[test]
fn a_group_of_sized_sets_waits_for_each_set_and_leaves_a_sets_extra_pods_waiting() {
    let mut h = Harness::new(&[node("n1", 8)], &[], &[]);
    // Three prefill pods of a set of two: as many pods as the group's size, but no decode pod yet.
    let prefill = [set_pod("prefill", "2", 0, 2), set_pod("prefill", "2", 1, 2), set_pod("prefill", "2", 2, 2)];
    let mut a = Vec::new();
    for p in &prefill {
        a.extend(h.send(Event::Pod(Change::Apply(p.clone()))));
    }
    a.extend(h.cycle());
    assert!(binds(&a).is_empty(), "no room held before the decode set's pod exists: {a:?}");
    assert_eq!(h.state("serve"), None);
    let decode = set_pod("decode", "1", 3, 1);
    let a = [h.send(Event::Pod(Change::Apply(decode.clone()))), h.cycle()].concat();
    let mut bound: Vec<String> = binds(&a).into_iter().map(|(name, _, _)| name).collect();
    bound.sort();
    // Two prefill pods and the decode pod, though the third prefill pod is looked at before it.
    assert_eq!(bound, ["serve-0-prefill", "serve-1-prefill", "serve-3-decode"], "{a:?}");
    let group = h.brain.engine().unwrap().engine().group(&GroupKey::new(NS, "serve")).unwrap().clone();
    let sets: Vec<_> = group.spec.request.sets.iter().map(|s| (s.name.clone(), s.min_members)).collect();
    assert_eq!(sets, [("decode".to_string(), 1), ("prefill".to_string(), 2)]);
    // Every PodGroup of the tree is marked scheduled, as kube-scheduler marks them.
    let marked: Vec<&Vec<String>> = a
        .iter()
        .filter_map(|x| match x {
            Action::PodGroupScheduled { pod_groups, .. } => Some(pod_groups),
            _ => None,
        })
        .collect();
    assert_eq!(marked, [&vec!["decode".to_string(), "prefill".to_string()]], "{a:?}");
}

#[test]
fn a_plain_group_of_elastic_sets_starts_at_its_minimums_and_grows_in_the_sets_order() {
    // Set a: 3 pods of 2 cpu, at least 1; set b: 4 pods of 2 cpu, at least 1; one node of 8 cpu.
    let mut h = Harness::new(&[node("n1", 8)], &[], &[]);
    let elastic_pod = |set: &str, size: &str, i: u32| {
        let mut p = set_pod(set, size, i, 2);
        p.name = format!("elastic-{set}-{i}");
        p.uid.clone_from(&p.name);
        p.group = Some("elastic".into());
        p.members = Some(Box::new(Ok(Members { min: 7, max: None })));
        p.pod_group = None;
        p.set.as_mut().unwrap().min = Some("1".into());
        p
    };
    let pods: Vec<PodView> =
        (0..3).map(|i| elastic_pod("a", "3", i)).chain((3..7).map(|i| elastic_pod("b", "4", i))).collect();
    let mut a = Vec::new();
    for p in &pods {
        a.extend(h.send(Event::Pod(Change::Apply(p.clone()))));
    }
    a.extend(h.cycle());
    let bound = binds(&a);
    let per_set =
        |b: &[(String, String, u32)], set: &str| b.iter().filter(|x| x.0.contains(&format!("-{set}-"))).count();
    assert_eq!((per_set(&bound, "a"), per_set(&bound, "b")), (3, 1), "each set's minimum, then a's extras: {a:?}");
    for (name, node, member) in &bound {
        let p = pods.iter().find(|p| p.name == *name).unwrap();
        h.send(Event::Pod(Change::Apply(bound_plain(p, node, *member, true))));
    }
    assert_eq!(h.state("elastic"), Some(GroupState::Running));
    // Room for b's other 3 members: it grows, and its gated pods are bound to them.
    let a = [h.send(Event::Node(Change::Apply(node("n2", 8)))), h.cycle()].concat();
    let grown = binds(&a);
    assert_eq!((per_set(&grown, "a"), per_set(&grown, "b")), (0, 3), "{a:?}");
    assert!(grown.iter().all(|(_, _, m)| (4..7).contains(m)), "b's members are 3..7: {grown:?}");
}
