//! Calendar reservations in the simulator: checked as the engine checks them, held by muster's
//! models (not by the peers, nor under `ignore_reservations`), and measured from the sim's own
//! record of placements under every scheduler. Three 4-cpu nodes (two `pool: reserved`, one
//! `pool: shared`) and an instant control plane, so every time is exact.

use muster_sim::engine::Engine;
use muster_sim::metrics::{self, ReservationResult};
use muster_sim::{RunOptions, SimError, Workload};

const CLUSTER: &str = "name: three\nnodeClasses:\n  - {name: reserved, count: 2, capacity: {cpu: \"4\", pods: 110}, labels: {pool: reserved}}\n  - {name: shared, count: 1, capacity: {cpu: \"4\", pods: 110}, labels: {pool: shared}}\n";

/// The reserved pool for queue a over [100 s, 200 s), as `reservation` ends it.
const SLOT: &str = "{name: slot, queues: [a], nodeSelector: {pool: reserved}, start: 100, end: 200";

/// Queues a and b, `reservation` (one list item), and the job classes: b's `long` (150 s, so it
/// cannot end before the window) and `other` lines, then a's 2-node `train` at 95 s.
fn load(tag: &str, reservation: &str, other: &str) -> Result<Workload, SimError> {
    let text = format!(
        "name: t\ncluster: cluster.yaml\n\
         timing: {{podCreateQps: 0, bindQps: 0, podStartDelay: 0s, jobCompleteDelay: 0s}}\n\
         tenants:\n  queues: [{{name: a}}, {{name: b}}]\n\
         reservations:\n  - {reservation}\n\
         jobClasses:\n\
         \x20 - {{name: long, queue: b, count: 1, members: 1, resources: {{cpu: \"4\"}}, runTime: 150s}}\n\
         \x20 - {other}\n\
         \x20 - {{name: train, queue: a, count: 1, members: 2, resources: {{cpu: \"4\"}}, runTime: 50s, arrival: {{start: 95s}}}}\n"
    );
    let dir = std::env::temp_dir().join(format!("muster-sim-reservations-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("cluster.yaml"), CLUSTER).unwrap();
    muster_sim::scenario::from_text("t.yaml", &text, &dir, 1)
}

/// b's second job, 150 s long too: it can end before the window nowhere.
const ANOTHER_LONG: &str = "{name: long2, queue: b, count: 1, members: 1, resources: {cpu: \"4\"}, runTime: 150s}";

fn measured(w: &Workload, scheduler: &str, opts: &RunOptions) -> ReservationResult {
    let mut s = muster_sim::scheduler_with(scheduler, w, opts).unwrap();
    let rec = Engine::new(w).unwrap().run(s.as_mut(), false).unwrap();
    metrics::summarize(w, &rec).reservations.remove(0)
}

fn plain() -> RunOptions {
    RunOptions { estimates: false, ..RunOptions::new("") }
}

#[test]
fn held_by_muster_the_users_start_at_once_and_no_one_else_is_on_the_room() {
    let w = load("held", &format!("{SLOT}}}"), ANOTHER_LONG).unwrap();
    let m = measured(&w, "muster", &plain());
    assert!(m.held);
    assert_eq!((m.windows, m.jobs), (1, 1));
    assert_eq!(m.start_delay.max_s, 0.0, "train starts on the free reserved nodes at 95 s");
    assert_eq!(m.others_on_room_s, 0.0, "both long jobs stay off the reserved pool");
    // train holds the 8 cores from 95 s to 145 s: 55 s of the window idle.
    assert_eq!(m.idle_h, metrics::round3(8.0 * 55.0 / 3600.0));
    assert_eq!(m.evictions, 0);
}

/// Half the reserved pool as an amount (one 4-cpu member), which muster's matcher places: others
/// may use the pool's other half through the window.
const AMOUNT: &str = "{name: slot, queues: [a], nodeSelector: {pool: reserved}, amount: {members: 1, resources: {cpu: \"4\"}}, start: 100, end: 200}";

#[test]
fn others_on_an_amounts_nodes_count_only_beyond_what_it_leaves_them() {
    let w = load("amount", AMOUNT, ANOTHER_LONG).unwrap();
    let m = measured(&w, "muster", &plain());
    assert_eq!(m.room, 4.0);
    // long2 runs on the reserved node the amount leaves: no one is on the amount's room.
    assert_eq!(m.others_on_room_s, 0.0, "{m:?}");
    assert_eq!(m.start_delay.max_s, 50.0, "train needs both reserved nodes, or one and the shared: {m:?}");
}

#[test]
fn without_reservations_others_fill_the_room_and_the_users_wait() {
    let w = load("ignored", &format!("{SLOT}}}"), ANOTHER_LONG).unwrap();
    let ignoring = RunOptions { ignore_reservations: true, ..plain() };
    for (scheduler, opts) in [("muster", &ignoring), ("kueue", &plain()), ("volcano", &plain())] {
        let m = measured(&w, scheduler, opts);
        assert!(!m.held, "{scheduler}");
        assert!(m.others_on_room_s >= 4.0 * 50.0, "{scheduler}: a long job on a reserved node until 150 s: {m:?}");
        // Volcano places once a second: 1 s later.
        assert!((50.0..=51.0).contains(&m.start_delay.max_s), "{scheduler}: train waits for it: {m:?}");
    }
}

/// b's liar declares 60 s and runs 500 s: muster backfills it onto the reserved pool before the
/// window, and ends it at its declared time plus the 60 s grace.
const LIAR: &str =
    "{name: liar, queue: b, count: 1, members: 1, resources: {cpu: \"4\"}, runTime: 500s, declaredRunTime: 60s}";

#[test]
fn work_that_outruns_its_declared_time_is_found_on_the_room_or_evicted_at_the_opening() {
    let waits = load("wait", &format!("{SLOT}, atStart: Wait}}"), LIAR).unwrap();
    let m = measured(&waits, "muster", &plain());
    assert_eq!(m.others_on_room_s, 4.0 * 20.0, "the liar stays on the room until 120 s: {m:?}");
    assert_eq!((m.start_delay.max_s, m.evictions), (20.0, 0));
    let evicts = load("evict", &format!("{SLOT}, atStart: Evict}}"), LIAR).unwrap();
    let m = measured(&evicts, "muster", &plain());
    assert_eq!((m.others_on_room_s, m.start_delay.max_s, m.evictions), (0.0, 0.0, 1), "{m:?}");
}

#[test]
fn bad_reservations_name_their_field() {
    let field = |tag: &str, r: &str| match load(tag, r, ANOTHER_LONG) {
        Err(SimError::Input(e)) => (e.path, e.message),
        other => panic!("{r}: {other:?}"),
    };
    let (path, message) = field("queue", "{name: slot, queues: [c], nodeSelector: {pool: reserved}, start: 1, end: 2}");
    assert_eq!(path, "reservations[0].queues");
    assert!(message.contains("\"c\""), "{message}");
    let (path, _) = field("ns", "{name: slot, namespaces: [x], nodeSelector: {pool: reserved}, start: 1, end: 2}");
    assert_eq!(path, "reservations[0].namespaces");
    let (path, message) = field("nodes", "{name: slot, queues: [a], nodeSelector: {pool: gone}, start: 1, end: 2}");
    assert_eq!(path, "reservations[0].nodeSelector");
    assert!(message.contains("selects no node"), "{message}");
    let (path, _) = field("end", "{name: slot, queues: [a], nodeSelector: {pool: reserved}, start: 5, end: 5}");
    assert_eq!(path, "reservations[0].end");
    let gpus = "{name: slot, queues: [a], amount: {members: 1, resources: {nvidia.com/gpu: 1}}, start: 1, end: 2}";
    assert_eq!(field("gpu", gpus).0, "reservations[0].amount.resources.nvidia.com/gpu");
    // Three nodes of 4 cpu hold no 4 members of 4 cpu, nor two on the one reserved node left.
    let (path, message) =
        field("big", "{name: slot, queues: [a], amount: {members: 4, resources: {cpu: \"4\"}}, start: 1, end: 2}");
    assert_eq!(path, "reservations[0].amount");
    assert!(message.contains("can never be set aside") && message.contains("4 members"), "{message}");
    let pool = "{name: slot, queues: [a], nodeSelector: {pool: shared}, amount: {members: 2, resources: {cpu: \"4\"}}, start: 1, end: 2}";
    assert_eq!(field("pool", pool).0, "reservations[0].amount");
}

/// The shipped scenario (docs/benchmarks.md, "Calendar reservations"): muster starts team A's run
/// at 09:00 both days with no one else on rack r0 in the windows; without the reservation it waits.
#[test]
fn the_morning_scenario_keeps_the_rack_for_team_a() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/reservation-morning.yaml");
    let w = muster_sim::scenario::load(&path, 1).unwrap();
    let held = measured(&w, "muster", &plain());
    assert_eq!((held.windows, held.jobs, held.start_delay.max_s, held.others_on_room_s), (2, 2, 0.0, 0.0), "{held:?}");
    let ignoring = RunOptions { ignore_reservations: true, ..plain() };
    let without = measured(&w, "muster", &ignoring);
    assert!(without.start_delay.p50_s > 3600.0 && without.others_on_room_s > 0.0, "{without:?}");
}
