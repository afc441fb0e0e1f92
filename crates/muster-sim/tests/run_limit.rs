//! Declared run times are limits in the simulator as in the controller: muster (the real engine,
//! its default Queue enforcing run times with a 60 s grace) ends a job that under-declares to be
//! backfilled, and the reservation it was started ahead of keeps its time.

use std::path::{Path, PathBuf};

use muster_sim::engine::{Engine, RunRecord};
use muster_sim::scheduler::JobPhase;
use muster_sim::{Workload, scenario};

/// Two 4-cpu nodes, an instant control plane. `filler` holds n-0 for 100 s (as it declares);
/// `gang`, both nodes for 10 s, arrives at 1 s and is reserved for 100 s; `liar`, one node,
/// arrives at 2 s declaring `declared` and runs 1,000 s.
fn workload(declared: &str) -> Workload {
    let dir = two_nodes(declared);
    let text = format!(
        "name: liar\ncluster: cluster.yaml\ntiming: {{podCreateQps: 0, bindQps: 0, podStartDelay: 0s}}\njobClasses:\n\
         \x20 - {{name: filler, count: 1, members: 1, resources: {{cpu: \"4\"}}, runTime: 100s,\n\
         \x20    nodeSelector: {{kubernetes.io/hostname: n-0}}}}\n\
         \x20 - {{name: gang, count: 1, members: 2, resources: {{cpu: \"4\"}}, runTime: 10s, arrival: {{start: 1s}}}}\n\
         \x20 - {{name: liar, count: 1, members: 1, resources: {{cpu: \"4\"}}, runTime: 1000s,\n\
         \x20    declaredRunTime: {declared}, arrival: {{start: 2s}}}}\n"
    );
    scenario::from_text("liar.yaml", &text, Path::new(&dir), 1).unwrap()
}

/// A directory of its own with `cluster.yaml`: two 4-cpu nodes. Tests run in parallel threads of
/// one process, so each call gets its own directory (a shared one was rewritten while another
/// test read it).
fn two_nodes(tag: &str) -> PathBuf {
    static CALLS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("muster-sim-run-limit-{tag}-{}-{call}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("cluster.yaml"),
        "name: two\nnodeClasses:\n  - {name: n, count: 2, capacity: {cpu: \"4\", pods: 110}}\n",
    )
    .unwrap();
    dir
}

fn run(w: &Workload) -> RunRecord {
    let mut s = muster_sim::scheduler("muster", w).unwrap();
    Engine::new(w).unwrap().run(s.as_mut(), false).unwrap()
}

fn job<'r>(w: &Workload, rec: &'r RunRecord, class: &str) -> &'r muster_sim::engine::JobRecord {
    &rec.jobs[w.jobs.iter().position(|j| j.class == class).unwrap()]
}

#[test]
fn a_job_that_under_declares_is_ended_and_the_reservation_keeps_its_time() {
    let w = workload("1s");
    let rec = run(&w);
    let liar = job(&w, &rec, "liar");
    assert!(liar.scheduled_ms.is_some_and(|t| t < 5_000), "backfilled at once on its 1 s: {liar:?}");
    assert_eq!(liar.phase, JobPhase::Failed, "ended at 1 s + 60 s, not after its 1,000 s");
    assert!(liar.ended_ms.is_some_and(|t| t <= 70_000), "{liar:?}");
    let gang = job(&w, &rec, "gang");
    assert_eq!(gang.phase, JobPhase::Succeeded);
    let started = gang.scheduled_ms.unwrap();
    assert!((100_000..=101_000).contains(&started), "the gang starts when reserved, at 100 s: {started} ms");
}

#[test]
fn a_declared_run_time_is_what_the_job_is_planned_with() {
    let w = workload("1s");
    let liar = w.jobs.iter().find(|j| j.class == "liar").unwrap();
    assert_eq!(liar.expected_run_ms, Some(1_000));
    let e = scenario::from_text(
        "bad.yaml",
        "name: b\ncluster: cluster.yaml\njobClasses:\n  - {name: x, count: 1, members: 1, resources: {cpu: \"1\"}, \
         runTime: 10s, declaresRunTime: false, declaredRunTime: 5s}\n",
        &two_nodes("bad"),
        1,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("declaredRunTime"), "{e}");
}
