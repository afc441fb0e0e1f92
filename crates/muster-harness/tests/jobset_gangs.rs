//! Gangs inside a JobSet's group, on a real control plane with the real JobSet controller, on 32
//! KWOK nodes of 8 GPUs in 4 racks of 8, two racks to a block (scenarios/clusters/gpu-racks-32.yaml).
//! Disaggregated inference as a JobSet kept within one block: prefill (5 whole-node pods) and
//! decode (4), each replicated Job's pod template annotated `muster.dev/set-topology: rack`. Its
//! Group keeps the two sets apart with their levels, and every prefill pod binds in one rack and
//! every decode pod in another (9 nodes are more than a rack holds), both in one block. A JobSet
//! of two sub-groups, each a 1-cpu leader and 2 whole-node workers kept within one rack
//! (`muster.dev/subgroup`, `muster.dev/subgroup-topology`), binds each sub-group in one rack. A
//! JobSet of 3 replicas of 5 whole-node pods, each replica kept within a rack
//! (`muster.dev/replica-topology`: 15 nodes, more than a rack holds), gets a set per replica and
//! binds each replica's pods in a rack of its own. A template naming a sub-group without a level
//! is refused, naming the annotation.
//!
//! hack/e2e/test-muster-jobset-gangs.sh starts the JobSet controller, then muster and the
//! over-commit checker around this test.

mod e2e;

use std::collections::{BTreeMap, BTreeSet};

use e2e::eventually;
use e2e::manifests::{create, refused};
use e2e::namespaces::release;
use e2e::objects::{group, pods};
use k8s_openapi::api::core::v1::Node;
use kube::Client;
use kube::api::{Api, ListParams};
use muster_k8s::external::JobSet;
use serde_json::{Value, json};

const NS: &str = "e2e-jobset-gangs";

/// A replicated Job of `pods` indexed pods of `cpu` and `gpus`, running 20 s, its pod template
/// annotated `annotations`.
fn replicated(name: &str, pods: u32, cpu: &str, gpus: u32, annotations: Value) -> Value {
    let mut template_annotations = json!({"kwok.muster.dev/run-seconds": "20", "e2e.muster.dev/test": "true"});
    template_annotations.as_object_mut().unwrap().extend(annotations.as_object().unwrap().clone());
    let mut requests = json!({"cpu": cpu, "memory": "1Mi"});
    if gpus > 0 {
        requests["nvidia.com/gpu"] = json!(gpus.to_string());
    }
    json!({"name": name, "template": {"spec": {
        "parallelism": pods, "completions": pods, "completionMode": "Indexed", "backoffLimit": 0,
        "template": {"metadata": {"annotations": template_annotations}, "spec": {
            "restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "main", "image": "kwok-fake",
                            "resources": {"requests": requests.clone(), "limits": requests}}]}}}}})
}

/// A JobSet in the default queue, annotated `annotations`.
fn jobset(name: &str, annotations: Value, jobs: Vec<Value>) -> Value {
    json!({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
           "metadata": {"name": name, "labels": {"muster.dev/queue": "default"}, "annotations": annotations},
           "spec": {"replicatedJobs": jobs}})
}

/// The nodes of the pods of JobSet `js`, by replicated Job, once `count` of them are bound.
async fn bound(client: &Client, js: &str, count: usize) -> Option<BTreeMap<String, Vec<String>>> {
    bound_by(client, js, count, "jobset.sigs.k8s.io/replicatedjob-name").await
}

/// The nodes of the pods of JobSet `js`, by the value of their label `key`, once `count` are bound.
async fn bound_by(client: &Client, js: &str, count: usize, key: &str) -> Option<BTreeMap<String, Vec<String>>> {
    let all = pods(client, NS, &format!("jobset.sigs.k8s.io/jobset-name={js}")).await;
    let mut by_job: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for p in &all {
        let job = p.metadata.labels.as_ref()?.get(key)?.clone();
        let node = p.spec.as_ref()?.node_name.clone()?;
        by_job.entry(job).or_default().push(node);
    }
    (by_job.values().map(Vec::len).sum::<usize>() == count).then_some(by_job)
}

/// The values of node label `key` under `nodes`.
fn domains(labels: &BTreeMap<String, BTreeMap<String, String>>, nodes: &[String], key: &str) -> BTreeSet<String> {
    nodes.iter().map(|n| labels[n].get(key).cloned().unwrap_or_default()).collect()
}

/// A JSON string's text ("" for anything else).
fn text(v: &Value) -> &str {
    v.as_str().unwrap_or("")
}

/// Each entry of the list `spec.<field>` of the Group `name`, as `describe` writes it.
async fn described(
    client: &Client,
    name: &str,
    field: &str,
    describe: impl Fn(&Value) -> String,
) -> Option<Vec<String>> {
    let g = group(client, NS, name).await?;
    Some(g["spec"][field].as_array()?.iter().map(describe).collect())
}

#[tokio::test]
async fn a_jobsets_replicated_jobs_are_gangs_in_their_racks_and_sub_groups_share_one() {
    let Some(client) = e2e::client().await else { return };
    e2e::fresh_namespace(&client, NS, json!({})).await;
    let nodes = Api::<Node>::all(client.clone()).list(&ListParams::default()).await.unwrap();
    let labels: BTreeMap<String, BTreeMap<String, String>> = (nodes.items.into_iter())
        .map(|n| (n.metadata.name.clone().unwrap_or_default(), n.metadata.labels.unwrap_or_default()))
        .collect();

    // Prefill and decode, each in a rack, both in one block.
    let rack = json!({"muster.dev/set-topology": "rack"});
    let serve = jobset(
        "serve",
        json!({"muster.dev/required-topology": "block"}),
        vec![replicated("prefill", 5, "8", 8, rack.clone()), replicated("decode", 4, "8", 8, rack)],
    );
    create::<JobSet>(&client, NS, serve).await.expect("the JobSet is created");
    let levels = eventually(30, "the Group keeps the two sets apart, each with its level", || async {
        let g = group(&client, NS, "serve").await?;
        let sets: Vec<(String, String)> = (g["spec"]["sets"].as_array()?.iter())
            .map(|s| {
                (
                    s["name"].as_str().unwrap_or("").to_string(),
                    s["topology"]["level"].as_str().unwrap_or("").to_string(),
                )
            })
            .collect();
        (sets.len() == 2).then(|| (g["spec"]["topology"]["level"].as_str().unwrap_or("").to_string(), sets))
    })
    .await;
    let want = |a: &str, b: &str| (a.to_string(), b.to_string());
    assert_eq!(levels, ("block".to_string(), vec![want("prefill", "rack"), want("decode", "rack")]));
    let by_job = eventually(60, "all 9 pods of serve are bound", || bound(&client, "serve", 9)).await;
    let (prefill, decode) = (&by_job["prefill"], &by_job["decode"]);
    let (p_rack, d_rack) = (domains(&labels, prefill, "muster.dev/rack"), domains(&labels, decode, "muster.dev/rack"));
    assert_eq!(p_rack.len(), 1, "every prefill pod in one rack: {by_job:?}");
    assert_eq!(d_rack.len(), 1, "every decode pod in one rack: {by_job:?}");
    assert_ne!(p_rack, d_rack, "9 nodes take two racks: {by_job:?}");
    let all: Vec<String> = prefill.iter().chain(decode).cloned().collect();
    assert_eq!(domains(&labels, &all, "muster.dev/block").len(), 1, "both racks in one block: {by_job:?}");
    eprintln!("  ok   prefill in {p_rack:?}, decode in {d_rack:?}, both in one block");

    // Two sub-groups of a leader and its workers, each in one rack.
    let sub = |g: &str| json!({"muster.dev/subgroup": g, "muster.dev/subgroup-topology": "rack"});
    let pair = jobset(
        "pair",
        json!({}),
        vec![
            replicated("a-leader", 1, "1", 0, sub("a")),
            replicated("a-workers", 2, "8", 8, sub("a")),
            replicated("b-leader", 1, "1", 0, sub("b")),
            replicated("b-workers", 2, "8", 8, sub("b")),
        ],
    );
    create::<JobSet>(&client, NS, pair).await.expect("the JobSet is created");
    let sub_group = |s: &Value| format!("{}:{}@{}", text(&s["name"]), s["sets"], text(&s["topology"]["level"]));
    let groups = eventually(30, "the Group has the two sub-groups", || async {
        described(&client, "pair", "subgroups", sub_group).await.filter(|g| g.len() == 2)
    })
    .await;
    assert_eq!(groups, [r#"a:["a-leader","a-workers"]@rack"#, r#"b:["b-leader","b-workers"]@rack"#]);
    let by_job = eventually(60, "all 6 pods of pair are bound", || bound(&client, "pair", 6)).await;
    for g in ["a", "b"] {
        let nodes: Vec<String> =
            by_job[&format!("{g}-leader")].iter().chain(&by_job[&format!("{g}-workers")]).cloned().collect();
        assert_eq!(domains(&labels, &nodes, "muster.dev/rack").len(), 1, "sub-group {g} in one rack: {by_job:?}");
    }
    eprintln!("  ok   each sub-group's leader shares its workers' rack");

    // Three replicas of 5 whole nodes, each replica within a rack: a set per replica.
    let mut slice = replicated("slice", 5, "8", 8, json!({"muster.dev/replica-topology": "rack"}));
    slice["replicas"] = json!(3);
    create::<JobSet>(&client, NS, jobset("slices", json!({}), vec![slice])).await.expect("the JobSet is created");
    let set = |s: &Value| format!("{}x{}@{}", text(&s["name"]), s["members"]["min"], text(&s["topology"]["level"]));
    let sets = eventually(30, "the Group has a set per replica, each with its level", || async {
        described(&client, "slices", "sets", set).await.filter(|s| !s.is_empty())
    })
    .await;
    assert_eq!(sets, ["slice-0x5@rack", "slice-1x5@rack", "slice-2x5@rack"]);
    let by_replica = eventually(90, "all 15 pods of slices are bound", || {
        bound_by(&client, "slices", 15, "jobset.sigs.k8s.io/job-index")
    })
    .await;
    let racks: Vec<BTreeSet<String>> =
        by_replica.values().map(|nodes| domains(&labels, nodes, "muster.dev/rack")).collect();
    assert!(racks.iter().all(|r| r.len() == 1), "each replica in one rack: {by_replica:?}");
    assert_eq!(racks.iter().collect::<BTreeSet<_>>().len(), 3, "5 + 5 nodes do not fit a rack of 8: {by_replica:?}");
    eprintln!("  ok   each of the 3 replicas in a rack of its own: {racks:?}");

    // A sub-group without a level.
    let bad = jobset("bad", json!({}), vec![replicated("x", 1, "1", 0, json!({"muster.dev/subgroup": "x"}))]);
    let message = refused("a sub-group without a level", create::<JobSet>(&client, NS, bad).await);
    assert!(message.contains("annotations[muster.dev/subgroup]: sub-group \"x\" has no level"), "{message}");
    eprintln!("  ok   a sub-group without a level is refused, naming the annotation");
    release(&client, &[NS]).await;
}
