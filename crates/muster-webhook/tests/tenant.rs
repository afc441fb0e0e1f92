//! What a hostile tenant tries on the webhook: plain pods unlike their group, a queue label alone,
//! Group statuses and deletions, resizing a placed pod up.

mod common;

use common::*;

// ---- hostile tenants: plain pods unlike their group, queue labels alone, Group lifecycle -----

/// The Group the controller makes of a plain-pod group from its first pod (convert.rs
/// plain_group_spec): cpu in millicores, the rest in base units.
fn plain_group(name: &str, yaml: &str) -> Group {
    let spec: GroupSpec = serde_yaml_ng::from_str(&format!("queue: open\nmembers: {{min: 2}}\n{yaml}")).unwrap();
    let mut g = Group::new(name, spec);
    g.metadata.namespace = Some("ml".into());
    g
}

fn member(name: &str, cpu: &str) -> Value {
    let mut p = gated(pod(name, "ml", json!({"muster.dev/group": "g", "muster.dev/group-size": "2", QUEUE: "open"})));
    p["spec"]["containers"][0]["resources"]["requests"]["cpu"] = json!(cpu);
    p
}

#[tokio::test]
async fn a_plain_pod_must_ask_what_its_groups_members_ask() {
    let s = state().with_group(plain_group("g", "resources: {cpu: 10m, memory: 1073741824}"));
    let c = WebhookConfig::default();
    let create = |p: &Value| request("CREATE", TENANT, POD, p, None);
    assert_eq!(check_with(&create(&member("w-1", "10m")), &c, &s).await, Ok(()));
    assert_eq!(
        check_with(&create(&member("w-1", "7")), &c, &s).await.unwrap_err(),
        "spec.containers[*].resources: pod w-1 asks cpu 7, but the members of group g ask cpu 10m (the Group was \
         sized from its first pod); give every pod of a group the same requests, or use another group"
    );
    // Counted as the scheduler counts them: a native sidecar adds to the containers, and a
    // resource the Group does not name is a difference too.
    let mut sidecar = member("w-2", "10m");
    sidecar["spec"]["initContainers"] = json!([{"name": "proxy", "image": "envoy", "restartPolicy": "Always",
        "resources": {"requests": {"cpu": "2", "nvidia.com/gpu": "1"}}}]);
    assert_eq!(
        check_with(&create(&sidecar), &c, &s).await.unwrap_err(),
        "spec.containers[*].resources: pod w-2 asks cpu 2010m, nvidia.com/gpu 1, but the members of group g ask cpu \
         10m, nvidia.com/gpu 0 (the Group was sized from its first pod); give every pod of a group the same \
         requests, or use another group"
    );
    // Without a Group yet (the first pods) the controller decides; muster itself is not checked;
    // a Group being deleted is the end of an earlier group of that name.
    assert_eq!(check_with(&create(&member("w-1", "7")), &c, &state()).await, Ok(()));
    assert_eq!(check_with(&request("CREATE", MUSTER, POD, &member("w-1", "7"), None), &c, &s).await, Ok(()));
    let mut going = plain_group("g", "resources: {cpu: 10m, memory: 1073741824}");
    going.metadata.deletion_timestamp = Some(serde_json::from_value(json!("2026-03-04T05:00:00Z")).unwrap());
    assert_eq!(check_with(&create(&member("w-1", "7")), &c, &state().with_group(going)).await, Ok(()));
    // A pod of a Job is its Job's, not a plain group's.
    let owned = job_owned(member("train-0", "7"), "train");
    assert_eq!(check_with(&request("CREATE", JOB_CONTROLLER, POD, &owned, None), &c, &s).await, Ok(()));
}

#[tokio::test]
async fn amounts_in_canonical_forms_count_and_one_muster_cannot_count_is_refused() {
    // 1500e6 and 1500u are apimachinery's canonical forms of 1.5 GB and 1.5 millicores: the
    // controller sized the group from them as 1500000000 bytes and 2 millicores.
    let s = state().with_group(plain_group("g", "resources: {cpu: 2m, memory: 1500000000}"));
    let c = WebhookConfig::default();
    let create = |p: &Value| request("CREATE", TENANT, POD, p, None);
    let mut p = member("w-1", "1500u");
    p["spec"]["containers"][0]["resources"]["requests"]["memory"] = json!("1500e6");
    assert_eq!(check_with(&create(&p), &c, &s).await, Ok(()));
    p["spec"]["containers"][0]["resources"]["requests"]["memory"] = json!("2e9");
    let e = check_with(&create(&p), &c, &s).await.unwrap_err();
    assert!(e.contains("asks memory 1953125Ki, but the members of group g ask memory 1500000000"), "{e}");
    // Past muster's limit: refused naming the field, with or without a Group yet.
    p["spec"]["containers"][0]["resources"]["requests"]["memory"] = json!("2Ei");
    for s in [s, state()] {
        let e = check_with(&create(&p), &c, &s).await.unwrap_err();
        assert!(e.starts_with("spec.containers[0].resources.requests[memory]: \"2Ei\" is absurdly large"), "{e}");
    }
}

#[tokio::test]
async fn a_plain_pod_must_ask_for_the_nodes_its_groups_members_run_on() {
    let s = state().with_group(plain_group(
        "g",
        "resources: {cpu: 1000m, memory: 1073741824}\nnodeSelector: {zone: a}\n\
         affinity: [{matchExpressions: [{key: pool, operator: In, values: [batch]}]}]\n\
         tolerations: [{key: gpu, operator: Exists, effect: NoSchedule}]",
    ));
    let c = WebhookConfig::default();
    let alike = || {
        let mut p = member("w-1", "1");
        p["spec"]["nodeSelector"] = json!({"zone": "a"});
        p["spec"]["affinity"] = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
            {"nodeSelectorTerms": [{"matchExpressions": [{"key": "pool", "operator": "In", "values": ["batch"]}]}]}}});
        p["spec"]["tolerations"] = json!([{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]);
        p
    };
    let create = |p: &Value| request("CREATE", TENANT, POD, p, None);
    assert_eq!(check_with(&create(&alike()), &c, &s).await, Ok(()));
    let mut elsewhere = alike();
    elsewhere["spec"]["nodeSelector"] = json!({"zone": "b"});
    assert_eq!(
        check_with(&create(&elsewhere), &c, &s).await.unwrap_err(),
        "spec.nodeSelector: pod w-1 has {\"zone\":\"b\"}, but the members of group g have {\"zone\":\"a\"} (the Group \
         was sized from its first pod); give every pod of a group the same nodeSelector, or use another group"
    );
    let mut anywhere = alike();
    anywhere["spec"].as_object_mut().unwrap().remove("affinity");
    anywhere["spec"]["tolerations"] = json!([{"operator": "Exists"}]);
    assert_eq!(
        check_with(&create(&anywhere), &c, &s).await.unwrap_err(),
        "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution: pod w-1 has none, but the \
         members of group g have [{\"matchExpressions\":[{\"key\":\"pool\",\"operator\":\"In\",\"values\":[\"batch\"]}]}] \
         (the Group was sized from its first pod); give every pod of a group the same required node affinity, or \
         use another group; spec.tolerations: pod w-1 has [{\"operator\":\"Exists\"}], but the members of group g \
         have [{\"key\":\"gpu\",\"operator\":\"Exists\",\"effect\":\"NoSchedule\"}] (the Group was sized from its \
         first pod); give every pod of a group the same tolerations, or use another group"
    );
    // Tolerations as the apiserver adds them (tolerationSeconds, which the Group does not keep)
    // and in another order are alike.
    let mut defaulted = alike();
    defaulted["spec"]["tolerations"] = json!([
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
        {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]);
    let g = plain_group(
        "g",
        "resources: {cpu: 1000m, memory: 1073741824}\nnodeSelector: {zone: a}\n\
         affinity: [{matchExpressions: [{key: pool, operator: In, values: [batch]}]}]\n\
         tolerations: [{key: gpu, operator: Exists, effect: NoSchedule}, \
         {key: node.kubernetes.io/not-ready, operator: Exists, effect: NoExecute}]",
    );
    assert_eq!(check_with(&create(&defaulted), &c, &state().with_group(g)).await, Ok(()));
}

#[tokio::test]
async fn a_queue_label_without_a_group_is_refused_not_ignored() {
    let lone = pod("lone", "web", json!({QUEUE: "open"}));
    let message = "metadata.labels[muster.dev/queue]: pod lone has the queue label (muster.dev/queue=open) but no \
                   group, so it would skip the queue and be run by the default scheduler; add the label \
                   muster.dev/group: NAME (and muster.dev/group-size: N for a group of more than one pod), or remove \
                   the label muster.dev/queue";
    assert_eq!(check(&request("CREATE", TENANT, POD, &lone, None)).await.unwrap_err(), message);
    // With a group it is a plain-pod group; a Job's pods carry the queue label from its template.
    let grouped = gated(pod("lone", "web", json!({QUEUE: "open", "muster.dev/group": "lone"})));
    assert_eq!(check(&request("CREATE", TENANT, POD, &grouped, None)).await, Ok(()));
    let owned = job_owned(pod("train-0", "ml", json!({QUEUE: "team-a"})), "train");
    assert_eq!(check(&request("CREATE", JOB_CONTROLLER, POD, &owned, None)).await, Ok(()));
    // scheduler-plugins' label makes a group only when muster accepts it.
    let mut alias = pod("lone", "web", json!({QUEUE: "open", POD_GROUP_ALIAS: "pg"}));
    alias["spec"]["schedulerName"] = json!("muster");
    assert_eq!(check(&request("CREATE", TENANT, POD, &alias, None)).await.unwrap_err(), message);
    let on = WebhookConfig { accept_pod_group_alias: true, ..WebhookConfig::default() };
    let s = state().with_pod_group(pod_group("pg", json!({"minMember": 1})));
    alias["metadata"]["labels"]["muster.dev/group-size"] = json!("1");
    assert_eq!(check_with(&request("CREATE", TENANT, POD, &alias, None), &on, &s).await, Ok(()));
    // Such pods go to the validating webhook: a pods CREATE hook selects the queue label.
    let v = muster_webhook::registration::validating_configuration(
        &muster_webhook::registration::Endpoint::in_cluster(),
        None,
        false,
    );
    let hooks = v.webhooks.unwrap();
    assert!(hooks.iter().any(|h| {
        let rules = h.rules.clone().unwrap_or_default();
        let pods = rules.iter().any(|r| {
            r.resources.iter().flatten().any(|x| x == "pods") && r.operations.iter().flatten().any(|o| o == "CREATE")
        });
        let exprs = h.object_selector.as_ref().and_then(|s| s.match_expressions.clone()).unwrap_or_default();
        pods && h.namespace_selector.is_none()
            && exprs.len() == 1
            && exprs[0].key == QUEUE
            && exprs[0].operator == "Exists"
    }));
}

/// A request on a Group's status subresource, or a DELETE (no object, the old one).
fn group_request(op: &str, user: &str, g: &Value, sub: Option<&str>) -> AdmissionRequest<DynamicObject> {
    let delete = op == "DELETE";
    let mut r = json!({
        "uid": "0b1c", "kind": {"group": "muster.dev", "version": "v1alpha1", "kind": "Group"},
        "resource": {"group": "muster.dev", "version": "v1alpha1", "resource": "groups"},
        "name": g["metadata"]["name"], "namespace": g["metadata"]["namespace"], "operation": op,
        "userInfo": {"username": user, "groups": ["system:authenticated"]},
        "object": if delete { Value::Null } else { g.clone() }, "oldObject": g, "dryRun": false,
    });
    if let Some(sub) = sub {
        r["subResource"] = json!(sub);
    }
    let review = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": r});
    serde_json::from_value::<AdmissionReview<DynamicObject>>(review).unwrap().try_into().unwrap()
}

#[tokio::test]
async fn a_groups_status_and_deletion_are_muster_s() {
    let g = serde_json::to_value(group_object("ml", "train", "Queued")).unwrap();
    let mut done = g.clone();
    done["status"] = json!({"phase": "Succeeded", "allocation": {"members": [{"node": "node-1"}]}});
    let status = group_request("UPDATE", TENANT, &done, Some("status"));
    assert_eq!(
        check(&status).await.unwrap_err(),
        "status: Group ml/train: a Group's status and lifecycle are muster's (its phase and allocation record what \
         muster decided); delete or suspend the Job (or delete the pods) instead, and muster updates the Group"
    );
    assert_eq!(check(&group_request("UPDATE", MUSTER, &done, Some("status"))).await, Ok(()));
    let delete = "Group ml/train: a Group's status and lifecycle are muster's (deleting it would drop what muster \
                  decided while the job's pods may run); delete or suspend the Job (or delete the pods) instead, and \
                  muster deletes the Group once the job is gone";
    assert_eq!(check(&group_request("DELETE", TENANT, &g, None)).await.unwrap_err(), delete);
    for user in [
        MUSTER,
        "system:serviceaccount:kube-system:generic-garbage-collector",
        "system:serviceaccount:kube-system:namespace-controller",
    ] {
        assert_eq!(check(&group_request("DELETE", user, &g, None)).await, Ok(()), "{user}");
    }
    // Another of kube-system's controllers is not one of them.
    let other = group_request("DELETE", "system:serviceaccount:kube-system:job-controller", &g, None);
    assert_eq!(check(&other).await.unwrap_err(), delete);
    // Deleting other kinds, and the status of other kinds, is not muster's business.
    let p = pod("x", "ml", json!({"app": "x"}));
    let mut r = request("DELETE", TENANT, POD, &p, Some(&p));
    r.object = None;
    assert_eq!(check(&r).await, Ok(()));
}

/// A `pods/resize` request (in-place vertical scaling) from `old` to `new`.
fn resize_request(user: &str, new: &Value, old: &Value) -> AdmissionRequest<DynamicObject> {
    let mut r = request("UPDATE", user, POD, new, Some(old));
    r.sub_resource = Some("resize".into());
    r
}

#[tokio::test]
async fn a_placed_pod_may_be_resized_down_but_never_up() {
    let mut placed = gated(pod("w-0", "ml", json!({"muster.dev/group": "g"})));
    placed["spec"]["schedulingGates"] = json!([]);
    placed["spec"]["nodeName"] = json!("node-1");
    let mut up = placed.clone();
    up["spec"]["containers"][0]["resources"]["requests"]["cpu"] = json!("6");
    assert_eq!(
        check(&resize_request(TENANT, &up, &placed)).await.unwrap_err(),
        "spec.containers[*].resources: pod w-0 was placed by muster for what it asked then, and muster gave the rest \
         of its node to other groups; a resize to cpu 6 (placed for 1) could over-commit the node; resize it down \
         only, or suspend the job and change its requests there"
    );
    let mut down = placed.clone();
    down["spec"]["containers"][0]["resources"]["requests"]["cpu"] = json!("500m");
    assert_eq!(check(&resize_request(TENANT, &down, &placed)).await, Ok(()));
    // Other schedulers' pods are theirs to resize.
    let (mut theirs, mut bigger) = (pod("web", "ml", json!({})), pod("web", "ml", json!({})));
    bigger["spec"]["containers"][0]["resources"]["requests"]["cpu"] = json!("6");
    theirs["spec"]["nodeName"] = json!("node-1");
    assert_eq!(check(&resize_request(TENANT, &bigger, &theirs)).await, Ok(()));
}
