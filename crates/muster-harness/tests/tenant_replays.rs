//! A hostile tenant on a real control plane: defects muster had, replayed by user `tenant` (the
//! `edit` ClusterRole in namespaces labelled muster.dev/managed=true), each checked for the fixed
//! behaviour, on 4 KWOK nodes of 8 cpu (scenarios/clusters/tenant-4x8.yaml, node-0..node-3).
//!
//! 1. a foreign pod on a node muster holds: the tenant's Job holds 6 cpu of node-2 (admitted, its
//!    pods can never be created), an admin binds a 7-cpu pod to node-2 directly, an honest
//!    4 x 1.5 cpu Job pinned to node-2 waits, the tenant deletes its Job: the honest Job is not
//!    bound beside the foreign pod, and runs once that pod is gone
//! 2. a plain-pod group sized from its first pod: pod 0 asks 10m, pods 1-3 ask 7 cpu: refused by
//!    the webhook (message about resources) or an InvalidGroup event; no pod of it ever bound
//! 3. native sidecars (4 cpu sidecar + 1 cpu container = 5 per member, the two members on two
//!    nodes) and pod-level resources (spec.resources 5 cpu, if the apiserver takes the field)
//! 4. a pod with only the queue label is refused naming muster.dev/group; a pod with the queue
//!    label and spec.nodeName is refused without being told to add the label it has; a plain pod
//!    labelled with a Job's group is refused, saying it is a workload's (not whose)
//! 5. Groups: with RBAC rights on them, the tenant can neither mark its running Group Succeeded
//!    nor delete it; a status forged as muster is restored, a Group deleted as muster comes back
//! 6. room held for pods that never come: parallelism 4 / completions 2 is a group of min 2; a
//!    plain group of 50 with 5 pods is not admitted (its status says so) and an honest Job runs;
//!    a pod for muster's scheduler without group labels gets a MissingGroup warning event, and so
//!    does one of a Job without the queue label
//! 7. amounts in the forms the apiserver keeps (20e9, 4000001u): 2 x 20e9 bytes of memory pinned
//!    to one node of 32Gi, and 2 x 4000001u cpu pinned to one node of 8 cpu, are never both bound
//!    there, and their Groups count them; 2 x 20e9 bytes in a queue of 30Gi are refused by the
//!    webhook (the quota holds)
//!
//! Each replay is a test in its own namespace, its checks in parts that go on past a failed one
//! (a failure names the part and shows what the namespace held). hack/e2e/test-muster-tenant.sh
//! runs them one at a time (they share the nodes) between muster and the over-commit checker
//! (`muster-harness overcommit`), which fails the run if any node ever had more requested than
//! allocatable.

mod e2e;

use std::collections::BTreeSet;
use std::time::Duration;

use e2e::manifests::{Namespaced, Shape, create, job, pod, refused};
use e2e::namespaces::{bind_cluster_role, managed_namespace};
use e2e::objects::{group, group_phase, groups, has_warning, nodes_of, pods, wait_phase};
use e2e::parts::Parts;
use e2e::wait::throughout;
use e2e::{Identity, eventually};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::ApiResource;
use kube::{Client, ResourceExt};
use muster_k8s::Queue;
use serde_json::{Value, json};

const TENANT: &str = "tenant";
const MANAGER: &str = "muster-e2e";
/// Rights on Groups an admin might give a tenant (bound in replay 5), so that muster is what
/// refuses.
const GROUP_RIGHTS: &str = "e2e-tenant-groups";
const MEMORY_QUEUE: &str = "e2e-tenant-mem";

/// The admin, the tenant, and the namespace of the replay.
struct Replay {
    admin: Client,
    tenant: Client,
    ns: &'static str,
}

impl Replay {
    /// The cluster as admin and as the tenant, and a fresh managed namespace `ns`; None (the test
    /// checks nothing) without a cluster.
    async fn start(ns: &'static str) -> Option<Replay> {
        let admin = e2e::client().await?;
        managed_namespace(&admin, ns, TENANT).await;
        Some(Replay { admin, tenant: e2e::client_as(Identity::User(TENANT)).await, ns })
    }

    /// The tenant creates Job (or pod) `doc`; it must be accepted.
    async fn tenant_creates<K: Namespaced>(&self, doc: Value) {
        let name = doc["metadata"]["name"].as_str().unwrap_or_default().to_string();
        create::<K>(&self.tenant, self.ns, doc).await.unwrap_or_else(|e| panic!("the tenant creates {name}: {e}"));
    }

    /// The admin creates Job (or pod) `doc`; it must be accepted.
    async fn admin_creates<K: Namespaced>(&self, doc: Value) {
        let name = doc["metadata"]["name"].as_str().unwrap_or_default().to_string();
        create::<K>(&self.admin, self.ns, doc).await.unwrap_or_else(|e| panic!("the admin creates {name}: {e}"));
    }

    async fn phase(&self, group: &str) -> String {
        group_phase(&self.admin, self.ns, group).await.unwrap_or_default()
    }

    /// Group `name` is admitted (Admitted or Running).
    async fn placed(&self, name: &str) -> bool {
        matches!(self.phase(name).await.as_str(), "Admitted" | "Running")
    }

    async fn group_exists(&self, name: &str) -> bool {
        group(&self.admin, self.ns, name).await.is_some()
    }

    /// Waits until Group `name` exists.
    async fn wait_group(&self, secs: u64, what: &str, name: &str) {
        eventually(secs, what, || async move { self.group_exists(name).await.then_some(()) }).await;
    }

    /// A field of Group `name` (`path`: its keys from the top), as the string the apiserver
    /// keeps, "" if it has none.
    async fn group_field(&self, name: &str, path: &[&str]) -> String {
        let Some(mut v) = group(&self.admin, self.ns, name).await else { return String::new() };
        for key in path {
            v = v[key].take();
        }
        match v {
            Value::String(s) => s,
            Value::Null => String::new(),
            other => other.to_string(),
        }
    }

    /// The nodes of the bound pods of `selector`.
    async fn nodes(&self, selector: &str) -> Vec<String> {
        nodes_of(&self.admin, self.ns, selector).await
    }

    /// Waits until `n` pods of `selector` are bound (all on `node`, if one is named).
    async fn wait_bound(&self, secs: u64, what: &str, selector: &str, n: usize, node: Option<&str>) {
        eventually(secs, what, || async move {
            let nodes = self.nodes(selector).await;
            (nodes.len() == n && node.is_none_or(|node| nodes.iter().all(|n| n == node))).then_some(())
        })
        .await;
    }

    async fn warned(&self, secs: u64, what: &str, reason: &str, object: Option<&str>) {
        eventually(secs, what, || async move { has_warning(&self.admin, self.ns, reason, object).await.then_some(()) })
            .await;
    }
}

fn job_pods(job: &str) -> String {
    format!("batch.kubernetes.io/job-name={job}")
}

/// Checks once, saying what held.
fn check(what: &str, holds: bool) {
    assert!(holds, "{what}");
    eprintln!("  ok   {what}");
}

// === 1: a foreign pod on a node muster holds ====================================================

#[tokio::test]
async fn a_foreign_pod_on_a_node_muster_holds_keeps_a_gang_off_it() {
    const FOREIGN: &str = "e2e-tenant-foreign";
    let Some(r) = Replay::start("e2e-tenant-1").await else { return };
    e2e::fresh_namespace(&r.admin, FOREIGN, json!({})).await;
    let mut parts = Parts::new(&r.admin, &[r.ns, FOREIGN]);
    parts.run("1", "a foreign pod on a node muster holds", foreign_pod(&r, FOREIGN)).await;
    parts.finish().await;
}

async fn foreign_pod(r: &Replay, foreign_ns: &str) {
    // The tenant's Job names a service account that does not exist, so the Job controller can
    // never create its pods: muster admits it and holds 6 cpu of node-2 for pods that never run
    // there. (Running pods would do as well for muster, but on KWOK, which has no kubelet
    // admission, the admin's 7-cpu pod would then itself over-commit node-2.)
    let hold = job("hold", 4, "1500m").on_node("node-2").service_account("e2e-no-such-account").run_seconds(600);
    r.tenant_creates::<Job>(hold).await;
    eventually(30, "muster admits the tenant's Job hold (4 x 1.5 cpu) on node-2", || async {
        let nodes: BTreeSet<String> = group(&r.admin, r.ns, "hold").await?["status"]["allocation"]
            .as_array()?
            .iter()
            .filter_map(|a| a["node"].as_str().map(String::from))
            .collect();
        (r.placed("hold").await && nodes == BTreeSet::from(["node-2".to_string()])).then_some(())
    })
    .await;
    check(
        "hold has no pod (its service account does not exist): the room on node-2 is held, not used",
        pods(&r.admin, r.ns, &job_pods("hold")).await.is_empty(),
    );
    let foreign = pod("foreign", "7", json!({"app": "foreign"})).node_name("node-2");
    create::<Pod>(&r.admin, foreign_ns, foreign).await.expect("the admin creates pod foreign");
    let foreign_pods = Api::<Pod>::namespaced(r.admin.clone(), foreign_ns);
    eventually(15, "an admin's 7-cpu pod, spec.nodeName node-2 in an unmanaged namespace, runs", || async {
        let p = foreign_pods.get_opt("foreign").await.ok()??;
        (p.status?.phase.as_deref() == Some("Running")).then_some(())
    })
    .await;
    r.admin_creates::<Job>(job("honest", 4, "1500m").on_node("node-2").run_seconds(5)).await;
    r.wait_group(15, "the honest Job (4 x 1.5 cpu, pinned to node-2) has a Group", "honest").await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let bound = r.nodes(&job_pods("honest")).await.len();
    check(
        &format!("and waits (phase {:?}, {bound} pods bound)", r.phase("honest").await),
        !r.placed("honest").await && bound == 0,
    );
    Api::<Job>::namespaced(r.tenant.clone(), r.ns)
        .delete("hold", &DeleteParams::background())
        .await
        .expect("the tenant deletes its Job hold");
    eprintln!("  ok   the tenant deleted its Job hold");
    throughout(10, "the honest Job is not bound to node-2 beside the foreign pod (7 + 6 > 8 cpu)", || async {
        r.nodes(&job_pods("honest")).await.is_empty()
    })
    .await;
    foreign_pods.delete("foreign", &DeleteParams::background()).await.expect("the admin deletes pod foreign");
    r.wait_bound(
        30,
        "with the foreign pod gone, the honest Job's 4 pods are bound to node-2",
        &job_pods("honest"),
        4,
        Some("node-2"),
    )
    .await;
}

// === 2: a plain-pod group sized from its first pod ===============================================

#[tokio::test]
async fn a_plain_pod_group_is_not_sized_from_its_first_pod() {
    let Some(r) = Replay::start("e2e-tenant-2").await else { return };
    let mut parts = Parts::new(&r.admin, &[r.ns]);
    parts.run("2", "a plain-pod group sized from its first pod", first_pod_sizes(&r)).await;
    parts.finish().await;
}

async fn first_pod_sizes(r: &Replay) {
    let labels = json!({"muster.dev/queue": "default", "muster.dev/group": "g2", "muster.dev/group-size": "4"});
    r.tenant_creates::<Pod>(pod("g2-0", "10m", labels.clone()).run_seconds(600)).await;
    eprintln!("  ok   pod g2-0 of group g2 (size 4) asks 10m cpu");
    tokio::time::sleep(Duration::from_secs(2)).await; // g2-0 is the pod muster sees first
    let mut accepted = 0;
    for i in 1..=3 {
        let doc = pod(&format!("g2-{i}"), "7", labels.clone()).run_seconds(600);
        match create::<Pod>(&r.tenant, r.ns, doc).await {
            Ok(_) => {
                accepted += 1;
                eprintln!("  ..   pod g2-{i} (7 cpu) accepted by the webhook");
            }
            Err(e) => {
                let message = refused(&format!("pod g2-{i} (7 cpu)"), Err::<(), _>(e));
                check(&format!("pod g2-{i}'s refusal mentions resources"), message.to_lowercase().contains("resource"));
            }
        }
    }
    throughout(10, "no pod of g2 is bound and its Group is not admitted", || async {
        r.nodes("muster.dev/group=g2").await.is_empty() && !r.placed("g2").await
    })
    .await;
    if accepted > 0 {
        let what = format!("{accepted} pod(s) asking more than g2-0 got in: a Warning event InvalidGroup");
        r.warned(10, &what, "InvalidGroup", None).await;
    }
}

// === 3: native sidecars and pod-level resources ==================================================

#[tokio::test]
async fn sidecars_and_pod_level_resources_count() {
    let Some(r) = Replay::start("e2e-tenant-3").await else { return };
    let mut parts = Parts::new(&r.admin, &[r.ns]);
    parts.run("3a", "native sidecars count beside the containers", sidecars(&r)).await;
    parts.run("3b", "pod-level resources replace the containers' sum", pod_level(&r)).await;
    parts.finish().await;
}

/// Group `name` asks 5 cpu per member, in any form the apiserver may keep.
async fn asks_five_cpu(r: &Replay, name: &str) -> bool {
    matches!(r.group_field(name, &["spec", "resources", "cpu"]).await.as_str(), "5" | "5000m" | "5.0")
}

async fn sidecars(r: &Replay) {
    r.tenant_creates::<Job>(job("sidecar", 2, "1").sidecar("4").run_seconds(600)).await;
    let what = "the Group of a Job with a 4-cpu native sidecar and a 1-cpu container asks 5 cpu per member";
    eventually(20, what, || async { asks_five_cpu(r, "sidecar").await.then_some(()) }).await;
    r.wait_bound(30, "both pods are bound", &job_pods("sidecar"), 2, None).await;
    let nodes = r.nodes(&job_pods("sidecar")).await;
    check(&format!("on two nodes (5 + 5 > 8 cpu): {nodes:?}"), nodes.iter().collect::<BTreeSet<_>>().len() == 2);
}

async fn pod_level(r: &Replay) {
    // The apiserver alone decides (no queue label: no muster webhook): it refuses the field, or
    // drops it when the PodLevelResources feature is off.
    let probe: Job = serde_json::from_value(job("probe", 1, "1").pod_cpu("5").queue(None)).unwrap();
    let dry_run = PostParams { dry_run: true, ..PostParams::default() };
    let kept = match Api::<Job>::namespaced(r.admin.clone(), r.ns).create(&dry_run, &probe).await {
        Err(e) => return eprintln!("  ok   SKIPPED: the apiserver refuses pod-level resources: {e}"),
        Ok(j) => j.spec.and_then(|s| s.template.spec?.resources?.requests?.get("cpu").cloned()),
    };
    if kept.is_none() {
        return eprintln!("  ok   SKIPPED: the apiserver drops pod-level resources (feature PodLevelResources off)");
    }
    r.tenant_creates::<Job>(job("podlevel", 2, "1").pod_cpu("5").run_seconds(600)).await;
    let what = "the Group of a Job whose pods ask 5 cpu at pod level (1-cpu container) asks 5 cpu per member";
    eventually(20, what, || async { asks_five_cpu(r, "podlevel").await.then_some(()) }).await;
    r.wait_bound(30, "both pods are bound", &job_pods("podlevel"), 2, None).await;
}

// === 4: refusals that name the right fix =========================================================

#[tokio::test]
async fn refusals_name_the_right_fix() {
    let Some(r) = Replay::start("e2e-tenant-4").await else { return };
    let mut parts = Parts::new(&r.admin, &[r.ns]);
    parts.run("4a", "a pod with a queue but no group is refused, naming muster.dev/group", queue_only(&r)).await;
    parts.run("4b", "a refusal does not ask for the queue label the pod has", pinned(&r)).await;
    parts.run("4c", "a plain pod cannot join a Job's group", stray_in_jobs_group(&r)).await;
    parts.finish().await;
}

async fn queue_only(r: &Replay) {
    let doc = pod("queue-only", "10m", json!({"muster.dev/queue": "default"}));
    let message =
        refused("a pod with muster.dev/queue and no muster.dev/group", create::<Pod>(&r.tenant, r.ns, doc).await);
    check("the message names muster.dev/group", message.contains("muster.dev/group"));
}

/// Whether `message` tells to give or add the muster.dev/queue label: "give" or "add", then, before
/// the clause ends ('.' or ';'), "muster.dev/queue label" or "label muster.dev/queue".
fn advises_queue_label(message: &str) -> bool {
    let message = message.to_lowercase();
    ["give", "add"].iter().any(|verb| {
        message.match_indices(verb).any(|(at, _)| {
            let rest = &message[at..];
            let clause_end = rest.find(['.', ';']).unwrap_or(rest.len());
            ["muster.dev/queue label", "label muster.dev/queue"]
                .iter()
                .any(|phrase| rest.find(phrase).is_some_and(|p| p <= clause_end))
        })
    })
}

#[test]
fn advice_to_add_the_queue_label_is_told_from_other_advice() {
    assert!(advises_queue_label("pod pinned: Add the muster.dev/queue label to it"));
    assert!(advises_queue_label("give it label muster.dev/queue"));
    assert!(!advises_queue_label("it has label muster.dev/queue; give it a muster.dev/group label"));
    assert!(!advises_queue_label("spec.nodeName is set; muster binds its pods itself. remove spec.nodeName"));
}

async fn pinned(r: &Replay) {
    let doc = pod("pinned", "10m", json!({"muster.dev/queue": "default"})).node_name("node-1");
    let message = refused("a pod with muster.dev/queue and spec.nodeName", create::<Pod>(&r.tenant, r.ns, doc).await);
    check("the message does not tell it to add the muster.dev/queue label it has", !advises_queue_label(&message));
}

// A Job's group is its own: a plain pod naming it would run on a member placed for the Job.
async fn stray_in_jobs_group(r: &Replay) {
    r.tenant_creates::<Job>(job("owned", 2, "10m")).await;
    r.wait_group(15, "Job owned's Group exists", "owned").await;
    let doc = pod("owned-stray", "10m", json!({"muster.dev/queue": "default", "muster.dev/group": "owned"}));
    let message = refused(
        "a plain pod labelled muster.dev/group=owned (Job owned's group)",
        create::<Pod>(&r.tenant, r.ns, doc).await,
    );
    check(
        "the message says the group is a workload's, and not whose (a review can be forged)",
        message.contains("group owned is a workload's group") && !message.contains("Job owned"),
    );
}

// === 5: Groups are muster's ======================================================================
// No replay of an in-place resize (pods/resize): kube-apiserver (1.35 and 1.37) refuses it on KWOK
// nodes before admission ("Pod running on node without support for resize"); the webhook's rule
// is tested in crates/muster-webhook/tests/tenant.rs.

#[tokio::test]
async fn groups_are_musters() {
    let Some(r) = Replay::start("e2e-tenant-5").await else { return };
    let role: ClusterRole = serde_json::from_value(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": GROUP_RIGHTS},
        "rules": [{"apiGroups": ["muster.dev"], "resources": ["groups", "groups/status"],
                   "verbs": ["get", "list", "watch", "patch", "update", "delete"]}]
    }))
    .unwrap();
    let roles = Api::<ClusterRole>::all(r.admin.clone());
    roles.patch(GROUP_RIGHTS, &PatchParams::apply(MANAGER).force(), &Patch::Apply(&role)).await.expect("ClusterRole");
    bind_cluster_role(&r.admin, r.ns, "tenant-groups", GROUP_RIGHTS, TENANT).await;
    let mut parts = Parts::new(&r.admin, &[r.ns]);
    parts.run("5a", "the tenant cannot mark its running Group Succeeded", forged_by_tenant(&r)).await;
    parts.run("5b", "the tenant cannot delete its Group", deleted_by_tenant(&r)).await;
    parts.run("5c", "muster restores a forged Group status", forged_as_muster(&r)).await;
    parts.run("5d", "muster recreates a deleted Group", deleted_as_muster(&r)).await;
    let _ = roles.delete(GROUP_RIGHTS, &DeleteParams::default()).await;
    parts.finish().await;
}

async fn wait_running(r: &Replay) {
    wait_phase(&r.admin, r.ns, "run5", 30, &["Running"]).await;
}

async fn forged_by_tenant(r: &Replay) {
    r.tenant_creates::<Job>(job("run5", 2, "500m")).await;
    wait_running(r).await;
    let patch = json!({"status": {"phase": "Succeeded"}});
    let answer = groups(&r.tenant, r.ns).patch_status("run5", &PatchParams::default(), &Patch::Merge(&patch)).await;
    refused("the tenant patching its Group's status to Succeeded", answer);
    let phase = r.phase("run5").await;
    check(&format!("the Group is still Running ({phase})"), phase == "Running");
}

/// Group run5 exists and is not being deleted.
async fn run5_not_deleting(r: &Replay) -> bool {
    r.group_exists("run5").await && r.group_field("run5", &["metadata", "deletionTimestamp"]).await.is_empty()
}

async fn deleted_by_tenant(r: &Replay) {
    check("there is a Group run5 to delete", r.group_exists("run5").await);
    let answer = groups(&r.tenant, r.ns).delete("run5", &DeleteParams::background()).await;
    refused("the tenant deleting its Group", answer);
    check("the Group is still there, not being deleted", run5_not_deleting(r).await);
}

async fn forged_as_muster(r: &Replay) {
    wait_running(r).await;
    // A merge patch of the status as muster sends it: straight to groups/status, which muster's
    // RBAC lets it patch but not read.
    let muster = e2e::muster_client().await;
    let patch = json!({"status": {"phase": "Succeeded", "allocation": []}});
    let forged: DynamicObject = groups(&muster, r.ns)
        .patch_status("run5", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("muster's identity patches the Group's status");
    let status = &forged.data["status"];
    let allocation_empty = status["allocation"].as_array().is_none_or(|a| a.is_empty());
    check(
        &format!("muster's identity forged the status (now {status})"),
        status["phase"] == "Succeeded" && allocation_empty,
    );
    wait_phase(&r.admin, r.ns, "run5", 10, &["Running", "Admitted"]).await;
    let nodes = r.group_field("run5", &["status", "allocation"]).await;
    eprintln!("  ..   Group run5: {}, allocation {nodes}", r.phase("run5").await);
}

async fn deleted_as_muster(r: &Replay) {
    let uid = r.group_field("run5", &["metadata", "uid"]).await;
    check("there is a Group run5 to delete", !uid.is_empty());
    groups(&e2e::muster_client().await, r.ns)
        .delete("run5", &DeleteParams::background())
        .await
        .expect("muster's identity deletes Group run5");
    eprintln!("  ok   muster's identity deleted Group run5");
    eventually(10, "the Group is back (a new object, not being deleted)", || async {
        (run5_not_deleting(r).await && r.group_field("run5", &["metadata", "uid"]).await != uid).then_some(())
    })
    .await;
    wait_phase(&r.admin, r.ns, "run5", 10, &["Running"]).await;
    let job = Api::<Job>::namespaced(r.admin.clone(), r.ns).get_opt("run5").await.expect("the Job is read");
    check("the Job still exists", job.is_some());
    let listing = muster_queue(r.ns);
    eprintln!("{}", listing.lines().map(|l| format!("       {l}")).collect::<Vec<_>>().join("\n"));
    let lists_job = listing.lines().any(|row| row.split_whitespace().next() == Some("run5"));
    check("muster queue lists the Job", lists_job);
}

/// What `muster queue -n NS` prints, errors included (MUSTER_BIN, against the harness cluster).
fn muster_queue(ns: &str) -> String {
    let bin = std::env::var_os("MUSTER_BIN").expect("set MUSTER_BIN to the muster binary (rust_e2e does)");
    let kubeconfig = std::env::var_os("MUSTER_E2E_KUBECONFIG").expect("MUSTER_E2E_KUBECONFIG is set");
    let out = std::process::Command::new(bin)
        .arg("queue")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["-n", ns])
        .output()
        .expect("muster queue runs");
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

// === 6: room held for pods that never come =======================================================

#[tokio::test]
async fn no_room_is_held_for_pods_that_never_come() {
    let Some(r) = Replay::start("e2e-tenant-6").await else { return };
    let mut parts = Parts::new(&r.admin, &[r.ns]);
    parts.run("6a", "a Job holds room for the pods it can have at once", at_once(&r)).await;
    parts.run("6b", "a plain group is not admitted before its pods exist", before_pods_exist(&r)).await;
    parts.run("6c", "a pod for muster without group labels is reported", pod_without_group(&r)).await;
    parts.run("6d", "a pod of a Job without the queue label, for muster, is reported", job_without_queue(&r)).await;
    parts.finish().await;
}

async fn at_once(r: &Replay) {
    let mut half = job("half", 4, "10m").run_seconds(3);
    half["spec"]["completions"] = json!(2);
    r.tenant_creates::<Job>(half).await;
    let what = "a Job of parallelism 4 and completions 2 is a Group of min 2 (it never has more than 2 pods)";
    eventually(15, what, || async { (r.group_field("half", &["spec", "members", "min"]).await == "2").then_some(()) })
        .await;
}

async fn before_pods_exist(r: &Replay) {
    let labels = json!({"muster.dev/queue": "default", "muster.dev/group": "g50", "muster.dev/group-size": "50"});
    for i in 0..5 {
        r.tenant_creates::<Pod>(pod(&format!("g50-{i}"), "600m", labels.clone()).run_seconds(600)).await;
    }
    eprintln!("  ok   5 pods of a plain group of size 50 x 600m cpu (30 of the cluster's 32 cpu)");
    r.admin_creates::<Job>(job("honest", 4, "2").run_seconds(600)).await;
    eprintln!("  ok   an honest Job of 4 x 2 cpu, which needs room the group would hold");
    throughout(10, "no pod of g50 is bound and its Group is not admitted", || async {
        r.nodes("muster.dev/group=g50").await.is_empty() && !r.placed("g50").await
    })
    .await;
    eventually(10, "the Group's status says how many pods exist (\"5 of\")", || async {
        let message = r.group_field("g50", &["status", "message"]).await;
        let conditions = r.group_field("g50", &["status", "conditions"]).await;
        (message.contains("5 of") || conditions.contains("5 of")).then_some(())
    })
    .await;
    eprintln!("  ..   Group g50: {}: {}", r.phase("g50").await, r.group_field("g50", &["status", "message"]).await);
    r.wait_bound(30, "the honest Job runs (4 pods bound)", &job_pods("honest"), 4, None).await;
}

async fn pod_without_group(r: &Replay) {
    let stray = || pod("stray", "10m", json!({"app": "stray"})).scheduler("muster");
    match create::<Pod>(&r.tenant, r.ns, stray()).await {
        Ok(_) => eprintln!("  ok   the tenant created pod stray for muster's scheduler without muster labels"),
        Err(e) => {
            refused("the tenant's pod for muster's scheduler without muster labels", Err::<(), _>(e));
            if let Err(e) = create::<Pod>(&r.admin, r.ns, stray()).await {
                refused("and the admin's too, so no such pod can wait unseen", Err::<(), _>(e));
                return;
            }
            eprintln!("  ok   the admin created it");
        }
    }
    r.warned(10, "a Warning event MissingGroup on pod stray", "MissingGroup", Some("stray")).await;
}

// A Job without the queue label whose template names muster's scheduler: nobody places its pod.
async fn job_without_queue(r: &Replay) {
    r.tenant_creates::<Job>(job("unqueued", 1, "10m").queue(None).scheduler("muster")).await;
    eprintln!("  ok   the tenant created Job unqueued (no queue label) whose pods name muster's scheduler");
    let pod = eventually(10, "the Job controller makes a pod for Job unqueued", || async {
        pods(&r.admin, r.ns, &job_pods("unqueued")).await.first().map(|p| p.name_any())
    })
    .await;
    r.warned(10, &format!("a Warning event MissingGroup on its pod {pod}"), "MissingGroup", Some(&pod)).await;
}

// === 7: quantities in the forms the apiserver keeps ==============================================

#[tokio::test]
async fn quantities_count_in_the_forms_the_apiserver_keeps() {
    let Some(r) = Replay::start("e2e-tenant-7").await else { return };
    let mut parts = Parts::new(&r.admin, &[r.ns]);
    parts
        .run("7a", "memory of 20e9 bytes counts", pinned_pair(&r, "exp", "10m", "20e9", "memory", "20000000000"))
        .await;
    parts.run("7b", "cpu of 4000001u counts", pinned_pair(&r, "micro", "4000001u", "10Mi", "cpu", "4001m")).await;
    parts.run("7c", "a queue's memory quota holds for 20e9 bytes", quota_holds(&r)).await;
    let _ = Api::<Queue>::all(r.admin.clone()).delete(MEMORY_QUEUE, &DeleteParams::default()).await;
    parts.finish().await;
}

/// A Job of 2 pods pinned to node-1, too big for it together: refused, or its Group counts
/// `resource` as `amount` per member and its pods are never both bound there.
async fn pinned_pair(r: &Replay, name: &str, cpu: &str, memory: &str, resource: &str, amount: &str) {
    let doc = job(name, 2, cpu).on_node("node-1").memory(memory).run_seconds(600);
    let what = format!("Job {name} (2 x cpu {cpu}, memory {memory}, pinned to node-1)");
    if let Err(e) = create::<Job>(&r.tenant, r.ns, doc).await {
        refused(&what, Err::<(), _>(e));
        return;
    }
    r.wait_group(15, &format!("{what} has a Group"), name).await;
    eventually(10, &format!("its Group counts {resource} {amount} per member"), || async {
        (r.group_field(name, &["spec", "resources", resource]).await == amount).then_some(())
    })
    .await;
    throughout(10, "its two pods are never both bound to node-1", || async {
        r.nodes(&job_pods(name)).await.iter().filter(|n| *n == "node-1").count() < 2
    })
    .await;
}

async fn quota_holds(r: &Replay) {
    let queue = json!({
        "apiVersion": "muster.dev/v1alpha1", "kind": "Queue", "metadata": {"name": MEMORY_QUEUE},
        "spec": {"quotas": {"memory": {"nominal": "30Gi"}}, "namespaceSelector": {"namespaces": [r.ns]}}
    });
    Api::<DynamicObject>::all_with(r.admin.clone(), &ApiResource::erase::<Queue>(&()))
        .patch(MEMORY_QUEUE, &PatchParams::apply(MANAGER).force(), &Patch::Apply(&queue))
        .await
        .expect("the Queue is accepted");
    let doc = job("overquota", 2, "10m").queue(Some(MEMORY_QUEUE)).memory("20e9");
    let message = refused(
        &format!("a Job of 2 x 20e9 bytes in queue {MEMORY_QUEUE} (memory quota 30Gi)"),
        create::<Job>(&r.tenant, r.ns, doc).await,
    );
    check("the message names the queue's memory limit", message.contains("memory 30Gi"));
}
