//! `muster webhook`: the admission webhook as a standalone server (see crates/muster-webhook).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
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
    /// Renew the served certificate from this Secret (made by `muster webhook-cert`) when it is
    /// due, checking every hour: written over --tls-cert and --tls-key, and the registration's
    /// caBundle updated when the CA changes.
    #[arg(long, value_name = "SECRET")]
    renew_from_secret: Option<String>,
    /// The namespace of --renew-from-secret.
    #[arg(long, value_name = "NS", default_value = "muster-system")]
    secret_namespace: String,
    /// Seconds between checks of --renew-from-secret.
    #[arg(long, value_name = "SECONDS", default_value_t = muster_webhook::RENEW_EVERY.as_secs(),
          value_parser = clap::value_parser!(u64).range(1..))]
    renew_every: u64,
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
    let renewal = renewal(args)?;
    crate::server::runtime()?.block_on(async {
        let (client, _) = crate::server::client(args.kubeconfig.as_deref()).await?;
        let renewing = renewal.map(|r| tokio::spawn(muster_webhook::keep_renewed(client.clone(), r)));
        let served = muster_webhook::serve(opts, client, crate::server::stop_signal()).await;
        if let Some(task) = renewing {
            task.abort();
        }
        served.context("webhook")?;
        Ok(ExitCode::SUCCESS)
    })
}

/// What --renew-from-secret renews; the certificate and key must be `tls.crt` and `tls.key` of
/// one directory, as `muster webhook-cert --out` writes them.
fn renewal(args: &WebhookArgs) -> Result<Option<muster_webhook::Renewal>> {
    let Some(secret) = &args.renew_from_secret else { return Ok(None) };
    let dir = args.tls_cert.parent().map(PathBuf::from).unwrap_or_default();
    let named = |p: &PathBuf, name: &str| p.file_name().is_some_and(|n| n == name) && p.parent() == Some(dir.as_path());
    if !named(&args.tls_cert, "tls.crt") || !named(&args.tls_key, "tls.key") {
        bail!(
            "--renew-from-secret writes DIR/tls.crt and DIR/tls.key: give --tls-cert and --tls-key as those two files \
             of one directory (as `muster webhook-cert --out DIR` writes them)"
        );
    }
    Ok(Some(muster_webhook::Renewal {
        namespace: args.secret_namespace.clone(),
        secret: secret.clone(),
        dir,
        every: std::time::Duration::from_secs(args.renew_every),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: WebhookArgs,
    }

    fn renewal_of(argv: &[&str]) -> Result<Option<muster_webhook::Renewal>> {
        renewal(&Cli::parse_from([&["muster"], argv].concat()).args)
    }

    #[test]
    fn renewal_needs_the_two_files_of_one_directory() {
        let tls = ["--tls-cert", "/etc/muster/tls/tls.crt", "--tls-key", "/etc/muster/tls/tls.key"];
        assert!(renewal_of(&tls).unwrap().is_none(), "off unless asked for");
        let r = renewal_of(
            &[&tls[..], &["--renew-from-secret", "muster-webhook-tls", "--secret-namespace", "ops"]].concat(),
        )
        .unwrap()
        .expect("renewing");
        assert_eq!((r.namespace.as_str(), r.secret.as_str()), ("ops", "muster-webhook-tls"));
        assert_eq!(r.dir, PathBuf::from("/etc/muster/tls"));
        assert_eq!(r.every, muster_webhook::RENEW_EVERY);
        let elsewhere = ["--tls-cert", "/a/tls.crt", "--tls-key", "/b/tls.key", "--renew-from-secret", "s"];
        let err = renewal_of(&elsewhere).unwrap_err().to_string();
        assert!(err.contains("give --tls-cert and --tls-key as those two files of one directory"), "{err}");
    }
}
