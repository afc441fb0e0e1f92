//! MPIJob (`kubeflow.org/v2beta1`, Kubeflow's mpi-operator): one group of the launcher and every
//! worker, held with `spec.runPolicy.suspend`. While it is suspended the operator creates no
//! worker pods and keeps the launcher's Job suspended; released, it creates both.
//!
//! The launcher counts in the gang: by default (`launcherCreationPolicy: AtStartup`) the operator
//! creates it with the workers, and it fails its first `mpirun` if they are not all there. With
//! `WaitForWorkersReady` it comes once the workers are ready, to the member kept for it.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use super::place::{is_kind, label};
use super::{AddedContainers, Kind, PodPlace, PodSet, Workload, job};
use crate::external::{MPI_JOB_NAME_LABEL, MPI_JOB_ROLE_LABEL, MPI_REPLICA_INDEX_LABEL, MPIJob};

pub const KIND: Kind = Kind {
    group: "kubeflow.org",
    version: "v2beta1",
    kind: "MPIJob",
    plural: "mpijobs",
    verbs: &["list", "watch", "patch"],
    why: "one group each of the launcher and the workers (when their CRD is installed), suspended by the webhook \
          and resumed (or suspended again on eviction) by muster",
    hold_field: "spec.runPolicy.suspend",
    place_of,
    pod_label: None,
};

/// The replica types, in member order, with the role the operator writes on their pods.
const REPLICA_TYPES: [(&str, &str); 2] = [("Launcher", "launcher"), ("Worker", "worker")];

/// The launcher's Job is named `<mpijob>-launcher`.
const LAUNCHER_SUFFIX: &str = "-launcher";

/// A worker (controlled by the MPIJob, numbered by its replica index) or the launcher (through
/// the Job the operator names after the MPIJob), as the operator labels them. The names must
/// agree, so that pods of one's own labelled as another MPIJob's do not join its group.
fn place_of(pod: &ObjectMeta, owner: &OwnerReference) -> Option<PodPlace> {
    let name = label(pod, MPI_JOB_NAME_LABEL)?;
    let index = match label(pod, MPI_JOB_ROLE_LABEL)? {
        "worker" if is_kind(owner, &KIND) && owner.name == name => label(pod, MPI_REPLICA_INDEX_LABEL)?.parse().ok(),
        "launcher" if is_kind(owner, &job::KIND) && owner.name.strip_suffix(LAUNCHER_SUFFIX) == Some(name) => Some(0),
        _ => return None,
    };
    let set = label(pod, MPI_JOB_ROLE_LABEL)?.to_string();
    Some(PodPlace { workload: name.to_string(), set, child: 0, index })
}

impl Workload for MPIJob {
    fn kind() -> &'static Kind {
        &KIND
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn held(&self) -> bool {
        self.spec.run_policy.suspend == Some(true)
    }

    fn finished(&self) -> Option<bool> {
        self.status.as_ref()?.conditions.iter().filter(|c| c.status == "True").find_map(|c| match c.type_.as_str() {
            "Succeeded" => Some(true),
            "Failed" => Some(false),
            _ => None,
        })
    }

    /// The launcher (one pod) and the workers (`replicas`, 0 by default), as the operator runs them.
    fn pod_sets(&self) -> Result<Vec<PodSet<'_>>, String> {
        let specs = &self.spec.mpi_replica_specs;
        if let Some(other) = specs.keys().find(|k| !REPLICA_TYPES.iter().any(|(t, _)| t == k)) {
            return Err(format!(
                "spec.mpiReplicaSpecs.{other}: an MPIJob has only the replica types Launcher and Worker; remove it"
            ));
        }
        let mut sets = Vec::new();
        for (replica_type, role) in REPLICA_TYPES {
            let field = format!("spec.mpiReplicaSpecs.{replica_type}");
            let Some(spec) = specs.get(replica_type) else {
                if replica_type == "Launcher" {
                    return Err(format!("{field} is missing; an MPIJob needs a launcher"));
                }
                continue;
            };
            let pods = match (role, spec.replicas) {
                ("launcher", None | Some(1)) => 1,
                ("launcher", Some(n)) => {
                    return Err(format!("{field}.replicas: {n}; an MPIJob has exactly one launcher, set it to 1"));
                }
                (_, n) => n.map_or(0, i64::from),
            };
            let template = spec.template.spec.as_ref().ok_or(format!("{field}.template.spec is missing"))?;
            sets.push(PodSet {
                template_field: format!("{field}.template.spec"),
                name: role.to_string(),
                children: 1,
                pods,
                template,
                copied_metadata: vec![(format!("{field}.template.metadata"), spec.template.metadata.as_ref())],
                added: AddedContainers::default(),
                field,
            });
        }
        Ok(sets)
    }

    fn size_field() -> &'static str {
        "spec.mpiReplicaSpecs.Worker.replicas"
    }

    fn release_deadline(&self) -> Option<String> {
        self.spec.run_policy.active_deadline_seconds.map(|_| "spec.runPolicy.activeDeadlineSeconds".into())
    }

    fn elastic() -> bool {
        false
    }
}
