//! The Volcano and native gang models (models/volcano.rs, models/native.rs) against what their
//! real peers do on the local control plane (docs/peers.md): whole gangs or nothing, Volcano's
//! enqueue reservation and its sessions, kube-scheduler's pod-group cycle and retry. Each check is
//! also run on a model that lacks the mechanism, so that it can fail.

use std::path::{Path, PathBuf};

use muster_sim::engine::{Engine, RunRecord};
use muster_sim::models::{cosched, kube, kueue, native, volcano};
use muster_sim::scheduler::{Action, ClusterView, JobId, Scheduler, SimEvent};
use muster_sim::{Workload, scenario};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn load(rel: &str) -> Workload {
    scenario::load(&repo().join(rel), 1).unwrap()
}

/// Wraps a model and records, after every event: jobs holding part of a gang before their run
/// began (0 < pods holding resources < min members), and the big jobs holding pods at once; and
/// every Bind with its time.
struct Tap<S> {
    inner: S,
    /// (time, job, pods holding) for every partial gang seen.
    partial: Vec<(i64, JobId, u32)>,
    /// Times at which pods of both big jobs (class `big`) held resources.
    overlap: Vec<i64>,
    binds: Vec<(i64, JobId)>,
    /// Every pod that ended, with its job.
    finished: Vec<(i64, JobId)>,
}

fn holding(v: &ClusterView<'_>, job: JobId) -> u32 {
    v.job(job).pods.iter().filter(|p| v.pod(**p).phase.holds()).count() as u32
}

impl<S: Scheduler> Scheduler for Tap<S> {
    fn name(&self) -> String {
        self.inner.name()
    }
    fn on_event(&mut self, e: &SimEvent, v: &ClusterView<'_>, now: i64) {
        self.inner.on_event(e, v, now);
        if let SimEvent::PodFinished { pod, .. } = e {
            self.finished.push((now, v.pod(*pod).job));
        }
        let mut gangs_holding = 0;
        for (i, j) in v.jobs().iter().enumerate() {
            let job = JobId(i as u32);
            let h = holding(v, job);
            if h > 0 && j.spec.class == "big" {
                gangs_holding += 1;
            }
            // A gang counts as partial only before its run (afterwards its pods end in clumps).
            if j.run_started_ms.is_some() || j.phase.is_terminal() {
                continue;
            }
            if h > 0 && h < j.spec.min_members {
                self.partial.push((now, job, h));
            }
        }
        if gangs_holding > 1 {
            self.overlap.push(now);
        }
    }
    fn decide(&mut self, v: &ClusterView<'_>, now: i64) -> Vec<Action> {
        let a = self.inner.decide(v, now);
        for x in &a {
            if let Action::Bind { pod, .. } = x {
                self.binds.push((now, v.pod(*pod).job));
            }
        }
        a
    }
    fn next_wakeup(&self) -> Option<i64> {
        self.inner.next_wakeup()
    }
}

fn tap<S: Scheduler>(w: &Workload, s: S) -> (Tap<S>, RunRecord) {
    let mut t = Tap { inner: s, partial: vec![], overlap: vec![], binds: vec![], finished: vec![] };
    let rec = Engine::new(w).unwrap().run(&mut t, false).unwrap();
    (t, rec)
}

fn all_succeeded(rec: &RunRecord) -> bool {
    rec.jobs.iter().all(|j| j.phase == muster_sim::scheduler::JobPhase::Succeeded)
}

#[test]
fn volcano_and_native_run_seed_001_whole_gangs_one_after_the_other() {
    let w = load("scenarios/suite/seed-001.yaml");
    let (v, vrec) = tap(&w, volcano::Volcano::new(&w.volcano, &w.tenants));
    let (n, nrec) = tap(&w, native::Native::new(&w.native));
    for (name, t, rec) in [("volcano", &v.partial, &vrec), ("native", &n.partial, &nrec)] {
        assert!(all_succeeded(rec), "{name}: every job of seed 001 completes");
        assert!(t.is_empty(), "{name}: a partial gang held resources: {:?}", &t[..t.len().min(5)]);
    }
    // As on the real cluster (both_big_jobs_bound_samples=0): never both big jobs at once.
    assert!(v.overlap.is_empty() && n.overlap.is_empty(), "volcano {:?} native {:?}", v.overlap, n.overlap);
    // The checks see what they look for: the default model deadlocks with both big jobs partly
    // bound, and Kueue with waitForPodsReady binds the second job's pods while the first's run.
    let (d, drec) = tap(&w, kube::DefaultScheduler::default());
    assert!(!all_succeeded(&drec));
    assert!(!d.partial.is_empty() && !d.overlap.is_empty());
    let (k, krec) = tap(&w, kueue::Kueue::new(w.kueue.clone(), true));
    assert!(all_succeeded(&krec));
    assert!(!k.partial.is_empty(), "kueue-wfpr places the second job pod by pod");
}

#[test]
fn native_binds_each_gang_in_one_pod_group_cycle_and_retries_the_rejected_one() {
    let w = load("scenarios/sim-vs-real-seed-001.yaml");
    let (n, rec) = tap(&w, native::Native::new(&w.native));
    assert!(all_succeeded(&rec));
    // Jobs 1 and 2 are the big ones: each gets its 20 Binds at one instant (one cycle).
    let mut starts = vec![];
    for j in [1, 2] {
        let times: Vec<i64> = n.binds.iter().filter(|(_, b)| b.0 == j).map(|(t, _)| *t).collect();
        assert_eq!(times.len(), 20, "job {j}: {times:?}");
        assert!(times.iter().all(|t| *t == times[0]), "job {j} bound over several cycles: {times:?}");
        starts.push(times[0]);
    }
    // The gang bound second was rejected while the first held the room (4 of its 20 pods fit
    // beside it) and bound on a retry once the first gang's pods had gone: not before the first
    // of them ended, and within its backoff (it had waited 1, 2, 4 s ...) after the last did.
    let (first, second_bind) = if starts[0] < starts[1] { (1, starts[1]) } else { (2, starts[0]) };
    let ends: Vec<i64> = n.finished.iter().filter(|(_, j)| j.0 == first).map(|(t, _)| *t).collect();
    let (first_end, last_end) = (ends[0], *ends.last().unwrap());
    assert!(
        second_bind >= first_end,
        "second gang bound at {second_bind} ms, first gang's pods end from {first_end} ms"
    );
    assert!(
        second_bind - last_end <= 8000,
        "the retry comes within one backoff of the room freeing: {second_bind} vs {last_end}"
    );
    // Pod by pod (the default model), a big job's binds spread over many attempts.
    let (d, _) = tap(&w, kube::DefaultScheduler::default());
    let t1: Vec<i64> = d.binds.iter().filter(|(_, b)| b.0 == 1).map(|(t, _)| *t).collect();
    assert!(t1.iter().any(|t| *t != t1[0]));
}

#[test]
fn volcano_places_only_at_session_boundaries() {
    for period in ["1s", "700ms"] {
        let text = std::fs::read_to_string(repo().join("scenarios/sim-vs-real-seed-001.yaml"))
            .unwrap()
            .replace("schedulePeriod: 1s", &format!("schedulePeriod: {period}"));
        let w = scenario::from_text("seed.yaml", &text, &repo().join("scenarios"), 1).unwrap();
        let p = w.volcano.schedule_period.0;
        let (v, rec) = tap(&w, volcano::Volcano::new(&w.volcano, &w.tenants));
        assert!(all_succeeded(&rec));
        assert!(!v.binds.is_empty());
        assert!(v.binds.iter().all(|(t, _)| t % p == 0), "{period}: binds off the session grid: {:?}", v.binds);
    }
}

/// One node of 10Gi; job `a` (5 pods of 1.8Gi) is created first but its pods come slowly (2 a
/// second, in slow-start batches: b's one pod is created before a's last two); job `b` (1 pod of
/// 2Gi) right after it. Volcano's enqueue counts a's minResources as soon as its PodGroup is
/// Inqueue, so b is not enqueued (0 + 9Gi + 2Gi > 10Gi) although its pod would fit while a's pods
/// are still being created: a runs first. Without that reservation (native
/// gang scheduling), b's one-pod gang is placed at once and a waits for it.
#[test]
fn volcano_enqueue_reserves_the_minresources_of_an_inqueue_group() {
    let dir = std::env::temp_dir().join(format!("muster-sim-peers-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("cluster.yaml"),
        "name: one\nnodeClasses:\n  - name: n\n    count: 1\n    capacity: {cpu: \"8\", memory: 10Gi, pods: 110}\n",
    )
    .unwrap();
    let scen = "name: enqueue\ncluster: cluster.yaml\nhorizon: 10m\ntiming: {podCreateQps: 2, bindQps: 100}\n\
        submitters: {count: 1, perJob: 100ms}\njobClasses:\n\
        \x20 - {name: a, count: 1, members: 5, resources: {memory: 1843Mi}, runTime: 10s}\n\
        \x20 - {name: b, count: 1, members: 1, resources: {memory: 2Gi}, runTime: 10s}\n";
    let w = scenario::from_text("enqueue.yaml", scen, &dir, 1).unwrap();
    let run_start = |rec: &RunRecord, j: usize| rec.jobs[j].run_started_ms.expect("ran");
    let (_, vrec) = tap(&w, volcano::Volcano::new(&w.volcano, &w.tenants));
    assert!(all_succeeded(&vrec));
    assert!(run_start(&vrec, 0) < run_start(&vrec, 1), "volcano: a before b");
    let (_, nrec) = tap(&w, native::Native::new(&w.native));
    assert!(all_succeeded(&nrec));
    assert!(run_start(&nrec, 1) < run_start(&nrec, 0), "native: b before a");
}

#[test]
fn gpu_burst_volcano_and_native_never_hold_a_partial_gang() {
    let w = load("scenarios/suite/gpu-burst.yaml");
    let (v, vrec) = tap(&w, volcano::Volcano::new(&w.volcano, &w.tenants));
    let (n, nrec) = tap(&w, native::Native::new(&w.native));
    // Volcano places in its sessions only; native binds each gang (all rigid here) in one cycle.
    let p = w.volcano.schedule_period.0;
    assert!(v.binds.iter().all(|(t, _)| t % p == 0), "volcano bound off its session grid");
    for j in 0..w.jobs.len() as u32 {
        let times: Vec<i64> = n.binds.iter().filter(|(_, b)| b.0 == j).map(|(t, _)| *t).collect();
        assert_eq!(times.len() as u32, w.jobs[j as usize].max_members, "native: job {j} bound once, whole");
        assert!(times.iter().all(|t| *t == times[0]), "native: job {j} bound over several cycles: {times:?}");
    }
    for (name, partial, rec) in [("volcano", v.partial, vrec), ("native", n.partial, nrec)] {
        // Whole-node gangs among half-node pods: no deadlock, nothing held by a partial gang;
        // the engine's clog counter agrees (only pods bound and starting, briefly).
        assert!(all_succeeded(&rec), "{name}: all 72 gangs complete");
        assert!(partial.is_empty(), "{name}: partial gangs {:?}", &partial[..partial.len().min(5)]);
        let res = muster_sim::metrics::summarize(&w, &rec);
        assert!(res.occupancy.clog_share < 0.01, "{name}: clog share {}", res.occupancy.clog_share);
    }
    // The default model on the same burst: half-node pods split whole-node gangs, which hold
    // what they got.
    let (d, drec) = tap(&w, kube::DefaultScheduler::default());
    assert!(!all_succeeded(&drec) && !d.partial.is_empty());
    assert!(muster_sim::metrics::summarize(&w, &drec).occupancy.clog_share > 0.5);
}

#[test]
fn a_rejected_pod_group_backs_off_as_a_whole_doubling_up_to_its_cap() {
    let cfg = muster_sim::scenario::NativeConfig::default();
    // 16 pods: 1, 2, 4, 8, 16, 32 s, then the cap 10 s x sqrt(16) = 40 s; released on the whole
    // second after the rounded-down expiry.
    let waits: Vec<i64> = (1..=8).map(|n| native::group_backoff(&cfg, n, 16, 500) - 500).collect();
    assert_eq!(waits, [1500, 2500, 4500, 8500, 16500, 32500, 40500, 40500]);
    assert_eq!(native::group_backoff(&cfg, 9, 1, 0), 11000, "one pod: capped at 10 s");
}

#[test]
fn native_backoff_and_volcano_overcommit_come_from_the_scenario() {
    let text = "cluster: clusters/seed-deadlock.yaml\nname: x\njobClasses: [{name: a, count: 1, members: 1, resources: {memory: 1Mi}, runTime: 1s}]\n";
    let w = scenario::from_text("x.yaml", text, &repo().join("scenarios"), 1).unwrap();
    assert_eq!(w.volcano.schedule_period.0, 1000);
    assert!(w.volcano.overcommit);
    assert_eq!(w.volcano.overcommit_factor, 1.2);
    assert_eq!((w.native.pod_initial_backoff.0, w.native.pod_max_backoff.0), (1000, 10000));
    let bad = format!("{text}volcano: {{overcommitFactor: 0}}\n");
    let err = scenario::from_text("x.yaml", &bad, &repo().join("scenarios"), 1).unwrap_err().to_string();
    assert!(err.contains("volcano.overcommitFactor"), "{err}");
}

#[test]
fn coscheduling_activates_a_gangs_siblings_so_whole_cluster_gangs_finish_once_small_jobs_stop() {
    // Before the model activated a gang's other pods when its first waited at Permit, they came
    // back from backoff one by one, interleaved with other gangs', and the five whole-cluster
    // gangs never started (450 of 455); the real coscheduling finished all 455 at 608 s.
    let w = load("scenarios/suite/starvation-sixtieth.yaml");
    let (_, rec) = tap(&w, cosched::Coscheduling::new(w.coscheduling.permit_timeout.0));
    assert!(all_succeeded(&rec));
}
