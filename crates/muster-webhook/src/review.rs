//! One AdmissionReview in, one out: the glue between the HTTP server and the rules.

use k8s_openapi::jiff::Timestamp;
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview};
use kube::core::response::StatusSummary;

use crate::config::WebhookConfig;
use crate::mutate::mutate;
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

/// Answers the AdmissionReview in `body` (JSON). A body that is not a review gets an invalid
/// response; a refusal is a denial with HTTP code 403 and the rules' message.
pub async fn review<S: ClusterState>(
    hook: Hook,
    body: &[u8],
    config: &WebhookConfig,
    state: &S,
    now: Timestamp,
) -> AdmissionReview<DynamicObject> {
    let parsed: AdmissionReview<DynamicObject> = match serde_json::from_slice(body) {
        Ok(r) => r,
        Err(e) => return AdmissionResponse::invalid(format!("not an AdmissionReview: {e}")).into_review(),
    };
    let req: AdmissionRequest<DynamicObject> = match parsed.try_into() {
        Ok(r) => r,
        Err(_) => return AdmissionResponse::invalid("the AdmissionReview has no request").into_review(),
    };
    let allowed = AdmissionResponse::from(&req);
    let outcome = match hook {
        Hook::Mutate => mutate(&req, config, state, now).await.map(|patch| {
            if patch.0.is_empty() {
                allowed.clone()
            } else {
                tracing::debug!(uid = %req.uid, ops = patch.0.len(), "patched");
                allowed.clone().with_patch(patch).unwrap_or_else(|e| AdmissionResponse::invalid(e.to_string()))
            }
        }),
        Hook::Validate => validate(&req, config, state, now).await.map(|()| allowed.clone()),
    };
    match outcome {
        Ok(resp) => resp.into_review(),
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
            denied.into_review()
        }
    }
}
