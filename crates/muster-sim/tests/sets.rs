//! Job classes of several sets of pods: the scenario form, every model placing each pod by what
//! it asks, and muster sizing each set by its own pods instead of the largest.

use std::path::{Path, PathBuf};

use muster_sim::{BUILTIN, RunOptions, RunResult, Workload, scenario};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The scenario `text` on `cluster` (a cluster description's text), read from memory.
fn workload(cluster: &str, text: &str) -> Result<Workload, muster_sim::SimError> {
    let read = |_: &Path| Ok(cluster.to_string());
    scenario::from_text_with("t.yaml", &format!("name: t\ncluster: c.yaml\n{text}"), Path::new("."), 1, &read)
}

const TWO_GPU_NODES: &str = "name: two\nnodeClasses:\n  - {name: gpu, count: 2, capacity: {cpu: \"16\", memory: 64Gi, nvidia.com/gpu: 8, pods: 110}}\n";

/// One MPI job: a 1-cpu launcher and two workers of a whole node's 8 GPUs each.
const LAUNCHER_AND_TWO_WORKERS: &str = "jobClasses:\n\
    \x20 - name: mpi\n\
    \x20   count: 1\n\
    \x20   runTime: 60s\n\
    \x20   sets:\n\
    \x20     - {name: launcher, members: 1, resources: {cpu: \"1\", memory: 1Gi}}\n\
    \x20     - {name: worker, members: 2, resources: {cpu: \"8\", memory: 32Gi, nvidia.com/gpu: 8}}\n";

#[test]
fn every_model_places_a_launcher_beside_whole_node_workers() {
    // Sized like its largest pod, the launcher would need a third 8-GPU node: the job could
    // never start on two. Each pod asking its own set's requests, it fits.
    let w = workload(TWO_GPU_NODES, LAUNCHER_AND_TWO_WORKERS).unwrap();
    assert_eq!((w.jobs[0].min_members, w.jobs[0].max_members), (3, 3));
    let report = muster_sim::run_workload(&w, &RunOptions::new("")).unwrap();
    assert_eq!(report.runs.len(), BUILTIN.len());
    for r in &report.runs {
        assert_eq!((r.completed, r.failed, r.unfinished), (1, 0, 0), "{}: the job completes", r.scheduler);
    }
    assert_eq!(report.ideal_fifo_gang.completed, 1, "the ideal schedule places it too");
    // The lower bound counts what the job asks: 16 GPUs for 60 s on 16 GPUs, not 24.
    assert_eq!(report.lower_bound_s, 60.0);
}

#[test]
fn muster_receives_the_sets_of_the_job() {
    let w = workload(TWO_GPU_NODES, LAUNCHER_AND_TWO_WORKERS).unwrap();
    let g = w.jobs[0].to_group_request();
    let sets: Vec<(&str, u32)> = g.sets.iter().map(|s| (s.name.as_str(), s.max_members)).collect();
    assert_eq!(sets, [("launcher", 1), ("worker", 2)]);
    assert_eq!(g.requests_with(3).get("nvidia.com/gpu"), Some(&16));
}

#[test]
fn a_class_gives_its_pods_alike_or_as_sets_and_only_the_last_set_is_elastic() {
    let both = LAUNCHER_AND_TWO_WORKERS.replace("count: 1\n", "count: 1\n    members: 3\n");
    let e = workload(TWO_GPU_NODES, &both).unwrap_err().to_string();
    assert!(e.contains("jobClasses[0].members") && e.contains("either alike"), "{e}");
    let elastic_first = LAUNCHER_AND_TWO_WORKERS.replace("launcher, members: 1", "launcher, members: {min: 1, max: 2}");
    let e = workload(TWO_GPU_NODES, &elastic_first).unwrap_err().to_string();
    assert!(e.contains("jobClasses[0].sets[0].members") && e.contains("only the last set"), "{e}");
    let neither = "jobClasses:\n  - {name: x, count: 1, runTime: 1s}\n";
    let e = workload(TWO_GPU_NODES, neither).unwrap_err().to_string();
    assert!(e.contains("jobClasses[0].members") && e.contains("or sets"), "{e}");
    let unknown = LAUNCHER_AND_TWO_WORKERS.replace("memory: 1Gi", "example.com/fpga: 1");
    let e = workload(TWO_GPU_NODES, &unknown).unwrap_err().to_string();
    assert!(e.contains("jobClasses[0].sets[0].resources.example.com/fpga"), "{e}");
}

/// GPU-seconds the jobs of `w` ask in all (each pod its own set's GPUs), with every set at its max.
fn gpu_work_s(w: &Workload) -> f64 {
    let gpus = |reqs: &[(String, u64)]| reqs.iter().find(|(r, _)| r == "nvidia.com/gpu").map_or(0, |(_, a)| *a);
    w.jobs
        .iter()
        .map(|j| {
            let per_run: u64 = j.pod_sets().iter().map(|s| gpus(&s.requests) * u64::from(s.max_members)).sum();
            per_run as f64 * j.run_ms as f64 / 1000.0
        })
        .sum()
}

/// Share of the cluster's GPUs doing the jobs' work over the run: GPUs a coordinator holds
/// without asking for them do none.
fn useful_gpu_share(w: &Workload, run: &RunResult, gpus: f64) -> f64 {
    gpu_work_s(w) / (gpus * run.makespan_s.expect("every job ended"))
}

#[test]
fn muster_sized_by_sets_completes_heterogeneous_ai_jobs_sooner_than_sized_like_the_largest_pod() {
    let w = scenario::load(&repo().join("scenarios/suite/ai-sets.yaml"), 1).unwrap();
    let opts = RunOptions { schedulers: vec!["muster".into()], estimates: false, ..RunOptions::new("") };
    let by_sets = muster_sim::run_workload(&w, &opts).unwrap();
    // The same jobs as muster saw them before sets: every pod the per-resource max of the job's.
    let mut largest = w.clone();
    largest.jobs.iter_mut().for_each(|j| j.sets.clear());
    let by_largest = muster_sim::run_workload(&largest, &opts).unwrap();
    let (sets, old) = (&by_sets.runs[0], &by_largest.runs[0]);

    assert_eq!((sets.completed, sets.failed, sets.unfinished), (w.jobs.len(), 0, 0), "every job completes");
    // Nothing is placed pod by pod: what is held before a job runs is its pods' start-up alone.
    assert!(sets.occupancy.clog_share < 0.01, "no partial gang holds a node: {}", sets.occupancy.clog_share);

    let (makespan, old_makespan) = (sets.makespan_s.unwrap(), old.makespan_s.unwrap());
    let lb = by_sets.lower_bound_s;
    let gpus = 256.0;
    let (useful, old_useful) = (useful_gpu_share(&w, sets, gpus), useful_gpu_share(&w, old, gpus));
    eprintln!(
        "ai-sets muster: by sets {makespan} s ({:.3} of the lower bound {lb} s), GPUs doing work {useful:.3}, held \
         {:?}; sized like the largest pod {old_makespan} s, GPUs doing work {old_useful:.3}, held {:?}",
        makespan / lb,
        sets.occupancy.mean_util_gpu,
        old.occupancy.mean_util_gpu,
    );
    assert!(makespan >= lb, "no schedule beats the lower bound");
    // Sized like the largest pod, every launcher holds a whole node's GPUs and every Ray head,
    // CPU worker and driver some: at least 5% of the makespan and of the GPUs' work is asked back.
    assert!(makespan * 1.05 <= old_makespan, "by sets {makespan} s, like the largest pod {old_makespan} s");
    assert!(useful >= old_useful * 1.05, "GPUs doing work: by sets {useful:.3}, like the largest pod {old_useful:.3}");
    assert!(makespan <= lb * 1.15, "within 15% of the lower bound: {makespan} s against {lb} s");
}

#[test]
fn an_elastic_last_set_placed_short_stretches_only_its_own_work() {
    // One 8-GPU node; `hold` keeps 4 GPUs for the whole test, so `ray` (a head and 2..4 workers of
    // 2 GPUs) starts with 2 workers: their 100 s of work with 4 take 200 s. Counting the head
    // among the workers would give 100 s x 5 / 3.
    let cluster = "name: one\nnodeClasses:\n  - {name: gpu, count: 1, capacity: {cpu: \"16\", nvidia.com/gpu: 8}}\n";
    let text = "timing: {podCreateQps: 0, bindQps: 0, podStartDelay: 0s, jobCompleteDelay: 0s}\n\
        jobClasses:\n\
        \x20 - {name: hold, count: 1, members: 1, resources: {cpu: \"1\", nvidia.com/gpu: 4}, runTime: 1000s}\n\
        \x20 - name: ray\n\
        \x20   count: 1\n\
        \x20   runTime: 100s\n\
        \x20   arrival: {start: 1s}\n\
        \x20   sets:\n\
        \x20     - {name: head, members: 1, resources: {cpu: \"1\"}}\n\
        \x20     - {name: workers, members: {min: 2, max: 4}, resources: {cpu: \"1\", nvidia.com/gpu: 2}}\n";
    let w = workload(cluster, text).unwrap();
    let mut s = muster_sim::scheduler("muster", &w).unwrap();
    let rec = muster_sim::engine::Engine::new(&w).unwrap().run(s.as_mut(), false).unwrap();
    let ray = &rec.jobs[w.jobs.iter().position(|j| j.class == "ray").unwrap()];
    let run_s = (ray.ended_ms.unwrap() - ray.run_started_ms.unwrap()) as f64 / 1000.0;
    assert_eq!(run_s, 200.0, "two of four workers do the work in twice the time");
}
