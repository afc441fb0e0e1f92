//! A workload changed after it was queued: a waiting one reshaped (resized, new requests or
//! placement) follows in the engine, keeping its place; a placed one resized gives back the
//! members beyond its new maximum that no pod holds.

use super::*;

impl<S: Store> Brain<S> {
    /// A waiting Job reshaped (resized, new requests or placement): its Group object and the
    /// engine's group follow, keeping its place in the queue. A placed group keeps the spec it
    /// was placed for (the webhook refuses reshaping a placed workload that is not suspended).
    pub(super) fn reshape_if_changed(&mut self, j: &WorkloadView, state: GroupState) {
        use GroupState::*;
        let Some(g) = self.engine.as_ref().and_then(|e| e.engine().group(&j.key)) else { return };
        let Ok(object) = self.group_object(j) else { return };
        let Ok(mut want) = object.to_request(&j.key.name) else { return };
        // The engine adds the calendar reservations the group may use; the workload does not say them.
        want.reservations.clone_from(&g.spec.request.reservations);
        let changed = want != g.spec.request || object.priority_class_name != g.spec.priority_class;
        if !changed {
            return;
        }
        if matches!(state, Queued | Reserved | Suspended | Deactivated) {
            if let Some(spec) = self.engine_spec(j) {
                self.inputs.push(Input::Update(spec));
            }
            return;
        }
        // Placed: a Job resized while it runs (the webhook refuses any other change). The counts
        // go as far as the members it holds allow; pods_changed releases members beyond the
        // new max once their pods are gone, and the engine grows it up to a larger one.
        let held = g.member_count();
        let bounds = (want.min_members.min(held), want.max_members.max(held));
        let now = (g.spec.request.min_members, g.spec.request.max_members);
        if matches!(state, Admitted | Running)
            && bounds != now
            && let Some(spec) = self.engine_spec(j)
        {
            self.inputs.push(Input::Update(with_member_bounds(spec, bounds)));
        }
    }

    /// Releases the members of a placed group beyond its workload's new max that no pod holds
    /// (highest first): the min comes down first so that the loss is a shrink, not an eviction,
    /// and the counts follow the members left.
    pub(super) fn release_beyond(
        &mut self,
        key: &GroupKey,
        spec: &GroupSpec,
        alloc: &muster_queue::AllocationRecord,
        want: &GroupRequest,
        occupied: &BTreeSet<u32>,
    ) {
        let held = alloc.members.len() as u32;
        let excess = (held - want.max_members) as usize;
        let free: Vec<u32> = alloc.members.iter().rev().map(|m| m.index).filter(|i| !occupied.contains(i)).collect();
        let release: Vec<u32> = free.into_iter().take(excess).collect();
        if release.is_empty() {
            return;
        }
        let left = held - release.len() as u32;
        let before = with_member_bounds(spec.clone(), (want.min_members.min(left), held));
        let after = with_member_bounds(spec.clone(), (want.min_members.min(left), want.max_members.max(left)));
        self.inputs.push(Input::Update(before));
        self.inputs.push(Input::MembersLost { key: key.clone(), members: release });
        self.inputs.push(Input::Update(after));
    }
}

/// `spec` with its member counts set to `(min, max)` (a group of sets splits them over its sets).
fn with_member_bounds(mut spec: GroupSpec, (min, max): (u32, u32)) -> GroupSpec {
    spec.request.set_bounds(min, max);
    spec
}
