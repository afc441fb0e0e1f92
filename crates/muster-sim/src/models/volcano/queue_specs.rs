//! The Volcano Queues a scenario's tenants become: the mapping the harness writes for the real
//! Volcano and the model's `capacity` plugin reads, in base units.
//! - A tenant's queue: `deserved` = nominal; `capability` = nominal + borrowingLimit (a queue in
//!   no cohort borrows nothing: nominal; no borrowingLimit: none); `guarantee` = the part of
//!   nominal it never lends (nominal - lendingLimit; none without a lendingLimit).
//! - When the cohorts form a tree (a cohort with a parent or with quotas of its own), each cohort
//!   is a Queue too, under its parent's (the top one under Volcano's `root`), and each tenant's
//!   Queue under its cohort's: `deserved` = its subtree's nominal quotas, `capability` = that plus
//!   its own borrowingLimit, `guarantee` = that less its own lendingLimit. Else the queues are flat
//!   and the cohorts have no counterpart.

use std::collections::{BTreeMap, BTreeSet};

use crate::scenario::Tenants;

/// One Volcano Queue's spec, amounts by resource name in base units.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueSpec {
    pub name: String,
    /// The parent Queue (a cohort's); none for a Queue under `root`.
    pub parent: Option<String>,
    /// The tenant queue this is (its index), or none for a cohort's.
    pub tenant: Option<usize>,
    pub deserved: BTreeMap<String, u64>,
    pub capability: BTreeMap<String, u64>,
    pub guarantee: BTreeMap<String, u64>,
}

/// Whether the cohorts form a tree Volcano sees only as hierarchical queues: a cohort with a
/// parent, or with quotas of its own.
pub fn hierarchical(t: &Tenants) -> bool {
    t.cohorts.iter().any(|c| c.parent.is_some() || !c.quotas.is_empty())
}

/// Every Queue, parents before their children: the cohorts' (only when [`hierarchical`]), then
/// the tenants' in their order.
pub fn queue_specs(t: &Tenants) -> Vec<QueueSpec> {
    let tree = hierarchical(t);
    let mut specs = Vec::new();
    if tree {
        let mut cohorts: Vec<&str> = t.cohorts.iter().map(|c| c.name.as_str()).collect();
        cohorts.sort_by_key(|c| cohort_chain(t, Some(c)).count());
        specs.extend(cohorts.into_iter().map(|c| cohort_queue(t, c)));
    }
    specs.extend((0..t.queues.len()).map(|q| tenant_queue(t, q, tree)));
    specs
}

fn tenant_queue(t: &Tenants, q: usize, tree: bool) -> QueueSpec {
    let tenant = &t.queues[q];
    let mut spec = empty(&tenant.name, tenant.cohort.clone().filter(|_| tree), Some(q));
    for r in tenant.quotas.keys() {
        let Some(quota) = t.quota(q, r) else { continue };
        spec.deserved.insert(r.clone(), quota.nominal);
        match (&tenant.cohort, quota.borrowing_limit) {
            (None, _) => _ = spec.capability.insert(r.clone(), quota.nominal),
            (Some(_), Some(b)) => _ = spec.capability.insert(r.clone(), quota.nominal + b),
            (Some(_), None) => {}
        }
        if quota.lending_limit.is_some() {
            spec.guarantee.insert(r.clone(), quota.guaranteed());
        }
    }
    spec
}

fn cohort_queue(t: &Tenants, cohort: &str) -> QueueSpec {
    let parent = t.cohorts.iter().find(|c| c.name == cohort).and_then(|c| c.parent.clone());
    let mut spec = empty(cohort, parent, None);
    for r in subtree_resources(t, cohort) {
        let nominal = subtree_nominal(t, cohort, &r);
        spec.deserved.insert(r.clone(), nominal);
        let own = t.cohort_quota(cohort, &r);
        if let Some(b) = own.and_then(|q| q.borrowing_limit) {
            spec.capability.insert(r.clone(), nominal + b);
        }
        if let Some(l) = own.and_then(|q| q.lending_limit) {
            spec.guarantee.insert(r.clone(), nominal.saturating_sub(l));
        }
    }
    spec
}

fn empty(name: &str, parent: Option<String>, tenant: Option<usize>) -> QueueSpec {
    QueueSpec {
        name: name.to_string(),
        parent,
        tenant,
        deserved: BTreeMap::new(),
        capability: BTreeMap::new(),
        guarantee: BTreeMap::new(),
    }
}

/// `cohort` and the cohorts above it, nearest first (a scenario's cohort tree is checked for
/// cycles when it loads).
fn cohort_chain<'a>(t: &'a Tenants, cohort: Option<&'a str>) -> impl Iterator<Item = &'a str> {
    let parent = |c: &&'a str| t.cohorts.iter().find(|x| x.name == *c).and_then(|x| x.parent.as_deref());
    std::iter::successors(cohort, parent)
}

/// Whether `cohort` is `ancestor` or lies below it.
fn within(t: &Tenants, cohort: Option<&str>, ancestor: &str) -> bool {
    cohort_chain(t, cohort).any(|c| c == ancestor)
}

/// The resources quotas name in `cohort`'s subtree (its own, its cohorts', its tenants').
fn subtree_resources(t: &Tenants, cohort: &str) -> BTreeSet<String> {
    let cohorts = t.cohorts.iter().filter(|c| within(t, Some(&c.name), cohort)).flat_map(|c| c.quotas.keys());
    let queues = t.queues.iter().filter(|q| within(t, q.cohort.as_deref(), cohort)).flat_map(|q| q.quotas.keys());
    cohorts.chain(queues).cloned().collect()
}

/// What `cohort`'s subtree is nominally given of `r`: its cohorts' own nominal quotas and its
/// tenants'.
fn subtree_nominal(t: &Tenants, cohort: &str, r: &str) -> u64 {
    let cohorts =
        t.cohorts.iter().filter(|c| within(t, Some(&c.name), cohort)).filter_map(|c| t.cohort_quota(&c.name, r));
    let queues =
        (0..t.queues.len()).filter(|&q| within(t, t.queues[q].cohort.as_deref(), cohort)).filter_map(|q| t.quota(q, r));
    cohorts.chain(queues).map(|q| q.nominal).sum()
}
