//! Kueue's scheduling cycle (Kueue v0.19.2: `pkg/scheduler/scheduler.go` `schedule`, `nominate`,
//! `processEntry`, `makeClassicalIterator`; the quota part of
//! `pkg/scheduler/flavorassigner/flavorassigner.go` `fitsResourceQuota`). Each cycle takes the
//! head of every ClusterQueue and assigns it against a snapshot of the quota tree: it fits, it
//! could fit by preempting (Kueue's preemption oracle, resource by resource), or it cannot. Heads
//! are then taken in Kueue's order — those within their nominal quota before those borrowing (by
//! how high in the cohort tree they borrow), then higher priority, then earlier queue timestamp —
//! and each is admitted, or its preemptions issued, only if it still fits after what the heads
//! before it took in this cycle; one whose preemption targets another head already claimed, or
//! that no longer fits, waits for the next cycle at the head of its queue. A head that cannot fit
//! (or could only by preempting with nothing to preempt) is passed over for the next workload of
//! its queue (BestEffortFIFO) and set aside until quota is released in its cohort tree. Cycles
//! repeat while they change something. With fair sharing on, heads are taken instead one at a
//! time by the tournament of `fair_share.rs`, over the snapshot as the heads before changed it.

use std::collections::BTreeSet;

use super::fair_share::{self, Head};
use super::preemption::{self, Preemptor};
use super::quota::QuotaTree;
use super::{Admitted, Key, Kueue};
use crate::models::topology::{self, TasPart};
use crate::scenario::JobTopology;
use crate::scheduler::{Action, ClusterView, JobId};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    NoFit,
    Preempt,
    Fit,
}

/// A head's assignment, against the snapshot its cycle started from.
struct Entry {
    queue: usize,
    key: Key,
    mode: Mode,
    /// Height of the cohort subtree it borrows from; 0 within its nominal quota.
    borrowing: u32,
    usage: Vec<i64>,
    /// With `Mode::Preempt`: indices into the cycle's admitted workloads; empty when no
    /// evictions would make room.
    targets: Vec<usize>,
}

impl Kueue {
    /// Runs scheduling cycles until one changes nothing.
    pub(super) fn admit(&mut self, view: &ClusterView<'_>, now: i64, actions: &mut Vec<Action>) {
        if self.wait_for_pods_ready && self.cfg.block_admission && self.admitted.values().any(|a| !a.ready) {
            return;
        }
        if self.tenants.is_empty() {
            // Alone, the queue reconsiders every pending workload after any event, as this model
            // always has.
            (0..self.queues.len()).for_each(|q| self.requeue_inadmissible(q));
        }
        loop {
            let heads = self.heads();
            if heads.is_empty() {
                return;
            }
            let mut snapshot = self.tree.clone();
            let candidates = self.candidates(view);
            let mut entries: Vec<Entry> =
                heads.into_iter().map(|(q, key)| self.nominate(view, &mut snapshot, &candidates, q, key)).collect();
            // The key orders by priority (higher first), then queue timestamp; fair sharing
            // orders afresh before each head (`next_entry`).
            entries.sort_by_key(|e| (e.borrowing, e.key));
            let mut progress = false;
            let mut preempted: BTreeSet<usize> = BTreeSet::new();
            while let Some(e) = self.next_entry(&mut snapshot, &mut entries) {
                let q = e.queue;
                match e.mode {
                    Mode::NoFit => {
                        self.pass(q, e.key);
                        progress = true;
                        continue;
                    }
                    Mode::Preempt if e.targets.is_empty() => {
                        // A queue that cannot always reclaim keeps what it could have, so that
                        // heads after it in this cycle do not take it (`reserveCapacityForUnreclaimablePreempt`).
                        if !self.queues[q].policy.reclaim_within_cohort {
                            reserve(&mut snapshot, &e);
                        }
                        self.pass(q, e.key);
                        progress = true;
                        continue;
                    }
                    _ => {}
                }
                if e.targets.iter().any(|t| preempted.contains(t))
                    || !still_fits(&mut snapshot, &candidates, &preempted, &e)
                {
                    continue;
                }
                if e.mode == Mode::Fit && !self.place_topology(view, e.key.2) {
                    self.pass(q, e.key);
                    progress = true;
                    continue;
                }
                preempted.extend(&e.targets);
                snapshot.charge(q, &e.usage, true);
                if e.mode == Mode::Preempt {
                    self.queues[q].preemptor = Some(e.key);
                    for &i in &e.targets {
                        let job = candidates[i].job;
                        let a = self.admitted.get_mut(&job).expect("candidates are admitted workloads");
                        if !a.evicting {
                            a.evicting = true;
                            actions.push(Action::Suspend { job });
                            progress = true;
                        }
                    }
                    continue;
                }
                self.admit_entry(view, now, e, actions);
                progress = true;
                if self.wait_for_pods_ready && self.cfg.block_admission {
                    return;
                }
            }
            if !progress {
                return;
            }
        }
    }

    /// The cycle's next head: the first in Kueue's classical order, or with fair sharing the
    /// winner of the tournament over the cycle's snapshot as it now stands.
    fn next_entry(&self, snapshot: &mut QuotaTree, entries: &mut Vec<Entry>) -> Option<Entry> {
        if entries.is_empty() {
            return None;
        }
        let Some(fair) = &self.fair else { return Some(entries.remove(0)) };
        let heads: Vec<Head<'_>> =
            entries.iter().map(|e| Head { queue: e.queue, key: e.key, usage: &e.usage }).collect();
        let next = fair_share::next_head(snapshot, &fair.weights, &heads);
        Some(entries.remove(next))
    }

    /// The head of each ClusterQueue: its preemptor while preemptions are under way, else its
    /// first pending workload.
    fn heads(&self) -> Vec<(usize, Key)> {
        let mut heads = vec![];
        for (q, cq) in self.queues.iter().enumerate() {
            if let Some(p) = cq.preemptor.filter(|p| cq.pending.contains(p)) {
                heads.push((q, p));
                continue;
            }
            // Alone, a queue with less left than its smallest job can admit nothing more.
            if self.tenants.is_empty() && (0..self.covered.len()).any(|r| self.tree.available(q, r) < cq.min_demand[r])
            {
                continue;
            }
            heads.extend(cq.pending.first().map(|&k| (q, k)));
        }
        heads
    }

    /// BestEffortFIFO: a head that cannot be admitted is set aside as inadmissible, and the next
    /// workload of its queue becomes the head.
    fn pass(&mut self, q: usize, key: Key) {
        let cq = &mut self.queues[q];
        cq.pending.remove(&key);
        cq.inadmissible.insert(key);
        if cq.preemptor == Some(key) {
            cq.preemptor = None;
        }
    }

    /// The admitted workloads as preemption candidates (none when no queue preempts).
    fn candidates(&self, view: &ClusterView<'_>) -> Vec<preemption::Admitted> {
        if self.queues.iter().all(|q| q.policy == preemption::Policy::default()) {
            return vec![];
        }
        let admitted = self.admitted.iter().map(|(&job, a): (&JobId, &Admitted)| preemption::Admitted {
            job,
            queue: a.queue,
            priority: view.job(job).spec.priority,
            admitted_ms: a.admitted_ms,
            evicting: a.evicting,
            usage: a.usage.clone(),
        });
        admitted.collect()
    }

    /// The head's assignment (`nominate`, `fitsResourceQuota` for the one flavor).
    fn nominate(
        &self,
        view: &ClusterView<'_>,
        snapshot: &mut QuotaTree,
        candidates: &[preemption::Admitted],
        q: usize,
        key: Key,
    ) -> Entry {
        let usage = self.demand(view, key.2);
        let (policy, priority) = (self.queues[q].policy, view.job(key.2).spec.priority);
        let mut entry = Entry { queue: q, key, mode: Mode::Fit, borrowing: 0, usage, targets: vec![] };
        // With fair sharing, a queue that reclaims may preempt while borrowing
        // (`canPreemptWhileBorrowing`).
        let preempts_borrowing = self.fair.is_some() && policy.reclaim_within_cohort;
        let mut short = vec![];
        for (r, &val) in entry.usage.iter().enumerate().filter(|(_, v)| **v > 0) {
            let (height, may_reclaim) = snapshot.borrowing_height(q, r, val);
            if val > snapshot.potential_available(q, r)
                || (val > snapshot.available(q, r)
                    && snapshot.quota(q, r).nominal < val
                    && !may_reclaim
                    && !preempts_borrowing)
            {
                entry.mode = Mode::NoFit;
                return entry;
            }
            if val <= snapshot.available(q, r) {
                entry.borrowing = entry.borrowing.max(height);
                continue;
            }
            // The oracle: what evictions in this resource alone would leave it borrowing.
            let mut alone = vec![0; entry.usage.len()];
            alone[r] = val;
            let p = Preemptor { queue: q, priority, policy, usage: &alone, short: &[r], fair: self.fair.as_ref() };
            let targets = preemption::targets(snapshot, candidates, &p);
            let charge = |s: &mut QuotaTree, add| {
                targets.iter().for_each(|&i| s.charge(candidates[i].queue, &candidates[i].usage, add))
            };
            charge(snapshot, false);
            entry.borrowing = entry.borrowing.max(snapshot.borrowing_height(q, r, val).0);
            charge(snapshot, true);
            short.push(r);
            entry.mode = Mode::Preempt;
        }
        if entry.mode == Mode::Preempt {
            let p =
                Preemptor { queue: q, priority, policy, usage: &entry.usage, short: &short, fair: self.fair.as_ref() };
            entry.targets = preemption::targets(snapshot, candidates, &p);
        }
        entry
    }

    /// Topology-Aware Scheduling: the workload is admitted only with a topology assignment (per
    /// node and PodSet, its pods), unless every constraint is preferred (then the pods go
    /// anywhere). A PodSet takes one constraint: a preferred level kept within another is given
    /// as the enclosing level, required. Kueue has no constraint over a whole workload of several
    /// PodSets: only a leader PodSet of one pod and its workers share a domain (a PodSet group);
    /// otherwise each PodSet keeps to a domain of its gang's level, or of the job's.
    fn place_topology(&mut self, view: &ClusterView<'_>, job: JobId) -> bool {
        let j = view.job(job);
        let level = |t: &'_ JobTopology| t.binding_label().unwrap_or(&t.label).to_string();
        let own = j.spec.topology.as_ref().map(level);
        if own.is_none() && j.spec.units.is_empty() {
            return true;
        }
        let leader_and_workers = |sets: &[usize]| sets.len() == 2 && sets.iter().any(|&k| j.sets[k].max_members == 1);
        let all: Vec<usize> = (0..j.sets.len()).collect();
        let whole_job = j.spec.units.is_empty() && (all.len() == 1 || leader_and_workers(&all));
        // PodSets (or PodSet groups) in the workload's order, each with its level.
        let mut parts: Vec<TasPart> = Vec::new();
        for k in 0..j.sets.len() {
            match j.spec.units.iter().find(|u| u.sets.contains(&k)) {
                _ if whole_job => parts.push(TasPart { sets: vec![k], label: None }),
                None => parts.push(TasPart { sets: vec![k], label: own.clone() }),
                Some(u) if leader_and_workers(&u.sets) => {
                    if u.sets.iter().min() == Some(&k) {
                        parts.push(TasPart { sets: u.sets.clone(), label: Some(level(&u.topology)) });
                    }
                }
                Some(u) => parts.push(TasPart { sets: vec![k], label: Some(level(&u.topology)) }),
            }
        }
        let label = own.as_deref().filter(|_| whole_job);
        let reserved = self.assigned_snapshot(view);
        match topology::assign(view, &reserved, job, label, &parts, &mut self.domains) {
            Some(slots) => {
                self.core.assigned.insert(job, slots);
                true
            }
            None => {
                let mut binding = j.spec.topology.iter().chain(j.spec.units.iter().map(|u| &u.topology));
                binding.all(|t| t.binding_label().is_none())
            }
        }
    }

    fn admit_entry(&mut self, view: &ClusterView<'_>, now: i64, e: Entry, actions: &mut Vec<Action>) {
        let (q, job) = (e.queue, e.key.2);
        self.tree.charge(q, &e.usage, true);
        self.queues[q].pending.remove(&e.key);
        if self.queues[q].preemptor == Some(e.key) {
            self.queues[q].preemptor = None;
        }
        let deadline = self.wait_for_pods_ready.then(|| now + self.cfg.pods_ready_timeout.0);
        let admitted = Admitted { queue: q, ready: false, deadline, admitted_ms: now, evicting: false, usage: e.usage };
        self.admitted.insert(job, admitted);
        if let Some(d) = deadline {
            self.deadlines.insert((d, job));
        }
        actions.push(Action::Start { job, members: view.job(job).spec.max_members });
    }
}

/// Whether the head fits the snapshot once its targets and those of earlier heads in the cycle
/// are gone (`fits`).
fn still_fits(
    snapshot: &mut QuotaTree,
    candidates: &[preemption::Admitted],
    preempted: &BTreeSet<usize>,
    e: &Entry,
) -> bool {
    let gone: BTreeSet<usize> = preempted.iter().chain(&e.targets).copied().collect();
    gone.iter().for_each(|&i| snapshot.charge(candidates[i].queue, &candidates[i].usage, false));
    let fits = e.usage.iter().enumerate().all(|(r, &v)| v <= snapshot.available(e.queue, r));
    gone.iter().for_each(|&i| snapshot.charge(candidates[i].queue, &candidates[i].usage, true));
    fits
}

/// `quotaResourcesToReserve` for a head that needs preemption and has no candidates.
fn reserve(snapshot: &mut QuotaTree, e: &Entry) {
    for (r, &v) in e.usage.iter().enumerate().filter(|(_, v)| **v > 0) {
        let (quota, used) = (snapshot.quota(e.queue, r), snapshot.usage(e.queue, r));
        let keep = match (e.borrowing > 0, quota.borrowing_limit) {
            (true, None) => v,
            (true, Some(limit)) => v.min(quota.nominal + limit - used),
            (false, _) => v.min(quota.nominal - used),
        };
        snapshot.add_usage(e.queue, r, keep.max(0));
    }
}
