//! muster's own engine in the simulator, against the targets of the seed experiments.

use std::path::{Path, PathBuf};

use muster_sim::{Report, RunOptions};

fn scenario(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios").join(name)
}

fn run(name: &str, schedulers: &[&str]) -> Report {
    let opts = RunOptions {
        schedulers: schedulers.iter().map(|s| s.to_string()).collect(),
        ..RunOptions::new(scenario(name))
    };
    muster_sim::run(&opts).unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[test]
fn seed_scalability_completes_every_job_close_to_the_ideal_fifo_gang_schedule() {
    let report = run("seed-scalability.yaml", &["muster"]);
    let m = &report.runs[0];
    assert_eq!((m.completed, m.failed, m.unfinished), (report.jobs, 0, 0), "every job completes");
    let batch = m.classes.iter().find(|c| c.class == "batch").expect("batch class");
    assert_eq!(batch.completed, 1000);
    let ideal = report.ideal_fifo_gang.makespan_s;
    let makespan = m.makespan_s.expect("finished");
    assert!(makespan <= ideal * 1.05, "makespan {makespan:.1} s is more than 5% over the ideal {ideal:.1} s");
    assert!(makespan >= report.lower_bound_s, "no schedule beats the lower bound");
    // The probes fit when they arrive: a cycle follows the event within the controller's pacing,
    // not at the next whole second of the engine's clock (p50 was 0.66 s before).
    for probe in m.classes.iter().filter(|c| c.probe) {
        let t = probe.time_to_schedule.as_ref().expect("probes report their time to schedule");
        assert!(t.p50_s <= 0.1, "{}: time to schedule p50 {:.2} s, over 100 ms", probe.class, t.p50_s);
    }
}

#[test]
fn seed_001_deadlock_does_not_happen_with_muster() {
    let report = run("suite/seed-001.yaml", &["default", "muster"]);
    let (default, muster) = (&report.runs[0], &report.runs[1]);
    assert!(default.unfinished > 0, "the default model deadlocks, as in the seed");
    assert_eq!((muster.completed, muster.failed, muster.unfinished), (3, 0, 0));
    assert_eq!(muster.suspensions, 0, "exact placement needs no timeout or eviction");
}

#[test]
fn every_queue_policy_runs_and_is_deterministic() {
    let names = ["muster", "muster-easy", "muster-fifo", "muster-besteffort"];
    let first = run("priority-probe.yaml", &names);
    for r in &first.runs {
        assert_eq!(r.unfinished, 0, "{}: every job ends", r.scheduler);
        assert_eq!(r.failed, 0, "{}: no job misses its deadline", r.scheduler);
    }
    assert_eq!(first.to_json(), run("priority-probe.yaml", &names).to_json(), "same seed, same result");
}

#[test]
fn gpu_gangs_of_mixed_shapes_deadlock_the_default_scheduler_but_never_clog_under_muster() {
    let report = run("suite/gpu-burst.yaml", &["default", "kueue", "muster"]);
    let (default, kueue, muster) = (&report.runs[0], &report.runs[1], &report.runs[2]);
    assert!(default.unfinished > 0, "pods placed one by one split the nodes whole-node gangs need");
    assert!(default.occupancy.clog_share > 0.5, "and the partial gangs hold GPUs: {}", default.occupancy.clog_share);
    assert_eq!(kueue.unfinished, 0, "a GPU quota admits no more gangs than the cluster holds");
    assert_eq!((muster.completed, muster.failed), (report.jobs, 0));
    assert!(muster.occupancy.clog_share < 0.01, "no partial gang holds GPUs: {}", muster.occupancy.clog_share);
    assert!(muster.occupancy.mean_util_gpu.is_some_and(|u| u > 0.8), "{:?}", muster.occupancy.mean_util_gpu);
    assert!(muster.makespan_s.unwrap() >= report.lower_bound_s);
}

/// Runs `scenario` under `other` and muster: muster completes every job within 5% of the lower
/// bound, and its whole-cluster gangs (class `whole`) wait at most a quarter of what they wait
/// under `other`.
fn whole_gangs_start_far_sooner(scenario: &str, other: &str) -> Report {
    let report = run(scenario, &[other, "muster"]);
    let (other_run, muster) = (&report.runs[0], &report.runs[1]);
    let whole = |r: &muster_sim::RunResult| r.classes.iter().find(|c| c.class == "whole").unwrap().wait.max_s;
    assert_eq!((muster.completed, muster.failed), (report.jobs, 0));
    assert!(
        whole(muster) * 4.0 < whole(other_run),
        "{scenario}: the big gangs wait at most {} s under muster against {} s under {other}",
        whole(muster),
        whole(other_run)
    );
    let makespan = muster.makespan_s.unwrap();
    assert!(makespan >= report.lower_bound_s && makespan <= report.lower_bound_s * 1.05, "{makespan}");
    report
}

#[test]
fn whole_cluster_gangs_do_not_starve_behind_a_stream_of_small_jobs() {
    // A reservation starts them long before best-effort admission does.
    whole_gangs_start_far_sooner("suite/starvation.yaml", "kueue");
}

#[test]
fn run_times_no_job_declares_are_learned_so_whole_cluster_gangs_still_do_not_starve() {
    // Nothing declares a run time: only learned ones make the reservations possible.
    let report = whole_gangs_start_far_sooner("starvation-undeclared.yaml", "muster-besteffort");
    let (unplanned, muster) = (&report.runs[0], &report.runs[1]);
    // Predicted starts come from the learned run times (none is declared).
    let e = muster.estimates.expect("muster predicts starts");
    assert!(e.compared >= 100 && e.median_error_of_wait < 0.5, "{e:?}");
    assert!(unplanned.estimates.is_some_and(|u| u.estimated < e.estimated / 10), "{:?}", unplanned.estimates);
}

/// The scenario `text`, its cluster file `cluster.yaml` holding `cluster`, in a fresh directory.
fn in_temp_dir(tag: &str, cluster: &str, text: &str) -> Result<muster_sim::Workload, muster_sim::SimError> {
    let dir = std::env::temp_dir().join(format!("muster-sim-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("cluster.yaml"), cluster).unwrap();
    muster_sim::scenario::from_text("t.yaml", text, &dir, 1)
}

/// Two 4-cpu nodes. `trainer` (2..8 x 1 cpu, 100 s of work with all 8, `shrinkable` as given)
/// fills both from 0; at 10 s `big` (one 4-cpu pod, 20 s) comes. Instant control plane.
fn trainer_and_big(shrinkable: bool) -> (muster_sim::Workload, muster_sim::engine::RunRecord) {
    let cluster = "name: two\nnodeClasses:\n  - {name: n, count: 2, capacity: {cpu: \"4\", pods: 110}}\n";
    let text = format!(
        "name: t\ncluster: cluster.yaml\ntiming: {{podCreateQps: 0, bindQps: 0, podStartDelay: 0s, jobCompleteDelay: 0s}}\n\
         jobClasses:\n\
         \x20 - {{name: trainer, count: 1, members: {{min: 2, max: 8}}, resources: {{cpu: \"1\"}}, runTime: 100s, \
         shrinkable: {shrinkable}}}\n\
         \x20 - {{name: big, count: 1, members: 1, resources: {{cpu: \"4\"}}, runTime: 20s, arrival: {{start: 10s}}}}\n"
    );
    let w = in_temp_dir(&format!("shrink-{shrinkable}"), cluster, &text).unwrap();
    let mut s = muster_sim::scheduler("muster", &w).unwrap();
    let rec = muster_sim::engine::Engine::new(&w).unwrap().run(s.as_mut(), false).unwrap();
    (w, rec)
}

#[test]
fn a_shrinkable_job_gives_way_to_the_reserved_one_then_grows_back_and_the_pair_ends_sooner() {
    let span = |w: &muster_sim::Workload, rec: &muster_sim::engine::RunRecord, class: &str| {
        let j = &rec.jobs[w.jobs.iter().position(|j| j.class == class).unwrap()];
        (j.run_started_ms.unwrap() as f64 / 1000.0, j.ended_ms.unwrap() as f64 / 1000.0)
    };
    let (w, rigid) = trainer_and_big(false);
    assert_eq!(span(&w, &rigid, "trainer"), (0.0, 100.0));
    let (big_start, big_end) = span(&w, &rigid, "big");
    assert!(big_start >= 100.0 && big_end >= 120.0, "big waits for the trainer: {big_start}..{big_end}");
    let (w, shrunk) = trainer_and_big(true);
    let (big_start, big_end) = span(&w, &shrunk, "big");
    let (_, trainer_end) = span(&w, &shrunk, "trainer");
    // big starts once owed its reservation (the default policy is selective: at 3x its run time
    // of slowdown), on the node the trainer's 4 pods left; the trainer does 4 members' share of
    // big's 20 s later, when it has grown back: it ends 10 s later, and the pair 10 s sooner.
    assert!(big_start < 60.0, "big starts long before the trainer ends: {big_start}");
    assert!((big_end - big_start - 20.0).abs() < 1e-6, "{big_start}..{big_end}");
    assert!((109.0..=112.0).contains(&trainer_end), "the trainer loses about 10 s: ends at {trainer_end}");
    assert_eq!(shrunk.jobs.iter().map(|j| j.starts).collect::<Vec<_>>(), [1, 1], "nothing is evicted");
}

#[test]
fn a_rigid_class_cannot_be_shrinkable() {
    let cluster = "name: one\nnodeClasses:\n  - {name: n, count: 1, capacity: {cpu: \"4\"}}\n";
    let text = "name: t\ncluster: cluster.yaml\njobClasses:\n  - {name: r, count: 1, members: 2, resources: {cpu: \"1\"}, \
                runTime: 5s, shrinkable: true}\n";
    let e = in_temp_dir("shrink-rigid", cluster, text).unwrap_err().to_string();
    assert!(e.contains("jobClasses[0].shrinkable") && e.contains("only an elastic group"), "{e}");
}
