//! What one member asks of published devices.

use serde::{Deserialize, Serialize};

use super::PublishedDevice;
use super::selector::Selector;

/// `count` devices of `driver` that every selector accepts (a ResourceClaim's request with
/// `allocationMode: ExactCount`, its DeviceClass's selectors first). Each member of the group
/// gets devices of its own.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct DeviceRequest {
    /// The request's name, unique among a member's (for a pod's claim, `CLAIM/REQUEST`: the
    /// pod's name for the claim and the claim's request, what an allocation result names).
    pub name: String,
    /// The driver whose devices may serve it: a request is served by one driver's devices.
    pub driver: String,
    #[cfg_attr(feature = "schema", schemars(range(min = 1)))]
    pub count: u32,
    /// CEL expressions over `device`; a device matches when every one is true.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub selectors: Vec<String>,
    /// The extended resource name the devices are counted under besides the driver, for
    /// quotas: the one a pod asked them by (`nvidia.com/gpu`, where a DeviceClass serves that
    /// name with devices), or for a claim its DeviceClass's (`spec.extendedResourceName`, else
    /// `deviceclass.resource.kubernetes.io/CLASS`). A quota on either name bounds them.
    #[serde(default, rename = "extendedResource", skip_serializing_if = "Option::is_none")]
    pub extended_resource: Option<String>,
}

impl DeviceRequest {
    /// What it asks, for messages: `8 gpu.example.com devices where device.attributes[...] == "h100"`.
    pub fn describe(&self) -> String {
        describe(self.count, &self.driver, self.selectors.iter().map(String::as_str))
    }
}

/// `COUNT DRIVER device(s)[ where A && B]`.
pub(crate) fn describe<'a>(count: u32, driver: &str, selectors: impl Iterator<Item = &'a str>) -> String {
    let noun = if count == 1 { "device" } else { "devices" };
    let exprs: Vec<&str> = selectors.collect();
    let which = if exprs.is_empty() { String::new() } else { format!(" where {}", exprs.join(" && ")) };
    format!("{count} {driver} {noun}{which}")
}

/// Checks a member's device requests as a user wrote them: each named once, a driver, at least
/// one device, selectors that compile. An error gives the path below the list (`[1].count`) and
/// what to change.
pub fn check_devices(requests: &[DeviceRequest]) -> Result<(), (String, String)> {
    for (i, r) in requests.iter().enumerate() {
        let at = |field: &str| format!("[{i}].{field}");
        if r.name.is_empty() {
            return Err((at("name"), "a device request needs a name".into()));
        }
        if requests[..i].iter().any(|o| o.name == r.name) {
            return Err((at("name"), format!("{:?} names another request too; names must be unique", r.name)));
        }
        if r.driver.is_empty() {
            return Err((at("driver"), "say which driver's devices serve it, such as gpu.example.com".into()));
        }
        if r.count == 0 {
            return Err((at("count"), "ask for at least one device".into()));
        }
        for (k, s) in r.selectors.iter().enumerate() {
            Selector::compile(s).map_err(|e| (at(&format!("selectors[{k}]")), e.message))?;
        }
        if let Some(x) = &r.extended_resource
            && !crate::names::is_qualified_resource(x)
        {
            return Err((
                at("extendedResource"),
                format!("{x:?} is not an extended resource name; name one with its domain, such as nvidia.com/gpu"),
            ));
        }
    }
    Ok(())
}

/// The drivers with a device every one of `selectors` accepts (a DeviceClass's), among
/// `devices`: what a class stands for on this cluster. A selector that fails on a device does
/// not accept it.
pub fn drivers_accepting<'a>(
    selectors: &[String],
    devices: impl IntoIterator<Item = &'a PublishedDevice>,
) -> Result<std::collections::BTreeSet<String>, super::SelectorError> {
    let compiled = selectors.iter().map(|s| Selector::compile(s)).collect::<Result<Vec<_>, _>>()?;
    let mut drivers = std::collections::BTreeSet::new();
    for d in devices {
        if !drivers.contains(&d.driver) && compiled.iter().all(|s| s.accepts(d).unwrap_or(false)) {
            drivers.insert(d.driver.clone());
        }
    }
    Ok(drivers)
}
