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
