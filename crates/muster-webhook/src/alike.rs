//! Whether a new pod of a plain-pod group is alike the members its Group was sized for.
//!
//! The controller sizes a plain-pod group from its first pod (muster-controller's
//! `convert::plain_group_spec`): one member's requests and where it may run (nodeSelector,
//! required node affinity, tolerations), in the Group's form. A later pod that asks for more, or
//! for other nodes, than that would be placed as if it were the first: a node could be
//! over-committed, or the pod run where its own constraints forbid. So the webhook reads the pod
//! with the controller's own functions (`muster_k8s::pod::{requests, placement}`) and compares
//! it with the Group's spec.

use muster_k8s::GroupSpec;
use muster_k8s::group::{NodeSelectorTerm, Toleration};
use muster_k8s::labels::SET;
use muster_k8s::pod::{Amounts, Placement, show, show_all};

/// One member's requests as the Group says them, in base units (zero amounts left out, as
/// `muster_k8s::pod::requests` leaves them out). A quantity that does not parse (muster never
/// writes one) is kept as `Err` with its text, so that it differs from any pod's.
fn group_requests(spec: &GroupSpec) -> Result<Amounts, String> {
    let mut out = Amounts::new();
    for (r, q) in &spec.resources {
        let a = q.amount(r).map_err(|e| format!("{r} {} ({e})", json(q)))?;
        if a > 0 {
            out.insert(r.clone(), a);
        }
    }
    Ok(out)
}

/// The resources whose amounts differ, as (the pod's, the group's), each written like
/// `cpu 7, memory 1Gi`; None when they agree.
pub(crate) fn requests_differ(mine: &Amounts, group: &GroupSpec) -> Option<(String, String)> {
    let theirs = match group_requests(group) {
        Ok(t) => t,
        Err(e) => return Some((show_all(mine), format!("an unreadable amount, {e}"))),
    };
    if *mine == theirs {
        return None;
    }
    let names: std::collections::BTreeSet<&String> = mine.keys().chain(theirs.keys()).collect();
    let differ: Vec<&String> = names.into_iter().filter(|r| mine.get(*r) != theirs.get(*r)).collect();
    let list = |a: &Amounts| {
        differ
            .iter()
            .map(|r| format!("{r} {}", show(r, u128::from(a.get(*r).copied().unwrap_or(0)))))
            .collect::<Vec<_>>()
            .join(", ")
    };
    Some((list(mine), list(&theirs)))
}

/// The part of a plain group's spec a pod of set `set` must be alike, and how it was sized: the
/// group's, or that of its set when the group has sets. Errors when the pod names no set, or
/// none of the group's.
pub(crate) fn set_spec(group: &GroupSpec, set: Option<&str>) -> Result<(GroupSpec, &'static str), String> {
    if group.sets.is_empty() {
        return Ok((group.clone(), "(the Group was sized from its first pod)"));
    }
    let names: Vec<&str> = group.sets.iter().map(|s| s.name.as_str()).collect();
    let Some(found) = group.sets.iter().find(|s| Some(s.name.as_str()) == set) else {
        let named = set.map_or("names no set".to_string(), |s| format!("names set {s:?}"));
        return Err(format!(
            "{named}, but the group's sets are {}; label the pod {SET}: <one of them>",
            names.join(", ")
        ));
    };
    let mut spec = group.clone();
    spec.resources.clone_from(&found.resources);
    spec.node_selector.clone_from(&found.node_selector);
    spec.affinity.clone_from(&found.affinity);
    spec.tolerations.clone_from(&found.tolerations);
    Ok((spec, "(the members of its set, sized from the set's first pod)"))
}

pub(crate) const NODE_SELECTOR: &str = "spec.nodeSelector";
pub(crate) const AFFINITY: &str = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution";
pub(crate) const TOLERATIONS: &str = "spec.tolerations";

/// The Group's placement.
pub(crate) fn group_placement(spec: &GroupSpec) -> Placement {
    Placement {
        node_selector: spec.node_selector.clone(),
        affinity: spec.affinity.clone(),
        tolerations: spec.tolerations.clone(),
    }
}

fn json<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

/// A value as the messages show it: compact JSON, or `none`.
fn shown<T: serde::Serialize>(v: &T, empty: bool) -> String {
    if empty { "none".into() } else { json(v) }
}

/// Terms are ORed and the expressions of a term ANDed, and tolerations are a set: their order
/// does not matter.
fn canonical_affinity(terms: &[NodeSelectorTerm]) -> Vec<Vec<String>> {
    let mut out: Vec<Vec<String>> = terms
        .iter()
        .map(|t| {
            let mut e: Vec<String> = t.match_expressions.iter().map(json).collect();
            e.sort();
            e
        })
        .collect();
    out.sort();
    out
}

fn canonical_tolerations(t: &[Toleration]) -> Vec<String> {
    let mut out: Vec<String> = t.iter().map(json).collect();
    out.sort();
    out
}

/// The placement fields that differ: (field, what it is called in the fix, the pod's value, the
/// group's value).
pub(crate) fn placement_differs(
    pod: &Placement,
    group: &Placement,
) -> Vec<(&'static str, &'static str, String, String)> {
    let mut out = Vec::new();
    if pod.node_selector != group.node_selector {
        out.push((
            NODE_SELECTOR,
            "nodeSelector",
            shown(&pod.node_selector, pod.node_selector.is_empty()),
            shown(&group.node_selector, group.node_selector.is_empty()),
        ));
    }
    if canonical_affinity(&pod.affinity) != canonical_affinity(&group.affinity) {
        out.push((
            AFFINITY,
            "required node affinity",
            shown(&pod.affinity, pod.affinity.is_empty()),
            shown(&group.affinity, group.affinity.is_empty()),
        ));
    }
    if canonical_tolerations(&pod.tolerations) != canonical_tolerations(&group.tolerations) {
        out.push((
            TOLERATIONS,
            "tolerations",
            shown(&pod.tolerations, pod.tolerations.is_empty()),
            shown(&group.tolerations, group.tolerations.is_empty()),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::PodSpec;
    use muster_k8s::pod::requests;

    fn pod(yaml: &str) -> PodSpec {
        serde_yaml_ng::from_str(yaml).unwrap()
    }

    fn asks(yaml: &str) -> Amounts {
        requests(&pod(yaml)).unwrap()
    }

    fn group(yaml: &str) -> GroupSpec {
        serde_yaml_ng::from_str(&format!("queue: q\nmembers: {{min: 2}}\n{yaml}")).unwrap()
    }

    #[test]
    fn a_pod_of_a_group_of_sets_is_alike_its_own_set() {
        let g = group(
            "sets:\n- {name: leader, members: {min: 1}, resources: {cpu: 500m}, nodeSelector: {pool: cpu}}\n\
             - {name: worker, members: {min: 3}, resources: {cpu: 2000m}}\n",
        );
        let (leader, _) = set_spec(&g, Some("leader")).unwrap();
        let small = asks("containers:\n- {name: a, resources: {requests: {cpu: 500m}}}\n");
        assert_eq!(requests_differ(&small, &leader), None);
        assert_eq!(group_placement(&leader).node_selector["pool"], "cpu");
        let (worker, _) = set_spec(&g, Some("worker")).unwrap();
        assert!(requests_differ(&small, &worker).is_some(), "a leader-sized pod is no worker");
        assert!(
            set_spec(&g, Some("driver"))
                .unwrap_err()
                .contains("names set \"driver\", but the group's sets are leader, worker")
        );
        assert!(set_spec(&g, None).unwrap_err().starts_with("names no set"));
        // A group of alike members takes any set name.
        let alike = group("resources: {cpu: 1}");
        assert_eq!(set_spec(&alike, Some("x")).unwrap().0, alike);
    }

    #[test]
    fn requests_compare_in_base_units_as_the_controller_writes_them() {
        // The controller writes cpu in millicores and the rest as integers of base units.
        let g = group("resources: {cpu: 1500m, memory: 1073741824}");
        let p = asks("containers:\n- {name: a, resources: {requests: {cpu: '1.5', memory: 1Gi}}}\n");
        assert_eq!(requests_differ(&p, &g), None);
        let p = asks("containers:\n- {name: a, resources: {requests: {cpu: '7', memory: 1Gi, nvidia.com/gpu: '1'}}}\n");
        assert_eq!(
            requests_differ(&p, &g),
            Some(("cpu 7, nvidia.com/gpu 1".to_string(), "cpu 1500m, nvidia.com/gpu 0".to_string()))
        );
    }

    #[test]
    fn a_native_sidecar_counts_as_the_controller_counts_it() {
        // Sized from a pod of 1 cpu + a 4 cpu sidecar: a pod of 5 plain cpu is alike.
        let g = group("resources: {cpu: 5000m}");
        let p = asks(
            "containers:\n- {name: a, resources: {requests: {cpu: '1'}}}\n\
             initContainers:\n- {name: s, restartPolicy: Always, resources: {requests: {cpu: '4'}}}\n",
        );
        assert_eq!(requests_differ(&p, &g), None);
        assert_eq!(
            requests_differ(&asks("containers:\n- {name: a, resources: {requests: {cpu: '1'}}}\n"), &g),
            Some(("cpu 1".to_string(), "cpu 5".to_string()))
        );
    }

    #[test]
    fn placement_is_read_in_the_groups_form_and_order_does_not_matter() {
        let p = pod("containers: [{name: a}]\nnodeSelector: {zone: a}\n\
             affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [\
             {matchExpressions: [{key: x, operator: In, values: ['1']}, {key: y, operator: Exists}]}]}}}\n\
             tolerations:\n- {key: t, operator: Exists, effect: NoSchedule}\n\
             - {key: node.kubernetes.io/not-ready, operator: Exists, effect: NoExecute, tolerationSeconds: 300}\n");
        let g = group(
            "nodeSelector: {zone: a}\n\
             affinity: [{matchExpressions: [{key: y, operator: Exists}, {key: x, operator: In, values: ['1']}]}]\n\
             tolerations:\n- {key: node.kubernetes.io/not-ready, operator: Exists, effect: NoExecute}\n\
             - {key: t, operator: Exists, effect: NoSchedule}\n",
        );
        let placement = |p: &PodSpec| muster_k8s::pod::placement(p, "spec").unwrap();
        assert_eq!(placement_differs(&placement(&p), &group_placement(&g)), vec![]);
        let other = pod("containers: [{name: a}]\nnodeSelector: {zone: b}\n");
        let d = placement_differs(&placement(&other), &group_placement(&g));
        assert_eq!(d.iter().map(|d| d.0).collect::<Vec<_>>(), [NODE_SELECTOR, AFFINITY, TOLERATIONS]);
        assert_eq!((d[0].2.as_str(), d[0].3.as_str()), (r#"{"zone":"b"}"#, r#"{"zone":"a"}"#));
        assert_eq!(d[1].2, "none");
    }
}
