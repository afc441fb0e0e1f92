//! Who muster is, and which optional inputs the webhook accepts.

/// The service account muster's controller (and webhook) runs as.
pub const DEFAULT_CONTROLLER_USER: &str = "system:serviceaccount:muster-system:muster";
/// The Job controller of kube-controller-manager (with `--use-service-account-credentials`).
pub const DEFAULT_JOB_CONTROLLER_USER: &str = "system:serviceaccount:kube-system:job-controller";
/// The garbage collector of kube-controller-manager: deletes the Group of a Job that is gone.
pub const DEFAULT_GARBAGE_COLLECTOR_USER: &str = "system:serviceaccount:kube-system:generic-garbage-collector";
/// The namespace controller of kube-controller-manager: deletes what a deleted namespace holds.
pub const DEFAULT_NAMESPACE_CONTROLLER_USER: &str = "system:serviceaccount:kube-system:namespace-controller";
/// The queue of pods that carry only scheduler-plugins' pod-group label.
pub const DEFAULT_ALIAS_QUEUE: &str = "default";

/// The webhook's configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookConfig {
    /// muster's own principals: they may set reserved keys, resume jobs, bind pods, own Groups.
    pub controller_users: Vec<String>,
    /// The only principal that may create pods controlled by a Job.
    pub job_controller_user: String,
    /// Treat `scheduling.x-k8s.io/pod-group` as `muster.dev/group` on plain pods.
    pub accept_pod_group_alias: bool,
    /// The queue of alias pods without a `muster.dev/queue` label.
    pub alias_queue: String,
}

impl Default for WebhookConfig {
    fn default() -> Self {
        WebhookConfig {
            controller_users: vec![DEFAULT_CONTROLLER_USER.to_string()],
            job_controller_user: DEFAULT_JOB_CONTROLLER_USER.to_string(),
            accept_pod_group_alias: false,
            alias_queue: DEFAULT_ALIAS_QUEUE.to_string(),
        }
    }
}

impl WebhookConfig {
    /// Whether `user` is muster itself.
    pub fn is_muster(&self, user: &str) -> bool {
        self.controller_users.iter().any(|u| u == user)
    }

    /// Whether `user` may delete Group objects: muster, the garbage collector and the namespace
    /// controller. The latter two are kube-controller-manager's own identities (with
    /// `--use-service-account-credentials`), fixed like the registration's match condition that
    /// spares their deletes a webhook call.
    pub fn may_delete_groups(&self, user: &str) -> bool {
        self.is_muster(user) || user == DEFAULT_GARBAGE_COLLECTOR_USER || user == DEFAULT_NAMESPACE_CONTROLLER_USER
    }
}
