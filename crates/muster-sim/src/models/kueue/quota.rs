//! Kueue's quota tree: ClusterQueues as leaves, Cohorts (v1beta1, `parentName`) above them, each
//! node with its subtree quota and the usage that counts against it, as Kueue v0.19.2 keeps them
//! in `pkg/cache/scheduler/resource_node.go` (`available`, `potentialAvailable`, `addUsage`,
//! `removeUsage`, `QuantitiesFitInQuota`), `clusterqueue_snapshot.go` and `cohort_snapshot.go`.
//! A ClusterQueue's usage above what it keeps for itself (its nominal minus its lendingLimit) is
//! stored in its parent, and so on up: what a queue may borrow is what the tree above has unused
//! and lendable, capped by its borrowingLimit. A Cohort's own quota (its resourceGroups: nominal,
//! borrowingLimit, lendingLimit) counts the same way at its level. Amounts are per covered
//! resource, in base units.

/// One ClusterQueue's quota of one resource (Kueue's `ResourceQuota`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ResourceQuota {
    pub nominal: i64,
    pub borrowing_limit: Option<i64>,
    pub lending_limit: Option<i64>,
}

#[derive(Debug, Clone)]
struct Node {
    parent: Option<usize>,
    /// Per resource; a cohort without a quota of a resource has the default (0, no limits).
    quota: Vec<ResourceQuota>,
    /// Kueue's `SubtreeQuota`: the node's nominal plus what its children lend.
    subtree: Vec<i64>,
    /// Kueue's `Usage`: a ClusterQueue's own usage; a cohort's, its children's usage past what
    /// they keep for themselves.
    usage: Vec<i64>,
    child_cohorts: Vec<usize>,
    child_queues: Vec<usize>,
}

/// The tree; nodes `0..queues` are the ClusterQueues, the rest cohorts.
#[derive(Debug, Clone)]
pub struct QuotaTree {
    nodes: Vec<Node>,
    queues: usize,
}

impl QuotaTree {
    /// `queues`: each ClusterQueue's quotas and parent cohort; `cohorts`: each cohort's parent
    /// (cohort indices count from 0 here; parents are cohort indices). The cohorts hold no quota.
    pub fn new(queues: Vec<(Vec<ResourceQuota>, Option<usize>)>, cohorts: &[Option<usize>]) -> Self {
        let resources = queues.first().map_or(0, |(q, _)| q.len());
        let cohorts: Vec<_> = cohorts.iter().map(|p| (vec![ResourceQuota::default(); resources], *p)).collect();
        Self::with_cohort_quotas(queues, cohorts)
    }

    /// As [`QuotaTree::new`], with each cohort's own quotas beside its parent.
    pub fn with_cohort_quotas(
        queues: Vec<(Vec<ResourceQuota>, Option<usize>)>,
        cohorts: Vec<(Vec<ResourceQuota>, Option<usize>)>,
    ) -> Self {
        let n = queues.len();
        let resources = queues.first().map_or(0, |(q, _)| q.len());
        let node = |(quota, parent): (Vec<ResourceQuota>, Option<usize>)| Node {
            parent: parent.map(|c| n + c),
            subtree: quota.iter().map(|q| q.nominal).collect(),
            quota,
            usage: vec![0; resources],
            child_cohorts: vec![],
            child_queues: vec![],
        };
        let mut nodes: Vec<Node> = queues.into_iter().chain(cohorts).map(node).collect();
        for i in 0..nodes.len() {
            if let Some(p) = nodes[i].parent {
                if i < n { nodes[p].child_queues.push(i) } else { nodes[p].child_cohorts.push(i) }
            }
        }
        let mut tree = QuotaTree { nodes, queues: n };
        for c in n..tree.nodes.len() {
            if tree.nodes[c].parent.is_none() {
                tree.accumulate(c);
            }
        }
        tree
    }

    /// `updateCohortResourceNode`: a cohort's subtree quota is what its children lend.
    fn accumulate(&mut self, cohort: usize) {
        let children: Vec<usize> =
            self.nodes[cohort].child_cohorts.iter().chain(&self.nodes[cohort].child_queues).copied().collect();
        for &c in &children {
            if c >= self.queues {
                self.accumulate(c);
            }
        }
        for r in 0..self.nodes[cohort].subtree.len() {
            let lent: i64 = children.iter().map(|&c| self.nodes[c].subtree[r] - self.local_quota(c, r)).sum();
            self.nodes[cohort].subtree[r] += lent;
        }
    }

    pub fn parent(&self, node: usize) -> Option<usize> {
        self.nodes[node].parent
    }

    /// The node's ancestors, its parent first.
    pub fn ancestors(&self, node: usize) -> impl Iterator<Item = usize> + '_ {
        std::iter::successors(self.parent(node), |&c| self.parent(c))
    }

    pub fn child_cohorts(&self, cohort: usize) -> &[usize] {
        &self.nodes[cohort].child_cohorts
    }

    pub fn child_queues(&self, cohort: usize) -> &[usize] {
        &self.nodes[cohort].child_queues
    }

    pub fn quota(&self, queue: usize, r: usize) -> ResourceQuota {
        self.nodes[queue].quota[r]
    }

    pub fn usage(&self, node: usize, r: usize) -> i64 {
        self.nodes[node].usage[r]
    }

    /// Kueue's `SubtreeQuota`: a queue's nominal; a cohort's, what its children lend.
    pub fn subtree(&self, node: usize, r: usize) -> i64 {
        self.nodes[node].subtree[r]
    }

    /// How many resources each node counts.
    pub fn resources(&self) -> usize {
        self.nodes.first().map_or(0, |n| n.subtree.len())
    }

    /// The top of the node's cohort tree (the node itself without a parent).
    pub fn root(&self, node: usize) -> usize {
        self.ancestors(node).last().unwrap_or(node)
    }

    /// What the node keeps for itself: its subtree quota minus its lendingLimit (0 without one).
    fn local_quota(&self, node: usize, r: usize) -> i64 {
        let n = &self.nodes[node];
        n.quota[r].lending_limit.map_or(0, |l| (n.subtree[r] - l).max(0))
    }

    fn local_available(&self, node: usize, r: usize) -> i64 {
        (self.local_quota(node, r) - self.nodes[node].usage[r]).max(0)
    }

    /// `available`: unused quota the node may take now, its own and borrowed (negative when the
    /// tree above is in debt).
    fn raw_available(&self, node: usize, r: usize) -> i64 {
        let n = &self.nodes[node];
        let Some(parent) = n.parent else { return n.subtree[r] - n.usage[r] };
        let mut from_parent = self.raw_available(parent, r);
        if let Some(limit) = n.quota[r].borrowing_limit {
            let lq = self.local_quota(node, r);
            let stored_in_parent = n.subtree[r] - lq;
            let used_in_parent = (n.usage[r] - lq).max(0);
            from_parent = from_parent.min(stored_in_parent - used_in_parent + limit);
        }
        self.local_available(node, r) + from_parent
    }

    /// `ClusterQueueSnapshot.Available`.
    pub fn available(&self, queue: usize, r: usize) -> i64 {
        self.raw_available(queue, r).max(0)
    }

    /// `potentialAvailable`: the most the node could ever take, the whole tree idle.
    pub fn potential_available(&self, node: usize, r: usize) -> i64 {
        let n = &self.nodes[node];
        let Some(parent) = n.parent else { return n.subtree[r] };
        let avail = self.local_quota(node, r) + self.potential_available(parent, r);
        match n.quota[r].borrowing_limit {
            Some(limit) => avail.min(n.subtree[r] + limit),
            None => avail,
        }
    }

    pub fn add_usage(&mut self, node: usize, r: usize, val: i64) {
        let local = self.local_available(node, r);
        self.nodes[node].usage[r] += val;
        if let Some(parent) = self.nodes[node].parent
            && val > local
        {
            self.add_usage(parent, r, val - local);
        }
    }

    pub fn remove_usage(&mut self, node: usize, r: usize, val: i64) {
        let stored_in_parent = self.nodes[node].usage[r] - self.local_quota(node, r);
        self.nodes[node].usage[r] -= val;
        if let Some(parent) = self.nodes[node].parent
            && stored_in_parent > 0
        {
            self.remove_usage(parent, r, val.min(stored_in_parent));
        }
    }

    /// Adds (or removes) a workload's usage, every resource it asks for.
    pub fn charge(&mut self, queue: usize, usage: &[i64], add: bool) {
        for (r, &v) in usage.iter().enumerate().filter(|(_, v)| **v > 0) {
            if add { self.add_usage(queue, r, v) } else { self.remove_usage(queue, r, v) }
        }
    }

    /// `BorrowingWith`: whether the node would use more than its subtree quota (a queue's, its
    /// nominal) with `val` more.
    pub fn borrowing_with(&self, node: usize, r: usize, val: i64) -> bool {
        self.nodes[node].subtree[r] < self.nodes[node].usage[r] + val
    }

    /// `IsWithinNominalInResources` over `resources`.
    pub fn within_nominal(&self, node: usize, resources: &[usize]) -> bool {
        resources.iter().all(|&r| self.nodes[node].subtree[r] >= self.nodes[node].usage[r])
    }

    /// `QuantitiesFitInQuota`: whether `requests` fit the node's subtree quota, and what of them
    /// its own unused quota cannot cover.
    pub fn fits_in_quota(&self, node: usize, requests: &[i64]) -> (bool, Vec<i64>) {
        let mut fits = true;
        let mut remaining = vec![0; requests.len()];
        for (r, &v) in requests.iter().enumerate().filter(|(_, v)| **v > 0) {
            fits &= self.nodes[node].subtree[r] >= self.nodes[node].usage[r] + v;
            remaining[r] = (v - self.local_available(node, r)).max(0);
        }
        (fits, remaining)
    }

    /// `getNodeHeight`: the distance from the cohort to its furthest leaf.
    fn height(&self, cohort: usize) -> u32 {
        let n = &self.nodes[cohort];
        let own = u32::from(!n.child_cohorts.is_empty() || !n.child_queues.is_empty());
        n.child_cohorts.iter().map(|&c| self.height(c) + 1).fold(own, u32::max)
    }

    /// `FindHeightOfLowestSubtreeThatFits`: how far up the tree the queue must borrow `val` more
    /// (0: within its nominal), and whether that subtree is below the root (then the queue may
    /// reclaim within it).
    pub fn borrowing_height(&self, queue: usize, r: usize, val: i64) -> (u32, bool) {
        let Some(parent) = self.parent(queue) else { return (0, false) };
        if !self.borrowing_with(queue, r, val) {
            return (0, true);
        }
        let mut remaining = val - self.local_available(queue, r);
        for node in self.ancestors(queue) {
            if !self.borrowing_with(node, r, remaining) {
                return (self.height(node), self.parent(node).is_some());
            }
            remaining -= self.local_available(node, r);
        }
        let root = self.ancestors(parent).last().unwrap_or(parent);
        (self.height(root), false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(nominal: i64, borrowing_limit: Option<i64>, lending_limit: Option<i64>) -> Vec<ResourceQuota> {
        vec![ResourceQuota { nominal, borrowing_limit, lending_limit }]
    }

    #[test]
    fn a_queue_borrows_what_the_cohort_lends_within_its_borrowing_limit() {
        // a: 4 (borrowingLimit 2), b: 8 (lendingLimit 3), c: 4, all in one cohort.
        let t = QuotaTree::new(
            vec![(q(4, Some(2), None), Some(0)), (q(8, None, Some(3)), Some(0)), (q(4, None, None), Some(0))],
            &[None],
        );
        assert_eq!(t.available(0, 0), 6);
        assert_eq!(t.available(1, 0), 8 + 4 + 4);
        assert_eq!(t.available(2, 0), 4 + 4 + 3);
        assert_eq!(t.potential_available(0, 0), 6);
    }

    #[test]
    fn usage_past_what_a_queue_keeps_is_stored_in_its_cohort() {
        let mut t = QuotaTree::new(vec![(q(8, None, Some(3)), Some(0)), (q(4, None, None), Some(0))], &[None]);
        t.add_usage(0, 0, 6);
        // b keeps 5 for itself; 1 more came from the cohort.
        assert_eq!(t.usage(2, 0), 1);
        assert_eq!(t.available(1, 0), 4 + 2);
        t.remove_usage(0, 0, 6);
        assert_eq!(t.usage(2, 0), 0);
        assert_eq!(t.available(1, 0), 7);
    }

    #[test]
    fn borrowing_height_counts_the_cohorts_climbed() {
        // a in team, team in dept with b.
        let mut t = QuotaTree::new(vec![(q(4, None, None), Some(0)), (q(4, None, None), Some(1))], &[Some(1), None]);
        assert_eq!(t.borrowing_height(0, 0, 4), (0, true));
        // team (height 1) holds only a's quota: more comes from dept (height 2).
        assert_eq!(t.borrowing_height(0, 0, 6), (2, false));
        // Once a uses 6, its team is past its quota and the department is not.
        t.add_usage(0, 0, 6);
        assert!(!t.within_nominal(2, &[0]));
        assert!(t.within_nominal(3, &[0]));
        assert_eq!(t.available(1, 0), 2);
    }
}
