//! muster's Kubernetes controller.
//!
//! One leader (a `coordination.k8s.io` Lease) watches nodes, pods and Jobs with the queue label,
//! keeps compact views of them, and feeds the durable queue engine ([`brain`]); the engine's
//! decisions become API calls (`executor`): Group objects and their status, unsuspending Jobs,
//! binding every pod of an admitted group to its node through the binding subresource, and
//! events. On start the engine is recovered from the store and reconciled with what the cluster
//! runs; a changed Queue, Cohort, Reservation or PriorityClass is given to the running engine
//! ([`brain::Brain::reconfigure`]). See docs/controller.md.

mod accepted;
pub mod allocate;
pub mod brain;
pub mod convert;
mod executor;
mod forecaster;
mod leader;
mod listing;
pub mod metrics;
pub mod metrics_auth;
mod reservation_status;
mod watch;

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube::api::ListParams;
use kube::{Api, Client};
use muster_durable::{DurableError, Options as DurableOptions, RecoverError};
use muster_graph::Policy;
use muster_k8s::cohort::ConfigKind;
use muster_k8s::condition::Refusal;
use muster_k8s::{Cohort, Queue, Reservation};
use muster_queue::EngineConfig;
use muster_store::{PgStore, SqliteStore, Store, StoreError};
use thiserror::Error;
use tracing::{info, warn};

use crate::brain::{Brain, BrainConfig, Event};
use crate::convert::Levels;
use crate::forecaster::Forecaster;
use crate::metrics::{Metrics, TimedStore};

#[derive(Debug, Error)]
pub enum ControllerError {
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("recovery: {0}")]
    Recover(#[from] RecoverError),
    #[error(transparent)]
    Engine(#[from] DurableError),
    #[error("queue configuration: {0}")]
    Config(String),
    #[error("--store {0:?}: use sqlite:PATH or postgres://...")]
    StoreUrl(String),
    #[error("lost leadership (lease {0})")]
    LostLease(String),
    #[error("the controller stopped: {0}")]
    Stopped(String),
}

/// Settings of the controller.
#[derive(Debug, Clone)]
pub struct Options {
    /// `sqlite:PATH` or a PostgreSQL connection string (`postgres://...`, `host=... user=...`).
    pub store: String,
    /// This instance's name in leases (the pod name in a cluster).
    pub identity: String,
    pub lease_namespace: String,
    pub lease_name: String,
    pub lease_ttl: Duration,
    pub levels: Levels,
    pub policy: Policy,
    /// Bindings and other writes in flight at once.
    pub concurrency: usize,
    /// How often waiting groups' positions and estimated starts are written (and the plan
    /// published).
    pub queue_view_every: Duration,
    /// Where the leader publishes its plan each `queue_view_every` (the dashboard reads it); none
    /// while this instance does not lead.
    pub plan: PlanSender,
}

/// The latest plan of the leading instance, if this is it.
pub type PlanSender = tokio::sync::watch::Sender<Option<Arc<muster_queue::Plan>>>;

/// Bindings and writes in flight at once, by default. A plain pod costs two requests (ungate,
/// bind) and a 1000-pod group's bindings go out together: at 64 in flight they bound about 200
/// pods/s on the bench's control plane, below kube-scheduler (docs/benchmarks.md). A throttled
/// request (429) is retried.
pub const DEFAULT_CONCURRENCY: usize = 256;

impl Options {
    pub fn new(store: &str, identity: &str) -> Self {
        Options {
            store: store.to_string(),
            identity: identity.to_string(),
            lease_namespace: "muster-system".into(),
            lease_name: "muster-controller".into(),
            lease_ttl: Duration::from_secs(15),
            levels: convert::default_levels(),
            policy: muster_queue::MATCH_POLICY,
            concurrency: DEFAULT_CONCURRENCY,
            queue_view_every: Duration::from_secs(5),
            plan: PlanSender::new(None),
        }
    }
}

/// Seconds the store lease lasts without renewal (a crashed leader's successor waits this long).
const STORE_LEASE_TTL_S: i64 = 30;

fn unix_now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

/// The engine configuration and what it was read from.
pub struct Loaded {
    pub config: EngineConfig,
    pub queues: watch::Versions,
    pub cohorts: watch::Versions,
    pub reservations: watch::Versions,
    /// Every Reservation, honoured or refused.
    pub listed_reservations: Vec<reservation_status::Listed>,
    /// Every Queue and Cohort, honoured or left out.
    pub verdicts: Vec<accepted::Verdict>,
}

/// The engine configuration from the Queue, Cohort and Reservation objects and PriorityClasses of the
/// cluster. An invalid Queue, Cohort or Reservation is left out (with a warning; its `Accepted`
/// condition says why), and so is every Queue below a Cohort left out; the others still work. With no valid Queue the configuration has none and is not
/// compiled: the controller then waits for one (`lead`).
pub async fn engine_config(client: &Client) -> Result<Loaded, ControllerError> {
    let queues = listing::list::<Queue>(client).await?;
    let mut cfg = EngineConfig::single_queue("unused");
    cfg.queues.clear();
    let mut verdicts: Vec<accepted::Verdict> =
        queues.unreadable.iter().map(|u| accepted::Verdict::unreadable(ConfigKind::Queue, u)).collect();
    for q in &queues.read {
        let mut verdict = accepted::Verdict::of_queue(q);
        match q.spec.to_config(&verdict.name) {
            Ok(c) => cfg.queues.push(c),
            Err(e) => {
                warn!(queue = verdict.name, "queue ignored: {e}");
                verdict.refusal = Some(Refusal::invalid_spec(&e));
            }
        }
        verdicts.push(verdict);
    }
    let cohorts = listing::list::<Cohort>(client).await?;
    verdicts.extend(cohorts.read.iter().map(accepted::Verdict::of_cohort));
    verdicts.extend(cohorts.unreadable.iter().map(|u| accepted::Verdict::unreadable(ConfigKind::Cohort, u)));
    let converted = cohorts.read.iter().map(|c| {
        let name = c.metadata.name.clone().unwrap_or_default();
        let config = c.spec.to_config(&name);
        (name, config)
    });
    // An unreadable Cohort is left out as an invalid one is, and the Queues below it with it.
    let converted = converted.chain(cohorts.unreadable.iter().map(|u| (u.name.clone(), Err(u.error.clone()))));
    let (tree, left_out) = muster_k8s::cohort::assemble(converted.collect(), &mut cfg.queues);
    cfg.cohorts = tree;
    for l in left_out {
        warn!("{l}");
        if let Some(v) = verdicts.iter_mut().find(|v| v.kind == l.kind && v.name == l.name) {
            v.refusal = Some(l.refusal);
        }
    }
    let reservations = listing::list::<Reservation>(client).await?;
    let mut listed_reservations: Vec<reservation_status::Listed> =
        reservations.unreadable.iter().map(reservation_status::Listed::unreadable).collect();
    for r in &reservations.read {
        let name = r.metadata.name.clone().unwrap_or_default();
        let refused = match r.spec.to_config(&name, &cfg.queues) {
            Ok(c) => {
                cfg.reservations.push(c);
                None
            }
            Err(e) => {
                warn!(reservation = name, "reservation ignored: {e}");
                Some(e)
            }
        };
        listed_reservations.push(reservation_status::Listed::new(r, refused));
    }
    let classes = Api::<PriorityClass>::all(client.clone()).list(&ListParams::default()).await?;
    let classes = watch::PriorityClasses::of(&classes.items);
    cfg.priority_classes = classes.values;
    cfg.default_priority_class = classes.global_default;
    if !cfg.queues.is_empty() {
        cfg.compile("queues").map_err(|e| ControllerError::Config(e.to_string()))?;
    }
    Ok(Loaded {
        config: cfg,
        queues: queues.versions(),
        cohorts: cohorts.versions(),
        reservations: reservations.versions(),
        listed_reservations,
        verdicts,
    })
}

/// Runs the controller until `shutdown` completes, leadership is lost, or an error. Only the
/// lease holder acts; others wait for the lease. On `shutdown` the leader stops its decisions,
/// gives up the store lease and then the Lease, so a standby takes over at once. Everything it
/// does is counted into `metrics`.
pub async fn run(
    client: Client,
    opts: Options,
    metrics: Arc<Metrics>,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ControllerError> {
    tokio::pin!(shutdown);
    let lease = leader::Lease::new(client.clone(), &opts);
    tokio::select! {
        r = lease.acquire() => r?,
        () = &mut shutdown => return Ok(()),
    }
    info!(identity = opts.identity, "leading");
    metrics.set_leader(true);
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let leading = lead(client.clone(), &opts, &metrics, stop_rx);
    tokio::pin!(leading);
    let result = tokio::select! {
        r = lease.hold() => r,
        r = &mut leading => r,
        () = &mut shutdown => {
            let _ = stop_tx.send(true);
            (&mut leading).await
        }
    };
    metrics.set_leader(false);
    lease.release().await;
    result
}

/// One term of leadership. The engine is recovered from the store once; each change of the
/// Queue, Cohort, Reservation or PriorityClass objects after that is given to the running engine
/// ([`Brain::reconfigure`]): nothing is listed again and no group moves. Only a cluster left
/// without a valid Queue ends the session; the next one waits for a Queue and recovers.
async fn lead(
    client: Client,
    opts: &Options,
    metrics: &Arc<Metrics>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> Result<(), ControllerError> {
    loop {
        let mut loaded = engine_config(&client).await?;
        accepted::write(&client, &loaded.verdicts).await;
        // A cluster without a Queue yet (a chart makes its Queue after its pods are Ready): wait
        // for one, alive and leading, rather than crash-loop; the webhook holds new work meanwhile.
        if loaded.config.queues.is_empty() {
            warn!(
                "no valid Queue: nothing is placed until one exists (kubectl apply a Queue; the chart makes `default`)"
            );
            tokio::select! {
                () = watch::changed::<Queue>(client.clone(), loaded.queues) => continue,
                _ = stop.changed() => return Ok(()),
            }
        }
        info!(
            queues = loaded.config.queues.len(),
            reservations = loaded.config.reservations.len(),
            "queue configuration loaded"
        );
        let (tx, rx) = mpsc::channel();
        let (act_tx, act_rx) = tokio::sync::mpsc::unbounded_channel();
        let mut watchers = watch::spawn(client.clone(), opts.levels.clone(), tx.clone());
        let exec = tokio::spawn(executor::run(client.clone(), opts.clone(), act_rx, tx.clone(), metrics.clone()));
        let (windows, windows_rx) = reservation_status::WindowsPublisher::channel();
        let listed = std::mem::take(&mut loaded.listed_reservations);
        let mut statuses = tokio::spawn(reservation_status::run(client.clone(), listed, windows_rx.clone()));
        let cfg = BrainConfig {
            engine: loaded.config.clone(),
            options: DurableOptions::new(&opts.lease_name, STORE_LEASE_TTL_S),
            policy: opts.policy,
            left_out_queues: left_out_queues(&loaded.verdicts),
        };
        let (store, identity) = (opts.store.clone(), opts.identity.clone());
        let pace = Pace { queue_view_every: opts.queue_view_every, plan: opts.plan.clone(), windows };
        let m = metrics.clone();
        let mut brain = tokio::task::spawn_blocking(move || match muster_store::StoreUrl::parse(&store) {
            Some(muster_store::StoreUrl::Sqlite(path)) => {
                think(cfg, move || SqliteStore::open(&path), &identity, rx, act_tx, pace, m)
            }
            Some(muster_store::StoreUrl::Postgres(url)) => {
                think(cfg, move || PgStore::connect(&url), &identity, rx, act_tx, pace, m)
            }
            None => Err(ControllerError::StoreUrl(store)),
        });
        let joined = |r: Result<Result<(), ControllerError>, tokio::task::JoinError>| {
            r.map_err(|e| ControllerError::Stopped(e.to_string())).and_then(|r| r)
        };
        // Whether the session ended for a cluster left without a valid Queue (to start again).
        let (outcome, again) = loop {
            tokio::select! {
                r = &mut brain => break (joined(r), false),
                () = config_changed(&client, &loaded) => {
                    let next = match engine_config(&client).await {
                        Ok(next) => next,
                        Err(e) => {
                            // The running configuration goes on; the objects still differ from the
                            // ones it was read from, so the change is read again after the pause.
                            warn!("reading the changed configuration failed; the running one is kept, and it is read again in {}s: {e}", CONFIG_RETRY.as_secs());
                            tokio::select! {
                                () = tokio::time::sleep(CONFIG_RETRY) => continue,
                                _ = stop.changed() => {
                                    let _ = tx.send(Message::Stop);
                                    break (joined((&mut brain).await), false);
                                }
                            }
                        }
                    };
                    accepted::write(&client, &next.verdicts).await;
                    if next.config.queues.is_empty() {
                        let _ = tx.send(Message::Stop);
                        break (joined((&mut brain).await), true);
                    }
                    loaded = next;
                    statuses.abort();
                    let listed = std::mem::take(&mut loaded.listed_reservations);
                    statuses = tokio::spawn(reservation_status::run(client.clone(), listed, windows_rx.clone()));
                    let _ = tx.send(Message::Reconfigure(Box::new(Reconfiguration {
                        engine: loaded.config.clone(),
                        left_out_queues: left_out_queues(&loaded.verdicts),
                    })));
                }
                _ = stop.changed() => {
                    let _ = tx.send(Message::Stop);
                    break (joined((&mut brain).await), false);
                }
            }
        };
        watchers.abort_all();
        exec.abort();
        statuses.abort();
        outcome?;
        if !again {
            return Ok(());
        }
    }
}

/// How long after a failed reading of a changed configuration it is read again.
const CONFIG_RETRY: Duration = Duration::from_secs(5);

/// Completes when the Queue, Cohort, Reservation or PriorityClass objects differ from those
/// `loaded` was read from.
async fn config_changed(client: &Client, loaded: &Loaded) {
    let classes = watch::PriorityClasses {
        values: loaded.config.priority_classes.clone(),
        global_default: loaded.config.default_priority_class.clone(),
    };
    tokio::select! {
        () = watch::changed::<Queue>(client.clone(), loaded.queues.clone()) => info!("a Queue changed; taking the new configuration"),
        () = watch::changed::<Cohort>(client.clone(), loaded.cohorts.clone()) => info!("a Cohort changed; taking the new configuration"),
        () = watch::changed::<Reservation>(client.clone(), loaded.reservations.clone()) =>
            info!("a Reservation changed; taking the new configuration"),
        () = watch::priority_classes_changed(client.clone(), classes) =>
            info!("a PriorityClass changed; taking the new configuration"),
    }
}

/// The Queue objects left out of the configuration, with why.
fn left_out_queues(verdicts: &[accepted::Verdict]) -> BTreeMap<String, String> {
    verdicts
        .iter()
        .filter(|v| v.kind == ConfigKind::Queue)
        .filter_map(|v| v.refusal.as_ref().map(|r| (v.name.clone(), r.message.clone())))
        .collect()
}

/// A configuration read again after a change, for the running brain.
pub(crate) struct Reconfiguration {
    engine: EngineConfig,
    left_out_queues: BTreeMap<String, String>,
}

/// What the brain thread receives.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Message {
    /// An event, and when it was sent (how long a decision took counts from then).
    Event(Event, Instant),
    /// The Queues, Cohorts, Reservations or PriorityClasses changed.
    Reconfigure(Box<Reconfiguration>),
    Stop,
}

impl Message {
    pub(crate) fn event(e: Event) -> Self {
        Message::Event(e, Instant::now())
    }
}

/// How long after a cycle that took `took` the next may start. A cycle costs about the same
/// whatever number of events it takes in (one engine copy and one store transaction per batch),
/// so under a stream of events the brain keeps to about a third of a core, taking more events
/// per cycle, instead of cycling flat out against the apiserver it shares the machine with.
/// Never more than a second, the quiet controller's own pace.
fn cycle_gap(took: Duration) -> Duration {
    (took * 2).clamp(Duration::from_millis(10), Duration::from_secs(1))
}

/// How often the brain refreshes the queue view, and where it publishes the plan behind it and
/// the reservations' windows.
struct Pace {
    queue_view_every: Duration,
    plan: PlanSender,
    windows: reservation_status::WindowsPublisher,
}

/// The brain's thread: events in, engine decisions out. Synchronous (the store is).
fn think<S: Store>(
    cfg: BrainConfig,
    open: impl FnOnce() -> Result<S, StoreError>,
    identity: &str,
    rx: mpsc::Receiver<Message>,
    actions: tokio::sync::mpsc::UnboundedSender<brain::Action>,
    pace: Pace,
    metrics: Arc<Metrics>,
) -> Result<(), ControllerError> {
    // A plan published while leading is withdrawn however the brain stops.
    struct Withdraw(PlanSender);
    impl Drop for Withdraw {
        fn drop(&mut self) {
            self.0.send_replace(None);
        }
    }
    let _withdraw = Withdraw(pace.plan.clone());
    let mut store = TimedStore::new(open()?, metrics.clone());
    let ttl = cfg.options.lease.ttl_s;
    let lease_name = cfg.options.lease.name.clone();
    // The store lease fences writes of an instance that lost the Kubernetes lease but still runs.
    let fence = loop {
        if let Some(f) = store.acquire_lease(&lease_name, identity, unix_now(), ttl)? {
            break f;
        }
        info!("waiting for the store lease {lease_name}");
        std::thread::sleep(Duration::from_secs(1));
    };
    let mut brain: Brain<TimedStore<S>> = Brain::new(cfg).with_metrics(metrics.clone());
    let mut forecaster = Forecaster::start().map_err(|e| ControllerError::Stopped(format!("forecast thread: {e}")))?;
    let mut store = Some(store);
    let mut last_view = Instant::now();
    let mut last_cycle = Instant::now();
    // When the first event handled since the last cycle was sent (none handled: none), and the
    // earliest time the next cycle may start.
    let mut pending_since: Option<Instant> = None;
    let mut next_cycle_at = Instant::now();
    let send = |brain: &mut Brain<TimedStore<S>>| {
        for a in brain.take_actions() {
            if actions.send(a).is_err() {
                return Err(ControllerError::Stopped("the executor stopped".into()));
            }
        }
        Ok(())
    };
    loop {
        // Before the engine starts (the first listings) there is no cycle to wait for.
        let wait = match pending_since.is_some() && brain.engine().is_some() {
            true => next_cycle_at.saturating_duration_since(Instant::now()),
            false => Duration::from_millis(250),
        };
        let first = rx.recv_timeout(wait);
        let now = unix_now();
        let mut batch = Vec::new();
        match first {
            Ok(m) => batch.push(m),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => return Ok(()),
        }
        batch.extend(rx.try_iter().take(10_000));
        for m in batch {
            match m {
                Message::Event(e, sent) => {
                    pending_since = Some(pending_since.map_or(sent, |p| p.min(sent)));
                    brain.handle(e, now);
                }
                Message::Reconfigure(r) => {
                    pending_since = Some(pending_since.unwrap_or_else(Instant::now));
                    brain.reconfigure(r.engine, r.left_out_queues, now);
                }
                Message::Stop => {
                    brain.release();
                    return Ok(());
                }
            }
        }
        if let Some(s) = store.take_if(|_| brain.synced()) {
            brain.start(s, fence.clone(), now)?;
            // The first cycle's decisions count from the engine's start, not from the listings.
            pending_since = Some(Instant::now());
        }
        // Events get a cycle as soon as the pacing allows; a quiet controller still cycles
        // each second (timers).
        let due = (pending_since.is_some() && Instant::now() >= next_cycle_at)
            || last_cycle.elapsed() >= Duration::from_secs(1);
        if brain.engine().is_some() && due {
            let started = Instant::now();
            metrics.cycle_triggered(pending_since.take());
            brain.cycle(now);
            let took = started.elapsed();
            metrics.observe_cycle(took);
            last_cycle = Instant::now();
            next_cycle_at = last_cycle + cycle_gap(took);
            if let Some(e) = brain.engine() {
                let windows = e.engine().reservation_windows();
                pace.windows.publish(reservation_status::HeldWindows { now, windows });
            }
            if last_view.elapsed() >= pace.queue_view_every
                && !forecaster.busy()
                && let Some(engine) = brain.queue_view_input()
            {
                // The whole plan only while a dashboard listens.
                forecaster.submit(engine, now, pace.plan.receiver_count() > 0);
                last_view = Instant::now();
            }
        }
        if let Some(view) = forecaster.take() {
            brain.apply_queue_view(view.waiting);
            if let Some(plan) = view.plan {
                pace.plan.send_replace(Some(Arc::new(plan)));
            }
        }
        send(&mut brain)?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cycle_waits_twice_its_cost_within_ten_milliseconds_and_a_second() {
        assert_eq!(cycle_gap(Duration::from_micros(300)), Duration::from_millis(10));
        assert_eq!(cycle_gap(Duration::from_millis(8)), Duration::from_millis(16));
        assert_eq!(cycle_gap(Duration::from_secs(3)), Duration::from_secs(1));
    }
}
