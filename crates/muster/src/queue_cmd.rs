//! `muster queue` and `muster why`: what waits where, and why one job is where it is.
//!
//! Both read Group and Queue objects from the cluster the kubeconfig names, as kubectl does. What
//! they show is computed by `muster_k8s::view` from the objects and a clock (tested there without
//! a cluster); this file parses arguments and talks to the apiserver.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, anyhow};
use clap::{Args, ValueEnum};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, ListParams};
use muster_k8s::view::{
    ListOptions, Missing, QueueInfo, explain, missing_message, queue_rows, render_json, render_table,
};
use muster_k8s::{Group, Queue, labels};

use crate::server;

/// Where the cluster is: the kubectl flags that choose it.
#[derive(Args, Debug, Clone)]
pub struct KubeArgs {
    /// Path to the kubeconfig file (default: $KUBECONFIG, else ~/.kube/config).
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (default: its current context).
    #[arg(long, value_name = "NAME")]
    context: Option<String>,
    /// Namespace (default: the namespace of the context, else "default").
    #[arg(short = 'n', long, value_name = "NS")]
    namespace: Option<String>,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// More columns: absolute estimated start, age, requeues.
    Wide,
    /// One JSON object with the rows as items.
    Json,
}

#[derive(Args, Debug)]
pub struct QueueArgs {
    #[command(flatten)]
    kube: KubeArgs,
    /// Groups of every namespace (a NAMESPACE column is added).
    #[arg(short = 'A', long)]
    all_namespaces: bool,
    /// Only the groups of this queue.
    #[arg(long, value_name = "QUEUE")]
    queue: Option<String>,
    /// Also list finished groups (Succeeded, Failed), last.
    #[arg(long)]
    finished: bool,
    /// Output format.
    #[arg(short = 'o', long, value_enum, value_name = "FORMAT")]
    output: Option<Output>,
}

#[derive(Args, Debug)]
pub struct WhyArgs {
    #[command(flatten)]
    kube: KubeArgs,
    /// The Job (or pod group) to explain.
    #[arg(value_parser = clap::builder::NonEmptyStringValueParser::new())]
    job: String,
}

/// `muster queue`.
pub fn queue(args: &QueueArgs) -> Result<ExitCode> {
    server::runtime()?.block_on(async {
        let (client, namespace) = connect(&args.kube).await?;
        let api: Api<Group> =
            if args.all_namespaces { Api::all(client.clone()) } else { Api::namespaced(client.clone(), &namespace) };
        let groups = api.list(&ListParams::default()).await.map_err(|e| api_error(e, "groups"))?.items;
        let mut notes = Vec::new();
        if let Some(q) = &args.queue {
            // A misspelt queue would otherwise just print an empty table.
            if let Ok(None) = Api::<Queue>::all(client).get_opt(q).await {
                notes.push(format!("warning: queue {q} does not exist"));
            }
        }
        let opts = ListOptions { queue: args.queue.clone(), finished: args.finished };
        let rows = queue_rows(&groups, &opts);
        let out = match args.output {
            Some(Output::Json) => render_json(&rows),
            wide => {
                if rows.is_empty() {
                    let scope = if args.all_namespaces { String::new() } else { format!(" in {namespace} namespace") };
                    notes.push(format!("No groups found{scope}."));
                    String::new()
                } else {
                    render_table(&rows, wide == Some(Output::Wide), args.all_namespaces, Timestamp::now())
                }
            }
        };
        print!("{out}");
        for n in notes {
            eprintln!("{n}");
        }
        Ok(ExitCode::SUCCESS)
    })
}

/// `muster why JOB`.
pub fn why(args: &WhyArgs) -> Result<ExitCode> {
    server::runtime()?.block_on(async {
        let (client, namespace) = connect(&args.kube).await?;
        let groups: Api<Group> = Api::namespaced(client.clone(), &namespace);
        let mut group = groups.get_opt(&args.job).await.map_err(|e| api_error(e, "groups"))?;
        if group.is_none() {
            // The controller names a group after its job, but look for an owner too: a group made
            // from a JobSet or pod group may stand for a job of another name.
            let all = groups.list(&ListParams::default()).await.map_err(|e| api_error(e, "groups"))?.items;
            group = all.into_iter().find(|g| g.spec.owner.as_ref().is_some_and(|o| o.name == args.job));
        }
        let Some(group) = group else {
            let jobs: Api<Job> = Api::namespaced(client, &namespace);
            let job = jobs.get_opt(&args.job).await.map_err(|e| api_error(e, "jobs"))?;
            let missing = match job {
                None => Missing::NoJob,
                Some(j) => match j.metadata.labels.as_ref().and_then(|l| l.get(labels::QUEUE)) {
                    None => Missing::Unlabelled,
                    Some(q) => Missing::NoGroupYet(q.clone()),
                },
            };
            let text = missing_message(&namespace, &args.job, &missing);
            if missing == Missing::NoJob {
                eprintln!("error: {text}");
            } else {
                println!("{text}");
            }
            return Ok(ExitCode::from(1));
        };
        // Tenants often may not read cluster-scoped Queues; then the queue line says less.
        let queue = match Api::<Queue>::all(client).get_opt(&group.spec.queue).await {
            Ok(Some(q)) => QueueInfo::Found(Box::new(q)),
            Ok(None) => QueueInfo::Missing,
            Err(_) => QueueInfo::Unknown,
        };
        print!("{}", explain(&group, &queue, Timestamp::now()));
        Ok(ExitCode::SUCCESS)
    })
}

/// A client and the namespace to use, from the kubeconfig as kubectl picks it.
async fn connect(k: &KubeArgs) -> Result<(Client, String)> {
    let mut config = server::config(k.kubeconfig.as_deref(), k.context.as_deref()).await?;
    // A command, not a watch: a stuck apiserver should fail it, not hang it.
    config.read_timeout = Some(Duration::from_secs(60));
    let namespace = k.namespace.clone().unwrap_or_else(|| config.default_namespace.clone());
    let client = Client::try_from(config).context("cannot build a Kubernetes client")?;
    Ok((client, namespace))
}

fn api_error(e: kube::Error, what: &str) -> anyhow::Error {
    match &e {
        kube::Error::Api(s) if s.code == 404 && what == "groups" => anyhow!(
            "the server does not know muster Groups (groups.muster.dev): install muster first \
             (`helm install muster deploy/chart -n muster-system --create-namespace`, docs/deploy.md)"
        ),
        kube::Error::Api(s) if s.code == 403 => anyhow!("forbidden: {}", s.message),
        _ => anyhow::Error::new(e).context(format!("cannot read {what}")),
    }
}

/// Whether the binary was started as a kubectl plugin (`kubectl muster ...` runs `kubectl-muster`).
pub fn invoked_as_plugin(argv0: &str) -> bool {
    std::path::Path::new(argv0)
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.trim_end_matches(".exe") == "kubectl-muster")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plugin_name_is_recognised() {
        assert!(invoked_as_plugin("/home/u/.local/bin/kubectl-muster"));
        assert!(invoked_as_plugin("kubectl-muster"));
        assert!(!invoked_as_plugin("/usr/bin/muster"));
        assert!(!invoked_as_plugin("kubectl-musterx"));
    }
}
