//! Property tests over random event sequences.

mod common;

use common::*;
use muster_queue::config::{CohortConfig, FairShareWithinCohort, PreemptionConfig, QuotaSpec, WithinQueue};
use muster_queue::{Engine, EngineConfig, GroupKey, GroupState, QueuePolicy, Transition};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Submit { queue: u8, min: u32, extra: u32, cpu: u64, duration: Option<u64>, high: bool },
    Tick(i64),
    Ready { g: usize, all: bool },
    Finish { g: usize, ok: bool },
    Lose { g: usize, member: u32 },
    Suspend(usize),
    Resume(usize),
    Delete(usize),
    Cordon { node: u8, on: bool },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u8..3, 1u32..4, 0u32..3, 1u64..5, prop::option::of(5u64..60), any::<bool>())
            .prop_map(|(queue, min, extra, cpu, duration, high)| Op::Submit { queue, min, extra, cpu, duration, high }),
        4 => (0i64..25).prop_map(Op::Tick),
        3 => (0usize..64, any::<bool>()).prop_map(|(g, all)| Op::Ready { g, all }),
        2 => (0usize..64, any::<bool>()).prop_map(|(g, ok)| Op::Finish { g, ok }),
        1 => (0usize..64, 0u32..6).prop_map(|(g, member)| Op::Lose { g, member }),
        1 => (0usize..64).prop_map(Op::Suspend),
        1 => (0usize..64).prop_map(Op::Resume),
        1 => (0usize..64).prop_map(Op::Delete),
        1 => (0u8..6, any::<bool>()).prop_map(|(node, on)| Op::Cordon { node, on }),
    ]
}

/// Fixed-size groups with run times, in queue `a` or `c` of `planning_config`: what
/// reservations are made for. Groups become ready when admitted and end
/// when planned (`keeping_reservations_decides_as_planning_them_afresh`).
fn planning_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (prop_oneof![4 => Just(0u8), 1 => Just(2u8)], 1u32..4, 1u64..5, 5u64..60, any::<bool>())
            .prop_map(|(queue, min, cpu, d, high)| Op::Submit { queue, min, extra: 0, cpu, duration: Some(d), high }),
        5 => (0i64..6).prop_map(Op::Tick),
        1 => (0usize..64, any::<bool>()).prop_map(|(g, ok)| Op::Finish { g, ok }),
        1 => (0usize..64).prop_map(Op::Suspend),
        1 => (0u8..6, any::<bool>()).prop_map(|(node, on)| Op::Cordon { node, on }),
    ]
}

/// Groups of members too big to share a node in twos (3 of a node's 4 cpus), submitted in
/// bursts: requests that pass the cheap aggregate checks and still fail to match, the same shape
/// again and again (`settling_repeat_misfits_decides_as_attempting_in_full`).
fn misfit_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u8..3, 1u32..4, 0u32..2, 2u64..4, prop::option::of(5u64..60), any::<bool>())
            .prop_map(|(queue, min, extra, cpu, duration, high)| Op::Submit { queue, min, extra, cpu, duration, high }),
        2 => (0i64..6).prop_map(Op::Tick),
        1 => (0usize..64, any::<bool>()).prop_map(|(g, ok)| Op::Finish { g, ok }),
    ]
}

fn config() -> EngineConfig {
    let mut c = EngineConfig::single_queue("a");
    c.priority_classes.insert("high".into(), 10);
    c.priority_classes.insert("low".into(), 0);
    let mut b = c.queues[0].clone();
    b.name = "b".into();
    let mut q3 = c.queues[0].clone();
    q3.name = "c".into();
    c.queues.push(b);
    c.queues.push(q3);
    let quota = |n: i64, b: Option<i64>, l: Option<i64>| QuotaSpec {
        nominal: n.into(),
        borrowing_limit: b.map(Into::into),
        lending_limit: l.map(Into::into),
    };
    let [a, b, q3] = &mut c.queues[..] else { unreachable!() };
    // a is in a department with quotas of its own under co, which has a nominal of its own.
    a.cohort = Some("dept".into());
    a.policy = QueuePolicy::Conservative { depth: 2 };
    a.quotas.insert("cpu".into(), quota(8, Some(4), None));
    a.preemption = PreemptionConfig {
        within_queue: WithinQueue::LowerPriority,
        reclaim_within_cohort: true,
        ..Default::default()
    };
    b.cohort = Some("co".into());
    b.policy = QueuePolicy::Easy;
    b.quotas.insert("cpu".into(), quota(8, None, Some(4)));
    b.elastic_max_wait_s = 10;
    b.preemption.fair_share_within_cohort = FairShareWithinCohort::LowerOrEqualPriority;
    q3.policy = QueuePolicy::StrictFifo;
    q3.quotas.insert("cpu".into(), quota(6, None, None));
    for q in &mut c.queues {
        q.readiness.timeout_s = Some(30);
        q.readiness.recovery_timeout_s = Some(20);
        q.readiness.backoff_base_s = 5;
        q.readiness.backoff_max_s = 20;
        q.readiness.backoff_limit = Some(2);
    }
    c.queues[1].readiness.requeue_order = muster_queue::RequeueOrder::Creation;
    let mut co = CohortConfig::new("co", None);
    co.quotas.insert("cpu".into(), quota(2, None, None));
    let mut dept = CohortConfig::new("dept", Some("co"));
    dept.quotas.insert("cpu".into(), quota(1, Some(3), Some(4)));
    c.cohorts = vec![co, dept];
    c
}

/// Queues limited by capacity alone, so that groups wait for reservations rather than quota:
/// `a` conservative, `c` strict FIFO.
fn planning_config() -> EngineConfig {
    let mut c = config();
    for q in &mut c.queues {
        q.quotas.clear();
        q.cohort = None;
        q.preemption = PreemptionConfig::default();
        q.readiness.timeout_s = None;
        q.readiness.recovery_timeout_s = None;
    }
    c.cohorts.clear();
    c.queues[0].policy = QueuePolicy::Conservative { depth: 3 };
    c
}

/// [`config`]'s quotas, borrowing limits and cohort tree, with no preemption and no readiness
/// timeouts: groups wait for quota as well as for reservations.
fn quota_planning_config() -> EngineConfig {
    let mut c = config();
    for q in &mut c.queues {
        q.preemption = PreemptionConfig::default();
        q.readiness.timeout_s = None;
        q.readiness.recovery_timeout_s = None;
    }
    c.queues[0].policy = QueuePolicy::Conservative { depth: 3 };
    c
}

struct Run {
    e: Engine,
    now: i64,
    names: Vec<GroupKey>,
    log: Vec<Transition>,
}

impl Run {
    fn new() -> Self {
        Self::with(config())
    }

    fn with(config: EngineConfig) -> Self {
        Self { e: engine(graph(6, 4), config), now: 0, names: Vec::new(), log: Vec::new() }
    }

    fn pick(&self, g: usize) -> Option<GroupKey> {
        (!self.names.is_empty()).then(|| self.names[g % self.names.len()].clone())
    }

    /// Applies one op; a refused input must leave the engine unchanged.
    fn apply(&mut self, op: &Op) -> Result<(), TestCaseError> {
        let before = self.e.snapshot();
        let now = self.now;
        let r = match op {
            Op::Submit { queue, min, extra, cpu, duration, high } => {
                let name = format!("g{}", self.names.len());
                let q = ["a", "b", "c"][*queue as usize];
                let mut s = elastic(&name, q, *min, min + extra, *cpu, *duration, now);
                s.priority_class = Some(if *high { "high" } else { "low" }.into());
                self.names.push(s.key.clone());
                self.e.submit(s, now)
            }
            Op::Tick(dt) => {
                self.now += dt;
                Ok(self.e.schedule(self.now))
            }
            Op::Ready { g, all } => match self.pick(*g) {
                Some(k) => {
                    let n = self.e.group(&k).map_or(0, |g| g.member_count());
                    self.e.pods_ready(&k, if *all { n } else { n.saturating_sub(1) }, now)
                }
                None => return Ok(()),
            },
            Op::Finish { g, ok } => match self.pick(*g) {
                Some(k) => self.e.finished(&k, *ok, now),
                None => return Ok(()),
            },
            Op::Lose { g, member } => match self.pick(*g) {
                Some(k) => self.e.members_lost(&k, &[*member], now),
                None => return Ok(()),
            },
            Op::Suspend(g) => match self.pick(*g) {
                Some(k) => self.e.suspend(&k, now),
                None => return Ok(()),
            },
            Op::Resume(g) => match self.pick(*g) {
                Some(k) => self.e.resume(&k, now),
                None => return Ok(()),
            },
            Op::Delete(g) => match self.pick(*g) {
                Some(k) => self.e.delete(&k, now),
                None => return Ok(()),
            },
            Op::Cordon { node, on } => self.e.node_cordoned(&format!("n-{node}"), *on, now),
        };
        match r {
            Ok(ts) => {
                for t in &ts {
                    prop_assert!(GroupState::transition(t.from, t.to).is_ok(), "{t:?}");
                    if t.to == GroupState::Admitted {
                        let g = self.e.group(&t.key).unwrap();
                        let n = t.allocation.as_ref().unwrap().members.len() as u32;
                        prop_assert!(n >= g.spec.request.min_members && n <= g.spec.request.max_members);
                    }
                }
                self.log.extend(ts);
            }
            Err(_) => {
                if matches!(op, Op::Submit { .. }) {
                    self.names.pop();
                }
                prop_assert_eq!(self.e.snapshot(), before, "a refused input changed the engine");
            }
        }
        if let Err(m) = self.e.check_invariants() {
            return Err(TestCaseError::fail(m));
        }
        Ok(())
    }
}

proptest! {
    // 48 cases by default; PROPTEST_CASES raises it for a deeper run (`make properties`).
    #![proptest_config(ProptestConfig { cases: std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(48), ..ProptestConfig::default() })]

    /// Quotas never exceeded (beyond allowed borrowing), every placed group has min..=max members
    /// all placed, refused inputs change nothing, and replay is deterministic.
    #[test]
    fn random_sequences_keep_invariants_and_replay(ops in prop::collection::vec(op(), 1..80)) {
        let mut a = Run::new();
        for o in &ops {
            a.apply(o)?;
        }
        let mut b = Run::new();
        for o in &ops {
            b.apply(o)?;
        }
        prop_assert_eq!(&a.log, &b.log);
        prop_assert_eq!(a.e.snapshot(), b.e.snapshot());
    }

    /// Snapshot (through JSON) and restore mid-sequence: the continuation is identical.
    #[test]
    fn snapshot_restore_continues_identically(ops in prop::collection::vec(op(), 2..80), cut in 0usize..80) {
        check_snapshot(&ops, cut)?;
    }

    /// A cycle that keeps the reservations the last one made decides as one that plans them
    /// afresh (a restored engine holds none, so it plans every one): the same groups admitted,
    /// reserved for the same starts, dropped or moved alike. Groups end when planned, as a
    /// reservation assumes; most cycles then follow only new arrivals and keep what they can.
    #[test]
    fn keeping_reservations_decides_as_planning_them_afresh(ops in prop::collection::vec(planning_op(), 1..80)) {
        check_keeping(planning_config(), &ops)?;
    }

    /// The same where quotas, borrowing and a cohort tree hold groups back as well as capacity.
    #[test]
    fn keeping_reservations_under_quotas_decides_as_planning_them_afresh(
        ops in prop::collection::vec(planning_op(), 1..80),
    ) {
        check_keeping(quota_planning_config(), &ops)?;
    }

    /// Attempts settled the cheap way (a repeat of a request that failed earlier in the cycle, or
    /// a request for more than is free in all) decide as attempting them in full: the same transitions, and every group's reason the same,
    /// with and without quotas, preemption and elastic groups (EASY in front, so that most groups
    /// are backfill behind a blocked head).
    #[test]
    fn settling_repeat_misfits_decides_as_attempting_in_full(
        ops in prop::collection::vec(prop_oneof![3 => misfit_op(), 1 => op()], 1..120),
        quotas in any::<bool>(),
    ) {
        check_shortcut(&ops, quotas, Engine::attempt_every_group_in_full, true)?;
    }

    /// Requests settled without a match because one they contain failed earlier in the cycle (as
    /// many members or fewer, for as long or less) are ones a match would not place: the same
    /// transitions as matching every request, with and without quotas, preemption and elastic
    /// groups, EASY in front.
    #[test]
    fn settling_requests_that_contain_a_failed_one_decides_as_matching_them(
        ops in prop::collection::vec(prop_oneof![3 => misfit_op(), 1 => op()], 1..120),
        quotas in any::<bool>(),
    ) {
        // Only the reasons of the groups settled so differ: a match names what it found busy.
        check_shortcut(&ops, quotas, Engine::match_every_request, false)?;
    }

    /// Backfill never delays a reservation: with groups that end exactly when expected, a group's
    /// reserved start never moves later, and it starts no later than reserved. With a quota on the
    /// queue too: a group behind it in line may not hold, at its start, quota it needs then. Groups
    /// ahead of it in line that wait for quota (and so hold no reservation) still come first when
    /// quota frees: they alone may delay it.
    #[test]
    fn backfill_never_delays_a_reservation(
        jobs in prop::collection::vec((1u32..7, 1u64..5, 1u64..40, 0i64..15), 1..40),
        conservative in any::<bool>(),
        quota in prop::option::of(6i64..20),
    ) {
        let mut c = EngineConfig::single_queue("q");
        c.queues[0].policy = if conservative { QueuePolicy::Conservative { depth: 4 } } else { QueuePolicy::Easy };
        c.queues[0].readiness.timeout_s = None;
        if let Some(n) = quota {
            c.queues[0].quotas.insert("cpu".into(), QuotaSpec { nominal: n.into(), borrowing_limit: None, lending_limit: None });
        }
        let mut e = engine(graph(6, 4), c);
        let mut now = 0i64;
        let mut pending = jobs.iter().enumerate().map(|(i, j)| (i, *j)).collect::<Vec<_>>();
        pending.reverse();
        let mut ends: Vec<(i64, GroupKey)> = Vec::new();
        let mut promised: std::collections::BTreeMap<GroupKey, i64> = Default::default();
        // Reserved groups that a group ahead of them in line (submitted before) started before.
        let mut overtaken = std::collections::BTreeSet::new();
        let line = |k: &GroupKey| k.name[1..].parse::<usize>().unwrap();
        for _ in 0..400 {
            // Next event: a submission, an expected end, or a reserved start.
            let next_submit = pending.last().map(|(_, j)| now + j.3);
            let next_end = ends.iter().map(|(t, _)| *t).min();
            let next_res = e.groups().filter_map(|g| g.reserved_at).min();
            let Some(t) = [next_submit, next_end, next_res].into_iter().flatten().min() else { break };
            now = t.max(now);
            let due: Vec<GroupKey> = ends.iter().filter(|(t, _)| *t <= now).map(|(_, k)| k.clone()).collect();
            ends.retain(|(t, _)| *t > now);
            for k in due {
                e.finished(&k, true, now).unwrap();
            }
            if next_submit == Some(t) {
                let (i, (members, cpu, dur, _)) = pending.pop().unwrap();
                e.submit(spec(&format!("j{i}"), "q", members, cpu, Some(dur), now), now).unwrap();
            }
            for tr in e.schedule(now) {
                if tr.to == GroupState::Admitted {
                    let n = tr.allocation.as_ref().unwrap().members.len() as u32;
                    e.pods_ready(&tr.key, n, now).unwrap();
                    ends.push((tr.allocation.as_ref().unwrap().end, tr.key.clone()));
                    if quota.is_some() {
                        overtaken.extend(promised.keys().filter(|r| line(r) > line(&tr.key)).cloned());
                    }
                    if let Some(p) = promised.remove(&tr.key).filter(|_| !overtaken.contains(&tr.key)) {
                        prop_assert!(now <= p, "{} started at {now}, reserved for {p}", tr.key);
                    }
                }
            }
            for g in e.groups() {
                if let Some(at) = g.reserved_at {
                    if let Some(p) = promised.get(&g.spec.key).filter(|_| !overtaken.contains(&g.spec.key)) {
                        prop_assert!(at <= *p, "{} reservation moved from {p} to {at}", g.spec.key);
                    }
                    promised.insert(g.spec.key.clone(), at);
                }
            }
            e.check_invariants().map_err(TestCaseError::fail)?;
        }
    }
}

fn check_snapshot(ops: &[Op], cut: usize) -> Result<(), TestCaseError> {
    let cut = cut % ops.len();
    let mut a = Run::new();
    for o in &ops[..cut] {
        a.apply(o)?;
    }
    let json = serde_json::to_string(&a.e.snapshot()).unwrap();
    let snap: muster_queue::Snapshot = serde_json::from_str(&json).unwrap();
    prop_assert_eq!(&snap, &a.e.snapshot());
    let restored = Engine::restore(graph(6, 4), snap).unwrap();
    restored.check_invariants().map_err(TestCaseError::fail)?;
    prop_assert_eq!(restored.snapshot(), a.e.snapshot());
    let mut b = Run { e: restored, now: a.now, names: a.names.clone(), log: Vec::new() };
    a.log.clear();
    for o in &ops[cut..] {
        a.apply(o)?;
        b.apply(o)?;
    }
    if a.log != b.log {
        let i = a.log.iter().zip(&b.log).position(|(x, y)| x != y).unwrap_or(a.log.len().min(b.log.len()));
        return Err(TestCaseError::fail(format!(
            "continuations differ at {i}:\n original {:?}\n restored {:?}",
            a.log.get(i..(i + 3).min(a.log.len())),
            b.log.get(i..(i + 3).min(b.log.len()))
        )));
    }
    Ok(())
}

#[test]
fn snapshot_regression_1() {
    use Op::*;
    let ops = vec![
        Submit { queue: 1, min: 1, extra: 0, cpu: 1, duration: None, high: false },
        Submit { queue: 2, min: 1, extra: 0, cpu: 1, duration: None, high: false },
        Submit { queue: 0, min: 1, extra: 2, cpu: 3, duration: None, high: false },
        Submit { queue: 0, min: 1, extra: 2, cpu: 4, duration: None, high: false },
        Tick(0),
        Tick(0),
        Lose { g: 0, member: 0 },
        Ready { g: 0, all: false },
        Submit { queue: 0, min: 3, extra: 1, cpu: 1, duration: None, high: false },
        Tick(0),
        Ready { g: 14, all: true },
        Delete(17),
        Submit { queue: 0, min: 1, extra: 0, cpu: 1, duration: None, high: false },
        Tick(10),
        Tick(7),
        Ready { g: 26, all: true },
        Submit { queue: 1, min: 2, extra: 0, cpu: 2, duration: Some(21), high: true },
        Finish { g: 9, ok: true },
        Tick(7),
        Cordon { node: 0, on: true },
        Tick(15),
        Submit { queue: 1, min: 1, extra: 2, cpu: 1, duration: Some(49), high: false },
        Ready { g: 58, all: true },
        Finish { g: 38, ok: true },
        Submit { queue: 2, min: 3, extra: 2, cpu: 2, duration: None, high: false },
        Tick(12),
    ];
    check_snapshot(&ops, 25).unwrap();
}

#[test]
fn snapshot_regression_2() {
    use Op::*;
    let ops = vec![
        Tick(0),
        Tick(0),
        Submit { queue: 2, min: 1, extra: 0, cpu: 1, duration: None, high: false },
        Tick(0),
        Submit { queue: 1, min: 2, extra: 0, cpu: 4, duration: Some(12), high: false },
        Ready { g: 20, all: true },
        Tick(0),
        Cordon { node: 3, on: true },
        Submit { queue: 0, min: 1, extra: 0, cpu: 1, duration: None, high: false },
        Finish { g: 44, ok: false },
        Ready { g: 1, all: true },
        Tick(0),
        Submit { queue: 0, min: 1, extra: 0, cpu: 3, duration: Some(17), high: false },
        Tick(20),
        Submit { queue: 0, min: 3, extra: 2, cpu: 2, duration: None, high: false },
        Ready { g: 35, all: true },
        Submit { queue: 2, min: 2, extra: 0, cpu: 1, duration: Some(58), high: true },
        Tick(20),
        Ready { g: 52, all: true },
        Ready { g: 7, all: true },
        Submit { queue: 2, min: 2, extra: 0, cpu: 2, duration: Some(15), high: false },
        Suspend(61),
        Submit { queue: 2, min: 2, extra: 1, cpu: 3, duration: Some(19), high: false },
        Finish { g: 26, ok: false },
        Resume(56),
        Tick(8),
        Submit { queue: 2, min: 3, extra: 0, cpu: 1, duration: None, high: true },
        Tick(4),
        Resume(20),
        Tick(8),
        Finish { g: 3, ok: false },
        Cordon { node: 1, on: false },
        Tick(2),
        Resume(27),
        Tick(9),
        Tick(21),
        Submit { queue: 1, min: 1, extra: 2, cpu: 1, duration: Some(35), high: false },
        Delete(31),
        Tick(20),
        Tick(4),
        Submit { queue: 1, min: 1, extra: 1, cpu: 2, duration: None, high: true },
        Suspend(49),
        Ready { g: 59, all: false },
        Finish { g: 27, ok: false },
    ];
    check_snapshot(&ops, 34).unwrap();
}

/// Runs `ops` on two engines, EASY in front (so that most groups are backfill behind a blocked
/// head), one with a shortcut of the cycle switched off by `without`: both must make the same
/// transitions and, with `same_reasons`, give every group the same reason.
fn check_shortcut(ops: &[Op], quotas: bool, without: fn(&mut Engine), same_reasons: bool) -> Result<(), TestCaseError> {
    let mut c = if quotas { config() } else { planning_config() };
    c.queues[0].policy = QueuePolicy::Easy;
    let mut with = Run::with(c.clone());
    let mut plain = Run::with(c);
    without(&mut plain.e);
    for o in ops {
        with.apply(o)?;
        plain.apply(o)?;
        prop_assert_eq!(&with.log, &plain.log);
        if same_reasons {
            for g in plain.e.groups() {
                prop_assert_eq!(&with.e.group(&g.spec.key).unwrap().reason, &g.reason, "{}", g.spec.key);
            }
        }
    }
    Ok(())
}

/// [`keeping_reservations_decides_as_planning_them_afresh`] under `config`.
fn check_keeping(config: EngineConfig, ops: &[Op]) -> Result<(), TestCaseError> {
    let mut run = Run::with(config);
    for o in ops {
        let Op::Tick(dt) = o else {
            run.apply(o)?;
            continue;
        };
        let now = run.now + dt;
        run.now = now;
        let ended: Vec<GroupKey> = (run.e.groups())
            .filter(|g| g.allocation.as_ref().is_some_and(|a| a.end <= now))
            .map(|g| g.spec.key.clone())
            .collect();
        for k in ended {
            run.log.extend(run.e.finished(&k, true, now).unwrap());
        }
        let mut fresh = Engine::restore(graph(6, 4), run.e.snapshot()).unwrap();
        let kept = run.e.schedule(now);
        if !run.e.last_cycle().ran {
            continue;
        }
        let planned = fresh.schedule(now);
        let decisions = |ts: &[Transition]| {
            ts.iter().map(|t| (t.key.clone(), t.from, t.to, format!("{:?}", t.reason))).collect::<Vec<_>>()
        };
        prop_assert_eq!(decisions(&kept), decisions(&planned));
        for t in kept.iter().filter(|t| t.to == GroupState::Admitted) {
            let members = t.allocation.as_ref().map_or(0, |a| a.members.len() as u32);
            run.log.extend(run.e.pods_ready(&t.key, members, now).unwrap());
        }
        run.log.extend(kept);
        run.e.check_invariants().map_err(TestCaseError::fail)?;
    }
    Ok(())
}
