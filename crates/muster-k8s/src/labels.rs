//! The label, annotation and name contract between users, the webhook and the controller.
//!
//! Users set [`QUEUE`] (and for plain pods [`GROUP`], [`GROUP_SIZE`], optionally [`GROUP_MIN`]).
//! Everything else under `muster.dev/` is muster's own: the webhook refuses it from any other
//! principal, so a tenant cannot forge a placement or mark a job as admitted.

/// The queue a Job or Pod waits in (label).
pub const QUEUE: &str = "muster.dev/queue";
/// The group a plain pod belongs to (label), set by users. A Job's pods belong to their Job's
/// group through their controller reference, not this label.
pub const GROUP: &str = "muster.dev/group";
/// Members of a plain-pod group (label, a positive integer).
pub const GROUP_SIZE: &str = "muster.dev/group-size";
/// Fewest members an elastic plain-pod group may start with (label; default the size).
pub const GROUP_MIN: &str = "muster.dev/group-min";
/// The member set a plain pod belongs to (label), set by users (or, for a LeaderWorkerSet's
/// pods, by muster: `leader` and `worker`): pods of one set ask alike, the sets of a group may
/// differ. A group's pods all name a set, or none does.
pub const SET: &str = "muster.dev/set";
/// Members of a plain pod's set (label, a positive integer; default: as many as the set has pods
/// when the group is queued). Pods of a set beyond its size wait, as those of an elastic group do.
/// The webhook sets it from the PodGroup of a pod in a CompositePodGroup.
pub const SET_SIZE: &str = "muster.dev/set-size";
/// Fewest members of a plain pod's set (label, a whole number from 1 to its size; default the
/// size): the set is elastic, as a group with [`GROUP_MIN`] is, and the group's minimum is every
/// set's.
pub const SET_MIN: &str = "muster.dev/set-min";
/// All members of a plain pod's set within one domain of this topology level, inside the group's
/// own domain (annotation, a level name such as `rack`).
pub const SET_TOPOLOGY: &str = "muster.dev/set-topology";
/// Each replica of a workload's pod set (a JobSet's replicated Job: each child Job) within one
/// domain of this level, inside the group's own domain (pod template annotation, a level name such
/// as `rack`): every replica is a gang of its own.
pub const REPLICA_TOPOLOGY: &str = "muster.dev/replica-topology";
/// The sub-group a plain pod's set belongs to (annotation, a name): the sets naming one sub-group
/// are a gang inside the group, within one domain of [`SUBGROUP_TOPOLOGY`]. The webhook sets it
/// for a PodGroup below a CompositePodGroup with a topology constraint of its own.
pub const SUBGROUP: &str = "muster.dev/subgroup";
/// The level a plain pod's sub-group keeps within (annotation, a level name such as `rack`),
/// inside the group's own domain; every pod of the sub-group says the same.
pub const SUBGROUP_TOPOLOGY: &str = "muster.dev/subgroup-topology";
/// Fewest members an elastic Job may start with (annotation on the Job; default parallelism).
pub const MIN_MEMBERS: &str = "muster.dev/min-members";
/// Expected run time in seconds, for estimated starts and backfill (annotation on Job or Pod).
pub const DURATION: &str = "muster.dev/duration-seconds";
/// All members of a Job's, JobSet's or plain-pod group's within one domain of this topology level
/// (annotation; a level name such as `rack`, `block` or `zone`).
pub const REQUIRED_TOPOLOGY: &str = "muster.dev/required-topology";
/// As [`REQUIRED_TOPOLOGY`], but the group may start spread over the next level out when no domain
/// has room. With [`REQUIRED_TOPOLOGY`] too, it spreads no further than that (enclosing) level.
pub const PREFERRED_TOPOLOGY: &str = "muster.dev/preferred-topology";
/// `"true"`: an elastic workload that may give back pods above its minimum while it runs (muster
/// deletes them) so that the first group in line starts sooner (annotation; default false).
pub const SHRINKABLE: &str = "muster.dev/shrinkable";
/// Set by the webhook when a user unsuspends a suspended managed Job: muster resumes the group in
/// its queue instead of letting the Job bypass it (annotation, an RFC 3339 time).
pub const RESUME_REQUESTED: &str = "muster.dev/resume-requested";
/// Set by the webhook when a user suspends a running managed Job: muster releases the group's
/// resources at once (annotation, an RFC 3339 time). Muster's own suspensions carry none.
pub const SUSPEND_REQUESTED: &str = "muster.dev/suspend-requested";
/// Namespaces labelled `muster.dev/managed: "true"` refuse pods with a preset `nodeName`.
pub const MANAGED_NAMESPACE: &str = "muster.dev/managed";
/// scheduler-plugins' pod-group label, accepted as an alias of [`GROUP`] when enabled.
pub const POD_GROUP_ALIAS: &str = "scheduling.x-k8s.io/pod-group";

/// The scheduler name muster's pods carry.
pub const SCHEDULER_NAME: &str = "muster";
/// The scheduling gate that holds plain pods until their group is admitted.
pub const SCHEDULING_GATE: &str = "muster.dev/admission";
/// On the pod templates of a RayCluster muster holds (set by its webhook), and so on its pods:
/// they are that cluster's group, not a RayJob's (whose clusters' pods look the same).
pub const RAY_CLUSTER: &str = "muster.dev/ray-cluster";
/// The topology levels muster places by (level, node label), largest first: what a topology
/// constraint names, and the node labels that put a node in a domain of each.
pub const TOPOLOGY_LEVELS: [(&str, &str); 3] =
    [("zone", "topology.kubernetes.io/zone"), ("block", "muster.dev/block"), ("rack", "muster.dev/rack")];
/// The level of [`TOPOLOGY_LEVELS`] whose domains the node label `key` names.
pub fn level_of_node_label(key: &str) -> Option<&'static str> {
    TOPOLOGY_LEVELS.iter().find(|(_, k)| *k == key).map(|(l, _)| *l)
}

/// Why the node label `key` is no topology level, for a message about `field`: the fix names the
/// node labels muster places by.
pub fn unknown_node_label(field: &str, key: &str) -> String {
    let known: Vec<String> = TOPOLOGY_LEVELS.iter().map(|(l, k)| format!("{k} ({l})")).collect();
    format!("{field}: {key:?} is no node label muster places by; use one of {}", known.join(", "))
}

/// The prefix of every muster label and annotation.
pub const PREFIX: &str = "muster.dev/";
/// Finalizer on Group objects: muster frees the allocation before the object goes.
pub const FINALIZER: &str = "muster.dev/allocation";
/// The field manager of muster's server-side applies.
pub const FIELD_MANAGER: &str = "muster";

/// Keys under `muster.dev/` that users may set themselves.
pub const USER_KEYS: [&str; 16] = [
    QUEUE,
    GROUP,
    GROUP_SIZE,
    GROUP_MIN,
    SET,
    SET_SIZE,
    SET_MIN,
    SET_TOPOLOGY,
    REPLICA_TOPOLOGY,
    SUBGROUP,
    SUBGROUP_TOPOLOGY,
    MIN_MEMBERS,
    DURATION,
    REQUIRED_TOPOLOGY,
    PREFERRED_TOPOLOGY,
    SHRINKABLE,
];

/// Whether `key` is reserved for muster (under `muster.dev/` and not one of [`USER_KEYS`]).
pub fn is_reserved(key: &str) -> bool {
    key.starts_with(PREFIX) && !USER_KEYS.contains(&key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_keys_are_not_reserved_and_others_under_the_prefix_are() {
        for k in USER_KEYS {
            assert!(!is_reserved(k), "{k}");
        }
        assert!(is_reserved("muster.dev/node"));
        assert!(is_reserved(RESUME_REQUESTED));
        assert!(!is_reserved("app.kubernetes.io/name"));
    }
}
