//! Calendar reservations: part of the cluster set aside for some queues or namespaces over a
//! time window, once or repeating (a training run tomorrow at 09:00, a weekly batch slot, a
//! maintenance window). This file holds their configuration and occurrences; what the engine
//! does with them is in `engine/calendar.rs`, the room they hold in the graph's set-asides.

use std::collections::{BTreeMap, BTreeSet};

use muster_graph::GroupRequest;
use muster_graph::jobspec::TopologyConstraint;
use serde::{Deserialize, Serialize};

use crate::config::Quantity;

/// One calendar reservation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ReservationConfig {
    pub name: String,
    /// Queues whose groups may use it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub queues: Vec<String>,
    /// Namespaces whose groups may use it, whatever their queue.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub namespaces: Vec<String>,
    /// The nodes it is on: every node with these labels (whole, unless `amount` says how much).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    /// How much it sets aside, placed by the matcher at each window's start (on the selected
    /// nodes, if `nodeSelector` is given too).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub amount: Option<ReservedAmount>,
    /// The first window's start and end, in seconds (Unix time on a cluster; from the start of
    /// the run in the simulator).
    pub start: i64,
    pub end: i64,
    /// Repeats the window every so many seconds (604800: weekly); 0: once.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub every_s: i64,
    /// What happens to others' work still on its room when a window opens.
    #[serde(default)]
    pub at_start: AtStart,
}

fn is_zero(v: &i64) -> bool {
    *v == 0
}

/// An amount set aside: `members` times what one member asks, as a group of that shape would be placed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ReservedAmount {
    pub members: u32,
    /// Per member, by resource name.
    pub resources: BTreeMap<String, Quantity>,
    /// A topology level (such as `rack`) that all members must share.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology: Option<String>,
}

/// What a window's opening does to work of others still on its room.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub enum AtStart {
    /// It runs on; the reservation's users wait for its room. Only work without a duration, or
    /// that outran its duration, or that started before the reservation was made can be there.
    #[default]
    Wait,
    /// Whole groups are evicted (and queued again), the latest started first, until the room
    /// set aside is free.
    Evict,
}

/// The latest time a reservation may name, 9999-12-31T23:59:59Z in Unix seconds (the last an
/// RFC 3339 time can say), and the longest period; a time is within this of zero. Far from the
/// engine's own "never" (`i64::MAX`), so that no window's end is taken for it or lost to an
/// overflow.
pub const LATEST_TIME: i64 = 253_402_300_799;

impl ReservationConfig {
    /// Checks every field; `known_queues` are the configuration's queues. Errors are (field, message).
    pub fn check(&self, known_queues: &BTreeSet<&str>) -> Result<(), (String, String)> {
        let err = |f: &str, m: String| Err((f.to_string(), m));
        for (field, v) in [("start", self.start), ("end", self.end), ("everyS", self.every_s)] {
            if !(-LATEST_TIME..=LATEST_TIME).contains(&v) {
                return err(
                    field,
                    format!(
                        "{v} is out of range; times and periods are seconds within {LATEST_TIME} of 0 (years 0 to 9999)"
                    ),
                );
            }
        }
        if self.queues.is_empty() && self.namespaces.is_empty() {
            return err("queues", "say who may use it: list queues, namespaces or both".into());
        }
        if let Some(q) = self.queues.iter().find(|q| !known_queues.contains(q.as_str())) {
            return err("queues", format!("no queue {q:?}; known: {known_queues:?}"));
        }
        if self.end <= self.start {
            return err("end", format!("{} is not after start {}; a window needs a length", self.end, self.start));
        }
        if self.every_s < 0 || (self.every_s > 0 && self.every_s < self.end - self.start) {
            return err(
                "everyS",
                format!(
                    "{} would make windows overlap; 0 (once) or at least the window's length, {} s",
                    self.every_s,
                    self.end - self.start
                ),
            );
        }
        match &self.amount {
            None if self.node_selector.is_empty() => {
                err("nodeSelector", "say what it sets aside: a nodeSelector, an amount, or both".into())
            }
            None => Ok(()),
            Some(a) if a.members == 0 => err("amount.members", "0; set aside at least 1 member".into()),
            Some(a) if a.resources.is_empty() => err("amount.resources", "say what each member asks".into()),
            Some(a) => {
                for (r, q) in &a.resources {
                    q.amount(r).map_err(|m| (format!("amount.resources.{r}"), m))?;
                }
                Ok(())
            }
        }
    }

    /// May a group of `queue` in `namespace` use it?
    pub fn admits(&self, queue: &str, namespace: &str) -> bool {
        self.queues.iter().any(|q| q == queue) || self.namespaces.iter().any(|n| n == namespace)
    }

    /// The windows `[start, end)` to hold at `now`: the current or next one, and the later ones
    /// that start within one period of `now`. Work placed now cannot reach past them without
    /// overlapping one of them, so later windows need not be in the plan yet.
    pub fn windows(&self, now: i64) -> Vec<(i64, i64)> {
        let length = self.end - self.start;
        if self.every_s == 0 {
            return if self.end > now { vec![(self.start, self.end)] } else { Vec::new() };
        }
        // The first window that has not ended.
        let passed = (now - self.end).div_euclid(self.every_s) + 1;
        let mut k = passed.max(0);
        let mut out = Vec::new();
        loop {
            let start = self.start.saturating_add(k.saturating_mul(self.every_s));
            if !out.is_empty() && start >= now.saturating_add(self.every_s) {
                return out;
            }
            out.push((start, start.saturating_add(length)));
            k += 1;
        }
    }

    /// What `amount` asks, as a group request (with the node selector as its filter).
    pub fn amount_request(&self) -> Option<GroupRequest> {
        let a = self.amount.as_ref()?;
        let requests: Vec<(String, u64)> =
            a.resources.iter().map(|(r, q)| (r.clone(), q.amount(r).unwrap_or(0))).collect();
        let mut req = GroupRequest::simple(&self.name, a.members, &[]);
        req.requests = requests;
        req.filter.node_selector = self.node_selector.clone();
        req.topology = a.topology.as_deref().map(TopologyConstraint::required);
        Some(req)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn weekly() -> ReservationConfig {
        ReservationConfig {
            name: "slot".into(),
            queues: vec!["a".into()],
            namespaces: Vec::new(),
            node_selector: [("pool".to_string(), "gpu".to_string())].into(),
            amount: None,
            start: 1000,
            end: 1100,
            every_s: 500,
            at_start: AtStart::Wait,
        }
    }

    #[test]
    fn a_repeating_reservation_holds_the_current_window_and_those_starting_within_a_period() {
        let r = weekly();
        assert_eq!(r.windows(0), vec![(1000, 1100)]);
        assert_eq!(r.windows(600), vec![(1000, 1100)]);
        assert_eq!(r.windows(1050), vec![(1000, 1100), (1500, 1600)]);
        assert_eq!(r.windows(1100), vec![(1500, 1600)]);
        assert_eq!(r.windows(1501), vec![(1500, 1600), (2000, 2100)]);
    }

    #[test]
    fn a_single_window_is_gone_once_it_ends() {
        let r = ReservationConfig { every_s: 0, ..weekly() };
        assert_eq!(r.windows(1099), vec![(1000, 1100)]);
        assert!(r.windows(1100).is_empty());
    }

    #[test]
    fn bad_fields_are_named() {
        let queues: BTreeSet<&str> = ["a"].into();
        let field = |r: ReservationConfig| r.check(&queues).unwrap_err().0;
        assert_eq!(field(ReservationConfig { queues: vec!["b".into()], ..weekly() }), "queues");
        assert_eq!(field(ReservationConfig { queues: Vec::new(), ..weekly() }), "queues");
        assert_eq!(field(ReservationConfig { end: 1000, ..weekly() }), "end");
        assert_eq!(field(ReservationConfig { every_s: 50, ..weekly() }), "everyS");
        // Times near the engine's "never" (i64::MAX) and beyond year 9999 are refused, where a
        // window's end would be lost.
        let late = ReservationConfig { start: i64::MAX - 100, end: i64::MAX - 10, every_s: 0, ..weekly() };
        assert_eq!(field(late.clone()), "start");
        assert_eq!(field(ReservationConfig { start: LATEST_TIME - 100, ..late.clone() }), "end");
        assert_eq!(field(ReservationConfig { start: i64::MIN, ..weekly() }), "start");
        assert_eq!(field(ReservationConfig { every_s: LATEST_TIME + 1, ..weekly() }), "everyS");
        let last = ReservationConfig { start: LATEST_TIME - 100, end: LATEST_TIME, ..late };
        assert!(last.check(&queues).is_ok(), "up to the last second of year 9999");
        assert_eq!(last.windows(0), vec![(LATEST_TIME - 100, LATEST_TIME)]);
        assert_eq!(field(ReservationConfig { node_selector: BTreeMap::new(), ..weekly() }), "nodeSelector");
        let amount =
            ReservedAmount { members: 1, resources: [("cpu".to_string(), "lots".into())].into(), topology: None };
        assert_eq!(field(ReservationConfig { amount: Some(amount), ..weekly() }), "amount.resources.cpu");
        assert!(weekly().check(&queues).is_ok());
    }
}
