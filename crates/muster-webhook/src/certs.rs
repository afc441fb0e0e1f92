//! A CA of muster's own and a serving certificate it signs, for the API server to reach the
//! webhook (its `caBundle` is the CA). The serving certificate lasts a year and is renewed from
//! the same CA (`issue`), so the caBundle stays; the CA lasts ten years.

use std::net::IpAddr;
use std::path::Path;

use k8s_openapi::jiff::{Timestamp, tz::TimeZone};
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType, date_time_ymd,
};

use crate::WebhookError;
use crate::files::replace_file;

/// PEM-encoded CA certificate (and its key, to renew the serving certificate with), serving
/// certificate and its private key, and when each expires (Unix seconds; 0 when not known).
#[derive(Debug, Clone, PartialEq)]
pub struct ServingCert {
    pub ca_pem: String,
    pub ca_key_pem: String,
    pub cert_pem: String,
    pub key_pem: String,
    pub not_after: i64,
    pub ca_not_after: i64,
}

/// Days the CA is valid.
pub const CA_VALID_DAYS: i64 = 3650;
/// Days a serving certificate is valid.
pub const SERVING_VALID_DAYS: i64 = 365;
const DAY: i64 = 86_400;
const CA_NAME: &str = "muster-webhook-ca";

impl ServingCert {
    /// A fresh CA and a serverAuth certificate it signs for `dns_names` and `ips`, valid from
    /// yesterday for `CA_VALID_DAYS` and `SERVING_VALID_DAYS`.
    pub fn generate(dns_names: &[String], ips: &[IpAddr]) -> Result<ServingCert, WebhookError> {
        let ca_key = KeyPair::generate()?;
        let now = Timestamp::now().as_second();
        let ca_not_after = now + CA_VALID_DAYS * DAY;
        let ca_cert = ca_params(now, ca_not_after).self_signed(&ca_key)?;
        ServingCert::issue(&ca_cert.pem(), &ca_key.serialize_pem(), ca_not_after, dns_names, ips)
    }

    /// A new serving certificate for `dns_names` and `ips` from the CA `ca_pem` (made by
    /// [`ServingCert::generate`]) and its key, valid for `SERVING_VALID_DAYS` but no longer
    /// than the CA.
    pub fn issue(
        ca_pem: &str,
        ca_key_pem: &str,
        ca_not_after: i64,
        dns_names: &[String],
        ips: &[IpAddr],
    ) -> Result<ServingCert, WebhookError> {
        let now = Timestamp::now().as_second();
        let ca_key = KeyPair::from_pem(ca_key_pem)?;
        // The issuer's name and key identifier are what the CA was made with: the same
        // parameters and key sign alike, and no certificate parser is needed.
        let issuer = Issuer::new(ca_params(now, ca_not_after), ca_key);
        let not_after = (now + SERVING_VALID_DAYS * DAY).min(ca_not_after);
        let key = KeyPair::generate()?;
        let mut leaf = CertificateParams::new(dns_names.to_vec())?;
        leaf.subject_alt_names.extend(ips.iter().map(|ip| SanType::IpAddress(*ip)));
        leaf.distinguished_name = DistinguishedName::new();
        let cn = dns_names.first().cloned().or_else(|| ips.first().map(ToString::to_string));
        leaf.distinguished_name.push(DnType::CommonName, cn.unwrap_or_else(|| "muster-webhook".into()));
        leaf.is_ca = IsCa::ExplicitNoCa;
        leaf.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
        leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        leaf.use_authority_key_identifier_extension = true;
        valid(&mut leaf, now - DAY, not_after);
        let cert = leaf.signed_by(&key, &issuer)?;
        Ok(ServingCert {
            ca_pem: ca_pem.to_string(),
            ca_key_pem: ca_key_pem.to_string(),
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            not_after,
            ca_not_after,
        })
    }

    /// Writes `tls.crt`, `ca.crt` (mode 0644) and `tls.key` (mode 0600) into `dir`, creating it;
    /// each replaces what is there without following a symbolic link (`replace_file`).
    pub fn write_to(&self, dir: &Path) -> Result<(), WebhookError> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| WebhookError::Io { path, source }
        };
        std::fs::create_dir_all(dir).map_err(io(dir))?;
        for (name, pem, mode) in
            [("tls.crt", &self.cert_pem, 0o644), ("ca.crt", &self.ca_pem, 0o644), ("tls.key", &self.key_pem, 0o600)]
        {
            let path = dir.join(name);
            replace_file(&path, pem.as_bytes(), mode).map_err(io(&path))?;
        }
        Ok(())
    }
}

/// The CA's parameters: its name and uses, valid from the day before `now` to `not_after`.
fn ca_params(now: i64, not_after: i64) -> CertificateParams {
    let mut ca = CertificateParams::default();
    ca.distinguished_name = DistinguishedName::new();
    ca.distinguished_name.push(DnType::CommonName, CA_NAME);
    ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    valid(&mut ca, now - DAY, not_after);
    ca
}

/// Validity from the UTC day of Unix second `from` to that of `to` (whole days).
fn valid(params: &mut CertificateParams, from: i64, to: i64) {
    let day = |t: i64| {
        let date = Timestamp::from_second(t).unwrap_or(Timestamp::UNIX_EPOCH).to_zoned(TimeZone::UTC).date();
        let (month, d) = (u8::try_from(date.month()).unwrap_or(1), u8::try_from(date.day()).unwrap_or(1));
        date_time_ymd(i32::from(date.year()), month, d)
    };
    params.not_before = day(from);
    params.not_after = day(to);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generates_a_ca_and_a_leaf_for_names_and_ips() {
        let c = ServingCert::generate(&["muster-webhook.muster-system.svc".into()], &["127.0.0.1".parse().unwrap()])
            .unwrap();
        assert!(c.ca_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(c.cert_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(c.key_pem.contains("PRIVATE KEY"));
        assert_ne!(c.ca_pem, c.cert_pem);
        let dir = std::env::temp_dir().join(format!("muster-certs-{}", std::process::id()));
        c.write_to(&dir).unwrap();
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.join("tls.key")).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(std::fs::read_to_string(dir.join("ca.crt")).unwrap(), c.ca_pem);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn writing_the_certificate_follows_no_symlink_planted_in_the_directory() {
        let c = ServingCert::generate(&["muster-webhook.muster-system.svc".into()], &[]).unwrap();
        let dir = std::env::temp_dir().join(format!("muster-certs-links-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let victim = dir.join("victim");
        std::fs::write(&victim, "untouched").unwrap();
        for name in ["tls.crt", "ca.crt", "tls.key", "tls.key.tmp", "key.tmp"] {
            std::os::unix::fs::symlink(&victim, dir.join(name)).unwrap();
        }
        c.write_to(&dir).unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "untouched");
        assert_eq!(std::fs::read_to_string(dir.join("tls.crt")).unwrap(), c.cert_pem);
        assert_eq!(std::fs::read_to_string(dir.join("tls.key")).unwrap(), c.key_pem);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
