//! `muster match`: load a graph, then run matcher commands from stdin, one per line, printing
//! kubectl-style results. Scriptable like Fluxion's resource-query.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result, anyhow, bail};
use muster_graph::cluster::ClusterDescription;
use muster_graph::{GroupRequest, ImportedMember, MatchOutcome, Policy, ResourceGraph, jgf, jobspec};

use crate::cluster_cmd::read;
use crate::match_queues::QueueSession;

#[derive(clap::Args)]
pub struct Args {
    /// Cluster description (YAML) or JGF (JSON) file.
    graph: PathBuf,
    /// Default match policy: first, high-id, pack, spread, locality, best-fit.
    #[arg(short = 'P', long, default_value = "first", value_parser = parse_policy)]
    policy: Policy,
    /// Print each command before its output (useful when reading from a file).
    #[arg(long)]
    echo: bool,
    /// Queue configuration (YAML: queues with quotas in cohorts, priority classes); with it the
    /// commands queue groups and run scheduling cycles instead of calling the matcher.
    #[arg(long, value_name = "FILE")]
    queues: Option<PathBuf>,
}

fn parse_policy(s: &str) -> Result<Policy, String> {
    Policy::parse(s).ok_or_else(|| format!("unknown policy {s:?}; allowed: {}", Policy::NAMES))
}

const HELP: &str = "\
commands (one per line; # starts a comment):
  match allocate FILE                 place every member now, or nothing
  match allocate_orelse_reserve FILE  place now, or reserve the earliest start
  match satisfiability FILE           could it ever fit on the empty cluster?
  cancel ID                           release an allocation or reservation
  shrink ID MEMBER...                 release some members (partial cancel)
  grow ID COUNT                       add COUNT members, all or none
  import ID FILE NODE[:DEV+DEV]...    record a running allocation (member i on the i-th node;
                                      DEV names a device, or a socket the member holds whole)
  info ID                             members, nodes and devices of an allocation
  jgf ID                              an allocation as JGF
  node add FILE                       add the nodes of a cluster description
  node remove|cordon|uncordon|down|up NAME
  time [T]                            show or set the clock (seconds)
  stat                                nodes, allocations and free capacity
  export                              the whole graph as JGF
  help | quit";

struct Session {
    rg: ResourceGraph,
    now: i64,
}

pub fn run(args: &Args) -> Result<ExitCode> {
    let (name, text) = read(&args.graph)?;
    let started = Instant::now();
    let graph = muster_graph::load_graph(&name, &text)?;
    eprintln!(
        "loaded {} nodes, {} vertices in {:.1?}",
        graph.live_nodes().count(),
        graph.vertices.len(),
        started.elapsed()
    );
    match &args.queues {
        Some(file) => {
            let mut s = QueueSession::new(graph, file)?;
            commands(args.echo, &mut |line, out| s.execute(line, out))
        }
        None => {
            let mut s = Session { rg: ResourceGraph::new(graph, args.policy), now: 0 };
            commands(args.echo, &mut |line, out| s.execute(line, out))
        }
    }
}

type Out<'a> = std::io::StdoutLock<'a>;

/// Runs the commands on stdin through `execute`, printing each error; fails if any failed.
fn commands(echo: bool, execute: &mut dyn FnMut(&str, &mut Out<'_>) -> Result<()>) -> Result<ExitCode> {
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    let mut failed = false;
    for line in stdin.lock().lines() {
        let line = line.context("reading commands from stdin")?;
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        if echo {
            writeln!(out, "> {line}")?;
        }
        if line == "quit" || line == "exit" {
            break;
        }
        if let Err(e) = execute(line, &mut out) {
            failed = true;
            writeln!(out, "error: {e:#}")?;
        }
        out.flush()?;
    }
    Ok(if failed { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

/// `time [T]`: shows the clock, or moves it forward to `T` seconds.
pub(crate) fn clock(now: &mut i64, to: Option<&str>, out: &mut impl Write) -> Result<()> {
    if let Some(t) = to {
        let t: i64 = t.parse().map_err(|_| anyhow!("{t:?} is not a time in seconds"))?;
        if t < *now {
            bail!("time {t} is before the current time {now}; the clock only moves forward");
        }
        *now = t;
    }
    writeln!(out, "time {now}")?;
    Ok(())
}

fn parse_id(s: Option<&&str>) -> Result<u64> {
    let s = s.ok_or_else(|| anyhow!("missing allocation id"))?;
    s.parse().map_err(|_| anyhow!("{s:?} is not an allocation id; ids are positive integers"))
}

impl Session {
    fn load_request(&self, file: &str) -> Result<GroupRequest> {
        let (name, text) = read(Path::new(file))?;
        Ok(jobspec::parse(&name, &text)?)
    }

    fn execute(&mut self, line: &str, out: &mut impl Write) -> Result<()> {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["help"] => writeln!(out, "{HELP}")?,
            ["match", op, file] => self.do_match(op, file, out)?,
            ["cancel", id] => {
                let a = self.rg.cancel(parse_id(Some(id))?)?;
                writeln!(out, "cancelled {} ({} members released)", a.id, a.members.len())?;
            }
            ["shrink", id, members @ ..] if !members.is_empty() => {
                let id = parse_id(Some(id))?;
                let members = members
                    .iter()
                    .map(|m| m.parse::<u32>().map_err(|_| anyhow!("{m:?} is not a member index")))
                    .collect::<Result<Vec<_>>>()?;
                self.rg.shrink(id, &members)?;
                writeln!(out, "shrunk {id}: released members {members:?}")?;
            }
            ["grow", id, count] => {
                let id = parse_id(Some(id))?;
                let count: u32 = count.parse().map_err(|_| anyhow!("{count:?} is not a member count"))?;
                match self.rg.grow(id, count, self.now)? {
                    Some(added) => {
                        writeln!(out, "grew {id}: added members {added:?}")?;
                        self.print_members(id, Some(&added), out)?;
                    }
                    None => writeln!(out, "busy: {count} more members of {id} do not fit now")?,
                }
            }
            ["import", id, file, nodes @ ..] if !nodes.is_empty() => {
                let id = parse_id(Some(id))?;
                let req = self.load_request(file)?;
                let members: Vec<ImportedMember> = nodes
                    .iter()
                    .enumerate()
                    .map(|(i, spec)| {
                        let (node, devs) = spec.split_once(':').unwrap_or((spec, ""));
                        ImportedMember {
                            index: i as u32,
                            node: node.to_string(),
                            devices: devs.split('+').filter(|d| !d.is_empty()).map(str::to_string).collect(),
                        }
                    })
                    .collect();
                let end = ResourceGraph::end_of(self.now, &req, members.len() as u32);
                self.rg.import(id, &req, &members, (self.now, end))?;
                writeln!(out, "imported {id}: {} members", members.len())?;
            }
            ["info", id] => self.print_members(parse_id(Some(id))?, None, out)?,
            ["jgf", id] => {
                let a = self.rg.allocation(parse_id(Some(id))?)?;
                writeln!(out, "{}", jgf::export_allocation(&self.rg.graph, a))?;
            }
            ["node", "add", file] => {
                let (name, text) = read(Path::new(file))?;
                let desc = ClusterDescription::parse(&name, &text)?;
                let nodes = desc.expand(&name)?;
                // Check every name first so a duplicate adds nothing.
                for n in &nodes {
                    if self.rg.graph.node_by_name.contains_key(&n.spec.name) {
                        bail!("{name}: node {:?} already exists; nothing was added", n.spec.name);
                    }
                }
                for n in &nodes {
                    self.rg.add_node(&n.spec)?;
                }
                writeln!(out, "added {} nodes", nodes.len())?;
            }
            ["node", verb, name] => {
                match *verb {
                    "remove" => {
                        let affected = self.rg.remove_node(name)?;
                        for (id, members) in &affected {
                            writeln!(out, "allocation {id} lost members {members:?}")?;
                        }
                    }
                    "cordon" => self.rg.set_unschedulable(name, true)?,
                    "uncordon" => self.rg.set_unschedulable(name, false)?,
                    "down" => self.rg.set_up(name, false)?,
                    "up" => self.rg.set_up(name, true)?,
                    other => bail!("unknown node action {other:?}; allowed: add, remove, cordon, uncordon, down, up"),
                }
                writeln!(out, "node {name} {verb}")?;
            }
            ["time", t @ ..] if t.len() <= 1 => clock(&mut self.now, t.first().copied(), out)?,
            ["stat"] => {
                let st = self.rg.stat();
                writeln!(
                    out,
                    "nodes: {} ({} schedulable)   vertices: {}   allocations: {}   reservations: {}",
                    st.nodes, st.schedulable_nodes, st.vertices, st.allocations, st.reservations
                )?;
                writeln!(out, "{:<24} {:>14} {:>14}", "RESOURCE", "CAPACITY", "FREE")?;
                for (r, cap, free) in st.resources {
                    writeln!(out, "{r:<24} {cap:>14} {free:>14}")?;
                }
            }
            ["export"] => writeln!(out, "{}", jgf::export(&self.rg.graph))?,
            _ => bail!("cannot parse {line:?}; type help for the commands"),
        }
        Ok(())
    }

    fn do_match(&mut self, op: &str, file: &str, out: &mut impl Write) -> Result<()> {
        // The operation first: a typo must not read as a problem with the file.
        let reserve = match op {
            "allocate" => Some(false),
            "allocate_orelse_reserve" => Some(true),
            "satisfiability" => None,
            other => {
                bail!("unknown match operation {other:?}; allowed: allocate, allocate_orelse_reserve, satisfiability")
            }
        };
        let req = self.load_request(file)?;
        let started = Instant::now();
        let outcome = match reserve {
            Some(false) => self.rg.allocate(&req, self.now),
            Some(true) => self.rg.allocate_orelse_reserve(&req, self.now),
            None => {
                let result = self.rg.satisfiability(&req);
                let took = started.elapsed();
                match result {
                    Ok(()) => writeln!(out, "satisfiable: {} ({took:.1?})", req.name)?,
                    Err(reason) => writeln!(out, "unsatisfiable: {}: {reason}", req.name)?,
                }
                return Ok(());
            }
        };
        let took = started.elapsed();
        match outcome {
            MatchOutcome::Allocated(id) => {
                writeln!(out, "allocated {id}: {} ({took:.1?})", req.name)?;
                self.print_members(id, None, out)?;
            }
            MatchOutcome::Reserved { id, at } => {
                writeln!(out, "reserved {id}: {} at time {at} ({took:.1?})", req.name)?;
                self.print_members(id, None, out)?;
            }
            MatchOutcome::Busy(reason) => writeln!(out, "busy: {}: {reason}", req.name)?,
            MatchOutcome::Unsatisfiable(reason) => writeln!(out, "unsatisfiable: {}: {reason}", req.name)?,
        }
        Ok(())
    }

    fn print_members(&self, id: u64, only: Option<&[u32]>, out: &mut impl Write) -> Result<()> {
        let a = self.rg.allocation(id)?;
        let g = &self.rg.graph;
        let state = if a.reserved { "Reserved" } else { "Allocated" };
        let end = if a.end == muster_graph::allocations::FOREVER { "-".to_string() } else { a.end.to_string() };
        writeln!(
            out,
            "ALLOCATION {id}  {state}  group={}  members={}  start={}  end={end}",
            a.request.name,
            a.members.len(),
            a.start
        )?;
        let names = |vs: &[muster_graph::graph::VertexId]| {
            let names: Vec<&str> = vs.iter().map(|v| g.vertex(*v).meta.name.as_str()).collect();
            if names.is_empty() { "-".to_string() } else { names.join(",") }
        };
        // Sockets held whole show only for groups that ask for them.
        let sockets = a.request.sockets.is_some();
        let header = if sockets { format!("{:<16} DEVICES", "SOCKETS") } else { "DEVICES".to_string() };
        // The set column shows only for groups of several sets.
        let sets = !a.request.sets.is_empty();
        let set_of = |index: u32| {
            if sets { format!("{:<12} ", a.request.sets[a.request.set_of(index).0].name) } else { String::new() }
        };
        let set_header = if sets { format!("{:<12} ", "SET") } else { String::new() };
        writeln!(out, "{:<8} {set_header}{:<28} {header}", "MEMBER", "NODE")?;
        for m in a.members.iter().filter(|m| only.is_none_or(|o| o.contains(&m.index))) {
            let held = if sockets { format!("{:<16} ", names(&m.sockets)) } else { String::new() };
            let set = set_of(m.index);
            writeln!(out, "{:<8} {set}{:<28} {held}{}", m.index, g.node(m.node).name, names(&m.devices))?;
        }
        Ok(())
    }
}
