//! Who may see what. On a loopback address the dashboard is open: only the machine's (or the
//! pod's) own users reach it, as through `kubectl port-forward`. Elsewhere every request carries
//! the caller's Kubernetes token (an `Authorization: Bearer` header, or the cookie the login form
//! sets); the API server says who that is (TokenReview) and whether they may list Groups in a
//! namespace, Queues and Nodes (SubjectAccessReview). Nobody sees a namespace they cannot read.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec, UserInfo};
use k8s_openapi::api::authorization::v1::{ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
use kube::Api;
use kube::api::PostParams;

use crate::visible::{Namespaces, Viewer};

/// How long the API server's answers for one token are reused.
const REUSE: Duration = Duration::from_secs(30);
/// Tokens remembered at most; beyond, the memory starts afresh.
const MAX_TOKENS: usize = 1000;

/// Why a request may not see the dashboard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Denied {
    /// No token: the login form is the answer.
    NoToken,
    /// The API server does not accept the token.
    NotAuthenticated,
    /// The reviews could not be made.
    Unavailable(String),
}

/// The dashboard's rule for who sees what.
pub enum Access {
    /// Everything for everyone (loopback).
    Open,
    /// The caller's token, reviewed by the API server.
    Reviewed { client: kube::Client, answers: Mutex<HashMap<String, Answers>> },
}

/// What the API server said about one token.
#[derive(Clone)]
pub struct Answers {
    at: Instant,
    user: UserInfo,
    all_namespaces: bool,
    queues: bool,
    nodes: bool,
    namespaces: BTreeMap<String, bool>,
}

impl Access {
    /// Open on a loopback address, reviewed anywhere else.
    pub fn for_address(addr: std::net::SocketAddr, client: kube::Client) -> Self {
        if addr.ip().is_loopback() {
            Access::Open
        } else {
            Access::Reviewed { client, answers: Mutex::new(HashMap::new()) }
        }
    }

    /// What the bearer of `token` may see, of groups in `namespaces`.
    pub async fn viewer(&self, token: Option<&str>, namespaces: &BTreeSet<String>) -> Result<Viewer, Denied> {
        let (client, answers) = match self {
            Access::Open => return Ok(Viewer::everything()),
            Access::Reviewed { client, answers } => (client, answers),
        };
        let token = token.filter(|t| !t.is_empty()).ok_or(Denied::NoToken)?;
        let known = answers.lock().map_or(None, |a| a.get(token).filter(|a| a.at.elapsed() < REUSE).cloned());
        let mut a = match known {
            Some(a) => a,
            None => first_answers(client, token).await?,
        };
        if !a.all_namespaces {
            for ns in namespaces {
                if !a.namespaces.contains_key(ns) {
                    let allowed = allowed(client, &a.user, "muster.dev", "groups", Some(ns)).await?;
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
        if let Ok(mut map) = answers.lock() {
            if map.len() >= MAX_TOKENS {
                map.clear();
            }
            map.insert(token.to_string(), a);
        }
        Ok(viewer)
    }
}

/// Who the token's bearer is, and what they may list cluster-wide.
async fn first_answers(client: &kube::Client, token: &str) -> Result<Answers, Denied> {
    let review =
        TokenReview { spec: TokenReviewSpec { token: token.to_string(), audiences: None }, ..TokenReview::default() };
    let reviewed = Api::<TokenReview>::all(client.clone())
        .create(&PostParams::default(), &review)
        .await
        .map_err(|e| Denied::Unavailable(format!("token review: {e}")))?;
    let status = reviewed.status.unwrap_or_default();
    let user = match (status.authenticated, status.user) {
        (Some(true), Some(user)) => user,
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
