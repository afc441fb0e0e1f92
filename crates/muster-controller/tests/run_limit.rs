//! Groups that run past their declared run time and the grace (the default Queue's
//! `runTimeLimit`: Enforce, 60 s) are ended, and their pods stopped: a Job through its
//! activeDeadlineSeconds, a plain group by deleting its pods. Against a real SQLite store, as
//! brain.rs.

mod common;

use common::*;
use muster_k8s::GroupConditionType;

const GRACE: i64 = 60;

/// A job of `members` pods of 4 cpu that declares `seconds` of run time.
fn timed(name: &str, members: i64, seconds: i64) -> WorkloadView {
    let mut j = job(name, members, 4);
    if let Ok(g) = j.group.as_mut() {
        g.duration_seconds = Some(seconds);
    }
    j
}

fn deadlines(actions: &[Action], name: &str) -> Vec<u64> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::JobDeadline { key, seconds } if &*key.name == name => Some(*seconds),
            _ => None,
        })
        .collect()
}

/// One 4-cpu node; `liar` declares 10 s and is admitted, bound and running at 1001.
fn running_liar() -> Harness {
    let mut h = Harness::new(&[node("n1", 4)], &[timed("liar", 1, 10)], &[]);
    h.cycle();
    let mut released = timed("liar", 1, 10);
    released.suspended = false;
    h.send(job_event(Change::Apply(released)));
    let a = h.send(Event::Pod(Change::Apply(pod("liar", 0, 4))));
    let (_, node, member) = binds(&a).pop().expect("bound");
    h.send(Event::Pod(Change::Apply(bound(&pod("liar", 0, 4), &node, member, true))));
    assert_eq!(h.state("liar"), Some(GroupState::Running));
    h
}

#[test]
fn a_job_past_its_run_time_and_grace_is_failed_through_its_deadline() {
    let mut h = running_liar();
    let admitted = h.now;
    let mut before = Vec::new();
    while h.now < admitted + 10 + GRACE - 1 {
        before.extend(h.cycle());
    }
    assert_eq!(h.state("liar"), Some(GroupState::Running), "within its run time and grace");
    assert!(deadlines(&before, "liar").is_empty());
    let a = h.cycle();
    assert_eq!(h.state("liar"), Some(GroupState::Failed));
    assert_eq!(deadlines(&a, "liar"), [10 + GRACE as u64], "its deadline: what it was allowed, already passed");
    let event = a.iter().find_map(|x| match x {
        Action::Event { reason, message, .. } if reason == "RunTimeExceeded" => Some(message.clone()),
        _ => None,
    });
    assert!(event.expect("a warning event").contains("declared run time of 10 s"), "{a:?}");
    let status = a.iter().rev().find_map(|x| match x {
        Action::Status { key, status } if &*key.name == "liar" => Some(status.clone()),
        _ => None,
    });
    let status = status.expect("its status");
    assert_eq!(status.phase, Some(GroupState::Failed));
    let cond = status.condition(GroupConditionType::RunTimeExceeded).expect("condition RunTimeExceeded");
    assert_eq!((cond.status.as_str(), cond.reason.as_str()), ("True", "RunTimeExceeded"));
    assert!(h.metrics.encode().unwrap().contains("muster_run_time_exceeded_total{queue=\"default\"} 1"));
    // Its node is free at once.
    let a = h.send(job_event(Change::Apply(timed("next", 1, 10))));
    assert_eq!(h.state("next"), Some(GroupState::Admitted), "{a:?}");

    // A restart while the Job still runs (the patch was lost): the new instance stops it again.
    let (dir, now) = (std::mem::replace(&mut h.dir, TempDir::new("unused")), h.now);
    drop(h.brain);
    let mut still = timed("liar", 1, 10);
    still.suspended = false;
    let pods = [bound(&pod("liar", 0, 4), "n1", 0, true)];
    let mut h2 = Harness::start(dir, &[node("n1", 4)], &[still.clone()], &pods, now + 5);
    let a = h2.brain.take_actions();
    assert_eq!(deadlines(&a, "liar"), [10 + GRACE as u64], "{a:?}");
    // Once the Job has failed, nothing more is sent.
    let mut failed = still;
    failed.finished = Some(false);
    let a = h2.send(job_event(Change::Apply(failed)));
    assert!(deadlines(&a, "liar").is_empty(), "{a:?}");
    assert_eq!(h2.state("liar"), Some(GroupState::Failed));
}

#[test]
fn a_plain_group_past_its_limit_has_its_pods_deleted() {
    let mut h = Harness::new(&[node("n1", 8)], &[], &[]);
    let pods: Vec<PodView> = (0..2).map(|i| PodView { duration: Some(5), ..plain("ring", i, 2, 2) }).collect();
    let mut all = Vec::new();
    for p in &pods {
        all.extend(h.send(Event::Pod(Change::Apply(p.clone()))));
    }
    for (pod, node, member) in binds(&all) {
        let p = pods.iter().find(|p| p.name == pod).unwrap();
        h.send(Event::Pod(Change::Apply(bound_plain(p, &node, member, true))));
    }
    assert_eq!(h.state("ring"), Some(GroupState::Running));
    let mut a = Vec::new();
    for _ in 0..5 + GRACE {
        a.extend(h.cycle());
    }
    assert_eq!(h.state("ring"), Some(GroupState::Failed));
    let deleted = a.iter().find_map(|x| match x {
        Action::DeletePods { key, pods, .. } if &*key.name == "ring" => Some(pods.len()),
        _ => None,
    });
    assert_eq!(deleted, Some(2), "{a:?}");
    assert!(deadlines(&a, "ring").is_empty());
}
