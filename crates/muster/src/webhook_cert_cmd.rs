//! `muster webhook-cert`: the webhook's serving certificate, made by muster itself and kept in
//! its Secret (the Helm chart runs this before the webhook starts in every replica).

use std::net::IpAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;
use muster_webhook::registration::{self, TLS_SECRET};
use muster_webhook::{CertOrigin, ensure_in_secret};

#[derive(Args, Debug)]
pub struct WebhookCertArgs {
    /// muster's namespace, where the Secret is.
    #[arg(long, default_value = "muster-system")]
    namespace: String,
    /// The Secret that keeps the certificate (it must exist; muster only updates it).
    #[arg(long, value_name = "NAME", default_value = TLS_SECRET)]
    secret: String,
    /// A DNS name or IP address the API server reaches the webhook by (repeat for several)
    /// [default: the Service muster-webhook in --namespace].
    #[arg(long = "host", value_name = "HOST")]
    hosts: Vec<String>,
    /// Directory to write tls.crt, tls.key (mode 0600) and ca.crt into, for `muster webhook`.
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Kubeconfig to use (default: in-cluster service account, else $KUBECONFIG).
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
}

pub fn run(args: &WebhookCertArgs) -> Result<ExitCode> {
    crate::server::init();
    let (dns, ips) = hosts(args);
    crate::server::runtime()?.block_on(async {
        let (client, _) = crate::server::client(args.kubeconfig.as_deref()).await?;
        let (cert, origin) = ensure_in_secret(&client, &args.namespace, &args.secret, &dns, &ips).await?;
        cert.write_to(&args.out).with_context(|| format!("writing the certificate into {}", args.out.display()))?;
        let done = match origin {
            CertOrigin::Kept => "unchanged",
            CertOrigin::Renewed => "configured (a renewed certificate)",
            CertOrigin::Made => "configured (a new CA and certificate)",
        };
        println!("secret/{} {done}; {} written", args.secret, args.out.join("tls.crt").display());
        Ok(ExitCode::SUCCESS)
    })
}

/// The DNS names and IP addresses of `--host`, or the Service's names.
fn hosts(args: &WebhookCertArgs) -> (Vec<String>, Vec<IpAddr>) {
    if args.hosts.is_empty() {
        return (registration::service_dns_names(&args.namespace, registration::SERVICE_NAME), Vec::new());
    }
    split_hosts(&args.hosts)
}

/// Host names and IP addresses of a certificate, apart.
pub fn split_hosts(hosts: &[String]) -> (Vec<String>, Vec<IpAddr>) {
    let (ips, dns): (Vec<_>, Vec<_>) = hosts.iter().partition(|h| h.parse::<IpAddr>().is_ok());
    (dns.into_iter().cloned().collect(), ips.iter().filter_map(|h| h.parse().ok()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: WebhookCertArgs,
    }

    fn hosts_of(argv: &[&str]) -> (Vec<String>, Vec<IpAddr>) {
        hosts(&Cli::parse_from([&["muster", "--out", "/tmp/x"], argv].concat()).args)
    }

    #[test]
    fn hosts_are_the_services_names_unless_given() {
        let (dns, ips) = hosts_of(&["--namespace", "ops"]);
        assert_eq!(dns, ["muster-webhook.ops.svc", "muster-webhook.ops.svc.cluster.local", "muster-webhook.ops"]);
        assert!(ips.is_empty());
        let (dns, ips) = hosts_of(&["--host", "127.0.0.1", "--host", "webhook.example", "--host", "::1"]);
        assert_eq!(dns, ["webhook.example"]);
        assert_eq!(ips, ["127.0.0.1".parse::<IpAddr>().unwrap(), "::1".parse().unwrap()]);
    }
}
