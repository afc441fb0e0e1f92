//! The controller's decisions, synchronous and free of I/O: a mirror of the cluster (compact
//! views of nodes, pods and managed Jobs) turned into inputs of the durable engine, and the
//! engine's transitions turned into [`Action`]s for the executor. Tested without a cluster;
//! the e2e tests run it against a real one.
//!
//! Groups are workloads of a held kind (key namespace/name: a Job, a JobSet with every pod of
//! every child Job, an MPIJob with its launcher and workers; each held and released through its
//! kind's hold field) or plain-pod groups (key namespace/group, the `muster.dev/group` label of
//! pods of no such workload).
//!
//! Rooms: this file holds the mirror, the batches and Jobs; `actions` the vocabulary between the
//! watchers, the brain and the executor; `ahead` pods made ahead of a start; `done` groups finished
//! by their pods before their Job says so; `earlier_run` a held workload released only once its
//! earlier run's pods have stopped; `binding` a placed group's pods bound to its members;
//! `over_limit` groups ended at their run-time limit;
//! `plain` plain-pod groups; `status` what muster tells
//! (Group and Queue statuses, events) and the repair of Group objects others changed.

mod actions;
mod ahead;
mod bind_failed;
mod binding;
mod claims;
mod devices;
mod done;
mod earlier_run;
mod node_room;
mod over_limit;
mod plain;
mod reshape;
mod slices;
mod status;

pub use actions::{Action, Change, Event, EventType, Subject};
pub use status::QueueView;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use muster_durable::{ClusterReport, DurableEngine, DurableError, Input, Options};
use muster_graph::{Graph, GroupRequest, NodeSpec, Policy, ResourceGraph};
use muster_k8s::group::{MemberAllocation, RequeueState};
use muster_k8s::{GroupConditionType as Cond, GroupStatus, QueueStatus, labels, workload};
use muster_queue::{
    EngineConfig, ExternalHold, GroupKey, GroupSpec, GroupState, MemberPlacement, Plan, Reason, Transition,
};
use muster_store::{Fence, Store};
use tracing::{debug, info, warn};

use crate::convert::{
    self, ClaimView, ClassView, GroupObjectView, NamespaceView, NodeView, PodPhase, PodView, SliceView, TemplateView,
    WorkloadView,
};
use crate::metrics::Metrics;

struct Mirror<T> {
    items: HashMap<String, T>,
    /// Keys not seen again since a relist began.
    stale: Option<BTreeSet<String>>,
    synced: bool,
}

impl<T> Default for Mirror<T> {
    fn default() -> Self {
        Mirror { items: HashMap::new(), stale: None, synced: false }
    }
}

impl<T> Mirror<T> {
    /// Applies a change; returns the items a finished relist dropped.
    fn change(&mut self, c: Change<T>, key: impl Fn(&T) -> String) -> (Option<T>, Vec<T>) {
        match c {
            Change::Init => {
                self.stale = Some(self.items.keys().cloned().collect());
                (None, vec![])
            }
            Change::Apply(v) => {
                let k = key(&v);
                if let Some(s) = self.stale.as_mut() {
                    s.remove(&k);
                }
                self.items.insert(k, v);
                (None, vec![])
            }
            Change::Delete(v) => (self.items.remove(&key(&v)), vec![]),
            Change::InitDone => {
                self.synced = true;
                let gone = self.stale.take().unwrap_or_default();
                (None, gone.into_iter().filter_map(|k| self.items.remove(&k)).collect())
            }
        }
    }
}

/// Settings of the decision logic.
#[derive(Debug, Clone)]
pub struct BrainConfig {
    pub engine: EngineConfig,
    pub options: Options,
    pub policy: Policy,
    /// Queue objects left out of `engine`, with why (their `Accepted` condition's message): a
    /// group naming one is told that, not that its queue is unknown.
    pub left_out_queues: BTreeMap<String, String>,
}

/// The controller's state and decisions.
pub struct Brain<S: Store> {
    cfg: BrainConfig,
    nodes: Mirror<NodeView>,
    /// ResourceSlices by name (`slices.rs`).
    slices: Mirror<SliceView>,
    /// ResourceClaims by uid (`claims.rs`).
    claims: Mirror<ClaimView>,
    /// ResourceClaimTemplates by namespace/name, DeviceClasses by name (`devices.rs`).
    templates: Mirror<TemplateView>,
    classes: Mirror<ClassView>,
    /// What each class stands for, remembered (`devices.rs`).
    class_drivers: devices::ClassDriverMemo,
    pods: Mirror<PodView>,
    /// Queued workloads, per held kind (each kind has its own watcher, so its own relists).
    workloads: Vec<(&'static workload::Kind, Mirror<WorkloadView>)>,
    namespaces: Mirror<NamespaceView>,
    group_objects: Mirror<GroupObjectView>,
    /// Groups whose object disagrees with what muster wrote (or is gone), since when: repaired
    /// if it still does a little later (`status::REPAIR_AFTER_SECS`).
    suspect: BTreeMap<GroupKey, i64>,
    /// Pods of each managed group, by uid.
    group_pods: HashMap<GroupKey, BTreeSet<String>>,
    /// Bindings sent and not yet seen in a pod's nodeName: pod uid -> member.
    binding: HashMap<String, u32>,
    /// What each node has left now, as its kubelet counts it: members are bound only there.
    room: node_room::NodeRoom,
    /// Ready counts last reported to the engine.
    ready_sent: HashMap<GroupKey, u32>,
    /// Groups whose Kubernetes PodGroup muster has marked scheduled (a terminal condition).
    pod_group_scheduled: HashSet<GroupKey>,
    /// Other schedulers' pods and allocated claims (by engine id) the engine could not count yet
    /// (on a node it does not know yet): retried each cycle.
    foreign_waiting: BTreeSet<String>,
    /// Pods told by a warning event why muster does not bind them (by uid): told once.
    told_pods: BTreeSet<String>,
    statuses: HashMap<GroupKey, GroupStatus>,
    /// The Queue statuses last sent, to send only changes.
    queue_statuses: BTreeMap<String, QueueStatus>,
    /// Groups changed state since the Queue statuses were last worked out.
    queue_statuses_stale: bool,
    /// How far each queue's latest estimated starts were from the admissions.
    estimate_errors: status::EstimateErrors,
    /// Groups whose Group object this instance has written (a restart writes each once more).
    ensured: BTreeSet<GroupKey>,
    /// spec.suspend last patched onto a Job and not yet seen back.
    suspend_sent: HashMap<GroupKey, bool>,
    /// Pending groups whose workloads were released ahead of their reserved start (`ahead.rs`).
    ahead: HashSet<GroupKey>,
    /// Groups ended at their run-time limit whose workload was told to stop (`over_limit.rs`).
    over_limit_stopped: HashSet<GroupKey>,
    engine: Option<DurableEngine<S>>,
    /// Engine inputs waiting for the next batch.
    inputs: Vec<Input>,
    /// Jobs (by "namespace/name") and groups whose objects changed since the last reconcile.
    dirty_jobs: BTreeSet<String>,
    dirty_groups: BTreeSet<GroupKey>,
    /// Plain-pod groups whose pods changed since the last reconcile.
    dirty_plain: BTreeSet<GroupKey>,
    /// Plain groups refused (bad labels, or the engine did not queue them): reported once, not
    /// submitted again until their pods are gone.
    plain_refused: BTreeSet<GroupKey>,
    /// Workloads and plain groups whose pods' devices could not be read against the published
    /// devices (a class that stands for no driver yet): looked at again once devices are
    /// published (`slices.rs`).
    awaiting_devices: BTreeSet<GroupKey>,
    actions: Vec<Action>,
    metrics: Arc<Metrics>,
}

fn time(secs: i64) -> Time {
    Time(Timestamp::from_second(secs.clamp(0, 253_402_207_199)).unwrap_or(Timestamp::UNIX_EPOCH))
}

impl<S: Store> Brain<S> {
    pub fn new(cfg: BrainConfig) -> Self {
        Brain {
            cfg,
            nodes: Mirror::default(),
            slices: Mirror::default(),
            claims: Mirror::default(),
            templates: Mirror::default(),
            classes: Mirror::default(),
            class_drivers: Default::default(),
            pods: Mirror::default(),
            workloads: workload::HELD_KINDS.iter().map(|k| (*k, Mirror::default())).collect(),
            namespaces: Mirror::default(),
            group_objects: Mirror::default(),
            suspect: BTreeMap::new(),
            group_pods: HashMap::new(),
            binding: HashMap::new(),
            room: node_room::NodeRoom::default(),
            ready_sent: HashMap::new(),
            pod_group_scheduled: HashSet::new(),
            foreign_waiting: BTreeSet::new(),
            told_pods: BTreeSet::new(),
            statuses: HashMap::new(),
            queue_statuses: BTreeMap::new(),
            queue_statuses_stale: false,
            estimate_errors: status::EstimateErrors::default(),
            ensured: BTreeSet::new(),
            suspend_sent: HashMap::new(),
            ahead: HashSet::new(),
            over_limit_stopped: HashSet::new(),
            engine: None,
            inputs: Vec::new(),
            dirty_jobs: BTreeSet::new(),
            dirty_groups: BTreeSet::new(),
            dirty_plain: BTreeSet::new(),
            plain_refused: BTreeSet::new(),
            awaiting_devices: BTreeSet::new(),
            actions: Vec::new(),
            metrics: Arc::new(Metrics::new()),
        }
    }

    /// Counts decisions into `metrics` (by default into a registry of its own).
    pub fn with_metrics(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = metrics;
        self
    }

    /// Whether every watcher has listed once (recovery needs the whole cluster).
    pub fn synced(&self) -> bool {
        self.nodes.synced
            && self.slices.synced
            && self.claims.synced
            && self.templates.synced
            && self.classes.synced
            && self.pods.synced
            && self.workloads_synced()
    }

    fn workloads_synced(&self) -> bool {
        self.workloads.iter().all(|(_, m)| m.synced)
    }

    /// The workload mirrored under `mirror_key` ("namespace/name").
    fn workload(&self, mirror_key: &str) -> Option<&WorkloadView> {
        self.workloads.iter().find_map(|(_, m)| m.items.get(mirror_key))
    }

    fn workloads(&self) -> impl Iterator<Item = &WorkloadView> {
        self.workloads.iter().flat_map(|(_, m)| m.items.values())
    }

    pub fn engine(&self) -> Option<&DurableEngine<S>> {
        self.engine.as_ref()
    }

    /// Gives up the store lease on a clean stop, so that a standby need not wait for it to lapse.
    pub fn release(&mut self) {
        if let Some(e) = self.engine.as_mut() {
            let fence = e.fence().clone();
            if let Err(err) = e.store_mut().release_lease(&fence) {
                warn!("releasing the store lease: {err}");
            }
        }
    }

    /// Takes the actions decided so far, but none for a namespace being deleted: its objects
    /// are going anyway, and the apiserver refuses new ones there. A namespace's teardown deletes
    /// pods before their Jobs, so each group would otherwise report its readiness dropping
    /// (statuses, events) and then delete a Group object already collected.
    pub fn take_actions(&mut self) -> Vec<Action> {
        let mut actions = std::mem::take(&mut self.actions);
        let terminating = |ns: &str| self.namespaces.items.get(ns).is_some_and(|n| n.terminating);
        actions.retain(|a| a.group().is_none_or(|k| !terminating(&k.namespace)));
        actions
    }

    /// Recovery: the store replayed and reconciled with the cluster as the watchers listed it.
    /// Then every Job the store does not know is submitted and other schedulers' pods counted.
    pub fn start(&mut self, store: S, fence: Fence, now: i64) -> Result<(), crate::ControllerError> {
        let mut specs: Vec<_> = self.nodes.items.values().map(|n| n.spec.clone()).collect();
        specs.sort_by(|a, b| a.name.cmp(&b.name));
        // A node the graph refuses is left out, as a running engine refuses it: its groups' members
        // there are lost, and the rest of the cluster is scheduled on.
        let (graph, refused) = Graph::from_nodes_leaving_out("kubernetes", &specs);
        for e in refused {
            warn!("left out of the cluster muster schedules on: {e}");
        }
        let graph = ResourceGraph::new(graph, self.cfg.policy);
        let report = self.report();
        let (engine, recovery) = DurableEngine::recover(
            graph,
            self.cfg.engine.clone(),
            store,
            fence,
            self.cfg.options.clone(),
            &report,
            now,
        )?;
        for c in &recovery.conflicts {
            warn!(subject = %c.subject, "recovery conflict: {}", c.message);
        }
        info!(
            groups = engine.engine().groups().count(),
            changed = recovery.transitions.len(),
            conflicts = recovery.conflicts.len(),
            "recovered from the store"
        );
        self.engine = Some(engine);
        for n in self.nodes.items.values().filter(|n| !n.ready) {
            self.inputs.push(Input::NodeUp { name: n.spec.name.clone(), up: false });
        }
        for p in self.pods.items.values().filter(|p| !p.ours && p.holds_capacity()) {
            self.foreign_waiting.insert(p.uid.clone());
        }
        let claims: Vec<String> = self.claim_holds().map(|(id, _)| id).collect();
        self.foreign_waiting.extend(claims);
        self.reconsider_every_workload();
        self.dirty_groups.extend(self.group_pods.keys().cloned());
        // The last instance may have died before writing a status: every placed group's status
        // is written again, since its allocation is what says where the pods belong.
        let placed: Vec<GroupKey> = (self.engine.iter().flat_map(|e| e.engine().groups()))
            .filter(|g| g.state.holds_allocation())
            .map(|g| g.spec.key.clone())
            .collect();
        for key in placed {
            self.update_status(&key, "placed; recovered after a restart of muster", now);
        }
        self.after(recovery.transitions, now);
        self.reconcile(now);
        Ok(())
    }

    /// A new configuration (Queues, Cohorts, Reservations or PriorityClasses changed), taken by
    /// the running engine ([`DurableEngine::reconfigure`]): no group moves and nothing is read
    /// again. Refused by the engine, it is logged and the running one is kept; with the store
    /// unavailable it waits with the other inputs. Then every workload is looked at again, as
    /// after a start: one its queue did not take before may be taken now.
    pub fn reconfigure(&mut self, engine: EngineConfig, left_out_queues: BTreeMap<String, String>, now: i64) {
        // What came before the change goes in under the configuration it came under.
        self.flush(now);
        if let Some(e) = self.engine.as_mut() {
            match e.reconfigure(engine.clone(), now) {
                Ok(_) | Err(DurableError::Unavailable { kept: true, .. }) => {}
                Err(err) => return warn!("the new configuration is refused; the running one is kept: {err}"),
            }
            for q in e.engine().config().queues.iter().filter(|q| q.closed) {
                warn!(
                    queue = q.name,
                    "no valid Queue defines it, but groups still name it: kept closed until none does"
                );
            }
        }
        info!(queues = engine.queues.len(), reservations = engine.reservations.len(), "configuration taken");
        self.cfg.engine = engine;
        self.cfg.left_out_queues = left_out_queues;
        // Every Queue's status is written again: one deleted and made anew has none.
        self.queue_statuses.clear();
        self.queue_statuses_stale = true;
        self.plain_refused.clear();
        self.reconsider_every_workload();
    }

    /// Marks every workload and plain group to be looked at by the next reconcile.
    fn reconsider_every_workload(&mut self) {
        let keys: Vec<String> = self.workloads().map(|j| j.key.to_string()).collect();
        self.dirty_jobs.extend(keys);
        let plain: Vec<GroupKey> = self.group_pods.keys().filter(|k| self.is_plain(k)).cloned().collect();
        self.dirty_plain.extend(plain);
    }

    /// What the cluster runs, for recovery: bound pods with their members (a member whose pod
    /// succeeded still counts: its group has not finished), finished Jobs and plain groups.
    /// Groups whose Job or pods are gone are deleted after recovery ([`Brain::cycle`]).
    fn report(&self) -> ClusterReport {
        let mut report = ClusterReport::default();
        for p in self.pods.items.values() {
            if let (Some(key), Some(node), Some(member)) = (p.group_key(), &p.node, p.member)
                && p.ours
                && p.phase != PodPhase::Failed
                && !p.deleting
            {
                report.running.entry(key).or_default().push(MemberPlacement {
                    index: member,
                    node: node.clone(),
                    devices: vec![],
                });
            }
        }
        for j in self.workloads() {
            report.pods_recreated.insert(j.key.clone());
            if let Some(ok) = j.finished {
                report.finished.insert(j.key.clone(), ok);
                report.running.remove(&j.key);
            }
        }
        for key in self.group_pods.keys().filter(|k| self.is_plain(k)) {
            if let Some(ok) = self.plain_finished(key, 1) {
                report.finished.insert(key.clone(), ok);
                report.running.remove(key);
            } else {
                // A member without a bound pod is still coming (its pod is gated, or not created:
                // admission does not wait for the pods), not lost: evicting would delete the
                // group's pods.
                report.pods_recreated.insert(key.clone());
            }
        }
        report
    }

    /// Mirrors one watch event. Engine inputs wait for the next [`Brain::cycle`], which runs
    /// them as one batch: one engine copy and one store transaction per batch of events.
    pub fn handle(&mut self, ev: Event, now: i64) {
        match ev {
            Event::Node(c) => self.node_event(c),
            Event::Slice(c) => self.slice_event(c),
            Event::Claim(c) => self.claim_event(c),
            Event::Template(c) => self.template_event(c),
            Event::Class(c) => self.class_event(c),
            Event::Pod(c) => self.pod_event(c),
            Event::Workload(kind, c) => {
                if let Change::Apply(j) | Change::Delete(j) = &c {
                    self.dirty_jobs.insert(j.key.to_string());
                }
                let Some((_, mirror)) = self.workloads.iter_mut().find(|(k, _)| *k == kind) else {
                    return warn!("a workload of kind {} is not a held kind", kind.kind);
                };
                let (deleted, dropped) = mirror.change(c, |j| j.key.to_string());
                for j in deleted.into_iter().chain(dropped) {
                    self.dirty_jobs.insert(j.key.to_string());
                }
            }
            Event::Namespace(c) => {
                self.namespaces.change(c, |n| n.name.clone());
            }
            Event::GroupObject(c) => {
                let applied = if let Change::Apply(g) = &c { Some(g.clone()) } else { None };
                let (deleted, dropped) = self.group_objects.change(c, |g| g.key.to_string());
                for g in deleted.into_iter().chain(dropped) {
                    self.suspect.entry(g.key).or_insert(now);
                }
                if let Some(g) = applied {
                    // Only another writer's status is suspect: muster's own older writes come
                    // back late under load, and repairing those would double its writes.
                    let ours = self.statuses.get(&g.key).map(convert::status_fingerprint);
                    if g.foreign_status && ours.is_some_and(|f| f != g.status) {
                        self.suspect.entry(g.key).or_insert(now);
                    } else {
                        self.suspect.remove(&g.key);
                    }
                }
            }
            Event::BindFailed { key, pod, message } => self.bind_failed(key, &pod, &message, now),
        }
    }

    fn node_event(&mut self, mut c: Change<NodeView>) {
        if let Change::Apply(n) = &mut c {
            n.spec.published = self.published_on(&n.spec.name);
        }
        let before = match &c {
            Change::Apply(n) => self.nodes.items.get(&n.spec.name).cloned(),
            _ => None,
        };
        let applied = if let Change::Apply(n) = &c { Some(n.clone()) } else { None };
        let (deleted, dropped) = self.nodes.change(c, |n| n.spec.name.clone());
        let published = |n: &NodeView| !n.spec.published.is_empty();
        if applied.iter().chain(&deleted).chain(&dropped).any(published) {
            self.published_changed();
        }
        if self.engine.is_none() {
            return;
        }
        for n in deleted.into_iter().chain(dropped) {
            self.inputs.push(Input::NodeRemoved(n.spec.name));
        }
        let Some(n) = applied else { return };
        let name = n.spec.name.clone();
        match before {
            None => {
                self.inputs.push(Input::NodeAdded(n.spec.clone()));
                if !n.ready {
                    self.inputs.push(Input::NodeUp { name, up: false });
                }
            }
            Some(old) => {
                if old.spec.unschedulable != n.spec.unschedulable {
                    let cordoned = n.spec.unschedulable;
                    self.inputs.push(Input::NodeCordoned { name: name.clone(), cordoned });
                }
                if old.ready != n.ready {
                    self.inputs.push(Input::NodeUp { name: name.clone(), up: n.ready });
                }
                // Anything but the cordon, which NodeCordoned carries.
                if (NodeSpec { unschedulable: n.spec.unschedulable, ..old.spec }) != n.spec {
                    // Running groups stay; a new rack or resource set waits until the node is idle.
                    self.inputs.push(Input::NodeChanged(n.spec.clone()));
                }
            }
        }
    }

    fn pod_event(&mut self, c: Change<PodView>) {
        let applied = if let Change::Apply(p) = &c { Some(p.clone()) } else { None };
        let (deleted, dropped) = self.pods.change(c, |p| p.uid.clone());
        let waited = self.room.pods_changed(deleted.iter().chain(&dropped), applied.as_ref());
        self.dirty_groups.extend(waited);
        for p in deleted.into_iter().chain(dropped) {
            self.binding.remove(&p.uid);
            self.told_pods.remove(&p.uid);
            if let Some(key) = p.group_key().filter(|_| p.ours) {
                // A pod outliving its finished group held its node until now.
                if self.engine.is_some() {
                    self.inputs.push(Input::Vacate(p.uid.clone()));
                }
                if let Some(s) = self.group_pods.get_mut(&key) {
                    s.remove(&p.uid);
                    if s.is_empty() {
                        self.group_pods.remove(&key);
                    }
                }
                if p.is_plain() {
                    self.dirty_plain.insert(key.clone());
                }
                self.dirty_groups.insert(key);
            } else {
                self.foreign_waiting.remove(&p.uid);
                if self.engine.is_some() {
                    self.inputs.push(Input::Vacate(p.uid.clone()));
                }
            }
        }
        let Some(p) = applied else { return };
        if let Some(key) = p.group_key().filter(|_| p.ours) {
            if p.node.is_some() {
                self.binding.remove(&p.uid);
            }
            if p.node.is_some() && !p.holds_capacity() && self.engine.is_some() {
                self.inputs.push(Input::Vacate(p.uid.clone()));
            }
            self.group_pods.entry(key.clone()).or_default().insert(p.uid.clone());
            if p.is_plain() {
                self.dirty_plain.insert(key.clone());
            }
            // A queued Job is known long before its pods exist (they come after muster resumes
            // it); a pod of a Job muster does not know, once Jobs are listed, is of a Job without
            // the queue label whose template names muster's scheduler.
            let job_unknown = self.workloads_synced() && self.workload(&key.to_string()).is_none();
            if !p.is_plain() && job_unknown && p.node.is_none() && !p.phase.is_terminal() && !p.deleting {
                let message = format!(
                    "pod {} names schedulerName {} but its Job {} has no {} label, so muster never places it: \
                     create the Job again with the label, or without schedulerName",
                    p.name,
                    labels::SCHEDULER_NAME,
                    key.name,
                    labels::QUEUE
                );
                self.tell_pod(&key, &p.namespace, &p.name, &p.uid, "MissingGroup", &message);
            }
            self.dirty_groups.insert(key);
        } else if p.ours && p.node.is_none() && !p.phase.is_terminal() && !p.deleting {
            let message = format!(
                "pod {} names schedulerName {} but belongs to no group, so muster never places it: give it the \
                 labels {} and {} (or create it from a Job with the queue label)",
                p.name,
                labels::SCHEDULER_NAME,
                labels::QUEUE,
                labels::GROUP
            );
            let key = GroupKey::new(&p.namespace, &p.name);
            self.tell_pod(&key, &p.namespace, &p.name, &p.uid, "MissingGroup", &message);
        } else if self.engine.is_some() {
            if p.holds_capacity() {
                let hold = ExternalHold::pod(p.node.as_deref().expect("bound"), &p.requests);
                self.inputs.push(Input::Occupy { id: p.uid.clone(), hold });
            } else {
                self.foreign_waiting.remove(&p.uid);
                self.inputs.push(Input::Vacate(p.uid.clone()));
            }
        }
    }

    /// The pods of a group about to be released that still run (or are still being deleted:
    /// an MPIJob's workers once its launcher succeeded) keep their nodes' room as other
    /// schedulers' pods do, until they end or are gone; else the next group is bound beside them.
    fn hold_outliving_pods(&mut self, key: &GroupKey) {
        let uids = self.group_pods.get(key).into_iter().flatten();
        for p in uids.filter_map(|u| self.pods.items.get(u)).filter(|p| p.holds_capacity()) {
            let hold = ExternalHold::pod(p.node.as_deref().expect("bound"), &p.requests);
            self.inputs.push(Input::Occupy { id: p.uid.clone(), hold });
        }
    }

    fn state(&self, key: &GroupKey) -> Option<GroupState> {
        self.engine.as_ref()?.engine().group(key).map(|g| g.state)
    }

    /// Brings the engine in line with one Job (or its absence).
    fn job_changed(&mut self, mirror_key: &str, now: i64) {
        let Some(j) = self.workload(mirror_key).cloned() else {
            if let Some((ns, name)) = mirror_key.split_once('/') {
                let key = GroupKey::new(ns, name);
                // A plain group of the same name lives on its pods.
                if !self.is_plain(&key) {
                    self.vanished(key);
                }
            }
            return;
        };
        let Some(state) = self.state(&j.key) else {
            if j.finished.is_none() {
                self.submit(&j);
            }
            return;
        };
        if state == GroupState::Failed {
            self.stop_over_limit(&j.key);
        }
        if let Some(ok) = j.finished {
            if state.holds_allocation() {
                self.hold_outliving_pods(&j.key);
                self.inputs.push(Input::Finished { key: j.key.clone(), succeeded: ok });
            }
            return;
        }
        self.reshape_if_changed(&j, state);
        // The webhook stamps a user's suspension and resumption, so they are never confused with
        // muster's own suspensions (on eviction) however late a watch event arrives.
        let released = self.wants_released(&j, state, now);
        if j.suspend_requested && released {
            self.inputs.push(Input::Suspend(j.key.clone()));
        }
        if j.resume_requested && (state == GroupState::Suspended || state == GroupState::Deactivated) {
            self.inputs.push(Input::Resume(j.key.clone()));
        }
        if j.suspend_requested || j.resume_requested {
            self.actions.push(Action::ClearRequests { key: j.key.clone(), kind: j.kind });
        }
        // Level-triggered: what a crash lost between writing a decision and acting on it (the
        // Group object, unsuspending an admitted Job, suspending an evicted one) is done again.
        if self.ensured.insert(j.key.clone())
            && let Ok(spec) = self.group_object(&j)
        {
            let (key, job_uid) = (j.key.clone(), j.uid.clone());
            self.actions.push(Action::EnsureGroup { key, spec: Box::new(spec), job_uid });
        }
        let release = released && !self.earlier_run_stopping(&j.key);
        if j.suspended != release {
            // The Job is as its group wants it.
            self.suspend_sent.remove(&j.key);
        } else if !j.suspend_requested && !state.is_terminal() && state != GroupState::Suspended {
            self.set_suspend(&j.key, !release);
        }
    }

    /// Holds or releases a group's workload (a Job's or JobSet's spec.suspend), unless the same
    /// patch is already on its way. A workload not (or no longer) mirrored has nothing to patch:
    /// once it is listed, [`Brain::job_changed`] sets it as its group wants.
    fn set_suspend(&mut self, key: &GroupKey, suspend: bool) {
        let Some(kind) = self.workload(&key.to_string()).map(|j| j.hold) else { return };
        if self.suspend_sent.insert(key.clone(), suspend) != Some(suspend) {
            self.actions.push(Action::Suspend { key: key.clone(), kind, suspend });
        }
    }

    /// A group whose Job or pods are gone: out of the engine, and its Group object deleted (a
    /// Job's is garbage-collected anyway; a plain group's has no owner).
    fn vanished(&mut self, key: GroupKey) {
        self.statuses.remove(&key);
        let ensured = self.ensured.remove(&key);
        self.suspend_sent.remove(&key);
        self.ahead.remove(&key);
        self.over_limit_stopped.remove(&key);
        self.ready_sent.remove(&key);
        self.pod_group_scheduled.remove(&key);
        let pending = self.inputs.iter().any(|i| matches!(i, Input::Delete(k) if *k == key));
        if !pending && self.state(&key).is_some_and(|s| s != GroupState::Deleted) {
            self.inputs.push(Input::Delete(key.clone()));
            self.actions.push(Action::DeleteGroup { key });
        } else if ensured && self.state(&key).is_none() {
            // A plain group that waited for its pods never reached the engine, but has an object.
            self.actions.push(Action::DeleteGroup { key });
        }
    }

    /// A new Job: its Group object, and the group into its queue.
    fn submit(&mut self, j: &WorkloadView) {
        if let Some(spec) = self.engine_spec(j) {
            self.inputs.push(Input::Submit(spec));
        }
    }

    /// The engine's spec of a Job's group, with its Group object ensured; None (with a warning
    /// event on the Job) when the Job does not make a valid group.
    fn engine_spec(&mut self, j: &WorkloadView) -> Option<GroupSpec> {
        let spec = match self.group_object(j) {
            Ok(spec) => spec,
            Err(message) => {
                if j.devices.iter().any(|d| !d.is_empty()) {
                    self.awaiting_devices.insert(j.key.clone());
                }
                self.event(&j.key, EventType::Warning, "InvalidJob", &message);
                return None;
            }
        };
        self.ensured.insert(j.key.clone());
        self.actions.push(Action::EnsureGroup {
            key: j.key.clone(),
            spec: Box::new(spec.clone()),
            job_uid: j.uid.clone(),
        });
        match spec.to_request(&j.key.name) {
            Ok(request) => Some(GroupSpec {
                key: j.key.clone(),
                queue: j.queue.clone(),
                priority_class: spec.priority_class_name.clone(),
                request,
                submitted_at: j.created,
            }),
            Err(e) => {
                self.event(&j.key, EventType::Warning, "InvalidJob", &e.to_string());
                None
            }
        }
    }

    /// Runs the buffered inputs (and those their transitions call for) as batches.
    fn flush(&mut self, now: i64) {
        for _ in 0..4 {
            let inputs = std::mem::take(&mut self.inputs);
            let Some(e) = self.engine.as_mut().filter(|_| !inputs.is_empty()) else { return };
            let out = e.input_batch(inputs, now);
            for (input, error) in out.refused {
                match input {
                    Input::Submit(spec) => {
                        self.plain_refused.insert(spec.key.clone());
                        let message = match self.cfg.left_out_queues.get(&spec.queue) {
                            Some(why) => format!(
                                "queue {:?} is left out of muster's configuration ({why}); the group waits until \
                                 the Queue is fixed (its Accepted condition says the same)",
                                spec.queue
                            ),
                            None => error,
                        };
                        self.event(&spec.key, EventType::Warning, "NotQueued", &message);
                    }
                    // On a node the engine does not know yet: counted once it does.
                    Input::Occupy { id, .. } => {
                        self.foreign_waiting.insert(id);
                    }
                    other => warn!("engine input refused: {other:?}: {error}"),
                }
            }
            self.after(out.transitions, now);
        }
    }

    /// Decisions for the Jobs and groups whose objects changed since the last call.
    fn reconcile(&mut self, now: i64) {
        self.flush(now);
        for key in std::mem::take(&mut self.dirty_jobs) {
            self.job_changed(&key, now);
        }
        for key in std::mem::take(&mut self.dirty_plain) {
            self.plain_changed(&key, now);
        }
        self.flush(now);
        for key in std::mem::take(&mut self.dirty_groups) {
            self.pods_changed(&key);
        }
        self.flush(now);
    }

    /// Deleted groups are found after recovery too: the store knows them, the cluster has no Job
    /// (and no pods of a plain group of that name).
    fn delete_vanished(&mut self) {
        let Some(e) = self.engine.as_ref() else { return };
        let gone: Vec<String> = e
            .engine()
            .groups()
            .filter(|g| self.workload(&g.spec.key.to_string()).is_none() && !self.is_plain(&g.spec.key))
            .map(|g| g.spec.key.to_string())
            .collect();
        self.dirty_jobs.extend(gone);
    }

    /// Everything since the last cycle as one batch, then a scheduling cycle, with upkeep: lease,
    /// retries, other schedulers' pods waiting for room, timers.
    pub fn cycle(&mut self, now: i64) {
        let Some(e) = self.engine.as_mut() else { return };
        let tick = e.tick(now);
        self.after(tick.transitions, now);
        self.delete_vanished();
        for id in std::mem::take(&mut self.foreign_waiting) {
            if let Some(hold) = self.external_hold(&id) {
                self.inputs.push(Input::Occupy { id, hold });
            }
        }
        self.repair_group_objects(now);
        self.reconcile(now);
        self.inputs.push(Input::Schedule);
        self.flush(now);
        self.release_ahead(now);
        // Counts and usage as of this cycle; the positions and estimates follow with the view.
        if std::mem::take(&mut self.queue_statuses_stale) {
            self.refresh_queue_statuses();
        }
    }

    /// Acts on transitions: Job suspension, statuses, events; then binds what became bindable.
    fn after(&mut self, ts: Vec<Transition>, now: i64) {
        self.queue_statuses_stale |= !ts.is_empty();
        let mut touched = BTreeMap::new();
        for t in &ts {
            // What was decided, for a run's log to be read back (`RUST_LOG=muster_controller=debug`).
            debug!(group = %t.key, from = ?t.from, to = ?t.to, reason = %t.reason.message(), "transition");
            let group = self.engine.as_ref().and_then(|e| e.engine().group(&t.key));
            if let (Some(error), Some(g)) = (self.metrics.transition(t, group), group) {
                self.estimate_errors.record(&g.spec.queue, error);
            }
            self.transition_actions(t);
            self.settle_ahead(&t.key, t.to);
            touched.insert(t.key.clone(), t.reason.message());
        }
        for (key, message) in touched {
            self.update_status(&key, &message, now);
            if self.state(&key).is_some_and(GroupState::holds_allocation) {
                self.pods_changed(&key);
            } else {
                self.ready_sent.remove(&key);
            }
        }
    }
}
