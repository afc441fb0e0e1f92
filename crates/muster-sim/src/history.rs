//! A cluster's own history as a workload: what-if replays. muster's store records every
//! placement that ends (`runs`); `muster history export` writes them as JSON Lines, one
//! [`RecordedRun`] per line, and a scenario's `history` section (or `muster sim --history`)
//! replays them under any policy and any peer's model, on the cluster as it was or changed.
//!
//! Mapping rule (docs/simulator.md): every run that ended its group's placement for good
//! (`Succeeded`, `Failed`, or `Deleted` while placed) is one job, submitted when its group was,
//! asking what the group asked (members, each member's requests, sets, node filter, topology,
//! declared run time), doing the work it did: its recorded run time at the members it held,
//! spread over all its members (an elastic group that ran with fewer ran longer). Runs that were
//! evicted, timed out or suspended are left out: their group ran again, and that run is the job.

use std::collections::BTreeMap;
use std::hash::BuildHasher;

use muster_graph::GroupRequest;
use serde::{Deserialize, Serialize};

use crate::SimError;

/// One placement of a group that ended, as exported.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RecordedRun {
    /// The group (`namespace/name`, or its hash in an export that hides names).
    pub group: String,
    pub queue: String,
    #[serde(default)]
    pub priority: i32,
    /// Unix seconds.
    pub submitted: i64,
    pub started: i64,
    pub ended: i64,
    /// Members it held when it ended.
    pub members: u32,
    /// The state its placement ended in: `Succeeded`, `Failed`, `Deleted`, `Evicted`, ...
    pub outcome: String,
    pub request: GroupRequest,
}

impl RecordedRun {
    /// Did this run end its group's placement for good (not evicted, timed out or suspended,
    /// after which the group ran again)?
    pub fn is_final(&self) -> bool {
        matches!(self.outcome.as_str(), "Succeeded" | "Failed" | "Deleted")
    }

    /// Its run time at `max_members` members, milliseconds: the member-seconds it ran, spread over
    /// all of them (at least 1 ms).
    pub fn run_ms_at_max(&self) -> i64 {
        let held = i64::from(self.members.max(1));
        let max = i64::from(self.request.max_members.max(1));
        let member_ms = (self.ended - self.started).max(0).saturating_mul(1000).saturating_mul(held);
        (member_ms / max).max(1)
    }
}

/// Reads JSON Lines of [`RecordedRun`]; errors name the line and the field.
pub fn parse(file: &str, text: &str) -> Result<Vec<RecordedRun>, SimError> {
    let mut runs = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let run: RecordedRun = serde_json::from_str(line).map_err(|e| {
            SimError::Input(muster_graph::InputError::new(file, format!("line {}", i + 1), e.to_string()))
        })?;
        if run.ended < run.started || run.started < run.submitted {
            return Err(SimError::Input(muster_graph::InputError::new(
                file,
                format!("line {}", i + 1),
                format!(
                    "submitted {}, started {}, ended {}: a run starts after its submission and ends after its start",
                    run.submitted, run.started, run.ended
                ),
            )));
        }
        runs.push(run);
    }
    Ok(runs)
}

/// Writes runs as JSON Lines.
pub fn write(runs: &[RecordedRun]) -> String {
    let mut out = String::new();
    for r in runs {
        out.push_str(&serde_json::to_string(r).expect("a run serializes"));
        out.push('\n');
    }
    out
}

/// Replaces group names (and the name inside each request) by hashes, and queue names too with
/// `queues`: the same name gets the same hash within one call, and the hash is keyed afresh for
/// every call, so names cannot be guessed back by hashing candidates.
pub fn hide_names(runs: &mut [RecordedRun], queues: bool) {
    let key = std::collections::hash_map::RandomState::new();
    let mut seen: BTreeMap<String, String> = BTreeMap::new();
    let mut hashed = |prefix: &str, name: &str| -> String {
        let id = format!("{prefix}{name}");
        seen.entry(id.clone()).or_insert_with(|| format!("{prefix}-{:016x}", key.hash_one(&id))).clone()
    };
    for r in runs {
        r.group = hashed("g", &r.group);
        r.request.name.clone_from(&r.group);
        if queues {
            r.queue = hashed("q", &r.queue);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(group: &str, outcome: &str) -> RecordedRun {
        RecordedRun {
            group: group.into(),
            queue: "team-a".into(),
            priority: 0,
            submitted: 100,
            started: 160,
            ended: 220,
            members: 2,
            outcome: outcome.into(),
            request: GroupRequest::simple(group, 4, &[("cpu", 1000)]),
        }
    }

    #[test]
    fn runs_round_trip_and_bad_lines_are_named() {
        let runs = vec![run("ns/a", "Succeeded"), run("ns/b", "Evicted")];
        assert_eq!(parse("h.jsonl", &write(&runs)).unwrap(), runs);
        let bad = write(&runs).replace("\"ended\":220", "\"ended\":50");
        let e = parse("h.jsonl", &bad).unwrap_err().to_string();
        assert!(e.contains("h.jsonl: line 1") && e.contains("ends after its start"), "{e}");
        let e = parse("h.jsonl", "{\"group\": 1}\n").unwrap_err().to_string();
        assert!(e.contains("line 1"), "{e}");
    }

    #[test]
    fn an_elastic_run_with_fewer_members_did_less_per_member_time_at_max() {
        // 2 of 4 members for 60 s: 120 member-seconds, 30 s at 4.
        assert_eq!(run("ns/a", "Succeeded").run_ms_at_max(), 30_000);
        assert!(run("ns/a", "Succeeded").is_final());
        assert!(!run("ns/a", "Evicted").is_final());
    }

    #[test]
    fn hidden_names_are_consistent_within_an_export_and_keyed_afresh() {
        let mut one = vec![run("ns/a", "Evicted"), run("ns/a", "Succeeded"), run("ns/b", "Succeeded")];
        hide_names(&mut one, true);
        assert_eq!(one[0].group, one[1].group);
        assert_ne!(one[0].group, one[2].group);
        assert!(one.iter().all(|r| !r.group.contains("ns/") && r.request.name == r.group && r.queue.starts_with("q-")));
        let mut two = vec![run("ns/a", "Succeeded")];
        hide_names(&mut two, false);
        assert_ne!(two[0].group, one[0].group, "a new key for every export");
        assert_eq!(two[0].queue, "team-a");
    }
}
