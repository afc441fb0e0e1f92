//! The cluster-scoped `Queue`: quotas, cohort, policy, fair share, namespaces, readiness,
//! preemption and run-time limits. Mirrors `muster_queue::QueueConfig`; [`QueueSpec::to_config`] converts. Quotas and
//! the namespace selector are the engine's own types (re-exported here).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use muster_graph::InputError;
use muster_queue::config::{
    FairShareStrategies, FairShareStrategy, FairShareWithinCohort, PreemptionConfig, RunTimeLimitConfig,
    RunTimeLimitMode, WithinQueue,
};
pub use muster_queue::config::{LabelOperator, LabelRequirement, NamespaceSelector, QuotaSpec};
use muster_queue::{EngineConfig, QueueConfig, QueuePolicy, ReadinessConfig, RequeueOrder};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::Quantity;

/// A queue of groups with its quotas and rules. Cluster-scoped; groups name it in `spec.queue`.
#[derive(CustomResource, Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "muster.dev",
    version = "v1alpha1",
    kind = "Queue",
    doc = "A muster Queue: quotas, cohort, policy and rules for the groups that name it.",
    status = "QueueStatus",
    category = "muster",
    derive = "PartialEq",
    printcolumn = r#"{"name": "Policy", "type": "string", "jsonPath": ".spec.policy.kind"}"#,
    printcolumn = r#"{"name": "Cohort", "type": "string", "jsonPath": ".spec.cohort"}"#,
    printcolumn = r#"{"name": "Accepted", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Accepted\")].status"}"#,
    printcolumn = r#"{"name": "Pending", "type": "integer", "jsonPath": ".status.pendingGroups"}"#,
    printcolumn = r#"{"name": "Admitted", "type": "integer", "jsonPath": ".status.admittedGroups"}"#,
    printcolumn = r#"{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct QueueSpec {
    /// Quotas by resource name (cpu, memory, nvidia.com/gpu, ...). A resource not listed is not
    /// limited by the queue.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub quotas: BTreeMap<String, QuotaSpec>,
    /// Queues in the same cohort lend each other unused quota.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cohort: Option<String>,
    /// How the queue picks among its pending groups; default selective reservation, depth 16, at
    /// slowdown 3.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<PolicySpec>,
    /// Share of the cohort relative to other queues; default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.001))]
    pub fair_share_weight: Option<f64>,
    /// Which namespaces may submit to the queue; absent = every namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_selector: Option<NamespaceSelector>,
    /// Readiness timeouts and requeue backoff.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub readiness: Option<ReadinessSpec>,
    /// Preemption within the queue and the cohort; default none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preemption: Option<PreemptionSpec>,
    /// Seconds an elastic group waits for all `max` members before it starts with fewer; default 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub elastic_max_wait_seconds: Option<i64>,
    /// Seconds before a reserved group's start at which its workload is released to make its
    /// pods, which wait unbound until the group is admitted (the first in line without a
    /// reservation: at once); default 60, 0 = only at admission.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub create_pods_ahead_seconds: Option<i64>,
    /// Whether the run times groups declare (annotation muster.dev/duration-seconds, a Group's
    /// spec.durationSeconds) are limits; default Enforce with a grace of 60 seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_time_limit: Option<RunTimeLimitSpec>,
}

/// What a declared run time binds. Backfill starts groups ahead of a reservation on the run times
/// they declare; under Enforce a group that outruns its run time plus the grace is ended (its pods
/// stopped, the group Failed with reason RunTimeExceeded), so a reservation starts at most the
/// grace late.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunTimeLimitSpec {
    /// Enforce (default): a group is ended at its declared run time, counted from admission,
    /// plus graceSeconds. Advisory: a declared run time only plans, and a group that outruns it
    /// delays the reservations made behind it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<RunTimeLimitModeSpec>,
    /// Seconds a group may run past its declared run time before it is ended; default 60.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub grace_seconds: Option<i64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum RunTimeLimitModeSpec {
    Enforce,
    Advisory,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum PolicyKind {
    /// First come first served: the head gets a reservation and nothing behind it may start.
    StrictFifo,
    /// Any group that fits starts, in order; no reservations.
    BestEffortFifo,
    /// The head gets a reservation; groups behind it start if they do not delay it.
    Easy,
    /// The first `depth` blocked groups get reservations; groups behind start if they delay none.
    Conservative,
    /// As conservative, but a group gets its reservation only once its slowdown so far ((wait +
    /// run time) / run time) reaches `slowdown`; until then it starts where it fits. The default.
    Selective,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PolicySpec {
    pub kind: PolicyKind,
    /// Reservation depth of conservative backfill and selective reservation (default 16).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub depth: Option<u32>,
    /// Selective reservation's threshold (default 3): the slowdown at which a waiting group is
    /// given a reservation; 1 reserves at once, as conservative does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub slowdown: Option<u32>,
}

/// Default reservation depth of conservative backfill and selective reservation.
pub const DEFAULT_DEPTH: u32 = 16;
/// Default threshold of selective reservation: chosen on the workload suite (docs/benchmarks.md).
pub const DEFAULT_SLOWDOWN: u32 = 3;

/// Readiness timeouts and requeue backoff (Kueue's waitForPodsReady). Absent fields take the
/// defaults of `muster_queue::ReadinessConfig`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReadinessSpec {
    /// Seconds from admission until every member must be ready; 0 disables; default 300.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub timeout_seconds: Option<i64>,
    /// Seconds a running group may stay below full readiness; 0 disables; default 300.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub recovery_timeout_seconds: Option<i64>,
    /// First requeue delay; the n-th is base * 2^(n-1), capped at backoffMaxSeconds; default 60.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub backoff_base_seconds: Option<i64>,
    /// Cap of the requeue delay; default 3600.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub backoff_max_seconds: Option<i64>,
    /// Requeues allowed before the group is deactivated; absent = requeue forever.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff_limit: Option<u32>,
    /// Which time orders a requeued group: Eviction (default, behind groups that waited meanwhile)
    /// or Creation (its old place).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requeue_order: Option<RequeueOrderSpec>,
    /// A start window: at most this many members of the queue's admitted groups not yet ready
    /// (pods being created, pulled, started); the next group waits until enough are ready, and
    /// one larger than the window starts alone. 0 or absent: no window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_starting_members: Option<u32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum RequeueOrderSpec {
    Eviction,
    Creation,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PreemptionSpec {
    /// May a pending group evict lower-priority groups of its own queue? Default Never.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub within_queue: Option<WithinQueueSpec>,
    /// May a pending group within its nominal quota evict borrowing groups of the cohort?
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reclaim_within_cohort: Option<bool>,
    /// May a pending group of a borrowing queue evict groups of other borrowing queues of the
    /// cohort while its queue's share of the borrowed room stays at most theirs (Kueue's fair
    /// sharing, LessThanOrEqualToFinalShare)? Default Never.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fair_share_within_cohort: Option<FairShareWithinCohortSpec>,
    /// The rules fair-share preemption keeps, in Kueue's order: `[LessThanOrEqualToFinalShare]`
    /// (default), `[LessThanInitialShare]` or both (docs/queue.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fair_share_strategies: Option<Vec<FairShareStrategySpec>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum FairShareStrategySpec {
    LessThanOrEqualToFinalShare,
    LessThanInitialShare,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum FairShareWithinCohortSpec {
    Never,
    LowerOrEqualPriority,
    Any,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum WithinQueueSpec {
    Never,
    LowerPriority,
}

/// What the controller reports about a queue.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct QueueStatus {
    /// `Accepted`: whether muster honours the queue (False: the message says why, naming the
    /// field to fix).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Groups waiting in the queue (Queued or Reserved), as of the last report.
    #[serde(default)]
    pub pending_groups: u32,
    /// Groups holding a placement (Admitted or Running).
    #[serde(default)]
    pub admitted_groups: u32,
    /// What the admitted groups hold, per resource (what the quotas count).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub usage: BTreeMap<String, Quantity>,
    /// How close the queue's estimated starts came to the admissions that followed; absent until
    /// a group that waited with an estimate is admitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimates: Option<EstimateAccuracy>,
}

/// The accuracy of a queue's latest estimated starts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EstimateAccuracy {
    /// Groups scored: the latest admitted (at most 50) that waited a second or more and were given
    /// an estimated start.
    pub groups: u32,
    /// The median over them of |admission - first estimated start| / wait, in percent.
    pub median_error_percent: u32,
}

/// Engine field names that the CRD spells differently (seconds in full).
const RENAMED: [(&str, &str); 7] = [
    ("recoveryTimeoutS", "recoveryTimeoutSeconds"),
    ("timeoutS", "timeoutSeconds"),
    ("backoffBaseS", "backoffBaseSeconds"),
    ("backoffMaxS", "backoffMaxSeconds"),
    ("elasticMaxWaitS", "elasticMaxWaitSeconds"),
    ("createPodsAheadS", "createPodsAheadSeconds"),
    ("graceS", "graceSeconds"),
];

impl QueueSpec {
    /// The engine's configuration of queue `name`, validated as the engine validates it. Errors
    /// name the field of the Queue object, such as `spec.quotas.cpu.nominal`.
    pub fn to_config(&self, name: &str) -> Result<QueueConfig, InputError> {
        let file = format!("Queue/{name}");
        let policy = match self.policy {
            None => QueuePolicy::Selective { depth: DEFAULT_DEPTH, slowdown: DEFAULT_SLOWDOWN },
            Some(PolicySpec { kind: PolicyKind::Selective, depth, slowdown }) => QueuePolicy::Selective {
                depth: depth.unwrap_or(DEFAULT_DEPTH),
                slowdown: slowdown.unwrap_or(DEFAULT_SLOWDOWN),
            },
            Some(PolicySpec { kind, slowdown: Some(_), .. }) => {
                return Err(InputError::new(
                    &file,
                    "spec.policy.slowdown",
                    format!("only kind selective takes a slowdown, not {kind:?}; remove slowdown"),
                ));
            }
            Some(PolicySpec { kind: PolicyKind::Conservative, depth, .. }) => {
                QueuePolicy::Conservative { depth: depth.unwrap_or(DEFAULT_DEPTH) }
            }
            Some(PolicySpec { kind, depth: Some(_), .. }) => {
                return Err(InputError::new(
                    &file,
                    "spec.policy.depth",
                    format!("only kinds conservative and selective take a depth, not {kind:?}; remove depth"),
                ));
            }
            Some(PolicySpec { kind: PolicyKind::StrictFifo, .. }) => QueuePolicy::StrictFifo,
            Some(PolicySpec { kind: PolicyKind::BestEffortFifo, .. }) => QueuePolicy::BestEffortFifo,
            Some(PolicySpec { kind: PolicyKind::Easy, .. }) => QueuePolicy::Easy,
        };
        let defaults = ReadinessConfig::default();
        let r = self.readiness.clone().unwrap_or_default();
        // 0 disables a timeout in the CRD; the engine says None.
        let timeout = |v: Option<i64>, default: Option<i64>| match v {
            Some(0) => None,
            Some(v) => Some(v),
            None => default,
        };
        let readiness = ReadinessConfig {
            timeout_s: timeout(r.timeout_seconds, defaults.timeout_s),
            recovery_timeout_s: timeout(r.recovery_timeout_seconds, defaults.recovery_timeout_s),
            backoff_base_s: r.backoff_base_seconds.unwrap_or(defaults.backoff_base_s),
            backoff_max_s: r.backoff_max_seconds.unwrap_or(defaults.backoff_max_s),
            backoff_limit: r.backoff_limit,
            requeue_order: match r.requeue_order {
                None => defaults.requeue_order,
                Some(RequeueOrderSpec::Eviction) => RequeueOrder::Eviction,
                Some(RequeueOrderSpec::Creation) => RequeueOrder::Creation,
            },
            max_starting_members: r.max_starting_members.filter(|&n| n > 0),
        };
        let p = self.preemption.clone().unwrap_or_default();
        let limit = self.run_time_limit.clone().unwrap_or_default();
        let limit_defaults = RunTimeLimitConfig::default();
        let config = QueueConfig {
            name: name.to_string(),
            cohort: self.cohort.clone(),
            namespace_selector: self.namespace_selector.clone().unwrap_or_default(),
            quotas: self.quotas.clone(),
            policy,
            fair_share_weight: self.fair_share_weight.unwrap_or(1.0),
            readiness,
            preemption: PreemptionConfig {
                within_queue: match p.within_queue {
                    None | Some(WithinQueueSpec::Never) => WithinQueue::Never,
                    Some(WithinQueueSpec::LowerPriority) => WithinQueue::LowerPriority,
                },
                reclaim_within_cohort: p.reclaim_within_cohort.unwrap_or(false),
                fair_share_within_cohort: match p.fair_share_within_cohort {
                    None | Some(FairShareWithinCohortSpec::Never) => FairShareWithinCohort::Never,
                    Some(FairShareWithinCohortSpec::LowerOrEqualPriority) => {
                        FairShareWithinCohort::LowerOrEqualPriority
                    }
                    Some(FairShareWithinCohortSpec::Any) => FairShareWithinCohort::Any,
                },
                fair_share_strategies: match &p.fair_share_strategies {
                    None => FairShareStrategies::default(),
                    Some(list) => {
                        let list = list.iter().map(|s| match s {
                            FairShareStrategySpec::LessThanOrEqualToFinalShare => {
                                FairShareStrategy::LessThanOrEqualToFinalShare
                            }
                            FairShareStrategySpec::LessThanInitialShare => FairShareStrategy::LessThanInitialShare,
                        });
                        FairShareStrategies::try_from(list.collect::<Vec<_>>())
                            .map_err(|m| InputError::new(&file, "spec.preemption.fairShareStrategies", m))?
                    }
                },
            },
            elastic_max_wait_s: self.elastic_max_wait_seconds.unwrap_or(0),
            create_pods_ahead_s: self.create_pods_ahead_seconds.unwrap_or(QueueConfig::new(name).create_pods_ahead_s),
            run_time_limit: RunTimeLimitConfig {
                mode: match limit.mode {
                    None => limit_defaults.mode,
                    Some(RunTimeLimitModeSpec::Enforce) => RunTimeLimitMode::Enforce,
                    Some(RunTimeLimitModeSpec::Advisory) => RunTimeLimitMode::Advisory,
                },
                grace_s: limit.grace_seconds.unwrap_or(limit_defaults.grace_s),
            },
            closed: false,
        };
        // The engine's own checks, with its paths (`queues[0].readiness.backoffBaseS`) turned into
        // the object's (`spec.readiness.backoffBaseSeconds`).
        let mut engine = EngineConfig::single_queue(name);
        engine.queues = vec![config];
        engine.compile(&file).map_err(|e| {
            let mut path = e.path.strip_prefix("queues[0].").map_or(e.path.clone(), |p| format!("spec.{p}"));
            if path == "spec.name" {
                path = "metadata.name".into();
            }
            if let Some((old, new)) = RENAMED.iter().find(|(old, _)| path.ends_with(old)) {
                path = format!("{}{new}", &path[..path.len() - old.len()]);
            }
            InputError::new(&file, path, e.message)
        })?;
        Ok(engine.queues.remove(0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(yaml: &str) -> QueueSpec {
        serde_yaml_ng::from_str(yaml).unwrap()
    }

    fn err(yaml: &str) -> InputError {
        spec(yaml).to_config("team-a").unwrap_err()
    }

    #[test]
    fn empty_spec_takes_the_engine_defaults() {
        assert_eq!(QueueSpec::default().to_config("team-a").unwrap(), QueueConfig::new("team-a"));
    }

    #[test]
    fn full_spec_converts_field_by_field() {
        let c = spec(
            "quotas:\n  cpu: {nominal: 64, borrowingLimit: 32, lendingLimit: '16'}\n  nvidia.com/gpu: {nominal: 8}\n\
             cohort: research\npolicy: {kind: conservative, depth: 4}\nfairShareWeight: 2.5\n\
             namespaceSelector:\n  matchLabels: {team: a}\n  matchExpressions: [{key: env, operator: NotIn, values: [prod]}]\n  namespaces: [ml]\n\
             readiness: {timeoutSeconds: 0, recoveryTimeoutSeconds: 120, backoffBaseSeconds: 10, backoffMaxSeconds: 100, backoffLimit: 3, requeueOrder: Creation, maxStartingMembers: 500}\n\
             preemption: {withinQueue: LowerPriority, reclaimWithinCohort: true, fairShareWithinCohort: Any,\n\
             fairShareStrategies: [LessThanOrEqualToFinalShare, LessThanInitialShare]}\nelasticMaxWaitSeconds: 30\n\
             createPodsAheadSeconds: 0\nrunTimeLimit: {mode: Advisory, graceSeconds: 5}\n",
        )
        .to_config("team-a")
        .unwrap();
        assert_eq!(c.cohort.as_deref(), Some("research"));
        assert_eq!(c.policy, QueuePolicy::Conservative { depth: 4 });
        assert_eq!(c.fair_share_weight, 2.5);
        assert_eq!(c.quotas["cpu"].nominal, muster_queue::config::Quantity::Int(64));
        assert_eq!(c.quotas["cpu"].lending_limit, Some(muster_queue::config::Quantity::Text("16".into())));
        assert_eq!(c.quotas["nvidia.com/gpu"].borrowing_limit, None);
        assert_eq!(c.namespace_selector.match_expressions[0].operator, LabelOperator::NotIn);
        assert_eq!(c.namespace_selector.namespaces, ["ml"]);
        assert_eq!(
            c.readiness,
            ReadinessConfig {
                timeout_s: None,
                recovery_timeout_s: Some(120),
                backoff_base_s: 10,
                backoff_max_s: 100,
                backoff_limit: Some(3),
                requeue_order: RequeueOrder::Creation,
                max_starting_members: Some(500),
            }
        );
        let no_window = spec("readiness: {maxStartingMembers: 0}").to_config("q").unwrap();
        assert_eq!(no_window.readiness.max_starting_members, None, "0 is no window, like the timeouts");
        assert_eq!(
            c.preemption,
            PreemptionConfig {
                within_queue: WithinQueue::LowerPriority,
                reclaim_within_cohort: true,
                fair_share_within_cohort: FairShareWithinCohort::Any,
                fair_share_strategies: FairShareStrategies { final_share: true, initial_share: true },
            }
        );
        assert_eq!(c.elastic_max_wait_s, 30);
        assert_eq!(c.create_pods_ahead_s, 0);
        assert_eq!(QueueSpec::default().to_config("q").unwrap().create_pods_ahead_s, 60, "the engine's default");
        assert_eq!(c.run_time_limit, RunTimeLimitConfig { mode: RunTimeLimitMode::Advisory, grace_s: 5 });
        let grace_only = spec("runTimeLimit: {graceSeconds: 0}").to_config("q").unwrap().run_time_limit;
        assert_eq!(
            grace_only,
            RunTimeLimitConfig { mode: RunTimeLimitMode::Enforce, grace_s: 0 },
            "Enforce by default"
        );
    }

    #[test]
    fn every_policy_kind_converts() {
        for (yaml, want) in [
            ("{kind: strictFifo}", QueuePolicy::StrictFifo),
            ("{kind: bestEffortFifo}", QueuePolicy::BestEffortFifo),
            ("{kind: easy}", QueuePolicy::Easy),
            ("{kind: conservative}", QueuePolicy::Conservative { depth: DEFAULT_DEPTH }),
            ("{kind: selective}", QueuePolicy::Selective { depth: DEFAULT_DEPTH, slowdown: DEFAULT_SLOWDOWN }),
            ("{kind: selective, depth: 4, slowdown: 2}", QueuePolicy::Selective { depth: 4, slowdown: 2 }),
        ] {
            assert_eq!(spec(&format!("policy: {yaml}")).to_config("q").unwrap().policy, want, "{yaml}");
        }
        let default = QueueSpec::default().to_config("q").unwrap().policy;
        assert_eq!(default, QueuePolicy::Selective { depth: DEFAULT_DEPTH, slowdown: DEFAULT_SLOWDOWN });
    }

    #[test]
    fn bad_input_names_the_field() {
        for (yaml, path, says) in [
            ("policy: {kind: easy, depth: 2}", "spec.policy.depth", "only kinds conservative and selective"),
            ("policy: {kind: conservative, slowdown: 2}", "spec.policy.slowdown", "only kind selective"),
            ("policy: {kind: selective, slowdown: 0}", "spec.policy.slowdown", "0 is never reached"),
            ("policy: {kind: conservative, depth: 0}", "spec.policy.depth", "reserves nothing"),
            ("quotas: {cpu: {nominal: -4}}", "spec.quotas.cpu.nominal", "negative"),
            ("quotas: {cpu: {nominal: lots}}", "spec.quotas.cpu.nominal", "lots"),
            ("quotas: {gpu: {nominal: 1}}", "spec.quotas.gpu.nominal", "unknown resource"),
            ("quotas: {cpu: {nominal: 4, borrowingLimit: 2}}", "spec.quotas.cpu.borrowingLimit", "cohort"),
            ("{cohort: c, quotas: {cpu: {nominal: 4, lendingLimit: 8}}}", "spec.quotas.cpu.lendingLimit", "above"),
            ("cohort: Not_A_Name", "spec.cohort", "not a valid name"),
            ("fairShareWeight: 0", "spec.fairShareWeight", "positive"),
            ("readiness: {backoffBaseSeconds: 0}", "spec.readiness.backoffBaseSeconds", "1 or more"),
            ("readiness: {backoffBaseSeconds: 60, backoffMaxSeconds: 5}", "spec.readiness.backoffMaxSeconds", "below"),
            ("readiness: {timeoutSeconds: -5}", "spec.readiness.timeoutSeconds", "positive"),
            ("readiness: {recoveryTimeoutSeconds: -5}", "spec.readiness.recoveryTimeoutSeconds", "positive"),
            ("elasticMaxWaitSeconds: -1", "spec.elasticMaxWaitSeconds", "negative"),
            ("createPodsAheadSeconds: -1", "spec.createPodsAheadSeconds", "negative"),
            ("runTimeLimit: {graceSeconds: -1}", "spec.runTimeLimit.graceSeconds", "negative"),
            (
                "{cohort: c, preemption: {fairShareStrategies: [LessThanInitialShare, LessThanInitialShare]}}",
                "spec.preemption.fairShareStrategies",
                "use [LessThanOrEqualToFinalShare], [LessThanInitialShare] or",
            ),
            (
                "namespaceSelector: {matchExpressions: [{key: k, operator: Exists, values: [v]}]}",
                "spec.namespaceSelector.matchExpressions[0]",
                "takes no values",
            ),
        ] {
            let e = err(yaml);
            assert_eq!(e.path, path, "{yaml}: {e}");
            assert!(e.message.contains(says), "{yaml}: {e}");
            assert_eq!(e.file, "Queue/team-a");
        }
        let e = QueueSpec::default().to_config("Bad Name").unwrap_err();
        assert_eq!(e.path, "metadata.name");
    }

    #[test]
    fn unknown_enum_values_do_not_parse() {
        assert!(serde_yaml_ng::from_str::<QueueSpec>("policy: {kind: fifo}").is_err());
        assert!(serde_yaml_ng::from_str::<QueueSpec>("readiness: {requeueOrder: Random}").is_err());
        assert!(serde_yaml_ng::from_str::<QueueSpec>("runTimeLimit: {mode: Strict}").is_err());
    }
}
