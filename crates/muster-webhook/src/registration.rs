//! The MutatingWebhookConfiguration and ValidatingWebhookConfiguration that register the
//! webhook with the API server: which objects go through it, and what happens when it is down.
//!
//! failurePolicy is Fail: a webhook that cannot be reached must not let a Job bypass the queue or
//! a tenant forge a placement. The selectors keep that strictness to muster's objects (those with
//! muster's labels, and pods in namespaces labelled `muster.dev/managed=true`), so the rest of
//! the cluster never waits on muster. An object selector matches the old object as well as the
//! new, so removing a label on update still goes through the webhook.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MatchCondition, MutatingWebhook, MutatingWebhookConfiguration, RuleWithOperations, ServiceReference,
    ValidatingWebhook, ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement, ObjectMeta};
use muster_k8s::labels::{GROUP, MANAGED_NAMESPACE, POD_GROUP_ALIAS, QUEUE, SCHEDULER_NAME};
use muster_k8s::lws;
use muster_k8s::workload::{HELD_KINDS, HOLDERS};

use crate::config::{
    DEFAULT_CONTROLLER_USER, DEFAULT_GARBAGE_COLLECTOR_USER, DEFAULT_JOB_CONTROLLER_USER,
    DEFAULT_NAMESPACE_CONTROLLER_USER,
};

/// The name of both configurations.
pub const CONFIGURATION_NAME: &str = "muster";
/// The in-cluster Service in front of the webhook, and its namespace.
pub const SERVICE_NAME: &str = "muster-webhook";
pub const SERVICE_NAMESPACE: &str = "muster-system";
/// The Secret (in muster's namespace) with the webhook's serving certificate; its `ca.crt`
/// is the caBundle of both configurations.
pub const TLS_SECRET: &str = "muster-webhook-tls";
/// Seconds the API server waits for an answer.
pub const TIMEOUT_SECONDS: i32 = 10;

/// Where the API server reaches the webhook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// A base URL such as `https://127.0.0.1:8443` (the local control plane).
    Url(String),
    /// A Service (in-cluster), port 443.
    Service { namespace: String, name: String },
}

impl Endpoint {
    /// muster's Service in `muster-system`.
    pub fn in_cluster() -> Self {
        Endpoint::Service { namespace: SERVICE_NAMESPACE.into(), name: SERVICE_NAME.into() }
    }

    fn client_config(&self, path: &str, ca_bundle: Option<&[u8]>) -> WebhookClientConfig {
        let ca_bundle = ca_bundle.map(|b| ByteString(b.to_vec()));
        match self {
            Endpoint::Url(base) => WebhookClientConfig {
                url: Some(format!("{}{path}", base.trim_end_matches('/'))),
                ca_bundle,
                service: None,
            },
            Endpoint::Service { namespace, name } => WebhookClientConfig {
                service: Some(ServiceReference {
                    namespace: namespace.clone(),
                    name: name.clone(),
                    path: Some(path.into()),
                    port: Some(443),
                }),
                ca_bundle,
                url: None,
            },
        }
    }
}

/// The DNS names by which pods and the API server reach the Service `name` in `namespace`: the
/// names a serving certificate for it must carry.
pub fn service_dns_names(namespace: &str, name: &str) -> Vec<String> {
    let service = format!("{name}.{namespace}");
    vec![format!("{service}.svc"), format!("{service}.svc.cluster.local"), service]
}

struct Hook {
    name: String,
    rules: Vec<RuleWithOperations>,
    object_selector: Option<LabelSelector>,
    namespace_selector: Option<LabelSelector>,
}

fn rule(group: &str, version: &str, resource: &str, operations: &[&str]) -> RuleWithOperations {
    RuleWithOperations {
        api_groups: Some(vec![group.into()]),
        api_versions: Some(vec![version.into()]),
        resources: Some(vec![resource.into()]),
        operations: Some(operations.iter().map(|o| o.to_string()).collect()),
        scope: Some("Namespaced".into()),
    }
}

fn has_label(key: &str) -> Option<LabelSelector> {
    has_labels(&[key])
}

fn has_labels(keys: &[&str]) -> Option<LabelSelector> {
    let exists =
        |key: &&str| LabelSelectorRequirement { key: key.to_string(), operator: "Exists".into(), values: None };
    Some(LabelSelector { match_expressions: Some(keys.iter().map(exists).collect()), match_labels: None })
}

/// muster's own requests (gate removals, unsuspends, Group objects) never reach the webhook: it
/// would admit them unchanged anyway (docs/webhook.md), and on a busy control plane every call
/// is an HTTPS round trip the apiserver makes while muster starts a group.
fn not_from_muster() -> Option<Vec<MatchCondition>> {
    Some(vec![MatchCondition {
        name: "not-from-muster".into(),
        expression: format!("request.userInfo.username != '{DEFAULT_CONTROLLER_USER}'"),
    }])
}

/// The validating hook for Jobs skips a create that still carries the mutation: the mutating
/// webhook has checked that Job already (`mutate`), so a queued Job's create costs one webhook
/// call, not two. A create that lost the mutation to a later mutating webhook (no longer
/// suspended, another scheduler, a node name) is still checked here and refused.
const JOBS_VALIDATE: &str = "jobs.validate.muster.dev";

fn checked_by_mutation() -> MatchCondition {
    let spec = "object.spec.template.spec";
    MatchCondition {
        name: "create-not-checked-by-the-mutation".into(),
        expression: format!(
            "request.operation != 'CREATE' || !(has(object.spec.suspend) && object.spec.suspend == true && \
             has({spec}.schedulerName) && {spec}.schedulerName == '{SCHEDULER_NAME}' && \
             (!has({spec}.nodeName) || {spec}.nodeName == ''))"
        ),
    }
}

/// The validating hook for Groups: their creation, spec and metadata (UPDATE), their status
/// subresource and their deletion are muster's.
const GROUPS_VALIDATE: &str = "groups.validate.muster.dev";

/// The garbage collector and the namespace controller delete Groups (a Job's once the Job is
/// gone, a namespace's when it is deleted), which the webhook allows; skipping the call spares
/// the round trip, and keeps namespace deletion from waiting on a webhook that is down.
fn not_a_system_delete() -> MatchCondition {
    MatchCondition {
        name: "not-a-system-delete".into(),
        expression: format!(
            "request.operation != 'DELETE' || !(request.userInfo.username in \
             ['{DEFAULT_GARBAGE_COLLECTOR_USER}', '{DEFAULT_NAMESPACE_CONTROLLER_USER}'])"
        ),
    }
}

/// The validating hook for in-place resizes (`pods/resize`) of the pods muster placed, in any
/// namespace: a resize up would use room muster gave to others. Scoped by the pod's scheduler, so
/// other schedulers' pods never wait on muster.
const RESIZE_VALIDATE: &str = "pod-resize.validate.muster.dev";

fn placed_by_muster() -> MatchCondition {
    MatchCondition {
        name: "placed-by-muster".into(),
        expression: format!("has(object.spec.schedulerName) && object.spec.schedulerName == '{SCHEDULER_NAME}'"),
    }
}

/// The validating hook for the pods of managed namespaces (a preset node, a forged Job member,
/// muster's keys on a pod without muster's labels).
const MANAGED_PODS_VALIDATE: &str = "managed-pods.validate.muster.dev";

/// Keeps [`MANAGED_PODS_VALIDATE`] to the pods muster acts on, so that while muster is down
/// (failing closed) only muster's work waits and every other pod of a managed namespace is
/// created as usual: a pod with a `muster.dev/` label or annotation (now or before the update),
/// for muster's scheduler, created with a node name (not by a kubelet: mirror pods), or created
/// by anyone but the Job controller with a controller reference to a Job and its pods' label.
/// Every other pod the webhook would admit unchanged anyway.
fn muster_acts_on_the_pod() -> MatchCondition {
    let keys = |o: &str| {
        let prefix = muster_k8s::labels::PREFIX;
        format!(
            "(has({o}.metadata.labels) && {o}.metadata.labels.exists(k, k.startsWith('{prefix}'))) || \
             (has({o}.metadata.annotations) && {o}.metadata.annotations.exists(k, k.startsWith('{prefix}')))"
        )
    };
    let job_labels = "has(object.metadata.labels) && ('batch.kubernetes.io/job-name' in object.metadata.labels || \
                      'job-name' in object.metadata.labels)";
    MatchCondition {
        name: "muster-acts-on-the-pod".into(),
        expression: format!(
            "{object} || (oldObject != null && ({old})) || \
             (has(object.spec.schedulerName) && object.spec.schedulerName == '{SCHEDULER_NAME}') || \
             (request.operation == 'CREATE' && has(object.spec.nodeName) && object.spec.nodeName != '' && \
             !request.userInfo.username.startsWith('system:node:')) || \
             (request.operation == 'CREATE' && request.userInfo.username != '{DEFAULT_JOB_CONTROLLER_USER}' && \
             has(object.metadata.ownerReferences) && object.metadata.ownerReferences.exists(r, r.kind == 'Job' && \
             has(r.controller) && r.controller) && {job_labels})",
            object = keys("object"),
            old = keys("oldObject"),
        ),
    }
}

/// The mutating hook for queued pods that name a Kubernetes PodGroup. A Job's pods carry the
/// queue label of its template too; the condition keeps their creation from calling the webhook.
const NATIVE_PODS_MUTATE: &str = "native-group-pods.mutate.muster.dev";

fn names_a_native_pod_group() -> MatchCondition {
    MatchCondition {
        name: "names-a-pod-group".into(),
        expression: "has(object.spec.schedulingGroup) && has(object.spec.schedulingGroup.podGroupName)".into(),
    }
}

fn mutating_conditions(hook: &str) -> Option<Vec<MatchCondition>> {
    let mut conditions = not_from_muster()?;
    if hook == NATIVE_PODS_MUTATE {
        conditions.push(names_a_native_pod_group());
    }
    Some(conditions)
}

fn validating_conditions(hook: &str) -> Option<Vec<MatchCondition>> {
    let mut conditions = not_from_muster()?;
    match hook {
        JOBS_VALIDATE => conditions.push(checked_by_mutation()),
        GROUPS_VALIDATE => conditions.push(not_a_system_delete()),
        RESIZE_VALIDATE => conditions.push(placed_by_muster()),
        MANAGED_PODS_VALIDATE => conditions.push(muster_acts_on_the_pod()),
        _ => {}
    }
    Some(conditions)
}

fn managed_namespaces() -> Option<LabelSelector> {
    Some(LabelSelector {
        match_labels: Some(BTreeMap::from([(MANAGED_NAMESPACE.to_string(), "true".to_string())])),
        match_expressions: None,
    })
}

/// A mutating or validating hook (`verb`) for each held kind, each kind that holds one (a
/// TrainJob), and LeaderWorkerSets (whose pods muster holds), on objects with the queue label.
fn held_kind_hooks(verb: &str) -> Vec<Hook> {
    let lws = (lws::API_GROUP, "v1", "leaderworkersets");
    let held = HELD_KINDS.iter().chain(&HOLDERS).map(|k| (k.group, k.version, k.plural));
    let kinds = held.chain([lws]);
    kinds
        .map(|(group, version, plural)| Hook {
            name: format!("{plural}.{verb}.{}", muster_k8s::API_GROUP),
            rules: vec![rule(group, version, plural, &["CREATE", "UPDATE"])],
            object_selector: has_label(QUEUE),
            namespace_selector: None,
        })
        .collect()
}

fn mutating_hooks(alias: bool) -> Vec<Hook> {
    let mut hooks = held_kind_hooks("mutate");
    hooks.extend([
        Hook {
            name: "pods.mutate.muster.dev".into(),
            rules: vec![rule("", "v1", "pods", &["CREATE"])],
            object_selector: has_label(GROUP),
            namespace_selector: None,
        },
        Hook {
            name: NATIVE_PODS_MUTATE.into(),
            rules: vec![rule("", "v1", "pods", &["CREATE"])],
            object_selector: has_label(QUEUE),
            namespace_selector: None,
        },
        // A LeaderWorkerSet's pods join their leader's group.
        Hook {
            name: "leaderworkerset-pods.mutate.muster.dev".into(),
            rules: vec![rule("", "v1", "pods", &["CREATE"])],
            object_selector: has_labels(&[QUEUE, lws::NAME_LABEL]),
            namespace_selector: None,
        },
    ]);
    if alias {
        hooks.push(Hook {
            name: "pod-group-pods.mutate.muster.dev".into(),
            rules: vec![rule("", "v1", "pods", &["CREATE"])],
            object_selector: has_label(POD_GROUP_ALIAS),
            namespace_selector: None,
        });
    }
    hooks
}

fn validating_hooks(alias: bool) -> Vec<Hook> {
    let pods = || vec![rule("", "v1", "pods", &["CREATE", "UPDATE"])];
    let mut hooks = held_kind_hooks("validate");
    hooks.extend([
        Hook {
            name: "group-pods.validate.muster.dev".into(),
            rules: pods(),
            object_selector: has_label(GROUP),
            namespace_selector: None,
        },
        Hook {
            name: "queued-pods.validate.muster.dev".into(),
            rules: pods(),
            object_selector: has_label(QUEUE),
            namespace_selector: None,
        },
        // Every pod of a managed namespace: preset nodeName, forged Job members, reserved keys.
        Hook {
            name: MANAGED_PODS_VALIDATE.into(),
            rules: pods(),
            object_selector: None,
            namespace_selector: managed_namespaces(),
        },
        Hook {
            name: RESIZE_VALIDATE.into(),
            rules: vec![rule("", "v1", "pods/resize", &["UPDATE"])],
            object_selector: None,
            namespace_selector: None,
        },
        Hook {
            name: GROUPS_VALIDATE.into(),
            rules: vec![
                rule(muster_k8s::API_GROUP, "v1alpha1", "groups", &["CREATE", "UPDATE", "DELETE"]),
                rule(muster_k8s::API_GROUP, "v1alpha1", "groups/status", &["UPDATE"]),
            ],
            object_selector: None,
            namespace_selector: None,
        },
    ]);
    if alias {
        hooks.push(Hook {
            name: "pod-group-pods.validate.muster.dev".into(),
            rules: pods(),
            object_selector: has_label(POD_GROUP_ALIAS),
            namespace_selector: None,
        });
    }
    hooks
}

fn meta() -> ObjectMeta {
    ObjectMeta {
        name: Some(CONFIGURATION_NAME.into()),
        labels: Some(BTreeMap::from([("app.kubernetes.io/name".to_string(), "muster".to_string())])),
        ..ObjectMeta::default()
    }
}

/// The mutating configuration; `ca_bundle` is the PEM CA that signed the serving certificate.
pub fn mutating_configuration(
    endpoint: &Endpoint,
    ca_bundle: Option<&[u8]>,
    accept_pod_group_alias: bool,
) -> MutatingWebhookConfiguration {
    let webhooks = mutating_hooks(accept_pod_group_alias)
        .into_iter()
        .map(|h| MutatingWebhook {
            match_conditions: mutating_conditions(&h.name),
            name: h.name,
            client_config: endpoint.client_config("/mutate", ca_bundle),
            rules: Some(h.rules),
            object_selector: h.object_selector,
            namespace_selector: h.namespace_selector,
            failure_policy: Some("Fail".into()),
            side_effects: "None".into(),
            timeout_seconds: Some(TIMEOUT_SECONDS),
            admission_review_versions: vec!["v1".into()],
            match_policy: Some("Equivalent".into()),
            // Another mutating webhook that changes the object after us gets us called again.
            reinvocation_policy: Some("IfNeeded".into()),
        })
        .collect();
    MutatingWebhookConfiguration { metadata: meta(), webhooks: Some(webhooks) }
}

/// The validating configuration; `ca_bundle` as for [`mutating_configuration`].
pub fn validating_configuration(
    endpoint: &Endpoint,
    ca_bundle: Option<&[u8]>,
    accept_pod_group_alias: bool,
) -> ValidatingWebhookConfiguration {
    let webhooks = validating_hooks(accept_pod_group_alias)
        .into_iter()
        .map(|h| ValidatingWebhook {
            match_conditions: validating_conditions(&h.name),
            name: h.name,
            client_config: endpoint.client_config("/validate", ca_bundle),
            rules: Some(h.rules),
            object_selector: h.object_selector,
            namespace_selector: h.namespace_selector,
            failure_policy: Some("Fail".into()),
            side_effects: "None".into(),
            timeout_seconds: Some(TIMEOUT_SECONDS),
            admission_review_versions: vec!["v1".into()],
            match_policy: Some("Equivalent".into()),
        })
        .collect();
    ValidatingWebhookConfiguration { metadata: meta(), webhooks: Some(webhooks) }
}

/// What [`fill_ca_bundle`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CaBundle {
    /// This many webhooks of the two configurations had another caBundle and were patched.
    Patched(usize),
    /// No Secret [`TLS_SECRET`], or no `ca.crt` in it: the registration is left as it is.
    NoSecret,
}

/// Writes `ca.crt` of the Secret [`TLS_SECRET`] in `namespace` (muster's own) into every webhook
/// of both configurations whose caBundle differs, so that a certificate renewed in the Secret
/// reaches the apiserver when muster starts (the chart's registration has no caBundle). Each
/// patch tests the webhook's name at its index, so a configuration edited meanwhile is not
/// patched blindly.
pub async fn fill_ca_bundle(client: &kube::Client, namespace: &str) -> Result<CaBundle, kube::Error> {
    use k8s_openapi::api::core::v1::Secret;
    use kube::Api;
    use kube::api::{Patch, PatchParams};

    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let Some(ca) = secrets.get_opt(TLS_SECRET).await?.and_then(|s| s.data?.remove("ca.crt")) else {
        return Ok(CaBundle::NoSecret);
    };
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let m = mutating.get_opt(CONFIGURATION_NAME).await?.and_then(|c| c.webhooks).unwrap_or_default();
    let v = validating.get_opt(CONFIGURATION_NAME).await?.and_then(|c| c.webhooks).unwrap_or_default();
    let stale = |hooks: Vec<(String, Option<ByteString>)>| -> Vec<serde_json::Value> {
        hooks
            .into_iter()
            .enumerate()
            .filter(|(_, (_, bundle))| bundle.as_ref() != Some(&ca))
            .flat_map(|(i, (name, _))| {
                [
                    serde_json::json!({"op": "test", "path": format!("/webhooks/{i}/name"), "value": name}),
                    serde_json::json!({"op": "add", "path": format!("/webhooks/{i}/clientConfig/caBundle"), "value": ca}),
                ]
            })
            .collect()
    };
    let m = stale(m.into_iter().map(|h| (h.name, h.client_config.ca_bundle)).collect());
    let v = stale(v.into_iter().map(|h| (h.name, h.client_config.ca_bundle)).collect());
    let patched = (m.len() + v.len()) / 2;
    let params = PatchParams::default();
    if !m.is_empty() {
        let patch = serde_json::from_value(serde_json::Value::Array(m)).expect("a JSON patch");
        mutating.patch(CONFIGURATION_NAME, &params, &Patch::<()>::Json(patch)).await?;
    }
    if !v.is_empty() {
        let patch = serde_json::from_value(serde_json::Value::Array(v)).expect("a JSON patch");
        validating.patch(CONFIGURATION_NAME, &params, &Patch::<()>::Json(patch)).await?;
    }
    Ok(CaBundle::Patched(patched))
}

/// The release namespace in the chart's template, where muster's Service, Secret and
/// ServiceAccount are.
pub const CHART_NAMESPACE: &str = "{{ .Release.Namespace }}";
/// The client config stands for this URL while the template is generated; each is then replaced by
/// the chart's helper, which names the Service or, for a webhook run outside the cluster, a URL.
const CLIENT_PLACEHOLDER: &str = "https://chart-client-config";
/// The chart's annotations of both configurations (cert-manager's CA injection, when it makes the
/// certificate), put before their labels.
const CHART_ANNOTATIONS: &str = "metadata:\n  {{- with include \"muster.webhookAnnotations\" $ }}\n  annotations:\n    \
                                 {{- . | nindent 4 }}\n  {{- end }}\n";

/// Both configurations as the Helm chart's template (deploy/chart/templates/webhooks.yaml): the
/// objects [`mutating_configuration`] and [`validating_configuration`] make, with the namespace and
/// the client config left to Helm. The caBundle is left out for the controller to fill at startup.
pub fn chart_template() -> String {
    let mut out = String::from(
        "# muster's admission webhook registration, generated from crates/muster-webhook/src/registration.rs.\n\
         # Do not edit; regenerate with:\n\
         #   MUSTER_UPDATE_WEBHOOK_YAML=1 cargo test -p muster-webhook registration\n\
         # The caBundle is filled in by muster at startup (docs/deploy.md).\n",
    );
    let endpoint = Endpoint::Url(CLIENT_PLACEHOLDER.into());
    let docs = [
        serde_yaml_ng::to_string(&mutating_configuration(&endpoint, None, false)),
        serde_yaml_ng::to_string(&validating_configuration(&endpoint, None, false)),
    ];
    for doc in docs {
        let mut doc = doc.expect("webhook configurations are plain data and always serialize");
        for path in ["/mutate", "/validate"] {
            doc = doc.replace(
                &format!("    url: {CLIENT_PLACEHOLDER}{path}\n"),
                &format!("    {{{{- include \"muster.webhookClientConfig\" (list $ \"{path}\") | nindent 4 }}}}\n"),
            );
        }
        out.push_str("---\n");
        out.push_str(&doc.replacen("metadata:\n", CHART_ANNOTATIONS, 1).replace(SERVICE_NAMESPACE, CHART_NAMESPACE));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHECKED_IN: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/chart/templates/webhooks.yaml");

    #[test]
    fn registration_checked_in_chart_template_is_current() {
        let fresh = chart_template();
        if std::env::var_os("MUSTER_UPDATE_WEBHOOK_YAML").is_some() {
            std::fs::write(CHECKED_IN, &fresh).expect("write deploy/chart/templates/webhooks.yaml");
            return;
        }
        let old = std::fs::read_to_string(CHECKED_IN).unwrap_or_default();
        assert!(
            old == fresh,
            "deploy/chart/templates/webhooks.yaml is out of date; run \
             `MUSTER_UPDATE_WEBHOOK_YAML=1 cargo test -p muster-webhook registration`"
        );
    }

    /// The template, with its two placeholders filled as Helm would for a URL, reads back as the
    /// objects themselves: nothing but the namespace and the client config is left to Helm.
    #[test]
    fn registration_chart_template_reads_back_as_the_same_objects() {
        let url = "https://127.0.0.1:8443";
        let mut text =
            chart_template().replace(CHART_NAMESPACE, SERVICE_NAMESPACE).replace(CHART_ANNOTATIONS, "metadata:\n");
        for path in ["/mutate", "/validate"] {
            let include = format!("{{{{- include \"muster.webhookClientConfig\" (list $ \"{path}\") | nindent 4 }}}}");
            assert!(text.contains(&include), "{path}");
            text = text.replace(&include, &format!("url: {url}{path}"));
        }
        assert!(!text.contains("{{"), "only the namespace and the client config are templated");
        let docs: Vec<serde_json::Value> =
            text.split("---\n").skip(1).map(|d| serde_yaml_ng::from_str(d).unwrap()).collect();
        let endpoint = Endpoint::Url(url.into());
        assert_eq!(docs[0], serde_json::to_value(mutating_configuration(&endpoint, None, false)).unwrap());
        assert_eq!(docs[1], serde_json::to_value(validating_configuration(&endpoint, None, false)).unwrap());
    }

    #[test]
    fn registration_every_hook_fails_closed_and_is_scoped() {
        let m = mutating_configuration(&Endpoint::Url("https://127.0.0.1:9443/".into()), Some(b"CA"), true);
        let hooks = m.webhooks.unwrap();
        let kinds = HELD_KINDS.len() + HOLDERS.len() + 1;
        assert_eq!(hooks.len(), kinds + 4, "one per held kind, TrainJobs and LeaderWorkerSets, and the pod hooks");
        assert!(hooks.iter().any(|h| h.name == "trainjobs.mutate.muster.dev"));
        let lws_pods = hooks.iter().find(|h| h.name == "leaderworkerset-pods.mutate.muster.dev").unwrap();
        let keys: Vec<_> = lws_pods.object_selector.iter().flat_map(|s| s.match_expressions.iter().flatten()).collect();
        assert_eq!(
            keys.iter().map(|r| (r.key.as_str(), r.operator.as_str())).collect::<Vec<_>>(),
            [(QUEUE, "Exists"), (lws::NAME_LABEL, "Exists")]
        );
        for h in &hooks {
            assert_eq!(h.failure_policy.as_deref(), Some("Fail"));
            assert_eq!(h.client_config.url.as_deref(), Some("https://127.0.0.1:9443/mutate"));
            assert_eq!(h.client_config.ca_bundle, Some(ByteString(b"CA".to_vec())));
            assert!(h.object_selector.is_some() || h.namespace_selector.is_some(), "{}", h.name);
            let conditions = h.match_conditions.clone().unwrap_or_default();
            assert_eq!(conditions[0], not_from_muster().unwrap()[0], "{}", h.name);
            // Only the native PodGroup hook narrows further: queued pods without a PodGroup (a
            // Job's) never call it.
            let native = h.name == NATIVE_PODS_MUTATE;
            assert_eq!(conditions.len(), if native { 2 } else { 1 }, "{}", h.name);
            if native {
                assert!(conditions[1].expression.contains("object.spec.schedulingGroup.podGroupName"));
            }
        }
        let v = validating_configuration(&Endpoint::in_cluster(), None, false);
        for h in v.webhooks.unwrap() {
            assert_eq!(h.failure_policy.as_deref(), Some("Fail"));
            let unscoped = h.object_selector.is_none() && h.namespace_selector.is_none();
            // Only muster's own Groups, and resizes of the pods it placed (scoped by a condition on
            // the scheduler), go through without a selector.
            assert_eq!(unscoped, h.name == GROUPS_VALIDATE || h.name == RESIZE_VALIDATE, "{}", h.name);
            let skipped = h.match_conditions.unwrap_or_default();
            assert!(skipped[0].expression.contains(DEFAULT_CONTROLLER_USER), "{}", h.name);
            // Only the Job hook skips what the mutating webhook checked: a create still suspended,
            // for muster, with no node name; only the Group hook skips the system's deletes.
            let extra =
                [JOBS_VALIDATE, GROUPS_VALIDATE, RESIZE_VALIDATE, MANAGED_PODS_VALIDATE].contains(&h.name.as_str());
            assert_eq!(skipped.len(), if extra { 2 } else { 1 }, "{}", h.name);
            if h.name == JOBS_VALIDATE {
                for part in ["'CREATE'", "object.spec.suspend == true", "schedulerName == 'muster'", "nodeName"] {
                    assert!(skipped[1].expression.contains(part), "{part} in {}", skipped[1].expression);
                }
            }
            if h.name == GROUPS_VALIDATE {
                let c = &skipped[1].expression;
                for part in ["'DELETE'", DEFAULT_GARBAGE_COLLECTOR_USER, DEFAULT_NAMESPACE_CONTROLLER_USER] {
                    assert!(c.contains(part), "{part} in {c}");
                }
                // Tenants' status writes and deletes reach the webhook.
                let rules = h.rules.unwrap_or_default();
                let ops = |res: &str| {
                    rules
                        .iter()
                        .filter(|r| r.resources.iter().flatten().any(|x| x == res))
                        .flat_map(|r| r.operations.clone().unwrap_or_default())
                        .collect::<Vec<_>>()
                };
                assert_eq!(ops("groups"), ["CREATE", "UPDATE", "DELETE"]);
                assert_eq!(ops("groups/status"), ["UPDATE"]);
            }
            if h.name == RESIZE_VALIDATE {
                assert!(skipped[1].expression.contains("schedulerName == 'muster'"), "{}", skipped[1].expression);
            }
        }
    }
}
