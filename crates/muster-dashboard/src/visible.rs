//! What one viewer sees of the plan: the groups of the namespaces they may list groups in, and
//! the queues and nodes only if they may list those.

use std::collections::BTreeSet;

use muster_queue::Plan;

/// The namespaces whose groups a viewer may see.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Namespaces {
    All,
    Only(BTreeSet<String>),
}

impl Namespaces {
    pub fn contains(&self, namespace: &str) -> bool {
        match self {
            Namespaces::All => true,
            Namespaces::Only(set) => set.contains(namespace),
        }
    }
}

/// Who is looking, and what they may see.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Viewer {
    /// The user's name as the API server knows it; empty on loopback.
    pub name: String,
    pub namespaces: Namespaces,
    pub queues: bool,
    pub nodes: bool,
}

impl Viewer {
    /// Everything: the dashboard on loopback, where only the machine's own users reach it.
    pub fn everything() -> Self {
        Viewer { name: String::new(), namespaces: Namespaces::All, queues: true, nodes: true }
    }

    /// The part of `plan` this viewer may see. A group's nodes stay on its window (they are part
    /// of the group); the node table, capacities and calendar reservations need the right to list
    /// nodes.
    pub fn visible(&self, plan: &Plan) -> Plan {
        Plan {
            now: plan.now,
            queues: if self.queues { plan.queues.clone() } else { Vec::new() },
            groups: plan.groups.iter().filter(|g| self.namespaces.contains(&g.key.namespace)).cloned().collect(),
            nodes: if self.nodes { plan.nodes.clone() } else { Vec::new() },
            // Calendar reservations say which nodes are set aside for whom: as much as the nodes.
            set_asides: if self.nodes { plan.set_asides.clone() } else { Vec::new() },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use muster_queue::{GroupKey, GroupState, NodePlan, PlannedGroup, QueuePlan, ReservationWindow};

    pub(crate) fn group(namespace: &str, name: &str) -> PlannedGroup {
        PlannedGroup {
            key: GroupKey { namespace: namespace.into(), name: name.into() },
            queue: "q".into(),
            state: GroupState::Queued,
            members: 1,
            sets: vec![],
            devices: vec![],
            position: 1,
            estimated_start: None,
            reason: String::new(),
            window: None,
        }
    }

    #[test]
    fn a_viewer_sees_the_groups_of_their_namespaces_and_queues_and_nodes_only_if_allowed() {
        let plan = Plan {
            now: 0,
            queues: vec![QueuePlan {
                name: "q".into(),
                pending: 2,
                admitted: 0,
                usage: Default::default(),
                nominal: Default::default(),
            }],
            groups: vec![group("a", "x"), group("b", "y")],
            nodes: vec![NodePlan {
                name: "n".into(),
                domain: None,
                schedulable: true,
                capacity: Default::default(),
                used: Default::default(),
            }],
            set_asides: vec![ReservationWindow {
                reservation: "training".into(),
                start: 10,
                end: 20,
                nodes: vec!["n".into()],
                error: None,
            }],
        };
        assert_eq!(Viewer::everything().visible(&plan), plan);
        let v = Viewer {
            name: "alice".into(),
            namespaces: Namespaces::Only(["a".to_string()].into()),
            queues: false,
            nodes: false,
        };
        let seen = v.visible(&plan);
        assert_eq!(seen.groups.len(), 1);
        assert_eq!(seen.groups[0].key.namespace.as_ref(), "a");
        assert!(seen.queues.is_empty() && seen.nodes.is_empty() && seen.set_asides.is_empty());
    }
}
