//! One workload for every scheduler: a scenario's Jobs decorated for the scheduler that is to run
//! them (`--peer`), with the companion objects that scheduler needs, so muster and each real peer
//! (docs/peers.md) get object for object the same batch/v1 Jobs.
//!
//! The Job itself is always [`workload::manifest`]'s: parallelism = completions = the job's
//! (maximum) pods, the same requests, run time, node selector, tolerations and deadline. A peer
//! only adds its own fields:
//!
//! | peer | on the Job | companions (created first) |
//! |---|---|---|
//! | `default` | nothing (kube-scheduler, one pod at a time) | none |
//! | `muster` | label `muster.dev/queue` (default `default`), annotation `muster.dev/duration-seconds`; elastic: `muster.dev/min-members` | none |
//! | `kueue` | label `kueue.x-k8s.io/queue-name` (the LocalQueue, default `user-queue`), `spec.suspend: true`; elastic: annotation `kueue.x-k8s.io/job-min-parallelism` | none per Job; `--setup`: ResourceFlavor, ClusterQueue, LocalQueue ([`kueue_setup`]) |
//! | `coscheduling` | pods: `schedulerName` of the profile (default `coscheduling`), label `scheduling.x-k8s.io/pod-group: <job>` | PodGroup `scheduling.x-k8s.io/v1alpha1` `<job>`, `minMember` = the job's minimum |
//! | `volcano` | pods: `schedulerName: volcano`, annotation `scheduling.volcano.sh/queue-name` (default `default`); Job annotation `scheduling.volcano.sh/group-min-member` = the minimum | none (Volcano's controller makes the PodGroup from the annotation) |
//! | `native` | pods: `spec.schedulingGroup.podGroupName: <job>-workers` | Workload `scheduling.k8s.io/v1beta1` `<job>` (one gang template `workers`, `minCount` = the minimum, `controllerRef` to the Job), then PodGroup `<job>-workers` made from it |
//!
//! Every Job gets its group, rigid or not, as muster treats every Job as a gang (the hand-written
//! peer tests leave seed 001's quick job without one). A job with a priority other than 0 has its
//! pods name a PriorityClass of that value ([`priority_classes`], made first), which every peer
//! reads: muster, kube-scheduler, Kueue and Volcano order by it, coscheduling sorts by it.
//!
//! Elastic jobs (members `{min, max}`) are Jobs of `max` pods, and each peer is told the minimum
//! its own way. What each peer does not do with it:
//! - `default`: no notion of a minimum; pods are placed one by one, as many as fit.
//! - `muster`: none missing (`muster.dev/min-members` is muster's elastic Job).
//! - `kueue`: `job-min-parallelism` is partial admission: Kueue admits the Job with lower
//!   parallelism only when quota is short, and never grows it back; under `waitForPodsReady` the
//!   admitted count must all be ready. Pods are not a gang below that count.
//! - `coscheduling`: `minMember` gangs the first `min` pods; the rest are placed one by one as room
//!   appears (no re-gang, no resize).
//! - `volcano`: `group-min-member` is the gang; pods beyond it are best-effort members of the same
//!   PodGroup.
//! - `native`: `minCount` gangs `min` pods; later pods of the group are placed individually.
//! - for all of them the run time is per pod (KWOK's run-seconds): a Job of `max` completions with
//!   only k pods placed at a time runs them in waves of k, `max / k` times as long when k divides
//!   `max`, where the simulator scales an elastic job's run time by exactly `max / k`. With
//!   `runStarts: allReady` such a Job never has all its pods ready at once, so the elastic
//!   scenario for the real cluster (`elastic-sixtieth.yaml`) starts each pod's run at its start.
//!
//! A job of several sets is sent as each peer's users send one instead ([`peer_sets`]).
//!
//! The companions of `native` carry no ownerReference (the Workload's uid is not known before it is
//! created): they outlive the Job until their namespace goes.

use std::collections::BTreeMap;

use kube::core::{ApiResource, GroupVersionKind};
use muster_graph::{quantity, resources};
use muster_k8s::labels;
use serde_json::{Value, json};

use crate::peer_sets;
use crate::workload::{self, JobRecord, ManifestOptions, manifest, seconds};
use crate::{Error, Result};

/// The scheduler a scenario's Jobs are decorated for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Peer {
    /// kube-scheduler's default profile, plain Jobs.
    #[default]
    Default,
    /// muster: queue label and declared run time.
    Muster,
    /// Kueue: suspended Jobs in a LocalQueue.
    Kueue,
    /// scheduler-plugins coscheduling: a PodGroup per Job, pods of its profile.
    Coscheduling,
    /// Volcano: schedulerName volcano, minMember by annotation.
    Volcano,
    /// kube-scheduler 1.37's gang scheduling: a Workload and PodGroup per Job.
    Native,
}

/// Kueue's queue label on a Job (the LocalQueue's name).
pub const KUEUE_QUEUE: &str = "kueue.x-k8s.io/queue-name";
/// Kueue's partial admission: the lowest parallelism a Job may be admitted with.
pub const KUEUE_MIN_PARALLELISM: &str = "kueue.x-k8s.io/job-min-parallelism";
/// Kueue TAS: every pod of the PodSet within one domain of this node label (pod template).
pub const KUEUE_REQUIRED_TOPOLOGY: &str = "kueue.x-k8s.io/podset-required-topology";
/// Kueue TAS: within one domain if possible, else the next level up.
pub const KUEUE_PREFERRED_TOPOLOGY: &str = "kueue.x-k8s.io/podset-preferred-topology";
/// The Topology object of Kueue's TAS setup.
pub const KUEUE_TOPOLOGY: &str = "default";
/// scheduler-plugins' label naming a pod's PodGroup.
pub const COSCHED_POD_GROUP: &str = labels::POD_GROUP_ALIAS;
/// Volcano's annotation on a Job: its PodGroup's minMember.
pub const VOLCANO_MIN_MEMBER: &str = "scheduling.volcano.sh/group-min-member";
/// Volcano's queue annotation on a pod.
pub const VOLCANO_QUEUE: &str = "scheduling.volcano.sh/queue-name";
/// Volcano's network topology on a pod, copied into its PodGroup by Volcano's controller: `hard`
/// (required) or `soft` (preferred), and the highest HyperNode tier the group may span.
pub const VOLCANO_TOPOLOGY_MODE: &str = "volcano.sh/network-topology-mode";
pub const VOLCANO_TOPOLOGY_TIER: &str = "volcano.sh/network-topology-highest-tier";
/// The one PodGroupTemplate of a native Workload.
pub const NATIVE_TEMPLATE: &str = "workers";
/// The names of the Kueue objects [`kueue_setup`] writes.
pub const KUEUE_FLAVOR: &str = "default-flavor";
pub const KUEUE_CLUSTER_QUEUE: &str = "cluster-queue";

/// How the Jobs are decorated: for which peer, in which queue, under which scheduler name.
#[derive(Debug, Clone, Default)]
pub struct PeerOptions {
    pub peer: Peer,
    /// The peer's queue: muster's Queue (default `default`), Kueue's LocalQueue (`user-queue`),
    /// Volcano's queue (`default`). Ignored by the other peers.
    pub queue: Option<String>,
    /// spec.template.spec.schedulerName; replaces the peer's own (`coscheduling`, `volcano`).
    pub scheduler_name: Option<String>,
    pub namespace: Option<String>,
}

impl PeerOptions {
    /// The queue the peer's Jobs name, if the peer has queues.
    pub fn queue(&self) -> Option<String> {
        let default = match self.peer {
            Peer::Muster | Peer::Volcano => "default",
            Peer::Kueue => "user-queue",
            Peer::Default | Peer::Coscheduling | Peer::Native => return None,
        };
        Some(self.queue.clone().unwrap_or_else(|| default.to_string()))
    }

    /// The pods' schedulerName.
    pub fn scheduler_name(&self) -> Option<String> {
        self.scheduler_name.clone().or_else(|| match self.peer {
            Peer::Coscheduling => Some("coscheduling".into()),
            Peer::Volcano => Some("volcano".into()),
            _ => None,
        })
    }
}

/// One object to create, as JSON with its apiVersion and kind.
#[derive(Debug, Clone, PartialEq)]
pub struct Object {
    pub value: Value,
    /// The resource's plural (what the API path names).
    pub plural: &'static str,
    pub namespaced: bool,
}

impl Object {
    pub(crate) fn new(value: Value, plural: &'static str, namespaced: bool) -> Self {
        Object { value, plural, namespaced }
    }

    pub fn kind(&self) -> &str {
        self.value["kind"].as_str().unwrap_or_default()
    }

    pub fn name(&self) -> &str {
        self.value["metadata"]["name"].as_str().unwrap_or_default()
    }

    /// The resource for kube's dynamic API.
    pub fn api_resource(&self) -> ApiResource {
        let av = self.value["apiVersion"].as_str().unwrap_or_default();
        let (group, version) = av.rsplit_once('/').unwrap_or(("", av));
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, self.kind()), self.plural)
    }
}

pub(crate) fn metadata(name: &str, opts: &PeerOptions) -> Value {
    let mut m = json!({ "name": name });
    if let Some(ns) = &opts.namespace {
        m["namespace"] = json!(ns);
    }
    m
}

/// Sets `v[path...][key] = value`, making the maps on the way.
pub(crate) fn set(v: &mut Value, path: &[&str], key: &str, value: Value) {
    let mut at = v;
    for p in path {
        if !at[*p].is_object() {
            at[*p] = json!({});
        }
        at = &mut at[*p];
    }
    at[key] = value;
}

/// The Job of `job` decorated for the peer, with its companions before it, in creation order.
/// A tenant's job goes to its tenant's namespace and queue ([`crate::tenants`]) under a peer
/// with queues.
pub fn job_objects(job: &JobRecord, opts: &PeerOptions) -> Vec<Object> {
    let tenant_opts;
    let opts = match &job.tenant {
        Some(t) if opts.queue().is_some() => {
            tenant_opts = PeerOptions { queue: Some(t.clone()), namespace: Some(t.clone()), ..opts.clone() };
            &tenant_opts
        }
        _ => opts,
    };
    if !job.sets.is_empty() {
        return peer_sets::objects(job, opts);
    }
    let base = ManifestOptions {
        queue: (opts.peer == Peer::Muster).then(|| opts.queue()).flatten(),
        scheduler_name: opts.scheduler_name(),
        namespace: opts.namespace.clone(),
    };
    let mut j = serde_json::to_value(manifest(job, &base)).expect("a Job is plain data");
    let min = job.min();
    let name = job.name.as_str();
    let mut out = Vec::new();
    match opts.peer {
        Peer::Default | Peer::Muster => {}
        Peer::Kueue => {
            set(&mut j, &["metadata", "labels"], KUEUE_QUEUE, json!(opts.queue()));
            j["spec"]["suspend"] = json!(true);
            if min < job.pods {
                set(&mut j, &["metadata", "annotations"], KUEUE_MIN_PARALLELISM, json!(min.to_string()));
            }
            // A PodSet takes one constraint: a preferred level kept within another is given as
            // the enclosing level, required.
            if let Some(t) = &job.topology {
                let (key, label) = match t.binding_label() {
                    Some(label) => (KUEUE_REQUIRED_TOPOLOGY, label),
                    None => (KUEUE_PREFERRED_TOPOLOGY, t.label.as_str()),
                };
                set(&mut j, &["spec", "template", "metadata", "annotations"], key, json!(label));
            }
        }
        Peer::Coscheduling => {
            out.push(cosched_pod_group(name, min, opts));
            set(&mut j, &["spec", "template", "metadata", "labels"], COSCHED_POD_GROUP, json!(name));
        }
        Peer::Volcano => {
            set(&mut j, &["metadata", "annotations"], VOLCANO_MIN_MEMBER, json!(min.to_string()));
            let pod_ann = ["spec", "template", "metadata", "annotations"];
            set(&mut j, &pod_ann, VOLCANO_QUEUE, json!(opts.queue()));
            // Tier 1 is the domain of the job's level, tier 2 of the level it is kept within
            // ([`volcano_setup`]): hard mode up to that tier.
            if let Some(t) = &job.topology {
                let mode = if t.binding_label().is_some() { "hard" } else { "soft" };
                set(&mut j, &pod_ann, VOLCANO_TOPOLOGY_MODE, json!(mode));
                set(&mut j, &pod_ann, VOLCANO_TOPOLOGY_TIER, json!(if t.within.is_some() { "2" } else { "1" }));
            }
        }
        Peer::Native => {
            let controller = json!({ "apiGroup": "batch", "kind": "Job", "name": name });
            let (companions, group) = native_gang(job, min, Some(controller), opts);
            out.extend(companions);
            set(&mut j, &["spec", "template", "spec", "schedulingGroup"], "podGroupName", json!(group));
        }
    }
    out.push(Object::new(j, "jobs", true));
    out
}

/// scheduler-plugins' PodGroup `name` of `min` members.
pub(crate) fn cosched_pod_group(name: &str, min: u32, opts: &PeerOptions) -> Object {
    let pg = json!({
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": metadata(name, opts),
        "spec": { "minMember": min },
    });
    Object::new(pg, "podgroups", true)
}

/// kube-scheduler's gang for a job: its Workload (one pod-group template, gang `minCount` = `min`,
/// `controllerRef` to the object that makes its pods, if one does) and the PodGroup made from it,
/// with the PodGroup's name, which its pods name in `spec.schedulingGroup.podGroupName`.
pub(crate) fn native_gang(
    job: &JobRecord,
    min: u32,
    controller: Option<Value>,
    opts: &PeerOptions,
) -> ([Object; 2], String) {
    let name = job.name.as_str();
    let group = format!("{name}-{NATIVE_TEMPLATE}");
    let policy = json!({ "gang": { "minCount": min } });
    // kube-scheduler refuses a gang whose pods' priority is not its PodGroup's.
    let class = (job.priority != 0).then(|| workload::priority_class(job.priority));
    // TopologyAwareWorkloadScheduling (alpha in 1.37) has required constraints only.
    // A preferred level kept within another is given as the enclosing level.
    let constraints =
        job.topology.as_ref().and_then(|t| t.binding_label()).map(|label| json!({ "topology": [{ "key": label }] }));
    let template = with_class(
        with_constraints(json!({ "name": NATIVE_TEMPLATE, "schedulingPolicy": policy }), &constraints),
        &class,
    );
    let mut spec = json!({ "podGroupTemplates": [template] });
    if let Some(c) = controller {
        spec["controllerRef"] = c;
    }
    let workload = json!({
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": metadata(name, opts),
        "spec": spec,
    });
    let pod_group = json!({
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": metadata(&group, opts),
        "spec": with_class(
            with_constraints(
                json!({
                    "workloadRef": { "workloadName": name, "templateName": NATIVE_TEMPLATE },
                    "schedulingPolicy": policy,
                }),
                &constraints,
            ),
            &class,
        ),
    });
    ([Object::new(workload, "workloads", true), Object::new(pod_group, "podgroups", true)], group)
}

/// `spec` with `priorityClassName` when the job has a priority.
pub(crate) fn with_class(mut spec: Value, class: &Option<String>) -> Value {
    if let Some(c) = class {
        spec["priorityClassName"] = json!(c);
    }
    spec
}

/// `spec` with `schedulingConstraints` when there are any.
pub(crate) fn with_constraints(mut spec: Value, constraints: &Option<Value>) -> Value {
    if let Some(c) = constraints {
        spec["schedulingConstraints"] = c.clone();
    }
    spec
}

/// Kueue's cluster-wide setup for a scenario, as Kueue's "Setup All-or-nothing with ready Pods"
/// page writes it (`kueue.x-k8s.io/v1beta2`): ResourceFlavor `default-flavor`; ClusterQueue
/// `cluster-queue` (every namespace) covering each resource the jobs request, with a nominal quota
/// of the scenario cluster's allocatable of it (every node's capacity, devices included) times
/// `kueue.quotaFactor`, rounded down (as muster-sim's Kueue model does); the LocalQueue of
/// [`PeerOptions::queue`] in the namespace.
pub fn kueue_setup(w: &muster_sim::scenario::Workload, jobs: &[JobRecord], opts: &PeerOptions) -> Result<Vec<Object>> {
    let total = cluster_total(w)?;
    let nodes = w.cluster.expand(&w.cluster_file).map_err(|e| Error::Input(e.to_string()))?;
    let wanted: std::collections::BTreeSet<&String> = jobs.iter().flat_map(|j| j.requested()).collect();
    let mut quotas = Vec::new();
    for r in &wanted {
        let unit = resources::unit_of(r).map_err(Error::Input)?;
        let all = total.get(*r).copied().unwrap_or(0);
        let quota = (all as f64 * w.kueue.quota_factor).floor() as u64;
        quotas.push(json!({ "name": r, "nominalQuota": quantity::format_amount(quota, unit) }));
    }
    let queue = PeerOptions { peer: Peer::Kueue, ..opts.clone() }.queue().unwrap_or_default();
    let mut flavor = json!({ "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": { "name": KUEUE_FLAVOR } });
    let mut out = vec![];
    if jobs.iter().any(|j| j.constrained()) {
        let (topology, node_labels) = kueue_topology(w, &nodes)?;
        out.push(Object::new(topology, "topologies", false));
        flavor["spec"] = json!({ "nodeLabels": node_labels, "topologyName": KUEUE_TOPOLOGY });
    }
    out.extend([
        Object::new(flavor, "resourceflavors", false),
        Object::new(
            json!({
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "ClusterQueue",
                "metadata": { "name": KUEUE_CLUSTER_QUEUE },
                "spec": {
                    "namespaceSelector": {},
                    "resourceGroups": [{
                        "coveredResources": wanted,
                        "flavors": [{ "name": KUEUE_FLAVOR, "resources": quotas }],
                    }],
                },
            }),
            "clusterqueues",
            false,
        ),
        Object::new(
            json!({
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "LocalQueue",
                "metadata": metadata(&queue, opts),
                "spec": { "clusterQueue": KUEUE_CLUSTER_QUEUE },
            }),
            "localqueues",
            true,
        ),
    ]);
    Ok(out)
}

/// The scenario cluster's allocatable by resource: every node's capacity, devices included.
pub(crate) fn cluster_total(w: &muster_sim::scenario::Workload) -> Result<BTreeMap<String, u64>> {
    let mut total: BTreeMap<String, u64> = BTreeMap::new();
    for node in w.cluster.expand(&w.cluster_file).map_err(|e| Error::Input(e.to_string()))? {
        for (r, a) in &node.spec.pooled {
            *total.entry(r.clone()).or_default() += a;
        }
        for (r, n) in &node.spec.devices {
            *total.entry(r.clone()).or_default() += u64::from(*n);
        }
    }
    Ok(total)
}

/// Volcano's network topology for the jobs' topology levels, as its "network topology aware
/// scheduling" guide builds it by hand: a HyperNode of tier 1 per domain of the inner level (a
/// job's own, or a gang's inside a job), of tier 2 per domain of the outer level (one a job is
/// kept within, or a job's own around its gangs), and one over them all. Nothing when no job has
/// a topology; an error when the jobs name more than one level for a tier, or a sub-group of sets
/// (a Volcano Job has no constraint over several tasks together).
pub fn volcano_setup(w: &muster_sim::scenario::Workload, jobs: &[JobRecord]) -> Result<Vec<Object>> {
    use std::collections::{BTreeMap, BTreeSet};
    if let Some((j, g)) = jobs.iter().find_map(|j| Some((j, j.gangs.iter().find(|g| g.sub_group)?))) {
        return Err(Error::Input(format!(
            "job {} (class {}): sub-group {} keeps several sets within one domain together, which a Volcano Job \
             cannot say (a task's partition policy keeps one task); run the scenario under the other peers",
            j.name, j.class, g.name
        )));
    }
    let mut inner: BTreeSet<&str> = BTreeSet::new();
    let mut outer: BTreeSet<&str> = BTreeSet::new();
    for j in jobs {
        inner.extend(j.gangs.iter().map(|g| g.label.as_str()));
        if let Some(t) = &j.topology {
            if j.gangs.is_empty() { &mut inner } else { &mut outer }.insert(t.label.as_str());
            outer.extend(t.within.as_ref().map(|w| w.label.as_str()));
        }
    }
    let (labels, enclosing) = (inner, outer);
    let Some(label) = labels.first().copied() else { return Ok(vec![]) };
    if labels.len() > 1 || enclosing.len() > 1 {
        return Err(Error::Input(format!(
            "Volcano's setup here makes one tier of HyperNodes per level, but the jobs name the levels {labels:?} \
             within {enclosing:?}; give every job of the scenario the same topology level (and enclosing level)"
        )));
    }
    let nodes = w.cluster.expand(&w.cluster_file).map_err(|e| Error::Input(e.to_string()))?;
    let domains: BTreeSet<&String> = nodes.iter().filter_map(|n| n.spec.labels.get(label)).collect();
    let hyper_node = |name: &str, tier: u32, members: Vec<Value>| {
        let spec = json!({ "tier": tier, "members": members });
        let hn = json!({ "apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": { "name": name }, "spec": spec });
        Object::new(hn, "hypernodes", false)
    };
    let name_of =
        |domain: &str| format!("domain-{}", domain.to_lowercase().replace(|c: char| !c.is_ascii_alphanumeric(), "-"));
    let mut out: Vec<Object> = domains
        .iter()
        .map(|d| {
            let member = json!({ "type": "Node", "selector": { "labelMatch": { "matchLabels": { label: d } } } });
            hyper_node(&name_of(d), 1, vec![member])
        })
        .collect();
    let child = |name: String| json!({ "type": "HyperNode", "selector": { "exactMatch": { "name": name } } });
    let Some(outer) = enclosing.first().copied() else {
        out.push(hyper_node("cluster", 2, domains.iter().map(|d| child(name_of(d))).collect()));
        return Ok(out);
    };
    // Each domain of the level within the enclosing domain its nodes carry.
    let mut inside: BTreeMap<&String, BTreeSet<&String>> = BTreeMap::new();
    for n in &nodes {
        if let (Some(o), Some(d)) = (n.spec.labels.get(outer), n.spec.labels.get(label)) {
            inside.entry(o).or_default().insert(d);
        }
    }
    let outer_name = |o: &str| format!("enclosing-{}", name_of(o));
    for (o, ds) in &inside {
        out.push(hyper_node(&outer_name(o), 2, ds.iter().map(|d| child(name_of(d))).collect()));
    }
    out.push(hyper_node("cluster", 3, inside.keys().map(|o| child(outer_name(o))).collect()));
    Ok(out)
}

/// Kueue TAS's Topology for the scenario's cluster: its levels that nodes carry, outermost first,
/// then `kubernetes.io/hostname` (Kueue's docs recommend the node level last, so that it assigns
/// pods to nodes); and the labels every node shares, which TAS needs as the flavor's nodeLabels.
fn kueue_topology(
    w: &muster_sim::scenario::Workload,
    nodes: &[muster_graph::cluster::DescribedNode],
) -> Result<(Value, BTreeMap<String, String>)> {
    const HOSTNAME: &str = "kubernetes.io/hostname";
    let used = |label: &str| nodes.iter().any(|n| n.spec.labels.contains_key(label));
    let mut levels: Vec<Value> =
        w.cluster.topology.iter().filter(|l| used(&l.label)).map(|l| json!({ "nodeLabel": l.label })).collect();
    levels.push(json!({ "nodeLabel": HOSTNAME }));
    let mut shared: BTreeMap<String, String> = nodes.first().map(|n| n.spec.labels.clone()).unwrap_or_default();
    shared.retain(|k, v| {
        k != HOSTNAME
            && !w.cluster.topology.iter().any(|l| &l.label == k)
            && nodes.iter().all(|n| n.spec.labels.get(k) == Some(v))
    });
    if shared.is_empty() {
        return Err(Error::Input(format!(
            "{}: Kueue's topology-aware scheduling needs a label every node carries (the ResourceFlavor's \
             nodeLabels); add one to each node class's labels, such as pool: gpu",
            w.cluster_file
        )));
    }
    let topology = json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Topology",
        "metadata": { "name": KUEUE_TOPOLOGY },
        "spec": { "levels": levels },
    });
    Ok((topology, shared))
}

/// One object as a YAML document (`---`, then `comment` if any).
fn document(o: &Object, comment: Option<&str>) -> String {
    let body = serde_yaml_ng::to_string(&o.value).expect("JSON values always serialize");
    match comment {
        Some(c) => format!("---\n# {c}\n{body}"),
        None => format!("---\n{body}"),
    }
}

/// Objects as a YAML stream for `kubectl apply -f -`.
pub fn yaml(objects: &[Object]) -> String {
    objects.iter().map(|o| document(o, None)).collect()
}

/// The PriorityClasses the jobs name ([`workload::priority_class`]), one per priority other than
/// 0, cluster-wide; every peer needs them before the first Job's pods exist.
pub fn priority_classes(jobs: &[JobRecord]) -> Vec<Object> {
    let values: std::collections::BTreeSet<i32> = jobs.iter().map(|j| j.priority).filter(|p| *p != 0).collect();
    values
        .into_iter()
        .map(|p| {
            let pc = json!({
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": { "name": workload::priority_class(p) },
                "value": p,
                "description": "a scenario's job priority (muster-harness)",
            });
            Object::new(pc, "priorityclasses", false)
        })
        .collect()
}

/// Every Job of a scenario decorated for the peer, each preceded by its companions, after the
/// PriorityClasses they name; a Job's document starts with a comment giving its submit time.
pub fn objects_yaml(jobs: &[JobRecord], opts: &PeerOptions) -> String {
    let mut out = yaml(&priority_classes(jobs));
    for j in jobs {
        let submit = format!("submit at {} s", seconds(j.submit_ms));
        for o in job_objects(j, opts) {
            let c = (o.kind() == "Job").then_some(submit.as_str());
            out.push_str(&document(&o, c));
        }
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use std::collections::BTreeSet;
    use std::path::Path;

    use serde::Deserialize;

    use super::*;
    use crate::workload;

    fn scenario(name: &str) -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios").join(name)
    }

    /// seed 001's first big job (rigid, 20 pods) and elastic.yaml's first elastic job (4..16).
    fn rigid_and_elastic() -> [JobRecord; 2] {
        let seed = workload::jobs(&scenario("suite/seed-001.yaml"), 1).unwrap();
        let rigid = seed.into_iter().find(|j| j.class == "big").unwrap();
        let el = workload::jobs(&scenario("suite/elastic.yaml"), 1).unwrap();
        let elastic = el.into_iter().find(|j| j.class == "elastic").unwrap();
        assert_eq!((rigid.pods, rigid.min()), (20, 20));
        assert_eq!((elastic.pods, elastic.min_pods), (16, Some(4)));
        [rigid, elastic]
    }

    /// The YAML stream `objects` prints for one job, read back document by document.
    pub(crate) fn decoded(job: &JobRecord, peer: Peer) -> Vec<Value> {
        let opts = PeerOptions { peer, namespace: Some("ns".into()), ..Default::default() };
        let text = objects_yaml(std::slice::from_ref(job), &opts);
        serde_yaml_ng::Deserializer::from_str(&text).map(|d| Value::deserialize(d).unwrap()).collect()
    }

    pub(crate) fn kinds(objs: &[Value]) -> Vec<&str> {
        objs.iter().map(|o| o["kind"].as_str().unwrap()).collect()
    }

    /// The parts of a Job every peer must leave alone.
    fn common(job: &Value) -> Value {
        let s = &job["spec"];
        let p = &s["template"]["spec"];
        json!([
            job["metadata"]["name"],
            s["parallelism"],
            s["completions"],
            s["backoffLimit"],
            s["activeDeadlineSeconds"],
            s["template"]["metadata"]["annotations"]["kwok.muster.dev/run-seconds"],
            p["containers"],
            p["nodeSelector"],
            p["tolerations"]
        ])
    }

    #[test]
    fn every_peer_gets_the_same_job_with_its_own_fields() {
        for job in rigid_and_elastic() {
            let min = job.min();
            let elastic = min < job.pods;
            let plain = decoded(&job, Peer::Default);
            assert_eq!(kinds(&plain), ["Job"]);
            let plain_job = &plain[0];
            assert!(plain_job["metadata"].get("labels").is_none());
            assert!(plain_job["metadata"].get("annotations").is_none());
            assert!(plain_job["spec"]["template"]["spec"].get("schedulerName").is_none());
            assert_eq!(plain_job["spec"]["parallelism"], job.pods);
            for peer in [Peer::Muster, Peer::Kueue, Peer::Coscheduling, Peer::Volcano, Peer::Native] {
                let objs = decoded(&job, peer);
                // The Job comes last, after its companions.
                assert_eq!(objs.last().unwrap()["kind"], "Job", "{peer:?}");
                let j = objs.last().unwrap();
                assert_eq!(common(j), common(plain_job), "{peer:?}: the Job itself differs");
                assert_eq!(j["metadata"]["namespace"], "ns");
                let meta = &j["metadata"];
                let pod_meta = &j["spec"]["template"]["metadata"];
                let pod = &j["spec"]["template"]["spec"];
                match peer {
                    Peer::Muster => {
                        assert_eq!(kinds(&objs), ["Job"]);
                        assert_eq!(meta["labels"]["muster.dev/queue"], "default");
                        assert!(meta["annotations"]["muster.dev/duration-seconds"].is_string());
                        let want = if elastic { json!(min.to_string()) } else { Value::Null };
                        assert_eq!(meta["annotations"]["muster.dev/min-members"], want);
                        assert!(pod.get("schedulerName").is_none());
                    }
                    Peer::Kueue => {
                        assert_eq!(kinds(&objs), ["Job"]);
                        assert_eq!(meta["labels"][KUEUE_QUEUE], "user-queue");
                        assert_eq!(j["spec"]["suspend"], true);
                        let want = if elastic { json!(min.to_string()) } else { Value::Null };
                        assert_eq!(meta["annotations"][KUEUE_MIN_PARALLELISM], want);
                        assert!(pod.get("schedulerName").is_none());
                    }
                    Peer::Coscheduling => {
                        assert_eq!(kinds(&objs), ["PodGroup", "Job"]);
                        let pg = &objs[0];
                        assert_eq!(pg["apiVersion"], "scheduling.x-k8s.io/v1alpha1");
                        assert_eq!(pg["spec"]["minMember"], min);
                        assert_eq!(pg["metadata"]["namespace"], "ns");
                        assert_eq!(pod_meta["labels"][COSCHED_POD_GROUP], pg["metadata"]["name"]);
                        assert_eq!(pod["schedulerName"], "coscheduling");
                        assert!(j["spec"].get("suspend").is_none());
                    }
                    Peer::Volcano => {
                        assert_eq!(kinds(&objs), ["Job"]);
                        assert_eq!(pod["schedulerName"], "volcano");
                        assert_eq!(meta["annotations"][VOLCANO_MIN_MEMBER], min.to_string());
                        assert_eq!(pod_meta["annotations"][VOLCANO_QUEUE], "default");
                    }
                    Peer::Native => {
                        assert_eq!(kinds(&objs), ["Workload", "PodGroup", "Job"]);
                        let (w, pg) = (&objs[0], &objs[1]);
                        assert_eq!(w["apiVersion"], "scheduling.k8s.io/v1beta1");
                        assert_eq!(pg["apiVersion"], "scheduling.k8s.io/v1beta1");
                        let t = &w["spec"]["podGroupTemplates"][0];
                        assert_eq!(t["schedulingPolicy"]["gang"]["minCount"], min);
                        assert_eq!(pg["spec"]["schedulingPolicy"]["gang"]["minCount"], min);
                        assert_eq!(pg["spec"]["workloadRef"]["workloadName"], w["metadata"]["name"]);
                        assert_eq!(pg["spec"]["workloadRef"]["templateName"], t["name"]);
                        assert_eq!(w["spec"]["controllerRef"]["name"], meta["name"]);
                        assert_eq!(pod["schedulingGroup"]["podGroupName"], pg["metadata"]["name"]);
                        assert!(pod.get("schedulerName").is_none());
                    }
                    Peer::Default => unreachable!(),
                }
            }
        }
    }

    #[test]
    fn queues_and_scheduler_names_can_be_chosen() {
        let [job, _] = rigid_and_elastic();
        let opts =
            |peer| PeerOptions { peer, queue: Some("q".into()), scheduler_name: Some("s".into()), namespace: None };
        let last = |peer| job_objects(&job, &opts(peer)).pop().unwrap().value;
        assert_eq!(last(Peer::Muster)["metadata"]["labels"]["muster.dev/queue"], "q");
        assert_eq!(last(Peer::Kueue)["metadata"]["labels"][KUEUE_QUEUE], "q");
        let v = last(Peer::Volcano);
        assert_eq!(v["spec"]["template"]["metadata"]["annotations"][VOLCANO_QUEUE], "q");
        assert_eq!(v["spec"]["template"]["spec"]["schedulerName"], "s");
        assert_eq!(last(Peer::Coscheduling)["spec"]["template"]["spec"]["schedulerName"], "s");
        assert!(last(Peer::Default)["metadata"].get("namespace").is_none());
        // What kube's dynamic API is given for each object.
        let objs = job_objects(&job, &opts(Peer::Native));
        let ars: Vec<_> = objs.iter().map(|o| o.api_resource()).collect();
        assert_eq!(
            (ars[0].group.as_str(), ars[0].version.as_str(), ars[0].plural.as_str()),
            ("scheduling.k8s.io", "v1beta1", "workloads")
        );
        assert_eq!((ars[2].group.as_str(), ars[2].version.as_str(), ars[2].kind.as_str()), ("batch", "v1", "Job"));
        for o in &objs {
            let _: kube::api::DynamicObject = serde_json::from_value(o.value.clone()).unwrap();
        }
    }

    #[test]
    fn a_priority_reaches_every_peer_and_its_class_comes_first() {
        let jobs = workload::jobs(&scenario("seed-scalability.yaml"), 1).unwrap();
        let high = jobs.iter().find(|j| j.priority == 1000).unwrap();
        let class = workload::priority_class(1000);
        for peer in [Peer::Default, Peer::Muster, Peer::Kueue, Peer::Coscheduling, Peer::Volcano, Peer::Native] {
            let objs = decoded(high, peer);
            let job = objs.last().unwrap();
            assert_eq!(job["spec"]["template"]["spec"]["priorityClassName"], class.as_str(), "{peer:?}");
        }
        // kube-scheduler wants the gang's PodGroup (and the Workload's template) of the pods' class.
        let native = decoded(high, Peer::Native);
        assert_eq!(kinds(&native), ["PriorityClass", "Workload", "PodGroup", "Job"]);
        assert_eq!(native[1]["spec"]["podGroupTemplates"][0]["priorityClassName"], class.as_str());
        assert_eq!(native[2]["spec"]["priorityClassName"], class.as_str());
        let plain = decoded(jobs.iter().find(|j| j.priority == 0).unwrap(), Peer::Native);
        assert_eq!(kinds(&plain), ["Workload", "PodGroup", "Job"]);
        assert!(plain[1]["spec"].get("priorityClassName").is_none());
        // One PriorityClass per priority other than 0, before every Job in the YAML stream.
        let classes = priority_classes(&jobs);
        assert_eq!(classes.len(), 1);
        assert_eq!(
            (classes[0].kind(), classes[0].name(), classes[0].value["value"].as_i64()),
            ("PriorityClass", class.as_str(), Some(1000))
        );
        assert!(!classes[0].namespaced);
        let stream = objects_yaml(std::slice::from_ref(high), &PeerOptions::default());
        assert!(stream.find("kind: PriorityClass").unwrap() < stream.find("kind: Job").unwrap());
    }

    #[test]
    fn topology_constraints_reach_each_peer_that_can_express_them() {
        let path = scenario("suite/topology-sixtieth.yaml");
        let w = muster_sim::scenario::load(&path, 1).unwrap();
        let jobs = workload::jobs(&path, 1).unwrap();
        let required = jobs.iter().find(|j| j.class == "rack-6").unwrap();
        let preferred = jobs.iter().find(|j| j.class == "prefer-4").unwrap();
        assert_eq!(required.topology.as_ref().map(|t| (t.label.as_str(), t.required)), Some(("muster.dev/rack", true)));
        let job = |j: &JobRecord, peer| decoded(j, peer).pop().unwrap();
        let ann = |j: &Value| j["metadata"]["annotations"].clone();
        let pod_ann = |j: &Value| j["spec"]["template"]["metadata"]["annotations"].clone();
        assert_eq!(ann(&job(required, Peer::Muster))["muster.dev/required-topology"], "rack");
        assert_eq!(ann(&job(preferred, Peer::Muster))["muster.dev/preferred-topology"], "rack");
        assert_eq!(pod_ann(&job(required, Peer::Kueue))[KUEUE_REQUIRED_TOPOLOGY], "muster.dev/rack");
        assert_eq!(pod_ann(&job(preferred, Peer::Kueue))[KUEUE_PREFERRED_TOPOLOGY], "muster.dev/rack");
        let native = decoded(required, Peer::Native);
        let rack = json!({"topology": [{"key": "muster.dev/rack"}]});
        assert_eq!(native[0]["spec"]["podGroupTemplates"][0]["schedulingConstraints"], rack);
        assert_eq!(native[1]["spec"]["schedulingConstraints"], rack);
        assert!(decoded(preferred, Peer::Native)[1]["spec"].get("schedulingConstraints").is_none(), "required only");
        let opts = PeerOptions { peer: Peer::Kueue, ..Default::default() };
        let setup: Vec<Value> = kueue_setup(&w, &jobs, &opts).unwrap().into_iter().map(|o| o.value).collect();
        assert_eq!(kinds(&setup), ["Topology", "ResourceFlavor", "ClusterQueue", "LocalQueue"]);
        let levels = json!([{"nodeLabel": "muster.dev/block"}, {"nodeLabel": "muster.dev/rack"},
            {"nodeLabel": "kubernetes.io/hostname"}]);
        assert_eq!(setup[0]["spec"]["levels"], levels);
        assert_eq!(
            setup[1]["spec"],
            json!({"nodeLabels": {"pool": "gpu"}, "topologyName": setup[0]["metadata"]["name"]})
        );
        // Without a label every node shares, TAS has no flavor to put the topology on.
        let bare = muster_sim::scenario::load(&scenario("suite/gpu-burst.yaml"), 1).unwrap();
        let e = kueue_setup(&bare, &jobs, &opts).unwrap_err().to_string();
        assert!(e.contains("nodeLabels") && e.contains("pool: gpu"), "{e}");
        // Volcano: hard or soft network topology within tier 1, the racks as HyperNodes.
        assert_eq!(pod_ann(&job(required, Peer::Volcano))[VOLCANO_TOPOLOGY_MODE], "hard");
        assert_eq!(pod_ann(&job(preferred, Peer::Volcano))[VOLCANO_TOPOLOGY_MODE], "soft");
        assert_eq!(pod_ann(&job(preferred, Peer::Volcano))[VOLCANO_TOPOLOGY_TIER], "1");
        let single = jobs.iter().find(|j| j.topology.is_none()).unwrap();
        assert!(pod_ann(&job(single, Peer::Volcano)).get(VOLCANO_TOPOLOGY_MODE).is_none());
        let hyper: Vec<Value> = volcano_setup(&w, &jobs).unwrap().into_iter().map(|o| o.value).collect();
        assert_eq!(hyper.len(), 5, "4 racks and the cluster");
        assert_eq!(hyper[0]["spec"]["tier"], 1);
        let selector = &hyper[0]["spec"]["members"][0]["selector"]["labelMatch"]["matchLabels"];
        assert_eq!(selector.as_object().unwrap().keys().collect::<Vec<_>>(), ["muster.dev/rack"]);
        assert_eq!(
            (hyper[4]["metadata"]["name"].as_str(), hyper[4]["spec"]["tier"].as_u64()),
            (Some("cluster"), Some(2))
        );
        assert_eq!(hyper[4]["spec"]["members"][0]["selector"]["exactMatch"]["name"], hyper[0]["metadata"]["name"]);
        assert!(volcano_setup(&bare, std::slice::from_ref(single)).unwrap().is_empty(), "no topology, no HyperNodes");
    }

    #[test]
    fn a_preferred_level_kept_within_another_reaches_each_peer_as_its_enclosing_level() {
        let path = scenario("suite/topology-sixtieth.yaml");
        let w = muster_sim::scenario::load(&path, 1).unwrap();
        let mut jobs = workload::jobs(&path, 1).unwrap();
        for t in jobs.iter_mut().filter_map(|j| j.topology.as_mut()).filter(|t| !t.required) {
            t.within = Some(workload::EnclosingLevel { level: "block".into(), label: "muster.dev/block".into() });
        }
        let preferred = jobs.iter().find(|j| j.class == "prefer-4").unwrap();
        let job = |peer| decoded(preferred, peer).pop().unwrap();
        let ann = job(Peer::Muster)["metadata"]["annotations"].clone();
        assert_eq!(
            (&ann["muster.dev/preferred-topology"], &ann["muster.dev/required-topology"]),
            (&json!("rack"), &json!("block"))
        );
        let pod_ann = |peer| job(peer)["spec"]["template"]["metadata"]["annotations"].clone();
        assert_eq!(pod_ann(Peer::Kueue)[KUEUE_REQUIRED_TOPOLOGY], "muster.dev/block");
        assert!(pod_ann(Peer::Kueue).get(KUEUE_PREFERRED_TOPOLOGY).is_none());
        assert_eq!(
            (&pod_ann(Peer::Volcano)[VOLCANO_TOPOLOGY_MODE], &pod_ann(Peer::Volcano)[VOLCANO_TOPOLOGY_TIER]),
            (&json!("hard"), &json!("2"))
        );
        let native = decoded(preferred, Peer::Native);
        assert_eq!(native[1]["spec"]["schedulingConstraints"], json!({"topology": [{"key": "muster.dev/block"}]}));
        // HyperNodes: 4 racks (tier 1), 2 blocks of 2 racks each (tier 2), the cluster (tier 3).
        let hyper: Vec<Value> = volcano_setup(&w, &jobs).unwrap().into_iter().map(|o| o.value).collect();
        let tiers: Vec<u64> = hyper.iter().map(|h| h["spec"]["tier"].as_u64().unwrap()).collect();
        assert_eq!(tiers, [1, 1, 1, 1, 2, 2, 3]);
        let racks_in = |h: &Value| h["spec"]["members"].as_array().unwrap().len();
        assert_eq!((racks_in(&hyper[4]), racks_in(&hyper[5]), racks_in(&hyper[6])), (2, 2, 2));
        let rack_names: BTreeSet<&str> = hyper[..4].iter().map(|h| h["metadata"]["name"].as_str().unwrap()).collect();
        let children: BTreeSet<&str> = hyper[4..6]
            .iter()
            .flat_map(|h| h["spec"]["members"].as_array().unwrap())
            .map(|m| m["selector"]["exactMatch"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(children, rack_names, "every rack in exactly one block");
        // Two enclosing levels cannot share one tier.
        let rack_bound = jobs.iter_mut().find_map(|j| j.topology.as_mut().filter(|t| t.required)).unwrap();
        rack_bound.required = false;
        rack_bound.within =
            Some(workload::EnclosingLevel { level: "zone".into(), label: "topology.kubernetes.io/zone".into() });
        assert!(
            volcano_setup(&w, &jobs).unwrap_err().to_string().contains("same topology level (and enclosing level)")
        );
    }

    #[test]
    fn kueues_setup_covers_what_the_jobs_request() {
        let path = scenario("suite/seed-001.yaml");
        let w = muster_sim::scenario::load(&path, 1).unwrap();
        let jobs = workload::jobs(&path, 1).unwrap();
        let opts = PeerOptions { peer: Peer::Kueue, namespace: Some("ns".into()), ..Default::default() };
        let text = yaml(&kueue_setup(&w, &jobs, &opts).unwrap());
        let objs: Vec<Value> =
            serde_yaml_ng::Deserializer::from_str(&text).map(|d| Value::deserialize(d).unwrap()).collect();
        assert_eq!(kinds(&objs), ["ResourceFlavor", "ClusterQueue", "LocalQueue"]);
        // 4 nodes x 2107Mi, quotaFactor 2 (docs/peers.md: 16856Mi); memory is all seed 001 asks.
        let rg = &objs[1]["spec"]["resourceGroups"][0];
        assert_eq!(rg["coveredResources"], json!(["memory"]));
        assert_eq!(rg["flavors"][0]["name"], objs[0]["metadata"]["name"]);
        assert_eq!(rg["flavors"][0]["resources"], json!([{"name": "memory", "nominalQuota": "16856Mi"}]));
        assert_eq!(objs[2]["metadata"], json!({"name": "user-queue", "namespace": "ns"}));
        assert_eq!(objs[2]["spec"]["clusterQueue"], objs[1]["metadata"]["name"]);
        // Every Job names that LocalQueue.
        let jq = job_objects(&jobs[0], &opts).pop().unwrap().value;
        assert_eq!(jq["metadata"]["labels"][KUEUE_QUEUE], objs[2]["metadata"]["name"]);
        // GPUs are devices of the nodes: covered too (32 x 8, factor 1).
        let path = scenario("suite/gpu-burst.yaml");
        let w = muster_sim::scenario::load(&path, 1).unwrap();
        let jobs = workload::jobs(&path, 1).unwrap();
        let cq = kueue_setup(&w, &jobs, &opts).unwrap().remove(1).value;
        let res = &cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"];
        assert_eq!(cq["spec"]["resourceGroups"][0]["coveredResources"], json!(["cpu", "memory", "nvidia.com/gpu"]));
        assert_eq!(res[2], json!({"name": "nvidia.com/gpu", "nominalQuota": "256"}));
        assert_eq!(res[0], json!({"name": "cpu", "nominalQuota": "3072"}));
    }

    #[test]
    fn the_stream_keeps_the_submit_order() {
        let jobs = workload::jobs(&scenario("suite/seed-001.yaml"), 1).unwrap();
        let text = objects_yaml(&jobs, &PeerOptions { peer: Peer::Coscheduling, ..Default::default() });
        let objs: Vec<Value> =
            serde_yaml_ng::Deserializer::from_str(&text).map(|d| Value::deserialize(d).unwrap()).collect();
        let names: Vec<String> = objs
            .iter()
            .map(|o| format!("{} {}", o["kind"].as_str().unwrap(), o["metadata"]["name"].as_str().unwrap()))
            .collect();
        assert_eq!(
            names,
            ["PodGroup quick-0", "Job quick-0", "PodGroup big-0", "Job big-0", "PodGroup big-1", "Job big-1"]
        );
        assert!(text.contains("---\n# submit at 0.1 s\napiVersion: batch/v1\nkind: Job\n"));
    }
}
