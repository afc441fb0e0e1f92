//! Quota arithmetic: how many members of a group a queue's quota (and its cohort's unused quota)
//! allows now, and why not more.

use std::collections::BTreeMap;

use muster_graph::GroupRequest;

use crate::config::{Compiled, Quota};

/// Per-member amounts a group counts against quotas and fair share, by resource name. Every member
/// also takes one `pods` slot, as the matcher counts it.
pub fn per_member(req: &GroupRequest) -> Vec<(String, u64)> {
    let mut v: Vec<(String, u64)> = req.requests.iter().filter(|(_, a)| *a > 0).cloned().collect();
    if !v.iter().any(|(r, _)| r == "pods") {
        v.push(("pods".to_string(), 1));
    }
    v
}

/// Admitted usage per queue, by resource.
pub type Usage = BTreeMap<String, BTreeMap<String, u64>>;

fn used(usage: &Usage, q: &str, r: &str) -> u64 {
    usage.get(q).and_then(|m| m.get(r)).copied().unwrap_or(0)
}

/// The cohort pool for resource `r`: (sum of lendable, sum of use above guaranteed).
fn cohort_pool(compiled: &Compiled, usage: &Usage, root: &str, r: &str) -> (u64, u64) {
    let mut pool = 0u64;
    let mut use_above = 0u64;
    for (name, cq) in &compiled.queues {
        if cq.root_cohort.as_deref() != Some(root) {
            continue;
        }
        if let Some(quota) = cq.quotas.get(r) {
            pool = pool.saturating_add(quota.lendable());
            use_above = use_above.saturating_add(used(usage, name, r).saturating_sub(quota.guaranteed()));
        }
    }
    (pool, use_above)
}

/// Largest member count (up to `want`) queue `q` may add now, and, when it is below `want`, the
/// reason naming the resource and the limit.
pub fn max_members(
    compiled: &Compiled,
    usage: &Usage,
    q: &str,
    amounts: &[(String, u64)],
    want: u32,
    format: &dyn Fn(&str, u64) -> String,
) -> (u32, Option<String>) {
    let cq = &compiled.queues[q];
    let mut best = u64::from(want);
    let mut reason = None;
    for (r, per) in amounts {
        let Some(quota) = cq.quotas.get(r) else { continue };
        if *per == 0 {
            continue;
        }
        let u = used(usage, q, r);
        let (limit, why) = match &cq.root_cohort {
            None => (quota.nominal, format!("nominal {}", format(r, quota.nominal))),
            Some(root) => {
                let own = quota.borrowing_limit.map_or(u64::MAX, |b| quota.nominal.saturating_add(b));
                let (pool, above) = cohort_pool(compiled, usage, root, r);
                let slack = pool.saturating_sub(above);
                // Room within the guaranteed part, plus what the cohort has left to lend.
                let cohort_room = quota.guaranteed().saturating_sub(u).saturating_add(slack);
                let cohort_limit = u.saturating_add(cohort_room);
                if cohort_limit < own {
                    (cohort_limit, format!("cohort {root} has {} left to lend", format(r, slack)))
                } else {
                    (
                        own,
                        format!(
                            "nominal {} + borrowing limit {}",
                            format(r, quota.nominal),
                            quota.borrowing_limit.map_or("unlimited".into(), |b| format(r, b))
                        ),
                    )
                }
            }
        };
        let m = limit.saturating_sub(u) / per;
        if m < best {
            best = m;
            reason = Some(format!(
                "quota: queue {q} uses {} of {r} ({why}); each member needs {}",
                format(r, u),
                format(r, *per)
            ));
        }
    }
    (best.min(u64::from(want)) as u32, reason)
}

/// True if queue `q` stays within its nominal quota for every listed resource after adding
/// `amounts` x `members` (the condition to reclaim lent quota).
pub fn within_nominal(compiled: &Compiled, usage: &Usage, q: &str, amounts: &[(String, u64)], members: u32) -> bool {
    let cq = &compiled.queues[q];
    amounts.iter().all(|(r, per)| {
        cq.quotas.get(r).is_none_or(|quota: &Quota| {
            used(usage, q, r).saturating_add(per.saturating_mul(u64::from(members))) <= quota.nominal
        })
    })
}

/// True if queue `q` uses more than its nominal of any resource in `amounts`.
pub fn borrows(compiled: &Compiled, usage: &Usage, q: &str, amounts: &[(String, u64)]) -> bool {
    let cq = &compiled.queues[q];
    amounts.iter().any(|(r, _)| cq.quotas.get(r).is_some_and(|quota| used(usage, q, r) > quota.nominal))
}

/// Checks the invariant the property tests assert: every queue within nominal + borrowing limit,
/// every cohort within its pool.
pub fn check(compiled: &Compiled, usage: &Usage) -> Result<(), String> {
    for (q, cq) in &compiled.queues {
        for (r, quota) in &cq.quotas {
            let u = used(usage, q, r);
            let limit = match &cq.root_cohort {
                None => quota.nominal,
                Some(_) => quota.borrowing_limit.map_or(u64::MAX, |b| quota.nominal.saturating_add(b)),
            };
            if u > limit {
                return Err(format!("queue {q} uses {u} {r}, above its limit {limit}"));
            }
            if let Some(root) = &cq.root_cohort {
                let (pool, above) = cohort_pool(compiled, usage, root, r);
                if above > pool {
                    return Err(format!("cohort {root} lends {above} {r}, above its pool {pool}"));
                }
            }
        }
    }
    Ok(())
}
