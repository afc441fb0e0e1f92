//! LeaderWorkerSets: the set carries the queue into its pod templates, each pod joins its
//! leader's group, and a set whose groups could never start whole is refused.
mod common;
use common::*;

const LWS: Kind = ("leaderworkerset.x-k8s.io", "v1", "LeaderWorkerSet", "leaderworkersets");

fn template(cpu: &str) -> Value {
    json!({"metadata": {"labels": {"app": "serve"}}, "spec": {"containers": [
        {"name": "main", "image": "vllm", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]}})
}

fn lws(queue: Option<&str>, size: i64, leader_cpu: &str, worker_cpu: &str) -> Value {
    let mut l = json!({
        "apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
        "metadata": {"name": "serve", "namespace": "ml", "labels": {}},
        "spec": {"replicas": 2, "startupPolicy": "LeaderCreated", "leaderWorkerTemplate": {
            "size": size, "leaderTemplate": template(leader_cpu), "workerTemplate": template(worker_cpu)}}
    });
    if let Some(q) = queue {
        l["metadata"]["labels"][QUEUE] = json!(q);
    }
    l
}

#[tokio::test]
async fn a_queued_set_carries_its_queue_into_both_templates() {
    let l = lws(Some("team-a"), 4, "1", "1");
    let out = patched(&l, &patch_of(&request("CREATE", TENANT, LWS, &l, None), &WebhookConfig::default()));
    for t in ["leaderTemplate", "workerTemplate"] {
        assert_eq!(out["spec"]["leaderWorkerTemplate"][t]["metadata"]["labels"][QUEUE], json!("team-a"), "{t}");
        assert_eq!(out["spec"]["leaderWorkerTemplate"][t]["metadata"]["labels"]["app"], json!("serve"), "{t}");
    }
    assert_eq!(check(&request("CREATE", TENANT, LWS, &out, None)).await, Ok(()));
    // A template without metadata gets it; a set without the queue label is left alone.
    let mut bare = lws(Some("team-a"), 2, "1", "1");
    bare["spec"]["leaderWorkerTemplate"]["workerTemplate"].as_object_mut().unwrap().remove("metadata");
    let out = patched(&bare, &patch_of(&request("CREATE", TENANT, LWS, &bare, None), &WebhookConfig::default()));
    assert_eq!(out["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]["labels"][QUEUE], json!("team-a"));
    let unqueued = lws(None, 2, "1", "1");
    assert!(patch_of(&request("CREATE", TENANT, LWS, &unqueued, None), &WebhookConfig::default()).0.is_empty());
}

#[tokio::test]
async fn a_set_whose_groups_could_never_start_whole_is_refused_naming_each_field() {
    let mut hostile = lws(Some("team-a"), 3, "500m", "1");
    hostile["spec"]["startupPolicy"] = json!("LeaderReady");
    hostile["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["nodeName"] = json!("node-1");
    hostile["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]["labels"]["muster.dev/group"] = json!("x");
    let e = check(&request("CREATE", TENANT, LWS, &hostile, None)).await.unwrap_err();
    for part in [
        "spec.startupPolicy: LeaderReady",
        "spec.leaderWorkerTemplate.workerTemplate.spec.nodeName",
        "spec.leaderWorkerTemplate.workerTemplate.metadata.labels[muster.dev/group]",
    ] {
        assert!(e.contains(part), "{part} in {e}");
    }
    // Quota: 8 cpu in team-a; a group of 9 pods of 1 cpu never fits.
    let e = check(&request("CREATE", TENANT, LWS, &lws(Some("team-a"), 9, "1", "1"), None)).await.unwrap_err();
    assert!(e.contains("spec.leaderWorkerTemplate.size") && e.contains("team-a"), "{e}");
    let e = check(&request("CREATE", TENANT, LWS, &lws(Some("nope"), 2, "1", "1"), None)).await.unwrap_err();
    assert!(e.contains("queue \"nope\" does not exist"), "{e}");
}

#[tokio::test]
async fn a_set_stays_in_its_queue() {
    let old = lws(Some("team-a"), 2, "1", "1");
    let moved = lws(Some("open"), 2, "1", "1");
    let e = check(&request("UPDATE", TENANT, LWS, &moved, Some(&old))).await.unwrap_err();
    assert!(e.contains("cannot move from queue team-a to queue open"), "{e}");
    let left = lws(None, 2, "1", "1");
    assert!(check(&request("UPDATE", TENANT, LWS, &left, Some(&old))).await.is_err());
    let scaled = {
        let mut s = old.clone();
        s["spec"]["replicas"] = json!(5);
        s
    };
    assert_eq!(check(&request("UPDATE", TENANT, LWS, &scaled, Some(&old))).await, Ok(()));
}

fn lws_pod(name: &str, worker_index: &str, leader: Option<&str>) -> Value {
    let mut p = pod(
        name,
        "ml",
        json!({QUEUE: "team-a", "leaderworkerset.sigs.k8s.io/name": "serve",
        "leaderworkerset.sigs.k8s.io/worker-index": worker_index}),
    );
    let mut annotations = json!({"leaderworkerset.sigs.k8s.io/size": "4"});
    if let Some(l) = leader {
        annotations["leaderworkerset.sigs.k8s.io/leader-name"] = json!(l);
    }
    p["metadata"]["annotations"] = annotations;
    let sts = leader.unwrap_or("serve");
    p["metadata"]["ownerReferences"] =
        json!([{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": sts, "uid": "9", "controller": true}]);
    p
}

#[tokio::test]
async fn each_pod_joins_its_leaders_group_held_by_muster() {
    const STS: &str = "system:serviceaccount:kube-system:statefulset-controller";
    for (p, group, set) in [
        (lws_pod("serve-1", "0", None), "serve-1", "leader"),
        (lws_pod("serve-1-2", "2", Some("serve-1")), "serve-1", "worker"),
    ] {
        let out = patched(&p, &patch_of(&request("CREATE", STS, POD, &p, None), &WebhookConfig::default()));
        assert_eq!(out["metadata"]["labels"]["muster.dev/group"], json!(group));
        assert_eq!(out["metadata"]["labels"]["muster.dev/set"], json!(set), "the leader may differ from its workers");
        assert_eq!(out["metadata"]["labels"]["muster.dev/group-size"], json!("4"));
        assert_eq!(out["spec"]["schedulerName"], json!("muster"));
        assert_eq!(out["spec"]["schedulingGates"], json!([{"name": "muster.dev/admission"}]));
        assert_eq!(check(&request("CREATE", STS, POD, &out, None)).await, Ok(()));
        // Without the mutation, or naming another group, it is refused.
        assert!(check(&request("CREATE", STS, POD, &gated(p.clone()), None)).await.is_err());
        let mut forged = out.clone();
        forged["metadata"]["labels"]["muster.dev/group"] = json!("serve-0");
        let e = check(&request("CREATE", STS, POD, &forged, None)).await.unwrap_err();
        assert!(e.contains("in the group of its leader, \"serve-1\""), "{e}");
        // A worker cannot pass for the leader (nor the leader for a worker).
        let mut swapped = out.clone();
        swapped["metadata"]["labels"]["muster.dev/set"] = json!(if set == "leader" { "worker" } else { "leader" });
        let e = check(&request("CREATE", STS, POD, &swapped, None)).await.unwrap_err();
        assert!(
            e.contains(&format!("metadata.labels[muster.dev/set]: a pod of a LeaderWorkerSet is its group's {set}")),
            "{e}"
        );
    }
}

#[tokio::test]
async fn a_set_keeps_its_groups_in_one_domain_through_its_templates_not_exclusive_topology() {
    const EXCLUSIVE: &str = "leaderworkerset.sigs.k8s.io/exclusive-topology";
    // LWS would create a group's workers only once its leader is scheduled: never, under muster.
    let mut l = lws(Some("team-a"), 4, "1", "1");
    l["metadata"]["annotations"] = json!({EXCLUSIVE: "muster.dev/rack"});
    let e = check(&request("CREATE", TENANT, LWS, &l, None)).await.unwrap_err();
    assert!(
        e.contains(&format!("metadata.annotations[{EXCLUSIVE}]: LWS then creates a group's workers only once")),
        "{e}"
    );
    assert!(e.contains("muster.dev/required-topology: <level>"), "the fix is named: {e}");
    // The templates' topology annotation is muster's way (their pods then ask for one rack).
    let mut racked = lws(Some("team-a"), 4, "1", "1");
    for t in ["leaderTemplate", "workerTemplate"] {
        racked["spec"]["leaderWorkerTemplate"][t]["metadata"]["annotations"] =
            json!({"muster.dev/required-topology": "rack"});
    }
    let held = patched(&racked, &patch_of(&request("CREATE", TENANT, LWS, &racked, None), &WebhookConfig::default()));
    assert_eq!(check(&request("CREATE", TENANT, LWS, &held, None)).await, Ok(()));
}
