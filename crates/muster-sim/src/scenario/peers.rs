//! How the simulated control plane and each peer scheduler behave: rates and delays of the
//! Kubernetes controllers, and the settings of Kueue, coscheduling, Volcano and native gangs.

use serde::Deserialize;

use super::{Dur, Micros, one, one_f, secs, yes};

/// How the pods of a job end in time once its run is over or its deadline passed: the first at
/// once, each next one with probability `newClump` after an exponential gap of mean `gap`, else
/// at the same instant as the one before. Measured on the hack/ control plane (KWOK marking pods
/// Succeeded, the Job controller deleting pods): the scheduler sees a job's pods go in clumps.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PodEndSpread {
    pub new_clump: f64,
    pub gap: Dur,
}

/// Rates of the modelled control plane, the same for every scheduler.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Timing {
    /// Pods the job controller creates per second (kube-controller-manager `--kube-api-qps` 20).
    #[serde(default = "default_create_qps")]
    pub pod_create_qps: f64,
    /// Pod bindings (and kube-scheduler attempts) per second (scheduler `clientConnection.qps` 50).
    #[serde(default = "default_bind_qps")]
    pub bind_qps: f64,
    /// From binding to the pod being Ready (image present, container started).
    #[serde(default = "default_start_delay")]
    pub pod_start_delay: Dur,
    /// Jobs whose syncs the job controller runs at once (`--concurrent-job-syncs` 5).
    #[serde(default = "default_job_syncs")]
    pub concurrent_job_syncs: u32,
    /// kube-scheduler's own time for one attempt without API calls (a cycle over the nodes; the
    /// binding is asynchronous). Absent: every attempt takes one `1/bindQps` interval.
    #[serde(default)]
    pub attempt_cost: Option<Micros>,
    /// With `attemptCost`: what a pod's first failure adds, the PodScheduled=False status patch
    /// the loop writes synchronously (absent: one `1/bindQps` interval).
    #[serde(default)]
    pub status_write: Option<Micros>,
    /// Absent: all pods of a job end at the same instant.
    #[serde(default)]
    pub pod_end_spread: Option<PodEndSpread>,
    /// Runs end on whole seconds of the clock: from the second the run started (truncated) plus
    /// the run time truncated to seconds, as the hack/ harness's KWOK stages compute it.
    #[serde(default)]
    pub run_ends_on_second: bool,
    /// From a Job's last pod succeeding to the Job being marked Complete: the Job controller
    /// syncs a Job at most once per `SyncJobBatchPeriod` after its pods change (1 s in
    /// kube-controller-manager 1.37, pkg/controller/job). The pods' room is free meanwhile; what
    /// waits for the Job's completion (a quota) waits this long.
    #[serde(default = "default_job_complete_delay")]
    pub job_complete_delay: Dur,
}

fn default_create_qps() -> f64 {
    20.0
}
fn default_bind_qps() -> f64 {
    50.0
}
fn default_start_delay() -> Dur {
    secs(1)
}
fn default_job_complete_delay() -> Dur {
    secs(1)
}
fn default_job_syncs() -> u32 {
    5
}

impl Default for Timing {
    fn default() -> Self {
        Self {
            pod_create_qps: default_create_qps(),
            bind_qps: default_bind_qps(),
            pod_start_delay: default_start_delay(),
            concurrent_job_syncs: default_job_syncs(),
            attempt_cost: None,
            status_write: None,
            pod_end_spread: None,
            run_ends_on_second: false,
            job_complete_delay: default_job_complete_delay(),
        }
    }
}

impl Timing {
    /// Milliseconds per pod creation; 0 means unlimited.
    pub fn create_interval_ms(&self) -> i64 {
        interval(self.pod_create_qps)
    }
    /// Milliseconds per binding (and per kube-scheduler attempt); 0 means unlimited.
    pub fn bind_interval_ms(&self) -> i64 {
        interval(self.bind_qps)
    }
}

/// Rates are rounded to whole milliseconds per operation, at least 1 ms (so at most 1000/s).
fn interval(qps: f64) -> i64 {
    if qps <= 0.0 { 0 } else { ((1000.0 / qps).round() as i64).max(1) }
}

/// Clients creating jobs: each is serial and needs `perJob` for one create.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Submitters {
    #[serde(default = "one")]
    pub count: u32,
    #[serde(default)]
    pub per_job: Option<Dur>,
}

impl Default for Submitters {
    fn default() -> Self {
        Self { count: 1, per_job: None }
    }
}

/// Which time orders a requeued workload (Kueue `requeuingStrategy.timestamp`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
pub enum RequeueTimestamp {
    #[default]
    Eviction,
    Creation,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct KueueConfig {
    /// Nominal quota as a multiple of the cluster's allocatable cpu and memory (seed 001 uses 2).
    #[serde(default = "one_f")]
    pub quota_factor: f64,
    /// waitForPodsReady.timeout (Kueue's default 5m).
    #[serde(default = "default_ready_timeout")]
    pub pods_ready_timeout: Dur,
    #[serde(default = "yes")]
    pub block_admission: bool,
    #[serde(default = "default_backoff_base")]
    pub backoff_base: Dur,
    #[serde(default = "default_backoff_max")]
    pub backoff_max: Dur,
    /// Requeues before the workload is deactivated; absent means forever.
    #[serde(default)]
    pub backoff_limit_count: Option<u32>,
    #[serde(default)]
    pub requeue_timestamp: RequeueTimestamp,
    /// Kueue's Configuration `fairSharing`: present, fair sharing is on (as in Kueue's v1beta2
    /// Configuration); absent, off.
    #[serde(default)]
    pub fair_sharing: Option<FairSharingConfig>,
}

/// Kueue's `fairSharing.preemptionStrategies`, tried in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum PreemptionStrategy {
    /// The preemptor's share with its workload stays at most the victim queue's share without
    /// the victim.
    LessThanOrEqualToFinalShare,
    /// The preemptor's share with its workload stays below the victim queue's share before.
    LessThanInitialShare,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FairSharingConfig {
    #[serde(default = "default_strategies")]
    pub preemption_strategies: Vec<PreemptionStrategy>,
}

fn default_strategies() -> Vec<PreemptionStrategy> {
    vec![PreemptionStrategy::LessThanOrEqualToFinalShare, PreemptionStrategy::LessThanInitialShare]
}

impl Default for FairSharingConfig {
    fn default() -> Self {
        Self { preemption_strategies: default_strategies() }
    }
}

impl FairSharingConfig {
    /// The lists Kueue's configuration validation accepts.
    pub fn strategies_valid(&self) -> bool {
        use PreemptionStrategy::*;
        [
            &[LessThanOrEqualToFinalShare][..],
            &[LessThanInitialShare],
            &[LessThanOrEqualToFinalShare, LessThanInitialShare],
        ]
        .contains(&self.preemption_strategies.as_slice())
    }
}

fn default_ready_timeout() -> Dur {
    secs(300)
}
fn default_backoff_base() -> Dur {
    secs(60)
}
fn default_backoff_max() -> Dur {
    secs(3600)
}

impl Default for KueueConfig {
    fn default() -> Self {
        Self {
            quota_factor: 1.0,
            pods_ready_timeout: default_ready_timeout(),
            block_admission: true,
            backoff_base: default_backoff_base(),
            backoff_max: default_backoff_max(),
            backoff_limit_count: None,
            requeue_timestamp: RequeueTimestamp::Eviction,
            fair_sharing: None,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CoschedConfig {
    /// scheduler-plugins coscheduling `permitWaitingTimeSeconds` (default 60).
    #[serde(default = "default_permit")]
    pub permit_timeout: Dur,
}

fn default_permit() -> Dur {
    secs(60)
}

impl Default for CoschedConfig {
    fn default() -> Self {
        Self { permit_timeout: default_permit() }
    }
}

/// Volcano's scheduler configuration as the model needs it (the Helm chart's defaults).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct VolcanoConfig {
    /// `schedulePeriod`: one session (enqueue, allocate, backfill) this often (default 1s).
    #[serde(default = "default_schedule_period")]
    pub schedule_period: Dur,
    /// The `overcommit` plugin is in the configuration (the chart's file has it; Volcano's
    /// capacity plugin guide drops it).
    #[serde(default = "yes")]
    pub overcommit: bool,
    /// `overcommit-factor` of that plugin (default 1.2).
    #[serde(default = "default_overcommit_factor")]
    pub overcommit_factor: f64,
    /// With tenants: `reclaim` is among the actions (as the harness's configuration for tenants
    /// has it); false runs the chart's actions, which never reclaim.
    #[serde(default = "yes")]
    pub reclaim: bool,
}

fn default_schedule_period() -> Dur {
    secs(1)
}
fn default_overcommit_factor() -> f64 {
    1.2
}

impl Default for VolcanoConfig {
    fn default() -> Self {
        Self {
            schedule_period: default_schedule_period(),
            overcommit: true,
            overcommit_factor: default_overcommit_factor(),
            reclaim: true,
        }
    }
}

/// kube-scheduler's native gang scheduling (Workload and PodGroup, 1.37) as the model needs it:
/// the scheduler's pod backoff settings, which a rejected pod group's own backoff uses.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NativeConfig {
    /// `podInitialBackoffSeconds` (default 1s): a rejected group's first wait.
    #[serde(default = "default_pod_initial_backoff")]
    pub pod_initial_backoff: Dur,
    /// `podMaxBackoffSeconds` (default 10s): the cap of a one-pod group's wait; a group of n
    /// pods waits up to this times the square root of n.
    #[serde(default = "default_pod_max_backoff")]
    pub pod_max_backoff: Dur,
}

fn default_pod_initial_backoff() -> Dur {
    secs(1)
}

fn default_pod_max_backoff() -> Dur {
    secs(10)
}

impl Default for NativeConfig {
    fn default() -> Self {
        Self { pod_initial_backoff: default_pod_initial_backoff(), pod_max_backoff: default_pod_max_backoff() }
    }
}
