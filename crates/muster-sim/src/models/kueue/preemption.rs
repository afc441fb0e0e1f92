//! Kueue's classical preemption (Kueue v0.19.2, `pkg/scheduler/preemption/preemption.go`
//! `classicalPreemptions`, `classical/hierarchical_preemption.go`, `classical/candidate_generator.go`,
//! `common/ordering.go`): whole admitted workloads are chosen by quota alone. Candidates are the
//! preemptor's own ClusterQueue's lower-priority workloads (withinClusterQueue: LowerPriority) and,
//! with reclaimWithinCohort: Any, workloads of other queues in the cohort tree that use more than
//! their nominal quota of a resource the preemptor is short of. They are taken in Kueue's order
//! (already evicting first, then other queues', lower priority, most recently admitted) and
//! removed until the preemptor fits; then, latest first, every one whose return still leaves it
//! fitting is given back. borrowWithinCohort is not modelled (as if absent: Never).

use std::cmp::Reverse;

use super::fair_preemption::{self, FairSharing};
use super::quota::QuotaTree;
use crate::scheduler::JobId;

/// An admitted workload, as a candidate for preemption.
#[derive(Debug, Clone)]
pub struct Admitted {
    pub job: JobId,
    pub queue: usize,
    pub priority: i32,
    /// When its quota was reserved; the most recent is preempted first.
    pub admitted_ms: i64,
    /// Already evicted, its pods not yet gone (its quota still held).
    pub evicting: bool,
    /// Per covered resource.
    pub usage: Vec<i64>,
}

/// A ClusterQueue's preemption policy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Policy {
    /// reclaimWithinCohort: Any (else Never).
    pub reclaim_within_cohort: bool,
    /// withinClusterQueue: LowerPriority (else Never).
    pub within_queue_lower_priority: bool,
}

/// The workload looking for room.
pub struct Preemptor<'a> {
    pub queue: usize,
    pub priority: i32,
    pub policy: Policy,
    /// What it asks, per covered resource (0: not asked).
    pub usage: &'a [i64],
    /// The resources it is short of.
    pub short: &'a [usize],
    /// With Kueue's fair sharing on, its preemption replaces the classical one.
    pub fair: Option<&'a FairSharing>,
}

/// Kueue's candidate order (`CandidatesOrdering`): already evicting first, then other queues'
/// before the preemptor's own, lower priority, most recently admitted.
pub type OrderKey = (Reverse<bool>, bool, i32, Reverse<i64>, JobId);

pub fn order(a: &Admitted, preemptor_queue: usize) -> OrderKey {
    (Reverse(a.evicting), a.queue == preemptor_queue, a.priority, Reverse(a.admitted_ms), a.job)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Variant {
    WithinQueue,
    /// The preemptor's subtree holds the quota the candidate uses.
    HierarchicalReclaim,
    /// Only if the preemptor does not borrow after the preemptions.
    ReclaimWithoutBorrowing,
}

struct Candidate<'a> {
    index: usize,
    wl: &'a Admitted,
    /// The cohort where the candidate's and the preemptor's paths meet.
    lca: Option<usize>,
    variant: Variant,
}

/// The workloads to evict so that `p` fits `tree` (which is left as it was), as indices into
/// `admitted`; empty when no choice makes it fit.
pub fn targets(tree: &mut QuotaTree, admitted: &[Admitted], p: &Preemptor<'_>) -> Vec<usize> {
    if let Some(fair) = p.fair {
        return fair_preemption::targets(tree, admitted, p, fair);
    }
    let reclaims = p.policy.reclaim_within_cohort && tree.parent(p.queue).is_some();
    if !reclaims && !p.policy.within_queue_lower_priority {
        return vec![];
    }
    let uses_short = |a: &Admitted| p.short.iter().any(|&r| a.usage[r] > 0);
    let mut same = vec![];
    if p.policy.within_queue_lower_priority {
        let lower =
            admitted.iter().enumerate().filter(|(_, a)| a.queue == p.queue && a.priority < p.priority && uses_short(a));
        same.extend(lower.map(|(index, wl)| Candidate { index, wl, lca: None, variant: Variant::WithinQueue }));
    }
    let (mut hierarchy, mut priority) = (vec![], vec![]);
    if reclaims {
        let (mut advantage, mut remaining) = tree.fits_in_quota(p.queue, p.usage);
        let mut previous = None;
        let ancestors: Vec<usize> = tree.ancestors(p.queue).collect();
        for root in ancestors {
            let out = if advantage { &mut hierarchy } else { &mut priority };
            let walk = Walk { tree, admitted, p, subtree_root: root, skip: previous, advantage };
            walk.collect(root, &uses_short, out);
            let (fits, rest) = tree.fits_in_quota(root, &remaining);
            remaining = rest;
            advantage |= fits;
            previous = Some(root);
        }
    }
    for list in [&mut same, &mut hierarchy, &mut priority] {
        list.sort_by_key(|c| order(c.wl, p.queue));
    }
    let no_other_queues = hierarchy.is_empty() && priority.is_empty();
    let no_hierarchy = hierarchy.is_empty();
    let under_nominal = p.short.iter().all(|&r| tree.quota(p.queue, r).nominal > tree.usage(p.queue, r));
    let mut all: Vec<Candidate<'_>> = vec![];
    for evicting in [true, false] {
        for list in [&mut hierarchy, &mut priority, &mut same] {
            let (taken, kept): (Vec<_>, Vec<_>) = list.drain(..).partition(|c| c.wl.evicting == evicting);
            all.extend(taken);
            *list = kept;
        }
    }
    let attempts: &[bool] = if no_other_queues || !under_nominal {
        &[true]
    } else if no_hierarchy {
        &[false, true]
    } else {
        &[true, false]
    };
    for &borrowing in attempts {
        let mut chosen: Vec<usize> = vec![];
        for c in &all {
            if !valid(tree, p, c, borrowing) {
                continue;
            }
            tree.charge(c.wl.queue, &c.wl.usage, false);
            chosen.push(c.index);
            if fits(tree, p, borrowing) {
                fill_back(tree, admitted, p, &mut chosen, borrowing);
                restore(tree, admitted, &chosen);
                return chosen;
            }
        }
        restore(tree, admitted, &chosen);
    }
    vec![]
}

/// `collectCandidatesInSubtree`: candidates in the queues of one subtree that use more than
/// their nominal quota, skipping subtrees within theirs and the one already visited.
struct Walk<'a, 'b> {
    tree: &'b QuotaTree,
    admitted: &'a [Admitted],
    p: &'b Preemptor<'b>,
    subtree_root: usize,
    skip: Option<usize>,
    advantage: bool,
}

impl<'a> Walk<'a, '_> {
    fn collect(&self, cohort: usize, uses_short: &impl Fn(&Admitted) -> bool, out: &mut Vec<Candidate<'a>>) {
        for &child in self.tree.child_cohorts(cohort) {
            if Some(child) != self.skip && !self.tree.within_nominal(child, self.p.short) {
                self.collect(child, uses_short, out);
            }
        }
        let variant = if self.advantage { Variant::HierarchicalReclaim } else { Variant::ReclaimWithoutBorrowing };
        for &queue in self.tree.child_queues(cohort) {
            if queue == self.p.queue || self.tree.within_nominal(queue, self.p.short) {
                continue;
            }
            let theirs = self.admitted.iter().enumerate().filter(|(_, a)| a.queue == queue && uses_short(a));
            out.extend(theirs.map(|(index, wl)| Candidate { index, wl, lca: Some(self.subtree_root), variant }));
        }
    }
}

/// `candidateIsValid`: earlier removals may have brought the candidate's queue, or a cohort on
/// its way up to where it meets the preemptor, back within nominal quota.
fn valid(tree: &QuotaTree, p: &Preemptor<'_>, c: &Candidate<'_>, borrowing: bool) -> bool {
    if c.wl.queue == p.queue {
        return true;
    }
    if borrowing && c.variant == Variant::ReclaimWithoutBorrowing {
        return false;
    }
    if tree.within_nominal(c.wl.queue, p.short) {
        return false;
    }
    let mut below_lca = tree.ancestors(c.wl.queue).take_while(|&n| Some(n) != c.lca);
    !below_lca.any(|n| tree.within_nominal(n, p.short))
}

/// `workloadFits`: the preemptor fits what is available, and without borrowing if so asked.
pub fn fits(tree: &QuotaTree, p: &Preemptor<'_>, borrowing: bool) -> bool {
    p.usage
        .iter()
        .enumerate()
        .filter(|(_, v)| **v > 0)
        .all(|(r, &v)| (borrowing || !tree.borrowing_with(p.queue, r, v)) && v <= tree.available(p.queue, r))
}

/// `fillBackWorkloads`: from the second latest back, every target whose return still leaves the
/// preemptor fitting is spared (removed as Kueue does, the last moved into its place).
pub fn fill_back(
    tree: &mut QuotaTree,
    admitted: &[Admitted],
    p: &Preemptor<'_>,
    chosen: &mut Vec<usize>,
    borrowing: bool,
) {
    for i in (0..chosen.len().saturating_sub(1)).rev() {
        let wl = &admitted[chosen[i]];
        tree.charge(wl.queue, &wl.usage, true);
        if fits(tree, p, borrowing) {
            chosen.swap_remove(i);
        } else {
            tree.charge(wl.queue, &wl.usage, false);
        }
    }
}

/// Gives the chosen workloads' usage back to the tree.
pub fn restore(tree: &mut QuotaTree, admitted: &[Admitted], chosen: &[usize]) {
    for &i in chosen {
        tree.charge(admitted[i].queue, &admitted[i].usage, true);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::kueue::quota::ResourceQuota;

    fn admitted(job: u32, usage: i64, admitted_ms: i64) -> Admitted {
        Admitted { job: JobId(job), queue: 1, priority: 0, admitted_ms, evicting: false, usage: vec![usage] }
    }

    #[test]
    fn victims_are_taken_newest_first_until_the_preemptor_fits_and_those_not_needed_are_spared() {
        let quota = |nominal| vec![ResourceQuota { nominal, borrowing_limit: None, lending_limit: None }];
        let mut tree = QuotaTree::new(vec![(quota(4), Some(0)), (quota(4), Some(0))], &[None]);
        // b holds 7 of the cohort's 8: a 2 (newest), a 4, a 1 (oldest).
        let b = [admitted(0, 2, 30), admitted(1, 4, 20), admitted(2, 1, 10)];
        b.iter().for_each(|w| tree.charge(1, &w.usage, true));
        let policy = Policy { reclaim_within_cohort: true, within_queue_lower_priority: false };
        let p = Preemptor { queue: 0, priority: 0, policy, usage: &[4], short: &[0], fair: None };
        // Taking the 2 leaves 3 free; taking the 4 as well makes room, and then the 2 is not needed.
        assert_eq!(targets(&mut tree, &b, &p), [1]);
        assert_eq!(tree.usage(1, 0), 7, "the tree is left as it was");
        let never = Preemptor { policy: Policy::default(), ..p };
        assert!(targets(&mut tree, &b, &never).is_empty(), "reclaimWithinCohort Never preempts nothing");
    }
}
