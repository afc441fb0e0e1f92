//! What one pod requests, and whether a group of such pods can ever fit its queue's quota.

use std::collections::BTreeMap;

use muster_k8s::{QueueSpec, pod};

/// Amounts in base units (millicores, bytes, counts) by resource name.
pub(crate) type Amounts = BTreeMap<String, u128>;

/// What the scheduler reserves for one member asking `requests` (muster_k8s::pod::requests), and
/// one of `pods`.
pub(crate) fn member_requests(requests: &pod::Amounts) -> Amounts {
    let mut total: Amounts = requests.iter().map(|(k, v)| (k.clone(), u128::from(*v))).collect();
    total.insert("pods".into(), 1);
    total
}

pub(crate) use muster_k8s::pod::show;

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
    parts: &[(u64, Amounts)],
    field: &str,
    fix: &str,
) -> Option<String> {
    let mut over = Vec::new();
    for (r, (limit, why)) in hard_limits(spec) {
        // Pods asking alike are one term: `5 pods x cpu 2`, not `4 pods x cpu 2 + 1 pods x cpu 2`.
        let mut asked: Vec<(u64, u128)> = Vec::new();
        for (pods, per_pod) in parts {
            let each = per_pod.get(&r).copied().unwrap_or(0);
            match asked.iter_mut().find(|(_, e)| *e == each) {
                Some((n, _)) => *n = n.saturating_add(*pods),
                None => asked.push((*pods, each)),
            }
        }
        let need =
            asked.iter().fold(0u128, |sum, (pods, each)| sum.saturating_add(each.saturating_mul(u128::from(*pods))));
        if need > limit {
            let terms: Vec<String> = asked
                .iter()
                .filter(|(_, each)| *each > 0)
                .map(|(pods, each)| {
                    format!("{pods} pod{} x {r} {}", if *pods == 1 { "" } else { "s" }, show(&r, *each))
                })
                .collect();
            over.push(format!(
                "{} = {r} {}, but queue {queue} allows at most {r} {} ({why})",
                terms.join(" + "),
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
    use k8s_openapi::api::core::v1::PodSpec;

    #[test]
    fn a_pod_counts_one_of_pods_beside_what_it_requests() {
        let s: PodSpec =
            serde_yaml_ng::from_str("containers:\n- {name: a, resources: {requests: {cpu: 500m}}}\n").unwrap();
        assert_eq!(
            member_requests(&pod::requests(&s).unwrap()),
            Amounts::from([("cpu".to_string(), 500), ("pods".to_string(), 1)])
        );
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
        assert_eq!(never_fits("q", &q, &[(6, per_pod.clone())], "spec.parallelism", "fix"), None);
        assert_eq!(
            never_fits("q", &q, &[(7, per_pod.clone())], "spec.parallelism", "fix").unwrap(),
            "spec.parallelism: 7 pods x cpu 1 = cpu 7, but queue q allows at most cpu 6 \
             (nominal 4 + borrowingLimit 2 from cohort c), so the group could never start; fix"
        );
    }
}
