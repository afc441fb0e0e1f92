//! Topology constraints in the simulator: a job that asks for one rack, the models that honour
//! it (Kueue's TAS, Volcano's network topology, native's TopologyAwareWorkloadScheduling, muster)
//! and those that cannot (the default scheduler, coscheduling), and what spreading costs.

use std::path::{Path, PathBuf};

use muster_sim::engine::{Engine, RunRecord};
use muster_sim::{SimError, Workload, scenario};

/// Two racks of two 4-cpu nodes. A filler pinned to n-0 (rack 0) runs 10 s, one pinned to n-2
/// (rack 1) runs 100 s; a gang of two whole-node pods that must share a rack arrives at once and
/// runs 50 s, twice that if spread. Instant control plane.
const CLUSTER: &str =
    "name: racks\nnodeClasses:\n  - {name: n, count: 4, capacity: {cpu: \"4\", pods: 110}, spread: {rack: 2}}\n";

fn workload(mode: &str) -> Result<Workload, SimError> {
    workload_running(mode, 50)
}

/// [`workload`] with a gang that runs `gang_s` seconds in one rack.
fn workload_running(mode: &str, gang_s: u32) -> Result<Workload, SimError> {
    let dir = std::env::temp_dir().join(format!("muster-sim-topology-{mode}-{gang_s}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("cluster.yaml"), CLUSTER).unwrap();
    let text = format!(
        "name: t\ncluster: cluster.yaml\ntiming: {{podCreateQps: 0, bindQps: 0, podStartDelay: 0s}}\njobClasses:\n\
         \x20 - {{name: filler-a, count: 1, members: 1, resources: {{cpu: \"4\"}}, runTime: 10s,\n\
         \x20    nodeSelector: {{kubernetes.io/hostname: n-0}}}}\n\
         \x20 - {{name: filler-b, count: 1, members: 1, resources: {{cpu: \"4\"}}, runTime: 100s,\n\
         \x20    nodeSelector: {{kubernetes.io/hostname: n-2}}}}\n\
         \x20 - {{name: gang, count: 1, members: 2, resources: {{cpu: \"4\"}}, runTime: {gang_s}s,\n\
         \x20    arrival: {{start: 1s}}, topology: {{level: rack, mode: {mode}, spanSlowdown: 2}}}}\n"
    );
    scenario::from_text("t.yaml", &text, &dir, 1)
}

fn run(w: &Workload, name: &str) -> RunRecord {
    let mut s = muster_sim::scheduler(name, w).unwrap();
    Engine::new(w).unwrap().run(s.as_mut(), false).unwrap()
}

/// The gang's record: (whether it ran spread, when it ended in seconds).
fn gang(w: &Workload, rec: &RunRecord) -> (Option<bool>, f64) {
    let i = w.jobs.iter().position(|j| j.class == "gang").unwrap();
    (rec.jobs[i].spread, rec.jobs[i].ended_ms.unwrap() as f64 / 1000.0)
}

/// Under each scheduler of `names`, the gang ran spread or not as `spread` says and ended within
/// `ended` (seconds).
fn expect_gang(w: &Workload, names: &[&str], spread: bool, ended: std::ops::RangeInclusive<f64>, why: &str) {
    for name in names {
        let (ran_spread, end) = gang(w, &run(w, name));
        assert_eq!(ran_spread, Some(spread), "{name}: {why}");
        assert!(ended.contains(&end), "{name}: ended at {end} s, not within {ended:?} s ({why})");
    }
}

#[test]
fn a_required_rack_waits_for_room_in_one_rack_where_the_model_has_topology() {
    let w = workload("required").unwrap();
    // Rack 0 frees at 10 s; the run takes 50 s (a model's own cycle may add a few seconds).
    expect_gang(&w, &["kueue", "volcano", "native", "muster"], false, 60.0..=66.0, "kept in one rack");
    // No topology: the gang takes n-1 and n-3 at once, and the spread run takes twice as long.
    expect_gang(&w, &["default", "coscheduling"], true, 101.0..=106.0, "spread at once");
}

#[test]
fn a_preferred_rack_is_given_up_where_no_rack_has_room() {
    let w = workload("preferred").unwrap();
    expect_gang(&w, &["kueue", "volcano", "native", "default"], true, 101.0..=106.0, "spread at once");
}

#[test]
fn a_gang_muster_spreads_declares_and_is_held_to_its_spread_run_time() {
    // muster ends a group that outruns its declared run time by more than a minute. The gang runs
    // 200 s in a rack and 400 s spread, and declares the 400 s, as a user held to a limit does;
    // muster spreads it at once and lets it finish.
    let w = workload_running("preferred", 200).unwrap();
    let gang = w.jobs.iter().find(|j| j.class == "gang").unwrap();
    assert_eq!(gang.expected_run_ms, Some(400_000), "declared for the spread placement");
    let rec = run(&w, "muster");
    let i = w.jobs.iter().position(|j| j.class == "gang").unwrap();
    assert_eq!(rec.jobs[i].spread, Some(true));
    assert_eq!(rec.jobs[i].phase, muster_sim::scheduler::JobPhase::Succeeded, "not ended at its limit");
}

/// Two blocks of two racks of two 4-cpu nodes (n-0..n-3 block 0, racks of n-0/1 and n-2/3). At
/// 1 s only n-1 (block 0) and n-5 (block 1) are free; n-0 frees at 10 s, the rest at 100 s. A gang
/// of two whole-node pods prefers a rack (`within` as given), runs 50 s, twice that if spread.
fn blocks_workload(within: &str) -> Workload {
    let dir = std::env::temp_dir().join(format!("muster-sim-within-{within}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cluster = "name: blocks\nnodeClasses:\n  - {name: n, count: 8, capacity: {cpu: \"4\", pods: 110}, \
                   spread: {block: 4, rack: 2}}\n";
    std::fs::write(dir.join("cluster.yaml"), cluster).unwrap();
    let filler = |node: u32, run: &str| {
        format!(
            "  - {{name: filler-{node}, count: 1, members: 1, resources: {{cpu: \"4\"}}, runTime: {run}, \
             nodeSelector: {{kubernetes.io/hostname: n-{node}}}}}\n"
        )
    };
    let fillers: String = [(0, "10s"), (2, "100s"), (3, "100s"), (4, "100s"), (6, "100s"), (7, "100s")]
        .iter()
        .map(|&(n, run)| filler(n, run))
        .collect();
    let text = format!(
        "name: t\ncluster: cluster.yaml\ntiming: {{podCreateQps: 0, bindQps: 0, podStartDelay: 0s}}\njobClasses:\n\
         {fillers}  - {{name: gang, count: 1, members: 2, resources: {{cpu: \"4\"}}, runTime: 50s, arrival: {{start: 1s}},\n\
         \x20   topology: {{level: rack, mode: preferred, spanSlowdown: 2{within}}}}}\n"
    );
    scenario::from_text("t.yaml", &text, &dir, 1).unwrap()
}

#[test]
fn a_preferred_rack_kept_within_a_block_waits_for_one_block_rather_than_spread_over_two() {
    let w = blocks_workload(", within: block");
    // n-0 frees at 10 s: then n-0 and n-1 share a rack (and a block). Native and Kueue take the
    // block as a required level (their one constraint); Volcano and muster prefer the rack in it.
    expect_gang(&w, &["kueue", "volcano", "native", "muster"], false, 60.0..=66.0, "kept within one block");
    expect_gang(&w, &["default", "coscheduling"], true, 101.0..=106.0, "spread over both blocks at once");
    // Without `within` the models that prefer take n-1 and n-5 at once.
    let anywhere = blocks_workload("");
    expect_gang(&anywhere, &["kueue", "volcano"], true, 101.0..=106.0, "spread over both blocks at once");
}

#[test]
fn a_topology_level_the_cluster_lacks_is_refused_with_the_field() {
    let dir = std::env::temp_dir().join(format!("muster-sim-topology-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("cluster.yaml"), CLUSTER).unwrap();
    let job = "jobClasses:\n  - {name: g, count: 1, members: 2, resources: {cpu: \"1\"}, runTime: 5s, topology: ";
    for (topology, field, hint) in [
        ("{level: pod, mode: required}", "jobClasses[0].topology.level", "levels are"),
        ("{level: rack, mode: always}", "jobClasses[0]", "required"),
        ("{level: rack, mode: required, spanSlowdown: 0.5}", "jobClasses[0].topology.spanSlowdown", "1..=100"),
        ("{level: rack, mode: required, within: block}", "jobClasses[0].topology.within", "make the level preferred"),
        (
            "{level: block, mode: preferred, within: rack}",
            "jobClasses[0].topology.within",
            "levels that do: [\"zone\"]",
        ),
    ] {
        let text = format!("name: t\ncluster: cluster.yaml\n{job}{topology}}}\n");
        let err = scenario::from_text("t.yaml", &text, &dir, 1).unwrap_err().to_string();
        assert!(err.contains(field) && err.contains(hint), "{topology}: {err}");
    }
}

fn suite(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/suite").join(name)
}

#[test]
fn on_the_topology_scenario_only_models_without_topology_spread_rack_bound_gangs() {
    let w = scenario::load(&suite("topology.yaml"), 1).unwrap();
    let required: Vec<usize> = (0..w.jobs.len())
        .filter(|&i| {
            w.jobs[i].topology.as_ref().is_some_and(|t| t.mode == muster_graph::jobspec::ConstraintMode::Required)
        })
        .collect();
    assert!(required.len() >= 8);
    let spread = |name: &str| {
        let rec = run(&w, name);
        assert!(rec.jobs.iter().all(|j| j.ended_ms.is_some()), "{name}: every job ends");
        required.iter().filter(|&&i| rec.jobs[i].spread == Some(true)).count()
    };
    for name in ["kueue", "volcano", "native", "muster"] {
        assert_eq!(spread(name), 0, "{name} honours required");
    }
    assert!(spread("default") * 2 > required.len(), "the default scheduler spreads most rack-bound gangs");
}
