//! The cluster state the rules read: Queues, namespace labels, Groups, scheduler-plugins'
//! PodGroups and Kubernetes' own PodGroups. The rules see it only through [`ClusterState`], so they are tested with
//! [`MemoryState`] and served with [`KubeState`].

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::scheduling::v1alpha3::CompositePodGroup;
use k8s_openapi::api::scheduling::v1beta1::PodGroup as NativePodGroup;
use kube::core::DynamicObject;
use kube::runtime::reflector::{self, ObjectRef, Store, store::Writer};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource};
use muster_k8s::external::{pod_group_resource, served};
use muster_k8s::{Group, Queue};
use tokio::task::JoinHandle;

/// A lookup that could not be answered (the API server did not reply); the webhook refuses
/// rather than admit unchecked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct LookupError(pub String);

/// What the validating rules need to know about the cluster.
pub trait ClusterState: Send + Sync {
    /// The Queue named `name`, or None if there is none.
    fn queue(&self, name: &str) -> impl Future<Output = Result<Option<Arc<Queue>>, LookupError>> + Send;
    /// The labels of namespace `name`, or None if there is no such namespace.
    fn namespace_labels(
        &self,
        name: &str,
    ) -> impl Future<Output = Result<Option<BTreeMap<String, String>>, LookupError>> + Send;
    /// The Group `namespace/name`, or None if there is none.
    fn group(
        &self,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<Option<Arc<Group>>, LookupError>> + Send;
    /// The scheduler-plugins PodGroup `namespace/name`, or None if there is none (also when its
    /// CRD is not installed).
    fn pod_group(
        &self,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<Option<Arc<DynamicObject>>, LookupError>> + Send;
    /// The Kubernetes PodGroup `namespace/name` (`scheduling.k8s.io/v1beta1`), or None if there is
    /// none (also when the API is not served).
    fn native_pod_group(
        &self,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<Option<Arc<NativePodGroup>>, LookupError>> + Send;
    /// Every CompositePodGroup (`scheduling.k8s.io/v1alpha3`) and Kubernetes PodGroup of
    /// `namespace`: the trees a gang of gangs is read from (none when the APIs are not served).
    fn pod_group_trees(&self, namespace: &str) -> impl Future<Output = Result<PodGroupTrees, LookupError>> + Send;
}

/// The CompositePodGroups and PodGroups of one namespace.
#[derive(Debug, Clone, Default)]
pub struct PodGroupTrees {
    pub composites: Vec<CompositePodGroup>,
    pub pod_groups: Vec<NativePodGroup>,
}

/// A fixed cluster state held in memory (tests, tools).
#[derive(Debug, Clone, Default)]
pub struct MemoryState {
    pub queues: BTreeMap<String, Arc<Queue>>,
    pub namespaces: BTreeMap<String, BTreeMap<String, String>>,
    pub groups: BTreeMap<(String, String), Arc<Group>>,
    pub pod_groups: BTreeMap<(String, String), Arc<DynamicObject>>,
    pub native_pod_groups: BTreeMap<(String, String), Arc<NativePodGroup>>,
    pub composite_pod_groups: BTreeMap<(String, String), Arc<CompositePodGroup>>,
}

impl MemoryState {
    pub fn with_queue(mut self, queue: Queue) -> Self {
        self.queues.insert(queue.metadata.name.clone().unwrap_or_default(), Arc::new(queue));
        self
    }

    pub fn with_namespace(mut self, name: &str, labels: &[(&str, &str)]) -> Self {
        let labels = labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        self.namespaces.insert(name.to_string(), labels);
        self
    }

    pub fn with_group(mut self, group: Group) -> Self {
        let key =
            (group.metadata.namespace.clone().unwrap_or_default(), group.metadata.name.clone().unwrap_or_default());
        self.groups.insert(key, Arc::new(group));
        self
    }

    pub fn with_pod_group(mut self, pod_group: DynamicObject) -> Self {
        let meta = &pod_group.metadata;
        let key = (meta.namespace.clone().unwrap_or_default(), meta.name.clone().unwrap_or_default());
        self.pod_groups.insert(key, Arc::new(pod_group));
        self
    }

    pub fn with_native_pod_group(mut self, pod_group: NativePodGroup) -> Self {
        let meta = &pod_group.metadata;
        let key = (meta.namespace.clone().unwrap_or_default(), meta.name.clone().unwrap_or_default());
        self.native_pod_groups.insert(key, Arc::new(pod_group));
        self
    }

    pub fn with_composite_pod_group(mut self, composite: CompositePodGroup) -> Self {
        let meta = &composite.metadata;
        let key = (meta.namespace.clone().unwrap_or_default(), meta.name.clone().unwrap_or_default());
        self.composite_pod_groups.insert(key, Arc::new(composite));
        self
    }
}

impl ClusterState for MemoryState {
    async fn queue(&self, name: &str) -> Result<Option<Arc<Queue>>, LookupError> {
        Ok(self.queues.get(name).cloned())
    }

    async fn namespace_labels(&self, name: &str) -> Result<Option<BTreeMap<String, String>>, LookupError> {
        Ok(self.namespaces.get(name).cloned())
    }

    async fn group(&self, namespace: &str, name: &str) -> Result<Option<Arc<Group>>, LookupError> {
        Ok(self.groups.get(&(namespace.to_string(), name.to_string())).cloned())
    }

    async fn pod_group(&self, namespace: &str, name: &str) -> Result<Option<Arc<DynamicObject>>, LookupError> {
        Ok(self.pod_groups.get(&(namespace.to_string(), name.to_string())).cloned())
    }

    async fn native_pod_group(&self, namespace: &str, name: &str) -> Result<Option<Arc<NativePodGroup>>, LookupError> {
        Ok(self.native_pod_groups.get(&(namespace.to_string(), name.to_string())).cloned())
    }

    async fn pod_group_trees(&self, namespace: &str) -> Result<PodGroupTrees, LookupError> {
        let within = |(ns, _): &&(String, String)| ns == namespace;
        Ok(PodGroupTrees {
            composites: self
                .composite_pod_groups
                .iter()
                .filter(|(k, _)| within(k))
                .map(|(_, c)| (**c).clone())
                .collect(),
            pod_groups: self.native_pod_groups.iter().filter(|(k, _)| within(k)).map(|(_, p)| (**p).clone()).collect(),
        })
    }
}

/// Cluster state from reflector stores of Queues, Namespaces, Groups and PodGroups. A miss in a
/// store (an object created a moment ago, or a store still filling) falls back to a GET, so a Job
/// created right after its Queue is not refused; Groups, muster's own, are read from the store
/// alone. PodGroups are watched only once their CRD is
/// served (checked every `CRD_POLL`); until then every lookup is a GET.
#[derive(Clone)]
pub struct KubeState {
    client: Client,
    queues: Store<Queue>,
    namespaces: Store<Namespace>,
    groups: Store<Group>,
    pod_groups: Store<DynamicObject>,
    _tasks: Arc<Tasks>,
}

struct Tasks(Vec<JoinHandle<()>>);

impl Drop for Tasks {
    fn drop(&mut self) {
        for t in &self.0 {
            t.abort();
        }
    }
}

impl KubeState {
    /// Starts the watches on the current tokio runtime; they stop when the last clone of the
    /// state is dropped.
    pub fn start(client: Client) -> Self {
        let (queues, q_task) = watch("Queue", Api::<Queue>::all(client.clone()), Writer::default());
        let (namespaces, n_task) = watch("Namespace", Api::<Namespace>::all(client.clone()), Writer::default());
        let (groups, g_task) = watch("Group", Api::<Group>::all(client.clone()), Writer::default());
        let resource = pod_group_resource();
        let writer = Writer::new(resource.clone());
        let pod_groups = writer.as_reader();
        let c = client.clone();
        let pg_task = tokio::spawn(async move {
            loop {
                match served(&c, &resource).await {
                    Ok(true) => break,
                    Ok(false) => {}
                    Err(e) => tracing::warn!(error = %e, "cannot tell whether PodGroups are served; asking again"),
                }
                tokio::time::sleep(CRD_POLL).await;
            }
            tracing::info!("the PodGroup CRD is installed; watching PodGroups");
            let (_, task) = watch("PodGroup", Api::<DynamicObject>::all_with(c, &resource), writer);
            let _ = task.await;
        });
        let tasks = Tasks(vec![q_task, n_task, g_task, pg_task]);
        KubeState { client, queues, namespaces, groups, pod_groups, _tasks: Arc::new(tasks) }
    }
}

/// How often the webhook asks whether a CRD it can do without (PodGroup) has been installed.
const CRD_POLL: std::time::Duration = std::time::Duration::from_secs(30);

fn watch<K>(kind: &'static str, api: Api<K>, writer: Writer<K>) -> (Store<K>, JoinHandle<()>)
where
    K: Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + Sync + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone + Send + Sync,
{
    let reader = writer.as_reader();
    let stream = reflector::reflector(writer, watcher(api, watcher::Config::default()).default_backoff());
    let task = tokio::spawn(async move {
        stream
            .for_each(|event| {
                if let Err(e) = event {
                    tracing::warn!(kind, error = %e, "watch failed; retrying");
                }
                futures::future::ready(())
            })
            .await;
    });
    (reader, task)
}

/// A failed read, told to whoever sent the review in fixed words: the apiserver's answer (its
/// addresses, muster's identity and rights) is logged here and goes to no caller, since anyone
/// who reaches the webhook's port can send a review.
fn lookup_error(what: &str, e: kube::Error) -> LookupError {
    tracing::warn!(error = %e, "cannot read {what}");
    LookupError(format!("cannot read {what} now"))
}

impl ClusterState for KubeState {
    async fn queue(&self, name: &str) -> Result<Option<Arc<Queue>>, LookupError> {
        if let Some(q) = self.queues.get(&ObjectRef::new(name)) {
            return Ok(Some(q));
        }
        let api = Api::<Queue>::all(self.client.clone());
        api.get_opt(name).await.map(|q| q.map(Arc::new)).map_err(|e| lookup_error(&format!("Queue {name}"), e))
    }

    async fn namespace_labels(&self, name: &str) -> Result<Option<BTreeMap<String, String>>, LookupError> {
        let ns = match self.namespaces.get(&ObjectRef::new(name)) {
            Some(ns) => Some(ns),
            None => Api::<Namespace>::all(self.client.clone())
                .get_opt(name)
                .await
                .map_err(|e| lookup_error(&format!("Namespace {name}"), e))?
                .map(Arc::new),
        };
        Ok(ns.map(|ns| ns.metadata.labels.clone().unwrap_or_default()))
    }

    /// From the watch cache alone: a review names any Group it likes, and a GET per miss would
    /// let anyone who reaches the port make muster's identity read the apiserver once per forged
    /// review. A Group missing from the cache was made a moment ago, so it is not placed yet, and
    /// the controller checks again what the rules read it for (a plain pod alike its group, a
    /// workload's group name).
    async fn group(&self, namespace: &str, name: &str) -> Result<Option<Arc<Group>>, LookupError> {
        Ok(self.groups.get(&ObjectRef::new(name).within(namespace)))
    }

    async fn pod_group(&self, namespace: &str, name: &str) -> Result<Option<Arc<DynamicObject>>, LookupError> {
        let resource = pod_group_resource();
        if let Some(pg) = self.pod_groups.get(&ObjectRef::new_with(name, resource.clone()).within(namespace)) {
            return Ok(Some(pg));
        }
        let api = Api::<DynamicObject>::namespaced_with(self.client.clone(), namespace, &resource);
        match api.get(name).await {
            Ok(pg) => Ok(Some(Arc::new(pg))),
            // Without the CRD the path itself is not found: no PodGroup either way.
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(None),
            Err(e) => Err(lookup_error(&format!("PodGroup {namespace}/{name}"), e)),
        }
    }

    /// Read at each pod's creation, not watched: a group's pods are few calls, and a watch would
    /// cost every cluster without the API a discovery loop.
    async fn native_pod_group(&self, namespace: &str, name: &str) -> Result<Option<Arc<NativePodGroup>>, LookupError> {
        let api = Api::<NativePodGroup>::namespaced(self.client.clone(), namespace);
        match api.get(name).await {
            Ok(pg) => Ok(Some(Arc::new(pg))),
            // Without the API the path itself is not found: no PodGroup either way.
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(None),
            Err(e) => Err(lookup_error(&format!("PodGroup {namespace}/{name} (scheduling.k8s.io)"), e)),
        }
    }

    /// Listed at the creation of each pod whose PodGroup has a parent, as
    /// [`Self::native_pod_group`] is read: a tree is a few objects.
    async fn pod_group_trees(&self, namespace: &str) -> Result<PodGroupTrees, LookupError> {
        let composites = list(Api::<CompositePodGroup>::namespaced(self.client.clone(), namespace)).await;
        let pod_groups = list(Api::<NativePodGroup>::namespaced(self.client.clone(), namespace)).await;
        let what = |kind: &str| format!("{kind}s in {namespace} (scheduling.k8s.io)");
        Ok(PodGroupTrees {
            composites: composites.map_err(|e| lookup_error(&what("CompositePodGroup"), e))?,
            pod_groups: pod_groups.map_err(|e| lookup_error(&what("PodGroup"), e))?,
        })
    }
}

/// Every object `api` lists; none when its API is not served.
async fn list<K>(api: Api<K>) -> Result<Vec<K>, kube::Error>
where
    K: Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned,
{
    match api.list(&kube::api::ListParams::default()).await {
        Ok(list) => Ok(list.items),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_read_tells_the_caller_nothing_of_the_apiservers_answer() {
        let answer = kube::core::Status::failure(
            "groups.muster.dev \"g\" is forbidden: User \"system:serviceaccount:muster-system:muster\" cannot get \
             resource \"groups\" at https://10.0.0.1:6443",
            "Forbidden",
        )
        .with_code(403);
        let e = lookup_error("Group ns/g", kube::Error::Api(Box::new(answer)));
        assert_eq!(e.to_string(), "cannot read Group ns/g now");
    }
}
