//! `muster cluster ...`: cluster descriptions rendered for KWOK, as JGF, or summarized.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};
use muster_graph::cluster::ClusterDescription;
use muster_graph::{ResourceGraph, jgf};
use serde_json::{Value, json};

/// Writes a line to stdout, returning the error instead of panicking (a closed pipe, `| head`,
/// is handled in main).
pub fn emit(text: &str) -> Result<()> {
    writeln!(std::io::stdout().lock(), "{text}")?;
    Ok(())
}

pub fn read(file: &Path) -> Result<(String, String)> {
    let name = file.display().to_string();
    let text = std::fs::read_to_string(file).with_context(|| format!("cannot read {name}"))?;
    Ok((name, text))
}

/// The described nodes as Kubernetes Node objects that KWOK will manage.
pub fn nodes(file: &Path) -> Result<ExitCode> {
    let (name, text) = read(file)?;
    let desc = ClusterDescription::parse(&name, &text)?;
    let items: Vec<Value> = desc
        .expand(&name)?
        .into_iter()
        .map(|n| {
            let taints: Vec<Value> = n
                .spec
                .taints
                .iter()
                .map(|t| json!({"key": t.key, "value": t.value, "effect": t.effect.as_str()}))
                .collect();
            json!({
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": n.spec.name,
                    "labels": n.spec.labels,
                    "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
                },
                "spec": {"taints": taints, "unschedulable": n.spec.unschedulable},
                "status": {"capacity": n.capacity, "allocatable": n.capacity},
            })
        })
        .collect();
    let list = json!({"apiVersion": "v1", "kind": "List", "items": items});
    emit(&serde_json::to_string_pretty(&list)?)?;
    Ok(ExitCode::SUCCESS)
}

pub fn jgf(file: &Path) -> Result<ExitCode> {
    let (name, text) = read(file)?;
    let graph = muster_graph::load_graph(&name, &text)?;
    emit(&jgf::export(&graph))?;
    Ok(ExitCode::SUCCESS)
}

pub fn describe(file: &Path) -> Result<ExitCode> {
    let (name, text) = read(file)?;
    let graph = muster_graph::load_graph(&name, &text)?;
    let levels: Vec<String> =
        graph.levels.iter().filter(|(l, _)| *l != "cluster").map(|(l, vs)| format!("{} {l}s", vs.len())).collect();
    let rg = ResourceGraph::new(graph, Default::default());
    let stat = rg.stat();
    emit(&format!(
        "nodes: {}   vertices: {}   topology: {}",
        stat.nodes,
        stat.vertices,
        if levels.is_empty() { "flat".to_string() } else { levels.join(", ") }
    ))?;
    emit(&format!("{:<24} {:>14}", "RESOURCE", "CAPACITY"))?;
    for (r, cap, _) in &stat.resources {
        emit(&format!("{r:<24} {cap:>14}"))?;
    }
    Ok(ExitCode::SUCCESS)
}
