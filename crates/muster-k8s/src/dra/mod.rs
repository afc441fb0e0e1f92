//! Dynamic Resource Allocation (`resource.k8s.io/v1`) as the graph takes it: the devices a
//! ResourceSlice publishes for one node, and what a ResourceClaimTemplate asks of each pod made
//! from it, with its DeviceClasses' selectors first; extended resources that devices serve
//! (`extended`).
//!
//! What is not read yet is refused by name rather than half read: slices for several nodes (a
//! node selector, all nodes, per-device nodes), partitionable devices (shared counters),
//! list-valued attributes, and in claims prioritized alternatives (`firstAvailable`), `All`
//! allocation, admin access, capacity requests, device tolerations and constraints. Tainted
//! devices and devices with binding conditions are left out: nothing is placed on them.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, PodSpec};
use k8s_openapi::api::resource::v1::{
    AllocationResult, DeviceAllocationConfiguration, DeviceAllocationResult, DeviceAttribute, DeviceClass,
    DeviceRequestAllocationResult, ResourceClaim, ResourceClaimTemplate, ResourceSlice,
};
mod extended;

pub use extended::{
    EXTENDED_CLAIM, EXTENDED_CLAIM_ANNOTATION, ExtendedAsks, ExtendedClaim, ExtendedRequest, classes_by_resource,
    extended_claim_name, may_be_served_by_devices,
};
use muster_graph::dra::{AttributeValue, DeviceRequest, PublishedDevice, SelectorError, drivers_accepting, graph_name};

/// A field of a DRA object muster does not read, with what to do instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct DraError {
    pub path: String,
    pub message: String,
}

/// The DeviceClass of a name, if it exists.
pub type Classes<'c> = dyn Fn(&str) -> Option<&'c DeviceClass> + 'c;

/// Which drivers' published devices the selectors of DeviceClass `class` accept: what the class
/// stands for on this cluster. Working it out reads every published device (CEL on each device
/// of another driver), so a caller that asks often remembers it per class; [`Published`] works it
/// out on every call.
pub trait ClassDrivers {
    fn drivers(&self, class: &str, selectors: &[String]) -> Result<BTreeSet<String>, SelectorError>;
}

/// Every published device of the cluster, read on each call.
pub struct Published<I>(pub I);

impl<'a, I: Iterator<Item = &'a PublishedDevice> + Clone> ClassDrivers for Published<I> {
    fn drivers(&self, _class: &str, selectors: &[String]) -> Result<BTreeSet<String>, SelectorError> {
        drivers_accepting(selectors, self.0.clone())
    }
}

fn refuse(path: impl Into<String>, message: impl Into<String>) -> DraError {
    DraError { path: path.into(), message: message.into() }
}

/// The node a slice's devices belong to, its driver and pool, and the devices (in the slice's
/// order), for a slice of one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSlice {
    pub node: String,
    pub driver: String,
    pub pool: String,
    /// The pool's generation: only slices of a pool's newest generation count.
    pub generation: i64,
    pub devices: Vec<PublishedDevice>,
}

/// Reads a ResourceSlice of one node's devices.
pub fn node_slice(slice: &ResourceSlice) -> Result<NodeSlice, DraError> {
    let spec = &slice.spec;
    let Some(node) = spec.node_name.clone() else {
        return Err(refuse(
            "spec.nodeName",
            "muster places devices of one node's slices only; devices for several nodes (allNodes, nodeSelector, perDeviceNodeSelection) are not read yet",
        ));
    };
    if spec.shared_counters.as_ref().is_some_and(|c| !c.is_empty()) {
        return Err(refuse("spec.sharedCounters", "partitionable devices are not read yet"));
    }
    let mut devices = Vec::new();
    for (i, d) in spec.devices.iter().flatten().enumerate() {
        let at = |field: &str| format!("spec.devices[{i}].{field}");
        if d.consumes_counters.as_ref().is_some_and(|c| !c.is_empty()) {
            return Err(refuse(at("consumesCounters"), "partitionable devices are not read yet"));
        }
        // A tainted device takes only claims that tolerate its taints, and one with binding
        // conditions waits for them before its pod may bind: muster reads neither yet, so it
        // places nothing on such a device rather than place what Kubernetes would refuse.
        let tainted = d.taints.as_ref().is_some_and(|t| !t.is_empty());
        if tainted || d.binding_conditions.as_ref().is_some_and(|c| !c.is_empty()) {
            continue;
        }
        let mut device = PublishedDevice::new(&spec.driver, &spec.pool.name, &d.name);
        for (name, a) in d.attributes.iter().flatten() {
            device =
                device.with_attribute(name, attribute(a).map_err(|m| refuse(at(&format!("attributes[{name}]")), m))?);
        }
        for (name, c) in d.capacity.iter().flatten() {
            device = device.with_capacity(name, &c.value.0);
        }
        devices.push(device);
    }
    Ok(NodeSlice {
        node,
        driver: spec.driver.clone(),
        pool: spec.pool.name.clone(),
        generation: spec.pool.generation,
        devices,
    })
}

fn attribute(a: &DeviceAttribute) -> Result<AttributeValue, String> {
    match (a.int, a.bool, &a.string, &a.version) {
        (Some(i), None, None, None) => Ok(AttributeValue::Int(i)),
        (None, Some(b), None, None) => Ok(AttributeValue::Bool(b)),
        (None, None, Some(s), None) => Ok(AttributeValue::String(s.clone())),
        (None, None, None, Some(v)) => Ok(AttributeValue::Version(v.clone())),
        _ => Err("only one of int, bool, string and version is read; list values are not read yet".into()),
    }
}

/// The devices an allocated claim holds on its node: the node, and each device's graph name.
/// None for a claim not allocated, or allocated devices not bound to one node (network-attached):
/// such devices are not in the graph.
pub fn claim_devices(claim: &ResourceClaim) -> Option<(String, Vec<(String, String)>)> {
    let allocation = claim.status.as_ref()?.allocation.as_ref()?;
    let terms = &allocation.node_selector.as_ref()?.node_selector_terms;
    let [term] = terms.as_slice() else { return None };
    let fields = term.match_fields.as_deref().unwrap_or_default();
    let node = match fields {
        [f] if f.key == "metadata.name" && f.operator == "In" => match f.values.as_deref() {
            Some([node]) => node.clone(),
            _ => return None,
        },
        _ => return None,
    };
    let results = allocation.devices.as_ref()?.results.as_deref().unwrap_or_default();
    let devices = results.iter().map(|r| (r.driver.clone(), graph_name(&r.driver, &r.pool, &r.device))).collect();
    Some((node, devices))
}

/// Every device of `slices` by node, each pool taken from its newest generation only (a driver
/// republishing a pool bumps the generation; older slices are on their way out).
pub fn devices_by_node<'a>(slices: impl IntoIterator<Item = &'a NodeSlice>) -> BTreeMap<String, Vec<PublishedDevice>> {
    let slices: Vec<&NodeSlice> = slices.into_iter().collect();
    let mut newest: BTreeMap<(&str, &str), i64> = BTreeMap::new();
    for s in &slices {
        let g = newest.entry((&s.driver, &s.pool)).or_insert(s.generation);
        *g = (*g).max(s.generation);
    }
    let mut out: BTreeMap<String, Vec<PublishedDevice>> = BTreeMap::new();
    for s in slices.iter().filter(|s| newest[&(s.driver.as_str(), s.pool.as_str())] == s.generation) {
        out.entry(s.node.clone()).or_default().extend(s.devices.iter().cloned());
    }
    out
}

/// What each pod made from `template` asks: one device request per request of the claim, its
/// class's selectors before its own, served by the one driver whose published devices the class
/// accepts (`drivers`).
pub fn template_requests(
    template: &ResourceClaimTemplate,
    classes: &Classes,
    drivers: &dyn ClassDrivers,
) -> Result<Vec<DeviceRequest>, DraError> {
    let Some(devices) = template.spec.as_ref().and_then(|s| s.spec.as_ref()).and_then(|s| s.devices.as_ref()) else {
        return Ok(Vec::new());
    };
    if devices.constraints.as_ref().is_some_and(|c| !c.is_empty()) {
        return Err(refuse("spec.spec.devices.constraints", "constraints between requests are not read yet"));
    }
    let mut out = Vec::new();
    for (i, r) in devices.requests.iter().flatten().enumerate() {
        let at = |field: &str| format!("spec.spec.devices.requests[{i}].{field}");
        if r.first_available.is_some() {
            return Err(refuse(
                at("firstAvailable"),
                "prioritized alternatives are not read yet; ask for one kind of device with exactly",
            ));
        }
        let Some(exact) = &r.exactly else {
            return Err(refuse(at("exactly"), "a request needs exactly"));
        };
        let unread = [
            ("adminAccess", exact.admin_access == Some(true)),
            ("capacity", exact.capacity.is_some()),
            ("tolerations", exact.tolerations.as_ref().is_some_and(|t| !t.is_empty())),
            ("derivedAttributes", exact.derived_attributes.as_ref().is_some_and(|t| !t.is_empty())),
        ];
        if let Some((field, _)) = unread.iter().find(|(_, set)| *set) {
            return Err(refuse(
                at(&format!("exactly.{field}")),
                "not read yet; drop it to have muster place the claim",
            ));
        }
        if exact.allocation_mode.as_deref().is_some_and(|m| m != "ExactCount") {
            return Err(refuse(
                at("exactly.allocationMode"),
                "only ExactCount is read yet; ask for a count of devices",
            ));
        }
        let own = cel_selectors(exact.selectors.iter().flatten()).map_err(|m| refuse(at("exactly.selectors"), m))?;
        let class = class_devices(&exact.device_class_name, classes, drivers, &at("exactly.deviceClassName"))?;
        let count = exact.count.unwrap_or(1);
        let count = u32::try_from(count)
            .ok()
            .filter(|&c| c >= 1)
            .ok_or_else(|| refuse(at("exactly.count"), "ask for at least one device"))?;
        out.push(DeviceRequest {
            name: r.name.clone(),
            driver: class.driver,
            count,
            selectors: [class.selectors, own].concat(),
            extended_resource: Some(class.resource),
        });
    }
    Ok(out)
}

/// What a DeviceClass stands for on this cluster.
pub(crate) struct ClassDevices {
    /// The one driver whose published devices it accepts.
    pub driver: String,
    /// Its CEL selectors.
    pub selectors: Vec<String>,
    /// The extended resource it serves: `spec.extendedResourceName`, else
    /// `deviceclass.resource.kubernetes.io/CLASS` (quotas on it count its devices).
    pub resource: String,
}

/// What class `name` stands for on this cluster (`drivers`); `at` is the field that names the
/// class.
pub(crate) fn class_devices(
    name: &str,
    classes: &Classes,
    drivers: &dyn ClassDrivers,
    at: &str,
) -> Result<ClassDevices, DraError> {
    let Some(class) = classes(name) else {
        return Err(refuse(at, format!("no DeviceClass {name:?}; create it, or name one that exists")));
    };
    let selectors = cel_selectors(class.spec.iter().flat_map(|s| s.selectors.iter().flatten()))
        .map_err(|m| refuse(format!("DeviceClass {name}: spec.selectors"), m))?;
    let drivers = (drivers.drivers(name, &selectors))
        .map_err(|e| refuse(format!("DeviceClass {name}: spec.selectors"), e.to_string()))?;
    let mut drivers = drivers.into_iter();
    let (Some(driver), None) = (drivers.next(), drivers.next()) else {
        return Err(refuse(
            at,
            format!(
                "DeviceClass {name:?} must accept the devices of exactly one driver on this cluster; add device.driver == \"...\" to its selectors"
            ),
        ));
    };
    let explicit = class.spec.as_ref().and_then(|s| s.extended_resource_name.clone());
    let resource = explicit.unwrap_or_else(|| extended::implicit_name(name));
    Ok(ClassDevices { driver, selectors, resource })
}

/// A claim a pod makes from a template: the pod's name for it (`spec.resourceClaims[].name`) and
/// the ResourceClaimTemplate's. The ResourceClaim controller makes one claim per pod from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodClaim {
    pub name: String,
    pub template: String,
}

/// The claims a pod of `spec` makes from templates. A claim by name (`resourceClaimName`, one
/// claim shared by several pods) is refused, naming its field under `field`.
pub fn pod_claims(spec: &PodSpec, field: &str) -> Result<Vec<PodClaim>, String> {
    let mut out = Vec::new();
    for (i, c) in spec.resource_claims.iter().flatten().enumerate() {
        match (&c.resource_claim_template_name, &c.resource_claim_name) {
            (Some(template), None) => out.push(PodClaim { name: c.name.clone(), template: template.clone() }),
            _ => {
                return Err(format!(
                    "{field}.resourceClaims[{i}]: muster places claims made from a template for each pod \
                     (resourceClaimTemplateName), not claims shared by name (resourceClaimName) yet; name a \
                     ResourceClaimTemplate instead"
                ));
            }
        }
    }
    Ok(out)
}

/// What one pod asks of devices beyond counted resources: the claims it makes from templates,
/// and its extended resources that devices may serve.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PodDevices {
    pub claims: Vec<PodClaim>,
    pub extended: ExtendedAsks,
}

impl PodDevices {
    /// What a pod of `spec` (at `field`) asks; a claim muster does not place is refused
    /// ([`pod_claims`]).
    pub fn of(spec: &PodSpec, field: &str) -> Result<Self, String> {
        Ok(Self { claims: pod_claims(spec, field)?, extended: ExtendedAsks::of(spec) })
    }

    pub fn is_empty(&self) -> bool {
        self.claims.is_empty() && self.extended.is_empty()
    }
}

/// What one pod asks through `claims`: each template's requests, named `CLAIM/REQUEST` (the
/// pod's name for the claim, then the request's), from the templates in its namespace
/// (`template`), the DeviceClasses and what each stands for on this cluster (`drivers`).
pub fn claim_requests<'t>(
    claims: &[PodClaim],
    template: impl Fn(&str) -> Option<&'t ResourceClaimTemplate>,
    classes: &Classes,
    drivers: &dyn ClassDrivers,
) -> Result<Vec<DeviceRequest>, DraError> {
    let mut out = Vec::new();
    for c in claims {
        let Some(t) = template(&c.template) else {
            return Err(refuse(
                format!("resourceClaims[{}].resourceClaimTemplateName", c.name),
                format!("no ResourceClaimTemplate {:?} in the namespace; create it", c.template),
            ));
        };
        let within = |e: DraError| refuse(format!("ResourceClaimTemplate {}: {}", c.template, e.path), e.message);
        for r in template_requests(t, classes, drivers).map_err(within)? {
            out.push(DeviceRequest { name: format!("{}/{}", c.name, r.name), ..r });
        }
    }
    Ok(out)
}

/// The allocation muster writes into `claim`, the pod's claim named `pod_claim`: `devices` (each
/// with the request it serves, named `CLAIM/REQUEST` as [`claim_requests`] names it) on `node`,
/// with the configuration of each request's DeviceClass and then the claim's own, as
/// kube-scheduler's allocator writes them. Errors when the claim asks other requests than the
/// devices serve (its template changed since the group was placed).
pub fn allocation(
    claim: &ResourceClaim,
    pod_claim: &str,
    classes: &Classes,
    node: &str,
    devices: &[(String, &PublishedDevice)],
) -> Result<AllocationResult, DraError> {
    let devices_spec = claim.spec.as_ref().and_then(|s| s.devices.as_ref());
    let requests = devices_spec.and_then(|d| d.requests.clone()).unwrap_or_default();
    let prefix = format!("{pod_claim}/");
    let mine: Vec<(&str, &PublishedDevice)> =
        devices.iter().filter_map(|(r, d)| Some((r.strip_prefix(&prefix)?, *d))).collect();
    let asked: std::collections::BTreeSet<&str> = requests.iter().map(|r| r.name.as_str()).collect();
    let served: std::collections::BTreeSet<&str> = mine.iter().map(|(r, _)| *r).collect();
    if asked != served {
        return Err(refuse(
            "spec.devices.requests",
            format!(
                "the claim asks {asked:?}, the devices placed for the pod serve {served:?}: its template changed \
                 after the group was placed; delete the pod to have it made again"
            ),
        ));
    }
    let mut config = Vec::new();
    for r in &requests {
        let class = r.exactly.as_ref().and_then(|e| classes(&e.device_class_name));
        for c in class.and_then(|c| c.spec.as_ref()?.config.as_ref()).into_iter().flatten() {
            config.push(DeviceAllocationConfiguration {
                source: "FromClass".into(),
                requests: Some(vec![r.name.clone()]),
                opaque: c.opaque.clone(),
            });
        }
    }
    for c in devices_spec.and_then(|d| d.config.as_ref()).into_iter().flatten() {
        config.push(DeviceAllocationConfiguration {
            source: "FromClaim".into(),
            requests: c.requests.clone(),
            opaque: c.opaque.clone(),
        });
    }
    let results = mine
        .iter()
        .map(|(request, d)| DeviceRequestAllocationResult {
            request: request.to_string(),
            driver: d.driver.clone(),
            pool: d.pool.clone(),
            device: d.name.clone(),
            ..Default::default()
        })
        .collect();
    Ok(AllocationResult {
        devices: Some(DeviceAllocationResult {
            results: Some(results),
            config: Some(config).filter(|c| !c.is_empty()),
        }),
        node_selector: Some(NodeSelector {
            node_selector_terms: vec![NodeSelectorTerm {
                match_fields: Some(vec![NodeSelectorRequirement {
                    key: "metadata.name".into(),
                    operator: "In".into(),
                    values: Some(vec![node.to_string()]),
                }]),
                match_expressions: None,
            }],
        }),
        allocation_timestamp: None,
    })
}

fn cel_selectors<'a>(
    selectors: impl Iterator<Item = &'a k8s_openapi::api::resource::v1::DeviceSelector>,
) -> Result<Vec<String>, String> {
    selectors
        .map(|s| s.cel.as_ref().map(|c| c.expression.clone()).ok_or_else(|| "a selector needs cel".to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A slice of GPUs of the given models on `node`, as a driver publishes it.
    fn slice(node: &str, generation: i64, models: &[&str]) -> ResourceSlice {
        crate::testing::resource_slice(&format!("{node}-gpu.example.com-x7k2p"), node, generation, models)
    }

    #[test]
    fn a_node_slice_gives_its_devices_and_the_newest_generation_wins() {
        let s = node_slice(&slice("n1", 1, &["h100", "h100"])).unwrap();
        assert_eq!((s.node.as_str(), s.pool.as_str(), s.devices.len()), ("n1", "n1", 2));
        let d = &s.devices[1];
        assert_eq!(d.attributes["index"], AttributeValue::Int(1));
        assert_eq!(d.attributes["gpu.example.com/mig"], AttributeValue::Bool(false));
        assert_eq!(d.attributes["driverVersion"], AttributeValue::Version("550.54.15".into()));
        assert_eq!(d.capacity["memory"], "80Gi");
        let old = node_slice(&slice("n1", 1, &["a100"])).unwrap();
        let new = node_slice(&slice("n1", 2, &["h100", "h100", "h100"])).unwrap();
        let other = node_slice(&slice("n2", 1, &["a100"])).unwrap();
        let by_node = devices_by_node([&old, &new, &other]);
        assert_eq!(by_node["n1"].len(), 3, "generation 1 of pool n1 is stale");
        assert_eq!(by_node["n2"].len(), 1);
    }

    #[test]
    fn an_allocated_claim_names_its_node_and_devices() {
        // As kube-scheduler writes a claim's status for a pod it placed.
        let claim: ResourceClaim = serde_json::from_value(serde_json::json!({
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "worker-0-gpu-x8k2d", "namespace": "team-a", "uid": "c1"},
            "spec": {"devices": {"requests": [{"name": "gpus", "exactly": {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 2}}]}},
            "status": {
                "allocation": {
                    "devices": {"results": [
                        {"request": "gpus", "driver": "gpu.example.com", "pool": "n1", "device": "gpu-0"},
                        {"request": "gpus", "driver": "gpu.example.com", "pool": "n1", "device": "gpu-3"}
                    ]},
                    "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]},
                    "allocationTimestamp": "2026-12-02T10:00:00Z"
                },
                "reservedFor": [{"resource": "pods", "name": "worker-0", "uid": "p1"}]
            }
        }))
        .unwrap();
        let (node, devices) = claim_devices(&claim).unwrap();
        assert_eq!(node, "n1");
        assert_eq!(devices[1], ("gpu.example.com".to_string(), "gpu.example.com/n1/gpu-3".to_string()));
        let mut pending = claim.clone();
        pending.status = None;
        assert_eq!(claim_devices(&pending), None);
    }

    #[test]
    fn tainted_devices_and_devices_awaiting_binding_conditions_are_left_out() {
        let mut s = slice("n1", 1, &["h100", "h100", "h100"]);
        let devices = s.spec.devices.as_mut().unwrap();
        devices[0].taints = Some(vec![
            serde_json::from_value(
                serde_json::json!({"key": "gpu.example.com/unhealthy", "value": "ecc", "effect": "NoSchedule"}),
            )
            .unwrap(),
        ]);
        devices[2].binding_conditions = Some(vec!["FabricAttached".into()]);
        devices[2].binding_failure_conditions = Some(vec!["FabricFailed".into()]);
        let read = node_slice(&s).unwrap();
        let names: Vec<&str> = read.devices.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["gpu-1"]);
    }

    #[test]
    fn slices_muster_cannot_place_yet_are_refused_by_field() {
        let mut s = slice("n1", 1, &["h100"]);
        s.spec.node_name = None;
        s.spec.all_nodes = Some(true);
        assert_eq!(node_slice(&s).unwrap_err().path, "spec.nodeName");
        let mut s = slice("n1", 1, &["h100"]);
        let attrs = s.spec.devices.as_mut().unwrap()[0].attributes.as_mut().unwrap();
        attrs.insert("ids".into(), DeviceAttribute { ints: Some(vec![1, 2]), ..Default::default() });
        assert_eq!(node_slice(&s).unwrap_err().path, "spec.devices[0].attributes[ids]");
    }

    fn class(name: &str, driver: &str) -> DeviceClass {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": format!("device.driver == \"{driver}\"")}}]}
        }))
        .unwrap()
    }

    fn template(request: serde_json::Value) -> ResourceClaimTemplate {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "eight-h100", "namespace": "team-a"},
            "spec": {"spec": {"devices": {"requests": [request]}}}
        }))
        .unwrap()
    }

    #[test]
    fn a_claim_template_asks_its_count_with_the_class_selectors_first() {
        let published = node_slice(&slice("n1", 1, &["h100"])).unwrap().devices;
        let classes = BTreeMap::from([("gpu".to_string(), class("gpu", "gpu.example.com"))]);
        let t = template(serde_json::json!({
            "name": "gpus",
            "exactly": {
                "deviceClassName": "gpu",
                "allocationMode": "ExactCount",
                "count": 8,
                "selectors": [{"cel": {"expression": "device.attributes[\"gpu.example.com\"].model == \"h100\""}}]
            }
        }));
        let requests = template_requests(&t, &|n: &str| classes.get(n), &Published(published.iter())).unwrap();
        assert_eq!(
            requests,
            vec![DeviceRequest {
                name: "gpus".into(),
                driver: "gpu.example.com".into(),
                count: 8,
                selectors: vec![
                    "device.driver == \"gpu.example.com\"".into(),
                    "device.attributes[\"gpu.example.com\"].model == \"h100\"".into()
                ],
                extended_resource: Some("deviceclass.resource.kubernetes.io/gpu".into()),
            }]
        );
        // The apiserver defaults allocationMode and count; a template read before defaulting
        // (a test's) asks for one device.
        let t = template(serde_json::json!({"name": "one", "exactly": {"deviceClassName": "gpu"}}));
        assert_eq!(template_requests(&t, &|n: &str| classes.get(n), &Published(published.iter())).unwrap()[0].count, 1);
        // A class serving an extended resource by name: quotas count its devices under that name.
        let mut named = class("gpu", "gpu.example.com");
        named.spec.as_mut().unwrap().extended_resource_name = Some("nvidia.com/gpu".into());
        let requests = template_requests(&t, &|_: &str| Some(&named), &Published(published.iter())).unwrap();
        assert_eq!(requests[0].extended_resource.as_deref(), Some("nvidia.com/gpu"));
    }

    #[test]
    fn claims_muster_cannot_place_yet_are_refused_by_field() {
        let published = node_slice(&slice("n1", 1, &["h100"])).unwrap().devices;
        let classes = BTreeMap::from([
            ("gpu".to_string(), class("gpu", "gpu.example.com")),
            ("nic".to_string(), class("nic", "nic.example.com")),
        ]);
        let refused = |request: serde_json::Value| {
            template_requests(&template(request), &|n: &str| classes.get(n), &Published(published.iter())).unwrap_err()
        };
        let e =
            refused(serde_json::json!({"name": "g", "exactly": {"deviceClassName": "gpu", "allocationMode": "All"}}));
        assert_eq!(e.path, "spec.spec.devices.requests[0].exactly.allocationMode");
        let e = refused(serde_json::json!({"name": "g", "exactly": {"deviceClassName": "gpu", "adminAccess": true}}));
        assert_eq!(e.path, "spec.spec.devices.requests[0].exactly.adminAccess");
        let e = refused(serde_json::json!({"name": "g", "firstAvailable": [{"name": "a", "deviceClassName": "gpu"}]}));
        assert_eq!(e.path, "spec.spec.devices.requests[0].firstAvailable");
        let e = refused(serde_json::json!({"name": "g", "exactly": {"deviceClassName": "tpu"}}));
        assert!(e.message.contains("no DeviceClass \"tpu\""), "{e}");
        // No published device is a NIC: the class stands for no driver here.
        let e = refused(serde_json::json!({"name": "g", "exactly": {"deviceClassName": "nic"}}));
        assert!(e.message.contains("exactly one driver"), "{e}");
    }
}

#[cfg(test)]
mod claim_tests {
    use super::*;
    use serde_json::json;

    fn gpu_class() -> DeviceClass {
        serde_json::from_value(json!({
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": "gpu"},
            "spec": {
                "selectors": [{"cel": {"expression": "device.driver == \"gpu.example.com\""}}],
                "config": [{"opaque": {"driver": "gpu.example.com", "parameters": {"sharing": "none"}}}]
            }
        }))
        .unwrap()
    }

    fn gpus(n: usize) -> Vec<PublishedDevice> {
        (0..n).map(|i| PublishedDevice::new("gpu.example.com", "node-1", &format!("gpu-{i}"))).collect()
    }

    /// A claim the ResourceClaim controller made for pod `worker-0`, as the apiserver returns it
    /// (allocationMode and count defaulted).
    fn claim() -> ResourceClaim {
        serde_json::from_value(json!({
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "worker-0-gpus-x7k2p", "namespace": "team-a", "uid": "c-1",
                         "annotations": {"resource.kubernetes.io/pod-claim-name": "gpus"}},
            "spec": {"devices": {
                "requests": [{"name": "all", "exactly": {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 2}}],
                "config": [{"requests": ["all"], "opaque": {"driver": "gpu.example.com", "parameters": {"mig": false}}}]
            }}
        }))
        .unwrap()
    }

    #[test]
    fn a_pods_claims_are_named_claim_slash_request_and_a_missing_template_is_named() {
        let t: ResourceClaimTemplate = serde_json::from_value(json!({
            "metadata": {"name": "two-gpus", "namespace": "team-a"},
            "spec": {"spec": {"devices": {"requests": [{"name": "all", "exactly": {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 2}}]}}}
        }))
        .unwrap();
        let class = gpu_class();
        let classes = |n: &str| (n == "gpu").then_some(&class);
        let published = gpus(1);
        let claims = [PodClaim { name: "gpus".into(), template: "two-gpus".into() }];
        let requests =
            claim_requests(&claims, |n| (n == "two-gpus").then_some(&t), &classes, &Published(published.iter()))
                .unwrap();
        assert_eq!(requests.len(), 1);
        assert_eq!((requests[0].name.as_str(), requests[0].count), ("gpus/all", 2));
        let missing = [PodClaim { name: "nic".into(), template: "rdma".into() }];
        let e = claim_requests(&missing, |_| None, &classes, &Published(published.iter())).unwrap_err();
        assert_eq!(e.path, "resourceClaims[nic].resourceClaimTemplateName");
        assert!(e.message.contains("\"rdma\""), "{e}");
    }

    #[test]
    fn an_allocation_names_each_device_its_request_and_node_with_class_then_claim_config() {
        let class = gpu_class();
        let classes = |n: &str| (n == "gpu").then_some(&class);
        let devices = gpus(3);
        let mine = [("gpus/all".to_string(), &devices[0]), ("gpus/all".to_string(), &devices[2])];
        let a = allocation(&claim(), "gpus", &classes, "node-1", &mine).unwrap();
        let got = serde_json::to_value(&a).unwrap();
        assert_eq!(
            got,
            json!({
                "devices": {
                    "results": [
                        {"request": "all", "driver": "gpu.example.com", "pool": "node-1", "device": "gpu-0"},
                        {"request": "all", "driver": "gpu.example.com", "pool": "node-1", "device": "gpu-2"}
                    ],
                    "config": [
                        {"source": "FromClass", "requests": ["all"], "opaque": {"driver": "gpu.example.com", "parameters": {"sharing": "none"}}},
                        {"source": "FromClaim", "requests": ["all"], "opaque": {"driver": "gpu.example.com", "parameters": {"mig": false}}}
                    ]
                },
                "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}]}
            })
        );
        // What claim_devices reads back is what was written.
        let mut allocated = claim();
        allocated.status =
            Some(k8s_openapi::api::resource::v1::ResourceClaimStatus { allocation: Some(a), ..Default::default() });
        let (node, held) = claim_devices(&allocated).unwrap();
        assert_eq!(node, "node-1");
        assert_eq!(
            held.iter().map(|(_, n)| n.as_str()).collect::<Vec<_>>(),
            ["gpu.example.com/node-1/gpu-0", "gpu.example.com/node-1/gpu-2"]
        );
        // Devices placed for another request than the claim asks: refused, nothing written.
        let other = [("gpus/first".to_string(), &devices[0])];
        assert_eq!(allocation(&claim(), "gpus", &classes, "node-1", &other).unwrap_err().path, "spec.devices.requests");
    }
}
