//! Quota arithmetic: how many members of a group a queue's quota (and its cohort tree's unused
//! quota, `tree.rs`) allows now, and why not more.

mod reclaim;
mod tree;

use std::collections::BTreeMap;

use muster_graph::GroupRequest;

use crate::config::{Compiled, Quota};
pub use reclaim::{may_reclaim_from, reclaim_standing};
use tree::{Bound, Node, ResourceTree};

/// What one member asks against quotas and fair share, by resource name: `requests`, and one
/// `pods` slot as the matcher counts it.
fn with_pod(requests: &[(String, u64)]) -> Vec<(String, u64)> {
    let mut v: Vec<(String, u64)> = requests.iter().filter(|(_, a)| *a > 0).cloned().collect();
    if !v.iter().any(|(r, _)| r == "pods") {
        v.push(("pods".to_string(), 1));
    }
    v
}

/// What one member of set `k` counts against quotas and fair share, by resource name: its
/// requests, the devices it asks of each driver (under the driver's name, as the graph counts
/// them; a quota on `gpu.example.com` bounds them, and one on the extended resource a pod asked
/// them by, such as `nvidia.com/gpu`, too) and one `pods` slot.
fn set_asks(req: &GroupRequest, k: usize) -> Vec<(String, u64)> {
    let mut v = with_pod(req.set_requests_of(k));
    for d in req.set_devices_of(k) {
        for name in std::iter::once(&d.driver).chain(&d.extended_resource) {
            match v.iter_mut().find(|(r, _)| r == name) {
                Some((_, a)) => *a = a.saturating_add(u64::from(d.count)),
                None => v.push((name.clone(), u64::from(d.count))),
            }
        }
    }
    v
}

/// What the members `indices` of a group count in all, by resource name: each set's asks once,
/// times its members among them (a group of hundreds of members is counted per set, not per
/// member).
pub fn members_asks(req: &GroupRequest, indices: impl IntoIterator<Item = u32>) -> BTreeMap<String, u64> {
    let mut per_set: BTreeMap<usize, u64> = BTreeMap::new();
    for index in indices {
        *per_set.entry(req.set_of(index).0).or_default() += 1;
    }
    let mut total: BTreeMap<String, u64> = BTreeMap::new();
    for (k, members) in per_set {
        for (r, a) in set_asks(req, k) {
            let e = total.entry(r).or_default();
            *e = e.saturating_add(a.saturating_mul(members));
        }
    }
    total
}

/// What a group counts against quotas as its member count varies: so much per member along
/// the steps its members are counted in (`GroupRequest::member_steps`: each set's minimum, then
/// each set's extra members; for alike members, one step).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Asks {
    /// (members, what each asks), in order; the last step is unbounded.
    steps: Vec<(u32, Vec<(String, u64)>)>,
}

impl Asks {
    /// What admitting the group asks.
    pub fn of(req: &GroupRequest) -> Self {
        Self { steps: req.member_steps().into_iter().map(|(k, n)| (n, set_asks(req, k))).collect() }
    }

    /// What adding members to set `k` of the group while it runs asks (it grows one set at a
    /// time: `GroupRequest::growing_set`).
    pub fn growth(req: &GroupRequest, k: usize) -> Self {
        Self { steps: vec![(u32::MAX, set_asks(req, k))] }
    }

    /// The total for `members` members, by resource name.
    pub fn with(&self, members: u32) -> Vec<(String, u64)> {
        let mut total: BTreeMap<String, u64> = BTreeMap::new();
        let mut left = members;
        for (n, per) in &self.steps {
            let take = u64::from((*n).min(left));
            left -= take as u32;
            for (r, a) in per {
                let e = total.entry(r.clone()).or_default();
                *e = e.saturating_add(a.saturating_mul(take));
            }
        }
        total.into_iter().collect()
    }

    /// The most members whose total of resource `r` stays within `room`, and what the next
    /// member would ask of it (0: any number fits).
    fn most_within(&self, r: &str, room: u64) -> (u64, u64) {
        let (mut members, mut left) = (0u64, room);
        for (n, per) in &self.steps {
            let per = amount_of(per, r);
            let n = u64::from(*n);
            let fits = left.checked_div(per).map_or(n, |m| m.min(n));
            members = members.saturating_add(fits);
            if fits < n {
                return (members, per);
            }
            left -= fits * per;
        }
        (members, 0)
    }

    /// Resources the group asks any of.
    fn resources(&self) -> impl Iterator<Item = &str> {
        let mut names: Vec<&str> = self.steps.iter().flat_map(|(_, per)| per).map(|(r, _)| r.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        names.into_iter()
    }

    /// Whether every member asks the same of resource `r`.
    fn uniform(&self, r: &str) -> bool {
        self.steps.windows(2).all(|w| amount_of(&w[0].1, r) == amount_of(&w[1].1, r))
    }
}

/// The amount of resource `r` in `amounts`, or 0.
fn amount_of(amounts: &[(String, u64)], r: &str) -> u64 {
    amounts.iter().find(|(p, _)| p == r).map_or(0, |(_, a)| *a)
}

/// Admitted usage per queue, by resource.
pub type Usage = BTreeMap<String, BTreeMap<String, u64>>;

pub fn used(usage: &Usage, q: &str, r: &str) -> u64 {
    usage.get(q).and_then(|m| m.get(r)).copied().unwrap_or(0)
}

/// Largest member count (up to `want`) queue `q` may add now, and, when it is below `want`, the
/// reason naming the resource and the limit.
pub fn max_members(
    compiled: &Compiled,
    usage: &Usage,
    q: &str,
    asks: &Asks,
    want: u32,
    format: &dyn Fn(&str, u64) -> String,
) -> (u32, Option<String>) {
    let cq = &compiled.queues[q];
    let mut best = u64::from(want);
    let mut reason = None;
    for r in asks.resources() {
        let Some(quota) = cq.quotas.get(r) else { continue };
        let u = used(usage, q, r);
        let (limit, bound) = limit_of(compiled, usage, q, r);
        let (m, next) = asks.most_within(r, limit.saturating_sub(u));
        if m < best {
            best = m;
            let why = why_bounded(compiled, bound, r, quota, format);
            let each = if asks.uniform(r) {
                format!("each member needs {}", format(r, next))
            } else {
                let total = amount_of(&asks.with(m.min(u64::from(u32::MAX)) as u32), r);
                format!("it fits {m} of its members ({}); its next member needs {}", format(r, total), format(r, next))
            };
            reason = Some(format!("quota: queue {q} uses {} of {r} ({why}); {each}", format(r, u)));
        }
    }
    (best.min(u64::from(want)) as u32, reason)
}

/// The most of resource `r` queue `q` may hold with the cohort trees' use as in `usage`, and
/// what bounds it (`why_bounded` says it, when a reason needs it): its nominal without a cohort;
/// else what it holds plus what its cohort tree lets it take (`tree.rs`).
fn limit_of<'a>(compiled: &'a Compiled, usage: &'a Usage, q: &'a str, r: &'a str) -> (u64, Bound<'a>) {
    let (more, bound) = ResourceTree { compiled, usage, r }.available(Node::Queue(q));
    (used(usage, q, r).saturating_add(more), bound)
}

/// Why a queue's limit is what it is: what bounds it, named.
fn why_bounded(
    compiled: &Compiled,
    bound: Bound<'_>,
    r: &str,
    quota: &Quota,
    format: &dyn Fn(&str, u64) -> String,
) -> String {
    let nominal = format(r, quota.nominal);
    match bound {
        Bound::Nominal => format!("nominal {nominal}"),
        Bound::BorrowingLimit(Node::Queue(_)) => format!(
            "nominal {nominal} + borrowing limit {}",
            quota.borrowing_limit.map_or("unlimited".into(), |b| format(r, b))
        ),
        Bound::BorrowingLimit(Node::Cohort(c)) => {
            let limit = compiled.cohorts[c].quotas.get(r).and_then(|q| q.borrowing_limit).unwrap_or(0);
            format!("cohort {c} may borrow at most {} from above what it brings", format(r, limit))
        }
        Bound::Pool { cohort, left } => format!("cohort {cohort} has {} left to lend", format(r, left)),
    }
}

/// Why `members` members of a group can never be in queue `q` at once, even with the whole
/// cohort tree idle; None if they can.
pub fn never_fits(
    compiled: &Compiled,
    q: &str,
    asks: &Asks,
    members: u32,
    format: &dyn Fn(&str, u64) -> String,
) -> Option<String> {
    let cq = &compiled.queues[q];
    let idle = Usage::new();
    asks.with(members).iter().find_map(|(r, need)| {
        let quota = cq.quotas.get(r)?;
        let (limit, bound) = ResourceTree { compiled, usage: &idle, r }.available(Node::Queue(q));
        (*need > limit).then(|| {
            let why = match bound {
                Bound::Nominal => format!("its nominal {}; it is in no cohort", format(r, quota.nominal)),
                Bound::Pool { cohort, .. } => format!(
                    "its nominal {} + {} the rest of cohort {cohort} can lend",
                    format(r, quota.nominal),
                    format(r, limit.saturating_sub(quota.nominal))
                ),
                bound => format!("its {}", why_bounded(compiled, bound, r, quota, format)),
            };
            format!(
                "quota: its {members} members need {r} {}, but queue {q} can hold at most {} ({why})",
                format(r, *need),
                format(r, limit)
            )
        })
    })
}

/// Whether queue `q` would use more than its nominal quota of some resource with `adding` more
/// (totals by resource name) on top of what it uses.
pub fn would_borrow(compiled: &Compiled, usage: &Usage, q: &str, adding: &[(String, u64)]) -> bool {
    let quotas = &compiled.queues[q].quotas;
    adding.iter().any(|(r, a)| quotas.get(r.as_str()).is_some_and(|n| used(usage, q, r).saturating_add(*a) > n.nominal))
}

/// True if queue `q` uses more than its nominal of any resource the group asks.
pub fn borrows(compiled: &Compiled, usage: &Usage, q: &str, asks: &Asks) -> bool {
    let cq = &compiled.queues[q];
    asks.resources().any(|r| cq.quotas.get(r).is_some_and(|quota| used(usage, q, r) > quota.nominal))
}

/// Queue `q`'s dominant share of what it holds above its nominal quotas, by `used` (amount of a
/// resource): the largest, over the resources it has a quota of other than pods, of its use above
/// nominal divided by `capacity` (the cluster's, of that resource). 0 for a queue within nominal.
pub fn borrowed_share(compiled: &Compiled, q: &str, used: &dyn Fn(&str) -> u64, capacity: &dyn Fn(&str) -> u64) -> f64 {
    let mut share: f64 = 0.0;
    for (r, quota) in &compiled.queues[q].quotas {
        let cap = capacity(r);
        if r != "pods" && cap > 0 {
            share = share.max(used(r).saturating_sub(quota.nominal) as f64 / cap as f64);
        }
    }
    share
}

/// Checks the invariant the property tests assert: every queue in no cohort within its nominal,
/// every node of every cohort tree within what it may draw (`tree.rs`).
pub fn check(compiled: &Compiled, usage: &Usage) -> Result<(), String> {
    for (q, cq) in compiled.queues.iter().filter(|(_, cq)| cq.cohort.is_none()) {
        for (r, quota) in &cq.quotas {
            let u = used(usage, q, r);
            if u > quota.nominal {
                return Err(format!("queue {q} uses {u} {r}, above its limit {}", quota.nominal));
            }
        }
    }
    let mut resources: Vec<&str> =
        compiled.queues.values().flat_map(|cq| cq.quotas.keys()).map(String::as_str).collect();
    resources.extend(compiled.cohorts.values().flat_map(|c| c.quotas.keys()).map(String::as_str));
    resources.sort_unstable();
    resources.dedup();
    match resources.into_iter().find_map(|r| ResourceTree { compiled, usage, r }.breach()) {
        Some(breach) => Err(breach),
        None => Ok(()),
    }
}
