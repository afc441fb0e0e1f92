//! Pod fields that change where a pod may run, or what it takes from its node, in ways muster
//! does not account for. muster binds pods itself, so nothing else would honour them: a pod that
//! shares a ResourceClaim by name would run with devices muster never counted, two pods taking one
//! host port would be put on one node. The webhook refuses workloads and pods
//! that use them, and the controller never binds such a pod (docs/webhook.md, "Pod fields muster
//! does not place").

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, PodSpec};

use crate::dra::pod_claims;

/// What to do instead, for a field that holds a pod back from muster for good.
const OR_WITHOUT_MUSTER: &str = "or run the work without muster (no muster.dev/queue or muster.dev/group label)";

/// One message for each field of `spec` that muster does not account for, naming the field
/// under `field` (the path of the pod spec, such as `spec.template.spec`) and what to change.
pub fn unsupported_fields(spec: &PodSpec, field: &str) -> Vec<String> {
    let mut out = Vec::new();
    // Claims made from a template for each pod are placed (crate::dra); a claim shared by name is not.
    if let Err(e) = pod_claims(spec, field) {
        out.push(format!("{e}, {OR_WITHOUT_MUSTER}"));
    }
    let lists = [("containers", Some(&spec.containers)), ("initContainers", spec.init_containers.as_ref())];
    for (list, containers) in lists {
        for (i, c) in containers.into_iter().flatten().enumerate() {
            let at = format!("{field}.{list}[{i}]");
            out.extend(host_ports(c, &at, spec.host_network == Some(true)));
        }
    }
    let affinity = spec.affinity.as_ref();
    let required = [
        (
            "podAffinity",
            affinity
                .and_then(|a| a.pod_affinity.as_ref())
                .map(|a| &a.required_during_scheduling_ignored_during_execution),
        ),
        (
            "podAntiAffinity",
            affinity
                .and_then(|a| a.pod_anti_affinity.as_ref())
                .map(|a| &a.required_during_scheduling_ignored_during_execution),
        ),
    ];
    for (kind, terms) in required {
        if terms.and_then(Option::as_ref).is_some_and(|t| !t.is_empty()) {
            out.push(format!(
                "{field}.affinity.{kind}.requiredDuringSchedulingIgnoredDuringExecution: muster does not read \
                 pod affinity, so it could bind the pod where the rule forbids; remove it (the annotation \
                 muster.dev/required-topology keeps a group within one zone, block or rack), {OR_WITHOUT_MUSTER}"
            ));
        }
    }
    let node_terms = affinity
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|n| n.required_during_scheduling_ignored_during_execution.as_ref())
        .map_or(&[][..], |s| s.node_selector_terms.as_slice());
    for (i, t) in node_terms.iter().enumerate() {
        if t.match_fields.as_ref().is_some_and(|f| !f.is_empty()) {
            out.push(format!(
                "{field}.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[{i}]\
                 .matchFields: muster reads node labels only, so it could bind the pod where the field forbids; \
                 select nodes by label instead (kubernetes.io/hostname in matchExpressions), {OR_WITHOUT_MUSTER}"
            ));
        }
    }
    for (i, c) in spec.topology_spread_constraints.iter().flatten().enumerate() {
        if c.when_unsatisfiable == "DoNotSchedule" {
            out.push(format!(
                "{field}.topologySpreadConstraints[{i}]: whenUnsatisfiable DoNotSchedule: muster does not read \
                 topology spread constraints, so it could bind the pod where the rule forbids; make it \
                 ScheduleAnyway or remove it, {OR_WITHOUT_MUSTER}"
            ));
        }
    }
    out
}

/// Annotations by which a kind's controller gives each pod it makes fields muster does not place,
/// past the templates the webhook checks: the JobSet controller's exclusive placement adds
/// required pod affinity and anti-affinity to every pod.
const INJECTING_ANNOTATIONS: [(&str, &str); 1] = [("JobSet", "alpha.jobset.sigs.k8s.io/exclusive-topology")];

/// One message for each annotation of a `kind` object by which its controller would give its pods
/// fields muster does not place.
pub fn unsupported_annotations(kind: &str, annotations: Option<&BTreeMap<String, String>>) -> Vec<String> {
    INJECTING_ANNOTATIONS
        .iter()
        .filter(|(k, key)| *k == kind && annotations.is_some_and(|a| a.contains_key(*key)))
        .map(|(_, key)| {
            format!(
                "metadata.annotations[{key}]: the {kind} controller then gives every pod required pod affinity and \
                 anti-affinity, which muster does not read, so muster would never bind them; remove it (the \
                 annotation muster.dev/required-topology keeps a group within one zone, block or rack)"
            )
        })
        .collect()
}

/// A container's ports taken on the node: a `hostPort`, or every port with `hostNetwork` (the
/// apiserver sets hostPort to the port on such a pod, not on a template).
fn host_ports(c: &Container, at: &str, host_network: bool) -> Vec<String> {
    let taken = c.ports.iter().flatten().enumerate().filter_map(|(j, p)| match p.host_port.filter(|h| *h > 0) {
        Some(h) => Some((j, h, "hostPort")),
        None if host_network => Some((j, p.container_port, "hostNetwork")),
        None => None,
    });
    taken
        .map(|(j, port, why)| {
            format!(
                "{at}.ports[{j}]: port {port} is taken on the node ({why}); muster does not account for host ports \
                 and may place two members of a group on one node, where the second could not start; remove \
                 the host port{}, {OR_WITHOUT_MUSTER}",
                if why == "hostNetwork" { " (hostNetwork: false)" } else { "" }
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A pod spec as the apiserver sends it in a review (defaulted, camelCase).
    fn spec(extra: serde_json::Value) -> PodSpec {
        let mut s = json!({
            "restartPolicy": "Never", "schedulerName": "muster", "dnsPolicy": "ClusterFirst",
            "containers": [{"name": "main", "image": "busybox", "imagePullPolicy": "Always",
                            "resources": {"requests": {"cpu": "1"}}, "terminationMessagePath": "/dev/termination-log"}]
        });
        for (k, v) in extra.as_object().unwrap() {
            s[k] = v.clone();
        }
        serde_json::from_value(s).unwrap()
    }

    #[test]
    fn unsupported_a_plain_pod_spec_has_none() {
        assert_eq!(unsupported_fields(&spec(json!({})), "spec"), Vec::<String>::new());
        // Preferred rules and ScheduleAnyway spreads are hints muster may ignore.
        let hints = spec(json!({
            "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 1, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname"}}]}},
            "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}]
        }));
        assert_eq!(unsupported_fields(&hints, "spec"), Vec::<String>::new());
    }

    #[test]
    fn unsupported_claims_shared_by_name_are_named_by_field_and_template_claims_pass() {
        let mut s = spec(json!({
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]
        }));
        s.containers[0].resources =
            Some(serde_json::from_value(json!({"requests": {"cpu": "1"}, "claims": [{"name": "gpu"}]})).unwrap());
        assert_eq!(unsupported_fields(&s, "spec.template.spec"), Vec::<String>::new());
        let shared = spec(json!({
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}, {"name": "nic", "resourceClaimName": "rdma"}]
        }));
        let out = unsupported_fields(&shared, "spec.template.spec");
        assert_eq!(out.len(), 1, "{out:?}");
        assert!(out[0].starts_with("spec.template.spec.resourceClaims[1]: muster places claims made from a template"));
        assert!(out[0].contains("resourceClaimName"), "{}", out[0]);
    }

    #[test]
    fn unsupported_a_jobsets_exclusive_placement_is_named() {
        let a = BTreeMap::from([("alpha.jobset.sigs.k8s.io/exclusive-topology".to_string(), "rack".to_string())]);
        let out = unsupported_annotations("JobSet", Some(&a));
        assert_eq!(out.len(), 1);
        assert!(out[0].starts_with("metadata.annotations[alpha.jobset.sigs.k8s.io/exclusive-topology]: the JobSet"));
        assert_eq!(unsupported_annotations("Job", Some(&a)), Vec::<String>::new());
        assert_eq!(unsupported_annotations("JobSet", None), Vec::<String>::new());
    }

    #[test]
    fn unsupported_host_ports_affinity_and_spreads() {
        let s = spec(json!({
            "hostNetwork": true,
            "initContainers": [{"name": "init", "image": "busybox", "ports": [{"containerPort": 9000, "protocol": "TCP"}]}],
            "affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "x"}}}]},
                "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}}},
            "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]
        }));
        let out = unsupported_fields(&s, "spec");
        let fields: Vec<&str> = out.iter().map(|m| m.split(": ").next().unwrap()).collect();
        assert_eq!(
            fields,
            [
                "spec.initContainers[0].ports[0]",
                "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution",
                "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[1]\
                 .matchFields",
                "spec.topologySpreadConstraints[0]"
            ]
        );
        assert!(out[0].contains("port 9000 is taken on the node (hostNetwork)"), "{}", out[0]);
        let mut s = spec(json!({}));
        s.containers[0].ports =
            Some(vec![serde_json::from_value(json!({"containerPort": 80, "hostPort": 8080})).unwrap()]);
        assert!(unsupported_fields(&s, "spec")[0].starts_with("spec.containers[0].ports[0]: port 8080 is taken"));
    }
}
