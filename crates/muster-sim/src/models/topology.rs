//! Topology-aware gang placement as the peers that have it do it: every pod of a gang within one
//! domain of a level (a rack, a block), and each gang inside it (a set with a level of its own, or
//! a sub-group of sets) within one domain of that level inside the gang's (a gang of gangs:
//! prefill in one rack, decode in another, both in one block). Volcano's network-topology-aware scheduling (hard mode
//! for a required constraint, soft for a preferred one) and kube-scheduler's
//! TopologyAwareWorkloadScheduling (alpha in 1.37, required only) try the gang domain by domain
//! in one cycle; Kueue's TAS assigns pods to nodes of one domain at admission (`assign`).
//! Domains are tried tightest first (fewest pods of the job fit), the best-fit order Kueue's TAS
//! documents; a preferred constraint no domain can meet falls back to the whole cluster (for a
//! gang inside: to the job's domain). Gangs inside are given their domains in the order of their
//! first pods, each the tightest that still holds it once those before it are placed; one that
//! finds none fails the job in that domain of its level, as the peers' one-pass allocation does.

use std::collections::{BTreeMap, HashMap};

use muster_graph::jobspec::ConstraintMode;

use crate::models::gang::{self, GangPlacement, Snapshot};
use crate::models::kube::Placer;
use crate::scenario::JobTopology;
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
        self.load(view, label);
        self.get(label)
    }

    /// The domains of a label `load` has computed.
    fn get(&self, label: &str) -> &[Domain] {
        &self.by_label[label]
    }

    /// Computes the domains of `label` once.
    fn load(&mut self, view: &ClusterView<'_>, label: &str) {
        if self.by_label.contains_key(label) {
            return;
        }
        self.by_label.insert(label.to_string(), {
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
        });
    }
}

/// How many pods of the job's set `set` fit the node in the snapshot (0 if it is not eligible).
pub fn pods_fitting(view: &ClusterView<'_>, snap: &Snapshot, job: JobId, set: usize, node: NodeId) -> u64 {
    let set = &view.job(job).sets[set];
    if !view.set_eligible(set, node) {
        return 0;
    }
    let req = &set.request;
    (0..req.len()).filter(|&r| req[r] > 0).map(|r| snap.free(view, node, r) / req[r]).min().unwrap_or(u64::MAX)
}

/// Indices of the domains where, of every set in `needs` (set, pods), that many pods fit on
/// their nodes inside `within` (all nodes when None), tightest first (the least room in all).
pub fn fitting_domains(
    view: &ClusterView<'_>,
    snap: &Snapshot,
    job: JobId,
    needs: &[(usize, u32)],
    domains: &[Domain],
    within: Option<&[bool]>,
) -> Vec<usize> {
    let mut fit: Vec<(u64, usize)> = (domains.iter().enumerate())
        .filter_map(|(i, d)| {
            let nodes = d.nodes.iter().filter(|n| within.is_none_or(|w| w[n.index()]));
            let mut total = 0u64;
            for &(set, need) in needs {
                let room =
                    nodes.clone().map(|&n| pods_fitting(view, snap, job, set, n)).fold(0u64, u64::saturating_add);
                if room < u64::from(need.max(1)) {
                    return None;
                }
                total = total.saturating_add(room);
            }
            Some((total, i))
        })
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

/// The node labels of the levels a constraint is tried at in turn, and whether no domain at all
/// (the whole cluster; for a gang inside a job, the job's domain) is the last resort.
struct Levels<'t> {
    labels: Vec<&'t str>,
    anywhere: bool,
}

impl<'t> Levels<'t> {
    /// A model without preferred constraints is given the enclosing level a preferred one is kept
    /// within, as a required one: what a user of that scheduler would write.
    fn of(t: &'t JobTopology, honours: Honours) -> Self {
        let (labels, anywhere) = match (t.mode, honours, &t.within) {
            (ConstraintMode::Required, ..) => (vec![t.label.as_str()], false),
            (ConstraintMode::Preferred, Honours::Both, None) => (vec![t.label.as_str()], true),
            (ConstraintMode::Preferred, Honours::Both, Some((_, within))) => (vec![t.label.as_str(), within], false),
            (ConstraintMode::Preferred, Honours::RequiredOnly, None) => (vec![], true),
            (ConstraintMode::Preferred, Honours::RequiredOnly, Some((_, within))) => (vec![within.as_str()], false),
        };
        Self { labels, anywhere }
    }
}

/// Where the job's pods may go: the job's domain, and each gang inside's once it is chosen.
struct Scope<'a> {
    view: &'a ClusterView<'a>,
    job: JobId,
    domains: &'a Domains,
    /// The levels of each gang inside the job (`JobSpec::units`).
    unit_levels: Vec<Levels<'a>>,
    /// Pods of each set the job needs placed, by set.
    needs: Vec<(usize, u32)>,
}

impl Scope<'_> {
    /// The nodes the pods of gang `unit` must keep to, within the job's domain `within`: None when
    /// no domain of its levels holds it (a required constraint), Some(None) for no more than
    /// `within`.
    fn unit_domain(&self, snap: &Snapshot, unit: usize, within: Option<&[bool]>) -> Option<Option<Vec<bool>>> {
        let sets = &self.view.job(self.job).spec.units[unit].sets;
        let levels = &self.unit_levels[unit];
        let needs: Vec<(usize, u32)> = self.needs.iter().filter(|(k, _)| sets.contains(k)).copied().collect();
        let needs = if needs.is_empty() { vec![(sets[0], 1)] } else { needs };
        let held = held_nodes(self.view, self.job, Some(sets));
        for (i, label) in levels.labels.iter().enumerate() {
            let domains = self.domains.get(label);
            let candidates = match held.first().map(|n| domains.iter().position(|d| d.mask[n.index()])) {
                Some(_) if i + 1 < levels.labels.len() => continue,
                Some(d) => d.into_iter().collect(),
                None => fitting_domains(self.view, snap, self.job, &needs, domains, within),
            };
            // Its sets share the domain's nodes: the first (tightest) that holds them together,
            // as a dry run of the gang's allocation finds.
            let mut masks = candidates.into_iter().map(|d| inside(&domains[d].mask, within));
            if let Some(mask) = masks.find(|m| fill(self.view, snap, self.job, &needs, Some(m)).is_some()) {
                return Some(Some(mask));
            }
        }
        levels.anywhere.then_some(None)
    }
}

/// The nodes `mask` marks that `within` does too (all of them when None).
fn inside(mask: &[bool], within: Option<&[bool]>) -> Vec<bool> {
    within.map_or_else(|| mask.to_vec(), |w| w.iter().zip(mask).map(|(a, b)| *a && *b).collect())
}

/// The nodes of the pods of the job's current start that hold resources, of `sets` or all.
fn held_nodes(view: &ClusterView<'_>, job: JobId, sets: Option<&[usize]>) -> Vec<NodeId> {
    let j = view.job(job);
    (j.pods.iter().map(|&p| view.pod(p)))
        .filter(|p| p.phase.holds() && sets.is_none_or(|s| s.contains(&j.set_index(p.index))))
        .filter_map(|p| p.node)
        .collect()
}

/// Of the first `need` pending pods of the job (those the gang cannot do without), how many each
/// set has; at least one pod of the first set with pending pods when that is none.
fn set_needs(view: &ClusterView<'_>, job: JobId, need: u32) -> Vec<(usize, u32)> {
    let j = view.job(job);
    let pending = gang::pending_pods(view, job);
    let mut needs: Vec<(usize, u32)> = Vec::new();
    for &p in pending.iter().take(need.max(1) as usize) {
        let k = j.set_index(view.pod(p).index);
        match needs.last_mut() {
            Some((last, n)) if *last == k => *n += 1,
            _ => needs.push((k, 1)),
        }
    }
    if needs.is_empty() {
        needs.push((0, 1));
    }
    needs
}

/// `gang::place_gang` with the job's topology constraints, if the model honours them: the job is
/// placed within the first domain of its level (tightest first) that takes it, and each gang
/// inside it with a level of its own within a domain of that level inside; a required constraint
/// no domain meets rejects the job, a preferred one falls back to the whole cluster (a gang
/// inside's, to the job's domain). A job already partly placed stays in the domains of its placed
/// pods.
pub fn place_gang(
    view: &ClusterView<'_>,
    snap: &mut Snapshot,
    job: JobId,
    need: u32,
    placer: &mut Option<Placer>,
    domains: &mut Domains,
    honours: Honours,
) -> GangPlacement {
    let j = view.job(job);
    let own = j.spec.topology.as_ref().map(|t| Levels::of(t, honours));
    let unit_levels: Vec<Levels> = j.spec.units.iter().map(|u| Levels::of(&u.topology, honours)).collect();
    for levels in own.iter().chain(&unit_levels) {
        levels.labels.iter().for_each(|l| domains.load(view, l));
    }
    // The gang inside each set belongs to, if any.
    let unit_of: Vec<Option<usize>> =
        (0..j.sets.len()).map(|k| j.spec.units.iter().position(|u| u.sets.contains(&k))).collect();
    // What the job's pods need is worked out only for a job with constraints: most have none.
    let constrained = own.is_some() || !unit_levels.is_empty();
    let needs = if constrained { set_needs(view, job, need) } else { Vec::new() };
    let scope = Scope { view, job, domains, unit_levels, needs };
    let mut place = |snap: &mut Snapshot, within: Option<&[bool]>| {
        // Each gang inside's nodes, chosen when its first pod is placed (after those before it).
        let mut chosen: Vec<Option<Option<Vec<bool>>>> = vec![None; j.spec.units.len()];
        gang::place_gang(view, snap, job, need, |v, pod, s| {
            let nodes = match unit_of[j.set_index(v.pod(pod).index)] {
                None => within,
                Some(u) => {
                    if chosen[u].is_none() {
                        chosen[u] = Some(scope.unit_domain(s, u, within)?);
                    }
                    chosen[u].as_ref().and_then(|c| c.as_deref()).or(within)
                }
            };
            placer.get_or_insert_with(|| Placer::new(v)).place_within(v, pod, s, nodes)
        })
    };
    let Some(levels) = own else { return place(snap, None) };
    let mut evaluated = 0;
    let held = held_nodes(view, job, None);
    for (i, label) in levels.labels.iter().enumerate() {
        let domains = scope.domains.get(label);
        let candidates: Vec<usize> = match held.first().map(|n| domains.iter().position(|d| d.mask[n.index()])) {
            // A gang already partly placed stays in the domain of its placed pods, at the
            // outermost level it may use.
            Some(_) if i + 1 < levels.labels.len() => continue,
            Some(d) => d.into_iter().collect(),
            None => fitting_domains(view, snap, job, &scope.needs, domains, None),
        };
        for d in candidates {
            let result = place(snap, Some(&domains[d].mask));
            evaluated += result.evaluated;
            if result.accepted {
                return GangPlacement { evaluated, ..result };
            }
        }
    }
    if levels.anywhere {
        let result = place(snap, None);
        return GangPlacement { evaluated: evaluated + result.evaluated, ..result };
    }
    GangPlacement { placed: vec![], evaluated, accepted: false }
}

/// One node's share of a Kueue TAS assignment: pods of one set still to bind there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slot {
    pub set: usize,
    pub node: NodeId,
    pub left: u32,
}

/// PodSets Kueue's TAS assigns together, within one domain of `label` (None: anywhere in the
/// job's domain): one PodSet, or a PodSet group (a leader and its workers).
pub struct TasPart {
    pub sets: Vec<usize>,
    pub label: Option<String>,
}

/// Kueue TAS's admission of all the job's pods: per node and set, how many pods it gets, all
/// within one domain of `label` (tightest first; None: no such domain) and each of `parts` in
/// turn within one domain of its own label inside that (tightest first once the parts before it
/// are assigned), filling each domain's nodes in order; None when no domain holds them so.
pub fn assign(
    view: &ClusterView<'_>,
    snap: &Snapshot,
    job: JobId,
    label: Option<&str>,
    parts: &[TasPart],
    domains: &mut Domains,
) -> Option<Vec<Slot>> {
    let j = view.job(job);
    for l in label.into_iter().chain(parts.iter().filter_map(|p| p.label.as_deref())) {
        domains.load(view, l);
    }
    let domains = &*domains;
    // Every pod of the job: each set whole, the last one's up to the job's max.
    let need =
        |k: usize| if k + 1 < j.sets.len() { j.sets[k].max_members } else { j.spec.max_members - j.fixed_members() };
    let needs: Vec<(usize, u32)> = (0..j.sets.len()).map(|k| (k, need(k))).collect();
    let outer: Vec<Option<&[bool]>> = match label {
        None => vec![None],
        Some(l) => {
            let ds = domains.get(l);
            fitting_domains(view, snap, job, &needs, ds, None)
                .into_iter()
                .map(|d| Some(ds[d].mask.as_slice()))
                .collect()
        }
    };
    'outer: for within in outer {
        let mut trial = snap.clone();
        let mut slots = vec![];
        for part in parts {
            let part_needs: Vec<(usize, u32)> = part.sets.iter().map(|&k| (k, need(k))).collect();
            let filled = match part.label.as_deref() {
                None => fill(view, &trial, job, &part_needs, within),
                Some(l) => {
                    let ds = domains.get(l);
                    (fitting_domains(view, &trial, job, &part_needs, ds, within).into_iter())
                        .find_map(|d| fill(view, &trial, job, &part_needs, Some(&inside(&ds[d].mask, within))))
                }
            };
            let Some((after, part_slots)) = filled else { continue 'outer };
            trial = after;
            slots.extend(part_slots);
        }
        return Some(slots);
    }
    None
}

/// `needs` (set, pods) of the job's pods on the nodes `nodes` marks (all when None), set after set,
/// each filling the nodes in order: the snapshot with them taken and the slots, or None when
/// they do not all fit.
fn fill(
    view: &ClusterView<'_>,
    snap: &Snapshot,
    job: JobId,
    needs: &[(usize, u32)],
    nodes: Option<&[bool]>,
) -> Option<(Snapshot, Vec<Slot>)> {
    let mut trial = snap.clone();
    let mut slots = vec![];
    for &(k, need) in needs {
        let mut left = u64::from(need);
        let eligible = (0..view.nodes().len()).map(|i| NodeId(i as u32)).filter(|n| nodes.is_none_or(|m| m[n.index()]));
        for n in eligible {
            let take = pods_fitting(view, &trial, job, k, n).min(left);
            if take > 0 {
                (0..take).for_each(|_| trial.take(&view.job(job).sets[k].request, n));
                slots.push(Slot { set: k, node: n, left: take as u32 });
                left -= take;
            }
            if left == 0 {
                break;
            }
        }
        if left > 0 {
            return None;
        }
    }
    Some((trial, slots))
}
