//! A binding the apiserver refused (or a claim muster could not allocate before it): the
//! group is released whole and queued again, so that no part of it runs.

use super::*;

impl<S: Store> Brain<S> {
    pub(super) fn bind_failed(&mut self, key: GroupKey, pod: &str, message: &str, now: i64) {
        warn!(group = %key, pod, "binding refused: {message}");
        let refused: Vec<String> = self
            .binding
            .keys()
            .filter(|uid| self.pods.items.get(*uid).is_some_and(|p| p.name == pod))
            .cloned()
            .collect();
        for uid in refused {
            self.room.gone(&uid, None);
        }
        self.binding.retain(|uid, _| self.pods.items.get(uid).is_none_or(|p| p.name != pod));
        self.event(&key, EventType::Warning, "BindFailed", &format!("pod {pod}: {message}; releasing the group"));
        // Release the whole group and queue it again: never run a part of it.
        let members: Vec<u32> = self
            .engine
            .as_ref()
            .and_then(|e| e.engine().group(&key))
            .and_then(|g| g.allocation.as_ref())
            .map(|a| a.members.iter().map(|m| m.index).collect())
            .unwrap_or_default();
        if !members.is_empty() {
            self.inputs.push(Input::MembersLost { key, members });
            self.flush(now);
        }
    }
}
