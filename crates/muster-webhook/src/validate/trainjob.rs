//! The rules for TrainJobs in a queue. The group is the JobSet the trainer makes (checked as a
//! JobSet when the trainer creates it); the TrainJob must hold it: created suspended, its JobSet
//! in the same queue, and its suspension left to muster (the trainer mirrors it onto the JobSet).

use muster_k8s::external::{JobSet, TrainJob};
use muster_k8s::labels::QUEUE;
use muster_k8s::workload::trainjob;

use super::Checker;
use crate::object::{get, label_field};
use crate::state::ClusterState;

/// Where a TrainJob names its JobSet's labels.
const JOBSET_LABELS: &str = "spec.labels";

impl<S: ClusterState> Checker<'_, S> {
    pub(super) async fn train_job(&mut self, new: &TrainJob, old: Option<&TrainJob>) {
        let queue = get(new.metadata.labels.as_ref(), QUEUE);
        let old_labels = old.and_then(|o| o.metadata.labels.as_ref());
        if old.is_some() {
            self.queue_change("TrainJob", get(old_labels, QUEUE), queue);
        }
        let Some(queue) = queue else { return };
        let field = trainjob::KIND.hold_field;
        self.reserved("metadata.labels", old_labels, new.metadata.labels.as_ref(), &|_| false);
        let old_jobset_labels = old.and_then(|o| o.spec.labels.as_ref());
        self.reserved(JOBSET_LABELS, old_jobset_labels, new.spec.labels.as_ref(), &|_| false);
        if get(new.spec.labels.as_ref(), QUEUE) != Some(queue) {
            self.refuse(format!(
                "{JOBSET_LABELS}[{QUEUE}]: the JobSet of a TrainJob in queue {queue} is its group, in the same \
                 queue; set it to {queue} (muster's mutating webhook does)"
            ));
        }
        let held = new.spec.suspend == Some(true);
        match old {
            None => {
                if !held {
                    self.refuse(format!(
                        "{field}: a TrainJob in queue {queue} must be created suspended, so that muster starts it \
                         when the whole group fits; remove {field}: false (muster's mutating webhook sets it to true)"
                    ));
                }
                self.group_name_free::<JobSet>(&new.metadata).await;
                self.queue(queue, &label_field(QUEUE)).await;
            }
            Some(old) if (old.spec.suspend == Some(true)) != held => self.refuse(format!(
                "{field}: muster resumes a TrainJob in queue {queue} once its whole group is placed, and suspends it \
                 to evict it; suspending or resuming it yourself is not supported yet: delete the TrainJob to \
                 withdraw it"
            )),
            Some(old) if old.spec.rest != new.spec.rest => self.running_unchanged(new).await,
            Some(_) => {}
        }
    }

    /// A running TrainJob's JobSet cannot take a change of its pod templates (the JobSet webhook
    /// refuses it once the JobSet ran), and the trainer applies every change with the suspension
    /// muster evicts it by: after one, muster could no longer evict it.
    async fn running_unchanged(&mut self, tj: &TrainJob) {
        let name = tj.metadata.name.as_deref().unwrap_or("");
        if let Some(phase) = self.placed_phase(name, "spec").await {
            self.refuse(format!(
                "spec: TrainJob {name} runs (its Group is {phase:?}), and after a change the trainer could no longer \
                 suspend its JobSet, so muster could not evict it; delete the TrainJob and create it again with the \
                 change"
            ));
        }
    }
}
