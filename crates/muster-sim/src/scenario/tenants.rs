//! Tenants: the queues a scenario's jobs are submitted to, each with a guaranteed (nominal) quota
//! per resource, what it may borrow from and lend to its cohort, and whether it takes lent quota
//! back by preemption. Written as muster's own queue configuration (`muster_queue::config`), so
//! the sim's muster runs exactly that; the peers' models read the same quotas as their own
//! objects (Kueue's ClusterQueues in Cohorts, Volcano's Queues).

use std::collections::BTreeMap;

use muster_queue::config::{CohortConfig, Compiled, PreemptionConfig, Quota, QuotaSpec};
use muster_queue::{EngineConfig, QueueConfig, QueuePolicy};
use serde::Deserialize;

use super::{input, one_f};
use crate::SimError;

/// The queue every job goes to when a scenario declares no tenants.
pub const DEFAULT_QUEUE: &str = "sim";

/// The scenario's `tenants` section.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TenantsFile {
    /// Cohorts in a tree (a department and its teams); queues naming an undeclared cohort form a
    /// root cohort of their own.
    #[serde(default)]
    pub cohorts: Vec<CohortConfig>,
    pub queues: Vec<TenantQueue>,
}

/// One tenant's queue.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TenantQueue {
    pub name: String,
    #[serde(default)]
    pub cohort: Option<String>,
    /// By resource name: `nominal` (guaranteed), `borrowingLimit`, `lendingLimit`. A resource
    /// not listed is not limited for this queue.
    #[serde(default)]
    pub quotas: BTreeMap<String, QuotaSpec>,
    #[serde(default = "one_f")]
    pub fair_share_weight: f64,
    /// `reclaimWithinCohort`: take lent quota back by evicting borrowers' whole jobs;
    /// `withinQueue: LowerPriority`: evict the queue's own lower-priority jobs.
    #[serde(default)]
    pub preemption: PreemptionConfig,
}

/// The tenants of a workload, checked; empty when the scenario declares none (every job in one
/// queue without quotas).
#[derive(Debug, Clone, Default)]
pub struct Tenants {
    pub cohorts: Vec<CohortConfig>,
    pub queues: Vec<TenantQueue>,
    /// Quotas in base units, by queue name.
    quotas: BTreeMap<String, BTreeMap<String, Quota>>,
    /// Cohorts' own quotas in base units, by cohort name.
    cohort_quotas: BTreeMap<String, BTreeMap<String, Quota>>,
    /// The top of each queue's cohort tree, by queue name.
    roots: BTreeMap<String, Option<String>>,
}

impl Tenants {
    /// Checks the section against the cluster's resources (`offered`); errors name the field
    /// under `tenants`.
    pub fn check(file: &str, t: TenantsFile, offered: &BTreeMap<String, ()>) -> Result<Self, SimError> {
        if t.queues.is_empty() {
            return Err(input(file, "tenants.queues", "no queues; declare at least one, or drop tenants"));
        }
        for (qi, q) in t.queues.iter().enumerate() {
            for r in q.quotas.keys() {
                if !offered.contains_key(r) {
                    let known: Vec<&str> = offered.keys().map(String::as_str).collect();
                    return Err(input(
                        file,
                        format!("tenants.queues[{qi}].quotas.{r}"),
                        format!("no node offers {r:?}; the cluster has {known:?}"),
                    ));
                }
            }
        }
        let mut tenants = Tenants { cohorts: t.cohorts, queues: t.queues, ..Tenants::default() };
        let compiled: Compiled = tenants
            .engine_config(QueuePolicy::BestEffortFifo)
            .compile(file)
            .map_err(|e| input(file, format!("tenants.{}", e.path), e.message))?;
        for (name, q) in compiled.queues {
            tenants.quotas.insert(name.clone(), q.quotas);
            tenants.roots.insert(name, q.root_cohort);
        }
        for (name, c) in compiled.cohorts {
            tenants.cohort_quotas.insert(name, c.quotas);
        }
        Ok(tenants)
    }

    pub fn is_empty(&self) -> bool {
        self.queues.is_empty()
    }

    /// Index of the queue named `name`.
    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.queues.iter().position(|q| q.name == name)
    }

    pub fn names(&self) -> Vec<&str> {
        self.queues.iter().map(|q| q.name.as_str()).collect()
    }

    /// Queue `queue`'s quota of `resource` in base units; none when the queue does not limit it.
    pub fn quota(&self, queue: usize, resource: &str) -> Option<Quota> {
        self.quotas.get(&self.queues[queue].name)?.get(resource).copied()
    }

    /// Cohort `cohort`'s own quota of `resource` in base units; none when it has none.
    pub fn cohort_quota(&self, cohort: &str, resource: &str) -> Option<Quota> {
        self.cohort_quotas.get(cohort)?.get(resource).copied()
    }

    /// The top of queue `queue`'s cohort tree: queues with the same root share unused quota.
    pub fn root_cohort(&self, queue: usize) -> Option<&str> {
        self.roots.get(&self.queues[queue].name)?.as_deref()
    }

    /// The name of queue `queue` (an index into `queues`), or [`DEFAULT_QUEUE`] for a job of
    /// none.
    pub fn name_of(&self, queue: Option<usize>) -> &str {
        queue.map_or(DEFAULT_QUEUE, |q| self.queues[q].name.as_str())
    }

    /// muster's engine configuration for these tenants, every queue with `policy`; without
    /// tenants, the one queue every job goes to.
    pub fn engine_config(&self, policy: QueuePolicy) -> EngineConfig {
        let mut config = EngineConfig::single_queue(DEFAULT_QUEUE);
        config.queues[0].policy = policy;
        if self.is_empty() {
            return config;
        }
        config.cohorts = self.cohorts.clone();
        config.queues = self
            .queues
            .iter()
            .map(|t| {
                let mut q = QueueConfig::new(&t.name);
                q.cohort = t.cohort.clone();
                q.quotas = t.quotas.clone();
                q.fair_share_weight = t.fair_share_weight;
                q.preemption = t.preemption;
                q.policy = policy;
                q
            })
            .collect();
        config
    }
}
