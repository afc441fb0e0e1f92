//! What one pod requests, and whether a group of such pods can ever fit its queue's quota.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{PodSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;
use muster_graph::quantity::Unit;
use muster_graph::resources::{parse_amount, unit_of};
use muster_k8s::QueueSpec;

/// Amounts in base units (millicores, bytes, counts) by resource name.
pub(crate) type Amounts = BTreeMap<String, u128>;

fn amount(name: &str, q: &K8sQuantity) -> Option<u128> {
    // The apiserver has validated the quantity; names muster does not know are not in any quota.
    parse_amount(unit_of(name).ok()?, &q.0).ok().map(u128::from)
}

fn container(r: Option<&ResourceRequirements>) -> Amounts {
    let mut out = Amounts::new();
    let Some(r) = r else { return out };
    // A limit without a request is the request (the apiserver defaults it so for containers).
    for (name, q) in r.limits.iter().flatten().chain(r.requests.iter().flatten()) {
        if let Some(a) = amount(name, q) {
            out.insert(name.clone(), a);
        }
    }
    out
}

fn add(into: &mut Amounts, from: &Amounts) {
    for (k, v) in from {
        *into.entry(k.clone()).or_default() += v;
    }
}

/// What the scheduler reserves for one pod: the containers' requests added up, or the largest
/// init container if that is more (restartable init containers, sidecars, run alongside and
/// count with both), pod-level requests where given, plus the pod overhead, and one `pods`.
pub(crate) fn pod_requests(spec: &PodSpec) -> Amounts {
    let mut apps = Amounts::new();
    for c in &spec.containers {
        add(&mut apps, &container(c.resources.as_ref()));
    }
    let mut sidecars = Amounts::new();
    let mut init_peak = Amounts::new();
    for c in spec.init_containers.iter().flatten() {
        let r = container(c.resources.as_ref());
        if c.restart_policy.as_deref() == Some("Always") {
            add(&mut sidecars, &r);
        } else {
            for (k, v) in r {
                let peak = v + sidecars.get(&k).copied().unwrap_or(0);
                let e = init_peak.entry(k).or_default();
                *e = (*e).max(peak);
            }
        }
    }
    let mut total = apps;
    add(&mut total, &sidecars);
    for (k, v) in init_peak {
        let e = total.entry(k).or_default();
        *e = (*e).max(v);
    }
    if let Some(pod_level) = spec.resources.as_ref() {
        for (k, v) in container(Some(pod_level)) {
            total.insert(k, v);
        }
    }
    for (name, q) in spec.overhead.iter().flatten() {
        if let Some(a) = amount(name, q) {
            *total.entry(name.clone()).or_default() += a;
        }
    }
    total.insert("pods".into(), 1);
    total
}

/// An amount written the way Kubernetes users write it.
pub(crate) fn show(name: &str, v: u128) -> String {
    match unit_of(name) {
        Ok(Unit::Millicores) if v.is_multiple_of(1000) => (v / 1000).to_string(),
        Ok(Unit::Millicores) => format!("{v}m"),
        Ok(Unit::Bytes) => {
            for (suffix, shift) in [("Ei", 60), ("Pi", 50), ("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10)] {
                if v > 0 && v.is_multiple_of(1u128 << shift) {
                    return format!("{}{suffix}", v >> shift);
                }
            }
            v.to_string()
        }
        _ => v.to_string(),
    }
}

/// The most of each resource a group in the queue can ever hold, and how that comes about.
/// Without a cohort that is the nominal quota; in a cohort, nominal plus the borrowing limit; a
/// cohort member without a borrowing limit may borrow without bound, so it has no hard limit.
pub(crate) fn hard_limits(spec: &QueueSpec) -> BTreeMap<String, (u128, String)> {
    let mut out = BTreeMap::new();
    for (r, q) in &spec.quotas {
        let Ok(nominal) = q.nominal.amount(r) else { continue };
        let nominal = u128::from(nominal);
        let limit = match (&spec.cohort, &q.borrowing_limit) {
            (None, _) => (nominal, format!("nominal {}; no cohort to borrow from", show(r, nominal))),
            (Some(cohort), Some(b)) => {
                let Ok(b) = b.amount(r) else { continue };
                let b = u128::from(b);
                (
                    nominal + b,
                    format!("nominal {} + borrowingLimit {} from cohort {cohort}", show(r, nominal), show(r, b)),
                )
            }
            (Some(_), None) => continue,
        };
        out.insert(r.clone(), limit);
    }
    out
}

/// A refusal message if `members` pods of `per_pod` each can never fit in queue `queue`.
/// `field` is the field that sets the member count; `fix` says what to change.
pub(crate) fn never_fits(
    queue: &str,
    spec: &QueueSpec,
    members: u64,
    per_pod: &Amounts,
    field: &str,
    fix: &str,
) -> Option<String> {
    let mut over = Vec::new();
    for (r, (limit, why)) in hard_limits(spec) {
        let each = per_pod.get(&r).copied().unwrap_or(0);
        let need = each.saturating_mul(u128::from(members));
        if need > limit {
            over.push(format!(
                "{members} pods x {r} {} = {r} {}, but queue {queue} allows at most {r} {} ({why})",
                show(&r, each),
                show(&r, need),
                show(&r, limit)
            ));
        }
    }
    if over.is_empty() {
        return None;
    }
    Some(format!("{field}: {}, so the group could never start; {fix}", over.join("; and ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(yaml: &str) -> PodSpec {
        serde_yaml_ng::from_str(yaml).unwrap()
    }

    #[test]
    fn requests_add_containers_and_take_the_init_peak() {
        let s = spec(
            "containers:\n- {name: a, resources: {requests: {cpu: 500m, memory: 1Gi}}}\n\
             - {name: b, resources: {limits: {cpu: '1', nvidia.com/gpu: '2'}}}\n\
             initContainers:\n- {name: i, resources: {requests: {cpu: '4', memory: 100Mi}}}\n\
             - {name: side, restartPolicy: Always, resources: {requests: {memory: 1Gi}}}\n\
             overhead: {cpu: 100m}\n",
        );
        let r = pod_requests(&s);
        assert_eq!(r["cpu"], 4100, "the init container's 4 cpu beat the containers' 1.5, plus overhead");
        assert_eq!(r["memory"], 2 << 30, "sidecar memory adds to the containers'");
        assert_eq!(r["nvidia.com/gpu"], 2, "a limit without a request counts as the request");
        assert_eq!(r["pods"], 1);
    }

    #[test]
    fn pod_level_requests_win() {
        let s =
            spec("containers:\n- {name: a, resources: {requests: {cpu: '1'}}}\nresources: {requests: {cpu: '3'}}\n");
        assert_eq!(pod_requests(&s)["cpu"], 3000);
    }

    #[test]
    fn amounts_are_shown_in_kubernetes_units() {
        assert_eq!(show("cpu", 2000), "2");
        assert_eq!(show("cpu", 1500), "1500m");
        assert_eq!(show("memory", 4 << 30), "4Gi");
        assert_eq!(show("memory", 1000), "1000");
        assert_eq!(show("nvidia.com/gpu", 3), "3");
    }

    #[test]
    fn hard_limit_is_nominal_plus_borrowing_in_a_cohort() {
        let q: QueueSpec = serde_yaml_ng::from_str(
            "cohort: c\nquotas: {cpu: {nominal: 4, borrowingLimit: 2}, memory: {nominal: 1Gi}}",
        )
        .unwrap();
        let l = hard_limits(&q);
        assert_eq!(l["cpu"].0, 6000);
        assert!(!l.contains_key("memory"), "a cohort member without a borrowing limit has no hard limit");
        let per_pod = Amounts::from([("cpu".to_string(), 1000)]);
        assert_eq!(never_fits("q", &q, 6, &per_pod, "spec.parallelism", "fix"), None);
        assert_eq!(
            never_fits("q", &q, 7, &per_pod, "spec.parallelism", "fix").unwrap(),
            "spec.parallelism: 7 pods x cpu 1 = cpu 7, but queue q allows at most cpu 6 \
             (nominal 4 + borrowingLimit 2 from cohort c), so the group could never start; fix"
        );
    }
}
