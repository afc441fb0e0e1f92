//! `muster install`: puts muster's CRDs, identity, RBAC and the policy on its pod writes, webhook
//! registration and a default Queue into a cluster, and writes the webhook's serving certificate and a
//! kubeconfig for the muster ServiceAccount. Everything is server-side applied, so running it again
//! changes nothing.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use clap::Args;
use k8s_openapi::ByteString;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use kube::discovery::{Scope, pinned_kind};
use kube::{Client, Config};
use muster_k8s::{Queue, QueueSpec};
use muster_webhook::ServingCert;
use muster_webhook::registration::{self, Endpoint, SERVICE_NAMESPACE, TLS_SECRET};
use serde::Serialize;

const CRDS: &str = include_str!("../../../deploy/chart/templates/crds.yaml");
/// The chart's RBAC, whose one template expression is the release namespace.
const RBAC_TEMPLATE: &str = include_str!("../../../deploy/chart/templates/rbac.yaml");
/// The chart's policy on muster's own pod writes, templated likewise.
const POD_POLICY_TEMPLATE: &str = include_str!("../../../deploy/chart/templates/pod-policy.yaml");
/// Field manager of the applies; apart from the controller's own ("muster"), so that neither
/// takes the other's fields away.
const MANAGER: &str = "muster-install";
/// The CRDs of CRDS, by name.
const CRD_NAMES: [&str; 4] =
    ["queues.muster.dev", "cohorts.muster.dev", "reservations.muster.dev", "groups.muster.dev"];
const ACCOUNT: &str = "muster";

#[derive(Args, Debug)]
pub struct InstallArgs {
    /// Kubeconfig of a cluster admin (default: $KUBECONFIG, else ~/.kube/config).
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// Directory for the serving certificate (tls.crt, tls.key, ca.crt) and controller.kubeconfig.
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Where the API server reaches the webhook, such as https://127.0.0.1:8443 (a webhook run
    /// with `muster webhook`) [default: the in-cluster Service muster-webhook.muster-system.svc].
    #[arg(long, value_name = "URL")]
    webhook_url: Option<String>,
    /// Also send pods labelled scheduling.x-k8s.io/pod-group to the webhook (run it with
    /// --accept-pod-group-alias).
    #[arg(long)]
    accept_pod_group_alias: bool,
    /// Lifetime in seconds of the token in controller.kubeconfig.
    #[arg(long, value_name = "SECONDS", default_value_t = 7 * 24 * 3600)]
    token_seconds: i64,
}

pub fn run(args: &InstallArgs) -> Result<ExitCode> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("cannot start the runtime")?;
    rt.block_on(install(args))?;
    Ok(ExitCode::SUCCESS)
}

async fn install(args: &InstallArgs) -> Result<()> {
    let (client, config) = crate::server::client(args.kubeconfig.as_deref()).await?;
    let endpoint = match &args.webhook_url {
        Some(url) => {
            if !url.starts_with("https://") {
                bail!("--webhook-url {url}: the API server calls webhooks over HTTPS only; use https://HOST:PORT");
            }
            Endpoint::Url(url.trim_end_matches('/').to_string())
        }
        None => Endpoint::in_cluster(),
    };

    refuse_while_deleting(&client).await?;
    for doc in documents(CRDS)? {
        apply(&client, doc).await?;
    }
    wait_established(&client, &CRD_NAMES).await?;
    for doc in rbac()? {
        apply(&client, doc).await?;
    }

    let cert = serving_cert(&args.out, &endpoint)?;
    if matches!(endpoint, Endpoint::Service { .. }) {
        let secret = serde_json::json!({
            "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": TLS_SECRET, "namespace": SERVICE_NAMESPACE},
            "data": {"tls.crt": b64(cert.cert_pem.as_bytes()), "tls.key": b64(cert.key_pem.as_bytes()),
                     "ca.crt": b64(cert.ca_pem.as_bytes())},
        });
        apply(&client, serde_json::from_value(secret)?).await?;
    }
    let ca = Some(cert.ca_pem.as_bytes());
    apply(&client, dynamic(&registration::mutating_configuration(&endpoint, ca, args.accept_pod_group_alias))?).await?;
    apply(&client, dynamic(&registration::validating_configuration(&endpoint, ca, args.accept_pod_group_alias))?)
        .await?;

    default_queue(&client).await?;
    controller_kubeconfig(&client, &config, &args.out, args.token_seconds).await?;
    Ok(())
}

/// Refuses, before anything is applied, a cluster where an earlier uninstall is still under way:
/// nothing can be written into a namespace being deleted, and a CRD being deleted cannot be
/// applied, so an install would stop half done.
async fn refuse_while_deleting(client: &Client) -> Result<()> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns = namespaces
        .get_opt(SERVICE_NAMESPACE)
        .await
        .with_context(|| format!("reading namespace/{SERVICE_NAMESPACE}"))?;
    if ns.is_some_and(|n| n.metadata.deletion_timestamp.is_some()) {
        bail!(
            "namespace/{SERVICE_NAMESPACE} is being deleted, and nothing can be created in it: wait until it is gone \
             (kubectl wait --for=delete namespace/{SERVICE_NAMESPACE} --timeout=5m), then run muster install again"
        );
    }
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for name in CRD_NAMES {
        let crd = crds.get_opt(name).await.with_context(|| format!("reading CRD {name}"))?;
        if crd.is_some_and(|c| c.metadata.deletion_timestamp.is_some()) {
            bail!(
                "customresourcedefinition/{name} is being deleted (with every object of its kind): wait until it is \
                 gone (kubectl wait --for=delete crd/{name} --timeout=5m), then run muster install again"
            );
        }
    }
    Ok(())
}

/// muster's namespace, the chart's RBAC in it and the policy on muster's pod writes.
fn rbac() -> Result<Vec<DynamicObject>> {
    let namespace = serde_json::json!({
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": SERVICE_NAMESPACE, "labels": {"app.kubernetes.io/name": "muster"}},
    });
    let mut docs = vec![serde_json::from_value(namespace)?];
    for template in [RBAC_TEMPLATE, POD_POLICY_TEMPLATE] {
        docs.extend(documents(&template.replace(registration::CHART_NAMESPACE, SERVICE_NAMESPACE))?);
    }
    Ok(docs)
}

/// The objects of a multi-document YAML stream.
fn documents(yaml: &str) -> Result<Vec<DynamicObject>> {
    use serde::Deserialize;
    let mut out = Vec::new();
    for doc in serde_yaml_ng::Deserializer::from_str(yaml) {
        let value = serde_json::Value::deserialize(doc)?;
        if !value.is_null() {
            out.push(serde_json::from_value(value)?);
        }
    }
    Ok(out)
}

fn dynamic<T: Serialize>(obj: &T) -> Result<DynamicObject> {
    Ok(serde_json::from_value(serde_json::to_value(obj)?)?)
}

fn b64(bytes: &[u8]) -> String {
    // k8s-openapi's ByteString is base64 in JSON; no other encoder is needed.
    serde_json::to_value(ByteString(bytes.to_vec()))
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// The kind and name the way kubectl prints them: `clusterrole.rbac.authorization.k8s.io/muster`.
fn shown(gvk: &GroupVersionKind, name: &str) -> String {
    let kind = gvk.kind.to_lowercase();
    if gvk.group.is_empty() { format!("{kind}/{name}") } else { format!("{kind}.{}/{name}", gvk.group) }
}

/// Server-side applies `obj` and prints whether it was created, configured or unchanged.
async fn apply(client: &Client, obj: DynamicObject) -> Result<()> {
    let types = obj.types.clone().ok_or_else(|| anyhow!("an object without apiVersion and kind"))?;
    let gvk = GroupVersionKind::try_from(&types).map_err(|e| anyhow!("{}: {e}", types.api_version))?;
    let name = obj.metadata.name.clone().ok_or_else(|| anyhow!("a {} without a name", gvk.kind))?;
    // A kind just defined by a CRD takes the apiserver a moment to serve.
    let deadline = Instant::now() + Duration::from_secs(30);
    let (resource, caps) = loop {
        match pinned_kind(client, &gvk).await {
            Ok(found) => break found,
            Err(e) if Instant::now() > deadline => return Err(e).context(format!("kind {}", gvk.kind)),
            Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
        }
    };
    let api: Api<DynamicObject> = match caps.scope {
        Scope::Namespaced => {
            Api::namespaced_with(client.clone(), obj.metadata.namespace.as_deref().unwrap_or("default"), &resource)
        }
        Scope::Cluster => Api::all_with(client.clone(), &resource),
    };
    let before = api.get_opt(&name).await.with_context(|| format!("reading {}", shown(&gvk, &name)))?;
    let after = api
        .patch(&name, &PatchParams::apply(MANAGER).force(), &Patch::Apply(&obj))
        .await
        .with_context(|| format!("applying {}", shown(&gvk, &name)))?;
    let verb = match before {
        None => "created",
        Some(b) if unchanged(&b, &after) => "unchanged",
        Some(_) => "configured",
    };
    println!("{} {verb}", shown(&gvk, &name));
    Ok(())
}

/// Whether an apply changed nothing of `before`. An object with a generation changed only if it
/// moved: its status (a ValidatingAdmissionPolicy's type checks, written by the apiserver after
/// the first apply) and managed fields move the resourceVersion alone. Others changed if their
/// resourceVersion did.
fn unchanged(before: &DynamicObject, after: &DynamicObject) -> bool {
    match (before.metadata.generation, after.metadata.generation) {
        (Some(b), Some(a)) => a == b,
        _ => before.metadata.resource_version == after.metadata.resource_version,
    }
}

async fn wait_established(client: &Client, names: &[&str]) -> Result<()> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let deadline = Instant::now() + Duration::from_secs(60);
    for name in names {
        loop {
            let crd = api.get(name).await.with_context(|| format!("reading CRD {name}"))?;
            let established = crd
                .status
                .and_then(|s| s.conditions)
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Established" && c.status == "True"));
            if established {
                break;
            }
            if Instant::now() > deadline {
                bail!("CRD {name} not Established after 60s");
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
    Ok(())
}

/// The certificate in `dir` if it was made for the same names, else a new one written there.
fn serving_cert(dir: &Path, endpoint: &Endpoint) -> Result<ServingCert> {
    let (dns, ips): (Vec<String>, Vec<IpAddr>) = match endpoint {
        Endpoint::Url(url) => {
            let host = url_host(url)?;
            match host.parse::<IpAddr>() {
                Ok(ip) => (vec!["localhost".into()], vec![ip]),
                Err(_) => (vec![host], Vec::new()),
            }
        }
        Endpoint::Service { namespace, name } => (registration::service_dns_names(namespace, name), Vec::new()),
    };
    let names = muster_webhook::hosts_line(&dns, &ips);
    let read = |f: &str| std::fs::read_to_string(dir.join(f));
    if let (Ok(ca_pem), Ok(cert_pem), Ok(key_pem), Ok(old)) =
        (read("ca.crt"), read("tls.crt"), read("tls.key"), read("tls.names"))
        && old == names
    {
        println!("{} unchanged", dir.join("tls.crt").display());
        return Ok(ServingCert { ca_pem, cert_pem, key_pem, ca_key_pem: String::new(), not_after: 0, ca_not_after: 0 });
    }
    let cert = ServingCert::generate(&dns, &ips)?;
    cert.write_to(dir)?;
    muster_webhook::replace_file(&dir.join("tls.names"), names.as_bytes(), 0o644)
        .with_context(|| format!("writing {}", dir.display()))?;
    println!("{} written (with tls.key and ca.crt; for {})", dir.join("tls.crt").display(), names.trim());
    Ok(cert)
}

fn url_host(url: &str) -> Result<String> {
    let rest = url.strip_prefix("https://").unwrap_or(url);
    let authority = rest.split('/').next().unwrap_or("");
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => authority.rsplit_once(':').map_or(authority, |(h, _)| h),
    };
    if host.is_empty() {
        bail!("--webhook-url {url}: no host");
    }
    Ok(host.to_string())
}

/// A Queue named `default` admitting every namespace, unless the cluster has queues already.
async fn default_queue(client: &Client) -> Result<()> {
    let api: Api<Queue> = Api::all(client.clone());
    let existing = api.list(&Default::default()).await.context("listing queues")?;
    if existing.items.iter().any(|q| q.metadata.name.as_deref() == Some("default")) {
        println!("queue.muster.dev/default unchanged");
        return Ok(());
    }
    if !existing.items.is_empty() {
        return Ok(());
    }
    apply(client, dynamic(&Queue::new("default", QueueSpec::default()))?).await
}

/// DIR/controller.kubeconfig: the cluster of the admin's kubeconfig with a token of the muster
/// ServiceAccount, so that muster runs locally with exactly its in-cluster rights.
async fn controller_kubeconfig(client: &Client, config: &Config, dir: &Path, seconds: i64) -> Result<()> {
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), SERVICE_NAMESPACE);
    let request = TokenRequest {
        spec: Some(TokenRequestSpec { expiration_seconds: Some(seconds), ..TokenRequestSpec::default() }),
        ..TokenRequest::default()
    };
    let token = accounts
        .create_token_request(ACCOUNT, &PostParams::default(), &request)
        .await
        .context("requesting a token for serviceaccount muster-system/muster")?
        .status
        .and_then(|s| s.token)
        .ok_or_else(|| anyhow!("the TokenRequest came back without a token"))?;
    let mut cluster = format!("    server: {}\n", config.cluster_url.to_string().trim_end_matches('/'));
    if let Some(roots) = &config.root_cert {
        let pem: String = roots.iter().map(|der| pem_certificate(der)).collect();
        cluster.push_str(&format!("    certificate-authority-data: {}\n", b64(pem.as_bytes())));
    }
    if config.accept_invalid_certs {
        cluster.push_str("    insecure-skip-tls-verify: true\n");
    }
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: muster\n  cluster:\n{cluster}users:\n- name: {ACCOUNT}\n  user:\n    \
         token: {token}\ncontexts:\n- name: muster\n  context:\n    cluster: muster\n    user: {ACCOUNT}\n    namespace: \
         {SERVICE_NAMESPACE}\ncurrent-context: muster\n"
    );
    let path = dir.join("controller.kubeconfig");
    muster_webhook::replace_file(&path, text.as_bytes(), 0o600)
        .with_context(|| format!("writing {}", path.display()))?;
    println!(
        "{} written (serviceaccount {SERVICE_NAMESPACE}/{ACCOUNT}, token valid {}h)",
        path.display(),
        seconds / 3600
    );
    Ok(())
}

fn pem_certificate(der: &[u8]) -> String {
    let body = b64(der);
    let mut out = String::from("-----BEGIN CERTIFICATE-----\n");
    for line in body.as_bytes().chunks(64) {
        out.push_str(&String::from_utf8_lossy(line));
        out.push('\n');
    }
    out.push_str("-----END CERTIFICATE-----\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_manifests_parse() {
        let crds = documents(CRDS).unwrap();
        let names: Vec<_> = crds.iter().map(|d| d.metadata.name.clone().unwrap()).collect();
        assert_eq!(names, CRD_NAMES, "the CRDs install waits for are the ones it applies");
        let rbac = rbac().unwrap();
        let kinds: Vec<_> = rbac.iter().map(|d| d.types.clone().unwrap().kind).collect();
        assert_eq!(
            kinds,
            [
                "Namespace",
                "ServiceAccount",
                "ClusterRole",
                "ClusterRoleBinding",
                "Role",
                "RoleBinding",
                "ValidatingAdmissionPolicy",
                "ValidatingAdmissionPolicyBinding"
            ]
        );
        let text = serde_json::to_string(&rbac).unwrap();
        assert!(!text.contains("{{"), "the chart's RBAC and pod policy template nothing but the namespace");
        assert_eq!(text.matches(r#""namespace":"muster-system""#).count(), 5, "account, role, binding, both subjects");
        assert!(text.contains("'system:serviceaccount:muster-system:muster'"), "the policy names muster's identity");
    }

    #[test]
    fn an_apply_that_moved_only_the_status_changed_nothing() {
        let object = |generation: Option<i64>, version: &str| {
            let mut o = DynamicObject::new("muster-pod-writes", &kube::core::ApiResource::erase::<ServiceAccount>(&()));
            o.metadata.generation = generation;
            o.metadata.resource_version = Some(version.into());
            o
        };
        assert!(unchanged(&object(Some(1), "10"), &object(Some(1), "11")), "the status moved alone");
        assert!(!unchanged(&object(Some(1), "10"), &object(Some(2), "11")), "the spec changed");
        assert!(!unchanged(&object(None, "10"), &object(None, "11")), "no generation: the version decides");
        assert!(unchanged(&object(None, "10"), &object(None, "10")));
    }

    #[test]
    fn url_hosts() {
        assert_eq!(url_host("https://127.0.0.1:8443").unwrap(), "127.0.0.1");
        assert_eq!(url_host("https://webhook.example:443/x").unwrap(), "webhook.example");
        assert_eq!(url_host("https://[::1]:8443").unwrap(), "::1");
        assert!(url_host("https://").is_err());
    }

    #[test]
    fn kubectl_style_names() {
        assert_eq!(shown(&GroupVersionKind::gvk("", "v1", "Namespace"), "muster-system"), "namespace/muster-system");
        assert_eq!(
            shown(&GroupVersionKind::gvk("muster.dev", "v1alpha1", "Queue"), "default"),
            "queue.muster.dev/default"
        );
    }

    #[test]
    fn base64_and_pem() {
        assert_eq!(b64(b"muster"), "bXVzdGVy");
        let pem = pem_certificate(&[0u8; 60]);
        assert!(pem.starts_with("-----BEGIN CERTIFICATE-----\n") && pem.ends_with("-----END CERTIFICATE-----\n"));
    }
}
