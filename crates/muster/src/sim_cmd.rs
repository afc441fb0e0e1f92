//! `muster sim`: run a scenario under several schedulers and compare them side by side.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use muster_sim::{RunOptions, SimError, scenario};

use crate::cluster_cmd::emit;
use crate::history_cmd;

/// One scenario of the built-in suite and the cluster it names, carried in the binary so
/// `muster sim` works from any directory.
struct Builtin {
    file: &'static str,
    text: &'static str,
    cluster_file: &'static str,
    cluster: &'static str,
}

macro_rules! builtin {
    ($file:literal, $cluster:literal) => {
        Builtin {
            file: $file,
            text: include_str!(concat!("../../../scenarios/", $file)),
            cluster_file: $cluster,
            cluster: include_str!(concat!("../../../scenarios/", $cluster)),
        }
    };
}

/// The suite `muster sim` runs when no scenario is named: seed 001's deadlock, seed 002's scale
/// test, and the suite's scenarios where the schedulers differ most (docs/simulator.md).
const SUITE: [Builtin; 6] = [
    builtin!("suite/seed-001.yaml", "clusters/seed-deadlock.yaml"),
    builtin!("seed-scalability.yaml", "clusters/seed-scalability.yaml"),
    builtin!("suite/gpu-burst.yaml", "clusters/gpu-32.yaml"),
    builtin!("suite/starvation.yaml", "clusters/cpu-16.yaml"),
    builtin!("suite/elastic.yaml", "clusters/elastic-32.yaml"),
    builtin!("suite/topology.yaml", "clusters/gpu-racks-32.yaml"),
];

#[derive(clap::Args)]
pub struct Args {
    /// Scenario file; the built-in suite (one summary table) when absent.
    scenario: Option<PathBuf>,
    /// Comma-separated schedulers to compare (default: all of them).
    #[arg(long, value_delimiter = ',')]
    schedulers: Vec<String>,
    /// Seed of every random stream; the same seed gives byte-identical output.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Also write the results as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Also write the results as CSV to this file.
    #[arg(long)]
    csv: Option<PathBuf>,
    /// Also write plots (SVG and PNG) into this directory.
    #[arg(long)]
    plots: Option<PathBuf>,
    /// Also write a CSV line per job and scheduler to this file: when each job was submitted,
    /// placed, started and ended, its wait and outcome, in the scenario's order.
    #[arg(long)]
    jobs: Option<PathBuf>,
    /// Do not measure muster's estimated starts (the queue view's forecast, most of a muster
    /// run's cost on long queues); the schedules are the same.
    #[arg(long)]
    no_estimates: bool,
    /// muster's models run without the scenario's calendar reservations, as the peers do; the
    /// reservations are still measured (what holding them buys and costs).
    #[arg(long)]
    ignore_reservations: bool,
    /// Replay recorded runs instead of a scenario: a file `muster history export` wrote, or a
    /// store URL (`sqlite:PATH`, a PostgreSQL URL) to read them from. Needs --cluster.
    #[arg(long, conflicts_with = "scenario", requires = "cluster")]
    history: Option<String>,
    /// With --history: the cluster description to replay on (as it was, or changed).
    #[arg(long, requires = "history")]
    cluster: Option<PathBuf>,
    /// With --history: the queues the recorded groups were submitted to, with their quotas (a
    /// scenario's `tenants` section; docs/simulator.md), as they were or changed.
    #[arg(long, requires = "history")]
    tenants: Option<PathBuf>,
    /// With --history: only groups submitted at or after this Unix second.
    #[arg(long, requires = "history")]
    since: Option<i64>,
    /// With --history: only groups submitted before this Unix second.
    #[arg(long, requires = "history")]
    until: Option<i64>,
}

pub fn run(args: &Args) -> Result<ExitCode> {
    if args.history.is_none() {
        let history_only = [
            ("--cluster", args.cluster.is_some()),
            ("--tenants", args.tenants.is_some()),
            ("--since", args.since.is_some()),
            ("--until", args.until.is_some()),
        ];
        if let Some((flag, _)) = history_only.iter().find(|(_, given)| *given) {
            bail!("{flag} is for --history replays; a scenario names its own cluster and tenants: edit the scenario");
        }
    }
    if let Some(twice) = args.schedulers.iter().enumerate().find(|(i, s)| args.schedulers[..*i].contains(s)) {
        bail!("--schedulers lists {:?} twice; name each scheduler once", twice.1);
    }
    let mut opts = RunOptions::new(args.scenario.clone().unwrap_or_default());
    opts.seed = args.seed;
    opts.schedulers = args.schedulers.clone();
    opts.progress = true;
    opts.estimates = !args.no_estimates;
    opts.ignore_reservations = args.ignore_reservations;
    opts.jobs = args.jobs.is_some();
    let one = match (&args.scenario, &args.history) {
        (Some(path), _) => Some(scenario::load(path, args.seed)?),
        (None, Some(source)) => Some(history_workload(args, source)?),
        (None, None) => None,
    };
    let reports = match one {
        Some(workload) => {
            let report = muster_sim::run_workload(&workload, &opts)?;
            emit(report.render_table().trim_end())?;
            vec![report]
        }
        None => {
            opts.estimates = false;
            let mut reports = Vec::new();
            for b in &SUITE {
                reports.push(muster_sim::run_workload(&builtin_workload(b, args.seed)?, &opts)?);
            }
            emit(&format!(
                "built-in suite (seed {}); `muster sim scenarios/FILE` shows one scenario in full\n\n{}",
                args.seed,
                muster_sim::suite::render_table(&reports).trim_end()
            ))?;
            reports
        }
    };
    // Wall times vary run to run, so they go to stderr and keep stdout byte-identical per seed.
    for report in &reports {
        for r in &report.runs {
            let rate = r.events as f64 / (r.wall_ms.max(1) as f64 / 1000.0);
            eprintln!(
                "{} {}: {} events in {} ms ({rate:.0} events/s)",
                report.scenario, r.scheduler, r.events, r.wall_ms
            );
        }
    }
    write_outputs(args, &reports)?;
    Ok(ExitCode::SUCCESS)
}

fn builtin_workload(b: &Builtin, seed: u64) -> Result<muster_sim::Workload, SimError> {
    let read = |p: &Path| {
        if p.ends_with(b.cluster_file) {
            Ok(b.cluster.to_string())
        } else {
            Err(SimError::Io { path: p.display().to_string(), message: "not part of the built-in suite".into() })
        }
    };
    scenario::from_text_with(&format!("built-in:{}", b.file), b.text, Path::new("scenarios"), seed, &read)
}

/// The recorded runs of `source` (an exported file, or a store) as a workload on `--cluster`.
fn history_workload(args: &Args, source: &str) -> Result<muster_sim::Workload> {
    let cluster = args.cluster.as_ref().context("--history needs --cluster")?;
    let (runs_file, runs) = if history_cmd::is_store_url(source) {
        let runs = history_cmd::read_runs(source, 0, i64::MAX)?;
        ("store runs".to_string(), muster_sim::history::write(&runs))
    } else {
        let text = std::fs::read_to_string(source).with_context(|| format!("--history {source}: cannot read it"))?;
        (source.to_string(), text)
    };
    let mut scenario = serde_yaml_ng::Mapping::new();
    let mut put = |k: &str, v: serde_yaml_ng::Value| scenario.insert(k.into(), v);
    put("name", "history".into());
    put("description", format!("the runs recorded in {runs_file}").into());
    put("cluster", cluster.display().to_string().into());
    let mut source = serde_yaml_ng::Mapping::new();
    source.insert("file".into(), runs_file.clone().into());
    for (field, value) in [("since", args.since), ("until", args.until)] {
        if let Some(v) = value {
            source.insert(field.into(), v.into());
        }
    }
    put("history", source.into());
    if let Some(path) = &args.tenants {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("--tenants {}: cannot read it", path.display()))?;
        let tenants: serde_yaml_ng::Value =
            serde_yaml_ng::from_str(&text).with_context(|| format!("--tenants {}: not YAML", path.display()))?;
        put("tenants", tenants);
    }
    let text = serde_yaml_ng::to_string(&scenario)?;
    let read = |p: &Path| {
        if p == Path::new(&runs_file) {
            Ok(runs.clone())
        } else {
            std::fs::read_to_string(p)
                .map_err(|e| SimError::Io { path: p.display().to_string(), message: e.to_string() })
        }
    };
    Ok(scenario::from_text_with("--history", &text, Path::new(""), args.seed, &read)?)
}

/// JSON (one report, or an array for the suite), CSV (a `scenario` column first), the jobs' CSV
/// and plots (a directory per scenario for the suite).
fn write_outputs(args: &Args, reports: &[muster_sim::Report]) -> Result<()> {
    let write = |path: &PathBuf, text: String| {
        std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
    };
    let one = args.scenario.is_some() || args.history.is_some();
    if let Some(p) = &args.json {
        let json = if one {
            reports[0].to_json()
        } else {
            serde_json::to_string_pretty(reports).context("encoding the reports")? + "\n"
        };
        write(p, json)?;
    }
    if let Some(p) = &args.csv {
        let mut csv = String::from("scenario,scheduler,class,metric,value\n");
        for r in reports {
            for line in r.to_csv().lines().skip(1) {
                csv.push_str(&format!("{},{line}\n", r.scenario));
            }
        }
        write(p, csv)?;
    }
    if let Some(p) = &args.jobs {
        let mut csv = format!("{}\n", muster_sim::metrics::jobs::CSV_HEADER);
        for r in reports {
            csv.push_str(&r.jobs_csv());
        }
        write(p, csv)?;
    }
    if let Some(dir) = &args.plots {
        for r in reports {
            let dir = if one { dir.clone() } else { dir.join(&r.scenario) };
            for file in r.write_plots(&dir)? {
                eprintln!("wrote {}", file.display());
            }
        }
    }
    Ok(())
}
