//! A calendar Reservation on a real control plane: 4 KWOK nodes of 8 cpu, two labelled
//! `pool=reserved` (scenarios/clusters/reservation-4.yaml). The Reservation `e2e-training` sets
//! the reserved pool aside for queue A over a window that opens about 45 s after it is made and
//! lasts 60 s, evicting others' work at its opening (`atStart: Evict`). Before the window queue
//! B's Jobs that would run into it are kept off the pool (they go to the shared nodes, or wait,
//! told why), while one that declares it ends before the window may use the pool. It then outruns
//! its declared run time (queue B's run-time limit is advisory) and is evicted whole when the
//! window opens: its Job suspended again, an Evicted event naming the reservation. In the window
//! queue B's Job still waits, `muster why` naming the reservation, and queue A's gang runs on the
//! reserved pool. The Reservation's status lists the window and its nodes, Accepted and Active; an
//! invalid one is refused with Accepted=False naming the field, and so is one the apiserver takes
//! but muster cannot read (a start with ten fractional digits), the others still honoured. A
//! Reservation of an amount keeps its node, with its queue's Job inside, when a Queue changes and
//! the running engine takes the new configuration.
//!
//! hack/e2e/test-muster-reservation.sh starts muster and the over-commit checker around this test.

mod e2e;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use e2e::eventually;
use e2e::objects::{group, nodes_of, wait_phase};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Event, Namespace};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::ApiResource;
use muster_k8s::{Queue, Reservation};
use serde_json::{Value, json};

const A: &str = "e2e-resv-a";
const B: &str = "e2e-resv-b";
const RESERVATION: &str = "e2e-training";
const BAD: &str = "e2e-no-length";
const UNREADABLE: &str = "e2e-ten-digits";
const AMOUNT: &str = "e2e-amount";
const MANAGER: &str = "muster-e2e";
/// Seconds from the Reservation's making to its window's opening: room for the checks before it.
const LEAD_S: i64 = 45;
const WINDOW_S: i64 = 60;

#[tokio::test]
async fn a_calendar_reservation_keeps_its_pool_for_its_queue_over_its_window() {
    let Some(client) = e2e::client().await else { return };
    fresh_namespaces_and_queue_a(&client).await;
    // No reservations of its own (best effort), so B's waiting Job is told what holds it; an
    // advisory run-time limit, so that a Job may outrun what it declared; no pods made ahead of
    // admission, so that an evicted Job stays suspended while it waits.
    let b = json!({"policy": {"kind": "bestEffortFifo"}, "runTimeLimit": {"mode": "Advisory"}, "createPodsAheadSeconds": 0});
    apply(&client, queue(B, b)).await;

    // (d) The Reservation, and one refused for a window without a length.
    let made = Instant::now();
    let start = Timestamp::now().checked_add(SignedDuration::from_secs(LEAD_S)).unwrap();
    let end = start.checked_add(SignedDuration::from_secs(WINDOW_S)).unwrap();
    apply(&client, reservation(RESERVATION, start, end)).await;
    apply(&client, reservation(BAD, start, start)).await;
    let reservations = Api::<Reservation>::all(client.clone());
    let refused = eventually(30, "the Reservation without a length is refused", || async {
        condition(&reservations.get(BAD).await.ok()?, "Accepted").filter(|(s, _)| s == "False")
    })
    .await;
    assert!(refused.1.starts_with("spec.end: ") && refused.1.contains("is not after spec.start"), "{refused:?}");
    // The CRD's date-time format allows any number of fractional digits; muster reads nine.
    let unreadable = Api::<DynamicObject>::all_with(client.clone(), &ApiResource::erase::<Reservation>(&()));
    let mut doc = reservation(UNREADABLE, start, end);
    doc["spec"]["start"] = json!(start.strftime("%Y-%m-%dT%H:%M:%S.1234567891Z").to_string());
    let pp = PatchParams::apply(MANAGER).force();
    unreadable.patch(UNREADABLE, &pp, &Patch::Apply(&doc)).await.expect("the apiserver takes ten digits");
    let unread = eventually(30, "the Reservation muster cannot read is refused", || async {
        let o = unreadable.get(UNREADABLE).await.ok()?;
        let conditions = o.data["status"]["conditions"].as_array()?.clone();
        let accepted = conditions.into_iter().find(|c| c["type"] == "Accepted" && c["status"] == "False")?;
        accepted["message"].as_str().map(str::to_string)
    })
    .await;
    assert!(unread.contains("muster cannot read it"), "{unread}");
    let held = eventually(30, "the Reservation is accepted and holds its window on the reserved pool", || async {
        let r = reservations.get(RESERVATION).await.ok()?;
        condition(&r, "Accepted").filter(|(s, _)| s == "True")?;
        let w = r.status?.windows.into_iter().next()?;
        (!w.nodes.is_empty()).then_some(w)
    })
    .await;
    assert_eq!((held.start.0.as_second(), held.end.0.as_second()), (start.as_second(), end.as_second()));
    assert_eq!(held.nodes, ["reserved-0", "reserved-1"], "{held:?}");
    let active = condition(&reservations.get(RESERVATION).await.unwrap(), "Active").unwrap();
    assert_eq!(active.0, "False", "{active:?}");

    // (a) Before the window: B's Jobs that would run into it stay off the pool.
    create_job(&client, B, "long", 2, 300, 300).await;
    wait_phase(&client, B, "long", 60, &["Running"]).await;
    let long = eventually(30, "long's two pods are bound", || bound(&client, B, "long", 2)).await;
    assert_eq!(long, ["shared-0", "shared-1"].map(String::from).into(), "it would run into the window");
    // One that declares 10 s ends before the window: it may use the pool (it will outrun that).
    create_job(&client, B, "overrun", 1, 10, 600).await;
    wait_phase(&client, B, "overrun", 60, &["Running"]).await;
    let overrun = eventually(30, "overrun's pod is bound", || bound(&client, B, "overrun", 1)).await;
    assert!(overrun.iter().all(|n| n.starts_with("reserved-")), "it ends before the window: {overrun:?}");
    create_job(&client, B, "waits", 1, 300, 300).await;
    let why = eventually(30, "waits is told the reservation holds the room it would fit in", || async {
        let m = message(&client, B, "waits").await?;
        m.contains(&format!("set aside by calendar reservation {RESERVATION}")).then_some(m)
    })
    .await;
    assert!(nodes_of(&client, B, "job-name=waits").await.is_empty(), "{why}");
    let before_window = Duration::from_secs(LEAD_S as u64).saturating_sub(made.elapsed());
    assert!(before_window > Duration::from_secs(3), "the checks before the window took too long to mean anything");

    // (c) The window opens: overrun is evicted whole and its Job suspended again.
    eventually(LEAD_S as u64 + 30, "the Reservation is Active", || async {
        condition(&reservations.get(RESERVATION).await.ok()?, "Active").filter(|(s, _)| s == "True")
    })
    .await;
    let jobs = Api::<Job>::namespaced(client.clone(), B);
    eventually(30, "overrun's Job is suspended again", || async {
        let j = jobs.get("overrun").await.ok()?;
        j.spec?.suspend.filter(|s| *s)
    })
    .await;
    eventually(30, "overrun's pod is gone from the reserved pool", || async {
        nodes_of(&client, B, "job-name=overrun").await.is_empty().then_some(())
    })
    .await;
    let said = eventually(30, "an Evicted event on overrun names the reservation", || evicted_note(&client)).await;
    assert!(said.contains(&format!("reservation {RESERVATION} opened")), "{said}");
    let long_now = bound(&client, B, "long", 2).await;
    assert_eq!(long_now, Some(long), "work off the reserved pool runs on");

    // (b) In the window: B's Job waits, and `muster why` says why while the pool is still free
    // (once A's gang fills it, the reason is the lack of room); then A's gang runs on the pool.
    let why = eventually(30, "muster why waits names the reservation", || async {
        let why = muster_why(B, "waits");
        why.contains(&format!("calendar reservation {RESERVATION}")).then_some(why)
    })
    .await;
    assert!(nodes_of(&client, B, "job-name=waits").await.is_empty(), "{why}");
    create_job(&client, A, "gang", 2, 30, 20).await;
    wait_phase(&client, A, "gang", 60, &["Running", "Succeeded"]).await;
    let gang = eventually(30, "the gang's two pods are bound", || bound(&client, A, "gang", 2)).await;
    assert_eq!(gang, ["reserved-0", "reserved-1"].map(String::from).into());
    let waits = group(&client, B, "waits").await.unwrap();
    assert_eq!(waits["status"]["phase"], "Queued", "{waits}");
    assert!(nodes_of(&client, B, "job-name=waits").await.is_empty());
    let overrun_phase = group(&client, B, "overrun").await.unwrap();
    assert_eq!(overrun_phase["status"]["phase"], "Queued", "evicted and queued again: {overrun_phase}");

    clean_up(&client).await;
}

/// A Reservation of an amount, a node's worth for queue A over an open window, with queue A's Job
/// running inside it: a Queue changed makes muster recover its engine from the store, which
/// makes the window again. It goes back on its node, the Job inside it, so queue B still has the
/// three other nodes; placed anew beside the Job, it would hold a second node until it ends.
#[tokio::test]
async fn a_reservation_of_an_amount_keeps_its_node_when_made_again() {
    let Some(client) = e2e::client().await else { return };
    fresh_namespaces_and_queue_a(&client).await;
    apply(&client, queue(B, json!({"policy": {"kind": "bestEffortFifo"}, "createPodsAheadSeconds": 0}))).await;
    let start = Timestamp::now();
    let end = start.checked_add(SignedDuration::from_secs(600)).unwrap();
    let mut amount = reservation(AMOUNT, start, end);
    let spec = amount["spec"].as_object_mut().unwrap();
    spec.remove("nodeSelector");
    spec.insert("amount".into(), json!({"members": 1, "resources": {"cpu": "8"}}));
    apply(&client, amount).await;
    let reservations = Api::<Reservation>::all(client.clone());
    let window_nodes = || async {
        let w = reservations.get(AMOUNT).await.ok()?.status?.windows.into_iter().next()?;
        (!w.nodes.is_empty()).then_some(w.nodes)
    };
    let held = eventually(30, "the window holds a node", window_nodes).await;
    assert_eq!(held.len(), 1, "{held:?}");

    // Queue B fills the three other nodes for a while; queue A's Job then runs in the window.
    create_job(&client, B, "while", 3, 40, 40).await;
    eventually(60, "while's three pods are bound", || bound(&client, B, "while", 3)).await;
    create_job(&client, A, "ours", 1, 600, 600).await;
    let ours = eventually(60, "ours is bound", || bound(&client, A, "ours", 1)).await;
    assert_eq!(ours.iter().collect::<Vec<_>>(), held.iter().collect::<Vec<_>>(), "the only room left is the window's");
    wait_phase(&client, B, "while", 90, &["Succeeded"]).await;

    // A Queue changed: the running engine takes the new configuration and makes the window again.
    apply(&client, queue(B, json!({"policy": {"kind": "bestEffortFifo"}, "createPodsAheadSeconds": 1}))).await;
    let queues = Api::<Queue>::all(client.clone());
    eventually(60, "muster runs with queue B's new spec", || async {
        let q = queues.get(B).await.ok()?;
        let accepted = q.status?.conditions.into_iter().find(|c| c.type_ == "Accepted")?;
        (accepted.observed_generation? == q.metadata.generation?).then_some(())
    })
    .await;
    let again = eventually(30, "the window holds a node again", window_nodes).await;
    assert_eq!(again, held, "made again on its node, ours inside it");
    create_job(&client, B, "after", 3, 300, 300).await;
    let after = eventually(60, "after's three pods are bound", || bound(&client, B, "after", 3)).await;
    assert!(!after.iter().any(|n| held.contains(n)), "{after:?} beside the window on {held:?}");

    clean_up(&client).await;
}

/// Namespaces A and B made afresh, and queue A (queue B is each test's own).
async fn fresh_namespaces_and_queue_a(client: &Client) {
    clean_up(client).await;
    for ns in [A, B] {
        e2e::fresh_namespace(client, ns, json!({})).await;
    }
    apply(client, queue(A, json!({}))).await;
}

/// What a test leaves: namespaces, Queues and Reservations.
async fn clean_up(client: &Client) {
    let dp = DeleteParams::default();
    for name in [RESERVATION, BAD, UNREADABLE, AMOUNT] {
        let _ = Api::<Reservation>::all(client.clone()).delete(name, &dp).await;
    }
    for ns in [A, B] {
        let _ = Api::<Namespace>::all(client.clone()).delete(ns, &dp).await;
        let _ = Api::<Queue>::all(client.clone()).delete(ns, &dp).await;
    }
}

/// Queue `ns` for namespace `ns`, with `spec` besides.
fn queue(ns: &str, mut spec: Value) -> Value {
    spec["namespaceSelector"] = json!({"namespaces": [ns]});
    json!({"apiVersion": "muster.dev/v1alpha1", "kind": "Queue", "metadata": {"name": ns}, "spec": spec})
}

/// The reserved pool for queue A over [start, end), evicting others' work at its opening.
fn reservation(name: &str, start: Timestamp, end: Timestamp) -> Value {
    let at = |t: Timestamp| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
    json!({"apiVersion": "muster.dev/v1alpha1", "kind": "Reservation", "metadata": {"name": name},
           "spec": {"queues": [A], "nodeSelector": {"pool": "reserved"}, "start": at(start), "end": at(end),
                    "atStart": "Evict"}})
}

/// Applies a cluster-scoped muster object (a Queue or a Reservation) as the admin.
async fn apply(client: &Client, doc: Value) {
    let kind = doc["kind"].as_str().unwrap().to_string();
    let name = doc["metadata"]["name"].as_str().unwrap().to_string();
    let pp = PatchParams::apply(MANAGER).force();
    let r = match kind.as_str() {
        "Queue" => Api::<Queue>::all(client.clone()).patch(&name, &pp, &Patch::Apply(&doc)).await.map(drop),
        _ => Api::<Reservation>::all(client.clone()).patch(&name, &pp, &Patch::Apply(&doc)).await.map(drop),
    };
    r.unwrap_or_else(|e| panic!("the {kind} {name} is accepted: {e}"));
}

/// The status and message of condition `kind` of a Reservation.
fn condition(r: &Reservation, kind: &str) -> Option<(String, String)> {
    let c = r.status.as_ref()?.conditions.iter().find(|c| c.type_ == kind)?;
    Some((c.status.clone(), c.message.clone()))
}

/// A Job of `pods` whole-node pods (8 cpu) in queue `ns`, declaring `declared` seconds and running
/// `run` seconds on KWOK.
async fn create_job(client: &Client, ns: &str, name: &str, pods: i32, declared: u32, run: u32) {
    let job: Job = serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "labels": {"muster.dev/queue": ns},
                     "annotations": {"muster.dev/duration-seconds": declared.to_string()}},
        "spec": {"parallelism": pods, "completions": pods, "backoffLimit": 0, "template": {
            "metadata": {"annotations": {"kwok.muster.dev/run-seconds": run.to_string(), "e2e.muster.dev/test": "true"}},
            "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 0, "containers": [{
                "name": "main", "image": "kwok-fake", "resources": {"requests": {"cpu": "8", "memory": "1Gi"}}}]}}}
    }))
    .unwrap();
    Api::<Job>::namespaced(client.clone(), ns).create(&PostParams::default(), &job).await.expect("the Job is created");
}

/// The nodes of Job `job`'s bound pods, once `pods` of them are bound.
async fn bound(client: &Client, ns: &str, job: &str, pods: usize) -> Option<BTreeSet<String>> {
    let nodes = nodes_of(client, ns, &format!("job-name={job}")).await;
    (nodes.len() == pods).then(|| nodes.into_iter().collect())
}

/// The message of Group `ns/name`'s status.
async fn message(client: &Client, ns: &str, name: &str) -> Option<String> {
    Some(group(client, ns, name).await?["status"]["message"].as_str()?.to_string())
}

/// The note of the Evicted event on Job overrun, if there is one.
async fn evicted_note(client: &Client) -> Option<String> {
    let params = ListParams::default().fields("reason=Evicted,type=Warning,involvedObject.name=overrun");
    let events = Api::<Event>::namespaced(client.clone(), B).list(&params).await.ok()?.items;
    events.into_iter().find_map(|e| e.message)
}

/// What `muster why -n NS JOB` prints, errors included (MUSTER_BIN, against the harness cluster).
fn muster_why(ns: &str, job: &str) -> String {
    let bin = std::env::var_os("MUSTER_BIN").expect("set MUSTER_BIN to the muster binary (rust_e2e does)");
    let kubeconfig = std::env::var_os("MUSTER_E2E_KUBECONFIG").expect("MUSTER_E2E_KUBECONFIG is set");
    let out = std::process::Command::new(bin)
        .arg("why")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["-n", ns, job])
        .output()
        .expect("muster why runs");
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}
