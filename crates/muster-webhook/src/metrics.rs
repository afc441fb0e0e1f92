//! The webhook's Prometheus metrics: reviews answered, by hook, kind and result, and how long
//! each took. The server owns one [`Metrics`] and serves it on `/metrics` (OpenMetrics text).
//!
//! Every label takes one of a fixed set of values, whatever the reviews say: a review's kind is
//! what its sender claims, and a label per claimed kind would grow without bound (memory, and
//! the size of `/metrics`) under reviews forged by anyone who can reach the port.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};

use muster_k8s::workload::{HELD_KINDS, HOLDERS};

use crate::review::{Hook, Verdict};

/// The content type of the OpenMetrics text format, which Prometheus scrapes as is.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    hook: &'static str,
    kind: &'static str,
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HookLabels {
    hook: &'static str,
}

/// 0.5 ms .. 4 s: a review is answered from watch caches, so milliseconds; seconds mean trouble
/// (the apiserver's timeout is 10 s).
fn duration_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.0005, 2.0, 14))
}

#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    duration: Family<HookLabels, Histogram, fn() -> Histogram>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("muster_webhook");
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register("requests", "Admission reviews answered", requests.clone());
        let duration: Family<HookLabels, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(duration_histogram);
        registry.register_with_unit("request_duration", "Time to answer one review", Unit::Seconds, duration.clone());
        Metrics { registry, requests, duration }
    }

    /// Counts one answered review. `kind` is a `kind_label` value.
    pub fn review(&self, hook: Hook, kind: &'static str, verdict: Verdict, took: Duration) {
        let labels = RequestLabels { hook: hook.label(), kind, result: verdict.label() };
        self.requests.get_or_create(&labels).inc();
        self.duration.get_or_create(&HookLabels { hook: hook.label() }).observe(took.as_secs_f64());
    }

    /// The registry in the OpenMetrics text format.
    pub fn encode(&self) -> Result<String, std::fmt::Error> {
        let mut out = String::new();
        encode(&mut out, &self.registry)?;
        Ok(out)
    }
}

/// The `kind` label of a body that held no review.
pub const NO_REVIEW: &str = "unknown";
/// The `kind` label of a kind the registration never sends (only a forged review names one).
pub const OTHER_KIND: &str = "other";

/// The `kind` label of a review of `group`/`kind`: the kind's name for the kinds the registration
/// sends (the held kinds, TrainJobs, LeaderWorkerSets, Pods and Groups), [`OTHER_KIND`] for any
/// other.
pub fn kind_label(group: &str, kind: &str) -> &'static str {
    let mut sent = HELD_KINDS.iter().chain(&HOLDERS).map(|k| (k.group, k.kind)).chain([
        ("", "Pod"),
        (muster_k8s::lws::API_GROUP, "LeaderWorkerSet"),
        (muster_k8s::API_GROUP, "Group"),
    ]);
    sent.find(|&(g, k)| (g, k) == (group, kind)).map_or(OTHER_KIND, |(_, k)| k)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_encode_a_counted_review_with_its_labels() {
        let m = Metrics::new();
        m.review(Hook::Validate, kind_label("batch", "Job"), Verdict::Denied, Duration::from_millis(3));
        m.review(Hook::Validate, kind_label("batch", "Job"), Verdict::Denied, Duration::from_millis(3));
        m.review(Hook::Mutate, NO_REVIEW, Verdict::Error, Duration::from_millis(1));
        let text = m.encode().unwrap();
        assert!(
            text.contains(r#"muster_webhook_requests_total{hook="validate",kind="Job",result="denied"} 2"#),
            "{text}"
        );
        assert!(text.contains(r#"muster_webhook_requests_total{hook="mutate",kind="unknown",result="error"} 1"#));
        assert!(text.contains(r#"muster_webhook_request_duration_seconds_count{hook="validate"} 2"#), "{text}");
    }

    #[test]
    fn metrics_kind_labels_are_the_kinds_sent_and_other() {
        assert_eq!(kind_label("", "Pod"), "Pod");
        assert_eq!(kind_label("jobset.x-k8s.io", "JobSet"), "JobSet");
        assert_eq!(kind_label("muster.dev", "Group"), "Group");
        // A kind by another group's name, or a made-up one, is one bucket.
        assert_eq!(kind_label("evil.example", "Job"), OTHER_KIND);
        assert_eq!(kind_label("", "Kind-7f3a"), OTHER_KIND);
    }
}
