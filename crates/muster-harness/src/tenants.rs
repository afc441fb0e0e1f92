//! A scenario's tenants (its `tenants:` section, `muster_sim::scenario::Tenants`) as each
//! scheduler's own objects, so that muster and the real peers run the same queues, quotas, cohorts
//! and preemption as the simulator's models of them. Every tenant gets a namespace named after its
//! queue, and its jobs go there, to its queue ([`crate::peers::job_objects`]).
//!
//! | peer | per tenant | besides |
//! |---|---|---|
//! | `muster` | Namespace; Queue `muster.dev/v1alpha1` with the quotas (nominal, borrowingLimit, lendingLimit), cohort, fairShareWeight, preemption (withinQueue, reclaimWithinCohort, fairShareWithinCohort), and a namespaceSelector of its namespace | a Cohort `muster.dev/v1alpha1` per declared cohort, with its parent and quotas |
//! | `kueue` | Namespace; ClusterQueue `kueue.x-k8s.io/v1beta2` in its cohort (`cohortName`) with nominalQuota, borrowingLimit and lendingLimit, preemption `reclaimWithinCohort: Any`/`Never` and `withinClusterQueue: LowerPriority`/`Never`, `fairSharing.weight` (the tenant's fairShareWeight) when the scenario turns Kueue's fair sharing on, selecting its namespace; LocalQueue of the same name there | ResourceFlavor `default-flavor`; a Cohort per cohort, `parentName` for the tree, its own quotas as `resourceGroups` |
//! | `volcano` | Namespace; Queue `scheduling.volcano.sh/v1beta1`: deserved = nominal, capability = nominal + borrowingLimit (no borrowingLimit: none, the cluster or its parent's; in no cohort: nominal), guarantee = nominal - lendingLimit (none: 0), reclaimable; `parent` its cohort's Queue in a cohort tree | a scheduler configuration with the reclaim and preempt actions and the capacity plugin ([`volcano_scheduler_conf`]); in a cohort tree a Queue per cohort (below) |
//!
//! Kueue's ClusterQueues cover every resource the jobs request: one the tenant does not name gets
//! the cluster's allocatable of it times `kueue.quotaFactor` (as the single ClusterQueue of
//! [`crate::peers::kueue_setup`] does), no limits.
//!
//! Volcano's Queues are those of `muster_sim::models::volcano::queue_specs`, the mapping the
//! simulator's model reads too: flat (no `parent`) while the tenants share one cohort with no
//! quotas of its own, every queue sharing the whole cluster; when the cohorts form a tree, a
//! Queue per cohort as well, and the capacity plugin runs with `enableHierarchy`, so that every
//! Queue's pods count against each Queue above it.

use std::collections::{BTreeMap, BTreeSet};

use muster_graph::{quantity, resources};
use muster_queue::config::{CohortConfig, FairShareStrategies, FairShareWithinCohort, Quota, QuotaSpec, WithinQueue};
use muster_sim::models::volcano::queue_specs::{QueueSpec, hierarchical, queue_specs};
use muster_sim::scenario::Workload;
use serde_json::{Map, Value, json};

use crate::peers::{KUEUE_FLAVOR, Object, Peer, cluster_total};
use crate::workload::JobRecord;
use crate::{Error, Result};

/// Volcano's scheduler configuration for flat tenants ([`volcano_scheduler_conf`]): the Helm
/// chart's, with the preempt and reclaim actions and the
/// capacity plugin (queues' deserved, capability and guarantee) in place of proportion, which
/// reads only a queue's weight. The gang plugin keeps its default, preemptable on: it offers a
/// gang's pods as victims only beyond its minMember.
pub const VOLCANO_SCHEDULER_CONF: &str = r#"actions: "enqueue, allocate, preempt, reclaim, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
    enablePreemptable: false
  - name: predicates
  - name: capacity
  - name: nodeorder
  - name: binpack
"#;

/// The capacity plugin's line in [`VOLCANO_SCHEDULER_CONF`], and what follows it when its queues
/// form a tree.
const CAPACITY_PLUGIN: &str = "  - name: capacity\n";
const CAPACITY_HIERARCHY: &str = "    enableHierarchy: true\n";

/// Volcano's scheduler configuration for `w`'s tenants (hack/peers/volcano.sh takes it as
/// VOLCANO_SCHEDULER_CONF): [`VOLCANO_SCHEDULER_CONF`], with the capacity plugin's hierarchy on
/// when the cohorts form a tree.
pub fn volcano_scheduler_conf(w: &Workload) -> String {
    let conf = VOLCANO_SCHEDULER_CONF.to_string();
    if hierarchical(&w.tenants) {
        conf.replace(CAPACITY_PLUGIN, &format!("{CAPACITY_PLUGIN}{CAPACITY_HIERARCHY}"))
    } else {
        conf
    }
}

/// The objects that set up `w`'s tenants for `peer`, in creation order (namespaces first);
/// nothing without tenants, an error for a peer without queues.
pub fn setup(peer: Peer, w: &Workload, jobs: &[JobRecord]) -> Result<Vec<Object>> {
    let tenants = &w.tenants;
    if tenants.is_empty() {
        return Ok(vec![]);
    }
    let mut out: Vec<Object> = tenants.queues.iter().map(|q| namespace(&q.name)).collect();
    match peer {
        Peer::Muster => {
            for c in &tenants.cohorts {
                out.push(muster_cohort(w, c)?);
            }
            for q in 0..tenants.queues.len() {
                out.push(muster_queue(w, q)?);
            }
        }
        Peer::Kueue => out.extend(kueue(w, jobs)?),
        Peer::Volcano => out.extend(volcano_queues(w)?),
        Peer::Default | Peer::Coscheduling | Peer::Native => {
            return Err(Error::Input(format!(
                "peer {peer:?} has no queues to hold the scenario's tenants; run it with muster, kueue or volcano, \
                 or drop the scenario's tenants section"
            )));
        }
    }
    Ok(out)
}

fn namespace(name: &str) -> Object {
    Object::new(json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": name } }), "namespaces", false)
}

/// A declared cohort as muster's Cohort, with its parent and its own quotas.
fn muster_cohort(w: &Workload, c: &CohortConfig) -> Result<Object> {
    let quotas = quotas_of(&c.quotas, |r| w.tenants.cohort_quota(&c.name, r), "nominal")?;
    let mut spec = json!({ "quotas": quotas.into_iter().collect::<Map<String, Value>>() });
    if let Some(p) = &c.parent {
        spec["parent"] = json!(p);
    }
    let cohort =
        json!({ "apiVersion": "muster.dev/v1alpha1", "kind": "Cohort", "metadata": { "name": c.name }, "spec": spec });
    Ok(Object::new(cohort, "cohorts", false))
}

fn muster_queue(w: &Workload, i: usize) -> Result<Object> {
    let q = &w.tenants.queues[i];
    let mut spec = json!({
        "quotas": quotas(w, i, "nominal")?.into_iter().collect::<Map<String, Value>>(),
        "namespaceSelector": { "namespaces": [q.name] },
        "preemption": {
            "withinQueue": match q.preemption.within_queue {
                WithinQueue::Never => "Never",
                WithinQueue::LowerPriority => "LowerPriority",
            },
            "reclaimWithinCohort": q.preemption.reclaim_within_cohort,
        },
    });
    if q.preemption.fair_share_within_cohort != FairShareWithinCohort::Never {
        spec["preemption"]["fairShareWithinCohort"] = json!(q.preemption.fair_share_within_cohort);
    }
    if q.preemption.fair_share_strategies != FairShareStrategies::default() {
        spec["preemption"]["fairShareStrategies"] = json!(q.preemption.fair_share_strategies);
    }
    if let Some(c) = &q.cohort {
        spec["cohort"] = json!(c);
    }
    if q.fair_share_weight != 1.0 {
        spec["fairShareWeight"] = json!(q.fair_share_weight);
    }
    let queue =
        json!({ "apiVersion": "muster.dev/v1alpha1", "kind": "Queue", "metadata": { "name": q.name }, "spec": spec });
    Ok(Object::new(queue, "queues", false))
}

/// Kueue's ResourceFlavor, Cohorts, and a ClusterQueue and LocalQueue per tenant.
fn kueue(w: &Workload, jobs: &[JobRecord]) -> Result<Vec<Object>> {
    if jobs.iter().any(JobRecord::constrained) {
        return Err(Error::Input(
            "jobClasses[].topology (or a set's, or a sub-group's): Kueue's tenants here get one flavor without a \
             Topology; drop the topology constraints or the tenants section to run this scenario under kueue"
                .into(),
        ));
    }
    let total = cluster_total(w)?;
    let covered: BTreeSet<&String> = jobs.iter().flat_map(|j| j.requested()).collect();
    let flavor = json!({ "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": { "name": KUEUE_FLAVOR } });
    let mut out = vec![Object::new(flavor, "resourceflavors", false)];
    // Declared cohorts, then those only queues name (roots of their own).
    let mut cohorts: Vec<(&str, Option<&str>)> =
        w.tenants.cohorts.iter().map(|c| (c.name.as_str(), c.parent.as_deref())).collect();
    for name in w.tenants.queues.iter().filter_map(|q| q.cohort.as_deref()) {
        if !cohorts.iter().any(|(c, _)| *c == name) {
            cohorts.push((name, None));
        }
    }
    for (name, parent) in cohorts {
        let mut cohort = json!({ "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Cohort", "metadata": { "name": name }, "spec": {} });
        if let Some(p) = parent {
            cohort["spec"]["parentName"] = json!(p);
        }
        // The cohort's own quota, for the resources it names.
        let declared = w.tenants.cohorts.iter().find(|c| c.name == name).map(|c| &c.quotas);
        let own = match declared {
            Some(specs) => quotas_of(specs, |r| w.tenants.cohort_quota(name, r), "nominalQuota")?,
            None => vec![],
        };
        if !own.is_empty() {
            let covered: Vec<&String> = own.iter().map(|(r, _)| r).collect();
            let entries: Vec<Value> = own
                .iter()
                .map(|(r, spec)| {
                    let mut entry = spec.clone();
                    entry["name"] = json!(r);
                    entry
                })
                .collect();
            cohort["spec"]["resourceGroups"] =
                json!([{ "coveredResources": covered, "flavors": [{ "name": KUEUE_FLAVOR, "resources": entries }] }]);
        }
        out.push(Object::new(cohort, "cohorts", false));
    }
    for (i, q) in w.tenants.queues.iter().enumerate() {
        let named = quotas(w, i, "nominalQuota")?;
        let mut entries = vec![];
        for r in &covered {
            let mut entry = match named.iter().find(|(n, _)| n == *r) {
                Some((_, spec)) => spec.clone(),
                None => {
                    let unit = resources::unit_of(r).map_err(Error::Input)?;
                    let wide = (total.get(*r).copied().unwrap_or(0) as f64 * w.kueue.quota_factor).floor() as u64;
                    json!({ "nominalQuota": quantity::format_amount(wide, unit) })
                }
            };
            entry["name"] = json!(r);
            entries.push(entry);
        }
        let mut spec = json!({
            "namespaceSelector": { "matchLabels": { "kubernetes.io/metadata.name": q.name } },
            "resourceGroups": [{ "coveredResources": covered, "flavors": [{ "name": KUEUE_FLAVOR, "resources": entries }] }],
            "preemption": {
                "reclaimWithinCohort": if q.preemption.reclaim_within_cohort { "Any" } else { "Never" },
                "withinClusterQueue": match q.preemption.within_queue {
                    WithinQueue::Never => "Never",
                    WithinQueue::LowerPriority => "LowerPriority",
                },
            },
        });
        if let Some(c) = &q.cohort {
            spec["cohortName"] = json!(c);
        }
        // The weight matters only with Kueue's fair sharing on (its Configuration's fairSharing,
        // which hack/peers/kueue.sh writes when the scenario asks for it).
        if w.kueue.fair_sharing.is_some() {
            spec["fairSharing"] = json!({ "weight": q.fair_share_weight.to_string() });
        }
        let cq = json!({ "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": { "name": q.name }, "spec": spec });
        out.push(Object::new(cq, "clusterqueues", false));
        let lq = json!({
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": { "name": q.name, "namespace": q.name },
            "spec": { "clusterQueue": q.name },
        });
        out.push(Object::new(lq, "localqueues", true));
    }
    Ok(out)
}

/// Queue `q`'s quotas by resource, as `{<nominal_key>, borrowingLimit, lendingLimit}` quantities
/// (from the validated base units).
fn quotas(w: &Workload, q: usize, nominal_key: &str) -> Result<Vec<(String, Value)>> {
    quotas_of(&w.tenants.queues[q].quotas, |r| w.tenants.quota(q, r), nominal_key)
}

/// The quotas `specs` names, each as `{<nominal_key>, borrowingLimit, lendingLimit}` quantities
/// from its validated base units (`quota`).
fn quotas_of(
    specs: &std::collections::BTreeMap<String, QuotaSpec>,
    quota: impl Fn(&str) -> Option<Quota>,
    nominal_key: &str,
) -> Result<Vec<(String, Value)>> {
    let mut out = vec![];
    for r in specs.keys() {
        let unit = resources::unit_of(r).map_err(Error::Input)?;
        let Some(quota) = quota(r) else { continue };
        let fmt = |x: u64| quantity::format_amount(x, unit);
        let mut spec = json!({ nominal_key: fmt(quota.nominal) });
        if let Some(b) = quota.borrowing_limit {
            spec["borrowingLimit"] = json!(fmt(b));
        }
        if let Some(l) = quota.lending_limit {
            spec["lendingLimit"] = json!(fmt(l));
        }
        out.push((r.clone(), spec));
    }
    Ok(out)
}

/// One Volcano Queue of [`queue_specs`], amounts as quantities.
fn volcano_queue(spec: &QueueSpec) -> Result<Object> {
    let amounts = |m: &BTreeMap<String, u64>| -> Result<Map<String, Value>> {
        m.iter()
            .map(|(r, &x)| {
                Ok((r.clone(), json!(quantity::format_amount(x, resources::unit_of(r).map_err(Error::Input)?))))
            })
            .collect()
    };
    let mut body = json!({ "reclaimable": true, "deserved": amounts(&spec.deserved)? });
    if !spec.capability.is_empty() {
        body["capability"] = Value::Object(amounts(&spec.capability)?);
    }
    if !spec.guarantee.is_empty() {
        body["guarantee"] = json!({ "resource": amounts(&spec.guarantee)? });
    }
    if let Some(p) = &spec.parent {
        body["parent"] = json!(p);
    }
    let queue = json!({ "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": { "name": spec.name }, "spec": body });
    Ok(Object::new(queue, "queues", false))
}

/// The Volcano Queues of `w`'s tenants, parents first. Cohorts and tenants share Volcano's one
/// namespace of Queues, beside its own `root` and `default`: a clash is refused, naming the cohort.
fn volcano_queues(w: &Workload) -> Result<Vec<Object>> {
    let specs = queue_specs(&w.tenants);
    let taken = |name: &str| ["root", "default"].contains(&name) || w.tenants.queues.iter().any(|q| q.name == name);
    if let Some(c) = specs.iter().find(|s| s.tenant.is_none() && taken(&s.name)) {
        return Err(Error::Input(format!(
            "tenants.cohorts: cohort {} would be a Volcano Queue of the same name as a tenant's queue or one of \
             Volcano's own (root, default); rename the cohort to run this scenario under volcano",
            c.name
        )));
    }
    specs.iter().map(volcano_queue).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::peers::{KUEUE_QUEUE, PeerOptions, VOLCANO_QUEUE, job_objects};
    use std::path::{Path, PathBuf};

    fn scenario(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios").join(name)
    }

    fn load(path: &Path) -> (Workload, Vec<JobRecord>) {
        (muster_sim::scenario::load(path, 1).unwrap(), crate::workload::jobs(path, 1).unwrap())
    }

    fn values(objs: Vec<Object>) -> Vec<Value> {
        objs.into_iter().map(|o| o.value).collect()
    }

    fn of_kind<'a>(objs: &'a [Value], kind: &str) -> Vec<&'a Value> {
        objs.iter().filter(|o| o["kind"] == kind).collect()
    }

    /// A scenario of two tenants with limits, written beside the others' cluster files.
    fn limited(test: &str) -> PathBuf {
        let path = std::env::temp_dir().join(format!("harness-{test}-{}.yaml", std::process::id()));
        let cluster = scenario("clusters/gpu-8.yaml");
        let text = format!(
            "name: limited\ncluster: {}\nhorizon: 1h\ntenants:\n  queues:\n\
             \x20   - name: big\n      cohort: lab\n      fairShareWeight: 2\n\
             \x20     quotas: {{nvidia.com/gpu: {{nominal: 40, borrowingLimit: 8, lendingLimit: 24}}, cpu: {{nominal: \"64\"}}}}\n\
             \x20     preemption: {{reclaimWithinCohort: true, withinQueue: LowerPriority}}\n\
             \x20   - name: solo\n      quotas: {{nvidia.com/gpu: {{nominal: 8}}}}\n\
             jobClasses:\n  - name: x\n    queue: big\n    count: 1\n    members: 1\n\
             \x20   resources: {{nvidia.com/gpu: 2, cpu: \"4\", memory: 16Gi}}\n    runTime: 10s\n",
            cluster.display()
        );
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn muster_gets_a_queue_and_a_namespace_per_tenant() {
        let (w, jobs) = load(&scenario("suite/tenants-reclaim-sixtieth.yaml"));
        let objs = values(setup(Peer::Muster, &w, &jobs).unwrap());
        let names = |kind| of_kind(&objs, kind).iter().map(|o| o["metadata"]["name"].clone()).collect::<Vec<_>>();
        assert_eq!(names("Namespace"), names("Queue"));
        assert_eq!(names("Queue"), ["team-a", "team-b", "team-c", "team-d"]);
        assert!(objs[..4].iter().all(|o| o["kind"] == "Namespace"), "namespaces first");
        let q = of_kind(&objs, "Queue")[0];
        assert_eq!(q["apiVersion"], "muster.dev/v1alpha1");
        assert_eq!(
            q["spec"],
            json!({
                "quotas": {"nvidia.com/gpu": {"nominal": "16"}},
                "cohort": "lab",
                "namespaceSelector": {"namespaces": ["team-a"]},
                "preemption": {"withinQueue": "Never", "reclaimWithinCohort": true},
            })
        );
        // What muster's CRD type reads, and the engine's queue it becomes.
        let spec: muster_k8s::QueueSpec = serde_json::from_value(q["spec"].clone()).unwrap();
        let config = spec.to_config("team-a").unwrap();
        assert_eq!(config.cohort.as_deref(), Some("lab"));
        assert!(config.preemption.reclaim_within_cohort);

        let path = limited("muster");
        let (w, jobs) = load(&path);
        let objs = values(setup(Peer::Muster, &w, &jobs).unwrap());
        let big = &of_kind(&objs, "Queue")[0]["spec"];
        assert_eq!(
            big["quotas"],
            json!({"cpu": {"nominal": "64"}, "nvidia.com/gpu": {"nominal": "40", "borrowingLimit": "8", "lendingLimit": "24"}})
        );
        assert_eq!(big["fairShareWeight"], 2.0);
        assert_eq!(big["preemption"]["withinQueue"], "LowerPriority");
        assert!(of_kind(&objs, "Queue")[1]["spec"].get("cohort").is_none());
        std::fs::remove_file(path).unwrap();
    }

    #[test]
    fn kueue_gets_cohorts_cluster_queues_and_local_queues() {
        let (w, jobs) = load(&scenario("suite/tenants-reclaim-sixtieth.yaml"));
        let objs = values(setup(Peer::Kueue, &w, &jobs).unwrap());
        assert_eq!(of_kind(&objs, "Cohort").len(), 1);
        assert_eq!(of_kind(&objs, "Cohort")[0]["metadata"]["name"], "lab");
        let cq = of_kind(&objs, "ClusterQueue")[1];
        assert_eq!(cq["apiVersion"], "kueue.x-k8s.io/v1beta2");
        assert_eq!(cq["metadata"]["name"], "team-b");
        assert_eq!(cq["spec"]["cohortName"], "lab");
        assert_eq!(cq["spec"]["preemption"], json!({"reclaimWithinCohort": "Any", "withinClusterQueue": "Never"}));
        assert_eq!(cq["spec"]["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"], "team-b");
        let rg = &cq["spec"]["resourceGroups"][0];
        assert_eq!(rg["coveredResources"], json!(["cpu", "memory", "nvidia.com/gpu"]));
        // The tenant's GPUs; cpu and memory, which it does not name, the cluster's (8 x 16, 8 x 64Gi).
        assert_eq!(
            rg["flavors"][0],
            json!({"name": KUEUE_FLAVOR, "resources": [
                {"name": "cpu", "nominalQuota": "128"},
                {"name": "memory", "nominalQuota": "512Gi"},
                {"name": "nvidia.com/gpu", "nominalQuota": "16"},
            ]})
        );
        let lq = of_kind(&objs, "LocalQueue")[1];
        assert_eq!(lq["metadata"], json!({"name": "team-b", "namespace": "team-b"}));
        assert_eq!(lq["spec"]["clusterQueue"], "team-b");
        // Limits as written; a tree of cohorts with its parents.
        let path = limited("kueue");
        let (mut w, jobs) = load(&path);
        let objs = values(setup(Peer::Kueue, &w, &jobs).unwrap());
        let big = of_kind(&objs, "ClusterQueue")[0];
        assert!(big["spec"].get("fairSharing").is_none(), "no weight without Kueue's fair sharing");
        w.kueue.fair_sharing = Some(Default::default());
        let fair = values(setup(Peer::Kueue, &w, &jobs).unwrap());
        assert_eq!(of_kind(&fair, "ClusterQueue")[0]["spec"]["fairSharing"], json!({"weight": "2"}));
        assert_eq!(of_kind(&fair, "ClusterQueue")[1]["spec"]["fairSharing"], json!({"weight": "1"}));
        let gpu = &big["spec"]["resourceGroups"][0]["flavors"][0]["resources"][2];
        assert_eq!(
            gpu,
            &json!({"name": "nvidia.com/gpu", "nominalQuota": "40", "borrowingLimit": "8", "lendingLimit": "24"})
        );
        assert_eq!(big["spec"]["preemption"]["withinClusterQueue"], "LowerPriority");
        assert!(of_kind(&objs, "ClusterQueue")[1]["spec"].get("cohortName").is_none());
        std::fs::remove_file(path).unwrap();
        let (w, jobs) = load(&scenario("suite/tenants-tree.yaml"));
        let objs = values(setup(Peer::Kueue, &w, &jobs).unwrap());
        let cohorts: Vec<(Value, Value)> = of_kind(&objs, "Cohort")
            .iter()
            .map(|c| (c["metadata"]["name"].clone(), c["spec"]["parentName"].clone()))
            .collect();
        assert_eq!(
            cohorts,
            [(json!("org"), Value::Null), (json!("research"), json!("org")), (json!("production"), json!("org"))]
        );
    }

    #[test]
    fn volcano_gets_a_queue_per_tenant_from_its_quotas() {
        let (w, jobs) = load(&scenario("suite/tenants-reclaim-sixtieth.yaml"));
        let objs = values(setup(Peer::Volcano, &w, &jobs).unwrap());
        let q = of_kind(&objs, "Queue")[3];
        assert_eq!(q["apiVersion"], "scheduling.volcano.sh/v1beta1");
        // In a cohort without a borrowingLimit: no capability; without a lendingLimit: no guarantee.
        assert_eq!(
            (&q["metadata"]["name"], &q["spec"]),
            (&json!("team-d"), &json!({"reclaimable": true, "deserved": {"nvidia.com/gpu": "16"}}))
        );
        let path = limited("volcano");
        let (w, jobs) = load(&path);
        let objs = values(setup(Peer::Volcano, &w, &jobs).unwrap());
        let queues = of_kind(&objs, "Queue");
        assert_eq!(
            queues[0]["spec"],
            json!({
                "reclaimable": true,
                "deserved": {"cpu": "64", "nvidia.com/gpu": "40"},
                "capability": {"nvidia.com/gpu": "48"},
                "guarantee": {"resource": {"nvidia.com/gpu": "16"}},
            })
        );
        // In no cohort: it borrows nothing.
        assert_eq!(queues[1]["spec"]["capability"], json!({"nvidia.com/gpu": "8"}));
        std::fs::remove_file(path).unwrap();
        assert!(VOLCANO_SCHEDULER_CONF.contains("reclaim") && VOLCANO_SCHEDULER_CONF.contains(CAPACITY_PLUGIN));
        assert!(!VOLCANO_SCHEDULER_CONF.contains("name: proportion"), "capacity and proportion exclude each other");
    }

    #[test]
    fn a_tenants_jobs_go_to_its_namespace_and_queue() {
        let (_, jobs) = load(&scenario("suite/tenants-reclaim-sixtieth.yaml"));
        let d = jobs.iter().find(|j| j.class == "d-pretrain").unwrap();
        assert_eq!(d.tenant.as_deref(), Some("team-d"));
        let job = |peer| {
            let opts = PeerOptions { peer, namespace: Some("suite".into()), ..Default::default() };
            job_objects(d, &opts).pop().unwrap().value
        };
        let m = job(Peer::Muster);
        assert_eq!(
            (&m["metadata"]["namespace"], &m["metadata"]["labels"]["muster.dev/queue"]),
            (&json!("team-d"), &json!("team-d"))
        );
        let k = job(Peer::Kueue);
        assert_eq!(
            (&k["metadata"]["namespace"], &k["metadata"]["labels"][KUEUE_QUEUE]),
            (&json!("team-d"), &json!("team-d"))
        );
        let v = job(Peer::Volcano);
        assert_eq!(v["metadata"]["namespace"], "team-d");
        assert_eq!(v["spec"]["template"]["metadata"]["annotations"][VOLCANO_QUEUE], "team-d");
        // A peer without queues keeps the run's namespace.
        assert_eq!(job(Peer::Default)["metadata"]["namespace"], "suite");
    }

    #[test]
    fn a_cohort_tree_with_quotas_goes_to_muster_and_kueue_as_their_cohorts() {
        let (w, jobs) = load(&scenario("tenants-departments.yaml"));
        let objs = values(setup(Peer::Muster, &w, &jobs).unwrap());
        let cohorts = of_kind(&objs, "Cohort");
        assert_eq!(cohorts.len(), 3);
        assert_eq!(cohorts[1]["apiVersion"], "muster.dev/v1alpha1");
        assert_eq!(
            cohorts[1]["spec"],
            json!({"parent": "org", "quotas": {"nvidia.com/gpu": {"nominal": "0", "borrowingLimit": "32"}}})
        );
        assert_eq!(cohorts[0]["spec"], json!({"quotas": {}}), "org declares no quota");
        assert_eq!(of_kind(&objs, "Queue")[0]["spec"]["cohort"], "research");
        let objs = values(setup(Peer::Kueue, &w, &jobs).unwrap());
        let research = of_kind(&objs, "Cohort")[1];
        assert_eq!(research["spec"]["parentName"], "org");
        assert_eq!(
            research["spec"]["resourceGroups"],
            json!([{"coveredResources": ["nvidia.com/gpu"], "flavors": [{"name": KUEUE_FLAVOR, "resources": [
                {"name": "nvidia.com/gpu", "nominalQuota": "0", "borrowingLimit": "32"}]}]}])
        );
        assert!(of_kind(&objs, "Cohort")[0]["spec"].get("resourceGroups").is_none());
    }

    #[test]
    fn a_cohort_tree_goes_to_volcano_as_hierarchical_queues() {
        let (w, jobs) = load(&scenario("tenants-departments-sixtieth.yaml"));
        let objs = values(setup(Peer::Volcano, &w, &jobs).unwrap());
        let queues = of_kind(&objs, "Queue");
        let names: Vec<_> = queues.iter().map(|q| q["metadata"]["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["org", "research", "production", "team-a", "team-b", "team-c", "team-d"], "parents first");
        // org declares no quota: it deserves its four teams' 64 GPUs and may take what the root has.
        assert_eq!(queues[0]["spec"], json!({"reclaimable": true, "deserved": {"nvidia.com/gpu": "64"}}));
        // A department deserves its two teams' 32 GPUs and borrows at most 8 more.
        assert_eq!(
            queues[1]["spec"],
            json!({"reclaimable": true, "parent": "org", "deserved": {"nvidia.com/gpu": "32"},
                   "capability": {"nvidia.com/gpu": "40"}})
        );
        // A team without a borrowingLimit takes its department's capability.
        assert_eq!(
            queues[3]["spec"],
            json!({"reclaimable": true, "parent": "research", "deserved": {"nvidia.com/gpu": "16"}})
        );
        let conf = volcano_scheduler_conf(&w);
        assert!(conf.contains(&format!("{CAPACITY_PLUGIN}{CAPACITY_HIERARCHY}")), "{conf}");
        // One cohort without quotas stays flat: no parents, no hierarchy.
        let (w, jobs) = load(&scenario("suite/tenants-reclaim-sixtieth.yaml"));
        let objs = values(setup(Peer::Volcano, &w, &jobs).unwrap());
        assert!(of_kind(&objs, "Queue").iter().all(|q| q["spec"].get("parent").is_none()));
        assert_eq!(volcano_scheduler_conf(&w), VOLCANO_SCHEDULER_CONF);
    }

    #[test]
    fn a_cohort_named_like_a_queue_is_refused_for_volcano() {
        let (mut w, jobs) = load(&scenario("tenants-departments-sixtieth.yaml"));
        w.tenants.cohorts[1].name = "team-a".into();
        let e = setup(Peer::Volcano, &w, &jobs).unwrap_err().to_string();
        assert!(e.contains("tenants.cohorts: cohort team-a") && e.contains("rename the cohort"), "{e}");
    }

    #[test]
    fn what_a_peer_cannot_hold_is_refused() {
        let (w, jobs) = load(&scenario("suite/tenants-reclaim-sixtieth.yaml"));
        let e = setup(Peer::Native, &w, &jobs).unwrap_err().to_string();
        assert!(e.contains("no queues") && e.contains("muster, kueue or volcano"), "{e}");
        // Without tenants, nothing to set up.
        let (w, jobs) = load(&scenario("suite/seed-001.yaml"));
        assert!(setup(Peer::Muster, &w, &jobs).unwrap().is_empty());
    }
}
