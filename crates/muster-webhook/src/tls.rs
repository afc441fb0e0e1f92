//! A serving certificate from PEM text, or read from PEM files and re-read when they change, so
//! a rotated certificate needs no restart. The webhook and the controller's dashboard both serve
//! with it.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use axum_server::tls_rustls::RustlsConfig;
use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::WebhookError;

/// How often the certificate files are checked for changes.
const RELOAD_EVERY: Duration = Duration::from_secs(10);

/// The PEM certificate chain and private key a server presents, and the protocols it offers
/// (ALPN, most preferred first).
#[derive(Debug, Clone)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub alpn: Vec<Vec<u8>>,
}

impl TlsFiles {
    /// The server's TLS configuration from the files as they are now.
    pub fn load(&self) -> Result<Arc<ServerConfig>, WebhookError> {
        let read = |path: &Path| std::fs::read(path).map_err(|source| WebhookError::Io { path: path.into(), source });
        let cert = Pem { text: read(&self.cert)?, from: self.cert.display().to_string() };
        let key = Pem { text: read(&self.key)?, from: self.key.display().to_string() };
        server_config(&cert, &key, &self.alpn)
    }

    /// Re-reads the certificate and key into `tls` whenever either file changes; a pair that
    /// does not load (half written, mismatched) keeps the old one serving. Runs until dropped.
    pub async fn reload_on_change(self, tls: RustlsConfig) {
        let mut seen = self.modified();
        loop {
            tokio::time::sleep(RELOAD_EVERY).await;
            let now = self.modified();
            if now.is_none() || now == seen {
                continue;
            }
            match self.load() {
                Ok(config) => {
                    tls.reload_from_config(config);
                    seen = now;
                    tracing::info!(cert = %self.cert.display(), "serving certificate reloaded");
                }
                Err(e) => {
                    tracing::warn!(error = %e, "serving certificate changed but does not load; keeping the old one");
                }
            }
        }
    }

    fn modified(&self) -> Option<[SystemTime; 2]> {
        let m = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
        Some([m(&self.cert)?, m(&self.key)?])
    }
}

/// PEM text, and where it came from (for errors).
pub struct Pem {
    pub text: Vec<u8>,
    pub from: String,
}

/// A server's TLS configuration: the certificate chain `cert`, its private key `key`, and the
/// protocols offered (ALPN, most preferred first).
pub fn server_config(cert: &Pem, key: &Pem, alpn: &[Vec<u8>]) -> Result<Arc<ServerConfig>, WebhookError> {
    let certs = CertificateDer::pem_slice_iter(&cert.text)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| WebhookError::Tls(format!("{}: {e}", cert.from)))?;
    if certs.is_empty() {
        return Err(WebhookError::Tls(format!("{}: no certificate in it", cert.from)));
    }
    let private =
        PrivateKeyDer::from_pem_slice(&key.text).map_err(|e| WebhookError::Tls(format!("{}: {e}", key.from)))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| WebhookError::Tls(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(certs, private)
        .map_err(|e| WebhookError::Tls(format!("{} and {}: {e}", cert.from, key.from)))?;
    config.alpn_protocols = alpn.to_vec();
    Ok(Arc::new(config))
}
