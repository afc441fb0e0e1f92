//! The server answers a real AdmissionReview over TLS, verified against the generated CA, and
//! counts what it answered on `/metrics`.

use std::sync::Arc;
use std::time::Duration;

use muster_webhook::{
    ClusterState, MAX_REVIEW_BYTES, MAX_REVIEWS_IN_FLIGHT, MemoryState, ServeOptions, ServingCert, WebhookConfig,
    serve_with_state,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// One HTTP/1.1 request over TLS; returns the status line and the body.
async fn call(port: u16, ca_pem: &str, method: &str, path: &str, body: &[u8]) -> (String, Vec<u8>) {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(CertificateDer::from_pem_slice(ca_pem.as_bytes()).unwrap()).unwrap();
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let name = ServerName::IpAddress(std::net::Ipv4Addr::LOCALHOST.into());
    let mut tls = tokio_rustls::TlsConnector::from(Arc::new(config)).connect(name, tcp).await.unwrap();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n",
        body.len()
    );
    tls.write_all(head.as_bytes()).await.unwrap();
    tls.write_all(body).await.unwrap();
    let mut out = Vec::new();
    // The server closes after the response (Connection: close); a TLS close without
    // close_notify still leaves the full response read.
    let _ = tls.read_to_end(&mut out).await;
    let split = out.windows(4).position(|w| w == b"\r\n\r\n").expect("a full HTTP response");
    let status = String::from_utf8_lossy(&out[..split]).lines().next().unwrap_or("").to_string();
    (status, out[split + 4..].to_vec())
}

/// A webhook server on a free loopback port, with a certificate of its own.
struct Running {
    port: u16,
    ca_pem: String,
    dir: std::path::PathBuf,
    stop: tokio::sync::oneshot::Sender<()>,
    server: tokio::task::JoinHandle<Result<(), muster_webhook::WebhookError>>,
}

impl Running {
    async fn start<S: ClusterState + 'static>(name: &str, state: S) -> Running {
        let dir = std::env::temp_dir().join(format!("muster-webhook-{name}-{}", std::process::id()));
        let cert = ServingCert::generate(&["localhost".into()], &["127.0.0.1".parse().unwrap()]).unwrap();
        cert.write_to(&dir).unwrap();
        let port_file = dir.join("port");
        let opts = ServeOptions {
            addr: "127.0.0.1:0".parse().unwrap(),
            cert_file: dir.join("tls.crt"),
            key_file: dir.join("tls.key"),
            port_file: Some(port_file.clone()),
            config: WebhookConfig::default(),
        };
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(serve_with_state(opts, state, async {
            let _ = stopped.await;
        }));
        for _ in 0..100 {
            if let Some(port) = std::fs::read_to_string(&port_file).ok().and_then(|p| p.trim().parse().ok()) {
                return Running { port, ca_pem: cert.ca_pem, dir, stop, server };
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("the server writes its port");
    }

    async fn call(&self, method: &str, path: &str, body: &[u8]) -> (String, Vec<u8>) {
        call(self.port, &self.ca_pem, method, path, body).await
    }

    async fn stop(self) {
        self.stop.send(()).unwrap();
        tokio::time::timeout(Duration::from_secs(15), self.server).await.unwrap().unwrap().unwrap();
        std::fs::remove_dir_all(&self.dir).unwrap();
    }
}

#[tokio::test]
async fn answers_admission_reviews_over_tls_with_the_generated_certificate() {
    let state = MemoryState::default().with_queue(muster_k8s::Queue::new("team-a", Default::default()));
    let server = Running::start("answers", state).await;
    let (status, body) = server.call("GET", "/healthz", b"").await;
    assert!(status.contains("200"), "{status}");
    assert_eq!(body, b"ok");

    let job = |queue: &str| {
        json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "train", "namespace": "ml", "labels": {"muster.dev/queue": queue}},
            "spec": {"parallelism": 2, "template": {"spec": {"restartPolicy": "Never",
                     "containers": [{"name": "main", "image": "busybox"}]}}}
        })
    };
    let review = |op: &str, queue: &str| {
        serde_json::to_vec(&json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {
                "uid": "7f3e", "kind": {"group": "batch", "version": "v1", "kind": "Job"},
                "resource": {"group": "batch", "version": "v1", "resource": "jobs"},
                "name": "train", "namespace": "ml", "operation": op,
                "userInfo": {"username": "tenant"}, "object": job(queue), "dryRun": false
            }
        }))
        .unwrap()
    };
    let (status, body) = server.call("POST", "/mutate", &review("CREATE", "team-a")).await;
    assert!(status.contains("200"), "{status}");
    let out: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(out["kind"], json!("AdmissionReview"));
    assert_eq!(out["response"]["uid"], json!("7f3e"));
    assert_eq!(out["response"]["allowed"], json!(true));
    // kube writes the patch bytes as a JSON array of numbers, which the apiserver's decoder
    // takes for a []byte as well as base64.
    let bytes: Vec<u8> = match &out["response"]["patch"] {
        Value::String(s) => base64_decode(s),
        other => serde_json::from_value(other.clone()).expect("patch bytes"),
    };
    let patch: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(
        patch,
        json!([{"op": "add", "path": "/spec/suspend", "value": true},
               {"op": "add", "path": "/spec/template/spec/schedulerName", "value": "muster"}])
    );

    // Queue "nope" does not exist: refused, with the field named.
    let (_, body) = server.call("POST", "/validate", &review("CREATE", "nope")).await;
    let out: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(out["response"]["allowed"], json!(false));
    let message = out["response"]["status"]["message"].as_str().unwrap();
    assert!(message.contains("metadata.labels[muster.dev/queue]: queue \"nope\" does not exist"), "{message}");

    // Every review is counted on /metrics, by hook, kind and result, over the same TLS.
    server.call("POST", "/validate", b"{not a review").await;
    let (status, body) = server.call("GET", "/metrics", b"").await;
    assert!(status.contains("200"), "{status}");
    let text = String::from_utf8(body).unwrap();
    for line in [
        r#"muster_webhook_requests_total{hook="mutate",kind="Job",result="allowed"} 1"#,
        r#"muster_webhook_requests_total{hook="validate",kind="Job",result="denied"} 1"#,
        r#"muster_webhook_requests_total{hook="validate",kind="unknown",result="error"} 1"#,
        r#"muster_webhook_request_duration_seconds_count{hook="mutate"} 1"#,
        r#"muster_webhook_request_duration_seconds_count{hook="validate"} 2"#,
    ] {
        assert!(text.lines().any(|l| l == line), "no line {line} in:\n{text}");
    }

    server.stop().await;
}

/// A review of `kind` (an object of no known kind's shape: the webhook has no rules for it).
fn review_of(kind: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "1", "kind": {"group": "forged.example", "version": "v1", "kind": kind},
            "resource": {"group": "forged.example", "version": "v1", "resource": "things"},
            "name": "x", "namespace": "ml", "operation": "CREATE", "userInfo": {"username": "anyone"},
            "object": {"apiVersion": "forged.example/v1", "kind": kind, "metadata": {"name": "x", "namespace": "ml"}}
        }
    }))
    .unwrap()
}

#[tokio::test]
async fn a_flood_of_reviews_of_made_up_kinds_leaves_the_metrics_bounded() {
    let server = Running::start("flood", MemoryState::default()).await;
    for i in 0..300 {
        let (status, _) = server.call("POST", "/validate", &review_of(&format!("Kind{i:x}{}", "k".repeat(200)))).await;
        assert!(status.contains("200"), "{status}");
    }
    let (_, body) = server.call("GET", "/metrics", b"").await;
    let text = String::from_utf8(body).unwrap();
    let kinds: std::collections::BTreeSet<&str> = text
        .lines()
        .filter(|l| l.starts_with("muster_webhook_requests_total{"))
        .filter_map(|l| l.split("kind=\"").nth(1)?.split('"').next())
        .collect();
    assert_eq!(kinds.into_iter().collect::<Vec<_>>(), ["other"], "{text}");
    assert!(text.contains(r#"muster_webhook_requests_total{hook="validate",kind="other",result="allowed"} 300"#));
    assert!(text.len() < 4096, "{} bytes of metrics", text.len());
    server.stop().await;
}

#[tokio::test]
async fn a_body_larger_than_any_review_is_refused_unread() {
    let server = Running::start("oversized", MemoryState::default()).await;
    let mut body = review_of("Thing");
    let (status, _) = server.call("POST", "/validate", &body).await;
    assert!(status.contains("200"), "{status}");
    // Padded with spaces past the limit (still JSON): refused for its size alone.
    body.resize(MAX_REVIEW_BYTES + 1, b' ');
    let (status, _) = server.call("POST", "/validate", &body).await;
    assert!(status.contains("413"), "{status}");
    server.stop().await;
}

/// A cluster state whose Queue lookups wait until released: reviews that read a Queue stay in
/// flight meanwhile.
#[derive(Clone)]
struct Stalled {
    inner: MemoryState,
    released: tokio::sync::watch::Receiver<bool>,
    waiting: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl ClusterState for Stalled {
    async fn queue(
        &self,
        name: &str,
    ) -> Result<Option<std::sync::Arc<muster_k8s::Queue>>, muster_webhook::LookupError> {
        self.waiting.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let _ = self.released.clone().wait_for(|r| *r).await;
        self.inner.queue(name).await
    }
    async fn namespace_labels(
        &self,
        name: &str,
    ) -> Result<Option<std::collections::BTreeMap<String, String>>, muster_webhook::LookupError> {
        self.inner.namespace_labels(name).await
    }
    async fn group(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<std::sync::Arc<muster_k8s::Group>>, muster_webhook::LookupError> {
        self.inner.group(namespace, name).await
    }
    async fn pod_group(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<std::sync::Arc<kube::core::DynamicObject>>, muster_webhook::LookupError> {
        self.inner.pod_group(namespace, name).await
    }
    async fn native_pod_group(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<std::sync::Arc<k8s_openapi::api::scheduling::v1beta1::PodGroup>>, muster_webhook::LookupError>
    {
        self.inner.native_pod_group(namespace, name).await
    }
    async fn pod_group_trees(
        &self,
        namespace: &str,
    ) -> Result<muster_webhook::PodGroupTrees, muster_webhook::LookupError> {
        self.inner.pod_group_trees(namespace).await
    }
}

#[tokio::test]
async fn reviews_beyond_the_limit_in_flight_are_turned_away_at_once() {
    let (release, released) = tokio::sync::watch::channel(false);
    let waiting = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let state = Stalled { inner: MemoryState::default(), released, waiting: waiting.clone() };
    let server = std::sync::Arc::new(Running::start("in-flight", state).await);
    // A queued Job's create reads its Queue: each of these waits there.
    let job = serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "2", "kind": {"group": "batch", "version": "v1", "kind": "Job"},
            "resource": {"group": "batch", "version": "v1", "resource": "jobs"},
            "name": "train", "namespace": "ml", "operation": "CREATE", "userInfo": {"username": "tenant"},
            "object": {"apiVersion": "batch/v1", "kind": "Job",
                       "metadata": {"name": "train", "namespace": "ml", "labels": {"muster.dev/queue": "q"}},
                       "spec": {"template": {"spec": {"containers": [{"name": "main", "image": "busybox"}]}}}}
        }
    }))
    .unwrap();
    let stalled: Vec<_> = (0..MAX_REVIEWS_IN_FLIGHT)
        .map(|_| {
            let (server, job) = (server.clone(), job.clone());
            tokio::spawn(async move { server.call("POST", "/mutate", &job).await })
        })
        .collect();
    for _ in 0..500 {
        if waiting.load(std::sync::atomic::Ordering::SeqCst) == MAX_REVIEWS_IN_FLIGHT {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(waiting.load(std::sync::atomic::Ordering::SeqCst), MAX_REVIEWS_IN_FLIGHT);
    let one_more = tokio::time::timeout(Duration::from_secs(2), server.call("POST", "/mutate", &job));
    let (status, body) = one_more.await.expect("answered at once, not queued");
    assert!(status.contains("429"), "{status}");
    assert!(String::from_utf8_lossy(&body).contains("reviews at once"));
    // The health check is not a review: it still answers.
    assert!(server.call("GET", "/healthz", b"").await.0.contains("200"));
    release.send(true).unwrap();
    for call in stalled {
        let (status, _) = call.await.unwrap();
        assert!(status.contains("200"), "{status}");
    }
    // With the places free again, the next review is answered.
    assert!(server.call("POST", "/mutate", &job).await.0.contains("200"));
    std::sync::Arc::into_inner(server).expect("the calls are done").stop().await;
}

/// Standard base64 (the patch field's encoding), without a dependency for one test.
fn base64_decode(s: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        _ => 63,
    };
    let bytes: Vec<u8> = s.bytes().filter(|c| *c != b'=').map(value).collect();
    let mut out = Vec::new();
    for chunk in bytes.chunks(4) {
        let mut n = 0u32;
        for (i, b) in chunk.iter().enumerate() {
            n |= u32::from(*b) << (18 - 6 * i);
        }
        out.extend_from_slice(&n.to_be_bytes()[1..chunk.len()]);
    }
    out
}
