//! Kubeflow Trainer TrainJob (`trainer.kubeflow.org/v1alpha1`): not a kind of workload of its
//! own, but what holds one. The trainer makes a JobSet of the TrainJob's name from its training
//! runtime at once, suspended as long as the TrainJob is, and controls it: it suspends the JobSet
//! again if anything else resumes it. So the group is that JobSet's ([`super::jobset`]: its pod
//! sets, its pods, its end), and muster holds and releases it through the TrainJob's
//! `spec.suspend` ([`super::Workload::held_by`]).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use super::{Kind, PodPlace};

pub const KIND: Kind = Kind {
    group: "trainer.kubeflow.org",
    version: "v1alpha1",
    kind: "TrainJob",
    plural: "trainjobs",
    verbs: &["patch"],
    why: "the JobSet the trainer makes for each is one group; muster resumes (or suspends again on eviction) \
          the TrainJob, whose suspension the trainer mirrors onto the JobSet",
    hold_field: "spec.suspend",
    place_of,
    pod_label: None,
};

/// A TrainJob's pods are its JobSet's.
fn place_of(_: &ObjectMeta, _: &OwnerReference) -> Option<PodPlace> {
    None
}
