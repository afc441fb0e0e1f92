//! A pod's claims allocated before the pod is bound, as kube-scheduler allocates them: the
//! finalizer that keeps an allocated claim from going while it is in use, then
//! `status.allocation` (the devices muster placed the pod's member with, and its node) and
//! `status.reservedFor` naming the pod. The claim for a pod's extended resources that devices
//! serve, muster makes first and names in the pod's status. The ResourceClaim controller
//! deallocates a claim, and deletes it, once the pod is done.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, PodExtendedResourceClaimStatus};
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceClaimConsumerReference};
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use muster_graph::dra::PublishedDevice;
use muster_k8s::dra::{EXTENDED_CLAIM, EXTENDED_CLAIM_ANNOTATION, ExtendedClaim, allocation, extended_claim_name};
use muster_k8s::labels;

/// The finalizer kube-scheduler puts on a claim it allocates, which the ResourceClaim
/// controller removes once it deallocates it.
const DELETE_PROTECTION: &str = "resource.kubernetes.io/delete-protection";

/// The annotation the ResourceClaim controller puts on a claim it made for a pod: the pod's name
/// for the claim.
const POD_CLAIM_NAME: &str = "resource.kubernetes.io/pod-claim-name";

/// One claim of a pod to allocate before the pod is bound.
#[derive(Debug, Clone, PartialEq)]
pub struct ClaimAllocation {
    pub claim: ClaimSource,
    /// The pod's name for the claim ([`EXTENDED_CLAIM`] for its extended resources').
    pub pod_claim: String,
    pub node: String,
    /// The devices, each with the request it serves (`CLAIM/REQUEST`).
    pub devices: Vec<(String, PublishedDevice)>,
    /// The DeviceClasses by name as the controller sees them, shared by a pass's allocations:
    /// a class the claim names is read from the apiserver only when it is not here.
    pub classes: Arc<BTreeMap<String, DeviceClass>>,
}

/// Where a pod's claim comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum ClaimSource {
    /// The ResourceClaim the ResourceClaim controller made from the pod's template (the pod's
    /// status.resourceClaimStatuses names it).
    Made(String),
    /// The claim for the pod's extended resources, which muster makes (`made`, once the pod's
    /// status.extendedResourceClaimStatus names it), then names in the pod's status.
    Extended { made: Option<String>, claim: ExtendedClaim },
}

/// Writes `a` into its claim for the pod `pod` (uid `uid`) in `namespace`, first making the
/// claim for its extended resources. Idempotent: a claim already allocated these devices and
/// reserved for the pod is left as it is. A claim made for another pod, allocated other
/// devices, or being deleted is refused.
pub async fn allocate_claim(
    client: Client,
    namespace: &str,
    pod: &str,
    uid: &str,
    a: &ClaimAllocation,
) -> Result<(), String> {
    let name = match &a.claim {
        ClaimSource::Made(name) => name.clone(),
        ClaimSource::Extended { made: Some(name), .. } => name.clone(),
        ClaimSource::Extended { made: None, claim } => extended_claim(&client, namespace, pod, uid, claim).await?,
    };
    allocate(&client, namespace, pod, uid, &name, a).await?;
    if let ClaimSource::Extended { made: None, claim } = &a.claim {
        name_in_pod_status(&client, namespace, pod, &name, claim).await?;
    }
    Ok(())
}

async fn allocate(
    client: &Client,
    namespace: &str,
    pod: &str,
    uid: &str,
    name: &str,
    a: &ClaimAllocation,
) -> Result<(), String> {
    let claims: Api<ResourceClaim> = Api::namespaced(client.clone(), namespace);
    let fail = |what: String| format!("ResourceClaim {name}: {what}");
    for _attempt in 0..5 {
        let mut claim = claims.get(name).await.map_err(|e| fail(e.to_string()))?;
        check_made_for(&claim, pod, uid, &a.pod_claim).map_err(fail)?;
        let classes = classes_of(client, &claim, &a.classes).await.map_err(fail)?;
        let devices: Vec<(String, &PublishedDevice)> = a.devices.iter().map(|(r, d)| (r.clone(), d)).collect();
        let want = allocation(&claim, &a.pod_claim, &|n: &str| classes.get(n), &a.node, &devices)
            .map_err(|e| fail(e.to_string()))?;
        let status = claim.status.get_or_insert_default();
        let reserved = status.reserved_for.iter().flatten().any(|r| r.uid == uid);
        match &status.allocation {
            Some(have) if have.devices.as_ref().map(|d| &d.results) == want.devices.as_ref().map(|d| &d.results) => {
                if reserved {
                    return Ok(());
                }
            }
            Some(_) => return Err(fail("allocated other devices by another scheduler".into())),
            None => {
                if !claim.metadata.finalizers.iter().flatten().any(|f| f == DELETE_PROTECTION) {
                    claim.metadata.finalizers.get_or_insert_default().push(DELETE_PROTECTION.into());
                    match claims.replace(name, &post_params(), &claim).await {
                        Ok(c) => claim = c,
                        Err(e) if is_conflict(&e) => continue,
                        Err(e) => return Err(fail(format!("adding its finalizer: {e}"))),
                    }
                }
                claim.status.get_or_insert_default().allocation = Some(want);
            }
        }
        let status = claim.status.get_or_insert_default();
        status.reserved_for.get_or_insert_default().push(ResourceClaimConsumerReference {
            api_group: None,
            resource: "pods".into(),
            name: pod.into(),
            uid: uid.into(),
        });
        match claims.replace_status(name, &post_params(), &claim).await {
            Ok(_) => return Ok(()),
            Err(e) if is_conflict(&e) => continue,
            Err(e) => return Err(fail(format!("writing its allocation: {e}"))),
        }
    }
    Err(fail("it kept changing while muster wrote its allocation".into()))
}

/// The claim for the extended resources of pod `pod` (uid `uid`), made unless an earlier
/// attempt made it (its name is known beforehand: [`extended_claim_name`]; whose it is, the
/// allocation then checks).
async fn extended_claim(
    client: &Client,
    namespace: &str,
    pod: &str,
    uid: &str,
    claim: &ExtendedClaim,
) -> Result<String, String> {
    let claims: Api<ResourceClaim> = Api::namespaced(client.clone(), namespace);
    match claims.create(&post_params(), &claim.object(namespace, pod, uid)).await {
        Ok(_) => Ok(extended_claim_name(pod, uid)),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(extended_claim_name(pod, uid)),
        Err(e) => Err(format!("making the claim for its extended resources: {e}")),
    }
}

/// Names the claim in the pod's status.extendedResourceClaimStatus, with which container's
/// resource each of its requests serves: what the kubelet reads to hand the devices over.
async fn name_in_pod_status(
    client: &Client,
    namespace: &str,
    pod: &str,
    name: &str,
    claim: &ExtendedClaim,
) -> Result<(), String> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let status =
        PodExtendedResourceClaimStatus { request_mappings: claim.mappings.clone(), resource_claim_name: name.into() };
    let patch = serde_json::json!({"status": {"extendedResourceClaimStatus": status}});
    let params = PatchParams { field_manager: Some(labels::FIELD_MANAGER.into()), ..PatchParams::default() };
    pods.patch_status(pod, &params, &Patch::Merge(&patch))
        .await
        .map(|_| ())
        .map_err(|e| format!("naming claim {name} in its status: {e}"))
}

fn post_params() -> PostParams {
    PostParams { field_manager: Some(labels::FIELD_MANAGER.into()), ..PostParams::default() }
}

fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

/// The claim must be the one the ResourceClaim controller made for this pod's claim `pod_claim`
/// (owned by the pod, annotated with the claim's name), and not being deleted.
fn check_made_for(claim: &ResourceClaim, pod: &str, uid: &str, pod_claim: &str) -> Result<(), String> {
    let meta = &claim.metadata;
    if meta.deletion_timestamp.is_some() {
        return Err("it is being deleted".into());
    }
    let annotations = meta.annotations.as_ref();
    let named = match pod_claim {
        EXTENDED_CLAIM => annotations.and_then(|a| a.get(EXTENDED_CLAIM_ANNOTATION)).is_some_and(|v| v == "true"),
        _ => annotations.and_then(|a| a.get(POD_CLAIM_NAME)).is_some_and(|n| n == pod_claim),
    };
    if !(owned_by(claim, uid) && named) {
        return Err(format!("it was not made for claim {pod_claim} of pod {pod}; muster allocates only such claims"));
    }
    Ok(())
}

/// Whether the pod of `uid` controls the claim (it goes with the pod).
fn owned_by(claim: &ResourceClaim, uid: &str) -> bool {
    let owners = claim.metadata.owner_references.iter().flatten();
    owners.into_iter().any(|o| o.kind == "Pod" && o.uid == uid && o.controller == Some(true))
}

/// The DeviceClasses the claim's requests name: from `known`, else read.
async fn classes_of(
    client: &Client,
    claim: &ResourceClaim,
    known: &BTreeMap<String, DeviceClass>,
) -> Result<BTreeMap<String, DeviceClass>, String> {
    let api: Api<DeviceClass> = Api::all(client.clone());
    let requests = claim.spec.as_ref().and_then(|s| s.devices.as_ref()).and_then(|d| d.requests.as_ref());
    let mut out = BTreeMap::new();
    for name in requests.into_iter().flatten().filter_map(|r| r.exactly.as_ref()).map(|e| &e.device_class_name) {
        if !out.contains_key(name) {
            let class = match known.get(name) {
                Some(class) => class.clone(),
                None => api.get(name).await.map_err(|e| format!("DeviceClass {name}: {e}"))?,
            };
            out.insert(name.clone(), class);
        }
    }
    Ok(out)
}
