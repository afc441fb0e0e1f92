//! The Volcano model with tenants (models/volcano/): each tenant's queue a Volcano Queue under
//! the capacity plugin, its capability capping a borrower (in a cohort tree, its department's
//! Queue capping its teams together), enqueue taking the queues in turn, and the reclaim action
//! taking lent room back for a returning owner, pod by pod, even from a gang at its minMember
//! (without the overcommit plugin, which would keep the owner's group Pending). Two 4-cpu nodes and an instant
//! control plane; sessions every second.

use muster_sim::engine::{Engine, RunRecord};
use muster_sim::scheduler::JobPhase;
use muster_sim::{SimError, Workload};

const TWO_NODES: &str = "name: two\nnodeClasses:\n  - {name: n, count: 2, capacity: {cpu: \"4\", pods: 110}}\n";

/// The scenario: `volcano` (its settings), `queues` (tenants' queue lines) and `classes` (job
/// class lines), on two 4-cpu nodes, in a fresh directory.
fn load(tag: &str, volcano: &str, queues: &[&str], classes: &[&str]) -> Result<Workload, SimError> {
    load_with_cohorts(tag, volcano, &[], queues, classes)
}

/// [`load`] with `cohorts` (cohort lines) declared.
fn load_with_cohorts(
    tag: &str,
    volcano: &str,
    cohorts: &[&str],
    queues: &[&str],
    classes: &[&str],
) -> Result<Workload, SimError> {
    let mut text = format!(
        "name: t\ncluster: cluster.yaml\nvolcano: {volcano}\n\
         timing: {{podCreateQps: 0, bindQps: 0, podStartDelay: 0s, jobCompleteDelay: 0s}}\n\
         tenants:\n  cohorts: [{}]\n  queues:\n",
        cohorts.join(", ")
    );
    queues.iter().for_each(|q| text += &format!("    - {q}\n"));
    text += "jobClasses:\n";
    classes.iter().for_each(|c| text += &format!("  - {c}\n"));
    let dir = std::env::temp_dir().join(format!("muster-sim-volcano-tenants-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("cluster.yaml"), TWO_NODES).unwrap();
    muster_sim::scenario::from_text("t.yaml", &text, &dir, 1)
}

fn run_volcano(w: &Workload) -> RunRecord {
    let mut s = muster_sim::scheduler("volcano", w).unwrap();
    let rec = Engine::new(w).unwrap().run(s.as_mut(), false).unwrap();
    assert!(rec.jobs.iter().all(|j| j.phase == JobPhase::Succeeded), "every job ends well");
    rec
}

/// When each job (in submission order) last had every pod bound, in seconds.
fn placed_s(rec: &RunRecord) -> Vec<i64> {
    rec.jobs.iter().map(|j| j.scheduled_ms.expect("placed") / 1000).collect()
}

fn run_started_s(rec: &RunRecord) -> Vec<i64> {
    rec.jobs.iter().map(|j| j.run_started_ms.expect("ran") / 1000).collect()
}

/// When team a's two one-node jobs of 100 s, both submitted at 0, were placed, with `cohorts`
/// and `queues` declared.
fn a_two_jobs(tag: &str, cohorts: &[&str], queues: &[&str]) -> Vec<i64> {
    let class = "{name: a-job, queue: a, count: 2, members: 1, resources: {cpu: \"4\"}, runTime: 100s}";
    let w = load_with_cohorts(tag, "{}", cohorts, queues, &[class]).unwrap();
    placed_s(&run_volcano(&w))
}

/// The second job waited for the first to end: a could not borrow the other node.
fn assert_capped(placed: &[i64]) {
    assert!(placed[0] <= 1 && (100..=102).contains(&placed[1]), "{placed:?}");
}

/// Both ran at once: a borrowed the idle node.
fn assert_borrowed(placed: &[i64]) {
    assert!(placed.iter().all(|&s| s <= 1), "{placed:?}");
}

#[test]
fn a_queues_capability_caps_what_it_borrows() {
    let b = "{name: b, cohort: lab, quotas: {cpu: {nominal: 4}}}";
    // capability = nominal + borrowingLimit = 4 cpu: the second job waits for the first to end.
    assert_capped(&a_two_jobs(
        "cap",
        &[],
        &["{name: a, cohort: lab, quotas: {cpu: {nominal: 4, borrowingLimit: 0}}}", b],
    ));
    // No borrowingLimit: no capability, the idle node of b is borrowed at once.
    assert_borrowed(&a_two_jobs("nocap", &[], &["{name: a, cohort: lab, quotas: {cpu: {nominal: 4}}}", b]));
}

#[test]
fn in_a_cohort_tree_a_departments_capability_caps_what_its_teams_borrow_together() {
    let queues = [
        "{name: a, cohort: dept, quotas: {cpu: {nominal: 4}}}",
        "{name: b, cohort: other, quotas: {cpu: {nominal: 4}}}",
    ];
    let tree = |dept| ["{name: org}", dept, "{name: other, parent: org}"];
    // Team a sets no borrowingLimit, but its department's Queue has capability = its teams'
    // nominal 4 cpu + borrowingLimit 0: a's second job waits for its first, b's node idle.
    let capped = "{name: dept, parent: org, quotas: {cpu: {nominal: 0, borrowingLimit: 0}}}";
    assert_capped(&a_two_jobs("tree-cap", &tree(capped), &queues));
    // The department may borrow 4 cpu: b's idle node is a's at once.
    let borrowing = "{name: dept, parent: org, quotas: {cpu: {nominal: 0, borrowingLimit: 4}}}";
    assert_borrowed(&a_two_jobs("tree-borrow", &tree(borrowing), &queues));
}

#[test]
fn enqueue_takes_queues_in_turn_so_a_returning_team_goes_before_an_earlier_flood() {
    // a holds one node for long and borrows b's with a short job; its other short jobs wait
    // Pending (overcommit: no headroom while the cluster is full). b's job comes at 10 s. When
    // a's short run ends at 100 s, the headroom (1.2 x 8 cpu less a's 4 in use) admits one
    // group: b's queue, at share 0 against a's 1, is tried first, so b's job runs then, ahead of
    // a's jobs submitted before it.
    let w = load(
        "turns",
        "{reclaim: false}",
        &["{name: a, cohort: lab, quotas: {cpu: {nominal: 4}}}", "{name: b, cohort: lab, quotas: {cpu: {nominal: 4}}}"],
        &[
            "{name: a-long, queue: a, count: 1, members: 1, resources: {cpu: \"4\"}, runTime: 1000s}",
            "{name: a-job, queue: a, count: 3, members: 1, resources: {cpu: \"4\"}, runTime: 100s}",
            "{name: b-job, queue: b, count: 1, members: 1, resources: {cpu: \"4\"}, runTime: 100s, arrival: {start: 10s}}",
        ],
    )
    .unwrap();
    let placed = placed_s(&run_volcano(&w));
    assert!((100..=102).contains(&placed[4]), "b's job placed at {placed:?}");
    assert!(placed[2..4].iter().all(|&s| s >= 200), "a's waiting jobs go after b's: {placed:?}");
}

/// a fills both nodes at 0 with `a_jobs` (100 s runs), borrowing b's node; b comes at 10 s with
/// one job of one node.
fn owner_returns(tag: &str, volcano: &str, a_jobs: &str) -> RunRecord {
    let w = load(
        tag,
        volcano,
        &["{name: a, cohort: lab, quotas: {cpu: {nominal: 4}}}", "{name: b, cohort: lab, quotas: {cpu: {nominal: 4}}}"],
        &[a_jobs, "{name: b-job, queue: b, count: 1, members: 1, resources: {cpu: \"4\"}, runTime: 20s, arrival: {start: 10s}}"],
    )
    .unwrap();
    run_volcano(&w)
}

#[test]
fn reclaim_evicts_a_borrowers_job_for_the_returning_owner() {
    let a_jobs = "{name: a-job, queue: a, count: 2, members: 1, resources: {cpu: \"4\"}, runTime: 100s}";
    let rec = owner_returns("reclaim", "{overcommit: false}", a_jobs);
    let started = run_started_s(&rec);
    assert!((10..=13).contains(&started[2]), "b runs within a few sessions of coming: {started:?}");
    assert_eq!(rec.tenants.evictions, vec![1, 0], "one job of a is evicted, b loses nothing");
    let lost_cpu_s = rec.tenants.lost[0][0] / 1000.0 / 1000.0;
    assert!((40.0..=52.0).contains(&lost_cpu_s), "a loses its victim's ~11 s on 4 cpu: {lost_cpu_s}");
    // The victim's run starts over once b's job ends.
    assert!(started[..2].iter().any(|&s| (30..=34).contains(&s)), "{started:?}");

    // The chart's actions (no reclaim): b waits for a's jobs to end.
    let rec = owner_returns("chart", "{overcommit: false, reclaim: false}", a_jobs);
    assert!(run_started_s(&rec)[2] >= 100, "{:?}", run_started_s(&rec));
    assert_eq!(rec.tenants.evictions, vec![0, 0]);
    // With the chart's overcommit plugin, the full cluster keeps b's group Pending (4 cpu above
    // 1.2 x 8 - 8): reclaim never sees it.
    let rec = owner_returns("overcommit", "{}", a_jobs);
    assert!(run_started_s(&rec)[2] >= 100, "{:?}", run_started_s(&rec));
    assert_eq!(rec.tenants.evictions, vec![0, 0]);
}

#[test]
fn reclaim_takes_one_pod_of_a_gang_at_its_min_and_leaves_the_rest_holding_its_node() {
    let gang = "{name: a-gang, queue: a, count: 1, members: 2, resources: {cpu: \"4\"}, runTime: 100s}";
    let rec = owner_returns("gang", "{overcommit: false}", gang);
    let started = run_started_s(&rec);
    assert!((10..=13).contains(&started[1]), "b runs within a few sessions of coming: {started:?}");
    assert_eq!(rec.tenants.evictions, vec![1, 0], "a's gang loses its run once");
    // The gang's other pod keeps its node, running nothing, while b runs (~20 s), until the
    // gang's replacement pod is placed and its run starts over.
    let node_cpu = rec.capacity[0] as f64 / 2.0;
    let clogged_s = rec.clog[0] / node_cpu / 1000.0;
    assert!((18.0..=25.0).contains(&clogged_s), "one node held by half a gang: {clogged_s} s");
    assert!((30..=34).contains(&started[0]), "the gang runs again after b: {started:?}");
}
