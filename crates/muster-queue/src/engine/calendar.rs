//! Calendar reservations in the engine ([`crate::reservation`]): their windows written into the
//! graph as set-asides, which groups may use them, and what a window's opening does to the work
//! of others still on its room.

use std::collections::BTreeMap;

use muster_graph::AllocId;

use super::Engine;
use crate::group::{GroupKey, GroupSpec, GroupState, Reason, Transition};
use crate::reservation::{AtStart, ReservationConfig};

/// One window of a reservation, as held in the graph.
#[derive(Debug, Clone)]
pub(super) struct HeldWindow {
    end: i64,
    /// The set-aside, or why it could not be made (tried again every cycle).
    set_aside: Result<AllocId, String>,
    /// Its opening has been acted on (`atStart`).
    opened: bool,
    /// The nodes' structure version it was made for: new or changed nodes make it again.
    structure: u64,
}

/// Held windows by (reservation, window start).
pub(super) type Calendar = BTreeMap<(String, i64), HeldWindow>;

/// The end and nodes of windows given back to be made again, by (reservation, start).
pub(super) type HeldBefore = BTreeMap<(String, i64), (i64, Vec<String>)>;

impl Engine {
    /// The reservations a group of `queue` in `namespace` may use, by name.
    fn usable_reservations(&self, queue: &str, namespace: &str) -> Vec<String> {
        let usable = self.config.reservations.iter().filter(|r| r.admits(queue, namespace));
        usable.map(|r| r.name.clone()).collect()
    }

    /// `spec` with the reservations its group may use, whatever it said (a tenant cannot name
    /// itself into another's reservation).
    pub(super) fn with_usable_reservations(&self, mut spec: GroupSpec) -> GroupSpec {
        spec.request.reservations = self.usable_reservations(&spec.queue, &spec.key.namespace);
        spec
    }

    /// Brings the set-asides in line with the windows to hold now: ended (or removed) ones are
    /// given back, new ones made, and windows that opened are acted on.
    pub(super) fn refresh_calendar(&mut self, out: &mut Vec<Transition>) {
        if self.config.reservations.is_empty() {
            // Where removed reservations' windows were is of no more use.
            self.held_before.clear();
            return;
        }
        let wanted = self.wanted_windows();
        let stale: Vec<(String, i64)> = (self.calendar.iter())
            .filter(|(k, w)| !wanted.contains_key(*k) || w.set_aside.is_err() || w.structure != self.structure_version)
            .map(|(k, _)| k.clone())
            .collect();
        for k in stale {
            if let Some(HeldWindow { set_aside: Ok(id), end, .. }) = self.calendar.remove(&k)
                && let Ok(a) = self.graph.cancel(id)
            {
                self.held_before.insert(k, (end, node_names(&self.graph, &a)));
            }
        }
        self.held_before.retain(|k, _| wanted.contains_key(k));
        for ((name, start), (end, ri)) in wanted {
            let k = (name, start);
            if self.calendar.contains_key(&k) {
                continue;
            }
            let r = &self.config.reservations[ri];
            let held_before = self.held_before.get(&k).map_or(&[][..], |(_, n)| &n[..]);
            let made = match r.amount_request() {
                Some(req) => self.graph.set_aside_amount(&k.0, &req, (start, end), held_before),
                None => self.graph.set_aside_nodes(&k.0, &r.node_selector, (start, end)),
            };
            if made.is_ok() {
                self.held_before.remove(&k);
            }
            let held = HeldWindow {
                end,
                set_aside: made.map_err(|e| e.to_string()),
                opened: false,
                structure: self.structure_version,
            };
            self.calendar.insert(k, held);
        }
        self.open_windows(out);
    }

    /// Every window to hold now, with its end and its reservation's index.
    fn wanted_windows(&self) -> BTreeMap<(String, i64), (i64, usize)> {
        let mut wanted = BTreeMap::new();
        for (ri, r) in self.config.reservations.iter().enumerate() {
            for (start, end) in r.windows(self.now) {
                wanted.insert((r.name.clone(), start), (end, ri));
            }
        }
        wanted
    }

    /// Acts on the windows that have opened: under `atStart: Evict`, evicts others' groups from
    /// their room.
    fn open_windows(&mut self, out: &mut Vec<Transition>) {
        let now = self.now;
        let opening: Vec<(String, AllocId)> = (self.calendar.iter_mut())
            .filter(|((_, start), w)| *start <= now && !w.opened && w.set_aside.is_ok())
            .map(|((name, _), w)| {
                w.opened = true;
                (name.clone(), *w.set_aside.as_ref().expect("checked"))
            })
            .collect();
        for (name, id) in opening {
            let evict = self.reservation(&name).is_some_and(|r| r.at_start == AtStart::Evict);
            if evict {
                self.evict_from_set_aside(&name, id, out);
            }
        }
    }

    fn reservation(&self, name: &str) -> Option<&ReservationConfig> {
        self.config.reservations.iter().find(|r| r.name == name)
    }

    /// Evicts whole groups that may not use reservation `name` from the nodes of its set-aside
    /// `id`, the latest started first, until each node has room for what is set aside on it
    /// beside what stays.
    fn evict_from_set_aside(&mut self, name: &str, id: AllocId, out: &mut Vec<Transition>) {
        let Ok(a) = self.graph.allocation(id) else { return };
        let mut nodes: Vec<_> = a.members.iter().map(|m| m.node).collect();
        nodes.dedup();
        for n in nodes {
            while let Some(victim) = self.latest_in_the_way(name, id, n) {
                let rec = self.release(&victim);
                self.group_mut(&victim).evictions += 1;
                let reason = Reason::ReservationStarted { reservation: name.to_string() };
                self.step(&victim, GroupState::Evicted, reason, rec, out);
                self.requeue_now(&victim, out);
            }
        }
    }

    /// On node `n`, the latest started group that may not use reservation `name`, if what such
    /// groups hold there and set-aside `id` together exceed the node's capacity.
    fn latest_in_the_way(&self, name: &str, id: AllocId, n: muster_graph::NodeId) -> Option<GroupKey> {
        let node = self.graph.graph.node(n);
        let mut held = node.spans.iter().find(|s| s.alloc == id)?.amounts.clone();
        let mut latest: Option<(i64, &GroupKey)> = None;
        for s in node.spans.iter().filter(|s| !s.reserved) {
            let owner = self.by_graph_alloc.get(&s.alloc);
            let user = owner.is_some_and(|k| self.groups[k].spec.request.reservations.iter().any(|r| r == name));
            if user {
                continue;
            }
            held.iter_mut().zip(&s.amounts).for_each(|(h, a)| *h = h.saturating_add(*a));
            if let Some(k) = owner
                && latest.is_none_or(|(t, _)| s.start >= t)
            {
                latest = Some((s.start, k));
            }
        }
        let over = held.iter().zip(&node.capacity).any(|(h, c)| h > c);
        over.then(|| latest.map(|(_, k)| k.clone())).flatten()
    }

    /// True if the windows to hold changed or one opened since the last cycle.
    /// A window that could not be made is tried again by the next cycle that runs anyway, not
    /// made a reason for one: else every call would run a cycle while it is open.
    pub(super) fn calendar_due(&self) -> bool {
        let now = self.now;
        let opened = (self.calendar.iter()).any(|((_, start), w)| *start <= now && !w.opened && w.set_aside.is_ok());
        let ended = self.calendar.values().any(|w| w.end <= now);
        let held = |r: &ReservationConfig, start: i64| self.calendar.contains_key(&(r.name.clone(), start));
        let coming =
            (self.config.reservations.iter()).any(|r| r.windows(now).iter().any(|&(start, _)| !held(r, start)));
        opened || ended || coming
    }

    /// Nothing for the calendar to do in a cycle: no window to make, retry, open or end.
    pub(super) fn calendar_settled(&self) -> bool {
        self.config.reservations.is_empty()
            || (!self.calendar_due() && self.calendar.values().all(|w| w.set_aside.is_ok()))
    }

    /// The next time the windows to hold change: a window opens or ends, or the next one comes
    /// within a period of now.
    pub(super) fn next_calendar_time(&self) -> Option<i64> {
        let now = self.now;
        let held = self.calendar.iter().flat_map(|((_, start), w)| [*start, w.end]);
        let coming = self.config.reservations.iter().filter(|r| r.every_s > 0).filter_map(|r| {
            // Windows starting within a period of now are held, so the next one comes in just after
            // the last held one starts.
            let (last, _) = *r.windows(now).last()?;
            Some(last.saturating_add(1))
        });
        held.chain(coming).filter(|&t| t > now).min()
    }

    /// Why the set-asides of reservations keep a group that may not use them from starting now,
    /// if they do: a search that may use every reservation fits it. Changes nothing.
    pub(super) fn held_by_calendar(&mut self, req: &muster_graph::GroupRequest) -> Option<String> {
        let now = self.now;
        let in_the_way: Vec<String> = (self.config.reservations.iter())
            .filter(|r| !req.reservations.contains(&r.name))
            .filter(|r| self.calendar.iter().any(|((n, _), w)| *n == r.name && w.set_aside.is_ok()))
            .map(|r| r.name.clone())
            .collect();
        if in_the_way.is_empty() {
            return None;
        }
        let mut all = req.clone();
        all.reservations.extend(in_the_way.iter().cloned());
        let muster_graph::MatchOutcome::Allocated(id) = self.graph.allocate_satisfiable(&all, now) else { return None };
        let _ = self.graph.cancel(id);
        let windows: Vec<String> = (self.calendar.iter())
            .filter(|((n, _), w)| in_the_way.contains(n) && w.set_aside.is_ok())
            .map(|((n, start), w)| format!("{n} ({} to {})", crate::clock::show(*start), crate::clock::show(w.end)))
            .collect();
        Some(format!("the room it would fit in now is set aside by calendar reservation {}", windows.join(", ")))
    }
}

/// A window of a calendar reservation as the engine holds it, for status and views.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReservationWindow {
    pub reservation: String,
    pub start: i64,
    pub end: i64,
    /// The nodes its room is on (empty when it could not be made).
    pub nodes: Vec<String>,
    /// Why it holds nothing, when it could not be made (no node selected, no room at its start,
    /// another reservation on the same nodes); tried again every cycle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Engine {
    /// Where the windows hold their room, by reservation then start: those made now, and those
    /// still to be made again where they were (after a restore, or one that could not be made
    /// this time). A snapshot carries them, and a store keeps them, so that a restore makes each
    /// again there first.
    pub fn windows_held(&self) -> Vec<ReservationWindow> {
        let made = self.reservation_windows().into_iter().filter(|w| !w.nodes.is_empty());
        // Only windows not made (yet, or this time) keep an entry there.
        let to_make = self.held_before.iter().map(|((reservation, start), (end, nodes))| ReservationWindow {
            reservation: reservation.clone(),
            start: *start,
            end: *end,
            nodes: nodes.clone(),
            error: None,
        });
        let mut all: Vec<ReservationWindow> = made.chain(to_make).collect();
        all.sort_by(|a, b| (&a.reservation, a.start).cmp(&(&b.reservation, b.start)));
        all
    }

    /// Takes the windows a snapshot held as where to make them again first.
    pub(super) fn remember_windows_held(&mut self, held: Vec<ReservationWindow>) {
        self.held_before = held.into_iter().map(|w| ((w.reservation, w.start), (w.end, w.nodes))).collect();
    }

    /// Every window the engine holds now, by reservation then start.
    pub fn reservation_windows(&self) -> Vec<ReservationWindow> {
        (self.calendar.iter())
            .map(|((name, start), w)| {
                let held = w.set_aside.as_ref().ok().and_then(|id| self.graph.allocation(*id).ok());
                let nodes = held.map(|a| node_names(&self.graph, a)).unwrap_or_default();
                ReservationWindow {
                    reservation: name.clone(),
                    start: *start,
                    end: w.end,
                    nodes,
                    error: w.set_aside.as_ref().err().cloned(),
                }
            })
            .collect()
    }
}

/// The nodes an allocation's members are on, each once, in member order.
fn node_names(graph: &muster_graph::ResourceGraph, a: &muster_graph::Allocation) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for m in &a.members {
        let name = &graph.graph.node(m.node).name;
        if !names.contains(name) {
            names.push(name.clone());
        }
    }
    names
}
