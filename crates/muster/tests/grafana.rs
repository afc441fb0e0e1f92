//! The Grafana dashboard (deploy/grafana/muster.json) queries only metrics that muster serves: a
//! renamed metric fails here, not as an empty panel in someone's Grafana.

use std::collections::BTreeSet;

const DASHBOARD: &str = include_str!("../../../deploy/grafana/muster.json");

/// Every metric name in the dashboard's queries, without the sample suffixes Prometheus adds.
fn queried() -> BTreeSet<String> {
    let dashboard: serde_json::Value = serde_json::from_str(DASHBOARD).expect("the dashboard is JSON");
    let mut names = BTreeSet::new();
    for panel in dashboard["panels"].as_array().expect("panels") {
        for target in panel["targets"].as_array().expect("targets") {
            let expr = target["expr"].as_str().expect("expr");
            let mut rest = expr;
            while let Some(at) = rest.find("muster_") {
                let tail = &rest[at..];
                let end = tail.find(|c: char| !(c.is_ascii_lowercase() || c == '_')).unwrap_or(tail.len());
                let name = &tail[..end];
                let base = ["_bucket", "_count", "_sum", "_total"].iter().find_map(|s| name.strip_suffix(s));
                names.insert(base.unwrap_or(name).to_string());
                rest = &tail[end..];
            }
        }
    }
    names
}

/// Metric families an exposition declares (`# TYPE name kind`).
fn declared(text: &str) -> BTreeSet<String> {
    text.lines().filter_map(|l| l.strip_prefix("# TYPE ")?.split(' ').next().map(str::to_string)).collect()
}

/// The controller's metrics, with a sample in every family (an empty family is not exposed).
fn controller_metrics() -> String {
    use muster_controller::metrics::{EventOutcome, Metrics};
    use muster_queue::{GroupKey, GroupState, Reason, Transition};
    let m = Metrics::new();
    let status = muster_k8s::QueueStatus { pending_groups: 1, ..Default::default() };
    m.set_groups(&[("q".to_string(), status)].into());
    let key = GroupKey { namespace: "ns".into(), name: "g".into() };
    let t = |from, to, reason| Transition { at: 0, key: key.clone(), from, to, reason, allocation: None };
    m.transition(&t(GroupState::Queued, GroupState::Admitted, Reason::Admitted { backfill: false }), None);
    let timeout = Reason::PodsReadyTimeout { requeue_at: 60, requeues: 1 };
    m.transition(&t(GroupState::Admitted, GroupState::Evicted, timeout), None);
    m.event(EventOutcome::Recorded, std::time::Duration::from_millis(5));
    m.encode().unwrap()
}

fn webhook_metrics() -> String {
    use muster_webhook::{Hook, Verdict, WebhookMetrics};
    let m = WebhookMetrics::new();
    m.review(Hook::Validate, "Job", Verdict::Denied, std::time::Duration::from_millis(2));
    m.encode().unwrap()
}

#[test]
fn every_metric_the_grafana_dashboard_queries_is_served() {
    let mut served = declared(&controller_metrics());
    served.extend(declared(&webhook_metrics()));
    let queried = queried();
    assert!(queried.len() >= 10, "the dashboard queries {queried:?}");
    let unknown: Vec<&String> = queried.difference(&served).collect();
    assert!(unknown.is_empty(), "the dashboard queries metrics muster does not serve: {unknown:?}; served: {served:?}");
    // And it groups by labels those metrics have.
    let text = controller_metrics() + &webhook_metrics();
    for label in grouped_by() {
        assert!(text.contains(&format!("{label}=\"")), "the dashboard groups by {label}, which no metric has");
    }
}

/// The labels of every `by (...)` in the dashboard's queries, but `le` (Prometheus' own).
fn grouped_by() -> BTreeSet<String> {
    let mut labels = BTreeSet::new();
    for part in DASHBOARD.split("by (").skip(1) {
        let inside = part.split(')').next().unwrap_or("");
        labels.extend(inside.split(',').map(|l| l.trim().to_string()).filter(|l| !l.is_empty() && l != "le"));
    }
    labels
}
