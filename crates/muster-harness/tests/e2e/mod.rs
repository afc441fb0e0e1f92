//! What the end-to-end tests on a real control plane share: the cluster they run against, waiting
//! for a condition, fresh namespaces. Each test runs against the cluster of
//! `MUSTER_E2E_KUBECONFIG` (`make e2e` sets it, hack/e2e/run.sh); without it the test says so and
//! checks nothing.
#![allow(dead_code)] // each test file uses its own part

use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::Client;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;

/// A client for the harness cluster, or None (and a line saying why) when none is given.
pub async fn client() -> Option<Client> {
    let Some(path) = std::env::var_os("MUSTER_E2E_KUBECONFIG").map(PathBuf::from) else {
        eprintln!("skipped: set MUSTER_E2E_KUBECONFIG to a harness cluster's kubeconfig (make e2e does)");
        return None;
    };
    let (client, _) = muster_harness::cluster::client(&path).await.expect("a client for the harness cluster");
    Some(client)
}

/// Polls `check` every half second until it yields Some, or fails the test after `secs` seconds.
pub async fn eventually<T, F, Fut>(secs: u64, what: &str, check: F) -> T
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    for _ in 0..secs * 2 {
        if let Some(v) = check().await {
            return v;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    panic!("{what}: not within {secs} s");
}

/// Deletes namespace `name` if it is there, waits until it is gone, and creates it with `labels`.
pub async fn fresh_namespace(client: &Client, name: &str, labels: serde_json::Value) {
    let namespaces = Api::<Namespace>::all(client.clone());
    let _ = namespaces.delete(name, &DeleteParams::default()).await;
    eventually(120, &format!("the old namespace {name} is gone"), || {
        let namespaces = namespaces.clone();
        async move { namespaces.get_opt(name).await.ok().flatten().is_none().then_some(()) }
    })
    .await;
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}})).unwrap();
    namespaces.create(&PostParams::default(), &ns).await.expect("namespace created");
}
