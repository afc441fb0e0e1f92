//! Tenants in scenarios: the section is checked field by field, muster runs the queues it
//! declares, and the per-tenant measures (shortfall, wait within quota, work lost) are what the
//! run did.

use muster_sim::engine::{Engine, RunRecord};
use muster_sim::metrics::{self, TenantResult};
use muster_sim::{SimError, Workload};

const TWO_NODES: &str = "name: two\nnodeClasses:\n  - {name: n, count: 2, capacity: {cpu: \"4\", pods: 110}}\n";

/// The scenario `text` with its cluster `cluster.yaml` (two 4-cpu nodes), in a fresh directory.
fn load(tag: &str, text: &str) -> Result<Workload, SimError> {
    let dir = std::env::temp_dir().join(format!("muster-sim-tenants-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("cluster.yaml"), TWO_NODES).unwrap();
    muster_sim::scenario::from_text("t.yaml", text, &dir, 1)
}

fn refused(tag: &str, text: &str) -> String {
    match load(tag, text) {
        Ok(_) => panic!("{tag}: accepted"),
        Err(e) => e.to_string(),
    }
}

/// Teams a and b in one cohort, 4 cpu each (one node). a fills both nodes at 0 with two 100 s
/// jobs, borrowing b's node; b comes at 10 s with one 20 s job of its own node's size. An
/// instant control plane, so every figure is exact.
fn borrow_and_return(reclaim: bool) -> String {
    format!(
        "name: t\ncluster: cluster.yaml\n\
         timing: {{podCreateQps: 0, bindQps: 0, podStartDelay: 0s, jobCompleteDelay: 0s}}\n\
         tenants:\n\
         \x20 queues:\n\
         \x20   - {{name: a, cohort: lab, quotas: {{cpu: {{nominal: 4}}}}}}\n\
         \x20   - {{name: b, cohort: lab, quotas: {{cpu: {{nominal: 4}}}}, preemption: {{reclaimWithinCohort: {reclaim}}}}}\n\
         jobClasses:\n\
         \x20 - {{name: a-job, queue: a, count: 2, members: 1, resources: {{cpu: \"4\"}}, runTime: 100s}}\n\
         \x20 - {{name: b-job, queue: b, count: 1, members: 1, resources: {{cpu: \"4\"}}, runTime: 20s, \
         arrival: {{start: 10s}}}}\n"
    )
}

fn run_muster(w: &Workload) -> RunRecord {
    let mut s = muster_sim::scheduler("muster", w).unwrap();
    Engine::new(w).unwrap().run(s.as_mut(), false).unwrap()
}

fn tenant<'r>(results: &'r [TenantResult], queue: &str) -> &'r TenantResult {
    results.iter().find(|t| t.queue == queue).unwrap()
}

#[test]
fn a_returning_owner_takes_its_lent_quota_back_at_once_and_the_borrower_loses_what_it_ran() {
    let w = load("reclaim", &borrow_and_return(true)).unwrap();
    let rec = run_muster(&w);
    let result = metrics::summarize(&w, &rec);
    let (a, b) = (tenant(&result.tenants, "a"), tenant(&result.tenants, "b"));
    assert_eq!((a.completed, b.completed), (2, 1));
    // b's job is placed the moment it comes: nothing of its entitlement goes missing.
    assert_eq!(b.wait_within_quota.max_s, 0.0, "{b:?}");
    assert_eq!(b.shortfall_h, 0.0, "{b:?}");
    // One of a's jobs is evicted after 10 s on 4 cores: 40 core-seconds lost.
    assert_eq!(a.evictions, 1);
    assert_eq!(a.lost_h, metrics::round3(40.0 / 3600.0), "{a:?}");
    assert_eq!((b.evictions, b.lost_h), (0, 0.0));
    // The eviction itself: which job, when, after how long, and what went with it.
    let [e] = result.evictions.as_slice() else { panic!("one eviction: {:?}", result.evictions) };
    assert_eq!((e.class.as_str(), e.queue.as_deref(), e.at_s, e.ran_s), ("a-job", Some("a"), 10.0, 10.0), "{e:?}");
    assert_eq!(e.lost_h.get("cpu"), Some(&a.lost_h), "{e:?}");
    assert!(e.job.starts_with("a-job"), "{e:?}");
    // a asked 8 cores while it was entitled to its 4: no shortfall for it either.
    assert_eq!(a.shortfall_h, 0.0, "{a:?}");
}

#[test]
fn without_reclaim_the_owner_waits_for_the_borrower_and_its_shortfall_is_that_wait() {
    let w = load("no-reclaim", &borrow_and_return(false)).unwrap();
    let rec = run_muster(&w);
    let b = tenant(&metrics::summarize(&w, &rec).tenants, "b").clone();
    // b's job waits until a's end at 100 s: 90 s without the 4 cores it was entitled to.
    assert_eq!(b.wait_within_quota.max_s, 90.0, "{b:?}");
    assert_eq!(b.shortfall_h, metrics::round3(4.0 * 90.0 / 3600.0), "{b:?}");
    assert_eq!(b.entitled_h, metrics::round3(4.0 * 110.0 / 3600.0), "{b:?}");
    assert_eq!(b.shortfall_share, metrics::round3(90.0 / 110.0));
    assert!(metrics::summarize(&w, &rec).evictions.is_empty(), "nothing is cut short without reclaim");
    assert_eq!(rec.tenants.evictions, vec![0, 0]);
}

#[test]
fn the_tenants_section_and_each_class_queue_are_checked_by_field() {
    let base = borrow_and_return(true);
    let no_queue = base.replace("queue: a, ", "");
    assert!(refused("no-queue", &no_queue).contains("jobClasses[0].queue: missing; name one of the tenants' queues"));
    let unknown = base.replace("queue: a, ", "queue: z, ");
    assert!(refused("unknown", &unknown).contains("\"z\" is not a tenant's queue; queues are [\"a\", \"b\"]"));
    let gpu = base.replace("quotas: {cpu: {nominal: 4}}}", "quotas: {nvidia.com/gpu: {nominal: 4}}}");
    let msg = refused("gpu", &gpu);
    assert!(msg.contains("tenants.queues[0].quotas.nvidia.com/gpu: no node offers"), "{msg}");
    let lend = base.replacen("{cpu: {nominal: 4}}", "{cpu: {nominal: 4, lendingLimit: 5}}", 1);
    let msg = refused("lend", &lend);
    assert!(msg.contains("tenants.queues[0].quotas.cpu.lendingLimit: is above nominal"), "{msg}");
    let lonely =
        base.replacen("cohort: lab, quotas: {cpu: {nominal: 4}}", "quotas: {cpu: {nominal: 4, borrowingLimit: 2}}", 1);
    let msg = refused("lonely", &lonely);
    assert!(msg.contains("tenants.queues[0].quotas.cpu.borrowingLimit: only a queue in a cohort can borrow"), "{msg}");
    let untenanted = "name: t\ncluster: cluster.yaml\njobClasses:\n\
                      \x20 - {name: j, queue: a, count: 1, members: 1, resources: {cpu: \"1\"}, runTime: 1s}\n";
    assert!(refused("untenanted", untenanted).contains("jobClasses[0].queue: the scenario declares no tenants"));
    // A class asking more than its queue may ever hold, the cohort idle, is refused by name:
    // here b leaves the cohort, so its 4 cpu are all it may use, and its jobs ask 8.
    let alone = base
        .replacen("{name: b, cohort: lab, quotas: {cpu: {nominal: 4}}", "{name: b, quotas: {cpu: {nominal: 4}}", 1)
        .replace("count: 1, members: 1, resources: {cpu: \"4\"}", "count: 1, members: 2, resources: {cpu: \"4\"}");
    let msg = refused("alone", &alone);
    assert!(msg.contains("jobClasses[1]") && msg.contains("can never start in queue \"b\""), "{msg}");
    // Within the cohort it may borrow a's 4 cpu: the same jobs are taken.
    let shared =
        base.replace("count: 1, members: 1, resources: {cpu: \"4\"}", "count: 1, members: 2, resources: {cpu: \"4\"}");
    assert!(load("shared", &shared).is_ok());
}

#[test]
fn a_lull_stops_a_class_arrivals_and_resumes_them_after() {
    let text = "name: t\ncluster: cluster.yaml\njobClasses:\n\
                \x20 - {name: j, count: 5, members: 1, resources: {cpu: \"1\"}, runTime: 1s,\n\
                \x20    arrival: {pattern: uniform, interval: 10s, lulls: [{from: 25s, to: 60s}]}}\n";
    let w = load("lull", text).unwrap();
    let submits: Vec<i64> = w.jobs.iter().map(|j| j.submit_ms / 1000).collect();
    assert_eq!(submits, [0, 10, 20, 65, 75], "the 30 s arrival waits out the lull's 35 s");
    let backwards = text.replace("to: 60s", "to: 20s");
    assert!(refused("lull-back", &backwards).contains("jobClasses[0].arrival.lulls[0].to: must be after from"));
}

#[test]
fn room_held_before_a_job_runs_is_no_share_of_the_quota() {
    // One 20 s job whose pod takes 10 s from binding to Ready: its team was entitled to 4 cores
    // for all 30 s, and had them working for 20.
    let text = "name: t\ncluster: cluster.yaml\n\
                timing: {podCreateQps: 0, bindQps: 0, podStartDelay: 10s, jobCompleteDelay: 0s}\n\
                tenants:\n  queues:\n    - {name: a, quotas: {cpu: {nominal: 4}}}\n\
                jobClasses:\n\
                \x20 - {name: j, queue: a, count: 1, members: 1, resources: {cpu: \"4\"}, runTime: 20s}\n";
    let w = load("start-delay", text).unwrap();
    let rec = run_muster(&w);
    let a = tenant(&metrics::summarize(&w, &rec).tenants, "a").clone();
    assert_eq!(a.entitled_h, metrics::round3(4.0 * 30.0 / 3600.0), "{a:?}");
    assert_eq!(a.held_h, metrics::round3(4.0 * 20.0 / 3600.0), "{a:?}");
    assert_eq!(a.shortfall_h, metrics::round3(4.0 * 10.0 / 3600.0), "{a:?}");
}

/// Teams a and b (2 cpu each) and `idle` (4, no jobs, so it lends them all) in one cohort. b
/// fills 6 cpu at 0 with 100 s one-cpu jobs; a comes at 10 s with four 20 s one-cpu jobs: two
/// fit its nominal, two more would borrow. `rule` is every team's fairShareWithinCohort.
fn both_borrow(rule: &str) -> String {
    let team = |name: &str, nominal: u32| {
        format!(
            "\x20   - {{name: {name}, cohort: lab, quotas: {{cpu: {{nominal: {nominal}}}}}, \
             preemption: {{fairShareWithinCohort: {rule}}}}}\n"
        )
    };
    format!(
        "name: t\ncluster: cluster.yaml\n\
         timing: {{podCreateQps: 0, bindQps: 0, podStartDelay: 0s, jobCompleteDelay: 0s}}\n\
         tenants:\n  queues:\n{}{}{}\
         jobClasses:\n\
         \x20 - {{name: b-job, queue: b, count: 6, members: 1, resources: {{cpu: \"1\"}}, runTime: 100s}}\n\
         \x20 - {{name: a-job, queue: a, count: 4, members: 1, resources: {{cpu: \"1\"}}, runTime: 20s, \
         arrival: {{start: 10s}}}}\n",
        team("a", 2),
        team("b", 2),
        team("idle", 4)
    )
}

#[test]
fn fair_share_preemption_gives_a_borrowing_team_its_share_of_the_borrowed_room() {
    // With it, a takes two of b's jobs at 10 s: both then borrow 2 of idle's 4.
    let w = load("fair-share", &both_borrow("LowerOrEqualPriority")).unwrap();
    let rec = run_muster(&w);
    let tenants = metrics::summarize(&w, &rec).tenants;
    let (a, b) = (tenant(&tenants, "a"), tenant(&tenants, "b"));
    assert_eq!((a.completed, b.completed), (4, 6));
    assert_eq!(b.evictions, 2, "{b:?}");
    assert_eq!(b.lost_h, metrics::round3(2.0 * 10.0 / 3600.0), "two jobs, 10 s on 1 cpu each: {b:?}");
    assert_eq!(a.evictions, 0, "{a:?}");
    // Without it, a's two borrowing jobs wait for b's to end at 100 s.
    let w = load("no-fair-share", &both_borrow("Never")).unwrap();
    let rec = run_muster(&w);
    assert_eq!(rec.tenants.evictions, vec![0, 0, 0]);
}
