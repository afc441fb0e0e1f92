//! End-to-end checks of the engine, the models, the metrics and the outputs.

use std::path::{Path, PathBuf};

use muster_sim::engine::Engine;
use muster_sim::scheduler::{Action, ClusterView, JobId, Scheduler, SimEvent};
use muster_sim::{RunOptions, Workload, models, scenario};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A workload from inline texts; the cluster is written next to the scenario in a temp dir.
fn workload(test: &str, cluster: &str, scen: &str, seed: u64) -> Result<Workload, muster_sim::SimError> {
    let dir = std::env::temp_dir().join(format!("muster-sim-{test}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("cluster.yaml"), cluster).unwrap();
    scenario::from_text("scen.yaml", &format!("cluster: cluster.yaml\n{scen}"), &dir, seed)
}

/// Wraps a model and records what it saw and did, with times.
struct Tap<S> {
    inner: S,
    events: Vec<(i64, SimEvent)>,
    actions: Vec<(i64, Action)>,
    /// The job of every pod bound, in order.
    bound: Vec<JobId>,
    /// The job of every pod created, in order.
    created: Vec<JobId>,
}

impl<S: Scheduler> Scheduler for Tap<S> {
    fn name(&self) -> String {
        self.inner.name()
    }
    fn on_event(&mut self, e: &SimEvent, v: &ClusterView<'_>, now: i64) {
        self.events.push((now, e.clone()));
        if let SimEvent::PodBound { pod, .. } = e {
            self.bound.push(v.pod(*pod).job);
        }
        if let SimEvent::PodCreated { pod } = e {
            self.created.push(v.pod(*pod).job);
        }
        self.inner.on_event(e, v, now);
    }
    fn decide(&mut self, v: &ClusterView<'_>, now: i64) -> Vec<Action> {
        let a = self.inner.decide(v, now);
        self.actions.extend(a.iter().map(|x| (now, x.clone())));
        a
    }
    fn next_wakeup(&self) -> Option<i64> {
        self.inner.next_wakeup()
    }
}

fn tap<S: Scheduler>(w: &Workload, s: S) -> (Tap<S>, muster_sim::engine::RunRecord) {
    let mut t = Tap { inner: s, events: vec![], actions: vec![], bound: vec![], created: vec![] };
    let rec = Engine::new(w).unwrap().run(&mut t, false).unwrap();
    (t, rec)
}

fn seed_deadlock() -> Workload {
    scenario::load(&repo().join("scenarios/suite/seed-001.yaml"), 1).unwrap()
}

#[test]
fn an_unknown_scheduler_is_refused_with_each_known_name_once() {
    let Err(e) = muster_sim::scheduler("kube", &seed_deadlock()) else { panic!("kube is not a scheduler") };
    let msg = e.to_string();
    assert!(msg.starts_with("unknown scheduler \"kube\"; known: default, "), "{msg}");
    assert_eq!(msg.matches("muster,").count() + msg.matches("muster\n").count(), 1, "{msg}");
    assert!(msg.contains("muster-besteffort"), "{msg}");
}

#[test]
fn default_model_reproduces_the_seed_001_deadlock() {
    let w = seed_deadlock();
    let (t, rec) = tap(&w, models::kube::DefaultScheduler::default());
    // Jobs 1 and 2 are the big ones (job 0 is the quick job); nothing is ever deleted here.
    let bound = |j: u32| t.bound.iter().filter(|b| b.0 == j).count();
    assert_eq!(rec.jobs[0].phase, muster_sim::scheduler::JobPhase::Succeeded);
    for j in [1, 2] {
        assert!(rec.jobs[j].ended_ms.is_none(), "big job {j} must be stuck");
        assert!((1..20).contains(&bound(j as u32)), "big job {j} partly running: {} of 20 bound", bound(j as u32));
    }
    assert!(rec.horizon_hit);
    // Every other model, and the ideal schedule, completes all three.
    let opts = RunOptions::new("");
    let report = muster_sim::run_workload(&w, &opts).unwrap();
    assert_eq!(report.ideal_fifo_gang.completed, 3);
    let by = |n: &str| report.runs.iter().find(|r| r.scheduler == n).unwrap();
    assert_eq!((by("default").completed, by("default").unfinished), (1, 2));
    assert_eq!(by("kueue").unfinished, 2, "quota at 2x allocatable admits both: same deadlock");
    assert_eq!(by("kueue-wfpr").completed, 3);
    assert_eq!(by("coscheduling").completed, 3);
    assert!(by("default").occupancy.clog_share > 0.5);
}

#[test]
fn coscheduling_releases_a_group_at_the_permit_timeout() {
    // Ten members on ten nodes, one of them held for longer than the run by a job that came
    // first: nine wait at Permit, the tenth fails Filter, and PostFilter lets a gang that lacks a
    // tenth of minMember keep waiting, so only the 60 s permit timeout rejects the nine; the loop
    // has nothing else to try, so their nodes come back at once.
    let w = workload(
        "permit",
        "name: c\nnodeClasses:\n  - {name: n, count: 10, capacity: {cpu: \"4\", pods: 10}}\n",
        "name: permit\nhorizon: 250s\ntiming: {podCreateQps: 0, podStartDelay: 0s}\n\
         jobClasses:\n  - {name: hold, count: 1, members: 1, resources: {cpu: \"4\"}, runTime: 1000s}\n\
         \x20 - {name: gang, count: 1, members: 10, resources: {cpu: \"4\"}, runTime: 10s, \
         arrival: {pattern: burst, start: 1s}}\n",
        1,
    )
    .unwrap();
    let (t, _) = tap(&w, models::cosched::Coscheduling::new(60_000));
    // The holding job is reserved and bound at 0 s, the gang's members from 1 s.
    let reserve = t.actions.iter().find(|(at, a)| *at >= 1_000 && matches!(a, Action::Reserve { .. })).unwrap().0;
    let unreserve = t.actions.iter().find(|(_, a)| matches!(a, Action::Unreserve { .. })).unwrap().0;
    assert_eq!(unreserve - reserve, 60_000);
    let at_timeout = t.actions.iter().filter(|(at, a)| *at == unreserve && matches!(a, Action::Unreserve { .. }));
    assert_eq!(at_timeout.count(), 9);
    // The job of each pod, from the pods created in order.
    let created = t.events.iter().filter_map(|(_, e)| match e {
        SimEvent::PodCreated { pod } => Some(*pod),
        _ => None,
    });
    let job_of: std::collections::BTreeMap<_, _> = created.zip(t.created.iter().copied()).collect();
    let gang = w.jobs.iter().position(|j| j.class == "gang").unwrap() as u32;
    let gang_bound_before = t
        .actions
        .iter()
        .any(|(at, a)| matches!(a, Action::Bind { pod, .. } if job_of[pod].0 == gang && *at < unreserve));
    assert!(!gang_bound_before, "no member of the gang is bound before its permit times out");
}

#[test]
fn coscheduling_gives_nothing_back_for_pods_deleted_while_rejected() {
    // elastic-sixtieth: Jobs whose 60 s deadline counts from their creation fail while pods of
    // theirs, rejected at Permit, wait for their binding goroutines to give their nodes back.
    // Those pods are gone: the model once tried to give back their nodes and the run failed.
    let w = scenario::load(&repo().join("scenarios/suite/elastic-sixtieth.yaml"), 1).unwrap();
    let (t, rec) = tap(&w, models::cosched::Coscheduling::new(10_000));
    let failed = rec.jobs.iter().filter(|j| j.phase == muster_sim::scheduler::JobPhase::Failed).count();
    let succeeded = rec.jobs.iter().filter(|j| j.phase == muster_sim::scheduler::JobPhase::Succeeded).count();
    assert_eq!((succeeded + failed, failed > 0), (120, true), "every job ends, some at their deadline");
    assert!(t.actions.iter().any(|(_, a)| matches!(a, Action::Unreserve { .. })), "gangs were rejected at Permit");
}

#[test]
fn coscheduling_gives_a_rejected_gangs_node_back_only_after_its_other_pods_were_tried() {
    // Three of four nodes are held for 100 s; a 4-pod gang arrives. Its first pod waits at
    // Permit on the free node and activates the others; the next fails Filter and PostFilter
    // rejects the waiting one. Its node comes back from its binding goroutine, not before the
    // loop has tried the gang's other active pods (which fail against the held node): so the
    // gang does not re-take the node attempt after attempt for as long as the three are held.
    let w = workload(
        "churn",
        "name: c\nnodeClasses:\n  - {name: n, count: 4, capacity: {cpu: \"4\", pods: 10}}\n",
        "name: churn\nhorizon: 300s\n\
         jobClasses:\n  - {name: hold, count: 1, members: 3, resources: {cpu: \"4\"}, runTime: 100s, \
         arrival: {pattern: uniform, start: 0s, interval: 1s}}\n  - {name: gang, count: 1, members: 4, \
         resources: {cpu: \"4\"}, runTime: 10s, arrival: {pattern: uniform, start: 1s, interval: 1s}}\n",
        1,
    )
    .unwrap();
    let (t, rec) = tap(&w, models::cosched::Coscheduling::new(10_000));
    assert!(rec.jobs.iter().all(|j| j.phase == muster_sim::scheduler::JobPhase::Succeeded));
    let hold_end = t
        .events
        .iter()
        .find(|(_, e)| matches!(e, SimEvent::JobFinished { job: JobId(0), .. }))
        .map(|(at, _)| *at)
        .unwrap();
    let reserves = t.actions.iter().filter(|(at, a)| *at < hold_end && matches!(a, Action::Reserve { .. })).count();
    // Given back at once, the node was re-taken on every other attempt (over 2,000 times).
    assert!(reserves <= 30, "the gang re-took the free node {reserves} times while the others were held");
    // Each rejected pod's node comes back only once no pod is left to try, after the rejection.
    for (at, a) in &t.actions {
        if let Action::Unreserve { .. } = a {
            assert!(!t.actions.iter().any(|(t2, b)| t2 == at && matches!(b, Action::Reserve { .. })));
        }
    }
}

#[test]
fn kueue_wait_for_pods_ready_evicts_and_requeues_with_backoff() {
    let mut w = seed_deadlock();
    w.kueue.block_admission = false;
    w.kueue.pods_ready_timeout = scenario::Dur(30_000);
    w.kueue.backoff_base = scenario::Dur(10_000);
    let (t, rec) = tap(&w, models::kueue::Kueue::new(w.kueue.clone(), true));
    let suspends: Vec<(i64, JobId)> = t
        .actions
        .iter()
        .filter_map(|(at, a)| if let Action::Suspend { job } = a { Some((*at, *job)) } else { None })
        .collect();
    assert!(!suspends.is_empty(), "a big job must time out and be evicted");
    // Each eviction of a job requeues it after base * 2^(k-1): 10 s, 20 s, 40 s, ...
    for job in [JobId(1), JobId(2)] {
        let mine: Vec<i64> = suspends.iter().filter(|(_, j)| *j == job).map(|(at, _)| *at).collect();
        assert!(!mine.is_empty(), "{job:?} never evicted");
        for (k, &at) in mine.iter().enumerate() {
            let restart = t
                .actions
                .iter()
                .find(|(t2, a)| *t2 > at && matches!(a, Action::Start { job: j, .. } if *j == job))
                .map(|(t2, _)| *t2);
            match restart {
                Some(r) => assert_eq!(r - at, 10_000 << k, "eviction {k} of {job:?}"),
                None => assert!(at + (10_000 << k) > w.params.horizon_ms, "never requeued before the horizon"),
            }
        }
    }
    assert_eq!(rec.suspensions as usize, suspends.len());
    // Without blockAdmission both big jobs are admitted together again after the same backoff,
    // 100 ms apart (their submissions were). The first time they deadlock (the quick job holds
    // the rest); after the requeue the Job controller's slow-start batches (1, 2, 4, ...) let
    // the job started first get ahead of the other, so it gets all its pods, runs, and frees
    // the cluster for the second: one eviction each, then both succeed.
    assert_eq!(suspends.len(), 2, "{suspends:?}");
    assert!(rec.jobs.iter().all(|j| j.phase == muster_sim::scheduler::JobPhase::Succeeded));
    assert!(rec.jobs[1].ended_ms < rec.jobs[2].ended_ms);
}

const TINY_CLUSTER: &str = "name: tiny\nnodeClasses:\n  - {name: n, count: 1, capacity: {cpu: \"4\", pods: 10}}\n";

#[test]
fn metrics_on_a_hand_computed_run() {
    // One node of 4 cpu, instant control plane. A (1 pod x 2 cpu, 10 s) and B (2 pods x 2 cpu,
    // 20 s after all ready) arrive at 0. A0 and B0 fill the node; B1 waits until A ends at 10 s;
    // B runs 10..30 s. Waits 0 and 10 s; B0 clogs 2 cores for 10 s; the node is full throughout.
    let w = workload(
        "metrics",
        TINY_CLUSTER,
        "name: m\nsampleInterval: 10s\ntiming: {podCreateQps: 0, bindQps: 0, podStartDelay: 0s, jobCompleteDelay: 0s}\njobClasses:\n\
         \x20 - {name: a, count: 1, members: 1, resources: {cpu: \"2\"}, runTime: 10s, runStarts: podStart}\n\
         \x20 - {name: b, count: 1, members: 2, resources: {cpu: \"2\"}, runTime: 20s}\n",
        1,
    )
    .unwrap();
    let opts = RunOptions { schedulers: vec!["default".into()], ..RunOptions::new("") };
    let r = &muster_sim::run_workload(&w, &opts).unwrap().runs[0];
    assert_eq!((r.completed, r.failed, r.makespan_s), (2, 0, Some(30.0)));
    assert_eq!((r.wait.mean_s, r.wait.p50_s, r.wait.p95_s, r.wait.max_s), (5.0, 0.0, 10.0, 10.0));
    // (0 + 10) / 10 = 1 and (10 + 20) / 20 = 1.5.
    assert_eq!(r.bounded_slowdown, 1.25);
    assert_eq!(r.occupancy.clog_cpu_core_s, 20.0);
    assert_eq!(r.occupancy.clog_share, 0.167);
    assert_eq!(r.occupancy.mean_util_cpu, 1.0);
    assert_eq!(r.utilization.cpu, vec![1.0, 1.0, 1.0]);
    assert_eq!(r.completion_times_s, vec![10.0, 30.0]);
    assert!(r.utilization.extended.is_empty() && r.occupancy.mean_util_other.is_empty());
}

#[test]
fn a_job_completes_a_sync_after_its_pods_and_only_what_waits_for_the_job_pays_it() {
    // One 4-cpu node, instant control plane, Jobs marked Complete 1 s after their last pod. A and
    // B (4 cpu, 10 s) arrive at 0. muster ends A's group at its pod's end, as its controller does
    // for a Job: B starts at 10 s. Kueue's model frees A's quota with the Job: B starts at 11 s.
    let w = workload(
        "complete",
        TINY_CLUSTER,
        "name: c\ntiming: {podCreateQps: 0, bindQps: 0, podStartDelay: 0s, jobCompleteDelay: 1s}\n\
         kueue: {quotaFactor: 1}\njobClasses:\n\
         \x20 - {name: a, count: 2, members: 1, resources: {cpu: \"4\"}, runTime: 10s, runStarts: podStart}\n",
        1,
    )
    .unwrap();
    let opts = RunOptions { schedulers: vec!["muster".into(), "kueue".into()], ..RunOptions::new("") };
    let report = muster_sim::run_workload(&w, &opts).unwrap();
    let (muster, kueue) = (&report.runs[0], &report.runs[1]);
    assert_eq!((muster.wait.max_s, muster.makespan_s), (10.0, Some(21.0)), "B ran 10..20 s, its Job complete at 21 s");
    assert_eq!((kueue.wait.max_s, kueue.makespan_s), (11.0, Some(22.0)));
}

#[test]
fn every_extended_resource_is_counted() {
    // One node of 4 cpu, 8 GPUs and 2 FPGAs; one job of 1 pod (1 cpu, 4 GPUs, 1 FPGA) for 10 s of
    // a 20 s run: GPUs and FPGAs are each half held for half the run.
    let w = workload(
        "extended",
        "name: x\nnodeClasses:\n  - {name: n, count: 1, capacity: {cpu: \"4\", nvidia.com/gpu: 8, example.com/fpga: 2, pods: 10}}\n",
        "name: x\nsampleInterval: 10s\ntiming: {podCreateQps: 0, bindQps: 0, podStartDelay: 0s, jobCompleteDelay: 0s}\njobClasses:\n\
         \x20 - {name: a, count: 1, members: 1, resources: {cpu: \"1\", nvidia.com/gpu: 4, example.com/fpga: 1}, runTime: 10s}\n\
         \x20 - {name: b, count: 1, members: 1, resources: {cpu: \"1\"}, runTime: 20s}\n",
        1,
    )
    .unwrap();
    let opts = RunOptions { schedulers: vec!["default".into()], ..RunOptions::new("") };
    let report = muster_sim::run_workload(&w, &opts).unwrap();
    let r = &report.runs[0];
    assert_eq!(r.makespan_s, Some(20.0));
    assert_eq!(r.occupancy.mean_util_gpu, Some(0.25));
    assert_eq!(r.occupancy.mean_util_other, [("example.com/fpga".to_string(), 0.25)].into());
    assert_eq!(r.utilization.extended["nvidia.com/gpu"], vec![0.5, 0.0]);
    assert_eq!(r.utilization.extended["example.com/fpga"], vec![0.5, 0.0]);
    // The chart follows the most held resource: GPUs and FPGAs at first, then cpu alone.
    assert_eq!(r.utilization.peak_shares(), vec![0.5, 0.25]);
    assert!(report.render_table().contains("example.com/fpga util mean (%)"), "{}", report.render_table());
    assert!(report.to_csv().contains("default,*,util_mean[example.com/fpga],0.250"), "{}", report.to_csv());
}

fn small_jittered(seed: u64) -> Workload {
    workload(
        "determinism",
        "name: d\nnodeClasses:\n  - {name: n, count: 8, capacity: {cpu: \"16\", memory: 64Gi, pods: 110}}\n",
        "name: d\njobClasses:\n  - {name: j, count: 40, members: {min: 2, max: 6}, resources: {cpu: \"4\", memory: 8Gi},\n\
         \x20    runTime: 2m, jitter: 0.5, deadline: 30m, arrival: {pattern: poisson, interval: 20s}}\n",
        seed,
    )
    .unwrap()
}

#[test]
fn same_seed_same_bytes_other_seed_other_bytes() {
    let json = |seed| {
        let opts = RunOptions { seed, ..RunOptions::new("") };
        let r = muster_sim::run_workload(&small_jittered(seed), &opts).unwrap();
        (r.to_json(), r.to_csv(), r.render_table())
    };
    let a = json(7);
    assert_eq!(a, json(7));
    assert_ne!(a.0, json(8).0);
    assert!(a.0.contains("\"ideal_fifo_gang\""));
}

#[test]
fn scenario_errors_name_the_field() {
    let bad = |scen: &str| workload("errors", TINY_CLUSTER, scen, 1).unwrap_err().to_string();
    let e = bad("name: e\njobClasses:\n  - {name: j, count: 0, members: 1, resources: {cpu: \"1\"}, runTime: 1s}\n");
    assert!(e.contains("jobClasses[0].count") && e.contains("allowed"), "{e}");
    let e =
        bad("name: e\njobClasses:\n  - {name: j, count: 1, members: 1, resources: {nvidia.com/gpu: 1}, runTime: 1s}\n");
    assert!(e.contains("jobClasses[0].resources.nvidia.com/gpu") && e.contains("no node offers"), "{e}");
    let e = bad("name: e\njobClasses:\n  - {name: j, count: 1, members: 1, resources: {cpu: \"1\"}, runTime: soon}\n");
    assert!(e.contains("jobClasses[0].runTime") && e.contains("duration"), "{e}");
    assert!(!e.contains("jobClasses[0].runTime: jobClasses[0]"), "the path is said once: {e}");
    let e = bad(
        "name: e\njobClasses:\n  - {name: j, count: 1, members: {min: 3, max: 2}, resources: {cpu: \"1\"}, runTime: 1s}\n",
    );
    assert!(e.contains("jobClasses[0].members"), "{e}");
    let e = bad(
        "name: e\njobClasses:\n  - {name: j, count: 1, members: 1, resources: {cpu: \"1\"}, runTime: 1s, arrival: {pattern: uniform}}\n",
    );
    assert!(e.contains("jobClasses[0].arrival.interval"), "{e}");
    let e = bad("name: e\ntiming: {bindQps: -1}\njobClasses: []\n");
    assert!(e.contains("timing.bindQps"), "{e}");
    let e = bad("name: e\ntiming: {attemptCost: fast}\njobClasses: []\n");
    assert!(e.contains("timing.attemptCost") && e.contains("250us"), "{e}");
    let e = bad("name: e\ntiming: {podEndSpread: {newClump: 2, gap: 1s}}\njobClasses: []\n");
    assert!(e.contains("timing.podEndSpread.newClump"), "{e}");
    let e = bad(
        "name: e\nkueue: {fairSharing: {preemptionStrategies: [LessThanInitialShare, LessThanInitialShare]}}\njobClasses: []\n",
    );
    assert!(e.contains("kueue.fairSharing.preemptionStrategies") && e.contains("[LessThanInitialShare]"), "{e}");
    let e = bad(
        "name: e\nhorizon: 0s\njobClasses:\n  - {name: j, count: 1, members: 1, resources: {cpu: \"1\"}, runTime: 1s}\n",
    );
    assert!(e.contains("horizon: must be at least 1ms"), "{e}");
    let e = bad("name: e\njobClasses:\n  - {name: j, count: 2, members: 1, resources: {cpu: \"1\"}, runTime: 1s, \
         arrival: {pattern: burst, interval: 30s}}\n");
    assert!(e.contains("jobClasses[0].arrival.interval") && e.contains("burst arrives all at once"), "{e}");
    let e = bad("name: e\njobClasses:\n  - name: j\n    count: 1\n    runTime: 1s\n    sets:\n      \
         - {name: Launcher, members: 1, resources: {cpu: \"1\"}}\n");
    assert!(e.contains("jobClasses[0].sets[0].name") && e.contains("a-z, 0-9"), "{e}");
    let e = bad(
        "name: e\nhorizon: 1h\njobClasses:\n  - {name: j, count: 2, members: 1, resources: {cpu: \"1\"}, runTime: 1s, \
         arrival: {pattern: uniform, start: 2h, interval: 1m}}\n",
    );
    assert!(e.contains("jobClasses[0].arrival") && e.contains("before the horizon (3600 s)"), "{e}");
    let e = bad("name: e\nnative: {podInitialBackoff: 10s, podMaxBackoff: 1s}\njobClasses: []\n");
    assert!(e.contains("native.podMaxBackoff") && e.contains("podInitialBackoff"), "{e}");
    // Jobs no placement holds, even on the empty cluster, are refused, not left waiting for ever:
    // larger than the node, or naming a topology level the tiny cluster's one node does not carry.
    let e = bad("name: e\njobClasses:\n  - {name: j, count: 1, members: 2, resources: {cpu: \"3\"}, runTime: 1s}\n");
    assert!(e.contains("jobClasses[0]") && e.contains("can never be placed") && e.contains("2 members"), "{e}");
    let e = bad("name: e\njobClasses:\n  - {name: j, count: 1, members: 1, resources: {cpu: \"1\"}, runTime: 1s, \
         topology: {level: rack, mode: preferred}}\n");
    assert!(e.contains("jobClasses[0]") && e.contains("no topology level \"rack\""), "{e}");
}

#[test]
fn a_trace_with_nothing_to_run_is_refused_saying_why() {
    let dir = std::env::temp_dir().join(format!("muster-sim-swf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("cluster.yaml"), TINY_CLUSTER).unwrap();
    // Fields: job, submit, wait, run, allocated procs, ... requested procs (8th).
    let traces = [
        ("empty", "; only a header\n", "it holds no job line"),
        (
            "unknown",
            "1 0 -1 -1 -1 -1 -1 -1 -1 -1 1 1 1 1 1 -1 -1 -1\n2 5 -1 0 2 -1 -1 2 -1 -1 1 1 1 1 1 -1 -1 -1\n",
            "none of its 2 jobs",
        ),
    ];
    for (name, trace, says) in traces {
        std::fs::write(dir.join(format!("{name}.swf")), trace).unwrap();
        let scen =
            format!("name: t\ncluster: cluster.yaml\nswf: {{file: {name}.swf, procsPerPod: 1, cpuPerProc: \"1\"}}\n");
        let e = scenario::from_text("t.yaml", &scen, &dir, 1).unwrap_err().to_string();
        assert!(e.contains("swf.file") && e.contains(says), "{name}: {e}");
    }
    let one = "1 0 -1 10 2 -1 -1 2 -1 -1 1 1 1 1 1 -1 -1 -1\n";
    std::fs::write(dir.join("one.swf"), one).unwrap();
    let scen = "name: t\ncluster: cluster.yaml\nswf: {file: one.swf, procsPerPod: 1, cpuPerProc: \"1\"}\n";
    assert_eq!(scenario::from_text("t.yaml", scen, &dir, 1).unwrap().jobs.len(), 1);
}

#[test]
fn shipped_scenarios_load() {
    let dir = repo().join("scenarios");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let p = entry.unwrap().path();
        if p.extension().is_some_and(|e| e == "yaml") {
            let w = scenario::load(&p, 1).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            assert!(!w.jobs.is_empty());
            n += 1;
        }
    }
    assert!(n >= 8);
    let s = scenario::load(&dir.join("seed-scalability.yaml"), 1).unwrap();
    assert_eq!(s.jobs.iter().filter(|j| j.class == "batch").count(), 1000);
    assert!(s.jobs.iter().filter(|j| j.class == "batch").all(|j| (180_000..270_000).contains(&j.run_ms)));
    let swf = scenario::load(&dir.join("swf-example.yaml"), 1).unwrap();
    assert_eq!(swf.jobs.len(), 300);
}

#[test]
fn plots_are_written_as_svg_and_png() {
    let w = small_jittered(1);
    let r = muster_sim::run_workload(&w, &RunOptions::new("")).unwrap();
    let dir = std::env::temp_dir().join(format!("muster-sim-plots-{}", std::process::id()));
    let files = r.write_plots(&dir).unwrap();
    assert_eq!(files.len(), 6);
    for f in files {
        let bytes = std::fs::read(&f).unwrap();
        if f.extension().unwrap() == "png" {
            assert_eq!(&bytes[1..4], b"PNG");
        } else {
            assert!(String::from_utf8(bytes).unwrap().contains("<svg"));
        }
    }
}

#[test]
fn job_controller_creates_pods_in_slow_start_batches() {
    // Two 10-pod jobs synced at once, one create call per 10 ms served in request order: each
    // sync asks for 1, 2, 4, 3 pods, a batch once its previous batch is created
    // (job_controller.go, manageJob). Round-robin one pod at a time would give ABABAB...
    let w = workload(
        "slowstart",
        "name: s\nnodeClasses:\n  - {name: n, count: 4, capacity: {cpu: \"16\", pods: 110}}\n",
        "name: s\nsubmitters: {count: 2}\ntiming: {podCreateQps: 100, bindQps: 0, podStartDelay: 0s, concurrentJobSyncs: 2}\n\
         jobClasses:\n  - {name: j, count: 2, members: 10, resources: {cpu: \"1\"}, runTime: 1s, arrival: {pattern: burst}}\n",
        1,
    )
    .unwrap();
    let (t, rec) = tap(&w, models::kube::DefaultScheduler::default());
    let order: String = t.created.iter().map(|j| (b'A' + j.0 as u8) as char).collect();
    assert_eq!(order, "ABAABBAAAABBBBAAABBB");
    assert_eq!(rec.jobs.iter().filter(|j| j.phase == muster_sim::scheduler::JobPhase::Succeeded).count(), 2);
}

#[test]
fn default_model_pops_from_backoff_when_the_active_queue_is_empty() {
    // One 4-cpu node. A (4 cpu) runs 0..1.2 s; B (4 cpu) arrives at 0.5 s, fails, and is parked
    // with a 1 s backoff (expiry 1.5 s, window ready at 2 s). A's end requeues B (queueing hint:
    // an assigned pod went away) into the backoff queue; the active queue being empty, B is
    // popped at once (SchedulerPopFromBackoffQ) and bound at A's end, not at its backoff expiry.
    let w = workload(
        "popbackoff",
        TINY_CLUSTER,
        "name: p\nsubmitters: {count: 2}\ntiming: {podCreateQps: 0, bindQps: 0, podStartDelay: 0s, jobCompleteDelay: 0s}\njobClasses:\n\
         \x20 - {name: a, count: 1, members: 1, resources: {cpu: \"4\"}, runTime: 1200ms, runStarts: podStart}\n\
         \x20 - {name: b, count: 1, members: 1, resources: {cpu: \"4\"}, runTime: 1s, runStarts: podStart,\n\
         \x20    arrival: {pattern: burst, start: 500ms}}\n",
        1,
    )
    .unwrap();
    let (t, rec) = tap(&w, models::kube::DefaultScheduler::default());
    let bound_at = |job: u32| {
        t.actions.iter().find(|(_, a)| matches!(a, Action::Bind { pod, .. } if pod.0 == job)).map(|(at, _)| *at)
    };
    assert_eq!(bound_at(0), Some(0));
    let a_end = rec.jobs[0].ended_ms.unwrap();
    assert_eq!(a_end, 1200);
    assert_eq!(bound_at(1), Some(a_end), "B must be tried at A's end, inside its backoff");
    // It failed once before: the first failure was at its creation, 500 ms.
    assert!(t.actions.iter().filter(|(_, a)| matches!(a, Action::Bind { .. })).count() == 2);
}

#[test]
fn default_model_attempt_cost_and_status_write_pace_the_loop() {
    // One 4-cpu node. A (4 cpu) runs 0..1.1 s; B and C (4 cpu) arrive at 1 s. B is tried first
    // and fails; its first failure writes the pod status synchronously (statusWrite 300 ms), so
    // the loop is busy until 1.301 s and C, never tried, is bound then in the slot A freed at
    // 1.1 s. Without the status write C fails 1 ms after B, both are requeued by A's end and B,
    // first in order, gets the slot at 1.1 s.
    let run = |write: &str| {
        let w = workload(
            "attemptcost",
            TINY_CLUSTER,
            &format!(
                "name: p\nsubmitters: {{count: 2}}\ntiming: {{podCreateQps: 0, bindQps: 0, podStartDelay: 0s, \
                 attemptCost: 1ms, statusWrite: {write}}}\njobClasses:\n\
                 \x20 - {{name: a, count: 1, members: 1, resources: {{cpu: \"4\"}}, runTime: 1100ms, runStarts: podStart}}\n\
                 \x20 - {{name: b, count: 2, members: 1, resources: {{cpu: \"4\"}}, runTime: 1s, runStarts: podStart,\n\
                 \x20    arrival: {{pattern: burst, start: 1s}}}}\n"
            ),
            1,
        )
        .unwrap();
        let (t, _) = tap(&w, models::kube::DefaultScheduler::default());
        t.actions
            .iter()
            .filter_map(|(at, a)| match a {
                Action::Bind { pod, .. } => Some((*at, pod.0)),
                _ => None,
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(run("300ms")[..2], [(0, 0), (1301, 2)]);
    assert_eq!(run("0us")[..2], [(0, 0), (1100, 1)]);
}

#[test]
fn runs_end_on_whole_seconds_and_pod_ends_spread_in_clumps() {
    // One job of 4 pods x 1 cpu, instant control plane, Ready 300 ms after binding, 20.5 s run.
    let job =
        "jobClasses:\n  - {name: j, count: 1, members: 4, resources: {cpu: \"1\"}, runTime: 20500ms, deadline: 60s}\n";
    let run = |timing: &str, runtime: &str| {
        // A Job marked Complete with its last pod unless the case says otherwise.
        let complete = if timing.contains("jobCompleteDelay") { "" } else { ", jobCompleteDelay: 0s" };
        let text = format!(
            "name: s\ntiming: {{podCreateQps: 0, bindQps: 0, podStartDelay: 300ms{complete}{timing}}}\n{}",
            job.replace("20500ms", runtime)
        );
        let w = workload("podends", TINY_CLUSTER, &text, 1).unwrap();
        let (t, rec) = tap(&w, models::kube::DefaultScheduler::default());
        let ends: Vec<i64> =
            t.events.iter().filter(|(_, e)| matches!(e, SimEvent::PodFinished { .. })).map(|(at, _)| *at).collect();
        (ends, rec.jobs[0].ended_ms.unwrap(), rec.jobs[0].phase)
    };
    use muster_sim::scheduler::JobPhase::{Failed, Succeeded};
    // Ready at 0.3 s: the run ends at 20.8 s, or on whole seconds at 0 + 20 s.
    assert_eq!(run("", "20500ms"), (vec![20_800; 4], 20_800, Succeeded));
    assert_eq!(run(", runEndsOnSecond: true", "20500ms"), (vec![20_000; 4], 20_000, Succeeded));
    // The Job controller marks the Job Complete a sync period after its last pod: the pods end
    // (and free their room) at 20.8 s, the job at 22.3 s; a failed job is marked at once.
    assert_eq!(run(", jobCompleteDelay: 1500ms", "20500ms"), (vec![20_800; 4], 22_300, Succeeded));
    assert_eq!(run(", jobCompleteDelay: 1500ms", "100s").1, 60_000);
    // newClump 0: one clump, as without a spread.
    let spread = |p: f64| format!(", runEndsOnSecond: true, podEndSpread: {{newClump: {p}, gap: 1s}}");
    assert_eq!(run(&spread(0.0), "20500ms"), (vec![20_000; 4], 20_000, Succeeded));
    // newClump 1: every pod after the first ends later than the one before; the job completes
    // with its last pod.
    let (ends, end, phase) = run(&spread(1.0), "20500ms");
    assert_eq!((ends[0], phase), (20_000, Succeeded));
    assert!(ends.windows(2).all(|w| w[0] < w[1]), "{ends:?}");
    assert_eq!(end, ends[3]);
    assert_eq!(run(&spread(1.0), "20500ms").0, ends, "same seed, same spread");
    // A deadline (60 s, before the 100 s run ends): the job fails at once, its pods go after.
    let (ends, end, phase) = run(&spread(1.0), "100s");
    assert_eq!((end, phase, ends[0]), (60_000, Failed, 60_000));
    assert!(ends.windows(2).all(|w| w[0] < w[1]), "{ends:?}");
    // Pods that become Ready after their job failed, before their deletion, start no run: bound
    // every 0.5 s, Ready 1 s later (1.5, 2, 2.5, 3 s), the job fails at 2.2 s (a later job keeps
    // the run going while the deletions come).
    let w = workload(
        "lateready",
        TINY_CLUSTER,
        "name: s\ntiming: {podCreateQps: 0, bindQps: 2, podStartDelay: 1s, podEndSpread: {newClump: 1, gap: 10s}}\n\
         jobClasses:\n  - {name: j, count: 1, members: 4, resources: {cpu: \"1\"}, runTime: 1s, deadline: 2200ms}\n\
         \x20 - {name: later, count: 1, members: 1, resources: {cpu: \"1\"}, runTime: 1s, arrival: {pattern: burst, start: 60s}}\n",
        1,
    )
    .unwrap();
    let (t, rec) = tap(&w, models::kube::DefaultScheduler::default());
    let late = |p: u32| {
        t.events.iter().any(|(at, e)| *at > 3000 && matches!(e, SimEvent::PodFinished { pod, .. } if pod.0 == p))
    };
    assert!(late(2) && late(3), "pods 2 and 3 must outlive their Ready at 2.5 and 3 s");
    assert_eq!((rec.jobs[0].phase, rec.jobs[0].ended_ms, rec.jobs[0].run_started_ms), (Failed, Some(2200), None));
    assert!(!t.events.iter().any(|(_, e)| matches!(e, SimEvent::JobRunning { job } if job.0 == 0)));
}
