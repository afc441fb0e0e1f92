//! Gang-aware preemption: whole groups are evicted, never single members. The candidates are
//! lower-priority groups of the same queue and groups borrowing in the cohort (when the queue is
//! within its nominal quota); the fewest of them that let the group fit are evicted and queued
//! again at once, and the group is admitted. Every what-if runs on the real graph and is undone.

use muster_graph::{GroupRequest, MatchOutcome};

use super::Engine;
use super::cycle::Pass;
use super::placement::SavedAlloc;
use crate::config::WithinQueue;
use crate::group::{GroupKey, GroupState, Reason, Transition};
use crate::quota;

/// A group preemption may evict. Ordered best victim first: borrowers of other queues first, then
/// lowest priority, least work done so far (member-seconds since admission: an evicted group
/// starts over, so that is the work lost), most recently admitted, key.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Candidate {
    not_borrower: bool,
    priority: i32,
    work_done: u64,
    neg_admitted_at: i64,
    key: GroupKey,
    /// Reclaimed for the cohort (it borrows), rather than preempted within its queue.
    reclaim: bool,
}

impl Engine {
    /// Evicts whole lower-priority groups of the same queue and/or groups borrowing in the
    /// cohort, the fewest that let `key` (as `req`) fit, and admits `key`. False, with nothing
    /// changed, if no set of candidates makes room. Spends one of the cycle's preemption attempts
    /// when there are candidates at all.
    pub(super) fn try_preempt(&mut self, key: &GroupKey, req: &GroupRequest, pass: &mut Pass<'_>) -> bool {
        let Some(cands) = self.preemption_candidates(key, req) else { return false };
        pass.preempt_budget -= 1;
        let Some(victims) = self.choose_victims(key, req, &cands) else { return false };
        self.evict_and_admit(key, req, victims, pass.out);
        true
    }

    /// Who may be evicted for `key`, best first (at most 256); `None` if its queue does not
    /// preempt or nobody qualifies. Borrowers of the cohort qualify when the group's queue would
    /// be within its nominal quota with the group, its own lower-priority candidates evicted
    /// (whether a set of victims keeps it so is checked on that set, `reclaim_allowed`).
    fn preemption_candidates(&mut self, key: &GroupKey, req: &GroupRequest) -> Option<Vec<Candidate>> {
        let g = &self.groups[key];
        let q = g.spec.queue.clone();
        let cfg = self.queue_cfg(&q).preemption;
        if cfg.within_queue == WithinQueue::Never && !cfg.reclaim_within_cohort {
            return None;
        }
        let prio = g.priority;
        let asks = quota::Asks::of(&g.spec.request);
        let root = self.compiled.queues[&q].root_cohort.clone();
        let placed = |e: &Engine, k: &GroupKey| e.groups[k].state.holds_allocation() && e.graph_alloc.contains_key(k);
        let own: Vec<GroupKey> = self
            .live
            .iter()
            .filter(|k| placed(self, k) && self.groups[*k].spec.queue == q)
            .filter(|k| cfg.within_queue == WithinQueue::LowerPriority && self.groups[*k].priority < prio)
            .cloned()
            .collect();
        let can_reclaim = cfg.reclaim_within_cohort && root.is_some() && {
            let saved: Vec<_> = own.iter().map(|k| (k.clone(), self.take_out(k))).collect();
            let within = quota::within_nominal(&self.compiled, &self.usage, &q, &asks, req.min_members);
            for (k, s) in saved.into_iter().rev() {
                self.put_back(&k, s);
            }
            within
        };
        let candidate = |v: &crate::group::Group, k: &GroupKey, reclaim: bool| {
            let admitted_at = v.admitted_at.unwrap_or(self.now);
            Candidate {
                not_borrower: !reclaim,
                priority: v.priority,
                work_done: u64::from(v.member_count()) * self.now.saturating_sub(admitted_at).max(0) as u64,
                neg_admitted_at: -admitted_at,
                key: k.clone(),
                reclaim,
            }
        };
        let mut cands: Vec<Candidate> = own.iter().map(|k| candidate(&self.groups[k], k, false)).collect();
        if can_reclaim {
            for k in self.live.iter().filter(|k| placed(self, k)) {
                let v = &self.groups[k];
                if v.spec.queue != q
                    && self.compiled.queues[&v.spec.queue].root_cohort == root
                    && quota::borrows(&self.compiled, &self.usage, &v.spec.queue, &asks)
                {
                    cands.push(candidate(v, k, true));
                }
            }
        }
        if cands.is_empty() {
            return None;
        }
        cands.sort();
        cands.truncate(256);
        Some(cands)
    }

    /// May `key` be admitted with the groups `out` evicted (and already taken out)? Reclaiming
    /// from other queues is only for a queue that is then within its nominal quota, the group
    /// counted: a queue that borrows takes nothing back.
    fn reclaim_allowed(&self, key: &GroupKey, req: &GroupRequest, out: &[(GroupKey, bool)]) -> bool {
        let g = &self.groups[key];
        !out.iter().any(|(_, reclaim)| *reclaim)
            || quota::within_nominal(
                &self.compiled,
                &self.usage,
                &g.spec.queue,
                &quota::Asks::of(&g.spec.request),
                req.min_members,
            )
    }

    /// The fewest candidates whose eviction lets `key` fit, as (key, reclaim), already taken out
    /// of the graph and the quota; `None`, with everything put back, if all are not enough.
    fn choose_victims(
        &mut self,
        key: &GroupKey,
        req: &GroupRequest,
        cands: &[Candidate],
    ) -> Option<Vec<(GroupKey, bool)>> {
        // One victim is the smallest set: try each candidate alone first (best first).
        for c in cands.iter().take(64) {
            let saved = self.take_out(&c.key);
            let ok = self.fits_now(key, req) && self.reclaim_allowed(key, req, &[(c.key.clone(), c.reclaim)]);
            self.put_back(&c.key, saved);
            if ok {
                self.take_out(&c.key);
                return Some(vec![(c.key.clone(), c.reclaim)]);
            }
        }
        // Take candidates away in order until the group fits...
        let mut removed: Vec<(GroupKey, SavedAlloc, bool)> = Vec::new();
        let mut fits = false;
        for c in cands {
            let saved = self.take_out(&c.key);
            removed.push((c.key.clone(), saved, c.reclaim));
            if self.fits_now(key, req) && self.reclaim_allowed(key, req, &out_of(&removed)) {
                fits = true;
                break;
            }
        }
        if !fits {
            for (vk, saved, _) in removed.into_iter().rev() {
                self.put_back(&vk, saved);
            }
            return None;
        }
        // ...then give back every victim the group can do without, latest taken first.
        let mut out = out_of(&removed);
        let mut victims = Vec::new();
        let last = removed.len() - 1;
        for (i, (vk, saved, reclaim)) in removed.into_iter().enumerate().rev() {
            if i < last {
                self.put_back(&vk, saved);
                out.retain(|(k, _)| *k != vk);
                if self.fits_now(key, req) && self.reclaim_allowed(key, req, &out) {
                    continue;
                }
                self.take_out(&vk);
                out.push((vk.clone(), reclaim));
            }
            victims.push((vk, reclaim));
        }
        Some(victims)
    }

    /// Commits a preemption: evicts the victims (already out of the graph and quota), queues them
    /// again at once, and admits `key`.
    fn evict_and_admit(
        &mut self,
        key: &GroupKey,
        req: &GroupRequest,
        mut victims: Vec<(GroupKey, bool)>,
        out: &mut Vec<Transition>,
    ) {
        victims.sort();
        for (vk, reclaim) in &victims {
            let rec = self.group_mut(vk).allocation.take();
            let g = self.group_mut(vk);
            g.ready_members = 0;
            g.not_ready_since = None;
            g.admitted_at = None;
            g.evictions += 1;
            let reason =
                if *reclaim { Reason::Reclaimed { by: key.clone() } } else { Reason::Preempted { by: key.clone() } };
            self.step(vk, GroupState::Evicted, reason, rec, out);
            self.requeue_now(vk, out);
        }
        self.last_stats.preemptions += victims.len();
        self.dirty = true;
        let capped = self.fitting_request(key, req).expect("the fit was checked on the same state");
        self.last_stats.match_calls += 1;
        match self.graph.allocate(&capped, self.now) {
            MatchOutcome::Allocated(id) => {
                let victims = victims.into_iter().map(|(k, _)| k).collect();
                self.admit(key, id, Reason::AdmittedByPreemption { victims }, out);
            }
            _ => unreachable!("the fit was checked on the same state"),
        }
    }

    /// Would `key` (as `req`) fit now, quota and placement? Changes nothing.
    fn fits_now(&mut self, key: &GroupKey, req: &GroupRequest) -> bool {
        self.fitting_request(key, req).is_some()
    }

    /// `req` with its max capped by the quota now, if that fits now (quota and placement).
    fn fitting_request(&mut self, key: &GroupKey, req: &GroupRequest) -> Option<GroupRequest> {
        let g = &self.groups[key];
        let asks = quota::Asks::of(&g.spec.request);
        let (qmax, _) =
            quota::max_members(&self.compiled, &self.usage, &g.spec.queue, &asks, req.max_members, &|_, a| {
                a.to_string()
            });
        if qmax < req.min_members {
            return None;
        }
        let r = req.narrowed_to(qmax);
        if self.may_fit_now(&r).is_err() {
            return None;
        }
        self.last_stats.match_calls += 1;
        match self.graph.allocate(&r, self.now) {
            MatchOutcome::Allocated(id) => {
                let _ = self.graph.cancel(id);
                Some(r)
            }
            MatchOutcome::Reserved { id, .. } => {
                let _ = self.graph.cancel(id);
                None
            }
            _ => None,
        }
    }
}

/// The groups taken out so far, and whether each is reclaimed.
fn out_of(removed: &[(GroupKey, SavedAlloc, bool)]) -> Vec<(GroupKey, bool)> {
    removed.iter().map(|(k, _, reclaim)| (k.clone(), *reclaim)).collect()
}
