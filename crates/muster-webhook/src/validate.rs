//! The validating rules. Each refusal names the field and says what to change; a request with
//! several problems gets all of them at once.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Pod, PodSpec};
use k8s_openapi::jiff::Timestamp;
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, Operation};
use muster_graph::jobspec::{MAX_DURATION, MAX_MEMBERS};
use muster_k8s::labels::{
    DURATION, FINALIZER, GROUP, GROUP_MIN, GROUP_SIZE, MANAGED_NAMESPACE, MIN_MEMBERS, QUEUE, RESUME_REQUESTED,
    SCHEDULER_NAME, SUSPEND_REQUESTED, USER_KEYS, is_reserved,
};
use muster_k8s::{GroupPhase, QueueSpec};

use crate::config::WebhookConfig;
use crate::fit::{never_fits, pod_requests};
use crate::object::{
    Refusal, Target, annotation_field, get, is_object_name, job_owner, label_field, target, typed, user,
};
use crate::state::ClusterState;

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
    let (Some(obj), Operation::Create | Operation::Update) = (req.object.as_ref(), &req.operation) else {
        return Ok(());
    };
    let create = req.operation == Operation::Create;
    let mut c = Checker { config, state, user, ns: req.namespace.as_deref().unwrap_or(""), now, out: Vec::new() };
    match target(req) {
        Target::Job => {
            let new: Job = typed(obj, "Job")?;
            let old: Option<Job> =
                if create { None } else { req.old_object.as_ref().map(|o| typed(o, "Job")).transpose()? };
            c.job(&new, old.as_ref()).await;
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
    if c.out.is_empty() { Ok(()) } else { Err(Refusal { messages: c.out }) }
}

struct Checker<'a, S> {
    config: &'a WebhookConfig,
    state: &'a S,
    user: &'a str,
    ns: &'a str,
    now: Timestamp,
    out: Vec<String>,
}

fn suspended(job: &Job) -> bool {
    job.spec.as_ref().and_then(|s| s.suspend) == Some(true)
}

fn parallelism(job: &Job) -> i64 {
    job.spec.as_ref().and_then(|s| s.parallelism).map_or(1, i64::from)
}

/// Pods that run at once: parallelism, but never more than completions.
fn job_members(job: &Job) -> i64 {
    let p = parallelism(job);
    job.spec.as_ref().and_then(|s| s.completions).map_or(p, |c| p.min(i64::from(c)))
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

    async fn job(&mut self, new: &Job, old: Option<&Job>) {
        let (labels, old_labels) = (new.metadata.labels.as_ref(), old.and_then(|o| o.metadata.labels.as_ref()));
        let queue = get(labels, QUEUE);
        // The resume request the mutating webhook stamps when this user unsuspends the Job: it
        // means exactly what unsuspending means, so it may come from the user, as long as it
        // says now (a back-dated request could claim an earlier place).
        let now = self.now;
        // Likewise the suspend request stamped when this user suspends a running Job.
        let resume_ok = |key: &str| {
            let asked = match key {
                RESUME_REQUESTED => old.is_some_and(suspended),
                SUSPEND_REQUESTED => old.is_some_and(|o| !suspended(o)),
                _ => return false,
            };
            asked
                && queue.is_some()
                && suspended(new)
                && get(new.metadata.annotations.as_ref(), key)
                    .and_then(|v| v.parse::<Timestamp>().ok())
                    .is_some_and(|t| (t.as_second() - now.as_second()).abs() <= RESUME_SLACK_SECONDS)
        };
        self.reserved("metadata.labels", old_labels, labels, &|_| false);
        self.reserved(
            "metadata.annotations",
            old.and_then(|o| o.metadata.annotations.as_ref()),
            new.metadata.annotations.as_ref(),
            &resume_ok,
        );
        // The Job controller copies the template onto every pod, so its keys are the pods'.
        let template = |j: &Job| j.spec.as_ref().and_then(|s| s.template.metadata.clone());
        let (t_new, t_old) = (template(new), old.and_then(template));
        self.reserved(
            "spec.template.metadata.labels",
            t_old.as_ref().and_then(|m| m.labels.as_ref()),
            t_new.as_ref().and_then(|m| m.labels.as_ref()),
            &|_| false,
        );
        self.reserved(
            "spec.template.metadata.annotations",
            t_old.as_ref().and_then(|m| m.annotations.as_ref()),
            t_new.as_ref().and_then(|m| m.annotations.as_ref()),
            &|_| false,
        );

        let name = new.metadata.name.as_deref().unwrap_or("");
        if let Some(old) = old {
            let field = label_field(QUEUE);
            match (get(old_labels, QUEUE), queue) {
                (Some(a), None) => self.refuse(format!(
                    "{field}: a Job cannot leave its queue; put back {QUEUE}={a} (or delete the Job)"
                )),
                (Some(a), Some(b)) if a != b => self.refuse(format!(
                    "{field}: a Job cannot move from queue {a} to queue {b}; keep {QUEUE}={a}, or delete the Job \
                     and create it again with {QUEUE}={b}"
                )),
                (None, Some(b)) => self.refuse(format!(
                    "{field}: a Job joins a queue when it is created; delete the Job and create it again with {QUEUE}={b}"
                )),
                _ => {}
            }
            if queue.is_some() && get(old_labels, QUEUE) == queue {
                self.job_update(name, old, new).await;
            }
            return;
        }
        let Some(queue) = queue else { return };
        if !suspended(new) {
            self.refuse(format!(
                "spec.suspend: a Job in queue {queue} must be created suspended, so that muster starts it when \
                 the whole group fits; remove spec.suspend: false (muster's mutating webhook sets it to true)"
            ));
        }
        if pod_spec(new).and_then(|p| p.scheduler_name.as_deref()) != Some(SCHEDULER_NAME) {
            self.refuse(format!(
                "spec.template.spec.schedulerName: the pods of a Job in queue {queue} are placed by muster; remove \
                 schedulerName (muster's mutating webhook sets it to {SCHEDULER_NAME})"
            ));
        }
        let spec = self.queue(queue, &label_field(QUEUE)).await;
        self.job_shape(new, spec.as_ref().map(|s| (queue, s)));
    }

    async fn job_update(&mut self, name: &str, old: &Job, new: &Job) {
        let (p_old, p_new) = (parallelism(old), parallelism(new));
        let resources = resources_changed(pod_spec(old), pod_spec(new));
        let shape_changed = p_old != p_new
            || resources.is_some()
            || job_members(old) != job_members(new)
            || [MIN_MEMBERS, DURATION]
                .iter()
                .any(|k| get(old.metadata.annotations.as_ref(), k) != get(new.metadata.annotations.as_ref(), k));
        if !shape_changed {
            return;
        }
        // Suspending in the same update is what we ask for: the pods go, and muster requeues.
        if (p_old != p_new || resources.is_some()) && !suspended(new) {
            match self.state.group(self.ns, name).await {
                Err(e) => self.refuse(format!("spec.parallelism: {e}; try again")),
                Ok(Some(g)) => {
                    if let Some(phase @ (GroupPhase::Admitted | GroupPhase::Running)) =
                        g.status.as_ref().and_then(|s| s.phase)
                    {
                        let field = if p_old != p_new {
                            "spec.parallelism".to_string()
                        } else {
                            resources.clone().unwrap_or_default()
                        };
                        self.refuse(format!(
                            "{field}: job {name} is {} (its Group is {phase:?}) and muster has placed its pods for the \
                             current size; suspend the job first (spec.suspend: true), then change {field}, and \
                             muster queues it again with the new size",
                            if phase == GroupPhase::Running { "running" } else { "admitted" },
                        ));
                    }
                }
                Ok(None) => {}
            }
        }
        let queue = get(new.metadata.labels.as_ref(), QUEUE).unwrap_or("");
        // The queue was checked at creation; now only its quota matters, if it is still there.
        let spec = match self.state.queue(queue).await {
            Ok(Some(q)) => Some(q.spec.clone()),
            _ => None,
        };
        self.job_shape(new, spec.as_ref().map(|s| (queue, s)));
    }

    /// Size and annotation values of a queued Job, and whether it can ever fit its queue.
    fn job_shape(&mut self, job: &Job, queue: Option<(&str, &QueueSpec)>) {
        let ann = job.metadata.annotations.as_ref();
        let p = parallelism(job);
        if p > i64::from(MAX_MEMBERS) {
            self.refuse(format!(
                "spec.parallelism: {p} pods are more than one group may have (at most {MAX_MEMBERS}); split the job"
            ));
            return;
        }
        let members = job_members(job);
        let mut count = (members, "spec.parallelism".to_string());
        if let Some(v) = get(ann, MIN_MEMBERS) {
            let field = annotation_field(MIN_MEMBERS);
            match v.trim().parse::<i64>() {
                Ok(m) if (1..=members.max(1)).contains(&m) => count = (m.min(members), field),
                Ok(m) => self.refuse(format!(
                    "{field}: {m} is outside 1..={}; set the fewest pods the job can start with, from 1 to \
                     spec.parallelism ({}), or remove it for a job that starts with all its pods",
                    members.max(1),
                    members.max(1)
                )),
                Err(_) => self.refuse(format!(
                    "{field}: {v:?} is not a whole number; set the fewest pods the job can start with, from 1 to \
                     spec.parallelism ({})",
                    members.max(1)
                )),
            }
        }
        self.duration(ann);
        if let (Some((name, spec)), Some(pod), Ok(n @ 1..)) = (queue, pod_spec(job), u64::try_from(count.0)) {
            let fix = format!("lower {} or the pods' resource requests, or use a queue with a larger quota", count.1);
            if let Some(m) = never_fits(name, spec, n, &pod_requests(pod), &count.1, &fix) {
                self.refuse(m);
            }
        }
    }

    fn duration(&mut self, ann: Option<&Labels>) {
        if let Some(v) = get(ann, DURATION)
            && !v.trim().parse::<u64>().is_ok_and(|d| d <= MAX_DURATION)
        {
            self.refuse(format!(
                "{}: {v:?} is not a whole number of seconds from 0 to {MAX_DURATION}; set the expected run \
                 time in seconds, such as \"3600\" (or remove it)",
                annotation_field(DURATION)
            ));
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
        // Pods of a Job come from its template, whose keys were checked on the Job.
        if self.user != self.config.job_controller_user {
            self.reserved("metadata.labels", None, labels, &|_| false);
            self.reserved("metadata.annotations", None, new.metadata.annotations.as_ref(), &|_| false);
        }
        let spec = new.spec.as_ref();
        let group = get(labels, GROUP).filter(|_| owner.is_none());
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
                    Ok(l) if get(l.as_ref(), MANAGED_NAMESPACE) == Some("true") => self.refuse(format!(
                        "spec.nodeName: pods in namespace {ns} cannot choose their node ({node}): the namespace is \
                         labelled {MANAGED_NAMESPACE}=true, so muster places its pods; remove spec.nodeName (and \
                         give the pod a {QUEUE} label to have muster place it)",
                        ns = self.ns
                    )),
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
        let queue = get(labels, QUEUE);
        if group.is_none() && queue.is_none() {
            return;
        }
        let members = self.pod_group_size(new);
        self.duration(new.metadata.annotations.as_ref());
        let Some(queue) = queue else { return };
        let Some(qspec) = self.queue(queue, &label_field(QUEUE)).await else { return };
        if let (Some((n, field)), Some(spec)) = (members, spec) {
            let fix = format!("lower {field} or the pods' resource requests, or use a queue with a larger quota");
            if let Some(m) = never_fits(queue, &qspec, n, &pod_requests(spec), &field, &fix) {
                self.refuse(m);
            }
        }
    }

    /// The members a plain-pod group starts with, and the label that says so (None if a value
    /// is bad; the refusal is recorded).
    fn pod_group_size(&mut self, pod: &Pod) -> Option<(u64, String)> {
        let labels = pod.metadata.labels.as_ref();
        let parse = |v: &str| v.trim().parse::<u64>().ok().filter(|n| (1..=u64::from(MAX_MEMBERS)).contains(n));
        let size = match get(labels, GROUP_SIZE) {
            None => 1,
            Some(v) => match parse(v) {
                Some(n) => n,
                None => {
                    self.refuse(format!(
                        "{}: {v:?} is not a whole number from 1 to {MAX_MEMBERS}; set it to the number of pods in \
                         the group",
                        label_field(GROUP_SIZE)
                    ));
                    return None;
                }
            },
        };
        let size_field = label_field(GROUP_SIZE);
        match get(labels, GROUP_MIN) {
            None => Some((size, size_field)),
            Some(v) => match parse(v).filter(|m| *m <= size) {
                Some(m) => Some((m, label_field(GROUP_MIN))),
                None => {
                    self.refuse(format!(
                        "{}: {v:?} is not a whole number from 1 to the group size {size}; set the fewest pods the \
                         group can start with, or remove it for a group that starts with all {size}",
                        label_field(GROUP_MIN)
                    ));
                    None
                }
            },
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
