//! `muster match GRAPH --queues FILE`: the queue engine on a graph, driven by commands from
//! stdin, so that a quota or preemption case (the peers' fair-share and reclaim tests) can be
//! written in muster's inputs and replayed: queue groups into tenants' queues, run scheduling
//! cycles, end runs, and read who was admitted, reclaimed or preempted, and why.

use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result, anyhow, bail};
use muster_graph::{ResourceGraph, jobspec};
use muster_queue::{Engine, EngineConfig, GroupKey, GroupSpec, MATCH_POLICY, Transition, clock};

use crate::cluster_cmd::read;
use crate::match_cmd::clock;

pub const HELP: &str = "\
commands (one per line; # starts a comment):
  submit QUEUE NAME FILE [CLASS]      queue group NAME (a group file) in QUEUE, with a priority
                                      class of the queue file's priorityClasses
  schedule                            run one scheduling cycle; print every change
  ready NAME                          all of NAME's members are running (readiness met)
  finish NAME [failed]                NAME's run ended
  delete NAME                         forget NAME (its Job deleted): it leaves the queue, and
                                      its members free their room if it still ran
  gone NAME                           the members NAME was asked to give back (giving way, or
                                      asked back by preemption) are gone: their pods deleted
  queue                               pending groups, in order, with estimated start and reason
  usage                               each queue's use of its quotas
  reservations                        each calendar reservation's windows held as of the last
                                      cycle: the nodes set aside, or why it holds nothing
  time [T]                            show or set the clock (seconds)
  help | quit";

/// Groups are named by the user alone; they share one namespace.
const NAMESPACE: &str = "match";

pub struct QueueSession {
    engine: Engine,
    now: i64,
}

impl QueueSession {
    /// The engine on `graph`, configured by the queue file `path` (the engine's YAML: queues with
    /// quotas in cohorts, priority classes, policies).
    pub fn new(graph: muster_graph::graph::Graph, path: &Path) -> Result<Self> {
        let (name, text) = read(path)?;
        let config = EngineConfig::parse(&name, &text)?;
        let engine = Engine::new(ResourceGraph::new(graph, MATCH_POLICY), config)
            .with_context(|| format!("{name}: the queues do not fit the graph"))?;
        Ok(Self { engine, now: 0 })
    }

    fn key(name: &str) -> GroupKey {
        GroupKey::new(NAMESPACE, name)
    }

    fn known(&self, name: &str) -> Result<GroupKey> {
        let key = Self::key(name);
        self.engine.group(&key).map(|_| key).ok_or_else(|| anyhow!("no group {name:?}; submit it first"))
    }

    pub fn execute(&mut self, line: &str, out: &mut impl Write) -> Result<()> {
        let words: Vec<&str> = line.split_whitespace().collect();
        let changes = match words.as_slice() {
            ["help"] => {
                writeln!(out, "{HELP}")?;
                return Ok(());
            }
            ["submit", queue, name, file, class @ ..] if class.len() <= 1 => {
                self.submit(queue, name, file, class.first().copied())?
            }
            ["schedule"] => self.engine.schedule(self.now),
            ["ready", name] => {
                let key = self.known(name)?;
                let members = self.engine.group(&key).map_or(0, |g| g.member_count());
                self.engine.pods_ready(&key, members, self.now)?
            }
            ["gone", name] => {
                let key = self.known(name)?;
                let leaving: Vec<u32> = self.engine.leaving(&key).into_iter().flatten().copied().collect();
                if leaving.is_empty() {
                    bail!("{name} was asked to give back no members");
                }
                self.engine.members_lost(&key, &leaving, self.now)?
            }
            ["finish", name] => self.engine.finished(&self.known(name)?, true, self.now)?,
            ["finish", name, "failed"] => self.engine.finished(&self.known(name)?, false, self.now)?,
            ["delete", name] => self.engine.delete(&self.known(name)?, self.now)?,
            ["queue"] => return self.print_queue(out),
            ["usage"] => return self.print_usage(out),
            ["reservations"] => return self.print_reservations(out),
            ["time", t @ ..] if t.len() <= 1 => return clock(&mut self.now, t.first().copied(), out),
            _ => bail!("cannot parse {line:?}; type help for the commands"),
        };
        print_changes(&changes, out)
    }

    fn submit(&mut self, queue: &str, name: &str, file: &str, class: Option<&str>) -> Result<Vec<Transition>> {
        let config = self.engine.config();
        if !config.queues.iter().any(|q| q.name == queue) {
            let known: Vec<&str> = config.queues.iter().map(|q| q.name.as_str()).collect();
            bail!("no queue {queue:?}; the queue file has {known:?}");
        }
        if let Some(c) = class
            && !config.priority_classes.contains_key(c)
        {
            let known: Vec<&String> = config.priority_classes.keys().collect();
            bail!("no priority class {c:?}; the queue file's priorityClasses are {known:?}");
        }
        let (file_name, text) = read(Path::new(file))?;
        let mut request = jobspec::parse(&file_name, &text)?;
        request.name = name.to_string();
        let spec = GroupSpec {
            key: Self::key(name),
            queue: queue.to_string(),
            priority_class: class.map(str::to_string),
            request,
            submitted_at: self.now,
        };
        Ok(self.engine.submit(spec, self.now)?)
    }

    fn print_queue(&self, out: &mut impl Write) -> Result<()> {
        writeln!(out, "{:<16} {:>3} {:<20} {:<10} {:>10}  REASON", "QUEUE", "POS", "GROUP", "STATE", "START")?;
        for e in self.engine.queue_view(self.now) {
            let start = e.estimated_start.map_or("-".to_string(), |t| t.to_string());
            writeln!(
                out,
                "{:<16} {:>3} {:<20} {:<10} {:>10}  {}",
                e.queue, e.position, e.key.name, e.state, start, e.reason
            )?;
        }
        Ok(())
    }

    fn print_usage(&self, out: &mut impl Write) -> Result<()> {
        writeln!(out, "{:<16} {:<20} {:>12} {:>12} {:>10}", "QUEUE", "RESOURCE", "USED", "NOMINAL", "BORROWED")?;
        let usage = self.engine.usage();
        for (queue, compiled) in &self.engine.compiled().queues {
            for (resource, quota) in &compiled.quotas {
                let used = usage.get(queue).and_then(|u| u.get(resource)).copied().unwrap_or(0);
                let show = |a: u64| self.engine.show_amount(resource, a);
                writeln!(
                    out,
                    "{queue:<16} {resource:<20} {:>12} {:>12} {:>10}",
                    show(used),
                    show(quota.nominal),
                    show(used.saturating_sub(quota.nominal))
                )?;
            }
        }
        Ok(())
    }

    fn print_reservations(&self, out: &mut impl Write) -> Result<()> {
        writeln!(out, "{:<20} {:>10} {:>10}  NODES", "RESERVATION", "START", "END")?;
        for w in self.engine.reservation_windows() {
            let held = match &w.error {
                Some(why) => format!("none: {why}"),
                None => w.nodes.join(","),
            };
            writeln!(out, "{:<20} {:>10} {:>10}  {held}", w.reservation, clock::show(w.start), clock::show(w.end))?;
        }
        Ok(())
    }
}

/// One line per change: the group, its move, why, and for an admission where its members went.
fn print_changes(changes: &[Transition], out: &mut impl Write) -> Result<()> {
    for t in changes {
        write!(out, "{} {}: {} -> {}: {}", clock::show(t.at), t.key.name, t.from, t.to, t.reason.message())?;
        if let Some(a) = t.allocation.as_ref().filter(|_| t.to.holds_allocation()) {
            let mut nodes: Vec<(&str, u32)> = Vec::new();
            for m in &a.members {
                match nodes.iter_mut().find(|(n, _)| *n == m.node) {
                    Some((_, count)) => *count += 1,
                    None => nodes.push((&m.node, 1)),
                }
            }
            let on: Vec<String> = nodes.iter().map(|(n, c)| format!("{n}x{c}")).collect();
            write!(out, " [{}]", on.join(" "))?;
        }
        writeln!(out)?;
    }
    Ok(())
}
