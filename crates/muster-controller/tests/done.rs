//! A Job's group finished by its pods: once as many of its pods have succeeded as finish its work
//! and none is left running, its nodes go to the next group, before the Job controller marks the
//! Job Complete. Against a real SQLite store, as brain.rs.

mod common;

use common::*;

/// A Job of `members` pods of 4 cpu whose work `completions` successes finish.
fn finishing(name: &str, members: i64, completions: u32) -> WorkloadView {
    WorkloadView { succeeded_pods_to_finish: Some(completions), ..job(name, members, 4) }
}

fn succeeded(p: &PodView) -> PodView {
    PodView { phase: PodPhase::Succeeded, ready: false, ..p.clone() }
}

/// Two 4-cpu nodes; `first` (both, 2 completions) is admitted, bound and running; `next` (both)
/// waits. Returns the harness and first's bound pods.
fn first_running_next_waiting(first: WorkloadView) -> (Harness, Vec<PodView>) {
    let mut h = Harness::new(&[node("n1", 4), node("n2", 4)], &[first.clone(), finishing("next", 2, 2)], &[]);
    h.cycle();
    assert_eq!(h.state("first"), Some(GroupState::Admitted));
    h.send(job_event(Change::Apply(WorkloadView { suspended: false, ..first })));
    let mut all = Vec::new();
    for i in 0..2 {
        all.extend(h.send(Event::Pod(Change::Apply(pod("first", i, 4)))));
    }
    let pods: Vec<PodView> = binds(&all)
        .into_iter()
        .enumerate()
        .map(|(i, (_, node, m))| bound(&pod("first", i as u32, 4), &node, m, true))
        .collect();
    for p in &pods {
        h.send(Event::Pod(Change::Apply(p.clone())));
    }
    assert_eq!(h.state("first"), Some(GroupState::Running));
    h.cycle();
    assert!(h.state("next").is_some_and(|s| s.is_pending()));
    (h, pods)
}

#[test]
fn a_job_whose_pods_all_succeeded_frees_its_nodes_before_it_is_marked_complete() {
    let (mut h, pods) = first_running_next_waiting(finishing("first", 2, 2));
    let a = h.send(Event::Pod(Change::Apply(succeeded(&pods[0]))));
    assert_eq!(h.state("first"), Some(GroupState::Running), "one of two completions: {a:?}");
    let a = h.send(Event::Pod(Change::Apply(succeeded(&pods[1]))));
    assert_eq!(h.state("first"), Some(GroupState::Succeeded), "{a:?}");
    assert_eq!(h.state("next"), Some(GroupState::Admitted), "its nodes went to next at once: {a:?}");
    // The Complete condition that follows changes nothing.
    let done = WorkloadView { suspended: false, finished: Some(true), ..finishing("first", 2, 2) };
    let a = h.send(job_event(Change::Apply(done)));
    assert_eq!((h.state("first"), h.state("next")), (Some(GroupState::Succeeded), Some(GroupState::Admitted)), "{a:?}");
}

#[test]
fn a_job_with_completions_left_or_a_pod_still_running_keeps_its_nodes() {
    // Four completions on two members: two successes leave work for two more pods.
    let (mut h, pods) = first_running_next_waiting(finishing("first", 2, 4));
    for p in &pods {
        h.send(Event::Pod(Change::Apply(succeeded(p))));
    }
    assert_eq!(h.state("first"), Some(GroupState::Running));
    // A retried index counts once: index 0 succeeding again is not a third completion.
    let again = PodView { uid: "first-0-again".into(), name: "first-0-again".into(), ..succeeded(&pods[0]) };
    h.send(Event::Pod(Change::Apply(again)));
    assert_eq!(h.state("first"), Some(GroupState::Running));
    // A kind that cannot tell its end from its pods waits for its finished condition.
    let (mut h, pods) = first_running_next_waiting(job("first", 2, 4));
    for p in &pods {
        h.send(Event::Pod(Change::Apply(succeeded(p))));
    }
    assert_eq!(h.state("first"), Some(GroupState::Running));
    // Enough successes, but a third pod still runs (a retry the Job controller made).
    let (mut h, pods) = first_running_next_waiting(finishing("first", 2, 2));
    let extra =
        PodView { uid: "first-x".into(), name: "first-x".into(), phase: PodPhase::Pending, ..pod("first", 1, 4) };
    h.send(Event::Pod(Change::Apply(extra)));
    for p in &pods {
        h.send(Event::Pod(Change::Apply(succeeded(p))));
    }
    assert_eq!(h.state("first"), Some(GroupState::Running));
}

#[test]
fn pods_outliving_their_finished_workload_keep_their_nodes_until_they_end() {
    // An MPIJob's workers are deleted only after it succeeded: the next group waits for them.
    let (mut h, pods) = first_running_next_waiting(job("first", 2, 4));
    let done = WorkloadView { suspended: false, finished: Some(true), ..job("first", 2, 4) };
    let a = h.send(job_event(Change::Apply(done)));
    h.cycle();
    assert_eq!(h.state("first"), Some(GroupState::Succeeded), "{a:?}");
    assert!(h.state("next").is_some_and(|s| s.is_pending()), "its pods still run on both nodes");
    // One ends: still not room for next; the other is deleted: next is placed.
    h.send(Event::Pod(Change::Apply(succeeded(&pods[0]))));
    h.cycle();
    assert!(h.state("next").is_some_and(|s| s.is_pending()));
    h.send(Event::Pod(Change::Delete(pods[1].clone())));
    h.cycle();
    assert_eq!(h.state("next"), Some(GroupState::Admitted));
}
