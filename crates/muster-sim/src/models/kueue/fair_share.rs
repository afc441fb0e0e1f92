//! Kueue's fair sharing (Kueue v0.19.2, `pkg/cache/scheduler/fair_sharing.go`,
//! `pkg/scheduler/fair_sharing_iterator.go`): the dominant resource share (DRS) of a ClusterQueue
//! or Cohort, and the order a cycle takes its heads in when fair sharing is on.
//!
//! A node's DRS: for each resource it uses past its subtree quota (a queue's nominal), what it
//! borrows times 1000 over what its parent could ever lend it (`potentialAvailable` of the
//! parent); the largest of these, divided by the node's weight (ClusterQueue
//! `spec.fairSharing.weight`, a tenant's `fairShareWeight`; cohorts weigh 1 here). A root has
//! none. With weight 0, a borrowing node's share is infinite.
//!
//! Heads are taken one at a time, each after the last one's admission: a tournament up the
//! cohort tree in which, at each cohort, every child nominates a head and the child whose DRS
//! (with its nominee admitted) is lowest wins; a child not borrowing on what its nominee asks
//! wins over one that is (FairSharingPrioritizeNonBorrowing, on by default), then the lower
//! share, then the higher priority, then the earlier queue timestamp.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use super::Key;
use super::quota::QuotaTree;

/// One node's dominant resource share.
#[derive(Debug, Clone, PartialEq)]
pub struct Drs {
    weight: f64,
    /// Borrowed times 1000 over lendable, before the weight.
    ratio: f64,
    /// The resources it uses past its subtree quota.
    borrowed: Vec<usize>,
}

impl Drs {
    /// Below every real share (Kueue's `NegativeDRS`), to start a search for the highest.
    pub fn negative() -> Self {
        Drs { weight: 1.0, ratio: -1.0, borrowed: vec![] }
    }

    pub fn borrowing(&self) -> bool {
        !self.borrowed.is_empty()
    }

    /// Whether it borrows any resource `usage` asks for.
    pub fn borrowing_on(&self, usage: &[i64]) -> bool {
        self.borrowed.iter().any(|&r| usage[r] > 0)
    }

    /// The weighted share (Kueue's `PreciseWeightedShare`).
    pub fn share(&self) -> f64 {
        match (self.ratio == 0.0, self.weight == 0.0) {
            (true, _) => 0.0,
            (false, true) => f64::INFINITY,
            (false, false) => self.ratio / self.weight,
        }
    }

    fn zero_weight_borrows(&self) -> bool {
        self.weight == 0.0 && self.ratio != 0.0
    }

    /// Kueue's `CompareDRS`: lower is preferred for admission, higher for preemption.
    pub fn compare(&self, other: &Drs) -> Ordering {
        match (self.zero_weight_borrows(), other.zero_weight_borrows()) {
            (true, true) => self.ratio.total_cmp(&other.ratio),
            (true, false) => Ordering::Greater,
            (false, true) => Ordering::Less,
            (false, false) => self.share().total_cmp(&other.share()),
        }
    }
}

/// The node's DRS in `tree` as it stands; `weights` per tree node (queues, then cohorts).
pub fn drs(tree: &QuotaTree, weights: &[f64], node: usize) -> Drs {
    let mut drs = Drs { weight: weights[node], ratio: 0.0, borrowed: vec![] };
    let Some(parent) = tree.parent(node) else { return drs };
    for r in 0..tree.resources() {
        let borrowed = tree.usage(node, r) - tree.subtree(node, r);
        if borrowed <= 0 {
            continue;
        }
        drs.borrowed.push(r);
        let lendable = tree.potential_available(parent, r);
        if lendable > 0 {
            drs.ratio = drs.ratio.max(borrowed as f64 * 1000.0 / lendable as f64);
        }
    }
    drs
}

/// A head as the tournament sees it.
pub struct Head<'a> {
    pub queue: usize,
    pub key: Key,
    pub usage: &'a [i64],
}

/// Which of `heads` a fair-sharing cycle takes next (`fairSharingIterator.pop`): the first
/// head's cohort tree holds the tournament; a head of a queue without a cohort is taken as is.
/// `tree` is left as it was.
pub fn next_head(tree: &mut QuotaTree, weights: &[f64], heads: &[Head<'_>]) -> usize {
    let root = tree.root(heads[0].queue);
    if root == heads[0].queue {
        return 0;
    }
    // Each head's share at each cohort on its way up: that of the cohort's child it comes
    // through, with the head admitted (`computeDRS`).
    let mut shares: BTreeMap<(usize, usize), Drs> = BTreeMap::new();
    for (i, h) in heads.iter().enumerate() {
        if tree.root(h.queue) != root {
            continue;
        }
        tree.charge(h.queue, h.usage, true);
        let mut below = h.queue;
        for cohort in tree.ancestors(h.queue).collect::<Vec<_>>() {
            shares.insert((i, cohort), drs(tree, weights, below));
            below = cohort;
        }
        tree.charge(h.queue, h.usage, false);
    }
    let by_queue: BTreeMap<usize, usize> = heads.iter().enumerate().map(|(i, h)| (h.queue, i)).collect();
    let t = Tournament { tree, heads, shares: &shares, by_queue: &by_queue };
    t.winner(root).expect("the first head is in this tree")
}

struct Tournament<'a, 'b> {
    tree: &'a QuotaTree,
    heads: &'a [Head<'b>],
    shares: &'a BTreeMap<(usize, usize), Drs>,
    by_queue: &'a BTreeMap<usize, usize>,
}

impl Tournament<'_, '_> {
    /// `runTournament`: the head the cohort nominates, if any of its subtree has one.
    fn winner(&self, cohort: usize) -> Option<usize> {
        let from_cohorts = self.tree.child_cohorts(cohort).iter().filter_map(|&c| self.winner(c));
        let from_queues = self.tree.child_queues(cohort).iter().filter_map(|q| self.by_queue.get(q).copied());
        let nominees: Vec<usize> = from_cohorts.chain(from_queues).collect();
        let mut best = *nominees.first()?;
        for &current in &nominees[1..] {
            if self.less(current, best, cohort) {
                best = current;
            }
        }
        Some(best)
    }

    /// `entryComparer.less` at `cohort`.
    fn less(&self, a: usize, b: usize, cohort: usize) -> bool {
        let (da, db) = (&self.shares[&(a, cohort)], &self.shares[&(b, cohort)]);
        let (ha, hb) = (&self.heads[a], &self.heads[b]);
        let (ba, bb) = (da.borrowing_on(ha.usage), db.borrowing_on(hb.usage));
        if ba != bb {
            return !ba;
        }
        match da.compare(db) {
            Ordering::Equal => ha.key < hb.key,
            o => o == Ordering::Less,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::cmp::Reverse;

    use super::*;
    use crate::models::kueue::quota::ResourceQuota;
    use crate::scheduler::JobId;

    fn nominal(amounts: &[i64]) -> Vec<ResourceQuota> {
        amounts.iter().map(|&nominal| ResourceQuota { nominal, ..ResourceQuota::default() }).collect()
    }

    /// Kueue's `pkg/cache/scheduler/fair_sharing_test.go`, "usage above nominal": cq (cpu 2,
    /// gpu 5) and lending-cq (cpu 8, gpu 5) in one cohort; cq uses 3 cpu and 7 gpus. Its share is
    /// the gpu's (7-5)*1000/10 = 200 (the cpu's is 100); lending-cq's and the cohort's are 0.
    /// Amounts here in whole cpus.
    #[test]
    fn the_share_is_the_largest_borrowed_fraction_of_what_the_cohort_lends() {
        let mut t = QuotaTree::new(vec![(nominal(&[2, 5]), Some(0)), (nominal(&[8, 5]), Some(0))], &[None]);
        t.charge(0, &[3, 7], true);
        let weights = [1.0; 3];
        assert_eq!(drs(&t, &weights, 0).share(), 200.0);
        assert!(drs(&t, &weights, 0).borrowing());
        assert_eq!(drs(&t, &weights, 1).share(), 0.0);
        assert!(!drs(&t, &weights, 2).borrowing(), "a root cohort has no share");
    }

    /// The same file, "above nominal with integer weight": cq (gpu 5, weight 2) uses 7 of the
    /// cohort's 10: ((7-5)*1000/10)/2 = 100. "above nominal with zero weight": infinite, and
    /// above any finite share.
    #[test]
    fn the_weight_divides_the_share() {
        let mut t = QuotaTree::new(vec![(nominal(&[5]), Some(0)), (nominal(&[5]), Some(0))], &[None]);
        t.charge(0, &[7], true);
        assert_eq!(drs(&t, &[2.0, 1.0, 1.0], 0).share(), 100.0);
        let zero = drs(&t, &[0.0, 1.0, 1.0], 0);
        assert_eq!(zero.share(), f64::INFINITY);
        t.charge(1, &[1], true);
        assert_eq!(zero.compare(&drs(&t, &[1.0; 3], 0)), Ordering::Greater);
    }

    /// Hand-computed after `pkg/scheduler/fair_sharing_iterator.go`: two queues of nominal 4 in a cohort, a using 6 and b 2. With its 1-cpu head admitted,
    /// a would borrow 3 of 8 (375), b none: b's head goes first, though a's is older and of
    /// higher priority. Once b too borrows more, the lower share still wins.
    #[test]
    fn the_head_whose_queue_would_share_least_goes_first() {
        let mut t = QuotaTree::new(vec![(nominal(&[4]), Some(0)), (nominal(&[4]), Some(0))], &[None]);
        t.charge(0, &[6], true);
        t.charge(1, &[2], true);
        let one = [1];
        let heads = [
            Head { queue: 0, key: (Reverse(5), 10, JobId(0)), usage: &one },
            Head { queue: 1, key: (Reverse(0), 20, JobId(1)), usage: &one },
        ];
        assert_eq!(next_head(&mut t, &[1.0; 3], &heads), 1);
        assert_eq!(t.usage(0, 0), 6, "the tree is left as it was");
        // b at 7: with its head 8, borrowing 4 (500) against a's 375.
        t.charge(1, &[5], true);
        assert_eq!(next_head(&mut t, &[1.0; 3], &heads), 0);
    }
}
