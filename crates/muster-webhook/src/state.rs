//! The cluster state the rules read: Queues, namespace labels and Groups. The rules see it only
//! through [`ClusterState`], so they are tested with [`MemoryState`] and served with
//! [`KubeState`].

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource};
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
}

/// A fixed cluster state held in memory (tests, tools).
#[derive(Debug, Clone, Default)]
pub struct MemoryState {
    pub queues: BTreeMap<String, Arc<Queue>>,
    pub namespaces: BTreeMap<String, BTreeMap<String, String>>,
    pub groups: BTreeMap<(String, String), Arc<Group>>,
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
}

/// Cluster state from reflector stores of Queues, Namespaces and Groups. A miss in a store (an
/// object created a moment ago, or a store still filling) falls back to a GET, so a Job created
/// right after its Queue is not refused.
#[derive(Clone)]
pub struct KubeState {
    client: Client,
    queues: Store<Queue>,
    namespaces: Store<Namespace>,
    groups: Store<Group>,
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
    /// Starts the three watches on the current tokio runtime; they stop when the last clone of
    /// the state is dropped.
    pub fn start(client: Client) -> Self {
        let (queues, q_task) = watch(Api::<Queue>::all(client.clone()));
        let (namespaces, n_task) = watch(Api::<Namespace>::all(client.clone()));
        let (groups, g_task) = watch(Api::<Group>::all(client.clone()));
        KubeState { client, queues, namespaces, groups, _tasks: Arc::new(Tasks(vec![q_task, n_task, g_task])) }
    }
}

fn watch<K>(api: Api<K>) -> (Store<K>, JoinHandle<()>)
where
    K: Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + Sync + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone + Send + Sync,
{
    let (reader, writer) = reflector::store();
    let kind = K::kind(&K::DynamicType::default()).to_string();
    let stream = reflector::reflector(writer, watcher(api, watcher::Config::default()).default_backoff());
    let task = tokio::spawn(async move {
        stream
            .for_each(|event| {
                if let Err(e) = event {
                    tracing::warn!(kind = %kind, error = %e, "watch failed; retrying");
                }
                futures::future::ready(())
            })
            .await;
    });
    (reader, task)
}

fn lookup_error(what: &str, e: kube::Error) -> LookupError {
    LookupError(format!("cannot read {what}: {e}"))
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

    async fn group(&self, namespace: &str, name: &str) -> Result<Option<Arc<Group>>, LookupError> {
        if let Some(g) = self.groups.get(&ObjectRef::new(name).within(namespace)) {
            return Ok(Some(g));
        }
        let api = Api::<Group>::namespaced(self.client.clone(), namespace);
        api.get_opt(name)
            .await
            .map(|g| g.map(Arc::new))
            .map_err(|e| lookup_error(&format!("Group {namespace}/{name}"), e))
    }
}
