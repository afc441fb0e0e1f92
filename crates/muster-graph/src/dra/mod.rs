//! Devices as Dynamic Resource Allocation publishes them, and members' requests for them.
//!
//! A driver publishes each device of a node with attributes and capacities (a ResourceSlice). A
//! member asks for a number of one driver's devices that every selector of its request accepts;
//! selectors are CEL, evaluated as Kubernetes evaluates them (`device.driver`,
//! `device.attributes[domain][id]`, `device.capacity[domain][id]`). The graph keeps each published
//! device as a device slot of a resource named after its driver, so that domain aggregates prune
//! by count; which devices match is decided node by node (`Graph::device_units`), and the same
//! greedy choice both counts and takes them (`pick`), so a placement found is one that commits.

mod assign;
mod device;
mod pick;
mod request;
mod selector;

pub use assign::{AssignError, assign};
pub use device::{AttributeValue, PublishedDevice, graph_name};
pub(crate) use pick::{DeviceMatcher, pick};
pub use request::{DeviceRequest, check_devices, drivers_accepting};
pub use selector::{Selector, SelectorError};
