//! The dashboard's defences, each against the server as the controller runs it: HTTPS off
//! loopback, the Host check on loopback, cookie attributes, security headers, the login form's
//! CSRF token, timeouts and the connection cap, and what unknown tokens cost the API server.

mod common;

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use common::{GOOD_TOKEN, Mode, SECRET_ERROR, api_server, dashboard, limits};
use muster_dashboard::{DashboardError, Limits, ServeOptions};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

#[tokio::test]
async fn off_loopback_the_dashboard_serves_https_only() {
    let api = api_server(Mode::Healthy).await;
    let listener = std::net::TcpListener::bind("0.0.0.0:0").unwrap();
    let refused =
        muster_dashboard::serve(listener, common::plan(), api.client.clone(), ServeOptions::default(), async {})
            .await
            .expect_err("no certificate, not loopback");
    assert!(matches!(refused, DashboardError::NeedsTls(_)), "{refused}");
    assert!(refused.to_string().contains("--dashboard-tls-cert"), "names the flags: {refused}");

    let d = dashboard(&api, false, Limits::default()).await;
    let answer = d.get("/healthz", "").await;
    assert_eq!(answer.status(), 200, "HTTPS with the certificate's CA: {answer:?}");
    // A certificate given as text (as muster keeps it in a Secret) serves as well, and a renewed
    // one is served once it is sent.
    let (mut pem, renew) = common::dashboard_with_pem(&api).await;
    assert_eq!(pem.get("/healthz", "").await.status(), 200);
    let renewed = common::fresh();
    renew.send(muster_dashboard::PemPair { cert: renewed.cert_pem.clone(), key: renewed.key_pem.clone() }).unwrap();
    pem.tls = Some(common::trusting(&renewed));
    let mut served = 0;
    for _ in 0..50 {
        if let Some(answer) = pem.try_get("/healthz").await {
            served = answer.status();
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(served, 200, "the renewed certificate (another CA) is served");
    let mut plain = TcpStream::connect(d.addr).await.unwrap();
    plain.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").await.unwrap();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), plain.read_to_end(&mut out)).await;
    assert!(!String::from_utf8_lossy(&out).contains("200 OK"), "plain HTTP gets no page");
}

#[tokio::test]
async fn on_loopback_a_request_for_another_host_is_refused() {
    let api = api_server(Mode::Healthy).await;
    let d = dashboard(&api, true, Limits::default()).await;
    let port = d.addr.port();
    for host in
        [format!("localhost:{port}"), format!("127.0.0.1:{port}"), format!("[::1]:{port}"), "localhost:9000".into()]
    {
        assert_eq!(d.get("/api/plan", &format!("Host: {host}")).await.status(), 200, "{host}");
    }
    // A page of evil.example whose name now resolves to 127.0.0.1 (DNS rebinding).
    let forged = d.get("/api/plan", &format!("Host: evil.example:{port}")).await;
    assert_eq!(forged.status(), 403, "{forged:?}");
    assert!(!forged.body().contains("groups"), "no plan: {forged:?}");
    assert_eq!(d.get("/", "Host: 127.0.0.1.nip.io").await.status(), 403);
}

#[tokio::test]
async fn every_response_carries_the_security_headers() {
    let api = api_server(Mode::Healthy).await;
    let open = dashboard(&api, true, Limits::default()).await;
    let reviewed = dashboard(&api, false, Limits::default()).await;
    let answers = [
        open.get("/", "").await,
        open.get("/assets/dashboard.js", "").await,
        open.get("/", "Host: evil.example").await,
        reviewed.get("/login", "").await,
        reviewed.get("/api/plan", "").await,
        reviewed.get("/no/such/page", "").await,
    ];
    for a in &answers {
        let csp = a.header("content-security-policy").unwrap_or_default();
        assert!(csp.contains("default-src 'none'") && csp.contains("frame-ancestors 'none'"), "{a:?}");
        assert!(!csp.contains("unsafe-inline"), "{csp}");
        assert_eq!(a.header("x-frame-options").as_deref(), Some("DENY"), "{a:?}");
        assert_eq!(a.header("x-content-type-options").as_deref(), Some("nosniff"), "{a:?}");
        assert_eq!(a.header("referrer-policy").as_deref(), Some("no-referrer"), "{a:?}");
    }
    let page = answers[0].body();
    assert!(!page.contains("<script>") && !page.contains("<style>") && !page.contains("style=\""), "{page}");
}

/// The login form's CSRF token: the cookie, and the hidden field of the form.
async fn login_form(d: &common::Dashboard) -> (String, String) {
    let form = d.get("/login", "").await;
    assert_eq!(form.status(), 200, "{form:?}");
    let cookie = form.header("set-cookie").expect("a CSRF cookie");
    assert!(cookie.starts_with("__Host-muster_csrf="), "{cookie}");
    for attribute in ["Path=/", "Secure", "HttpOnly", "SameSite=Strict"] {
        assert!(cookie.split("; ").any(|a| a == attribute), "{attribute} in {cookie}");
    }
    let value = cookie.split(';').next().unwrap().to_string();
    let field = form.body().split("name=\"csrf\" value=\"").nth(1).and_then(|r| r.split('"').next()).unwrap();
    assert_eq!(value, format!("__Host-muster_csrf={field}"), "the field is the cookie's");
    (value, field.to_string())
}

async fn post_login(d: &common::Dashboard, cookie: &str, body: &str) -> common::Answer {
    let head = format!("POST /login HTTP/1.1\r\nContent-Type: application/x-www-form-urlencoded\r\n{cookie}");
    d.send(&head, body).await
}

#[tokio::test]
async fn signing_in_needs_the_forms_csrf_token_and_sets_a_secure_cookie() {
    let api = api_server(Mode::Healthy).await;
    let d = dashboard(&api, false, Limits::default()).await;
    let (cookie, field) = login_form(&d).await;
    let token = format!("token={GOOD_TOKEN}");
    for (why, cookie_header, body) in [
        ("no CSRF token at all", String::new(), token.clone()),
        ("the cookie but not the field", format!("Cookie: {cookie}"), token.clone()),
        ("the field but not the cookie (another site's form)", String::new(), format!("{token}&csrf={field}")),
        ("a field other than the cookie", format!("Cookie: {cookie}"), format!("{token}&csrf={}", "0".repeat(64))),
    ] {
        let answer = post_login(&d, &cookie_header, &body).await;
        assert_eq!(answer.status(), 403, "{why}: {answer:?}");
        assert!(!answer.headers("set-cookie").iter().any(|c| c.starts_with("__Host-muster_token")), "{why}");
    }
    assert_eq!(api.seen.token_reviews.load(Ordering::SeqCst), 0, "no token is checked without the CSRF token");

    let answer = post_login(&d, &format!("Cookie: {cookie}"), &format!("{token}&csrf={field}")).await;
    assert_eq!(answer.status(), 303, "{answer:?}");
    let set = answer.header("set-cookie").expect("the token's cookie");
    assert!(set.starts_with(&format!("__Host-muster_token={GOOD_TOKEN};")), "{set}");
    for attribute in ["Path=/", "Secure", "HttpOnly", "SameSite=Strict"] {
        assert!(set.split("; ").any(|a| a == attribute), "{attribute} in {set}");
    }
    let page = d.get("/", &format!("Cookie: __Host-muster_token={GOOD_TOKEN}")).await;
    assert_eq!(page.status(), 200, "{page:?}");
    assert!(page.body().contains("seen as system:serviceaccount:team:alice"), "{page:?}");
}

#[tokio::test]
async fn tokens_are_reviewed_for_the_dashboards_audience() {
    let api = api_server(Mode::Healthy).await;
    let d = dashboard(&api, false, Limits::default()).await;
    let ok = d.get("/api/plan", &format!("Authorization: Bearer {GOOD_TOKEN}")).await;
    assert_eq!(ok.status(), 200, "{ok:?}");
    assert_eq!(*api.seen.audiences.lock().unwrap(), [serde_json::json!(["muster-dashboard"])]);

    // The API server accepts the token, but not as meant for the dashboard.
    let api = api_server(Mode::OtherAudience).await;
    let d = dashboard(&api, false, Limits::default()).await;
    assert_eq!(d.get("/api/plan", &format!("Authorization: Bearer {GOOD_TOKEN}")).await.status(), 401);
}

#[tokio::test]
async fn a_repeated_bad_token_costs_one_token_review_within_the_ttl() {
    let api = api_server(Mode::Healthy).await;
    let d = dashboard(&api, false, limits(|l| l.refused_for = Duration::from_millis(1500))).await;
    for _ in 0..20 {
        let answer = d.get("/api/plan", "Authorization: Bearer not-a-token").await;
        assert_eq!(answer.status(), 401, "{answer:?}");
    }
    assert_eq!(api.seen.token_reviews.load(Ordering::SeqCst), 1, "one review for twenty requests");
    assert_eq!(d.get("/api/plan", "Authorization: Bearer another-bad-one").await.status(), 401);
    assert_eq!(api.seen.token_reviews.load(Ordering::SeqCst), 2, "another token is its own review");
    tokio::time::sleep(Duration::from_millis(1600)).await;
    assert_eq!(d.get("/api/plan", "Authorization: Bearer not-a-token").await.status(), 401);
    assert_eq!(api.seen.token_reviews.load(Ordering::SeqCst), 3, "reviewed again after the TTL");
}

#[tokio::test]
async fn too_many_token_checks_from_one_client_are_answered_429() {
    let api = api_server(Mode::Healthy).await;
    let d = dashboard(&api, false, limits(|l| (l.checks_burst, l.checks_every) = (3, Duration::from_secs(60)))).await;
    for i in 0..3 {
        assert_eq!(d.get("/api/plan", &format!("Authorization: Bearer bad-{i}")).await.status(), 401);
    }
    let limited = d.get("/api/plan", "Authorization: Bearer bad-3").await;
    assert_eq!(limited.status(), 429, "{limited:?}");
    let retry: u64 = limited.header("retry-after").and_then(|r| r.parse().ok()).expect("Retry-After");
    assert!((1..=60).contains(&retry), "{retry}");
    let (cookie, field) = login_form(&d).await;
    let login = post_login(&d, &format!("Cookie: {cookie}"), &format!("token=bad-4&csrf={field}")).await;
    assert_eq!(login.status(), 429, "the login form is limited too: {login:?}");
    assert_eq!(api.seen.token_reviews.load(Ordering::SeqCst), 3, "the limited ones cost no review");
    assert_eq!(
        d.get("/api/plan", "Authorization: Bearer bad-0").await.status(),
        401,
        "a token already refused is answered from memory, limit or not"
    );
}

#[tokio::test]
async fn the_api_servers_errors_are_not_shown_to_callers() {
    let api = api_server(Mode::Failing).await;
    let d = dashboard(&api, false, Limits::default()).await;
    let answer = d.get("/api/plan", "Authorization: Bearer some-token").await;
    assert_eq!(answer.status(), 503, "{answer:?}");
    assert!(!answer.0.contains("etcdserver") && !answer.0.contains(SECRET_ERROR), "{answer:?}");
    let (cookie, field) = login_form(&d).await;
    let login = post_login(&d, &format!("Cookie: {cookie}"), &format!("token=other-token&csrf={field}")).await;
    assert_eq!(login.status(), 503, "{login:?}");
    assert!(!login.0.contains("etcdserver"), "{login:?}");
}

/// Reads until the server closes the connection (or resets it); how long that took.
async fn closed_after(mut tcp: TcpStream, trickle: bool) -> Duration {
    let started = Instant::now();
    let mut buf = [0u8; 1024];
    loop {
        let read = tokio::time::timeout(Duration::from_millis(200), tcp.read(&mut buf)).await;
        match read {
            Ok(Ok(0) | Err(_)) => return started.elapsed(),
            Ok(Ok(_)) => {}
            Err(_) if started.elapsed() > Duration::from_secs(10) => panic!("still open after 10 s"),
            Err(_) if trickle => {
                // One more byte of a header that never ends.
                if tcp.write_all(b"X").await.is_err() {
                    return started.elapsed();
                }
            }
            Err(_) => {}
        }
    }
}

#[tokio::test]
async fn a_slow_loris_is_closed_within_the_header_timeout() {
    let api = api_server(Mode::Healthy).await;
    let d = dashboard(&api, true, limits(|l| l.header_timeout = Duration::from_secs(1))).await;
    let mut tcp = TcpStream::connect(d.addr).await.unwrap();
    tcp.write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\nX-Slow: ").await.unwrap();
    let took = closed_after(tcp, true).await;
    assert!(took < Duration::from_millis(2500), "closed after {took:?}, not within the 1 s timeout");
}

#[tokio::test]
async fn an_idle_connection_is_closed_and_the_connection_cap_holds() {
    let api = api_server(Mode::Healthy).await;
    let d = dashboard(
        &api,
        false,
        limits(|l| {
            l.idle_timeout = Duration::from_secs(1);
            l.max_connections = 2;
        }),
    )
    .await;
    // Two connections that never say anything (not even a TLS hello) take both places.
    let (a, b) = (TcpStream::connect(d.addr).await.unwrap(), TcpStream::connect(d.addr).await.unwrap());
    tokio::time::sleep(Duration::from_millis(100)).await;
    let third = TcpStream::connect(d.addr).await.unwrap();
    assert!(closed_after(third, false).await < Duration::from_millis(500), "one more is closed at once");
    let took = closed_after(a, false).await;
    assert!(took < Duration::from_millis(2500), "an idle connection is closed after {took:?}");
    drop(b);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(d.get("/healthz", "").await.status(), 200, "the places are free again");
}
