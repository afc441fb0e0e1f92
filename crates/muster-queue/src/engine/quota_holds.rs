//! Quota along the planned timeline. The graph plans capacity over time, so backfill never takes
//! the nodes a reserved group will start on; quota has to be planned the same way, or a group
//! backfilled behind a reserved one could hold, at that group's start, the quota it needs, and
//! the reservation would be a promise not kept. So each reservation a cycle makes (or keeps)
//! holds its group's minimum against its queue's quota from its start to its planned end, and a
//! group behind it in line is admitted now, or reserved for later, only if its queue's quota
//! holds it at every moment it is planned to run, beside the groups running until their planned
//! ends and the reservations made ahead of it.

use muster_graph::{GroupRequest, ResourceGraph};

use super::Engine;
use crate::clock;
use crate::group::{GroupKey, GroupState};
use crate::quota::{self, Asks, Usage};

/// A reserved group's minimum, held against its queue's quota while it is planned to run.
#[derive(Debug, Clone)]
pub(super) struct QuotaHold {
    key: GroupKey,
    queue: String,
    asks: Vec<(String, u64)>,
    start: i64,
    /// `ResourceGraph::end_of`: the far future for a group without a run time.
    end: i64,
}

/// Why a queue's quota would not hold a group over its planned run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Shortfall {
    /// Reservations ahead of it hold what it would need: which, and when.
    Held(String),
    /// What still runs then leaves too little: the group waits for quota as it does now.
    Used,
}

impl std::fmt::Display for Shortfall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Shortfall::Held(why) => f.write_str(why),
            Shortfall::Used => f.write_str("the groups still running then leave too little of its queue's quota"),
        }
    }
}

impl QuotaHold {
    fn active_at(&self, t: i64) -> bool {
        self.start <= t && t < self.end
    }

    /// Whether it holds quota during `window` of another group than `key`.
    fn meets(&self, key: &GroupKey, (start, end): (i64, i64)) -> bool {
        self.key != *key && self.start < end && start < self.end
    }
}

/// What a cycle knows of quota over time: the holds of the reservations it made (or kept) so far,
/// and, worked out when first needed, when each running group gives back what it uses.
#[derive(Debug, Default)]
pub(super) struct QuotaTimeline {
    holds: Vec<QuotaHold>,
    /// (end, queue, what it uses) of every running group, by end; None: to be worked out again,
    /// as a group was admitted or evicted since.
    ends: Option<Ends>,
}

/// (end, queue, what it uses) of every running group, by end.
type Ends = Vec<(i64, String, Vec<(String, u64)>)>;

impl QuotaTimeline {
    pub(super) fn hold(&mut self, h: Option<QuotaHold>) {
        self.holds.extend(h);
    }

    /// A group was admitted or evicted: what runs changed.
    pub(super) fn runs_changed(&mut self) {
        self.ends = None;
    }
}

impl Engine {
    /// Whether any queue has a quota: without one, there is nothing to hold.
    fn has_quotas(&self) -> bool {
        self.compiled.queues.values().any(|q| !q.quotas.is_empty())
    }

    /// The hold of group `key`, reserved to start at `start`: its minimum from then to its planned
    /// end. None where no queue has a quota.
    pub(super) fn quota_hold(&self, key: &GroupKey, start: i64) -> Option<QuotaHold> {
        if !self.has_quotas() {
            return None;
        }
        let g = &self.groups[key];
        // Planned as the graph plans its reservation: a run time only learned is no promise.
        let planned = self.planned_request(g);
        let request = self.request_to_match(g, &planned);
        let min = self.effective_min(g);
        Some(QuotaHold {
            key: key.clone(),
            queue: g.spec.queue.clone(),
            asks: Asks::of(&request).with(min),
            start,
            end: ResourceGraph::end_of(start, &request, min),
        })
    }

    /// Why group `key` (in `queue`, asking `req`'s minimum) may not run from `start` to its
    /// planned end: at some moment then its queue's quota cannot hold it beside what still runs
    /// and the holds of the reservations made ahead of it in this cycle. None: it may.
    pub(super) fn quota_held_against(
        &self,
        key: &GroupKey,
        queue: &str,
        req: &GroupRequest,
        start: i64,
        tl: &mut QuotaTimeline,
    ) -> Option<Shortfall> {
        let window = (start, ResourceGraph::end_of(start, req, req.min_members));
        if !self.quota_to_check(key, window, tl) {
            return None;
        }
        let (fits, why) = self.held_room(key, queue, &Asks::of(req), req.min_members, window, tl);
        (fits < req.min_members).then(|| why.unwrap_or(Shortfall::Used))
    }

    /// Whether group `key`'s quota over `window` needs looking at: some queue has a quota, and
    /// the window starts later than now (what runs changes by then) or meets a hold. The quota
    /// now is its caller's to check.
    fn quota_to_check(&self, key: &GroupKey, window: (i64, i64), tl: &QuotaTimeline) -> bool {
        self.has_quotas() && (window.0 > self.now || tl.holds.iter().any(|h| h.meets(key, window)))
    }

    /// The earliest moment after now from which queue `queue`'s quota holds group `key`'s
    /// minimum (`req`) until its planned end, as the groups running now end and the holds pass:
    /// where a group short of quota now may be reserved from. None: not before some group without
    /// a run time ends.
    pub(super) fn quota_free_from(
        &self,
        key: &GroupKey,
        queue: &str,
        req: &GroupRequest,
        tl: &mut QuotaTimeline,
    ) -> Option<i64> {
        let root_of = |q: &str| self.compiled.queues.get(q).and_then(|c| c.root_cohort.as_deref());
        let own = root_of(queue);
        let shares_quota = |q: &str| q == queue || (own.is_some() && root_of(q) == own);
        // Only the ends of groups whose quota it shares can free what it needs.
        let ends = self.running_ends(&mut tl.ends);
        let mut times: Vec<i64> = (ends.iter().filter(|(_, q, _)| shares_quota(q)).map(|(t, ..)| *t))
            .chain(tl.holds.iter().filter(|h| shares_quota(&h.queue)).map(|h| h.end))
            .filter(|&t| t < i64::MAX)
            .collect();
        times.sort_unstable();
        times.dedup();
        // Without the holds, what is used only falls as groups end: the first moment the quota
        // fits the minimum is found by halving; the holds are checked from there on.
        let asks = Asks::of(req);
        let fmt = |r: &str, a: u64| self.show_amount(r, a);
        let first = times.partition_point(|&t| {
            let usage = self.usage_at(t, ends, &[]);
            quota::max_members(&self.compiled, &usage, queue, &asks, req.min_members, &fmt).0 < req.min_members
        });
        let times = &times[first..];
        // Before the last hold starts, a start may meet it within its run: each is checked. From
        // there on, what is used and held only falls: halving again.
        let last_hold = tl.holds.iter().map(|h| h.start).max().unwrap_or(i64::MIN);
        let split = times.partition_point(|&t| t < last_hold);
        if let Some(t) =
            times[..split].iter().copied().find(|&t| self.quota_held_against(key, queue, req, t, tl).is_none())
        {
            return Some(t);
        }
        let later = &times[split..];
        let i = later.partition_point(|&t| self.quota_held_against(key, queue, req, t, tl).is_some());
        later.get(i).copied()
    }

    /// The most members (up to `want`, each asking as `asks` says) that queue `q`'s quota holds at
    /// every moment of `window`, beside what still runs then and the holds that overlap it; and,
    /// when that is below `want`, why ([`Engine::quota_to_check`] says when it is not looked at).
    pub(super) fn held_room(
        &self,
        key: &GroupKey,
        q: &str,
        asks: &Asks,
        want: u32,
        (start, end): (i64, i64),
        tl: &mut QuotaTimeline,
    ) -> (u32, Option<Shortfall>) {
        if !self.quota_to_check(key, (start, end), tl) {
            return (want, None);
        }
        let ends = self.running_ends(&mut tl.ends);
        let overlapping: Vec<&QuotaHold> = tl.holds.iter().filter(|h| h.meets(key, (start, end))).collect();
        let fmt = |r: &str, a: u64| self.show_amount(r, a);
        // Use only grows where a hold starts: the moments to check are the window's start and those.
        let mut moments: Vec<i64> = overlapping.iter().map(|h| h.start.max(start)).collect();
        moments.push(start);
        moments.sort_unstable();
        moments.dedup();
        let (mut most, mut why) = (want, None);
        for t in moments {
            let usage = self.usage_at(t, ends, &overlapping);
            let (fits, _) = quota::max_members(&self.compiled, &usage, q, asks, want, &fmt);
            if fits < most {
                most = fits;
                let holders: Vec<String> =
                    overlapping.iter().filter(|h| h.active_at(t)).map(|h| h.key.to_string()).collect();
                why = Some(match holders.is_empty() {
                    true => Shortfall::Used,
                    false => Shortfall::Held(format!(
                        "queue {q}'s quota at {} is held for {}, reserved ahead of it, and this group would still run \
                         then",
                        clock::show(t),
                        holders.join(", ")
                    )),
                });
            }
        }
        (most, why)
    }

    /// When each running group is planned to give back what it uses (one past its expected end is
    /// due to end any moment: by the next second, as the graph plans it), worked out once per
    /// change of what runs.
    fn running_ends<'t>(&self, ends: &'t mut Option<Ends>) -> &'t Ends {
        ends.get_or_insert_with(|| {
            let mut ends: Ends = (self.live.iter().map(|k| &self.groups[k]))
                .filter(|g| matches!(g.state, GroupState::Admitted | GroupState::Running))
                .filter_map(|g| {
                    let a = g.allocation.as_ref()?;
                    let used = quota::members_asks(&g.spec.request, a.members.iter().map(|m| m.index));
                    Some((a.end.max(self.now + 1), g.spec.queue.clone(), used.into_iter().collect()))
                })
                .collect();
            ends.sort_unstable_by_key(|(t, ..)| *t);
            ends
        })
    }

    /// What the queues will use at `t` as planned: what runs now, less what the groups planned to
    /// end by then use, plus the holds active then.
    fn usage_at(&self, t: i64, ends: &Ends, holds: &[&QuotaHold]) -> Usage {
        let mut usage = self.usage.clone();
        let mut shift = |q: &str, amounts: &[(String, u64)], by: fn(u64, u64) -> u64| {
            let u = usage.entry(q.to_string()).or_default();
            for (r, a) in amounts {
                let e = u.entry(r.clone()).or_insert(0);
                *e = by(*e, *a);
            }
        };
        for (_, q, used) in &ends[..ends.partition_point(|(end, ..)| *end <= t)] {
            shift(q, used, u64::saturating_sub);
        }
        for h in holds.iter().filter(|h| h.active_at(t)) {
            shift(&h.queue, &h.asks, u64::saturating_add);
        }
        usage
    }
}
