//! Job classes muster could never run: no placement holds one of their jobs even on the empty
//! cluster (larger than any node or domain, a level no node carries, a selector no node matches),
//! or their queue may never hold one, its whole cohort idle. Such jobs would wait for ever under
//! muster and be run anyway by models that do not check the same constraint, and no figure of
//! such a run means anything, so the scenario is refused, naming the class.

use muster_graph::cluster::ClusterDescription;
use muster_graph::{ResourceGraph, quantity, resources};
use muster_queue::config::Compiled;
use muster_queue::quota::{self, Asks};
use muster_queue::{MATCH_POLICY, QueuePolicy};

use super::{JobSpec, Tenants, input};
use crate::SimError;

/// The empty cluster and the tenants' quotas, made once per scenario.
pub(super) struct Placeable {
    graph: ResourceGraph,
    quotas: Compiled,
}

impl Placeable {
    pub(super) fn new(
        file: &str,
        cluster: &ClusterDescription,
        cluster_file: &str,
        tenants: &Tenants,
    ) -> Result<Self, SimError> {
        let graph = ResourceGraph::new(cluster.build(cluster_file)?, MATCH_POLICY);
        // Quotas are the same under every policy.
        let quotas = tenants.engine_config(QueuePolicy::StrictFifo).compile(file)?;
        Ok(Self { graph, quotas })
    }

    /// The empty cluster, as muster's matcher sees it.
    pub(super) fn graph(&self) -> &ResourceGraph {
        &self.graph
    }

    /// Refuses class `name` (`jobClasses[ci]`), of which `job` is one, if muster could never run it.
    pub(super) fn check_class(
        &self,
        file: &str,
        ci: usize,
        name: &str,
        job: &JobSpec,
        tenants: &Tenants,
    ) -> Result<(), SimError> {
        let req = job.to_group_request();
        let refuse = |why: String| input(file, format!("jobClasses[{ci}]"), format!("class {name:?} {why}"));
        if let Err(why) = self.graph.satisfiability(&req) {
            return Err(refuse(format!(
                "can never be placed, not even on the empty cluster: {why}; make its members fewer or smaller, or \
                 loosen its constraints"
            )));
        }
        let queue = tenants.name_of(job.queue);
        let show =
            |r: &str, a: u64| resources::unit_of(r).map_or_else(|_| a.to_string(), |u| quantity::format_amount(a, u));
        if let Some(why) = quota::never_fits(&self.quotas, queue, &Asks::of(&req), req.min_members, &show) {
            return Err(refuse(format!(
                "can never start in queue {queue:?}, even with its cohort idle: {why}; raise the queue's quota or \
                 its borrowing, or make the jobs smaller"
            )));
        }
        Ok(())
    }
}
