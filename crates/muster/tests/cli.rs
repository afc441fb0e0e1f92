//! The muster binary driven as users and scripts drive it.

use std::io::Write;
use std::process::{Command, Output, Stdio};

fn repo() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn muster(args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_muster"))
        .args(args)
        .current_dir(repo())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("muster runs");
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn the_readme_tour_runs_clean() {
    let commands = std::fs::read_to_string(repo().join("scenarios/match/commands.txt")).unwrap();
    let out = muster(&["match", "scenarios/match/cluster.yaml", "--echo"], &commands);
    let text = stdout(&out);
    assert!(out.status.success(), "{text}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(!text.contains("error:"), "{text}");
    assert!(text.contains("allocated 1: mpi-16"), "{text}");
    assert!(text.contains("unsatisfiable: too-big: needs 40 members in one rack; the largest rack holds 16"));
    assert!(text.contains("reserved 4: big-cpu at time 3600"), "{text}");
    // After the reservation is cancelled at t=3600 the big group fits on the freed cpu nodes.
    assert!(text.contains("allocated 5: big-cpu"), "{text}");
}

#[test]
fn the_socket_tour_holds_sockets_whole_and_exports_what_it_holds() {
    let commands = std::fs::read_to_string(repo().join("scenarios/match/sockets-commands.txt")).unwrap();
    let out = muster(&["match", "scenarios/match/sockets.json", "--echo"], &commands);
    let text = stdout(&out);
    assert!(out.status.success(), "{text}\n{}", String::from_utf8_lossy(&out.stderr));
    // The 4-core task breaks into socket0 of node0, so the ranks take the three idle sockets
    // left, and the third pair waits for node0's socket0 (the task ends at 300).
    assert!(text.contains("0        node0                        socket1          gpu2,gpu3"), "{text}");
    assert!(
        text.contains("busy: ranks: needs 2 whole sockets, each idle and large enough; 1 such sockets are idle now"),
        "{text}"
    );
    assert!(text.contains("reserved 3: ranks at time 300"), "{text}");
    // `jgf 2` is a graph of what the ranks hold: two sockets of 8 cores, 64 GB and 2 GPUs.
    let start = text.find("> jgf 2\n").unwrap() + "> jgf 2\n".len();
    let end = text[start..].find("\n> ").unwrap() + start;
    let dir = std::env::temp_dir().join(format!("muster-sockets-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("alloc.json");
    std::fs::write(&file, &text[start..end]).unwrap();
    let described = stdout(&muster(&["cluster", "describe", file.to_str().unwrap()], ""));
    for want in ["nodes: 2", "cpu", "16", "128Gi", "nvidia.com/gpu"] {
        assert!(described.contains(want), "{want}: {described}");
    }
}

#[test]
fn bad_commands_and_files_are_refused_and_the_loop_goes_on() {
    let out = muster(
        &["match", "scenarios/match/cluster.yaml"],
        "cancel 99\nfrobnicate\nmatch allocate /nonexistent.yaml\nmatch alocate /nonexistent.yaml\ntime -5\n\
         match allocate scenarios/match/mpi-16.yaml\n",
    );
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "failed commands give exit status 1");
    assert!(text.contains("error: no allocation with id 99"), "{text}");
    assert!(text.contains("type help for the commands"), "{text}");
    assert!(text.contains("cannot read /nonexistent.yaml"), "{text}");
    assert!(text.contains("unknown match operation \"alocate\"; allowed: allocate,"), "the typo, not the file: {text}");
    assert_eq!(text.matches("cannot read").count(), 1, "{text}");
    assert!(text.contains("allocated 1: mpi-16"), "the loop continued: {text}");
}

#[test]
fn a_reclaim_case_replays_with_a_queue_file() {
    let commands = std::fs::read_to_string(repo().join("scenarios/match/reclaim/commands.txt")).unwrap();
    let queues = "scenarios/match/reclaim/queues.yaml";
    let out = muster(&["match", "scenarios/match/reclaim/cluster.yaml", "--queues", queues, "--echo"], &commands);
    let text = stdout(&out);
    assert!(out.status.success(), "{text}\n{}", String::from_utf8_lossy(&out.stderr));
    // Team A borrowed B's half; B's 2-node job takes it back from A's two latest jobs, whole.
    assert!(text.contains("team-a           nvidia.com/gpu                 32           16         16"), "{text}");
    assert!(text.contains("a3: Running -> Evicted: borrowed quota reclaimed by match/b1"), "{text}");
    assert!(text.contains("a4: Running -> Evicted: borrowed quota reclaimed by match/b1"), "{text}");
    assert!(text.contains("b1: Queued -> Admitted: admitted after preempting match/a3, match/a4"), "{text}");
    assert!(!text.contains("a1: Running -> Evicted") && !text.contains("a2: Running -> Evicted"), "{text}");
    assert!(text.contains("team-b           nvidia.com/gpu                 16           16          0"), "{text}");
}

#[test]
fn a_calendar_reservation_replays_with_a_queue_file() {
    let commands = std::fs::read_to_string(repo().join("scenarios/match/reservation/commands.txt")).unwrap();
    let queues = "scenarios/match/reservation/queues.yaml";
    let out = muster(&["match", "scenarios/match/reservation/cluster.yaml", "--queues", queues, "--echo"], &commands);
    let text = stdout(&out);
    assert!(out.status.success(), "{text}\n{}", String::from_utf8_lossy(&out.stderr));
    // At 08:00 the one-hour job ends as the window opens: it backfills the booked nodes.
    assert!(text.contains("t=28800 s short: Queued -> Admitted: admitted: all members placed [booked-0x1 booked-1x1]"));
    // The two-hour jobs would run into the window: one takes the shared nodes, the other waits.
    assert!(text.contains("long1: Queued -> Admitted: admitted: all members placed [shared-0x1 shared-1x1]"), "{text}");
    assert!(!text.contains("long2: Queued -> Admitted"), "{text}");
    // Team A's run, submitted at 08:55, starts at 09:00 on the booked nodes.
    assert!(!text.contains("t=32100 s train: Queued -> Admitted"), "{text}");
    assert!(text.contains("t=32400 s train: Queued -> Admitted: admitted: all members placed [booked-0x1 booked-1x1]"));
}

#[test]
fn a_queue_session_refuses_unknown_queues_classes_and_groups() {
    let queues = "scenarios/match/reclaim/queues.yaml";
    let out = muster(
        &["match", "scenarios/match/reclaim/cluster.yaml", "--queues", queues],
        "submit team-z x scenarios/match/reclaim/node-job.yaml\n\
         submit team-a x scenarios/match/reclaim/node-job.yaml urgent\n\
         finish nobody\n\
         match allocate scenarios/match/reclaim/node-job.yaml\n\
         submit team-a x scenarios/match/reclaim/node-job.yaml high\n",
    );
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("no queue \"team-z\"; the queue file has [\"team-a\", \"team-b\"]"), "{text}");
    assert!(text.contains("no priority class \"urgent\""), "{text}");
    assert!(text.contains("no group \"nobody\"; submit it first"), "{text}");
    assert!(text.contains("cannot parse \"match allocate"), "{text}");
    assert!(text.contains("x: New -> Queued: submitted"), "the loop went on: {text}");
}

#[test]
fn a_queue_session_shows_which_reservation_holds_nothing_and_why() {
    let dir = std::env::temp_dir().join(format!("muster-cli-res-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let queues = dir.join("queues.yaml");
    std::fs::write(
        &queues,
        "queues: [{name: team-a}, {name: team-b}]\nreservations:\n\
         \x20 - {name: r1, queues: [team-a], nodeSelector: {pool: booked}, start: 100, end: 500}\n\
         \x20 - {name: r2, queues: [team-b], nodeSelector: {pool: booked}, start: 200, end: 600}\n",
    )
    .unwrap();
    let out = muster(
        &["match", "scenarios/match/reservation/cluster.yaml", "--queues", queues.to_str().unwrap()],
        "time 250\nschedule\nreservations\n",
    );
    let text = stdout(&out);
    let line = |name: &str| text.lines().find(|l| l.starts_with(name)).unwrap_or_default().to_string();
    assert!(line("r1 ").contains("booked-0"), "{text}");
    assert!(line("r2 ").contains("none: reservation \"r2\" overlaps reservation \"r1\""), "{text}");
}

#[test]
fn a_queue_session_deletes_a_group_so_its_name_may_be_submitted_again() {
    let queues = "scenarios/match/reclaim/queues.yaml";
    let job = "scenarios/match/reclaim/node-job.yaml";
    let out = muster(
        &["match", "scenarios/match/reclaim/cluster.yaml", "--queues", queues],
        &format!("submit team-a x {job} high\nsubmit team-a x {job} high\ndelete x\nsubmit team-a x {job} high\n"),
    );
    let text = stdout(&out);
    assert!(text.contains("group match/x already exists (delete it first)"), "{text}");
    assert_eq!(text.matches("x: New -> Queued: submitted").count(), 2, "submitted again once deleted: {text}");
}

#[test]
fn a_bad_graph_names_the_file_and_field() {
    let dir = std::env::temp_dir().join(format!("muster-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("c.yaml");
    std::fs::write(&file, "name: c\nnodeClasses:\n  - name: a\n    count: 0\n    capacity: {cpu: 1}\n").unwrap();
    let out = muster(&["match", file.to_str().unwrap()], "");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2));
    assert!(err.contains("c.yaml: nodeClasses[0].count: 0 is out of range"), "{err}");
}

#[test]
fn cluster_nodes_renders_kwok_nodes() {
    let out = muster(&["cluster", "nodes", "scenarios/clusters/seed-scalability.yaml"], "");
    assert!(out.status.success());
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let items = list["items"].as_array().unwrap();
    assert_eq!(items.len(), 101);
    let worker = &items[0];
    assert_eq!(worker["metadata"]["name"], "worker-0");
    assert_eq!(worker["metadata"]["annotations"]["kwok.x-k8s.io/node"], "fake");
    assert_eq!(worker["metadata"]["labels"]["muster.dev/rack"], "worker-rack-0");
    assert_eq!(worker["status"]["allocatable"]["memory"], "100Gi");
    let probe = &items[100];
    assert_eq!(probe["spec"]["taints"][0]["key"], "muster.dev/probe");
}

#[test]
fn jgf_export_reimports_to_the_same_graph() {
    let out = muster(&["cluster", "jgf", "scenarios/match/cluster.yaml"], "");
    assert!(out.status.success());
    let dir = std::env::temp_dir().join(format!("muster-jgf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("g.json");
    std::fs::write(&file, &out.stdout).unwrap();
    let again = muster(&["cluster", "jgf", file.to_str().unwrap()], "");
    assert!(stdout(&out) == stdout(&again), "export -> import -> export changed the document");
    let described = muster(&["cluster", "describe", file.to_str().unwrap()], "");
    assert!(stdout(&described).contains("nodes: 24"), "{}", stdout(&described));
}

#[test]
fn sim_runs_the_built_in_suite_deterministically() {
    let run = |seed: &str| muster(&["sim", "--schedulers", "default,kueue", "--seed", seed], "");
    let first = run("7");
    assert!(first.status.success(), "{}", String::from_utf8_lossy(&first.stderr));
    let text = stdout(&first);
    assert!(text.starts_with("built-in suite (seed 7)"), "{text}");
    for scenario in ["seed-001", "seed-scalability", "gpu-burst", "starvation", "elastic", "topology"] {
        let rows = text.lines().filter(|l| l.starts_with(&format!("{scenario} "))).count();
        let tables = if scenario == "topology" { 4 } else { 3 };
        assert_eq!(rows, tables, "{scenario}: a row in each of the tables that concern it\n{text}");
    }
    assert!(text.contains("DEFAULT") && text.contains("KUEUE"), "a column per scheduler\n{text}");
    assert_eq!(text, stdout(&run("7")), "same seed, same output");
    assert_ne!(text, stdout(&run("8")), "the seed changes the workload");
}

#[test]
fn sim_refuses_flags_it_would_ignore() {
    for (args, says) in [
        (&["--cluster", "scenarios/clusters/gpu-8.yaml"][..], "--cluster is for --history"),
        (&["--since", "0"][..], "--history"),
        (&["--schedulers", "muster,kueue,muster"][..], "lists \"muster\" twice"),
    ] {
        let mut all = vec!["sim", "scenarios/suite/seed-001.yaml"];
        all.extend(args);
        let out = muster(&all, "");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(says), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}: nothing is run");
    }
}

/// `--jobs` lists each job under each scheduler, and agrees with the run's own figures: as many
/// completed as the JSON counts, and the completed jobs' waits are its sorted waits.
#[test]
fn sim_writes_each_jobs_outcome() {
    let dir = std::env::temp_dir().join(format!("muster-sim-jobs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (jobs, json) = (dir.join("jobs.csv"), dir.join("run.json"));
    let out = muster(
        &[
            "sim",
            "scenarios/swf-example-procs.yaml",
            "--schedulers",
            "muster-fifo,muster-easy",
            "--no-estimates",
            "--jobs",
            jobs.to_str().unwrap(),
            "--json",
            json.to_str().unwrap(),
        ],
        "",
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let csv = std::fs::read_to_string(&jobs).unwrap();
    let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap_or_else(|| panic!("no {name} column"));
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    let jobs_in_scenario = report["jobs"].as_u64().unwrap() as usize;
    assert_eq!(rows.len(), 2 * jobs_in_scenario, "a line per job and scheduler");
    for run in report["runs"].as_array().unwrap() {
        let scheduler = run["scheduler"].as_str().unwrap();
        let mine: Vec<&Vec<&str>> = rows.iter().filter(|r| r[col("scheduler")] == scheduler).collect();
        let completed: Vec<&&Vec<&str>> = mine.iter().filter(|r| r[col("outcome")] == "completed").collect();
        assert_eq!(completed.len() as u64, run["completed"].as_u64().unwrap(), "{scheduler}");
        let mut waits: Vec<f64> = completed.iter().map(|r| r[col("wait_s")].parse().unwrap()).collect();
        waits.sort_by(f64::total_cmp);
        let expected: Vec<f64> = run["waits_s"].as_array().unwrap().iter().map(|w| w.as_f64().unwrap()).collect();
        assert_eq!(waits, expected, "{scheduler}: the jobs' waits are the run's");
        for r in &completed {
            let (submitted, placed): (f64, f64) =
                (r[col("submitted_s")].parse().unwrap(), r[col("placed_s")].parse().unwrap());
            assert!(submitted <= placed, "{scheduler}: placed before it came: {r:?}");
        }
    }
    let starts = |s: &str| -> Vec<&str> {
        rows.iter().filter(|r| r[col("scheduler")] == s).map(|r| r[col("placed_s")]).collect()
    };
    assert_ne!(starts("muster-fifo"), starts("muster-easy"), "EASY backfills where FIFO does not");
}

/// The suite tables in README.md and docs/benchmarks.md are what `muster sim` prints now. A
/// table is shown in a ```text block whose first line is the command (`$ muster sim ARGS`);
/// each blank-line-separated part of the block must be a part of that command's output, verbatim.
#[test]
fn the_suite_tables_in_the_docs_are_what_muster_sim_prints() {
    let docs: Vec<(&str, String)> = ["README.md", "docs/benchmarks.md"]
        .into_iter()
        .map(|doc| (doc, std::fs::read_to_string(repo().join(doc)).unwrap()))
        .collect();
    // (doc, the arguments after `muster`, the tables shown)
    let mut shown: Vec<(&str, &str, &str)> = Vec::new();
    for (doc, text) in &docs {
        for block in text.split("```text\n").skip(1).map(|rest| rest.split("\n```").next().unwrap()) {
            let (first, tables) = block.split_once('\n').unwrap_or((block, ""));
            match first.strip_prefix("$ muster ").filter(|args| args.starts_with("sim")) {
                Some(args) => shown.push((doc, args, tables)),
                None => assert!(
                    !block.contains("LOWER BOUND (s)"),
                    "{doc}: a suite table without its `$ muster sim` line\n{block}"
                ),
            }
        }
    }
    // Each command once, the commands side by side (a debug build takes about half a minute each).
    let commands: std::collections::BTreeSet<&str> = shown.iter().map(|&(_, args, _)| args).collect();
    let printed: std::collections::HashMap<&str, String> = std::thread::scope(|s| {
        let runs: Vec<_> = commands
            .iter()
            .map(|&args| (args, s.spawn(move || muster(&args.split_whitespace().collect::<Vec<_>>(), ""))))
            .collect();
        runs.into_iter()
            .map(|(args, run)| {
                let out = run.join().unwrap();
                assert!(out.status.success(), "`muster {args}`: {}", String::from_utf8_lossy(&out.stderr));
                (args, stdout(&out))
            })
            .collect()
    });
    let mut checked = 0;
    for (doc, args, tables) in shown {
        let output = &printed[args];
        let parts: Vec<&str> = output.split("\n\n").map(str::trim_end).collect();
        for table in tables.split("\n\n").map(str::trim_end) {
            assert!(
                parts.contains(&table),
                "{doc}: `muster {args}` no longer prints\n{table}\n\nit prints\n{output}\nrun it (release build) and copy its output"
            );
            checked += 1;
        }
    }
    assert!(checked >= 9, "the README's table and the suite's and policies' four each: {checked}");
}

#[test]
fn version_names_the_commit_and_the_build_date() {
    let out = muster(&["--version"], "");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = stdout(&out);
    let prefix = concat!("muster ", env!("CARGO_PKG_VERSION"), " (commit ");
    let rest = text.trim_end().strip_prefix(prefix).unwrap_or_else(|| panic!("{text:?} starts with {prefix:?}"));
    let (commit, date) = rest.strip_suffix(')').and_then(|r| r.split_once(", built ")).expect("(commit C, built D)");
    // YYYY-MM-DD
    assert!(
        date.len() == 10
            && date.chars().enumerate().all(|(i, c)| if i == 4 || i == 7 { c == '-' } else { c.is_ascii_digit() }),
        "build date {date:?}"
    );
    // The commit this tree is at, when git can tell (build.rs reruns whenever HEAD moves).
    let head = Command::new("git").args(["rev-parse", "--short=12", "HEAD"]).current_dir(repo()).output();
    match head {
        Ok(h) if h.status.success() => assert_eq!(commit, String::from_utf8_lossy(&h.stdout).trim(), "{text}"),
        _ => assert_eq!(commit, "unknown", "{text}"),
    }
}

/// The chart installs the muster it names: its appVersion (the default image tag) is the
/// workspace's version, the one `muster --version` prints.
#[test]
fn the_charts_app_version_is_the_crate_version() {
    let chart = std::fs::read_to_string(repo().join("deploy/chart/Chart.yaml")).unwrap();
    let app_version = chart
        .lines()
        .find_map(|l| l.strip_prefix("appVersion:"))
        .map(|v| v.trim().trim_matches('"'))
        .expect("deploy/chart/Chart.yaml has an appVersion");
    assert_eq!(
        app_version,
        env!("CARGO_PKG_VERSION"),
        "set appVersion in deploy/chart/Chart.yaml to the crate version"
    );
}

#[test]
fn why_refuses_an_empty_name_once_before_reaching_a_cluster() {
    let out = muster(&["why", ""], "");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.matches("error:").count(), 1, "{err}");
    assert!(err.contains("<JOB>"), "names the argument: {err}");
}
