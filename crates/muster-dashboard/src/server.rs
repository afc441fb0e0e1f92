//! The routes: `/` the plan, `/groups/{namespace}/{name}` one group, `/api/plan` the plan as JSON,
//! `/login` a form for the token (off loopback), `/assets/…` the style and script, `/healthz`. A
//! request with the header `X-Muster-Fragment` gets the page's `<main>` only (the pages reload
//! it). Off loopback the dashboard speaks HTTPS only; on loopback it answers only requests that
//! name a loopback host.

use std::collections::BTreeSet;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{ConnectInfo, DefaultBodyLimit, Form, Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware;
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::get;
use axum::{Json, Router};
use axum_server::tls_rustls::{RustlsAcceptor, RustlsConfig};
use hyper_util::rt::TokioTimer;
use k8s_openapi::api::core::v1::Event;
use kube::Api;
use kube::api::ListParams;
use muster_queue::Plan;
use muster_webhook::{Pem, TlsFiles, server_config};
use serde::Deserialize;
use tracing::{info, warn};

use crate::access::{Access, Denied, Reviewer};
use crate::conn::ConnectionGuard;
use crate::page::{self, EventLine};
use crate::visible::Viewer;
use crate::{DashboardError, Limits, PlanWatch, assets, cookies, csrf, guard};

const FRAGMENT_HEADER: &str = "x-muster-fragment";
/// How long the token's cookie lasts (the token may expire sooner; then the login form again).
const TOKEN_COOKIE_SECONDS: u32 = 3600;
/// No request of the dashboard has a body beyond the login form's token.
const MAX_BODY_BYTES: usize = 16 << 10;

/// The serving certificate chain and its private key.
#[derive(Debug, Clone)]
pub enum Certificate {
    /// PEM files, re-read when they change.
    Files { cert_file: PathBuf, key_file: PathBuf },
    /// PEM text, served anew whenever a new pair is sent (the certificate muster makes, keeps in
    /// a Secret and renews); `from` names it in errors.
    Pem { pair: tokio::sync::watch::Receiver<PemPair>, from: String },
}

/// A certificate chain and its private key, PEM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PemPair {
    pub cert: String,
    pub key: String,
}

impl PemPair {
    fn config(&self, from: &str) -> Result<Arc<rustls::ServerConfig>, DashboardError> {
        let pem = |text: &String, what: &str| Pem { text: text.clone().into_bytes(), from: format!("{from}: {what}") };
        server_config(&pem(&self.cert, "certificate"), &pem(&self.key, "key"), &http1_alpn())
            .map_err(DashboardError::Certificate)
    }
}

/// The one protocol offered over TLS: HTTP/1.1, whose header timeout bounds a slow request head.
fn http1_alpn() -> Vec<Vec<u8>> {
    vec![b"http/1.1".to_vec()]
}

/// Serves each new pair sent on `pair`; one that does not load keeps the old one serving.
async fn reload_on_send(mut pair: tokio::sync::watch::Receiver<PemPair>, from: String, tls: RustlsConfig) {
    while pair.changed().await.is_ok() {
        let next = pair.borrow_and_update().clone();
        match next.config(&from) {
            Ok(config) => {
                tls.reload_from_config(config);
                info!(%from, "dashboard certificate reloaded");
            }
            Err(e) => warn!(error = %e, "the dashboard's new certificate does not load; keeping the old one"),
        }
    }
}

/// How the dashboard serves.
#[derive(Debug, Clone, Default)]
pub struct ServeOptions {
    /// HTTPS with this certificate; without one, plain HTTP, which only a loopback address gets.
    pub certificate: Option<Certificate>,
    /// The audiences a caller's token must be meant for (TokenReview); none: the API server's.
    pub audiences: Vec<String>,
    pub limits: Limits,
}

struct App {
    plan: PlanWatch,
    access: Access,
    client: kube::Client,
    /// The audience the login form tells people to make their token for.
    audience: Option<String>,
}

/// Serves the dashboard on `listener` until `shutdown` completes: open when it listens on
/// loopback, for reviewed tokens over HTTPS otherwise. `plan` is what the controller's leader
/// publishes; `client` makes the reviews and reads a group's events.
pub async fn serve(
    listener: std::net::TcpListener,
    plan: PlanWatch,
    client: kube::Client,
    options: ServeOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), DashboardError> {
    let addr: SocketAddr = listener.local_addr().map_err(DashboardError::Serve)?;
    let open = addr.ip().is_loopback();
    if !open && options.certificate.is_none() {
        return Err(DashboardError::NeedsTls(addr));
    }
    listener.set_nonblocking(true).map_err(DashboardError::Serve)?;
    let limits = options.limits.clone();
    let access = if open {
        Access::Open
    } else {
        Access::Reviewed(Box::new(Reviewer::new(client.clone(), options.audiences.clone(), &limits)))
    };
    let app = App { plan, access, client, audience: options.audiences.first().cloned() };
    let routes = routes(app, open, &limits).into_make_service_with_connect_info::<SocketAddr>();

    let handle = axum_server::Handle::new();
    let stopper = handle.clone();
    let stop = tokio::spawn(async move {
        shutdown.await;
        stopper.graceful_shutdown(Some(Duration::from_secs(5)));
    });
    // HTTP/1.1 only: its header timeout bounds both a slow request head and an idle keep-alive.
    let mut server = axum_server::from_tcp(listener).map_err(DashboardError::Serve)?.handle(handle).http1_only();
    server.http_builder().http1().timer(TokioTimer::new()).header_read_timeout(limits.header_timeout);
    let guard = ConnectionGuard::new(limits.max_connections, limits.idle_timeout);
    info!(%addr, open, https = options.certificate.is_some(), "dashboard serving");
    // kube's client and anything else in the process that asks rustls for its default provider
    // gets ring; an error only means one is installed already.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let result = match &options.certificate {
        Some(Certificate::Files { cert_file, key_file }) => {
            let files = TlsFiles { cert: cert_file.clone(), key: key_file.clone(), alpn: http1_alpn() };
            let tls = RustlsConfig::from_config(files.load().map_err(DashboardError::Certificate)?);
            let reload = tokio::spawn(files.reload_on_change(tls.clone()));
            let acceptor = RustlsAcceptor::new(tls).handshake_timeout(limits.header_timeout).acceptor(guard);
            let served = server.acceptor(acceptor).serve(routes).await;
            reload.abort();
            served
        }
        Some(Certificate::Pem { pair, from }) => {
            let tls = RustlsConfig::from_config(pair.borrow().config(from)?);
            let reload = tokio::spawn(reload_on_send(pair.clone(), from.clone(), tls.clone()));
            let acceptor = RustlsAcceptor::new(tls).handshake_timeout(limits.header_timeout).acceptor(guard);
            let served = server.acceptor(acceptor).serve(routes).await;
            reload.abort();
            served
        }
        None => server.acceptor(guard).serve(routes).await,
    };
    stop.abort();
    result.map_err(DashboardError::Serve)
}

fn routes(app: App, open: bool, limits: &Limits) -> Router {
    let router = Router::new()
        .route("/", get(plan_page))
        .route("/groups/{namespace}/{name}", get(group_page))
        .route("/api/plan", get(plan_json))
        .route("/login", get(login_form).post(login))
        .route("/healthz", get(|| async { "ok" }))
        .route(assets::STYLE_PATH, get(assets::style))
        .route(assets::SCRIPT_PATH, get(assets::script_file))
        .with_state(Arc::new(app))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(middleware::from_fn_with_state(limits.request_timeout, guard::deadline));
    let router = if open { router.layer(middleware::from_fn(guard::loopback_host)) } else { router };
    router.layer(middleware::from_fn(guard::security_headers))
}

/// The caller's token: a bearer header, else the login cookie.
fn token(headers: &HeaderMap) -> Option<String> {
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(|t| t.trim().to_string());
    bearer.or_else(|| cookies::get(headers, cookies::TOKEN))
}

/// The plan (none when this replica does not lead) and what the caller may see of it; an error
/// response for a caller who may see nothing (`html`: a page, else JSON's plain status).
async fn seen(app: &App, headers: &HeaderMap, caller: IpAddr, html: bool) -> Result<Option<(Plan, Viewer)>, Response> {
    let plan = app.plan.borrow().clone();
    let namespaces: BTreeSet<String> =
        plan.iter().flat_map(|p| p.groups.iter().map(|g| g.key.namespace.to_string())).collect();
    match app.access.viewer(token(headers).as_deref(), &namespaces, caller).await {
        Ok(viewer) => Ok(plan.map(|p| (viewer.visible(&p), viewer))),
        Err(Denied::NoToken | Denied::NotAuthenticated) if html => Err(Redirect::to("/login").into_response()),
        Err(Denied::NoToken | Denied::NotAuthenticated) => Err((
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer")],
            "a Kubernetes bearer token is needed (Authorization: Bearer TOKEN)\n",
        )
            .into_response()),
        Err(denied) => Err(refusal(denied)),
    }
}

/// The answer to a caller the reviews could not be made for. What the API server said stays in
/// the log: the caller is not known yet.
fn refusal(denied: Denied) -> Response {
    match denied {
        Denied::TooManyChecks(wait) => {
            let seconds = wait.as_secs_f64().ceil().max(1.0) as u64;
            let message = format!("too many token checks from this address; try again in {seconds} s\n");
            (StatusCode::TOO_MANY_REQUESTS, [(header::RETRY_AFTER, seconds.to_string())], message).into_response()
        }
        Denied::Unavailable(why) => {
            warn!(%why, "dashboard: cannot review a caller");
            (StatusCode::SERVICE_UNAVAILABLE, "cannot check access now; try again shortly\n").into_response()
        }
        Denied::NoToken | Denied::NotAuthenticated => {
            (StatusCode::UNAUTHORIZED, "the API server does not accept that token\n").into_response()
        }
    }
}

/// A page, or only its content when the page reloads itself.
fn respond(headers: &HeaderMap, title: &str, main: String) -> Response {
    if headers.contains_key(FRAGMENT_HEADER) {
        Html(main).into_response()
    } else {
        Html(page::document(title, &main, true)).into_response()
    }
}

async fn plan_page(
    State(app): State<Arc<App>>,
    ConnectInfo(caller): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
) -> Response {
    match seen(&app, &headers, caller.ip(), true).await {
        Ok(Some((plan, viewer))) => respond(&headers, "muster: the plan", page::plan(&plan, &viewer)),
        Ok(None) => respond(&headers, "muster: the plan", page::no_plan()),
        Err(r) => r,
    }
}

async fn group_page(
    State(app): State<Arc<App>>,
    Path((namespace, name)): Path<(String, String)>,
    ConnectInfo(caller): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
) -> Response {
    let title = format!("muster: {namespace}/{name}");
    let (plan, viewer) = match seen(&app, &headers, caller.ip(), true).await {
        Ok(Some(seen)) => seen,
        Ok(None) => return respond(&headers, &title, page::no_plan()),
        Err(r) => return r,
    };
    if !viewer.namespaces.contains(&namespace) {
        return (StatusCode::NOT_FOUND, respond(&headers, &title, not_found(&namespace, &name))).into_response();
    }
    let events = events(&app.client, &namespace, &name).await;
    match page::group(&plan, &namespace, &name, &events) {
        Some(main) => respond(&headers, &title, main),
        None => (StatusCode::NOT_FOUND, respond(&headers, &title, not_found(&namespace, &name))).into_response(),
    }
}

fn not_found(namespace: &str, name: &str) -> String {
    format!(
        "<p><a href=\"/\">the plan</a></p><p class=\"empty\">No group {}/{} runs or waits (it may have ended).</p>",
        crate::format::esc(namespace),
        crate::format::esc(name)
    )
}

/// Events of the objects named `name` in `namespace` (the Group and its workload), oldest first;
/// none when they cannot be read.
async fn events(client: &kube::Client, namespace: &str, name: &str) -> Vec<EventLine> {
    let api: Api<Event> = Api::namespaced(client.clone(), namespace);
    let params = ListParams::default().fields(&format!("involvedObject.name={name}"));
    let mut listed = match api.list(&params).await {
        Ok(list) => list.items,
        Err(e) => {
            warn!(error = %e, "dashboard: cannot list events");
            return Vec::new();
        }
    };
    let when = |e: &Event| {
        e.last_timestamp
            .as_ref()
            .map(|t| t.0)
            .or(e.event_time.as_ref().map(|t| t.0))
            .or(e.first_timestamp.as_ref().map(|t| t.0))
    };
    listed.sort_by_key(|e| when(e));
    listed
        .iter()
        .map(|e| EventLine {
            time: when(e).map(|t| t.strftime("%Y-%m-%d %H:%M:%S UTC").to_string()).unwrap_or_default(),
            kind: e.type_.clone().unwrap_or_default(),
            reason: e.reason.clone().unwrap_or_default(),
            message: format!(
                "{} {}: {}",
                e.involved_object.kind.clone().unwrap_or_default(),
                name,
                e.message.clone().unwrap_or_default()
            ),
        })
        .collect()
}

async fn plan_json(
    State(app): State<Arc<App>>,
    ConnectInfo(caller): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
) -> Response {
    match seen(&app, &headers, caller.ip(), false).await {
        Ok(plan) => Json(plan.map(|(plan, _)| plan)).into_response(),
        Err(r) => r,
    }
}

/// The sign-in page: the form with its CSRF token, and why the last attempt failed.
fn login_page(audience: Option<&str>, csrf: &str, failed: Option<&str>) -> String {
    let create = match audience {
        Some(a) => format!("kubectl create token SERVICEACCOUNT --audience {}", crate::format::esc(a)),
        None => "kubectl create token SERVICEACCOUNT".into(),
    };
    let failed = failed.map(|f| format!("<p class=\"empty\">{}</p>", crate::format::esc(f))).unwrap_or_default();
    let main = format!(
        "<h1>muster: the plan</h1><p>Sign in with a Kubernetes token (<code>{create}</code>). You see the groups of \
         the namespaces where you may list Groups.</p><form method=\"post\" action=\"/login\">\
         <input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">\
         <input type=\"password\" name=\"token\" size=\"60\" autocomplete=\"off\"> <button>Sign in</button></form>{failed}"
    );
    page::document("muster: sign in", &main, false)
}

/// The CSRF token of the browser's cookie when it has a well-formed one (several open forms
/// then agree), else a new one.
fn csrf_token(headers: &HeaderMap) -> Option<String> {
    cookies::get(headers, cookies::CSRF)
        .filter(|t| t.len() == 64 && t.bytes().all(|b| b.is_ascii_hexdigit()))
        .or_else(csrf::new_token)
}

fn login_response(status: StatusCode, app: &App, headers: &HeaderMap, failed: Option<&str>) -> Response {
    let Some(csrf) = csrf_token(headers) else {
        return (StatusCode::SERVICE_UNAVAILABLE, "no randomness for the sign-in form; try again\n").into_response();
    };
    let cookie = cookies::set(cookies::CSRF, &csrf, TOKEN_COOKIE_SECONDS);
    (status, [(header::SET_COOKIE, cookie)], Html(login_page(app.audience.as_deref(), &csrf, failed))).into_response()
}

async fn login_form(State(app): State<Arc<App>>, headers: HeaderMap) -> Response {
    login_response(StatusCode::OK, &app, &headers, None)
}

#[derive(Deserialize)]
struct LoginForm {
    #[serde(default)]
    token: String,
    #[serde(default)]
    csrf: String,
}

async fn login(
    State(app): State<Arc<App>>,
    ConnectInfo(caller): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Form(form): Form<LoginForm>,
) -> Response {
    if !csrf::matches(cookies::get(&headers, cookies::CSRF).as_deref(), &form.csrf) {
        let failed = "The sign-in form had expired or came from another site; sign in again here.";
        return login_response(StatusCode::FORBIDDEN, &app, &headers, Some(failed));
    }
    let token = form.token.trim();
    // Anything else cannot be a token, and could add attributes to the cookie.
    let reviewed = if cookies::is_cookie_safe(token) {
        app.access.viewer(Some(token), &BTreeSet::new(), caller.ip()).await
    } else {
        Err(Denied::NotAuthenticated)
    };
    match reviewed {
        Ok(_) => {
            let cookie = cookies::set(cookies::TOKEN, token, TOKEN_COOKIE_SECONDS);
            ([(header::SET_COOKIE, cookie)], Redirect::to("/")).into_response()
        }
        Err(Denied::NoToken | Denied::NotAuthenticated) => {
            let failed = "The API server does not accept that token for this dashboard.";
            login_response(StatusCode::UNAUTHORIZED, &app, &headers, Some(failed))
        }
        Err(denied) => refusal(denied),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_comes_from_the_bearer_header_else_the_cookie() {
        let mut h = HeaderMap::new();
        assert_eq!(token(&h), None);
        h.insert(header::COOKIE, "a=1; __Host-muster_token=abc.def; b=2".parse().unwrap());
        assert_eq!(token(&h).as_deref(), Some("abc.def"));
        h.insert(header::AUTHORIZATION, "Bearer xyz".parse().unwrap());
        assert_eq!(token(&h).as_deref(), Some("xyz"));
    }
}
