//! What a pod holds on its node, counted as the kubelet admits pods and the scheduler fits them
//! (k8s.io/component-helpers/resource.PodRequests; the Kubernetes docs "Resource Management for
//! Pods and Containers", "Sidecar Containers" and "Pod-level resources"):
//!
//! - the containers are summed, and so are the native sidecars (init containers with
//!   `restartPolicy: Always`), which run beside them for the pod's whole life;
//! - an ordinary init container runs alone, but beside the sidecars started before it: per
//!   resource the pod takes the larger of the sum above and, for each init container, its
//!   requests plus those of the sidecars declared before it (for a sidecar: up to and including
//!   it);
//! - pod-level requests (spec.resources) replace the result for the resources they name;
//! - spec.overhead (RuntimeClass) is added on top;
//! - a limit stands in for a missing request (the apiserver's defaulting);
//! - every pod counts 1 against the node's `pods`.
//!
//! Not counted: in-place resizes in progress.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{PodSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::quantity::{Nanos, NotAQuantity, ONE, nanos};

pub type Amounts = BTreeMap<String, Nanos>;

fn add(into: &mut Amounts, other: &Amounts) {
    for (k, v) in other {
        *into.entry(k.clone()).or_default() += v;
    }
}

fn max_into(into: &mut Amounts, other: &Amounts) {
    for (k, v) in other {
        let at = into.entry(k.clone()).or_default();
        *at = (*at).max(*v);
    }
}

fn parsed(list: Option<&BTreeMap<String, Quantity>>) -> Result<Amounts, NotAQuantity> {
    list.into_iter().flatten().map(|(k, q)| Ok((k.clone(), nanos(&q.0)?))).collect()
}

/// Requests, with a limit standing in for each missing request.
fn requests_of(resources: Option<&ResourceRequirements>) -> Result<Amounts, NotAQuantity> {
    let mut requests = parsed(resources.and_then(|r| r.requests.as_ref()))?;
    for (k, v) in parsed(resources.and_then(|r| r.limits.as_ref()))? {
        requests.entry(k).or_insert(v);
    }
    Ok(requests)
}

/// What a pod of `spec` holds on its node, per resource.
pub fn pod_requests(spec: &PodSpec) -> Result<Amounts, NotAQuantity> {
    let mut total = Amounts::new();
    for c in &spec.containers {
        add(&mut total, &requests_of(c.resources.as_ref())?);
    }
    let (mut sidecars, mut init) = (Amounts::new(), Amounts::new());
    for c in spec.init_containers.iter().flatten() {
        let r = requests_of(c.resources.as_ref())?;
        let needs = if c.restart_policy.as_deref() == Some("Always") {
            add(&mut total, &r); // runs beside the containers for the pod's life
            add(&mut sidecars, &r);
            sidecars.clone() // while it starts: itself and the sidecars before it
        } else {
            let mut needs = r; // runs to completion beside the sidecars started before it
            add(&mut needs, &sidecars);
            needs
        };
        max_into(&mut init, &needs);
    }
    max_into(&mut total, &init);
    total.extend(requests_of(spec.resources.as_ref())?); // pod-level requests replace the sum
    add(&mut total, &parsed(spec.overhead.as_ref())?);
    *total.entry("pods".into()).or_default() += ONE;
    Ok(total)
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn cpu_of(spec: Value) -> Nanos {
        pod_requests(&serde_json::from_value(spec).unwrap()).unwrap()["cpu"]
    }

    fn c(cpu: &str) -> Value {
        json!({"name": "c", "resources": {"requests": {"cpu": cpu}}})
    }

    fn sidecar(cpu: &str) -> Value {
        json!({"name": "s", "restartPolicy": "Always", "resources": {"requests": {"cpu": cpu}}})
    }

    #[test]
    fn a_pod_holds_what_the_kubelet_admits() {
        let cases = [
            ("two containers are summed", json!({"containers": [c("1"), c("2")]}), "3"),
            (
                "a native sidecar adds to the containers",
                json!({"initContainers": [sidecar("4")], "containers": [c("1")]}),
                "5",
            ),
            (
                "an ordinary init container larger than the containers",
                json!({"initContainers": [c("6")], "containers": [c("1")]}),
                "6",
            ),
            (
                "an init container after a sidecar runs beside it",
                json!({"initContainers": [sidecar("2"), c("3")], "containers": [c("1")]}),
                "5",
            ),
            (
                "an init container before a sidecar does not",
                json!({"initContainers": [c("3"), sidecar("2")], "containers": [c("1")]}),
                "3",
            ),
            (
                "pod-level requests replace the sum",
                json!({"resources": {"requests": {"cpu": "5"}}, "containers": [c("1")]}),
                "5",
            ),
            (
                "pod-level limits stand in for pod-level requests",
                json!({"resources": {"limits": {"cpu": "4"}}, "containers": [c("1")]}),
                "4",
            ),
            ("overhead is added", json!({"overhead": {"cpu": "250m"}, "containers": [c("1500m")]}), "1.75"),
            (
                "a limit stands in for a missing request",
                json!({"containers": [{"name": "c", "resources": {"limits": {"cpu": "2"}}}]}),
                "2",
            ),
        ];
        for (what, spec, want) in cases {
            assert_eq!(cpu_of(spec), nanos(want).unwrap(), "{what}");
        }
    }

    #[test]
    fn pod_level_requests_replace_only_what_they_name_and_a_pod_counts_one() {
        let spec = json!({"resources": {"requests": {"cpu": "5"}},
                          "containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]});
        let r = pod_requests(&serde_json::from_value(spec).unwrap()).unwrap();
        assert_eq!((r["cpu"], r["memory"], r["pods"]), (5 * ONE, (1 << 30) * ONE, ONE));
    }
}
