//! The muster command line.

mod cluster_cmd;
mod controller_cmd;
mod dashboard_args;
mod history_cmd;
mod install_cmd;
mod match_cmd;
mod match_queues;
mod queue_cmd;
mod server;
mod sim_cmd;
mod store_url;
mod webhook_cert_cmd;
mod webhook_cmd;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

/// `muster --version`: `0.1.0 (commit 1a2b3c4d5e6f, built 2026-11-24)`; build.rs sets the two stamps.
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("MUSTER_GIT_COMMIT"),
    ", built ",
    env!("MUSTER_BUILD_DATE"),
    ")"
);

#[derive(Parser)]
#[command(name = "muster", version = VERSION, about = "All-or-nothing batch queue and gang scheduler for Kubernetes")]
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
    /// Work with the runs muster's store recorded (what-if replays).
    History {
        #[command(subcommand)]
        command: HistoryCommand,
    },
    /// Run the controller: watch the cluster, queue managed jobs, bind admitted groups whole.
    Controller(Box<controller_cmd::ControllerArgs>),
    /// List pending groups by queue and position, then running ones (reads the cluster).
    Queue(queue_cmd::QueueArgs),
    /// Explain where one job is and why: phase, conditions, position, estimated start, nodes.
    Why(queue_cmd::WhyArgs),
    /// Serve the admission webhook (holds managed jobs and pods for the queue, refuses forgeries).
    Webhook(webhook_cmd::WebhookArgs),
    /// Make the webhook's serving certificate, or keep the one in its Secret, and write it out.
    WebhookCert(webhook_cert_cmd::WebhookCertArgs),
    /// Install CRDs, RBAC, webhook registration and a default Queue; write the serving certificate
    /// and a kubeconfig of muster's ServiceAccount.
    Install(install_cmd::InstallArgs),
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

#[derive(Subcommand)]
enum HistoryCommand {
    /// Print the recorded runs as JSON Lines for `muster sim` (names hidden unless --keep-names).
    Export(history_cmd::ExportArgs),
}

/// Parses the command line; run as `kubectl-muster` (a kubectl plugin) usage says `kubectl muster`.
fn parse_cli() -> Cli {
    let mut cmd = Cli::command();
    if std::env::args().next().is_some_and(|a| queue_cmd::invoked_as_plugin(&a)) {
        cmd = cmd.bin_name("kubectl muster");
    }
    Cli::from_arg_matches(&cmd.get_matches()).unwrap_or_else(|e| e.exit())
}

fn main() -> ExitCode {
    let cli = parse_cli();
    let result = match cli.command {
        Command::Sim(args) => sim_cmd::run(&args),
        Command::Match(args) => match_cmd::run(&args),
        Command::Cluster { command } => match command {
            ClusterCommand::Nodes { file } => cluster_cmd::nodes(&file),
            ClusterCommand::Jgf { file } => cluster_cmd::jgf(&file),
            ClusterCommand::Describe { file } => cluster_cmd::describe(&file),
        },
        Command::History { command: HistoryCommand::Export(args) } => history_cmd::export(&args),
        Command::Controller(args) => controller_cmd::run(&args),
        Command::Queue(args) => queue_cmd::queue(&args),
        Command::Why(args) => queue_cmd::why(&args),
        Command::Webhook(args) => webhook_cmd::run(&args),
        Command::WebhookCert(args) => webhook_cert_cmd::run(&args),
        Command::Install(args) => install_cmd::run(&args),
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
