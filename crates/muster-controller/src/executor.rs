//! Carries the brain's actions out against the API server. Bindings run many at once (they
//! decide how fast a group starts), a plain pod's ungating first in the same task; Job patches,
//! Group objects and pod deletions run in order, one at a time; statuses are coalesced per group
//! (only the latest is written); events never hold anything up.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use futures::stream::{self, StreamExt};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Binding, ObjectReference, Pod};
use k8s_openapi::api::scheduling::v1beta1::PodGroup as NativePodGroup;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::core::DynamicObject;
use kube::runtime::events::{Event as KubeEvent, EventType as KubeEventType, Recorder, Reporter};
use kube::{Api, Client};
use muster_k8s::{Group, GroupState, GroupStatus, Queue, QueueStatus, labels};
use muster_queue::GroupKey;
use serde_json::json;
use tokio::sync::{Semaphore, mpsc};
use tracing::{debug, warn};

use crate::allocate::allocate_claim;
use crate::brain::{Action, Event, EventType, Subject};
use crate::convert::MEMBER;
use crate::metrics::{EventOutcome, Metrics};
use crate::{Message, Options};

fn is_code(e: &kube::Error, code: u16) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == code)
}

pub async fn run(
    client: Client,
    opts: Options,
    mut rx: mpsc::UnboundedReceiver<Action>,
    back: Sender<Message>,
    metrics: Arc<Metrics>,
) {
    let (job_tx, job_rx) = mpsc::unbounded_channel();
    let (status_tx, status_rx) = mpsc::unbounded_channel();
    let (event_tx, event_rx) = mpsc::channel(10_000);
    let jobs = tokio::spawn(job_writer(client.clone(), opts.concurrency, job_rx));
    let statuses = tokio::spawn(status_writer(client.clone(), opts.concurrency, status_rx));
    let events = tokio::spawn(event_writer(client.clone(), opts.identity.clone(), event_rx, metrics.clone()));
    let binds = Arc::new(Semaphore::new(opts.concurrency.max(1)));
    // An ungating waits for the pod's Bind, which the brain sends right after it.
    let mut ungate: Option<(GroupKey, String, String, String)> = None;
    while let Some(a) = rx.recv().await {
        if let Some((key, namespace, pod, uid)) =
            ungate.take_if(|(_, _, _, u)| !matches!(&a, Action::Bind { uid, .. } if uid == u))
        {
            let (client, back) = (client.clone(), back.clone());
            tokio::spawn(async move {
                if let Err(message) = remove_gate(client, &namespace, &pod, &uid).await {
                    let _ = back.send(Message::event(Event::BindFailed { key, pod, message }));
                }
            });
        }
        match a {
            Action::Ungate { key, namespace, pod, uid } => ungate = Some((key, namespace, pod, uid)),
            Action::Bind { key, namespace, pod, uid, node, member, claims } => {
                let gated = ungate.take().is_some();
                let permit = binds.clone().acquire_owned().await.expect("never closed");
                let (client, back, metrics) = (client.clone(), back.clone(), metrics.clone());
                tokio::spawn(async move {
                    let r = match gated {
                        true => remove_gate(client.clone(), &namespace, &pod, &uid).await,
                        false => Ok(()),
                    };
                    let mut r = r;
                    for c in &claims {
                        if r.is_ok() {
                            r = allocate_claim(client.clone(), &namespace, &pod, &uid, c).await;
                        }
                    }
                    let r = match r {
                        Ok(()) => bind(client, &namespace, &pod, &uid, &node, member).await,
                        Err(e) => Err(e),
                    };
                    match r {
                        Ok(Bound::Yes) => metrics.pod_bound(),
                        Ok(Bound::Gone) => {}
                        Err(message) => {
                            metrics.bind_failed();
                            let _ = back.send(Message::event(Event::BindFailed { key, pod, message }));
                        }
                    }
                    drop(permit);
                });
            }
            Action::Status { key, status } => {
                let _ = status_tx.send((key, *status));
            }
            // Every few seconds at most, one per Queue: no ordering or coalescing needed.
            Action::QueueStatus { name, status } => {
                tokio::spawn(write_queue_status(client.clone(), name, *status));
            }
            Action::Event { key, subject, kind, reason, message } => {
                let pending = PendingEvent { decided: Instant::now(), key, subject, kind, reason, message };
                if event_tx.try_send(pending).is_err() {
                    metrics.event(EventOutcome::Skipped, Duration::ZERO);
                    debug!("event dropped: the event queue is full");
                }
            }
            other => {
                let _ = job_tx.send(other);
            }
        }
    }
    jobs.abort();
    statuses.abort();
    events.abort();
}

/// What became of a binding that was not refused.
enum Bound {
    Yes,
    /// The pod is gone (or is another pod of the same name): nothing was bound.
    Gone,
}

/// Binds a pod to its member's node; the member rides on the binding as an annotation, so that
/// a restarted controller knows which member each bound pod fills. Transient errors are retried
/// (`retry_delay`).
async fn bind(client: Client, namespace: &str, pod: &str, uid: &str, node: &str, member: u32) -> Result<Bound, String> {
    let api: Api<Pod> = Api::namespaced(client, namespace);
    let binding = Binding {
        metadata: ObjectMeta {
            name: Some(pod.to_string()),
            uid: Some(uid.to_string()),
            annotations: Some(BTreeMap::from([(MEMBER.to_string(), member.to_string())])),
            ..ObjectMeta::default()
        },
        target: ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Node".into()),
            name: Some(node.to_string()),
            ..ObjectReference::default()
        },
    };
    for attempt in 0.. {
        match api.create_subresource::<_, serde_json::Value>("binding", pod, &PostParams::default(), &binding).await {
            Ok(_) => return Ok(Bound::Yes),
            // Gone, or a different pod of the same name: nothing to bind.
            Err(e) if is_code(&e, 404) => return Ok(Bound::Gone),
            Err(e) => match retry_delay(&e, attempt) {
                Some(delay) => {
                    warn!(pod, node, "binding failed, retrying: {e}");
                    tokio::time::sleep(delay).await;
                }
                None => return Err(error_message(e)),
            },
        }
    }
    unreachable!("the loop returns")
}

/// How long to wait before sending a failed request again, or `None` to give up. A refusal
/// (4xx) is final. Anything else says nothing against the request and is retried for about a
/// minute: throttling (429: the apiserver's fairness queues are full, which many bindings in
/// flight can cause on a busy cluster), a 5xx, or no connection (an apiserver restart takes
/// seconds; giving up sooner would release and requeue a placed group for it).
fn retry_delay(e: &kube::Error, attempt: u32) -> Option<Duration> {
    if matches!(e, kube::Error::Api(s) if s.code < 500) && !is_code(e, 429) {
        return None;
    }
    (attempt < 35)
        .then(|| (Duration::from_millis(100) * 2u32.saturating_pow(attempt.min(16))).min(Duration::from_secs(2)))
}

fn error_message(e: kube::Error) -> String {
    match e {
        kube::Error::Api(s) => s.message,
        e => e.to_string(),
    }
}

/// Removes muster's scheduling gate from a pod, keeping any other gate: one strategic-merge
/// patch (the gate list merges by name) whose uid makes it refuse a different pod of the same
/// name. Retried on a transient error.
async fn remove_gate(client: Client, namespace: &str, pod: &str, uid: &str) -> Result<(), String> {
    let api: Api<Pod> = Api::namespaced(client, namespace);
    let patch = Patch::Strategic(json!({
        "metadata": {"uid": uid},
        "spec": {"schedulingGates": [{"$patch": "delete", "name": labels::SCHEDULING_GATE}]},
    }));
    for attempt in 0.. {
        match api.patch(pod, &PatchParams::default(), &patch).await {
            Ok(_) => return Ok(()),
            // Gone, or (409: the uid precondition) a different pod of the same name: the
            // binding finds nothing to bind either.
            Err(e) if is_code(&e, 404) || is_code(&e, 409) => return Ok(()),
            Err(e) => match retry_delay(&e, attempt) {
                Some(delay) => {
                    debug!(pod, "ungating: {e}; retrying");
                    tokio::time::sleep(delay).await;
                }
                None => return Err(error_message(e)),
            },
        }
    }
    unreachable!("the loop returns")
}

/// Job patches, Group objects and pod deletions: in the order decided for each group, many
/// groups at once (one group's unsuspend must not wait behind other groups' objects).
async fn job_writer(client: Client, concurrency: usize, mut rx: mpsc::UnboundedReceiver<Action>) {
    let slots = Arc::new(Semaphore::new(concurrency.max(1)));
    // The last write of each group: the next one for the group starts after it.
    let mut last: HashMap<GroupKey, tokio::task::JoinHandle<()>> = HashMap::new();
    while let Some(a) = rx.recv().await {
        let Some(key) = a.group().cloned() else { continue };
        let before = last.remove(&key);
        let (client, slots) = (client.clone(), slots.clone());
        let task = tokio::spawn(async move {
            if let Some(b) = before {
                let _ = b.await;
            }
            let _slot = slots.acquire_owned().await.expect("never closed");
            write(client, a).await;
        });
        last.insert(key, task);
        if last.len() > 4096 {
            last.retain(|_, t| !t.is_finished());
        }
    }
}

async fn write(client: Client, a: Action) {
    let apply = PatchParams::apply(labels::FIELD_MANAGER).force();
    let (key, result) = match a {
        Action::Suspend { key, kind, suspend } => {
            let api = Api::<DynamicObject>::namespaced_with(client.clone(), &key.namespace, &kind.resource());
            let patch = Patch::Merge(kind.hold_patch(suspend));
            let r = api.patch(&key.name, &PatchParams::default(), &patch).await.map(drop);
            debug!(group = %key, kind = kind.kind, suspend, ok = r.is_ok(), "hold patched");
            (key, r)
        }
        Action::JobDeadline { key, seconds } => {
            let api: Api<Job> = Api::namespaced(client.clone(), &key.namespace);
            let patch = Patch::Merge(json!({"spec": {"activeDeadlineSeconds": seconds}}));
            let r = api.patch(&key.name, &PatchParams::default(), &patch).await.map(drop);
            (key, r)
        }
        Action::ClearRequests { key, kind } => {
            let api = Api::<DynamicObject>::namespaced_with(client.clone(), &key.namespace, &kind.resource());
            let r = api.patch(&key.name, &PatchParams::default(), &clear_requests()).await.map(drop);
            (key, r)
        }
        Action::PodGroupScheduled { key, pod_groups, message } => {
            let mut r = Ok(());
            for name in &pod_groups {
                r = r.and(pod_group_scheduled(&client, &key.namespace, name, &message).await);
            }
            (key, r)
        }
        Action::RestoreStatus { key, status } => {
            // The whole status replaced: an apply would keep the fields another writer owns.
            let api: Api<Group> = Api::namespaced(client.clone(), &key.namespace);
            let r = match api.get(&key.name).await {
                Ok(mut g) => {
                    g.status = Some(*status);
                    let pp = PostParams { field_manager: Some(labels::FIELD_MANAGER.into()), ..PostParams::default() };
                    api.replace_status(&key.name, &pp, &g).await.map(drop)
                }
                Err(e) => Err(e),
            };
            (key, r)
        }
        Action::EnsureGroup { key, spec, job_uid } => {
            let api: Api<Group> = Api::namespaced(client.clone(), &key.namespace);
            let mut metadata = json!({"name": key.name, "namespace": key.namespace});
            // A plain-pod group has no owner (job_uid empty): muster deletes its object. A Job's
            // or JobSet's is owned by it, as spec.owner says.
            if let (false, Some(o)) = (job_uid.is_empty(), spec.owner.as_ref()) {
                let owner = OwnerReference {
                    api_version: o.api_version.clone(),
                    kind: o.kind.clone(),
                    name: key.name.to_string(),
                    uid: job_uid,
                    controller: Some(true),
                    block_owner_deletion: None,
                };
                metadata["ownerReferences"] = json!([owner]);
            }
            let obj = json!({
                "apiVersion": "muster.dev/v1alpha1", "kind": "Group", "metadata": metadata, "spec": spec,
            });
            let r = api.patch(&key.name, &apply, &Patch::Apply(obj)).await.map(drop);
            (key, r)
        }
        Action::DeleteGroup { key } => {
            let api: Api<Group> = Api::namespaced(client.clone(), &key.namespace);
            let r = api.delete(&key.name, &DeleteParams::default()).await.map(drop);
            (key, r)
        }
        Action::DeletePods { key, namespace, pods } => {
            let api: Api<Pod> = Api::namespaced(client.clone(), &namespace);
            for (name, uid) in pods {
                // The uid precondition spares a new pod of the same name.
                let dp = DeleteParams {
                    preconditions: Some(Preconditions { uid: Some(uid), resource_version: None }),
                    ..DeleteParams::default()
                };
                match api.delete(&name, &dp).await {
                    Ok(_) => {}
                    Err(e) if is_code(&e, 404) || is_code(&e, 409) => debug!(pod = name, "not deleted: {e}"),
                    Err(e) => warn!(group = %key, pod = name, "deleting the pod: {e}"),
                }
            }
            (key, Ok(()))
        }
        _ => return,
    };
    match result {
        Ok(()) => {}
        Err(e) if is_code(&e, 404) => debug!(group = %key, "object gone: {e}"),
        Err(e) => warn!(group = %key, "writing the job or group: {e}"),
    }
}

async fn write_queue_status(client: Client, name: String, status: QueueStatus) {
    let api: Api<Queue> = Api::all(client);
    let patch = Patch::Apply(json!({"apiVersion": "muster.dev/v1alpha1", "kind": "Queue", "status": status}));
    if let Err(e) = api.patch_status(&name, &PatchParams::apply(labels::FIELD_MANAGER).force(), &patch).await {
        debug!(queue = name, "writing the queue status: {e}");
    }
}

/// How long a status waits for newer ones of the same group before it is written.
const STATUS_COALESCE: Duration = Duration::from_millis(1000);

/// Sets `PodGroupInitiallyScheduled=True` on the Kubernetes PodGroup `namespace/name`, unless it is already:
/// the condition is terminal, and its transition time must stay the first scheduling's (a
/// restarted controller marks its running groups again). A PodGroup that is gone needs nothing.
async fn pod_group_scheduled(client: &Client, namespace: &str, name: &str, message: &str) -> Result<(), kube::Error> {
    let api: Api<NativePodGroup> = Api::namespaced(client.clone(), namespace);
    let Some(pg) = api.get_opt(name).await? else { return Ok(()) };
    let conditions = pg.status.as_ref().and_then(|s| s.conditions.as_ref());
    if conditions.into_iter().flatten().any(|c| c.type_ == POD_GROUP_SCHEDULED && c.status == "True") {
        return Ok(());
    }
    let now = k8s_openapi::jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
    let status = json!({
        "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace},
        "status": {"conditions": [{
            "type": POD_GROUP_SCHEDULED, "status": "True", "reason": "Scheduled", "message": message,
            "lastTransitionTime": now, "observedGeneration": pg.metadata.generation,
        }]},
    });
    let apply = PatchParams::apply(labels::FIELD_MANAGER).force();
    api.patch_status(name, &apply, &Patch::Apply(status)).await.map(drop)
}

/// The condition kube-scheduler sets on a PodGroup once its gang is scheduled (Kubernetes 1.37).
const POD_GROUP_SCHEDULED: &str = "PodGroupInitiallyScheduled";

/// Removes the user's suspend- and resume-requested annotations (of a Job or a JobSet).
fn clear_requests() -> Patch<serde_json::Value> {
    let annotations = json!({labels::RESUME_REQUESTED: null, labels::SUSPEND_REQUESTED: null});
    Patch::Merge(json!({"metadata": {"annotations": annotations}}))
}

/// Group statuses: the latest per group, written a batch at a time. A status whose Group object
/// does not exist yet is retried with the next batch: soon at first, as a group admitted in the
/// cycle that saw its Job has its object created beside its first status.
async fn status_writer(client: Client, concurrency: usize, mut rx: mpsc::UnboundedReceiver<(GroupKey, GroupStatus)>) {
    let apply = PatchParams::apply(labels::FIELD_MANAGER).force();
    let mut pending: HashMap<GroupKey, (GroupStatus, u32)> = HashMap::new();
    let mut admitted: HashSet<GroupKey> = HashSet::new();
    // An admission is written at once: its allocation says where the pods being bound belong.
    let mut is_admission = |k: &GroupKey, s: &GroupStatus| {
        if s.phase == Some(GroupState::Admitted) {
            return admitted.insert(k.clone());
        }
        admitted.remove(k);
        false
    };
    loop {
        if pending.is_empty() {
            let Some((k, s)) = rx.recv().await else { return };
            let mut urgent = is_admission(&k, &s);
            pending.insert(k, (s, 0));
            // Other changes wait a little for the next ones of the same group (Queued ->
            // PodsReady within a second): fewer writes leave the apiserver to the bindings.
            let deadline = tokio::time::Instant::now() + STATUS_COALESCE;
            while !urgent {
                match tokio::time::timeout_at(deadline, rx.recv()).await {
                    Ok(Some((k, s))) => {
                        urgent = is_admission(&k, &s);
                        pending.insert(k, (s, 0));
                    }
                    Ok(None) => return,
                    Err(_) => break,
                }
            }
        }
        while let Ok((k, s)) = rx.try_recv() {
            is_admission(&k, &s);
            pending.insert(k, (s, 0));
        }
        let batch: Vec<_> = pending.drain().collect();
        let results: Vec<_> = stream::iter(batch)
            .map(|(key, (status, tries))| {
                let api: Api<Group> = Api::namespaced(client.clone(), &key.namespace);
                let apply = apply.clone();
                async move {
                    let patch = Patch::Apply(json!({
                        "apiVersion": "muster.dev/v1alpha1", "kind": "Group", "status": status,
                    }));
                    let r = api.patch_status(&key.name, &apply, &patch).await;
                    (key, status, tries, r)
                }
            })
            .buffer_unordered(concurrency.max(1))
            .collect()
            .await;
        let mut retry: Option<u32> = None;
        for (key, status, tries, r) in results {
            match r {
                Ok(_) => {}
                Err(e) if is_code(&e, 404) && tries < 20 => {
                    debug!(group = %key, tries, "status written before its group object: tried again");
                    retry = retry.max(Some(tries));
                    // A newer status that arrived meanwhile wins.
                    pending.entry(key).or_insert((status, tries + 1));
                }
                // Still missing after the retries: its Job (or namespace) went meanwhile.
                Err(e) if is_code(&e, 404) => debug!(group = %key, "group gone before its status: {e}"),
                Err(e) => warn!(group = %key, "writing the group status: {e}"),
            }
        }
        if let Some(tries) = retry {
            tokio::time::sleep(status_retry_delay(tries)).await;
        }
    }
}

/// How long a status written before its Group object waits to be tried again, after `tries`
/// tries: 20 ms, doubling to at most 500 ms (20 tries: about 8 s in all).
fn status_retry_delay(tries: u32) -> Duration {
    Duration::from_millis((20u64 << tries.min(5)).min(500))
}

/// Events in flight at once: enough to keep up with a burst's decisions, few beside the
/// bindings' so that they take little of a saturated apiserver.
const EVENTS_IN_FLIGHT: usize = 4;

/// How long the events of a namespace the apiserver called terminating are skipped unsent.
/// Short, as a namespace of the same name may come back once the old one is gone.
const TERMINATING_FOR: Duration = Duration::from_secs(10);

/// An event waiting to be sent, and when it was decided.
struct PendingEvent {
    decided: Instant,
    key: GroupKey,
    subject: Subject,
    kind: EventType,
    reason: String,
    message: String,
}

/// Namespaces whose events the apiserver refused as the namespace was being deleted, and
/// until when their other events are skipped: a teardown would refuse each of them.
#[derive(Default)]
struct ClosedNamespaces(HashMap<String, Instant>);

impl ClosedNamespaces {
    fn close(&mut self, namespace: &str, now: Instant) {
        self.0.insert(namespace.to_string(), now + TERMINATING_FOR);
    }

    fn is_closed(&mut self, namespace: &str, now: Instant) -> bool {
        self.0.retain(|_, until| *until > now);
        self.0.contains_key(namespace)
    }
}

/// Events, best effort: one per decision (see `publish`). Each batch goes out a few groups at
/// a time, the events of one group in order.
async fn event_writer(client: Client, identity: String, mut rx: mpsc::Receiver<PendingEvent>, metrics: Arc<Metrics>) {
    let reporter = Reporter { controller: "muster".into(), instance: Some(identity) };
    let recorder = Recorder::new(client, reporter);
    let closed = Mutex::new(ClosedNamespaces::default());
    while let Some(first) = rx.recv().await {
        let mut batch = vec![first];
        while let Ok(e) = rx.try_recv() {
            batch.push(e);
        }
        stream::iter(per_group(fold_queued_into_admitted(batch)))
            .for_each_concurrent(EVENTS_IN_FLIGHT, |events| async {
                for e in events {
                    let skip = closed
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .is_closed(&e.key.namespace, Instant::now());
                    let outcome = match skip {
                        true => EventOutcome::Skipped,
                        false => match publish(&recorder, &e).await {
                            Ok(()) => EventOutcome::Recorded,
                            Err(err) => {
                                if namespace_closed(&err) {
                                    closed
                                        .lock()
                                        .unwrap_or_else(PoisonError::into_inner)
                                        .close(&e.key.namespace, Instant::now());
                                }
                                debug!(group = %e.key, reason = e.reason, "event not recorded: {err}");
                                EventOutcome::Failed
                            }
                        },
                    };
                    metrics.event(outcome, e.decided.elapsed());
                }
            })
            .await;
    }
}

/// Whether the apiserver refused a write because its namespace is being deleted or is gone.
fn namespace_closed(e: &kube::Error) -> bool {
    let kube::Error::Api(s) = e else { return false };
    s.details.as_ref().is_some_and(|d| {
        d.causes.iter().any(|c| c.reason == "NamespaceTerminating") || (s.is_not_found() && d.kind == "namespaces")
    })
}

/// The batch's events split per group, each group's in order, groups in order of their first.
fn per_group(batch: Vec<PendingEvent>) -> Vec<Vec<PendingEvent>> {
    let mut groups: Vec<Vec<PendingEvent>> = Vec::new();
    let mut index: HashMap<GroupKey, usize> = HashMap::new();
    for e in batch {
        let i = *index.entry(e.key.clone()).or_insert_with(|| {
            groups.push(Vec::new());
            groups.len() - 1
        });
        groups[i].push(e);
    }
    groups
}

/// A group queued and admitted before its Queued event went out gets one event, Admitted,
/// that says both: under load that halves the events of groups that never wait.
fn fold_queued_into_admitted(batch: Vec<PendingEvent>) -> Vec<PendingEvent> {
    let mut out: Vec<Option<PendingEvent>> = Vec::with_capacity(batch.len());
    // Where each group's not yet folded Queued event sits in `out`.
    let mut queued: HashMap<GroupKey, usize> = HashMap::new();
    for mut e in batch {
        match e.reason.as_str() {
            "Queued" => {
                queued.insert(e.key.clone(), out.len());
            }
            "Admitted" => {
                if let Some(q) = queued.remove(&e.key).and_then(|i| out[i].take()) {
                    e.message = format!("{}; {}", q.message, e.message);
                }
            }
            _ => {}
        }
        out.push(Some(e));
    }
    out.into_iter().flatten().collect()
}

async fn publish(recorder: &Recorder, e: &PendingEvent) -> Result<(), kube::Error> {
    let group = ObjectReference {
        api_version: Some("muster.dev/v1alpha1".into()),
        kind: Some("Group".into()),
        name: Some(e.key.name.to_string()),
        namespace: Some(e.key.namespace.to_string()),
        ..ObjectReference::default()
    };
    // One event per decision: on the Job (what its owner describes) with its Group as the
    // related object, on the Group alone when no Job is known (plain pods, JobSets), or on a pod
    // that belongs to no group.
    let (regarding, related) = match &e.subject {
        Subject::Group => (group, None),
        Subject::Workload { kind, uid } => {
            let workload = ObjectReference {
                api_version: Some(kind.api_version()),
                kind: Some(kind.kind.into()),
                uid: Some(uid.clone()),
                ..group.clone()
            };
            (workload, Some(group))
        }
        Subject::Pod { uid } => {
            let pod = ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Pod".into()),
                uid: Some(uid.clone()),
                ..group
            };
            (pod, None)
        }
    };
    let ev = KubeEvent {
        type_: if e.kind == EventType::Warning { KubeEventType::Warning } else { KubeEventType::Normal },
        reason: e.reason.clone(),
        note: Some(e.message.clone()),
        action: "Schedule".into(),
        secondary: related,
    };
    recorder.publish(&ev, &regarding).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(name: &str, reason: &str, message: &str) -> PendingEvent {
        PendingEvent {
            decided: Instant::now(),
            key: GroupKey::new("ns", name),
            subject: Subject::Group,
            kind: EventType::Normal,
            reason: reason.into(),
            message: message.into(),
        }
    }

    fn reasons(batch: &[PendingEvent]) -> Vec<(String, String, String)> {
        batch.iter().map(|e| (e.key.name.to_string(), e.reason.clone(), e.message.clone())).collect()
    }

    fn api_error(code: u16) -> kube::Error {
        kube::Error::Api(Box::new(kube::core::Status::failure(&format!("code {code}"), "").with_code(code)))
    }

    #[test]
    fn a_status_before_its_group_object_is_tried_again_soon_then_less_often() {
        let delays: Vec<u128> = (0..20).map(|t| status_retry_delay(t).as_millis()).collect();
        assert_eq!(&delays[..6], [20, 40, 80, 160, 320, 500]);
        assert!(delays[6..].iter().all(|&d| d == 500));
        let total: u128 = delays.iter().sum();
        assert!((7_000..=9_000).contains(&total), "about 8 s before a status is given up: {total} ms");
    }

    #[test]
    fn throttling_and_server_errors_are_retried_for_about_a_minute_refusals_never() {
        let total = |code| (0..).map_while(|a| retry_delay(&api_error(code), a)).sum::<Duration>();
        let tries = |code| (0..).map_while(|a| retry_delay(&api_error(code), a)).count();
        assert_eq!(tries(403), 0);
        assert_eq!(tries(422), 0);
        assert_eq!(tries(500), 35);
        assert!((50..=70).contains(&total(429).as_secs()), "{:?}", total(429));
        assert_eq!(total(503), total(429));
        assert_eq!(retry_delay(&api_error(429), 30), Some(Duration::from_secs(2)), "backoff is capped");
        assert_eq!(error_message(api_error(403)), "code 403");
    }

    #[test]
    fn executor_folds_a_queued_event_into_the_admitted_one_that_follows() {
        let batch = vec![
            event("c", "Admitted", "placed"),
            event("c", "Queued", "queued in q"),
            event("a", "Queued", "queued in q"),
            event("b", "Queued", "queued in q"),
            event("a", "Admitted", "placed: 2 members on 1 nodes"),
        ];
        let folded = reasons(&fold_queued_into_admitted(batch));
        assert_eq!(
            folded,
            vec![
                // An admission before the Queued event is another story (requeued): both stay.
                ("c".into(), "Admitted".into(), "placed".into()),
                ("c".into(), "Queued".into(), "queued in q".into()),
                ("b".into(), "Queued".into(), "queued in q".into()),
                ("a".into(), "Admitted".into(), "queued in q; placed: 2 members on 1 nodes".into()),
            ]
        );
    }

    #[test]
    fn a_batch_of_events_goes_out_per_group_each_in_order() {
        let batch = vec![
            event("a", "Admitted", "1"),
            event("b", "Admitted", "2"),
            event("a", "PodsReady", "3"),
            event("c", "Evicted", "4"),
            event("b", "PodsReady", "5"),
        ];
        let groups: Vec<Vec<_>> = per_group(batch).iter().map(|g| reasons(g)).collect();
        let e = |n: &str, r: &str, m: &str| (n.to_string(), r.to_string(), m.to_string());
        assert_eq!(
            groups,
            vec![
                vec![e("a", "Admitted", "1"), e("a", "PodsReady", "3")],
                vec![e("b", "Admitted", "2"), e("b", "PodsReady", "5")],
                vec![e("c", "Evicted", "4")],
            ]
        );
    }

    #[test]
    fn a_namespace_refused_as_terminating_is_skipped_for_a_while_then_tried_again() {
        let t0 = Instant::now();
        let mut closed = ClosedNamespaces::default();
        closed.close("gone", t0);
        assert!(closed.is_closed("gone", t0 + Duration::from_secs(1)));
        assert!(!closed.is_closed("other", t0 + Duration::from_secs(1)));
        assert!(!closed.is_closed("gone", t0 + TERMINATING_FOR), "a namespace of that name may come back");
        assert!(closed.0.is_empty(), "expired entries are forgotten");
    }

    #[test]
    fn only_a_terminating_or_missing_namespace_closes_it() {
        // The bodies kube-apiserver 1.35 sends for an event created in a namespace being deleted
        // and in one already gone (captured from the harness's control plane), and a missing Job.
        let status = |body: &str| kube::Error::Api(Box::new(serde_json::from_str(body).expect("a Status")));
        let terminating = status(TERMINATING_BODY);
        let missing_namespace = status(MISSING_NAMESPACE_BODY);
        let missing_job = status(
            r#"{"status":"Failure","reason":"NotFound","code":404,"details":{"name":"j","group":"batch","kind":"jobs"}}"#,
        );
        assert!(namespace_closed(&terminating));
        assert!(namespace_closed(&missing_namespace));
        assert!(!namespace_closed(&missing_job));
        assert!(!namespace_closed(&api_error(403)));
    }

    const TERMINATING_BODY: &str = r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"events.events.k8s.io \"x.1\" is forbidden: unable to create new content in namespace t because it is being terminated","reason":"Forbidden","details":{"name":"x.1","group":"events.k8s.io","kind":"events","causes":[{"reason":"NamespaceTerminating","message":"namespace t is being terminated","field":"metadata.namespace"}]},"code":403}"#;
    const MISSING_NAMESPACE_BODY: &str = r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"namespaces \"nope\" not found","reason":"NotFound","details":{"name":"nope","kind":"namespaces"},"code":404}"#;
}
