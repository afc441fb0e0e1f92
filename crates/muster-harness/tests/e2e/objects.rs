//! Reading what a test looks at: Groups (as the apiserver stores them: JSON, so that a forged or
//! odd status reads as it is), the pods of a selector, Warning events, and all of it at once for
//! a failure's report.

use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{Api, DynamicObject, ListParams};
use kube::core::ApiResource;
use kube::{Client, ResourceExt};
use muster_k8s::Group;
use serde_json::Value;

/// The Groups of namespace `ns`.
pub fn groups(client: &Client, ns: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), ns, &ApiResource::erase::<Group>(&()))
}

/// Group `ns/name` as JSON (metadata, spec, status), or None if there is none.
pub async fn group(client: &Client, ns: &str, name: &str) -> Option<Value> {
    let g = groups(client, ns).get_opt(name).await.ok()??;
    serde_json::to_value(g).ok()
}

/// The phase of Group `ns/name` ("" before it has one), or None if there is no such Group.
pub async fn group_phase(client: &Client, ns: &str, name: &str) -> Option<String> {
    let g = group(client, ns, name).await?;
    Some(g["status"]["phase"].as_str().unwrap_or_default().to_string())
}

/// Waits until Group `ns/name` is in one of the phases `want`, and returns that phase.
pub async fn wait_phase(client: &Client, ns: &str, name: &str, secs: u64, want: &[&str]) -> String {
    super::eventually(secs, &format!("the Group {ns}/{name} is {}", want.join(" or ")), || async move {
        group_phase(client, ns, name).await.filter(|p| want.contains(&p.as_str()))
    })
    .await
}

/// The pods of namespace `ns` with labels `selector`.
pub async fn pods(client: &Client, ns: &str, selector: &str) -> Vec<Pod> {
    let params = ListParams::default().labels(selector);
    Api::<Pod>::namespaced(client.clone(), ns).list(&params).await.map(|l| l.items).unwrap_or_default()
}

/// The nodes of the bound pods of `selector` in `ns`, one per pod.
pub async fn nodes_of(client: &Client, ns: &str, selector: &str) -> Vec<String> {
    pods(client, ns, selector).await.iter().filter_map(|p| p.spec.as_ref()?.node_name.clone()).collect()
}

/// Whether namespace `ns` has a Warning event of `reason`, on object `object` if one is named.
pub async fn has_warning(client: &Client, ns: &str, reason: &str, object: Option<&str>) -> bool {
    let mut fields = format!("reason={reason},type=Warning");
    if let Some(name) = object {
        fields.push_str(&format!(",involvedObject.name={name}"));
    }
    let events = Api::<Event>::namespaced(client.clone(), ns);
    events.list(&ListParams::default().fields(&fields)).await.is_ok_and(|l| !l.items.is_empty())
}

/// Prints namespace `ns`'s pods, Groups and last 15 events: what a failed check is read against.
pub async fn dump(client: &Client, ns: &str) {
    eprintln!("       --- namespace {ns}: pods, Groups, events (last 15)");
    for p in pods(client, ns, "").await {
        let spec = p.spec.as_ref();
        let gates: Vec<&str> =
            spec.and_then(|s| s.scheduling_gates.as_ref()).into_iter().flatten().map(|g| g.name.as_str()).collect();
        eprintln!(
            "       pod {} node={} phase={} gates={gates:?} scheduler={}",
            p.name_any(),
            spec.and_then(|s| s.node_name.as_deref()).unwrap_or("-"),
            p.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or("-"),
            spec.and_then(|s| s.scheduler_name.as_deref()).unwrap_or("-"),
        );
    }
    for g in groups(client, ns).list(&ListParams::default()).await.map(|l| l.items).unwrap_or_default() {
        let nodes: Vec<&str> = g.data["status"]["allocation"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|a| a["node"].as_str())
            .collect();
        eprintln!(
            "       group {} phase={} min={} cpu={} nodes={nodes:?} message={}",
            g.name_any(),
            g.data["status"]["phase"],
            g.data["spec"]["members"]["min"],
            g.data["spec"]["resources"]["cpu"],
            g.data["status"]["message"],
        );
    }
    let mut events = Api::<Event>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    events.sort_by_key(|e| e.metadata.creation_timestamp.clone());
    for e in events.iter().rev().take(15).rev() {
        let message: String = e.message.as_deref().unwrap_or_default().chars().take(200).collect();
        eprintln!(
            "       event {} {} on {}: {message}",
            e.type_.as_deref().unwrap_or("-"),
            e.reason.as_deref().unwrap_or("-"),
            e.involved_object.name.as_deref().unwrap_or("-"),
        );
    }
}
