//! `/metrics` behind Kubernetes authentication and authorization (`--metrics-auth`), as
//! kube-rbac-proxy and controller-runtime's secure metrics do it: the caller's bearer token is
//! reviewed by the API server (TokenReview), and the user it names must be allowed `get` on the
//! non-resource URL `/metrics` (SubjectAccessReview). `/healthz` stays open (probes carry no
//! token). An answer is remembered for a minute under the token's SHA-256 (never the token), so a
//! scraper costs the API server two reviews a minute; what the API server says when a review
//! fails is logged, and the caller gets fixed words.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
use kube::Api;
use kube::api::PostParams;

/// How long an answer about a token is reused.
const REUSE: Duration = Duration::from_secs(60);
/// Answers remembered at most (all are forgotten when full).
const MAX_REMEMBERED: usize = 10_000;

/// What the API server said of a token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Allowed,
    /// No user: an unknown, expired or revoked token.
    Unauthenticated,
    /// A user without `get` on `/metrics`.
    Forbidden,
}

/// The reviews of callers' tokens, and the answers of the last minute.
pub struct MetricsAuth {
    client: kube::Client,
    answers: Mutex<HashMap<[u8; 32], (Verdict, Instant)>>,
}

impl MetricsAuth {
    pub fn new(client: kube::Client) -> Arc<MetricsAuth> {
        Arc::new(MetricsAuth { client, answers: Mutex::new(HashMap::new()) })
    }

    /// What the API server says of `token`; an error when it cannot be asked.
    pub async fn verdict(&self, token: &str) -> Result<Verdict, kube::Error> {
        let key: [u8; 32] = ring::digest::digest(&ring::digest::SHA256, token.as_bytes())
            .as_ref()
            .try_into()
            .expect("SHA-256 is 32 bytes");
        let known = self.answers.lock().unwrap_or_else(PoisonError::into_inner).get(&key).copied();
        if let Some((verdict, at)) = known
            && at.elapsed() < REUSE
        {
            return Ok(verdict);
        }
        let verdict = self.review(token).await?;
        let mut answers = self.answers.lock().unwrap_or_else(PoisonError::into_inner);
        if answers.len() >= MAX_REMEMBERED {
            answers.clear();
        }
        answers.insert(key, (verdict, Instant::now()));
        Ok(verdict)
    }

    async fn review(&self, token: &str) -> Result<Verdict, kube::Error> {
        let review = TokenReview {
            spec: TokenReviewSpec { token: token.to_string(), ..Default::default() },
            ..Default::default()
        };
        let status = Api::<TokenReview>::all(self.client.clone())
            .create(&PostParams::default(), &review)
            .await?
            .status
            .unwrap_or_default();
        let user = match (status.authenticated, status.user) {
            (Some(true), Some(user)) => user,
            _ => return Ok(Verdict::Unauthenticated),
        };
        let access = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: user.username,
                uid: user.uid,
                groups: user.groups,
                extra: user.extra,
                non_resource_attributes: Some(NonResourceAttributes {
                    path: Some("/metrics".into()),
                    verb: Some("get".into()),
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        let answer =
            Api::<SubjectAccessReview>::all(self.client.clone()).create(&PostParams::default(), &access).await?;
        let allowed = answer.status.is_some_and(|s| s.allowed);
        Ok(if allowed { Verdict::Allowed } else { Verdict::Forbidden })
    }
}

/// The middleware in front of `/metrics`.
pub async fn require(State(auth): State<Arc<MetricsAuth>>, request: Request, next: Next) -> Response {
    let Some(token) = bearer(request.headers()) else {
        return unauthorized();
    };
    match auth.verdict(token).await {
        Ok(Verdict::Allowed) => next.run(request).await,
        Ok(Verdict::Unauthenticated) => unauthorized(),
        Ok(Verdict::Forbidden) => {
            (StatusCode::FORBIDDEN, "forbidden: get on the non-resource URL /metrics is needed\n").into_response()
        }
        Err(e) => {
            tracing::warn!(error = %e, "cannot review a /metrics caller's token");
            (StatusCode::SERVICE_UNAVAILABLE, "cannot check access now\n").into_response()
        }
    }
}

fn unauthorized() -> Response {
    (StatusCode::UNAUTHORIZED, [(header::WWW_AUTHENTICATE, "Bearer")], "a Kubernetes bearer token is needed\n")
        .into_response()
}

/// The token of an `Authorization: Bearer` header.
fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    #[test]
    fn only_a_bearer_token_counts() {
        let with = |v: &str| {
            let mut h = HeaderMap::new();
            h.insert(header::AUTHORIZATION, HeaderValue::from_str(v).unwrap());
            h
        };
        assert_eq!(bearer(&with("Bearer abc.def")), Some("abc.def"));
        assert_eq!(bearer(&with("bearer  abc ")), Some("abc"));
        assert_eq!(bearer(&with("Basic dXNlcjpwdw==")), None);
        assert_eq!(bearer(&with("Bearer ")), None);
        assert_eq!(bearer(&HeaderMap::new()), None);
    }
}
