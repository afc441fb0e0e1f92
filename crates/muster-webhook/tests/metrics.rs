//! The server counts every review it answers and serves the counts on `/metrics`, over the same
//! TLS as the reviews (tests/server.rs tests the reviews themselves).

use std::sync::Arc;
use std::time::Duration;

use muster_k8s::{Queue, QueueSpec};
use muster_webhook::{MemoryState, ServeOptions, ServingCert, WebhookConfig, serve_with_state};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::json;
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
    let _ = tls.read_to_end(&mut out).await;
    let split = out.windows(4).position(|w| w == b"\r\n\r\n").expect("a full HTTP response");
    let head = String::from_utf8_lossy(&out[..split]).to_string();
    (head, out[split + 4..].to_vec())
}

/// An AdmissionReview of a tenant's Job in `queue`.
fn job_review(op: &str, queue: &str) -> Vec<u8> {
    let job = json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "train", "namespace": "ml", "labels": {"muster.dev/queue": queue}},
        "spec": {"parallelism": 2, "template": {"spec": {"restartPolicy": "Never",
                 "containers": [{"name": "main", "image": "busybox"}]}}}
    });
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "7f3e", "kind": {"group": "batch", "version": "v1", "kind": "Job"},
            "resource": {"group": "batch", "version": "v1", "resource": "jobs"},
            "name": "train", "namespace": "ml", "operation": op,
            "userInfo": {"username": "tenant"}, "object": job, "dryRun": false
        }
    }))
    .unwrap()
}

#[tokio::test]
async fn metrics_count_each_review_by_hook_kind_and_result() {
    let dir = std::env::temp_dir().join(format!("muster-webhook-metrics-{}", std::process::id()));
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
    let state = MemoryState::default().with_queue(Queue::new("team-a", QueueSpec::default()));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(serve_with_state(opts, state, async {
        let _ = stopped.await;
    }));
    let mut port = None;
    for _ in 0..100 {
        if let Ok(p) = std::fs::read_to_string(&port_file) {
            port = p.trim().parse::<u16>().ok();
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let port = port.expect("the server writes its port");
    let ca = &cert.ca_pem;

    call(port, ca, "POST", "/mutate", &job_review("CREATE", "team-a")).await;
    // Queue "nope" does not exist: refused.
    call(port, ca, "POST", "/validate", &job_review("CREATE", "nope")).await;
    call(port, ca, "POST", "/validate", b"{not a review").await;
    let (head, body) = call(port, ca, "GET", "/metrics", b"").await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(head.to_ascii_lowercase().contains("content-type: application/openmetrics-text"), "{head}");
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

    stop.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(15), server).await.unwrap().unwrap().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}
