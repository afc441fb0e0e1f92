//! batch/v1 Job: one group of the pods that run at once, held with `spec.suspend`.

use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::{Kind, PodSet, Workload};
use crate::external::jobset_owner;

pub const KIND: Kind = Kind {
    group: "batch",
    version: "v1",
    kind: "Job",
    plural: "jobs",
    verbs: &["get", "list", "watch", "patch", "update"],
    why: "suspended by the webhook, resumed (or suspended again on eviction) by muster",
    hold_field: "spec.suspend",
};

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

    fn pod_sets(&self) -> Result<Vec<PodSet<'_>>, String> {
        let spec = self.spec.as_ref().ok_or("spec: the Job has no spec")?;
        let template = spec.template.spec.as_ref().ok_or("spec.template.spec is missing")?;
        Ok(vec![PodSet {
            field: "spec".into(),
            template_field: "spec.template.spec".into(),
            count: members(spec),
            template,
        }])
    }

    fn size_field() -> &'static str {
        "spec.parallelism"
    }

    fn elastic() -> bool {
        true
    }

    /// A JobSet's child Job (its template may carry the queue label) is part of the JobSet's group.
    fn part_of_another(&self) -> bool {
        jobset_owner(self.metadata.owner_references.as_ref()).is_some()
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
