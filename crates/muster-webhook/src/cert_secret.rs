//! The webhook's serving certificate kept in a Secret and made by muster itself (the Helm chart's
//! default): each replica, before it serves, uses the certificate in the Secret when it was made
//! for the same hosts, and otherwise makes one and writes it there. Replicas so agree on one CA,
//! which the controller copies into the registration's caBundle (`fill_ca_bundle`).
//!
//! The Secret must exist (the chart creates it empty): RBAC can limit `update` to one Secret's
//! name but not `create`, so muster may rewrite that Secret and no other.

use std::collections::BTreeMap;
use std::net::IpAddr;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::PostParams;

use crate::{ServingCert, WebhookError};

/// Keys of the Secret: the serving certificate and key, the CA (the caBundle), and the hosts the
/// certificate was made for.
const CERT: &str = "tls.crt";
const KEY: &str = "tls.key";
const CA: &str = "ca.crt";
const HOSTS: &str = "tls.names";

/// Whether [`ensure_in_secret`] kept the Secret's certificate or made a new one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CertOrigin {
    Kept,
    Made,
}

/// One line naming every host of a certificate, kept beside it to tell whether an existing
/// certificate was made for the same hosts.
pub fn hosts_line(dns: &[String], ips: &[IpAddr]) -> String {
    dns.iter().cloned().chain(ips.iter().map(ToString::to_string)).collect::<Vec<_>>().join(",") + "\n"
}

/// The certificate in the Secret `namespace/name` if it was made for `dns` and `ips`, else a new
/// one written to it. Two replicas racing both write with the version they read: the loser gets
/// a conflict and takes the winner's certificate.
pub async fn ensure_in_secret(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    dns: &[String],
    ips: &[IpAddr],
) -> Result<(ServingCert, CertOrigin), WebhookError> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let err = |source| WebhookError::Secret { namespace: namespace.into(), name: name.into(), source };
    let hosts = hosts_line(dns, ips);
    let read = || async {
        api.get_opt(name)
            .await
            .map_err(err)?
            .ok_or_else(|| WebhookError::NoSecret { namespace: namespace.into(), name: name.into() })
    };
    let secret = read().await?;
    if let Some(cert) = made_for(&secret, &hosts) {
        return Ok((cert, CertOrigin::Kept));
    }
    let cert = ServingCert::generate(dns, ips)?;
    let mut updated = secret.clone();
    updated.data = Some(BTreeMap::from([
        (CERT.to_string(), ByteString(cert.cert_pem.clone().into_bytes())),
        (KEY.to_string(), ByteString(cert.key_pem.clone().into_bytes())),
        (CA.to_string(), ByteString(cert.ca_pem.clone().into_bytes())),
        (HOSTS.to_string(), ByteString(hosts.clone().into_bytes())),
    ]));
    updated.string_data = None;
    match api.replace(name, &PostParams::default(), &updated).await {
        Ok(_) => Ok((cert, CertOrigin::Made)),
        Err(kube::Error::Api(s)) if s.code == 409 => {
            let winner = read().await?;
            made_for(&winner, &hosts)
                .map(|c| (c, CertOrigin::Kept))
                .ok_or_else(|| WebhookError::SecretChanged { namespace: namespace.into(), name: name.into() })
        }
        Err(e) => Err(err(e)),
    }
}

/// The Secret's certificate, if it has all three PEMs and was made for `hosts`.
fn made_for(secret: &Secret, hosts: &str) -> Option<ServingCert> {
    let data = secret.data.as_ref()?;
    let text = |key: &str| data.get(key).and_then(|b| String::from_utf8(b.0.clone()).ok()).filter(|s| !s.is_empty());
    if text(HOSTS)? != hosts {
        return None;
    }
    Some(ServingCert { cert_pem: text(CERT)?, key_pem: text(KEY)?, ca_pem: text(CA)? })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn secret(data: &[(&str, &str)]) -> Secret {
        Secret {
            metadata: ObjectMeta { name: Some("muster-webhook-tls".into()), ..ObjectMeta::default() },
            data: Some(data.iter().map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec()))).collect()),
            ..Secret::default()
        }
    }

    #[test]
    fn a_certificate_is_kept_only_for_the_same_hosts_and_when_whole() {
        let hosts = hosts_line(&["muster-webhook.ns.svc".into()], &["127.0.0.1".parse().unwrap()]);
        assert_eq!(hosts, "muster-webhook.ns.svc,127.0.0.1\n");
        let whole = [(CERT, "c"), (KEY, "k"), (CA, "a"), (HOSTS, hosts.as_str())];
        let kept = made_for(&secret(&whole), &hosts).expect("same hosts, every key");
        assert_eq!((kept.cert_pem.as_str(), kept.key_pem.as_str(), kept.ca_pem.as_str()), ("c", "k", "a"));
        assert!(made_for(&secret(&whole), "muster-webhook.other.svc\n").is_none(), "other hosts");
        assert!(made_for(&secret(&whole[1..]), &hosts).is_none(), "no certificate");
        assert!(
            made_for(&secret(&[(CERT, "c"), (KEY, ""), (CA, "a"), (HOSTS, &hosts)]), &hosts).is_none(),
            "empty key"
        );
        assert!(made_for(&Secret::default(), &hosts).is_none(), "the chart's empty Secret");
    }
}
