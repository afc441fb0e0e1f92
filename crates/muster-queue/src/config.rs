//! Engine configuration: queues with quotas in cohorts, namespace selectors, policies, readiness
//! timeouts and backoff, preemption, priority classes. Parsed from YAML (or JSON); every refused
//! value is reported with the path of its field.

use std::collections::{BTreeMap, BTreeSet};

use muster_graph::InputError;
use muster_graph::resources;
use serde::{Deserialize, Serialize};

use crate::group::GroupSpec;
use crate::reservation::ReservationConfig;

mod compile;
pub use compile::{Compiled, CompiledCohort, CompiledQueue};

/// How the matcher chooses nodes for the groups of a cluster: fewest nodes first (Fluxion's
/// lonode), which keeps whole nodes free for the gangs that need them. The controller runs with it
/// and so does the simulator's muster, so the two make the same placements.
pub const MATCH_POLICY: muster_graph::Policy = muster_graph::Policy::Pack;

/// An amount of a resource: `32`, `"500m"`, `"128Gi"`. In the CRD schema it is int-or-string with
/// the Kubernetes quantity pattern, so the apiserver refuses `"lots"` or `"-1"` (negative integers
/// pass the schema and are refused by [`Quantity::amount`]). The engine's file may also give a
/// float (`1.5`); it is kept as its text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged, from = "written::Quantity")]
pub enum Quantity {
    Int(i64),
    Text(String),
}

mod written {
    /// What a quantity may be written as; named `Quantity` for serde's error messages.
    #[derive(serde::Deserialize)]
    #[serde(untagged)]
    pub enum Quantity {
        Int(i64),
        Float(f64),
        Text(String),
    }

    impl From<Quantity> for super::Quantity {
        fn from(q: Quantity) -> Self {
            match q {
                Quantity::Int(i) => Self::Int(i),
                Quantity::Float(f) => Self::Text(f.to_string()),
                Quantity::Text(s) => Self::Text(s),
            }
        }
    }
}

impl Quantity {
    /// The amount of resource `name` in base units (millicores, bytes, count).
    pub fn amount(&self, name: &str) -> Result<u64, String> {
        let unit = resources::unit_of(name)?;
        let text = match self {
            Quantity::Int(i) => i.to_string(),
            Quantity::Text(s) => s.clone(),
        };
        resources::parse_amount(unit, &text).map_err(|e| e.to_string())
    }
}

impl From<i64> for Quantity {
    fn from(v: i64) -> Self {
        Quantity::Int(v)
    }
}

impl From<&str> for Quantity {
    fn from(s: &str) -> Self {
        Quantity::Text(s.to_string())
    }
}

#[cfg(feature = "schema")]
impl schemars::JsonSchema for Quantity {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Quantity".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "A non-negative resource amount: an integer or a Kubernetes quantity such as 500m or 128Gi.",
            "pattern": "^(\\+)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))))?$",
            "x-kubernetes-int-or-string": true
        })
    }
}

/// Per-resource quota (Kueue's nominalQuota, borrowingLimit, lendingLimit).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct QuotaSpec {
    /// What the queue is guaranteed.
    pub nominal: Quantity,
    /// How much above nominal the queue may borrow from its cohort; absent = no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub borrowing_limit: Option<Quantity>,
    /// How much of its unused nominal the queue lends to its cohort; absent = all of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lending_limit: Option<Quantity>,
}

/// Quota in base units, after validation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Quota {
    pub nominal: u64,
    pub borrowing_limit: Option<u64>,
    pub lending_limit: Option<u64>,
}

impl Quota {
    /// The part of nominal the queue never lends.
    pub fn guaranteed(&self) -> u64 {
        self.nominal - self.lendable()
    }

    /// The part of nominal the cohort may use while the queue does not.
    pub fn lendable(&self) -> u64 {
        self.lending_limit.map_or(self.nominal, |l| l.min(self.nominal))
    }
}

// One requirement of a label selector (Kubernetes `matchExpressions`). A comment, not a doc:
// a doc would become a description in the CRD schema.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct LabelRequirement {
    pub key: String,
    pub operator: LabelOperator,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub enum LabelOperator {
    In,
    NotIn,
    Exists,
    DoesNotExist,
}

/// Which namespaces may submit to a queue. Every given part must hold; all empty = every namespace.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NamespaceSelector {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub match_labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_expressions: Vec<LabelRequirement>,
    /// Namespaces by name, in addition to the label rules.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub namespaces: Vec<String>,
}

impl NamespaceSelector {
    pub fn is_empty(&self) -> bool {
        self.match_labels.is_empty() && self.match_expressions.is_empty() && self.namespaces.is_empty()
    }

    /// True if a namespace with these labels may use the queue. Kubernetes' automatic label
    /// `kubernetes.io/metadata.name` is added by the caller.
    pub fn admits(&self, namespace: &str, labels: &BTreeMap<String, String>) -> bool {
        (self.namespaces.is_empty() || self.namespaces.iter().any(|n| n == namespace))
            && self.match_labels.iter().all(|(k, v)| labels.get(k) == Some(v))
            && self.match_expressions.iter().all(|e| {
                let v = labels.get(&e.key);
                match e.operator {
                    LabelOperator::In => v.is_some_and(|v| e.values.contains(v)),
                    LabelOperator::NotIn => v.is_none_or(|v| !e.values.contains(v)),
                    LabelOperator::Exists => v.is_some(),
                    LabelOperator::DoesNotExist => v.is_none(),
                }
            })
    }
}

/// How a queue picks among its pending groups (Fluxion's queue policies).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum QueuePolicy {
    /// First come first served: the head gets a reservation and nothing behind it may start.
    StrictFifo,
    /// Any group that fits starts, in order; no reservations (Kueue's BestEffortFIFO).
    BestEffortFifo,
    /// The head gets a reservation; groups behind it start if they do not delay it.
    Easy,
    /// The first `depth` blocked groups get reservations; groups behind start if they delay none.
    Conservative { depth: u32 },
    /// Selective reservation (Srinivasan et al., "Selective Reservation Strategies for Backfill
    /// Job Scheduling", JSSPP 2002): as `Conservative`, but a blocked group gets a reservation only
    /// once its slowdown so far, (wait + run time) / run time, has reached `slowdown`; until then
    /// it starts only where it fits, like best-effort FIFO. Small groups stop waiting behind large
    /// ones, and no group waits much beyond `slowdown` times its run time before it is protected.
    /// Groups that declare no run time are protected at once. Within a priority the queue is
    /// ordered by when each group reaches the bound (queued at + run time x (slowdown - 1)), so
    /// of groups queued together the shorter goes first.
    Selective { depth: u32, slowdown: u32 },
}

impl QueuePolicy {
    /// How many blocked groups get a reservation.
    pub fn reservation_depth(self) -> u32 {
        match self {
            QueuePolicy::StrictFifo | QueuePolicy::Easy => 1,
            QueuePolicy::BestEffortFifo => 0,
            QueuePolicy::Conservative { depth } | QueuePolicy::Selective { depth, .. } => depth,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            QueuePolicy::StrictFifo => "strict FIFO",
            QueuePolicy::BestEffortFifo => "best-effort FIFO",
            QueuePolicy::Easy => "EASY backfill",
            QueuePolicy::Conservative { .. } => "conservative backfill",
            QueuePolicy::Selective { .. } => "selective reservation",
        }
    }
}

/// Which timestamp orders a group that was requeued after a readiness timeout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum RequeueOrder {
    /// When it was evicted: it goes behind groups that waited meanwhile (Kueue's default).
    #[default]
    Eviction,
    /// When it was created: it gets its old place back.
    Creation,
}

/// Readiness timeouts and requeue backoff (Kueue's waitForPodsReady).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct ReadinessConfig {
    /// Seconds from admission until every member must be ready; null disables.
    pub timeout_s: Option<i64>,
    /// Seconds a running group may stay below full readiness; null disables.
    pub recovery_timeout_s: Option<i64>,
    /// First requeue delay; the n-th is base * 2^(n-1), capped at `backoff_max_s`.
    pub backoff_base_s: i64,
    pub backoff_max_s: i64,
    /// Requeues allowed before the group is deactivated; null = requeue forever.
    pub backoff_limit: Option<u32>,
    pub requeue_order: RequeueOrder,
    /// A start window: at most this many members of the queue's admitted groups not yet ready.
    /// The next group waits until enough are ready; one larger than the window starts alone.
    /// null = no window.
    pub max_starting_members: Option<u32>,
}

impl Default for ReadinessConfig {
    fn default() -> Self {
        Self {
            timeout_s: Some(300),
            recovery_timeout_s: Some(300),
            backoff_base_s: 60,
            backoff_max_s: 3600,
            backoff_limit: None,
            requeue_order: RequeueOrder::Eviction,
            max_starting_members: None,
        }
    }
}

impl ReadinessConfig {
    /// Delay before the `n`-th requeue (n >= 1): base * 2^(n-1), capped.
    pub fn backoff(&self, n: u32) -> i64 {
        let shift = n.saturating_sub(1).min(62);
        self.backoff_base_s.saturating_mul(1i64 << shift).min(self.backoff_max_s)
    }
}

/// Whether a queue holds its groups to the run times they declare.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum RunTimeLimitMode {
    /// A group that declares a run time is ended (Failed) once it has held its nodes that long
    /// plus the grace: backfill rests on declared run times, so no one may outrun theirs.
    #[default]
    Enforce,
    /// A declared run time only plans: a group that outruns it delays the reservations behind it.
    Advisory,
}

/// The limit a declared run time sets (Slurm's time limit, with `graceS` as its OverTimeLimit).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct RunTimeLimitConfig {
    pub mode: RunTimeLimitMode,
    /// Seconds a group may run past its declared run time (counted from admission, so start-up
    /// is inside it) before it is ended: a reservation it delays starts at most this late.
    pub grace_s: i64,
}

impl Default for RunTimeLimitConfig {
    fn default() -> Self {
        Self { mode: RunTimeLimitMode::Enforce, grace_s: 60 }
    }
}

/// Preemption within a queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum WithinQueue {
    #[default]
    Never,
    LowerPriority,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct PreemptionConfig {
    /// May a pending group evict lower-priority groups of its own queue?
    pub within_queue: WithinQueue,
    /// May a pending group within its nominal quota evict groups of other queues in the cohort
    /// that borrow?
    pub reclaim_within_cohort: bool,
    /// May a pending group whose queue borrows evict groups of other borrowing queues in the
    /// cohort whose share of the borrowed surplus stays at least its own (fair-share preemption)?
    pub fair_share_within_cohort: FairShareWithinCohort,
    /// The rules by which fair-share preemption may take a victim queue's groups (Kueue's
    /// `fairSharing.preemptionStrategies`); default `[LessThanOrEqualToFinalShare]`.
    pub fair_share_strategies: FairShareStrategies,
}

/// A rule of fair-share preemption, comparing the preemptor's queue's share (with the group) to
/// a victim queue's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum FairShareStrategy {
    /// At most the victim queue's share without its victims.
    LessThanOrEqualToFinalShare,
    /// Below the victim queue's share before, taking at most one group from that queue.
    LessThanInitialShare,
}

/// Which [`FairShareStrategy`] rules apply: written as the list of them, in Kueue's order
/// (`[LessThanOrEqualToFinalShare]`, `[LessThanInitialShare]` or both).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "Vec<FairShareStrategy>", into = "Vec<FairShareStrategy>")]
pub struct FairShareStrategies {
    pub final_share: bool,
    pub initial_share: bool,
}

impl Default for FairShareStrategies {
    fn default() -> Self {
        FairShareStrategies { final_share: true, initial_share: false }
    }
}

impl TryFrom<Vec<FairShareStrategy>> for FairShareStrategies {
    type Error = String;

    fn try_from(list: Vec<FairShareStrategy>) -> Result<Self, String> {
        use FairShareStrategy::*;
        match list[..] {
            [LessThanOrEqualToFinalShare] => Ok(FairShareStrategies { final_share: true, initial_share: false }),
            [LessThanInitialShare] => Ok(FairShareStrategies { final_share: false, initial_share: true }),
            [LessThanOrEqualToFinalShare, LessThanInitialShare] => {
                Ok(FairShareStrategies { final_share: true, initial_share: true })
            }
            _ => Err(format!(
                "{list:?} is not allowed; use [LessThanOrEqualToFinalShare], [LessThanInitialShare] or \
                 [LessThanOrEqualToFinalShare, LessThanInitialShare]"
            )),
        }
    }
}

impl From<FairShareStrategies> for Vec<FairShareStrategy> {
    fn from(s: FairShareStrategies) -> Self {
        let rules = [
            (s.final_share, FairShareStrategy::LessThanOrEqualToFinalShare),
            (s.initial_share, FairShareStrategy::LessThanInitialShare),
        ];
        rules.into_iter().filter(|(on, _)| *on).map(|(_, r)| r).collect()
    }
}

/// Fair-share preemption between borrowing queues of a cohort, and which victims' priorities it
/// may take from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum FairShareWithinCohort {
    #[default]
    Never,
    /// Groups of a priority at most the preemptor's.
    LowerOrEqualPriority,
    /// Groups of any priority.
    Any,
}

/// A cluster-level queue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct QueueConfig {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cohort: Option<String>,
    #[serde(default)]
    pub namespace_selector: NamespaceSelector,
    /// Quotas by resource name. A resource not listed is not limited by the queue.
    #[serde(default)]
    pub quotas: BTreeMap<String, QuotaSpec>,
    #[serde(default = "default_policy")]
    pub policy: QueuePolicy,
    #[serde(default = "one")]
    pub fair_share_weight: f64,
    #[serde(default)]
    pub readiness: ReadinessConfig,
    #[serde(default)]
    pub preemption: PreemptionConfig,
    /// An elastic group waits up to this long (from submission) to start with all `max` members
    /// before it takes fewer. 0 = start with what fits at once.
    #[serde(default)]
    pub elastic_max_wait_s: i64,
    /// A reserved group's pods are created this long before its reserved start (0 = only once
    /// admitted): they wait unbound, so binding starts the moment its nodes free up instead of
    /// after the workload's controller has made them. Long enough for a large group's pods at the
    /// Job controller's rate (about 20 a second), short enough that few pods wait at once. The
    /// first group in line without a reservation has its pods made at once (its start is not
    /// planned); 0 turns that off too.
    #[serde(default = "default_create_pods_ahead")]
    pub create_pods_ahead_s: i64,
    /// Whether declared run times are limits, and their grace.
    #[serde(default)]
    pub run_time_limit: RunTimeLimitConfig,
    /// Admits nothing: its waiting groups wait, its placed ones run on without growing, and no
    /// group is queued in it. What a queue whose definition was removed while groups still name it becomes
    /// ([`QueueConfig::closed`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub closed: bool,
}

fn default_create_pods_ahead() -> i64 {
    60
}

fn default_policy() -> QueuePolicy {
    QueuePolicy::Selective { depth: 16, slowdown: 3 }
}

fn one() -> f64 {
    1.0
}

impl QueueConfig {
    /// A queue with defaults: no quotas, every namespace, conservative backfill.
    pub fn new(name: &str) -> Self {
        Self {
            name: name.to_string(),
            cohort: None,
            namespace_selector: NamespaceSelector::default(),
            quotas: BTreeMap::new(),
            policy: default_policy(),
            fair_share_weight: 1.0,
            readiness: ReadinessConfig::default(),
            preemption: PreemptionConfig::default(),
            elastic_max_wait_s: 0,
            create_pods_ahead_s: default_create_pods_ahead(),
            run_time_limit: RunTimeLimitConfig::default(),
            closed: false,
        }
    }

    /// Queue `name`, closed, for the groups of `namespaces` that still name it after its
    /// definition was removed: they keep their places and runs, and nothing new comes in.
    pub fn closed(name: &str, namespaces: impl IntoIterator<Item = String>) -> Self {
        let mut q = Self::new(name);
        q.namespace_selector.namespaces = namespaces.into_iter().collect();
        q.closed = true;
        q
    }
}

/// A cohort in a hierarchy. Queues naming a cohort that is not declared form a root cohort.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CohortConfig {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// The cohort's own quota by resource: `nominal` is shared by everything below it, on top of
    /// what its members lend; `borrowingLimit` caps what the cohort's subtree takes from its
    /// parent beyond what it brings; `lendingLimit` caps how much of its subtree's unused quota
    /// the parent may use. Both limits need a parent.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub quotas: BTreeMap<String, QuotaSpec>,
}

impl CohortConfig {
    /// A cohort with no quota of its own.
    pub fn new(name: &str, parent: Option<&str>) -> Self {
        Self { name: name.to_string(), parent: parent.map(str::to_string), quotas: BTreeMap::new() }
    }
}

/// The whole engine configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct EngineConfig {
    pub queues: Vec<QueueConfig>,
    #[serde(default)]
    pub cohorts: Vec<CohortConfig>,
    /// Priority values by class name; higher runs first.
    #[serde(default)]
    pub priority_classes: BTreeMap<String, i32>,
    /// The class of a group that names none; absent = priority 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_priority_class: Option<String>,
    /// Admit one group at a time: none while another is admitted but not all ready (Kueue's
    /// blockAdmission). Not needed with exact placement; see docs/queue.md.
    #[serde(default)]
    pub block_admission: bool,
    /// Half-life of past usage in fair share, seconds; 0 = only current usage counts.
    #[serde(default = "default_half_life")]
    pub fair_share_half_life_s: i64,
    /// Pending groups per queue that get an estimated start in `queue_view`.
    #[serde(default = "default_estimate_depth")]
    pub estimate_depth: usize,
    /// Cycles the forecast behind `queue_view` may run (each at the next expected end or timer);
    /// groups it has not started by then get a lower bound from the cluster's totals.
    #[serde(default = "default_forecast_cycles")]
    pub forecast_cycles: usize,
    /// Groups tried behind a blocked group (backfill and best-effort), per cycle, all queues.
    #[serde(default = "default_backfill_attempts")]
    pub backfill_attempts_per_cycle: usize,
    /// Pending groups that may try preemption per cycle.
    #[serde(default = "default_preemption_attempts")]
    pub preemption_attempts_per_cycle: usize,
    /// Calendar reservations: room set aside for some queues or namespaces over time windows.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reservations: Vec<ReservationConfig>,
}

/// The half-life of past usage in fair share unless configured: a week.
pub const DEFAULT_FAIR_SHARE_HALF_LIFE_S: i64 = 7 * 24 * 3600;

fn default_half_life() -> i64 {
    DEFAULT_FAIR_SHARE_HALF_LIFE_S
}
fn default_estimate_depth() -> usize {
    100
}
fn default_forecast_cycles() -> usize {
    256
}
fn default_backfill_attempts() -> usize {
    2000
}
fn default_preemption_attempts() -> usize {
    16
}

impl EngineConfig {
    /// One queue named `name` with defaults.
    pub fn single_queue(name: &str) -> Self {
        Self {
            queues: vec![QueueConfig::new(name)],
            cohorts: Vec::new(),
            priority_classes: BTreeMap::new(),
            default_priority_class: None,
            block_admission: false,
            fair_share_half_life_s: default_half_life(),
            estimate_depth: default_estimate_depth(),
            forecast_cycles: default_forecast_cycles(),
            backfill_attempts_per_cycle: default_backfill_attempts(),
            preemption_attempts_per_cycle: default_preemption_attempts(),
            reservations: Vec::new(),
        }
    }

    /// Adds a closed queue ([`QueueConfig::closed`]) for each queue that `groups` name and this
    /// configuration does not define (its definition was removed while they existed): they keep
    /// their places and runs, and nothing new enters. Returns each queue closed so with how many
    /// of the groups name it. A configuration made after its last group is gone leaves it out.
    pub fn close_undefined_queues<'a>(
        &mut self,
        groups: impl IntoIterator<Item = &'a GroupSpec>,
    ) -> Vec<(String, usize)> {
        let mut undefined: BTreeMap<&str, (usize, BTreeSet<String>)> = BTreeMap::new();
        for g in groups.into_iter().filter(|g| !self.queues.iter().any(|q| q.name == g.queue)) {
            let (count, namespaces) = undefined.entry(&g.queue).or_default();
            *count += 1;
            namespaces.insert(g.key.namespace.to_string());
        }
        let mut closed = Vec::new();
        for (name, (count, namespaces)) in undefined {
            self.queues.push(QueueConfig::closed(name, namespaces));
            closed.push((name.to_string(), count));
        }
        closed
    }

    /// Parses and validates a configuration; `file` names it in errors.
    pub fn parse(file: &str, text: &str) -> Result<Self, InputError> {
        let c: Self = InputError::parse_yaml(file, text)?;
        c.compile(file)?;
        Ok(c)
    }

    /// The priority of a class, or an error naming the field.
    pub fn priority_of(&self, class: Option<&str>) -> Result<i32, String> {
        match class.or(self.default_priority_class.as_deref()) {
            None => Ok(0),
            Some(c) => self.priority_classes.get(c).copied().ok_or_else(|| {
                format!("unknown priority class {c:?}; known: {:?}", self.priority_classes.keys().collect::<Vec<_>>())
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<EngineConfig, InputError> {
        EngineConfig::parse("q.yaml", text)
    }

    #[test]
    fn full_config_parses() {
        let c = parse(
            "queues:\n  - name: team-a\n    cohort: research\n    namespaceSelector:\n      matchLabels: {team: a}\n      matchExpressions:\n        - {key: env, operator: NotIn, values: [prod]}\n    quotas:\n      cpu: {nominal: 64, borrowingLimit: 32, lendingLimit: 16}\n      nvidia.com/gpu: {nominal: 8}\n    policy: {kind: conservative, depth: 4}\n    fairShareWeight: 2\n    readiness: {timeoutS: 600, backoffLimit: 5, requeueOrder: Creation}\n    preemption: {withinQueue: LowerPriority, reclaimWithinCohort: true, fairShareWithinCohort: LowerOrEqualPriority}\n    elasticMaxWaitS: 120\n    runTimeLimit: {mode: Advisory, graceS: 30}\n  - name: team-b\n    cohort: research\n    policy: {kind: easy}\ncohorts:\n  - {name: research, parent: org}\n  - {name: org}\npriorityClasses: {high: 1000, low: 10}\ndefaultPriorityClass: low\nblockAdmission: false\n",
        )
        .unwrap();
        let comp = c.compile("q.yaml").unwrap();
        let a = &comp.queues["team-a"];
        assert_eq!(a.root_cohort.as_deref(), Some("org"));
        assert_eq!(a.quotas["cpu"], Quota { nominal: 64000, borrowing_limit: Some(32000), lending_limit: Some(16000) });
        assert_eq!(c.queues[0].readiness.backoff_base_s, 60);
        assert_eq!(c.queues[0].readiness.requeue_order, RequeueOrder::Creation);
        assert_eq!(c.queues[0].preemption.fair_share_within_cohort, FairShareWithinCohort::LowerOrEqualPriority);
        assert_eq!(c.queues[1].preemption.fair_share_within_cohort, FairShareWithinCohort::Never);
        assert_eq!(c.queues[0].run_time_limit, RunTimeLimitConfig { mode: RunTimeLimitMode::Advisory, grace_s: 30 });
        assert_eq!(c.queues[1].run_time_limit, RunTimeLimitConfig { mode: RunTimeLimitMode::Enforce, grace_s: 60 });
        assert_eq!(c.priority_of(None), Ok(10));
        assert!(c.priority_of(Some("nope")).unwrap_err().contains("unknown priority class"));
    }

    #[test]
    fn bad_values_name_their_field() {
        let e = parse("queues:\n  - name: a\n    quotas: {cpu: {nominal: -4}}\n").unwrap_err();
        assert_eq!(e.path, "queues[0].quotas.cpu.nominal");
        assert!(e.message.contains("negative"), "{e}");
        let e = parse(
            "queues:\n  - name: a\n    cohort: x\ncohorts:\n  - {name: x, parent: y}\n  - {name: y, parent: x}\n",
        )
        .unwrap_err();
        assert_eq!(e.path, "cohorts[0].parent");
        assert!(e.message.contains("cycle: x -> y -> x"), "{e}");
        let e = parse("queues:\n  - name: a\n    cohort: x\ncohorts:\n  - {name: x, parent: z}\n").unwrap_err();
        assert_eq!(e.path, "cohorts[0].parent");
        let e = parse("queues:\n  - name: a\ndefaultPriorityClass: gold\n").unwrap_err();
        assert_eq!(e.path, "defaultPriorityClass");
        let e = parse("queues:\n  - name: a\n    preemption: {fairShareWithinCohort: Any}\n").unwrap_err();
        assert_eq!(e.path, "queues[0].preemption.fairShareWithinCohort");
        assert!(e.message.contains("set cohort"), "{e}");
        let e = parse("queues:\n  - name: a\n    quotas: {cpu: {nominal: 4, borrowingLimit: 2}}\n").unwrap_err();
        assert_eq!(e.path, "queues[0].quotas.cpu.borrowingLimit");
        let e = parse("queues:\n  - name: a\n    cohort: c\n    quotas: {cpu: {nominal: 4, lendingLimit: 8}}\n")
            .unwrap_err();
        assert_eq!(e.path, "queues[0].quotas.cpu.lendingLimit");
        let e = parse("queues:\n  - name: a\n    quotas: {gpu: {nominal: 4}}\n").unwrap_err();
        assert_eq!(e.path, "queues[0].quotas.gpu.nominal");
        let e = parse("queues:\n  - name: a\n  - name: a\n").unwrap_err();
        assert_eq!(e.path, "queues[1].name");
        let e = parse("queues:\n  - name: a\n    readiness: {backoffBaseS: 0}\n").unwrap_err();
        assert_eq!(e.path, "queues[0].readiness.backoffBaseS");
        let e = parse("queues:\n  - name: a\n    readiness: {maxStartingMembers: 0}\n").unwrap_err();
        assert_eq!(e.path, "queues[0].readiness.maxStartingMembers");
        assert!(e.message.contains("1 or more, or null"), "{}", e.message);
        let e = parse("queues:\n  - name: a\n    policy: {kind: conservative, depth: 0}\n").unwrap_err();
        assert_eq!(e.path, "queues[0].policy.depth");
        let e = parse("queues:\n  - name: a\n    runTimeLimit: {graceS: -1}\n").unwrap_err();
        assert_eq!(e.path, "queues[0].runTimeLimit.graceS");
        let e = parse("queues:\n  - name: a\n    runTimeLimit: {mode: Sometimes}\n").unwrap_err();
        assert!(e.message.contains("Sometimes") && e.message.contains("Advisory"), "{e}");
        let e = parse("queues:\n  - name: a\n    fairShareWeight: 0\n").unwrap_err();
        assert_eq!(e.path, "queues[0].fairShareWeight");
        let e = parse("queues:\n  - name: a\n    colour: red\n").unwrap_err();
        assert!(e.message.contains("colour"), "{e}");
        let e =
            parse("queues:\n  - name: a\n    namespaceSelector:\n      matchExpressions: [{key: k, operator: In}]\n")
                .unwrap_err();
        assert_eq!(e.path, "queues[0].namespaceSelector.matchExpressions[0]");
    }

    #[test]
    fn quantities_read_ints_floats_and_strings() {
        let q: Vec<Quantity> = serde_yaml_ng::from_str("[4, 1.5, 4Gi]").unwrap();
        assert_eq!(q, [Quantity::Int(4), Quantity::Text("1.5".into()), Quantity::Text("4Gi".into())]);
        assert_eq!(q[1].amount("cpu"), Ok(1500));
        let e = serde_yaml_ng::from_str::<Quantity>("[1]").unwrap_err().to_string();
        assert!(e.contains("untagged enum Quantity"), "{e}");
    }

    #[test]
    fn backoff_doubles_and_caps() {
        let r = ReadinessConfig::default();
        let v: Vec<i64> = (1..=8).map(|n| r.backoff(n)).collect();
        assert_eq!(v, vec![60, 120, 240, 480, 960, 1920, 3600, 3600]);
        assert_eq!(r.backoff(200), 3600);
    }

    #[test]
    fn namespace_selector_rules() {
        let labels: BTreeMap<String, String> = [("team".to_string(), "a".to_string())].into();
        let s = NamespaceSelector::default();
        assert!(s.admits("x", &labels));
        let s = NamespaceSelector { namespaces: vec!["y".into()], ..Default::default() };
        assert!(!s.admits("x", &labels));
        let s = NamespaceSelector {
            match_expressions: vec![LabelRequirement {
                key: "team".into(),
                operator: LabelOperator::In,
                values: vec!["a".into()],
            }],
            ..Default::default()
        };
        assert!(s.admits("x", &labels));
        assert!(!s.admits("x", &BTreeMap::new()));
    }
}
