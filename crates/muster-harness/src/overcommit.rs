//! A continuous over-commit checker for the e2e tests (`muster-harness overcommit`), written
//! apart from muster's own code: every interval it lists the nodes and the pods bound to them
//! (spec.nodeName set, phase neither Succeeded nor Failed, also pods being deleted: they hold
//! their resources until they are gone) and checks, for every node and every resource, that the
//! requests of its pods add up to at most the node's status.allocatable. A pod's requests are
//! counted as the kubelet counts them ([`requests`]). Each violation (node, resource, pods) is
//! logged once, when first seen, with the sum, the allocatable and every pod's request; the state
//! file holds a JSON summary (polls, errors, violations) rewritten after every poll, as
//! `overcommit_verdict` in hack/e2e/muster.sh reads it. It runs until SIGTERM or SIGINT.

pub mod quantity;
pub mod requests;

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};
use quantity::{Nanos, NotAQuantity, nanos, show};
use requests::{Amounts, pod_requests};
use serde::Serialize;
use tokio::signal::unix::{SignalKind, signal};

use crate::{Error, Result};

/// A node with more of a resource requested by its pods than it has allocatable.
#[derive(Debug, PartialEq)]
pub struct Violation {
    pub node: String,
    pub resource: String,
    pub requested: Nanos,
    pub allocatable: Nanos,
    /// namespace/name and request of each pod asking for the resource.
    pub pods: Vec<(String, Nanos)>,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let r = &self.resource;
        let pods: Vec<String> = self.pods.iter().map(|(p, v)| format!("{p} {}", show(r, *v))).collect();
        write!(
            f,
            "node {}: {r} requested {} > allocatable {}: {}",
            self.node,
            show(r, self.requested),
            show(r, self.allocatable),
            pods.join(", ")
        )
    }
}

/// Bound, and neither Succeeded nor Failed: the pod holds its requests on its node.
fn holds_resources(p: &Pod) -> bool {
    let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
    p.spec.as_ref().is_some_and(|s| s.node_name.is_some()) && !matches!(phase, Some("Succeeded" | "Failed"))
}

/// The nodes over their allocatable, by node and resource.
pub fn violations(nodes: &[Node], pods: &[Pod]) -> std::result::Result<Vec<Violation>, NotAQuantity> {
    let mut allocatable: BTreeMap<String, Amounts> = BTreeMap::new();
    for n in nodes {
        let alloc = n.status.as_ref().and_then(|s| s.allocatable.as_ref());
        let amounts = alloc
            .into_iter()
            .flatten()
            .map(|(k, q)| Ok((k.clone(), nanos(&q.0)?)))
            .collect::<std::result::Result<_, _>>()?;
        allocatable.insert(n.name_any(), amounts);
    }
    let mut on: BTreeMap<String, Vec<(String, Amounts)>> = BTreeMap::new();
    for p in pods.iter().filter(|p| holds_resources(p)) {
        let Some(spec) = p.spec.as_ref() else { continue };
        let node = spec.node_name.clone().unwrap_or_default();
        if !allocatable.contains_key(&node) {
            continue; // a node that is gone: nothing to over-commit
        }
        let name = format!("{}/{}", p.namespace().unwrap_or_default(), p.name_any());
        on.entry(node).or_default().push((name, pod_requests(spec)?));
    }
    let mut found = Vec::new();
    for (node, members) in on {
        let mut total = Amounts::new();
        for (_, r) in &members {
            for (k, v) in r {
                *total.entry(k.clone()).or_default() += v;
            }
        }
        for (resource, requested) in total {
            let have = allocatable[&node].get(&resource).copied().unwrap_or(0);
            if requested > have {
                let mut pods: Vec<(String, Nanos)> = members
                    .iter()
                    .filter_map(|(n, r)| r.get(&resource).filter(|v| **v != 0).map(|v| (n.clone(), *v)))
                    .collect();
                pods.sort();
                found.push(Violation { node: node.clone(), resource, requested, allocatable: have, pods });
            }
        }
    }
    Ok(found)
}

/// What the state file holds, as hack/e2e/overcommit.py writes it.
#[derive(Debug, Default, Serialize)]
pub struct State {
    pub polls: u64,
    pub errors: u64,
    /// Distinct violations seen (node, resource and the pods involved).
    pub violations: u64,
    pub polls_with_violations: u64,
    pub last_error: String,
}

pub struct Options {
    pub kubeconfig: PathBuf,
    pub interval: Duration,
    pub log: Option<PathBuf>,
    pub state: Option<PathBuf>,
}

/// Checks every `interval` until SIGTERM or SIGINT; an apiserver busy or restarting is counted as
/// an error and the poll retried.
pub async fn watch(opts: &Options) -> Result<()> {
    let (client, _) = crate::cluster::client(&opts.kubeconfig).await?;
    let mut log = match &opts.log {
        Some(path) => {
            Some(std::fs::OpenOptions::new().create(true).append(true).open(path).map_err(|e| Error::file(path, e))?)
        }
        None => None,
    };
    let mut term = signal(SignalKind::terminate()).map_err(|e| Error::Input(format!("cannot watch SIGTERM: {e}")))?;
    let mut int = signal(SignalKind::interrupt()).map_err(|e| Error::Input(format!("cannot watch SIGINT: {e}")))?;
    let mut state = State::default();
    let mut seen: BTreeSet<(String, String, Vec<String>)> = BTreeSet::new();
    let mut ticks = tokio::time::interval(opts.interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = term.recv() => break,
            _ = int.recv() => break,
            _ = ticks.tick() => {}
        }
        match poll(&client).await {
            Ok(found) => {
                state.polls += 1;
                state.polls_with_violations += u64::from(!found.is_empty());
                for v in found {
                    let key = (v.node.clone(), v.resource.clone(), v.pods.iter().map(|(p, _)| p.clone()).collect());
                    if seen.insert(key) {
                        state.violations += 1;
                        let line = format!("{} {v}", clock());
                        eprintln!("  !!   over-commit: {line}");
                        if let Some(f) = log.as_mut() {
                            writeln!(f, "{line}").map_err(|e| Error::Input(format!("cannot write the log: {e}")))?;
                        }
                    }
                }
            }
            Err(e) => {
                state.errors += 1;
                state.last_error = e;
            }
        }
        write_state(opts, &state)?;
    }
    write_state(opts, &state)
}

/// One look at the cluster: pods first, so that a pod listed is bound to a node that existed
/// when the nodes are read.
async fn poll(client: &Client) -> std::result::Result<Vec<Violation>, String> {
    let bound = ListParams::default().fields("spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed");
    let pods = Api::<Pod>::all(client.clone()).list(&bound).await.map_err(|e| format!("listing pods: {e}"))?;
    let nodes = Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map_err(|e| format!("listing nodes: {e}"))?;
    violations(&nodes.items, &pods.items).map_err(|e| e.to_string())
}

/// Replaces the state file whole (a reader never sees half of it).
fn write_state(opts: &Options, state: &State) -> Result<()> {
    let Some(path) = &opts.state else { return Ok(()) };
    let tmp = path.with_extension("tmp");
    let text = serde_json::to_string(state).map_err(|e| Error::file(path, e))?;
    std::fs::write(&tmp, text).map_err(|e| Error::file(&tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| Error::file(path, e))
}

/// HH:MM:SS (UTC), for the log.
fn clock() -> String {
    let s = crate::cluster::now() as u64 % 86_400;
    format!("{:02}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn node() -> Node {
        serde_json::from_value(
            json!({"metadata": {"name": "n"}, "status": {"allocatable": {"cpu": "8", "memory": "1Gi", "pods": "110"}}}),
        )
        .unwrap()
    }

    fn pod(name: &str, cpu: &str, phase: &str) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ns"},
            "spec": {"nodeName": "n", "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]},
            "status": {"phase": phase}
        }))
        .unwrap()
    }

    #[test]
    fn more_requested_than_allocatable_is_a_violation_and_finished_pods_hold_nothing() {
        let found =
            violations(&[node()], &[pod("a", "7", "Running"), pod("b", "1.5", "Pending"), pod("c", "4", "Succeeded")])
                .unwrap();
        assert_eq!(found.len(), 1, "{found:?}");
        let v = &found[0];
        assert_eq!((v.node.as_str(), v.resource.as_str(), v.requested), ("n", "cpu", nanos("8.5").unwrap()));
        assert_eq!(v.pods, vec![("ns/a".to_string(), 7 * quantity::ONE), ("ns/b".to_string(), nanos("1.5").unwrap())]);
        assert_eq!(v.to_string(), "node n: cpu requested 8.5 > allocatable 8: ns/a 7, ns/b 1.5");
    }

    #[test]
    fn exactly_allocatable_is_not() {
        assert!(violations(&[node()], &[pod("a", "7", "Running"), pod("b", "1", "Running")]).unwrap().is_empty());
    }
}
