//! Namespaces for a test: fresh ones, ones muster manages where a tenant may edit, and letting
//! them go once the pods in them hold nothing.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Pod, ServiceAccount};
use k8s_openapi::api::rbac::v1::RoleBinding;
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::json;

use super::eventually;

/// Deletes namespace `name` if it is there, waits until it is gone, creates it with `labels`, and
/// waits for its default ServiceAccount (the apiserver refuses pods until the controller-manager
/// has made it).
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
    let accounts = Api::<ServiceAccount>::namespaced(client.clone(), name);
    eventually(30, &format!("namespace {name} has its default ServiceAccount"), || {
        let accounts = accounts.clone();
        async move { accounts.get_opt("default").await.ok().flatten().map(|_| ()) }
    })
    .await;
}

/// A fresh namespace that muster manages (`muster.dev/managed=true`), where user `tenant` has
/// the `edit` ClusterRole, as an admin would hand a team its namespace.
pub async fn managed_namespace(client: &Client, name: &str, tenant: &str) {
    fresh_namespace(client, name, json!({"muster.dev/managed": "true"})).await;
    bind_cluster_role(client, name, "tenant-edit", "edit", tenant).await;
}

/// Binds ClusterRole `role` to user `user` in namespace `ns`, as RoleBinding `binding`.
pub async fn bind_cluster_role(client: &Client, ns: &str, binding: &str, role: &str, user: &str) {
    let rb: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": binding},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]
    }))
    .unwrap();
    Api::<RoleBinding>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &rb)
        .await
        .unwrap_or_else(|e| panic!("RoleBinding {ns}/{binding} is created: {e}"));
}

/// Deletes the namespaces and waits (at most 60 s in all) until no pod is left in them, so that
/// the next test finds the nodes free; past that it says so and goes on.
pub async fn release(client: &Client, names: &[&str]) {
    let namespaces = Api::<Namespace>::all(client.clone());
    for name in names {
        let _ = namespaces.delete(name, &DeleteParams::background()).await;
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    for name in names {
        let pods = Api::<Pod>::namespaced(client.clone(), name);
        while pods.list(&ListParams::default()).await.is_ok_and(|l| !l.items.is_empty()) {
            if tokio::time::Instant::now() > deadline {
                eprintln!("  ..   pods of namespace {name} still there after 60 s");
                return;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}
