//! Plain-pod groups: pods no Job controls, grouped by the `muster.dev/group` label. A group is
//! queued once its minimum of pods exists and every pod agrees with the first (which gives its
//! Group object), for no more members than it has pods then, growing to its size as more come;
//! its pods are ungated and bound when it is admitted; it finishes when its bound
//! pods all ended; it goes (with its Group object) when its pods are gone; evicted, its pods are
//! deleted (pods cannot be suspended) and users create them again.

use super::*;
use muster_graph::jobspec::MAX_MEMBERS;
use muster_k8s::GroupSpec as GroupObjectSpec;
use muster_k8s::dra::PodDevices;

impl<S: Store> Brain<S> {
    /// Whether `key` is a plain-pod group: pods of it exist and no Job of that name.
    pub(super) fn is_plain(&self, key: &GroupKey) -> bool {
        self.workload(&key.to_string()).is_none() && self.plain_pods(key).next().is_some()
    }

    pub(super) fn plain_pods<'a>(&'a self, key: &GroupKey) -> impl Iterator<Item = &'a PodView> + 'a {
        self.group_pods.get(key).into_iter().flatten().filter_map(|u| self.pods.items.get(u)).filter(|p| p.is_plain())
    }

    /// Some(all succeeded) once a plain group has ended: at least `members` pods were bound and
    /// every bound pod is Succeeded or Failed (unbound pods, such as gated extra pods of an
    /// elastic group admitted below its size, do not count).
    pub(super) fn plain_finished(&self, key: &GroupKey, members: usize) -> Option<bool> {
        let bound: Vec<&PodView> = self.plain_pods(key).filter(|p| p.node.is_some()).collect();
        let ended = bound.len() >= members.max(1) && bound.iter().all(|p| p.phase.is_terminal());
        ended.then(|| bound.iter().all(|p| p.phase == PodPhase::Succeeded))
    }

    /// Brings the engine in line with the pods of one plain group (or their absence).
    pub(super) fn plain_changed(&mut self, key: &GroupKey, now: i64) {
        if self.workload(&key.to_string()).is_some() {
            return;
        }
        let Some(first) = self.plain_pods(key).min_by_key(|p| (p.created, p.name.clone())).cloned() else {
            self.plain_refused.remove(key);
            self.vanished(key.clone());
            return;
        };
        let Some(g) = self.engine.as_ref().and_then(|e| e.engine().group(key)) else {
            if !self.plain_refused.contains(key) {
                self.submit_plain(key, &first, now);
            }
            return;
        };
        let members = g.allocation.as_ref().filter(|_| g.state.holds_allocation()).map(|a| a.members.len());
        if g.state == GroupState::Failed {
            self.stop_over_limit(key);
        }
        if let Some(succeeded) = members.and_then(|m| self.plain_finished(key, m)) {
            self.inputs.push(Input::Finished { key: key.clone(), succeeded });
        }
        // Level-triggered, as for Jobs: the Group object again after a restart or a deletion.
        if !self.ensured.contains(key)
            && let Ok(spec) = self.plain_spec(key, &first)
        {
            self.ensured.insert(key.clone());
            self.actions.push(Action::EnsureGroup { key: key.clone(), spec: Box::new(spec), job_uid: String::new() });
        }
        self.follow_later_pods(key, &first);
    }

    /// An elastic group queued (or placed) for the pods it had then takes those created since,
    /// up to its size: its maximum follows its pods, and the engine grows it as room and quota
    /// allow, keeping its place while it waits. A Kubernetes PodGroup's gang is its `minCount`
    /// pods and has no size: every pod beyond them joins so, as kube-scheduler schedules such
    /// pods once the gang is placed. A group whose pods name sets is sized from all its pods
    /// already.
    fn follow_later_pods(&mut self, key: &GroupKey, first: &PodView) {
        let Some(g) = self.engine.as_ref().and_then(|e| e.engine().group(key)) else { return };
        if !g.spec.request.sets.is_empty() || g.state.is_terminal() {
            return;
        }
        let Ok(object) = convert::plain_group_spec(first) else { return };
        let size = match first.pod_group {
            Some(_) => i64::from(MAX_MEMBERS),
            None => object.members.max.unwrap_or(object.members.min),
        };
        // Pods that ended hold no member a new pod needs: one made in their place takes theirs.
        let pods = self.live_plain_pods(key).count();
        let want = u32::try_from(size.min(pods as i64)).unwrap_or(0);
        let request = &g.spec.request;
        if want > request.max_members {
            let mut spec = g.spec.clone();
            spec.request.set_bounds(request.min_members, want);
            self.inputs.push(Input::Update(spec));
        }
    }

    /// The Group object of a plain group: from its first pod, or from all its pods when they name
    /// their sets.
    fn plain_spec(&self, key: &GroupKey, first: &PodView) -> Result<GroupObjectSpec, String> {
        let pods: Vec<&PodView> = self.plain_pods(key).collect();
        let mut spec = match pods.iter().any(|p| p.set.is_some()) {
            true => convert::plain_sets_spec(&pods)?,
            false => convert::plain_group_spec(first)?,
        };
        self.fill_plain_devices(key, &mut spec, &pods)?;
        Ok(spec)
    }

    /// Fills the devices of `spec`, the Group object of plain group `key`, from what its `pods`
    /// ask: each set's oldest pod's, or the group's oldest pod's for alike members (the pods of a
    /// set agree, `convert::plain_pods_differ` and `devices_differ`).
    fn fill_plain_devices(&self, key: &GroupKey, spec: &mut GroupObjectSpec, pods: &[&PodView]) -> Result<(), String> {
        let mut ordered = pods.to_vec();
        ordered.sort_by_key(|p| (p.created, p.name.clone()));
        let of = |p: &&PodView| p.devices.as_deref().cloned().unwrap_or_default();
        let asks: Vec<PodDevices> = match spec.sets.is_empty() {
            true => ordered.first().map(of).into_iter().collect(),
            false => (spec.sets.iter())
                .map(|s| ordered.iter().find(|p| p.set_name() == Some(s.name.as_str())).map(of).unwrap_or_default())
                .collect(),
        };
        self.fill_group_devices(&key.namespace, spec, &asks)
    }

    /// Pods of a plain group that still run or wait (not ended, not being deleted).
    pub(super) fn live_plain_pods<'a>(&'a self, key: &GroupKey) -> impl Iterator<Item = &'a PodView> + 'a {
        self.plain_pods(key).filter(|p| !p.phase.is_terminal() && !p.deleting)
    }

    /// A new plain group into its queue, sized from its first pod, once every pod agrees with
    /// that one and at least its minimum of pods exist. Admitted earlier, it would hold room for
    /// pods that may never come; and a pod asking more than the first would be placed as if it
    /// asked what the first asks.
    pub(super) fn submit_plain(&mut self, key: &GroupKey, first: &PodView, now: i64) {
        let live: Vec<PodView> = self.live_plain_pods(key).cloned().collect();
        if live.is_empty() {
            return;
        }
        let refuse = |brain: &mut Self, message: &str| {
            brain.plain_refused.insert(key.clone());
            brain.event(key, EventType::Warning, "InvalidGroup", message);
        };
        let mut spec = match convert::plain_group_spec(first) {
            Ok(spec) => spec,
            Err(message) => return refuse(self, &message),
        };
        if live.iter().any(|p| p.set.is_some()) {
            return self.submit_plain_sets(key, first, &spec, &live, now);
        }
        for p in &live {
            let theirs = convert::plain_group_spec(p);
            let differ = convert::plain_pods_differ(first, &spec, p, theirs.as_ref());
            if let Some(difference) = differ.or_else(|| convert::devices_differ(first, p)) {
                let message = format!(
                    "{difference}; the pods of a group must agree, as muster places them as alike members: delete \
                     the group's pods and create them alike"
                );
                return refuse(self, &message);
            }
        }
        // A template or class not there yet: it waits for them, and is looked at again when
        // they come (`devices_changed`).
        if let Err(message) = self.fill_plain_devices(key, &mut spec, &[first]) {
            return self.waiting(key, "WaitingForDevices", &message, now);
        }
        let mut request = match spec.to_request(&key.name) {
            Ok(r) => r,
            Err(e) => return refuse(self, &e.to_string()),
        };
        // An elastic group holds no more members than it has pods: with `group-min: 1` and one
        // pod it would otherwise hold room for its whole size. Later pods wait, gated.
        request.max_members = request.max_members.min(u32::try_from(live.len()).unwrap_or(u32::MAX));
        if self.ensured.insert(key.clone()) {
            let spec = Box::new(spec.clone());
            self.actions.push(Action::EnsureGroup { key: key.clone(), spec, job_uid: String::new() });
        }
        let needed = spec.members.min;
        if (live.len() as i64) < needed {
            let message = format!(
                "waiting for its pods: {} of the {needed} it needs to start exist; muster holds no room for a group \
                 until they do",
                live.len()
            );
            return self.waiting(key, "WaitingForPods", &message, now);
        }
        self.inputs.push(Input::Submit(GroupSpec {
            key: key.clone(),
            queue: spec.queue.clone(),
            priority_class: spec.priority_class_name.clone(),
            request,
            submitted_at: first.created,
        }));
    }

    /// [`Self::submit_plain`] for a group whose pods name their sets: sized from all its pods,
    /// so queued only once all of them exist.
    fn submit_plain_sets(
        &mut self,
        key: &GroupKey,
        first: &PodView,
        spec: &GroupObjectSpec,
        live: &[PodView],
        now: i64,
    ) {
        let size = spec.members.min;
        if (live.len() as i64) < size {
            let message = format!(
                "waiting for its pods: {} of the {size} it needs to start exist; a group of sets is sized from all \
                 its pods, and muster holds no room for it until they do",
                live.len()
            );
            return self.waiting(key, "WaitingForPods", &message, now);
        }
        let pods: Vec<&PodView> = live.iter().collect();
        let mut spec = match convert::plain_sets_spec(&pods) {
            Ok(spec) => spec,
            Err(message) => {
                self.plain_refused.insert(key.clone());
                return self.event(key, EventType::Warning, "InvalidGroup", &message);
            }
        };
        if let Err(message) = self.fill_plain_devices(key, &mut spec, &pods) {
            return self.waiting(key, "WaitingForDevices", &message, now);
        }
        let request = match spec.to_request(&key.name) {
            Ok(r) => r,
            Err(e) => {
                self.plain_refused.insert(key.clone());
                return self.event(key, EventType::Warning, "InvalidGroup", &e.to_string());
            }
        };
        if let Some(message) = sets_waiting(live, size) {
            return self.waiting(key, "WaitingForPods", &message, now);
        }
        if self.ensured.insert(key.clone()) {
            let spec = Box::new(spec.clone());
            self.actions.push(Action::EnsureGroup { key: key.clone(), spec, job_uid: String::new() });
        }
        self.inputs.push(Input::Submit(GroupSpec {
            key: key.clone(),
            queue: spec.queue.clone(),
            priority_class: spec.priority_class_name.clone(),
            request,
            submitted_at: first.created,
        }));
    }

    /// The status of a plain group not yet in the engine: too few of its pods exist
    /// (`WaitingForPods`), or a template or class its pods' devices need does not
    /// (`WaitingForDevices`).
    pub(super) fn waiting(&mut self, key: &GroupKey, reason: &str, message: &str, now: i64) {
        if reason == "WaitingForDevices" {
            self.awaiting_devices.insert(key.clone());
        }
        let mut st = GroupStatus::default();
        st.set_condition(Cond::Queued, false, reason, message, None, time(now));
        st.message = Some(message.to_string());
        // The same wait again is no news (its condition's time would only churn writes).
        if self.statuses.get(key).and_then(|s| s.message.as_deref()) != Some(message) {
            self.push_status(key, st);
        }
    }
}

/// Why a group of sets whose sets say their sizes (label muster.dev/set-size) must wait for more
/// of its pods, though `size` pods of it exist: a set short of its size, or a set none of whose
/// pods exist yet (the sets seen add up to less than the group's size).
fn sets_waiting(live: &[PodView], size: i64) -> Option<String> {
    let mut sets: BTreeMap<&str, (i64, Option<i64>)> = BTreeMap::new();
    for p in live {
        let Some(set) = p.set.as_deref() else { continue };
        let entry = sets.entry(set.name.as_str()).or_default();
        entry.0 += 1;
        entry.1 = set.size.as_deref().and_then(|v| v.trim().parse().ok());
    }
    let short = sets.iter().find_map(|(name, (have, want))| {
        want.filter(|w| have < w).map(|w| format!("{have} of the {w} pods of its set {name} exist"))
    });
    let named: i64 = sets.values().map(|(have, want)| want.unwrap_or(*have)).sum();
    let names = sets.keys().copied().collect::<Vec<_>>().join(", ");
    let missing =
        (named < size).then(|| format!("only pods of its sets {names} exist, which hold {named} of its {size}"));
    short
        .or(missing)
        .map(|what| format!("waiting for its pods: {what}; muster holds no room for a group until they do"))
}
