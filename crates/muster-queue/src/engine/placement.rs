//! Allocations in the graph and in the quota, kept in step: admitting a group onto an allocation,
//! releasing it, and taking a placed group out and putting it back exactly (for preemption's
//! what-ifs).

use muster_graph::{AllocId, GroupRequest, ImportedMember};

use super::Engine;
use crate::group::{AllocationRecord, GroupKey, GroupState, MemberPlacement, Reason, Transition};
use crate::quota;

/// What preemption keeps to put a group back exactly.
#[derive(Debug, Clone)]
pub(super) struct SavedAlloc {
    id: AllocId,
    request: GroupRequest,
    members: Vec<ImportedMember>,
    window: (i64, i64),
}

impl SavedAlloc {
    pub(super) fn members(&self) -> &[ImportedMember] {
        &self.members
    }
}

impl Engine {
    /// The record (node and device names) of graph allocation `id`, under the engine's `alloc_id`.
    pub(super) fn record_of(&self, id: AllocId, alloc_id: u64) -> AllocationRecord {
        let a = self.graph.allocation(id).expect("allocation exists");
        let g = &self.graph.graph;
        AllocationRecord {
            alloc_id,
            members: a
                .members
                .iter()
                .map(|m| MemberPlacement {
                    index: m.index,
                    node: g.node(m.node).name.clone(),
                    devices: m.devices.iter().map(|&v| g.vertex(v).meta.name.clone()).collect(),
                })
                .collect(),
            start: a.start,
            end: a.end,
        }
    }

    /// Adds (`sign` > 0) or removes what the group's members `members` ask to its queue's usage.
    pub(super) fn add_usage(&mut self, key: &GroupKey, members: impl IntoIterator<Item = u32>, sign: i64) {
        let g = &self.groups[key];
        let q = g.spec.queue.clone();
        let amounts = quota::members_asks(&g.spec.request, members);
        let u = self.usage.entry(q).or_default();
        for (r, delta) in amounts {
            let e = u.entry(r).or_insert(0);
            if sign > 0 {
                *e = e.saturating_add(delta);
            } else {
                *e = e.saturating_sub(delta);
            }
        }
    }

    /// Places a group: records the allocation, moves it to Admitted.
    pub(super) fn admit(&mut self, key: &GroupKey, id: AllocId, reason: Reason, out: &mut Vec<Transition>) {
        // The matcher was given a narrowed request (quota cap, waiting for max); the allocation
        // must carry the group's own request so it can grow to its real max later, exactly as an
        // allocation imported on restore does.
        let spec_req = &self.groups[key].spec.request;
        if self.graph.allocation(id).is_ok_and(|a| a.request != *spec_req) {
            let spec_req = spec_req.clone();
            let saved = self.saved_alloc(id);
            let _ = self.graph.cancel(id);
            self.graph.import(id, &spec_req, &saved.members, saved.window).expect("same placement fits again");
        }
        self.remove_pending(key);
        if let Some(rid) = self.reservations.remove(key) {
            let _ = self.graph.cancel(rid);
        }
        let alloc_id = self.next_alloc_id;
        self.next_alloc_id += 1;
        let rec = self.record_of(id, alloc_id);
        let members = rec.members.len() as u32;
        let indices: Vec<u32> = rec.members.iter().map(|m| m.index).collect();
        self.graph_alloc.insert(key.clone(), id);
        self.by_graph_alloc.insert(id, key.clone());
        let now = self.now;
        let g = self.group_mut(key);
        g.allocation = Some(rec.clone());
        g.admitted_at = Some(now);
        g.reserved_at = None;
        g.ready_members = 0;
        g.not_ready_since = None;
        g.reason = String::new();
        g.reclaimed_for = None;
        let queue = g.spec.queue.clone();
        *self.starting.entry(queue).or_default() += members;
        self.add_usage(key, indices, 1);
        self.step(key, GroupState::Admitted, reason, Some(rec), out);
    }

    /// Releases a group's allocation (graph and quota); returns the released record.
    pub(super) fn release(&mut self, key: &GroupKey) -> Option<AllocationRecord> {
        let members = self.groups[key].member_indices();
        if let Some(id) = self.graph_alloc.remove(key) {
            self.by_graph_alloc.remove(&id);
            let _ = self.graph.cancel(id);
        }
        self.add_usage(key, members, -1);
        self.replan();
        self.leaving.remove(key);
        let g = self.group_mut(key);
        g.ready_members = 0;
        g.not_ready_since = None;
        g.admitted_at = None;
        g.allocation.take()
    }

    /// Fewer members (`after` of `before`) do a running allocation's work left more slowly: its
    /// expected end moves later. The reservations are dropped first, since they may lie in the
    /// way; the cycle this makes due plans them again.
    pub(super) fn stretch_for_fewer(&mut self, id: AllocId, before: u32, after: u32) {
        let Ok(end) = self.graph.allocation(id).map(|a| a.end) else { return };
        if end == muster_graph::allocations::FOREVER || end <= self.now || after == 0 || after >= before {
            return;
        }
        let (before, after) = (i64::from(before), i64::from(after));
        let stretched = self.now.saturating_add(((end - self.now).saturating_mul(before) + after - 1) / after);
        for (_, reservation) in std::mem::take(&mut self.reservations) {
            let _ = self.graph.cancel(reservation);
        }
        // Nothing else reserves in the engine's graph; were it refused, the group would overrun
        // its old end, which is re-planned as any overrun is.
        let _ = self.graph.extend_end(id, stretched);
        self.replan();
    }

    pub(super) fn drop_reservation(&mut self, key: &GroupKey) {
        if let Some(id) = self.reservations.remove(key) {
            let _ = self.graph.cancel(id);
            self.reservations_current = false;
        }
    }

    /// Room was freed, a reservation dropped or the cluster changed: a cycle is due, and it
    /// plans every reservation afresh, since a waiting group may now start sooner.
    pub(super) fn replan(&mut self) {
        self.dirty = true;
        self.reservations_current = false;
    }

    /// Whether a newly queued group comes before a group of its queue holding a reservation.
    /// The reservations made without it are then not the ones a cycle would make. (Groups of
    /// other queues are weighed when the cycle starts: `reservations_still_best`.)
    pub(super) fn comes_before_a_reservation(&self, key: &GroupKey) -> bool {
        let g = &self.groups[key];
        let pk = self.pending_key(g);
        let reserved = self.reserved.iter().map(|k| &*self.groups[k]);
        reserved.filter(|r| r.spec.queue == g.spec.queue).any(|r| self.pending_key(r) > pk)
    }

    /// Temporarily removes a placed group from the graph and the quota (for preemption).
    pub(super) fn take_out(&mut self, key: &GroupKey) -> SavedAlloc {
        let id = self.graph_alloc.remove(key).expect("placed");
        self.by_graph_alloc.remove(&id);
        let saved = self.saved_alloc(id);
        let _ = self.graph.cancel(id);
        let members = self.groups[key].member_indices();
        self.add_usage(key, members, -1);
        saved
    }

    /// Places group `key` again as `saved` had it, with only `members` of it (the quota is the
    /// caller's): a what-if of the group holding fewer.
    pub(super) fn restore_partly(&mut self, key: &GroupKey, saved: &SavedAlloc, members: &[ImportedMember]) {
        self.graph.restore(saved.id, &saved.request, members, saved.window).expect("fewer of the same members fit");
        self.graph_alloc.insert(key.clone(), saved.id);
        self.by_graph_alloc.insert(saved.id, key.clone());
    }

    /// Undoes [`Engine::take_out`].
    pub(super) fn put_back(&mut self, key: &GroupKey, saved: SavedAlloc) {
        self.graph.restore(saved.id, &saved.request, &saved.members, saved.window).expect("state restored exactly");
        self.graph_alloc.insert(key.clone(), saved.id);
        self.by_graph_alloc.insert(saved.id, key.clone());
        let members = self.groups[key].member_indices();
        self.add_usage(key, members, 1);
    }

    /// What it takes to import allocation `id` again exactly.
    fn saved_alloc(&self, id: AllocId) -> SavedAlloc {
        let a = self.graph.allocation(id).expect("exists");
        SavedAlloc { id, request: a.request.clone(), members: self.imported_members(id), window: (a.start, a.end) }
    }

    /// The members of allocation `id` as an import names them.
    pub(super) fn imported_members(&self, id: AllocId) -> Vec<ImportedMember> {
        let Ok(a) = self.graph.allocation(id) else { return Vec::new() };
        let g = &self.graph.graph;
        a.members
            .iter()
            .map(|m| ImportedMember {
                index: m.index,
                node: g.node(m.node).name.clone(),
                devices: m.devices.iter().map(|&v| g.vertex(v).meta.name.clone()).collect(),
            })
            .collect()
    }
}
