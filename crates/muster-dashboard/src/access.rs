//! Who may see what. On a loopback address the dashboard is open: only the machine's (or the
//! pod's) own users reach it, as through `kubectl port-forward`. Elsewhere every request carries
//! the caller's Kubernetes token (an `Authorization: Bearer` header, or the cookie the login form
//! sets); the API server says who that is (TokenReview, for the dashboard's audiences) and whether
//! they may list Groups in a namespace, Queues and Nodes (SubjectAccessReview). Nobody sees a
//! namespace they cannot read.
//!
//! What an unknown caller can make the API server do is bounded: a refused token is remembered
//! (by its hash) and costs no second review within a while, and each client address may have
//! only so many tokens checked at once, then one a period.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec, UserInfo};
use k8s_openapi::api::authorization::v1::{ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
use kube::Api;
use kube::api::PostParams;

use crate::Limits;
use crate::rate::RateLimit;
use crate::refused::{Refused, TokenHash, hash};
use crate::visible::{Namespaces, Viewer};

/// The audience a token must be meant for unless the controller is told others: a token made
/// with `kubectl create token ACCOUNT --audience muster-dashboard`, which the API server itself
/// does not take, so the dashboard cannot use a token it was given anywhere else.
pub const DEFAULT_AUDIENCE: &str = "muster-dashboard";
/// How long the API server's answers for one token are reused.
const REUSE: Duration = Duration::from_secs(30);
/// Tokens remembered at most (accepted, and refused each); beyond, the memory starts afresh.
const MAX_TOKENS: usize = 10_000;

/// Why a request may not see the dashboard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Denied {
    /// No token: the login form is the answer.
    NoToken,
    /// The API server does not accept the token (for the dashboard's audiences).
    NotAuthenticated,
    /// This client had too many tokens checked lately; the next check in this long.
    TooManyChecks(Duration),
    /// The reviews could not be made (what went wrong, for the log only).
    Unavailable(String),
}

/// The dashboard's rule for who sees what.
pub enum Access {
    /// Everything for everyone (loopback).
    Open,
    /// The caller's token, reviewed by the API server.
    Reviewed(Box<Reviewer>),
}

/// Reviews callers' tokens, remembering the answers.
pub struct Reviewer {
    client: kube::Client,
    audiences: Vec<String>,
    answers: Mutex<HashMap<TokenHash, Answers>>,
    refused: Refused,
    checks: RateLimit,
}

/// What the API server said about one token.
#[derive(Clone)]
struct Answers {
    at: Instant,
    user: UserInfo,
    all_namespaces: bool,
    queues: bool,
    nodes: bool,
    namespaces: BTreeMap<String, bool>,
}

impl Reviewer {
    /// Reviews tokens meant for `audiences` (none: the API server's own).
    pub fn new(client: kube::Client, audiences: Vec<String>, limits: &Limits) -> Self {
        Reviewer {
            client,
            audiences,
            answers: Mutex::new(HashMap::new()),
            refused: Refused::new(limits.refused_for, MAX_TOKENS),
            checks: RateLimit::new(limits.checks_burst, limits.checks_every),
        }
    }
}

impl Access {
    /// What the bearer of `token`, calling from `caller`, may see of groups in `namespaces`.
    pub async fn viewer(
        &self,
        token: Option<&str>,
        namespaces: &BTreeSet<String>,
        caller: IpAddr,
    ) -> Result<Viewer, Denied> {
        let r = match self {
            Access::Open => return Ok(Viewer::everything()),
            Access::Reviewed(reviewer) => reviewer,
        };
        let token = token.filter(|t| !t.is_empty()).ok_or(Denied::NoToken)?;
        let key = hash(token);
        let known = r.answers.lock().map_or(None, |a| a.get(&key).filter(|a| a.at.elapsed() < REUSE).cloned());
        let mut a = match known {
            Some(a) => a,
            None if r.refused.contains(&key) => return Err(Denied::NotAuthenticated),
            None => {
                r.checks.take(caller).map_err(Denied::TooManyChecks)?;
                match first_answers(&r.client, token, &r.audiences).await {
                    Err(Denied::NotAuthenticated) => {
                        r.refused.insert(key);
                        return Err(Denied::NotAuthenticated);
                    }
                    answers => answers?,
                }
            }
        };
        if !a.all_namespaces {
            for ns in namespaces {
                if !a.namespaces.contains_key(ns) {
                    let allowed = allowed(&r.client, &a.user, "muster.dev", "groups", Some(ns)).await?;
                    a.namespaces.insert(ns.clone(), allowed);
                }
            }
        }
        let viewer = Viewer {
            name: a.user.username.clone().unwrap_or_default(),
            namespaces: if a.all_namespaces {
                Namespaces::All
            } else {
                Namespaces::Only(a.namespaces.iter().filter(|(_, ok)| **ok).map(|(n, _)| n.clone()).collect())
            },
            queues: a.queues,
            nodes: a.nodes,
        };
        if let Ok(mut map) = r.answers.lock() {
            if map.len() >= MAX_TOKENS {
                map.clear();
            }
            map.insert(key, a);
        }
        Ok(viewer)
    }
}

/// Who the token's bearer is, and what they may list cluster-wide.
/// A token is accepted only if the API server says it is meant for one of `audiences` (when
/// any are asked for).
async fn first_answers(client: &kube::Client, token: &str, audiences: &[String]) -> Result<Answers, Denied> {
    let asked = (!audiences.is_empty()).then(|| audiences.to_vec());
    let review =
        TokenReview { spec: TokenReviewSpec { token: token.to_string(), audiences: asked }, ..TokenReview::default() };
    let reviewed = Api::<TokenReview>::all(client.clone())
        .create(&PostParams::default(), &review)
        .await
        .map_err(|e| Denied::Unavailable(format!("token review: {e}")))?;
    let status = reviewed.status.unwrap_or_default();
    let meant_for_us = audiences.is_empty()
        || status.audiences.as_ref().is_some_and(|said| said.iter().any(|a| audiences.contains(a)));
    let user = match (status.authenticated, status.user) {
        (Some(true), Some(user)) if meant_for_us => user,
        _ => return Err(Denied::NotAuthenticated),
    };
    Ok(Answers {
        at: Instant::now(),
        all_namespaces: allowed(client, &user, "muster.dev", "groups", None).await?,
        queues: allowed(client, &user, "muster.dev", "queues", None).await?,
        nodes: allowed(client, &user, "", "nodes", None).await?,
        namespaces: BTreeMap::new(),
        user,
    })
}

/// Whether `user` may list `group`/`resource` in `namespace` (everywhere when none).
async fn allowed(
    client: &kube::Client,
    user: &UserInfo,
    group: &str,
    resource: &str,
    namespace: Option<&str>,
) -> Result<bool, Denied> {
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: user.username.clone(),
            uid: user.uid.clone(),
            groups: user.groups.clone(),
            extra: user.extra.clone(),
            resource_attributes: Some(ResourceAttributes {
                verb: Some("list".into()),
                group: Some(group.into()),
                resource: Some(resource.into()),
                namespace: namespace.map(str::to_string),
                ..ResourceAttributes::default()
            }),
            non_resource_attributes: None,
        },
        ..SubjectAccessReview::default()
    };
    let answer = Api::<SubjectAccessReview>::all(client.clone())
        .create(&PostParams::default(), &review)
        .await
        .map_err(|e| Denied::Unavailable(format!("access review: {e}")))?;
    Ok(answer.status.is_some_and(|s| s.allowed))
}
