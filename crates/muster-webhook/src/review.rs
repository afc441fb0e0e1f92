//! One AdmissionReview in, one out: the glue between the HTTP server and the rules.

use k8s_openapi::jiff::Timestamp;
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview};
use kube::core::response::StatusSummary;

use crate::config::WebhookConfig;
use crate::metrics::{NO_REVIEW, kind_label};
use crate::mutate::mutate;
use crate::object::one_namespace;
use crate::state::ClusterState;
use crate::validate::validate;

/// Which half of the webhook a review is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hook {
    /// `/mutate`: patches that hold managed work back for the queue.
    Mutate,
    /// `/validate`: refusals.
    Validate,
}

impl Hook {
    /// Its name in metrics.
    pub fn label(self) -> &'static str {
        match self {
            Hook::Mutate => "mutate",
            Hook::Validate => "validate",
        }
    }
}

/// How a review was answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Allowed,
    /// Refused by a rule (HTTP 403 in the review).
    Denied,
    /// The review could not be answered: a body that is no review, or a patch that did not encode.
    Error,
}

impl Verdict {
    /// Its name in metrics.
    pub fn label(self) -> &'static str {
        match self {
            Verdict::Allowed => "allowed",
            Verdict::Denied => "denied",
            Verdict::Error => "error",
        }
    }
}

/// A review's answer with what the metrics count of it.
pub(crate) struct Answer {
    pub review: AdmissionReview<DynamicObject>,
    /// The object's kind as the metrics label it ([`kind_label`]).
    pub kind: &'static str,
    pub verdict: Verdict,
}

impl Answer {
    fn error(message: impl ToString) -> Self {
        let review = AdmissionResponse::invalid(message).into_review();
        Answer { review, kind: NO_REVIEW, verdict: Verdict::Error }
    }
}

/// Answers the AdmissionReview in `body` (JSON). A body that is not a review gets an invalid
/// response; a refusal is a denial with HTTP code 403 and the rules' message.
pub async fn review<S: ClusterState>(
    hook: Hook,
    body: &[u8],
    config: &WebhookConfig,
    state: &S,
    now: Timestamp,
) -> AdmissionReview<DynamicObject> {
    answer(hook, body, config, state, now).await.review
}

/// [`review`], and what the metrics count of it.
pub(crate) async fn answer<S: ClusterState>(
    hook: Hook,
    body: &[u8],
    config: &WebhookConfig,
    state: &S,
    now: Timestamp,
) -> Answer {
    let parsed: AdmissionReview<DynamicObject> = match serde_json::from_slice(body) {
        Ok(r) => r,
        Err(e) => return Answer::error(format!("not an AdmissionReview: {e}")),
    };
    let req: AdmissionRequest<DynamicObject> = match parsed.try_into() {
        Ok(r) => r,
        Err(_) => return Answer::error("the AdmissionReview has no request"),
    };
    let kind = kind_label(&req.kind.group, &req.kind.kind);
    let allowed = AdmissionResponse::from(&req);
    let outcome = match one_namespace(&req).map(|()| hook) {
        Err(refusal) => Err(refusal),
        Ok(Hook::Mutate) => mutate(&req, config, state, now).await.map(|patch| {
            if patch.0.is_empty() {
                (allowed.clone(), Verdict::Allowed)
            } else {
                tracing::debug!(uid = %req.uid, ops = patch.0.len(), "patched");
                match allowed.clone().with_patch(patch) {
                    Ok(resp) => (resp, Verdict::Allowed),
                    Err(e) => (AdmissionResponse::invalid(e.to_string()), Verdict::Error),
                }
            }
        }),
        Ok(Hook::Validate) => validate(&req, config, state, now).await.map(|()| (allowed.clone(), Verdict::Allowed)),
    };
    match outcome {
        Ok((resp, verdict)) => Answer { review: resp.into_review(), kind, verdict },
        Err(refusal) => {
            tracing::info!(
                uid = %req.uid,
                user = req.user_info.username.as_deref().unwrap_or(""),
                kind = %req.kind.kind,
                namespace = req.namespace.as_deref().unwrap_or(""),
                name = %req.name,
                reason = %refusal,
                "refused"
            );
            let mut denied = allowed.deny(refusal.to_string());
            denied.result.code = 403;
            denied.result.reason = "Forbidden".into();
            denied.result.status = Some(StatusSummary::Failure);
            Answer { review: denied.into_review(), kind, verdict: Verdict::Denied }
        }
    }
}
