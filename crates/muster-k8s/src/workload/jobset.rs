//! JobSet (`jobset.x-k8s.io`): one group of every pod of every child Job, held with
//! `spec.suspend` (the JobSet controller suspends its child Jobs likewise).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use super::place::{controller, is_kind, label};
use super::{AddedContainers, Kind, PodPlace, PodSet, Workload, job, trainjob};
use crate::external::{JOB_INDEX_LABEL, JOBSET_NAME_LABEL, JobSet, REPLICATED_JOB_LABEL};

pub const KIND: Kind = Kind {
    group: "jobset.x-k8s.io",
    version: "v1alpha2",
    kind: "JobSet",
    plural: "jobsets",
    verbs: &["list", "watch", "patch"],
    why: "one group each (when their CRD is installed), suspended by the webhook and resumed (or suspended again \
          on eviction) by muster",
    hold_field: "spec.suspend",
    place_of,
    pod_label: None,
};

/// A pod of a JobSet's child Job: the JobSet and the pod's place in it, from the labels the
/// JobSet controller sets, trusted only when the controlling Job bears the name the JobSet
/// controller gives its children (`<jobset>-<replicated job>-<index>`), so that a Job of one's
/// own labelled as another's child does not join that JobSet's group.
fn place_of(pod: &ObjectMeta, owner: &OwnerReference) -> Option<PodPlace> {
    let (jobset, set, child) =
        (label(pod, JOBSET_NAME_LABEL)?, label(pod, REPLICATED_JOB_LABEL)?, label(pod, JOB_INDEX_LABEL)?);
    if !is_kind(owner, &job::KIND) || owner.name != format!("{jobset}-{set}-{child}") {
        return None;
    }
    Some(PodPlace {
        workload: jobset.to_string(),
        set: set.to_string(),
        child: child.parse().ok()?,
        index: job::completion_index(pod),
    })
}

impl Workload for JobSet {
    fn kind() -> &'static Kind {
        &KIND
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn held(&self) -> bool {
        self.spec.suspend == Some(true)
    }

    fn finished(&self) -> Option<bool> {
        self.status.as_ref()?.conditions.iter().filter(|c| c.status == "True").find_map(|c| match c.type_.as_str() {
            "Completed" => Some(true),
            "Failed" => Some(false),
            _ => None,
        })
    }

    /// A replicated Job is one pod set: its replicas times the pods of one child Job.
    fn pod_sets(&self) -> Result<Vec<PodSet<'_>>, String> {
        let mut sets = Vec::new();
        for (i, r) in self.spec.replicated_jobs.iter().enumerate() {
            let field = format!("spec.replicatedJobs[{i}]");
            let spec = r.template.spec.as_ref().ok_or(format!("{field}.template.spec is missing"))?;
            let template =
                spec.template.spec.as_ref().ok_or(format!("{field}.template.spec.template.spec is missing"))?;
            sets.push(PodSet {
                template_field: format!("{field}.template.spec.template.spec"),
                name: r.name.clone(),
                children: r.replicas(),
                pods: job::members(spec),
                template,
                copied_metadata: vec![
                    (format!("{field}.template.metadata"), r.template.metadata.as_ref()),
                    (format!("{field}.template.spec.template.metadata"), spec.template.metadata.as_ref()),
                ],
                added: AddedContainers::default(),
                field,
            });
        }
        Ok(sets)
    }

    fn size_field() -> &'static str {
        "spec.replicatedJobs"
    }

    /// A child Job's deadline counts from the child's creation, when the JobSet is released.
    fn release_deadline(&self) -> Option<String> {
        let i = self
            .spec
            .replicated_jobs
            .iter()
            .position(|r| r.template.spec.as_ref().is_some_and(|s| s.active_deadline_seconds.is_some()))?;
        Some(format!("spec.replicatedJobs[{i}].template.spec.activeDeadlineSeconds"))
    }

    /// A TrainJob's JobSet is held through the TrainJob.
    fn held_by(&self) -> &'static Kind {
        match controller(&self.metadata) {
            Some(owner) if is_kind(owner, &trainjob::KIND) => &trainjob::KIND,
            _ => &KIND,
        }
    }

    fn elastic() -> bool {
        false
    }
}
