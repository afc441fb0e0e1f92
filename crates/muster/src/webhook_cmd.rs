//! `muster webhook`: the admission webhook as a standalone server (see crates/muster-webhook).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;
use muster_webhook::{
    DEFAULT_ALIAS_QUEUE, DEFAULT_CONTROLLER_USER, DEFAULT_JOB_CONTROLLER_USER, ServeOptions, WebhookConfig,
};

#[derive(Args, Debug)]
pub struct WebhookArgs {
    /// Address to serve HTTPS on; port 0 takes any free port (see --port-file).
    #[arg(long, default_value = "127.0.0.1:8443")]
    addr: SocketAddr,
    /// PEM serving certificate (chain); re-read when it changes.
    #[arg(long, value_name = "FILE")]
    tls_cert: PathBuf,
    /// PEM private key of the certificate.
    #[arg(long, value_name = "FILE")]
    tls_key: PathBuf,
    /// Write the port served on to FILE once listening.
    #[arg(long, value_name = "FILE")]
    port_file: Option<PathBuf>,
    /// A principal that is muster itself (repeat for several) [default: system:serviceaccount:muster-system:muster].
    #[arg(long = "controller-user", value_name = "USER")]
    controller_users: Vec<String>,
    /// The principal of the Job controller, the only one that may create a Job's pods.
    #[arg(long, value_name = "USER", default_value = DEFAULT_JOB_CONTROLLER_USER)]
    job_controller_user: String,
    /// Treat pods labelled scheduling.x-k8s.io/pod-group as muster groups.
    #[arg(long)]
    accept_pod_group_alias: bool,
    /// Queue of pod-group pods without a muster.dev/queue label.
    #[arg(long, value_name = "QUEUE", default_value = DEFAULT_ALIAS_QUEUE)]
    alias_queue: String,
    /// Kubeconfig to read Queues, Namespaces and Groups with (default: in-cluster, else $KUBECONFIG).
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
}

pub fn run(args: &WebhookArgs) -> Result<ExitCode> {
    crate::server::init();
    let controller_users = if args.controller_users.is_empty() {
        vec![DEFAULT_CONTROLLER_USER.to_string()]
    } else {
        args.controller_users.clone()
    };
    let opts = ServeOptions {
        addr: args.addr,
        cert_file: args.tls_cert.clone(),
        key_file: args.tls_key.clone(),
        port_file: args.port_file.clone(),
        config: WebhookConfig {
            controller_users,
            job_controller_user: args.job_controller_user.clone(),
            accept_pod_group_alias: args.accept_pod_group_alias,
            alias_queue: args.alias_queue.clone(),
        },
    };
    crate::server::runtime()?.block_on(async {
        let (client, _) = crate::server::client(args.kubeconfig.as_deref()).await?;
        muster_webhook::serve(opts, client, crate::server::stop_signal()).await.context("webhook")?;
        Ok(ExitCode::SUCCESS)
    })
}
