//! `muster sim`: run a scenario under several schedulers and compare them side by side.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use muster_sim::{RunOptions, SimError, scenario};

use crate::cluster_cmd::emit;

/// The built-in scenario (seed 002's scalability test) and its cluster, carried in the binary so
/// `muster sim` works from any directory.
const BUILTIN_SCENARIO: &str = include_str!("../../../scenarios/seed-scalability.yaml");
const BUILTIN_CLUSTER: &str = include_str!("../../../scenarios/clusters/seed-scalability.yaml");

#[derive(clap::Args)]
pub struct Args {
    /// Scenario file; the built-in seed-scalability scenario when absent.
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
}

pub fn run(args: &Args) -> Result<ExitCode> {
    let mut opts = RunOptions::new(args.scenario.clone().unwrap_or_default());
    opts.seed = args.seed;
    opts.schedulers = args.schedulers.clone();
    opts.progress = true;
    let workload = match &args.scenario {
        Some(path) => scenario::load(path, args.seed)?,
        None => {
            let read = |p: &Path| {
                if p.ends_with("clusters/seed-scalability.yaml") {
                    Ok(BUILTIN_CLUSTER.to_string())
                } else {
                    Err(SimError::Io {
                        path: p.display().to_string(),
                        message: "not part of the built-in scenario".into(),
                    })
                }
            };
            scenario::from_text_with(
                "built-in:seed-scalability.yaml",
                BUILTIN_SCENARIO,
                Path::new(""),
                args.seed,
                &read,
            )?
        }
    };
    let report = muster_sim::run_workload(&workload, &opts)?;
    emit(report.render_table().trim_end())?;
    // Wall times vary run to run, so they go to stderr and keep stdout byte-identical per seed.
    for r in &report.runs {
        let rate = r.events as f64 / (r.wall_ms.max(1) as f64 / 1000.0);
        eprintln!("{}: {} events in {} ms ({rate:.0} events/s)", r.scheduler, r.events, r.wall_ms);
    }
    let write = |path: &PathBuf, text: String| {
        std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
    };
    if let Some(p) = &args.json {
        write(p, report.to_json())?;
    }
    if let Some(p) = &args.csv {
        write(p, report.to_csv())?;
    }
    if let Some(dir) = &args.plots {
        for file in report.write_plots(dir)? {
            eprintln!("wrote {}", file.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}
