//! What failed to match in this cycle, so that requests sure to fail alike are not matched again:
//! the same request (shape, min, max), or a request like a failed one (the same member, the same
//! constraints and calendar reservations) for at least as many members, for at least as long.
//!
//! Within a cycle only a preemption frees room (it clears these); everything else the cycle does
//! takes room. A request that did not fit does not fit later in the cycle, nor does one that
//! contains it: a placement of more members for longer holds a placement of fewer for less time.
//! With thousands waiting behind a reserved head, most groups that fit the free room now still
//! cannot start, since they would run into the reservation; the longer and larger of them are
//! settled here without a match.

use std::collections::BTreeMap;

use muster_graph::GroupRequest;

use super::state::request_shape;
use super::{Engine, demand};

/// What a group's reason says when a request like its own failed ahead of it in the cycle.
pub(super) const SAME_SHAPE_AHEAD: &str = "a group of the same shape ahead of it did not fit";
/// The same, for a request contained in its own.
pub(super) const SMALLER_AHEAD: &str =
    "a group like it ahead of it, with no more members and no longer run, did not fit";

/// A rigid request of alike members, as containment compares it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Size {
    /// The request with its member count and run time left out.
    kind: u64,
    members: u32,
    /// Seconds; `u64::MAX` for a group matched to run until cancelled.
    run: u64,
}

/// The requests that did not fit in this cycle.
#[derive(Debug, Default)]
pub(super) struct FailedRequests {
    /// Looked up for every group settled behind a blocked head: hashed, not ordered.
    shapes: foldhash::HashSet<(u64, u32, u32)>,
    /// By kind: (members, run) of failed requests, none containing another.
    sizes: BTreeMap<u64, Vec<(u32, u64)>>,
}

impl FailedRequests {
    /// Room was freed: what failed may fit now.
    pub(super) fn clear(&mut self) {
        self.shapes.clear();
        self.sizes.clear();
    }

    /// Why a request (`shape`, min, max; `size` says where containment applies to it) is sure not
    /// to fit: None when it must be matched. Its size is worked out only once something it could
    /// contain has failed: most cycles have nothing to compare it with.
    pub(super) fn ahead(&self, shape: (u64, u32, u32), size: impl FnOnce() -> Option<Size>) -> Option<&'static str> {
        if self.shapes.contains(&shape) {
            return Some(SAME_SHAPE_AHEAD);
        }
        if self.sizes.is_empty() {
            return None;
        }
        let s = size()?;
        let failed = self.sizes.get(&s.kind)?;
        failed.iter().any(|&(members, run)| members <= s.members && run <= s.run).then_some(SMALLER_AHEAD)
    }

    pub(super) fn record(&mut self, shape: (u64, u32, u32), size: Option<Size>) {
        self.shapes.insert(shape);
        if let Some(s) = size {
            let failed = self.sizes.entry(s.kind).or_default();
            // Only the smallest are kept: one containing another says nothing more.
            failed.retain(|&(members, run)| !(s.members <= members && s.run <= run));
            failed.push((s.members, s.run));
        }
    }
}

impl Engine {
    /// `req`'s size where containment applies: a rigid group of alike members, with no topology,
    /// devices, sets, whole sockets or fixed members per node, so that a placement of more members
    /// for longer holds one of fewer for less time and the matcher, which finds any placement of
    /// such members that exists, would find that one. `shape` is its group's request shape (its
    /// kind is kept with the demand of that shape).
    pub(super) fn size_of(&mut self, shape: u64, req: &GroupRequest, declares_run_time: bool) -> Option<Size> {
        if !self.compare_by_size {
            return None;
        }
        let d = demand::work_out(&mut self.demands, self.groups.len(), &self.graph.graph.resources, shape, req, None);
        size(|| d.kind(req), req, declares_run_time)
    }
}

/// [`Engine::size_of`] with the request's kind from `kind`, asked only where containment applies.
/// A free function, so that a caller may hold other parts of the engine while it runs.
pub(super) fn size(kind: impl FnOnce() -> u64, req: &GroupRequest, declares_run_time: bool) -> Option<Size> {
    let alike = req.sets.is_empty() && req.subgroups.is_empty() && req.devices.is_empty();
    let plain = req.topology.is_none() && req.sockets.is_none() && req.members_per_node.is_none();
    if !alike || !plain || req.min_members != req.max_members {
        return None;
    }
    // A group that declares no run time is matched to run until cancelled.
    let run = if declares_run_time { req.duration.unwrap_or(u64::MAX) } else { u64::MAX };
    Some(Size { kind: kind(), members: req.min_members, run })
}

/// A request's kind: the request with its member count and run time left out.
pub(super) fn kind_of(req: &GroupRequest) -> u64 {
    let mut k = req.clone();
    k.duration = None;
    k.set_bounds(1, 1);
    request_shape(&k)
}

impl Engine {
    /// Matches every request that may fit, for tests that what containment settles is what a
    /// match would find.
    #[doc(hidden)]
    pub fn match_every_request(&mut self) {
        self.compare_by_size = false;
    }
}
