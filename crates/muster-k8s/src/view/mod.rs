//! How a Group reads to people: the rows of `muster queue`, the explanation of `muster why`, in
//! the order and words a user needs (pending first, the plain reason, node ranges). Pure
//! functions of the objects and a clock, shared by the CLI and anything else that shows groups.

mod text;

use std::collections::BTreeMap;
use std::fmt::Write as _;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use k8s_openapi::jiff::Timestamp;
use muster_graph::dra::DeviceRequest;

use crate::queue::{DEFAULT_DEPTH, DEFAULT_SLOWDOWN, PolicyKind};
use crate::{Group, GroupState, Quantity, Queue, labels};
use text::{REASON_WIDTH, one_line, or_none, truncate};
pub use text::{absolute, allocation_lines, human_duration, quantity_text, relative, table};

/// Which groups `muster queue` lists.
#[derive(Debug, Clone, Default)]
pub struct ListOptions {
    pub queue: Option<String>,
    pub finished: bool,
}

/// One line of `muster queue`.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub namespace: String,
    pub name: String,
    pub queue: String,
    pub phase: Option<GroupState>,
    pub position: Option<u32>,
    pub members: String,
    pub estimated_start: Option<Timestamp>,
    pub created: Option<Timestamp>,
    pub requeues: u32,
    pub reason: String,
}

/// Pending first, then admitted and running, then finished.
fn stage(phase: Option<GroupState>) -> u8 {
    match phase {
        None
        | Some(GroupState::Queued)
        | Some(GroupState::Reserved)
        | Some(GroupState::Evicted)
        | Some(GroupState::Suspended)
        | Some(GroupState::Deactivated) => 0,
        Some(GroupState::Admitted) | Some(GroupState::Running) => 1,
        Some(GroupState::Succeeded) | Some(GroupState::Failed) | Some(GroupState::Deleted) => 2,
        // A status never shows New.
        Some(GroupState::New) => 0,
    }
}

/// The rows of `muster queue`: pending groups by queue and position, then admitted and running
/// ones by queue and age, then (if asked) finished ones.
pub fn queue_rows(groups: &[Group], opts: &ListOptions) -> Vec<Row> {
    let mut rows: Vec<Row> = groups
        .iter()
        .filter(|g| opts.queue.as_ref().is_none_or(|q| &g.spec.queue == q))
        .map(row)
        .filter(|r| opts.finished || stage(r.phase) < 2)
        .collect();
    rows.sort_by(|a, b| {
        (stage(a.phase), &a.queue)
            .cmp(&(stage(b.phase), &b.queue))
            // Unknown positions after known ones.
            .then_with(|| (a.position.is_none(), a.position).cmp(&(b.position.is_none(), b.position)))
            .then_with(|| a.created.cmp(&b.created))
            .then_with(|| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)))
    });
    rows
}

fn row(g: &Group) -> Row {
    let status = g.status.clone().unwrap_or_default();
    let pending = stage(status.phase) == 0;
    Row {
        namespace: g.metadata.namespace.clone().unwrap_or_default(),
        name: g.metadata.name.clone().unwrap_or_default(),
        queue: g.spec.queue.clone(),
        phase: status.phase,
        // Position and estimate describe waiting; on a running group they are stale.
        position: status.queue_position.filter(|_| pending),
        members: members(g.spec.members.min, g.spec.members.max, status.allocation.len()),
        estimated_start: status.estimated_start.as_ref().map(|t| t.0).filter(|_| pending),
        created: g.metadata.creation_timestamp.as_ref().map(|t| t.0),
        requeues: status.requeue.as_ref().map_or(0, |r| r.count),
        reason: reason(status.message.as_deref(), &status.conditions),
    }
}

/// `4`, or `4..8` for an elastic group; once placed, how many members it got: `6 of 4..8`.
pub fn members(min: i64, max: Option<i64>, allocated: usize) -> String {
    let range = match max {
        Some(max) if max != min => format!("{min}..{max}"),
        _ => min.to_string(),
    };
    if allocated > 0 && range.contains("..") { format!("{allocated} of {range}") } else { range }
}

/// The plain reason of a group: its message, else the message (or reason) of the condition that
/// changed last while true; empty when there is none.
pub fn reason(message: Option<&str>, conditions: &[Condition]) -> String {
    if let Some(m) = message.map(one_line).filter(|m| !m.is_empty()) {
        return m;
    }
    conditions
        .iter()
        .filter(|c| c.status == "True")
        .max_by_key(|c| c.last_transition_time.0)
        .map(|c| if c.message.trim().is_empty() { c.reason.clone() } else { one_line(&c.message) })
        .unwrap_or_default()
}

/// The table of `muster queue`; `all_namespaces` adds the NAMESPACE column, `wide` the absolute
/// estimated start, the age and the requeue count, and the whole reason.
pub fn render_table(rows: &[Row], wide: bool, all_namespaces: bool, now: Timestamp) -> String {
    let mut headers = Vec::new();
    if all_namespaces {
        headers.push("NAMESPACE");
    }
    headers.extend(["NAME", "QUEUE", "PHASE", "POSITION", "MEMBERS", "ESTIMATED-START"]);
    if wide {
        headers.extend(["ESTIMATED-AT", "AGE", "REQUEUES"]);
    }
    headers.push("REASON");
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let mut c = Vec::new();
            if all_namespaces {
                c.push(r.namespace.clone());
            }
            c.push(r.name.clone());
            c.push(r.queue.clone());
            c.push(r.phase.map_or("<none>".into(), |p| format!("{p:?}")));
            c.push(r.position.map_or("<none>".into(), |p| p.to_string()));
            c.push(r.members.clone());
            c.push(r.estimated_start.map_or("<none>".into(), |t| relative(now, t)));
            if wide {
                c.push(r.estimated_start.map_or("<none>".into(), absolute));
                c.push(r.created.map_or("<unknown>".into(), |t| human_duration(now.as_second() - t.as_second())));
                c.push(r.requeues.to_string());
                c.push(or_none(r.reason.clone()));
            } else {
                c.push(or_none(truncate(&r.reason, REASON_WIDTH)));
            }
            c
        })
        .collect();
    table(&headers, &cells)
}

/// `-o json`: `{"items": [...]}`, one object per row with every field (times in RFC 3339).
pub fn render_json(rows: &[Row]) -> String {
    let items: Vec<serde_json::Value> = rows
        .iter()
        .map(|r| {
            serde_json::json!({
                "namespace": r.namespace,
                "name": r.name,
                "queue": r.queue,
                "phase": r.phase.map(|p| format!("{p:?}")),
                "position": r.position,
                "members": r.members,
                "estimatedStart": r.estimated_start.map(absolute),
                "creationTimestamp": r.created.map(absolute),
                "requeues": r.requeues,
                "reason": r.reason,
            })
        })
        .collect();
    let mut s = serde_json::to_string_pretty(&serde_json::json!({ "items": items }))
        .unwrap_or_else(|_| "{\"items\": []}".into());
    s.push('\n');
    s
}

/// What `why` knows of the group's queue.
#[derive(Debug, Clone, PartialEq)]
pub enum QueueInfo {
    Found(Box<Queue>),
    Missing,
    /// Could not be read (often: a tenant may not read cluster-scoped Queues).
    Unknown,
}

/// Why `why` found no group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Missing {
    NoJob,
    Unlabelled,
    /// The job names this queue but the controller has made no group for it.
    NoGroupYet(String),
}

pub fn missing_message(namespace: &str, job: &str, m: &Missing) -> String {
    match m {
        Missing::NoJob => format!("no such job: {job} in namespace {namespace} (and no muster group of that name)"),
        Missing::Unlabelled => {
            format!("job {job} is not managed by muster: it has no {} label", labels::QUEUE)
        }
        Missing::NoGroupYet(q) => format!(
            "job {job} asks for queue {q} but muster has not made a group for it yet: is the muster controller running?"
        ),
    }
}

fn policy_text(q: &Queue) -> String {
    let policy = match q.spec.policy {
        None => selective(None, None),
        Some(p) => match p.kind {
            PolicyKind::StrictFifo => "strict FIFO".into(),
            PolicyKind::BestEffortFifo => "best-effort FIFO".into(),
            PolicyKind::Easy => "EASY backfill".into(),
            PolicyKind::Conservative => format!("conservative backfill, depth {}", p.depth.unwrap_or(DEFAULT_DEPTH)),
            PolicyKind::Selective => selective(p.depth, p.slowdown),
        },
    };
    match &q.spec.cohort {
        Some(c) => format!("{policy}; cohort {c}"),
        None => policy,
    }
}

fn selective(depth: Option<u32>, slowdown: Option<u32>) -> String {
    format!(
        "selective reservation, depth {}, at slowdown {}",
        depth.unwrap_or(DEFAULT_DEPTH),
        slowdown.unwrap_or(DEFAULT_SLOWDOWN)
    )
}

/// The explanation `muster why` prints for one group, in `kubectl describe` style.
pub fn explain(g: &Group, queue: &QueueInfo, now: Timestamp) -> String {
    let status = g.status.clone().unwrap_or_default();
    let ns = g.metadata.namespace.clone().unwrap_or_default();
    let name = g.metadata.name.clone().unwrap_or_default();
    let pending = stage(status.phase) == 0;
    let mut fields: Vec<(&str, String)> = Vec::new();
    fields.push(("Group", format!("{ns}/{name}")));
    if let Some(o) = &g.spec.owner {
        fields.push(("Owner", format!("{} {}", o.kind, o.name)));
    }
    let queue_text = match queue {
        QueueInfo::Found(q) => format!("{} ({})", g.spec.queue, policy_text(q)),
        QueueInfo::Missing => {
            format!("{} (no such Queue: the group waits until a Queue of that name exists)", g.spec.queue)
        }
        QueueInfo::Unknown => g.spec.queue.clone(),
    };
    fields.push(("Queue", queue_text));
    fields.push((
        "Phase",
        status.phase.map_or("<none> (muster has not looked at the group yet)".into(), |p| format!("{p:?}")),
    ));
    let each = |resources: &BTreeMap<String, Quantity>, devices: &[DeviceRequest]| {
        let amounts = resources.iter().map(|(r, q)| format!("{r} {}", quantity_text(r, q)));
        amounts.chain(devices.iter().map(DeviceRequest::describe)).collect::<Vec<_>>().join(", ")
    };
    let mut size = members(g.spec.members.min, g.spec.members.max, status.allocation.len());
    if !g.spec.resources.is_empty() || !g.spec.devices.is_empty() {
        let _ = write!(size, ", each {}", each(&g.spec.resources, &g.spec.devices));
    }
    fields.push(("Members", size));
    // "launcher 1 (each cpu 1); worker 4 (each cpu 32, nvidia.com/gpu 8)"; a replica beyond a k of
    // n gang's k: "replica-2 8 (optional, each cpu 4)"
    let sets: Vec<String> = (g.spec.sets.iter())
        .map(|s| {
            let count = match s.members.max.filter(|m| *m != s.members.min) {
                Some(max) => format!("{}..{max}", s.members.min),
                None => s.members.min.to_string(),
            };
            let optional = if s.optional { "optional, " } else { "" };
            format!("{} {count} ({optional}each {})", s.name, or_none(each(&s.resources, &s.devices)))
        })
        .collect();
    if !sets.is_empty() {
        fields.push(("Sets", sets.join("; ")));
    }
    if pending {
        fields.push((
            "Position",
            status.queue_position.map_or("<none>".into(), |p| format!("{p} in queue {}", g.spec.queue)),
        ));
        fields.push((
            "Estimated start",
            status
                .estimated_start
                .as_ref()
                .map_or("<none>".into(), |t| format!("{} ({})", relative(now, t.0), absolute(t.0))),
        ));
        let scored = match queue {
            QueueInfo::Found(q) => q.status.as_ref().and_then(|s| s.estimates),
            _ => None,
        };
        if let Some(a) = scored {
            let groups = if a.groups == 1 { "group" } else { "groups" };
            fields.push((
                "Estimates",
                format!(
                    "off by {}% of the wait (median) for the last {} {groups} admitted from queue {}",
                    a.median_error_percent, a.groups, g.spec.queue
                ),
            ));
        }
    }
    fields.push(("Message", or_none(status.message.as_deref().map(one_line).unwrap_or_default())));
    if let Some(r) = &status.requeue {
        let next = r
            .requeue_at
            .as_ref()
            .map(|t| format!(", back in the queue {} ({})", relative(now, t.0), absolute(t.0)))
            .unwrap_or_default();
        fields.push(("Requeues", format!("{}{next}", r.count)));
    }
    if let Some(d) = g.spec.duration_seconds.filter(|d| *d > 0) {
        fields.push(("Expected run", human_duration(d)));
    }
    // Values line up after the longest label, "Allocation:" included.
    let width = fields.iter().map(|(k, _)| k.len()).chain(["Allocation".len()]).max().unwrap_or(0) + 2;
    let mut out = String::new();
    for (k, v) in &fields {
        let _ = writeln!(out, "{:<width$}{v}", format!("{k}:"));
    }
    if status.conditions.is_empty() {
        let _ = writeln!(out, "{:<width$}<none>", "Conditions:");
    } else {
        let _ = writeln!(out, "Conditions:");
        let rows: Vec<Vec<String>> = status
            .conditions
            .iter()
            .map(|c| {
                vec![
                    c.type_.clone(),
                    c.status.clone(),
                    or_none(c.reason.clone()),
                    human_duration(now.as_second() - c.last_transition_time.0.as_second()),
                    or_none(one_line(&c.message)),
                ]
            })
            .collect();
        for line in table(&["TYPE", "STATUS", "REASON", "AGE", "MESSAGE"], &rows).lines() {
            let _ = writeln!(out, "  {line}");
        }
    }
    if status.allocation.is_empty() {
        let _ = writeln!(out, "{:<width$}<none>", "Allocation:");
    } else {
        let mut nodes: Vec<&str> = status.allocation.iter().map(|a| a.node.as_str()).collect();
        nodes.sort_unstable();
        nodes.dedup();
        let _ = writeln!(out, "{:<width$}{} members on {} nodes", "Allocation:", status.allocation.len(), nodes.len());
        for l in allocation_lines(&status.allocation) {
            let _ = writeln!(out, "  {l}");
        }
    }
    out
}

#[cfg(test)]
mod tests;
