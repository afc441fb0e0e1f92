//! A scenario job made of several Jobs (a Job per set, a JobSet's child Jobs: the harness labels
//! them `harness.muster.dev/job`, [`crate::peer_sets`]) read as the one Job `run` measures: made
//! when its first Job was, of all their pods, Complete when every one is (at the last one's
//! completion), Failed as soon as one is. A Volcano Job (a job of several sets under Volcano, which
//! makes pods but no batch/v1 Job) is read as that Job too ([`from_volcano_job`]).

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::{Job, JobCondition, JobSpec, JobStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{DynamicObject, ObjectMeta};

use crate::cluster::{HARNESS_JOB_LABEL, true_condition};

/// `items` with the Jobs of each labelled scenario job merged into one Job named after it.
pub fn merged(items: Vec<Job>) -> Vec<Job> {
    let mut out = Vec::new();
    let mut groups: BTreeMap<(Option<String>, String), Vec<Job>> = BTreeMap::new();
    for j in items {
        match j.metadata.labels.as_ref().and_then(|l| l.get(HARNESS_JOB_LABEL)).cloned() {
            Some(name) => groups.entry((j.metadata.namespace.clone(), name)).or_default().push(j),
            None => out.push(j),
        }
    }
    out.extend(groups.into_iter().map(|((namespace, name), jobs)| one(namespace, name, &jobs)));
    out
}

fn one(namespace: Option<String>, name: String, jobs: &[Job]) -> Job {
    let conditions = |j: &Job| j.status.as_ref().and_then(|s| s.conditions.clone()).unwrap_or_default();
    let with = |kind: &str| -> Vec<JobCondition> {
        jobs.iter().filter_map(|j| true_condition(&conditions(j), kind).cloned()).collect()
    };
    let latest = |cs: Vec<JobCondition>| cs.into_iter().max_by_key(|c| c.last_transition_time.clone().map(|t| t.0));
    let (failed, complete) = (with("Failed"), with("Complete"));
    let (condition, completion_time) = if !failed.is_empty() {
        (failed.into_iter().min_by_key(|c| c.last_transition_time.clone().map(|t| t.0)), None)
    } else if complete.len() == jobs.len() {
        let done = jobs.iter().filter_map(|j| j.status.as_ref()?.completion_time.clone()).max_by_key(|t| t.0);
        (latest(complete), done)
    } else {
        (None, None)
    };
    Job {
        metadata: ObjectMeta {
            name: Some(name),
            namespace,
            creation_timestamp: jobs.iter().filter_map(|j| j.metadata.creation_timestamp.clone()).min_by_key(|t| t.0),
            ..Default::default()
        },
        spec: Some(JobSpec {
            parallelism: Some(jobs.iter().filter_map(|j| j.spec.as_ref()?.parallelism).sum()),
            ..Default::default()
        }),
        status: Some(JobStatus { conditions: condition.map(|c| vec![c]), completion_time, ..Default::default() }),
    }
}

/// A Volcano Job (`batch.volcano.sh/v1alpha1`) as the one Job `run` measures: made when it was,
/// of all its tasks' pods, Complete or Failed when its phase says so, at the phase's transition.
pub fn from_volcano_job(vj: &DynamicObject) -> Job {
    let phase = vj.data.pointer("/status/state/phase").and_then(|p| p.as_str()).unwrap_or("");
    let at: Option<Time> =
        vj.data.pointer("/status/state/lastTransitionTime").and_then(|t| serde_json::from_value(t.clone()).ok());
    let kind = match phase {
        "Completed" => Some("Complete"),
        "Failed" | "Aborted" | "Terminated" => Some("Failed"),
        _ => None,
    };
    let condition = kind.map(|kind| JobCondition {
        type_: kind.to_string(),
        status: "True".into(),
        last_transition_time: at.clone(),
        ..Default::default()
    });
    let tasks = vj.data.pointer("/spec/tasks").and_then(|t| t.as_array()).cloned().unwrap_or_default();
    let pods: i64 = tasks.iter().filter_map(|t| t["replicas"].as_i64()).sum();
    Job {
        metadata: ObjectMeta {
            name: vj.metadata.name.clone(),
            namespace: vj.metadata.namespace.clone(),
            creation_timestamp: vj.metadata.creation_timestamp.clone(),
            ..Default::default()
        },
        spec: Some(JobSpec { parallelism: i32::try_from(pods).ok(), ..Default::default() }),
        status: Some(JobStatus {
            completion_time: at.filter(|_| kind == Some("Complete")),
            conditions: condition.map(|c| vec![c]),
            ..Default::default()
        }),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::simreal::{JobState, job_end};

    fn job(name: &str, group: Option<&str>, created: &str, parallelism: i32, end: Option<(&str, &str)>) -> Job {
        let labels = group.map(|g| json!({ HARNESS_JOB_LABEL: g })).unwrap_or(json!({}));
        let mut status = json!({});
        if let Some((kind, at)) = end {
            status = json!({"conditions": [
                {"type": "SuccessCriteriaMet", "status": "True", "lastTransitionTime": at},
                {"type": kind, "status": "True", "lastTransitionTime": at}]});
            if kind == "Complete" {
                status["completionTime"] = json!(at);
            }
        }
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ns", "labels": labels, "creationTimestamp": created},
            "spec": {"parallelism": parallelism, "template": {}},
            "status": status,
        }))
        .unwrap()
    }

    #[test]
    fn a_jobs_set_jobs_read_as_one() {
        let t = |s: u32| format!("2026-11-28T07:00:{s:02}Z");
        let items = vec![
            job("alone", None, &t(0), 3, None),
            job("mpi-0-launcher", Some("mpi-0"), &t(2), 1, Some(("Complete", &t(40)))),
            job("mpi-0-worker", Some("mpi-0"), &t(1), 4, Some(("Complete", &t(41)))),
            job("mpi-1-launcher", Some("mpi-1"), &t(1), 1, Some(("Complete", &t(30)))),
            job("mpi-1-worker", Some("mpi-1"), &t(1), 4, None),
            job("mpi-2-launcher", Some("mpi-2"), &t(1), 1, Some(("Failed", &t(20)))),
            job("mpi-2-worker", Some("mpi-2"), &t(1), 4, Some(("Complete", &t(25)))),
        ];
        let got = merged(items);
        let names: Vec<&str> = got.iter().map(|j| j.metadata.name.as_deref().unwrap()).collect();
        assert_eq!(names, ["alone", "mpi-0", "mpi-1", "mpi-2"]);
        let at = |s: u32| crate::cluster::parse_time(&t(s));
        assert_eq!(job_end(&got[0]), (JobState::Active, None));
        assert_eq!(job_end(&got[1]), (JobState::Complete, at(41)), "complete at the last set's end");
        assert_eq!(job_end(&got[2]), (JobState::Active, None), "a set still running");
        assert_eq!(job_end(&got[3]), (JobState::Failed, at(20)), "failed once a set failed");
        assert_eq!(got[1].spec.as_ref().unwrap().parallelism, Some(5));
        assert_eq!(crate::outcome::created(&got[1].metadata), at(1).unwrap(), "made with its first Job");
        assert_eq!(got[1].metadata.namespace.as_deref(), Some("ns"));
    }

    #[test]
    fn a_volcano_job_reads_as_one_job_by_its_phase() {
        let vj = |phase: &str| -> DynamicObject {
            serde_json::from_value(json!({
                "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
                "metadata": {"name": "mpi-0", "namespace": "ns", "creationTimestamp": "2026-11-28T07:00:01Z"},
                "spec": {"tasks": [{"name": "launcher", "replicas": 1}, {"name": "worker", "replicas": 4}]},
                "status": {"state": {"phase": phase, "lastTransitionTime": "2026-11-28T07:00:41Z"}},
            }))
            .unwrap()
        };
        let at = crate::cluster::parse_time("2026-11-28T07:00:41Z");
        let done = from_volcano_job(&vj("Completed"));
        assert_eq!(job_end(&done), (JobState::Complete, at));
        assert_eq!(done.spec.as_ref().unwrap().parallelism, Some(5), "every task's pods");
        assert_eq!(done.metadata.name.as_deref(), Some("mpi-0"));
        assert_eq!(
            crate::outcome::created(&done.metadata),
            crate::cluster::parse_time("2026-11-28T07:00:01Z").unwrap()
        );
        assert_eq!(job_end(&from_volcano_job(&vj("Aborted"))), (JobState::Failed, at));
        assert_eq!(job_end(&from_volcano_job(&vj("Running"))), (JobState::Active, None));
    }
}
