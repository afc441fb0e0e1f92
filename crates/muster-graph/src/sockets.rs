//! Sockets (NUMA domains) inside a node, as Fluxion models them: a node's resources sit in pools,
//! one per socket plus what lies outside any socket, and a core or a GPU belongs to one of them.
//!
//! Two rules follow. A member that asks for sockets (Flux `slot > socket[k] > core[c]`) holds `k`
//! whole sockets exclusively, each with at least what it asks for inside; a socket another
//! allocation uses any part of is not available to it. A member that asks for no socket may take
//! from several pools, but only what each pool has free for the whole window: room that frees in
//! one socket while another fills is not room for it. Nodes without sockets are one pool and
//! none of this applies to them.

use crate::graph::{Graph, NodeId, VertexId};
use crate::matcher::{Demand, Window};

/// One socket of a node: its vertex and what lies under it, by resource index (devices counted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Socket {
    pub vertex: VertexId,
    pub capacity: Vec<u64>,
}

impl Socket {
    /// Whether the socket holds at least what `d` asks within one socket.
    pub fn holds(&self, d: &SocketDemand) -> bool {
        self.capacity.iter().zip(&d.per_socket).all(|(c, q)| c >= q)
    }
}

/// The socket part of a demand, resolved against a graph's resource table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SocketDemand {
    /// Whole sockets per member.
    pub count: u32,
    /// At least this much within each socket, by resource index.
    pub per_socket: Vec<u64>,
}

/// What each pool of one node has free throughout a window.
#[derive(Debug, Clone)]
pub struct PoolRoom {
    /// Outside any socket, by resource index.
    pub outside: Vec<u64>,
    /// Per socket, by resource index.
    pub sockets: Vec<Vec<u64>>,
    /// Per socket: nothing of it is used anywhere in the window.
    pub idle: Vec<bool>,
    /// When the room is short: the earliest end of a span overlapping the window, before which no
    /// later window start finds more room.
    pub until: i64,
}

impl PoolRoom {
    /// Every pool's room summed: what a member that may span pools can use.
    pub fn total(&self) -> Vec<u64> {
        let mut total = self.outside.clone();
        for s in &self.sockets {
            for (t, r) in total.iter_mut().zip(s) {
                *t = t.saturating_add(*r);
            }
        }
        total
    }

    /// Idle sockets that hold at least `d`'s request each, in node order.
    pub fn usable(&self, node_sockets: &[Socket], d: &SocketDemand) -> Vec<usize> {
        (0..node_sockets.len()).filter(|&s| self.idle[s] && node_sockets[s].holds(d)).collect()
    }

    /// Splits `amounts` over the pools for a member that asks for no socket: outside first, then
    /// sockets already in use, then idle ones, so that whole sockets stay free for those that
    /// need them. What no pool has room for (a hold beyond capacity) is counted outside.
    pub fn split(&self, amounts: &[u64]) -> Vec<Vec<u64>> {
        let mut split = vec![vec![0; amounts.len()]; self.sockets.len()];
        let mut order: Vec<usize> = (0..self.sockets.len()).collect();
        order.sort_by_key(|&s| self.idle[s]);
        for (r, &want) in amounts.iter().enumerate() {
            let mut left = want.saturating_sub(self.outside.get(r).copied().unwrap_or(0));
            for &s in &order {
                let take = left.min(self.sockets[s][r]);
                split[s][r] = take;
                left -= take;
            }
        }
        split
    }
}

impl Graph {
    /// What each pool of node `n` has free throughout `window`: capacity minus the peak use of
    /// the spans overlapping it, counted as `window_units` counts them (with `Now`, an allocation
    /// that outran its expected end still holds what it holds at the start).
    /// `usable` names the calendar reservations the group asking may use (their room is free to it).
    pub fn pool_room(&self, n: NodeId, window: Window, usable: &[String]) -> PoolRoom {
        let node = self.node(n);
        let mut outside_cap = node.capacity.clone();
        for s in &node.sockets {
            for (o, c) in outside_cap.iter_mut().zip(&s.capacity) {
                *o = o.saturating_sub(*c);
            }
        }
        let mut room = PoolRoom {
            outside: outside_cap.clone(),
            sockets: node.sockets.iter().map(|s| s.capacity.clone()).collect(),
            idle: vec![true; node.sockets.len()],
            until: i64::MAX,
        };
        let (start, end, starts_now) = match window {
            Window::Empty => return room,
            Window::Now { now, end } => (now, end, true),
            Window::Future { start, end } => (start, end, false),
        };
        let r = node.capacity.len();
        let mut peak_outside = vec![0u64; r];
        let mut peak = vec![vec![0u64; r]; node.sockets.len()];
        let points = std::iter::once(start).chain(node.spans.iter().map(|s| s.start).filter(|&p| p > start && p < end));
        for p in points {
            let mut outside = vec![0u64; r];
            let mut sockets = vec![vec![0u64; r]; node.sockets.len()];
            for span in self.spans_at(node, (p, start, starts_now), usable) {
                room.until = room.until.min(span.end);
                let mut in_sockets = vec![0u64; r];
                for (si, used) in span.sockets.iter().enumerate() {
                    for (i, &u) in used.iter().enumerate() {
                        sockets[si][i] += u;
                        in_sockets[i] += u;
                        room.idle[si] &= u == 0;
                    }
                }
                for (i, (&a, &inside)) in span.amounts.iter().zip(&in_sockets).enumerate() {
                    outside[i] += a.saturating_sub(inside);
                }
            }
            for (pk, o) in peak_outside.iter_mut().zip(&outside) {
                *pk = (*pk).max(*o);
            }
            for (pk, s) in peak.iter_mut().zip(&sockets) {
                for (x, u) in pk.iter_mut().zip(s) {
                    *x = (*x).max(*u);
                }
            }
        }
        for (o, pk) in room.outside.iter_mut().zip(&peak_outside) {
            *o = o.saturating_sub(*pk);
        }
        for (s, pk) in room.sockets.iter_mut().zip(&peak) {
            for (x, u) in s.iter_mut().zip(pk) {
                *x = x.saturating_sub(*u);
            }
        }
        room
    }

    /// Sockets of node `n` large enough for `d` that no running allocation uses any part of, in
    /// node order. Reservations hold nothing yet: this is where a running group can be recorded
    /// ([`crate::ResourceGraph::import`]), as its other resources are checked against what runs.
    pub fn idle_while_running(&self, n: NodeId, d: &SocketDemand) -> Vec<usize> {
        let node = self.node(n);
        let running = || node.spans.iter().filter(|s| !s.reserved);
        (0..node.sockets.len())
            .filter(|&si| {
                node.sockets[si].holds(d)
                    && running().all(|s| s.sockets.get(si).is_none_or(|u| u.iter().all(|&x| x == 0)))
            })
            .collect()
    }

    /// Units of `d` node `n` can take in `window` as far as its pools allow (`units` is what its
    /// totals allow), and when that is 0, until when (see `PoolRoom::until`).
    pub(crate) fn pool_units(&self, n: NodeId, d: &Demand, window: Window, units: u32) -> (u32, i64) {
        let node = self.node(n);
        let room = self.pool_room(n, window, &d.request.reservations);
        let fit = match &d.sockets {
            Some(sd) => {
                let members = room.usable(&node.sockets, sd).len() as u64 / u64::from(sd.count.max(1));
                (members / u64::from(d.unit_size)).min(u64::from(units)) as u32
            }
            None => d.units_per_node_for(&room.total()).min(units),
        };
        (fit, if fit == 0 { room.until } else { i64::MAX })
    }

    /// The socket index of a socket vertex of node `n`.
    pub fn socket_index(&self, n: NodeId, vertex: VertexId) -> Option<usize> {
        self.node(n).sockets.iter().position(|s| s.vertex == vertex)
    }
}
