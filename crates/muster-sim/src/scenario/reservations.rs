//! Calendar reservations: room set aside for some tenants' queues over time windows, written as
//! muster's own `ReservationConfig` (docs/queue.md) with times in seconds from the start of the
//! run. muster's models hold them; the peers have none and run the same jobs without them. The
//! measures (`metrics::reservations`) are taken under every scheduler alike.

use std::collections::BTreeMap;

use muster_graph::ResourceGraph;
use muster_graph::cluster::ClusterDescription;
use muster_queue::{QueuePolicy, ReservationConfig};

use super::{JobSpec, Tenants, input};
use crate::SimError;

/// Checks the scenario's `reservations` as the engine does (`EngineConfig::compile`: names,
/// queues, windows, amounts), and what only the scenario knows: namespaces (the simulator's jobs
/// have none of their own), nodes the selector picks, resources the cluster offers. Errors name
/// the field under `reservations[i]`.
pub fn check(
    file: &str,
    list: Vec<ReservationConfig>,
    tenants: &Tenants,
    cluster: &ClusterDescription,
    offered: &BTreeMap<String, ()>,
    graph: &ResourceGraph,
) -> Result<Vec<ReservationConfig>, SimError> {
    for (i, r) in list.iter().enumerate() {
        if !r.namespaces.is_empty() {
            return Err(input(
                file,
                format!("reservations[{i}].namespaces"),
                "the simulator's jobs have no namespaces of their own; name the queues that may use it",
            ));
        }
        if let Some(a) = &r.amount
            && let Some(name) = a.resources.keys().find(|name| !offered.contains_key(*name))
        {
            let known: Vec<&str> = offered.keys().map(String::as_str).collect();
            return Err(input(
                file,
                format!("reservations[{i}].amount.resources.{name}"),
                format!("no node offers {name:?}; the cluster has {known:?}"),
            ));
        }
    }
    let mut config = tenants.engine_config(QueuePolicy::BestEffortFifo);
    config.reservations = list;
    config.compile(file).map_err(|e| input(file, e.path, e.message))?;
    let list = config.reservations;
    for (i, r) in list.iter().enumerate() {
        // An amount no placement holds on the empty cluster would be set aside in no window.
        if let Some(why) = r.amount_request().and_then(|req| graph.satisfiability(&req).err()) {
            return Err(input(
                file,
                format!("reservations[{i}].amount"),
                format!("can never be set aside, not even on the empty cluster: {why}; reserve less"),
            ));
        }
        if !r.node_selector.is_empty() && room_nodes(r, cluster).iter().all(|on| !on) {
            return Err(input(
                file,
                format!("reservations[{i}].nodeSelector"),
                format!(
                    "{:?} selects no node of cluster {}; give labels its nodes have",
                    r.node_selector, cluster.name
                ),
            ));
        }
    }
    Ok(list)
}

/// Whether `job` may use the reservation: its queue is one of the reservation's.
pub fn may_use(r: &ReservationConfig, tenants: &Tenants, job: &JobSpec) -> bool {
    r.queues.iter().any(|q| q == tenants.name_of(job.queue))
}

/// Per node of the cluster, in its order: whether the reservation's room may lie on it (the nodes
/// its `nodeSelector` picks; every node without one).
pub fn room_nodes(r: &ReservationConfig, cluster: &ClusterDescription) -> Vec<bool> {
    let mut on = Vec::new();
    // The description was checked when it was loaded.
    let _ = cluster.for_each_node("", |n| {
        on.push(r.node_selector.iter().all(|(k, v)| n.spec.labels.get(k) == Some(v)));
        Ok(())
    });
    on
}

/// The window `[start, end)` in milliseconds that work arriving at `at_ms` is for: the one open
/// then, else the next; none once the last has ended.
pub fn window_for(r: &ReservationConfig, at_ms: i64) -> Option<(i64, i64)> {
    let (start, end) = *r.windows(at_ms.div_euclid(1000)).first()?;
    Some((start.saturating_mul(1000), end.saturating_mul(1000)))
}

/// How many milliseconds of `[from, to)` (ms) lie inside the reservation's windows.
pub fn inside_windows_ms(r: &ReservationConfig, from: i64, to: i64) -> i64 {
    let (start, end) = (r.start.saturating_mul(1000), r.end.saturating_mul(1000));
    let overlap = |s: i64, e: i64| (to.min(e) - from.max(s)).max(0);
    if r.every_s == 0 {
        return overlap(start, end);
    }
    let period = r.every_s.saturating_mul(1000);
    // The first window that ends after `from`.
    let mut k = ((from - end).div_euclid(period) + 1).max(0);
    let mut total = 0;
    loop {
        let s = start.saturating_add(k.saturating_mul(period));
        if s >= to {
            return total;
        }
        total += overlap(s, s.saturating_add(end - start));
        k += 1;
    }
}

/// How many windows opened before `until_ms`.
pub fn windows_opened(r: &ReservationConfig, until_ms: i64) -> usize {
    let start = r.start.saturating_mul(1000);
    if until_ms <= start {
        return 0;
    }
    if r.every_s == 0 {
        return 1;
    }
    let period = r.every_s.saturating_mul(1000);
    usize::try_from((until_ms - start - 1) / period + 1).unwrap_or(usize::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use muster_queue::AtStart;

    /// 09:00 to 13:00 every day.
    fn daily() -> ReservationConfig {
        ReservationConfig {
            name: "morning".into(),
            queues: vec!["a".into()],
            namespaces: vec![],
            node_selector: BTreeMap::new(),
            amount: None,
            start: 9 * 3600,
            end: 13 * 3600,
            every_s: 86400,
            at_start: AtStart::Wait,
        }
    }

    const H: i64 = 3_600_000;

    #[test]
    fn time_inside_windows_counts_each_days_window_once() {
        let r = daily();
        assert_eq!(inside_windows_ms(&r, 0, 9 * H), 0);
        assert_eq!(inside_windows_ms(&r, 0, 10 * H), H);
        assert_eq!(inside_windows_ms(&r, 12 * H, 34 * H), H + H);
        assert_eq!(inside_windows_ms(&r, 0, 48 * H), 8 * H);
        let once = ReservationConfig { every_s: 0, ..daily() };
        assert_eq!(inside_windows_ms(&once, 0, 48 * H), 4 * H);
    }

    #[test]
    fn work_is_for_the_open_window_or_the_next() {
        let r = daily();
        assert_eq!(window_for(&r, 8 * H), Some((9 * H, 13 * H)));
        assert_eq!(window_for(&r, 12 * H), Some((9 * H, 13 * H)));
        assert_eq!(window_for(&r, 13 * H), Some((33 * H, 37 * H)));
        assert_eq!(window_for(&ReservationConfig { every_s: 0, ..daily() }, 13 * H), None);
        assert_eq!(windows_opened(&r, 9 * H), 0);
        assert_eq!(windows_opened(&r, 9 * H + 1), 1);
        assert_eq!(windows_opened(&r, 34 * H), 2);
    }
}
