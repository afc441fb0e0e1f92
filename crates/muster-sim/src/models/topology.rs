//! Topology-aware gang placement as the peers that have it do it: every pod of a gang within one
//! domain of a level (a rack, a block). Volcano's network-topology-aware scheduling (hard mode
//! for a required constraint, soft for a preferred one) and kube-scheduler's
//! TopologyAwareWorkloadScheduling (alpha in 1.37, required only) try the gang domain by domain
//! in one cycle; Kueue's TAS assigns pods to nodes of one domain at admission (`assign`).
//! Domains are tried tightest first (fewest pods of the job fit), the best-fit order Kueue's TAS
//! documents; a preferred constraint no domain can meet falls back to the whole cluster.

use std::collections::{BTreeMap, HashMap};

use muster_graph::jobspec::ConstraintMode;

use crate::models::gang::{self, GangPlacement, Snapshot};
use crate::models::kube::Placer;
use crate::scheduler::{ClusterView, JobId, NodeId};

/// One domain of a level: its nodes, and a mask over all nodes for the placer.
#[derive(Debug)]
pub struct Domain {
    pub nodes: Vec<NodeId>,
    pub mask: Vec<bool>,
}

/// The domains of each node label a job asked for, computed once (nodes do not move).
#[derive(Debug, Default)]
pub struct Domains {
    by_label: HashMap<String, Vec<Domain>>,
}

impl Domains {
    /// The domains of `label`, in the order of their values; nodes without the label are in none.
    pub fn of(&mut self, view: &ClusterView<'_>, label: &str) -> &[Domain] {
        self.by_label.entry(label.to_string()).or_insert_with(|| {
            let mut by_value: BTreeMap<&str, Vec<NodeId>> = BTreeMap::new();
            for (i, n) in view.nodes().iter().enumerate() {
                if let Some(v) = n.labels.get(label) {
                    by_value.entry(v).or_default().push(NodeId(i as u32));
                }
            }
            let total = view.nodes().len();
            by_value
                .into_values()
                .map(|nodes| {
                    let mut mask = vec![false; total];
                    nodes.iter().for_each(|n| mask[n.index()] = true);
                    Domain { nodes, mask }
                })
                .collect()
        })
    }
}

/// How many pods of `job` fit the node in the snapshot (0 if it is not eligible). A job with a
/// topology constraint has one set of pods (a scenario gives none to a job of several).
pub fn pods_fitting(view: &ClusterView<'_>, snap: &Snapshot, job: JobId, node: NodeId) -> u64 {
    let set = &view.job(job).sets[0];
    if !view.set_eligible(set, node) {
        return 0;
    }
    let req = &set.request;
    (0..req.len()).filter(|&r| req[r] > 0).map(|r| snap.free(view, node, r) / req[r]).min().unwrap_or(u64::MAX)
}

/// Indices of the domains where at least `need` pods of `job` fit, tightest first.
pub fn fitting_domains(
    view: &ClusterView<'_>,
    snap: &Snapshot,
    job: JobId,
    need: u32,
    domains: &[Domain],
) -> Vec<usize> {
    let mut fit: Vec<(u64, usize)> = domains
        .iter()
        .enumerate()
        .map(|(i, d)| (d.nodes.iter().map(|&n| pods_fitting(view, snap, job, n)).fold(0u64, u64::saturating_add), i))
        .filter(|&(room, _)| room >= u64::from(need.max(1)))
        .collect();
    fit.sort_unstable();
    fit.into_iter().map(|(_, i)| i).collect()
}

/// Whether a model honours preferred constraints as well as required ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Honours {
    RequiredOnly,
    Both,
}

/// `gang::place_gang` with the job's topology constraint, if the model honours it: the gang is
/// placed within the first domain (tightest first) that takes it; a required constraint no domain
/// meets rejects the gang, a preferred one falls back to the whole cluster. A gang already partly
/// placed stays in the domain of its placed pods.
pub fn place_gang(
    view: &ClusterView<'_>,
    snap: &mut Snapshot,
    job: JobId,
    need: u32,
    placer: &mut Option<Placer>,
    domains: &mut Domains,
    honours: Honours,
) -> GangPlacement {
    let mut place = |snap: &mut Snapshot, within: Option<&[bool]>| {
        gang::place_gang(view, snap, job, need, |v, pod, s| {
            placer.get_or_insert_with(|| Placer::new(v)).place_within(v, pod, s, within)
        })
    };
    let Some(t) = view.job(job).spec.topology.as_ref() else { return place(snap, None) };
    // The levels tried in turn, and whether the whole cluster is the last resort. A model without
    // preferred constraints is given the enclosing level a preferred one is kept within, as a
    // required one: what a user of that scheduler would write.
    let (labels, anywhere): (Vec<&str>, bool) = match (t.mode, honours, &t.within) {
        (ConstraintMode::Required, ..) => (vec![&t.label], false),
        (ConstraintMode::Preferred, Honours::Both, None) => (vec![&t.label], true),
        (ConstraintMode::Preferred, Honours::Both, Some((_, within))) => (vec![&t.label, within], false),
        (ConstraintMode::Preferred, Honours::RequiredOnly, None) => return place(snap, None),
        (ConstraintMode::Preferred, Honours::RequiredOnly, Some((_, within))) => (vec![within], false),
    };
    let mut evaluated = 0;
    for (i, label) in labels.iter().enumerate() {
        let domains = domains.of(view, label);
        let held = view.job(job).pods.iter().filter_map(|&p| view.pod(p).node.filter(|_| view.pod(p).phase.holds()));
        let candidates: Vec<usize> = match held.map(|n| domains.iter().position(|d| d.mask[n.index()])).next() {
            // A gang already partly placed stays in the domain of its placed pods, at the
            // outermost level it may use.
            Some(_) if i + 1 < labels.len() => continue,
            Some(Some(d)) => vec![d],
            Some(None) => vec![],
            None => fitting_domains(view, snap, job, need, domains),
        };
        for d in candidates {
            let result = place(snap, Some(&domains[d].mask));
            evaluated += result.evaluated;
            if result.accepted {
                return GangPlacement { evaluated, ..result };
            }
        }
    }
    if anywhere {
        let result = place(snap, None);
        return GangPlacement { evaluated: evaluated + result.evaluated, ..result };
    }
    GangPlacement { placed: vec![], evaluated, accepted: false }
}

/// Kueue TAS's admission: per node, how many pods of `job` it gets, all within one domain of the
/// job's level (tightest first), filling each domain's nodes in order; None when no domain holds
/// all `members`.
pub fn assign(
    view: &ClusterView<'_>,
    snap: &Snapshot,
    job: JobId,
    members: u32,
    label: &str,
    domains: &mut Domains,
) -> Option<Vec<(NodeId, u32)>> {
    let domains = domains.of(view, label);
    let d = *fitting_domains(view, snap, job, members, domains).first()?;
    let mut left = u64::from(members);
    let mut out = vec![];
    for &n in &domains[d].nodes {
        let k = pods_fitting(view, snap, job, n).min(left);
        if k > 0 {
            out.push((n, k as u32));
            left -= k;
        }
    }
    (left == 0).then_some(out)
}
