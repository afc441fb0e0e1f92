use super::*;
use serde_json::{Value, json};

/// A CompositePodGroup as the apiserver returns it (defaulted disruption mode).
fn composite(name: &str, parent: Option<&str>, policy: Value, topology: Option<&str>) -> CompositePodGroup {
    let mut spec = json!({
        "workloadRef": {"workloadName": "serve", "templateName": name},
        "schedulingPolicy": policy,
        "disruptionMode": {"single": {}},
    });
    if let Some(p) = parent {
        spec["parentCompositePodGroupName"] = json!(p);
    }
    if let Some(key) = topology {
        spec["schedulingConstraints"] = json!({"topology": [{"key": key}]});
    }
    serde_json::from_value(json!({
        "apiVersion": "scheduling.k8s.io/v1alpha3", "kind": "CompositePodGroup",
        "metadata": {"name": name, "namespace": "ml", "uid": format!("uid-{name}"), "generation": 1},
        "spec": spec,
    }))
    .unwrap()
}

fn gang(min: i32) -> Value {
    json!({"gang": {"minGroupCount": min}})
}

fn pod_group(name: &str, parent: Option<&str>, min_count: i32, topology: Option<&str>) -> PodGroup {
    let mut spec = json!({
        "schedulingPolicy": {"gang": {"minCount": min_count}},
        "disruptionMode": {"single": {}},
    });
    if let Some(p) = parent {
        spec["parentCompositePodGroupName"] = json!(p);
        spec["workloadRef"] = json!({"workloadName": "serve", "templateName": name});
    }
    if let Some(key) = topology {
        spec["schedulingConstraints"] = json!({"topology": [{"key": key}]});
    }
    serde_json::from_value(json!({
        "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "ml", "uid": format!("uid-{name}"), "generation": 1},
        "spec": spec,
    }))
    .unwrap()
}

/// Disaggregated inference: a prefill gang and a decode gang, each in a rack, both in a block.
fn serving() -> (Vec<CompositePodGroup>, Vec<PodGroup>) {
    let composites = vec![composite("serve", None, gang(2), Some("muster.dev/block"))];
    let pod_groups = vec![
        pod_group("prefill", Some("serve"), 2, Some("muster.dev/rack")),
        pod_group("decode", Some("serve"), 4, Some("muster.dev/rack")),
        pod_group("other", None, 3, None),
    ];
    (composites, pod_groups)
}

#[test]
fn a_tree_is_one_group_named_after_its_root_with_a_set_per_pod_group() {
    let (composites, pod_groups) = serving();
    let got = resolve(&pod_groups[0], &composites, &pod_groups, 1000).unwrap().unwrap();
    assert_eq!(got.root, "serve");
    assert_eq!(got.level, Some("block"));
    let sets: Vec<(&str, u32, Option<&str>)> = got.sets.iter().map(|s| (s.name.as_str(), s.members, s.level)).collect();
    assert_eq!(sets, [("decode", 4, Some("rack")), ("prefill", 2, Some("rack"))]);
    assert_eq!(got.members(), 6);
    // Every PodGroup of the tree resolves to the same group.
    assert_eq!(resolve(&pod_groups[1], &composites, &pod_groups, 1000).unwrap().unwrap(), got);
    // A PodGroup without a parent is a gang of its own.
    assert_eq!(resolve(&pod_groups[2], &composites, &pod_groups, 1000).unwrap(), None);
}

#[test]
fn a_deeper_tree_gathers_every_pod_group_below_its_root() {
    let composites = vec![
        composite("job", None, gang(2), None),
        composite("replica-0", Some("job"), gang(2), None),
        composite("replica-1", Some("job"), json!({"basic": {}}), None),
    ];
    let pod_groups = vec![
        pod_group("r0-leader", Some("replica-0"), 1, None),
        pod_group("r0-workers", Some("replica-0"), 3, None),
        pod_group("r1-leader", Some("replica-1"), 1, None),
    ];
    let got = resolve(&pod_groups[2], &composites, &pod_groups, 1000).unwrap().unwrap();
    assert_eq!(got.root, "job");
    let names: Vec<&str> = got.sets.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["r0-leader", "r0-workers", "r1-leader"]);
    assert_eq!(got.members(), 5);
}

#[test]
fn a_composite_with_a_topology_below_the_root_makes_its_pod_groups_a_sub_group() {
    // Two replicas of a leader and workers, each replica in one rack, the whole in one block.
    let composites = vec![
        composite("serve", None, gang(2), Some("muster.dev/block")),
        composite("replica-0", Some("serve"), gang(2), Some("muster.dev/rack")),
        composite("replica-1", Some("serve"), gang(1), Some("muster.dev/rack")),
        composite("shards", Some("replica-1"), gang(2), None),
    ];
    let pod_groups = vec![
        pod_group("r0-leader", Some("replica-0"), 1, None),
        pod_group("r0-workers", Some("replica-0"), 3, None),
        pod_group("r1-a", Some("shards"), 2, None),
        pod_group("r1-b", Some("shards"), 2, None),
    ];
    let got = resolve(&pod_groups[0], &composites, &pod_groups, 1000).unwrap().unwrap();
    assert_eq!(got.level, Some("block"));
    let sets: Vec<(&str, Option<(&str, &str)>)> =
        got.sets.iter().map(|s| (s.name.as_str(), s.subgroup.as_ref().map(|(n, l)| (n.as_str(), *l)))).collect();
    assert_eq!(
        sets,
        [
            ("r0-leader", Some(("replica-0", "rack"))),
            ("r0-workers", Some(("replica-0", "rack"))),
            ("r1-a", Some(("replica-1", "rack"))),
            ("r1-b", Some(("replica-1", "rack"))),
        ],
        "a PodGroup deeper below a sub-group's CompositePodGroup is in it too"
    );
}

#[test]
fn what_muster_cannot_keep_is_refused_naming_the_object_and_field() {
    let (mut composites, mut pod_groups) = serving();
    composites[0] = composite("serve", None, gang(0), None);
    let e = resolve(&pod_groups[0], &composites, &pod_groups, 1000).unwrap_err();
    assert!(e.contains("minGroupCount is 0; a gang needs at least 1 child group"), "{e}");
    // A tree still being made: a child missing, or a parent.
    composites[0] = composite("serve", None, gang(3), None);
    let e = resolve(&pod_groups[0], &composites, &pod_groups, 1000).unwrap_err();
    assert!(e.contains("is 3, and 2 of its child groups exist; create its PodGroups"), "{e}");
    let e = resolve(&pod_groups[0], &[], &pod_groups, 1000).unwrap_err();
    assert!(e.contains("CompositePodGroup ml/serve (scheduling.k8s.io/v1alpha3) does not exist"), "{e}");
    // A topology on two CompositePodGroups on the way from the root to the PodGroups.
    let composites = vec![
        composite("job", None, gang(1), None),
        composite("half", Some("job"), gang(1), Some("muster.dev/block")),
        composite("quarter", Some("half"), gang(2), Some("muster.dev/rack")),
    ];
    pod_groups = vec![pod_group("a", Some("quarter"), 1, None), pod_group("b", Some("quarter"), 1, None)];
    let e = resolve(&pod_groups[0], &composites, &pod_groups, 1000).unwrap_err();
    assert!(e.contains("CompositePodGroup ml/quarter: spec.schedulingConstraints.topology"), "{e}");
    assert!(e.contains("move it to half or to the PodGroups"), "{e}");
    // A topology key that is no level.
    let composites = vec![composite("job", None, gang(2), Some("kubernetes.io/hostname"))];
    pod_groups = vec![pod_group("a", Some("job"), 1, None), pod_group("b", Some("job"), 1, None)];
    let e = resolve(&pod_groups[0], &composites, &pod_groups, 1000).unwrap_err();
    assert!(e.contains("spec.schedulingConstraints.topology[0].key: \"kubernetes.io/hostname\""), "{e}");
    // Too many members altogether.
    let e = resolve(&pod_groups[0], &[composite("job", None, gang(2), None)], &pod_groups, 1).unwrap_err();
    assert!(e.contains("add up to 2 pods, more than the 1 a group may have"), "{e}");
}

#[test]
fn a_cycle_of_parents_is_refused_not_followed_forever() {
    let composites = vec![composite("a", Some("b"), gang(1), None), composite("b", Some("a"), gang(1), None)];
    let pod_groups = vec![pod_group("leaf", Some("a"), 1, None)];
    let e = resolve(&pod_groups[0], &composites, &pod_groups, 1000).unwrap_err();
    assert!(e.contains("makes a cycle"), "{e}");
}

#[test]
fn a_pod_group_without_a_gang_policy_is_refused() {
    let composites = vec![composite("job", None, gang(1), None)];
    let mut leaf = pod_group("a", Some("job"), 1, None);
    leaf.spec.scheduling_policy = serde_json::from_value(json!({"basic": {}})).unwrap();
    let e = resolve(&leaf, &composites, std::slice::from_ref(&leaf), 1000).unwrap_err();
    assert!(e.contains("has no spec.schedulingPolicy.gang"), "{e}");
}

#[test]
fn k_of_n_children_are_the_k_smallest_gangs_required_and_the_rest_optional() {
    // Two of four inference replicas, each a gang of 4 in a rack, all in one block.
    let composites = vec![composite("serve", None, gang(2), Some("muster.dev/block"))];
    let replica = |i: u32| pod_group(&format!("replica-{i}"), Some("serve"), 4, Some("muster.dev/rack"));
    let pod_groups: Vec<PodGroup> = [3, 1, 0, 2].into_iter().map(replica).collect();
    let got = resolve(&pod_groups[0], &composites, &pod_groups, 1000).unwrap().unwrap();
    let sets: Vec<(&str, u32, Option<&str>, bool)> =
        got.sets.iter().map(|s| (s.name.as_str(), s.members, s.level, s.optional)).collect();
    assert_eq!(
        sets,
        [
            ("replica-0", 4, Some("rack"), false),
            ("replica-1", 4, Some("rack"), false),
            ("replica-2", 4, Some("rack"), true),
            ("replica-3", 4, Some("rack"), true),
        ],
        "the first two by name are required"
    );
    assert_eq!(got.members(), 16, "every pod of the tree is a member");
    // Of gangs that differ, the smallest are required, whatever their names or levels.
    let composites = vec![composite("serve", None, gang(2), None)];
    let pod_groups = vec![
        pod_group("a-large", Some("serve"), 8, Some("muster.dev/rack")),
        pod_group("b-small", Some("serve"), 2, None),
        pod_group("c-small", Some("serve"), 2, Some("muster.dev/block")),
        pod_group("d-medium", Some("serve"), 4, None),
    ];
    let got = resolve(&pod_groups[0], &composites, &pod_groups, 1000).unwrap().unwrap();
    let optional: Vec<(&str, bool)> = got.sets.iter().map(|s| (s.name.as_str(), s.optional)).collect();
    assert_eq!(optional, [("a-large", true), ("b-small", false), ("c-small", false), ("d-medium", true)]);
    let e = resolve(&pod_groups[0], &[composite("serve", None, gang(3), None)], &pod_groups, 1000).unwrap().unwrap();
    let required: Vec<&str> = e.sets.iter().filter(|s| !s.optional).map(|s| s.name.as_str()).collect();
    assert_eq!(required, ["b-small", "c-small", "d-medium"]);
    // Below a sub-group's CompositePodGroup, k of n replicas whose children are trees are refused.
    let composites = vec![
        composite("serve", None, gang(1), None),
        composite("a", Some("serve"), gang(1), None),
        composite("b", Some("serve"), gang(1), None),
    ];
    let pod_groups = vec![pod_group("a-0", Some("a"), 2, None), pod_group("b-0", Some("b"), 2, None)];
    let e = resolve(&pod_groups[0], &composites, &pod_groups, 1000).unwrap_err();
    assert!(e.contains("ml/serve: spec.schedulingPolicy.gang.minGroupCount is 1, below its 2 child groups"), "{e}");
    assert!(e.contains("CompositePodGroup ml/a is one of them"), "{e}");
}
