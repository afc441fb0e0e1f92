//! Gang-aware preemption: whole groups are evicted, never single members against their will. The
//! candidates are lower-priority groups of the same queue and groups borrowing in the cohort tree
//! (reclaim, when the queue stands within quota below where their paths meet: `quota/reclaim.rs`,
//! or when the fair-share rule of `fair_share_preemption.rs` allows). When taking back the members that shrinkable elastic
//! candidates hold above their minimum is enough, only those are asked back (as in giving way:
//! the group starts once their pods are gone) and nothing starts over; otherwise the candidates
//! that let the group fit at the least cost (the least protected, then the least work lost, then
//! the fewest) are evicted and queued again at once, and the group is admitted. Every what-if runs
//! on the real graph and is undone.

use std::collections::{BTreeMap, BTreeSet};

use muster_graph::{GroupRequest, ImportedMember, MatchOutcome};

use super::Engine;
use super::cycle::Pass;
use super::placement::SavedAlloc;
use crate::config::{FairShareWithinCohort, WithinQueue};
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

/// What a preemption did for a group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Preemption {
    /// Victims evicted, the group admitted.
    Admitted,
    /// Members above their minimum asked back from shrinkable candidates; the group starts once
    /// their pods are gone.
    AskedBack,
    /// Nothing changed.
    None,
}

impl Engine {
    /// Makes room for `key` (as `req`) from lower-priority groups of the same queue and/or
    /// groups borrowing in the cohort: the surplus members of shrinkable ones when that is
    /// enough, else the fewest whole groups (then `key` is admitted). Spends one of the cycle's
    /// preemption attempts when there are candidates at all.
    pub(super) fn try_preempt(&mut self, key: &GroupKey, req: &GroupRequest, pass: &mut Pass<'_>) -> Preemption {
        // Members are already on their way out for it: wait for them rather than evict more.
        if self.leaving_for.as_ref() == Some(key) && !self.leaving.is_empty() {
            return Preemption::AskedBack;
        }
        let Some(cands) = self.preemption_candidates(key, req) else { return Preemption::None };
        pass.preempt_budget -= 1;
        if self.ask_back_surplus(key, req, &cands, pass.out) {
            return Preemption::AskedBack;
        }
        let Some(victims) = self.choose_victims(key, req, &cands) else { return Preemption::None };
        self.evict_and_admit(key, req, victims, pass.out);
        Preemption::Admitted
    }

    /// Asks back the members above their minimum of shrinkable candidates (best first, as few
    /// groups as do) when that alone lets `key` fit; false, with nothing changed, otherwise.
    /// One give-back at a time, as in giving way.
    fn ask_back_surplus(
        &mut self,
        key: &GroupKey,
        req: &GroupRequest,
        cands: &[Candidate],
        out: &mut Vec<Transition>,
    ) -> bool {
        if !self.leaving.is_empty() {
            return false;
        }
        let mut shrunk: Vec<(GroupKey, BTreeSet<u32>, SavedAlloc, bool)> = Vec::new();
        let mut fits = false;
        for c in cands {
            let Some(surplus) = self.shrinkable_surplus(&c.key) else { continue };
            let saved = self.shrink_out(&c.key, &surplus);
            shrunk.push((c.key.clone(), surplus, saved, c.reclaim));
            let out_so_far: Vec<(GroupKey, bool)> = shrunk.iter().map(|(k, _, _, r)| (k.clone(), *r)).collect();
            if self.fits_now(key, req) && self.reclaim_allowed(key, req, &out_so_far) {
                fits = true;
                break;
            }
        }
        // Of those members, only the ones on the nodes the group would take are needed.
        let nodes = if fits { self.nodes_it_would_take(key, req) } else { BTreeSet::new() };
        let mut asked = super::give_way::GiveBack::new();
        let mut there = super::give_way::GiveBack::new();
        let mut reclaims = Vec::new();
        for (k, surplus, saved, reclaim) in shrunk.into_iter().rev() {
            let on_nodes: BTreeSet<u32> = saved
                .members()
                .iter()
                .filter(|m| surplus.contains(&m.index) && nodes.contains(&m.node))
                .map(|m| m.index)
                .collect();
            let on_nodes = self.groups[&k].spec.request.with_whole_sets(on_nodes, surplus.iter().copied());
            self.unshrink(&k, saved);
            if !on_nodes.is_empty() {
                there.insert(k.clone(), on_nodes);
            }
            reclaims.push((k.clone(), reclaim));
            asked.insert(k, surplus);
        }
        if !fits {
            return false;
        }
        if self.enough_asked_back(key, req, &there, &reclaims) {
            asked = there;
        }
        for (k, members) in &asked {
            let rec = self.groups[k].allocation.clone();
            let reason = Reason::GivingWay { members: members.iter().copied().collect(), to: key.clone() };
            self.step(k, GroupState::Running, reason, rec, out);
        }
        self.last_stats.preemptions += asked.len();
        self.leaving = asked;
        self.leaving_for = Some(key.clone());
        true
    }

    /// The nodes `key` (as `req`) would take now, by name; changes nothing.
    fn nodes_it_would_take(&mut self, key: &GroupKey, req: &GroupRequest) -> BTreeSet<String> {
        let Some(r) = self.fitting_request(key, req) else { return BTreeSet::new() };
        self.last_stats.match_calls += 1;
        let MatchOutcome::Allocated(id) = self.graph.allocate_satisfiable(&r, self.now) else { return BTreeSet::new() };
        let g = &self.graph.graph;
        let nodes = self.graph.allocation(id).map(|a| a.members.iter().map(|m| g.node(m.node).name.clone()).collect());
        let _ = self.graph.cancel(id);
        nodes.unwrap_or_default()
    }

    /// Would `key` fit with just `asked` given back (`reclaims`: whether each group is reclaimed)?
    /// Changes nothing.
    fn enough_asked_back(
        &mut self,
        key: &GroupKey,
        req: &GroupRequest,
        asked: &super::give_way::GiveBack,
        reclaims: &[(GroupKey, bool)],
    ) -> bool {
        if asked.is_empty() {
            return false;
        }
        let saved: Vec<(GroupKey, SavedAlloc)> =
            asked.iter().map(|(k, m)| (k.clone(), self.shrink_out(k, m))).collect();
        let out: Vec<(GroupKey, bool)> = reclaims.iter().filter(|(k, _)| asked.contains_key(k)).cloned().collect();
        let ok = self.fits_now(key, req) && self.reclaim_allowed(key, req, &out);
        for (k, s) in saved.into_iter().rev() {
            self.unshrink(&k, s);
        }
        ok
    }

    /// The members group `k` holds above its minimum (`GroupRequest::surplus`), if it is
    /// shrinkable, runs ready and places no fixed number per node.
    fn shrinkable_surplus(&self, k: &GroupKey) -> Option<BTreeSet<u32>> {
        let g = &self.groups[k];
        let r = &g.spec.request;
        let usable = r.shrinkable
            && g.state == GroupState::Running
            && g.not_ready_since.is_none()
            && r.members_per_node.is_none();
        let surplus = r.surplus(g.member_indices());
        (usable && !surplus.is_empty()).then(|| surplus.into_iter().collect())
    }

    /// Takes `surplus` of group `k`'s members out of the graph and the quota, as if given back;
    /// [`Self::unshrink`] undoes it.
    fn shrink_out(&mut self, k: &GroupKey, surplus: &BTreeSet<u32>) -> SavedAlloc {
        let saved = self.take_out(k);
        let kept: Vec<ImportedMember> =
            saved.members().iter().filter(|m| !surplus.contains(&m.index)).cloned().collect();
        self.restore_partly(k, &saved, &kept);
        self.add_usage(k, kept.iter().map(|m| m.index), 1);
        saved
    }

    /// Undoes [`Self::shrink_out`].
    fn unshrink(&mut self, k: &GroupKey, saved: SavedAlloc) {
        let partial = self.graph_alloc.remove(k).expect("shrunk, still placed");
        self.by_graph_alloc.remove(&partial);
        let kept: Vec<u32> =
            self.graph.allocation(partial).map(|a| a.members.iter().map(|m| m.index).collect()).unwrap_or_default();
        let _ = self.graph.cancel(partial);
        self.add_usage(k, kept, -1);
        self.put_back(k, saved);
    }

    /// Who may be evicted for `key`, best first (at most 256); `None` if its queue does not
    /// preempt or nobody qualifies. Borrowers of the cohort qualify when the group's queue would
    /// stand within quota below where its path meets theirs (`quota::may_reclaim_from`), its own
    /// lower-priority candidates evicted, or when its queue preempts for fair share and their
    /// priority is one it may take from (whether a set of victims is allowed is checked on that
    /// set, `reclaim_allowed`).
    fn preemption_candidates(&mut self, key: &GroupKey, req: &GroupRequest) -> Option<Vec<Candidate>> {
        let g = &self.groups[key];
        let q = g.spec.queue.clone();
        let cfg = self.queue_cfg(&q).preemption;
        let fair = cfg.fair_share_within_cohort;
        if cfg.within_queue == WithinQueue::Never && !cfg.reclaim_within_cohort && fair == FairShareWithinCohort::Never
        {
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
        // Reclaim and fair share are decided with the queue's own lower-priority candidates out:
        // they may be evicted first.
        let saved: Vec<_> = own.iter().map(|k| (k.clone(), self.take_out(k))).collect();
        let standing = if cfg.reclaim_within_cohort {
            quota::reclaim_standing(&self.compiled, &self.usage, &q, &asks, req.min_members)
        } else {
            None
        };
        // Queues of the cohort whose share the group's queue would not pass by taking from them.
        let fair_share_queues: BTreeSet<String> = if fair == FairShareWithinCohort::Never {
            BTreeSet::new()
        } else {
            let in_cohort = self.compiled.queues.iter().filter(|(name, cq)| **name != q && cq.root_cohort == root);
            in_cohort.map(|(name, _)| name).filter(|vq| self.fair_share_may_take_from(key, req, vq)).cloned().collect()
        };
        for (k, s) in saved.into_iter().rev() {
            self.put_back(&k, s);
        }
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
        let fair_share_may_take = |v: &crate::group::Group| {
            fair_share_queues.contains(&v.spec.queue) && (fair == FairShareWithinCohort::Any || v.priority <= prio)
        };
        let mut cands: Vec<Candidate> = own.iter().map(|k| candidate(&self.groups[k], k, false)).collect();
        if root.is_some() {
            for k in self.live.iter().filter(|k| placed(self, k)) {
                let v = &self.groups[k];
                let reclaimable =
                    |level| quota::may_reclaim_from(&self.compiled, &self.usage, &q, level, &v.spec.queue, &asks);
                if (standing.is_some_and(reclaimable) || fair_share_may_take(v))
                    && v.spec.queue != q
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

    /// May `key` be admitted with the groups `out` evicted (and already taken out)? Taking from
    /// other queues is for a queue that reclaims and then stands within quota, the group counted,
    /// below where its path meets each victim's (`quota::reclaim_standing`), or else as the
    /// fair-share rule allows (`fair_share_allows`).
    fn reclaim_allowed(&self, key: &GroupKey, req: &GroupRequest, out: &[(GroupKey, bool)]) -> bool {
        let others: Vec<&GroupKey> = out.iter().filter(|(_, reclaim)| *reclaim).map(|(k, _)| k).collect();
        if others.is_empty() {
            return true;
        }
        let g = &self.groups[key];
        let q = &g.spec.queue;
        let asks = quota::Asks::of(&g.spec.request);
        let standing = if self.queue_cfg(q).preemption.reclaim_within_cohort {
            quota::reclaim_standing(&self.compiled, &self.usage, q, &asks, req.min_members)
        } else {
            None
        };
        // Each victim is checked as if taken last: its subtree must still borrow with it given
        // back, so that reclaim never takes a subtree below what it brings (Kueue checks each
        // candidate as it takes them, in its order).
        let reclaims = standing.is_some_and(|level| {
            others.iter().all(|v| {
                let vq = &self.groups[*v].spec.queue;
                let mut with_v = self.usage.clone();
                let held = with_v.entry(vq.clone()).or_default();
                for (r, a) in self.given_back(v) {
                    let e = held.entry(r).or_insert(0);
                    *e = e.saturating_add(a);
                }
                quota::may_reclaim_from(&self.compiled, &with_v, q, level, vq, &asks)
            })
        });
        reclaims || self.fair_share_allows(key, req, &others)
    }

    /// What group `v`, evicted or shrunk in a what-if, no longer counts against its quota.
    fn given_back(&self, v: &GroupKey) -> BTreeMap<String, u64> {
        let g = &self.groups[v];
        let kept: BTreeSet<u32> = self
            .graph_alloc
            .get(v)
            .and_then(|id| self.graph.allocation(*id).ok())
            .map(|a| a.members.iter().map(|m| m.index).collect())
            .unwrap_or_default();
        quota::members_asks(&g.spec.request, g.member_indices().into_iter().filter(|i| !kept.contains(i)))
    }

    /// The candidates whose eviction lets `key` fit at the least cost ([`eviction_cost`]), as (key,
    /// reclaim), already taken out of the graph and the quota; `None`, with everything put back,
    /// if all are not enough. The sets weighed: the best single candidate that is enough alone,
    /// and the candidates taken in order, and in [`own_queue_first`] order, until the group
    /// fits, less those it can do without.
    fn choose_victims(
        &mut self,
        key: &GroupKey,
        req: &GroupRequest,
        cands: &[Candidate],
    ) -> Option<Vec<(GroupKey, bool)>> {
        let single = cands.iter().take(64).find(|c| {
            let saved = self.take_out(&c.key);
            let ok = self.fits_now(key, req) && self.reclaim_allowed(key, req, &[(c.key.clone(), c.reclaim)]);
            self.put_back(&c.key, saved);
            ok
        });
        // The first candidate is the least costly set there is (`eviction_cost`): nothing to weigh.
        if let Some(c) = single.filter(|c| c.key == cands[0].key) {
            self.take_out(&c.key);
            return Some(vec![(c.key.clone(), c.reclaim)]);
        }
        // The sets to weigh, each found with everything else in place; on equal cost the earlier.
        let mut sets = Vec::new();
        let own_first = own_queue_first(cands);
        for order in std::iter::once(cands).chain(own_first.as_deref()) {
            if let Some(greedy) = self.greedy_victims(key, req, order) {
                sets.push(out_of(&greedy));
                for (vk, saved, _) in greedy.into_iter().rev() {
                    self.put_back(&vk, saved);
                }
            }
        }
        sets.extend(single.map(|c| vec![(c.key.clone(), c.reclaim)]));
        let best = sets.into_iter().min_by_key(|set| eviction_cost(cands, set))?;
        for (k, _) in &best {
            self.take_out(k);
        }
        Some(best)
    }

    /// Candidates taken out in order until `key` fits, then every one it can do without given
    /// back, latest taken first; `None`, with everything put back, if all are not enough.
    fn greedy_victims(
        &mut self,
        key: &GroupKey,
        req: &GroupRequest,
        cands: &[Candidate],
    ) -> Option<Vec<(GroupKey, SavedAlloc, bool)>> {
        // Take candidates away in order until the group fits...
        let mut removed: Vec<(GroupKey, SavedAlloc, bool)> = Vec::new();
        let mut fits = false;
        for c in cands {
            let saved = self.take_out(&c.key);
            // A borrower may stop borrowing as others of its subtree go: then it is passed over.
            if c.reclaim && !self.reclaim_allowed(key, req, &[(c.key.clone(), true)]) {
                self.put_back(&c.key, saved);
                continue;
            }
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
        for (i, (vk, mut saved, reclaim)) in removed.into_iter().enumerate().rev() {
            if i < last {
                self.put_back(&vk, saved);
                out.retain(|(k, _)| *k != vk);
                if self.fits_now(key, req) && self.reclaim_allowed(key, req, &out) {
                    continue;
                }
                saved = self.take_out(&vk);
                out.push((vk.clone(), reclaim));
            }
            victims.push((vk, saved, reclaim));
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
        let queue = self.groups[key].spec.queue.clone();
        for (vk, reclaim) in &victims {
            let rec = self.group_mut(vk).allocation.take();
            let g = self.group_mut(vk);
            g.reclaimed_for = reclaim.then(|| queue.clone());
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
        self.replan();
        let capped = self.fitting_request(key, req).expect("the fit was checked on the same state");
        self.last_stats.match_calls += 1;
        match self.graph.allocate_satisfiable(&capped, self.now) {
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
        if self.may_fit_now(self.shapes[key], &r).is_err() {
            return None;
        }
        self.last_stats.match_calls += 1;
        match self.graph.allocate_satisfiable(&r, self.now) {
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

/// What evicting `victims` costs, least first: the most protected of them (a group of the
/// preemptor's own queue rather than a borrower of another, then the higher priority), then the
/// work lost (member-seconds since admission: an evicted group starts over), then how many.
/// Fewer victims that lose more work would be the costlier choice: what an eviction throws away
/// is the work done.
fn eviction_cost(cands: &[Candidate], victims: &[(GroupKey, bool)]) -> ((bool, i32), u64, usize) {
    let of = |k: &GroupKey| cands.iter().find(|c| c.key == *k).expect("victims are candidates");
    let protected = victims.iter().map(|(k, _)| of(k)).map(|c| (c.not_borrower, c.priority)).max();
    let work = victims.iter().map(|(k, _)| of(k).work_done).fold(0u64, u64::saturating_add);
    (protected.unwrap_or((false, i32::MIN)), work, victims.len())
}

/// The candidates with those of the group's own queue first, when there are both kinds: a second
/// order for the greedy pass. Evicting its own lower-priority groups first lowers the queue's
/// share, which may be what lets a fair-share rule allow a victim of another queue (as Kueue
/// visits the preemptor's own queue first when its share, the group counted, is highest).
fn own_queue_first(cands: &[Candidate]) -> Option<Vec<Candidate>> {
    let (own, others): (Vec<Candidate>, Vec<Candidate>) = cands.iter().cloned().partition(|c| c.not_borrower);
    (!own.is_empty() && !others.is_empty()).then(|| own.into_iter().chain(others).collect())
}

/// The groups taken out so far, and whether each is reclaimed.
fn out_of(removed: &[(GroupKey, SavedAlloc, bool)]) -> Vec<(GroupKey, bool)> {
    removed.iter().map(|(k, _, reclaim)| (k.clone(), *reclaim)).collect()
}
