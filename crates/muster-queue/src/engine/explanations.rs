//! Explanations: why each group is where it is. The queue view (every pending group with its
//! position, estimated start and reason, from the forecast), and `explain` for one group.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::cycle::HeadKey;
use super::forecast::ForecastStart;
use super::{Engine, EngineError, PendingKey};
use crate::clock;
use crate::group::{Group, GroupKey, GroupState};
use crate::quota;

/// What one pending group is waiting for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Explanation {
    pub key: GroupKey,
    pub queue: String,
    pub state: GroupState,
    /// 1-based position in its queue (pending groups only; 0 otherwise).
    pub position: usize,
    pub estimated_start: Option<i64>,
    pub reason: String,
}

impl Engine {
    /// Every pending group, queue by queue in configuration order and in queue order, with its
    /// position, estimated start (for the first `estimate_depth` of each queue) and reason.
    /// Estimates come from the forecast (`forecast.rs`): the engine's own cycle run forward on a
    /// copy, with placed groups ending when expected; beyond its budget, a lower bound from the
    /// cluster's totals where the forecast stopped.
    pub fn queue_view(&self, now: i64) -> Vec<Explanation> {
        self.estimate(now).0
    }

    /// [`Engine::queue_view`], with where the forecast starts each group.
    pub(super) fn estimate(&self, now: i64) -> (Vec<Explanation>, BTreeMap<GroupKey, ForecastStart>) {
        let now = now.max(self.now);
        let depth = self.config.estimate_depth;
        let order = self.global_order();
        let estimable =
            |pk: &PendingKey, q: &str, position: usize, key: &GroupKey| self.is_estimable(pk, q, position, key);
        let wanted = order.iter().filter(|(pk, q, p, k)| estimable(pk, q, *p, k)).map(|o| o.3.clone()).collect();
        let mut forecast = self.forecast(now, &wanted);
        let mut out = Vec::new();
        for (pk, q, position, key) in order {
            let g = &self.groups[&key];
            let mut reason = g.reason.clone();
            let mut aggregate = false;
            let estimated_start = if self.queue_cfg(&q).closed {
                reason = closed_queue_reason(&q);
                None
            } else if position > depth {
                reason = format!("position {position} in queue {q}; estimate not computed (beyond the first {depth})");
                None
            } else if !estimable(&pk, &q, position, &key) {
                None
            } else if let Some(s) = forecast.starts.get(&key) {
                Some(s.at)
            } else if let Some(at) = g.reserved_at.filter(|_| self.reservations.contains_key(&key)) {
                Some(at)
            } else {
                aggregate = true;
                forecast.not_before.remove(&key)
            };
            if let Some(at) = g.reserved_at.filter(|&at| g.state == GroupState::Reserved && at < now) {
                // Planned for the second after the last cycle, behind a group that runs past its
                // expected end: it moves on when that group ends (no cycle runs until then).
                reason = format!(
                    "reserved to start at {}, now past: waiting for groups that run past their expected end to \
                     give back their room",
                    clock::show(at)
                );
            }
            if aggregate && let Some(t) = estimated_start {
                reason = format!("{reason}; not before {} (estimate from cluster totals)", clock::show(t));
            }
            if reason.is_empty() || reason == "considered" || reason == "not yet considered" {
                reason = match estimated_start {
                    Some(t) if t <= now => "fits now; starts at the next cycle".into(),
                    Some(t) => format!("waiting for capacity; estimated start {}", clock::show(t)),
                    None => "waiting; no estimate (running groups without an expected end)".into(),
                };
            }
            if g.spec.request.duration.is_none() && estimated_start.is_some() {
                reason = match self.learned_run_time(g) {
                    Some(l) => format!(
                        "{reason}; no run time declared: planned as {} s, the mean of the last {} like it in queue \
                         {q} (an estimate: it starts only where it delays no reservation however long it runs)",
                        l.seconds, l.runs
                    ),
                    None => format!("{reason}; no run time declared and none learned yet"),
                };
            }
            out.push(Explanation { key, queue: q, state: g.state, position, estimated_start, reason });
        }
        (out, forecast.starts)
    }

    /// The pending groups the queue view estimates a start for, queue by queue. A caller that
    /// wants only the first estimate of each group skips the view (and its forecast, the costly
    /// part) while none of these is new to it: the other groups get no estimate from it.
    pub fn estimable(&self) -> impl Iterator<Item = &GroupKey> {
        self.pending.iter().flat_map(move |(q, pending)| {
            pending
                .iter()
                .take(self.config.estimate_depth)
                .enumerate()
                .filter(move |(i, (pk, key))| self.is_estimable(pk, q, i + 1, key))
                .map(|(_, (_, key))| &**key)
        })
    }

    /// Whether the group at `position` (1-based) of queue `q` gets an estimate: within the first
    /// `estimate_depth`, satisfiable, not held behind its queue's start window, and in an open
    /// queue.
    fn is_estimable(&self, pk: &PendingKey, q: &str, position: usize, key: &GroupKey) -> bool {
        position <= self.config.estimate_depth
            && !self.queue_cfg(q).closed
            && self.groups[key].unsatisfiable.is_none()
            && self.window_held.get(q).is_none_or(|held| pk < held)
    }

    /// Every pending group with its queue and 1-based position there, in the cycle's global order
    /// (see [`HeadKey`]) at the fair shares of now, so that estimates stack up as the scheduler
    /// would take the groups. Whether a group would borrow is left out: that depends on what is
    /// admitted before it, and a queue's groups keep their order.
    fn global_order(&self) -> Vec<(PendingKey, String, usize, GroupKey)> {
        let mut order: Vec<(HeadKey, String, usize, GroupKey)> = Vec::new();
        for (qi, q) in self.config.queues.iter().enumerate() {
            let share = self.fair_share(&q.name);
            for (i, (pk, k)) in self.pending[&q.name].iter().enumerate() {
                order.push((HeadKey::new(*pk, false, share, qi), q.name.clone(), i + 1, GroupKey::clone(k)));
            }
        }
        order.sort_by_key(|a| a.0);
        order.into_iter().map(|(head, q, position, key)| (head.pending_key(), q, position, key)).collect()
    }

    /// Running allocations' expected ends with what they free, by resource index, in time order.
    pub(super) fn end_profile(&self) -> Vec<(i64, Vec<u64>)> {
        let mut v: Vec<(i64, Vec<u64>)> =
            self.graph.allocations().filter(|a| !a.reserved && a.end != i64::MAX).map(|a| (a.end, a.held())).collect();
        v.sort();
        v
    }

    /// Earliest time the cluster's free totals could hold the group: a lower bound that ignores
    /// fragmentation and other pending groups (cheap; used beyond the forecast's budget).
    pub(super) fn aggregate_estimate(&self, profile: &[(i64, Vec<u64>)], g: &Group, now: i64) -> Option<i64> {
        let gr = &self.graph.graph;
        let (_, free) = gr.totals();
        let mut free = free.to_vec();
        let min = self.effective_min(g);
        let need: Vec<(usize, u64)> = quota::Asks::of(&g.spec.request)
            .with(min)
            .into_iter()
            .filter_map(|(r, total)| gr.resources.get(&r).map(|id| (id.index(), total)))
            .collect();
        let fits = |free: &[u64]| need.iter().all(|&(i, n)| free.get(i).is_some_and(|f| *f >= n));
        if fits(&free) {
            return Some(now);
        }
        for (t, amounts) in profile {
            for (f, a) in free.iter_mut().zip(amounts) {
                *f += a;
            }
            if fits(&free) {
                return Some((*t).max(now));
            }
        }
        None
    }

    /// When a placed group is planned to end, and where its run time came from; empty for one
    /// planned to run until it ends.
    fn planned_end(&self, g: &Group) -> String {
        let Some(end) = g.allocation.as_ref().map(|a| a.end).filter(|e| *e != i64::MAX) else { return String::new() };
        match self.run_time_limit(g) {
            Some(limit) => format!("; planned to end at {end} (declared run time; ended at {limit} if still running)"),
            None if g.spec.request.duration.is_some() => format!("; planned to end at {end} (declared run time)"),
            None => format!("; planned to end at {end} (learned run time)"),
        }
    }

    /// Why one group is where it is.
    pub fn explain(&self, key: &GroupKey, now: i64) -> Result<Explanation, EngineError> {
        let g = self.get(key)?;
        if g.state.is_pending() {
            return Ok(self
                .queue_view(now)
                .into_iter()
                .find(|e| &e.key == key)
                .expect("pending groups are in the view"));
        }
        let r = &self.queue_cfg(&g.spec.queue).readiness;
        let reason = match g.state {
            GroupState::Admitted => {
                let deadline = r.timeout_s.and_then(|t| g.admitted_at.map(|a| a + t));
                format!(
                    "admitted at {}; {} of {} members ready{}",
                    g.admitted_at.unwrap_or(0),
                    g.ready_members,
                    g.member_count(),
                    deadline.map_or(String::new(), |d| format!("; must be all ready by {d}"))
                )
            }
            GroupState::Running => match g.not_ready_since {
                Some(s) => format!(
                    "running; {} of {} members ready since {s}{}",
                    g.ready_members,
                    g.member_count(),
                    r.recovery_timeout_s.map_or(String::new(), |t| format!("; released at {} unless recovered", s + t))
                ),
                None => format!("running with {} members{}", g.member_count(), self.planned_end(g)),
            },
            GroupState::Evicted => format!(
                "evicted {} time(s); queued again at {}",
                g.evictions,
                g.requeue_at.map_or("once released".to_string(), |t| t.to_string())
            ),
            GroupState::Deactivated => {
                format!("deactivated after {} requeues (backoff limit); resume to retry", g.requeues)
            }
            GroupState::Suspended => "suspended by the user".into(),
            s => format!("{s}"),
        };
        Ok(Explanation {
            key: key.clone(),
            queue: g.spec.queue.clone(),
            state: g.state,
            position: 0,
            estimated_start: None,
            reason,
        })
    }
}

/// Why a group of closed queue `q` waits.
pub(super) fn closed_queue_reason(q: &str) -> String {
    format!(
        "queue {q} is closed: its definition was removed while groups still name it, and it admits nothing; the \
         group waits until the queue is defined again"
    )
}
