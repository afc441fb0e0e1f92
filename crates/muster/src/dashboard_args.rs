//! `muster controller`'s dashboard flags: where it listens, its certificate (files, or one
//! muster makes and keeps in a Secret, the Helm chart's way) and the audience of callers' tokens.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::Args;
use muster_dashboard::{Certificate, DashboardError, PemPair, ServeOptions};
use muster_webhook::{ensure_in_secret, registration};
use tokio::sync::watch;

/// The Service the Helm chart puts in front of an exposed dashboard.
const SERVICE_NAME: &str = "muster-dashboard";

#[derive(Args, Debug)]
pub struct DashboardArgs {
    /// Serve the dashboard of the plan here (off by default): open on a loopback address (reach it
    /// with kubectl port-forward), HTTPS for callers with a Kubernetes token anywhere else.
    #[arg(long, value_name = "ADDR")]
    dashboard_addr: Option<SocketAddr>,
    /// PEM serving certificate of the dashboard (needed off loopback; re-read when it changes).
    #[arg(long, value_name = "FILE", requires = "dashboard_tls_key")]
    dashboard_tls_cert: Option<PathBuf>,
    /// PEM private key of the dashboard's certificate.
    #[arg(long, value_name = "FILE", requires = "dashboard_tls_cert")]
    dashboard_tls_key: Option<PathBuf>,
    /// Serve the dashboard with a certificate muster makes and keeps in this Secret of
    /// --namespace (it must exist; muster fills it as `muster webhook-cert` does).
    #[arg(long, value_name = "NAME", conflicts_with = "dashboard_tls_cert")]
    dashboard_tls_secret: Option<String>,
    /// A DNS name or IP address that certificate is also for (repeat for several), besides the
    /// Service muster-dashboard's names, localhost and 127.0.0.1.
    #[arg(long = "dashboard-tls-host", value_name = "HOST", requires = "dashboard_tls_secret")]
    dashboard_tls_hosts: Vec<String>,
    /// The audience a caller's token must be meant for (repeat for several): tokens made with
    /// `kubectl create token ACCOUNT --audience AUD`.
    #[arg(long = "dashboard-token-audience", value_name = "AUD", default_value = muster_dashboard::DEFAULT_AUDIENCE)]
    dashboard_token_audiences: Vec<String>,
}

/// How the dashboard is to serve, as far as the flags alone say.
pub struct DashboardPlan {
    pub addr: SocketAddr,
    options: ServeOptions,
    secret: Option<(String, Vec<String>, Vec<IpAddr>)>,
}

impl DashboardArgs {
    /// None when the dashboard is off; refused before anything starts when it would serve plain
    /// HTTP off loopback or take no audience.
    pub fn plan(&self) -> Result<Option<DashboardPlan>> {
        let Some(addr) = self.dashboard_addr else { return Ok(None) };
        let certificate = match (&self.dashboard_tls_cert, &self.dashboard_tls_key) {
            (Some(cert), Some(key)) => Some(Certificate::Files { cert_file: cert.clone(), key_file: key.clone() }),
            _ => None,
        };
        if certificate.is_none() && self.dashboard_tls_secret.is_none() && !addr.ip().is_loopback() {
            return Err(DashboardError::NeedsTls(addr).into());
        }
        let audiences: Vec<String> = self.dashboard_token_audiences.iter().filter(|a| !a.is_empty()).cloned().collect();
        if audiences.is_empty() {
            bail!("--dashboard-token-audience: give an audience (default {})", muster_dashboard::DEFAULT_AUDIENCE);
        }
        let secret = self.dashboard_tls_secret.clone().map(|name| {
            let (dns, ips) = crate::webhook_cert_cmd::split_hosts(&self.dashboard_tls_hosts);
            (name, dns, ips)
        });
        Ok(Some(DashboardPlan { addr, options: ServeOptions { certificate, audiences, ..Default::default() }, secret }))
    }
}

impl DashboardPlan {
    /// The options to serve with, the certificate taken from (or made into) the Secret when
    /// there is one, for the Service's names in `namespace`, localhost and 127.0.0.1 and the
    /// hosts given.
    pub async fn options(self, client: &kube::Client, namespace: &str) -> Result<ServeOptions> {
        let Some((name, extra_dns, extra_ips)) = self.secret else { return Ok(self.options) };
        let mut dns = registration::service_dns_names(namespace, SERVICE_NAME);
        dns.push("localhost".into());
        dns.extend(extra_dns);
        let mut ips = vec![IpAddr::V4(Ipv4Addr::LOCALHOST)];
        ips.extend(extra_ips);
        let (cert, origin) = ensure_in_secret(client, namespace, &name, &dns, &ips)
            .await
            .with_context(|| format!("--dashboard-tls-secret {name}"))?;
        tracing::info!(secret = %name, ?origin, "the dashboard's certificate");
        let (send, pair) = watch::channel(PemPair { cert: cert.cert_pem, key: cert.key_pem });
        let from = format!("secret {namespace}/{name}");
        tokio::spawn(keep_renewed(client.clone(), namespace.to_string(), name, (dns, ips), send));
        Ok(ServeOptions { certificate: Some(Certificate::Pem { pair, from }), ..self.options })
    }
}

/// Checks the Secret's certificate as often as the webhook does its own, and sends it on to the
/// dashboard when it was renewed (its end near, or made afresh); a failed check is logged and
/// tried again at the next.
async fn keep_renewed(
    client: kube::Client,
    namespace: String,
    name: String,
    (dns, ips): (Vec<String>, Vec<IpAddr>),
    send: watch::Sender<PemPair>,
) {
    loop {
        tokio::time::sleep(muster_webhook::RENEW_EVERY).await;
        match ensure_in_secret(&client, &namespace, &name, &dns, &ips).await {
            Ok((cert, origin)) => {
                let next = PemPair { cert: cert.cert_pem, key: cert.key_pem };
                if send.send_if_modified(|served| std::mem::replace(served, next.clone()) != next) {
                    tracing::info!(secret = %name, ?origin, "the dashboard's certificate renewed");
                }
            }
            Err(e) => tracing::warn!(error = %e, secret = %name, "cannot check the dashboard's certificate"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: DashboardArgs,
    }

    fn plan(argv: &[&str]) -> Result<Option<DashboardPlan>> {
        Cli::try_parse_from([&["muster"], argv].concat())?.args.plan()
    }

    #[test]
    fn the_dashboard_needs_a_certificate_off_loopback_and_takes_its_audience_by_default() {
        assert!(plan(&[]).unwrap().is_none(), "off by default");
        let p = plan(&["--dashboard-addr", "127.0.0.1:8081"]).unwrap().unwrap();
        assert!(p.options.certificate.is_none() && p.secret.is_none(), "plain HTTP on loopback");
        assert_eq!(p.options.audiences, ["muster-dashboard"]);
        let refused = plan(&["--dashboard-addr", "0.0.0.0:8081"]).err().unwrap().to_string();
        assert!(refused.contains("serves HTTPS only") && refused.contains("--dashboard-tls-cert"), "{refused}");
        let files =
            ["--dashboard-addr", "0.0.0.0:8081", "--dashboard-tls-cert", "c.pem", "--dashboard-tls-key", "k.pem"];
        assert!(matches!(plan(&files).unwrap().unwrap().options.certificate, Some(Certificate::Files { .. })));
        assert!(plan(&["--dashboard-addr", "0.0.0.0:8081", "--dashboard-tls-cert", "c.pem"]).is_err(), "a key too");
        let secret = ["--dashboard-addr", "0.0.0.0:8081", "--dashboard-tls-secret", "muster-dashboard-tls"];
        let p = plan(
            &[&secret[..], &["--dashboard-tls-host", "dash.example", "--dashboard-tls-host", "10.0.0.9"]].concat(),
        )
        .unwrap()
        .unwrap();
        let (name, dns, ips) = p.secret.unwrap();
        assert_eq!(
            (name.as_str(), dns, ips),
            ("muster-dashboard-tls", vec!["dash.example".to_string()], vec!["10.0.0.9".parse::<IpAddr>().unwrap()])
        );
        assert!(
            plan(&[&secret[..], &["--dashboard-tls-cert", "c.pem", "--dashboard-tls-key", "k.pem"]].concat()).is_err()
        );
        let p = plan(&[
            "--dashboard-addr",
            "127.0.0.1:8081",
            "--dashboard-token-audience",
            "a",
            "--dashboard-token-audience",
            "https://kubernetes.default.svc",
        ])
        .unwrap()
        .unwrap();
        assert_eq!(p.options.audiences, ["a", "https://kubernetes.default.svc"]);
    }
}
