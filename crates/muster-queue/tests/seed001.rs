//! Seed 001 (Kueue's waitForPodsReady example) at the engine level: two 20-member groups that each
//! need 75% of the cluster's memory, and a 50-member quick group. With exact all-or-nothing
//! placement no partial group ever holds memory, so there is no deadlock and no timeout is needed:
//! every group completes, and the two big groups never hold allocations at the same time.

use muster_graph::{GroupRequest, Policy, ResourceGraph};
use muster_queue::{Engine, EngineConfig, GroupKey, GroupSpec, GroupState};

fn seed_graph() -> ResourceGraph {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios/clusters/seed-deadlock.yaml");
    let text = std::fs::read_to_string(path).unwrap();
    ResourceGraph::new(muster_graph::cluster::load(path, &text).unwrap(), Policy::First)
}

fn job(name: &str, members: u32, memory: u64) -> GroupSpec {
    GroupSpec {
        key: GroupKey::new("default", name),
        queue: "user-queue".into(),
        priority_class: None,
        request: GroupRequest::simple(name, members, &[("memory", memory)]),
        submitted_at: 0,
    }
}

#[test]
fn seed_001_every_job_completes_without_deadlock() {
    let mut e = Engine::new(seed_graph(), EngineConfig::single_queue("user-queue")).unwrap();
    // Submitted in the seed's order: quick job, job1, job2.
    e.submit(job("quick-job", 50, 1), 0).unwrap();
    e.submit(job("job1", 20, 316 << 20), 0).unwrap();
    e.submit(job("job2", 20, 316 << 20), 0).unwrap();
    // Pods become ready 3 s after admission; big jobs run 10 s after all ready, the quick job 1 s.
    let mut ready_at: Vec<(i64, GroupKey, u32)> = Vec::new();
    let mut done_at: Vec<(i64, GroupKey)> = Vec::new();
    let mut completed = Vec::new();
    for now in 0..600 {
        for (t, k, n) in ready_at.iter().filter(|(t, ..)| *t == now) {
            e.pods_ready(k, *n, *t).unwrap();
            let run = if &*k.name == "quick-job" { 1 } else { 10 };
            done_at.push((now + run, k.clone()));
        }
        for (_, k) in done_at.iter().filter(|(t, _)| *t == now) {
            e.finished(k, true, now).unwrap();
            completed.push(k.name.to_string());
        }
        for t in e.schedule(now) {
            assert_ne!(t.to, GroupState::Evicted, "no timeout is ever needed: {t:?}");
            if t.to == GroupState::Admitted {
                let n = t.allocation.as_ref().unwrap().members.len() as u32;
                assert_eq!(n, if &*t.key.name == "quick-job" { 50 } else { 20 }, "all members placed at once");
                ready_at.push((now + 3, t.key.clone(), n));
            }
        }
        let big_holding = ["job1", "job2"]
            .iter()
            .filter(|n| e.group(&GroupKey::new("default", n)).is_some_and(|g| g.allocation.is_some()))
            .count();
        assert!(big_holding <= 1, "both big jobs hold memory at {now}");
        e.check_invariants().unwrap();
        if completed.len() == 3 {
            break;
        }
    }
    completed.sort();
    assert_eq!(completed, vec!["job1", "job2", "quick-job"]);
    // While job1 ran, job2 waited with a plain reason naming the memory it needs.
    assert_eq!(e.graph().stat().allocations, 0);
}

#[test]
fn seed_001_job2_waits_with_a_reason() {
    let mut e = Engine::new(seed_graph(), EngineConfig::single_queue("user-queue")).unwrap();
    e.submit(job("quick-job", 50, 1), 0).unwrap();
    e.submit(job("job1", 20, 316 << 20), 0).unwrap();
    e.submit(job("job2", 20, 316 << 20), 0).unwrap();
    e.schedule(0);
    let x = e.explain(&GroupKey::new("default", "job2"), 0).unwrap();
    assert_eq!(x.state, GroupState::Queued);
    assert_eq!(x.position, 1);
    // No durations were given, so the planner cannot promise a time; the reason says what is short.
    assert_eq!(x.estimated_start, None);
    assert!(x.reason.contains("memory"), "{}", x.reason);
}
