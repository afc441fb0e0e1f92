//! Pod fields muster does not place (claims shared by name, host ports, required pod affinity,
//! hard topology spreads) are refused in every held kind and in plain pod groups,
//! naming the field; the same fields elsewhere are left alone.

mod common;

use common::*;

const JOBSET: Kind = ("jobset.x-k8s.io", "v1alpha2", "JobSet", "jobsets");
const MPIJOB: Kind = ("kubeflow.org", "v2beta1", "MPIJob", "mpijobs");
const RAYCLUSTER: Kind = ("ray.io", "v1", "RayCluster", "rayclusters");
const LWS: Kind = ("leaderworkerset.x-k8s.io", "v1", "LeaderWorkerSet", "leaderworkersets");

/// A pod spec that claims a GPU through DRA, as the apiserver sends it (resource.k8s.io/v1:
/// the pod names a ResourceClaimTemplate, the container the claim).
fn claiming_spec() -> Value {
    json!({
        "restartPolicy": "Never", "dnsPolicy": "ClusterFirst", "schedulerName": "muster",
        "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
        "containers": [{"name": "main", "image": "cuda", "imagePullPolicy": "IfNotPresent",
                        "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
                        "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "claims": [{"name": "gpu"}]}}]
    })
}

/// The same, its claim shared by name with other pods.
fn sharing_spec() -> Value {
    let mut s = claiming_spec();
    s["resourceClaims"] = json!([{"name": "gpu", "resourceClaimName": "shared-gpus"}]);
    s
}

const SHARED: &str = "muster places claims made from a template for each pod (resourceClaimTemplateName), not \
                      claims shared by name (resourceClaimName) yet";

#[tokio::test]
async fn a_queued_job_claiming_devices_by_template_is_admitted_and_one_sharing_a_claim_is_refused() {
    let mut j = job("train", Some("open"), 2, "1");
    j["spec"]["template"]["spec"] = claiming_spec();
    let r = request("CREATE", TENANT, JOB, &j, None);
    assert!(patch_with(&r, &WebhookConfig::default(), &state()).is_ok());
    assert_eq!(check(&request("CREATE", TENANT, JOB, &held(j.clone()), None)).await, Ok(()));
    j["spec"]["template"]["spec"] = sharing_spec();
    let r = request("CREATE", TENANT, JOB, &j, None);
    let refused = patch_with(&r, &WebhookConfig::default(), &state()).expect_err("refused");
    assert!(refused.contains(&format!("spec.template.spec.resourceClaims[0]: {SHARED}")), "{refused}");
    // Without the queue label the Job is not muster's: kube-scheduler allocates its claims.
    j["metadata"]["labels"] = json!({});
    assert_eq!(check(&request("CREATE", TENANT, JOB, &j, None)).await, Ok(()));
}

#[tokio::test]
async fn a_queued_job_made_before_the_rule_can_still_be_suspended() {
    let mut j = held(job("train", Some("open"), 2, "1"));
    j["spec"]["template"]["spec"] = sharing_spec();
    let mut suspended = j.clone();
    suspended["metadata"]["labels"]["team"] = json!("a");
    assert_eq!(check(&request("CREATE", TENANT, JOB, &j, None)).await.map_err(|_| ()), Err(()));
    assert_eq!(check(&request("UPDATE", TENANT, JOB, &suspended, Some(&j))).await, Ok(()));
}

#[tokio::test]
async fn every_held_kind_sharing_a_claim_is_refused_naming_its_template() {
    let template = || json!({"metadata": {"labels": {"app": "x"}}, "spec": sharing_spec()});
    let jobset = json!({
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
        "metadata": {"name": "js", "namespace": "ml", "labels": {QUEUE: "open"}},
        "spec": {"suspend": true, "replicatedJobs": [{"name": "workers", "replicas": 1, "template": {"spec": {
            "parallelism": 2, "completions": 2, "template": template()}}}]}
    });
    let refused = |out: Result<(), String>, base: &str| {
        let message = out.expect_err("refused");
        assert!(message.contains(&format!("{base}.resourceClaims[0]: {SHARED}")), "{message}");
    };
    refused(
        check(&request("CREATE", TENANT, JOBSET, &jobset, None)).await,
        "spec.replicatedJobs[0].template.spec.template.spec",
    );
    let mpijob = json!({
        "apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
        "metadata": {"name": "mpi", "namespace": "ml", "labels": {QUEUE: "open"}},
        "spec": {"runPolicy": {"suspend": true}, "mpiReplicaSpecs": {
            "Launcher": {"replicas": 1, "template": {"spec": {"schedulerName": "muster", "containers": [
                {"name": "main", "image": "mpi", "resources": {"requests": {"cpu": "1"}}}]}}},
            "Worker": {"replicas": 2, "template": template()}}}
    });
    refused(
        check(&request("CREATE", TENANT, MPIJOB, &mpijob, None)).await,
        "spec.mpiReplicaSpecs.Worker.template.spec",
    );
    let raycluster = json!({
        "apiVersion": "ray.io/v1", "kind": "RayCluster",
        "metadata": {"name": "ray", "namespace": "ml", "labels": {QUEUE: "open"}},
        "spec": {"suspend": true, "headGroupSpec": {"template": template()},
                 "workerGroupSpecs": [{"groupName": "w", "replicas": 1, "minReplicas": 1, "maxReplicas": 1,
                                       "template": template()}]}
    });
    let message = check(&request("CREATE", TENANT, RAYCLUSTER, &raycluster, None)).await.expect_err("refused");
    assert!(message.contains(&format!("spec.headGroupSpec.template.spec.resourceClaims[0]: {SHARED}")), "{message}");
    assert!(message.contains("spec.workerGroupSpecs[0].template.spec.resourceClaims[0]"), "{message}");
    let lws = json!({
        "apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
        "metadata": {"name": "serve", "namespace": "ml", "labels": {QUEUE: "open"}},
        "spec": {"replicas": 1, "startupPolicy": "LeaderCreated", "leaderWorkerTemplate": {
            "size": 2, "workerTemplate": template()}}
    });
    refused(check(&request("CREATE", TENANT, LWS, &lws, None)).await, "spec.leaderWorkerTemplate.workerTemplate.spec");
}

#[tokio::test]
async fn a_plain_group_pod_claiming_by_template_is_admitted_and_one_sharing_a_claim_is_refused() {
    let mut p = gated(pod("w-0", "ml", json!({"muster.dev/group": "g", QUEUE: "open"})));
    p["spec"] = claiming_spec();
    p["spec"]["schedulingGates"] = json!([{"name": "muster.dev/admission"}]);
    assert_eq!(check(&request("CREATE", TENANT, POD, &p, None)).await, Ok(()));
    p["spec"] = sharing_spec();
    p["spec"]["schedulingGates"] = json!([{"name": "muster.dev/admission"}]);
    let message = check(&request("CREATE", TENANT, POD, &p, None)).await.expect_err("refused");
    assert!(message.contains("spec.resourceClaims[0]") && message.contains(SHARED), "{message}");
    // A pod of nobody's group (not muster's to place) may claim what it likes.
    let mut other = pod("web-0", "ml", json!({"app": "web"}));
    other["spec"] = sharing_spec();
    other["spec"]["schedulerName"] = json!("default-scheduler");
    assert_eq!(check(&request("CREATE", TENANT, POD, &other, None)).await, Ok(()));
}

#[tokio::test]
async fn host_ports_required_pod_affinity_and_hard_spreads_are_refused_too() {
    let mut j = held(job("train", Some("open"), 2, "1"));
    let spec = &mut j["spec"]["template"]["spec"];
    spec["containers"][0]["ports"] = json!([{"containerPort": 8080, "hostPort": 8080, "protocol": "TCP"}]);
    spec["affinity"] = json!({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "train"}}}]}});
    spec["topologySpreadConstraints"] =
        json!([{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule"}]);
    let message = check(&request("CREATE", TENANT, JOB, &j, None)).await.expect_err("refused");
    for field in [
        "spec.template.spec.containers[0].ports[0]: port 8080 is taken on the node (hostPort)",
        "spec.template.spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution: muster does not \
         read pod affinity",
        "spec.template.spec.topologySpreadConstraints[0]: whenUnsatisfiable DoNotSchedule",
    ] {
        assert!(message.contains(field), "{field} in {message}");
    }
}

#[tokio::test]
async fn a_jobset_whose_controller_would_add_pod_affinity_is_refused() {
    let jobset = json!({
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
        "metadata": {"name": "js", "namespace": "ml", "labels": {QUEUE: "open"},
                     "annotations": {"alpha.jobset.sigs.k8s.io/exclusive-topology": "cloud.google.com/gke-nodepool"}},
        "spec": {"suspend": true, "replicatedJobs": [{"name": "workers", "replicas": 2, "template": {"spec": {
            "parallelism": 2, "completions": 2, "template": {"spec": {"schedulerName": "muster", "containers": [
                {"name": "main", "image": "x", "resources": {"requests": {"cpu": "1"}}}]}}}}}]}
    });
    let message = check(&request("CREATE", TENANT, JOBSET, &jobset, None)).await.expect_err("refused");
    assert!(
        message.starts_with(
            "metadata.annotations[alpha.jobset.sigs.k8s.io/exclusive-topology]: the JobSet controller then gives \
             every pod required pod affinity"
        ),
        "{message}"
    );
}
