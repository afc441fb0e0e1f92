//! Which of a member's devices serves which of its requests: what a claim's allocation result
//! names. The matcher takes a member's devices for all its requests at once; telling them apart
//! again is a matching of devices to request slots, done here by augmenting paths, so that any
//! set of devices that can serve the requests is split right (greedy could fail on one that
//! serves two requests).

use super::PublishedDevice;
use super::request::DeviceRequest;
use super::selector::Selector;

/// Why a member's devices cannot be split among its requests.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AssignError {
    #[error("device request {request:?}: {message}")]
    Selector { request: String, message: String },
    #[error(
        "{devices} devices cannot serve requests for {wanted}: each device must serve one request its driver and selectors accept"
    )]
    NoMatching { devices: usize, wanted: u32 },
}

/// For each of `devices`, the index of the request in `requests` it serves; every request gets
/// exactly its count. Errors when the devices are not exactly what the requests need.
pub fn assign(requests: &[DeviceRequest], devices: &[&PublishedDevice]) -> Result<Vec<usize>, AssignError> {
    let wanted: u32 = requests.iter().map(|r| r.count).sum();
    let no_matching = || AssignError::NoMatching { devices: devices.len(), wanted };
    if devices.len() != wanted as usize {
        return Err(no_matching());
    }
    // Request slots: request r repeated count times.
    let slots: Vec<usize> =
        (requests.iter().enumerate()).flat_map(|(r, req)| std::iter::repeat_n(r, req.count as usize)).collect();
    let mut serves = vec![vec![false; requests.len()]; devices.len()];
    for (r, req) in requests.iter().enumerate() {
        let selectors = (req.selectors.iter().map(|s| Selector::compile(s)))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| AssignError::Selector { request: req.name.clone(), message: e.message })?;
        for (d, device) in devices.iter().enumerate() {
            serves[d][r] = device.driver == req.driver && selectors.iter().all(|s| s.accepts(device).unwrap_or(false));
        }
    }
    // slot_of[s]: the device in slot s.
    let mut slot_of: Vec<Option<usize>> = vec![None; slots.len()];
    for d in 0..devices.len() {
        let mut seen = vec![false; slots.len()];
        if !augment(d, &slots, &serves, &mut seen, &mut slot_of) {
            return Err(no_matching());
        }
    }
    let mut out = vec![0; devices.len()];
    for (s, d) in slot_of.iter().enumerate() {
        out[d.expect("every device has a slot, and there are as many slots")] = slots[s];
    }
    Ok(out)
}

/// Kuhn's step: finds device `d` a slot, moving devices already placed along an alternating path.
fn augment(d: usize, slots: &[usize], serves: &[Vec<bool>], seen: &mut [bool], slot_of: &mut [Option<usize>]) -> bool {
    for s in 0..slots.len() {
        if seen[s] || !serves[d][slots[s]] {
            continue;
        }
        seen[s] = true;
        if slot_of[s].is_none_or(|other| augment(other, slots, serves, seen, slot_of)) {
            slot_of[s] = Some(d);
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dra::AttributeValue;

    fn gpu(name: &str, model: &str) -> PublishedDevice {
        PublishedDevice::new("gpu.example.com", "node-1", name)
            .with_attribute("model", AttributeValue::String(model.into()))
    }

    fn request(name: &str, count: u32, selector: Option<&str>) -> DeviceRequest {
        DeviceRequest {
            name: name.into(),
            driver: "gpu.example.com".into(),
            count,
            selectors: selector.into_iter().map(String::from).collect(),
            extended_resource: None,
        }
    }

    #[test]
    fn a_device_either_request_accepts_is_moved_to_make_room() {
        // Greedy in order would give gpu-0 (an a100) to "any" and leave "a100" without one.
        let devices = [gpu("gpu-0", "a100"), gpu("gpu-1", "h100")];
        let refs: Vec<&PublishedDevice> = devices.iter().collect();
        let requests = [
            request("c/any", 1, None),
            request("c/a100", 1, Some("device.attributes[\"gpu.example.com\"].model == \"a100\"")),
        ];
        assert_eq!(assign(&requests, &refs).unwrap(), vec![1, 0]);
    }

    #[test]
    fn devices_that_do_not_serve_the_requests_are_refused() {
        let devices = [gpu("gpu-0", "h100"), gpu("gpu-1", "h100")];
        let refs: Vec<&PublishedDevice> = devices.iter().collect();
        let a100 = request("c/a100", 2, Some("device.attributes[\"gpu.example.com\"].model == \"a100\""));
        assert!(matches!(assign(&[a100], &refs), Err(AssignError::NoMatching { devices: 2, wanted: 2 })));
        assert!(
            matches!(assign(&[request("c/one", 1, None)], &refs), Err(AssignError::NoMatching { .. })),
            "one too many"
        );
    }
}
