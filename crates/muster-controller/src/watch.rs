//! Watchers: nodes, the devices DRA drivers publish for them and those claims hold, pods, namespaces, Group objects, and the queued workloads of every held kind
//! (a kind defined by a CRD once the CRD is installed) into compact views for the brain; Queue,
//! Reservation and PriorityClass changes.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Debug;
use std::sync::mpsc::Sender;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube::core::ApiResource;
use kube::core::PartialObjectMeta;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource};
use muster_k8s::external::{JobSet, MPIJob, RayCluster, RayJob, served};
use muster_k8s::workload::{Kind, Workload, job, jobset, mpijob, raycluster, rayjob};
use muster_k8s::{Group, labels};
use serde::de::DeserializeOwned;
use tokio::task::JoinSet;
use tracing::{info, warn};

use crate::Message;
use crate::brain::{Change, Event};
use crate::convert::{self, Levels};

/// How often to ask whether an optional kind's CRD (JobSet, MPIJob, RayJob, RayCluster) has been installed.
const CRD_POLL: std::time::Duration = std::time::Duration::from_secs(30);
/// How soon to ask again after discovery failed.
const DISCOVERY_RETRY: std::time::Duration = std::time::Duration::from_secs(2);

/// Spawns the watchers; abort the set to stop them.
pub fn spawn(client: Client, levels: Levels, tx: Sender<Message>) -> JoinSet<()> {
    let mut set = JoinSet::new();
    let nodes = Api::<Node>::all(client.clone());
    let t = tx.clone();
    set.spawn(forward(nodes, watcher::Config::default(), move |n| convert::node_view(n, &levels), Event::Node, t));
    // All pods: muster's, and other schedulers' that use capacity on the same nodes.
    let pods = Api::<Pod>::all(client.clone());
    set.spawn(forward(pods, watcher::Config::default(), convert::pod_view, Event::Pod, tx.clone()));
    let jobs = Api::<Job>::all(client.clone());
    let t = tx.clone();
    set.spawn(forward(jobs, watcher::Config::default().labels(labels::QUEUE), convert::job_view, job_event, t));
    let namespaces = Api::<Namespace>::all(client.clone());
    let t = tx.clone();
    set.spawn(forward(namespaces, watcher::Config::default(), convert::namespace_view, Event::Namespace, t));
    // Group objects: a status or a deletion not muster's is repaired.
    let groups = Api::<Group>::all(client.clone());
    let t = tx.clone();
    set.spawn(forward(groups, watcher::Config::default(), convert::group_object_view, Event::GroupObject, t));
    set.spawn(dra_kind::<ResourceSlice, _>(client.clone(), convert::slice_view, Event::Slice, tx.clone()));
    set.spawn(dra_kind::<ResourceClaim, _>(client.clone(), convert::claim_view, Event::Claim, tx.clone()));
    set.spawn(dra_kind::<ResourceClaimTemplate, _>(
        client.clone(),
        convert::template_view,
        Event::Template,
        tx.clone(),
    ));
    set.spawn(dra_kind::<DeviceClass, _>(client.clone(), convert::class_view, Event::Class, tx.clone()));
    set.spawn(optional_kind::<JobSet>(client.clone(), jobset_event, tx.clone()));
    set.spawn(optional_kind::<MPIJob>(client.clone(), mpijob_event, tx.clone()));
    set.spawn(optional_kind::<RayJob>(client.clone(), rayjob_event, tx.clone()));
    set.spawn(optional_kind::<RayCluster>(client, raycluster_event, tx));
    set
}

fn job_event(c: Change<convert::WorkloadView>) -> Event {
    Event::Workload(&job::KIND, c)
}

fn jobset_event(c: Change<convert::WorkloadView>) -> Event {
    Event::Workload(&jobset::KIND, c)
}

fn mpijob_event(c: Change<convert::WorkloadView>) -> Event {
    Event::Workload(&mpijob::KIND, c)
}

fn rayjob_event(c: Change<convert::WorkloadView>) -> Event {
    Event::Workload(&rayjob::KIND, c)
}

fn raycluster_event(c: Change<convert::WorkloadView>) -> Event {
    Event::Workload(&raycluster::KIND, c)
}

/// Workloads of a held kind whose CRD may not be installed (JobSets, MPIJobs), with the queue
/// label, once the CRD is served. Until then the brain gets one empty listing, so that it need
/// not wait for a kind the cluster does not have. Only a definite "not served" counts: after a
/// failed discovery call nothing is listed (recovery would take the workloads for deleted).
async fn optional_kind<K>(client: Client, wrap: fn(Change<convert::WorkloadView>) -> Event, tx: Sender<Message>)
where
    K: Workload + Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + 'static,
{
    let kind: &Kind = <K as Workload>::kind();
    let mut listed = false;
    loop {
        let wait = match served(&client, &kind.resource()).await {
            Ok(true) => break,
            Ok(false) if !listed => {
                listed = true;
                for c in [Change::Init, Change::InitDone] {
                    if tx.send(Message::event(wrap(c))).is_err() {
                        return;
                    }
                }
                CRD_POLL
            }
            Ok(false) => CRD_POLL,
            Err(e) => {
                warn!("cannot tell whether {}s are served (asking again): {e}", kind.kind);
                DISCOVERY_RETRY
            }
        };
        tokio::time::sleep(wait).await;
    }
    info!("the {} CRD is installed; watching {}s", kind.kind, kind.kind);
    let config = watcher::Config::default().labels(labels::QUEUE);
    forward(Api::<K>::all(client), config, convert::workload_view::<K>, wrap, tx).await;
}

/// A kind of `resource.k8s.io/v1` (served from Kubernetes 1.34 on): ResourceSlices, the devices
/// DRA drivers publish; ResourceClaims, the devices allocated; ResourceClaimTemplates and
/// DeviceClasses, what pods claim. On a cluster that does not serve it the brain gets one empty
/// listing.
async fn dra_kind<K, V>(client: Client, view: fn(&K) -> Option<V>, wrap: fn(Change<V>) -> Event, tx: Sender<Message>)
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + 'static,
{
    let resource = ApiResource::erase::<K>(&());
    loop {
        match served(&client, &resource).await {
            Ok(true) => break,
            Ok(false) => {
                info!("resource.k8s.io/v1 {} are not served; no DRA devices are placed", resource.plural);
                for c in [Change::Init, Change::InitDone] {
                    if tx.send(Message::event(wrap(c))).is_err() {
                        return;
                    }
                }
                return;
            }
            Err(e) => {
                warn!("cannot tell whether {} are served (asking again): {e}", resource.plural);
                tokio::time::sleep(DISCOVERY_RETRY).await;
            }
        }
    }
    forward(Api::<K>::all(client), watcher::Config::default(), view, wrap, tx).await;
}

/// Streams one kind to the brain, converted to its view. Watch errors are retried with backoff.
async fn forward<K, V>(
    api: Api<K>,
    config: watcher::Config,
    view: impl Fn(&K) -> Option<V>,
    wrap: fn(Change<V>) -> Event,
    tx: Sender<Message>,
) where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    let mut stream = watcher(api, config).default_backoff().boxed();
    loop {
        let ev = match stream.try_next().await {
            Ok(Some(ev)) => ev,
            Ok(None) => return,
            Err(e) => {
                warn!("watch: {e}");
                continue;
            }
        };
        let change = match ev {
            watcher::Event::Init => Some(Change::Init),
            watcher::Event::InitDone => Some(Change::InitDone),
            watcher::Event::Apply(o) | watcher::Event::InitApply(o) => view(&o).map(Change::Apply),
            watcher::Event::Delete(o) => view(&o).map(Change::Delete),
        };
        if let Some(c) = change
            && tx.send(Message::event(wrap(c))).is_err()
        {
            return;
        }
    }
}

/// The objects of one kind (Queues, Reservations) a configuration was read from: each one's
/// generation, by name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Versions(HashMap<String, Option<i64>>);

impl Versions {
    pub fn from_pairs(pairs: impl IntoIterator<Item = (String, Option<i64>)>) -> Self {
        Self(pairs.into_iter().collect())
    }
}

/// Completes when the objects of kind `K` differ from `loaded`, the ones the running
/// configuration was read from: one is added, removed, or its spec changes, including between
/// that reading and this watch's first listing (an object made then is in the listing, not a
/// change, and would be missed).
pub async fn changed<K>(client: Client, loaded: Versions)
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + 'static,
{
    let mut known = loaded.0;
    let mut listing: HashMap<String, Option<i64>> = HashMap::new();
    let mut listed = false;
    // Names and generations only: an object muster cannot read is still told apart.
    let api = Api::<PartialObjectMeta<K>>::all(client);
    let mut stream = watcher(api, watcher::Config::default()).default_backoff().boxed();
    let name = |o: &PartialObjectMeta<K>| o.meta().name.clone().unwrap_or_default();
    while let Some(ev) = stream.next().await {
        let Ok(ev) = ev else { continue };
        match ev {
            // A (re)listing: what it holds is compared whole once it is done.
            watcher::Event::Init => listing.clear(),
            watcher::Event::InitApply(o) => {
                listing.insert(name(&o), o.meta().generation);
            }
            watcher::Event::InitDone => {
                if listing != known {
                    return;
                }
                listed = true;
            }
            watcher::Event::Apply(o) if listed => {
                let generation = o.meta().generation;
                if known.insert(name(&o), generation) != Some(generation) {
                    return;
                }
            }
            watcher::Event::Delete(_) if listed => return,
            _ => {}
        }
    }
}

/// The priority classes the engine knows: each PriorityClass's value, and the one marked
/// globalDefault (what [`crate::engine_config`] reads and [`priority_classes_changed`] compares).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PriorityClasses {
    pub values: BTreeMap<String, i32>,
    pub global_default: Option<String>,
}

impl PriorityClasses {
    pub fn of<'a>(classes: impl IntoIterator<Item = &'a PriorityClass>) -> Self {
        let mut out = PriorityClasses::default();
        for pc in classes {
            let Some(name) = &pc.metadata.name else { continue };
            if pc.global_default == Some(true) {
                out.global_default = Some(name.clone());
            }
            // A PriorityClass without a value has priority 0, as kube-scheduler reads it.
            out.values.insert(name.clone(), pc.value.unwrap_or(0));
        }
        out
    }
}

/// Completes when the cluster's PriorityClasses differ from `known`, the ones the running
/// configuration was built from. The first listing is compared too, so a class made between the
/// configuration's own listing and this watch is not missed: a Job naming it would otherwise be
/// refused as naming an unknown class until the next restart.
pub async fn priority_classes_changed(client: Client, known: PriorityClasses) {
    let mut now: HashMap<String, PriorityClass> = HashMap::new();
    let mut listed = false;
    let differs = |now: &HashMap<String, PriorityClass>| PriorityClasses::of(now.values()) != known;
    let mut stream = watcher(Api::<PriorityClass>::all(client), watcher::Config::default()).default_backoff().boxed();
    while let Some(ev) = stream.next().await {
        let Ok(ev) = ev else { continue };
        let name = |pc: &PriorityClass| pc.metadata.name.clone().unwrap_or_default();
        match ev {
            watcher::Event::Init => {
                now.clear();
                listed = false;
            }
            watcher::Event::InitApply(pc) => {
                now.insert(name(&pc), pc);
            }
            watcher::Event::InitDone => listed = true,
            watcher::Event::Apply(pc) => {
                now.insert(name(&pc), pc);
            }
            watcher::Event::Delete(pc) => {
                now.remove(&name(&pc));
            }
        }
        if listed && differs(&now) {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use kube::api::ObjectMeta;

    use super::*;

    fn class(name: &str, value: Option<i32>, global_default: bool) -> PriorityClass {
        PriorityClass {
            metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
            value,
            global_default: Some(global_default),
            ..Default::default()
        }
    }

    #[test]
    fn priority_classes_read_values_and_the_global_default() {
        let got = PriorityClasses::of(&[class("high", Some(1000), false), class("normal", Some(10), true)]);
        assert_eq!(got.values, BTreeMap::from([("high".into(), 1000), ("normal".into(), 10)]));
        assert_eq!(got.global_default.as_deref(), Some("normal"));
        // A change of value or of the default is a change.
        assert_ne!(got, PriorityClasses::of(&[class("high", Some(999), false), class("normal", Some(10), true)]));
        assert_ne!(got, PriorityClasses::of(&[class("high", Some(1000), false), class("normal", Some(10), false)]));
    }
}
