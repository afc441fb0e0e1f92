//! A pod's claims allocated before the pod is bound, as kube-scheduler allocates them: the
//! finalizer that keeps an allocated claim from going while it is in use, then
//! `status.allocation` (the devices muster placed the pod's member with, and its node) and
//! `status.reservedFor` naming the pod. The ResourceClaim controller deallocates the claim, and
//! deletes it, once the pod is done.

use std::collections::BTreeMap;

use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceClaimConsumerReference};
use kube::Client;
use kube::api::{Api, PostParams};
use muster_graph::dra::PublishedDevice;
use muster_k8s::dra::allocation;
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
    /// The ResourceClaim's name (the pod's status.resourceClaimStatuses says it).
    pub claim: String,
    /// The pod's name for the claim.
    pub pod_claim: String,
    pub node: String,
    /// The devices, each with the request it serves (`CLAIM/REQUEST`).
    pub devices: Vec<(String, PublishedDevice)>,
}

/// Writes `a` into its claim for the pod `pod` (uid `uid`) in `namespace`. Idempotent: a claim
/// already allocated these devices and reserved for the pod is left as it is. A claim made for
/// another pod, allocated other devices, or being deleted is refused.
pub async fn allocate_claim(
    client: Client,
    namespace: &str,
    pod: &str,
    uid: &str,
    a: &ClaimAllocation,
) -> Result<(), String> {
    let claims: Api<ResourceClaim> = Api::namespaced(client.clone(), namespace);
    let fail = |what: String| format!("ResourceClaim {}: {what}", a.claim);
    for _attempt in 0..5 {
        let mut claim = claims.get(&a.claim).await.map_err(|e| fail(e.to_string()))?;
        check_made_for(&claim, pod, uid, &a.pod_claim).map_err(fail)?;
        let classes = classes_of(&client, &claim).await.map_err(fail)?;
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
                    match claims.replace(&a.claim, &post_params(), &claim).await {
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
        match claims.replace_status(&a.claim, &post_params(), &claim).await {
            Ok(_) => return Ok(()),
            Err(e) if is_conflict(&e) => continue,
            Err(e) => return Err(fail(format!("writing its allocation: {e}"))),
        }
    }
    Err(fail("it kept changing while muster wrote its allocation".into()))
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
    let owned =
        meta.owner_references.iter().flatten().any(|o| o.kind == "Pod" && o.uid == uid && o.controller == Some(true));
    let named = meta.annotations.as_ref().and_then(|a| a.get(POD_CLAIM_NAME)).is_some_and(|n| n == pod_claim);
    if !(owned && named) {
        return Err(format!("it was not made for claim {pod_claim} of pod {pod}; muster allocates only such claims"));
    }
    Ok(())
}

/// The DeviceClasses the claim's requests name.
async fn classes_of(client: &Client, claim: &ResourceClaim) -> Result<BTreeMap<String, DeviceClass>, String> {
    let api: Api<DeviceClass> = Api::all(client.clone());
    let requests = claim.spec.as_ref().and_then(|s| s.devices.as_ref()).and_then(|d| d.requests.as_ref());
    let mut out = BTreeMap::new();
    for name in requests.into_iter().flatten().filter_map(|r| r.exactly.as_ref()).map(|e| &e.device_class_name) {
        if !out.contains_key(name) {
            let class = api.get(name).await.map_err(|e| format!("DeviceClass {name}: {e}"))?;
            out.insert(name.clone(), class);
        }
    }
    Ok(out)
}
