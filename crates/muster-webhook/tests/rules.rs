//! The admission rules on AdmissionRequest JSON, with cluster state from memory: every rule's
//! accept and refuse cases, with the exact messages.

mod common;

use common::*;
use k8s_openapi::api::scheduling::v1alpha3::CompositePodGroup;

// ---- mutating ----------------------------------------------------------------------------

#[test]
fn a_queued_job_is_created_suspended_with_muster_as_scheduler_and_nothing_else() {
    for indexed in [false, true] {
        let mut j = job("train", Some("team-a"), 4, "1");
        if indexed {
            j["spec"]["completionMode"] = json!("Indexed");
        }
        let p = patch_of(&request("CREATE", TENANT, JOB, &j, None), &WebhookConfig::default());
        assert_eq!(
            serde_json::to_value(&p).unwrap(),
            json!([{"op": "add", "path": "/spec/suspend", "value": true},
                   {"op": "add", "path": "/spec/template/spec/schedulerName", "value": "muster"}])
        );
        assert_eq!(patched(&j, &p), held(j.clone()));
    }
}

#[tokio::test]
async fn the_mutating_webhook_refuses_a_queued_job_create_as_the_validating_one_would() {
    let c = WebhookConfig::default();
    let mut node_named = job("pinned", Some("team-a"), 1, "1");
    node_named["spec"]["template"]["spec"]["nodeName"] = json!("worker-0");
    let mut forged = job("forged", Some("team-a"), 1, "1");
    forged["spec"]["template"]["metadata"]["labels"]["muster.dev/member"] = json!("0");
    let mut other_ns = job("elsewhere", Some("team-a"), 1, "1");
    other_ns["metadata"]["namespace"] = json!("web");
    let cases = [
        ("an unknown queue", job("u", Some("nope"), 1, "1")),
        ("a group larger than the quota", job("big", Some("team-a"), 100, "1")),
        ("a preset node name", node_named),
        ("a reserved template label", forged),
        ("a namespace the queue does not admit", other_ns),
    ];
    for (what, j) in cases {
        // One webhook call refuses what the validating webhook (which the apiserver now skips
        // for such a create) would refuse, with the same message.
        let refused = patch_with(&request("CREATE", TENANT, JOB, &j, None), &c, &state()).unwrap_err();
        let would = check(&request("CREATE", TENANT, JOB, &held(j.clone()), None)).await.unwrap_err();
        assert_eq!(refused, would, "{what}");
    }
    let ok = job("fine", Some("team-a"), 2, "1");
    assert!(patch_with(&request("CREATE", TENANT, JOB, &ok, None), &c, &state()).is_ok());
    assert!(patch_with(&request("CREATE", MUSTER, JOB, &job("u", Some("nope"), 1, "1"), None), &c, &state()).is_ok());
}

#[test]
fn a_job_without_queue_or_already_held_is_not_patched() {
    let c = WebhookConfig::default();
    assert!(patch_of(&request("CREATE", TENANT, JOB, &job("plain", None, 4, "1"), None), &c).0.is_empty());
    let j = held(job("train", Some("team-a"), 4, "1"));
    assert!(patch_of(&request("CREATE", TENANT, JOB, &j, None), &c).0.is_empty());
}

#[test]
fn a_user_unsuspending_a_queued_job_gets_a_resume_request_instead() {
    let c = WebhookConfig::default();
    let old = held(job("train", Some("team-a"), 4, "1"));
    let mut new = old.clone();
    new["spec"]["suspend"] = json!(false);
    let p = patch_of(&request("UPDATE", TENANT, JOB, &new, Some(&old)), &c);
    let after = patched(&new, &p);
    assert_eq!(after["spec"]["suspend"], json!(true), "the queue cannot be bypassed");
    assert_eq!(after["metadata"]["annotations"][RESUME_REQUESTED], json!("2026-03-04T05:06:07Z"));
    // With annotations present, only the key is added.
    new["metadata"]["annotations"] = json!({"note": "x"});
    let p = patch_of(&request("UPDATE", TENANT, JOB, &new, Some(&old)), &c);
    assert_eq!(
        serde_json::to_value(&p).unwrap()[1],
        json!({"op": "add", "path": "/metadata/annotations/muster.dev~1resume-requested", "value": "2026-03-04T05:06:07Z"})
    );
    // muster itself resumes jobs; an unrelated job is left alone.
    assert!(patch_of(&request("UPDATE", MUSTER, JOB, &new, Some(&old)), &c).0.is_empty());
    // A user suspending a running job stays suspended and says so, for muster to release it.
    let after = patched(&old, &patch_of(&request("UPDATE", TENANT, JOB, &old, Some(&new)), &c));
    assert_eq!(after["spec"]["suspend"], json!(true));
    assert_eq!(after["metadata"]["annotations"][SUSPEND_REQUESTED], json!("2026-03-04T05:06:07Z"));
    assert!(patch_of(&request("UPDATE", MUSTER, JOB, &old, Some(&new)), &c).0.is_empty(), "muster's own");
    let (mut plain_new, plain_old) = (job("p", None, 1, "1"), held(job("p", None, 1, "1")));
    plain_new["spec"]["suspend"] = json!(false);
    assert!(patch_of(&request("UPDATE", TENANT, JOB, &plain_new, Some(&plain_old)), &c).0.is_empty());
}

#[test]
fn a_plain_group_pod_is_gated_and_given_to_muster() {
    let c = WebhookConfig::default();
    let p = pod("w-0", "ml", json!({"muster.dev/group": "w", "muster.dev/group-size": "2", QUEUE: "team-a"}));
    let patch = patch_of(&request("CREATE", TENANT, POD, &p, None), &c);
    assert_eq!(patched(&p, &patch), gated(p.clone()));
    // Existing gates are kept and muster's is appended.
    let mut g = p.clone();
    g["spec"]["schedulingGates"] = json!([{"name": "other"}]);
    let after = patched(&g, &patch_of(&request("CREATE", TENANT, POD, &g, None), &c));
    assert_eq!(after["spec"]["schedulingGates"], json!([{"name": "other"}, {"name": "muster.dev/admission"}]));
    // Pods of a Job, and pods without a group, need nothing.
    let owned = job_owned(p.clone(), "train");
    assert!(patch_of(&request("CREATE", JOB_CONTROLLER, POD, &owned, None), &c).0.is_empty());
    let plain = pod("web", "web", json!({"app": "web"}));
    assert!(patch_of(&request("CREATE", TENANT, POD, &plain, None), &c).0.is_empty());
    // A preset nodeName gets no gate (the validating rule explains instead).
    let mut pinned = p.clone();
    pinned["spec"]["nodeName"] = json!("node-1");
    let after = patched(&pinned, &patch_of(&request("CREATE", TENANT, POD, &pinned, None), &c));
    assert!(after["spec"].get("schedulingGates").is_none());
}

#[test]
fn pod_group_alias_pods_join_muster_only_when_accepted() {
    let p = pod("a-0", "ml", json!({POD_GROUP_ALIAS: "a"}));
    let off = WebhookConfig::default();
    assert!(patch_of(&request("CREATE", TENANT, POD, &p, None), &off).0.is_empty());
    let on = WebhookConfig { accept_pod_group_alias: true, alias_queue: "open".into(), ..WebhookConfig::default() };
    let after = patched(&p, &patch_of(&request("CREATE", TENANT, POD, &p, None), &on));
    assert_eq!(after["metadata"]["labels"]["muster.dev/group"], json!("a"));
    assert_eq!(after["metadata"]["labels"][QUEUE], json!("open"));
    assert_eq!(after["spec"]["schedulerName"], json!("muster"));
    let mut own_queue = p.clone();
    own_queue["metadata"]["labels"][QUEUE] = json!("team-a");
    let after = patched(&own_queue, &patch_of(&request("CREATE", TENANT, POD, &own_queue, None), &on));
    assert_eq!(after["metadata"]["labels"][QUEUE], json!("team-a"), "an alias pod keeps its own queue");
}

#[tokio::test]
async fn alias_pods_take_their_size_from_the_pod_group_and_need_one() {
    let on = WebhookConfig { accept_pod_group_alias: true, alias_queue: "open".into(), ..WebhookConfig::default() };
    let s = state()
        .with_pod_group(pod_group("ring", json!({"minMember": 3, "scheduleTimeoutSeconds": 60})))
        .with_pod_group(pod_group("empty", json!({})));
    let create = |p: &Value| request("CREATE", TENANT, POD, p, None);
    // The PodGroup's minMember becomes the group size; the mutated pod passes validation.
    let p = pod("ring-0", "ml", json!({POD_GROUP_ALIAS: "ring"}));
    let after = patched(&p, &patch_with(&create(&p), &on, &s).unwrap());
    assert_eq!(after["metadata"]["labels"]["muster.dev/group-size"], json!("3"));
    assert_eq!(check_with(&create(&after), &on, &s).await, Ok(()));
    // Without the alias accepted, nothing is read.
    assert!(patch_with(&create(&p), &WebhookConfig::default(), &s).unwrap().0.is_empty());
    // No PodGroup (or no CRD): no size is invented, and the pod is refused with the fix.
    let lost = pod("lost-0", "ml", json!({POD_GROUP_ALIAS: "lost"}));
    let after = patched(&lost, &patch_with(&create(&lost), &on, &s).unwrap());
    assert!(after["metadata"]["labels"].get("muster.dev/group-size").is_none());
    assert_eq!(
        check_with(&create(&after), &on, &s).await.unwrap_err(),
        "metadata.labels[scheduling.x-k8s.io/pod-group]: PodGroup ml/lost does not exist (or the PodGroup CRD, \
         scheduling.x-k8s.io/v1alpha1, is not installed), so the group has no size; create the PodGroup with \
         spec.minMember before its pods, or give the pods the label muster.dev/group-size"
    );
    // ...unless the pod says its size itself.
    let mut sized = after.clone();
    sized["metadata"]["labels"]["muster.dev/group-size"] = json!("2");
    assert_eq!(check_with(&create(&sized), &on, &s).await, Ok(()));
    // A size of its own must agree with the PodGroup; the webhook keeps it and refuses.
    let mut other = p.clone();
    other["metadata"]["labels"]["muster.dev/group-size"] = json!("5");
    let after = patched(&other, &patch_with(&create(&other), &on, &s).unwrap());
    assert_eq!(after["metadata"]["labels"]["muster.dev/group-size"], json!("5"));
    assert_eq!(
        check_with(&create(&after), &on, &s).await.unwrap_err(),
        "metadata.labels[muster.dev/group-size]: \"5\" disagrees with spec.minMember 3 of PodGroup ml/ring; \
         remove the label (muster takes the size from the PodGroup) or set it to \"3\""
    );
    // A pod that skipped the mutation (no size) next to an existing PodGroup.
    let mut bare = gated(p.clone());
    bare["metadata"]["labels"]["muster.dev/group"] = json!("ring");
    bare["metadata"]["labels"][QUEUE] = json!("open");
    assert_eq!(
        check_with(&create(&bare), &on, &s).await.unwrap_err(),
        "metadata.labels[muster.dev/group-size]: the label is missing, and the pod's group has spec.minMember 3 of \
         PodGroup ml/ring; set it to \"3\" (muster's mutating webhook does so when it is registered for the pod)"
    );
    // A PodGroup without minMember is named in the refusal.
    let e = pod("e-0", "ml", json!({POD_GROUP_ALIAS: "empty"}));
    let after = patched(&e, &patch_with(&create(&e), &on, &s).unwrap());
    assert_eq!(
        check_with(&create(&after), &on, &s).await.unwrap_err(),
        "metadata.labels[scheduling.x-k8s.io/pod-group]: PodGroup ml/empty has no spec.minMember; set it to the \
         number of pods in the group"
    );
    // The PodGroup's size counts against the queue's quota like the label's (team-a: 8 cpu).
    let s = s.with_pod_group(pod_group("wide", json!({"minMember": 9})));
    let mut w = pod("wide-0", "ml", json!({POD_GROUP_ALIAS: "wide", QUEUE: "team-a"}));
    w = patched(&w, &patch_with(&create(&w), &on, &s).unwrap());
    let err = check_with(&create(&w), &on, &s).await.unwrap_err();
    assert!(err.starts_with("metadata.labels[muster.dev/group-size]: 9 pods x cpu 1 = cpu 9"), "{err}");
    // A pod with its own muster.dev/group is not an alias pod: no PodGroup is read.
    let mut own = pod("x-0", "ml", json!({POD_GROUP_ALIAS: "lost", "muster.dev/group": "x", QUEUE: "open"}));
    own = patched(&own, &patch_with(&create(&own), &on, &s).unwrap());
    assert_eq!(check_with(&create(&own), &on, &s).await, Ok(()));
}

// ---- validating: placement ---------------------------------------------------------------

#[tokio::test]
async fn a_preset_node_name_is_refused_in_managed_namespaces_except_for_muster_and_nodes() {
    let mut p = pod("pinned", "ml", json!({"app": "x"}));
    p["spec"]["nodeName"] = json!("node-1");
    assert_eq!(
        check(&request("CREATE", TENANT, POD, &p, None)).await.unwrap_err(),
        "spec.nodeName: pods in namespace ml cannot choose their node (node-1): the namespace is labelled \
         muster.dev/managed=true, so muster places its pods; remove spec.nodeName (and give the pod the labels \
         muster.dev/queue and muster.dev/group to have muster place it)"
    );
    // With the queue label already, the message says what is missing (and the label alone is
    // refused too: it queues nothing).
    let mut queued = p.clone();
    queued["metadata"]["labels"][QUEUE] = json!("team-a");
    assert_eq!(
        check(&request("CREATE", TENANT, POD, &queued, None)).await.unwrap_err(),
        "spec.nodeName: pods in namespace ml cannot choose their node (node-1): the namespace is labelled \
         muster.dev/managed=true, so muster places its pods; remove spec.nodeName (it has muster.dev/queue=team-a \
         already; muster places it once it also has the label muster.dev/group: NAME); \
         metadata.labels[muster.dev/queue]: pod pinned has the queue label (muster.dev/queue=team-a) but no group, \
         so it would skip the queue and be run by the default scheduler; add the label muster.dev/group: NAME (and \
         muster.dev/group-size: N for a group of more than one pod), or remove the label muster.dev/queue"
    );
    assert_eq!(check(&request("CREATE", MUSTER, POD, &p, None)).await, Ok(()));
    assert_eq!(check(&request("CREATE", "system:node:node-1", POD, &p, None)).await, Ok(()), "mirror pods");
    let mut elsewhere = p.clone();
    elsewhere["metadata"]["namespace"] = json!("web");
    assert_eq!(check(&request("CREATE", TENANT, POD, &elsewhere, None)).await, Ok(()), "unmanaged namespace");
    // A group pod may not pin a node anywhere: its group is placed at once.
    let mut member = pod("w-0", "web", json!({"muster.dev/group": "w"}));
    member["spec"]["schedulerName"] = json!("muster");
    member["spec"]["nodeName"] = json!("node-1");
    assert_eq!(
        check(&request("CREATE", TENANT, POD, &member, None)).await.unwrap_err(),
        "spec.nodeName: a pod of group w cannot choose its node (node-1): muster places every member of the group \
         at once; remove spec.nodeName"
    );
}

#[tokio::test]
async fn a_plain_pod_cannot_split_its_set_into_replicas() {
    let mut p = pod("w-0", "web", json!({"muster.dev/group": "w", "muster.dev/set": "workers"}));
    p["spec"]["schedulerName"] = json!("muster");
    p["metadata"]["annotations"] = json!({"muster.dev/replica-topology": "rack"});
    assert_eq!(
        check(&request("CREATE", TENANT, POD, &p, None)).await.unwrap_err(),
        "metadata.annotations[muster.dev/replica-topology]: a plain pod's set has no replicas to keep apart; use \
         muster.dev/set-topology to keep the set within one domain, or muster.dev/subgroup to keep sets together"
    );
    p["metadata"]["annotations"] = json!({"muster.dev/set-topology": "rack"});
    assert_eq!(check(&request("CREATE", TENANT, POD, &p, None)).await, Ok(()));
}

#[tokio::test]
async fn a_tenant_cannot_forge_a_member_of_a_job() {
    let mut forged = job_owned(pod("train-x", "ml", json!({"batch.kubernetes.io/job-name": "train"})), "train");
    forged["spec"]["schedulerName"] = json!("muster");
    assert_eq!(
        check(&request("CREATE", TENANT, POD, &forged, None)).await.unwrap_err(),
        "metadata.ownerReferences: only the Job controller creates the pods of Job train, and this pod claims to be \
         one (a controller reference to the Job, with label batch.kubernetes.io/job-name and schedulerName muster); \
         remove the ownerReference and those fields, or create a Job of your own"
    );
    assert_eq!(check(&request("CREATE", JOB_CONTROLLER, POD, &forged, None)).await, Ok(()));
    assert_eq!(check(&request("CREATE", MUSTER, POD, &forged, None)).await, Ok(()));
    // An owner reference alone claims nothing muster acts on.
    let mut web = job_owned(pod("x", "web", json!({"app": "x"})), "train");
    web["metadata"]["namespace"] = json!("web");
    assert_eq!(check(&request("CREATE", TENANT, POD, &web, None)).await, Ok(()));
}

// ---- validating: reserved keys -------------------------------------------------------------

#[tokio::test]
async fn reserved_keys_cannot_be_added_changed_or_removed_by_tenants() {
    let mut j = held(job("train", Some("team-a"), 2, "1"));
    j["metadata"]["labels"]["muster.dev/node"] = json!("node-1");
    assert_eq!(
        check(&request("CREATE", TENANT, JOB, &j, None)).await.unwrap_err(),
        "metadata.labels[muster.dev/node]: the key is reserved for muster: only muster may set it; remove it (the \
         muster.dev/ keys you may set are muster.dev/queue, muster.dev/group, muster.dev/group-size, \
         muster.dev/group-min, muster.dev/set, muster.dev/set-size, muster.dev/set-min, muster.dev/set-topology, muster.dev/replica-topology, muster.dev/subgroup, muster.dev/subgroup-topology, muster.dev/min-members, muster.dev/duration-seconds, \
         muster.dev/required-topology, muster.dev/preferred-topology, muster.dev/shrinkable)"
    );
    assert_eq!(check(&request("CREATE", MUSTER, JOB, &j, None)).await, Ok(()));

    let mut old = held(job("train", Some("team-a"), 2, "1"));
    old["metadata"]["annotations"] = json!({"muster.dev/admitted": "yes"});
    let mut changed = old.clone();
    changed["metadata"]["annotations"]["muster.dev/admitted"] = json!("no");
    assert_eq!(
        check(&request("UPDATE", TENANT, JOB, &changed, Some(&old))).await.unwrap_err(),
        "metadata.annotations[muster.dev/admitted]: the key is reserved for muster: only muster may change it; keep \
         the value \"yes\" (not \"no\")"
    );
    let mut removed = old.clone();
    removed["metadata"]["annotations"] = json!({});
    assert_eq!(
        check(&request("UPDATE", TENANT, JOB, &removed, Some(&old))).await.unwrap_err(),
        "metadata.annotations[muster.dev/admitted]: the key is reserved for muster: only muster may remove it; keep \
         it as it was (\"yes\")"
    );
    // Keys muster set earlier may stay as they are while the user changes something else.
    let mut other = old.clone();
    other["metadata"]["labels"]["team"] = json!("a");
    assert_eq!(check(&request("UPDATE", TENANT, JOB, &other, Some(&old))).await, Ok(()));
    // User keys are the user's.
    let mut user_keys = held(job("train", Some("team-a"), 2, "1"));
    user_keys["metadata"]["annotations"] = json!({"muster.dev/duration-seconds": "600", "muster.dev/min-members": "1",
        "muster.dev/preferred-topology": "rack"});
    assert_eq!(check(&request("CREATE", TENANT, JOB, &user_keys, None)).await, Ok(()));
}

#[tokio::test]
async fn the_pod_template_cannot_carry_reserved_keys_but_job_pods_may() {
    let mut j = held(job("train", Some("team-a"), 2, "1"));
    j["spec"]["template"]["metadata"]["annotations"] = json!({"muster.dev/node": "n1"});
    assert_eq!(
        check(&request("CREATE", TENANT, JOB, &j, None)).await.unwrap_err(),
        "spec.template.metadata.annotations[muster.dev/node]: the key is reserved for muster: only muster may set \
         it; remove it (the muster.dev/ keys you may set are muster.dev/queue, muster.dev/group, \
         muster.dev/group-size, muster.dev/group-min, muster.dev/set, muster.dev/set-size, muster.dev/set-min, muster.dev/set-topology, muster.dev/replica-topology, muster.dev/subgroup, muster.dev/subgroup-topology, muster.dev/min-members, muster.dev/duration-seconds, \
         muster.dev/required-topology, muster.dev/preferred-topology, muster.dev/shrinkable)"
    );
    // The Job controller copies a template muster may have annotated.
    let mut member = job_owned(pod("train-0", "ml", json!({"batch.kubernetes.io/job-name": "train"})), "train");
    member["metadata"]["annotations"] = json!({"muster.dev/node": "n1"});
    member["spec"]["schedulerName"] = json!("muster");
    assert_eq!(check(&request("CREATE", JOB_CONTROLLER, POD, &member, None)).await, Ok(()));
    let mut tenant_pod = pod("x", "web", json!({"muster.dev/placed": "true"}));
    tenant_pod["metadata"]["namespace"] = json!("web");
    assert!(
        check(&request("CREATE", TENANT, POD, &tenant_pod, None))
            .await
            .unwrap_err()
            .starts_with("metadata.labels[muster.dev/placed]: the key is reserved for muster: only muster may set it")
    );
    // Pod updates: nobody but muster, not even the Job controller, touches reserved keys.
    let mut updated = member.clone();
    updated["metadata"]["annotations"] = json!({});
    assert!(check(&request("UPDATE", JOB_CONTROLLER, POD, &updated, Some(&member))).await.is_err());
    assert_eq!(check(&request("UPDATE", MUSTER, POD, &updated, Some(&member))).await, Ok(()));
}

#[tokio::test]
async fn the_resume_request_set_by_the_mutation_passes_but_not_from_a_running_job() {
    let old = held(job("train", Some("team-a"), 2, "1"));
    let mut new = old.clone();
    new["metadata"]["annotations"] = json!({RESUME_REQUESTED: "2026-03-04T05:06:07Z"});
    assert_eq!(check(&request("UPDATE", TENANT, JOB, &new, Some(&old))).await, Ok(()));
    // On a running job it would mean something the user did not ask for.
    let (mut running_old, mut running_new) = (old.clone(), new.clone());
    running_old["spec"]["suspend"] = json!(false);
    running_new["spec"]["suspend"] = json!(false);
    assert!(
        check(&request("UPDATE", TENANT, JOB, &running_new, Some(&running_old)))
            .await
            .unwrap_err()
            .starts_with("metadata.annotations[muster.dev/resume-requested]: the key is reserved for muster")
    );
    // Not a time, or not now: not what the mutation writes.
    for v in ["now please", "2020-01-01T00:00:00Z"] {
        new["metadata"]["annotations"][RESUME_REQUESTED] = json!(v);
        assert!(check(&request("UPDATE", TENANT, JOB, &new, Some(&old))).await.is_err(), "{v}");
    }
}

#[tokio::test]
async fn the_suspend_request_passes_only_with_a_suspension() {
    let mut running = held(job("train", Some("team-a"), 2, "1"));
    running["spec"]["suspend"] = json!(false);
    let mut suspended = held(job("train", Some("team-a"), 2, "1"));
    suspended["metadata"]["annotations"] = json!({SUSPEND_REQUESTED: "2026-03-04T05:06:07Z"});
    assert_eq!(check(&request("UPDATE", TENANT, JOB, &suspended, Some(&running))).await, Ok(()));
    // Claimed on a job that stays running (or was already held): refused.
    let mut forged = running.clone();
    forged["metadata"]["annotations"] = json!({SUSPEND_REQUESTED: "2026-03-04T05:06:07Z"});
    let e = check(&request("UPDATE", TENANT, JOB, &forged, Some(&running))).await.unwrap_err();
    assert!(e.starts_with("metadata.annotations[muster.dev/suspend-requested]: the key is reserved for muster"), "{e}");
    let held_before = held(job("train", Some("team-a"), 2, "1"));
    assert!(check(&request("UPDATE", TENANT, JOB, &suspended, Some(&held_before))).await.is_err());
}

// ---- validating: queues ------------------------------------------------------------------

#[tokio::test]
async fn a_job_cannot_leave_change_or_join_a_queue_after_creation() {
    let old = held(job("train", Some("team-a"), 2, "1"));
    let mut gone = old.clone();
    gone["metadata"]["labels"] = json!({});
    assert_eq!(
        check(&request("UPDATE", TENANT, JOB, &gone, Some(&old))).await.unwrap_err(),
        "metadata.labels[muster.dev/queue]: a Job cannot leave its queue; put back muster.dev/queue=team-a (or \
         delete the Job)"
    );
    let mut moved = old.clone();
    moved["metadata"]["labels"][QUEUE] = json!("open");
    assert_eq!(
        check(&request("UPDATE", TENANT, JOB, &moved, Some(&old))).await.unwrap_err(),
        "metadata.labels[muster.dev/queue]: a Job cannot move from queue team-a to queue open; keep \
         muster.dev/queue=team-a, or delete the Job and create it again with muster.dev/queue=open"
    );
    assert_eq!(
        check(&request("UPDATE", TENANT, JOB, &old, Some(&gone))).await.unwrap_err(),
        "metadata.labels[muster.dev/queue]: a Job joins a queue when it is created; delete the Job and create it \
         again with muster.dev/queue=team-a"
    );
    assert_eq!(check(&request("UPDATE", MUSTER, JOB, &gone, Some(&old))).await, Ok(()));
}

#[tokio::test]
async fn the_queue_must_exist_admit_the_namespace_and_be_valid() {
    let j = held(job("train", Some("nope"), 2, "1"));
    assert_eq!(
        check(&request("CREATE", TENANT, JOB, &j, None)).await.unwrap_err(),
        "metadata.labels[muster.dev/queue]: queue \"nope\" does not exist; set the label to an existing queue \
         (kubectl get queues) or ask an admin to create Queue nope"
    );
    let mut web = held(job("train", Some("team-a"), 2, "1"));
    web["metadata"]["namespace"] = json!("web");
    assert_eq!(
        check(&request("CREATE", TENANT, JOB, &web, None)).await.unwrap_err(),
        "metadata.labels[muster.dev/queue]: queue team-a does not take work from namespace web (see its \
         spec.namespaceSelector); use a queue that admits web, or ask an admin to add web to the namespaceSelector \
         of queue team-a"
    );
    let broken = held(job("train", Some("broken"), 2, "1"));
    assert!(check(&request("CREATE", TENANT, JOB, &broken, None)).await.unwrap_err().starts_with(
        "metadata.labels[muster.dev/queue]: queue broken is misconfigured (Queue/broken: spec.quotas.gpu.nominal"
    ));
    assert_eq!(check(&request("CREATE", TENANT, JOB, &held(job("t", Some("team-a"), 2, "1")), None)).await, Ok(()));
    assert_eq!(check(&request("CREATE", TENANT, JOB, &held(job("t", Some("open"), 2, "1")), None)).await, Ok(()));
    // The same checks hold for plain pods.
    let p = gated(pod("w-0", "web", json!({"muster.dev/group": "w", QUEUE: "team-a"})));
    assert!(check(&request("CREATE", TENANT, POD, &p, None)).await.unwrap_err().contains("does not take work"));
}

#[tokio::test]
async fn a_queued_job_must_be_held_back() {
    let j = job("train", Some("team-a"), 2, "1");
    assert_eq!(
        check(&request("CREATE", TENANT, JOB, &j, None)).await.unwrap_err(),
        "spec.suspend: a Job in queue team-a must be created suspended, so that muster starts it when the whole \
         group fits; remove spec.suspend: false (muster's mutating webhook sets it to true); \
         spec.template.spec.schedulerName: the pods of a Job in queue team-a are placed by muster; remove \
         schedulerName (muster's mutating webhook sets it to muster)"
    );
}

// ---- validating: sizes -------------------------------------------------------------------

#[tokio::test]
async fn a_group_that_can_never_fit_its_queue_is_refused() {
    let j = held(job("big", Some("team-a"), 5, "2"));
    assert_eq!(
        check(&request("CREATE", TENANT, JOB, &j, None)).await.unwrap_err(),
        "spec.parallelism: 5 pods x cpu 2 = cpu 10, but queue team-a allows at most cpu 8 (nominal 8; no cohort to \
         borrow from), so the group could never start; lower spec.parallelism or the pods' resource requests, or use \
         a queue with a larger quota"
    );
    assert_eq!(check(&request("CREATE", TENANT, JOB, &held(job("ok", Some("team-a"), 4, "2")), None)).await, Ok(()));
    // An elastic job that can start with 4 can fit.
    let mut elastic = j.clone();
    elastic["metadata"]["annotations"] = json!({"muster.dev/min-members": "4"});
    assert_eq!(check(&request("CREATE", TENANT, JOB, &elastic, None)).await, Ok(()));
    elastic["metadata"]["annotations"] = json!({"muster.dev/min-members": "5"});
    assert!(check(&request("CREATE", TENANT, JOB, &elastic, None)).await.unwrap_err().starts_with(
        "metadata.annotations[muster.dev/min-members]: 5 pods x cpu 2 = cpu 10, but queue team-a allows at most cpu 8"
    ));
    // Plain pods: group-size (or group-min) members.
    let p = gated(pod("w-0", "ml", json!({"muster.dev/group": "w", "muster.dev/group-size": "9", QUEUE: "team-a"})));
    assert_eq!(
        check(&request("CREATE", TENANT, POD, &p, None)).await.unwrap_err(),
        "metadata.labels[muster.dev/group-size]: 9 pods x cpu 1 = cpu 9, but queue team-a allows at most cpu 8 \
         (nominal 8; no cohort to borrow from), so the group could never start; lower \
         metadata.labels[muster.dev/group-size] or the pods' resource requests, or use a queue with a larger quota"
    );
    let mut p8 = p.clone();
    p8["metadata"]["labels"]["muster.dev/group-min"] = json!("8");
    assert_eq!(check(&request("CREATE", TENANT, POD, &p8, None)).await, Ok(()));
}

#[tokio::test]
async fn a_group_larger_than_the_cluster_but_within_quota_is_not_refused() {
    // No quota limits cpu in queue "open": the controller, not the webhook, says Unsatisfiable.
    let j = held(job("huge", Some("open"), 100_000, "64"));
    assert_eq!(check(&request("CREATE", TENANT, JOB, &j, None)).await, Ok(()));
}

#[tokio::test]
async fn bad_sizes_and_durations_are_refused_with_what_to_set() {
    let cases: [(&str, Value, Value, &str); 8] = [
        (
            "min-members not a number",
            json!({}),
            json!({"muster.dev/min-members": "most"}),
            "metadata.annotations[muster.dev/min-members]: \"most\" is not a whole number; set the fewest pods the \
             job can start with, from 1 to spec.parallelism (2)",
        ),
        (
            "min-members above parallelism",
            json!({}),
            json!({"muster.dev/min-members": "3"}),
            "metadata.annotations[muster.dev/min-members]: 3 is outside 1..=2; set the fewest pods the job can start \
             with, from 1 to spec.parallelism (2), or remove it for a job that starts with all its pods",
        ),
        (
            "min-members zero",
            json!({}),
            json!({"muster.dev/min-members": "0"}),
            "metadata.annotations[muster.dev/min-members]: 0 is outside 1..=2; set the fewest pods the job can start \
             with, from 1 to spec.parallelism (2), or remove it for a job that starts with all its pods",
        ),
        (
            "duration not seconds",
            json!({}),
            json!({"muster.dev/duration-seconds": "1h"}),
            "metadata.annotations[muster.dev/duration-seconds]: \"1h\" is not a whole number of seconds from 0 to \
             315360000; set the expected run time in seconds, such as \"3600\" (or remove it)",
        ),
        (
            "topology level not a name",
            json!({}),
            json!({"muster.dev/required-topology": "Rack 1"}),
            "metadata.annotations[muster.dev/required-topology]: \"Rack 1\" is not a topology level; name one, such \
             as rack, block or zone",
        ),
        (
            "topology required and preferred the same level",
            json!({}),
            json!({"muster.dev/required-topology": "rack", "muster.dev/preferred-topology": "rack"}),
            "metadata.annotations: muster.dev/required-topology and muster.dev/preferred-topology both name \"rack\"; \
             keep one, or prefer a level inside the required one (preferred rack, required block)",
        ),
        (
            "group-size zero",
            json!({"muster.dev/group": "w", "muster.dev/group-size": "0"}),
            json!({}),
            "metadata.labels[muster.dev/group-size]: \"0\" is not a whole number from 1 to 1000000; set it to the \
             number of pods in the group",
        ),
        (
            "group-min above size",
            json!({"muster.dev/group": "w", "muster.dev/group-size": "2", "muster.dev/group-min": "3"}),
            json!({}),
            "metadata.labels[muster.dev/group-min]: \"3\" is not a whole number from 1 to the group size 2; set the \
             fewest pods the group can start with, or remove it for a group that starts with all 2",
        ),
    ];
    for (what, labels, annotations, want) in cases {
        let r = if labels.as_object().unwrap().is_empty() {
            let mut j = held(job("train", Some("open"), 2, "1"));
            j["metadata"]["annotations"] = annotations;
            request("CREATE", TENANT, JOB, &j, None)
        } else {
            let mut l = labels;
            l[QUEUE] = json!("open");
            request("CREATE", TENANT, POD, &gated(pod("w-0", "ml", l)), None)
        };
        assert_eq!(check(&r).await.unwrap_err(), want, "{what}");
    }
    let mut j = held(job("train", Some("open"), 2_000_000, "1"));
    j["spec"]["completions"] = json!(2_000_000);
    assert_eq!(
        check(&request("CREATE", TENANT, JOB, &j, None)).await.unwrap_err(),
        "spec.parallelism: 2000000 pods are more than one group may have (at most 1000000); split the Job"
    );
    let bad_name = gated(pod("w-0", "ml", json!({"muster.dev/group": "My_Group", QUEUE: "open"})));
    assert_eq!(
        check(&request("CREATE", TENANT, POD, &bad_name, None)).await.unwrap_err(),
        "metadata.labels[muster.dev/group]: \"My_Group\" cannot name a Group; use lowercase letters, digits, '-' \
         and '.', starting and ending with a letter or digit"
    );
}

// ---- validating: Groups and admitted jobs ------------------------------------------------

#[tokio::test]
async fn groups_belong_to_muster() {
    let g = serde_json::to_value(group_object("ml", "train", "Queued")).unwrap();
    assert_eq!(
        check(&request("CREATE", TENANT, GROUP, &g, None)).await.unwrap_err(),
        "Group ml/train: Group objects are created by muster, one per job, mirroring the job; submit a Job (or pods) \
         with the label muster.dev/queue instead"
    );
    assert_eq!(check(&request("CREATE", MUSTER, GROUP, &g, None)).await, Ok(()));
    let mut grown = g.clone();
    grown["spec"]["members"]["min"] = json!(40);
    grown["metadata"]["finalizers"] = json!(["muster.dev/allocation"]);
    assert_eq!(
        check(&request("UPDATE", TENANT, GROUP, &grown, Some(&g))).await.unwrap_err(),
        "spec, metadata.finalizers[muster.dev/allocation]: Group ml/train is written by muster only (its spec \
         mirrors the job); change the job instead, and muster updates the Group"
    );
    // The garbage collector orphaning a Group changes only its owner references.
    let mut owned = g.clone();
    owned["metadata"]["ownerReferences"] =
        json!([{"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "1"}]);
    let gc = "system:serviceaccount:kube-system:generic-garbage-collector";
    assert_eq!(check(&request("UPDATE", gc, GROUP, &g, Some(&owned))).await, Ok(()));
}

#[tokio::test]
async fn an_admitted_job_may_change_its_size_but_not_its_requests_until_suspended() {
    let s = state().with_group(group_object("ml", "train", "Running"));
    let c = WebhookConfig::default();
    let mut old = held(job("train", Some("team-a"), 4, "1"));
    old["spec"]["suspend"] = json!(false);
    // Its pod count may change while it runs (an elastic Indexed Job): muster grows the group,
    // or releases the members of the pods the Job controller deletes.
    let mut wider = old.clone();
    (wider["spec"]["parallelism"], wider["spec"]["completions"]) = (json!(6), json!(6));
    assert_eq!(check_with(&request("UPDATE", TENANT, JOB, &wider, Some(&old)), &c, &s).await, Ok(()));
    // Its requests are what its members were placed for.
    let mut bigger = old.clone();
    bigger["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = json!("2");
    assert!(
        check_with(&request("UPDATE", TENANT, JOB, &bigger, Some(&old)), &c, &s)
            .await
            .unwrap_err()
            .starts_with("spec.template.spec.containers[0].resources: job train is running (its Group is Running)")
    );
    // Suspending in the same update, or a group still queued, is fine.
    let mut suspend_too = bigger.clone();
    suspend_too["spec"]["suspend"] = json!(true);
    assert_eq!(check_with(&request("UPDATE", TENANT, JOB, &suspend_too, Some(&old)), &c, &s).await, Ok(()));
    let queued = state().with_group(group_object("ml", "train", "Queued"));
    assert_eq!(check_with(&request("UPDATE", TENANT, JOB, &bigger, Some(&old)), &c, &queued).await, Ok(()));
    // A size change is still checked against the quota.
    let mut too_wide = wider.clone();
    (too_wide["spec"]["parallelism"], too_wide["spec"]["completions"]) = (json!(9), json!(9));
    assert!(
        check_with(&request("UPDATE", TENANT, JOB, &too_wide, Some(&old)), &c, &s)
            .await
            .unwrap_err()
            .starts_with("spec.parallelism: 9 pods x cpu 1 = cpu 9")
    );
}

#[tokio::test]
async fn a_pod_cannot_change_its_queue_or_group() {
    let old = gated(pod("w-0", "ml", json!({"muster.dev/group": "w", QUEUE: "team-a"})));
    let mut new = old.clone();
    new["metadata"]["labels"]["muster.dev/group"] = json!("v");
    assert_eq!(
        check(&request("UPDATE", TENANT, POD, &new, Some(&old))).await.unwrap_err(),
        "metadata.labels[muster.dev/group]: a pod cannot change its group once created; keep muster.dev/group=w, or \
         delete the pod and create it again"
    );
}

#[tokio::test]
async fn unrelated_objects_pass() {
    let plain = pod("web", "web", json!({"app": "web"}));
    assert_eq!(check(&request("CREATE", TENANT, POD, &plain, None)).await, Ok(()));
    assert_eq!(check(&request("CREATE", TENANT, JOB, &job("plain", None, 3, "1"), None)).await, Ok(()));
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "ml",
                    "labels": {"muster.dev/x": "y"}}});
    assert_eq!(check(&request("CREATE", TENANT, ("", "v1", "ConfigMap", "configmaps"), &cm, None)).await, Ok(()));
}

// ---- the review envelope -----------------------------------------------------------------

#[tokio::test]
async fn reviews_answer_with_patches_denials_and_invalid_bodies() {
    let c = WebhookConfig::default();
    let s = state();
    let j = job("train", Some("team-a"), 2, "1");
    let body = |r: &AdmissionRequest<DynamicObject>| {
        let mut v = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"});
        v["request"] = serde_json::to_value(r).unwrap();
        v["request"]["uid"] = json!("0b1c");
        serde_json::to_vec(&v).unwrap()
    };
    let out = serde_json::to_value(
        review(Hook::Mutate, &body(&request("CREATE", TENANT, JOB, &j, None)), &c, &s, now()).await,
    )
    .unwrap();
    assert_eq!(out["apiVersion"], json!("admission.k8s.io/v1"));
    assert_eq!(out["response"]["uid"], json!("0b1c"));
    assert_eq!(out["response"]["allowed"], json!(true));
    assert_eq!(out["response"]["patchType"], json!("JSONPatch"));
    let out = serde_json::to_value(
        review(Hook::Validate, &body(&request("CREATE", TENANT, JOB, &j, None)), &c, &s, now()).await,
    )
    .unwrap();
    assert_eq!(out["response"]["allowed"], json!(false));
    assert_eq!(out["response"]["status"]["code"], json!(403));
    assert!(out["response"]["status"]["message"].as_str().unwrap().starts_with("spec.suspend:"));
    let out = serde_json::to_value(review(Hook::Validate, b"{not json", &c, &s, now()).await).unwrap();
    assert_eq!(out["response"]["allowed"], json!(false));
}

fn native_pod_group(name: &str, policy: Value) -> k8s_openapi::api::scheduling::v1beta1::PodGroup {
    serde_json::from_value(json!({
        "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "ml"}, "spec": {"schedulingPolicy": policy},
    }))
    .unwrap()
}

#[tokio::test]
async fn queued_pods_naming_a_kubernetes_pod_group_are_its_gang() {
    let c = WebhookConfig::default();
    let s = state()
        .with_native_pod_group(native_pod_group("ring", json!({"gang": {"minCount": 3}})))
        .with_native_pod_group(native_pod_group("solo", json!({"basic": {}})))
        .with_native_pod_group({
            let mut child = native_pod_group("prefill", json!({"gang": {"minCount": 2}}));
            child.spec.parent_composite_pod_group_name = Some("serve".into());
            child
        });
    let create = |p: &Value| request("CREATE", TENANT, POD, p, None);
    let native = |name: &str, group: &str, labels: Value| {
        let mut p = pod(name, "ml", labels);
        p["spec"]["schedulingGroup"] = json!({"podGroupName": group});
        p
    };
    // Only the queue label of muster's: the group, its size, the gate and the scheduler follow.
    let p = native("ring-0", "ring", json!({QUEUE: "open"}));
    let after = patched(&p, &patch_with(&create(&p), &c, &s).unwrap());
    assert_eq!(after["metadata"]["labels"]["muster.dev/group"], json!("ring"));
    assert_eq!(after["metadata"]["labels"]["muster.dev/group-size"], json!("3"));
    assert_eq!(after["spec"]["schedulerName"], json!("muster"));
    assert_eq!(after["spec"]["schedulingGates"], json!([{"name": "muster.dev/admission"}]));
    assert_eq!(check_with(&create(&after), &c, &s).await, Ok(()));
    // Without the queue label the pod is kube-scheduler's: nothing is added.
    let free = native("free-0", "ring", json!({}));
    assert!(patch_with(&create(&free), &c, &s).unwrap().0.is_empty());
    // A PodGroup that does not exist, or one without a gang policy, is refused with the fix.
    let lost = native("lost-0", "lost", json!({QUEUE: "open"}));
    let after = patched(&lost, &patch_with(&create(&lost), &c, &s).unwrap());
    assert_eq!(
        check_with(&create(&after), &c, &s).await.unwrap_err(),
        "spec.schedulingGroup.podGroupName: PodGroup ml/lost (scheduling.k8s.io/v1beta1) does not exist, so the \
         group has no size; create the PodGroup with a gang policy before its pods"
    );
    let solo = native("solo-0", "solo", json!({QUEUE: "open"}));
    let after = patched(&solo, &patch_with(&create(&solo), &c, &s).unwrap());
    let e = check_with(&create(&after), &c, &s).await.unwrap_err();
    assert!(e.starts_with("spec.schedulingGroup.podGroupName: PodGroup ml/solo (scheduling.k8s.io) has no"), "{e}");
    // A child of a CompositePodGroup that does not exist: its tree has no size yet.
    let child = native("prefill-0", "prefill", json!({QUEUE: "open"}));
    let after = patched(&child, &patch_with(&create(&child), &c, &s).unwrap());
    let e = check_with(&create(&after), &c, &s).await.unwrap_err();
    assert!(e.contains("CompositePodGroup ml/serve (scheduling.k8s.io/v1alpha3) does not exist"), "{e}");
    // A group label or size of one's own must be the PodGroup's.
    let mut other = native("ring-1", "ring", json!({QUEUE: "open", "muster.dev/group": "other"}));
    other = patched(&other, &patch_with(&create(&other), &c, &s).unwrap());
    let e = check_with(&create(&other), &c, &s).await.unwrap_err();
    assert!(
        e.contains(
            "metadata.labels[muster.dev/group]: \"other\" differs from \"ring\", the group of spec.schedulingGroup"
        ),
        "{e}"
    );
    let mut sized = native("ring-2", "ring", json!({QUEUE: "open", "muster.dev/group-size": "2"}));
    sized = patched(&sized, &patch_with(&create(&sized), &c, &s).unwrap());
    let e = check_with(&create(&sized), &c, &s).await.unwrap_err();
    assert!(e.contains("\"2\" disagrees with spec.schedulingPolicy.gang.minCount 3 of PodGroup ml/ring"), "{e}");
}

#[tokio::test]
async fn a_kubernetes_pod_groups_topology_constraint_is_its_pods_required_level() {
    let c = WebhookConfig::default();
    let with_topology = |name: &str, key: &str| {
        let mut pg = native_pod_group(name, json!({"gang": {"minCount": 2}}));
        pg.spec.scheduling_constraints = Some(serde_json::from_value(json!({"topology": [{"key": key}]})).unwrap());
        pg
    };
    let s = state()
        .with_native_pod_group(with_topology("racked", "muster.dev/rack"))
        .with_native_pod_group(with_topology("odd", "example.com/row"));
    let create = |p: &Value| request("CREATE", TENANT, POD, p, None);
    let native = |name: &str, group: &str| {
        let mut p = pod(name, "ml", json!({QUEUE: "open"}));
        p["spec"]["schedulingGroup"] = json!({"podGroupName": group});
        p
    };
    // Its node label is muster's rack level: the pods ask for one rack, as kube-scheduler would keep them.
    let p = native("racked-0", "racked");
    let after = patched(&p, &patch_with(&create(&p), &c, &s).unwrap());
    assert_eq!(after["metadata"]["annotations"]["muster.dev/required-topology"], json!("rack"));
    assert_eq!(check_with(&create(&after), &c, &s).await, Ok(()));
    // A pod's own topology annotation is kept.
    let mut own = native("racked-1", "racked");
    own["metadata"]["annotations"] = json!({"muster.dev/preferred-topology": "zone"});
    let after = patched(&own, &patch_with(&create(&own), &c, &s).unwrap());
    assert_eq!(after["metadata"]["annotations"], json!({"muster.dev/preferred-topology": "zone"}));
    // A node label muster does not place by is refused, naming the ones it does.
    let p = native("odd-0", "odd");
    let after = patched(&p, &patch_with(&create(&p), &c, &s).unwrap());
    let e = check_with(&create(&after), &c, &s).await.unwrap_err();
    assert!(
        e.starts_with(
            "spec.schedulingGroup.podGroupName: PodGroup ml/odd has spec.schedulingConstraints.topology[0].key: \
             \"example.com/row\" is no node label muster places by; use one of topology.kubernetes.io/zone (zone)"
        ),
        "{e}"
    );
}

/// Group `name` in namespace ml, standing for `owner` (apiVersion, kind), or for plain pods.
fn owned_group(name: &str, owner: Option<(&str, &str)>) -> Group {
    let mut g = group_object("ml", name, "Running");
    g.spec.owner = owner.map(|(api_version, kind)| {
        serde_json::from_value(json!({
        "apiVersion": api_version, "kind": kind, "name": name, "uid": "old"}))
        .unwrap()
    });
    g
}

#[tokio::test]
async fn a_group_name_stands_for_one_workload() {
    let c = WebhookConfig::default();
    let train = held(job("train", Some("team-a"), 2, "1"));
    let create = request("CREATE", TENANT, JOB, &train, None);
    // A JobSet's group, or a plain pod group, of the same name would be taken for the Job's.
    let jobset = state().with_group(owned_group("train", Some(("jobset.x-k8s.io/v1alpha2", "JobSet"))));
    assert_eq!(
        check_with(&create, &c, &jobset).await.unwrap_err(),
        "metadata.name: muster names a workload's group after it, and namespace ml has group train already, of \
         another workload or of plain pods labelled muster.dev/group=train; give this Job another name, or delete \
         that workload first"
    );
    let plain = state().with_group(owned_group("train", None));
    assert!(check_with(&create, &c, &plain).await.unwrap_err().contains("of another workload or of plain pods"));
    // A deleted Job's group, going with it, or one being deleted, leaves the name free.
    let earlier = state().with_group(owned_group("train", Some(("batch/v1", "Job"))));
    assert_eq!(check_with(&create, &c, &earlier).await, Ok(()));
    let mut going = owned_group("train", None);
    going.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now()));
    assert_eq!(check_with(&create, &c, &state().with_group(going)).await, Ok(()));
    // A plain pod cannot join a workload's group (it would run on a member placed for the Job).
    let stray = gated(pod("train-9", "ml", json!({"muster.dev/group": "train", QUEUE: "team-a"})));
    assert_eq!(
        check_with(&request("CREATE", TENANT, POD, &stray, None), &c, &earlier).await.unwrap_err(),
        "metadata.labels[muster.dev/group]: group train is a workload's group (muster names a workload's group \
         after it), and muster binds only that workload's pods there; give pod train-9 another group name"
    );
}

fn composite_pod_group(name: &str, policy: Value, topology: Option<&str>) -> CompositePodGroup {
    let mut spec = json!({"workloadRef": {"workloadName": "serve", "templateName": name},
                          "schedulingPolicy": policy, "disruptionMode": {"single": {}}});
    if let Some(key) = topology {
        spec["schedulingConstraints"] = json!({"topology": [{"key": key}]});
    }
    serde_json::from_value(json!({
        "apiVersion": "scheduling.k8s.io/v1alpha3", "kind": "CompositePodGroup",
        "metadata": {"name": name, "namespace": "ml"}, "spec": spec,
    }))
    .unwrap()
}

#[tokio::test]
async fn pods_of_a_composite_pod_group_are_one_group_with_a_set_per_pod_group() {
    let c = WebhookConfig::default();
    // Disaggregated inference: prefill (2 pods, a rack) and decode (4 pods, a rack), in one block.
    let child = |name: &str, min: i32| {
        let mut pg = native_pod_group(name, json!({"gang": {"minCount": min}}));
        pg.spec.parent_composite_pod_group_name = Some("serve".into());
        let topology = json!({"topology": [{"key": "muster.dev/rack"}]});
        pg.spec.scheduling_constraints = Some(serde_json::from_value(topology).unwrap());
        pg
    };
    let tree = |min_groups: i32| {
        state()
            .with_composite_pod_group(composite_pod_group(
                "serve",
                json!({"gang": {"minGroupCount": min_groups}}),
                Some("muster.dev/block"),
            ))
            .with_native_pod_group(child("prefill", 2))
            .with_native_pod_group(child("decode", 4))
    };
    let s = tree(2);
    let create = |p: &Value| request("CREATE", TENANT, POD, p, None);
    let native = |name: &str, group: &str, labels: Value| {
        let mut p = pod(name, "ml", labels);
        p["spec"]["schedulingGroup"] = json!({"podGroupName": group});
        p
    };
    let p = native("prefill-0", "prefill", json!({QUEUE: "open"}));
    let after = patched(&p, &patch_with(&create(&p), &c, &s).unwrap());
    let labels = &after["metadata"]["labels"];
    assert_eq!(
        (&labels["muster.dev/group"], &labels["muster.dev/group-size"]),
        (&json!("serve"), &json!("6")),
        "the root's group, of every PodGroup's pods"
    );
    assert_eq!((&labels["muster.dev/set"], &labels["muster.dev/set-size"]), (&json!("prefill"), &json!("2")));
    assert_eq!(
        after["metadata"]["annotations"],
        json!({"muster.dev/required-topology": "block", "muster.dev/set-topology": "rack"})
    );
    assert_eq!(check_with(&create(&after), &c, &s).await, Ok(()));
    // A pod of prefill claiming decode's set, or another size, is refused: it would take a member
    // placed for the other set's requests.
    for (key, forged) in [("muster.dev/set", "decode"), ("muster.dev/set-size", "4")] {
        let mut f = after.clone();
        f["metadata"]["labels"][key] = json!(forged);
        let e = check_with(&create(&f), &c, &s).await.unwrap_err();
        assert!(e.contains(&format!("metadata.labels[{key}]: \"{forged}\" where PodGroup ml/prefill")), "{e}");
    }
    let mut f = after.clone();
    f["metadata"]["labels"]["muster.dev/group"] = json!("prefill");
    let e = check_with(&create(&f), &c, &s).await.unwrap_err();
    assert!(e.contains("\"prefill\" differs from \"serve\""), "{e}");
    // Nor may it start below its PodGroup's minCount.
    let mut f = after.clone();
    f["metadata"]["labels"]["muster.dev/set-min"] = json!("1");
    let e = check_with(&create(&f), &c, &s).await.unwrap_err();
    assert!(
        e.contains("metadata.labels[muster.dev/set-min]: a Kubernetes PodGroup's gang starts with its minCount"),
        "{e}"
    );
    // One of two children that differ: the smaller gang (prefill's 2) is required, decode's 4
    // optional.
    let s = tree(1);
    let after = patched(&p, &patch_with(&create(&p), &c, &s).unwrap());
    assert_eq!(after["metadata"]["labels"].get("muster.dev/set-min"), None, "prefill is required");
    assert_eq!(check_with(&create(&after), &c, &s).await, Ok(()));
    let d = native("decode-0", "decode", json!({QUEUE: "open"}));
    let d = patched(&d, &patch_with(&create(&d), &c, &s).unwrap());
    assert_eq!(d["metadata"]["labels"]["muster.dev/set-min"], json!("0"), "decode is optional");
    assert_eq!(check_with(&create(&d), &c, &s).await, Ok(()));
}

#[tokio::test]
async fn pods_of_replicas_beyond_a_k_of_n_gang_are_marked_optional() {
    let c = WebhookConfig::default();
    // One of two alike replicas, each a gang of 2: replica-b's pods may wait while replica-a runs.
    let child = |name: &str| {
        let mut pg = native_pod_group(name, json!({"gang": {"minCount": 2}}));
        pg.spec.parent_composite_pod_group_name = Some("serve".into());
        pg
    };
    let s = state()
        .with_composite_pod_group(composite_pod_group("serve", json!({"gang": {"minGroupCount": 1}}), None))
        .with_native_pod_group(child("replica-b"))
        .with_native_pod_group(child("replica-a"));
    let create = |p: &Value| request("CREATE", TENANT, POD, p, None);
    let native = |name: &str, group: &str| {
        let mut p = pod(name, "ml", json!({QUEUE: "open"}));
        p["spec"]["schedulingGroup"] = json!({"podGroupName": group});
        p
    };
    let a = native("a-0", "replica-a");
    let a = patched(&a, &patch_with(&create(&a), &c, &s).unwrap());
    let b = native("b-0", "replica-b");
    let b = patched(&b, &patch_with(&create(&b), &c, &s).unwrap());
    assert_eq!(a["metadata"]["labels"]["muster.dev/group-size"], json!("4"), "every replica's pods");
    assert_eq!(a["metadata"]["labels"].get("muster.dev/set-min"), None, "the first replica by name is required");
    assert_eq!(b["metadata"]["labels"]["muster.dev/set-min"], json!("0"));
    assert_eq!(check_with(&create(&a), &c, &s).await, Ok(()));
    assert_eq!(check_with(&create(&b), &c, &s).await, Ok(()));
    // The required replica cannot be made optional, nor the optional one required.
    let mut forged = a.clone();
    forged["metadata"]["labels"]["muster.dev/set-min"] = json!("0");
    let e = check_with(&create(&forged), &c, &s).await.unwrap_err();
    assert!(e.contains("metadata.labels[muster.dev/set-min]: a Kubernetes PodGroup's gang starts"), "{e}");
    let mut forged = b.clone();
    forged["metadata"]["labels"].as_object_mut().unwrap().remove("muster.dev/set-min");
    let e = check_with(&create(&forged), &c, &s).await.unwrap_err();
    assert!(
        e.contains("metadata.labels[muster.dev/set-min]: missing where PodGroup ml/replica-b makes it \"0\""),
        "{e}"
    );
}
