//! The webhook's rules for JobSets: held as one group, refused what a Job is, resumed through the queue.

mod common;

use common::*;

// ---- JobSets ------------------------------------------------------------------------------

const JOBSET: Kind = ("jobset.x-k8s.io", "v1alpha2", "JobSet", "jobsets");

/// A JobSet of `workers` Jobs x 2 pods and one driver pod, each pod asking `cpu`.
fn jobset(name: &str, queue: Option<&str>, workers: i64, cpu: &str) -> Value {
    let template = |parallelism: i64| {
        json!({"spec": {"parallelism": parallelism, "completions": parallelism, "template": {
            "metadata": {"labels": {"app": name}},
            "spec": {"restartPolicy": "Never", "containers": [
                {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]}}}})
    };
    let mut js = json!({
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
        "metadata": {"name": name, "namespace": "ml", "labels": {}},
        "spec": {"replicatedJobs": [
            {"name": "workers", "replicas": workers, "template": template(2)},
            {"name": "driver", "template": template(1)}]}
    });
    if let Some(q) = queue {
        js["metadata"]["labels"][QUEUE] = json!(q);
    }
    js
}

#[tokio::test]
async fn a_queued_jobset_is_held_for_muster_as_one_group() {
    let c = WebhookConfig::default();
    let js = jobset("train", Some("open"), 2, "1");
    let create = request("CREATE", TENANT, JOBSET, &js, None);
    let after = patched(&js, &patch_of(&create, &c));
    assert_eq!(after["spec"]["suspend"], json!(true));
    for i in 0..2 {
        assert_eq!(
            after["spec"]["replicatedJobs"][i]["template"]["spec"]["template"]["spec"]["schedulerName"],
            json!("muster")
        );
    }
    assert_eq!(check(&request("CREATE", TENANT, JOBSET, &after, None)).await, Ok(()));
    // Not held back (another webhook undid ours): both refusals, with the fields.
    assert_eq!(
        check(&create).await.unwrap_err(),
        "spec.suspend: a JobSet in queue open must be created suspended, so that muster starts it when the whole \
         group fits; remove spec.suspend: false (muster's mutating webhook sets it to true); \
         spec.replicatedJobs[0].template.spec.template.spec.schedulerName: the pods of a JobSet in queue open are \
         placed by muster; remove schedulerName (muster's mutating webhook sets it to muster); \
         spec.replicatedJobs[1].template.spec.template.spec.schedulerName: the pods of a JobSet in queue open are \
         placed by muster; remove schedulerName (muster's mutating webhook sets it to muster)"
    );
    // Without the queue label, nothing.
    let plain = jobset("plain", None, 2, "1");
    assert!(patch_of(&request("CREATE", TENANT, JOBSET, &plain, None), &c).0.is_empty());
    assert_eq!(check(&request("CREATE", TENANT, JOBSET, &plain, None)).await, Ok(()));
}

/// A JobSet as the mutating webhook leaves it.
fn held_jobset(mut js: Value) -> Value {
    js["spec"]["suspend"] = json!(true);
    for i in 0..2 {
        js["spec"]["replicatedJobs"][i]["template"]["spec"]["template"]["spec"]["schedulerName"] = json!("muster");
    }
    js
}

#[tokio::test]
async fn a_jobset_is_refused_what_a_job_is_and_what_one_group_cannot_be() {
    let held = held_jobset;
    let create = |js: &Value| request("CREATE", TENANT, JOBSET, js, None);
    // 2 x 2 workers + 1 driver = 5 pods of 2 cpu: over team-a's 8.
    let big = held(jobset("big", Some("team-a"), 2, "2"));
    assert_eq!(
        check(&create(&big)).await.unwrap_err(),
        "spec.replicatedJobs: 5 pods x cpu 2 = cpu 10, but queue team-a allows at most cpu 8 (nominal 8; no cohort \
         to borrow from), so the group could never start; lower spec.replicatedJobs or the pods' resource \
         requests, or use a queue with a larger quota"
    );
    // Each replicated Job counts what its own pods ask: 2 workers of 1 cpu and a driver of 6 fit
    // in 8; a driver of 7 does not.
    let driver = |cpu: &str| {
        let mut js = held(jobset("wide", Some("team-a"), 1, "1"));
        js["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]
            ["cpu"] = json!(cpu);
        js
    };
    check(&create(&driver("6"))).await.unwrap();
    let e = check(&create(&driver("7"))).await.unwrap_err();
    assert!(e.starts_with("spec.replicatedJobs: 2 pods x cpu 1 + 1 pod x cpu 7 = cpu 9"), "{e}");
    // Replicated Jobs asking for other nodes are sets of their own; a reserved key in a pod
    // template; min-members.
    let mut odd = held(jobset("odd", Some("open"), 1, "1"));
    odd["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]["nodeSelector"] = json!({"pool": "b"});
    odd["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["metadata"]["annotations"] =
        json!({"muster.dev/member": "0"});
    odd["metadata"]["annotations"] = json!({"muster.dev/min-members": "2"});
    assert_eq!(
        check(&create(&odd)).await.unwrap_err(),
        "spec.replicatedJobs[0].template.spec.template.metadata.annotations[muster.dev/member]: the key is reserved \
         for muster: only muster may set it; remove it (the muster.dev/ keys you may set are muster.dev/queue, \
         muster.dev/group, muster.dev/group-size, muster.dev/group-min, muster.dev/set, muster.dev/set-size, muster.dev/set-min, muster.dev/set-topology, muster.dev/replica-topology, muster.dev/subgroup, muster.dev/subgroup-topology, muster.dev/min-members, \
         muster.dev/duration-seconds, \
         muster.dev/required-topology, muster.dev/preferred-topology, muster.dev/shrinkable); \
         metadata.annotations[muster.dev/min-members]: JobSets start with all their pods (muster does not shrink \
         them); remove it"
    );
}

#[tokio::test]
async fn a_jobset_is_unsuspended_through_the_queue_and_stays_in_it() {
    let c = WebhookConfig::default();
    let old = held_jobset(jobset("train", Some("open"), 2, "1"));
    let mut new = old.clone();
    new["spec"]["suspend"] = json!(false);
    let update = request("UPDATE", TENANT, JOBSET, &new, Some(&old));
    let after = patched(&new, &patch_of(&update, &c));
    assert_eq!(after["spec"]["suspend"], json!(true), "unsuspending never skips the queue");
    assert_eq!(after["metadata"]["annotations"][RESUME_REQUESTED], json!("2026-03-04T05:06:07Z"));
    assert_eq!(check(&request("UPDATE", TENANT, JOBSET, &after, Some(&old))).await, Ok(()));
    // muster itself resumes it.
    assert!(patch_of(&request("UPDATE", MUSTER, JOBSET, &new, Some(&old)), &c).0.is_empty());
    // Suspending a running one is stamped as the user's.
    let after = patched(&old, &patch_of(&request("UPDATE", TENANT, JOBSET, &old, Some(&new)), &c));
    assert_eq!(after["metadata"]["annotations"][SUSPEND_REQUESTED], json!("2026-03-04T05:06:07Z"));
    // Another scheduler for its pods, later.
    let mut elsewhere = old.clone();
    elsewhere["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]["schedulerName"] = json!("other");
    assert_eq!(
        check(&request("UPDATE", TENANT, JOBSET, &elsewhere, Some(&old))).await.unwrap_err(),
        "spec.replicatedJobs[1].template.spec.template.spec.schedulerName: the pods of a JobSet in queue open are \
         placed by muster; remove schedulerName (muster's mutating webhook sets it to muster)"
    );
    // Leaving the queue.
    let mut gone = old.clone();
    gone["metadata"]["labels"] = json!({});
    assert_eq!(
        check(&request("UPDATE", TENANT, JOBSET, &gone, Some(&old))).await.unwrap_err(),
        "metadata.labels[muster.dev/queue]: a JobSet cannot leave its queue; put back muster.dev/queue=open (or \
         delete the JobSet)"
    );
    // Resizing while muster has placed it, unless suspended in the same update.
    let s = state().with_group(group_object("ml", "train", "Running"));
    let mut running = old.clone();
    running["spec"]["suspend"] = json!(false);
    let mut bigger = running.clone();
    bigger["spec"]["replicatedJobs"][0]["replicas"] = json!(3);
    assert_eq!(
        check_with(&request("UPDATE", TENANT, JOBSET, &bigger, Some(&running)), &c, &s).await.unwrap_err(),
        "spec.replicatedJobs: jobset train is running (its Group is Running) and muster has placed its pods for the \
         current size; suspend the jobset first (spec.suspend: true), then change spec.replicatedJobs, and muster \
         queues it again with the new size"
    );
    bigger["spec"]["suspend"] = json!(true);
    bigger["metadata"]["annotations"] = json!({SUSPEND_REQUESTED: "2026-03-04T05:06:07Z"});
    assert_eq!(check_with(&request("UPDATE", TENANT, JOBSET, &bigger, Some(&running)), &c, &s).await, Ok(()));
}

#[tokio::test]
async fn child_jobs_of_a_jobset_are_its_group_not_groups_of_their_own() {
    let c = WebhookConfig::default();
    let owned = |mut j: Value| {
        j["metadata"]["ownerReferences"] = json!([{"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "name": "train", "uid": "u", "controller": true}]);
        j
    };
    // The queue label came with the JobSet's template: the JobSet controller creates the child
    // Job as it likes (suspended while the JobSet is) and resumes it.
    let mut child = owned(job("train-workers-0", Some("open"), 2, "1"));
    child["spec"]["suspend"] = json!(true);
    assert!(
        patch_of(&request("CREATE", "system:serviceaccount:jobset-system:jobset", JOB, &child, None), &c).0.is_empty()
    );
    assert_eq!(check(&request("CREATE", TENANT, JOB, &child, None)).await, Ok(()));
    let mut resumed = child.clone();
    resumed["spec"]["suspend"] = json!(false);
    let update = request("UPDATE", "system:serviceaccount:jobset-system:jobset", JOB, &resumed, Some(&child));
    assert!(patch_of(&update, &c).0.is_empty(), "the JobSet controller resumes its children");
    assert_eq!(check(&update).await, Ok(()));
    // Another owner is no excuse: a Job of its own is held.
    let mut other = job("x", Some("open"), 2, "1");
    other["metadata"]["ownerReferences"] =
        json!([{"apiVersion": "example.com/v1", "kind": "JobSet", "name": "x", "uid": "u", "controller": true}]);
    assert!(!patch_of(&request("CREATE", TENANT, JOB, &other, None), &c).0.is_empty());
}

#[tokio::test]
async fn a_queued_template_cannot_pin_its_pods_to_a_node() {
    let mut j = held(job("pinned", Some("open"), 2, "1"));
    j["spec"]["template"]["spec"]["nodeName"] = json!("node-1");
    assert_eq!(
        check(&request("CREATE", TENANT, JOB, &j, None)).await.unwrap_err(),
        "spec.template.spec.nodeName: the pods of a Job in queue open cannot choose their node (node-1): muster \
         places every member of the group at once; remove nodeName (use a nodeSelector to restrict the nodes)"
    );
    let mut js = held_jobset(jobset("pinned", Some("open"), 2, "1"));
    js["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]["nodeName"] = json!("node-1");
    assert_eq!(
        check(&request("CREATE", TENANT, JOBSET, &js, None)).await.unwrap_err(),
        "spec.replicatedJobs[1].template.spec.template.spec.nodeName: the pods of a JobSet in queue open cannot \
         choose their node (node-1): muster places every member of the group at once; remove nodeName (use a \
         nodeSelector to restrict the nodes)"
    );
    // Without the queue label it is not muster's Job.
    let mut plain = job("plain", None, 2, "1");
    plain["spec"]["template"]["spec"]["nodeName"] = json!("node-1");
    assert_eq!(check(&request("CREATE", TENANT, JOB, &plain, None)).await, Ok(()));
}
