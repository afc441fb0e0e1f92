//! What-if on a cluster's own history: the runs a real store recorded, exported with names
//! hidden, replayed by `muster sim` on the cluster as it was and changed.

use std::process::{Command, Output};

use muster_sim::history::{self, RecordedRun};
use muster_store::testing::TempDir;
use muster_store::{RunRecord, SqliteStore, Store, Write};
use serde_json::json;

fn repo() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn muster(args: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_muster")).args(args).current_dir(repo()).output().expect("muster runs");
    assert!(out.status.success(), "muster {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    out
}

fn text(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Eight groups of team-a, one of them evicted once and run again: nine runs, eight that count.
fn recorded_store(dir: &TempDir) -> String {
    let path = dir.0.join("muster.db");
    let mut store = SqliteStore::open(&path).unwrap();
    let fence = store.acquire_lease("engine", "test", 0, 1000).unwrap().unwrap();
    let run = |i: i64, started: i64, ended: i64, outcome: &str| {
        Write::AddRun(RunRecord {
            group_key: format!("team-a/train-{i}"),
            queue: "default".into(),
            priority: 0,
            submitted_at: 1_000 + i * 10,
            started_at: started,
            ended_at: ended,
            members: 4,
            outcome: outcome.into(),
            request: json!({"name": format!("train-{i}"), "min": 4, "max": 4,
                            "requests": [["cpu", 32000], ["memory", 64u64 << 30]], "duration": 3600}),
        })
    };
    let mut writes: Vec<Write> = (0..8).map(|i| run(i, 1_000 + i * 10, 4_600 + i * 10, "Succeeded")).collect();
    writes.push(run(7, 1_100, 1_200, "Evicted"));
    store.apply(&fence, 10, &writes).unwrap();
    format!("sqlite:{}", path.display())
}

fn runs_of(o: &Output) -> Vec<RecordedRun> {
    history::parse("export", &text(o)).unwrap()
}

#[test]
fn an_export_hides_names_unless_asked_and_keeps_every_run() {
    let dir = TempDir::new("muster-history");
    let store = recorded_store(&dir);
    let hidden = runs_of(&muster(&["history", "export", "--store", &store]));
    assert_eq!(hidden.len(), 9);
    assert!(hidden.iter().all(|r| r.group.starts_with("g-") && !r.request.name.contains("train")), "{hidden:?}");
    assert!(hidden.iter().all(|r| r.queue == "default"), "queue names kept for quotas");
    let evicted = hidden.iter().find(|r| r.outcome == "Evicted").unwrap();
    assert_eq!(hidden.iter().filter(|r| r.group == evicted.group).count(), 2, "one group, one hash");
    let kept = runs_of(&muster(&["history", "export", "--store", &store, "--keep-names"]));
    assert!(kept.iter().any(|r| r.group == "team-a/train-3"));
    let late = runs_of(&muster(&["history", "export", "--store", &store, "--since", "4650"]));
    assert_eq!(late.len(), 3, "ended at 4650, 4660, 4670");
}

/// Makespan of one scheduler from `muster sim --json`.
fn makespan(json_path: &std::path::Path, scheduler: &str) -> f64 {
    let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(json_path).unwrap()).unwrap();
    let run = report["runs"].as_array().unwrap().iter().find(|r| r["scheduler"] == scheduler).unwrap();
    run["makespan_s"].as_f64().expect("a makespan")
}

#[test]
fn a_replay_runs_the_recorded_jobs_on_the_cluster_as_it_was_and_changed() {
    let dir = TempDir::new("muster-history");
    let store = recorded_store(&dir);
    let export = dir.0.join("runs.jsonl");
    std::fs::write(&export, text(&muster(&["history", "export", "--store", &store]))).unwrap();
    let small = dir.0.join("cpu-4.yaml");
    std::fs::write(&small, "name: cpu-4\nnodeClasses:\n  - name: node\n    count: 4\n    capacity: {cpu: \"32\", memory: 128Gi, pods: 110}\n").unwrap();
    let (as_was, changed) = (dir.0.join("as-was.json"), dir.0.join("changed.json"));
    let replay = |source: &str, cluster: &str, json: &std::path::Path| {
        text(&muster(&[
            "sim",
            "--history",
            source,
            "--cluster",
            cluster,
            "--schedulers",
            "muster,kueue",
            "--json",
            json.to_str().unwrap(),
        ]))
    };
    let from_file = replay(export.to_str().unwrap(), "scenarios/clusters/cpu-16.yaml", &as_was);
    assert!(from_file.contains("8 jobs on cpu-16"), "the evicted run is not a job of its own: {from_file}");
    let line = from_file.lines().find(|l| l.starts_with("jobs completed")).unwrap();
    assert!(line.split_whitespace().skip(2).all(|w| w == "8"), "every scheduler completes the 8: {line}");
    // 8 jobs of 4 whole nodes each, an hour: on 16 nodes two rounds, on 4 nodes eight.
    let (big, tiny) = (makespan(&as_was, "muster"), {
        replay(&store, small.to_str().unwrap(), &changed);
        makespan(&changed, "muster")
    });
    assert!((7_200.0..7_400.0).contains(&big), "{big}");
    assert!((28_800.0..29_200.0).contains(&tiny), "{tiny}");
    // The queue given a quota of one job's cpu: one at a time on the cluster as it was.
    let tenants = dir.0.join("tenants.yaml");
    std::fs::write(&tenants, "queues:\n  - name: default\n    quotas: {cpu: {nominal: 128}}\n").unwrap();
    let quota = dir.0.join("quota.json");
    let cluster = "scenarios/clusters/cpu-16.yaml";
    let args = ["sim", "--history", &store, "--cluster", cluster, "--tenants", tenants.to_str().unwrap()];
    muster(&[&args[..], &["--schedulers", "muster", "--json", quota.to_str().unwrap()]].concat());
    let one_at_a_time = makespan(&quota, "muster");
    assert!((28_800.0..29_200.0).contains(&one_at_a_time), "{one_at_a_time}");
}

#[test]
fn bad_history_input_names_the_line_and_the_flag() {
    let dir = TempDir::new("muster-history");
    let bad = dir.0.join("bad.jsonl");
    std::fs::write(&bad, "{\"group\": \"a\"}\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_muster"))
        .args(["sim", "--history", bad.to_str().unwrap(), "--cluster", "scenarios/clusters/cpu-16.yaml"])
        .current_dir(repo())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("line 1") && err.contains("missing field"), "{err}");
    let out = Command::new(env!("CARGO_BIN_EXE_muster"))
        .args(["sim", "--history", "x.jsonl"])
        .current_dir(repo())
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("--cluster"), "{}", String::from_utf8_lossy(&out.stderr));
    let out = Command::new(env!("CARGO_BIN_EXE_muster"))
        .args(["history", "export", "--store", "sqlite:/nonexistent/muster.db"])
        .current_dir(repo())
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("no such file"), "{}", String::from_utf8_lossy(&out.stderr));
    let out = Command::new(env!("CARGO_BIN_EXE_muster"))
        .args(["history", "export", "--store", "muster.db"])
        .current_dir(repo())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("not a store URL; give sqlite:PATH"), "{err}");
}
