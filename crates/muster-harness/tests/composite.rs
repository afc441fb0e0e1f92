//! A gang of gangs as Kubernetes 1.37 writes it, on a real control plane: a CompositePodGroup
//! (`scheduling.k8s.io/v1alpha3`, the CompositePodGroup gate) `serve` kept within one block, over
//! two PodGroups each kept within one rack: `prefill` (2 pods of 8 GPUs) and `decode` (3 pods of
//! 2 GPUs), on 32 KWOK nodes of 8 GPUs in 4 racks of 8, 2 racks to a block
//! (scenarios/clusters/gpu-racks-32.yaml). The pods carry only the queue label and name their
//! PodGroup; muster's webhook makes them one group with a set per PodGroup, nothing is bound
//! until both PodGroups' pods exist, then all five are bound at once, each set in one rack, both
//! in one block, each pod on a member of its own set; both PodGroups are marked scheduled, and
//! the group runs to the end. A gang that may start with fewer children than it has (k of n) is
//! refused, naming the field, when its children differ. A tree of three levels (two replicas
//! kept each within a rack, each a leader and workers, both in one block) is placed with each
//! replica's pods in one rack. Two of five alike replicas (k of n) start with the three racks
//! free, and the fourth takes a rack whole once one comes free.
//!
//! hack/e2e/test-muster-composite.sh starts muster and the over-commit checker (`muster-harness
//! overcommit`) around this test.

mod e2e;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use e2e::eventually;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::{Client, ResourceExt};
use muster_k8s::Group;
use serde_json::{Value, json};

const NS: &str = "e2e-composite";

fn resource(version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("scheduling.k8s.io", version, kind), plural)
}

async fn create(client: &Client, ar: &ApiResource, doc: Value) {
    let obj: DynamicObject = serde_json::from_value(doc).unwrap();
    let name = obj.name_any();
    Api::<DynamicObject>::namespaced_with(client.clone(), NS, ar)
        .create(&PostParams::default(), &obj)
        .await
        .unwrap_or_else(|e| panic!("{} {name} is created: {e}", ar.kind));
}

/// A CompositePodGroup, below `parent` if given, kept within one domain of the node label
/// `topology` if given.
async fn composite_pod_group(
    client: &Client,
    name: &str,
    parent: Option<&str>,
    min_groups: u32,
    topology: Option<&str>,
) {
    let mut spec = json!({"workloadRef": {"workloadName": parent.unwrap_or(name), "templateName": name},
                          "schedulingPolicy": {"gang": {"minGroupCount": min_groups}}});
    if let Some(parent) = parent {
        spec["parentCompositePodGroupName"] = json!(parent);
    }
    if let Some(key) = topology {
        spec["schedulingConstraints"] = json!({"topology": [{"key": key}]});
    }
    let doc = json!({"apiVersion": "scheduling.k8s.io/v1alpha3", "kind": "CompositePodGroup",
                     "metadata": {"name": name}, "spec": spec});
    create(client, &resource("v1alpha3", "CompositePodGroup", "compositepodgroups"), doc).await;
}

async fn pod_group(client: &Client, name: &str, parent: &str, min: u32, topology: Option<&str>) {
    let mut spec = json!({"parentCompositePodGroupName": parent, "schedulingPolicy": {"gang": {"minCount": min}},
                          "workloadRef": {"workloadName": parent, "templateName": name}});
    if let Some(key) = topology {
        spec["schedulingConstraints"] = json!({"topology": [{"key": key}]});
    }
    let doc = json!({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup", "metadata": {"name": name},
                     "spec": spec});
    create(client, &resource("v1beta1", "PodGroup", "podgroups"), doc).await;
}

/// A pod as a user of Kubernetes' gangs writes it, plus muster's queue label: it names its
/// PodGroup and runs `run` seconds on KWOK.
fn pod(name: &str, pod_group: &str, gpus: u32, run: u32) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"muster.dev/queue": "default"},
                     "annotations": {"kwok.muster.dev/run-seconds": run.to_string(), "e2e.muster.dev/test": "true"}},
        "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
                 "schedulingGroup": {"podGroupName": pod_group},
                 "containers": [{"name": "main", "image": "kwok-fake", "resources": {
                     "requests": {"cpu": "2", "memory": "1Gi", "nvidia.com/gpu": gpus.to_string()},
                     "limits": {"nvidia.com/gpu": gpus.to_string()}}}]}
    }))
    .unwrap()
}

/// Each pod's node, once every pod of `names` is bound.
async fn nodes_of(pods: &Api<Pod>, names: &[String]) -> Option<BTreeMap<String, String>> {
    let all = pods.list(&ListParams::default()).await.ok()?.items;
    let bound: BTreeMap<String, String> =
        all.iter().filter_map(|p| Some((p.name_any(), p.spec.as_ref()?.node_name.clone()?))).collect();
    names.iter().all(|n| bound.contains_key(n)).then_some(bound)
}

fn label<'a>(nodes: &'a BTreeMap<String, Node>, node: &str, key: &str) -> &'a str {
    nodes[node].labels().get(key).map(String::as_str).unwrap_or_else(|| panic!("node {node} has no {key}"))
}

#[tokio::test]
async fn a_composite_pod_group_is_placed_whole_each_pod_group_in_its_rack_all_in_one_block() {
    let Some(client) = e2e::client().await else { return };
    e2e::fresh_namespace(&client, NS, json!({})).await;
    composite_pod_group(&client, "serve", None, 2, Some("muster.dev/block")).await;
    pod_group(&client, "prefill", "serve", 2, Some("muster.dev/rack")).await;
    pod_group(&client, "decode", "serve", 3, Some("muster.dev/rack")).await;
    let pods = Api::<Pod>::namespaced(client.clone(), NS);
    let post = PostParams::default();

    // The prefill pods first: muster's webhook labels them, and nothing is bound without decode.
    let prefill: Vec<String> = (0..2).map(|i| format!("prefill-{i}")).collect();
    for name in &prefill {
        let made = pods.create(&post, &pod(name, "prefill", 8, 15)).await.expect("a prefill pod is admitted");
        let labels = made.labels();
        let got: Vec<Option<&str>> =
            ["muster.dev/group", "muster.dev/group-size", "muster.dev/set", "muster.dev/set-size"]
                .iter()
                .map(|k| labels.get(*k).map(String::as_str))
                .collect();
        assert_eq!(got, [Some("serve"), Some("5"), Some("prefill"), Some("2")], "{name}");
        let annotations = made.annotations();
        assert_eq!(
            (
                annotations.get("muster.dev/required-topology").map(String::as_str),
                annotations.get("muster.dev/set-topology").map(String::as_str)
            ),
            (Some("block"), Some("rack"))
        );
    }
    for _ in 0..6 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let bound = pods.list(&ListParams::default()).await.unwrap().items;
        let bound: Vec<String> =
            bound.iter().filter(|p| p.spec.as_ref().unwrap().node_name.is_some()).map(|p| p.name_any()).collect();
        assert!(bound.is_empty(), "prefill bound before its sibling gang's pods exist: {bound:?}");
    }

    // The decode pods: all five bound at once.
    let decode: Vec<String> = (0..3).map(|i| format!("decode-{i}")).collect();
    for name in &decode {
        pods.create(&post, &pod(name, "decode", 2, 15)).await.expect("a decode pod is admitted");
    }
    let all: Vec<String> = prefill.iter().chain(&decode).cloned().collect();
    let bound = eventually(60, "all five pods are bound", || nodes_of(&pods, &all)).await;
    let nodes: BTreeMap<String, Node> = Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|n| (n.name_any(), n))
        .collect();
    let domains = |names: &[String], key: &str| -> BTreeSet<String> {
        names.iter().map(|n| label(&nodes, &bound[n], key).to_string()).collect()
    };
    assert_eq!(domains(&prefill, "muster.dev/rack").len(), 1, "prefill in one rack: {bound:?}");
    assert_eq!(domains(&decode, "muster.dev/rack").len(), 1, "decode in one rack: {bound:?}");
    assert_eq!(domains(&all, "muster.dev/block").len(), 1, "the whole tree in one block: {bound:?}");
    let prefill_nodes: BTreeSet<&String> = prefill.iter().map(|n| &bound[n]).collect();
    assert_eq!(prefill_nodes.len(), 2, "two whole-node prefill pods on two nodes: {bound:?}");

    // The Group holds what each set asks: 2 x 8 GPUs and 3 x 2, not 5 x 8.
    let group = Api::<Group>::namespaced(client.clone(), NS).get("serve").await.expect("the Group serve exists");
    let sets: Vec<(&str, i64, u64)> = group
        .spec
        .sets
        .iter()
        .map(|s| (s.name.as_str(), s.members.min, s.resources["nvidia.com/gpu"].amount("nvidia.com/gpu").unwrap()))
        .collect();
    assert_eq!(sets, [("decode", 3, 2), ("prefill", 2, 8)], "a set per PodGroup, each of its own size");
    // Nothing held that no pod asks for: each pod's member is in its PodGroup's set (members are
    // numbered set after set), and that set holds exactly what the pod asks.
    let mut first = 0;
    let ranges: Vec<(&str, std::ops::Range<i64>, BTreeMap<String, u64>)> = group
        .spec
        .sets
        .iter()
        .map(|s| {
            let n = s.members.max.unwrap_or(s.members.min);
            let holds = s.resources.iter().map(|(r, q)| (r.clone(), q.amount(r).unwrap())).filter(|(_, a)| *a > 0);
            first += n;
            (s.name.as_str(), first - n..first, holds.collect())
        })
        .collect();
    for p in pods.list(&ListParams::default()).await.unwrap().items.iter().filter(|p| all.contains(&p.name_any())) {
        let member: i64 = p.annotations()["muster.dev/member"].parse().unwrap();
        let pod_group = p.spec.as_ref().unwrap().scheduling_group.as_ref().unwrap().pod_group_name.clone();
        let (set, _, holds) = ranges.iter().find(|(_, r, _)| r.contains(&member)).expect("a member in a set");
        assert_eq!(Some(set.to_string()), pod_group, "{}: member {member} is in its PodGroup's set", p.name_any());
        let mut asks = muster_k8s::pod::requests(p.spec.as_ref().unwrap()).unwrap();
        asks.retain(|r, a| r != "pods" && *a > 0);
        assert_eq!(&asks, holds, "{}: what its set holds is what it asks", p.name_any());
    }

    // Both PodGroups are marked scheduled, as kube-scheduler marks them.
    let pod_groups =
        Api::<DynamicObject>::namespaced_with(client.clone(), NS, &resource("v1beta1", "PodGroup", "podgroups"));
    for name in ["prefill", "decode"] {
        eventually(30, &format!("PodGroup {name} says PodGroupInitiallyScheduled=True"), || async {
            let pg = pod_groups.get(name).await.ok()?;
            let conditions = pg.data.pointer("/status/conditions")?.as_array()?.clone();
            conditions.iter().any(|c| c["type"] == "PodGroupInitiallyScheduled" && c["status"] == "True").then_some(())
        })
        .await;
    }
    eventually(90, "the group serve succeeds", || async {
        let g = Api::<Group>::namespaced(client.clone(), NS).get("serve").await.ok()?;
        (g.status?.phase?.to_string() == "Succeeded").then_some(())
    })
    .await;

    // k of n over PodGroups that differ: the smallest gang is required, the other optional, and
    // both run once there is room for them.
    composite_pod_group(&client, "either", None, 1, None).await;
    pod_group(&client, "either-a", "either", 2, None).await;
    pod_group(&client, "either-b", "either", 1, None).await;
    let mut either = Vec::new();
    for (name, pod_group_name) in [("either-a-0", "either-a"), ("either-a-1", "either-a"), ("either-b-0", "either-b")] {
        let made = pods.create(&post, &pod(name, pod_group_name, 1, 5)).await.expect("a pod of a k-of-n gang");
        either.push((name.to_string(), made.labels().get("muster.dev/set-min").cloned()));
    }
    let optional: Vec<Option<&str>> = either.iter().map(|(_, min)| min.as_deref()).collect();
    assert_eq!(optional, [Some("0"), Some("0"), None], "either-b, the smaller gang, is the one required");
    let names: Vec<String> = either.into_iter().map(|(name, _)| name).collect();
    eventually(60, "the three pods of either are bound", || nodes_of(&pods, &names)).await;

    // A gang of gangs of three levels: two replicas, each a CompositePodGroup kept within one rack
    // over a leader of no GPU and three whole-node workers, both replicas in one block.
    composite_pod_group(&client, "fleet", None, 2, Some("muster.dev/block")).await;
    for r in ["r0", "r1"] {
        composite_pod_group(&client, r, Some("fleet"), 2, Some("muster.dev/rack")).await;
        pod_group(&client, &format!("{r}-leader"), r, 1, None).await;
        pod_group(&client, &format!("{r}-workers"), r, 3, None).await;
    }
    let mut replicas = Vec::new();
    for r in ["r0", "r1"] {
        let mut names = vec![format!("{r}-leader-0")];
        pods.create(&post, &pod(&names[0], &format!("{r}-leader"), 0, 15)).await.expect("a leader pod is admitted");
        for i in 0..3 {
            let name = format!("{r}-worker-{i}");
            let made = pods.create(&post, &pod(&name, &format!("{r}-workers"), 8, 15)).await.expect("a worker pod");
            let annotations = made.annotations();
            assert_eq!(
                (
                    annotations.get("muster.dev/subgroup").map(String::as_str),
                    annotations.get("muster.dev/subgroup-topology").map(String::as_str)
                ),
                (Some(r), Some("rack")),
                "{name}"
            );
            names.push(name);
        }
        replicas.push(names);
    }
    let all: Vec<String> = replicas.concat();
    let bound = eventually(60, "all eight pods of the fleet are bound", || nodes_of(&pods, &all)).await;
    let domains = |names: &[String], key: &str| -> BTreeSet<String> {
        names.iter().map(|n| label(&nodes, &bound[n], key).to_string()).collect()
    };
    for names in &replicas {
        assert_eq!(
            domains(names, "muster.dev/rack").len(),
            1,
            "a replica's leader shares its workers' rack: {bound:?}"
        );
    }
    assert_eq!(domains(&all, "muster.dev/block").len(), 1, "both replicas in one block: {bound:?}");
    let group = Api::<Group>::namespaced(client.clone(), NS).get("fleet").await.expect("the Group fleet exists");
    let subgroups: Vec<(&str, &[String])> =
        group.spec.subgroups.iter().map(|g| (g.name.as_str(), g.sets.as_slice())).collect();
    let (r0, r1) = (["r0-leader".to_string(), "r0-workers".into()], ["r1-leader".to_string(), "r1-workers".into()]);
    assert_eq!(subgroups, [("r0", &r0[..]), ("r1", &r1[..])]);
    eventually(90, "the group fleet succeeds", || async {
        let g = Api::<Group>::namespaced(client.clone(), NS).get("fleet").await.ok()?;
        (g.status?.phase?.to_string() == "Succeeded").then_some(())
    })
    .await;

    // k of n: two of five inference replicas, each 8 whole-node pods in one rack. A gang of its
    // own holds one of the four racks until t=20 s: three replicas start, each in a rack, and the
    // fourth takes the rack that comes free, all its pods at once; the fifth finds no rack.
    let blocker = json!({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup", "metadata": {"name": "blocker"},
                         "spec": {"schedulingPolicy": {"gang": {"minCount": 8}},
                                  "schedulingConstraints": {"topology": [{"key": "muster.dev/rack"}]}}});
    create(&client, &resource("v1beta1", "PodGroup", "podgroups"), blocker).await;
    let blockers: Vec<String> = (0..8).map(|i| format!("blocker-{i}")).collect();
    for name in &blockers {
        pods.create(&post, &pod(name, "blocker", 8, 20)).await.expect("a blocker pod is admitted");
    }
    eventually(60, "the blocker's rack is taken", || nodes_of(&pods, &blockers)).await;
    composite_pod_group(&client, "replicas", None, 2, None).await;
    for r in 0..5 {
        pod_group(&client, &format!("replica-{r}"), "replicas", 8, Some("muster.dev/rack")).await;
    }
    let mut replica_pods = Vec::new();
    for r in 0..5 {
        let pod_group_name = format!("replica-{r}");
        let names: Vec<String> = (0..8).map(|i| format!("replica-{r}-{i}")).collect();
        for name in &names {
            let made = pods.create(&post, &pod(name, &pod_group_name, 8, 60)).await.expect("a replica pod");
            let optional = made.labels().get("muster.dev/set-min").map(String::as_str);
            assert_eq!(optional, (r >= 2).then_some("0"), "{name}: the replicas beyond the first two are optional");
        }
        replica_pods.push(names);
    }
    let first_three = replica_pods[..3].concat();
    let bound = eventually(60, "three replicas are bound", || nodes_of(&pods, &first_three)).await;
    let rack_of = |bound: &BTreeMap<String, String>, names: &[String]| -> BTreeSet<String> {
        names
            .iter()
            .filter_map(|n| bound.get(n))
            .map(|node| label(&nodes, node, "muster.dev/rack").to_string())
            .collect()
    };
    let unbound = |bound: &BTreeMap<String, String>, names: &[String]| names.iter().all(|n| !bound.contains_key(n));
    for names in &replica_pods[..3] {
        assert_eq!(rack_of(&bound, names).len(), 1, "each replica in one rack: {bound:?}");
    }
    assert!(unbound(&bound, &replica_pods[3]) && unbound(&bound, &replica_pods[4]), "{bound:?}");
    let group = Api::<Group>::namespaced(client.clone(), NS).get("replicas").await.expect("the Group replicas exists");
    let optional: Vec<bool> = group.spec.sets.iter().map(|s| s.optional).collect();
    assert_eq!(optional, [false, false, true, true, true]);
    assert_eq!((group.spec.members.min, group.spec.members.max), (16, Some(40)));
    let fourth = &replica_pods[3];
    let bound = eventually(60, "the fourth replica takes the freed rack", || nodes_of(&pods, fourth)).await;
    assert_eq!(rack_of(&bound, fourth).len(), 1, "{bound:?}");
    assert!(unbound(&bound, &replica_pods[4]), "no rack is left for the fifth: {bound:?}");
    pods.delete_collection(&Default::default(), &ListParams::default()).await.expect("the test's pods are deleted");
}
