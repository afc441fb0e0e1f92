//! The webhook's Prometheus metrics: reviews answered, by hook, kind and result, and how long
//! each took. The server owns one [`Metrics`] and serves it on `/metrics` (OpenMetrics text).

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};

use crate::review::{Hook, Verdict};

/// The content type of the OpenMetrics text format, which Prometheus scrapes as is.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    hook: &'static str,
    kind: String,
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

    /// Counts one answered review. `kind` is the object's kind ("" when the body was no review).
    pub fn review(&self, hook: Hook, kind: &str, verdict: Verdict, took: Duration) {
        let kind = if kind.is_empty() { "unknown" } else { kind };
        let labels = RequestLabels { hook: hook.label(), kind: kind.to_string(), result: verdict.label() };
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_encode_a_counted_review_with_its_labels() {
        let m = Metrics::new();
        m.review(Hook::Validate, "Job", Verdict::Denied, Duration::from_millis(3));
        m.review(Hook::Validate, "Job", Verdict::Denied, Duration::from_millis(3));
        m.review(Hook::Mutate, "", Verdict::Error, Duration::from_millis(1));
        let text = m.encode().unwrap();
        assert!(
            text.contains(r#"muster_webhook_requests_total{hook="validate",kind="Job",result="denied"} 2"#),
            "{text}"
        );
        assert!(text.contains(r#"muster_webhook_requests_total{hook="mutate",kind="unknown",result="error"} 1"#));
        assert!(text.contains(r#"muster_webhook_request_duration_seconds_count{hook="validate"} 2"#), "{text}");
    }
}
