//! What each node has left as its kubelet counts it: its allocatable less the requests of every
//! pod bound there that still holds them (a pod being deleted too, until it is gone, whichever
//! scheduler placed it) and of the bindings muster has sent and not yet seen land. The engine
//! places a group where room is planned to be; the binder binds a member only where that room is
//! there now. They differ when the engine has placed a group on nodes whose evicted or finished
//! pods are still stopping (a preemption, a reclaim): its members then wait for those pods to go,
//! as kube-scheduler's preemptor waits for its victims, instead of over-committing the node.

use std::collections::{BTreeSet, HashMap};

use muster_queue::GroupKey;

use super::Mirror;
use crate::convert::{NodeView, PodView};

/// Every pod counts one against a node's `pods` allocatable.
const PODS: &str = "pods";

#[derive(Debug, Default)]
pub struct NodeRoom {
    /// By node name: the uids of the pods bound there (any phase; only those still holding
    /// resources are counted) or on their way there.
    on_node: HashMap<String, BTreeSet<String>>,
    /// By pod uid: the node muster sent its binding to, until the pod is seen bound.
    in_flight: HashMap<String, String>,
    /// By node name: the groups with a member waiting there for room.
    waiting: HashMap<String, BTreeSet<GroupKey>>,
}

impl NodeRoom {
    /// Pods `gone` from the cluster and the pod `applied` as now seen: the groups that waited for
    /// room on a node that now has more (a pod there went or stopped holding its resources).
    pub fn pods_changed<'a>(
        &mut self,
        gone: impl Iterator<Item = &'a PodView>,
        applied: Option<&PodView>,
    ) -> BTreeSet<GroupKey> {
        let mut freed: Vec<String> = Vec::new();
        for p in gone {
            self.gone(&p.uid, p.node.as_deref());
            freed.extend(p.node.clone());
        }
        if let Some(p) = applied
            && let Some(node) = &p.node
        {
            self.seen_bound(&p.uid, node);
            if !p.holds_capacity() {
                freed.push(node.clone());
            }
        }
        freed.iter().flat_map(|n| self.freed(n)).collect()
    }

    /// A pod seen bound to `node` (its binding, if muster sent it, has landed).
    fn seen_bound(&mut self, uid: &str, node: &str) {
        self.in_flight.remove(uid);
        self.on_node.entry(node.to_string()).or_default().insert(uid.to_string());
    }

    /// A pod gone from the cluster (from `node`, if it was bound), or its binding refused.
    pub fn gone(&mut self, uid: &str, node: Option<&str>) {
        let sent = self.in_flight.remove(uid);
        for n in sent.as_deref().into_iter().chain(node) {
            if let Some(on) = self.on_node.get_mut(n) {
                on.remove(uid);
                if on.is_empty() {
                    self.on_node.remove(n);
                }
            }
        }
    }

    /// A binding muster sends now.
    pub fn binding(&mut self, uid: &str, node: &str) {
        self.in_flight.insert(uid.to_string(), node.to_string());
        self.on_node.entry(node.to_string()).or_default().insert(uid.to_string());
    }

    /// The groups that waited for room on `node`, which now has more: to look at again.
    fn freed(&mut self, node: &str) -> BTreeSet<GroupKey> {
        self.waiting.remove(node).unwrap_or_default()
    }

    /// `group` has a member waiting for room on `node`.
    pub fn wait(&mut self, node: &str, group: &GroupKey) {
        self.waiting.entry(node.to_string()).or_default().insert(group.clone());
    }

    /// Would a pod asking `requests` fit on `node` now, as its kubelet would admit it? An unknown
    /// node has no room.
    pub fn fits(
        &self,
        nodes: &Mirror<NodeView>,
        pods: &Mirror<PodView>,
        node: &str,
        requests: &[(String, u64)],
    ) -> bool {
        let Some(n) = nodes.items.get(node) else { return false };
        let capacity = |r: &str| -> u64 {
            let pooled = n.spec.pooled.iter().find(|(x, _)| x == r).map(|(_, a)| *a);
            let devices = n.spec.devices.iter().find(|(x, _)| x == r).map(|(_, c)| u64::from(*c));
            pooled.or(devices).unwrap_or(0)
        };
        // What the pods there, and the bindings on their way there, ask.
        let held: Vec<&[(String, u64)]> = self
            .on_node
            .get(node)
            .into_iter()
            .flatten()
            .filter_map(|u| pods.items.get(u))
            .filter(|p| if p.node.is_some() { p.holds_capacity() } else { self.in_flight.contains_key(&p.uid) })
            .map(|p| p.requests.as_slice())
            .collect();
        let taken =
            |r: &str| -> u64 { held.iter().flat_map(|asks| asks.iter()).filter(|(x, _)| x == r).map(|(_, a)| a).sum() };
        let pods_ok = !has(n, PODS) || (held.len() as u64) < capacity(PODS);
        pods_ok && requests.iter().filter(|(_, a)| *a > 0).all(|(r, a)| taken(r) + a <= capacity(r))
    }
}

/// Whether the node states an allocatable of `resource` (a node without a `pods` figure is not
/// limited in pods).
pub(super) fn has(n: &NodeView, resource: &str) -> bool {
    n.spec.pooled.iter().any(|(r, _)| r == resource) || n.spec.devices.iter().any(|(r, _)| r == resource)
}
