//! What one pod asks of its node, as kube-scheduler and the kubelet count it, and where it may
//! run. The webhook and the controller both call [`requests`] and [`placement`]: a second copy of
//! the requests once drifted and let two members share a node that could hold one (native
//! sidecars were not added).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{PodSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;
use muster_graph::quantity::Unit;
use muster_graph::resources::{parse_amount, unit_of};

use crate::group::{NodeSelectorRequirement, NodeSelectorTerm, Toleration};

/// Amounts in base units (millicores, bytes, counts) by resource name.
pub type Amounts = BTreeMap<String, u64>;

/// A quantity in the base unit of `resource`, or why muster cannot count it (a resource name it
/// does not know, an amount past its limit).
pub fn amount_of(resource: &str, q: &K8sQuantity) -> Result<u64, String> {
    let unit = unit_of(resource)?;
    parse_amount(unit, &q.0).map_err(|e| e.to_string())
}

/// An amount in a pod spec that muster cannot count. A pod with one is never placed: counting
/// it as nothing would over-commit its node, so the webhook refuses it and the controller does
/// not bind it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {reason}; muster cannot count this amount, so it will not place the pod")]
pub struct Uncountable {
    /// Where the amount is, from the pod spec (`containers[0].resources.requests[memory]`).
    pub field: String,
    pub reason: String,
}

impl Uncountable {
    /// The same amount, its field under `spec_field` (`spec.template.spec`).
    pub fn under(self, spec_field: &str) -> Self {
        Self { field: format!("{spec_field}.{}", self.field), ..self }
    }
}

/// Every amount of a resource list, counted, or the first that cannot be (at `field[name]`).
fn amounts<'a>(
    list: impl IntoIterator<Item = (&'a String, &'a K8sQuantity)>,
    field: &str,
) -> Result<Amounts, Uncountable> {
    list.into_iter()
        .map(|(name, q)| {
            amount_of(name, q)
                .map(|a| (name.clone(), a))
                .map_err(|reason| Uncountable { field: format!("{field}[{name}]"), reason })
        })
        .collect()
}

/// One container's requests (its resources at `field`); a limit without a request counts as the
/// request (the apiserver defaults it so).
pub fn container_requests(r: Option<&ResourceRequirements>, field: &str) -> Result<Amounts, Uncountable> {
    let Some(r) = r else { return Ok(Amounts::new()) };
    let requests = r.requests.as_ref();
    let mut out = amounts(requests.into_iter().flatten(), &format!("{field}.requests"))?;
    let unrequested = r.limits.iter().flatten().filter(|(name, _)| !requests.is_some_and(|q| q.contains_key(*name)));
    out.extend(amounts(unrequested, &format!("{field}.limits"))?);
    Ok(out)
}

fn add(into: &mut Amounts, from: &Amounts) {
    for (k, v) in from {
        let e = into.entry(k.clone()).or_default();
        *e = e.saturating_add(*v);
    }
}

/// What a pod reserves on its node (without the implicit one of `pods`):
/// - the app containers added up, plus every restartable init container (a native sidecar runs
///   beside them);
/// - at least, per resource, the peak during init: each ordinary init container plus the
///   sidecars started before it;
/// - pod-level `spec.resources` replaces the container sum for the resources it names;
/// - plus the pod overhead (RuntimeClass).
///
/// Zero amounts are left out. An amount muster cannot count is an error naming its field.
pub fn requests(spec: &PodSpec) -> Result<Amounts, Uncountable> {
    let mut total = Amounts::new();
    for (i, c) in spec.containers.iter().enumerate() {
        add(&mut total, &container_requests(c.resources.as_ref(), &format!("containers[{i}].resources"))?);
    }
    let mut sidecars = Amounts::new();
    let mut init_peak = Amounts::new();
    for (i, c) in spec.init_containers.iter().flatten().enumerate() {
        let r = container_requests(c.resources.as_ref(), &format!("initContainers[{i}].resources"))?;
        if c.restart_policy.as_deref() == Some("Always") {
            add(&mut sidecars, &r);
        } else {
            for (k, v) in r {
                let peak = v.saturating_add(sidecars.get(&k).copied().unwrap_or(0));
                let e = init_peak.entry(k).or_default();
                *e = (*e).max(peak);
            }
        }
    }
    add(&mut total, &sidecars);
    for (k, v) in init_peak {
        let e = total.entry(k).or_default();
        *e = (*e).max(v);
    }
    if let Some(pod_level) = spec.resources.as_ref() {
        total.extend(container_requests(Some(pod_level), "resources")?);
    }
    add(&mut total, &amounts(spec.overhead.iter().flatten(), "overhead")?);
    total.retain(|_, a| *a > 0);
    Ok(total)
}

/// Where a pod may run, in the Group object's form: nodeSelector, required node affinity,
/// tolerations.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Placement {
    pub node_selector: BTreeMap<String, String>,
    pub affinity: Vec<NodeSelectorTerm>,
    pub tolerations: Vec<Toleration>,
}

/// The placement of a pod spec found at `field` (`spec`, `spec.template.spec`), or what muster
/// cannot read there, naming the field (an unknown affinity operator, a bad toleration).
pub fn placement(pod: &PodSpec, field: &str) -> Result<Placement, String> {
    let terms = pod
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|n| n.required_during_scheduling_ignored_during_execution.as_ref())
        .map(|s| s.node_selector_terms.as_slice())
        .unwrap_or(&[]);
    let mut affinity = Vec::new();
    for t in terms {
        let mut match_expressions = Vec::new();
        for e in t.match_expressions.iter().flatten() {
            let operator = serde_json::from_value(serde_json::Value::String(e.operator.clone()))
                .map_err(|_| format!("{field}.affinity: node affinity operator {:?} is not supported", e.operator))?;
            match_expressions.push(NodeSelectorRequirement {
                key: e.key.clone(),
                operator,
                values: e.values.clone().unwrap_or_default(),
            });
        }
        affinity.push(NodeSelectorTerm { match_expressions });
    }
    let tolerations = pod
        .tolerations
        .iter()
        .flatten()
        .map(|t| {
            serde_json::to_value(t)
                .and_then(serde_json::from_value::<Toleration>)
                .map_err(|e| format!("{field}.tolerations: {e}"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Placement { node_selector: pod.node_selector.clone().unwrap_or_default(), affinity, tolerations })
}

/// An amount written the way Kubernetes users write it (`1500m`, `2`, `4Gi`).
pub fn show(resource: &str, v: u128) -> String {
    match unit_of(resource) {
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

/// Amounts as a user reads them: `cpu 7, memory 10Mi` (`nothing` when empty).
pub fn show_all<'a>(amounts: impl IntoIterator<Item = (&'a String, &'a u64)>) -> String {
    let parts: Vec<String> = amounts.into_iter().map(|(r, a)| format!("{r} {}", show(r, u128::from(*a)))).collect();
    if parts.is_empty() { "nothing".to_string() } else { parts.join(", ") }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(yaml: &str) -> PodSpec {
        serde_yaml_ng::from_str(yaml).unwrap()
    }

    #[test]
    fn containers_add_up_and_an_init_container_counts_at_its_peak() {
        let s = spec(
            "containers:\n- {name: a, resources: {requests: {cpu: 500m, memory: 1Gi}}}\n\
             - {name: b, resources: {limits: {cpu: '1', nvidia.com/gpu: '2'}}}\n\
             initContainers:\n- {name: i, resources: {requests: {cpu: '4', memory: 100Mi}}}\n\
             overhead: {cpu: 100m}\n",
        );
        let r = requests(&s).unwrap();
        assert_eq!(r["cpu"], 4100, "the init container's 4 cpu beat the containers' 1.5, plus overhead");
        assert_eq!(r["memory"], 1 << 30);
        assert_eq!(r["nvidia.com/gpu"], 2, "a limit without a request counts as the request");
        assert!(!r.contains_key("pods"), "the implicit pod count is the caller's");
    }

    #[test]
    fn a_native_sidecar_runs_beside_the_containers_and_counts_with_them() {
        // The case that over-committed a node: sidecar 4 cpu + container 1 cpu is 5, not 4.
        let s = spec(
            "containers:\n- {name: a, resources: {requests: {cpu: '1'}}}\n\
             initContainers:\n- {name: side, restartPolicy: Always, resources: {requests: {cpu: '4'}}}\n",
        );
        assert_eq!(requests(&s).unwrap()["cpu"], 5000);
        // An ordinary init container after the sidecar runs beside it: 4 + 3 = 7 beats 5.
        let s = spec(
            "containers:\n- {name: a, resources: {requests: {cpu: '1'}}}\n\
             initContainers:\n- {name: side, restartPolicy: Always, resources: {requests: {cpu: '4'}}}\n\
             - {name: setup, resources: {requests: {cpu: '3'}}}\n",
        );
        assert_eq!(requests(&s).unwrap()["cpu"], 7000);
        // Before the sidecar it runs alone: max(3, 1 + 4) = 5.
        let s = spec(
            "containers:\n- {name: a, resources: {requests: {cpu: '1'}}}\n\
             initContainers:\n- {name: setup, resources: {requests: {cpu: '3'}}}\n\
             - {name: side, restartPolicy: Always, resources: {requests: {cpu: '4'}}}\n",
        );
        assert_eq!(requests(&s).unwrap()["cpu"], 5000);
    }

    #[test]
    fn pod_level_resources_replace_the_container_sum_for_what_they_name() {
        let s = spec(
            "containers:\n- {name: a, resources: {requests: {cpu: '1', memory: 1Gi}}}\n\
             resources: {requests: {cpu: '3'}}\n",
        );
        let r = requests(&s).unwrap();
        assert_eq!(r["cpu"], 3000);
        assert_eq!(r["memory"], 1 << 30, "memory is not named at pod level: the containers' sum stands");
    }

    #[test]
    fn amounts_are_shown_in_kubernetes_units() {
        assert_eq!(show("cpu", 2000), "2");
        assert_eq!(show("cpu", 1500), "1500m");
        assert_eq!(show("memory", 4 << 30), "4Gi");
        assert_eq!(show("memory", 1000), "1000");
        assert_eq!(show("nvidia.com/gpu", 3), "3");
        let a = Amounts::from([("cpu".to_string(), 7000), ("memory".to_string(), 10 << 20)]);
        assert_eq!(show_all(&a), "cpu 7, memory 10Mi");
        assert_eq!(show_all(&Amounts::new()), "nothing");
    }

    #[test]
    fn zero_amounts_are_left_out() {
        let s = spec("containers:\n- {name: a, resources: {requests: {cpu: '0', memory: 1Mi}}}\n");
        assert_eq!(requests(&s).unwrap(), Amounts::from([("memory".to_string(), 1 << 20)]));
    }

    #[test]
    fn the_forms_the_apiserver_keeps_are_counted() {
        // apimachinery's canonical form of 1.5 GB is 1500e6, and of 1.5 millicores 1500u.
        let s = spec("containers:\n- {name: a, resources: {requests: {cpu: 1500u, memory: 1500e6}}}\n");
        assert_eq!(
            requests(&s).unwrap(),
            Amounts::from([("cpu".to_string(), 2), ("memory".to_string(), 1_500_000_000)])
        );
    }

    #[test]
    fn an_amount_muster_cannot_count_is_an_error_naming_its_field() {
        let s = spec(
            "containers:\n- {name: a}\n- {name: b, resources: {limits: {memory: 2Ei, cpu: 9Ei}, requests: {cpu: '1'}}}\n",
        );
        let e = requests(&s).unwrap_err().under("spec.template.spec");
        assert_eq!(e.field, "spec.template.spec.containers[1].resources.limits[memory]");
        assert!(e.to_string().contains("absurdly large"), "{e}");
        assert!(!e.to_string().contains("cpu"), "a limit beside a request does not count: {e}");
        let s = spec("containers:\n- {name: a}\noverhead: {gpus: '1'}\n");
        assert_eq!(requests(&s).unwrap_err().field, "overhead[gpus]");
    }
}
