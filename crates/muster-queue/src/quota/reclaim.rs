//! Reclaim over a cohort tree: who may take quota back from whom. A group's queue stands within
//! quota at the nearest node of its path (itself, its cohort, that cohort's parent, ...) whose
//! guarantee covers the group: the queue's own nominal, then the unused own nominals of the
//! cohorts above it, shared by every queue below them. It may reclaim from a borrowing queue
//! whose path meets its own above that node, and only when that queue and every cohort on its
//! path below the meeting point use more than their subtrees bring (every nominal in them): quota
//! a department holds within its guarantee is not taken for another department. The shape is
//! Kueue's for hierarchical cohorts (`hierarchical_preemption.go`, `candidate_generator.go`), with
//! one difference: Kueue also counts the idle nominal of the queue's siblings as its guarantee,
//! so a team past its own nominal may evict another department's work to take a teammate's idle
//! quota; here that quota is the teammate's, which gets it back when it returns. A flat cohort
//! reduces to "the queue stays within its nominal, the victim's queue borrows".
//!
//! A queue without a quota of a resource is neither limited by it nor counted in its cohorts'
//! use of it, as elsewhere in the quota arithmetic.

use super::{Asks, Usage, used};
use crate::config::Compiled;

/// The cohorts above queue `q`, nearest first.
fn path<'a>(compiled: &'a Compiled, q: &str) -> Vec<&'a str> {
    let mut out = Vec::new();
    let mut at = compiled.queues[q].cohort.as_deref();
    while let Some(c) = at {
        out.push(c);
        at = compiled.cohorts[c].parent.as_deref();
    }
    out
}

/// What cohort `c`'s subtree brings of `r` (every nominal in it) and what its queues use of it.
fn subtree(compiled: &Compiled, usage: &Usage, c: &str, r: &str) -> (u64, u64) {
    let cohort = &compiled.cohorts[c];
    let mut brings = cohort.quotas.get(r).map_or(0, |q| q.nominal);
    let mut uses = 0u64;
    for q in &cohort.child_queues {
        if let Some(quota) = compiled.queues[q].quotas.get(r) {
            brings = brings.saturating_add(quota.nominal);
            uses = uses.saturating_add(used(usage, q, r));
        }
    }
    for child in &cohort.child_cohorts {
        let (b, u) = subtree(compiled, usage, child, r);
        brings = brings.saturating_add(b);
        uses = uses.saturating_add(u);
    }
    (brings, uses)
}

/// The unused part of cohort `c`'s own nominal of `r`: what its children do not draw from it by
/// using more than their subtrees bring.
fn own_unused(compiled: &Compiled, usage: &Usage, c: &str, r: &str) -> u64 {
    let cohort = &compiled.cohorts[c];
    let own = cohort.quotas.get(r).map_or(0, |q| q.nominal);
    let queues = cohort
        .child_queues
        .iter()
        .filter_map(|q| compiled.queues[q].quotas.get(r).map(|quota| used(usage, q, r).saturating_sub(quota.nominal)));
    let cohorts = cohort.child_cohorts.iter().map(|child| {
        let (brings, uses) = subtree(compiled, usage, child, r);
        uses.saturating_sub(brings)
    });
    own.saturating_sub(queues.chain(cohorts).sum())
}

/// The nearest level of queue `q`'s path where `members` more of the group are guaranteed: 0 when
/// the queue stays within its nominal, k when what its nominal leaves uncovered fits in the
/// unused own nominals of the first k cohorts above it (a cohort's own quota is shared by every
/// queue below it; a sibling's idle nominal is not: that is the sibling's, lent). None when no
/// level covers it.
pub fn reclaim_standing(compiled: &Compiled, usage: &Usage, q: &str, asks: &Asks, members: u32) -> Option<usize> {
    let quotas = &compiled.queues[q].quotas;
    // Per resource the queue has a quota of: what its own unused nominal does not cover.
    let mut need: Vec<(String, u64)> = asks
        .with(members)
        .into_iter()
        .filter_map(|(r, a)| {
            let quota = quotas.get(&r)?;
            Some((r.clone(), a.saturating_sub(quota.nominal.saturating_sub(used(usage, q, &r)))))
        })
        .collect();
    for (level, c) in std::iter::once(None).chain(path(compiled, q).into_iter().map(Some)).enumerate() {
        if let Some(c) = c {
            for (r, n) in &mut need {
                *n = n.saturating_sub(own_unused(compiled, usage, c, r));
            }
        }
        if need.iter().all(|(_, n)| *n == 0) {
            return Some(level);
        }
    }
    None
}

/// Whether queue `q`, standing within quota at `level` (as [`reclaim_standing`] counts levels),
/// may reclaim what a group of queue `v` holds: their paths meet above `level`, and `v` and every
/// cohort on its path below the meeting point use more than they bring of a resource the group
/// asks.
pub fn may_reclaim_from(compiled: &Compiled, usage: &Usage, q: &str, level: usize, v: &str, asks: &Asks) -> bool {
    let (ours, theirs) = (path(compiled, q), path(compiled, v));
    // The meeting cohort's level on q's path (its cohorts count from 1); none: different trees.
    let Some(meet) = ours.iter().position(|c| theirs.contains(c)) else { return false };
    if meet < level || !super::borrows(compiled, usage, v, asks) {
        return false;
    }
    theirs.iter().take_while(|c| **c != ours[meet]).all(|c| {
        asks.resources().any(|r| {
            let (brings, uses) = subtree(compiled, usage, c, r);
            compiled.queues[v].quotas.contains_key(r) && uses > brings
        })
    })
}
