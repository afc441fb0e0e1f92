//! The muster command line.

mod cluster_cmd;
mod match_cmd;
mod sim_cmd;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "muster", version, about = "All-or-nothing batch queue and gang scheduler for Kubernetes")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Simulate a scenario under several schedulers and compare them (built-in scenario by default).
    Sim(sim_cmd::Args),
    /// Load a resource graph and run matcher commands read from stdin (like Fluxion's resource-query).
    Match(match_cmd::Args),
    /// Work with cluster description files.
    Cluster {
        #[command(subcommand)]
        command: ClusterCommand,
    },
}

#[derive(Subcommand)]
enum ClusterCommand {
    /// Print the described nodes as a Kubernetes v1 List of Node objects (JSON), for KWOK.
    Nodes { file: PathBuf },
    /// Print the described cluster (or a JGF file) as JGF.
    Jgf { file: PathBuf },
    /// Print a summary of the described cluster: nodes, levels and capacity.
    Describe { file: PathBuf },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Sim(args) => sim_cmd::run(&args),
        Command::Match(args) => match_cmd::run(&args),
        Command::Cluster { command } => match command {
            ClusterCommand::Nodes { file } => cluster_cmd::nodes(&file),
            ClusterCommand::Jgf { file } => cluster_cmd::jgf(&file),
            ClusterCommand::Describe { file } => cluster_cmd::describe(&file),
        },
    };
    match result {
        Ok(code) => code,
        // The reader went away (`muster cluster jgf ... | head`): nothing left to say.
        Err(e) if e.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe) => {
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}
