//! TLS to PostgreSQL as libpq's `sslmode` and `sslrootcert` say it, in either form of connection
//! string (`key=value ...` or a `postgres://` URL). tokio-postgres itself knows only `disable`,
//! `prefer` and `require`, and leaves the certificate check to the TLS connector: both keys are
//! taken out of the string here and become a rustls configuration.
//!
//! | sslmode | encrypted | certificate checked |
//! |---|---|---|
//! | `disable` | never | - |
//! | `prefer` (default) | when the server offers TLS | no (against `sslrootcert`'s CA when given) |
//! | `require` | always | no (against `sslrootcert`'s CA when given, as libpq does) |
//! | `verify-ca` | always | signed by `sslrootcert`'s CA |
//! | `verify-full` | always | signed by `sslrootcert`'s CA and made for the host connected to |

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, Error as TlsError, RootCertStore, SignatureScheme,
};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::StoreError;

/// libpq's `sslmode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SslMode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl SslMode {
    fn parse(value: &str) -> Result<Self, StoreError> {
        Ok(match value {
            "disable" => SslMode::Disable,
            "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            other => {
                return Err(rejected(format!(
                    "sslmode {other:?} is none of disable, prefer, require, verify-ca, verify-full"
                )));
            }
        })
    }
}

/// The TLS settings of a connection string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSettings {
    pub mode: SslMode,
    /// `sslrootcert`: a PEM file of the CA certificates the server's certificate is checked against.
    pub root_cert: Option<PathBuf>,
}

/// The connection string without `sslmode` and `sslrootcert`, and what they said.
pub fn split(params: &str) -> Result<(String, TlsSettings), StoreError> {
    let mut settings = TlsSettings { mode: SslMode::Prefer, root_cert: None };
    let mut take = |key: &str, value: String| -> Result<bool, StoreError> {
        match key {
            "sslmode" => settings.mode = SslMode::parse(&value)?,
            "sslrootcert" => settings.root_cert = Some(PathBuf::from(value)),
            _ => return Ok(false),
        }
        Ok(true)
    };
    let rest = if params.starts_with("postgres://") || params.starts_with("postgresql://") {
        match params.split_once('?') {
            None => params.to_string(),
            Some((base, query)) => {
                let mut kept = Vec::new();
                for pair in query.split('&').filter(|p| !p.is_empty()) {
                    let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
                    if !take(key, percent_decode(value)?)? {
                        kept.push(pair);
                    }
                }
                if kept.is_empty() { base.to_string() } else { format!("{base}?{}", kept.join("&")) }
            }
        }
    } else {
        let mut kept = Vec::new();
        for (key, value) in key_values(params)? {
            if !take(&key, value.clone())? {
                kept.push(format!("{key}='{}'", value.replace('\\', "\\\\").replace('\'', "\\'")));
            }
        }
        kept.join(" ")
    };
    if matches!(settings.mode, SslMode::VerifyCa | SslMode::VerifyFull) && settings.root_cert.is_none() {
        return Err(rejected(
            "sslmode verify-ca and verify-full need sslrootcert=FILE, the CA certificate (PEM) that signed the \
             server's"
                .into(),
        ));
    }
    Ok((rest, settings))
}

impl TlsSettings {
    /// tokio-postgres's own mode: whether TLS is tried, and whether it is a must.
    pub fn wire_mode(&self) -> postgres::config::SslMode {
        match self.mode {
            SslMode::Disable => postgres::config::SslMode::Disable,
            SslMode::Prefer => postgres::config::SslMode::Prefer,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => postgres::config::SslMode::Require,
        }
    }

    /// The TLS connector, with the CA file read now; None for `disable`.
    pub fn connector(&self) -> Result<Option<MakeRustlsConnect>, StoreError> {
        if self.mode == SslMode::Disable {
            return Ok(None);
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let roots = match &self.root_cert {
            Some(path) => Some(Arc::new(read_roots(path)?)),
            None => None,
        };
        let verifier: Arc<dyn ServerCertVerifier> = match roots {
            None => Arc::new(Unchecked(provider.clone())),
            Some(roots) => {
                let webpki = WebPkiServerVerifier::builder_with_provider(roots, provider.clone())
                    .build()
                    .map_err(|e| rejected(format!("sslrootcert: {e}")))?;
                match self.mode {
                    SslMode::VerifyFull => webpki,
                    _ => Arc::new(AnyName(webpki)),
                }
            }
        };
        let config = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| rejected(format!("TLS: {e}")))?
            .dangerous()
            .with_custom_certificate_verifier(verifier)
            .with_no_client_auth();
        Ok(Some(MakeRustlsConnect::new(config)))
    }
}

fn rejected(message: String) -> StoreError {
    StoreError::Rejected(format!("connection string: {message}"))
}

fn read_roots(path: &Path) -> Result<RootCertStore, StoreError> {
    let shown = path.display();
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
        .and_then(|certs| certs.collect())
        .map_err(|e| rejected(format!("sslrootcert {shown}: {e}")))?;
    let mut roots = RootCertStore::empty();
    let (added, _) = roots.add_parsable_certificates(certs);
    if added == 0 {
        return Err(rejected(format!("sslrootcert {shown}: no CA certificate (PEM) in it")));
    }
    Ok(roots)
}

/// The pairs of a libpq `key=value` string: values bare or in single quotes, `\` escaping the
/// next character in both.
fn key_values(params: &str) -> Result<Vec<(String, String)>, StoreError> {
    let mut out = Vec::new();
    let mut chars = params.chars().peekable();
    loop {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        if chars.peek().is_none() {
            return Ok(out);
        }
        let mut key = String::new();
        while let Some(c) = chars.next_if(|c| *c != '=' && !c.is_whitespace()) {
            key.push(c);
        }
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        if chars.next() != Some('=') {
            return Err(rejected(format!("{key:?} has no value; write {key}=VALUE")));
        }
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        let quoted = chars.next_if_eq(&'\'').is_some();
        let mut value = String::new();
        loop {
            match chars.next() {
                None if quoted => return Err(rejected(format!("the value of {key} has no closing quote"))),
                None => break,
                Some('\'') if quoted => break,
                Some(c) if c.is_whitespace() && !quoted => break,
                Some('\\') => value.extend(chars.next()),
                Some(c) => value.push(c),
            }
        }
        out.push((key, value));
    }
}

fn percent_decode(value: &str) -> Result<String, StoreError> {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = value.get(i + 1..i + 3).and_then(|h| u8::from_str_radix(h, 16).ok());
            out.push(hex.ok_or_else(|| rejected(format!("{value:?}: % not followed by two hex digits")))?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| rejected(format!("{value:?} decodes to no UTF-8 text")))
}

/// `prefer` and `require` without a CA: encrypted, the certificate taken as it comes (libpq's
/// behaviour), the handshake's signatures still checked.
#[derive(Debug)]
struct Unchecked(Arc<CryptoProvider>);

impl ServerCertVerifier for Unchecked {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, TlsError> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, TlsError> {
        verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, TlsError> {
        verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// `verify-ca`: the chain checked against the CA, the host name not.
#[derive(Debug)]
struct AnyName(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for AnyName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, TlsError> {
        match self.0.verify_server_cert(end_entity, intermediates, server_name, ocsp, now) {
            Err(TlsError::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, TlsError> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, TlsError> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(mode: SslMode, root: Option<&str>) -> TlsSettings {
        TlsSettings { mode, root_cert: root.map(PathBuf::from) }
    }

    #[test]
    fn tls_keys_leave_a_key_value_string_and_the_rest_stays() {
        let (rest, tls) =
            split("host=db port=5432 sslmode=verify-full sslrootcert='/etc/ca dir/ca.crt' password='it\\'s'").unwrap();
        assert_eq!(rest, "host='db' port='5432' password='it\\'s'");
        assert_eq!(tls, settings(SslMode::VerifyFull, Some("/etc/ca dir/ca.crt")));
        let parsed: postgres::Config = rest.parse().expect("tokio-postgres reads what is left");
        assert_eq!(parsed.get_password(), Some(&b"it's"[..]));
    }

    #[test]
    fn tls_keys_leave_a_url_and_the_rest_stays() {
        let (rest, tls) =
            split("postgres://u:p@db/muster?sslmode=verify-ca&application_name=m&sslrootcert=%2Fetc%2Fca.crt").unwrap();
        assert_eq!(rest, "postgres://u:p@db/muster?application_name=m");
        assert_eq!(tls, settings(SslMode::VerifyCa, Some("/etc/ca.crt")));
        let (rest, tls) = split("postgresql://db/muster?sslmode=require").unwrap();
        assert_eq!((rest.as_str(), tls), ("postgresql://db/muster", settings(SslMode::Require, None)));
    }

    #[test]
    fn without_sslmode_tls_is_preferred() {
        let (rest, tls) = split("host=db user=muster").unwrap();
        assert_eq!((rest.as_str(), tls), ("host='db' user='muster'", settings(SslMode::Prefer, None)));
    }

    #[test]
    fn bad_tls_settings_are_refused_naming_the_fix() {
        let err = |s: &str| split(s).unwrap_err().to_string();
        assert!(err("host=db sslmode=verify").contains("sslmode \"verify\" is none of disable, prefer"));
        assert!(err("host=db sslmode=verify-full").contains("need sslrootcert=FILE"));
        assert!(err("postgres://db?sslmode=verify-ca").contains("need sslrootcert=FILE"));
        assert!(err("host=db password='open").contains("the value of password has no closing quote"));
        assert!(err("host").contains("\"host\" has no value; write host=VALUE"));
        let missing = settings(SslMode::VerifyFull, Some("/nonexistent/ca.crt")).connector().err().unwrap();
        assert!(missing.to_string().contains("sslrootcert /nonexistent/ca.crt"), "{missing}");
    }
}
