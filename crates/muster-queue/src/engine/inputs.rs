//! A group's inputs: submit, pods ready, members lost, finished, suspend, resume and delete (and
//! the namespace labels that decide which queues a namespace may use). Each checks first and
//! changes nothing when it refuses.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use muster_graph::AllocId;

use super::{Engine, EngineError};
use crate::group::{AllocationRecord, Group, GroupKey, GroupSpec, GroupState, IllegalTransition, Reason, Transition};

impl Engine {
    /// Sets the labels of a namespace (for queues' namespace selectors).
    pub fn set_namespace_labels(&mut self, namespace: &str, labels: BTreeMap<String, String>) {
        self.namespaces.insert(namespace.to_string(), labels);
    }

    /// Checks that `namespace` may use `queue`.
    pub fn check_namespace(&self, key: &GroupKey, queue: &str) -> Result<(), EngineError> {
        if !self.compiled.queues.contains_key(queue) {
            return Err(self.unknown_queue_err(key, queue));
        }
        let sel = &self.queue_cfg(queue).namespace_selector;
        if sel.is_empty() {
            return Ok(());
        }
        let mut labels = self.namespaces.get(&*key.namespace).cloned().unwrap_or_default();
        labels.insert("kubernetes.io/metadata.name".into(), key.namespace.to_string());
        if sel.admits(&key.namespace, &labels) {
            Ok(())
        } else {
            Err(EngineError::InvalidGroup {
                key: key.clone(),
                field: "queue".into(),
                message: format!("queue {queue:?} does not admit namespace {:?} (namespaceSelector)", key.namespace),
            })
        }
    }

    /// Queues a group.
    pub fn submit(&mut self, spec: GroupSpec, now: i64) -> Result<Vec<Transition>, EngineError> {
        let spec = self.with_usable_reservations(spec);
        let key = spec.key.clone();
        if self.groups.contains_key(&key) {
            return Err(EngineError::DuplicateGroup(key));
        }
        let priority = self.check_spec(&spec)?;
        if self.queue_cfg(&spec.queue).closed {
            return Err(EngineError::InvalidGroup {
                key,
                field: "queue".into(),
                message: format!(
                    "queue {:?} is closed: its definition was removed while groups still name it, and nothing new \
                     enters it; name another queue, or define it again",
                    spec.queue
                ),
            });
        }
        self.advance(now);
        self.seq += 1;
        let g = Group::submitted(spec, priority, self.seq);
        self.index_spec(&key, &g.spec.request);
        self.groups.insert(key.clone(), Arc::new(g));
        let mut out = Vec::new();
        self.step(&key, GroupState::Queued, Reason::Submitted, None, &mut out);
        self.add_pending(&key);
        self.dirty = true;
        if self.comes_before_a_reservation(&key) {
            self.reservations_current = false;
        }
        Ok(out)
    }

    /// The priority of a new or changed spec, once its key, queue and member counts are valid.
    fn check_spec(&self, spec: &GroupSpec) -> Result<i32, EngineError> {
        let key = &spec.key;
        let invalid = |field: &str, message: String| EngineError::InvalidGroup {
            key: key.clone(),
            field: field.to_string(),
            message,
        };
        if key.namespace.is_empty() || key.name.is_empty() {
            return Err(invalid("key", "namespace and name must not be empty".into()));
        }
        self.check_namespace(key, &spec.queue)?;
        let priority =
            self.config.priority_of(spec.priority_class.as_deref()).map_err(|m| invalid("priorityClass", m))?;
        let r = &spec.request;
        if r.min_members == 0 || r.max_members < r.min_members {
            return Err(invalid(
                "request.members",
                format!("min {} max {}: need 1 <= min <= max", r.min_members, r.max_members),
            ));
        }
        Ok(priority)
    }

    /// Replaces the spec of a group that holds nothing (queued, reserved, suspended or
    /// deactivated): its job was resized or reshaped while it waited. It keeps its place in its
    /// queue; a reservation is dropped (Reserved -> Queued) and planned anew by the next cycle. A
    /// placed group may change only its member counts (`resize_placed`); an evicted one
    /// keeps the spec it was placed for, and a group never changes queue.
    pub fn update(&mut self, spec: GroupSpec, now: i64) -> Result<Vec<Transition>, EngineError> {
        let spec = self.with_usable_reservations(spec);
        let key = spec.key.clone();
        let g = self.get(&key)?;
        let state = g.state;
        use GroupState::*;
        if matches!(state, Admitted | Running) {
            return self.resize_placed(spec, now);
        }
        if !matches!(state, Queued | Reserved | Suspended | Deactivated) {
            return Err(EngineError::InvalidGroup {
                key,
                field: "request".into(),
                message: format!("a {state} group keeps the spec it was placed for; suspend it first"),
            });
        }
        if spec.queue != g.spec.queue {
            return Err(EngineError::InvalidGroup {
                key,
                field: "queue".into(),
                message: format!("a group stays in its queue ({}); delete it and submit it again", g.spec.queue),
            });
        }
        let pk = self.pending_key(g);
        let priority = self.check_spec(&spec)?;
        self.advance(now);
        let pending = self.pending.get(&spec.queue).is_some_and(|p| p.contains_key(&pk));
        if pending {
            self.remove_pending(&key);
        }
        self.drop_reservation(&key);
        self.index_spec(&key, &spec.request);
        let (min, max) = (spec.request.min_members, spec.request.max_members);
        let g = self.group_mut(&key);
        g.reserved_at = None;
        g.unsatisfiable = None;
        g.priority = priority;
        g.spec = spec;
        if pending {
            self.add_pending(&key);
        }
        self.replan();
        let mut out = Vec::new();
        let to = if state == Reserved { Queued } else { state };
        self.step(&key, to, Reason::Reshaped { min, max }, None, &mut out);
        Ok(out)
    }

    /// A placed group's job changed how many pods it runs at once (an elastic Indexed Job resized
    /// while it runs): only the member counts change, and they must still admit the members it
    /// holds. Below the new max it grows as an elastic group does; to end below its members, the
    /// caller first releases members whose pods are gone ([`Engine::members_lost`]), so that no
    /// room is freed while a pod may still run in it.
    fn resize_placed(&mut self, spec: GroupSpec, now: i64) -> Result<Vec<Transition>, EngineError> {
        let key = spec.key.clone();
        let g = self.get(&key)?;
        let (state, held) = (g.state, g.member_count());
        let (min, max) = (spec.request.min_members, spec.request.max_members);
        if !g.spec.request.same_but_counts(&spec.request)
            || spec.queue != g.spec.queue
            || spec.priority_class != g.spec.priority_class
        {
            return Err(EngineError::InvalidGroup {
                key,
                field: "request".into(),
                message: format!(
                    "a {state} group may change only how many members it has (its requests, placement, queue and \
                     priority are what it was placed for); suspend it first"
                ),
            });
        }
        if min < 1 || min > max || held < min || held > max {
            return Err(EngineError::InvalidGroup {
                key,
                field: "members".into(),
                message: format!(
                    "a {state} group holding {held} members cannot be sized {min}..={max}; release members first"
                ),
            });
        }
        self.advance(now);
        let id = self.graph_alloc[&key];
        self.graph.set_member_bounds(id, min, max).expect("bounds checked against the members held");
        self.index_spec(&key, &spec.request);
        let g = self.group_mut(&key);
        g.spec.request = spec.request;
        let allocation = g.allocation.clone();
        self.replan();
        let mut out = Vec::new();
        self.step(&key, state, Reason::Reshaped { min, max }, allocation, &mut out);
        Ok(out)
    }

    /// Reports how many members are ready. All ready: Admitted -> Running. A running group that
    /// drops below all-ready starts its recovery timer.
    pub fn pods_ready(&mut self, key: &GroupKey, ready: u32, now: i64) -> Result<Vec<Transition>, EngineError> {
        let g = self.get(key)?;
        let state = g.state;
        if !state.holds_allocation() {
            return Err(EngineError::IllegalTransition {
                key: key.clone(),
                source: IllegalTransition { from: state, to: GroupState::Running },
            });
        }
        // Members given back still run until their pods are gone, but nobody waits for them to
        // be ready (their pods are being deleted).
        let giving = self.leaving.get(key).map_or(0, |l| l.len() as u32);
        let members = g.member_count() - giving;
        let recovering = g.not_ready_since.is_some();
        // Members ready leave the start window: room for the groups waiting on it.
        let windowed = self.queue_cfg(&g.spec.queue).readiness.max_starting_members.is_some();
        self.advance(now);
        let ready = ready.min(members);
        let mut out = Vec::new();
        self.group_mut(key).ready_members = ready;
        match state {
            GroupState::Admitted if ready >= members => {
                self.step(key, GroupState::Running, Reason::AllReady, None, &mut out);
                self.dirty |= self.config.block_admission || windowed || self.may_grow(key);
            }
            GroupState::Admitted => self.dirty |= windowed,
            GroupState::Running if ready < members && !recovering => {
                self.group_mut(key).not_ready_since = Some(self.now);
                self.step(key, GroupState::Running, Reason::ReadinessLost, None, &mut out);
            }
            GroupState::Running if ready >= members => {
                if recovering {
                    self.group_mut(key).not_ready_since = None;
                    self.step(key, GroupState::Running, Reason::AllReady, None, &mut out);
                }
                // Members added by growth report ready as they come: each time may be the first
                // moment it can grow again.
                self.dirty |= self.may_grow(key);
            }
            _ => {}
        }
        Ok(out)
    }

    /// The group's pods finished: releases the allocation.
    pub fn finished(&mut self, key: &GroupKey, succeeded: bool, now: i64) -> Result<Vec<Transition>, EngineError> {
        let to = if succeeded { GroupState::Succeeded } else { GroupState::Failed };
        let state = self.get(key)?.state;
        GroupState::transition(state, to)
            .map_err(|source| EngineError::IllegalTransition { key: key.clone(), source })?;
        self.advance(now);
        if succeeded {
            let g = Arc::clone(&self.groups[key]);
            self.learn_run_time(&g, self.now);
        }
        let rec = self.release(key);
        let mut out = Vec::new();
        self.step(key, to, Reason::Finished { succeeded }, rec, &mut out);
        Ok(out)
    }

    /// Members of a placed group are gone (pods failed or evicted by the node). An elastic group at
    /// or above its minimum keeps running with fewer; otherwise the whole group is released and
    /// queued again at once (lost members are not the group's fault, so no backoff).
    pub fn members_lost(&mut self, key: &GroupKey, members: &[u32], now: i64) -> Result<Vec<Transition>, EngineError> {
        let g = self.get(key)?;
        if !g.state.holds_allocation() {
            return Err(EngineError::IllegalTransition {
                key: key.clone(),
                source: IllegalTransition { from: g.state, to: GroupState::Evicted },
            });
        }
        let alloc = g.allocation.as_ref().expect("placed group has an allocation");
        for &m in members {
            if !alloc.members.iter().any(|x| x.index == m) {
                return Err(EngineError::UnknownMember { key: key.clone(), member: m });
            }
        }
        self.advance(now);
        let lost: BTreeSet<u32> = members.iter().copied().collect();
        let mut out = Vec::new();
        let id = self.graph_alloc[key];
        self.lose_members(key, id, &lost, false, &mut out);
        Ok(out)
    }

    /// Shared by `members_lost` and `node_removed` (where the graph already dropped them).
    pub(super) fn lose_members(
        &mut self,
        key: &GroupKey,
        id: AllocId,
        lost: &BTreeSet<u32>,
        already_dropped: bool,
        out: &mut Vec<Transition>,
    ) {
        let g = &self.groups[key];
        let remaining = g.member_count() - lost.len() as u32;
        let state = g.state;
        let kept = g.member_indices().into_iter().filter(|m| !lost.contains(m));
        let enough = g.spec.request.meets_minimum(kept);
        let alloc_id = g.allocation.as_ref().map_or(0, |a| a.alloc_id);
        let members: Vec<u32> = lost.iter().copied().collect();
        if let Some(leaving) = self.leaving.get_mut(key) {
            leaving.retain(|m| !lost.contains(m));
            if leaving.is_empty() {
                self.leaving.remove(key);
            }
        }
        if enough {
            if !already_dropped {
                self.graph.shrink(id, &members).expect("members checked");
            }
            self.stretch_for_fewer(id, remaining + lost.len() as u32, remaining);
            self.add_usage(key, lost.iter().copied(), -1);
            let rec = self.record_of(id, alloc_id);
            let g = self.group_mut(key);
            g.allocation = Some(rec.clone());
            g.ready_members = g.ready_members.min(remaining);
            // The members lost may be the only ones that were not ready.
            let recovered = g.not_ready_since.is_some() && g.ready_members >= remaining;
            if recovered {
                g.not_ready_since = None;
            }
            self.replan();
            self.step(key, state, Reason::Shrunk { members }, Some(rec), out);
            if recovered {
                self.step(key, state, Reason::AllReady, None, out);
            }
            return;
        }
        if already_dropped {
            // The graph removed these members; make the record agree before releasing the rest.
            let g = self.group_mut(key);
            if let Some(a) = g.allocation.as_mut() {
                a.members.retain(|m| !lost.contains(&m.index));
            }
            self.add_usage(key, lost.iter().copied(), -1);
            if self.graph.allocation(id).is_err() {
                self.graph_alloc.remove(key);
                self.by_graph_alloc.remove(&id);
            }
        }
        let rec = self.release(key);
        let g = self.group_mut(key);
        g.evictions += 1;
        self.step(key, GroupState::Evicted, Reason::MembersLost { members }, rec, out);
        self.requeue_now(key, out);
    }

    /// Holds a group: a pending one leaves the queue, a placed one is released.
    pub fn suspend(&mut self, key: &GroupKey, now: i64) -> Result<Vec<Transition>, EngineError> {
        self.move_out(key, GroupState::Suspended, Reason::Suspended, now)
    }

    /// Moves a group from wherever it is to `to` (Suspended or Deleted), releasing what it holds.
    fn move_out(
        &mut self,
        key: &GroupKey,
        to: GroupState,
        reason: Reason,
        now: i64,
    ) -> Result<Vec<Transition>, EngineError> {
        let state = self.get(key)?.state;
        GroupState::transition(state, to)
            .map_err(|source| EngineError::IllegalTransition { key: key.clone(), source })?;
        self.advance(now);
        let mut out = Vec::new();
        let rec = self.leave(key, state);
        self.step(key, to, reason, rec, &mut out);
        Ok(out)
    }

    /// Takes a group out of wherever it is (pending set, reservation, allocation).
    fn leave(&mut self, key: &GroupKey, state: GroupState) -> Option<AllocationRecord> {
        if state.is_pending() {
            self.remove_pending(key);
            self.drop_reservation(key);
            self.group_mut(key).reserved_at = None;
            self.replan();
        }
        let g = self.group_mut(key);
        g.requeue_at = None;
        if state.holds_allocation() { self.release(key) } else { None }
    }

    /// Queues a suspended or deactivated group again (a deactivated one starts a fresh backoff).
    pub fn resume(&mut self, key: &GroupKey, now: i64) -> Result<Vec<Transition>, EngineError> {
        let state = self.get(key)?.state;
        if !matches!(state, GroupState::Suspended | GroupState::Deactivated) {
            return Err(EngineError::IllegalTransition {
                key: key.clone(),
                source: IllegalTransition { from: state, to: GroupState::Queued },
            });
        }
        self.advance(now);
        let g = self.group_mut(key);
        if state == GroupState::Deactivated {
            g.requeues = 0;
        }
        g.unsatisfiable = None;
        let mut out = Vec::new();
        self.step(key, GroupState::Queued, Reason::Resumed, None, &mut out);
        self.add_pending(key);
        self.replan();
        Ok(out)
    }

    /// Deletes a group in any state; releases what it holds and forgets it.
    pub fn delete(&mut self, key: &GroupKey, now: i64) -> Result<Vec<Transition>, EngineError> {
        let out = self.move_out(key, GroupState::Deleted, Reason::Deleted, now)?;
        self.groups.remove(key);
        self.shapes.remove(key);
        self.elastic.remove(key);
        Ok(out)
    }
}
