//! Jobs and pods for KWOK nodes as JSON, as a test would write them in YAML; [`Shape`] changes
//! what a test needs beyond the plain object; [`create`] sends one, and [`refused`] checks the
//! apiserver refused it.

use std::fmt::Debug;

use kube::api::{Api, PostParams};
use kube::{Client, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// What a test creates in a namespace: Jobs, pods.
pub trait Namespaced:
    Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()> + Clone + Debug + Serialize + DeserializeOwned
{
}
impl<K> Namespaced for K where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + Debug
        + Serialize
        + DeserializeOwned
{
}

/// Creates `doc` (a `K`: a Job, a Pod) in namespace `ns` as `client`'s identity; the apiserver's
/// answer, refusals included.
pub async fn create<K: Namespaced>(client: &Client, ns: &str, doc: Value) -> Result<K, kube::Error> {
    let obj: K = serde_json::from_value(doc).expect("a well-formed object");
    Api::<K>::namespaced(client.clone(), ns).create(&PostParams::default(), &obj).await
}

/// The apiserver's message refusing what `what` describes; fails the test if it was accepted.
pub fn refused<T: Debug>(what: &str, answer: Result<T, kube::Error>) -> String {
    match answer {
        Ok(accepted) => panic!("{what}: accepted: {accepted:?}"),
        Err(e) => {
            let message = match e {
                kube::Error::Api(status) => status.message,
                other => other.to_string(),
            };
            eprintln!("  ok   {what}: refused: {}", message.chars().take(400).collect::<String>());
            message
        }
    }
}

/// A Job of `pods` pods (parallelism and completions), each asking `cpu` and 10Mi of memory, in
/// queue `default`; KWOK runs its pods until they are deleted.
pub fn job(name: &str, pods: u32, cpu: &str) -> Value {
    json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "labels": {"muster.dev/queue": "default"}},
        "spec": {"parallelism": pods, "completions": pods, "backoffLimit": 0, "template": {
            "metadata": {"annotations": {"e2e.muster.dev/test": "true"}},
            "spec": pod_spec(cpu)}}
    })
}

/// A bare pod asking `cpu` and 10Mi of memory, with `labels`; KWOK runs it until it is deleted.
pub fn pod(name: &str, cpu: &str, labels: Value) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": labels, "annotations": {"e2e.muster.dev/test": "true"}},
        "spec": pod_spec(cpu)
    })
}

fn pod_spec(cpu: &str) -> Value {
    json!({"restartPolicy": "Never", "terminationGracePeriodSeconds": 0, "containers": [{
        "name": "main", "image": "kwok-fake", "resources": {"requests": {"cpu": cpu, "memory": "10Mi"}}}]})
}

/// Changes to a [`job`] or a [`pod`] (for a Job, to its pods' template), each returning the
/// object, so that they chain.
pub trait Shape: Sized {
    /// The whole object.
    fn object(&mut self) -> &mut Value;

    /// The pod, or the Job's pod template.
    fn template(&mut self) -> &mut Value {
        let object = self.object();
        if object["kind"] == "Job" { &mut object["spec"]["template"] } else { object }
    }

    /// KWOK runs the pods `secs` seconds, then they succeed.
    fn run_seconds(mut self, secs: u32) -> Self {
        self.template()["metadata"]["annotations"]["kwok.muster.dev/run-seconds"] = json!(secs.to_string());
        self
    }
    /// Only node `node` may run the pods (a nodeSelector on its hostname).
    fn on_node(mut self, node: &str) -> Self {
        self.template()["spec"]["nodeSelector"] = json!({"kubernetes.io/hostname": node});
        self
    }
    /// The pods ask `memory` (the main container's request).
    fn memory(mut self, memory: &str) -> Self {
        self.template()["spec"]["containers"][0]["resources"]["requests"]["memory"] = json!(memory);
        self
    }
    /// The pods run as ServiceAccount `name`.
    fn service_account(mut self, name: &str) -> Self {
        self.template()["spec"]["serviceAccountName"] = json!(name);
        self
    }
    /// The pods are bound to node `node` by their creator (spec.nodeName).
    fn node_name(mut self, node: &str) -> Self {
        self.template()["spec"]["nodeName"] = json!(node);
        self
    }
    /// The object is in queue `queue` (its label muster.dev/queue), or in none.
    fn queue(mut self, queue: Option<&str>) -> Self {
        let labels = &mut self.object()["metadata"]["labels"];
        match queue {
            Some(queue) => labels["muster.dev/queue"] = json!(queue),
            None => {
                labels.as_object_mut().and_then(|labels| labels.remove("muster.dev/queue"));
            }
        }
        self
    }
    /// The pods name scheduler `name`.
    fn scheduler(mut self, name: &str) -> Self {
        self.template()["spec"]["schedulerName"] = json!(name);
        self
    }
    /// The pods have a native sidecar (an init container that runs throughout) asking `cpu`.
    fn sidecar(mut self, cpu: &str) -> Self {
        self.template()["spec"]["initContainers"] = json!([{"name": "sidecar", "image": "kwok-fake", "restartPolicy": "Always",
            "resources": {"requests": {"cpu": cpu, "memory": "10Mi"}}}]);
        self
    }
    /// The pods ask `cpu` at pod level (spec.resources).
    fn pod_cpu(mut self, cpu: &str) -> Self {
        self.template()["spec"]["resources"] = json!({"requests": {"cpu": cpu}});
        self
    }
}

impl Shape for Value {
    fn object(&mut self) -> &mut Value {
        self
    }
}
