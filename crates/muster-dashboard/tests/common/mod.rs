//! What the dashboard's server tests share: a stand-in for the API server's review endpoints that
//! answers as the API server does and counts the TokenReviews, the dashboard served on a port of
//! its own (with a certificate off loopback), and a plain HTTP/1.1 client over TCP or TLS that
//! shows every byte of the answers.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use muster_dashboard::{Certificate, Limits, PemPair, PlanWatch, ServeOptions};
use muster_queue::Plan;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName};
use tokio_rustls::rustls::{ClientConfig, RootCertStore};

/// The one token the stand-in API server accepts, for the dashboard's audience.
pub const GOOD_TOKEN: &str = "eyJhbGciOiJSUzI1NiJ9.alice.c2ln";

/// How the stand-in answers.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// As a healthy API server.
    Healthy,
    /// Every review fails (500), with a message a caller must not see.
    Failing,
    /// Accepts every token, but says it was meant for the API server only.
    OtherAudience,
}

pub const SECRET_ERROR: &str = "etcdserver: request timed out (member 10.0.0.7 of cluster prod-eu-1)";

#[derive(Default)]
pub struct Seen {
    pub token_reviews: AtomicUsize,
    pub audiences: Mutex<Vec<Value>>,
}

pub struct ApiServer {
    pub client: kube::Client,
    pub seen: Arc<Seen>,
}

/// Starts the stand-in API server on a loopback port.
pub async fn api_server(mode: Mode) -> ApiServer {
    let seen = Arc::new(Seen::default());
    let app = Router::new()
        .route("/apis/authentication.k8s.io/v1/tokenreviews", post(token_review))
        .route("/apis/authorization.k8s.io/v1/subjectaccessreviews", post(access_review))
        .with_state((mode, seen.clone()));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let client = kube::Client::try_from(kube::Config::new(url.parse().unwrap())).unwrap();
    ApiServer { client, seen }
}

fn failing() -> Response {
    let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": SECRET_ERROR,
        "reason": "InternalError", "code": 500});
    (StatusCode::INTERNAL_SERVER_ERROR, Json(status)).into_response()
}

/// As the API server answers: the review echoed with its status; a refused token has no user and
/// an error, an accepted one the user and the audiences it is meant for among those asked.
async fn token_review(State((mode, seen)): State<(Mode, Arc<Seen>)>, Json(review): Json<Value>) -> Response {
    seen.token_reviews.fetch_add(1, Ordering::SeqCst);
    seen.audiences.lock().unwrap().push(review["spec"]["audiences"].clone());
    let status = match mode {
        Mode::Failing => return failing(),
        Mode::OtherAudience => json!({"authenticated": true, "user": {"username": "alice"},
            "audiences": ["https://kubernetes.default.svc.cluster.local"]}),
        Mode::Healthy if review["spec"]["token"] == GOOD_TOKEN => json!({"authenticated": true,
            "user": {"username": "system:serviceaccount:team:alice", "uid": "5c1e", "groups": ["system:serviceaccounts"]},
            "audiences": review["spec"]["audiences"]}),
        Mode::Healthy => {
            json!({"user": {}, "error": "[invalid bearer token, square/go-jose: error in cryptographic primitive]"})
        }
    };
    let mut answer = review;
    answer["metadata"] = json!({"creationTimestamp": null});
    answer["status"] = status;
    Json(answer).into_response()
}

async fn access_review(State((mode, _)): State<(Mode, Arc<Seen>)>, Json(review): Json<Value>) -> Response {
    if mode == Mode::Failing {
        return failing();
    }
    let mut answer = review;
    answer["status"] = json!({"allowed": true});
    Json(answer).into_response()
}

/// A plan with no groups, as a leader publishes it.
pub fn plan() -> PlanWatch {
    let (tx, rx) = tokio::sync::watch::channel(Some(Arc::new(Plan {
        now: 0,
        queues: Vec::new(),
        groups: Vec::new(),
        nodes: Vec::new(),
        set_asides: Vec::new(),
    })));
    std::mem::forget(tx);
    rx
}

/// The dashboard on its own port: on loopback (open, plain HTTP) or on every address (reviewed,
/// HTTPS with a fresh certificate for localhost and 127.0.0.1).
pub struct Dashboard {
    pub addr: SocketAddr,
    pub tls: Option<Arc<ClientConfig>>,
}

pub async fn dashboard(api: &ApiServer, loopback: bool, limits: Limits) -> Dashboard {
    let (certificate, tls) = if loopback { (None, None) } else { certificate() };
    serve(api, certificate, tls, limits)
}

/// The dashboard on every address, with its certificate given as PEM text (as muster makes it),
/// and where to send it another.
pub async fn dashboard_with_pem(api: &ApiServer) -> (Dashboard, tokio::sync::watch::Sender<PemPair>) {
    let made = fresh();
    let (send, pair) = tokio::sync::watch::channel(PemPair { cert: made.cert_pem.clone(), key: made.key_pem.clone() });
    let certificate = Certificate::Pem { pair, from: "a test".into() };
    (serve(api, Some(certificate), Some(trusting(&made)), Limits::default()), send)
}

fn serve(
    api: &ApiServer,
    certificate: Option<Certificate>,
    tls: Option<Arc<ClientConfig>>,
    limits: Limits,
) -> Dashboard {
    let bind = if certificate.is_none() { "127.0.0.1:0" } else { "0.0.0.0:0" };
    let listener = std::net::TcpListener::bind(bind).unwrap();
    let port = listener.local_addr().unwrap().port();
    let options = ServeOptions { certificate, audiences: vec![muster_dashboard::DEFAULT_AUDIENCE.into()], limits };
    tokio::spawn(muster_dashboard::serve(listener, plan(), api.client.clone(), options, std::future::pending()));
    Dashboard { addr: SocketAddr::from(([127, 0, 0, 1], port)), tls }
}

/// A fresh certificate for localhost and 127.0.0.1, as files, and a client that trusts its CA.
fn certificate() -> (Option<Certificate>, Option<Arc<ClientConfig>>) {
    let made = fresh();
    let dir = std::env::temp_dir().join(format!("muster-dashboard-test-{}-{}", std::process::id(), rand_suffix()));
    made.write_to(&dir).unwrap();
    let certificate = Certificate::Files { cert_file: dir.join("tls.crt"), key_file: dir.join("tls.key") };
    (Some(certificate), Some(trusting(&made)))
}

/// A new CA and a certificate it signs for localhost and 127.0.0.1.
pub fn fresh() -> muster_webhook::ServingCert {
    muster_webhook::ServingCert::generate(&["localhost".into()], &["127.0.0.1".parse().unwrap()]).unwrap()
}

/// A client that trusts `made`'s CA only.
pub fn trusting(made: &muster_webhook::ServingCert) -> Arc<ClientConfig> {
    let mut roots = RootCertStore::empty();
    roots.add(CertificateDer::from_pem_slice(made.ca_pem.as_bytes()).unwrap()).unwrap();
    let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
    let client = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    Arc::new(client)
}

fn rand_suffix() -> u64 {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    NEXT.fetch_add(1, Ordering::SeqCst) as u64
}

pub trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

impl Dashboard {
    /// A connection to the dashboard, through TLS when it serves HTTPS (the CA verified).
    pub async fn connect(&self) -> Box<dyn Io> {
        self.try_connect().await.expect("a TLS connection the client trusts")
    }

    /// A connection, or none when the TLS handshake fails (a certificate the client does not trust).
    pub async fn try_connect(&self) -> Option<Box<dyn Io>> {
        let tcp = TcpStream::connect(self.addr).await.unwrap();
        match &self.tls {
            Some(config) => {
                let name = ServerName::IpAddress(self.addr.ip().into());
                let tls = TlsConnector::from(config.clone()).connect(name, tcp).await.ok()?;
                Some(Box::new(tls))
            }
            None => Some(Box::new(tcp)),
        }
    }

    /// GET `path`, if the TLS handshake succeeds.
    pub async fn try_get(&self, path: &str) -> Option<Answer> {
        let io = self.try_connect().await?;
        Some(self.exchange(io, &format!("GET {path} HTTP/1.1"), "").await)
    }

    /// Sends `head` (request line and headers, `Host` and `Connection: close` added) and `body`;
    /// the whole answer.
    pub async fn send(&self, head: &str, body: &str) -> Answer {
        let io = self.connect().await;
        self.exchange(io, head, body).await
    }

    async fn exchange(&self, mut io: Box<dyn Io>, head: &str, body: &str) -> Answer {
        let host = format!("Host: localhost:{}\r\n", self.addr.port());
        let host = if head.contains("\nHost:") || head.contains("\nhost:") { "" } else { host.as_str() };
        let length = if body.is_empty() { String::new() } else { format!("Content-Length: {}\r\n", body.len()) };
        let text = format!("{}\r\n{host}{length}Connection: close\r\n\r\n{body}", head.trim_end());
        io.write_all(text.as_bytes()).await.unwrap();
        let mut out = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(10), io.read_to_end(&mut out)).await;
        Answer(String::from_utf8_lossy(&out).into_owned())
    }

    pub async fn get(&self, path: &str, headers: &str) -> Answer {
        self.send(&format!("GET {path} HTTP/1.1\r\n{headers}"), "").await
    }
}

/// An HTTP answer as it came.
#[derive(Debug)]
pub struct Answer(pub String);

impl Answer {
    pub fn status(&self) -> u16 {
        self.0.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0)
    }

    /// Every value of the header `name`.
    pub fn headers(&self, name: &str) -> Vec<String> {
        let head = self.0.split("\r\n\r\n").next().unwrap_or("");
        head.lines()
            .filter_map(|l| l.split_once(':'))
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.trim().to_string())
            .collect()
    }

    pub fn header(&self, name: &str) -> Option<String> {
        self.headers(name).into_iter().next()
    }

    pub fn body(&self) -> &str {
        self.0.split_once("\r\n\r\n").map_or("", |(_, b)| b)
    }
}

/// Limits for tests: the defaults, with the given changes.
pub fn limits(change: impl FnOnce(&mut Limits)) -> Limits {
    let mut l = Limits::default();
    change(&mut l);
    l
}
