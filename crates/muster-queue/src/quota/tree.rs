//! Quota over a cohort tree, one resource at a time. Queues are the leaves; every node (queue or
//! cohort) brings its nominal quota and lends what it does not keep to its parent, and each may
//! take from its parent what the tree above has unused, capped by its borrowing limit. This is
//! the hierarchy Kueue's Cohorts and KAI's queues give: a team borrows first what its department
//! has idle, and a department takes from the organisation no more than its limit. Without cohort
//! quotas or limits the tree is one pool per root, as a flat cohort is.
//!
//! A node *keeps* its subtree quota minus its lending limit (nothing without one); what it uses
//! beyond that is drawn from its parent, and a cohort's usage is what its children draw from it.

use super::{Usage, used};
use crate::config::{Compiled, Quota};

/// A queue (a leaf) or a cohort.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Node<'a> {
    Queue(&'a str),
    Cohort(&'a str),
}

/// What bounds how much a node may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Bound<'a> {
    /// A queue in no cohort: its nominal.
    Nominal,
    /// The root cohort's unused quota: it has `left` to lend.
    Pool { cohort: &'a str, left: u64 },
    /// The node's borrowing limit.
    BorrowingLimit(Node<'a>),
}

/// The quota figures of one node.
#[derive(Debug, Clone, Copy)]
struct Figures {
    /// Its nominal plus what its children lend.
    subtree: u64,
    /// The part of `subtree` it does not lend.
    kept: u64,
    /// A queue's usage; a cohort's, what its children draw beyond what they keep.
    usage: u64,
}

impl Figures {
    /// What the node draws from its parent.
    fn drawn(&self) -> u64 {
        self.usage.saturating_sub(self.kept)
    }

    /// What it lends its parent.
    fn lent(&self) -> u64 {
        self.subtree - self.kept
    }
}

/// The cohort trees' quotas of resource `r` with `usage` as it is.
pub(super) struct ResourceTree<'a> {
    pub compiled: &'a Compiled,
    pub usage: &'a Usage,
    pub r: &'a str,
}

impl<'a> ResourceTree<'a> {
    fn quota(&self, n: Node<'_>) -> Option<&'a Quota> {
        match n {
            Node::Queue(q) => self.compiled.queues[q].quotas.get(self.r),
            Node::Cohort(c) => self.compiled.cohorts[c].quotas.get(self.r),
        }
    }

    fn parent(&self, n: Node<'_>) -> Option<Node<'a>> {
        let p = match n {
            Node::Queue(q) => self.compiled.queues[q].cohort.as_deref(),
            Node::Cohort(c) => self.compiled.cohorts[c].parent.as_deref(),
        };
        p.map(Node::Cohort)
    }

    fn figures(&self, n: Node<'_>) -> Figures {
        let quota = self.quota(n);
        let nominal = quota.map_or(0, |q| q.nominal);
        let (subtree, usage) = match n {
            // A queue without a quota of the resource is not limited by it, and draws nothing.
            Node::Queue(q) => (nominal, quota.map_or(0, |_| used(self.usage, q, self.r))),
            Node::Cohort(c) => {
                let cohort = &self.compiled.cohorts[c];
                let children = cohort.child_queues.iter().map(|q| Node::Queue(q));
                let children = children.chain(cohort.child_cohorts.iter().map(|c| Node::Cohort(c)));
                children
                    .map(|child| self.figures(child))
                    .fold((nominal, 0u64), |(s, u), f| (s.saturating_add(f.lent()), u.saturating_add(f.drawn())))
            }
        };
        let kept = quota.and_then(|q| q.lending_limit).map_or(0, |l| subtree.saturating_sub(l));
        Figures { subtree, kept, usage }
    }

    /// How much more node `n` may take now (its own unused part and what the tree above lets it
    /// draw), and what bounds it.
    pub fn available(&self, n: Node<'a>) -> (u64, Bound<'a>) {
        let f = self.figures(n);
        let Some(parent) = self.parent(n) else {
            let bound = match n {
                Node::Queue(_) => Bound::Nominal,
                Node::Cohort(cohort) => Bound::Pool { cohort, left: f.subtree.saturating_sub(f.usage) },
            };
            return (f.subtree.saturating_sub(f.usage), bound);
        };
        let own = f.kept.saturating_sub(f.usage);
        let (mut above, mut bound) = self.available(parent);
        if let Some(limit) = self.quota(n).and_then(|q| q.borrowing_limit) {
            let cap = f.lent().saturating_add(limit).saturating_sub(f.drawn());
            if cap < above {
                (above, bound) = (cap, Bound::BorrowingLimit(n));
            }
        }
        (own.saturating_add(above), bound)
    }

    /// The first node (queue or cohort) that draws more from its parent than it lends plus its
    /// borrowing limit, or a root cohort whose usage is above its subtree quota; None when the
    /// tree holds.
    pub fn breach(&self) -> Option<String> {
        let nodes = self.compiled.queues.keys().map(|q| Node::Queue(q));
        let nodes = nodes.chain(self.compiled.cohorts.keys().map(|c| Node::Cohort(c)));
        for n in nodes {
            let f = self.figures(n);
            let limit = match (self.parent(n), self.quota(n)) {
                (None, _) if matches!(n, Node::Queue(_)) => continue,
                (None, _) => f.subtree,
                (Some(_), Some(Quota { borrowing_limit: Some(b), .. })) => f.lent().saturating_add(*b),
                (Some(_), _) => continue,
            };
            let drawn = if self.parent(n).is_some() { f.drawn() } else { f.usage };
            if drawn > limit {
                return Some(format!("{} draws {drawn} {} from above, more than its limit {limit}", name(n), self.r));
            }
        }
        None
    }
}

/// How the reason names a node.
pub(super) fn name(n: Node<'_>) -> String {
    match n {
        Node::Queue(q) => format!("queue {q}"),
        Node::Cohort(c) => format!("cohort {c}"),
    }
}
