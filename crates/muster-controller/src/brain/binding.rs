//! A placed group's pods bound to its members: each unbound pod gets a free member of its own
//! set (its workload's index where it has one), on the node the engine placed that member; a pod
//! that could over-commit its node (asks more than its member, asks what muster cannot count or
//! honour, or is a plain pod naming a workload's group) is told why and left unbound. A starting
//! group is bound whole or not at all. Readiness goes back to the engine, and members a group
//! gives back are reported lost once no pod runs there.

use std::collections::{BTreeMap, BTreeSet};

use muster_durable::Input;
use muster_k8s::{labels, workload};
use muster_queue::{GroupKey, GroupState};
use muster_store::Store;

use super::{Action, Brain, devices};
use crate::convert::{self, PodGroupApi, PodPhase, PodView};

impl<S: Store> Brain<S> {
    /// Readiness to the engine and bindings for unbound pods of one group.
    pub(super) fn pods_changed(&mut self, key: &GroupKey) {
        if !self.state(key).is_some_and(GroupState::holds_allocation) || self.finish_if_done_by_pods(key) {
            return;
        }
        // Pods of the run before this placement are neither bound to it nor ready in it.
        if !self.is_plain(key) && self.suspend_held(key) {
            if self.earlier_run_stopping(key) {
                return;
            }
            self.set_suspend(key, false);
        }
        let Some(g) = self.engine.as_ref().and_then(|e| e.engine().group(key)) else { return };
        let Some(alloc) = g.allocation.clone() else { return };
        let uids: Vec<String> = self.group_pods.get(key).into_iter().flatten().cloned().collect();
        let pods: Vec<&PodView> = uids
            .iter()
            .filter_map(|u| self.pods.items.get(u))
            .filter(|p| !p.deleting && p.phase != PodPhase::Failed)
            .collect();
        let ready =
            pods.iter().filter(|p| p.node.is_some() && (p.ready || p.phase == PodPhase::Succeeded)).count() as u32;
        // Members filled: by bound pods still running (their member annotation) and bindings in
        // flight. A finished pod's member is free for the Job's next pod (completions above
        // parallelism): the group holds the member's room until the group ends.
        let mut filled: BTreeSet<u32> = pods.iter().filter(|p| p.holds_capacity()).filter_map(|p| p.member).collect();
        // Members a finished pod left: taken only when no member is left that no pod has used.
        let left: BTreeSet<u32> =
            pods.iter().filter(|p| p.node.is_some() && p.phase.is_terminal()).filter_map(|p| p.member).collect();
        filled.extend(pods.iter().filter_map(|p| self.binding.get(&p.uid)));
        // None of its members bound or on its way: the group starts, and is bound whole.
        let starting = filled.is_empty();
        // The PodGroups its pods name: the group's own, or one per set of a CompositePodGroup.
        let pod_groups: BTreeSet<String> = pods
            .iter()
            .filter(|p| p.pod_group == Some(PodGroupApi::Kubernetes))
            .map(|p| p.set_name().unwrap_or(&key.name).to_string())
            .collect();
        // Members the group is giving back: no new pod takes them, and they are lost once no pod
        // (a deleting one included) runs there.
        let leaving = self.engine.as_ref().and_then(|e| e.engine().leaving(key)).cloned().unwrap_or_default();
        if !leaving.is_empty() {
            let running: BTreeSet<u32> = uids
                .iter()
                .filter_map(|u| self.pods.items.get(u))
                .filter(|p| p.holds_capacity())
                .filter_map(|p| p.member)
                .chain(uids.iter().filter_map(|u| self.binding.get(u)).copied())
                .collect();
            let gone: Vec<u32> = leaving.difference(&running).copied().collect();
            let asked = self.inputs.iter().any(|i| matches!(i, Input::MembersLost { key: k, .. } if k == key));
            if !gone.is_empty() && !asked {
                self.inputs.push(Input::MembersLost { key: key.clone(), members: gone });
            }
        }
        let mut binds = Vec::new();
        let mut unbound: Vec<&&PodView> = pods
            .iter()
            .filter(|p| p.node.is_none() && !p.phase.is_terminal() && !self.binding.contains_key(&p.uid))
            .collect();
        unbound.sort_by_key(|p| (p.place.as_ref().and_then(|at| at.index), p.name.clone()));
        let workload = self.workload(&key.to_string());
        // A plain pod naming a workload's group would take a member placed for the workload's
        // own pods, running past the queue on its quota.
        let (strays, unbound): (Vec<&&PodView>, Vec<&&PodView>) =
            unbound.into_iter().partition(|p| workload.is_some() && p.is_plain());
        let strays: Vec<(String, String, String)> =
            strays.iter().map(|p| (p.uid.clone(), p.name.clone(), p.namespace.clone())).collect();
        let owner = workload.map(|w| workload::a(w.kind.kind)).unwrap_or_default();
        // Pods not bound, each with the event's reason and message.
        let mut refused: Vec<(String, String, String, &str, String)> = Vec::new();
        for p in unbound {
            // What muster does not place nothing else would honour: bound, the pod would run
            // without its device claim, or beside another on its host port.
            if let Some(why) = &p.unsupported {
                let message = format!(
                    "pod {} of group {key} is not bound: {why}; delete it, and create it without those fields",
                    p.name
                );
                refused.push((p.uid.clone(), p.name.clone(), p.namespace.clone(), "UnsupportedPodField", message));
                continue;
            }
            // Counted as nothing, it could over-commit any node.
            if let Some(why) = &p.uncountable {
                let message = format!(
                    "pod {} of group {key} is not bound: {why}; delete it, and create it with requests muster can \
                     count",
                    p.name
                );
                refused.push((p.uid.clone(), p.name.clone(), p.namespace.clone(), "UncountableRequests", message));
                continue;
            }
            let free = |m: &u32| !filled.contains(m) && !leaving.contains(m);
            // A workload's pods are numbered across its pod sets (and a JobSet's child Jobs).
            let preferred = p.place.as_deref().zip(workload).and_then(|(at, w)| w.member_of(at));
            // A pod without an index stays within its pod set's members, when known; in a group
            // of sets always, since another set's members were placed for other requests.
            let set = p.place.as_deref().zip(workload).and_then(|(at, w)| w.set_members(at));
            // A plain pod names its set by label.
            let set = set.or_else(|| p.set_name().and_then(|s| g.spec.request.set_members(s)));
            let in_set = |i: &u32| set.as_ref().is_none_or(|r| r.contains(i));
            let any_set = g.spec.request.sets.is_empty();
            let slot = preferred
                .filter(|i| alloc.members.iter().any(|m| m.index == *i) && free(i))
                .or_else(|| alloc.members.iter().map(|m| m.index).find(|i| free(i) && !left.contains(i) && in_set(i)))
                .or_else(|| alloc.members.iter().map(|m| m.index).find(|i| free(i) && in_set(i)))
                .or_else(|| {
                    let mut others = alloc.members.iter().map(|m| m.index).filter(|_| any_set);
                    others.find(|i| free(i) && !left.contains(i))
                })
                .or_else(|| alloc.members.iter().map(|m| m.index).filter(|_| any_set).find(free));
            // Members were placed for what their set asks: a pod asking more would over-commit
            // the node it is bound to.
            let member_asks = slot.map_or(g.spec.request.requests.as_slice(), |m| g.spec.request.member_requests(m));
            if let Some(over) = convert::exceeds(&self.counted_requests(p), member_asks) {
                let message = format!(
                    "pod {} asks more than the members of group {key} were placed for ({over}); muster does not \
                     bind it: delete it, and create it asking what the group's other pods ask",
                    p.name
                );
                refused.push((p.uid.clone(), p.name.clone(), p.namespace.clone(), "PodTooLarge", message));
                continue;
            }
            // Every member of its set is taken: a later pod of another set may still fit.
            let Some(member) = slot else {
                if set.is_some() && !any_set {
                    continue;
                }
                break;
            };
            let node = alloc.members.iter().find(|m| m.index == member).map(|m| m.node.clone()).expect("slot exists");
            filled.insert(member);
            binds.push((p.uid.clone(), p.name.clone(), p.namespace.clone(), node, member, p.gated));
        }
        // A workload resized below its members (rare: the full request is read only then).
        let held = alloc.members.len() as i64;
        let shrunk =
            workload.and_then(|w| w.group.as_ref().ok()).filter(|o| held > o.members.max.unwrap_or(o.members.min));
        if let Some(want) = shrunk.and_then(|o| o.to_request(&key.name).ok()) {
            // A pod being deleted still runs in its member until it is gone.
            let going = uids
                .iter()
                .filter_map(|u| self.pods.items.get(u))
                .filter(|p| p.deleting && p.holds_capacity())
                .filter_map(|p| p.member);
            let occupied: BTreeSet<u32> = filled.iter().copied().chain(going).collect();
            let spec = g.spec.clone();
            self.release_beyond(key, &spec, &alloc, &want, &occupied);
        }
        for (uid, pod, namespace) in strays {
            let message = format!(
                "pod {pod} names group {name} (label {group}), which is the group of {owner} of that name; muster \
                 binds only that workload's pods to it: give the pod another group name",
                name = key.name,
                group = labels::GROUP
            );
            self.tell_pod(key, &namespace, &pod, &uid, "GroupTaken", &message);
        }
        for (uid, pod, namespace, reason, message) in refused {
            self.tell_pod(key, &namespace, &pod, &uid, reason, &message);
        }
        let (mut waiting, mut short_of_room, mut to_bind) = (0, false, Vec::new());
        let mut claims_of = BTreeMap::new();
        let classes = self.class_snapshot();
        for (uid, _, _, _, member, _) in &binds {
            let Some(p) = self.pods.items.get(uid).filter(|p| p.claims.is_some() || p.extended().is_some()) else {
                continue;
            };
            claims_of.insert(uid.clone(), self.claim_allocations(p, *member, &classes));
        }
        for (uid, pod, namespace, node, member, gated) in binds {
            let claims = match claims_of.remove(&uid).unwrap_or(Ok(Vec::new())) {
                Ok(claims) => claims,
                Err(devices::ClaimsNotReady::Wait) => {
                    waiting += 1;
                    continue;
                }
                Err(devices::ClaimsNotReady::Refuse(why)) => {
                    let message = format!("pod {pod} of group {key} is not bound: {why}");
                    self.tell_pod(key, &namespace, &pod, &uid, "ClaimsNotAllocated", &message);
                    continue;
                }
            };
            // The engine planned the room; a pod still stopping there (an evicted group's) may
            // hold it a while yet.
            let requests = self.pods.items.get(&uid).map(|p| self.counted_requests(p)).unwrap_or_default();
            if !self.room.fits(&self.nodes, &self.pods, &node, &requests) {
                self.room.wait(&node, key);
                waiting += 1;
                short_of_room = true;
                continue;
            }
            self.room.binding(&uid, &node);
            to_bind.push((uid, pod, namespace, node, member, gated, claims));
        }
        // A starting group whose victims are still stopping on some of its nodes binds none of
        // its pods until all have room: bound on the others meanwhile, part of the gang would
        // hold its nodes (and run) without the rest.
        if starting && short_of_room {
            for (uid, ..) in to_bind.drain(..) {
                self.room.gone(&uid, None);
                waiting += 1;
            }
        }
        for (uid, pod, namespace, node, member, gated, claims) in to_bind {
            self.binding.insert(uid.clone(), member);
            if gated {
                let (namespace, pod, uid) = (namespace.clone(), pod.clone(), uid.clone());
                self.actions.push(Action::Ungate { key: key.clone(), namespace, pod, uid });
            }
            self.actions.push(Action::Bind { key: key.clone(), namespace, pod, uid, node, member, claims });
        }
        let members = alloc.members.len();
        if filled.len() - waiting >= members && !pod_groups.is_empty() && self.pod_group_scheduled.insert(key.clone()) {
            let nodes: BTreeSet<&str> = alloc.members.iter().map(|m| m.node.as_str()).collect();
            let message = format!("muster placed the {members} pods of the group on {} nodes", nodes.len());
            let pod_groups = pod_groups.into_iter().collect();
            self.actions.push(Action::PodGroupScheduled { key: key.clone(), pod_groups, message });
        }
        if self.ready_sent.get(key) != Some(&ready) {
            self.ready_sent.insert(key.clone(), ready);
            self.inputs.push(Input::PodsReady { key: key.clone(), ready });
        }
    }
}
