//! Extended resources served by devices (Kubernetes' DRAExtendedResource): a pod that asks
//! `nvidia.com/gpu: 8` where no node has that resource but a DeviceClass serves the name
//! (`spec.extendedResourceName`, or `deviceclass.resource.kubernetes.io/CLASS` for every class)
//! gets 8 of the class's devices through a ResourceClaim the scheduler makes for it. muster
//! makes that claim as kube-scheduler does: one per pod, owned by it and annotated
//! [`EXTENDED_CLAIM_ANNOTATION`], a request per container and resource named
//! `container-C-request-R`, and the pod's `status.extendedResourceClaimStatus` mapping each
//! container's resource to its request, which the kubelet reads.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ContainerExtendedResourceRequest, PodSpec};
use k8s_openapi::api::resource::v1::{
    DeviceClass, DeviceRequest as K8sDeviceRequest, ExactDeviceRequest, ResourceClaim, ResourceClaimSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use muster_graph::dra::DeviceRequest;

use super::{ClassDrivers, Classes, DraError, class_devices};
use crate::pod::container_requests;

/// The annotation that marks a pod's claim for its extended resources.
pub const EXTENDED_CLAIM_ANNOTATION: &str = "resource.kubernetes.io/extended-resource-claim";

/// The claim name a Group's device requests for extended resources are under
/// (`<extended-resources>/container-0-request-1`): not a valid name for a pod's own claims, so
/// the two never meet.
pub const EXTENDED_CLAIM: &str = "<extended-resources>";

/// The extended resource name every DeviceClass serves: this prefix and the class's name.
const CLASS_PREFIX: &str = "deviceclass.resource.kubernetes.io/";

/// Which class serves each extended resource name: every class its implicit name, and the name
/// its `spec.extendedResourceName` gives; where several classes give one name, the newest
/// (then the first by name), as kube-scheduler resolves it.
pub fn classes_by_resource<'c>(
    classes: impl IntoIterator<Item = &'c DeviceClass>,
) -> BTreeMap<String, &'c DeviceClass> {
    let mut out = BTreeMap::new();
    let mut explicit: BTreeMap<String, &DeviceClass> = BTreeMap::new();
    for c in classes {
        let Some(name) = c.metadata.name.as_deref() else { continue };
        out.insert(implicit_name(name), c);
        let Some(resource) = c.spec.as_ref().and_then(|s| s.extended_resource_name.clone()) else { continue };
        let newer = |other: &&DeviceClass| {
            let created = |d: &DeviceClass| d.metadata.creation_timestamp.as_ref().map(|t| t.0);
            (created(c), std::cmp::Reverse(name))
                > (created(other), std::cmp::Reverse(other.metadata.name.as_deref().unwrap_or("")))
        };
        if explicit.get(&resource).is_none_or(newer) {
            explicit.insert(resource, c);
        }
    }
    out.extend(explicit);
    out
}

/// The extended resource name every DeviceClass serves: `deviceclass.resource.kubernetes.io/CLASS`.
pub(crate) fn implicit_name(class: &str) -> String {
    format!("{CLASS_PREFIX}{class}")
}

/// Whether `name` may be served by devices: an extended resource (a domain outside
/// kubernetes.io), or a class's implicit name.
pub fn may_be_served_by_devices(name: &str) -> bool {
    let Some((domain, _)) = name.split_once('/') else { return false };
    name.starts_with(CLASS_PREFIX) || !(domain == "kubernetes.io" || domain.ends_with(".kubernetes.io"))
}

/// One container's asks of extended resources, with what names the claim's requests for it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ContainerAsks {
    /// Its index among the init containers and then the containers.
    index: usize,
    name: String,
    /// An init container that is not a sidecar: it ends before the others start.
    short_lived: bool,
    /// Every resource it requests, sorted (a request's name numbers the resource among them).
    resources: Vec<String>,
    /// Its extended resources' amounts.
    extended: BTreeMap<String, u64>,
}

/// What a pod's containers ask of extended resources that devices may serve (read from its
/// spec), from which its claim is made once it is known which names devices serve.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ExtendedAsks(Vec<ContainerAsks>);

/// One request of a pod's claim for its extended resources.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtendedRequest {
    /// `container-C-request-R`.
    pub name: String,
    pub resource: String,
    pub class: String,
    pub count: u32,
}

/// A pod's claim for its extended resources: its requests, and which container's resource each
/// serves.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ExtendedClaim {
    pub requests: Vec<ExtendedRequest>,
    pub mappings: Vec<ContainerExtendedResourceRequest>,
}

impl ExtendedAsks {
    /// The asks of a pod spec; amounts muster cannot count are left to the pod's own check.
    pub fn of(spec: &PodSpec) -> Self {
        let init = spec.init_containers.iter().flatten().map(|c| (c, c.restart_policy.as_deref() != Some("Always")));
        let all = init.chain(spec.containers.iter().map(|c| (c, false)));
        let asks = all.enumerate().filter_map(|(index, (c, short_lived))| {
            let requests = container_requests(c.resources.as_ref(), "resources").ok()?;
            let extended: BTreeMap<String, u64> = requests
                .iter()
                .filter(|(r, a)| **a > 0 && may_be_served_by_devices(r))
                .map(|(r, a)| (r.clone(), *a))
                .collect();
            (!extended.is_empty()).then(|| ContainerAsks {
                index,
                name: c.name.clone(),
                short_lived,
                resources: requests.keys().cloned().collect(),
                extended,
            })
        });
        Self(asks.collect())
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The claim for the names `served` gives a class for, made as kube-scheduler makes it:
    /// each long-lived container (an app container or a sidecar) gets a request of its own; an
    /// init container that ends before them first reuses the requests of the long-lived
    /// containers after it, and asks only the rest; of those, the largest request serves them all.
    pub fn claim<'c>(&self, served: impl Fn(&str) -> Option<&'c DeviceClass>) -> ExtendedClaim {
        let mut names: Vec<&String> = self.0.iter().flat_map(|c| c.extended.keys()).collect();
        names.sort();
        names.dedup();
        let mut claim = ExtendedClaim::default();
        for resource in names {
            let Some(class) = served(resource).and_then(|c| c.metadata.name.clone()) else { continue };
            let request_of = |c: &ContainerAsks, count: u64| {
                let r = c.resources.iter().position(|x| x == resource).unwrap_or(0);
                let count = u32::try_from(count).unwrap_or(u32::MAX);
                let name = format!("container-{}-request-{r}", c.index);
                ExtendedRequest { name, resource: resource.clone(), class: class.clone(), count }
            };
            let mapping = |c: &ContainerAsks, request: &str| ContainerExtendedResourceRequest {
                container_name: c.name.clone(),
                resource_name: resource.clone(),
                request_name: request.to_string(),
            };
            let asks = |c: &&ContainerAsks| c.extended.contains_key(resource);
            let mut long_lived: Vec<(usize, ExtendedRequest)> = Vec::new();
            let mut mappings = Vec::new();
            for c in self.0.iter().filter(|c| !c.short_lived).filter(asks) {
                let r = request_of(c, c.extended[resource]);
                mappings.push(mapping(c, &r.name));
                long_lived.push((c.index, r));
            }
            let mut largest: Option<ExtendedRequest> = None;
            let mut short_mappings = Vec::new();
            let mut short_names = Vec::new();
            for c in self.0.iter().filter(|c| c.short_lived).filter(asks) {
                let wants = c.extended[resource];
                let mut reused = 0u64;
                for (_, r) in long_lived.iter().filter(|(i, _)| *i >= c.index) {
                    if reused >= wants {
                        break;
                    }
                    reused += u64::from(r.count);
                    short_mappings.push(mapping(c, &r.name));
                }
                if reused < wants {
                    let r = request_of(c, wants - reused);
                    short_mappings.push(mapping(c, &r.name));
                    short_names.push(r.name.clone());
                    if largest.as_ref().is_none_or(|l| l.count < r.count) {
                        largest = Some(r);
                    }
                }
            }
            if let Some(largest) = &largest {
                for m in short_mappings.iter_mut().filter(|m| short_names.contains(&m.request_name)) {
                    m.request_name = largest.name.clone();
                }
            }
            claim.requests.extend(largest);
            claim.requests.extend(long_lived.into_iter().map(|(_, r)| r));
            claim.mappings.extend(mappings);
            claim.mappings.extend(short_mappings);
        }
        claim.requests.sort_by(|a, b| a.name.cmp(&b.name));
        claim
    }
}

/// The name of the claim for the extended resources of pod `pod` (uid `uid`):
/// `POD-extended-resources-` (the pod's name cut to fit) and five characters of its uid, as
/// kube-scheduler's generated names look. Known before the claim exists, so that making it
/// again after a failed attempt finds the one made (another pod of the same name has another
/// uid), with no listing.
pub fn extended_claim_name(pod: &str, uid: &str) -> String {
    const SUFFIX: &str = "-extended-resources-";
    let tail: String = uid.chars().filter(char::is_ascii_alphanumeric).take(5).collect::<String>().to_lowercase();
    let room = 253 - SUFFIX.len() - tail.len();
    let mut base = &pod[..pod.len().min(room)];
    base = base.trim_end_matches(['-', '.']);
    format!("{base}{SUFFIX}{tail}")
}

impl ExtendedClaim {
    /// The device requests of one member for it: each of the claim's requests, from its class's
    /// driver, under [`EXTENDED_CLAIM`].
    pub fn device_requests(
        &self,
        classes: &Classes,
        drivers: &dyn ClassDrivers,
    ) -> Result<Vec<DeviceRequest>, DraError> {
        (self.requests.iter())
            .map(|r| {
                let at = format!("resources[{}]", r.resource);
                let class = class_devices(&r.class, classes, drivers, &at)?;
                Ok(DeviceRequest {
                    name: format!("{EXTENDED_CLAIM}/{}", r.name),
                    driver: class.driver,
                    count: r.count,
                    selectors: class.selectors,
                    extended_resource: Some(r.resource.clone()),
                })
            })
            .collect()
    }

    /// The ResourceClaim to create for pod `pod` (uid `uid`) in `namespace`: named
    /// [`extended_claim_name`], owned by the pod (so it goes with it), annotated as its extended
    /// resources' claim.
    pub fn object(&self, namespace: &str, pod: &str, uid: &str) -> ResourceClaim {
        let requests = (self.requests.iter())
            .map(|r| K8sDeviceRequest {
                name: r.name.clone(),
                exactly: Some(ExactDeviceRequest {
                    device_class_name: r.class.clone(),
                    allocation_mode: Some("ExactCount".into()),
                    count: Some(i64::from(r.count)),
                    ..Default::default()
                }),
                ..Default::default()
            })
            .collect();
        ResourceClaim {
            metadata: ObjectMeta {
                namespace: Some(namespace.into()),
                name: Some(extended_claim_name(pod, uid)),
                annotations: Some([(EXTENDED_CLAIM_ANNOTATION.to_string(), "true".to_string())].into()),
                owner_references: Some(vec![OwnerReference {
                    api_version: "v1".into(),
                    kind: "Pod".into(),
                    name: pod.into(),
                    uid: uid.into(),
                    controller: Some(true),
                    ..Default::default()
                }]),
                ..Default::default()
            },
            spec: Some(ResourceClaimSpec {
                devices: Some(k8s_openapi::api::resource::v1::DeviceClaim {
                    requests: Some(requests),
                    ..Default::default()
                }),
            }),
            status: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dra::Published;
    use serde_json::json;

    fn class(name: &str, extended: Option<&str>, created: &str) -> DeviceClass {
        serde_json::from_value(json!({
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": name, "creationTimestamp": created},
            "spec": {"extendedResourceName": extended, "selectors": [{"cel": {"expression": "device.driver == \"gpu.example.com\""}}]}
        }))
        .unwrap()
    }

    /// A container as the apiserver returns it: an extended resource's request equals its limit.
    fn container(name: &str, asks: &[(&str, u32)], sidecar: bool) -> serde_json::Value {
        let amounts: serde_json::Map<String, serde_json::Value> =
            asks.iter().map(|(r, n)| (r.to_string(), json!(n.to_string()))).collect();
        let mut c = json!({"name": name, "image": "busybox", "resources": {"requests": amounts, "limits": amounts}});
        if sidecar {
            c["restartPolicy"] = json!("Always");
        }
        c
    }

    fn claim_of(
        init: Vec<serde_json::Value>,
        containers: Vec<serde_json::Value>,
        classes: &[(&str, &str)],
    ) -> ExtendedClaim {
        let spec: PodSpec = serde_json::from_value(json!({"initContainers": init, "containers": containers})).unwrap();
        let classes: BTreeMap<String, DeviceClass> =
            classes.iter().map(|(r, c)| (r.to_string(), class(c, None, "2026-12-01T00:00:00Z"))).collect();
        ExtendedAsks::of(&spec).claim(|r| classes.get(r))
    }

    fn requests(claim: &ExtendedClaim) -> Vec<(&str, &str, u32)> {
        claim.requests.iter().map(|r| (r.name.as_str(), r.class.as_str(), r.count)).collect()
    }

    fn mappings(claim: &ExtendedClaim) -> Vec<(&str, &str, &str)> {
        let mut m: Vec<_> = (claim.mappings.iter())
            .map(|m| (m.container_name.as_str(), m.resource_name.as_str(), m.request_name.as_str()))
            .collect();
        m.sort();
        m
    }

    // The cases of kube-scheduler's own test of the claim it makes
    // (Test_createRequestsAndMappings_requests in its dynamicresources plugin), with its results.
    const GPU: &str = "example.com/gpu";
    const GPU1: &str = "example.com/gpu1";
    const INIT: &str = "example.com/gpuinit";

    #[test]
    fn requests_are_named_by_container_and_resource_as_kube_scheduler_names_them() {
        let one = || vec![container("con0", &[(GPU, 1), (GPU1, 2), ("cpu", 1)], false)];
        assert!(claim_of(vec![], one(), &[]).requests.is_empty(), "no class serves them: no claim");
        let c = claim_of(vec![], one(), &[(GPU, "class")]);
        assert_eq!(requests(&c), [("container-0-request-1", "class", 1)], "cpu sorts first among the requests");
        let pod1 = || vec![container("con0", &[(GPU, 1), (GPU1, 2)], false)];
        let c = claim_of(vec![], pod1(), &[(GPU, "class"), (GPU1, "class1")]);
        assert_eq!(requests(&c), [("container-0-request-0", "class", 1), ("container-0-request-1", "class1", 2)]);
        let pod2 = vec![container("con0", &[(GPU, 1)], false), container("con1", &[(GPU1, 2)], false)];
        let c = claim_of(vec![], pod2, &[(GPU, "class"), (GPU1, "class1")]);
        assert_eq!(requests(&c), [("container-0-request-0", "class", 1), ("container-1-request-0", "class1", 2)]);
        assert_eq!(mappings(&c), [("con0", GPU, "container-0-request-0"), ("con1", GPU1, "container-1-request-0")]);
    }

    #[test]
    fn init_containers_reuse_what_runs_after_them_and_share_their_largest_request() {
        let served = [(GPU, "class"), (INIT, "classInit")];
        // One init container, one app container.
        let c = claim_of(
            vec![container("init-con0", &[(INIT, 2)], false)],
            vec![container("con0", &[(GPU, 1)], false)],
            &served,
        );
        assert_eq!(requests(&c), [("container-0-request-0", "classInit", 2), ("container-1-request-0", "class", 1)]);
        // Two init containers: the larger request serves both.
        let init = vec![container("init-con0", &[(INIT, 1)], false), container("init-con1", &[(INIT, 2)], false)];
        let c = claim_of(init, vec![container("con0", &[(GPU, 1)], false)], &served);
        assert_eq!(requests(&c), [("container-1-request-0", "classInit", 2), ("container-2-request-0", "class", 1)]);
        assert_eq!(
            mappings(&c),
            [
                ("con0", GPU, "container-2-request-0"),
                ("init-con0", INIT, "container-1-request-0"),
                ("init-con1", INIT, "container-1-request-0")
            ]
        );
        // A sidecar's devices serve the init container before it that asks no more.
        let init = vec![
            container("init-con0", &[(INIT, 1)], false),
            container("sidecar-con1", &[(INIT, 1)], true),
            container("init-con2", &[(INIT, 2)], false),
        ];
        let c = claim_of(init, vec![container("con0", &[(GPU, 1)], false)], &served);
        assert_eq!(
            requests(&c),
            [
                ("container-1-request-0", "classInit", 1),
                ("container-2-request-0", "classInit", 2),
                ("container-3-request-0", "class", 1)
            ]
        );
        assert!(mappings(&c).contains(&("init-con0", INIT, "container-1-request-0")));
        let total: u32 = c.requests.iter().map(|r| r.count).sum();
        assert_eq!(total, 4, "1 for the sidecar, 2 for the last init container, 1 for the app container");
    }

    #[test]
    fn each_class_serves_its_own_name_and_the_newest_class_an_explicit_one() {
        let old = class("gpu-old", Some("nvidia.com/gpu"), "2026-11-01T00:00:00Z");
        let new = class("gpu-new", Some("nvidia.com/gpu"), "2026-12-01T00:00:00Z");
        let plain = class("fpga", None, "2026-12-01T00:00:00Z");
        for order in [[&old, &new, &plain], [&new, &plain, &old]] {
            let by = classes_by_resource(order);
            assert_eq!(by["nvidia.com/gpu"].metadata.name.as_deref(), Some("gpu-new"));
            assert_eq!(by["deviceclass.resource.kubernetes.io/gpu-old"].metadata.name.as_deref(), Some("gpu-old"));
            assert_eq!(by["deviceclass.resource.kubernetes.io/fpga"].metadata.name.as_deref(), Some("fpga"));
            assert_eq!(by.len(), 4);
        }
        assert!(may_be_served_by_devices("nvidia.com/gpu"));
        assert!(may_be_served_by_devices("deviceclass.resource.kubernetes.io/gpu"));
        assert!(!may_be_served_by_devices("cpu"));
        assert!(!may_be_served_by_devices("hugepages-2Mi"));
        assert!(!may_be_served_by_devices("requests.kubernetes.io/x"));
    }

    #[test]
    fn the_claim_object_is_owned_by_its_pod_and_asks_what_the_devices_serve() {
        let c =
            claim_of(vec![], vec![container("worker", &[("nvidia.com/gpu", 8)], false)], &[("nvidia.com/gpu", "gpu")]);
        let o = c.object("team-a", "train-0", "p1");
        assert_eq!(o.metadata.name.as_deref(), Some("train-0-extended-resources-p1"));
        let uid = "3f2a9c1e-7b4d-4e0a-9c55-0a1b2c3d4e5f";
        assert_eq!(extended_claim_name("w", uid), "w-extended-resources-3f2a9");
        let long = extended_claim_name(&"a".repeat(253), uid);
        assert_eq!(long.len(), 253, "cut to a valid name: {long}");
        assert!(long.ends_with("aaa-extended-resources-3f2a9"));
        let owner = &o.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!((owner.kind.as_str(), owner.uid.as_str(), owner.controller), ("Pod", "p1", Some(true)));
        assert_eq!(o.metadata.annotations.as_ref().unwrap()[EXTENDED_CLAIM_ANNOTATION], "true");
        let r = &o.spec.as_ref().unwrap().devices.as_ref().unwrap().requests.as_ref().unwrap()[0];
        let exact = r.exactly.as_ref().unwrap();
        assert_eq!(
            (r.name.as_str(), exact.device_class_name.as_str(), exact.count),
            ("container-0-request-0", "gpu", Some(8))
        );
        let device = muster_graph::dra::PublishedDevice::new("gpu.example.com", "n1", "gpu-0");
        let g = class("gpu", Some("nvidia.com/gpu"), "2026-12-01T00:00:00Z");
        let d = c.device_requests(&|n: &str| (n == "gpu").then_some(&g), &Published([&device].into_iter())).unwrap();
        assert_eq!(d[0].name, "<extended-resources>/container-0-request-0");
        assert_eq!((d[0].driver.as_str(), d[0].count), ("gpu.example.com", 8));
        assert_eq!(d[0].extended_resource.as_deref(), Some("nvidia.com/gpu"));
        let none = c.device_requests(&|_: &str| None, &Published([&device].into_iter())).unwrap_err();
        assert_eq!(none.path, "resources[nvidia.com/gpu]");
    }
}
