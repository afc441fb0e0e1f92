//! The shape of a batch/v1 Job's group, computed once for the webhook and the controller.

use k8s_openapi::api::batch::v1::JobSpec;

/// Pods of a Job that run at once, its group's members: `spec.parallelism` (default 1), but
/// never more than `spec.completions`. Holding room for more would keep nodes idle for pods the
/// Job controller never creates.
pub fn members(spec: &JobSpec) -> i64 {
    let parallelism = spec.parallelism.map_or(1, i64::from);
    spec.completions.map_or(parallelism, |c| parallelism.min(i64::from(c)))
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
