//! A scenario's `history` section: recorded runs as jobs (the mapping rule is in
//! `crate::history`).

use std::path::Path;

use muster_graph::cluster::ClusterDescription;
use muster_graph::jobspec::TopologyConstraint;
use serde::Deserialize;

use super::{ClassTopology, JobSpec, JobUnit, RunStart, Tenants, class_topology, input, queue_of};
use crate::SimError;
use crate::history::{self, RecordedRun};

/// Where the recorded runs are, and which of them to replay.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct HistorySource {
    /// JSON Lines of recorded runs, relative to the scenario (as `muster history export` writes).
    pub file: String,
    /// Only groups submitted at or after this Unix second.
    #[serde(default)]
    pub since: Option<i64>,
    /// Only groups submitted before this Unix second.
    #[serde(default)]
    pub until: Option<i64>,
}

/// The jobs of the recorded runs in `text` (read from `src.file`), submission times from the
/// first one selected; errors name the line.
pub(super) fn jobs(
    file: &str,
    src: &HistorySource,
    (runs_file, text): (&str, &str),
    cluster: &ClusterDescription,
    tenants: &Tenants,
    offers_pods: bool,
    class_index: usize,
) -> Result<Vec<JobSpec>, SimError> {
    let runs = history::parse(runs_file, text)?;
    let selected: Vec<(usize, &RecordedRun)> = (runs.iter().enumerate())
        .filter(|(_, r)| r.is_final())
        .filter(|(_, r)| src.since.is_none_or(|s| r.submitted >= s) && src.until.is_none_or(|u| r.submitted < u))
        .collect();
    let Some(t0) = selected.iter().map(|(_, r)| r.submitted).min() else {
        return Err(input(file, "history.file", format!("{runs_file}: no finished run in the selected time")));
    };
    let mut jobs = Vec::with_capacity(selected.len());
    for (i, r) in selected {
        let at = format!("{runs_file} line {}", i + 1);
        let req = &r.request;
        // A recorded run says nothing of what spreading cost it: no slowdown.
        let resolve = |t: &TopologyConstraint, path: String| {
            let t =
                ClassTopology { level: t.level.clone(), mode: t.mode, within: t.within.clone(), span_slowdown: 1.0 };
            class_topology(file, &path, &t, cluster)
        };
        let topology = req.topology.as_ref().map(|t| resolve(t, format!("{at}: request.topology"))).transpose()?;
        let mut units = Vec::new();
        // The models keep a set to one gang inside the job: a set's own level inside a sub-group
        // is muster's alone here.
        for (k, s) in req.sets.iter().enumerate().filter(|(k, _)| req.subgroup_of(*k).is_none()) {
            if let Some(t) = &s.topology {
                let topology = resolve(t, format!("{at}: request.sets[{k}].topology"))?;
                units.push(JobUnit { name: s.name.clone(), sets: vec![k], topology, sub_group: false });
            }
        }
        for (i, g) in req.subgroups.iter().enumerate() {
            let topology = resolve(&g.topology, format!("{at}: request.subgroups[{i}].topology"))?;
            let sets = g.sets.iter().filter_map(|name| req.sets.iter().position(|s| s.name == *name)).collect();
            units.push(JobUnit { name: g.name.clone(), sets, topology, sub_group: true });
        }
        let queue =
            if tenants.is_empty() { None } else { queue_of(file, &format!("{at}: queue"), Some(&r.queue), tenants)? };
        let mut requests = req.requests.clone();
        if offers_pods && !requests.iter().any(|(name, _)| name == "pods") {
            requests.push(("pods".to_string(), 1));
        }
        jobs.push(JobSpec {
            name: format!("{}-{}", r.group.replace('/', "."), i + 1),
            class: "history".into(),
            class_index,
            min_members: req.min_members,
            max_members: req.max_members,
            requests,
            filter: req.filter.clone(),
            sets: req.sets.clone(),
            units,
            run_ms: r.run_ms_at_max(),
            expected_run_ms: req.duration.map(|d| i64::try_from(d).unwrap_or(i64::MAX / 1000).saturating_mul(1000)),
            run_starts: RunStart::AllReady,
            deadline_ms: None,
            priority: r.priority,
            submit_ms: (r.submitted - t0).saturating_mul(1000),
            probe: false,
            topology,
            shrinkable: req.shrinkable,
            queue,
        });
    }
    Ok(jobs)
}

/// Reads the runs file `src.file` relative to `base`.
pub(super) fn read(
    src: &HistorySource,
    base: &Path,
    read_file: &dyn Fn(&Path) -> Result<String, SimError>,
) -> Result<(String, String), SimError> {
    let path = base.join(&src.file);
    Ok((path.display().to_string(), read_file(&path)?))
}
