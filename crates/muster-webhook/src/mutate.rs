//! The mutating rules: hold managed work back for the queue, and nothing more.

use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, Patch, PatchOperation};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, Operation};
use muster_graph::jobspec::MAX_MEMBERS;
use muster_k8s::external::{JobSet, MPIJob, RayCluster, RayJob, TrainJob, pod_group_min_member};
use muster_k8s::labels::{
    GROUP, GROUP_SIZE, POD_GROUP_ALIAS, PREFERRED_TOPOLOGY, QUEUE, REQUIRED_TOPOLOGY, RESUME_REQUESTED, SCHEDULER_NAME,
    SCHEDULING_GATE, SET, SET_MIN, SET_SIZE, SET_TOPOLOGY, SUBGROUP, SUBGROUP_TOPOLOGY, SUSPEND_REQUESTED,
};
use muster_k8s::lws::LeaderWorkerSet;
use muster_k8s::workload::{Workload, jobset, mpijob, raycluster, rayjob, trainjob};
use serde_json::{Value, json};

use crate::composite::{NativeGang, native_gang};
use crate::config::WebhookConfig;
use crate::object::{
    Refusal, Target, alias_group, get, job_owner, label_field, native_group, queued_gang, target, typed, user,
};
use crate::state::ClusterState;
use crate::validate;

/// The JSON patch for a request (empty when the object needs nothing). `now` stamps resume
/// requests.
///
/// - A Job created with `muster.dev/queue`: `spec.suspend=true`, `schedulerName: muster` in the
///   pod template.
/// - A managed Job unsuspended by anyone but muster: it stays suspended and gets
///   `muster.dev/resume-requested=<now>`; muster resumes it in its queue.
/// - A managed Job suspended by anyone but muster: `muster.dev/suspend-requested=<now>`, so that
///   muster tells the user's suspension from its own and releases the group at once.
/// - A JobSet with `muster.dev/queue` likewise: created suspended with `schedulerName: muster` in
///   every replicated Job's pod template; unsuspending and suspending it as for a Job. Its child
///   Jobs (controlled by the JobSet) are its group's, suspended and resumed by the JobSet
///   controller: nothing is done to them.
/// - A pod created with `muster.dev/group` (or the pod-group alias, when accepted) that no Job
///   controls: muster's scheduling gate and `schedulerName: muster`; alias pods also get
///   `muster.dev/group`, `muster.dev/queue` if they have none, and `muster.dev/group-size` from
///   their PodGroup's `spec.minMember` if they have none and the PodGroup exists (the validating
///   rules refuse an alias pod that ends up without a size).
/// - A LeaderWorkerSet with `muster.dev/queue` (created or updated): the same label in its leader
///   and worker templates. Each pod it makes then gets the gate, `schedulerName: muster`, and
///   `muster.dev/group` (its leader's name) and `muster.dev/group-size` (LWS's size annotation).
///
/// Refuses a request whose object cannot be read, or whose PodGroup cannot be looked up.
pub async fn mutate<S: ClusterState>(
    req: &AdmissionRequest<DynamicObject>,
    config: &WebhookConfig,
    state: &S,
    now: Timestamp,
) -> Result<Patch, Refusal> {
    let Some(obj) = req.object.as_ref() else { return Ok(Patch(Vec::new())) };
    let ops = match (target(req), &req.operation) {
        (Target::Job, Operation::Create) => {
            let job: Job = typed(obj, "Job")?;
            let ops = held_create(&job, &json_of(obj));
            if queued(&job) {
                validate::job_create(&patched(obj, &ops)?, req, config, state, now).await?;
            }
            ops
        }
        (Target::Job, Operation::Update) if !config.is_muster(user(req)) => match req.old_object.as_ref() {
            Some(old) => held_update::<Job>(&typed(old, "Job")?, &typed(obj, "Job")?, &json_of(obj), now),
            None => Vec::new(),
        },
        (Target::Held(kind), Operation::Create) if *kind == jobset::KIND => {
            held_create::<JobSet>(&typed(obj, "JobSet")?, &json_of(obj))
        }
        (Target::Held(kind), Operation::Create) if *kind == mpijob::KIND => {
            held_create::<MPIJob>(&typed(obj, "MPIJob")?, &json_of(obj))
        }
        (Target::Held(kind), Operation::Create) if *kind == rayjob::KIND => {
            held_create::<RayJob>(&typed(obj, "RayJob")?, &json_of(obj))
        }
        (Target::Held(kind), Operation::Create) if *kind == raycluster::KIND => {
            held_create::<RayCluster>(&typed(obj, "RayCluster")?, &json_of(obj))
        }
        (Target::Held(kind), Operation::Update) if !config.is_muster(user(req)) => match req.old_object.as_ref() {
            Some(old) if *kind == jobset::KIND => {
                held_update::<JobSet>(&typed(old, "JobSet")?, &typed(obj, "JobSet")?, &json_of(obj), now)
            }
            Some(old) if *kind == mpijob::KIND => {
                held_update::<MPIJob>(&typed(old, "MPIJob")?, &typed(obj, "MPIJob")?, &json_of(obj), now)
            }
            Some(old) if *kind == rayjob::KIND => {
                held_update::<RayJob>(&typed(old, "RayJob")?, &typed(obj, "RayJob")?, &json_of(obj), now)
            }
            Some(old) if *kind == raycluster::KIND => {
                held_update::<RayCluster>(&typed(old, "RayCluster")?, &typed(obj, "RayCluster")?, &json_of(obj), now)
            }
            _ => Vec::new(),
        },
        (Target::TrainJob, Operation::Create) => train_job(&typed(obj, "TrainJob")?, &json_of(obj)),
        (Target::LeaderWorkerSet, Operation::Create | Operation::Update) if !config.is_muster(user(req)) => {
            leader_worker_set(&typed(obj, "LeaderWorkerSet")?, &json_of(obj))
        }
        (Target::Pod, Operation::Create) => {
            let pod: Pod = typed(obj, "Pod")?;
            let ns = req.namespace.as_deref().unwrap_or("");
            let gang = native_gang(&pod, state, ns).await?;
            let mut ops = pod_create(&pod, config, gang.as_ref());
            ops.extend(pod_group_size(&pod, config, state, ns, gang.as_ref()).await?);
            ops.extend(native_topology(&pod, gang.as_ref()));
            ops
        }
        _ => Vec::new(),
    };
    Ok(Patch(ops))
}

/// The Job as `ops` leave it.
fn patched(obj: &DynamicObject, ops: &[PatchOperation]) -> Result<Job, Refusal> {
    let mut value =
        serde_json::to_value(obj).map_err(|e| Refusal::new(format!("the webhook cannot read this Job: {e}")))?;
    json_patch::patch(&mut value, ops).map_err(|e| Refusal::new(format!("the webhook cannot patch this Job: {e}")))?;
    serde_json::from_value(value).map_err(|e| Refusal::new(format!("the webhook cannot read this Job: {e}")))
}

fn add(path: &[&str], value: Value) -> PatchOperation {
    // `add` replaces a member that exists, so it serves for set-or-create alike.
    PatchOperation::Add(AddOperation { path: PointerBuf::from_tokens(path.iter().copied()), value })
}

fn json_of(obj: &DynamicObject) -> Value {
    serde_json::to_value(obj).unwrap_or_default()
}

/// Sets a field of `object`, written the way messages name it (`spec.runPolicy.suspend`),
/// creating the objects above it that are missing (`add` needs its parent to exist).
fn add_field(object: &Value, field: &str, value: Value) -> PatchOperation {
    let tokens: Vec<&str> = field.split(['.', '[', ']']).filter(|t| !t.is_empty()).collect();
    add_at(object, &tokens, value)
}

/// Sets the member of `object` at `tokens`, creating the objects above it that are missing.
fn add_at(object: &Value, tokens: &[&str], value: Value) -> PatchOperation {
    let mut at = object;
    for (i, token) in tokens.iter().enumerate() {
        let next = match at {
            Value::Array(items) => token.parse::<usize>().ok().and_then(|n| items.get(n)),
            other => other.get(token),
        };
        match next {
            Some(v) => at = v,
            None => {
                let nested = tokens[i + 1..].iter().rev().fold(value, |inner, key| json!({ *key: inner }));
                return add(&tokens[..=i], nested);
            }
        }
    }
    add(tokens, value)
}

/// A workload in a queue, other than part of another's group (a JobSet's child Job).
fn queued<W: Workload>(w: &W) -> bool {
    w.queue().is_some() && !w.part_of_another()
}

/// A queued workload is created held, with every pod template naming muster's scheduler.
fn held_create<W: Workload>(w: &W, object: &Value) -> Vec<PatchOperation> {
    if !queued(w) {
        return Vec::new();
    }
    let mut ops = Vec::new();
    if !w.held() {
        ops.push(add_field(object, W::kind().hold_field, json!(true)));
    }
    // Templates that cannot be read are the validating webhook's (or the apiserver's) to refuse,
    // naming the field.
    let sets = w.pod_sets().unwrap_or_default();
    for set in sets.iter().filter(|s| s.template.scheduler_name.as_deref() != Some(SCHEDULER_NAME)) {
        ops.push(add_field(object, &format!("{}.schedulerName", set.template_field), json!(SCHEDULER_NAME)));
    }
    if let Some(key) = W::kind().pod_label {
        for (field, _) in sets.iter().flat_map(|s| &s.copied_metadata) {
            let mut tokens: Vec<&str> = field.split(['.', '[', ']']).filter(|t| !t.is_empty()).collect();
            tokens.extend(["labels", key]);
            ops.push(add_at(object, &tokens, json!("true")));
        }
    }
    ops
}

/// A queued TrainJob is created suspended (the trainer makes its JobSet suspended too), and its
/// queue label goes onto that JobSet (`spec.labels`), which muster then holds as the group.
fn train_job(tj: &TrainJob, object: &Value) -> Vec<PatchOperation> {
    let Some(queue) = get(tj.metadata.labels.as_ref(), QUEUE) else { return Vec::new() };
    let mut ops = Vec::new();
    if tj.spec.suspend != Some(true) {
        ops.push(add_field(object, trainjob::KIND.hold_field, json!(true)));
    }
    if get(tj.spec.labels.as_ref(), QUEUE) != Some(queue) {
        ops.push(add_at(object, &["spec", "labels", QUEUE], json!(queue)));
    }
    ops
}

/// A user holding or releasing a queued workload: releasing becomes a resume request (it stays
/// held), holding is stamped as the user's.
fn held_update<W: Workload>(old: &W, new: &W, object: &Value, now: Timestamp) -> Vec<PatchOperation> {
    // A workload without its pod templates is the apiserver's to refuse. One held through its
    // controller follows it (the trainer resumes a TrainJob's JobSet once muster resumed the
    // TrainJob): its own hold is not a user's.
    if new.pod_sets().is_err()
        || !(queued(old) || queued(new))
        || old.held() == new.held()
        || new.held_by() != W::kind()
    {
        return Vec::new();
    }
    let was = old.held();
    let stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
    let key = if was { RESUME_REQUESTED } else { SUSPEND_REQUESTED };
    let annotation = match new.meta().annotations {
        Some(_) => add(&["metadata", "annotations", key], json!(stamp)),
        None => add(&["metadata", "annotations"], json!({ key: stamp })),
    };
    if was {
        // Releasing is muster's to do: the workload stays held and asks to be queued again.
        vec![add_field(object, W::kind().hold_field, json!(true)), annotation]
    } else {
        vec![annotation]
    }
}

fn pod_create(pod: &Pod, config: &WebhookConfig, native_gang: Option<&NativeGang>) -> Vec<PatchOperation> {
    let labels = pod.metadata.labels.as_ref();
    let group = get(labels, GROUP);
    let alias = get(labels, POD_GROUP_ALIAS).filter(|_| config.accept_pod_group_alias);
    let native = native_group(pod);
    let gang = queued_gang(pod);
    // Pods of a managed Job come from its template, which already names muster's scheduler.
    if (group.is_none() && alias.is_none() && native.is_none() && gang.is_none())
        || job_owner(pod.metadata.owner_references.as_ref()).is_some()
    {
        return Vec::new();
    }
    let Some(spec) = pod.spec.as_ref() else { return Vec::new() };
    let mut ops = Vec::new();
    if let (None, Some(alias)) = (group, alias) {
        ops.push(add(&["metadata", "labels", GROUP], json!(alias)));
        if get(labels, QUEUE).is_none() {
            ops.push(add(&["metadata", "labels", QUEUE], json!(config.alias_queue)));
        }
    } else if let (None, Some(native)) = (group, native) {
        // A PodGroup in a CompositePodGroup is a set of the tree's group.
        ops.push(add(&["metadata", "labels", GROUP], json!(native_gang.map_or(native, NativeGang::group))));
        if let Some(set) = native_gang.and_then(NativeGang::set).filter(|_| get(labels, SET).is_none()) {
            ops.push(add(&["metadata", "labels", SET], json!(set.name)));
            if get(labels, SET_SIZE).is_none() {
                ops.push(add(&["metadata", "labels", SET_SIZE], json!(set.members.to_string())));
            }
            // One of the replicas beyond a k-of-n gang's k: its group may start without it.
            if set.optional && get(labels, SET_MIN).is_none() {
                ops.push(add(&["metadata", "labels", SET_MIN], json!("0")));
            }
        }
    } else if let (None, Some(gang)) = (group, gang) {
        // Its size too: a LeaderWorkerSet's pods say it in LWS's annotation.
        ops.push(add(&["metadata", "labels", GROUP], json!(gang.group)));
        if get(labels, GROUP_SIZE).is_none() {
            ops.push(add(&["metadata", "labels", GROUP_SIZE], json!(gang.size.to_string())));
        }
        // The leader may differ from its workers: each is a set of the group.
        if get(labels, SET).is_none() {
            ops.push(add(&["metadata", "labels", SET], json!(gang.set)));
        }
    }
    if spec.scheduler_name.as_deref() != Some(SCHEDULER_NAME) {
        ops.push(add(&["spec", "schedulerName"], json!(SCHEDULER_NAME)));
    }
    // A preset nodeName with a gate is an apiserver error; leave it to the validating rule,
    // whose message says what to do.
    if spec.node_name.as_deref().is_none_or(str::is_empty) {
        let gate = json!({ "name": SCHEDULING_GATE });
        match spec.scheduling_gates.as_ref() {
            None => ops.push(add(&["spec", "schedulingGates"], json!([gate]))),
            Some(gates) if !gates.iter().any(|g| g.name == SCHEDULING_GATE) => {
                ops.push(add(&["spec", "schedulingGates", "-"], gate))
            }
            Some(_) => {}
        }
    }
    ops
}

/// A queued LeaderWorkerSet's pod templates carry its queue label, so that its pods are queued
/// (the pods then join their group: [`pod_create`]).
fn leader_worker_set(lws: &LeaderWorkerSet, object: &Value) -> Vec<PatchOperation> {
    let Some(queue) = get(lws.metadata.labels.as_ref(), QUEUE) else { return Vec::new() };
    let templates = lws
        .templates()
        .into_iter()
        .filter(|(_, t)| get(t.metadata.as_ref().and_then(|m| m.labels.as_ref()), QUEUE) != Some(queue));
    templates
        .map(|(field, _)| {
            let mut tokens: Vec<&str> = field.split('.').collect();
            tokens.extend(["metadata", "labels", QUEUE]);
            add_at(object, &tokens, json!(queue))
        })
        .collect()
}

/// Topology annotations from the Kubernetes PodGroup a queued pod names:
/// `muster.dev/required-topology` when the PodGroup (or the root of its CompositePodGroup tree)
/// keeps its pods within a topology domain and the pod asks for no topology of its own, and
/// `muster.dev/set-topology` when its PodGroup in a tree does and the pod names none, and
/// `muster.dev/subgroup` with `muster.dev/subgroup-topology` when a CompositePodGroup between
/// them does and the pod names no sub-group (an unknown key is the validating webhook's to
/// refuse, naming it).
fn native_topology(pod: &Pod, gang: Option<&NativeGang>) -> Vec<PatchOperation> {
    let Some(gang) = gang else { return Vec::new() };
    let annotations = pod.metadata.annotations.as_ref();
    let own = [REQUIRED_TOPOLOGY, PREFERRED_TOPOLOGY].iter().any(|k| get(annotations, k).is_some());
    let group_level = gang.level().ok().flatten().filter(|_| !own).map(|l| (REQUIRED_TOPOLOGY, l));
    let set_level = gang.set().and_then(|s| s.level).filter(|_| get(annotations, SET_TOPOLOGY).is_none());
    let subgroup = gang.set().and_then(|s| s.subgroup.as_ref()).filter(|_| get(annotations, SUBGROUP).is_none());
    let subgroup =
        subgroup.into_iter().flat_map(|(name, level)| [(SUBGROUP, name.as_str()), (SUBGROUP_TOPOLOGY, *level)]);
    let add_now: Vec<(&str, &str)> =
        group_level.into_iter().chain(set_level.map(|l| (SET_TOPOLOGY, l))).chain(subgroup).collect();
    match annotations {
        _ if add_now.is_empty() => Vec::new(),
        Some(_) => add_now.iter().map(|(k, l)| add(&["metadata", "annotations", k], json!(l))).collect(),
        None => {
            let map: serde_json::Map<String, Value> = add_now.iter().map(|(k, l)| (k.to_string(), json!(l))).collect();
            vec![add(&["metadata", "annotations"], Value::Object(map))]
        }
    }
}

/// `muster.dev/group-size` from the PodGroup a pod names (the alias label's, or Kubernetes' own in
/// `spec.schedulingGroup`), when the pod has no size of its own and the PodGroup exists with a
/// valid size.
async fn pod_group_size<S: ClusterState>(
    pod: &Pod,
    config: &WebhookConfig,
    state: &S,
    ns: &str,
    gang: Option<&NativeGang>,
) -> Result<Option<PatchOperation>, Refusal> {
    let labels = pod.metadata.labels.as_ref();
    // A size of its own wins (the validating rules check it agrees); a Job's pod has its Job's.
    let sized = get(labels, GROUP_SIZE).is_some() || job_owner(pod.metadata.owner_references.as_ref()).is_some();
    let size = if sized {
        None
    } else if let Some(gang) = gang {
        gang.size().ok()
    } else if let Some(name) = alias_group(labels, config) {
        let pg = state
            .pod_group(ns, name)
            .await
            .map_err(|e| Refusal::new(format!("{}: {e}; try again", label_field(POD_GROUP_ALIAS))))?;
        pg.and_then(|pg| pod_group_min_member(&pg, MAX_MEMBERS).ok())
    } else {
        None
    };
    Ok(size.map(|n| add(&["metadata", "labels", GROUP_SIZE], json!(n.to_string()))))
}
