//! Pods made ahead of a reserved start: the workload of a group reserved to start soon is
//! released while its nodes are still busy; its pods wait unbound and are bound the moment the
//! group is admitted. Against a real SQLite store, as brain.rs.

mod common;

use common::*;

/// A job of `members` pods of 4 cpu that declares `seconds` of run time.
fn timed(name: &str, members: i64, seconds: i64) -> WorkloadView {
    let mut j = job(name, members, 4);
    if let Ok(g) = j.group.as_mut() {
        g.duration_seconds = Some(seconds);
    }
    j
}

/// Two 4-cpu nodes; `first` (both) is admitted, bound and running, declared to end in 50 s;
/// `next` (both too) is then submitted and, once it has waited to the default policy's slowdown,
/// reserved for first's end. Returns the actions from its submission to its reservation, and
/// first's bound pods.
fn one_running_one_reserved(next: WorkloadView) -> (Harness, Vec<Action>, Vec<PodView>) {
    let mut h = Harness::new(&[node("n1", 4), node("n2", 4)], &[timed("first", 2, 50)], &[]);
    h.cycle();
    assert_eq!(h.state("first"), Some(GroupState::Admitted));
    let mut running = timed("first", 2, 50);
    running.suspended = false;
    h.send(job_event(Change::Apply(running)));
    let mut all = Vec::new();
    for i in 0..2 {
        all.extend(h.send(Event::Pod(Change::Apply(pod("first", i, 4)))));
    }
    let mut first_pods = Vec::new();
    for (i, (_, node, member)) in binds(&all).into_iter().enumerate() {
        first_pods.push(bound(&pod("first", i as u32, 4), &node, member, true));
        h.send(Event::Pod(Change::Apply(first_pods[i].clone())));
    }
    assert_eq!(h.state("first"), Some(GroupState::Running));
    let mut actions = h.send(job_event(Change::Apply(next)));
    while h.state("next") == Some(GroupState::Queued) && h.now < 1040 {
        actions.extend(h.cycle());
    }
    assert_eq!(h.state("next"), Some(GroupState::Reserved), "{actions:?}");
    (h, actions, first_pods)
}

/// first's pods succeed, then the Job controller marks it complete.
fn finish_first(h: &mut Harness, pods: &[PodView]) -> Vec<Action> {
    for p in pods {
        h.send(Event::Pod(Change::Apply(PodView { phase: PodPhase::Succeeded, ready: false, ..p.clone() })));
    }
    let mut done = timed("first", 2, 50);
    (done.suspended, done.finished) = (false, Some(true));
    h.send(job_event(Change::Apply(done)))
}

#[test]
fn a_group_reserved_to_start_soon_has_its_pods_made_ahead_and_bound_at_admission() {
    let (mut h, a, first) = one_running_one_reserved(timed("next", 2, 10));
    assert_eq!(unsuspends(&a, "next"), 1, "released within 60 s (the default) of its start: {a:?}");
    assert!(
        a.iter().any(|x| matches!(x, Action::Event { reason, .. } if reason == "CreatingPodsAhead")),
        "and says so: {a:?}"
    );
    let mut released = timed("next", 2, 10);
    released.suspended = false;
    let seen = h.send(job_event(Change::Apply(released)));
    assert_eq!(unsuspends(&seen, "next"), 0, "muster's own release, seen back, is kept: {seen:?}");
    assert_eq!(h.state("next"), Some(GroupState::Reserved), "released, not admitted");
    // Its pods come while first still runs: none is bound.
    let mut made = Vec::new();
    for i in 0..2 {
        made.extend(h.send(Event::Pod(Change::Apply(pod("next", i, 4)))));
    }
    assert!(binds(&made).is_empty(), "pods of a pending group stay unbound: {made:?}");
    // first ends: next is admitted and its waiting pods are bound at once, with no second release.
    let a = finish_first(&mut h, &first);
    assert_eq!(h.state("next"), Some(GroupState::Admitted));
    assert_eq!(binds(&a).len(), 2, "{a:?}");
    assert_eq!(unsuspends(&a, "next"), 0, "{a:?}");
}

#[test]
fn a_workload_whose_deadline_counts_from_release_waits_suspended_for_admission() {
    let mut with_deadline = timed("next", 2, 10);
    with_deadline.release_deadline = Some("spec.activeDeadlineSeconds".into());
    let (mut h, a, first) = one_running_one_reserved(with_deadline);
    assert_eq!(unsuspends(&a, "next"), 0, "{a:?}");
    let a = finish_first(&mut h, &first);
    assert_eq!(unsuspends(&a, "next"), 1, "released at admission, as before: {a:?}");
}

#[test]
fn a_user_suspending_a_group_released_ahead_takes_it_out_of_the_queue() {
    let (mut h, _, first) = one_running_one_reserved(timed("next", 2, 10));
    let mut asked = timed("next", 2, 10);
    (asked.suspended, asked.suspend_requested) = (true, true);
    let a = h.send(job_event(Change::Apply(asked.clone())));
    assert_eq!(h.state("next"), Some(GroupState::Suspended));
    asked.suspend_requested = false;
    let a2 = h.send(job_event(Change::Apply(asked)));
    let a3 = finish_first(&mut h, &first);
    for x in [a, a2, a3] {
        assert_eq!(unsuspends(&x, "next"), 0, "the user's suspension holds: {x:?}");
    }
}

#[test]
fn a_successor_keeps_a_workload_released_ahead_rather_than_suspending_it() {
    let (h, _, _) = one_running_one_reserved(timed("next", 2, 10));
    let Harness { dir, now, .. } = h;
    // The instance before released next; this one starts from the store and the objects.
    let mut first = timed("first", 2, 50);
    first.suspended = false;
    let mut next = timed("next", 2, 10);
    next.suspended = false;
    let pods: Vec<PodView> = vec![
        bound(&pod("first", 0, 4), "n1", 0, true),
        bound(&pod("first", 1, 4), "n2", 1, true),
        pod("next", 0, 4),
        pod("next", 1, 4),
    ];
    let mut h = Harness::start(dir, &[node("n1", 4), node("n2", 4)], &[first, next], &pods, now + 1);
    let a = h.brain.take_actions();
    let b = h.cycle();
    assert_eq!(h.state("next"), Some(GroupState::Reserved));
    let suspends = |x: &[Action]| {
        x.iter().filter(|x| matches!(x, Action::Suspend { key, suspend: true, .. } if &*key.name == "next")).count()
    };
    assert_eq!(suspends(&a) + suspends(&b), 0, "{a:?} {b:?}");
    assert!(binds(&b).is_empty(), "{b:?}");
}

#[test]
fn the_queue_status_tells_how_far_its_estimated_starts_were_from_the_admissions() {
    let (mut h, _, first) = one_running_one_reserved(timed("next", 2, 10));
    // The queue view gives next its estimated start: first's declared end.
    let engine = h.brain.queue_view_input().expect("started");
    let view = QueueView::of(&engine, h.now, false);
    let estimate = view.waiting.iter().find(|x| &*x.key.name == "next").and_then(|x| x.estimated_start).unwrap();
    h.brain.apply_queue_view(view.waiting);
    let submitted = h.brain.engine().unwrap().engine().group(&GroupKey::new(NS, "next")).unwrap().spec.submitted_at;
    // first ends 10 s before its declared end: next's wait was 10 s shorter than estimated.
    h.now = estimate - 10;
    // The cycle that admits next refreshes the queue's status.
    let a = finish_first(&mut h, &first);
    assert_eq!(h.state("next"), Some(GroupState::Admitted));
    let wait = (h.now - submitted) as f64;
    let want = (10.0 / wait * 100.0).round() as u32;
    let reported = a.iter().find_map(|x| match x {
        Action::QueueStatus { name, status } if name == "default" => status.estimates,
        _ => None,
    });
    assert_eq!(reported, Some(muster_k8s::EstimateAccuracy { groups: 1, median_error_percent: want }), "{a:?}");
}
