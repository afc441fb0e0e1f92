//! The plan as the planner sees it, for people to look at (the controller's dashboard): every
//! group with the nodes and time window it holds (running), has reserved, or would get by the
//! forecast (waiting); the queues with their quotas and usage; the nodes with their
//! capacity and use. Computed on demand from the engine's state; nothing is kept.

use std::collections::BTreeMap;

use muster_graph::AllocId;
use serde::{Deserialize, Serialize};

use super::Engine;
use crate::group::{GroupKey, GroupState};

/// A picture of the plan at `now` (unix seconds).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    pub now: i64,
    pub queues: Vec<QueuePlan>,
    /// Running groups, then waiting ones in the order the scheduler takes them.
    pub groups: Vec<PlannedGroup>,
    pub nodes: Vec<NodePlan>,
    /// The windows of calendar reservations the engine holds, with the nodes their room is on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub set_asides: Vec<super::ReservationWindow>,
}

/// One queue: its groups and what it holds against its quotas. Amounts are in base units (cpu in
/// millicores, memory in bytes, devices in units), by resource name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QueuePlan {
    pub name: String,
    pub pending: u32,
    pub admitted: u32,
    pub usage: BTreeMap<String, u64>,
    pub nominal: BTreeMap<String, u64>,
}

/// One set of a group of sets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlannedSet {
    pub name: String,
    /// The members it asks for at most (its share of the group's max).
    pub members: u32,
    /// Placed whole or not at all, beyond what the group needs to start (a replica of a k of n
    /// gang).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub optional: bool,
}

/// One group that runs or waits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlannedGroup {
    pub key: GroupKey,
    pub queue: String,
    pub state: GroupState,
    pub members: u32,
    /// A group of sets: each set, in member order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sets: Vec<PlannedSet>,
    /// What one member asks of published devices, per device request (`SET: ` first in a group
    /// of sets), as `muster why` says it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<String>,
    /// 1-based position among the waiting groups of its queue; 0 for a running group.
    pub position: usize,
    pub estimated_start: Option<i64>,
    /// Why it is where it is, in plain words.
    pub reason: String,
    /// Where and when it runs or would run; none while the forecast has no estimate.
    pub window: Option<PlanWindow>,
}

/// How sure a window is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum WindowKind {
    /// Holding its nodes now.
    Running,
    /// Nodes held for it from `start`: backfill never delays it.
    Reserved,
    /// Where the forecast starts it (the engine's own cycle run forward); not held.
    Estimated,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanWindow {
    pub kind: WindowKind,
    pub start: i64,
    /// Expected end; none when the group declares no run time (it runs until it finishes).
    pub end: Option<i64>,
    /// The node of each member, in member order.
    pub nodes: Vec<String>,
}

/// One node: capacity and what running groups (and pods muster does not manage) use, by resource.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodePlan {
    pub name: String,
    /// The topology domain just above the node (a rack, a block), if the cluster has levels.
    pub domain: Option<String>,
    pub schedulable: bool,
    pub capacity: BTreeMap<String, u64>,
    pub used: BTreeMap<String, u64>,
}

impl Engine {
    /// The plan at `now`: [`Engine::queue_view`]'s estimates with the windows behind them.
    pub fn plan(&self, now: i64) -> Plan {
        let (view, mut forecast) = self.estimate(now);
        let mut groups: Vec<PlannedGroup> = self
            .groups
            .iter()
            .filter(|(_, g)| g.state.holds_allocation())
            .map(|(key, g)| PlannedGroup {
                key: key.clone(),
                queue: g.spec.queue.clone(),
                state: g.state,
                members: g.member_count(),
                sets: planned_sets(&g.spec.request),
                devices: device_asks(&g.spec.request),
                position: 0,
                estimated_start: None,
                reason: g.reason.clone(),
                window: g.allocation.as_ref().map(|a| PlanWindow {
                    kind: WindowKind::Running,
                    start: a.start,
                    end: bounded(a.end),
                    nodes: a.members.iter().map(|m| m.node.clone()).collect(),
                }),
            })
            .collect();
        for x in view {
            let held = self.reservations.get(&x.key).map(|id| self.reserved_window(*id));
            let window = held.or_else(|| {
                forecast.remove(&x.key).map(|s| PlanWindow {
                    kind: WindowKind::Estimated,
                    start: s.at,
                    end: s.end,
                    nodes: s.nodes,
                })
            });
            // As many as its window places, else as many as it asks for.
            let request = &self.groups[&x.key].spec.request;
            let (asked, sets, devices) = (request.max_members, planned_sets(request), device_asks(request));
            let members = window.as_ref().map_or(asked, |w| u32::try_from(w.nodes.len()).unwrap_or(asked));
            groups.push(PlannedGroup {
                key: x.key,
                queue: x.queue,
                state: x.state,
                members,
                sets,
                devices,
                position: x.position,
                estimated_start: x.estimated_start,
                reason: x.reason,
                window,
            });
        }
        Plan {
            now: now.max(self.now),
            queues: self.queue_plans(),
            groups,
            nodes: self.node_plans(),
            set_asides: self.reservation_windows(),
        }
    }

    fn reserved_window(&self, id: AllocId) -> PlanWindow {
        let a = self.graph.allocation(id).expect("a reservation is on the graph");
        let g = &self.graph.graph;
        PlanWindow {
            kind: WindowKind::Reserved,
            start: a.start,
            end: bounded(a.end),
            nodes: a.members.iter().map(|m| g.node(m.node).name.clone()).collect(),
        }
    }

    fn queue_plans(&self) -> Vec<QueuePlan> {
        self.config
            .queues
            .iter()
            .map(|q| {
                let mine = || self.groups.values().filter(|g| g.spec.queue == q.name);
                let nominal = self
                    .compiled
                    .queues
                    .get(&q.name)
                    .map(|c| c.quotas.iter().map(|(r, quota)| (r.clone(), quota.nominal)).collect());
                QueuePlan {
                    name: q.name.clone(),
                    pending: count(mine().filter(|g| g.state.is_pending())),
                    admitted: count(mine().filter(|g| g.state.holds_allocation())),
                    usage: self.usage.get(&q.name).cloned().unwrap_or_default(),
                    nominal: nominal.unwrap_or_default(),
                }
            })
            .collect()
    }

    fn node_plans(&self) -> Vec<NodePlan> {
        let g = &self.graph.graph;
        let by_name = |amounts: &[u64]| -> BTreeMap<String, u64> {
            g.resources
                .iter()
                .filter_map(|(id, def)| amounts.get(id.index()).map(|a| (def.name.clone(), *a)))
                .filter(|(_, a)| *a > 0)
                .collect()
        };
        g.live_nodes()
            .map(|(_, n)| NodePlan {
                name: n.name.clone(),
                domain: g
                    .vertex(n.vertex)
                    .parent
                    .filter(|p| g.vertex(*p).parent.is_some())
                    .map(|p| g.vertex(p).meta.name.clone()),
                schedulable: n.up && !n.unschedulable,
                capacity: by_name(&n.capacity),
                used: by_name(&n.used),
            })
            .collect()
    }
}

/// An expected end, or none for "until it finishes".
fn bounded(end: i64) -> Option<i64> {
    (end < i64::MAX / 2).then_some(end)
}

fn count<T>(groups: impl Iterator<Item = T>) -> u32 {
    u32::try_from(groups.count()).unwrap_or(u32::MAX)
}

/// What one member asks of published devices, per device request (`SET: ` first in a group of
/// sets).
fn device_asks(request: &muster_graph::GroupRequest) -> Vec<String> {
    let sets = request.sets.len().max(1);
    (0..sets)
        .flat_map(|k| {
            let set = request.sets.get(k).map(|s| format!("{}: ", s.name)).unwrap_or_default();
            request.set_devices_of(k).iter().map(move |d| format!("{set}{}", d.describe()))
        })
        .collect()
}

/// Each set of a group of sets; empty for a group of alike members.
fn planned_sets(request: &muster_graph::GroupRequest) -> Vec<PlannedSet> {
    (request.sets.iter().zip(request.split(request.max_members)).enumerate())
        .map(|(k, (s, members))| PlannedSet { name: s.name.clone(), members, optional: request.is_optional(k) })
        .collect()
}
