//! Keeps a running webhook's certificate fresh (`muster webhook --renew-from-secret`): every hour
//! the certificate in muster's Secret is renewed when due (`ensure_in_secret`, for the hosts it
//! was made for), written into the directory the webhook serves from (which the server re-reads,
//! `tls`), and the registration's caBundle follows the Secret's CAs (`fill_ca_bundle`).

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::Api;

use crate::registration::{CaBundle, fill_ca_bundle};
use crate::{CertOrigin, WebhookError, ensure_in_secret};

/// How often the certificate is checked, by default.
pub const RENEW_EVERY: Duration = Duration::from_secs(3600);
/// How soon a failed check is tried again (at most).
const RETRY_AFTER: Duration = Duration::from_secs(300);

/// Where the certificate is kept and where the webhook serves it from.
#[derive(Debug, Clone)]
pub struct Renewal {
    pub namespace: String,
    pub secret: String,
    /// The directory of the served `tls.crt` and `tls.key`.
    pub dir: PathBuf,
    /// How often the certificate is checked ([`RENEW_EVERY`]).
    pub every: Duration,
}

/// Checks and renews now, then every `renewal.every`; runs until dropped. Failures are logged
/// and tried again sooner: the certificate being served stays until a new one is written.
pub async fn keep_renewed(client: kube::Client, renewal: Renewal) {
    loop {
        let wait = match renew_once(&client, &renewal).await {
            Ok(()) => renewal.every,
            Err(e) => {
                tracing::warn!(error = %e, secret = renewal.secret, "cannot check the webhook's certificate; trying again");
                RETRY_AFTER.min(renewal.every)
            }
        };
        tokio::time::sleep(wait).await;
    }
}

/// One check: the Secret's certificate renewed if due, the served files and the caBundle made to
/// match it.
pub async fn renew_once(client: &kube::Client, r: &Renewal) -> Result<(), WebhookError> {
    let (dns, ips) = made_for(client, r).await?;
    let (cert, origin) = ensure_in_secret(client, &r.namespace, &r.secret, &dns, &ips).await?;
    let served = std::fs::read_to_string(r.dir.join("tls.crt")).unwrap_or_default();
    if served != cert.cert_pem {
        cert.write_to(&r.dir)?;
        let how = if origin == CertOrigin::Made { "with a new CA" } else { "from the same CA" };
        tracing::info!(secret = r.secret, not_after = cert.not_after, "webhook certificate renewed {how}");
    }
    match fill_ca_bundle(client, &r.namespace).await {
        Ok(CaBundle::Patched(n)) if n > 0 => {
            tracing::info!(webhooks = n, "caBundle of the webhook registration updated")
        }
        Ok(_) => {}
        Err(e) => tracing::warn!(error = %e, "cannot update the caBundle of the webhook registration"),
    }
    Ok(())
}

/// The hosts the Secret's certificate was made for (its `tls.names`, written by `muster
/// webhook-cert`).
async fn made_for(client: &kube::Client, r: &Renewal) -> Result<(Vec<String>, Vec<IpAddr>), WebhookError> {
    let api: Api<Secret> = Api::namespaced(client.clone(), &r.namespace);
    let secret = api.get_opt(&r.secret).await.map_err(|source| WebhookError::Secret {
        namespace: r.namespace.clone(),
        name: r.secret.clone(),
        source,
    })?;
    let secret =
        secret.ok_or_else(|| WebhookError::NoSecret { namespace: r.namespace.clone(), name: r.secret.clone() })?;
    let names = secret.data.and_then(|mut d| d.remove("tls.names")).and_then(|b| String::from_utf8(b.0).ok());
    let names = names.ok_or_else(|| {
        WebhookError::Tls(format!(
            "secret {}/{} holds no certificate muster made (no tls.names): run `muster webhook-cert` first, or \
             leave out --renew-from-secret where another issuer (cert-manager) renews it",
            r.namespace, r.secret
        ))
    })?;
    Ok(split_hosts(&names))
}

/// The DNS names and IP addresses of a `tls.names` line.
fn split_hosts(line: &str) -> (Vec<String>, Vec<IpAddr>) {
    let hosts = line.trim().split(',').filter(|h| !h.is_empty());
    let (ips, dns): (Vec<&str>, Vec<&str>) = hosts.partition(|h| h.parse::<IpAddr>().is_ok());
    (dns.into_iter().map(str::to_string).collect(), ips.iter().filter_map(|h| h.parse().ok()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hosts_line;

    #[test]
    fn the_hosts_line_reads_back_as_it_was_written() {
        let dns = vec!["muster-webhook.ns.svc".to_string(), "muster-webhook.ns".to_string()];
        let ips: Vec<IpAddr> = vec!["127.0.0.1".parse().unwrap(), "::1".parse().unwrap()];
        assert_eq!(split_hosts(&hosts_line(&dns, &ips)), (dns, ips));
    }
}
