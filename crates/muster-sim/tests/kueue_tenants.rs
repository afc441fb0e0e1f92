//! The Kueue model with tenants: a ClusterQueue per tenant in its cohort, borrowing within the
//! borrowingLimit of what the cohort has lendable, and reclaim of lent quota by Kueue's
//! preemption. Two 4-cpu nodes and an instant control plane, so every time is exact.

use muster_sim::engine::{Engine, RunRecord};
use muster_sim::metrics::{self, TenantResult};
use muster_sim::scheduler::JobPhase;
use muster_sim::{SimError, Workload};

const TWO_NODES: &str = "name: two\nnodeClasses:\n  - {name: n, count: 2, capacity: {cpu: \"4\", pods: 110}}\n";

/// The scenario: `queues` (tenants' queue lines) and `classes` (job class lines), with its cluster
/// `cluster.yaml` (two 4-cpu nodes), in a fresh directory.
fn load(tag: &str, queues: &[&str], classes: &[&str]) -> Result<Workload, SimError> {
    load_tree(tag, &[], queues, classes)
}

/// As `load`, with `cohorts` (cohort lines).
fn load_tree(tag: &str, cohorts: &[&str], queues: &[&str], classes: &[&str]) -> Result<Workload, SimError> {
    let mut text = "name: t\ncluster: cluster.yaml\n\
                    timing: {podCreateQps: 0, bindQps: 0, podStartDelay: 0s, jobCompleteDelay: 0s}\n\
                    tenants:\n  cohorts: ["
        .to_string();
    text += &cohorts.join(", ");
    text += "]\n  queues:\n";
    queues.iter().for_each(|q| text += &format!("    - {q}\n"));
    text += "jobClasses:\n";
    classes.iter().for_each(|c| text += &format!("  - {c}\n"));
    let dir = std::env::temp_dir().join(format!("muster-sim-kueue-tenants-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("cluster.yaml"), TWO_NODES).unwrap();
    muster_sim::scenario::from_text("t.yaml", &text, &dir, 1)
}

fn run_kueue(w: &Workload) -> RunRecord {
    let mut s = muster_sim::scheduler("kueue", w).unwrap();
    let rec = Engine::new(w).unwrap().run(s.as_mut(), false).unwrap();
    assert!(rec.jobs.iter().all(|j| j.phase == JobPhase::Succeeded), "every job ends well");
    rec
}

fn tenant<'r>(results: &'r [TenantResult], queue: &str) -> &'r TenantResult {
    results.iter().find(|t| t.queue == queue).unwrap()
}

/// When each job (in submission order) first had every pod bound, in seconds.
fn placed_s(rec: &RunRecord) -> Vec<i64> {
    rec.jobs.iter().map(|j| j.scheduled_ms.expect("placed") / 1000).collect()
}

/// a fills both nodes at 0 with two 100 s jobs, borrowing b's node; b comes at 10 s with one
/// job of its own node's size.
fn borrow_and_return(reclaim: bool) -> Workload {
    let b = format!(
        "{{name: b, cohort: lab, quotas: {{cpu: {{nominal: 4}}}}, preemption: {{reclaimWithinCohort: {reclaim}}}}}"
    );
    load(
        &format!("reclaim-{reclaim}"),
        &["{name: a, cohort: lab, quotas: {cpu: {nominal: 4}}}", &b],
        &[
            "{name: a-job, queue: a, count: 2, members: 1, resources: {cpu: \"4\"}, runTime: 100s}",
            "{name: b-job, queue: b, count: 1, members: 1, resources: {cpu: \"4\"}, runTime: 20s, arrival: {start: 10s}}",
        ],
    )
    .unwrap()
}

#[test]
fn a_returning_owner_reclaims_its_lent_quota_by_preempting_the_borrower() {
    let w = borrow_and_return(true);
    let rec = run_kueue(&w);
    let result = metrics::summarize(&w, &rec);
    let (a, b) = (tenant(&result.tenants, "a"), tenant(&result.tenants, "b"));
    // b's job is admitted the moment it comes: one of a's jobs, the borrower, is evicted whole.
    assert_eq!(b.wait_within_quota.max_s, 0.0, "{b:?}");
    assert_eq!(b.shortfall_h, 0.0, "{b:?}");
    assert_eq!(a.evictions, 1, "{a:?}");
    assert_eq!(a.lost_h, metrics::round3(4.0 * 10.0 / 3600.0), "{a:?}");
    assert_eq!(b.evictions, 0);
    // The evicted job is requeued and runs again once b's job ends at 30 s.
    assert_eq!(placed_s(&rec)[2], 10);
    assert_eq!(rec.jobs.iter().filter(|j| j.ended_ms == Some(130_000)).count(), 1, "the evicted job restarted at 30 s");
}

#[test]
fn without_reclaim_the_owner_waits_for_the_borrower() {
    let w = borrow_and_return(false);
    let rec = run_kueue(&w);
    let b = tenant(&metrics::summarize(&w, &rec).tenants, "b").clone();
    assert_eq!(b.wait_within_quota.max_s, 90.0, "{b:?}");
    assert_eq!(rec.tenants.evictions, vec![0, 0]);
}

#[test]
fn a_lending_limit_keeps_part_of_an_idle_tenants_quota_from_being_borrowed() {
    // b is idle but lends only 2 of its 4 cpu: a runs 4 + 2 at once, though 8 are free.
    let w = load(
        "lending",
        &[
            "{name: a, cohort: lab, quotas: {cpu: {nominal: 4}}}",
            "{name: b, cohort: lab, quotas: {cpu: {nominal: 4, lendingLimit: 2}}}",
        ],
        &["{name: a-job, queue: a, count: 4, members: 1, resources: {cpu: \"2\"}, runTime: 100s}"],
    )
    .unwrap();
    assert_eq!(placed_s(&run_kueue(&w)), [0, 0, 0, 100]);
}

#[test]
fn a_borrowing_limit_caps_what_a_borrower_takes_of_an_idle_cohort() {
    // a may borrow 2 cpu over its 2, though b's 6 lie idle.
    let w = load(
        "borrowing",
        &[
            "{name: a, cohort: lab, quotas: {cpu: {nominal: 2, borrowingLimit: 2}}}",
            "{name: b, cohort: lab, quotas: {cpu: {nominal: 6}}}",
        ],
        &["{name: a-job, queue: a, count: 4, members: 1, resources: {cpu: \"2\"}, runTime: 100s}"],
    )
    .unwrap();
    assert_eq!(placed_s(&run_kueue(&w)), [0, 0, 100, 100]);
}

#[test]
fn a_higher_priority_job_preempts_within_its_queue_only_with_lower_priority() {
    // a's own quota is full with a low-priority job; a high-priority one comes at 10 s.
    let classes = [
        "{name: low, queue: a, count: 1, members: 1, priority: 1, resources: {cpu: \"4\"}, runTime: 100s}",
        "{name: high, queue: a, count: 1, members: 1, priority: 9, resources: {cpu: \"4\"}, runTime: 20s, arrival: {start: 10s}}",
    ];
    let with =
        load("within", &["{name: a, quotas: {cpu: {nominal: 4}}, preemption: {withinQueue: LowerPriority}}"], &classes)
            .unwrap();
    let rec = run_kueue(&with);
    assert_eq!(placed_s(&rec)[1], 10, "the high-priority job evicts the low one");
    assert_eq!(rec.tenants.evictions, vec![1]);
    let without = load("without", &["{name: a, quotas: {cpu: {nominal: 4}}}"], &classes).unwrap();
    assert_eq!(placed_s(&run_kueue(&without))[1], 100, "withinQueue Never: it waits");
}

#[test]
fn quota_is_borrowed_and_reclaimed_across_a_cohort_tree() {
    // x1 and x2 are a team under the department; y is in the department itself. With x2 and y
    // idle, x1 borrows both through the tree; y comes back at 10 s and reclaims from x1.
    let w = load_tree(
        "tree",
        &["{name: dept}", "{name: team, parent: dept}"],
        &[
            "{name: x1, cohort: team, quotas: {cpu: {nominal: 2}}}",
            "{name: x2, cohort: team, quotas: {cpu: {nominal: 2}}}",
            "{name: y, cohort: dept, quotas: {cpu: {nominal: 4}}, preemption: {reclaimWithinCohort: true}}",
        ],
        &[
            "{name: x-job, queue: x1, count: 4, members: 1, resources: {cpu: \"2\"}, runTime: 100s}",
            "{name: y-job, queue: y, count: 1, members: 1, resources: {cpu: \"2\"}, runTime: 20s, arrival: {start: 10s}}",
        ],
    )
    .unwrap();
    let rec = run_kueue(&w);
    assert_eq!(placed_s(&rec)[..5], [0, 0, 0, 0, 10]);
    assert_eq!(rec.tenants.evictions, vec![1, 0, 0]);
}

#[test]
fn a_cohort_borrows_no_more_than_its_own_limit_under_kueue_and_muster() {
    // Two 4-cpu nodes: team x (nominal 2) is in department d, which may borrow 1 cpu from org
    // above what it brings; y (nominal 6) idles in org. x's four 1-cpu jobs: 3 run at once, the
    // fourth waits for the first to end at 100 s. Without d's limit all 4 run at 0.
    let tree = |limit: &str| {
        load_tree(
            &format!("cohort-limit{}", limit.len()),
            &["{name: org}", &format!("{{name: d, parent: org{limit}}}")],
            &[
                "{name: x, cohort: d, quotas: {cpu: {nominal: 2}}}",
                "{name: y, cohort: org, quotas: {cpu: {nominal: 6}}}",
            ],
            &["{name: x-job, queue: x, count: 4, members: 1, resources: {cpu: \"1\"}, runTime: 100s}"],
        )
        .unwrap()
    };
    let limited = tree(", quotas: {cpu: {nominal: 0, borrowingLimit: 1}}");
    let mut muster = muster_sim::scheduler("muster", &limited).unwrap();
    let by_muster = Engine::new(&limited).unwrap().run(muster.as_mut(), false).unwrap();
    for rec in [run_kueue(&limited), by_muster] {
        let mut placed = placed_s(&rec);
        placed.sort_unstable();
        assert_eq!(placed, [0, 0, 0, 100]);
    }
    let mut placed = placed_s(&run_kueue(&tree("")));
    placed.sort_unstable();
    assert_eq!(placed, [0, 0, 0, 0]);
}

/// Kueue's fair sharing: c (nominal 4, no jobs) lends; a and b (nominal 2 each) borrow, a 3 cpus
/// and b 1. b's fourth job at 10 s would leave b borrowing 2 of the cohort's 8 (share 250),
/// as a does once one of its jobs is gone: fair sharing preempts one of a's
/// (LessThanOrEqualToFinalShare). Classical preemption, b borrowing after it, takes nothing, and
/// the job waits for one of a's to end at 300 s.
#[test]
fn fair_sharing_takes_from_the_queue_borrowing_most_for_a_queue_that_borrows_too() {
    let w = load(
        "fair-share",
        &[
            "{name: a, cohort: lab, quotas: {cpu: {nominal: 2}}}",
            "{name: b, cohort: lab, quotas: {cpu: {nominal: 2}}, preemption: {reclaimWithinCohort: true}}",
            "{name: c, cohort: lab, quotas: {cpu: {nominal: 4}}}",
        ],
        &[
            "{name: a-job, queue: a, count: 5, members: 1, resources: {cpu: \"1\"}, runTime: 300s}",
            "{name: b-job, queue: b, count: 3, members: 1, resources: {cpu: \"1\"}, runTime: 300s, arrival: {start: 5s}}",
            "{name: b-more, queue: b, count: 1, members: 1, resources: {cpu: \"1\"}, runTime: 20s, arrival: {start: 10s}}",
        ],
    )
    .unwrap();
    let mut fair = muster_sim::scheduler("kueue-fair", &w).unwrap();
    assert_eq!(fair.name(), "kueue-fair");
    let rec = Engine::new(&w).unwrap().run(fair.as_mut(), false).unwrap();
    assert!(rec.jobs.iter().all(|j| j.phase == JobPhase::Succeeded), "every job ends well");
    let result = metrics::summarize(&w, &rec);
    assert_eq!(tenant(&result.tenants, "a").evictions, 1, "{:?}", result.tenants);
    assert_eq!(placed_s(&rec)[8], 10, "b's fourth job starts as it comes");

    let rec = run_kueue(&w);
    let result = metrics::summarize(&w, &rec);
    assert_eq!(tenant(&result.tenants, "a").evictions, 0, "{:?}", result.tenants);
    assert_eq!(placed_s(&rec)[8], 300, "without fair sharing it waits for a's jobs to end");
}
