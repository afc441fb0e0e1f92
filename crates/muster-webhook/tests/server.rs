//! The server answers a real AdmissionReview over TLS, verified against the generated CA, and
//! counts what it answered on `/metrics`.

use std::sync::Arc;
use std::time::Duration;

use muster_webhook::{MemoryState, ServeOptions, ServingCert, WebhookConfig, serve_with_state};
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

#[tokio::test]
async fn answers_admission_reviews_over_tls_with_the_generated_certificate() {
    let dir = std::env::temp_dir().join(format!("muster-webhook-server-{}", std::process::id()));
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
    let state = MemoryState::default().with_queue(muster_k8s::Queue::new("team-a", Default::default()));
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

    let (status, body) = call(port, &cert.ca_pem, "GET", "/healthz", b"").await;
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
    let (status, body) = call(port, &cert.ca_pem, "POST", "/mutate", &review("CREATE", "team-a")).await;
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
    let (_, body) = call(port, &cert.ca_pem, "POST", "/validate", &review("CREATE", "nope")).await;
    let out: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(out["response"]["allowed"], json!(false));
    let message = out["response"]["status"]["message"].as_str().unwrap();
    assert!(message.contains("metadata.labels[muster.dev/queue]: queue \"nope\" does not exist"), "{message}");

    // Every review is counted on /metrics, by hook, kind and result, over the same TLS.
    call(port, &cert.ca_pem, "POST", "/validate", b"{not a review").await;
    let (status, body) = call(port, &cert.ca_pem, "GET", "/metrics", b"").await;
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

    stop.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(15), server).await.unwrap().unwrap().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
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
