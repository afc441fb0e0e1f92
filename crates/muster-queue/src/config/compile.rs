//! Checking a configuration as a whole and resolving it: queue and cohort names, the cohort
//! tree, quotas in base units, reservations (`EngineConfig::compile`).

use std::collections::{BTreeMap, BTreeSet};

use muster_graph::InputError;

use super::{EngineConfig, FairShareWithinCohort, LabelOperator, Quantity, QueuePolicy, Quota, QuotaSpec};

impl EngineConfig {
    /// Validates every field and resolves quotas and cohorts.
    pub fn compile(&self, file: &str) -> Result<Compiled, InputError> {
        let err = |path: String, msg: String| InputError::new(file, path, msg);
        if self.queues.is_empty() {
            return Err(err("queues".into(), "at least one queue is required".into()));
        }
        if self.fair_share_half_life_s < 0 {
            return Err(err(
                "fairShareHalfLifeS".into(),
                format!("{} is negative; allowed 0 (no history) or more seconds", self.fair_share_half_life_s),
            ));
        }
        if let Some(c) = &self.default_priority_class
            && !self.priority_classes.contains_key(c)
        {
            return Err(err(
                "defaultPriorityClass".into(),
                format!("unknown priority class {c:?}; known: {:?}", self.priority_classes.keys().collect::<Vec<_>>()),
            ));
        }
        // Cohort hierarchy: names unique, parents known, no cycles.
        let mut parent: BTreeMap<&str, Option<&str>> = BTreeMap::new();
        for (i, c) in self.cohorts.iter().enumerate() {
            if !is_name(&c.name) {
                return Err(err(format!("cohorts[{i}].name"), bad_name(&c.name)));
            }
            if parent.insert(&c.name, c.parent.as_deref()).is_some() {
                return Err(err(format!("cohorts[{i}].name"), format!("cohort {:?} is declared twice", c.name)));
            }
        }
        for (i, c) in self.cohorts.iter().enumerate() {
            if let Some(p) = &c.parent
                && !parent.contains_key(p.as_str())
            {
                return Err(err(format!("cohorts[{i}].parent"), format!("unknown cohort {p:?}")));
            }
            let mut seen = vec![c.name.as_str()];
            let mut cur = c.parent.as_deref();
            while let Some(p) = cur {
                if seen.contains(&p) {
                    seen.push(p);
                    return Err(err(format!("cohorts[{i}].parent"), format!("cohort cycle: {}", seen.join(" -> "))));
                }
                seen.push(p);
                cur = parent.get(p).copied().flatten();
            }
        }
        let root_of = |c: &str| -> String {
            let mut cur = c;
            while let Some(Some(p)) = parent.get(cur) {
                cur = p;
            }
            cur.to_string()
        };
        let mut cohorts: BTreeMap<String, CompiledCohort> = BTreeMap::new();
        for (i, c) in self.cohorts.iter().enumerate() {
            let at = |f: &str| format!("cohorts[{i}].{f}");
            let owner = QuotaOwner {
                may_borrow: "cohort with a parent",
                parent_field: "parent",
                has_parent: c.parent.is_some(),
                lends_own_nominal_only: false,
            };
            let quotas = compile_quotas(&c.quotas, &owner, &at).map_err(|(path, msg)| err(path, msg))?;
            cohorts.insert(c.name.clone(), CompiledCohort { parent: c.parent.clone(), quotas, ..Default::default() });
        }
        for c in self.cohorts.iter().filter_map(|c| c.parent.as_ref().map(|p| (p, &c.name))) {
            cohorts.get_mut(c.0).expect("parents checked").child_cohorts.push(c.1.clone());
        }
        let mut queues = BTreeMap::new();
        for (qi, q) in self.queues.iter().enumerate() {
            let at = |f: &str| format!("queues[{qi}].{f}");
            if !is_name(&q.name) {
                return Err(err(at("name"), bad_name(&q.name)));
            }
            if queues.contains_key(&q.name) {
                return Err(err(at("name"), format!("queue {:?} is declared twice", q.name)));
            }
            if let Some(c) = &q.cohort
                && !is_name(c)
            {
                return Err(err(at("cohort"), bad_name(c)));
            }
            for (ei, e) in q.namespace_selector.match_expressions.iter().enumerate() {
                let p = at(&format!("namespaceSelector.matchExpressions[{ei}]"));
                match (e.operator, e.values.is_empty()) {
                    (LabelOperator::In | LabelOperator::NotIn, true) => {
                        return Err(err(p, format!("operator {:?} needs at least one value", e.operator)));
                    }
                    (LabelOperator::Exists | LabelOperator::DoesNotExist, false) => {
                        return Err(err(p, format!("operator {:?} takes no values", e.operator)));
                    }
                    _ => {}
                }
            }
            let owner = QuotaOwner {
                may_borrow: "queue in a cohort",
                parent_field: "cohort",
                has_parent: q.cohort.is_some(),
                lends_own_nominal_only: true,
            };
            let quotas = compile_quotas(&q.quotas, &owner, &at).map_err(|(path, msg)| err(path, msg))?;
            if !(q.fair_share_weight.is_finite() && q.fair_share_weight > 0.0) {
                return Err(err(
                    at("fairShareWeight"),
                    format!("{} is not allowed; use a positive number", q.fair_share_weight),
                ));
            }
            if q.cohort.is_none() && q.preemption.fair_share_within_cohort != FairShareWithinCohort::Never {
                return Err(err(
                    at("preemption.fairShareWithinCohort"),
                    "only a queue in a cohort borrows, so it has no share to even out; set cohort or use Never".into(),
                ));
            }
            if let QueuePolicy::Selective { slowdown: 0, .. } = q.policy {
                return Err(err(
                    at("policy.slowdown"),
                    "a slowdown of 0 is never reached from 1; use 1 (reserve at once) or more".into(),
                ));
            }
            if let QueuePolicy::Conservative { depth } | QueuePolicy::Selective { depth, .. } = q.policy
                && depth == 0
            {
                return Err(err(
                    at("policy.depth"),
                    "a reservation depth of 0 reserves nothing; use bestEffortFifo, or 1 or more".into(),
                ));
            }
            let r = &q.readiness;
            for (f, v) in [("readiness.timeoutS", r.timeout_s), ("readiness.recoveryTimeoutS", r.recovery_timeout_s)] {
                if let Some(v) = v
                    && v <= 0
                {
                    return Err(err(at(f), format!("{v} is not allowed; use a positive number of seconds or null")));
                }
            }
            if r.backoff_base_s <= 0 {
                return Err(err(
                    at("readiness.backoffBaseS"),
                    format!("{} is not allowed; use 1 or more", r.backoff_base_s),
                ));
            }
            if r.backoff_max_s < r.backoff_base_s {
                return Err(err(
                    at("readiness.backoffMaxS"),
                    format!("{} is below backoffBaseS {}", r.backoff_max_s, r.backoff_base_s),
                ));
            }
            if r.max_starting_members == Some(0) {
                return Err(err(
                    at("readiness.maxStartingMembers"),
                    "0 would start nothing; use 1 or more, or null for no window".into(),
                ));
            }
            if q.elastic_max_wait_s < 0 {
                return Err(err(at("elasticMaxWaitS"), format!("{} is negative", q.elastic_max_wait_s)));
            }
            if q.create_pods_ahead_s < 0 {
                return Err(err(
                    at("createPodsAheadS"),
                    format!(
                        "{} is negative; allowed 0 (create pods at admission) or more seconds",
                        q.create_pods_ahead_s
                    ),
                ));
            }
            if q.run_time_limit.grace_s < 0 {
                return Err(err(
                    at("runTimeLimit.graceS"),
                    format!(
                        "{} is negative; allowed 0 (end a group the moment its run time is up) or more seconds",
                        q.run_time_limit.grace_s
                    ),
                ));
            }
            if let Some(c) = &q.cohort {
                // A cohort only queues name is a root without a quota of its own.
                cohorts.entry(c.clone()).or_default().child_queues.push(q.name.clone());
            }
            queues.insert(
                q.name.clone(),
                CompiledQueue {
                    index: qi,
                    cohort: q.cohort.clone(),
                    root_cohort: q.cohort.as_deref().map(root_of),
                    quotas,
                },
            );
        }
        self.check_reservations(file)?;
        Ok(Compiled { queues, cohorts })
    }

    /// Names unique and valid, every field checked ([`ReservationConfig::check`]).
    fn check_reservations(&self, file: &str) -> Result<(), InputError> {
        let known: BTreeSet<&str> = self.queues.iter().map(|q| q.name.as_str()).collect();
        let mut names = std::collections::BTreeSet::new();
        for (i, r) in self.reservations.iter().enumerate() {
            let at = |f: &str| format!("reservations[{i}].{f}");
            if !is_name(&r.name) {
                return Err(InputError::new(file, at("name"), bad_name(&r.name)));
            }
            if !names.insert(r.name.as_str()) {
                return Err(InputError::new(file, at("name"), format!("{:?} is used twice; names are unique", r.name)));
            }
            r.check(&known).map_err(|(f, m)| InputError::new(file, at(&f), m))?;
        }
        Ok(())
    }
}

/// Resolved parts of a configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compiled {
    pub queues: BTreeMap<String, CompiledQueue>,
    /// Every cohort, declared or only named by a queue (a root with no quota of its own).
    pub cohorts: BTreeMap<String, CompiledCohort>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompiledQueue {
    /// Position in `EngineConfig::queues`.
    pub index: usize,
    /// The cohort the queue names.
    pub cohort: Option<String>,
    /// The top of the queue's cohort tree: queues with the same root share unused quota.
    pub root_cohort: Option<String>,
    pub quotas: BTreeMap<String, Quota>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CompiledCohort {
    pub parent: Option<String>,
    pub quotas: BTreeMap<String, Quota>,
    pub child_cohorts: Vec<String>,
    pub child_queues: Vec<String>,
}

/// Whose quotas [`compile_quotas`] checks.
struct QuotaOwner<'a> {
    /// "queue in a cohort" or "cohort with a parent": who may borrow and lend.
    may_borrow: &'a str,
    /// The field that gives it a parent.
    parent_field: &'a str,
    has_parent: bool,
    /// A queue lends at most its nominal; a cohort lends what its subtree holds.
    lends_own_nominal_only: bool,
}

/// Quotas in base units, each field checked. Errors are (path, message).
fn compile_quotas(
    specs: &BTreeMap<String, QuotaSpec>,
    owner: &QuotaOwner<'_>,
    at: &dyn Fn(&str) -> String,
) -> Result<BTreeMap<String, Quota>, (String, String)> {
    let mut quotas = BTreeMap::new();
    for (r, spec) in specs {
        let qp = |f: &str| at(&format!("quotas.{r}.{f}"));
        let amount = |v: &Quantity, f: &str| v.amount(r).map_err(|m| (qp(f), m));
        let nominal = amount(&spec.nominal, "nominal")?;
        let borrowing_limit = spec.borrowing_limit.as_ref().map(|v| amount(v, "borrowingLimit")).transpose()?;
        let lending_limit = spec.lending_limit.as_ref().map(|v| amount(v, "lendingLimit")).transpose()?;
        let (who, field) = (owner.may_borrow, owner.parent_field);
        if !owner.has_parent && borrowing_limit.is_some() {
            return Err((qp("borrowingLimit"), format!("only a {who} can borrow; set {field} or remove the limit")));
        }
        if !owner.has_parent && lending_limit.is_some() {
            return Err((qp("lendingLimit"), format!("only a {who} can lend; set {field} or remove the limit")));
        }
        if owner.lends_own_nominal_only && lending_limit.is_some_and(|l| l > nominal) {
            return Err((qp("lendingLimit"), "is above nominal; a queue can lend at most its nominal".into()));
        }
        quotas.insert(r.clone(), Quota { nominal, borrowing_limit, lending_limit });
    }
    Ok(quotas)
}

fn is_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
        && s.starts_with(|c: char| c.is_ascii_alphanumeric())
        && s.ends_with(|c: char| c.is_ascii_alphanumeric())
}

fn bad_name(s: &str) -> String {
    format!("{s:?} is not a valid name; use 1-63 of a-z, 0-9, '-' and '.'")
}
