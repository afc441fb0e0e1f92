//! A new configuration for a running engine (`Engine::reconfigure`): the engine becomes what a
//! restore of its snapshot under that configuration would be, on the nodes as they are; a
//! configuration the engine refuses changes nothing.

mod common;

use common::*;
use muster_queue::config::QuotaSpec;
use muster_queue::{Engine, EngineConfig, ExternalHold, GroupState, QueueConfig, Transition};
use proptest::prelude::*;

/// Queue `a` with `a_cpu` cpus of nominal quota and, if `with_b`, queue `b` without a quota.
fn config(a_cpu: u64, with_b: bool) -> EngineConfig {
    let mut c = EngineConfig::single_queue("a");
    c.queues[0]
        .quotas
        .insert("cpu".into(), QuotaSpec { nominal: (a_cpu as i64).into(), borrowing_limit: None, lending_limit: None });
    if with_b {
        c.queues.push(QueueConfig::new("b"));
    }
    c
}

/// The engine as recovery rebuilds it: its snapshot under `config` (with the queues its groups
/// still name kept closed) on a fresh graph of its nodes, marked as `like` marks its structure.
fn restored(e: &Engine, mut config: EngineConfig, like: &Engine) -> Engine {
    let mut snap = e.snapshot();
    config.close_undefined_queues(snap.groups.iter().map(|g| &g.spec));
    snap.usage.retain(|q, _| config.queues.iter().any(|c| c.name == *q));
    snap.config = config;
    snap.dirty = true;
    snap.structure_version = like.snapshot().structure_version;
    Engine::restore(graph(4, 4), snap).unwrap()
}

/// Groups that end when they said they would, then a cycle: the transitions, and the members of
/// every group the cycle admitted made ready.
fn step(e: &mut Engine, now: i64) -> Vec<Transition> {
    let ending: Vec<_> = (e.groups())
        .filter(|g| g.state == GroupState::Running && g.allocation.as_ref().is_some_and(|a| a.end <= now))
        .map(|g| g.spec.key.clone())
        .collect();
    let mut ts = Vec::new();
    for k in ending {
        ts.extend(e.finished(&k, true, now).unwrap());
    }
    let cycle = e.schedule(now);
    ready_all(e, &cycle, now);
    ts.extend(cycle);
    ts
}

/// The cpus the placed groups of `queue` hold.
fn cpu_held(e: &Engine, queue: &str) -> u64 {
    let placed = e.groups().filter(|g| g.spec.queue == queue && g.state.holds_allocation());
    let cpu = |g: &muster_queue::Group| g.spec.request.requests.iter().find(|(r, _)| r == "cpu").map_or(0, |(_, q)| *q);
    placed.map(|g| cpu(g) * g.allocation.as_ref().map_or(0, |a| a.members.len() as u64) / 1000).sum()
}

fn placement(e: &Engine, name: &str) -> Vec<String> {
    let g = e.group(&key(name)).unwrap();
    g.allocation.as_ref().map(|a| a.members.iter().map(|m| m.node.clone()).collect()).unwrap_or_default()
}

#[test]
fn a_raised_quota_admits_at_once_and_placed_groups_stay_where_they_are() {
    let mut e = engine(graph(4, 4), config(8, true));
    e.occupy("pod-x", ExternalHold::pod("n-3", &[("cpu".into(), 2000)]), 0).unwrap();
    e.node_cordoned("n-2", true, 0).unwrap();
    e.submit(spec("runs", "a", 2, 4, Some(100), 0), 0).unwrap();
    e.submit(spec("waits", "a", 1, 2, Some(100), 0), 0).unwrap();
    step(&mut e, 0);
    assert_eq!((state(&e, "runs"), state(&e, "waits")), (GroupState::Running, GroupState::Queued));
    let why = e.explain(&key("waits"), 0).unwrap().reason;
    assert!(why.contains("quota"), "{why}");
    let runs_on = placement(&e, "runs");

    e.reconfigure(config(10, true)).unwrap();
    e.check_invariants().unwrap();
    assert_eq!(placement(&e, "runs"), runs_on, "a placed group stays where it is");
    assert_eq!(state(&e, "runs"), GroupState::Running);
    let ts = step(&mut e, 1);
    assert_eq!(to(&ts, "waits"), [GroupState::Admitted], "the raised quota admits it");
    // Beside the other scheduler's pod: the cordoned node is still cordoned and the pod's 2
    // cpus still held.
    assert_eq!(placement(&e, "waits"), ["n-3"]);
    e.check_invariants().unwrap();
}

#[test]
fn a_refused_configuration_changes_nothing() {
    let mut e = engine(graph(4, 4), config(8, true));
    e.submit(spec("runs", "a", 2, 4, Some(100), 0), 0).unwrap();
    e.submit(spec("waits", "b", 4, 4, Some(100), 0), 0).unwrap();
    step(&mut e, 0);
    let before = e.snapshot();
    let mut bad = config(16, true);
    bad.fair_share_half_life_s = -1;
    let err = e.reconfigure(bad).unwrap_err().to_string();
    assert!(err.contains("fairShareHalfLifeS"), "{err}");
    assert_eq!(e.snapshot(), before);
    e.check_invariants().unwrap();
}

#[test]
fn a_queue_left_out_is_kept_closed_until_no_group_names_it() {
    let mut e = engine(graph(4, 4), config(8, true));
    e.submit(spec("runs", "b", 2, 4, Some(100), 0), 0).unwrap();
    e.submit(spec("waits", "b", 3, 4, Some(100), 0), 0).unwrap();
    step(&mut e, 0);
    assert_eq!((state(&e, "runs"), state(&e, "waits")), (GroupState::Running, GroupState::Queued));

    e.reconfigure(config(8, false)).unwrap();
    let b = e.config().queues.iter().find(|q| q.name == "b").expect("b kept");
    assert!(b.closed);
    step(&mut e, 100);
    assert_eq!(state(&e, "runs"), GroupState::Succeeded, "its placed group ran on");
    assert_eq!(state(&e, "waits"), GroupState::Queued, "room for it, and it still waits");
    let why = e.explain(&key("waits"), 100).unwrap().reason;
    assert!(why.starts_with("queue b is closed"), "{why}");
    assert!(e.submit(spec("new", "b", 1, 1, Some(10), 100), 100).is_err());

    e.delete(&key("runs"), 101).unwrap();
    e.delete(&key("waits"), 101).unwrap();
    e.reconfigure(config(8, false)).unwrap();
    assert!(e.config().queues.iter().all(|q| q.name != "b"), "no group names it any more");
    e.check_invariants().unwrap();
}

fn jobs() -> impl Strategy<Value = Vec<(bool, u32, u64, u64, i64)>> {
    prop::collection::vec((any::<bool>(), 1u32..4, 1u64..5, 5u64..60, 0i64..100), 1..20)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    /// Reconfiguring decides as recovering does: at the change the engine equals its snapshot
    /// restored under the new configuration on a fresh graph, and the two then take the same
    /// decisions, cycle after cycle, to the end.
    #[test]
    fn reconfiguring_decides_as_restoring(
        jobs in jobs(),
        at in 0i64..120,
        a_cpu in 1u64..17,
        keep_b in any::<bool>(),
        cordon in any::<bool>(),
    ) {
        let mut e = engine(graph(4, 4), config(8, true));
        let mut other: Option<Engine> = None;
        for now in 0..200 {
            for (i, &(in_a, members, cpu, duration, t)) in jobs.iter().enumerate() {
                if t == now {
                    let s = spec(&format!("g{i}"), if in_a { "a" } else { "b" }, members, cpu, Some(duration), t);
                    let mine = e.submit(s.clone(), now).map_err(|e| e.to_string());
                    if let Some(o) = other.as_mut() {
                        prop_assert_eq!(o.submit(s, now).map_err(|e| e.to_string()), mine);
                    }
                }
            }
            if now == at {
                if cordon {
                    e.node_cordoned("n-1", true, now).unwrap();
                }
                let before = e.clone();
                e.reconfigure(config(a_cpu, keep_b)).unwrap();
                let o = restored(&before, config(a_cpu, keep_b), &e);
                prop_assert_eq!(o.snapshot(), e.snapshot());
                other = Some(o);
            }
            let ts = step(&mut e, now);
            // A quota lowered below what runs lets those groups run on, and admits nothing
            // more of the queue until it is back within.
            let admitted_in_a = ts.iter().any(|t| t.to == GroupState::Admitted && e.group(&t.key).is_some_and(|g| g.spec.queue == "a"));
            let nominal = if now >= at { a_cpu } else { 8 };
            prop_assert!(!admitted_in_a || cpu_held(&e, "a") <= nominal, "at {}: queue a holds {} cpu of {}", now, cpu_held(&e, "a"), nominal);
            if let Some(o) = other.as_mut() {
                prop_assert_eq!(step(o, now), ts, "at {}", now);
                o.check_invariants().map_err(TestCaseError::fail)?;
            }
            e.check_invariants().map_err(TestCaseError::fail)?;
        }
    }
}
