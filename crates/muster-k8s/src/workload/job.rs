//! batch/v1 Job: one group of the pods that run at once, held with `spec.suspend`.

use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use super::place::{controller, is_kind, label};
use super::{AddedContainers, HELD_KINDS, Kind, PodPlace, PodSet, Workload};

/// The label (and annotation) the Job controller gives an Indexed Job's pods: their index.
pub const COMPLETION_INDEX: &str = "batch.kubernetes.io/job-completion-index";

pub const KIND: Kind = Kind {
    group: "batch",
    version: "v1",
    kind: "Job",
    plural: "jobs",
    verbs: &["list", "watch", "patch"],
    why: "suspended by the webhook, resumed (or suspended again on eviction) by muster",
    hold_field: "spec.suspend",
    place_of,
    pod_label: None,
};

/// A pod the Job controller made: the Job's, numbered by its completion index (Indexed Jobs).
fn place_of(pod: &ObjectMeta, owner: &OwnerReference) -> Option<PodPlace> {
    is_kind(owner, &KIND).then(|| PodPlace {
        workload: owner.name.clone(),
        set: String::new(),
        child: 0,
        index: completion_index(pod),
    })
}

/// An Indexed Job's pod's completion index.
pub fn completion_index(pod: &ObjectMeta) -> Option<u32> {
    let annotation = pod.annotations.as_ref().and_then(|a| a.get(COMPLETION_INDEX)).map(String::as_str);
    annotation.or_else(|| label(pod, COMPLETION_INDEX))?.parse().ok()
}

/// Pods of a Job that run at once, its group's members: `spec.parallelism` (default 1), but
/// never more than `spec.completions`. Holding room for more would keep nodes idle for pods the
/// Job controller never creates.
pub fn members(spec: &JobSpec) -> i64 {
    let parallelism = spec.parallelism.map_or(1, i64::from);
    spec.completions.map_or(parallelism, |c| parallelism.min(i64::from(c)))
}

impl Workload for Job {
    fn kind() -> &'static Kind {
        &KIND
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn held(&self) -> bool {
        self.spec.as_ref().and_then(|s| s.suspend) == Some(true)
    }

    fn finished(&self) -> Option<bool> {
        self.status.as_ref()?.conditions.iter().flatten().filter(|c| c.status == "True").find_map(|c| {
            match c.type_.as_str() {
                "Complete" => Some(true),
                "Failed" => Some(false),
                _ => None,
            }
        })
    }

    /// `spec.completions` (distinct indexes for an Indexed Job); without it (a work queue), the
    /// first success once every pod has ended. A success policy may end a Job sooner: then its
    /// Complete condition tells.
    fn succeeded_pods_to_finish(&self) -> Option<u32> {
        let completions = self.spec.as_ref()?.completions;
        Some(completions.map_or(1, |c| u32::try_from(c).unwrap_or(0).max(1)))
    }

    fn pod_sets(&self) -> Result<Vec<PodSet<'_>>, String> {
        let spec = self.spec.as_ref().ok_or("spec: the Job has no spec")?;
        let template = spec.template.spec.as_ref().ok_or("spec.template.spec is missing")?;
        Ok(vec![PodSet {
            field: "spec".into(),
            template_field: "spec.template.spec".into(),
            name: String::new(),
            children: 1,
            pods: members(spec),
            template,
            copied_metadata: vec![("spec.template.metadata".into(), spec.template.metadata.as_ref())],
            added: AddedContainers::default(),
        }])
    }

    fn size_field() -> &'static str {
        "spec.parallelism"
    }

    fn release_deadline(&self) -> Option<String> {
        let deadline = self.spec.as_ref()?.active_deadline_seconds;
        deadline.map(|_| "spec.activeDeadlineSeconds".into())
    }

    fn elastic() -> bool {
        true
    }

    /// A Job another held kind controls (a JobSet's child, an MPIJob's launcher; its template
    /// may carry the queue label) is part of that workload's group.
    fn resizes_while_placed() -> bool {
        true
    }

    fn part_of_another(&self) -> bool {
        controller(&self.metadata).is_some_and(|o| HELD_KINDS.iter().any(|k| **k != KIND && is_kind(o, k)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(parallelism: Option<i32>, completions: Option<i32>) -> JobSpec {
        JobSpec { parallelism, completions, ..JobSpec::default() }
    }

    #[test]
    fn members_are_parallelism_capped_by_completions() {
        assert_eq!(members(&spec(Some(4), Some(2))), 2, "only two pods will ever exist");
        assert_eq!(members(&spec(Some(4), Some(10))), 4, "later pods reuse the members");
        assert_eq!(members(&spec(Some(4), None)), 4);
        assert_eq!(members(&spec(None, None)), 1, "parallelism defaults to 1");
        assert_eq!(members(&spec(Some(0), Some(3))), 0, "the caller refuses an empty group");
    }
}
