//! muster-sim: a discrete-event simulator of a Kubernetes cluster running batch jobs, with models
//! of the default kube-scheduler, coscheduling, Kueue, Volcano and kube-scheduler's native gang
//! scheduling, the ideal FIFO gang schedule as a target, metrics, and outputs (table, JSON, CSV,
//! plots). Any scheduler implementing [`Scheduler`] plugs in through [`RunOptions::custom`]. Time
//! is in milliseconds throughout.

pub mod engine;
pub mod history;
pub mod ideal;
pub mod metrics;
pub mod models;
pub mod node_index;
pub mod plots;
pub mod report;
pub mod reservation_meter;
pub mod rng;
pub mod scenario;
pub mod scheduler;
pub mod suite;
pub mod swf;
pub mod tenant_meter;

use std::path::PathBuf;

pub use metrics::RunResult;
pub use report::Report;
pub use scenario::{JobSpec, Workload};
pub use scheduler::{Action, ClusterView, JobId, NodeId, PodId, Scheduler, SimEvent};

/// The schedulers a run compares when none are named, in report order: the baseline models, then
/// muster itself (its other queue policies are `muster-easy`, `muster-fifo`, `muster-besteffort`).
pub const BUILTIN: [&str; 7] = ["default", "coscheduling", "kueue", "kueue-wfpr", "volcano", "native", "muster"];

/// Models run only when named: Kueue with its fair sharing on.
pub const NAMED_ONLY: [&str; 1] = ["kueue-fair"];

#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error(transparent)]
    Input(#[from] muster_graph::InputError),
    #[error("{path}: {message}")]
    Io { path: String, message: String },
    #[error("scheduler {scheduler}: refused action {action}: {reason}")]
    BadAction { scheduler: String, action: String, reason: String },
    #[error("unknown scheduler {name:?}; known: {known}")]
    UnknownScheduler { name: String, known: String },
    #[error("plot: {0}")]
    Plot(String),
}

/// Builds a scheduler for a workload (the cluster description, its jobs and parameters).
pub type SchedulerFactory = Box<dyn Fn(&Workload) -> Result<Box<dyn Scheduler>, SimError>>;

/// A scheduler from outside this crate, such as the muster engine adapter.
pub struct CustomScheduler {
    pub name: String,
    pub build: SchedulerFactory,
}

pub struct RunOptions {
    pub scenario: PathBuf,
    /// Seeds every random stream (arrivals, run-time jitter); same seed, same output.
    pub seed: u64,
    /// Schedulers to run, in order; empty means every built-in one, then every custom one.
    pub schedulers: Vec<String>,
    /// A progress line on stderr while running (only when stderr is a terminal).
    pub progress: bool,
    /// Measure muster's estimated starts (the queue view every 5 s, whose forecast is most of
    /// the cost of a muster run); off for the built-in suite, whose table does not show them.
    pub estimates: bool,
    /// muster's models run without the scenario's calendar reservations, as the peers do (the
    /// reservations are still measured): what holding them costs and what it buys.
    pub ignore_reservations: bool,
    /// Keep each job's outcome (`RunResult::jobs`, `muster sim --jobs`); off, a run keeps only its
    /// figures (a list per job and scheduler is tens of megabytes on a trace of 50,000 jobs).
    pub jobs: bool,
    pub custom: Vec<CustomScheduler>,
}

impl RunOptions {
    pub fn new(scenario: impl Into<PathBuf>) -> Self {
        RunOptions {
            scenario: scenario.into(),
            seed: 1,
            schedulers: vec![],
            progress: false,
            estimates: true,
            ignore_reservations: false,
            jobs: false,
            custom: vec![],
        }
    }
}

/// Loads the scenario and runs it under every selected scheduler.
pub fn run(opts: &RunOptions) -> Result<Report, SimError> {
    let workload = scenario::load(&opts.scenario, opts.seed)?;
    run_workload(&workload, opts)
}

/// One of the built-in schedulers (a model, or muster's engine under a policy) by name.
pub fn scheduler(name: &str, w: &Workload) -> Result<Box<dyn Scheduler>, SimError> {
    build(name, w, &RunOptions::new(""))
}

/// One of the built-in schedulers, or of `opts.custom`, built as `opts` says (whether muster
/// measures estimated starts).
pub fn scheduler_with(name: &str, w: &Workload, opts: &RunOptions) -> Result<Box<dyn Scheduler>, SimError> {
    build(name, w, opts)
}

fn build(name: &str, w: &Workload, opts: &RunOptions) -> Result<Box<dyn Scheduler>, SimError> {
    if let Some(c) = opts.custom.iter().find(|c| c.name == name) {
        return (c.build)(w);
    }
    Ok(match name {
        "default" => Box::new(models::kube::DefaultScheduler::default()),
        "coscheduling" => Box::new(models::cosched::Coscheduling::new(w.coscheduling.permit_timeout.0)),
        "kueue" => Box::new(models::kueue::Kueue::with_tenants(w.kueue.clone(), false, w.tenants.clone())),
        "kueue-wfpr" => Box::new(models::kueue::Kueue::with_tenants(w.kueue.clone(), true, w.tenants.clone())),
        "kueue-fair" => Box::new(models::kueue::Kueue::fair_sharing(w.kueue.clone(), w.tenants.clone())),
        "volcano" => Box::new(models::volcano::Volcano::new(&w.volcano, &w.tenants)),
        "native" => Box::new(models::native::Native::new(&w.native)),
        _ if let Some((_, policy)) = models::muster::VARIANTS.iter().find(|(n, _)| *n == name) => {
            Box::new(models::muster::Muster::new(name, *policy, w, opts)?)
        }
        _ => {
            let mut known: Vec<&str> = BUILTIN.to_vec();
            known.extend(NAMED_ONLY);
            // "muster" is both built in and a variant: named once.
            known.extend(models::muster::VARIANTS.iter().map(|(n, _)| *n).filter(|n| !BUILTIN.contains(n)));
            known.extend(opts.custom.iter().map(|c| c.name.as_str()));
            return Err(SimError::UnknownScheduler { name: name.to_string(), known: known.join(", ") });
        }
    })
}

/// Runs an already loaded workload (the seed in `opts` is only reported).
pub fn run_workload(w: &Workload, opts: &RunOptions) -> Result<Report, SimError> {
    let names: Vec<String> = if opts.schedulers.is_empty() {
        BUILTIN.iter().map(|s| s.to_string()).chain(opts.custom.iter().map(|c| c.name.clone())).collect()
    } else {
        opts.schedulers.clone()
    };
    let mut scheds = Vec::new();
    for n in &names {
        scheds.push(build(n, w, opts)?);
    }
    let (cluster, ideal, lower_bound_s) = targets(w, &engine::Engine::new(w)?);
    let runs = run_in_parallel(w, scheds, opts.progress, opts.jobs)?;
    Ok(Report {
        scenario: w.name.clone(),
        description: w.description.clone(),
        seed: opts.seed,
        cluster,
        jobs: w.jobs.len(),
        ideal_fifo_gang: ideal,
        lower_bound_s,
        runs,
    })
}

/// Runs each scheduler on its own copy of the world, as many at once as there are cores (the runs
/// share nothing, so the results are the same as one after the other); results in the order given.
/// The real engine (muster and its variants) costs several times a model per event, so those runs
/// start first: the cheap ones then fill the other cores instead of leaving one run alone at the end.
fn run_in_parallel(
    w: &Workload,
    scheds: Vec<Box<dyn Scheduler>>,
    progress: bool,
    keep_jobs: bool,
) -> Result<Vec<metrics::RunResult>, SimError> {
    let count = scheds.len();
    let mut order: Vec<(usize, Box<dyn Scheduler>)> = scheds.into_iter().enumerate().collect();
    let is_engine = |s: &dyn Scheduler| models::muster::VARIANTS.iter().any(|(n, _)| *n == s.name());
    order.sort_by_key(|(i, s)| (!is_engine(s.as_ref()), *i));
    let queue = std::sync::Mutex::new(order.into_iter());
    let results = std::sync::Mutex::new((0..count).map(|_| None).collect::<Vec<_>>());
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get()).min(count);
    let run_one = |mut s: Box<dyn Scheduler>| -> Result<metrics::RunResult, SimError> {
        let clock = std::time::Instant::now();
        let rec = engine::Engine::new(w)?.run(s.as_mut(), progress)?;
        let mut result = metrics::summarize(w, &rec);
        if keep_jobs {
            result.jobs = metrics::jobs::list(w, &rec);
        }
        result.wall_ms = clock.elapsed().as_millis() as u64;
        Ok(result)
    };
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                loop {
                    let next = queue.lock().unwrap_or_else(|e| e.into_inner()).next();
                    let Some((i, s)) = next else { break };
                    let r = run_one(s);
                    results.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(r);
                }
            });
        }
    });
    results
        .into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .into_iter()
        .map(|r| r.expect("every run finished"))
        .collect()
}

/// The cluster summary, the ideal FIFO gang schedule and the lower bound.
fn targets(w: &Workload, eng: &engine::Engine<'_>) -> (report::ClusterSummary, report::IdealResult, f64) {
    let view = eng.view();
    let capacity: Vec<Vec<u64>> = view.nodes().iter().map(|n| n.capacity.clone()).collect();
    let totals: Vec<u64> = (0..view.resources().len()).map(|r| capacity.iter().map(|c| c[r]).sum()).collect();
    let jobs: Vec<ideal::IdealJob<'_>> = view
        .jobs()
        .iter()
        .map(|j| {
            // Every set at its most.
            let sets = (j.sets.iter())
                .map(|s| ideal::IdealSet {
                    members: s.max_members,
                    request: s.request.clone(),
                    eligible: &view.eligible[s.filter],
                })
                .collect();
            ideal::IdealJob::new(j.spec.submit_ms, j.spec.run_ms, sets, &totals)
        })
        .collect();
    let sched = ideal::fifo_gang(&capacity, &jobs);
    let lb = ideal::lower_bound(&capacity, &jobs);
    let mut waits = vec![];
    let mut wr = vec![];
    let mut ends = vec![];
    for (j, s) in jobs.iter().zip(&sched.starts) {
        if let Some(s) = s {
            waits.push(s - j.submit_ms);
            wr.push((s - j.submit_ms, j.run_ms));
            ends.push(s + j.run_ms);
        }
    }
    ends.sort_unstable();
    let total = |name: &str| view.resource_index(name).map_or(0, |r| capacity.iter().map(|c| c[r]).sum::<u64>());
    let cluster = report::ClusterSummary {
        name: w.cluster.name.clone(),
        nodes: capacity.len(),
        cpu_cores: metrics::round3(total("cpu") as f64 / 1000.0),
        memory_gib: metrics::round3(total("memory") as f64 / (1u64 << 30) as f64),
    };
    let ideal = report::IdealResult {
        completed: waits.len(),
        infeasible: jobs.len() - waits.len(),
        makespan_s: metrics::round3(sched.makespan_ms as f64 / 1000.0),
        wait: metrics::stats(&waits),
        bounded_slowdown: metrics::bounded_slowdown(&wr),
        completion_times_s: ends.iter().map(|t| metrics::round3(*t as f64 / 1000.0)).collect(),
    };
    (cluster, ideal, metrics::round3(lb as f64 / 1000.0))
}
