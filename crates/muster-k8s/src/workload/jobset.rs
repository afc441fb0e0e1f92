//! JobSet (`jobset.x-k8s.io`): one group of every pod of every child Job, held with
//! `spec.suspend` (the JobSet controller suspends its child Jobs likewise).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::{Kind, PodSet, Workload, job};
use crate::external::JobSet;

pub const KIND: Kind = Kind {
    group: "jobset.x-k8s.io",
    version: "v1alpha2",
    kind: "JobSet",
    plural: "jobsets",
    verbs: &["get", "list", "watch", "patch"],
    why: "one group each (when their CRD is installed), suspended by the webhook and resumed (or suspended again \
          on eviction) by muster",
    hold_field: "spec.suspend",
};

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
                field,
                count: r.replicas().max(0) * job::members(spec).max(0),
                template,
            });
        }
        Ok(sets)
    }

    fn size_field() -> &'static str {
        "spec.replicatedJobs"
    }

    fn elastic() -> bool {
        false
    }
}
