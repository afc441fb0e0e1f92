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

#[test]
fn every_metric_the_grafana_dashboard_queries_is_served() {
    let mut served = declared(&muster_controller::metrics::Metrics::new().encode().unwrap());
    served.extend(declared(&muster_webhook::WebhookMetrics::new().encode().unwrap()));
    let queried = queried();
    assert!(queried.len() >= 10, "the dashboard queries {queried:?}");
    let unknown: Vec<&String> = queried.difference(&served).collect();
    assert!(unknown.is_empty(), "the dashboard queries metrics muster does not serve: {unknown:?}; served: {served:?}");
}
