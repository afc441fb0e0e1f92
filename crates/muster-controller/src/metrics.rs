//! The controller's Prometheus metrics. One [`Metrics`] owns the registry; the brain (decisions),
//! the executor (bindings), the leader election and the store (through [`TimedStore`]) count into
//! it through an `Arc`, and [`serve`] answers `/metrics` (OpenMetrics text) and `/healthz` over
//! plain HTTP. docs/user-guide.md lists every metric.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use muster_k8s::QueueStatus;
use muster_queue::{Group, GroupKey, GroupState, Reason, Transition};
use muster_store::{
    Fence, HistoryEntry, PutResult, RunRecord, RunTimeRecord, Snapshot, Store, StoreError, UsageSum, Write,
};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};

use crate::metrics_auth::MetricsAuth;

/// The content type of the OpenMetrics text format, which Prometheus scrapes as is.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct GroupLabels {
    queue: String,
    state: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DriverLabels {
    driver: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QueueLabels {
    queue: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EventLabels {
    outcome: &'static str,
}

/// What became of one event muster decided to record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventOutcome {
    Recorded,
    /// The apiserver refused it or could not be reached.
    Failed,
    /// Never sent: the queue of events was full, or its namespace is being deleted.
    Skipped,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EvictionLabels {
    queue: String,
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RunTimeLabels {
    /// Where the run time a group was planned with came from: `declared` or `learned`.
    planned: &'static str,
}

/// Bounds of the run-time ratio histogram: fine around 1 (as planned), coarse far from it.
const RUN_TIME_RATIO_BUCKETS: [f64; 11] = [0.25, 0.5, 0.75, 0.9, 0.95, 1.0, 1.05, 1.1, 1.25, 1.5, 2.0];
/// Error of a first estimated start over the wait: 0.1 is the target (docs/queue.md).
const ESTIMATE_ERROR_BUCKETS: [f64; 8] = [0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0];

/// The controller's metrics and their registry.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    groups: Family<GroupLabels, Gauge>,
    admissions: Family<QueueLabels, Counter>,
    evictions: Family<EvictionLabels, Counter>,
    run_time_exceeded: Family<QueueLabels, Counter>,
    pods_bound: Counter,
    bind_failures: Counter,
    events: Family<EventLabels, Counter>,
    event_delay: Histogram,
    cycle_duration: Histogram,
    admission_wait: Histogram,
    admission_delay: Histogram,
    run_time_ratio: Family<RunTimeLabels, Histogram>,
    estimated_start_error: Histogram,
    leader: Gauge,
    published_devices: Family<DriverLabels, Gauge>,
    unread_slices: Gauge,
    store_write_duration: Histogram,
    /// When each waiting group entered its queue, from the transitions seen: the engine keeps
    /// only the time that orders a group, which a requeue after preemption does not move.
    queued_since: Mutex<HashMap<GroupKey, i64>>,
    /// The first estimated start each waiting group was given, to score it at admission.
    first_estimates: Mutex<HashMap<GroupKey, i64>>,
    /// When the first event the running cycle took in was sent; none in a cycle of the clock.
    cycle_trigger: Mutex<Option<Instant>>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("muster");
        let groups = Family::<GroupLabels, Gauge>::default();
        registry.register(
            "groups",
            "Groups per queue and state (pending or admitted), as the Queue status",
            groups.clone(),
        );
        let admissions = Family::<QueueLabels, Counter>::default();
        registry.register("admissions", "Groups admitted (placed whole)", admissions.clone());
        let evictions = Family::<EvictionLabels, Counter>::default();
        registry.register("evictions", "Groups whose allocation was released before they finished", evictions.clone());
        let run_time_exceeded = Family::<QueueLabels, Counter>::default();
        registry.register(
            "run_time_exceeded",
            "Groups ended (Failed) for running past their declared run time and the grace",
            run_time_exceeded.clone(),
        );
        let pods_bound = Counter::default();
        registry.register("pods_bound", "Pods bound to their member's node", pods_bound.clone());
        let bind_failures = Counter::default();
        registry.register(
            "bind_failures",
            "Bindings refused (the group is released and queued again)",
            bind_failures.clone(),
        );
        let events = Family::<EventLabels, Counter>::default();
        registry.register("events", "Kubernetes events muster decided to record, by outcome", events.clone());
        // 1 ms .. 33 s: under load events wait behind each other.
        let event_delay = Histogram::new(exponential_buckets(0.001, 2.0, 16));
        registry.register_with_unit(
            "event_delay",
            "From the decision to its event recorded by the apiserver",
            Unit::Seconds,
            event_delay.clone(),
        );
        // 0.5 ms .. 16 s: a cycle on a big queue takes milliseconds, a stuck store seconds.
        let cycle_duration = Histogram::new(exponential_buckets(0.0005, 2.0, 16));
        registry.register_with_unit(
            "cycle_duration",
            "One scheduling cycle of the engine",
            Unit::Seconds,
            cycle_duration.clone(),
        );
        // 1 s .. 4.5 h; the engine's clock counts whole seconds.
        let admission_wait = Histogram::new(exponential_buckets(1.0, 2.0, 15));
        registry.register_with_unit(
            "admission_wait",
            "From entering the queue (submission or requeue) to admission",
            Unit::Seconds,
            admission_wait.clone(),
        );
        // 1 ms .. 16 s: a cycle follows its first event within milliseconds unless paced.
        let admission_delay = Histogram::new(exponential_buckets(0.001, 2.0, 15));
        registry.register_with_unit(
            "admission_delay",
            "From the first event a scheduling cycle took in (a group ended, a pod, a Job or a node changed) to \
             each admission it made: how soon a group that fits is admitted",
            Unit::Seconds,
            admission_delay.clone(),
        );
        let run_time_ratio = Family::<RunTimeLabels, Histogram>::new_with_constructor(
            (|| Histogram::new(RUN_TIME_RATIO_BUCKETS)) as fn() -> Histogram,
        );
        registry.register(
            "run_time_ratio",
            "How long a group that succeeded held its nodes, over the run time it was planned with (1: as planned)",
            run_time_ratio.clone(),
        );
        let estimated_start_error = Histogram::new(ESTIMATE_ERROR_BUCKETS);
        registry.register(
            "estimated_start_error_ratio",
            "|admission - first estimated start| over the wait, per group that waited 1 s or more (0: as estimated)",
            estimated_start_error.clone(),
        );
        let leader = Gauge::default();
        registry.register("leader", "1 while this replica holds the leader lease", leader.clone());
        let published_devices = Family::<DriverLabels, Gauge>::default();
        registry.register(
            "published_devices",
            "Devices DRA drivers publish in ResourceSlices that muster places, per driver",
            published_devices.clone(),
        );
        let unread_slices = Gauge::default();
        registry.register(
            "unread_resource_slices",
            "ResourceSlices muster does not read yet (their devices are not placed); the controller's log says why",
            unread_slices.clone(),
        );
        let store_write_duration = Histogram::new(exponential_buckets(0.0005, 2.0, 16));
        registry.register_with_unit(
            "store_write_duration",
            "One write transaction of the durable store",
            Unit::Seconds,
            store_write_duration.clone(),
        );
        Metrics {
            registry,
            groups,
            admissions,
            evictions,
            run_time_exceeded,
            pods_bound,
            bind_failures,
            events,
            event_delay,
            cycle_duration,
            admission_wait,
            admission_delay,
            run_time_ratio,
            estimated_start_error,
            leader,
            published_devices,
            unread_slices,
            store_write_duration,
            queued_since: Mutex::new(HashMap::new()),
            first_estimates: Mutex::new(HashMap::new()),
            cycle_trigger: Mutex::new(None),
        }
    }

    /// The registry in the OpenMetrics text format.
    pub fn encode(&self) -> Result<String, std::fmt::Error> {
        let mut out = String::new();
        encode(&mut out, &self.registry)?;
        Ok(out)
    }

    /// The group counts of the Queue statuses just computed; queues no longer configured go.
    /// Devices placed per driver, and the slices not read.
    pub fn set_published(&self, per_driver: &BTreeMap<String, i64>, unread: i64) {
        self.published_devices.clear();
        for (driver, n) in per_driver {
            self.published_devices.get_or_create(&DriverLabels { driver: driver.clone() }).set(*n);
        }
        self.unread_slices.set(unread);
    }

    pub fn set_groups(&self, statuses: &BTreeMap<String, QueueStatus>) {
        self.groups.clear();
        for (queue, st) in statuses {
            for (state, n) in [("pending", st.pending_groups), ("admitted", st.admitted_groups)] {
                self.groups.get_or_create(&GroupLabels { queue: queue.clone(), state }).set(i64::from(n));
            }
        }
    }

    /// Counts one engine transition; `group` is the engine's group after it (for its queue and
    /// times), if the engine still has it. Returns the error of the group's first estimated start
    /// (over its wait) when the transition admitted a group that had one and waited 1 s or more.
    pub fn transition(&self, t: &Transition, group: Option<&Group>) -> Option<f64> {
        let queue = group.map(|g| g.spec.queue.clone()).unwrap_or_default();
        let mut waiting = self.queued_since.lock().unwrap_or_else(PoisonError::into_inner);
        if t.to.is_pending() && !t.from.is_pending() {
            // A new group waits since its submission (the Job's creation), however late the
            // controller saw it; a requeued one since its requeue.
            let since = if t.from == GroupState::New { group.map(|g| g.spec.submitted_at) } else { None };
            waiting.insert(t.key.clone(), since.unwrap_or(t.at));
        }
        if t.to == GroupState::Admitted && t.from != GroupState::Admitted {
            self.admissions.get_or_create(&QueueLabels { queue }).inc();
            // After a restart the wait began before this process: the engine's ordering time.
            let since = waiting.remove(&t.key).or(group.map(|g| g.order_time));
            if let Some(since) = since {
                self.admission_wait.observe(t.at.saturating_sub(since).max(0) as f64);
            }
            if let Some(trigger) = *self.cycle_trigger.lock().unwrap_or_else(PoisonError::into_inner) {
                self.admission_delay.observe(trigger.elapsed().as_secs_f64());
            }
            let estimate = self.first_estimates.lock().unwrap_or_else(PoisonError::into_inner).remove(&t.key);
            let (since, estimate) = (since?, estimate?);
            let error = (t.at - since >= 1).then(|| t.at.abs_diff(estimate) as f64 / (t.at - since) as f64)?;
            self.estimated_start_error.observe(error);
            return Some(error);
        }
        if t.to == GroupState::Succeeded {
            self.observe_run_time(t, group);
        }
        if matches!(t.reason, Reason::RunTimeExceeded { .. }) {
            self.run_time_exceeded.get_or_create(&QueueLabels { queue: queue.clone() }).inc();
        }
        if t.to == GroupState::Evicted {
            self.evictions.get_or_create(&EvictionLabels { queue, reason: eviction_reason(&t.reason) }).inc();
        }
        if !t.to.is_pending() {
            waiting.remove(&t.key);
            self.first_estimates.lock().unwrap_or_else(PoisonError::into_inner).remove(&t.key);
        }
        None
    }

    /// A waiting group's estimated start; only its first counts.
    pub fn estimated(&self, key: &GroupKey, start: i64) {
        self.first_estimates.lock().unwrap_or_else(PoisonError::into_inner).entry(key.clone()).or_insert(start);
    }

    /// A group that succeeded: how long it held its nodes against its planned window (none
    /// for a group planned to run until it ends).
    fn observe_run_time(&self, t: &Transition, group: Option<&Group>) {
        let Some(a) = &t.allocation else { return };
        let planned = a.end.saturating_sub(a.start);
        if a.end == i64::MAX || planned <= 0 {
            return;
        }
        let source = match group.map(|g| g.spec.request.duration.is_some()) {
            Some(false) => "learned",
            _ => "declared",
        };
        let held = t.at.saturating_sub(a.start).max(0) as f64;
        self.run_time_ratio.get_or_create(&RunTimeLabels { planned: source }).observe(held / planned as f64);
    }

    pub fn pod_bound(&self) {
        self.pods_bound.inc();
    }

    pub fn bind_failed(&self) {
        self.bind_failures.inc();
    }

    /// Counts one event's outcome; a recorded one's delay since its decision too.
    pub fn event(&self, outcome: EventOutcome, since_decision: Duration) {
        let outcome = match outcome {
            EventOutcome::Recorded => {
                self.event_delay.observe(since_decision.as_secs_f64());
                "recorded"
            }
            EventOutcome::Failed => "failed",
            EventOutcome::Skipped => "skipped",
        };
        self.events.get_or_create(&EventLabels { outcome }).inc();
    }

    /// A scheduling cycle begins, taking in events since `first_event_sent` (none: the clock's).
    pub fn cycle_triggered(&self, first_event_sent: Option<Instant>) {
        *self.cycle_trigger.lock().unwrap_or_else(PoisonError::into_inner) = first_event_sent;
    }

    pub fn observe_cycle(&self, took: Duration) {
        self.cycle_duration.observe(took.as_secs_f64());
    }

    pub fn set_leader(&self, leading: bool) {
        self.leader.set(i64::from(leading));
    }
}

/// A short, fixed label value for why a group was evicted.
fn eviction_reason(r: &Reason) -> &'static str {
    match r {
        Reason::PodsReadyTimeout { .. } => "pods_ready_timeout",
        Reason::RecoveryTimeout { .. } => "recovery_timeout",
        Reason::Preempted { .. } => "preempted",
        Reason::Reclaimed { .. } => "reclaimed",
        Reason::ReservationStarted { .. } => "reservation_started",
        Reason::MembersLost { .. } => "members_lost",
        _ => "other",
    }
}

/// A store whose write transactions ([`Store::apply`]) are timed into the metrics.
pub struct TimedStore<S> {
    inner: S,
    metrics: Arc<Metrics>,
}

impl<S: Store> TimedStore<S> {
    pub fn new(inner: S, metrics: Arc<Metrics>) -> Self {
        TimedStore { inner, metrics }
    }
}

impl<S: Store> Store for TimedStore<S> {
    fn apply(&mut self, fence: &Fence, now: i64, batch: &[Write]) -> Result<Vec<PutResult>, StoreError> {
        let started = Instant::now();
        let r = self.inner.apply(fence, now, batch);
        self.metrics.store_write_duration.observe(started.elapsed().as_secs_f64());
        r
    }

    fn load(&mut self) -> Result<Snapshot, StoreError> {
        self.inner.load()
    }

    fn acquire_lease(&mut self, name: &str, holder: &str, now: i64, ttl: i64) -> Result<Option<Fence>, StoreError> {
        self.inner.acquire_lease(name, holder, now, ttl)
    }

    fn renew_lease(&mut self, fence: &Fence, now: i64, ttl: i64) -> Result<bool, StoreError> {
        self.inner.renew_lease(fence, now, ttl)
    }

    fn release_lease(&mut self, fence: &Fence) -> Result<bool, StoreError> {
        self.inner.release_lease(fence)
    }

    fn usage_since(&mut self, queue: Option<&str>, since: i64) -> Result<Vec<UsageSum>, StoreError> {
        self.inner.usage_since(queue, since)
    }

    fn decayed_usage(&mut self, now: i64, half_life_seconds: i64) -> Result<Vec<UsageSum>, StoreError> {
        self.inner.decayed_usage(now, half_life_seconds)
    }

    fn recent_run_times(&mut self, per_shape: usize) -> Result<Vec<RunTimeRecord>, StoreError> {
        self.inner.recent_run_times(per_shape)
    }

    fn runs(&mut self, since: i64, until: i64) -> Result<Vec<RunRecord>, StoreError> {
        self.inner.runs(since, until)
    }

    fn history(&mut self, group_key: &str) -> Result<Vec<HistoryEntry>, StoreError> {
        self.inner.history(group_key)
    }
}

async fn metrics_text(State(metrics): State<Arc<Metrics>>) -> Response {
    match metrics.encode() {
        Ok(text) => ([(header::CONTENT_TYPE, CONTENT_TYPE)], text).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, format!("encoding the metrics: {e}")).into_response(),
    }
}

/// `/metrics`, behind `auth` when given (`metrics_auth`), and `/healthz`.
pub fn router(metrics: Arc<Metrics>, auth: Option<Arc<MetricsAuth>>) -> Router {
    let mut page = Router::new().route("/metrics", get(metrics_text)).with_state(metrics);
    if let Some(auth) = auth {
        page = page.layer(axum::middleware::from_fn_with_state(auth, crate::metrics_auth::require));
    }
    page.route("/healthz", get(|| async { "ok" }))
}

/// Serves [`router`] on `listener` (plain HTTP) until `shutdown` completes.
pub async fn serve(
    listener: tokio::net::TcpListener,
    metrics: Arc<Metrics>,
    auth: Option<Arc<MetricsAuth>>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router(metrics, auth)).with_graceful_shutdown(shutdown).await
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    fn has(text: &str, line: &str) -> bool {
        text.lines().any(|l| l == line)
    }

    #[test]
    fn metrics_drop_the_group_counts_of_a_queue_that_is_gone() {
        let metrics = Metrics::new();
        let status = |pending| QueueStatus { pending_groups: pending, ..QueueStatus::default() };
        metrics.set_groups(&BTreeMap::from([("old".to_string(), status(3))]));
        metrics.set_groups(&BTreeMap::from([("new".to_string(), status(1))]));
        let text = metrics.encode().unwrap();
        assert!(has(&text, r#"muster_groups{queue="new",state="pending"} 1"#), "{text}");
        assert!(!text.contains(r#"queue="old""#), "{text}");
    }

    #[test]
    fn run_times_are_compared_with_the_plan_by_where_it_came_from() {
        use muster_graph::GroupRequest;
        use muster_queue::{AllocationRecord, GroupSpec};
        let metrics = Metrics::new();
        let group = |duration| {
            let mut request = GroupRequest::simple("g", 1, &[("cpu", 1000)]);
            request.duration = duration;
            let spec = GroupSpec {
                key: GroupKey::new("ns", "g"),
                queue: "q".into(),
                priority_class: None,
                request,
                submitted_at: 0,
            };
            Group::submitted(spec, 0, 0)
        };
        let finished = |start, end, at| Transition {
            at,
            key: GroupKey::new("ns", "g"),
            from: GroupState::Running,
            to: GroupState::Succeeded,
            reason: Reason::Finished { succeeded: true },
            allocation: Some(AllocationRecord { alloc_id: 1, members: vec![], start, end }),
        };
        // Declared 100 s, held 60 s; learned 100 s, held 120 s; planned "forever": not counted.
        metrics.transition(&finished(0, 100, 60), Some(&group(Some(100))));
        metrics.transition(&finished(0, 100, 120), Some(&group(None)));
        metrics.transition(&finished(0, i64::MAX, 50), Some(&group(None)));
        let text = metrics.encode().unwrap();
        assert!(has(&text, r#"muster_run_time_ratio_sum{planned="declared"} 0.6"#), "{text}");
        assert!(has(&text, r#"muster_run_time_ratio_count{planned="learned"} 1"#), "{text}");
        assert!(has(&text, r#"muster_run_time_ratio_bucket{le="1.25",planned="learned"} 1"#), "{text}");
        assert!(has(&text, r#"muster_run_time_ratio_bucket{le="1.1",planned="learned"} 0"#), "{text}");
    }

    #[test]
    fn a_first_estimated_start_is_scored_against_the_admission() {
        let metrics = Metrics::new();
        let key = GroupKey::new("ns", "g");
        let step =
            |at, from, to| Transition { at, key: key.clone(), from, to, reason: Reason::Submitted, allocation: None };
        metrics.transition(&step(100, GroupState::New, GroupState::Queued), None);
        metrics.estimated(&key, 150);
        metrics.estimated(&key, 190);
        // Waited 100 s; the first estimate (150) was 50 s early.
        assert_eq!(metrics.transition(&step(200, GroupState::Queued, GroupState::Admitted), None), Some(0.5));
        let text = metrics.encode().unwrap();
        assert!(has(&text, "muster_estimated_start_error_ratio_sum 0.5"), "{text}");
        assert!(has(&text, r#"muster_estimated_start_error_ratio_bucket{le="0.2"} 0"#), "{text}");
        assert!(has(&text, r#"muster_estimated_start_error_ratio_bucket{le="0.5"} 1"#), "{text}");
    }

    #[test]
    fn admissions_of_a_cycle_count_from_its_first_event_and_a_clock_cycle_counts_none() {
        let metrics = Metrics::new();
        let admit = |name: &str| Transition {
            at: 10,
            key: GroupKey::new("ns", name),
            from: GroupState::Queued,
            to: GroupState::Admitted,
            reason: Reason::Submitted,
            allocation: None,
        };
        // A cycle of the clock (no event): its admission is not a reaction to anything.
        metrics.cycle_triggered(None);
        metrics.transition(&admit("a"), None);
        let text = metrics.encode().unwrap();
        assert!(has(&text, "muster_admission_delay_seconds_count 0"), "{text}");
        // A cycle whose first event was sent 3 ms or more ago: at least 3 ms, well under 1 s.
        metrics.cycle_triggered(Some(Instant::now() - Duration::from_millis(3)));
        metrics.transition(&admit("b"), None);
        let text = metrics.encode().unwrap();
        assert!(has(&text, "muster_admission_delay_seconds_count 1"), "{text}");
        assert!(has(&text, r#"muster_admission_delay_seconds_bucket{le="0.002"} 0"#), "{text}");
        assert!(has(&text, r#"muster_admission_delay_seconds_bucket{le="1.024"} 1"#), "{text}");
    }

    /// One plain HTTP/1.1 GET; the whole response.
    async fn get(addr: std::net::SocketAddr, path: &str) -> String {
        let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
        tcp.write_all(request.as_bytes()).await.unwrap();
        let mut out = String::new();
        tcp.read_to_string(&mut out).await.unwrap();
        out
    }

    #[tokio::test]
    async fn metrics_are_served_over_http_with_healthz() {
        let metrics = Arc::new(Metrics::new());
        metrics.set_leader(true);
        metrics.pod_bound();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(serve(listener, metrics, None, async {
            let _ = stopped.await;
        }));
        let page = get(addr, "/metrics").await;
        assert!(page.starts_with("HTTP/1.1 200"), "{page}");
        assert!(page.contains(CONTENT_TYPE), "{page}");
        assert!(page.lines().any(|l| l == "muster_leader 1"), "{page}");
        assert!(page.lines().any(|l| l == "muster_pods_bound_total 1"), "{page}");
        assert!(page.trim_end().ends_with("# EOF"), "{page}");
        assert!(get(addr, "/healthz").await.ends_with("\r\n\r\nok"));
        stop.send(()).unwrap();
        server.await.unwrap().unwrap();
    }
}
