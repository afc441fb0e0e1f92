//! The checked-in CRDs (deploy/chart/templates/crds.yaml) on a real kube-apiserver: they become Established and
//! served; a Queue and a Group written by server-side apply read back as written; status goes
//! through the status subresource only; the printer columns and the `muster` category are served;
//! objects the schema forbids are refused with a message naming the field, and none is stored.
//!
//! Runs against the cluster of `MUSTER_E2E_KUBECONFIG` (`make e2e` sets it: hack/e2e/run.sh
//! `crds`); without it the test says so and checks nothing.

mod e2e;

use e2e::eventually;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams};
use kube::core::ApiResource;
use kube::{Client, Resource};
use muster_k8s::{Group, Queue};
use serde_json::{Value, json};

const NS: &str = "e2e-crds";
const MANAGER: &str = "muster-e2e";

#[tokio::test]
async fn the_crds_on_a_real_apiserver() {
    let Some(client) = e2e::client().await else { return };
    install_crds(&client).await;
    let _ = Api::<Queue>::all(client.clone()).delete(NS, &DeleteParams::default()).await;
    e2e::fresh_namespace(&client, NS, json!({})).await;

    let queues = Api::<DynamicObject>::all_with(client.clone(), &ApiResource::erase::<Queue>(&()));
    let groups = Api::<DynamicObject>::namespaced_with(client.clone(), NS, &ApiResource::erase::<Group>(&()));
    apply(&queues, NS, "Queue", queue_spec()).await.expect("the Queue is accepted");
    apply(&groups, "train", "Group", group_spec()).await.expect("the Group is accepted");

    let q = queues.get(NS).await.unwrap().data;
    assert_eq!(q["spec"]["policy"]["depth"], 4);
    assert_eq!(q["spec"]["quotas"]["cpu"]["nominal"], 64, "an integer quantity stays an integer");
    assert_eq!(q["spec"]["quotas"]["memory"]["nominal"], "256Gi");
    let g = groups.get("train").await.unwrap().data;
    assert_eq!((g["spec"]["members"]["min"].clone(), g["spec"]["members"]["max"].clone()), (json!(4), json!(8)));
    assert_eq!(g["spec"]["resources"]["memory"], "4Gi");
    assert_eq!(g["spec"]["affinity"][0]["matchExpressions"][0]["values"][1], "b");

    // Status through the status subresource only.
    let status = json!({"status": {
        "phase": "Reserved", "observedGeneration": 1, "estimatedStart": "2020-01-02T03:04:05Z",
        "conditions": [{"type": "Queued", "status": "True", "reason": "Reserved", "message": "start reserved",
                        "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 1}],
        "requeue": {"count": 1}, "allocation": [{"member": 0, "node": "node-1"}]}});
    groups.patch_status("train", &PatchParams::default(), &Patch::Merge(&status)).await.expect("status patch");
    let g = groups.get("train").await.unwrap().data;
    assert_eq!(g["status"]["phase"], "Reserved");
    assert_eq!(g["status"]["allocation"][0]["node"], "node-1");
    let main = json!({"status": {"phase": "Running"}});
    groups.patch("train", &PatchParams::default(), &Patch::Merge(&main)).await.expect("main-resource patch");
    assert_eq!(
        groups.get("train").await.unwrap().data["status"]["phase"],
        "Reserved",
        "status via the main resource is ignored"
    );
    let qstatus = json!({"status": {"observedGeneration": 1}});
    queues.patch_status(NS, &PatchParams::default(), &Patch::Merge(&qstatus)).await.expect("Queue status patch");
    assert_eq!(queues.get(NS).await.unwrap().data["status"]["observedGeneration"], 1);

    printer_columns(&client).await;
    category(&client).await;

    // Refused by the schema, with a message naming the field.
    let refusals: [(&str, &str, &str, Value); 9] = [
        ("Group", "negative-min", "spec.members.min", json!({"queue": "q", "members": {"min": -1}})),
        ("Group", "zero-min", "spec.members.min", json!({"queue": "q", "members": {"min": 0}})),
        ("Group", "no-members", "spec.members", json!({"queue": "q"})),
        (
            "Group",
            "bad-quantity",
            "spec.resources.cpu",
            json!({"queue": "q", "members": {"min": 1}, "resources": {"cpu": "lots"}}),
        ),
        (
            "Group",
            "bad-mode",
            "spec.topology.mode",
            json!({"queue": "q", "members": {"min": 1}, "topology": {"level": "rack", "mode": "sometimes"}}),
        ),
        (
            "Group",
            "bad-operator",
            "spec.affinity[0].matchExpressions[0].operator",
            json!({"queue": "q", "members": {"min": 1}, "affinity": [{"matchExpressions": [{"key": "k", "operator": "Near"}]}]}),
        ),
        ("Queue", "bad-policy", "spec.policy.kind", json!({"policy": {"kind": "fifo"}})),
        ("Queue", "zero-depth", "spec.policy.depth", json!({"policy": {"kind": "conservative", "depth": 0}})),
        (
            "Queue",
            "negative-backoff",
            "spec.readiness.backoffBaseSeconds",
            json!({"readiness": {"backoffBaseSeconds": -1}}),
        ),
    ];
    for (kind, name, field, spec) in refusals {
        let api = if kind == "Group" { &groups } else { &queues };
        let name = format!("bad-{name}");
        let err = apply(api, &name, kind, spec).await.expect_err(&format!("{kind} {name} must be refused"));
        assert!(err.contains(field), "{kind} {name}: refused, but the message does not name {field}: {err}");
    }
    let phase = json!({"status": {"phase": "Sleeping"}});
    let err =
        groups.patch_status("train", &PatchParams::default(), &Patch::Merge(&phase)).await.expect_err("phase Sleeping");
    assert!(err.to_string().contains("status.phase"), "{err}");
    let stored: Vec<String> = groups
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .chain(queues.list(&Default::default()).await.unwrap().items)
        .filter_map(|o| o.metadata.name)
        .filter(|n| n.starts_with("bad-"))
        .collect();
    assert!(stored.is_empty(), "refused objects were stored: {stored:?}");

    let _ = queues.delete(NS, &DeleteParams::default()).await;
    let _ = Api::<Namespace>::all(client).delete(NS, &DeleteParams::default()).await;
}

fn queue_spec() -> Value {
    json!({
        "cohort": "research",
        "policy": {"kind": "conservative", "depth": 4},
        "fairShareWeight": 2,
        "quotas": {"cpu": {"nominal": 64, "borrowingLimit": "32", "lendingLimit": "500m"}, "memory": {"nominal": "256Gi"}},
        "namespaceSelector": {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": [NS]}]},
        "readiness": {"timeoutSeconds": 600, "backoffLimit": 3, "requeueOrder": "Creation"},
        "preemption": {"withinQueue": "LowerPriority", "reclaimWithinCohort": true},
    })
}

fn group_spec() -> Value {
    json!({
        "queue": NS,
        "members": {"min": 4, "max": 8},
        "resources": {"cpu": 2, "memory": "4Gi"},
        "nodeSelector": {"pool": "batch"},
        "affinity": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]}],
        "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "topology": {"level": "rack", "mode": "required"},
        "priorityClassName": "high",
        "durationSeconds": 600,
        "owner": {"apiVersion": "batch/v1", "kind": "Job", "name": "train"},
    })
}

/// Server-side apply of one object of `kind` with `spec`; the apiserver's message when refused.
async fn apply(api: &Api<DynamicObject>, name: &str, kind: &str, spec: Value) -> Result<(), String> {
    let mut meta = json!({"name": name});
    if kind == "Group" {
        meta["namespace"] = json!(NS);
    }
    let doc = json!({"apiVersion": "muster.dev/v1alpha1", "kind": kind, "metadata": meta, "spec": spec});
    api.patch(name, &PatchParams::apply(MANAGER), &Patch::Apply(&doc)).await.map(|_| ()).map_err(|e| e.to_string())
}

/// deploy/chart/templates/crds.yaml applied server-side; waits until both are Established and served.
async fn install_crds(client: &Client) {
    let file = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/chart/templates/crds.yaml");
    let text = std::fs::read_to_string(file).expect("deploy/chart/templates/crds.yaml");
    let crds = Api::<CustomResourceDefinition>::all(client.clone());
    for doc in serde_yaml_ng::Deserializer::from_str(&text) {
        let crd: CustomResourceDefinition = serde::Deserialize::deserialize(doc).expect("a CRD");
        let name = crd.metadata.name.clone().expect("a named CRD");
        crds.patch(&name, &PatchParams::apply(MANAGER).force(), &Patch::Apply(&crd))
            .await
            .expect("the CRD is accepted");
    }
    for name in ["queues.muster.dev", "cohorts.muster.dev", "groups.muster.dev"] {
        eventually(60, &format!("{name} is Established"), || {
            let crds = crds.clone();
            async move {
                let crd = crds.get(name).await.ok()?;
                let conds = crd.status?.conditions?;
                conds.iter().any(|c| c.type_ == "Established" && c.status == "True").then_some(())
            }
        })
        .await;
    }
    // Discovery lags a moment behind Established.
    let queues = Api::<Queue>::all(client.clone());
    eventually(30, "the resources are served", || {
        let queues = queues.clone();
        async move { queues.list(&Default::default()).await.ok().map(|_| ()) }
    })
    .await;
}

/// `kubectl get groups` columns, as the apiserver's Table form serves them.
async fn printer_columns(client: &Client) {
    let url = format!("{}?limit=10", Group::url_path(&(), Some(NS)));
    let req = http::Request::get(url)
        .header("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
        .body(Vec::new())
        .unwrap();
    let table: Value = client.request(req).await.expect("the Table form of groups");
    let names: Vec<&str> =
        table["columnDefinitions"].as_array().unwrap().iter().filter_map(|c| c["name"].as_str()).collect();
    assert_eq!(names, ["Name", "Queue", "Min", "Max", "Phase", "Position", "Estimated Start", "Age"]);
    let cells = &table["rows"][0]["cells"];
    assert_eq!((cells[0].as_str(), cells[1].as_str(), cells[4].as_str()), (Some("train"), Some(NS), Some("Reserved")));
    assert_eq!((cells[2].as_i64(), cells[3].as_i64()), (Some(4), Some(8)));
}

/// The kinds are in discovery's `muster` category (`kubectl get muster`).
async fn category(client: &Client) {
    let req = http::Request::get("/apis/muster.dev/v1alpha1").body(Vec::new()).unwrap();
    let list: Value = client.request(req).await.expect("discovery of muster.dev/v1alpha1");
    for name in ["queues", "cohorts", "reservations", "groups"] {
        let resource = list["resources"].as_array().unwrap().iter().find(|r| r["name"] == name).expect(name);
        assert_eq!(resource["categories"], json!(["muster"]), "{name}");
    }
}
