//! The validating rules. Each refusal names the field and says what to change; a request with
//! several problems gets all of them at once.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, Operation};
use muster_graph::jobspec::MAX_MEMBERS;
use muster_k8s::external::{JobSet, MPIJob, RayCluster, RayJob, TrainJob, pod_group_min_member};
use muster_k8s::group::{annotated_duration, plain_members};
use muster_k8s::labels::{
    DURATION, FINALIZER, GROUP, GROUP_MIN, GROUP_SIZE, MANAGED_NAMESPACE, MIN_MEMBERS, POD_GROUP_ALIAS,
    PREFERRED_TOPOLOGY, QUEUE, REPLICA_TOPOLOGY, REQUIRED_TOPOLOGY, RESUME_REQUESTED, SCHEDULER_NAME, SET, SET_MIN,
    SET_SIZE, SET_TOPOLOGY, SHRINKABLE, SUBGROUP, SUSPEND_REQUESTED, USER_KEYS, is_reserved,
};
use muster_k8s::lws::LeaderWorkerSet;
use muster_k8s::unsupported::{unsupported_annotations, unsupported_fields};
use muster_k8s::workload::{self, Shape, Workload, jobset, mpijob, raycluster, rayjob};
use muster_k8s::{GroupState, QueueSpec};
use serde::de::DeserializeOwned;

use crate::alike;
use crate::composite::native_gang;
use crate::config::WebhookConfig;
use crate::fit::{Amounts, member_requests, never_fits};
use crate::object::{
    NATIVE_GROUP_FIELD, Refusal, Target, alias_group, get, is_object_name, job_owner, label_field, native_group,
    target, typed, user,
};
use crate::state::ClusterState;

mod lws;
mod trainjob;

/// Labels the Job controller puts on its pods (the second is the pre-1.27 spelling).
const JOB_NAME_LABELS: [&str; 2] = ["batch.kubernetes.io/job-name", "job-name"];

type Labels = BTreeMap<String, String>;

/// How far a user's resume request may be from the webhook's clock: the mutation stamps it a
/// moment before validation runs, and replicas' clocks differ a little.
const RESUME_SLACK_SECONDS: i64 = 120;

/// Whether the request may proceed. muster's own principals pass every rule; everyone else is
/// checked against the rules of docs/webhook.md.
///
/// `now` bounds the resume request a user may carry (the one the mutating webhook just stamped).
pub async fn validate<S: ClusterState>(
    req: &AdmissionRequest<DynamicObject>,
    config: &WebhookConfig,
    state: &S,
    now: Timestamp,
) -> Result<(), Refusal> {
    let user = user(req);
    if config.is_muster(user) {
        return Ok(());
    }
    group_lifecycle(req, config)?;
    pod_resize(req)?;
    let (Some(obj), Operation::Create | Operation::Update) = (req.object.as_ref(), &req.operation) else {
        return Ok(());
    };
    let create = req.operation == Operation::Create;
    let mut c = Checker::new(req, config, state, now);
    match target(req) {
        Target::Job => {
            let new: Job = typed(obj, "Job")?;
            let old: Option<Job> =
                if create { None } else { req.old_object.as_ref().map(|o| typed(o, "Job")).transpose()? };
            c.job(&new, old.as_ref()).await;
        }
        Target::Held(kind) if *kind == jobset::KIND => c.held::<JobSet>(req, obj).await?,
        Target::Held(kind) if *kind == mpijob::KIND => c.held::<MPIJob>(req, obj).await?,
        Target::Held(kind) if *kind == rayjob::KIND => c.held::<RayJob>(req, obj).await?,
        Target::Held(kind) if *kind == raycluster::KIND => c.held::<RayCluster>(req, obj).await?,
        Target::Held(kind) => return Err(Refusal::new(format!("the webhook has no rules for {}s", kind.kind))),
        Target::LeaderWorkerSet => {
            let new: LeaderWorkerSet = typed(obj, "LeaderWorkerSet")?;
            let old: Option<LeaderWorkerSet> =
                if create { None } else { req.old_object.as_ref().map(|o| typed(o, "LeaderWorkerSet")).transpose()? };
            c.leader_worker_set(&new, old.as_ref()).await;
        }
        Target::TrainJob => {
            let new: TrainJob = typed(obj, "TrainJob")?;
            let old: Option<TrainJob> =
                if create { None } else { req.old_object.as_ref().map(|o| typed(o, "TrainJob")).transpose()? };
            c.train_job(&new, old.as_ref()).await;
        }
        Target::Pod => {
            let new: Pod = typed(obj, "Pod")?;
            let old: Option<Pod> =
                if create { None } else { req.old_object.as_ref().map(|o| typed(o, "Pod")).transpose()? };
            c.pod(&new, old.as_ref()).await;
        }
        Target::Group => c.group(obj, if create { None } else { req.old_object.as_ref() }),
        Target::Other => {}
    }
    c.verdict()
}

/// A Group's status and its deletion are muster's: the status records what muster decided (a
/// phase, an allocation), and deleting a Group drops that while the job's pods may run. Only
/// muster writes the status subresource; only muster, the garbage collector (a Group whose owner
/// Job is gone) and the namespace controller delete Groups.
fn group_lifecycle(req: &AdmissionRequest<DynamicObject>, config: &WebhookConfig) -> Result<(), Refusal> {
    if req.resource.group != muster_k8s::API_GROUP || req.resource.resource != "groups" {
        return Ok(());
    }
    let name = format!("{}/{}", req.namespace.as_deref().unwrap_or(""), req.name);
    let status = req.sub_resource.as_deref() == Some("status");
    let fix = "delete or suspend the Job (or delete the pods) instead";
    match req.operation {
        Operation::Update if status => Err(Refusal::new(format!(
            "status: Group {name}: a Group's status and lifecycle are muster's (its phase and allocation record \
             what muster decided); {fix}, and muster updates the Group"
        ))),
        Operation::Delete if !config.may_delete_groups(user(req)) => Err(Refusal::new(format!(
            "Group {name}: a Group's status and lifecycle are muster's (deleting it would drop what muster \
             decided while the job's pods may run); {fix}, and muster deletes the Group once the job is gone"
        ))),
        _ => Ok(()),
    }
}

/// A pod muster placed keeps the requests it was placed for: muster gave the rest of its node to
/// other groups, so a resize that asks more (`pods/resize`, in-place vertical scaling) would
/// over-commit the node as muster counts it. Asking less is fine.
fn pod_resize(req: &AdmissionRequest<DynamicObject>) -> Result<(), Refusal> {
    if req.resource.resource != "pods" || req.sub_resource.as_deref() != Some("resize") {
        return Ok(());
    }
    let (Some(new), Some(old)) = (req.object.as_ref(), req.old_object.as_ref()) else { return Ok(()) };
    let (new, old): (Pod, Pod) = (typed(new, "Pod")?, typed(old, "Pod")?);
    let (Some(spec), Some(was)) = (new.spec.as_ref(), old.spec.as_ref()) else { return Ok(()) };
    if spec.scheduler_name.as_deref() != Some(SCHEDULER_NAME) {
        return Ok(());
    }
    let uncountable = |e: muster_k8s::pod::Uncountable| Refusal::new(e.under("spec").to_string());
    let (asks, placed) =
        (muster_k8s::pod::requests(spec).map_err(uncountable)?, muster_k8s::pod::requests(was).map_err(uncountable)?);
    let more: Vec<String> = asks
        .iter()
        .filter(|(r, a)| **a > placed.get(*r).copied().unwrap_or(0))
        .map(|(r, a)| {
            let show = |v: u64| muster_k8s::pod::show(r, u128::from(v));
            format!("{r} {} (placed for {})", show(*a), show(placed.get(r).copied().unwrap_or(0)))
        })
        .collect();
    if more.is_empty() {
        return Ok(());
    }
    Err(Refusal::new(format!(
        "spec.containers[*].resources: pod {} was placed by muster for what it asked then, and muster gave the \
         rest of its node to other groups; a resize to {} could over-commit the node; resize it down only, or \
         suspend the job and change its requests there",
        req.name,
        more.join(", ")
    )))
}

/// The rules for a Job created in a queue, checked by the mutating webhook on the Job as its
/// mutation leaves it, so that such a create costs one webhook call: the validating webhook skips
/// a create that still carries the mutation (`registration`), and checks any other.
pub(crate) async fn job_create<S: ClusterState>(
    job: &Job,
    req: &AdmissionRequest<DynamicObject>,
    config: &WebhookConfig,
    state: &S,
    now: Timestamp,
) -> Result<(), Refusal> {
    if config.is_muster(user(req)) {
        return Ok(());
    }
    let mut c = Checker::new(req, config, state, now);
    c.job(job, None).await;
    c.verdict()
}

struct Checker<'a, S> {
    config: &'a WebhookConfig,
    state: &'a S,
    user: &'a str,
    ns: &'a str,
    now: Timestamp,
    out: Vec<String>,
}

impl<'a, S: ClusterState> Checker<'a, S> {
    fn new(req: &'a AdmissionRequest<DynamicObject>, config: &'a WebhookConfig, state: &'a S, now: Timestamp) -> Self {
        Checker { config, state, user: user(req), ns: req.namespace.as_deref().unwrap_or(""), now, out: Vec::new() }
    }

    fn verdict(self) -> Result<(), Refusal> {
        if self.out.is_empty() { Ok(()) } else { Err(Refusal { messages: self.out }) }
    }
}

fn parallelism(job: &Job) -> i64 {
    job.spec.as_ref().and_then(|s| s.parallelism).map_or(1, i64::from)
}

fn pod_spec(job: &Job) -> Option<&PodSpec> {
    job.spec.as_ref()?.template.spec.as_ref()
}

fn user_keys() -> String {
    USER_KEYS.join(", ")
}

impl<S: ClusterState> Checker<'_, S> {
    fn refuse(&mut self, message: String) {
        self.out.push(message);
    }

    /// Reserved keys added, changed or removed between `old` and `new` (`old` is None on create);
    /// `allowed` exempts a key.
    fn reserved(&mut self, field: &str, old: Option<&Labels>, new: Option<&Labels>, allowed: &dyn Fn(&str) -> bool) {
        let keys: BTreeSet<&String> = old.into_iter().chain(new).flat_map(|m| m.keys()).collect();
        for key in keys.into_iter().filter(|k| is_reserved(k) && !allowed(k)) {
            let (was, now) = (get(old, key), get(new, key));
            let what = match (was, now) {
                (None, Some(_)) => {
                    format!("only muster may set it; remove it (the muster.dev/ keys you may set are {})", user_keys())
                }
                (Some(was), Some(now)) if was != now => {
                    format!("only muster may change it; keep the value {was:?} (not {now:?})")
                }
                (Some(was), None) => format!("only muster may remove it; keep it as it was ({was:?})"),
                _ => continue,
            };
            self.refuse(format!("{field}[{key}]: the key is reserved for muster: {what}"));
        }
    }

    /// Reserved keys of a Job's or JobSet's own metadata. The requests the mutating webhook
    /// stamps when this user unsuspends (or suspends) it may come from the user: they mean
    /// exactly what (un)suspending means, as long as they say now (a back-dated request could
    /// claim an earlier place).
    fn workload_metadata(&mut self, new: &ObjectMeta, old: Option<&ObjectMeta>, held: bool, was_held: Option<bool>) {
        let queued = get(new.labels.as_ref(), QUEUE).is_some();
        let now = self.now;
        let request_ok = |key: &str| {
            let asked = match key {
                RESUME_REQUESTED => was_held == Some(true),
                SUSPEND_REQUESTED => was_held == Some(false),
                _ => return false,
            };
            asked
                && queued
                && held
                && get(new.annotations.as_ref(), key)
                    .and_then(|v| v.parse::<Timestamp>().ok())
                    .is_some_and(|t| (t.as_second() - now.as_second()).abs() <= RESUME_SLACK_SECONDS)
        };
        self.reserved("metadata.labels", old.and_then(|o| o.labels.as_ref()), new.labels.as_ref(), &|_| false);
        self.reserved(
            "metadata.annotations",
            old.and_then(|o| o.annotations.as_ref()),
            new.annotations.as_ref(),
            &request_ok,
        );
    }

    /// A workload stays in the queue it was created in.
    fn queue_change(&mut self, kind: &str, old: Option<&str>, new: Option<&str>) {
        let field = label_field(QUEUE);
        match (old, new) {
            (Some(a), None) => self.refuse(format!(
                "{field}: {} cannot leave its queue; put back {QUEUE}={a} (or delete the {kind})",
                workload::a(kind)
            )),
            (Some(a), Some(b)) if a != b => self.refuse(format!(
                "{field}: {} cannot move from queue {a} to queue {b}; keep {QUEUE}={a}, or delete the {kind} \
                 and create it again with {QUEUE}={b}",
                workload::a(kind)
            )),
            (None, Some(b)) => self.refuse(format!(
                "{field}: {} joins a queue when it is created; delete the {kind} and create it again with \
                 {QUEUE}={b}",
                workload::a(kind)
            )),
            _ => {}
        }
    }

    /// The phase of `name`'s Group when muster has placed it (Admitted or Running); a failed
    /// lookup is refused, naming `field`.
    async fn placed_phase(&mut self, name: &str, field: &str) -> Option<GroupState> {
        match self.state.group(self.ns, name).await {
            Err(e) => {
                self.refuse(format!("{field}: {e}; try again"));
                None
            }
            Ok(g) => g?.status.as_ref()?.phase.filter(|p| matches!(p, GroupState::Admitted | GroupState::Running)),
        }
    }

    /// Refuses resizing `name` while muster has placed its group, unless it is suspended in the
    /// same update (the pods go, and muster queues it again).
    async fn placed_resize(&mut self, kind: &workload::Kind, name: &str, field: &str) {
        if let Some(phase) = self.placed_phase(name, field).await {
            self.refuse(format!(
                "{field}: {} {name} is {} (its Group is {phase:?}) and muster has placed its pods for the current \
                 size; suspend the {} first ({}: true), then change {field}, and muster queues it again with the new \
                 size",
                kind.kind.to_lowercase(),
                if phase == GroupState::Running { "running" } else { "admitted" },
                kind.kind.to_lowercase(),
                kind.hold_field,
            ));
        }
    }

    async fn job(&mut self, new: &Job, old: Option<&Job>) {
        // A JobSet's child Job, an MPIJob's launcher: part of that workload's group, checked there.
        if new.part_of_another() {
            return;
        }
        let resize_field = match old {
            Some(old) if parallelism(old) != parallelism(new) => "spec.parallelism".to_string(),
            _ => {
                resources_changed(old.and_then(pod_spec), pod_spec(new)).unwrap_or_else(|| "spec.template.spec".into())
            }
        };
        self.workload(new, old, &resize_field).await;
    }

    /// A workload of a held kind that a CRD defines, read from the request.
    async fn held<W: Workload + DeserializeOwned>(
        &mut self,
        req: &AdmissionRequest<DynamicObject>,
        obj: &DynamicObject,
    ) -> Result<(), Refusal> {
        let kind = W::kind().kind;
        let new: W = typed(obj, kind)?;
        let old: Option<W> = match req.operation {
            Operation::Create => None,
            _ => req.old_object.as_ref().map(|o| typed(o, kind)).transpose()?,
        };
        // A RayJob's Ray cluster: part of the RayJob's group, checked there.
        if !new.part_of_another() {
            self.workload(&new, old.as_ref(), W::size_field()).await;
        }
        Ok(())
    }

    /// The rules of every held kind: muster's keys stay out of the object and the metadata its
    /// controllers copy onto pods, its pods name muster's scheduler and no node, it is created
    /// held and stays in its queue, and its group can fit the queue (checked again when an
    /// update reshapes it, which is refused while the group is placed, naming `resize_field`).
    async fn workload<W: Workload>(&mut self, new: &W, old: Option<&W>, resize_field: &str) {
        let kind = W::kind().kind;
        let queue = new.queue();
        if let (None, Some(queue), false) = (old, queue, new.held()) {
            self.not_held::<W>(queue);
        }
        self.workload_metadata(new.meta(), old.map(|o| o.meta()), new.held(), old.map(|o| o.held()));
        let (sets, old_sets) = (new.pod_sets().unwrap_or_default(), old.and_then(|o| o.pod_sets().ok()));
        for set in &sets {
            let was = old_sets.iter().flatten().find(|s| s.field == set.field);
            for (field, meta) in &set.copied_metadata {
                let before = was.and_then(|w| w.copied_metadata.iter().find(|(f, _)| f == field)).and_then(|(_, m)| *m);
                let (l_old, a_old) =
                    (before.and_then(|m| m.labels.as_ref()), before.and_then(|m| m.annotations.as_ref()));
                let own = |k: &str| Some(k) == W::kind().pod_label;
                self.reserved(&format!("{field}.labels"), l_old, meta.and_then(|m| m.labels.as_ref()), &own);
                let a_new = meta.and_then(|m| m.annotations.as_ref());
                self.reserved(&format!("{field}.annotations"), a_old, a_new, &|_| false);
            }
        }
        // On update too: some kinds' templates are mutable, and their pods must never go to
        // another scheduler.
        if let Some(queue) = queue {
            let before = old.map(|o| unsupported_annotations(kind, o.meta().annotations.as_ref())).unwrap_or_default();
            for message in unsupported_annotations(kind, new.meta().annotations.as_ref()) {
                if !before.contains(&message) {
                    self.refuse(message);
                }
            }
            for set in &sets {
                let was = old_sets.iter().flatten().find(|s| s.field == set.field);
                self.unsupported(set.template, &set.template_field, was.map(|w| w.template));
                if set.template.scheduler_name.as_deref() != Some(SCHEDULER_NAME) {
                    self.refuse(format!(
                        "{}.schedulerName: the pods of {} in queue {queue} are placed by muster; remove \
                         schedulerName (muster's mutating webhook sets it to {SCHEDULER_NAME})",
                        set.template_field,
                        workload::a(kind)
                    ));
                }
                self.preset_node(&format!("{}.nodeName", set.template_field), kind, queue, Some(set.template));
            }
        }
        if let Some(old) = old {
            self.queue_change(kind, old.queue(), queue);
            if queue.is_some() && old.queue() == queue {
                self.workload_update(old, new, resize_field).await;
            }
            return;
        }
        let Some(queue) = queue else { return };
        self.group_name_free::<W>(new.meta()).await;
        let spec = self.queue(queue, &label_field(QUEUE)).await;
        self.fits_queue(workload::shape(new), spec.as_ref().map(|s| (queue, s)));
    }

    /// A workload's group is named after it: a live Group of that name that stands for another
    /// kind of workload, or for plain pods, would be taken for this one's. (One of the same kind
    /// is a deleted workload's, going with it; the controller tells them apart by uid.)
    async fn group_name_free<W: Workload>(&mut self, meta: &ObjectMeta) {
        let (kind, Some(name)) = (W::kind().kind, meta.name.as_deref()) else { return };
        let g = match self.state.group(self.ns, name).await {
            Err(e) => return self.refuse(format!("metadata.name: {e}; try again")),
            Ok(Some(g)) if g.metadata.deletion_timestamp.is_none() => g,
            Ok(_) => return,
        };
        if g.spec.owner.as_ref().is_some_and(|o| o.kind == kind && o.api_version.starts_with(W::kind().group)) {
            return;
        }
        // Whose group it is goes unsaid: the review may be forged (docs/webhook.md, Threat model).
        self.refuse(format!(
            "metadata.name: muster names a workload's group after it, and namespace {ns} has group {name} already, \
             of another workload or of plain pods labelled {GROUP}={name}; give this {kind} another name, or delete \
             that workload first",
            ns = self.ns
        ));
    }

    fn not_held<W: Workload>(&mut self, queue: &str) {
        let (kind, field) = (W::kind().kind, W::kind().hold_field);
        self.refuse(format!(
            "{field}: {} in queue {queue} must be created suspended, so that muster starts it when the whole \
             group fits; remove {field}: false (muster's mutating webhook sets it to true)",
            workload::a(kind)
        ));
    }

    /// Fields of a pod spec at `field` that muster does not place (`muster_k8s::unsupported`);
    /// on update only those the old spec (`was`) did not have, so that a workload made before
    /// stays writable (to suspend or delete it).
    fn unsupported(&mut self, spec: &PodSpec, field: &str, was: Option<&PodSpec>) {
        let before = was.map(|w| unsupported_fields(w, field)).unwrap_or_default();
        for message in unsupported_fields(spec, field) {
            if !before.contains(&message) {
                self.refuse(message);
            }
        }
    }

    /// A template's nodeName would put the pods on that node, past muster's placement (the Job
    /// controller creates them, and kubelets run pods with a node name as they come).
    fn preset_node(&mut self, field: &str, kind: &str, queue: &str, pod: Option<&PodSpec>) {
        if let Some(node) = pod.and_then(|p| p.node_name.as_deref()).filter(|n| !n.is_empty()) {
            self.refuse(format!(
                "{field}: the pods of {} in queue {queue} cannot choose their node ({node}): muster places \
                 every member of the group at once; remove nodeName (use a nodeSelector to restrict the nodes)",
                workload::a(kind)
            ));
        }
    }

    /// An update of a queued workload that changes its group's shape or the annotations that
    /// shape it: refused while muster has placed the group, then checked as a new one would be.
    async fn workload_update<W: Workload>(&mut self, old: &W, new: &W, resize_field: &str) {
        let shape = workload::shape(new);
        // Each set's pods and what each asks, and what each asks alone.
        let sizes = |s: &Shape| (s.members, s.sets.iter().map(|x| (x.pods, x.requests.clone())).collect::<Vec<_>>());
        let asks = |s: &(_, Vec<(u32, _)>)| s.1.iter().map(|(_, r)| r).cloned().collect::<Vec<_>>();
        let (was, now) = (workload::shape(old).ok().map(|s| sizes(&s)), shape.as_ref().ok().map(sizes));
        let resized = was != now;
        // A Job may change its pod count while placed: muster grows or shrinks its group.
        let counts_only = W::resizes_while_placed() && was.as_ref().map(asks) == now.as_ref().map(asks);
        let (a_old, a_new) = (old.meta().annotations.as_ref(), new.meta().annotations.as_ref());
        let annotated = [MIN_MEMBERS, DURATION, REQUIRED_TOPOLOGY, PREFERRED_TOPOLOGY, SHRINKABLE]
            .iter()
            .any(|k| get(a_old, k) != get(a_new, k));
        if !resized && !annotated {
            return;
        }
        // Suspending in the same update is what we ask for: the pods go, and muster requeues.
        if resized && !new.held() && !counts_only {
            let name = new.meta().name.as_deref().unwrap_or("");
            self.placed_resize(W::kind(), name, resize_field).await;
        }
        let queue = new.queue().unwrap_or("");
        // The queue was checked at creation; now only its quota matters, if it is still there.
        let spec = match self.state.queue(queue).await {
            Ok(Some(q)) => Some(q.spec.clone()),
            _ => None,
        };
        self.fits_queue(shape, spec.as_ref().map(|s| (queue, s)));
    }

    /// A queued workload's group as [`workload::shape`] (the function the controller sizes it
    /// with) gives it, every field at fault named, and whether it can ever fit its queue.
    fn fits_queue(&mut self, shape: Result<Shape, Vec<String>>, queue: Option<(&str, &QueueSpec)>) {
        let shape = match shape {
            Ok(shape) => shape,
            Err(errors) => return self.out.extend(errors),
        };
        if let Some((name, spec)) = queue.filter(|_| shape.members.min >= 1) {
            let field = &shape.count_field;
            let fix = format!("lower {field} or the pods' resource requests, or use a queue with a larger quota");
            let parts: Vec<(u64, Amounts)> =
                shape.minimum().into_iter().map(|(pods, asks)| (pods, member_requests(asks))).collect();
            if let Some(m) = never_fits(name, spec, &parts, field, &fix) {
                self.refuse(m);
            }
        }
    }

    fn duration(&mut self, ann: Option<&Labels>) {
        if let Err(m) = annotated_duration(ann) {
            self.refuse(m);
        }
    }

    /// The Queue named by a `muster.dev/queue` label, if it exists, is valid and admits the
    /// namespace; otherwise a refusal naming `field`.
    async fn queue(&mut self, name: &str, field: &str) -> Option<QueueSpec> {
        let q = match self.state.queue(name).await {
            Err(e) => {
                self.refuse(format!("{field}: {e}; try again"));
                return None;
            }
            Ok(None) => {
                self.refuse(format!(
                    "{field}: queue {name:?} does not exist; set the label to an existing queue (kubectl get queues) \
                     or ask an admin to create Queue {name}"
                ));
                return None;
            }
            Ok(Some(q)) => q,
        };
        let config = match q.spec.to_config(name) {
            Ok(c) => c,
            Err(e) => {
                self.refuse(format!(
                    "{field}: queue {name} is misconfigured ({e}); use another queue or ask an admin to fix it"
                ));
                return None;
            }
        };
        let mut labels = match self.state.namespace_labels(self.ns).await {
            Ok(l) => l.unwrap_or_default(),
            Err(e) => {
                self.refuse(format!("{field}: {e}; try again"));
                return None;
            }
        };
        labels.insert("kubernetes.io/metadata.name".into(), self.ns.to_string());
        if !config.namespace_selector.admits(self.ns, &labels) {
            self.refuse(format!(
                "{field}: queue {name} does not take work from namespace {ns} (see its spec.namespaceSelector); \
                 use a queue that admits {ns}, or ask an admin to add {ns} to the namespaceSelector of queue {name}",
                ns = self.ns
            ));
            return None;
        }
        Some(q.spec.clone())
    }

    async fn pod(&mut self, new: &Pod, old: Option<&Pod>) {
        let labels = new.metadata.labels.as_ref();
        let owner = job_owner(new.metadata.owner_references.as_ref());
        if let Some(old) = old {
            let old_labels = old.metadata.labels.as_ref();
            self.reserved("metadata.labels", old_labels, labels, &|_| false);
            self.reserved(
                "metadata.annotations",
                old.metadata.annotations.as_ref(),
                new.metadata.annotations.as_ref(),
                &|_| false,
            );
            for key in [QUEUE, GROUP] {
                if let (Some(was), now) = (get(old_labels, key), get(labels, key))
                    && Some(was) != now
                {
                    self.refuse(format!(
                        "{}: a pod cannot change its {} once created; keep {key}={was}, or delete the pod and create it again",
                        label_field(key),
                        if key == QUEUE { "queue" } else { "group" }
                    ));
                }
            }
            return;
        }
        // Pods of a Job come from its template, whose keys were checked on the Job; so does the
        // label by which a held kind knows its pods.
        if self.user != self.config.job_controller_user {
            let kind = workload::place::place_of(&new.metadata).map(|(kind, _)| kind);
            self.reserved("metadata.labels", None, labels, &|k| kind.is_some_and(|kind| kind.pod_label == Some(k)));
            self.reserved("metadata.annotations", None, new.metadata.annotations.as_ref(), &|_| false);
        }
        let spec = new.spec.as_ref();
        let group = get(labels, GROUP).filter(|_| owner.is_none());
        if group.is_some() && get(new.metadata.annotations.as_ref(), REPLICA_TOPOLOGY).is_some() {
            self.refuse(format!(
                "metadata.annotations[{REPLICA_TOPOLOGY}]: a plain pod's set has no replicas to keep apart; use \
                 {SET_TOPOLOGY} to keep the set within one domain, or {SUBGROUP} to keep sets together"
            ));
        }
        if let Some(node) = spec.and_then(|s| s.node_name.as_deref()).filter(|n| !n.is_empty())
            && !self.user.starts_with("system:node:")
        {
            if let Some(group) = group {
                self.refuse(format!(
                    "spec.nodeName: a pod of group {group} cannot choose its node ({node}): muster places every \
                     member of the group at once; remove spec.nodeName"
                ));
            } else {
                match self.state.namespace_labels(self.ns).await {
                    Err(e) => self.refuse(format!("spec.nodeName: {e}; try again")),
                    Ok(l) if get(l.as_ref(), MANAGED_NAMESPACE) == Some("true") => {
                        let then = match get(labels, QUEUE).filter(|_| owner.is_none()) {
                            Some(q) => format!(
                                "it has {QUEUE}={q} already; muster places it once it also has the label \
                                 {GROUP}: NAME"
                            ),
                            None => format!("and give the pod the labels {QUEUE} and {GROUP} to have muster place it"),
                        };
                        self.refuse(format!(
                            "spec.nodeName: pods in namespace {ns} cannot choose their node ({node}): the namespace \
                             is labelled {MANAGED_NAMESPACE}=true, so muster places its pods; remove spec.nodeName \
                             ({then})",
                            ns = self.ns
                        ))
                    }
                    Ok(_) => {}
                }
            }
        }
        if let Some(owner) = owner
            && self.user != self.config.job_controller_user
        {
            let scheduler = spec.and_then(|s| s.scheduler_name.as_deref()) == Some(SCHEDULER_NAME);
            let claims: Vec<String> = JOB_NAME_LABELS
                .iter()
                .chain(&[GROUP])
                .filter(|k| get(labels, k).is_some())
                .map(|k| format!("label {k}"))
                .chain(scheduler.then(|| format!("schedulerName {SCHEDULER_NAME}")))
                .collect();
            if !claims.is_empty() {
                self.refuse(format!(
                    "metadata.ownerReferences: only the Job controller creates the pods of Job {job}, and this pod \
                     claims to be one (a controller reference to the Job, with {}); remove the ownerReference and \
                     those fields, or create a Job of your own",
                    claims.join(" and "),
                    job = owner.name
                ));
            }
        }
        if owner.is_some() {
            return;
        }
        if let Some(group) = group {
            if !is_object_name(group) {
                self.refuse(format!(
                    "{}: {group:?} cannot name a Group; use lowercase letters, digits, '-' and '.', starting and \
                     ending with a letter or digit",
                    label_field(GROUP)
                ));
            }
            if spec.and_then(|s| s.scheduler_name.as_deref()) != Some(SCHEDULER_NAME) {
                self.refuse(format!(
                    "spec.schedulerName: the pods of group {group} are placed by muster; remove schedulerName \
                     (muster's mutating webhook sets it to {SCHEDULER_NAME})"
                ));
            }
        }
        let alias = alias_group(labels, self.config);
        if let Some(name) = alias {
            self.alias_pod_group(name, labels).await;
        }
        if let Some(name) = native_group(new) {
            self.native_pod_group(new, name, labels).await;
        }
        self.leader_worker_set_pod(new, labels);
        let queue = get(labels, QUEUE);
        if group.is_none() && queue.is_none() {
            return;
        }
        // A queue label alone queues nothing: without a group muster never sees the pod, and the
        // default scheduler would run it past the queue and its quota. (Mirror pods are the
        // kubelet's, which runs them whatever the API says.)
        if let (None, None, Some(q)) = (group, alias, queue)
            && !self.user.starts_with("system:node:")
        {
            self.refuse(format!(
                "{}: pod {} has the queue label ({QUEUE}={q}) but no group, so it would skip the queue and be \
                 run by the default scheduler; add the label {GROUP}: NAME (and {GROUP_SIZE}: N for a group of \
                 more than one pod), or remove the label {QUEUE}",
                label_field(QUEUE),
                pod_name(new)
            ));
            return;
        }
        if let Some(spec) = spec {
            self.unsupported(spec, "spec", None);
        }
        // What muster cannot count it cannot place: counted as nothing, it would over-commit a node.
        let asks = match spec.map(muster_k8s::pod::requests).transpose() {
            Ok(asks) => asks,
            Err(e) => {
                self.refuse(e.under("spec").to_string());
                None
            }
        };
        if let Some(group) = group.filter(|g| is_object_name(g)) {
            self.alike(new, group, asks.as_ref()).await;
        }
        let members = self.pod_group_size(new);
        self.duration(new.metadata.annotations.as_ref());
        let Some(queue) = queue else { return };
        let Some(qspec) = self.queue(queue, &label_field(QUEUE)).await else { return };
        if let (Some((n, field)), Some(asks)) = (members, asks) {
            let fix = format!("lower {field} or the pods' resource requests, or use a queue with a larger quota");
            if let Some(m) = never_fits(queue, &qspec, &[(n, member_requests(&asks))], &field, &fix) {
                self.refuse(m);
            }
        }
    }

    /// A new pod of a plain-pod group whose Group exists must ask what the Group's members ask,
    /// and for the same nodes: muster places it as one of them (the controller sized the Group
    /// from the group's first pod, and checks this too).
    async fn alike(&mut self, pod: &Pod, group: &str, asks: Option<&muster_k8s::pod::Amounts>) {
        let ns = self.ns;
        let g = match self.state.group(ns, group).await {
            Err(e) => return self.refuse(format!("{}: {e}; try again", label_field(GROUP))),
            Ok(None) => return,
            // Being deleted: the group's pods are gone, and these start a new one.
            Ok(Some(g)) if g.metadata.deletion_timestamp.is_some() => return,
            Ok(Some(g)) => g,
        };
        let name = pod_name(pod);
        // Whose group it is goes unsaid: the review may be forged (docs/webhook.md, Threat model).
        if g.spec.owner.is_some() {
            return self.refuse(format!(
                "{}: group {group} is a workload's group (muster names a workload's group after it), and muster \
                 binds only that workload's pods there; give pod {name} another group name",
                label_field(GROUP)
            ));
        }
        let Some(spec) = pod.spec.as_ref() else { return };
        // In a group of sets, a pod is alike the members of its own set.
        let set = get(pod.metadata.labels.as_ref(), SET);
        let (g_spec, sized) = match alike::set_spec(&g.spec, set) {
            Ok(s) => s,
            Err(message) => return self.refuse(format!("{}: pod {name}: {message}", label_field(SET))),
        };
        if let Some((mine, theirs)) = asks.and_then(|asks| alike::requests_differ(asks, &g_spec)) {
            self.refuse(format!(
                "spec.containers[*].resources: pod {name} asks {mine}, but the members of group {group} ask \
                 {theirs} {sized}; give every pod of a group the same requests, or use another group"
            ));
        }
        match muster_k8s::pod::placement(spec, "spec") {
            Err(e) => self.refuse(format!(
                "{e} (pod {name}), so muster cannot tell whether it may run where the members of group {group} \
                 run; give every pod of a group the same placement, in fields muster reads"
            )),
            Ok(p) => {
                for (field, what, mine, theirs) in alike::placement_differs(&p, &alike::group_placement(&g_spec)) {
                    self.refuse(format!(
                        "{field}: pod {name} has {mine}, but the members of group {group} have {theirs} {sized}; \
                         give every pod of a group the same {what}, or use another group"
                    ));
                }
            }
        }
    }

    /// A pod whose group is named by the alias label takes its size from that PodGroup's
    /// `spec.minMember` (the mutating webhook copies it into `muster.dev/group-size`); without a
    /// PodGroup it needs a `muster.dev/group-size` of its own.
    async fn alias_pod_group(&mut self, name: &str, labels: Option<&Labels>) {
        let (field, ns) = (label_field(POD_GROUP_ALIAS), self.ns);
        let size = get(labels, GROUP_SIZE);
        match self.state.pod_group(ns, name).await {
            Err(e) => self.refuse(format!("{field}: {e}; try again")),
            Ok(None) if size.is_none() => self.refuse(format!(
                "{field}: PodGroup {ns}/{name} does not exist (or the PodGroup CRD, scheduling.x-k8s.io/v1alpha1, \
                 is not installed), so the group has no size; create the PodGroup with spec.minMember before its \
                 pods, or give the pods the label {GROUP_SIZE}"
            )),
            Ok(None) => {}
            Ok(Some(pg)) => match pod_group_min_member(&pg, MAX_MEMBERS) {
                Err(e) => self.refuse(format!("{field}: {e}")),
                Ok(n) => self.size_from_pod_group(size, n, &format!("spec.minMember {n} of PodGroup {ns}/{name}")),
            },
        }
    }

    /// A queued pod naming a Kubernetes PodGroup is a member of the muster group of that name,
    /// sized by the PodGroup's gang `minCount`; in a CompositePodGroup tree, of the group named
    /// after the tree's root, in the set named after its PodGroup (the mutating webhook sets the
    /// labels from them).
    async fn native_pod_group(&mut self, pod: &Pod, name: &str, labels: Option<&Labels>) {
        let ns = self.ns;
        let gang = match native_gang(pod, self.state, ns).await {
            Err(refusal) => return self.out.extend(refusal.messages),
            Ok(None) => {
                return self.refuse(format!(
                    "{NATIVE_GROUP_FIELD}: PodGroup {ns}/{name} (scheduling.k8s.io/v1beta1) does not exist, so the \
                     group has no size; create the PodGroup with a gang policy before its pods"
                ));
            }
            Ok(Some(gang)) => gang,
        };
        let after = if gang.set().is_some() { "the root of its CompositePodGroup tree" } else { "the PodGroup" };
        let group = gang.group();
        match get(labels, GROUP) {
            Some(g) if g == group => {}
            Some(g) => self.refuse(format!(
                "{}: {g:?} differs from {group:?}, the group of {NATIVE_GROUP_FIELD} {name:?}; remove the label \
                 (muster names the group after {after}) or make them the same",
                label_field(GROUP)
            )),
            None => self.refuse(format!(
                "{}: the label is missing; set it to {group:?}, {after} (muster's mutating webhook does so)",
                label_field(GROUP)
            )),
        }
        match gang.size() {
            Err(e) => self.refuse(format!("{NATIVE_GROUP_FIELD}: {e}")),
            Ok(n) => {
                let source = match gang.set() {
                    Some(_) => format!("the {n} pods of the gangs of CompositePodGroup {ns}/{group}"),
                    None => format!("spec.schedulingPolicy.gang.minCount {n} of PodGroup {ns}/{name}"),
                };
                self.size_from_pod_group(get(labels, GROUP_SIZE), n, &source)
            }
        }
        if let (Ok(_), Err(e)) = (&gang.composite, gang.level()) {
            self.refuse(format!("{NATIVE_GROUP_FIELD}: PodGroup {ns}/{name} has {e}"));
        }
        let optional = gang.set().is_some_and(|s| s.optional);
        if get(labels, SET_MIN).is_some() && !optional {
            self.refuse(format!(
                "{}: a Kubernetes PodGroup's gang starts with its minCount pods, no fewer; remove the label",
                label_field(SET_MIN)
            ));
        }
        if let Some(set) = gang.set() {
            let members = set.members.to_string();
            let optional = set.optional.then_some((SET_MIN, "0"));
            for (key, want) in [(SET, set.name.as_str()), (SET_SIZE, members.as_str())].into_iter().chain(optional) {
                if get(labels, key) != Some(want) {
                    self.refuse(format!(
                        "{}: {} where PodGroup {ns}/{name} makes it {want:?}; remove the label (muster's mutating \
                         webhook sets it from the PodGroup) or set it to {want:?}",
                        label_field(key),
                        get(labels, key).map_or("missing".to_string(), |v| format!("{v:?}"))
                    ));
                }
            }
        }
    }

    /// A pod's `muster.dev/group-size` must be the size `n` its PodGroup gives (`source` says
    /// where that is).
    fn size_from_pod_group(&mut self, size: Option<&str>, n: u32, source: &str) {
        let size_field = label_field(GROUP_SIZE);
        match size {
            Some(v) if v.trim().parse::<u32>() == Ok(n) => {}
            Some(v) => self.refuse(format!(
                "{size_field}: {v:?} disagrees with {source}; remove the label (muster takes the size from the \
                 PodGroup) or set it to \"{n}\""
            )),
            None => self.refuse(format!(
                "{size_field}: the label is missing, and the pod's group has {source}; set it to \"{n}\" (muster's \
                 mutating webhook does so when it is registered for the pod)"
            )),
        }
    }

    /// The members a plain-pod group starts with, and the label that says so (None if a value
    /// is bad; the refusal is recorded).
    fn pod_group_size(&mut self, pod: &Pod) -> Option<(u64, String)> {
        let labels = pod.metadata.labels.as_ref();
        match plain_members(labels) {
            Ok(m) => {
                let key = if get(labels, GROUP_MIN).is_some() { GROUP_MIN } else { GROUP_SIZE };
                Some((u64::try_from(m.min).unwrap_or(0), label_field(key)))
            }
            Err(e) => {
                self.refuse(e);
                None
            }
        }
    }

    fn group(&mut self, new: &DynamicObject, old: Option<&DynamicObject>) {
        let name = format!(
            "{}/{}",
            new.metadata.namespace.as_deref().unwrap_or(self.ns),
            new.metadata.name.as_deref().unwrap_or("")
        );
        let Some(old) = old else {
            self.refuse(format!(
                "Group {name}: Group objects are created by muster, one per job, mirroring the job; submit a Job \
                 (or pods) with the label {QUEUE} instead"
            ));
            return;
        };
        // Other metadata (ownerReferences the garbage collector removes, other finalizers) is
        // not muster's and may change.
        let ours = |o: &DynamicObject| o.metadata.finalizers.iter().flatten().any(|f| f == FINALIZER);
        let mut changed = Vec::new();
        if new.data.get("spec") != old.data.get("spec") {
            changed.push("spec".to_string());
        }
        if new.metadata.labels != old.metadata.labels {
            changed.push("metadata.labels".into());
        }
        if new.metadata.annotations != old.metadata.annotations {
            changed.push("metadata.annotations".into());
        }
        if ours(new) != ours(old) {
            changed.push(format!("metadata.finalizers[{FINALIZER}]"));
        }
        if !changed.is_empty() {
            self.refuse(format!(
                "{}: Group {name} is written by muster only (its spec mirrors the job); change the job instead, \
                 and muster updates the Group",
                changed.join(", ")
            ));
        }
    }
}

/// A pod's name for messages (a pod created with generateName has none yet).
fn pod_name(pod: &Pod) -> String {
    match (pod.metadata.name.as_deref(), pod.metadata.generate_name.as_deref()) {
        (Some(n), _) if !n.is_empty() => n.to_string(),
        (_, Some(g)) if !g.is_empty() => format!("{g}*"),
        _ => "(unnamed)".to_string(),
    }
}

/// The first resource field that differs between two pod specs, such as
/// `spec.template.spec.containers[0].resources`.
fn resources_changed(old: Option<&PodSpec>, new: Option<&PodSpec>) -> Option<String> {
    let (old, new) = (old?, new?);
    let base = "spec.template.spec";
    for (list, a, b) in [
        ("containers", Some(&old.containers), Some(&new.containers)),
        ("initContainers", old.init_containers.as_ref(), new.init_containers.as_ref()),
    ] {
        let (a, b) = (a.map(Vec::as_slice).unwrap_or(&[]), b.map(Vec::as_slice).unwrap_or(&[]));
        if a.len() != b.len() {
            return Some(format!("{base}.{list}"));
        }
        if let Some(i) = a.iter().zip(b).position(|(x, y)| x.resources != y.resources) {
            return Some(format!("{base}.{list}[{i}].resources"));
        }
    }
    if old.resources != new.resources {
        return Some(format!("{base}.resources"));
    }
    if old.overhead != new.overhead {
        return Some(format!("{base}.overhead"));
    }
    None
}
