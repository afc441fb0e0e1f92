//! What the end-to-end tests on a real control plane share: the cluster they run against and the
//! identities they act as (this file), waiting for a condition or checking one holds
//! ([`wait`]), namespaces ([`namespaces`]), Jobs and pods to send ([`manifests`]), Groups, pods
//! and events to read ([`objects`]), and a test of several checks that goes on past a failed one
//! ([`parts`]).
//!
//! Each test runs against the cluster of `MUSTER_E2E_KUBECONFIG` (`make e2e` sets it through
//! `rust_e2e` in hack/e2e/muster.sh); without it the test says so and checks nothing.
#![allow(dead_code)] // each test file uses its own part

pub mod manifests;
pub mod namespaces;
pub mod objects;
pub mod parts;
pub mod wait;

use std::path::PathBuf;

use kube::Client;

pub use namespaces::fresh_namespace;
pub use wait::eventually;

const KUBECONFIG: &str = "MUSTER_E2E_KUBECONFIG";
/// The kubeconfig of muster's own identity (its ServiceAccount's token), which `muster install`
/// writes and `rust_e2e` passes on.
const CONTROLLER_KUBECONFIG: &str = "MUSTER_E2E_CONTROLLER_KUBECONFIG";

/// A client for the harness cluster as its admin, or None (and a line saying why) when none is
/// given.
pub async fn client() -> Option<Client> {
    let Some(path) = std::env::var_os(KUBECONFIG).map(PathBuf::from) else {
        eprintln!("skipped: set {KUBECONFIG} to a harness cluster's kubeconfig (make e2e does)");
        return None;
    };
    let (client, _) = muster_harness::cluster::client(&path).await.expect("a client for the harness cluster");
    Some(client)
}

/// Someone a test acts as besides the admin, through the admin's right to impersonate.
#[derive(Debug, Clone, Copy)]
pub enum Identity<'a> {
    /// A user, as `kubectl --as=NAME --as-group=system:authenticated`.
    User(&'a str),
    /// A namespace's ServiceAccount, with the groups the apiserver gives its tokens.
    ServiceAccount { namespace: &'a str, name: &'a str },
}

impl Identity<'_> {
    fn user_and_groups(self) -> (String, Vec<String>) {
        match self {
            Identity::User(name) => (name.to_string(), vec!["system:authenticated".into()]),
            Identity::ServiceAccount { namespace, name } => (
                format!("system:serviceaccount:{namespace}:{name}"),
                vec![
                    "system:serviceaccounts".into(),
                    format!("system:serviceaccounts:{namespace}"),
                    "system:authenticated".into(),
                ],
            ),
        }
    }
}

/// A client of the harness cluster acting as `who`. Call it after [`client`] has said the
/// cluster is given.
pub async fn client_as(who: Identity<'_>) -> Client {
    let path = PathBuf::from(std::env::var_os(KUBECONFIG).expect("MUSTER_E2E_KUBECONFIG is set"));
    let (_, mut config) = muster_harness::cluster::client(&path).await.expect("a client for the harness cluster");
    let (user, groups) = who.user_and_groups();
    config.auth_info.impersonate = Some(user);
    config.auth_info.impersonate_groups = Some(groups);
    Client::try_from(config).expect("an impersonating client")
}

/// A client acting as muster's controller itself, with the token of muster's ServiceAccount.
pub async fn muster_client() -> Client {
    let path = std::env::var_os(CONTROLLER_KUBECONFIG)
        .map(PathBuf::from)
        .unwrap_or_else(|| panic!("set {CONTROLLER_KUBECONFIG} to muster's controller.kubeconfig (rust_e2e does)"));
    let (client, _) = muster_harness::cluster::client(&path).await.expect("a client with muster's identity");
    client
}
