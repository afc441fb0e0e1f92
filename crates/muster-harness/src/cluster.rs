//! The client, wall-clock time and the small object helpers every command shares.

use std::fmt::Debug;
use std::future::Future;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Config, Resource};
use muster_graph::resources;
use serde::de::DeserializeOwned;

use crate::{Error, Result};

/// The config and client of a kubeconfig's current context (client certificates or a token).
pub async fn client(kubeconfig: &Path) -> Result<(Client, Config)> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let kc = Kubeconfig::read_from(kubeconfig).map_err(|e| Error::file(kubeconfig, e))?;
    let mut config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .map_err(|e| Error::file(kubeconfig, e))?;
    config.connect_timeout = Some(Duration::from_secs(10));
    config.read_timeout = Some(Duration::from_secs(60));
    let client = Client::try_from(config.clone()).map_err(Error::kube("cannot build a Kubernetes client"))?;
    Ok((client, config))
}

/// Seconds since the epoch, as `time.time()`: what the harness compares with object timestamps.
pub fn now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

/// Sleeps until the wall-clock time `t` (seconds since the epoch); returns at once if it passed.
pub async fn sleep_until(t: f64) {
    let d = t - now();
    if d > 0.0 {
        tokio::time::sleep(Duration::from_secs_f64(d)).await;
    }
}

pub async fn sleep(secs: f64) {
    tokio::time::sleep(Duration::from_secs_f64(secs.max(0.0))).await;
}

/// An object timestamp in seconds since the epoch (the apiserver writes whole seconds).
pub fn secs(t: &Time) -> f64 {
    t.0.as_millisecond() as f64 / 1000.0
}

/// The state behind `m`, even if a holder panicked (the figures are still worth reading).
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Lists, then watches `api` into `state` until aborted (relisting when the watch expires):
/// `on(state, deleted, object, now)` for every object seen.
pub fn watch<K, T>(api: Api<K>, state: Arc<Mutex<T>>, on: fn(&mut T, bool, &K, f64)) -> tokio::task::JoinHandle<()>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + 'static,
    T: Send + 'static,
{
    tokio::spawn(async move {
        let mut events = watcher(api, watcher::Config::default()).default_backoff().boxed();
        while let Some(ev) = events.next().await {
            match ev {
                Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => on(&mut lock(&state), false, &o, now()),
                Ok(watcher::Event::Delete(o)) => on(&mut lock(&state), true, &o, now()),
                Ok(_) => {}
                Err(e) => eprintln!("watch: {e}"),
            }
        }
    })
}

/// An RFC 3339 string (such as KWOK's all-ready stamp) in seconds since the epoch, parsed as the
/// apiserver's own `Time` is.
pub fn parse_time(s: &str) -> Option<f64> {
    serde_json::from_value::<Time>(serde_json::Value::String(s.to_string())).ok().map(|t| secs(&t))
}

/// An amount of resource `name` in muster's base units (millicores, bytes, count); absent or
/// unreadable amounts count as `default`.
pub fn amount(name: &str, q: Option<&k8s_openapi::apimachinery::pkg::api::resource::Quantity>, default: u64) -> u64 {
    let Some(q) = q else { return default };
    match resources::unit_of(name).and_then(|u| resources::parse_amount(u, &q.0).map_err(|e| e.to_string())) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("warning: {name} {:?}: {e}", q.0);
            default
        }
    }
}

/// Retries a request on throttling, server errors and broken connections (8 tries, the wait
/// growing by 0.2 s a try), as the Python client did; other errors are returned at once.
pub async fn retry<T, F, Fut>(what: &str, mut f: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = std::result::Result<T, kube::Error>>,
{
    const TRIES: u32 = 8;
    let mut last = None;
    for attempt in 0..TRIES {
        match f().await {
            Ok(v) => return Ok(v),
            Err(kube::Error::Api(s)) if ![429, 500, 503, 504].contains(&s.code) => {
                return Err(Error::Kube { what: what.to_string(), source: kube::Error::Api(s) });
            }
            Err(e @ (kube::Error::SerdeError(_) | kube::Error::BuildRequest(_))) => {
                return Err(Error::Kube { what: what.to_string(), source: e });
            }
            Err(e) => last = Some(e),
        }
        sleep(0.2 * f64::from(attempt + 1)).await;
    }
    let source = last.expect("at least one try");
    Err(Error::Kube { what: format!("{what} (gave up after {TRIES} tries)"), source })
}

/// The condition `kind` of a status if it is True.
pub fn true_condition<'a, C, I>(conditions: I, kind: &str) -> Option<&'a C>
where
    I: IntoIterator<Item = &'a C>,
    C: Condition + 'a,
{
    conditions.into_iter().find(|c| c.kind() == kind && c.status() == "True")
}

/// What `true_condition` needs of a Job's or a Pod's conditions.
pub trait Condition {
    fn kind(&self) -> &str;
    fn status(&self) -> &str;
    fn last_transition(&self) -> Option<f64>;
}

impl Condition for k8s_openapi::api::batch::v1::JobCondition {
    fn kind(&self) -> &str {
        &self.type_
    }
    fn status(&self) -> &str {
        &self.status
    }
    fn last_transition(&self) -> Option<f64> {
        self.last_transition_time.as_ref().map(secs)
    }
}

impl Condition for k8s_openapi::api::core::v1::PodCondition {
    fn kind(&self) -> &str {
        &self.type_
    }
    fn status(&self) -> &str {
        &self.status
    }
    fn last_transition(&self) -> Option<f64> {
        self.last_transition_time.as_ref().map(secs)
    }
}

/// The label of the Job controller that names a pod's Job.
pub const JOB_NAME_LABEL: &str = "batch.kubernetes.io/job-name";
/// The harness's label naming the scenario job of a pod, and of a Job, when the job is several
/// objects (a job of several sets: a Job per set, a JobSet's child Jobs).
pub const HARNESS_JOB_LABEL: &str = "harness.muster.dev/job";
/// The harness's label naming the set of a pod of a job of several sets.
pub const HARNESS_SET_LABEL: &str = "harness.muster.dev/set";
/// The gang label and size muster-gang-ready (hack/k8s-build) reads on pods no Job owns.
pub const KWOK_GANG_LABEL: &str = "kwok.muster.dev/gang";
pub const KWOK_GANG_SIZE: &str = "kwok.muster.dev/gang-size";
/// KWOK's stamp (hack/kwok/stages.yaml) of when all pods of a Job were ready.
pub const ALL_READY_AT: &str = "kwok.muster.dev/all-ready-at";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_and_amounts() {
        assert_eq!(parse_time("2026-01-02T03:04:05Z"), Some(1_767_323_045.0));
        assert_eq!(parse_time("yesterday"), None);
        use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
        assert_eq!(amount("cpu", Some(&Quantity("1500m".into())), 0), 1500);
        assert_eq!(amount("memory", Some(&Quantity("2Gi".into())), 0), 2 << 30);
        assert_eq!(amount("pods", None, 110), 110);
        assert_eq!(amount("cpu", Some(&Quantity("lots".into())), 7), 7);
    }
}
