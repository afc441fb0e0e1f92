//! What every request and response passes through: the Host check on loopback (against DNS
//! rebinding), a deadline for the whole request, and the security headers.

use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// Only this origin's files; no inline script or style, no framing, forms post here only.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
    img-src 'self'; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

/// Adds the security headers to every response, and `Cache-Control: no-store` to those that set
/// no caching of their own (the pages show what one viewer may see).
pub async fn security_headers(req: Request, next: Next) -> Response {
    let mut response = next.run(req).await;
    let h = response.headers_mut();
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CONTENT_SECURITY_POLICY));
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    h.entry(header::CACHE_CONTROL).or_insert(HeaderValue::from_static("no-store"));
    response
}

/// On loopback the dashboard is open, so a web page that rebinds its own name to 127.0.0.1
/// could read it through the browser (and through a user's `kubectl port-forward`): only a
/// request naming a loopback host is answered.
pub async fn loopback_host(req: Request, next: Next) -> Response {
    let host = req.headers().get(header::HOST).and_then(|h| h.to_str().ok());
    if host.is_some_and(names_loopback) {
        return next.run(req).await;
    }
    let message = "this dashboard listens on loopback and answers only requests for localhost, 127.0.0.1 or [::1] \
                   (open http://localhost:PORT/)\n";
    (StatusCode::FORBIDDEN, message).into_response()
}

/// Whether a Host header is `localhost`, `127.0.0.1` or `[::1]`, with or without a port (a
/// port-forward may use another local port than the dashboard's).
pub fn names_loopback(host: &str) -> bool {
    // The name ends at the port's colon, or after the bracket of an IPv6 address.
    let end =
        if host.starts_with('[') { host.find(']').map(|i| i + 1) } else { Some(host.find(':').unwrap_or(host.len())) };
    let Some((name, port)) = end.map(|i| host.split_at(i)) else { return false };
    let port_ok = port.is_empty()
        || port
            .strip_prefix(':')
            .is_some_and(|p| !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit()));
    port_ok && matches!(name.to_ascii_lowercase().as_str(), "localhost" | "127.0.0.1" | "[::1]")
}

/// Answers 503 when a request (its body, the reviews it needs) takes longer than the limit, so a
/// slow caller or API server holds no connection for long.
pub async fn deadline(State(limit): State<Duration>, req: Request, next: Next) -> Response {
    match tokio::time::timeout(limit, next.run(req)).await {
        Ok(response) => response,
        Err(_) => (StatusCode::SERVICE_UNAVAILABLE, format!("no answer within {} s; try again\n", limit.as_secs()))
            .into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_names_pass_with_any_port_or_none() {
        for ok in
            ["localhost", "localhost:8081", "LOCALHOST:9000", "127.0.0.1:8081", "127.0.0.1", "[::1]:8081", "[::1]"]
        {
            assert!(names_loopback(ok), "{ok}");
        }
        for bad in [
            "evil.example:8081",
            "localhost.evil.example:8081",
            "127.0.0.1.nip.io:8081",
            "127.0.0.2:8081",
            "[::1]x",
            "localhost:",
            "localhost:80a",
            "[::1",
            "",
        ] {
            assert!(!names_loopback(bad), "{bad}");
        }
    }
}
