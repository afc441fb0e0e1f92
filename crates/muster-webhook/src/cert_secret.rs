//! The webhook's serving certificate kept in a Secret and made by muster itself (the Helm chart's
//! default): each replica, before it serves and every hour while it serves (`renew`), uses the
//! certificate in the Secret while it was made for the same hosts and has
//! [`RENEW_BEFORE_DAYS`] left; otherwise it issues a new one from the CA kept there (so the
//! caBundle stays), or, when the CA itself has less than [`CA_RENEW_BEFORE_DAYS`] left or its key
//! is not there, makes a new CA, and `ca.crt` then holds the new CA and the old one, so that the
//! apiserver trusts replicas still serving the old certificate. Replicas so agree on one CA,
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

/// Keys of the Secret: the serving certificate and key, the CAs the caBundle trusts (the current
/// one first), the current CA's key, the hosts the certificate was made for, and when the
/// certificate and the CA expire (Unix seconds).
const CERT: &str = "tls.crt";
const KEY: &str = "tls.key";
const CA: &str = "ca.crt";
const CA_KEY: &str = "ca.key";
const HOSTS: &str = "tls.names";
const NOT_AFTER: &str = "tls.not-after";
const CA_NOT_AFTER: &str = "ca.not-after";

/// A serving certificate with less than this left is renewed (a third of its year).
pub const RENEW_BEFORE_DAYS: i64 = 120;
/// A CA with less than this left is replaced (more than a serving certificate lasts).
pub const CA_RENEW_BEFORE_DAYS: i64 = 400;
const DAY: i64 = 86_400;

/// Whether [`ensure_in_secret`] kept the Secret's certificate, issued a new one from its CA, or
/// made a new CA (the caBundle must then be updated).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CertOrigin {
    Kept,
    Renewed,
    Made,
}

/// One line naming every host of a certificate, kept beside it to tell whether an existing
/// certificate was made for the same hosts.
pub fn hosts_line(dns: &[String], ips: &[IpAddr]) -> String {
    dns.iter().cloned().chain(ips.iter().map(ToString::to_string)).collect::<Vec<_>>().join(",") + "\n"
}

/// The certificate in the Secret `namespace/name` if it is good for `dns` and `ips`, else a new
/// one written to it (module docs). Two replicas racing both write with the version they read:
/// the loser gets a conflict and takes the winner's certificate.
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
    let now = k8s_openapi::jiff::Timestamp::now().as_second();
    let (cert, origin) = match plan(&secret, &hosts, now) {
        Plan::Keep(cert) => return Ok((cert, CertOrigin::Kept)),
        Plan::Issue(ca) => {
            let mut cert = ServingCert::issue(ca.current(), &ca.key_pem, ca.not_after, dns, ips)?;
            cert.ca_pem = ca.bundle;
            (cert, CertOrigin::Renewed)
        }
        Plan::NewCa { previous } => {
            let mut cert = ServingCert::generate(dns, ips)?;
            if let Some(old) = previous {
                cert.ca_pem = format!("{}{old}", cert.ca_pem);
            }
            (cert, CertOrigin::Made)
        }
    };
    let mut updated = secret.clone();
    updated.data = Some(data(&cert, &hosts));
    updated.string_data = None;
    match api.replace(name, &PostParams::default(), &updated).await {
        Ok(_) => Ok((cert, origin)),
        Err(kube::Error::Api(s)) if s.code == 409 => match plan(&read().await?, &hosts, now) {
            Plan::Keep(cert) => Ok((cert, CertOrigin::Kept)),
            _ => Err(WebhookError::SecretChanged { namespace: namespace.into(), name: name.into() }),
        },
        Err(e) => Err(err(e)),
    }
}

/// The CAs a Secret keeps: the bundle the caBundle trusts (the current CA first), the current
/// CA's key and its expiry.
#[derive(Debug, Clone, PartialEq)]
struct Cas {
    bundle: String,
    key_pem: String,
    not_after: i64,
}

impl Cas {
    /// The current CA: the first certificate of the bundle.
    fn current(&self) -> &str {
        const END: &str = "-----END CERTIFICATE-----";
        self.bundle.find(END).map_or(&self.bundle, |i| &self.bundle[..i + END.len()])
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Plan {
    /// The Secret's certificate is good.
    Keep(ServingCert),
    /// A new serving certificate from the Secret's CA.
    Issue(Cas),
    /// A new CA, trusted beside the current one while it is still valid.
    NewCa { previous: Option<String> },
}

/// What to do with the Secret's certificate at `now` for `hosts`.
fn plan(secret: &Secret, hosts: &str, now: i64) -> Plan {
    let data = secret.data.as_ref();
    let text = |key: &str| {
        data.and_then(|d| d.get(key)).and_then(|b| String::from_utf8(b.0.clone()).ok()).filter(|s| !s.is_empty())
    };
    let time = |key: &str| text(key).and_then(|t| t.trim().parse::<i64>().ok()).unwrap_or(0);
    let (not_after, ca_not_after) = (time(NOT_AFTER), time(CA_NOT_AFTER));
    if let (Some(cert_pem), Some(key_pem), Some(ca_pem)) = (text(CERT), text(KEY), text(CA))
        && text(HOSTS).as_deref() == Some(hosts)
        && not_after - now > RENEW_BEFORE_DAYS * DAY
    {
        let ca_key_pem = text(CA_KEY).unwrap_or_default();
        return Plan::Keep(ServingCert { ca_pem, ca_key_pem, cert_pem, key_pem, not_after, ca_not_after });
    }
    match (text(CA), text(CA_KEY)) {
        (Some(bundle), Some(key_pem)) if ca_not_after - now > CA_RENEW_BEFORE_DAYS * DAY => {
            Plan::Issue(Cas { bundle, key_pem, not_after: ca_not_after })
        }
        (Some(bundle), _) if ca_not_after > now => {
            let cas = Cas { bundle, key_pem: String::new(), not_after: ca_not_after };
            Plan::NewCa { previous: Some(cas.current().to_string() + "\n") }
        }
        _ => Plan::NewCa { previous: None },
    }
}

/// The Secret's data for `cert`, made for `hosts`.
fn data(cert: &ServingCert, hosts: &str) -> BTreeMap<String, ByteString> {
    let bytes = |s: &str| ByteString(s.as_bytes().to_vec());
    BTreeMap::from([
        (CERT.to_string(), bytes(&cert.cert_pem)),
        (KEY.to_string(), bytes(&cert.key_pem)),
        (CA.to_string(), bytes(&cert.ca_pem)),
        (CA_KEY.to_string(), bytes(&cert.ca_key_pem)),
        (HOSTS.to_string(), bytes(hosts)),
        (NOT_AFTER.to_string(), bytes(&cert.not_after.to_string())),
        (CA_NOT_AFTER.to_string(), bytes(&cert.ca_not_after.to_string())),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn secret(data: BTreeMap<String, ByteString>) -> Secret {
        Secret {
            metadata: ObjectMeta { name: Some("muster-webhook-tls".into()), ..ObjectMeta::default() },
            data: Some(data),
            ..Secret::default()
        }
    }

    const NOW: i64 = 2_000_000_000;

    fn stored(not_after: i64, ca_not_after: i64, hosts: &str) -> Secret {
        let cert = ServingCert {
            ca_pem: "-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n".into(),
            ca_key_pem: "cakey".into(),
            cert_pem: "c".into(),
            key_pem: "k".into(),
            not_after,
            ca_not_after,
        };
        secret(data(&cert, hosts))
    }

    #[test]
    fn a_certificate_is_kept_for_the_same_hosts_while_it_has_time_left() {
        let hosts = hosts_line(&["muster-webhook.ns.svc".into()], &["127.0.0.1".parse().unwrap()]);
        assert_eq!(hosts, "muster-webhook.ns.svc,127.0.0.1\n");
        let year = NOW + 365 * DAY;
        let Plan::Keep(kept) = plan(&stored(year, NOW + 3650 * DAY, &hosts), &hosts, NOW) else { panic!("kept") };
        assert_eq!((kept.cert_pem.as_str(), kept.key_pem.as_str(), kept.ca_key_pem.as_str()), ("c", "k", "cakey"));
        assert_eq!((kept.not_after, kept.ca_not_after), (year, NOW + 3650 * DAY));
    }

    #[test]
    fn a_certificate_near_its_end_or_for_other_hosts_is_issued_again_from_the_same_ca() {
        let hosts = "muster-webhook.ns.svc\n";
        let ca_not_after = NOW + 3650 * DAY;
        let near = stored(NOW + (RENEW_BEFORE_DAYS - 1) * DAY, ca_not_after, hosts);
        let Plan::Issue(cas) = plan(&near, hosts, NOW) else { panic!("renewed") };
        assert_eq!((cas.key_pem.as_str(), cas.not_after), ("cakey", ca_not_after));
        assert_eq!(cas.current(), "-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----");
        let other_hosts = stored(NOW + 365 * DAY, ca_not_after, "muster-webhook.other.svc\n");
        assert!(matches!(plan(&other_hosts, hosts, NOW), Plan::Issue(_)));
    }

    #[test]
    fn a_ca_near_its_end_is_replaced_and_trusted_beside_the_new_one_until_then() {
        let hosts = "muster-webhook.ns.svc\n";
        let ending = stored(NOW + DAY, NOW + (CA_RENEW_BEFORE_DAYS - 1) * DAY, hosts);
        let Plan::NewCa { previous } = plan(&ending, hosts, NOW) else { panic!("a new CA") };
        assert_eq!(previous.as_deref(), Some("-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n"));
        let expired = stored(NOW - DAY, NOW - DAY, hosts);
        assert_eq!(plan(&expired, hosts, NOW), Plan::NewCa { previous: None }, "an expired CA is trusted no longer");
        // A Secret written before the CA's key was kept: no way to issue from its CA.
        let mut without_key = stored(NOW + DAY, NOW + 3650 * DAY, hosts);
        without_key.data.as_mut().unwrap().remove(CA_KEY);
        assert!(matches!(plan(&without_key, hosts, NOW), Plan::NewCa { previous: Some(_) }));
        assert_eq!(plan(&Secret::default(), hosts, NOW), Plan::NewCa { previous: None }, "the chart's empty Secret");
    }

    #[test]
    fn issued_certificates_chain_to_the_ca_they_were_issued_from() {
        use rustls::client::danger::ServerCertVerifier;
        let dns = ["muster-webhook.ns.svc".to_string()];
        let first = ServingCert::generate(&dns, &[]).unwrap();
        let again = ServingCert::issue(&first.ca_pem, &first.ca_key_pem, first.ca_not_after, &dns, &[]).unwrap();
        assert_eq!(again.ca_pem, first.ca_pem, "the caBundle stays");
        assert_ne!(again.cert_pem, first.cert_pem);
        assert!(again.not_after <= first.ca_not_after && again.not_after > NOW.min(first.not_after) - DAY);
        // rustls checks the chain: the renewed certificate verifies against the first CA.
        let roots = {
            let mut r = rustls::RootCertStore::empty();
            use rustls::pki_types::pem::PemObject;
            r.add(rustls::pki_types::CertificateDer::from_pem_slice(first.ca_pem.as_bytes()).unwrap()).unwrap();
            std::sync::Arc::new(r)
        };
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        let verifier =
            rustls::client::WebPkiServerVerifier::builder_with_provider(roots, provider).build().expect("a verifier");
        use rustls::pki_types::pem::PemObject;
        let leaf = rustls::pki_types::CertificateDer::from_pem_slice(again.cert_pem.as_bytes()).unwrap();
        let name = rustls::pki_types::ServerName::try_from("muster-webhook.ns.svc").unwrap();
        verifier
            .verify_server_cert(&leaf, &[], &name, &[], rustls::pki_types::UnixTime::now())
            .expect("the renewed certificate chains to the CA");
    }
}
