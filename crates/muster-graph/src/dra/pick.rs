//! Which of a node's devices serve a member's requests: the one greedy choice that both counts
//! how many members a node can take and takes their devices.

use std::cell::{OnceCell, RefCell};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::sync::Arc;

use cel::Context;

use super::PublishedDevice;
use super::request::{DeviceRequest, describe};
use super::selector::{Selector, SelectorError, root_context};
use crate::graph::{AllocId, DeviceSlot, Graph, NodeId};
use crate::matcher::{Demand, Window};
use crate::resources::ResourceId;

/// A member's device requests compiled against one graph, with what has been decided of its
/// devices so far (a device's match never changes while its published form does not).
pub(crate) struct DeviceMatcher {
    requests: Vec<Compiled>,
    root: OnceCell<Context<'static, 'static>>,
    /// By (request, selector, a hash of the device's reads): devices decided, each with its
    /// result; a device with the same reads as one of them matches alike.
    by_reads: RefCell<ReadMemo>,
    /// The first evaluation error: a device it occurs on does not match, and a group that then
    /// does not fit is told why.
    first_error: RefCell<Option<String>>,
}

/// A fast hash for the memo of device reads, which is looked up once per device a search visits
/// and whose keys no one outside chooses (SipHash's resistance to crafted keys buys nothing
/// here, and costs most of a lookup). Multiply-rotate, as rustc's FxHasher.
#[derive(Default)]
struct QuickHasher(u64);

impl Hasher for QuickHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }

    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// A device whose match has been decided, and the result.
type Decided = (Arc<PublishedDevice>, bool);

/// Decided devices by (request, selector, hash of their reads).
type ReadMemo = HashMap<(usize, usize, u64), Vec<Decided>, BuildHasherDefault<QuickHasher>>;

struct Compiled {
    resource: ResourceId,
    count: u32,
    selectors: Vec<Selector>,
}

impl std::fmt::Debug for DeviceMatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let requests: Vec<_> = self.requests.iter().map(|r| (r.resource, r.count, r.selectors.len())).collect();
        f.debug_struct("DeviceMatcher").field("requests", &requests).finish_non_exhaustive()
    }
}

/// Why a member's device requests cannot be resolved against a graph.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum DeviceRequestError {
    #[error("device request {request:?}: no node in this cluster publishes devices of driver {driver}")]
    UnknownDriver { request: String, driver: String },
    #[error("device request {request:?}: {source}")]
    Selector { request: String, source: SelectorError },
}

impl DeviceMatcher {
    pub(crate) fn new(graph: &Graph, requests: &[DeviceRequest]) -> Result<Self, DeviceRequestError> {
        let compiled = requests
            .iter()
            .map(|r| {
                let resource = graph.resources.get(&r.driver).ok_or_else(|| DeviceRequestError::UnknownDriver {
                    request: r.name.clone(),
                    driver: r.driver.clone(),
                })?;
                let selectors = (r.selectors.iter().map(|s| Selector::compile(s)))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|source| DeviceRequestError::Selector { request: r.name.clone(), source })?;
                Ok(Compiled { resource, count: r.count, selectors })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            requests: compiled,
            root: OnceCell::new(),
            by_reads: RefCell::default(),
            first_error: RefCell::default(),
        })
    }

    /// Devices of each request's driver, by resource index, one member needs.
    pub(crate) fn per_member(&self) -> impl Iterator<Item = (ResourceId, u64)> + '_ {
        self.requests.iter().map(|r| (r.resource, u64::from(r.count)))
    }

    /// What one member asks, for messages: `2 gpu.example.com devices where ...`.
    pub(crate) fn describe(&self, graph: &Graph) -> String {
        let one = |r: &Compiled| {
            let driver = &graph.resources.def(r.resource).name;
            describe(r.count, driver, r.selectors.iter().map(|s| s.expression.as_str()))
        };
        self.requests.iter().map(one).collect::<Vec<_>>().join(", and ")
    }

    /// The first selector error met, if any.
    pub(crate) fn first_error(&self) -> Option<String> {
        self.first_error.borrow().clone()
    }

    /// Whether `slot` can serve request `r`.
    fn serves(&self, r: usize, slot: &DeviceSlot) -> bool {
        let req = &self.requests[r];
        if slot.resource != req.resource {
            return false;
        }
        let Some(published) = &slot.published else {
            // A device counted but not published (a device plugin's): no selector can see it.
            return req.selectors.is_empty();
        };
        let device = &**published;
        req.selectors.iter().enumerate().all(|(s, sel)| {
            let Some(reads) = sel.reads(device) else { return self.evaluate(sel, device) };
            let mut h = QuickHasher::default();
            reads.for_each(|x| x.hash(&mut h));
            let key = (r, s, h.finish());
            let same = |other: &PublishedDevice| sel.reads(device).zip(sel.reads(other)).is_some_and(|(a, b)| a.eq(b));
            if let Some(&(_, m)) = self.by_reads.borrow().get(&key).and_then(|seen| seen.iter().find(|(d, _)| same(d)))
            {
                return m;
            }
            let m = self.evaluate(sel, device);
            self.by_reads.borrow_mut().entry(key).or_default().push((Arc::clone(published), m));
            m
        })
    }

    fn evaluate(&self, sel: &Selector, device: &PublishedDevice) -> bool {
        match sel.matches(self.root.get_or_init(root_context), device) {
            Ok(m) => m,
            Err(e) => {
                self.first_error.borrow_mut().get_or_insert(e);
                false
            }
        }
    }
}

/// Picks devices for up to `members` members among `devices` (a node's) that `available`
/// allows: for each member in turn, each request in turn takes the first devices that serve it
/// and no one took yet. Stops at the first member it cannot serve whole; returns, per member
/// served, the indexes into `devices` it took.
pub(crate) fn pick(
    devices: &[DeviceSlot],
    available: impl Fn(&DeviceSlot) -> bool,
    matcher: &DeviceMatcher,
    members: u32,
) -> Vec<Vec<usize>> {
    let mut taken = vec![false; devices.len()];
    let mut out = Vec::new();
    for _ in 0..members {
        let mut mine = Vec::new();
        for (r, req) in matcher.requests.iter().enumerate() {
            let mut need = req.count;
            for (i, slot) in devices.iter().enumerate() {
                if need == 0 {
                    break;
                }
                if !taken[i] && available(slot) && matcher.serves(r, slot) {
                    taken[i] = true;
                    mine.push(i);
                    need -= 1;
                }
            }
            if need > 0 {
                return out;
            }
        }
        out.push(mine);
    }
    out
}

impl Graph {
    /// Of the `units` node `n` can take by its counts, how many its published devices can serve
    /// in `window`, by the choice `pick` makes: now, devices no running allocation holds; in a
    /// future window, also those whose holder is expected to end by its start; on the empty
    /// cluster, all. With none, also the time before which no later window start finds more
    /// (the earliest expected end of what runs on the node).
    pub(crate) fn device_units(
        &self,
        n: NodeId,
        d: &Demand,
        m: &DeviceMatcher,
        window: Window,
        units: u32,
    ) -> (u32, i64) {
        let node = self.node(n);
        let holder_ends_by = |h: AllocId, t: i64| node.spans.iter().any(|s| s.alloc == h && !s.reserved && s.end <= t);
        let available = |s: &DeviceSlot| match (window, s.holder) {
            (Window::Empty, _) | (_, None) => true,
            (Window::Now { .. }, Some(_)) => false,
            (Window::Future { start, .. }, Some(h)) => holder_ends_by(h, start),
        };
        let members = units.saturating_mul(d.unit_size);
        let fit = pick(&node.devices, available, m, members).len() as u32 / d.unit_size;
        if fit > 0 {
            return (fit.min(units), i64::MAX);
        }
        let until = match window {
            Window::Future { start, .. } => {
                node.spans.iter().filter(|s| !s.reserved && s.end > start).map(|s| s.end).min().unwrap_or(i64::MAX)
            }
            Window::Now { .. } | Window::Empty => i64::MAX,
        };
        (0, until)
    }
}
