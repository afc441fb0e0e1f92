//! The routes: `/` the plan, `/groups/{namespace}/{name}` one group, `/api/plan` the plan as JSON,
//! `/login` a form for the token (off loopback), `/healthz`. A request with the header
//! `X-Muster-Fragment` gets the page's `<main>` only (the pages reload it).

use std::collections::BTreeSet;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{Form, Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::get;
use axum::{Json, Router};
use k8s_openapi::api::core::v1::Event;
use kube::Api;
use kube::api::ListParams;
use muster_queue::Plan;
use serde::Deserialize;
use tracing::{info, warn};

use crate::access::{Access, Denied};
use crate::page::{self, EventLine};
use crate::visible::Viewer;
use crate::{DashboardError, PlanWatch};

/// The cookie the login form sets, holding the caller's token.
const TOKEN_COOKIE: &str = "muster_token";
const FRAGMENT_HEADER: &str = "x-muster-fragment";

struct App {
    plan: PlanWatch,
    access: Access,
    client: kube::Client,
}

/// Serves the dashboard on `listener` until `shutdown` completes: open when it listens on
/// loopback, for reviewed tokens otherwise. `plan` is what the controller's leader publishes;
/// `client` makes the reviews and reads a group's events.
pub async fn serve(
    listener: tokio::net::TcpListener,
    plan: PlanWatch,
    client: kube::Client,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), DashboardError> {
    let addr: SocketAddr = listener.local_addr().map_err(DashboardError::Serve)?;
    let access = Access::for_address(addr, client.clone());
    let open = matches!(access, Access::Open);
    info!(%addr, open, "dashboard serving");
    let app = Router::new()
        .route("/", get(plan_page))
        .route("/groups/{namespace}/{name}", get(group_page))
        .route("/api/plan", get(plan_json))
        .route("/login", get(login_form).post(login))
        .route("/healthz", get(|| async { "ok" }))
        .with_state(Arc::new(App { plan, access, client }));
    axum::serve(listener, app).with_graceful_shutdown(shutdown).await.map_err(DashboardError::Serve)
}

/// The caller's token: a bearer header, else the login cookie.
fn token(headers: &HeaderMap) -> Option<String> {
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(|t| t.trim().to_string());
    bearer.or_else(|| {
        headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .find_map(|c| c.trim().strip_prefix(TOKEN_COOKIE)?.strip_prefix('=').map(str::to_string))
    })
}

/// The plan (none when this replica does not lead) and what the caller may see of it; an error
/// response for a caller who may see nothing (`html`: a page, else JSON's plain status).
async fn seen(app: &App, headers: &HeaderMap, html: bool) -> Result<Option<(Plan, Viewer)>, Response> {
    let plan = app.plan.borrow().clone();
    let namespaces: BTreeSet<String> =
        plan.iter().flat_map(|p| p.groups.iter().map(|g| g.key.namespace.clone())).collect();
    match app.access.viewer(token(headers).as_deref(), &namespaces).await {
        Ok(viewer) => Ok(plan.map(|p| (viewer.visible(&p), viewer))),
        Err(Denied::NoToken | Denied::NotAuthenticated) if html => Err(Redirect::to("/login").into_response()),
        Err(Denied::NoToken | Denied::NotAuthenticated) => {
            Err((StatusCode::UNAUTHORIZED, "a Kubernetes bearer token is needed (Authorization: Bearer TOKEN)\n")
                .into_response())
        }
        Err(Denied::Unavailable(why)) => {
            warn!(%why, "dashboard: cannot review a caller");
            Err((StatusCode::SERVICE_UNAVAILABLE, format!("cannot check access now: {why}\n")).into_response())
        }
    }
}

/// A page, or only its content when the page reloads itself.
fn respond(headers: &HeaderMap, title: &str, main: String) -> Response {
    if headers.contains_key(FRAGMENT_HEADER) {
        Html(main).into_response()
    } else {
        Html(page::document(title, &main)).into_response()
    }
}

async fn plan_page(State(app): State<Arc<App>>, headers: HeaderMap) -> Response {
    match seen(&app, &headers, true).await {
        Ok(Some((plan, viewer))) => respond(&headers, "muster: the plan", page::plan(&plan, &viewer)),
        Ok(None) => respond(&headers, "muster: the plan", page::no_plan()),
        Err(r) => r,
    }
}

async fn group_page(
    State(app): State<Arc<App>>,
    Path((namespace, name)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    let title = format!("muster: {namespace}/{name}");
    let (plan, viewer) = match seen(&app, &headers, true).await {
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

async fn plan_json(State(app): State<Arc<App>>, headers: HeaderMap) -> Response {
    match seen(&app, &headers, false).await {
        Ok(plan) => Json(plan.map(|(plan, _)| plan)).into_response(),
        Err(r) => r,
    }
}

const LOGIN: &str = "<h1>muster: the plan</h1><p>Sign in with a Kubernetes token \
    (<code>kubectl create token SERVICEACCOUNT</code>, or your kubeconfig's). You see the groups of the \
    namespaces where you may list Groups.</p><form method=\"post\" action=\"/login\">\
    <input type=\"password\" name=\"token\" size=\"60\" autocomplete=\"off\"> <button>Sign in</button></form>";

async fn login_form() -> Html<String> {
    Html(page::document("muster: sign in", LOGIN))
}

#[derive(Deserialize)]
struct LoginForm {
    token: String,
}

async fn login(State(app): State<Arc<App>>, Form(form): Form<LoginForm>) -> Response {
    let token = form.token.trim();
    match app.access.viewer(Some(token), &BTreeSet::new()).await {
        Ok(_) => {
            let cookie = format!("{TOKEN_COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict; Max-Age=3600");
            ([(header::SET_COOKIE, cookie)], Redirect::to("/")).into_response()
        }
        Err(Denied::Unavailable(why)) => {
            (StatusCode::SERVICE_UNAVAILABLE, format!("cannot check the token now: {why}\n")).into_response()
        }
        Err(_) => {
            let main = format!("{LOGIN}<p class=\"empty\">The API server does not accept that token.</p>");
            (StatusCode::UNAUTHORIZED, Html(page::document("muster: sign in", &main))).into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_comes_from_the_bearer_header_else_the_cookie() {
        let mut h = HeaderMap::new();
        assert_eq!(token(&h), None);
        h.insert(header::COOKIE, "a=1; muster_token=abc.def; b=2".parse().unwrap());
        assert_eq!(token(&h).as_deref(), Some("abc.def"));
        h.insert(header::AUTHORIZATION, "Bearer xyz".parse().unwrap());
        assert_eq!(token(&h).as_deref(), Some("xyz"));
        let mut h = HeaderMap::new();
        h.insert(header::COOKIE, "muster_tokenx=no".parse().unwrap());
        assert_eq!(token(&h), None, "only the cookie of that exact name");
    }
}
