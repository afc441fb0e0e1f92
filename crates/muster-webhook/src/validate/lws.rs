//! The rules for LeaderWorkerSets and their pods: a queued LeaderWorkerSet's every group must be
//! able to start whole (`muster_k8s::lws::check`) and fit its queue, it stays in that queue, and
//! each of its pods joins the group of its leader with the size LWS gives it.

use k8s_openapi::api::core::v1::Pod;
use muster_k8s::labels::{GROUP, GROUP_MIN, GROUP_SIZE, QUEUE, SET};
use muster_k8s::lws::{self, LeaderWorkerSet, SIZE_ANNOTATION, SIZE_FIELD};

use super::{Checker, Labels};
use crate::fit::{member_requests, never_fits};
use crate::object::{get, label_field};
use crate::state::ClusterState;

/// Keys that would name or size a LeaderWorkerSet's groups otherwise than LWS does.
const GANG_KEYS: [&str; 4] = [GROUP, GROUP_SIZE, GROUP_MIN, SET];

impl<S: ClusterState> Checker<'_, S> {
    pub(super) async fn leader_worker_set(&mut self, new: &LeaderWorkerSet, old: Option<&LeaderWorkerSet>) {
        let queue = get(new.metadata.labels.as_ref(), QUEUE);
        if let Some(old) = old {
            self.queue_change("LeaderWorkerSet", get(old.metadata.labels.as_ref(), QUEUE), queue);
        }
        let Some(queue) = queue else { return };
        self.reserved(
            "metadata.labels",
            old.and_then(|o| o.metadata.labels.as_ref()),
            new.metadata.labels.as_ref(),
            &|_| false,
        );
        let errors = lws::check(new);
        let whole = errors.is_empty();
        self.out.extend(errors);
        let old_templates = old.map(|o| o.templates()).unwrap_or_default();
        for (field, template) in new.templates() {
            if let Some(spec) = template.spec.as_ref() {
                let was = old_templates.iter().find(|(f, _)| *f == field).and_then(|(_, t)| t.spec.as_ref());
                self.unsupported(spec, &format!("{field}.spec"), was);
            }
            let meta = template.metadata.as_ref();
            let (labels, annotations) =
                (meta.and_then(|m| m.labels.as_ref()), meta.and_then(|m| m.annotations.as_ref()));
            self.reserved(&format!("{field}.metadata.labels"), None, labels, &|_| false);
            self.reserved(&format!("{field}.metadata.annotations"), None, annotations, &|_| false);
            for key in GANG_KEYS.iter().filter(|k| get(labels, k).is_some()) {
                self.refuse(format!(
                    "{field}.metadata.labels[{key}]: muster makes each group of a LeaderWorkerSet one gang, named \
                     after its leader pod and sized by {SIZE_FIELD}; remove the label"
                ));
            }
            self.duration(annotations);
        }
        let Some(spec) = self.queue(queue, &label_field(QUEUE)).await else { return };
        // `whole`: lws::check counted every template's requests.
        if let Some(asks) = lws::group_asks(new).filter(|_| whole) {
            let parts: Vec<_> = asks.iter().map(|(pods, asks)| (*pods, member_requests(asks))).collect();
            let fix = format!("lower {SIZE_FIELD} or the pods' resource requests, or use a queue with a larger quota");
            if let Some(m) = never_fits(queue, &spec, &parts, SIZE_FIELD, &fix) {
                self.refuse(m);
            }
        }
    }

    /// A queued pod of a LeaderWorkerSet is in its leader's group, sized as LWS says (the mutating
    /// webhook sets both labels).
    pub(super) fn leader_worker_set_pod(&mut self, pod: &Pod, labels: Option<&Labels>) {
        if get(labels, QUEUE).is_none() {
            return;
        }
        let gang = match lws::pod_gang(&pod.metadata) {
            None => return,
            Some(Err(e)) => return self.refuse(e),
            Some(Ok(gang)) => gang,
        };
        if get(labels, GROUP) != Some(gang.group.as_str()) {
            self.refuse(format!(
                "{}: a pod of a LeaderWorkerSet is in the group of its leader, {:?}; remove the label (muster's \
                 mutating webhook sets it)",
                label_field(GROUP),
                gang.group
            ));
        }
        if get(labels, SET).is_some_and(|s| s != gang.set) {
            self.refuse(format!(
                "{}: a pod of a LeaderWorkerSet is its group's {}; remove the label (muster's mutating webhook sets \
                 it)",
                label_field(SET),
                gang.set
            ));
        }
        let source = format!("annotation {SIZE_ANNOTATION} ({})", gang.size);
        self.size_from_pod_group(get(labels, GROUP_SIZE), gang.size, &source);
    }
}
