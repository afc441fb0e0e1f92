//! Baseline scheduler models.

pub mod cosched;
pub mod gang;
pub mod kube;
pub mod kueue;
pub mod muster;
pub mod native;
pub mod topology;
pub mod volcano;

use crate::scheduler::{Action, ClusterView, JobId};

/// Jobs no queue holds back (the schedulers without admission of their own): each submitted job
/// starts at once with all its members, and its pods then wait for the scheduler.
pub(crate) fn start_unheld(submitted: &mut Vec<JobId>, view: &ClusterView<'_>) -> Vec<Action> {
    std::mem::take(submitted)
        .into_iter()
        .map(|job| Action::Start { job, members: view.job(job).spec.max_members })
        .collect()
}
