//! A throwaway CA and a serving certificate it signs, for the API server to reach the webhook
//! (its `caBundle` is the CA).

use std::net::IpAddr;
use std::path::Path;

use k8s_openapi::jiff::{Timestamp, tz::TimeZone};
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType, date_time_ymd,
};

use crate::WebhookError;
use crate::files::replace_file;

/// PEM-encoded CA certificate, serving certificate and its private key.
#[derive(Debug, Clone)]
pub struct ServingCert {
    pub ca_pem: String,
    pub cert_pem: String,
    pub key_pem: String,
}

/// Years the certificates are valid; a local demo cluster outlives no such span.
const VALID_YEARS: i32 = 10;

impl ServingCert {
    /// A fresh CA (its key is dropped: nothing else is ever signed with it) and a serverAuth
    /// certificate for `dns_names` and `ips`, valid from yesterday for ten years.
    pub fn generate(dns_names: &[String], ips: &[IpAddr]) -> Result<ServingCert, WebhookError> {
        let today = Timestamp::now().to_zoned(TimeZone::UTC).date();
        let yesterday = today.yesterday().unwrap_or(today);
        let month = |m: i8| u8::try_from(m).unwrap_or(1);
        let day = |d: i8| u8::try_from(d).unwrap_or(1);
        let not_before = date_time_ymd(i32::from(yesterday.year()), month(yesterday.month()), day(yesterday.day()));
        let not_after =
            date_time_ymd(i32::from(today.year()) + VALID_YEARS, month(today.month()), day(today.day()).min(28));

        let ca_key = KeyPair::generate()?;
        let mut ca = CertificateParams::new(Vec::<String>::new())?;
        ca.distinguished_name = DistinguishedName::new();
        ca.distinguished_name.push(DnType::CommonName, "muster-webhook-ca");
        ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        ca.not_before = not_before;
        ca.not_after = not_after;
        let ca_cert = ca.self_signed(&ca_key)?;
        let issuer = Issuer::new(ca, ca_key);

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
        leaf.not_before = not_before;
        leaf.not_after = not_after;
        let cert = leaf.signed_by(&key, &issuer)?;
        Ok(ServingCert { ca_pem: ca_cert.pem(), cert_pem: cert.pem(), key_pem: key.serialize_pem() })
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
