//! muster's Kubernetes API: the cluster-scoped `Queue`, `Cohort` and `Reservation` and the
//! namespaced `Group` custom resources (group `muster.dev`, version `v1alpha1`), their CRDs, and
//! the conversion of their specs into the engine's inputs (`muster_queue::QueueConfig`,
//! `muster_queue::config::CohortConfig`, `muster_queue::ReservationConfig`,
//! `muster_graph::GroupRequest`). Conversion errors
//! are `muster_graph::InputError`s whose path names the field, such as `spec.members.min`.
//!
//! The CRD schema already refuses what it can (enums, minimums, quantity syntax), so the apiserver
//! rejects most bad objects; the conversions check the rest (units of resource names, limits that
//! depend on other fields).

pub mod cohort;
pub mod composite;
pub mod condition;
pub mod dra;
pub mod external;
pub mod group;
pub mod labels;
pub mod lws;
pub mod pod;
mod quantity;
pub mod queue;
pub mod reservation;
#[cfg(any(test, feature = "test-support"))]
pub mod testing;
pub mod unsupported;
pub mod view;
pub mod workload;

pub use cohort::{Cohort, CohortSpec, CohortStatus};
pub use group::{Group, GroupConditionType, GroupSpec, GroupStatus};
/// A Group object's `status.phase` is the engine's state (never `New` or `Deleted`).
pub use muster_queue::GroupState;
pub use quantity::Quantity;
pub use queue::{EstimateAccuracy, Queue, QueueSpec, QueueStatus};
pub use reservation::{Reservation, ReservationSpec, ReservationStatus};

use kube::CustomResourceExt;

/// The API group of every muster resource.
pub const API_GROUP: &str = "muster.dev";

/// The CustomResourceDefinitions of every muster resource as one multi-document YAML stream, as
/// checked in at `deploy/chart/templates/crds.yaml`. Helm keeps them on `helm uninstall`:
/// deleting a CRD deletes every Queue, Cohort, Reservation and Group with it.
pub fn crds_yaml() -> String {
    let mut out = String::from(
        "# muster CustomResourceDefinitions, generated from the Rust types in crates/muster-k8s.\n\
         # Do not edit; regenerate with: MUSTER_UPDATE_CRDS=1 cargo test -p muster-k8s\n\
         # In templates/ rather than crds/ so that `helm upgrade` updates them in place.\n",
    );
    for mut crd in [Queue::crd(), Cohort::crd(), Reservation::crd(), Group::crd()] {
        crd.metadata.annotations = Some([("helm.sh/resource-policy".to_string(), "keep".to_string())].into());
        out.push_str("---\n");
        out.push_str(&serde_yaml_ng::to_string(&crd).expect("a CRD is plain data and always serializes"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHECKED_IN: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/chart/templates/crds.yaml");

    #[test]
    fn checked_in_crds_are_current() {
        let fresh = crds_yaml();
        if std::env::var_os("MUSTER_UPDATE_CRDS").is_some() {
            std::fs::write(CHECKED_IN, &fresh).expect("write deploy/chart/templates/crds.yaml");
            return;
        }
        let old = std::fs::read_to_string(CHECKED_IN).unwrap_or_default();
        assert!(
            old == fresh,
            "deploy/chart/templates/crds.yaml is out of date with the Rust types; run `MUSTER_UPDATE_CRDS=1 cargo test -p muster-k8s` to regenerate it"
        );
    }

    #[test]
    fn crds_have_the_expected_names_scopes_and_subresources() {
        let q = Queue::crd();
        assert_eq!(q.metadata.name.as_deref(), Some("queues.muster.dev"));
        assert_eq!(q.spec.scope, "Cluster");
        let c = Cohort::crd();
        assert_eq!(c.metadata.name.as_deref(), Some("cohorts.muster.dev"));
        assert_eq!(c.spec.scope, "Cluster");
        let r = Reservation::crd();
        assert_eq!(r.metadata.name.as_deref(), Some("reservations.muster.dev"));
        assert_eq!(r.spec.scope, "Cluster");
        let g = Group::crd();
        assert_eq!(g.metadata.name.as_deref(), Some("groups.muster.dev"));
        assert_eq!(g.spec.scope, "Namespaced");
        for crd in [&q, &r, &g] {
            assert_eq!(crd.spec.group, API_GROUP);
            let v = &crd.spec.versions[0];
            assert_eq!(v.name, "v1alpha1");
            assert!(v.subresources.as_ref().and_then(|s| s.status.as_ref()).is_some(), "status subresource");
        }
        let columns: Vec<_> =
            g.spec.versions[0].additional_printer_columns.iter().flatten().map(|c| c.name.as_str()).collect();
        assert_eq!(columns, ["Queue", "Min", "Max", "Phase", "Position", "Estimated Start", "Age"]);
    }
}
