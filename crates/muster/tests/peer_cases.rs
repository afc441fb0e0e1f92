//! The peers' own reclaim, preemption and quota test cases (Kueue, KAI scheduler, Volcano),
//! written as muster inputs under scenarios/match/peer-cases/ and replayed through
//! `muster match --queues`. Each case's commands.txt cites the peer's test and says where muster's
//! answer differs and why; this file holds muster's answer: who was evicted, and at the end who
//! holds an allocation and who waits.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

const CASES_DIR: &str = "scenarios/match/peer-cases";

/// muster's outcome of one case, by group name.
struct Case {
    dir: &'static str,
    /// Groups evicted at any point (preempted or reclaimed), always whole.
    evicted: &'static [&'static str],
    /// Groups holding an allocation at the end (admitted or running).
    placed: &'static [&'static str],
    /// Groups pending at the end (queued or reserved).
    waiting: &'static [&'static str],
}

const CASES: &[Case] = &[
    Case { dir: "kueue-preempt-lowest-priority", evicted: &["low"], placed: &["high", "in", "mid"], waiting: &["low"] },
    Case { dir: "kueue-preempt-multiple", evicted: &["low", "mid"], placed: &["high", "in"], waiting: &["low", "mid"] },
    Case { dir: "kueue-not-enough-low-priority", evicted: &[], placed: &["low", "mid"], waiting: &["in"] },
    Case {
        dir: "kueue-reclaim-from-borrower",
        evicted: &["c2-mid"],
        placed: &["c1-low", "c2-high", "in"],
        waiting: &["c2-mid"],
    },
    Case {
        dir: "kueue-no-reclaim-while-borrowing",
        evicted: &[],
        placed: &["c1-high", "c2-low-1", "c2-low-2"],
        waiting: &["in"],
    },
    Case {
        dir: "kueue-preempt-locally-then-borrow",
        evicted: &["c1-low"],
        placed: &["c1-med", "c2-low-1", "in"],
        waiting: &["c1-low"],
    },
    // Differs from Kueue (which evicts nobody): muster's reclaim has no priority condition.
    Case {
        dir: "kueue-reclaim-from-same-priority",
        evicted: &["c2-1"],
        placed: &["c1-job", "c2-2", "in"],
        waiting: &["c2-1"],
    },
    Case {
        dir: "kueue-preempt-in-queue-and-cohort",
        evicted: &["c1-low", "c2-low"],
        placed: &["c1-mid", "c2-mid", "in"],
        waiting: &["c1-low", "c2-low"],
    },
    Case {
        dir: "kueue-reclaim-from-lender",
        evicted: &["lend2-mid"],
        placed: &["in", "lend1-low", "lend2-high"],
        waiting: &["lend2-mid"],
    },
    Case { dir: "kueue-lending-limit-caps-borrower", evicted: &[], placed: &[], waiting: &["in"] },
    Case {
        dir: "kueue-fair-reclaim-from-queue-using-most",
        evicted: &["b1"],
        placed: &["a1", "a2", "a3", "b2", "b3", "b4", "b5", "c1", "in"],
        waiting: &["b1"],
    },
    Case {
        dir: "kueue-fair-preempt-from-target-and-others",
        evicted: &["a1-low", "b1"],
        placed: &["a2-low", "b2", "in"],
        waiting: &["a1-low", "b1"],
    },
    Case {
        dir: "kueue-fair-preempt-same-queue-and-highest-user",
        evicted: &["a-low", "b1"],
        placed: &["a2", "a3", "b2", "b3", "b4", "b5", "b6", "in"],
        waiting: &["a-low", "b1"],
    },
    Case {
        dir: "kueue-fair-preempt-lower-priority-same-queue",
        evicted: &["a1-low", "a2-low"],
        placed: &["a3", "a4", "b1", "b2", "b3", "b4", "b5", "in"],
        waiting: &["a1-low", "a2-low"],
    },
    Case {
        dir: "kueue-fair-no-preempt-that-switches-imbalance",
        evicted: &[],
        placed: &["a1", "a2", "a3", "b1", "b2", "b3", "b4", "b5"],
        waiting: &["in"],
    },
    Case {
        dir: "kueue-hierarchy-spares-queue-within-nominal",
        evicted: &["admitted2"],
        placed: &["admitted1", "in"],
        waiting: &["admitted2"],
    },
    Case {
        dir: "kueue-hierarchy-advantage-reclaims-multiple",
        evicted: &["admitted1", "admitted2"],
        placed: &["in"],
        waiting: &["admitted1", "admitted2"],
    },
    Case {
        dir: "kueue-hierarchy-spares-subtree-within-quota",
        evicted: &[],
        placed: &["admitted-other-1", "admitted-other-2", "admitted-same-cohort"],
        waiting: &["in"],
    },
    Case {
        dir: "kueue-hierarchy-reclaim-complex-tree",
        evicted: &["borrowing-1", "borrowing-4"],
        placed: &["borrowing-2", "borrowing-3", "borrowing-5", "borrowing-6", "borrowing-7", "borrowing-8", "in"],
        waiting: &["borrowing-1", "borrowing-4"],
    },
    Case {
        dir: "kai-reclaim-whole-gang",
        evicted: &["running_job0"],
        placed: &["pending_job0"],
        waiting: &["running_job0"],
    },
    Case {
        dir: "kai-reclaim-gang-across-nodes",
        evicted: &["running-job0"],
        placed: &["pending-job"],
        waiting: &["running-job0"],
    },
    Case { dir: "kai-no-reclaim-over-deserved", evicted: &[], placed: &["running_job0"], waiting: &["pending_job0"] },
    Case {
        dir: "kai-no-reclaim-if-gang-cannot-fit",
        evicted: &[],
        placed: &["running_job0"],
        waiting: &["pending_job0"],
    },
    Case {
        dir: "kai-preempt-whole-gang",
        evicted: &["running_job0"],
        placed: &["pending_job0"],
        waiting: &["running_job0"],
    },
    // Differs from KAI (nothing evicted): the preemptor may borrow idle quota, as in Kueue.
    Case {
        dir: "kai-preempt-over-deserved",
        evicted: &["running_job0"],
        placed: &["pending_job0"],
        waiting: &["running_job0"],
    },
    // As KAI: the shrinkable elastic job gives back the task above its minimum and keeps the other.
    Case { dir: "kai-reclaim-elastic-surplus", evicted: &[], placed: &["pending-job", "running-job"], waiting: &[] },
    Case { dir: "volcano-preempt-low-priority-same-queue", evicted: &["pg1"], placed: &["pg2"], waiting: &["pg1"] },
    Case { dir: "volcano-no-preempt-when-both-fit", evicted: &[], placed: &["pg1", "pg2"], waiting: &[] },
    Case { dir: "volcano-no-preempt-over-capability", evicted: &[], placed: &["pg1"], waiting: &["pg2"] },
    // As Volcano: the shrinkable pod group gives back the pod above its minimum and keeps the other.
    Case { dir: "volcano-capacity-reclaim-below-deserved", evicted: &[], placed: &["pg5", "pg6"], waiting: &[] },
];

/// What one replay said: every group's states in order, and whether it was ever evicted.
#[derive(Default)]
struct Outcome {
    last_state: BTreeMap<String, String>,
    evicted: BTreeSet<String>,
}

impl Outcome {
    /// Reads the transition lines `t=60 s NAME: FROM -> TO: reason [...]`.
    fn read(text: &str) -> Self {
        let mut o = Outcome::default();
        for line in text.lines().filter(|l| l.starts_with("t=")) {
            let Some((_, change)) = line.split_once(" s ") else { continue };
            let Some((name, rest)) = change.split_once(": ") else { continue };
            let Some((_, rest)) = rest.split_once(" -> ") else { continue };
            let to = rest.split(':').next().unwrap_or_default();
            if to == "Evicted" {
                o.evicted.insert(name.to_string());
            }
            o.last_state.insert(name.to_string(), to.to_string());
        }
        o
    }

    fn in_states(&self, states: &[&str]) -> BTreeSet<String> {
        self.last_state.iter().filter(|(_, s)| states.contains(&s.as_str())).map(|(n, _)| n.clone()).collect()
    }
}

fn names(list: &[&str]) -> BTreeSet<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// Replays a case: its commands through `muster match CLUSTER --queues QUEUES`.
fn replay(dir: &str) -> Result<String, String> {
    let case = format!("{CASES_DIR}/{dir}");
    let commands = std::fs::read_to_string(repo().join(&case).join("commands.txt")).map_err(|e| e.to_string())?;
    let mut child = Command::new(env!("CARGO_BIN_EXE_muster"))
        .args(["match", &format!("{case}/cluster.yaml"), "--queues", &format!("{case}/queues.yaml"), "--echo"])
        .current_dir(repo())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    child.stdin.take().unwrap().write_all(commands.as_bytes()).map_err(|e| e.to_string())?;
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() || text.contains("error:") {
        return Err(format!("{text}\n{}", String::from_utf8_lossy(&out.stderr)));
    }
    Ok(text)
}

#[test]
fn the_peers_cases_replay_with_musters_answers() {
    let mut failures = Vec::new();
    for case in CASES {
        let text = match replay(case.dir) {
            Ok(text) => text,
            Err(e) => {
                failures.push(format!("{}: the replay failed:\n{e}", case.dir));
                continue;
            }
        };
        let o = Outcome::read(&text);
        let checks = [
            ("evicted", &o.evicted, names(case.evicted)),
            ("placed at the end", &o.in_states(&["Admitted", "Running"]), names(case.placed)),
            ("waiting at the end", &o.in_states(&["Queued", "Reserved"]), names(case.waiting)),
        ];
        for (what, got, want) in checks {
            if *got != want {
                failures.push(format!("{}: {what}: got {got:?}, want {want:?}\n{text}", case.dir));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// A case directory's name prefix, and how its commands.txt opens: the peer and its repository.
const PEERS: &[(&str, &str)] = &[
    ("kueue-", "# Kueue, kubernetes-sigs/kueue pkg/"),
    ("kai-", "# KAI scheduler, NVIDIA/KAI-Scheduler pkg/"),
    ("volcano-", "# Volcano, volcano-sh/volcano pkg/"),
];

#[test]
fn every_case_is_replayed_and_cites_its_peer_test() {
    let listed: BTreeSet<&str> = CASES.iter().map(|c| c.dir).collect();
    let mut on_disk = BTreeSet::new();
    for entry in std::fs::read_dir(repo().join(CASES_DIR)).unwrap() {
        let dir = entry.unwrap().file_name().into_string().unwrap();
        let text = std::fs::read_to_string(repo().join(CASES_DIR).join(&dir).join("commands.txt")).unwrap();
        let cites = PEERS.iter().any(|(prefix, header)| dir.starts_with(prefix) && text.starts_with(header));
        assert!(cites, "{dir}/commands.txt must open with the peer's repository, file and test");
        on_disk.insert(dir);
    }
    let on_disk: BTreeSet<&str> = on_disk.iter().map(String::as_str).collect();
    assert_eq!(listed, on_disk, "every case directory has its expected outcome here, and no more");
}
