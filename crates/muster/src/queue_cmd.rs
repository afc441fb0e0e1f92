//! `muster queue` and `muster why`: what waits where, and why one job is where it is.
//!
//! Both read Group and Queue objects from the cluster the kubeconfig names, as kubectl does. All
//! that is shown is computed by pure functions from the objects and a clock, so the formatting is
//! tested without a cluster; only `queue` and `why` themselves talk to the apiserver.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, anyhow};
use clap::{Args, ValueEnum};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use muster_k8s::group::MemberAllocation;
use muster_k8s::queue::{DEFAULT_DEPTH, PolicyKind};
use muster_k8s::{Group, GroupPhase, Quantity, Queue, labels};

/// Where the cluster is: the kubectl flags that choose it.
#[derive(Args, Debug, Clone)]
pub struct KubeArgs {
    /// Path to the kubeconfig file (default: $KUBECONFIG, else ~/.kube/config).
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (default: its current context).
    #[arg(long, value_name = "NAME")]
    context: Option<String>,
    /// Namespace (default: the namespace of the context, else "default").
    #[arg(short = 'n', long, value_name = "NS")]
    namespace: Option<String>,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// More columns: absolute estimated start, age, requeues.
    Wide,
    /// One JSON object with the rows as items.
    Json,
}

#[derive(Args, Debug)]
pub struct QueueArgs {
    #[command(flatten)]
    kube: KubeArgs,
    /// Groups of every namespace (a NAMESPACE column is added).
    #[arg(short = 'A', long)]
    all_namespaces: bool,
    /// Only the groups of this queue.
    #[arg(long, value_name = "QUEUE")]
    queue: Option<String>,
    /// Also list finished groups (Succeeded, Failed), last.
    #[arg(long)]
    finished: bool,
    /// Output format.
    #[arg(short = 'o', long, value_enum, value_name = "FORMAT")]
    output: Option<Output>,
}

#[derive(Args, Debug)]
pub struct WhyArgs {
    #[command(flatten)]
    kube: KubeArgs,
    /// The Job (or pod group) to explain.
    job: String,
}

/// `muster queue`.
pub fn queue(args: &QueueArgs) -> Result<ExitCode> {
    runtime()?.block_on(async {
        let (client, namespace) = connect(&args.kube).await?;
        let api: Api<Group> =
            if args.all_namespaces { Api::all(client.clone()) } else { Api::namespaced(client.clone(), &namespace) };
        let groups = api.list(&ListParams::default()).await.map_err(|e| api_error(e, "groups"))?.items;
        let mut notes = Vec::new();
        if let Some(q) = &args.queue {
            // A misspelt queue would otherwise just print an empty table.
            if let Ok(None) = Api::<Queue>::all(client).get_opt(q).await {
                notes.push(format!("warning: queue {q} does not exist"));
            }
        }
        let opts = ListOptions { queue: args.queue.clone(), finished: args.finished };
        let rows = queue_rows(&groups, &opts);
        let out = match args.output {
            Some(Output::Json) => render_json(&rows),
            wide => {
                if rows.is_empty() {
                    let scope = if args.all_namespaces { String::new() } else { format!(" in {namespace} namespace") };
                    notes.push(format!("No groups found{scope}."));
                    String::new()
                } else {
                    render_table(&rows, wide == Some(Output::Wide), args.all_namespaces, Timestamp::now())
                }
            }
        };
        print!("{out}");
        for n in notes {
            eprintln!("{n}");
        }
        Ok(ExitCode::SUCCESS)
    })
}

/// `muster why JOB`.
pub fn why(args: &WhyArgs) -> Result<ExitCode> {
    runtime()?.block_on(async {
        let (client, namespace) = connect(&args.kube).await?;
        let groups: Api<Group> = Api::namespaced(client.clone(), &namespace);
        let mut group = groups.get_opt(&args.job).await.map_err(|e| api_error(e, "groups"))?;
        if group.is_none() {
            // The controller names a group after its job, but look for an owner too: a group made
            // from a JobSet or pod group may stand for a job of another name.
            let all = groups.list(&ListParams::default()).await.map_err(|e| api_error(e, "groups"))?.items;
            group = all.into_iter().find(|g| g.spec.owner.as_ref().is_some_and(|o| o.name == args.job));
        }
        let Some(group) = group else {
            let jobs: Api<Job> = Api::namespaced(client, &namespace);
            let job = jobs.get_opt(&args.job).await.map_err(|e| api_error(e, "jobs"))?;
            let missing = match job {
                None => Missing::NoJob,
                Some(j) => match j.metadata.labels.as_ref().and_then(|l| l.get(labels::QUEUE)) {
                    None => Missing::Unlabelled,
                    Some(q) => Missing::NoGroupYet(q.clone()),
                },
            };
            let text = missing_message(&namespace, &args.job, &missing);
            if missing == Missing::NoJob {
                eprintln!("error: {text}");
            } else {
                println!("{text}");
            }
            return Ok(ExitCode::from(1));
        };
        // Tenants often may not read cluster-scoped Queues; then the queue line says less.
        let queue = match Api::<Queue>::all(client).get_opt(&group.spec.queue).await {
            Ok(Some(q)) => QueueInfo::Found(Box::new(q)),
            Ok(None) => QueueInfo::Missing,
            Err(_) => QueueInfo::Unknown,
        };
        print!("{}", explain(&group, &queue, Timestamp::now()));
        Ok(ExitCode::SUCCESS)
    })
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread().enable_all().build().context("cannot start the async runtime")
}

/// A client and the namespace to use, from the kubeconfig as kubectl picks it.
async fn connect(k: &KubeArgs) -> Result<(Client, String)> {
    let options = KubeConfigOptions { context: k.context.clone(), cluster: None, user: None };
    let mut config = match &k.kubeconfig {
        Some(path) => {
            let kc =
                Kubeconfig::read_from(path).with_context(|| format!("cannot read kubeconfig {}", path.display()))?;
            Config::from_custom_kubeconfig(kc, &options).await.context("invalid kubeconfig")?
        }
        // No flags: also works inside a pod, as kubectl does.
        None if k.context.is_none() => Config::infer()
            .await
            .map_err(|e| anyhow!("no usable kubeconfig (set KUBECONFIG or pass --kubeconfig): {e}"))?,
        None => Config::from_kubeconfig(&options).await.context("cannot load the kubeconfig")?,
    };
    // A dead apiserver should fail the command, not hang it.
    config.connect_timeout = Some(Duration::from_secs(10));
    config.read_timeout = Some(Duration::from_secs(60));
    let namespace = k.namespace.clone().unwrap_or_else(|| config.default_namespace.clone());
    let client = Client::try_from(config).context("cannot build a Kubernetes client")?;
    Ok((client, namespace))
}

fn api_error(e: kube::Error, what: &str) -> anyhow::Error {
    match &e {
        kube::Error::Api(s) if s.code == 404 && what == "groups" => anyhow!(
            "the server does not know muster Groups (groups.muster.dev): install the CRDs with \
             `kubectl apply -f deploy/crds.yaml`"
        ),
        kube::Error::Api(s) if s.code == 403 => anyhow!("forbidden: {}", s.message),
        _ => anyhow::Error::new(e).context(format!("cannot read {what}")),
    }
}

// ---------------------------------------------------------------------------------------------
// Pure part: rows, tables, explanations.

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
    pub phase: Option<GroupPhase>,
    pub position: Option<u32>,
    pub members: String,
    pub estimated_start: Option<Timestamp>,
    pub created: Option<Timestamp>,
    pub requeues: u32,
    pub reason: String,
}

/// Pending first, then admitted and running, then finished.
fn stage(phase: Option<GroupPhase>) -> u8 {
    match phase {
        None
        | Some(GroupPhase::Queued)
        | Some(GroupPhase::Reserved)
        | Some(GroupPhase::Evicted)
        | Some(GroupPhase::Suspended)
        | Some(GroupPhase::Deactivated) => 0,
        Some(GroupPhase::Admitted) | Some(GroupPhase::Running) => 1,
        Some(GroupPhase::Succeeded) | Some(GroupPhase::Failed) => 2,
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

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The longest reason a normal table shows; `-o wide` shows all of it.
const REASON_WIDTH: usize = 80;

fn truncate(s: &str, width: usize) -> String {
    if s.chars().count() <= width {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(width.saturating_sub(3)).collect();
        t.push_str("...");
        t
    }
}

fn or_none(s: String) -> String {
    if s.is_empty() { "<none>".into() } else { s }
}

/// A kubectl-style table: uppercase headers, columns three spaces apart, no trailing blanks.
pub fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (i, cell) in r.iter().enumerate() {
            if let Some(w) = widths.get_mut(i) {
                *w = (*w).max(cell.chars().count());
            }
        }
    }
    let mut out = String::new();
    let header: Vec<String> = headers.iter().map(|h| h.to_string()).collect();
    for r in std::iter::once(&header).chain(rows) {
        let mut line = String::new();
        for (i, cell) in r.iter().enumerate() {
            if i + 1 == r.len() {
                line.push_str(cell);
            } else {
                let pad = widths[i] - cell.chars().count();
                line.push_str(cell);
                line.push_str(&" ".repeat(pad + 3));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
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

/// A time as the apiserver writes it, to the second.
pub fn absolute(t: Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// `in 3m` for a time ahead of `now`, `3m ago` for one behind it, `now` within a second.
pub fn relative(now: Timestamp, t: Timestamp) -> String {
    let d = t.as_second() - now.as_second();
    match d {
        0 => "now".into(),
        d if d > 0 => format!("in {}", human_duration(d)),
        d => format!("{} ago", human_duration(-d)),
    }
}

/// A duration the way kubectl shows ages: exact while short, coarser as it grows
/// (`45s`, `2m30s`, `15m`, `3h20m`, `12h`, `2d4h`, `30d`, `3y`).
pub fn human_duration(secs: i64) -> String {
    let s = secs.max(0);
    let (m, h, d) = (s / 60, s / 3600, s / 86_400);
    if s < 120 {
        format!("{s}s")
    } else if m < 10 {
        if s % 60 == 0 { format!("{m}m") } else { format!("{m}m{}s", s % 60) }
    } else if h < 3 {
        format!("{m}m")
    } else if h < 8 {
        if m % 60 == 0 { format!("{h}h") } else { format!("{h}h{}m", m % 60) }
    } else if h < 48 {
        format!("{h}h")
    } else if h < 192 {
        if h % 24 == 0 { format!("{d}d") } else { format!("{d}d{}h", h % 24) }
    } else if d < 730 {
        format!("{d}d")
    } else {
        format!("{}y", d / 365)
    }
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

/// Members placed on more nodes than this are summarised as node ranges.
const ALLOCATION_LIST_MAX: usize = 8;

/// The allocation as lines: one per member for small groups (`member 0 -> node-1`), else runs of
/// consecutively numbered nodes with their member counts (`node-1..node-9 (10 members)`).
pub fn allocation_lines(allocation: &[MemberAllocation]) -> Vec<String> {
    let mut sorted: Vec<&MemberAllocation> = allocation.iter().collect();
    sorted.sort_by_key(|a| a.member);
    if sorted.len() <= ALLOCATION_LIST_MAX {
        return sorted.iter().map(|a| format!("member {} -> {}", a.member, a.node)).collect();
    }
    // Members per node, nodes in natural order (node-2 before node-10).
    let mut per_node: Vec<(String, usize)> = Vec::new();
    let mut nodes: Vec<&str> = sorted.iter().map(|a| a.node.as_str()).collect();
    nodes.sort_by(|a, b| natural_key(a).cmp(&natural_key(b)));
    for n in nodes {
        match per_node.last_mut() {
            Some((last, count)) if last == n => *count += 1,
            _ => per_node.push((n.to_string(), 1)),
        }
    }
    let mut runs: Vec<(String, String, usize)> = Vec::new();
    for (node, count) in per_node {
        match runs.last_mut() {
            Some((_, last, c)) if follows(last, &node) => {
                *last = node;
                *c += count;
            }
            _ => runs.push((node.clone(), node, count)),
        }
    }
    let plural = |c: usize| if c == 1 { "member" } else { "members" };
    runs.into_iter()
        .map(|(first, last, c)| {
            if first == last {
                format!("{first} ({c} {})", plural(c))
            } else {
                format!("{first}..{last} ({c} {})", plural(c))
            }
        })
        .collect()
}

/// A name split into its text and a trailing number, if any: `node-10` is (`node-`, `10`).
fn split_number(name: &str) -> (&str, &str) {
    let digits = name.len() - name.bytes().rev().take_while(u8::is_ascii_digit).count();
    name.split_at(digits)
}

fn natural_key(name: &str) -> (&str, usize, &str) {
    let (prefix, digits) = split_number(name);
    // Compare numbers by length first, then text: same order as their values, any size.
    let trimmed = digits.trim_start_matches('0');
    (prefix, trimmed.len(), trimmed)
}

/// Whether `next` is the node after `prev` in a numbered series (`node-9` -> `node-10`,
/// `gpu-007` -> `gpu-008`).
fn follows(prev: &str, next: &str) -> bool {
    let (p1, d1) = split_number(prev);
    let (p2, d2) = split_number(next);
    if p1 != p2 || d1.is_empty() || d2.is_empty() {
        return false;
    }
    let (Ok(a), Ok(b)) = (d1.parse::<u128>(), d2.parse::<u128>()) else { return false };
    if a.checked_add(1) != Some(b) {
        return false;
    }
    // Zero-padded series keep their width; unpadded ones may grow (9 -> 10).
    let padded = d1.len() > 1 && d1.starts_with('0');
    !padded || d2.len() == d1.len()
}

fn policy_text(q: &Queue) -> String {
    let policy = match q.spec.policy {
        None => format!("conservative backfill, depth {DEFAULT_DEPTH}"),
        Some(p) => match p.kind {
            PolicyKind::StrictFifo => "strict FIFO".into(),
            PolicyKind::BestEffortFifo => "best-effort FIFO".into(),
            PolicyKind::Easy => "EASY backfill".into(),
            PolicyKind::Conservative => format!("conservative backfill, depth {}", p.depth.unwrap_or(DEFAULT_DEPTH)),
        },
    };
    match &q.spec.cohort {
        Some(c) => format!("{policy}; cohort {c}"),
        None => policy,
    }
}

/// A per-member amount as people write it: the controller stores base units (`2000m`,
/// `2147483648`), shown as `2` and `2Gi`; anything else as written.
pub fn quantity_text(resource: &str, q: &Quantity) -> String {
    let bytes = resource == "memory" || resource.ends_with("storage") || resource.starts_with("hugepages-");
    match q {
        Quantity::Int(i) if bytes && *i > 0 => {
            let unit = ["Ei", "Pi", "Ti", "Gi", "Mi", "Ki"]
                .iter()
                .zip([60, 50, 40, 30, 20, 10])
                .find(|(_, shift)| i % (1i64 << shift) == 0);
            match unit {
                Some((u, shift)) => format!("{}{u}", i >> shift),
                None => i.to_string(),
            }
        }
        Quantity::Int(i) => i.to_string(),
        Quantity::Text(s) => match s.strip_suffix('m').and_then(|m| m.parse::<u64>().ok()) {
            Some(milli) if milli % 1000 == 0 => (milli / 1000).to_string(),
            _ => s.clone(),
        },
    }
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
    let mut size = members(g.spec.members.min, g.spec.members.max, status.allocation.len());
    if !g.spec.resources.is_empty() {
        let each: Vec<String> = g.spec.resources.iter().map(|(r, q)| format!("{r} {}", quantity_text(r, q))).collect();
        let _ = write!(size, ", each {}", each.join(", "));
    }
    fields.push(("Members", size));
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

/// Whether the binary was started as a kubectl plugin (`kubectl muster ...` runs `kubectl-muster`).
pub fn invoked_as_plugin(argv0: &str) -> bool {
    std::path::Path::new(argv0)
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.trim_end_matches(".exe") == "kubectl-muster")
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    const NOW: &str = "2026-01-02T03:00:00Z";

    /// A Group from the JSON the apiserver would return; `status` is spliced in as given.
    fn group(ns: &str, name: &str, queue: &str, members: &str, status: &str) -> Group {
        serde_json::from_str(&format!(
            r#"{{"apiVersion": "muster.dev/v1alpha1", "kind": "Group",
                "metadata": {{"name": "{name}", "namespace": "{ns}", "creationTimestamp": "2026-01-02T02:50:00Z"}},
                "spec": {{"queue": "{queue}", "members": {members}, "resources": {{"cpu": 2, "memory": "2Gi"}}}},
                "status": {status}}}"#
        ))
        .unwrap()
    }

    fn cond(type_: &str, status: &str, reason: &str, message: &str, at: &str) -> Condition {
        Condition {
            type_: type_.into(),
            status: status.into(),
            reason: reason.into(),
            message: message.into(),
            observed_generation: None,
            last_transition_time: Time(ts(at)),
        }
    }

    /// The cells of each line of a table, split on runs of two or more spaces.
    fn cells(table: &str) -> Vec<Vec<String>> {
        table
            .lines()
            .map(|l| l.split("  ").map(str::trim).filter(|c| !c.is_empty()).map(String::from).collect())
            .collect()
    }

    fn line_cells(line: &str) -> Vec<String> {
        cells(line).remove(0)
    }

    fn mixed() -> Vec<Group> {
        vec![
            group(
                "ml",
                "running",
                "b",
                r#"{"min": 4}"#,
                r#"{"phase": "Running", "queuePosition": 9, "allocation": [{"member": 0, "node": "n1"}]}"#,
            ),
            group(
                "ml",
                "third",
                "b",
                r#"{"min": 4}"#,
                r#"{"phase": "Queued", "queuePosition": 3, "estimatedStart": "2026-01-02T03:10:00Z", "message": "waits for 8 cpu"}"#,
            ),
            group(
                "ml",
                "first",
                "b",
                r#"{"min": 2, "max": 6}"#,
                r#"{"phase": "Reserved", "queuePosition": 1, "estimatedStart": "2026-01-02T03:03:00Z"}"#,
            ),
            group("dev", "other-queue", "a", r#"{"min": 1}"#, r#"{"phase": "Queued", "queuePosition": 2}"#),
            group("dev", "new", "a", r#"{"min": 1}"#, r#"{}"#),
            group("ml", "done", "a", r#"{"min": 1}"#, r#"{"phase": "Succeeded"}"#),
            group("ml", "admitted", "a", r#"{"min": 1}"#, r#"{"phase": "Admitted"}"#),
        ]
    }

    #[test]
    fn pending_groups_come_first_by_queue_and_position_then_active_ones() {
        let rows = queue_rows(&mixed(), &ListOptions::default());
        let names: Vec<&str> = rows.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["other-queue", "new", "first", "third", "admitted", "running"]);
        // A running group's stale position is not shown.
        assert_eq!(rows[5].position, None);
        let with_done = queue_rows(&mixed(), &ListOptions { finished: true, ..Default::default() });
        assert_eq!(with_done.last().map(|r| r.name.as_str()), Some("done"));
        let only_b = queue_rows(&mixed(), &ListOptions { queue: Some("b".into()), finished: true });
        assert!(only_b.iter().all(|r| r.queue == "b"), "{only_b:?}");
        assert_eq!(only_b.len(), 3);
    }

    #[test]
    fn table_has_kubectl_headers_aligned_columns_and_none() {
        let rows = queue_rows(&mixed(), &ListOptions::default());
        let t = render_table(&rows, false, true, ts(NOW));
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(
            line_cells(lines[0]),
            ["NAMESPACE", "NAME", "QUEUE", "PHASE", "POSITION", "MEMBERS", "ESTIMATED-START", "REASON"]
        );
        // Every column starts at the same offset on every line.
        for header in ["NAME", "QUEUE", "PHASE", "POSITION", "ESTIMATED-START", "REASON"] {
            let col = lines[0].find(&format!("   {header}")).unwrap() + 3;
            for l in &lines[1..] {
                assert!(l.len() > col && l.as_bytes()[col - 1] == b' ', "{header} misaligned in {l:?}");
                assert_ne!(l.as_bytes()[col], b' ', "{header} misaligned in {l:?}");
            }
        }
        assert!(t.lines().all(|l| l == l.trim_end()), "trailing blanks");
        let third = line_cells(lines.iter().find(|l| l.contains("third")).unwrap());
        assert_eq!(third, ["ml", "third", "b", "Queued", "3", "4", "in 10m", "waits for 8 cpu"]);
        let first = line_cells(lines.iter().find(|l| l.contains("first")).unwrap());
        assert_eq!(&first[3..7], ["Reserved", "1", "2..6", "in 3m"]);
        let new = line_cells(lines.iter().find(|l| l.contains(" new ")).unwrap());
        assert_eq!(&new[3..], ["<none>", "<none>", "1", "<none>", "<none>"]);
        let running = line_cells(lines.iter().find(|l| l.contains("running")).unwrap());
        assert_eq!(&running[3..], ["Running", "<none>", "4", "<none>", "<none>"]);
    }

    #[test]
    fn one_namespace_has_no_namespace_column_and_wide_adds_absolute_times() {
        let rows = queue_rows(&mixed(), &ListOptions { queue: Some("b".into()), finished: false });
        let t = render_table(&rows, true, false, ts(NOW));
        let lines = cells(&t);
        assert_eq!(
            lines[0],
            [
                "NAME",
                "QUEUE",
                "PHASE",
                "POSITION",
                "MEMBERS",
                "ESTIMATED-START",
                "ESTIMATED-AT",
                "AGE",
                "REQUEUES",
                "REASON"
            ]
        );
        assert_eq!(lines[1][0], "first");
        assert_eq!(&lines[1][5..9], ["in 3m", "2026-01-02T03:03:00Z", "10m", "0"]);
    }

    #[test]
    fn long_reasons_are_cut_unless_wide() {
        let long = "x".repeat(200);
        let g = group("ml", "g", "q", r#"{"min": 1}"#, &format!(r#"{{"phase": "Queued", "message": "{long}"}}"#));
        let rows = queue_rows(&[g], &ListOptions::default());
        let normal = render_table(&rows, false, false, ts(NOW));
        assert!(normal.lines().nth(1).unwrap().ends_with("xxx..."));
        assert!(!normal.contains(&long));
        assert!(render_table(&rows, true, false, ts(NOW)).contains(&long));
    }

    #[test]
    fn json_has_every_field() {
        let rows = queue_rows(&mixed(), &ListOptions::default());
        let v: serde_json::Value = serde_json::from_str(&render_json(&rows)).unwrap();
        let items = v["items"].as_array().unwrap();
        assert_eq!(items.len(), rows.len());
        let third = items.iter().find(|i| i["name"] == "third").unwrap();
        assert_eq!(third["position"], 3);
        assert_eq!(third["estimatedStart"], "2026-01-02T03:10:00Z");
        assert_eq!(third["phase"], "Queued");
        assert_eq!(third["reason"], "waits for 8 cpu");
        assert!(items.iter().find(|i| i["name"] == "new").unwrap()["phase"].is_null());
    }

    #[test]
    fn reason_prefers_the_message_then_the_latest_true_condition() {
        let c = [
            cond("Queued", "True", "Waiting", "waits for quota", "2026-01-02T02:00:00Z"),
            cond("Reserved", "True", "Reserved", "start reserved at 03:10", "2026-01-02T02:30:00Z"),
            cond("Evicted", "False", "Evicted", "was evicted", "2026-01-02T02:59:00Z"),
        ];
        assert_eq!(reason(Some("  two\n lines "), &c), "two lines");
        assert_eq!(reason(None, &c), "start reserved at 03:10");
        assert_eq!(reason(Some(""), &c[..1]), "waits for quota");
        let bare = [cond("Queued", "True", "Waiting", "", "2026-01-02T02:00:00Z")];
        assert_eq!(reason(None, &bare), "Waiting");
        assert_eq!(reason(None, &[]), "");
    }

    #[test]
    fn durations_read_like_kubectl() {
        for (secs, want) in [
            (0, "0s"),
            (45, "45s"),
            (119, "119s"),
            (150, "2m30s"),
            (180, "3m"),
            (900, "15m"),
            (3 * 3600 + 20 * 60, "3h20m"),
            (12 * 3600, "12h"),
            (52 * 3600, "2d4h"),
            (30 * 86_400, "30d"),
            (3 * 365 * 86_400, "3y"),
            (-5, "0s"),
        ] {
            assert_eq!(human_duration(secs), want, "{secs}");
        }
        let now = ts(NOW);
        assert_eq!(relative(now, ts("2026-01-02T03:03:00Z")), "in 3m");
        assert_eq!(relative(now, ts("2026-01-02T02:59:15Z")), "45s ago");
        assert_eq!(relative(now, now), "now");
        assert_eq!(absolute(ts("2026-01-02T03:03:00.75Z")), "2026-01-02T03:03:00Z");
    }

    fn alloc(pairs: &[(u32, &str)]) -> Vec<MemberAllocation> {
        pairs.iter().map(|(m, n)| MemberAllocation { member: *m, node: n.to_string() }).collect()
    }

    #[test]
    fn small_allocations_list_each_member() {
        let a = alloc(&[(1, "node-2"), (0, "node-1")]);
        assert_eq!(allocation_lines(&a), ["member 0 -> node-1", "member 1 -> node-2"]);
    }

    #[test]
    fn big_allocations_collapse_into_node_ranges() {
        // 10 members on node-1..node-9, two of them on node-5; node-10 follows node-9.
        let mut pairs: Vec<(u32, String)> = (1..=9).map(|i| (i - 1, format!("node-{i}"))).collect();
        pairs.push((9, "node-5".into()));
        let a: Vec<MemberAllocation> =
            pairs.iter().map(|(m, n)| MemberAllocation { member: *m, node: n.clone() }).collect();
        assert_eq!(allocation_lines(&a), ["node-1..node-9 (10 members)"]);
        let mut gap = a.clone();
        gap.push(MemberAllocation { member: 10, node: "node-10".into() });
        gap.push(MemberAllocation { member: 11, node: "node-12".into() });
        gap.push(MemberAllocation { member: 12, node: "gpu-01".into() });
        assert_eq!(allocation_lines(&gap), ["gpu-01 (1 member)", "node-1..node-10 (11 members)", "node-12 (1 member)"]);
    }

    #[test]
    fn numbered_series_follow_each_other() {
        assert!(follows("node-9", "node-10"));
        assert!(follows("gpu-007", "gpu-008"));
        assert!(!follows("gpu-009", "gpu-0010"));
        assert!(!follows("node-1", "node-3"));
        assert!(!follows("a-1", "b-2"));
        assert!(!follows("node", "node"));
        assert!(!follows("n-99999999999999999999999999999999999999999", "n-1"));
        let mut names = vec!["node-10", "node-9", "node-1"];
        names.sort_by(|a, b| natural_key(a).cmp(&natural_key(b)));
        assert_eq!(names, ["node-1", "node-9", "node-10"]);
    }

    #[test]
    fn why_explains_a_waiting_group() {
        let mut g = group(
            "ml",
            "train",
            "team-a",
            r#"{"min": 4, "max": 8}"#,
            r#"{"phase": "Queued", "queuePosition": 2, "estimatedStart": "2026-01-02T03:05:00Z",
                "message": "needs 16 cpu; 8 free in the quota of team-a",
                "requeue": {"count": 1, "requeueAt": "2026-01-02T03:01:00Z"}}"#,
        );
        g.status.as_mut().unwrap().conditions = vec![
            cond("Queued", "True", "QuotaExceeded", "needs 16 cpu", "2026-01-02T02:55:00Z"),
            cond("Evicted", "True", "PodsReadyTimeout", "not ready within 300s", "2026-01-02T02:50:00Z"),
        ];
        let q: Queue = serde_json::from_str(
            r#"{"apiVersion": "muster.dev/v1alpha1", "kind": "Queue", "metadata": {"name": "team-a"},
                "spec": {"policy": {"kind": "conservative", "depth": 4}, "cohort": "research"}}"#,
        )
        .unwrap();
        let text = explain(&g, &QueueInfo::Found(Box::new(q)), ts(NOW));
        let line = |key: &str| {
            text.lines().find(|l| l.starts_with(key)).unwrap_or_else(|| panic!("no {key} in\n{text}")).to_string()
        };
        assert!(line("Group:").ends_with("ml/train"));
        assert!(line("Queue:").contains("team-a (conservative backfill, depth 4; cohort research)"));
        assert!(line("Phase:").ends_with("Queued"));
        assert!(line("Members:").contains("4..8, each cpu 2, memory 2Gi"));
        assert!(line("Position:").ends_with("2 in queue team-a"));
        assert!(line("Estimated start:").ends_with("in 5m (2026-01-02T03:05:00Z)"));
        assert!(line("Message:").ends_with("needs 16 cpu; 8 free in the quota of team-a"));
        assert!(line("Requeues:").contains("1, back in the queue in 60s (2026-01-02T03:01:00Z)"));
        assert!(line("Allocation:").ends_with("<none>"));
        let queued = text.lines().find(|l| l.trim_start().starts_with("Queued")).unwrap();
        assert_eq!(line_cells(queued), ["Queued", "True", "QuotaExceeded", "5m", "needs 16 cpu"]);
        let evicted = text.lines().find(|l| l.trim_start().starts_with("Evicted")).unwrap();
        assert_eq!(line_cells(evicted), ["Evicted", "True", "PodsReadyTimeout", "10m", "not ready within 300s"]);
        // Fields line up after their labels.
        let starts: Vec<usize> = ["Group:", "Queue:", "Phase:", "Message:"]
            .iter()
            .map(|k| {
                let l = line(k);
                l.len() - l[k.len()..].trim_start().len()
            })
            .collect();
        assert!(starts.windows(2).all(|w| w[0] == w[1]), "{starts:?}\n{text}");
    }

    #[test]
    fn why_explains_a_running_group_without_stale_waiting_fields() {
        let allocation: Vec<String> =
            (0..10).map(|i| format!(r#"{{"member": {i}, "node": "node-{}"}}"#, i / 2 + 1)).collect();
        let g = group(
            "ml",
            "big",
            "q",
            r#"{"min": 10}"#,
            &format!(
                r#"{{"phase": "Running", "queuePosition": 4, "estimatedStart": "2026-01-02T02:00:00Z", "allocation": [{}]}}"#,
                allocation.join(",")
            ),
        );
        let text = explain(&g, &QueueInfo::Missing, ts(NOW));
        assert!(!text.contains("Position:"), "{text}");
        assert!(!text.contains("Estimated start:"), "{text}");
        assert!(text.contains("no such Queue"), "{text}");
        assert!(text.lines().any(|l| l.starts_with("Allocation:") && l.ends_with(" 10 members on 5 nodes")), "{text}");
        assert!(text.contains("  node-1..node-5 (10 members)"), "{text}");
        assert!(text.contains("Conditions:") && text.contains("<none>"), "{text}");
    }

    #[test]
    fn a_group_without_status_says_so() {
        let g = group("ml", "fresh", "q", r#"{"min": 1}"#, "{}");
        let text = explain(&g, &QueueInfo::Unknown, ts(NOW));
        assert!(text.contains("muster has not looked at the group yet"), "{text}");
        assert!(text.lines().any(|l| l.starts_with("Queue:") && l.ends_with(" q")), "{text}");
    }

    #[test]
    fn missing_groups_are_explained() {
        assert_eq!(
            missing_message("ml", "x", &Missing::Unlabelled),
            "job x is not managed by muster: it has no muster.dev/queue label"
        );
        assert!(missing_message("ml", "x", &Missing::NoJob).starts_with("no such job: x in namespace ml"));
        assert!(missing_message("ml", "x", &Missing::NoGroupYet("q".into())).contains("controller"));
    }

    #[test]
    fn base_units_read_as_people_write_them() {
        assert_eq!(quantity_text("memory", &Quantity::Int(2 << 30)), "2Gi");
        assert_eq!(quantity_text("memory", &Quantity::Int(1536 << 20)), "1536Mi");
        assert_eq!(quantity_text("memory", &Quantity::Int(1000)), "1000");
        assert_eq!(quantity_text("memory", &Quantity::Int(0)), "0");
        assert_eq!(quantity_text("ephemeral-storage", &Quantity::Int(1 << 40)), "1Ti");
        assert_eq!(quantity_text("cpu", &Quantity::Text("2000m".into())), "2");
        assert_eq!(quantity_text("cpu", &Quantity::Text("500m".into())), "500m");
        assert_eq!(quantity_text("cpu", &Quantity::Int(4)), "4");
        assert_eq!(quantity_text("nvidia.com/gpu", &Quantity::Int(1024)), "1024");
        assert_eq!(quantity_text("memory", &Quantity::Text("4Gi".into())), "4Gi");
    }

    #[test]
    fn the_plugin_name_is_recognised() {
        assert!(invoked_as_plugin("/home/u/.local/bin/kubectl-muster"));
        assert!(invoked_as_plugin("kubectl-muster"));
        assert!(!invoked_as_plugin("/usr/bin/muster"));
        assert!(!invoked_as_plugin("kubectl-musterx"));
    }
}
