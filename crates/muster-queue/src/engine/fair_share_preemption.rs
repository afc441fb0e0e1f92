//! Fair-share preemption between borrowing queues of a cohort (`fairShareWithinCohort`): the rule
//! a set of victims must keep. The victims are chosen by preemption's one path (`preemption.rs`).
//!
//! A queue's share here is its current use above nominal (`quota::borrowed_share`) divided by its
//! weight, not the decayed history the cycle orders by: an eviction must be judged on what the
//! queues hold now, or a queue that borrowed much yesterday would lose groups today while holding
//! less than the preemptor, and the check could flip back and forth as the history decays.

use std::collections::{BTreeMap, BTreeSet};

use muster_graph::GroupRequest;

use super::Engine;
use crate::config::FairShareWithinCohort;
use crate::group::GroupKey;
use crate::quota;

/// Evictions compare shares computed the same way on different queues; two shares that are
/// equal in exact arithmetic may differ in the last bits.
const SHARE_TOLERANCE: f64 = 1e-9;

impl Engine {
    /// May `key` (as `req`, counted with its minimum members) take the room of the groups `out`
    /// of other queues (already taken out of the quota, wholly or in part)? Only if its queue may
    /// preempt for fair share, every victim's priority is one it may take from, every victim's
    /// queue keeps at least its nominal of each resource it borrowed, and for each victim queue
    /// one of the queue's strategies holds: the preemptor's queue ends with a share at most that
    /// queue's share without its victims (LessThanOrEqualToFinalShare), or below its share before
    /// when it gives one group only (LessThanInitialShare; as Kueue's second strategy, which
    /// takes at most one workload from each queue).
    pub(super) fn fair_share_allows(&self, key: &GroupKey, req: &GroupRequest, out: &[&GroupKey]) -> bool {
        let g = &self.groups[key];
        let q = g.spec.queue.as_str();
        let rule = self.queue_cfg(q).preemption.fair_share_within_cohort;
        if rule == FairShareWithinCohort::Never {
            return false;
        }
        if rule == FairShareWithinCohort::LowerOrEqualPriority
            && out.iter().any(|k| self.groups[*k].priority > g.priority)
        {
            return false;
        }
        let taken = self.taken_by_queue(out);
        if taken.iter().any(|(vq, amounts)| !self.keeps_nominal(vq, amounts)) {
            return false;
        }
        let own = self.share_with(key, req);
        let strategies = self.queue_cfg(q).preemption.fair_share_strategies;
        taken.iter().all(|(vq, amounts)| {
            let lone_victim = || out.iter().filter(|k| self.groups[**k].spec.queue == *vq).count() == 1;
            (strategies.final_share && own <= self.share_now(vq) + SHARE_TOLERANCE)
                || (strategies.initial_share && lone_victim() && own + SHARE_TOLERANCE < self.share_before(vq, amounts))
        })
    }

    /// Could `key` (as `req`) take anything from queue `victim_queue` for fair share? Not if its
    /// queue's share with the group is above that queue's now: evictions only lower it. A cheap
    /// test that keeps hopeless candidates out of the search for victims.
    pub(super) fn fair_share_may_take_from(&self, key: &GroupKey, req: &GroupRequest, victim_queue: &str) -> bool {
        self.share_with(key, req) <= self.share_now(victim_queue) + SHARE_TOLERANCE
    }

    /// The borrowed share of `key`'s queue with the group (its minimum members) admitted.
    fn share_with(&self, key: &GroupKey, req: &GroupRequest) -> f64 {
        let g = &self.groups[key];
        let q = g.spec.queue.as_str();
        let with_group: BTreeMap<String, u64> =
            quota::Asks::of(&g.spec.request).with(req.min_members).into_iter().collect();
        self.borrowed_share(q, &|r| {
            quota::used(&self.usage, q, r).saturating_add(with_group.get(r).copied().unwrap_or(0))
        })
    }

    /// The borrowed share of queue `q` now.
    fn share_now(&self, q: &str) -> f64 {
        self.borrowed_share(q, &|r| quota::used(&self.usage, q, r))
    }

    /// The borrowed share of queue `q` with `taken` counted back in: before its victims left.
    fn share_before(&self, q: &str, taken: &BTreeMap<String, u64>) -> f64 {
        self.borrowed_share(q, &|r| quota::used(&self.usage, q, r).saturating_add(taken.get(r).copied().unwrap_or(0)))
    }

    /// What the groups `out` no longer count against their queues' quota (the members they hold
    /// out of the graph), by queue and resource.
    fn taken_by_queue(&self, out: &[&GroupKey]) -> BTreeMap<String, BTreeMap<String, u64>> {
        let mut taken: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
        for k in out {
            let v = &self.groups[*k];
            let kept: BTreeSet<u32> = self
                .graph_alloc
                .get(*k)
                .and_then(|id| self.graph.allocation(*id).ok())
                .map(|a| a.members.iter().map(|m| m.index).collect())
                .unwrap_or_default();
            let gone = v.member_indices().into_iter().filter(|i| !kept.contains(i));
            let sum = taken.entry(v.spec.queue.clone()).or_default();
            for (r, a) in quota::members_asks(&v.spec.request, gone) {
                *sum.entry(r).or_default() += a;
            }
        }
        taken
    }

    /// Does queue `q`, with `taken` out, still hold at least its nominal of every resource it held
    /// more of before?
    fn keeps_nominal(&self, q: &str, taken: &BTreeMap<String, u64>) -> bool {
        self.compiled.queues[q].quotas.iter().all(|(r, quota)| {
            let now = quota::used(&self.usage, q, r);
            let before = now.saturating_add(taken.get(r).copied().unwrap_or(0));
            before <= quota.nominal || now >= quota.nominal
        })
    }

    /// Queue `q`'s share of the cluster above its nominal quotas with use `used`, divided by its
    /// fair-share weight.
    fn borrowed_share(&self, q: &str, used: &dyn Fn(&str) -> u64) -> f64 {
        let (cap, _) = self.graph.graph.totals();
        let resources = &self.graph.graph.resources;
        let capacity = |r: &str| resources.get(r).map_or(0, |id| cap[id.index()]);
        quota::borrowed_share(&self.compiled, q, used, &capacity) / self.queue_cfg(q).fair_share_weight
    }
}
