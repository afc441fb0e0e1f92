//! How engine state maps onto store rows, and the batch that takes the store from one engine state
//! to the next.

use std::collections::{BTreeMap, BTreeSet};

use muster_queue::engine::RunTimeSample;
use muster_queue::quota;
use muster_queue::{AllocationRecord, Engine, Group, GroupKey, GroupState, ReservationWindow, Transition};
use muster_store::{Allocation, HistoryEntry, RunRecord, RunTimeRecord, UsageRecord, WindowHeld, Write};
use serde_json::Value;

use muster_store::PutResult;

use crate::EncodeError;

/// Groups by key, borrowed from an engine or a recovered snapshot.
pub(crate) type GroupMap<'a> = BTreeMap<&'a GroupKey, &'a Group>;

pub(crate) fn group_map<'a>(groups: impl Iterator<Item = &'a Group>) -> GroupMap<'a> {
    groups.map(|g| (&g.spec.key, g)).collect()
}

fn encode_err(key: &GroupKey, source: serde_json::Error) -> EncodeError {
    EncodeError { key: key.to_string(), source }
}

/// The store row of a group: `spec` is the submitted spec, `status` the rest of the engine's own
/// serialized group, so that recovery gets back exactly the group the engine had.
pub(crate) fn group_row(g: &Group) -> Result<muster_store::Group, EncodeError> {
    let key = &g.spec.key;
    let spec = serde_json::to_value(&g.spec).map_err(|e| encode_err(key, e))?;
    let mut status = serde_json::to_value(g).map_err(|e| encode_err(key, e))?;
    if let Value::Object(m) = &mut status {
        m.remove("spec");
    }
    Ok(muster_store::Group {
        key: key.to_string(),
        queue: g.spec.queue.clone(),
        priority: i64::from(g.priority),
        submitted_at: g.spec.submitted_at,
        state: g.state.to_string(),
        spec,
        status,
        requeue_count: i64::from(g.requeues),
        requeue_at: g.requeue_at,
    })
}

/// Inverse of [`group_row`].
pub(crate) fn decode_group(row: &muster_store::Group) -> Result<Group, String> {
    let mut status = row.status.clone();
    let Value::Object(m) = &mut status else { return Err("status is not a JSON object".into()) };
    m.insert("spec".into(), row.spec.clone());
    let g: Group = serde_json::from_value(status).map_err(|e| e.to_string())?;
    if g.spec.key.to_string() != row.key {
        return Err(format!("row key {} holds group {}", row.key, g.spec.key));
    }
    Ok(g)
}

pub(crate) fn allocation_row(key: &GroupKey, rec: &AllocationRecord) -> Result<Allocation, EncodeError> {
    Ok(Allocation {
        group_key: key.to_string(),
        alloc_id: rec.alloc_id as i64,
        placement: serde_json::to_value(rec).map_err(|e| encode_err(key, e))?,
        start: rec.start,
        end: (rec.end != i64::MAX).then_some(rec.end),
    })
}

pub(crate) fn decode_allocation(row: &Allocation) -> Result<AllocationRecord, String> {
    serde_json::from_value(row.placement.clone()).map_err(|e| e.to_string())
}

/// Equal apart from the explanation text, which every cycle rewrites and recovery recomputes:
/// persisting it would cost one write per pending group per cycle.
fn same_durable(a: &Group, b: &Group) -> bool {
    a == b
        || (a.reason != b.reason
            && Group { reason: String::new(), ..a.clone() } == Group { reason: String::new(), ..b.clone() })
}

pub(crate) fn history_entry(t: &Transition, message: String) -> HistoryEntry {
    let kind = serde_json::to_value(&t.reason)
        .ok()
        .and_then(|v| v.get("kind").and_then(Value::as_str).map(str::to_string))
        .unwrap_or_default();
    HistoryEntry {
        group_key: t.key.to_string(),
        at: t.at,
        from_state: (t.from != muster_queue::GroupState::New).then(|| t.from.to_string()),
        to_state: t.to.to_string(),
        reason: kind,
        message,
    }
}

/// Resource-seconds of the members `before` held that `after` no longer holds, from the
/// allocation's start to `at`. Members added by growth are counted from the allocation's start too
/// (the record keeps one start per allocation).
fn released_usage(before: &Group, after: Option<&Group>, at: i64) -> Vec<UsageRecord> {
    let Some(rec) = before.allocation.as_ref().filter(|_| before.state.holds_allocation()) else { return Vec::new() };
    let kept: BTreeSet<u32> = after
        .filter(|a| a.state.holds_allocation())
        .and_then(|a| a.allocation.as_ref())
        .map(|r| r.members.iter().map(|m| m.index).collect())
        .unwrap_or_default();
    let released: Vec<u32> = rec.members.iter().map(|m| m.index).filter(|i| !kept.contains(i)).collect();
    let seconds = (at - rec.start).max(0) as f64;
    if released.is_empty() || seconds == 0.0 {
        return Vec::new();
    }
    quota::members_asks(&before.spec.request, released)
        .into_iter()
        .map(|(resource, total)| UsageRecord {
            queue: before.spec.queue.clone(),
            resource,
            at,
            amount: total as f64 * seconds,
        })
        .collect()
}

/// The batch that takes the store from `before` to `after`: every group whose durable fields
/// changed (conditional on the version we last saw), its allocation row, the history of
/// `transitions`, and the usage of released members. Deletes come first so that a batch never
/// holds two rows with one allocation id.
pub(crate) fn diff(
    before: &GroupMap,
    after: &GroupMap,
    transitions: &[Transition],
    history: Vec<HistoryEntry>,
    at: i64,
    versions: &BTreeMap<String, i64>,
) -> Result<Vec<Write>, EncodeError> {
    let touched: BTreeSet<&GroupKey> = transitions.iter().map(|t| &t.key).collect();
    let keys: BTreeSet<&GroupKey> = before.keys().chain(after.keys()).copied().collect();
    let (mut deletes, mut puts, mut allocs, mut usage) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for key in keys {
        let (b, a) = (before.get(key).copied(), after.get(key).copied());
        let changed = match (b, a) {
            // The engine shares an unchanged group with its copy: no need to compare it.
            (Some(b), Some(a)) => touched.contains(key) || (!std::ptr::eq(b, a) && !same_durable(b, a)),
            _ => true,
        };
        if !changed {
            continue;
        }
        if let Some(b) = b {
            usage.extend(released_usage(b, a, at));
        }
        let Some(a) = a else {
            deletes.push(Write::DeleteGroup { key: key.to_string() });
            continue;
        };
        let expected = versions.get(&key.to_string()).copied().unwrap_or(0);
        puts.push(Write::PutGroup { group: group_row(a)?, expected_version: Some(expected) });
        let held = b.filter(|b| b.state.holds_allocation()).and_then(|b| b.allocation.as_ref());
        match a.allocation.as_ref().filter(|_| a.state.holds_allocation()) {
            Some(rec) if held != Some(rec) => allocs.push(Write::PutAllocation(allocation_row(key, rec)?)),
            Some(_) => {}
            None if held.is_some() => deletes.push(Write::DeleteAllocation { group_key: key.to_string() }),
            None => {}
        }
    }
    let mut writes = deletes;
    writes.append(&mut puts);
    writes.append(&mut allocs);
    writes.extend(history.into_iter().map(Write::AppendHistory));
    writes.extend(usage.into_iter().map(Write::AddUsage));
    Ok(writes)
}

/// The records of placements that `transitions` ended: every run (what-if replays read them)
/// and the run times learned from those that succeeded. Read from the groups as they were
/// before (still placed). Only for transitions of the running engine: a group found finished
/// on recovery ended at some unknown time.
pub(crate) fn ended_runs(before: &GroupMap, transitions: &[Transition]) -> Vec<Write> {
    let mut writes = runs(before, transitions);
    writes.extend(run_times(before, transitions));
    writes
}

/// A run record for every placement a transition gave up.
fn runs(before: &GroupMap, transitions: &[Transition]) -> Vec<Write> {
    let ended = transitions.iter().filter(|t| t.from.holds_allocation() && !t.to.holds_allocation());
    ended
        .filter_map(|t| {
            let g = before.get(&t.key)?;
            let a = g.allocation.as_ref()?;
            Some(Write::AddRun(RunRecord {
                group_key: t.key.to_string(),
                queue: g.spec.queue.clone(),
                priority: i64::from(g.priority),
                submitted_at: g.spec.submitted_at,
                started_at: a.start,
                ended_at: t.at,
                members: a.members.len() as i64,
                outcome: format!("{:?}", t.to),
                request: serde_json::to_value(&g.spec.request).ok()?,
            }))
        })
        .collect()
}

/// What the groups that succeeded in `transitions` teach about run times (see [`RunTimeSample`]).
fn run_times(before: &GroupMap, transitions: &[Transition]) -> Vec<Write> {
    transitions
        .iter()
        .filter(|t| t.to == GroupState::Succeeded)
        .filter_map(|t| RunTimeSample::of(before.get(&t.key)?, t.at).map(|s| (t.at, s)))
        .map(|(at, s)| {
            Write::AddRunTime(RunTimeRecord {
                queue: s.queue,
                // Stored as the same 64 bits: SQL integers are signed.
                shape: s.shape as i64,
                at,
                seconds: i64::try_from(s.seconds).unwrap_or(i64::MAX),
            })
        })
        .collect()
}

/// Remembers the versions a committed batch gave its groups (and forgets deleted ones).
pub(crate) fn note_versions(versions: &mut BTreeMap<String, i64>, writes: &[Write], puts: Vec<PutResult>) {
    for w in writes {
        if let Write::DeleteGroup { key } = w {
            versions.remove(key);
        }
    }
    for p in puts {
        versions.insert(p.key, p.version);
    }
}

/// The writes that keep the stored nodes of reservation windows as `after` holds them
/// ([`Engine::windows_held`]): a window made, or made again elsewhere, is put; one no longer held
/// (ended, or its reservation removed) is deleted. One still to be made again keeps its row.
pub(crate) fn windows_held(before: &Engine, after: &Engine) -> Vec<Write> {
    let by_key = |e: &Engine| -> BTreeMap<(String, i64), ReservationWindow> {
        e.windows_held().into_iter().map(|w| ((w.reservation.clone(), w.start), w)).collect()
    };
    let (before, after) = (by_key(before), by_key(after));
    let gone = (before.keys())
        .filter(|k| !after.contains_key(*k))
        .map(|(reservation, start)| Write::DeleteWindowHeld { reservation: reservation.clone(), start: *start });
    let made =
        (after.iter()).filter(|(k, w)| before.get(*k) != Some(*w)).map(|(_, w)| Write::PutWindowHeld(window_row(w)));
    gone.chain(made).collect()
}

fn window_row(w: &ReservationWindow) -> WindowHeld {
    WindowHeld { reservation: w.reservation.clone(), start: w.start, end: w.end, nodes: w.nodes.clone() }
}

/// A stored window's nodes as the engine takes them in a snapshot.
pub(crate) fn decode_window(w: &WindowHeld) -> ReservationWindow {
    ReservationWindow {
        reservation: w.reservation.clone(),
        start: w.start,
        end: w.end,
        nodes: w.nodes.clone(),
        error: None,
    }
}

#[cfg(test)]
mod tests {
    use muster_graph::GroupRequest;
    use muster_graph::jobspec::MemberSet;
    use muster_queue::GroupSpec;

    use super::*;

    fn spec(request: GroupRequest) -> GroupSpec {
        GroupSpec { key: GroupKey::new("ml", "pi"), queue: "q".into(), priority_class: None, request, submitted_at: 3 }
    }

    #[test]
    fn a_row_written_before_member_sets_reads_as_alike_members_and_sets_round_trip() {
        // An alike group's row carries no `sets`: what a store written before holds.
        let alike = Group::submitted(spec(GroupRequest::simple("pi", 4, &[("cpu", 2000)])), 0, 1);
        let row = group_row(&alike).unwrap();
        assert!(row.spec["request"].get("sets").is_none(), "{}", row.spec);
        let read = decode_group(&row).unwrap();
        assert!(read.spec.request.sets.is_empty());
        assert_eq!(read.spec, alike.spec);
        // A group of sets keeps each set through the store.
        let set = |name: &str, n: u32, cpu: u64| MemberSet {
            name: name.into(),
            min_members: n,
            max_members: n,
            requests: vec![("cpu".into(), cpu)],
            devices: Vec::new(),
            filter: Default::default(),
            topology: None,
        };
        let request =
            GroupRequest::simple("pi", 1, &[]).with_sets(vec![set("launcher", 1, 1000), set("worker", 4, 32_000)]);
        let sets = Group::submitted(spec(request.unwrap()), 0, 2);
        let read = decode_group(&group_row(&sets).unwrap()).unwrap();
        assert_eq!(read.spec, sets.spec);
        assert_eq!(read.spec.request.member_requests(0), [("cpu".to_string(), 1000)]);
    }
}
