//! On long queues every muster policy keeps the schedule and the first estimated starts it had
//! before the simulator stopped refreshing the queue view when no new estimate can come of it:
//! `fixtures/long-queue/starts.txt` holds, per policy and job, the start and first estimate the
//! simulator gave before that change. `MUSTER_SIM_RECORD=1` writes the file instead of checking.

use std::fmt::Write;
use std::path::Path;

use muster_sim::engine::Engine;
use muster_sim::scenario;

const POLICIES: [&str; 5] = ["muster", "muster-conservative", "muster-easy", "muster-fifo", "muster-besteffort"];

fn show(ms: Option<i64>) -> String {
    ms.map_or("-".into(), |t| t.to_string())
}

/// One line per policy and job: policy, job, start (ms), first estimated start (ms).
fn starts() -> String {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/long-queue");
    let w = scenario::load(&dir.join("scenario.yaml"), 1).unwrap();
    let mut out = String::from("# policy job start_ms first_estimate_ms\n");
    for policy in POLICIES {
        let mut s = muster_sim::scheduler(policy, &w).unwrap();
        let rec = Engine::new(&w).unwrap().run(s.as_mut(), false).unwrap();
        for (job, j) in rec.jobs.iter().enumerate() {
            writeln!(out, "{policy} {job} {} {}", show(j.scheduled_ms), show(j.estimated_start_ms)).unwrap();
        }
    }
    out
}

#[test]
fn every_policy_starts_every_job_when_it_did_and_estimates_it_alike() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/long-queue/starts.txt");
    let now = starts();
    if std::env::var_os("MUSTER_SIM_RECORD").is_some() {
        std::fs::write(&path, &now).unwrap();
        return;
    }
    let before = std::fs::read_to_string(&path).unwrap();
    let (old, new): (Vec<&str>, Vec<&str>) = (before.lines().collect(), now.lines().collect());
    assert_eq!(old.len(), new.len(), "as many jobs and policies as recorded");
    for (o, n) in old.iter().zip(&new) {
        assert_eq!(o, n, "start or first estimate moved (policy job start_ms first_estimate_ms)");
    }
    let waited = new.iter().filter(|l| l.starts_with("muster-fifo ")).count();
    assert_eq!(waited, 300, "every job of the trace is in the schedule");
}
