//! The controller's decisions against a real SQLite store, fed with the views the watchers
//! produce: admission, exact bindings, readiness, other schedulers' pods, bind failures, user
//! suspend and resume, and recovery after a restart. The same code runs against a real
//! apiserver in hack/e2e (test-muster-*.sh).

mod common;

use common::*;
use muster_queue::QueueConfig;

#[test]
fn a_job_is_queued_admitted_bound_exactly_and_runs() {
    let mut h = Harness::new(&[node("n1", 4), node("n2", 4)], &[job("train", 3, 2)], &[]);
    let first = h.brain.take_actions();
    assert!(
        first.iter().any(
            |a| matches!(a, Action::EnsureGroup { key, job_uid, .. } if &*key.name == "train" && job_uid == "uid-train")
        ),
        "the Group object is created: {first:?}"
    );
    let a = h.cycle();
    assert_eq!(h.state("train"), Some(GroupState::Admitted));
    assert_eq!(unsuspends(&a, "train"), 1, "{a:?}");
    assert_eq!(last_phase(&a, "train"), Some(GroupState::Admitted));
    let alloc =
        h.brain.engine().unwrap().engine().group(&GroupKey::new(NS, "train")).unwrap().allocation.clone().unwrap();
    // The Job controller creates its pods; each is bound to its member's node, by completion index.
    let pods: Vec<PodView> = (0..3).map(|i| pod("train", i, 2)).collect();
    let mut all = Vec::new();
    for p in &pods {
        all.extend(h.send(Event::Pod(Change::Apply(p.clone()))));
    }
    let b = binds(&all);
    assert_eq!(b.len(), 3, "{all:?}");
    for (pod, node, member) in &b {
        let want = alloc.members.iter().find(|m| m.index == *member).unwrap();
        assert_eq!(node, &want.node, "{pod} bound to its member's node");
        assert_eq!(pod, &format!("train-{member}"), "completion index i fills member i");
    }
    // A repeated pod event does not bind again while the binding is in flight.
    assert!(binds(&h.send(Event::Pod(Change::Apply(pods[0].clone())))).is_empty());
    // Bound and ready: Running.
    for (p, (_, node, member)) in pods.iter().zip(&b) {
        h.send(Event::Pod(Change::Apply(bound(p, node, *member, true))));
    }
    assert_eq!(h.state("train"), Some(GroupState::Running));
    let mut done = job("train", 3, 2);
    done.suspended = false;
    done.finished = Some(true);
    let a = h.send(job_event(Change::Apply(done)));
    assert_eq!(h.state("train"), Some(GroupState::Succeeded));
    assert_eq!(last_phase(&a, "train"), Some(GroupState::Succeeded));
}

#[test]
fn a_jobs_later_pods_take_the_members_its_finished_pods_left() {
    // parallelism 2, completions 4: a group of 2; pods 2 and 3 come as 0 and 1 finish.
    let mut h = Harness::new(&[node("n1", 4), node("n2", 4)], &[job("waves", 2, 2)], &[]);
    h.cycle();
    assert_eq!(h.state("waves"), Some(GroupState::Admitted));
    let first: Vec<PodView> = (0..2).map(|i| pod("waves", i, 2)).collect();
    let mut all = Vec::new();
    for p in &first {
        all.extend(h.send(Event::Pod(Change::Apply(p.clone()))));
    }
    let b = binds(&all);
    assert_eq!(b.len(), 2, "{all:?}");
    for (p, (_, node, member)) in first.iter().zip(&b) {
        h.send(Event::Pod(Change::Apply(bound(p, node, *member, true))));
    }
    // Pod 2 comes while both members still run: it waits.
    let third = pod("waves", 2, 2);
    assert!(binds(&h.send(Event::Pod(Change::Apply(third.clone())))).is_empty(), "no member is free");
    // Pod 0 finishes: pod 2 takes its member, on its node.
    let (_, node0, member0) = b[0].clone();
    let done = PodView { phase: PodPhase::Succeeded, ready: false, ..bound(&first[0], &node0, member0, false) };
    let a = h.send(Event::Pod(Change::Apply(done)));
    assert_eq!(binds(&a), [("waves-2".to_string(), node0, member0)], "{a:?}");
    assert_eq!(h.state("waves"), Some(GroupState::Running), "the group keeps running");
}

#[test]
fn two_jobs_that_fit_only_one_at_a_time_never_share_the_cluster() {
    // Seed 001 in small: each job needs the whole cluster.
    let mut h = Harness::new(&[node("n1", 4), node("n2", 4)], &[job("a", 4, 2), job("b", 4, 2)], &[]);
    let a = h.cycle();
    let admitted: Vec<_> =
        ["a", "b"].into_iter().filter(|n| h.state(n).is_some_and(|s| s.holds_allocation())).collect();
    assert_eq!(admitted.len(), 1, "exactly one job is placed: {a:?}");
    let (first, second) = if admitted[0] == "a" { ("a", "b") } else { ("b", "a") };
    // The waiting job, first in line with no planned start (the running one declares no run
    // time), is released ahead: its pods are made but none is bound while the first runs.
    assert_eq!(unsuspends(&a, second), 1, "{a:?}");
    let early: Vec<PodView> = (0..4).map(|i| pod(second, i, 2)).collect();
    for p in &early {
        assert!(binds(&h.send(Event::Pod(Change::Apply(p.clone())))).is_empty());
    }
    assert!(binds(&h.cycle()).is_empty());
    let mut done = job(first, 4, 2);
    done.finished = Some(true);
    let a = h.send(job_event(Change::Apply(done)));
    assert_eq!(h.state(second), Some(GroupState::Admitted), "the second job is placed once the first finished");
    assert_eq!(binds(&a).len(), 4, "and its waiting pods are bound at once: {a:?}");
}

#[test]
fn other_schedulers_pods_use_capacity() {
    let mut foreign = pod("web", 0, 3);
    foreign.ours = false;
    foreign.place = None;
    foreign.node = Some("n1".into());
    foreign.phase = PodPhase::Running;
    let mut h = Harness::new(&[node("n1", 4), node("n2", 4)], &[job("train", 2, 2)], &[foreign.clone()]);
    h.brain.take_actions();
    h.cycle();
    // 1 core left on n1: two 2-core members do not fit beside the foreign pod... on n2 they do.
    let g = h.brain.engine().unwrap().engine().group(&GroupKey::new(NS, "train")).unwrap().clone();
    assert_eq!(g.state, GroupState::Admitted);
    assert!(g.allocation.unwrap().members.iter().all(|m| m.node == "n2"), "n1 is mostly taken");
    // A second job must wait for the foreign pod to finish.
    h.send(job_event(Change::Apply(job("more", 2, 2))));
    h.cycle();
    assert_eq!(h.state("more"), Some(GroupState::Queued));
    foreign.phase = PodPhase::Succeeded;
    h.send(Event::Pod(Change::Apply(foreign)));
    h.cycle();
    assert_eq!(h.state("more"), Some(GroupState::Admitted));
}

#[test]
fn node_label_and_capacity_changes_apply_at_once_and_evict_nothing() {
    let mut h = Harness::new(&[node("n1", 4), node("n2", 4)], &[job("a", 2, 2)], &[]);
    h.brain.take_actions();
    h.cycle();
    assert_eq!(h.state("a"), Some(GroupState::Admitted));
    let a_nodes = |h: &Harness| -> Vec<String> {
        let g = h.brain.engine().unwrap().engine().group(&GroupKey::new(NS, "a")).unwrap().clone();
        g.allocation.unwrap().members.into_iter().map(|m| m.node).collect()
    };
    let placed = a_nodes(&h);
    // A job for nodes labelled pool=gpu, which no node is yet.
    let mut gpu = job("gpu", 1, 1);
    gpu.group.as_mut().unwrap().node_selector.insert("pool".into(), "gpu".into());
    h.send(job_event(Change::Apply(gpu)));
    h.cycle();
    assert_ne!(h.state("gpu"), Some(GroupState::Admitted));
    // Labelling a node lets it run, without a restart.
    let free_node = if placed.iter().all(|n| n == "n1") { "n2" } else { "n1" };
    let mut labelled = node(free_node, 4);
    labelled.spec.labels.insert("pool".into(), "gpu".into());
    let a = h.send(Event::Node(Change::Apply(labelled)));
    assert_eq!(h.state("gpu"), Some(GroupState::Admitted), "{a:?}");
    // Shrinking the capacity under a running group keeps it where it is.
    let busy = placed[0].clone();
    let a = h.send(Event::Node(Change::Apply(node(&busy, 1))));
    assert_eq!(h.state("a"), Some(GroupState::Admitted));
    assert_eq!(a_nodes(&h), placed);
    assert!(!a.iter().any(|x| matches!(x, Action::Suspend { suspend: true, .. })), "nothing evicted: {a:?}");
    // ... and nothing new goes there until it has room again.
    h.send(job_event(Change::Apply(job("small", 1, 1))));
    h.cycle();
    let small = h.brain.engine().unwrap().engine().group(&GroupKey::new(NS, "small")).unwrap().clone();
    assert!(small.allocation.is_none_or(|al| al.members.iter().all(|m| m.node != busy)), "{busy} is full");
}

#[test]
fn metrics_count_what_the_brain_decides() {
    let has = |text: &str, line: &str| text.lines().any(|l| l == line);
    let value = |text: &str, name: &str| -> f64 {
        text.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok()).unwrap_or(0.0)
    };
    // One node of 4 cores: a is admitted, b waits behind it.
    let mut h = Harness::new(&[node("n1", 4)], &[job("a", 1, 4), job("b", 1, 4)], &[]);
    h.cycle();
    h.brain.refresh_queue_view(h.now, false);
    let text = h.metrics.encode().unwrap();
    assert!(has(&text, r#"muster_admissions_total{queue="default"} 1"#), "{text}");
    assert!(has(&text, r#"muster_groups{queue="default",state="admitted"} 1"#), "{text}");
    assert!(has(&text, r#"muster_groups{queue="default",state="pending"} 1"#), "{text}");
    // Waited from the Job's creation (100) to admission (1001), though seen only at 1000.
    assert!(has(&text, "muster_admission_wait_seconds_count 1"), "{text}");
    assert_eq!(value(&text, "muster_admission_wait_seconds_sum"), 901.0, "{text}");
    assert!(value(&text, "muster_store_write_duration_seconds_count") >= 1.0, "{text}");

    // A refused binding releases a and queues it again at 1010, at its old place (not its
    // fault): it is admitted again at 1011, having waited 1 s this time, not since 100.
    let failed = Event::BindFailed { key: GroupKey::new(NS, "a"), pod: "a-0".into(), message: "no".into() };
    h.brain.handle(failed, 1010);
    h.brain.cycle(1011);
    let text = h.metrics.encode().unwrap();
    assert!(has(&text, r#"muster_evictions_total{queue="default",reason="members_lost"} 1"#), "{text}");
    assert!(has(&text, r#"muster_admissions_total{queue="default"} 2"#), "{text}");
    assert_eq!(value(&text, "muster_admission_wait_seconds_sum"), 901.0 + 1.0, "{text}");
}

#[test]
fn nothing_is_written_into_a_namespace_being_deleted_but_its_groups_still_release_their_nodes() {
    let mut h = Harness::new(&[node("n1", 4)], &[job("train", 2, 2)], &[]);
    h.brain.handle(Event::Namespace(Change::Apply(NamespaceView { name: NS.into(), terminating: false })), h.now);
    h.cycle();
    let pods: Vec<PodView> = (0..2).map(|i| pod("train", i, 2)).collect();
    for p in &pods {
        h.send(Event::Pod(Change::Apply(p.clone())));
    }
    for (i, p) in pods.iter().enumerate() {
        h.send(Event::Pod(Change::Apply(bound(p, "n1", i as u32, true))));
    }
    assert_eq!(h.state("train"), Some(GroupState::Running));
    // The teardown: the namespace is marked, its pods go, then its Job.
    let mut a = h.send(Event::Namespace(Change::Apply(NamespaceView { name: NS.into(), terminating: true })));
    for (i, p) in pods.iter().enumerate() {
        let going = PodView { deleting: true, ..bound(p, "n1", i as u32, false) };
        a.extend(h.send(Event::Pod(Change::Apply(going))));
        a.extend(h.send(Event::Pod(Change::Delete(p.clone()))));
    }
    let train = h.brain.engine().unwrap().engine().group(&GroupKey::new(NS, "train")).unwrap();
    assert!(train.not_ready_since.is_some(), "the engine saw its pods go");
    a.extend(h.send(job_event(Change::Delete(job("train", 2, 2)))));
    let written: Vec<&Action> = a.iter().filter(|a| a.group().is_some()).collect();
    assert!(written.is_empty(), "no status, event or Group delete for a namespace being deleted: {written:?}");
    assert!(h.state("train").is_none_or(|s| s == GroupState::Deleted), "{:?}", h.state("train"));
    // Its node is free again: a Job elsewhere that needs all of it is admitted and written.
    let other = WorkloadView { key: GroupKey::new("elsewhere", "next"), ..job("next", 2, 2) };
    let a = h.send(job_event(Change::Apply(other)));
    assert!(
        a.iter().any(|a| matches!(a, Action::Suspend { key, suspend: false, .. } if &*key.namespace == "elsewhere")),
        "{a:?}"
    );
}

#[test]
fn a_refused_binding_releases_the_whole_group() {
    let mut h = Harness::new(&[node("n1", 8)], &[job("train", 2, 2)], &[]);
    h.cycle();
    let p0 = pod("train", 0, 2);
    let b = binds(&h.send(Event::Pod(Change::Apply(p0.clone()))));
    assert_eq!(b.len(), 1);
    let a = h.send(Event::BindFailed { key: GroupKey::new(NS, "train"), pod: p0.name, message: "node full".into() });
    assert!(
        a.iter().any(|a| matches!(a, Action::Suspend { key, suspend: true, .. } if &*key.name == "train")),
        "the Job is suspended again (its pods go): {a:?}"
    );
    let suspend = a.iter().position(|a| matches!(a, Action::Suspend { suspend: true, .. })).unwrap();
    // Not the group's fault: queued again at once, and placed anew (its pods start over).
    let g = h.brain.engine().unwrap().engine().group(&GroupKey::new(NS, "train")).unwrap();
    assert_eq!(g.evictions, 1);
    if let Some(again) = a.iter().position(|a| matches!(a, Action::Suspend { suspend: false, .. })) {
        assert!(again > suspend, "released before admitted again: {a:?}");
    }
    assert!(a.iter().any(|a| matches!(a, Action::Event { reason, .. } if reason == "BindFailed")));
}

#[test]
fn user_suspend_releases_and_resume_requeues() {
    let mut h = Harness::new(&[node("n1", 8)], &[job("train", 2, 2)], &[]);
    h.cycle();
    let mut j = job("train", 2, 2);
    j.suspended = false;
    h.send(job_event(Change::Apply(j.clone())));
    assert_eq!(h.state("train"), Some(GroupState::Admitted), "muster's own unsuspend changes nothing");
    // A suspended Job without the webhook's stamp is muster's own doing (an eviction whose watch
    // event came late): the group keeps running.
    j.suspended = true;
    h.send(job_event(Change::Apply(j.clone())));
    assert_eq!(h.state("train"), Some(GroupState::Admitted));
    j.suspend_requested = true;
    let a = h.send(job_event(Change::Apply(j.clone())));
    assert_eq!(h.state("train"), Some(GroupState::Suspended));
    assert!(a.iter().any(|a| matches!(a, Action::ClearRequests { .. })), "{a:?}");
    j.suspend_requested = false;
    j.resume_requested = true;
    let a = h.send(job_event(Change::Apply(j)));
    assert!(a.iter().any(|a| matches!(a, Action::ClearRequests { .. })), "{a:?}");
    assert_eq!(h.state("train"), Some(GroupState::Admitted), "queued again and placed");
}

#[test]
fn a_job_evicted_with_its_node_is_released_again_only_once_its_earlier_pods_are_gone() {
    // Each member takes a whole node: the group moves to n2 and n3 once n1 is gone.
    let mut h = Harness::new(&[node("n1", 4), node("n2", 4), node("n3", 4)], &[job("steady", 2, 4)], &[]);
    h.cycle();
    let placed = allocation(&h, "steady");
    let pods: Vec<PodView> = placed.iter().map(|(m, n)| bound(&pod("steady", *m, 4), n, *m, true)).collect();
    for p in &pods {
        h.send(Event::Pod(Change::Apply(p.clone())));
    }
    assert_eq!(h.state("steady"), Some(GroupState::Running));
    let (lost, kept) = (&placed[0].1, &pods[1]);
    let a = h.send(Event::Node(Change::Delete(node(lost, 4))));
    assert!(
        a.iter().any(|x| matches!(x, Action::Suspend { suspend: true, .. })),
        "the Job is suspended, so its controller deletes the pods without counting them failed: {a:?}"
    );
    assert_eq!(h.state("steady"), Some(GroupState::Admitted), "placed again at once on what is left");
    assert!(allocation(&h, "steady").iter().all(|(_, n)| n != lost));
    // Released now, the Job's controller might never see it suspended: it would keep the pod on
    // the surviving node and count the lost node's pod as failed.
    assert_eq!(unsuspends(&a, "steady"), 0, "{a:?}");
    let admitted = told(&a, "Admitted");
    assert!(
        admitted.iter().any(|m| m.ends_with("its pods are made once the 2 pods of its earlier run are deleted")),
        "the admission says what it waits for: {admitted:?}"
    );
    let mut j = job("steady", 2, 4);
    j.suspended = true;
    let a = h.send(job_event(Change::Apply(j)));
    assert_eq!(unsuspends(&a, "steady"), 0, "a pod of the evicted run still runs: {a:?}");
    // The Job's controller deletes them for the suspension (their tracking finalizer removed
    // first, so never counted as failed); the lost node's pod may terminate for long.
    let a = h.send(Event::Pod(Change::Apply(PodView { deleting: true, ..kept.clone() })));
    assert_eq!(unsuspends(&a, "steady"), 0, "the lost node's pod is not deleted yet: {a:?}");
    let a = h.send(Event::Pod(Change::Apply(PodView { deleting: true, ..pods[0].clone() })));
    assert_eq!(unsuspends(&a, "steady"), 1, "released once every earlier pod is being deleted: {a:?}");
    assert_eq!(h.state("steady"), Some(GroupState::Admitted));
    // The new run's pods wait while a pod still terminating holds a node of the new placement,
    // then are bound to it whole.
    let placed = allocation(&h, "steady");
    let mut bound_to = Vec::new();
    for (m, _) in &placed {
        let p = PodView { uid: format!("steady-new-{m}"), name: format!("steady-new-{m}"), ..pod("steady", *m, 4) };
        bound_to.extend(binds(&h.send(Event::Pod(Change::Apply(p)))));
    }
    if placed.iter().any(|(_, n)| Some(n) == kept.node.as_ref()) {
        assert!(bound_to.is_empty(), "{:?} is still on its node: {bound_to:?}", kept.name);
    }
    bound_to.extend(binds(&h.send(Event::Pod(Change::Delete(kept.clone())))));
    let mut members: Vec<(u32, String)> = bound_to.into_iter().map(|(_, node, m)| (m, node)).collect();
    members.sort();
    assert_eq!(members, placed, "each member on its new node, none on {lost}");
}

#[test]
fn a_restart_recovers_running_groups_from_the_store_and_bound_pods() {
    let jobs = [job("a", 2, 2), job("b", 2, 8)];
    let nodes = [node("n1", 8), node("n2", 8)];
    let mut h = Harness::new(&nodes, &jobs, &[]);
    let a = h.cycle();
    assert_eq!(unsuspends(&a, "a"), 1);
    let alloc = h.brain.engine().unwrap().engine().group(&GroupKey::new(NS, "a")).unwrap().allocation.clone().unwrap();
    let pods: Vec<PodView> =
        alloc.members.iter().map(|m| bound(&pod("a", m.index, 2), &m.node, m.index, true)).collect();
    for p in &pods {
        h.send(Event::Pod(Change::Apply(p.clone())));
    }
    assert_eq!(h.state("a"), Some(GroupState::Running));
    let b_state = h.state("b");
    let (dir, now) = (std::mem::replace(&mut h.dir, TempDir::new("unused")), h.now);
    drop(h.brain);
    // A new instance: same store, the cluster as listed now.
    let mut running = jobs.to_vec();
    running[0].suspended = false;
    let mut h2 = Harness::start(dir, &nodes, &running, &pods, now + 5);
    let a = h2.brain.take_actions();
    assert_eq!(h2.state("a"), Some(GroupState::Running), "{a:?}");
    assert_eq!(h2.state("b"), b_state);
    assert!(binds(&a).is_empty(), "nothing is bound twice: {a:?}");
    assert_eq!(unsuspends(&a, "a"), 0, "no second admission");
    // The status the last instance may not have written: a's again, with its allocation.
    let status = a.iter().rev().find_map(|x| match x {
        Action::Status { key, status } if &*key.name == "a" => Some(status.clone()),
        _ => None,
    });
    let status = status.expect("a's status is written again after the restart");
    assert_eq!(status.phase, Some(GroupState::Running));
    let written: Vec<(u32, String)> = status.allocation.iter().map(|m| (m.member, m.node.clone())).collect();
    let want: Vec<(u32, String)> = alloc.members.iter().map(|m| (m.index, m.node.clone())).collect();
    assert_eq!(written, want);
    h2.cycle();
    h2.brain.engine().unwrap().engine().check_invariants().unwrap();
}

#[test]
fn queue_statuses_count_groups_and_their_usage_and_are_sent_when_they_change() {
    let jobs = [job("a", 2, 2), job("b", 2, 8)];
    let mut h = Harness::new(&[node("n1", 8), node("n2", 8)], &jobs, &[]);
    let queue_statuses = |actions: Vec<Action>| -> Vec<(String, QueueStatus)> {
        actions
            .into_iter()
            .filter_map(|a| match a {
                Action::QueueStatus { name, status } => Some((name, *status)),
                _ => None,
            })
            .collect()
    };
    // The cycle that admits a sends the counts, without waiting for the queue view.
    let sent = queue_statuses(h.cycle());
    assert_eq!(h.state("b").map(GroupState::is_pending), Some(true), "b waits for a");
    assert_eq!(sent.len(), 1, "{sent:?}");
    let (name, st) = &sent[0];
    assert_eq!((name.as_str(), st.pending_groups, st.admitted_groups), ("default", 1, 1));
    // 2 members x 2 cpu, as the Group object spells cpu.
    assert_eq!(st.usage.get("cpu"), Some(&Quantity::Text("4000m".into())));
    assert!(queue_statuses(h.cycle()).is_empty(), "a cycle that changes nothing sends nothing");
    assert_eq!(h.brain.refresh_queue_view(h.now, false), None, "no plan unless a dashboard listens");
    assert!(queue_statuses(h.brain.take_actions()).is_empty(), "unchanged: not sent again");
    let plan = h.brain.refresh_queue_view(h.now, true).expect("the plan, for a dashboard");
    assert_eq!((plan.groups.len(), plan.queues[0].pending, plan.queues[0].admitted), (2, 1, 1));
    assert!(queue_statuses(h.brain.take_actions()).is_empty(), "the same statuses from the plan");
}

#[test]
fn a_queue_view_computed_on_an_older_copy_leaves_groups_that_have_started_alone() {
    let mut h = Harness::new(&[node("n1", 4)], &[job("a", 1, 4), job("b", 1, 4)], &[]);
    h.cycle();
    let copy = h.brain.queue_view_input().expect("the engine runs");
    h.brain.take_actions();
    // While the view is computed, a finishes and b starts.
    let view = QueueView::of(&copy, h.now, false);
    assert_eq!(view.waiting.iter().map(|x| (x.key.name.as_ref(), x.position)).collect::<Vec<_>>(), [("b", 1)]);
    let mut done = job("a", 1, 4);
    done.finished = Some(true);
    h.send(job_event(Change::Apply(done)));
    assert_eq!(h.state("b"), Some(GroupState::Admitted));
    h.brain.take_actions();
    h.brain.apply_queue_view(view.waiting);
    let stale: Vec<Action> = h.brain.take_actions();
    assert!(stale.is_empty(), "no position or estimate for a group that runs: {stale:?}");
}

#[test]
fn a_plain_pod_group_is_admitted_ungated_bound_exactly_finishes_and_goes_with_its_pods() {
    let mut h = Harness::new(&[node("n1", 4), node("n2", 4)], &[], &[]);
    let pods: Vec<PodView> = (0..3).map(|i| plain("ring", i, 3, 2)).collect();
    // The first pod makes the group known, but no room is held for pods that may never come.
    let a = h.send(Event::Pod(Change::Apply(pods[0].clone())));
    assert_eq!(h.state("ring"), None, "not queued with 1 of its 3 pods: {a:?}");
    let waiting = a.iter().find_map(|a| match a {
        Action::Status { key, status } if &*key.name == "ring" => status.message.clone(),
        _ => None,
    });
    assert!(waiting.as_deref().is_some_and(|m| m.contains("1 of the 3")), "{a:?}");
    let mut a = a;
    a.extend(h.send(Event::Pod(Change::Apply(pods[1].clone()))));
    assert_eq!(h.state("ring"), None);
    a.extend(h.send(Event::Pod(Change::Apply(pods[2].clone()))));
    let ensure = a.iter().find_map(|a| match a {
        Action::EnsureGroup { key, spec, job_uid } if &*key.name == "ring" => Some((spec.clone(), job_uid.clone())),
        _ => None,
    });
    let (spec, owner) = ensure.unwrap_or_else(|| panic!("the Group object is created: {a:?}"));
    assert_eq!(owner, "", "no owner: muster deletes it with the pods");
    assert_eq!(spec.members, Members { min: 3, max: None });
    assert_eq!(spec.queue, "default");
    assert_eq!(spec.owner, None);
    assert_eq!(h.state("ring"), Some(GroupState::Admitted), "{a:?}");
    assert!(!a.iter().any(|a| matches!(a, Action::Suspend { .. })), "no Job to unsuspend: {a:?}");
    assert_eq!(last_phase(&a, "ring"), Some(GroupState::Admitted), "plain groups get statuses too");
    let alloc = allocation(&h, "ring");
    assert_eq!(alloc.len(), 3);
    let all = a;
    assert_ungated_before_bound(&all);
    let mut u = ungates(&all);
    u.sort();
    assert_eq!(u, ["ring-0", "ring-1", "ring-2"], "each pod ungated once: {all:?}");
    let b = binds(&all);
    assert_eq!(b.len(), 3, "{all:?}");
    let mut members: Vec<u32> = b.iter().map(|(_, _, m)| *m).collect();
    members.sort();
    assert_eq!(members, [0, 1, 2], "each member filled once");
    for (pod, node, member) in &b {
        let want = alloc.iter().find(|(i, _)| i == member).unwrap();
        assert_eq!(node, &want.1, "{pod} bound to its member's node");
    }
    // Repeated events of pods whose binding is in flight change nothing.
    let again = h.send(Event::Pod(Change::Apply(pods[1].clone())));
    assert!(binds(&again).is_empty() && ungates(&again).is_empty(), "{again:?}");
    // Bound and ready: Running. All Succeeded: the group Succeeded.
    let mut running = Vec::new();
    for (pod, node, member) in &b {
        let p = pods.iter().find(|p| &p.name == pod).unwrap();
        running.push(bound_plain(p, node, *member, true));
        h.send(Event::Pod(Change::Apply(running.last().unwrap().clone())));
    }
    assert_eq!(h.state("ring"), Some(GroupState::Running));
    for p in &running[..2] {
        h.send(Event::Pod(Change::Apply(PodView { phase: PodPhase::Succeeded, ready: false, ..p.clone() })));
    }
    assert_eq!(h.state("ring"), Some(GroupState::Running), "not finished while a member runs");
    let a =
        h.send(Event::Pod(Change::Apply(PodView { phase: PodPhase::Succeeded, ready: false, ..running[2].clone() })));
    assert_eq!(h.state("ring"), Some(GroupState::Succeeded), "{a:?}");
    assert_eq!(last_phase(&a, "ring"), Some(GroupState::Succeeded));
    // The pods go (the user deletes them): the group and its Group object go too.
    let mut a = Vec::new();
    for p in &running {
        assert_eq!(deleted_groups(&a, "ring"), 0, "not before the last pod is gone");
        a = h.send(Event::Pod(Change::Delete(p.clone())));
    }
    assert_eq!(h.state("ring"), None);
    assert_eq!(deleted_groups(&a, "ring"), 1, "{a:?}");
    h.brain.engine().unwrap().engine().check_invariants().unwrap();
}

#[test]
fn a_plain_group_waits_gated_until_the_whole_group_fits() {
    let mut h = Harness::new(&[node("n1", 4), node("n2", 4)], &[], &[]);
    let first: Vec<PodView> = (0..4).map(|i| plain("a", i, 4, 2)).collect();
    let second: Vec<PodView> = (0..4).map(|i| plain("b", i, 4, 2)).collect();
    let mut all = Vec::new();
    for p in first.iter().chain(&second) {
        all.extend(h.send(Event::Pod(Change::Apply(p.clone()))));
    }
    assert_eq!(h.state("a"), Some(GroupState::Admitted));
    assert_eq!(h.state("b"), Some(GroupState::Queued));
    assert!(binds(&all).iter().all(|(pod, _, _)| pod.starts_with("a-")), "b's pods stay gated: {all:?}");
    assert_eq!(binds(&all).len(), 4);
    assert!(ungates(&all).iter().all(|p| p.starts_with("a-")));
    // a runs and ends; b is admitted and its pods are released.
    let alloc = allocation(&h, "a");
    let b = binds(&all);
    for (pod, node, member) in &b {
        let p = first.iter().find(|p| &p.name == pod).unwrap();
        assert!(alloc.contains(&(*member, node.clone())));
        h.send(Event::Pod(Change::Apply(bound_plain(p, node, *member, true))));
    }
    let mut all = Vec::new();
    for (pod, node, member) in &b {
        let p = first.iter().find(|p| &p.name == pod).unwrap();
        let done = PodView { phase: PodPhase::Failed, ..bound_plain(p, node, *member, false) };
        all.extend(h.send(Event::Pod(Change::Apply(done))));
    }
    assert_eq!(h.state("a"), Some(GroupState::Failed), "a pod failed: the group failed");
    assert_eq!(h.state("b"), Some(GroupState::Admitted), "{all:?}");
    assert_eq!(binds(&all).len(), 4);
    assert!(binds(&all).iter().all(|(pod, _, _)| pod.starts_with("b-")));
    assert_ungated_before_bound(&all);
}

#[test]
fn a_plain_pod_naming_a_jobs_group_never_takes_its_members() {
    // Pod "train-9" claims the group of Job train with the group label: were it bound, it would
    // run on a member placed for the Job (past the queue), and leave a Job pod with none.
    let mut h = Harness::new(&[node("n1", 8)], &[job("train", 2, 2)], &[]);
    h.cycle();
    assert_eq!(h.state("train"), Some(GroupState::Admitted));
    let stray = plain("train", 9, 1, 2);
    let a = h.send(Event::Pod(Change::Apply(stray.clone())));
    assert!(binds(&a).is_empty(), "{a:?}");
    let told: Vec<&str> = a
        .iter()
        .filter_map(|a| match a {
            Action::Event { reason, message, .. } if reason == "GroupTaken" => Some(message.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(told.len(), 1, "{a:?}");
    assert!(told[0].contains("a Job"), "{}", told[0]);
    let mut all = Vec::new();
    for i in 0..2 {
        all.extend(h.send(Event::Pod(Change::Apply(pod("train", i, 2)))));
    }
    let mut bound: Vec<String> = binds(&all).into_iter().map(|(p, _, _)| p).collect();
    bound.sort();
    assert_eq!(bound, ["train-0", "train-1"], "the Job's own pods get its members: {all:?}");
}

#[test]
fn a_bad_group_size_is_reported_once_and_skipped() {
    let mut h = Harness::new(&[node("n1", 8)], &[], &[]);
    let mut bad = plain("odd", 0, 0, 1);
    bad.members = Some(Box::new(Err("metadata.labels[muster.dev/group-size]: \"0\" is not a whole number".into())));
    let a = h.send(Event::Pod(Change::Apply(bad.clone())));
    let invalid = |a: &[Action]| {
        a.iter().filter(|a| matches!(a, Action::Event { reason, .. } if reason == "InvalidGroup")).count()
    };
    assert_eq!(invalid(&a), 1, "{a:?}");
    assert_eq!(h.state("odd"), None);
    assert!(binds(&a).is_empty() && !a.iter().any(|a| matches!(a, Action::EnsureGroup { .. })));
    let mut second = plain("odd", 1, 0, 1);
    second.members = Some(Box::new(Err("metadata.labels[muster.dev/group-size]: \"0\" is not a whole number".into())));
    let a = h.send(Event::Pod(Change::Apply(second)));
    assert_eq!(invalid(&a), 0, "reported once: {a:?}");
    // No queue label: refused the same way.
    let mut noq = plain("lost", 0, 1, 1);
    noq.queue = None;
    let a = h.send(Event::Pod(Change::Apply(noq)));
    assert_eq!(invalid(&a), 1, "{a:?}");
    assert_eq!(h.state("lost"), None);
    // An unknown queue: the engine refuses it once.
    let mut elsewhere = plain("far", 0, 1, 1);
    elsewhere.queue = Some("nope".into());
    let a = h.send(Event::Pod(Change::Apply(elsewhere.clone())));
    assert!(a.iter().any(|a| matches!(a, Action::Event { reason, .. } if reason == "NotQueued")), "{a:?}");
    elsewhere.ready = true;
    let a = h.send(Event::Pod(Change::Apply(elsewhere)));
    assert!(!a.iter().any(|a| matches!(a, Action::Event { .. } | Action::EnsureGroup { .. })), "{a:?}");
}

#[test]
fn a_group_in_a_queue_left_out_is_told_why() {
    let mut cfg = brain_config(EngineConfig::single_queue("default"));
    let why = "spec.quotas.cpu.nominal: \"lots\" is not a quantity";
    cfg.left_out_queues.insert("team-c".into(), why.into());
    let mut h = Harness::configured(TempDir::new("muster-brain"), cfg, &[node("n1", 8)], &[], &[], &[], 1000);
    let mut pod = plain("far", 0, 1, 1);
    pod.queue = Some("team-c".into());
    let a = h.send(Event::Pod(Change::Apply(pod)));
    let told = a.iter().find_map(|a| match a {
        Action::Event { reason, message, .. } if reason == "NotQueued" => Some(message.clone()),
        _ => None,
    });
    let told = told.unwrap_or_else(|| panic!("a NotQueued event: {a:?}"));
    assert!(told.contains("queue \"team-c\" is left out") && told.contains(why), "{told}");
}

/// A node whose labels the graph cannot take (its block label forgotten, so its rack "1" would
/// sit beside block "1") is left out at the start, as a running engine refuses it; it no longer
/// stops the controller, and the rest of the cluster is scheduled on.
#[test]
fn a_node_the_graph_refuses_is_left_out_at_the_start() {
    let mut labelled = node("n1", 8);
    labelled.spec.topology = vec![("block".into(), "1".into()), ("rack".into(), "1".into())];
    let mut forgotten = node("n2", 8);
    forgotten.spec.topology = vec![("rack".into(), "1".into())];
    let mut h = Harness::new(&[labelled, forgotten], &[job("j", 1, 8)], &[]);
    h.cycle();
    assert_eq!(allocation(&h, "j"), [(0, "n1".to_string())]);
    let stat = h.brain.engine().unwrap().engine().graph().stat();
    assert_eq!(stat.nodes, 1, "n2 left out");
}

/// A Queue fixed while muster runs: the running engine takes the new configuration (no restart,
/// no group moves), and the group refused under the old one is queued and placed under the new.
/// A configuration the engine refuses leaves the running one in place.
#[test]
fn a_queue_fixed_while_muster_runs_takes_the_group_it_refused() {
    let mut cfg = brain_config(EngineConfig::single_queue("default"));
    cfg.left_out_queues.insert("team-c".into(), "spec.quotas.cpu.nominal: \"lots\" is not a quantity".into());
    let mut h = Harness::configured(TempDir::new("muster-brain"), cfg, &[node("n1", 8)], &[], &[], &[], 1000);
    let mut runs = Vec::new();
    for i in 0..2 {
        runs.extend(h.send(Event::Pod(Change::Apply(plain("here", i, 2, 2)))));
    }
    let here = allocation(&h, "here");
    assert_eq!(here.len(), 2, "{runs:?}");
    let mut far = plain("far", 0, 1, 1);
    far.queue = Some("team-c".into());
    let a = h.send(Event::Pod(Change::Apply(far)));
    assert!(a.iter().any(|a| matches!(a, Action::Event { reason, .. } if reason == "NotQueued")), "{a:?}");
    assert_eq!(h.state("far"), None);

    let mut bad = EngineConfig::single_queue("default");
    bad.fair_share_half_life_s = -1;
    h.brain.reconfigure(bad, Default::default(), h.now);
    let queues = |h: &Harness| -> Vec<String> {
        h.brain.engine().unwrap().engine().config().queues.iter().map(|q| q.name.clone()).collect()
    };
    assert_eq!(queues(&h), ["default"], "refused: the running configuration stays");

    let mut fixed = EngineConfig::single_queue("default");
    fixed.queues.push(QueueConfig::new("team-c"));
    h.brain.reconfigure(fixed, Default::default(), h.now);
    assert_eq!(queues(&h), ["default", "team-c"]);
    let a = h.cycle();
    assert_eq!(binds(&a).len(), 1, "the refused group is queued and placed: {a:?}");
    let statuses: Vec<&str> = (a.iter())
        .filter_map(|a| match a {
            Action::QueueStatus { name, .. } => Some(name.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(statuses, ["default", "team-c"], "every Queue's status written again");
    assert_eq!(h.state("far"), Some(GroupState::Admitted));
    assert_eq!(allocation(&h, "here"), here, "a placed group stays where it is");
}

#[test]
fn an_evicted_plain_group_deletes_its_pods_and_goes_with_them() {
    let mut h = Harness::new(&[node("n1", 8)], &[], &[]);
    let pods: Vec<PodView> = (0..2).map(|i| plain("ring", i, 2, 2)).collect();
    let mut all = Vec::new();
    for p in &pods {
        all.extend(h.send(Event::Pod(Change::Apply(p.clone()))));
    }
    assert_eq!(binds(&all).len(), 2);
    let a = h.send(Event::BindFailed { key: GroupKey::new(NS, "ring"), pod: "ring-1".into(), message: "no".into() });
    let deleted = a.iter().find_map(|a| match a {
        Action::DeletePods { key, pods, .. } if &*key.name == "ring" => Some(pods.clone()),
        _ => None,
    });
    let mut deleted = deleted.unwrap_or_else(|| panic!("the group's pods are deleted: {a:?}"));
    deleted.sort();
    assert_eq!(deleted, [("ring-0".to_string(), "ring-uid-0".to_string()), ("ring-1".into(), "ring-uid-1".into())]);
    assert!(!a.iter().any(|a| matches!(a, Action::Suspend { .. })), "{a:?}");
    assert!(a.iter().any(|a| matches!(a, Action::Event { reason, .. } if reason == "Evicted")));
    // Terminating pods are not bound again; once they are gone, so is the group.
    for p in &pods {
        let a = h.send(Event::Pod(Change::Apply(PodView { deleting: true, ..p.clone() })));
        assert!(binds(&a).is_empty(), "{a:?}");
    }
    let mut a = Vec::new();
    for p in &pods {
        a = h.send(Event::Pod(Change::Delete(p.clone())));
    }
    assert_eq!(h.state("ring"), None);
    assert_eq!(deleted_groups(&a, "ring"), 1);
    // Created again by the user: a new group.
    let a = h.send(Event::Pod(Change::Apply(plain("ring", 0, 1, 2))));
    assert_eq!(h.state("ring"), Some(GroupState::Admitted), "{a:?}");
}

#[test]
fn a_restart_recovers_plain_groups_without_binding_or_admitting_twice() {
    let nodes = [node("n1", 8), node("n2", 8)];
    let mut h = Harness::new(&nodes, &[], &[]);
    let pods: Vec<PodView> = (0..3).map(|i| plain("ring", i, 3, 2)).collect();
    let mut all = Vec::new();
    for p in &pods {
        all.extend(h.send(Event::Pod(Change::Apply(p.clone()))));
    }
    // ring-0 and ring-1 bound (ring-0 already done), ring-2 ungated but not yet bound: the
    // controller stopped in between.
    let b = binds(&all);
    let by_pod = |name: &str| b.iter().find(|(p, _, _)| p == name).cloned().unwrap();
    let (_, n0, m0) = by_pod("ring-0");
    let (_, n1, m1) = by_pod("ring-1");
    let (_, n2, m2) = by_pod("ring-2");
    let listed = vec![
        PodView { phase: PodPhase::Succeeded, ready: false, ..bound_plain(&pods[0], &n0, m0, false) },
        bound_plain(&pods[1], &n1, m1, true),
        PodView { gated: false, ..pods[2].clone() },
    ];
    for p in &listed {
        h.send(Event::Pod(Change::Apply(p.clone())));
    }
    assert_eq!(h.state("ring"), Some(GroupState::Admitted));
    let (dir, now) = (std::mem::replace(&mut h.dir, TempDir::new("unused")), h.now);
    drop(h.brain);
    let mut h2 = Harness::start(dir, &nodes, &[], &listed, now + 5);
    let a = h2.brain.take_actions();
    assert_eq!(h2.state("ring"), Some(GroupState::Admitted), "not evicted for its finished member: {a:?}");
    // Its Group object is applied once more (level-triggered, as a Job's), the group not queued again.
    assert!(a.iter().filter(|a| matches!(a, Action::EnsureGroup { .. })).count() <= 1, "{a:?}");
    assert!(h2.brain.engine().unwrap().engine().group(&GroupKey::new(NS, "ring")).unwrap().requeues == 0);
    assert!(ungates(&a).is_empty(), "{a:?}");
    assert!(!a.iter().any(|a| matches!(a, Action::DeletePods { .. })), "{a:?}");
    assert_eq!(binds(&a), [("ring-2".to_string(), n2.clone(), m2)], "only the unbound pod, into its member");
    let a = h2.send(Event::Pod(Change::Apply(bound_plain(&pods[2], &n2, m2, true))));
    assert!(binds(&a).is_empty());
    assert_eq!(h2.state("ring"), Some(GroupState::Running));
    h2.brain.engine().unwrap().engine().check_invariants().unwrap();
    // All done while no controller ran: the next one finds the group finished.
    let done: Vec<PodView> = [(&pods[0], &n0, m0), (&pods[1], &n1, m1), (&pods[2], &n2, m2)]
        .into_iter()
        .map(|(p, n, m)| PodView { phase: PodPhase::Succeeded, ..bound_plain(p, n, m, false) })
        .collect();
    let (dir, now) = (std::mem::replace(&mut h2.dir, TempDir::new("unused")), h2.now);
    drop(h2.brain);
    let mut h3 = Harness::start(dir, &nodes, &[], &done, now + 5);
    let a = h3.brain.take_actions();
    assert_eq!(h3.state("ring"), Some(GroupState::Succeeded), "{a:?}");
    assert!(binds(&a).is_empty() && !a.iter().any(|a| matches!(a, Action::DeletePods { .. })), "{a:?}");
    // And with the pods gone as well, the group and its object are deleted.
    let (dir, now) = (std::mem::replace(&mut h3.dir, TempDir::new("unused")), h3.now);
    drop(h3.brain);
    let mut h4 = Harness::start(dir, &nodes, &[], &[], now + 5);
    let mut a = h4.brain.take_actions();
    a.extend(h4.cycle());
    assert_eq!(h4.state("ring"), None);
    assert_eq!(deleted_groups(&a, "ring"), 1, "{a:?}");
}

#[test]
fn a_restart_redoes_what_a_crash_lost_between_deciding_and_acting() {
    let nodes = [node("n1", 8)];
    let jobs = [job("a", 2, 2), job("b", 2, 2)];
    let mut h = Harness::new(&nodes, &jobs, &[]);
    let a = h.cycle();
    assert_eq!(unsuspends(&a, "a"), 1);
    assert_eq!(unsuspends(&a, "b"), 1);
    // The instance dies before its patches land: both Jobs are still suspended, no pods exist.
    // Meanwhile a user unsuspended nothing, but b's Job shows running (its patch did land).
    let (dir, now) = (std::mem::replace(&mut h.dir, TempDir::new("unused")), h.now);
    drop(h.brain);
    let mut seen = jobs.to_vec();
    seen[1].suspended = false;
    let mut h2 = Harness::start(dir, &nodes, &seen, &[], now + 5);
    let a = h2.brain.take_actions();
    assert_eq!(h2.state("a"), Some(GroupState::Admitted), "the admission is kept: {a:?}");
    assert_eq!(unsuspends(&a, "a"), 1, "a's lost unsuspend is sent again: {a:?}");
    assert_eq!(unsuspends(&a, "b"), 0, "b's landed; nothing to redo");
    for name in ["a", "b"] {
        assert!(
            a.iter().any(|x| matches!(x, Action::EnsureGroup { key, .. } if &*key.name == name)),
            "the Group object of {name} is written again: {a:?}"
        );
    }
    // The same stale view again does not repeat the patch in flight.
    let again = h2.send(job_event(Change::Apply(seen[0].clone())));
    assert_eq!(unsuspends(&again, "a"), 0, "{again:?}");
}

fn jobset_event(c: Change<WorkloadView>) -> Event {
    Event::Workload(&workload::jobset::KIND, c)
}

/// JobSet train: 2 workers Jobs x 2 pods and 1 driver pod, 1 cpu each.
fn jobset(suspended: bool) -> WorkloadView {
    let mut job = job("train", 5, 1);
    job.suspended = suspended;
    (job.kind, job.hold) = (&workload::jobset::KIND, &workload::jobset::KIND);
    let layout = |name: &str, children, pods| SetLayout { name: name.into(), children, pods };
    job.layout = vec![layout("workers", 2, 2), layout("driver", 1, 1)];
    let g = job.group.as_mut().unwrap();
    g.owner = Some(OwnerReference {
        api_version: "jobset.x-k8s.io/v1alpha2".into(),
        kind: "JobSet".into(),
        name: "train".into(),
        uid: Some("uid-train".into()),
    });
    job
}

/// A pod of JobSet train's child Job `<replicated>-<job_index>`.
fn jobset_pod(replicated: &str, job_index: u32, completion: u32) -> PodView {
    let name = format!("train-{replicated}-{job_index}-{completion}");
    PodView {
        uid: name.clone(),
        name,
        place: Some(Box::new(PodPlace {
            workload: "train".into(),
            set: replicated.into(),
            child: job_index,
            index: Some(completion),
        })),
        ..pod("train", completion, 1)
    }
}

fn jobset_suspends(actions: &[Action]) -> Vec<bool> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Suspend { key, kind, suspend } if &*key.name == "train" && kind.kind == "JobSet" => Some(*suspend),
            _ => None,
        })
        .collect()
}

#[test]
fn a_trainjobs_jobset_is_released_and_evicted_through_the_trainjob() {
    // The trainer would suspend its JobSet again at once: muster patches the TrainJob.
    let mut h = Harness::new(&[node("n1", 4), node("n2", 4)], &[], &[]);
    let held = WorkloadView { hold: &workload::trainjob::KIND, ..jobset(true) };
    let a = h.send(jobset_event(Change::Apply(held.clone())));
    assert_eq!(h.state("train"), Some(GroupState::Admitted));
    let patched: Vec<(&str, bool)> = a
        .iter()
        .filter_map(|a| match a {
            Action::Suspend { key, kind, suspend } if &*key.name == "train" => Some((kind.kind, *suspend)),
            _ => None,
        })
        .collect();
    assert_eq!(patched, [("TrainJob", false)], "{a:?}");
}

#[test]
fn a_jobset_is_one_group_and_its_pods_are_numbered_across_its_child_jobs() {
    let mut h = Harness::new(&[node("n1", 4), node("n2", 4)], &[], &[]);
    let a = h.send(jobset_event(Change::Apply(jobset(true))));
    let ensured = a.iter().find_map(|a| match a {
        Action::EnsureGroup { key, spec, job_uid } if &*key.name == "train" => Some((spec.clone(), job_uid.clone())),
        _ => None,
    });
    let (spec, uid) = ensured.expect("the Group object is created");
    assert_eq!((spec.members.min, spec.owner.unwrap().kind.as_str(), uid.as_str()), (5, "JobSet", "uid-train"));
    assert_eq!(h.state("train"), Some(GroupState::Admitted));
    assert_eq!(jobset_suspends(&a), [false], "the JobSet is resumed: {a:?}");
    assert_eq!(unsuspends(&a, "train"), 0, "never patched as a Job");
    // The JobSet controller resumes its child Jobs; their pods come in any order.
    let pods = [
        jobset_pod("driver", 0, 0),
        jobset_pod("workers", 1, 1),
        jobset_pod("workers", 0, 1),
        jobset_pod("workers", 1, 0),
        jobset_pod("workers", 0, 0),
    ];
    let mut all = Vec::new();
    for p in &pods {
        all.extend(h.send(Event::Pod(Change::Apply(p.clone()))));
    }
    let mut b: Vec<(String, u32)> = binds(&all).into_iter().map(|(pod, _, member)| (pod, member)).collect();
    b.sort();
    assert_eq!(
        b,
        [
            ("train-driver-0-0".to_string(), 4),
            ("train-workers-0-0".into(), 0),
            ("train-workers-0-1".into(), 1),
            ("train-workers-1-0".into(), 2),
            ("train-workers-1-1".into(), 3),
        ],
        "members by (replicated Job, Job index, completion index)"
    );
    // The JobSet completes: the group finishes.
    let mut done = jobset(false);
    done.finished = Some(true);
    let a = h.send(jobset_event(Change::Apply(done)));
    assert_eq!(h.state("train"), Some(GroupState::Succeeded));
    assert_eq!(last_phase(&a, "train"), Some(GroupState::Succeeded));
    // Deleted: the group goes, and with it the Group object.
    let a = h.send(jobset_event(Change::Delete(jobset(false))));
    assert!(a.iter().any(|a| matches!(a, Action::DeleteGroup { key } if &*key.name == "train")), "{a:?}");
    assert_eq!(h.state("train"), None);
}

#[test]
fn a_jobset_is_suspended_on_eviction_and_by_its_user_as_a_jobset() {
    let mut h = Harness::new(&[node("n1", 4), node("n2", 4)], &[], &[]);
    assert_eq!(jobset_suspends(&h.send(jobset_event(Change::Apply(jobset(true))))), [false]);
    let p = jobset_pod("workers", 0, 0);
    assert_eq!(binds(&h.send(Event::Pod(Change::Apply(p.clone())))).len(), 1);
    // A refused binding releases the whole group: the JobSet is suspended again (then queued
    // again at once, and resumed when placed anew).
    let a = h.send(Event::BindFailed { key: GroupKey::new(NS, "train"), pod: p.name.clone(), message: "no".into() });
    assert_eq!(jobset_suspends(&a).first(), Some(&true), "{a:?}");
    assert!(!a.iter().any(|a| matches!(a, Action::Suspend { kind, .. } if kind.kind != "JobSet")), "never as a Job");
    // The user suspends it (the webhook's stamp): its resources go at once.
    let mut asked = jobset(true);
    asked.suspend_requested = true;
    let a = h.send(jobset_event(Change::Apply(asked)));
    assert_eq!(h.state("train"), Some(GroupState::Suspended));
    assert!(
        a.iter().any(
            |a| matches!(a, Action::ClearRequests { key, kind } if &*key.name == "train" && kind.kind == "JobSet")
        ),
        "{a:?}"
    );
    // And asks to resume it: through the queue, then resumed by muster.
    let mut asked = jobset(true);
    asked.resume_requested = true;
    let a = h.send(jobset_event(Change::Apply(asked)));
    assert_eq!(h.state("train"), Some(GroupState::Admitted));
    assert_eq!(jobset_suspends(&a), [false], "{a:?}");
}

#[test]
fn a_restart_keeps_a_running_jobset_and_binds_nothing_twice() {
    let nodes = [node("n1", 4), node("n2", 4)];
    let mut h = Harness::new(&nodes, &[], &[]);
    h.send(jobset_event(Change::Apply(jobset(true))));
    let pods: Vec<PodView> =
        [("workers", 0, 0), ("workers", 0, 1), ("workers", 1, 0), ("workers", 1, 1), ("driver", 0, 0)]
            .into_iter()
            .map(|(r, j, c)| jobset_pod(r, j, c))
            .collect();
    let mut bound_pods = Vec::new();
    for p in &pods {
        let a = h.send(Event::Pod(Change::Apply(p.clone())));
        let (_, node, member) = binds(&a).pop().expect("bound");
        bound_pods.push(bound(p, &node, member, true));
    }
    for p in &bound_pods {
        h.send(Event::Pod(Change::Apply(p.clone())));
    }
    assert_eq!(h.state("train"), Some(GroupState::Running));
    // The instance dies; the next one lists the resumed JobSet and its bound pods.
    let (dir, now) = (std::mem::replace(&mut h.dir, TempDir::new("unused")), h.now);
    drop(h.brain);
    let mut h2 = Harness::start_with(dir, &nodes, &[], &[jobset(false)], &bound_pods, now + 5);
    let a = h2.brain.take_actions();
    assert_eq!(h2.state("train"), Some(GroupState::Running), "{a:?}");
    assert!(binds(&a).is_empty() && jobset_suspends(&a).is_empty(), "nothing redone: {a:?}");
    assert!(binds(&h2.cycle()).is_empty());
}

#[test]
fn a_running_jobs_resize_grows_its_group_and_shrinks_it_once_the_pods_are_gone() {
    // An elastic Indexed Job (parallelism = completions) of 4 x 1 cpu on one 8-cpu node.
    let mut h = Harness::new(&[node("n1", 8)], &[job("w", 4, 1)], &[]);
    h.cycle();
    let running = |n: i64| WorkloadView { suspended: false, ..job("w", n, 1) };
    let mut pods: Vec<PodView> = Vec::new();
    let bind = |h: &mut Harness, pods: &mut Vec<PodView>, range: std::ops::Range<u32>| {
        let mut a = Vec::new();
        for i in range.clone() {
            a.extend(h.send(Event::Pod(Change::Apply(pod("w", i, 1)))));
        }
        for (name, node, member) in binds(&a) {
            let i: u32 = name.trim_start_matches("w-").parse().unwrap();
            assert_eq!(member, i, "completion index i fills member i");
            let p = bound(&pod("w", i, 1), &node, member, true);
            h.send(Event::Pod(Change::Apply(p.clone())));
            pods.push(p);
        }
        assert_eq!(pods.len(), range.end as usize, "every pod bound: {a:?}");
    };
    bind(&mut h, &mut pods, 0..4);
    assert_eq!(h.state("w"), Some(GroupState::Running));
    let group = |h: &Harness| h.brain.engine().unwrap().engine().group(&GroupKey::new(NS, "w")).unwrap().clone();
    // Grown to 6 while it runs: the group grows where there is room, and the new pods are bound.
    let a = [h.send(job_event(Change::Apply(running(6)))), h.cycle()].concat();
    assert!(a.iter().all(|a| !matches!(a, Action::Suspend { .. })), "nothing is suspended: {a:?}");
    assert_eq!(group(&h).member_count(), 6);
    bind(&mut h, &mut pods, 4..6);
    // Shrunk to 3: the Job controller deletes pods 3..6. Their members stay while the pods are
    // being deleted (they still run), and go once the pods are gone; the group keeps running.
    h.send(job_event(Change::Apply(running(3))));
    for p in &pods[3..] {
        h.send(Event::Pod(Change::Apply(PodView { deleting: true, ..p.clone() })));
    }
    assert_eq!(group(&h).member_count(), 6, "no room is freed while a pod may run in it");
    for p in &pods[3..] {
        h.send(Event::Pod(Change::Delete(p.clone())));
    }
    let g = group(&h);
    assert_eq!((g.state, g.member_count()), (GroupState::Running, 3));
    assert_eq!((g.spec.request.min_members, g.spec.request.max_members), (3, 3));
    let members: Vec<u32> = g.allocation.unwrap().members.iter().map(|m| m.index).collect();
    assert_eq!(members, [0, 1, 2], "the members of the pods that stay");
    assert_eq!(h.brain.engine().unwrap().engine().group(&GroupKey::new(NS, "w")).unwrap().evictions, 0);
}

#[test]
fn a_waiting_jobs_resize_reshapes_its_group() {
    // 4 members of 2 cpu never fit one 4-cpu node; resized to 2 while it waits, the group (and
    // its Group object) follow and it is admitted with 2 members, keeping its place.
    let mut h = Harness::new(&[node("n1", 4)], &[job("big", 4, 2)], &[]);
    h.cycle();
    assert_eq!(h.state("big"), Some(GroupState::Queued));
    let seq = h.brain.engine().unwrap().engine().group(&GroupKey::new(NS, "big")).unwrap().seq;
    let a = h.send(job_event(Change::Apply(job("big", 2, 2))));
    let objects: Vec<_> = a
        .iter()
        .filter_map(|a| match a {
            Action::EnsureGroup { key, spec, .. } if &*key.name == "big" => Some(spec.members.min),
            _ => None,
        })
        .collect();
    assert_eq!(objects, [2], "the Group object follows: {a:?}");
    assert_eq!(unsuspends(&[a, h.cycle()].concat(), "big"), 1);
    let g = h.brain.engine().unwrap().engine().group(&GroupKey::new(NS, "big")).unwrap().clone();
    assert_eq!((g.state, g.spec.request.min_members, g.seq), (GroupState::Admitted, 2, seq));
    // Placed, a larger size is a max it grows toward when there is room (here none): it keeps
    // the 2 members it holds.
    h.send(job_event(Change::Apply(job("big", 3, 2))));
    let g = h.brain.engine().unwrap().engine().group(&GroupKey::new(NS, "big")).unwrap().clone();
    assert_eq!((g.spec.request.min_members, g.spec.request.max_members), (2, 3));
    assert_eq!(allocation(&h, "big").len(), 2);
}

#[test]
fn a_shrinkable_job_gives_back_pods_and_the_next_job_binds_only_once_they_are_gone() {
    // el: 2..8 x 1 cpu, 100 s with all 8, shrinkable, fills both 4-cpu nodes; big: 1 x 4 cpu.
    let mut el = job("el", 8, 1);
    if let Ok(g) = el.group.as_mut() {
        g.members = Members { min: 2, max: Some(8) };
        g.shrinkable = true;
        g.duration_seconds = Some(100);
    }
    let mut h = Harness::new(&[node("n1", 4), node("n2", 4)], &[el], &[]);
    h.cycle();
    let mut a = Vec::new();
    for i in 0..8 {
        a.extend(h.send(Event::Pod(Change::Apply(pod("el", i, 1)))));
    }
    let pods: Vec<PodView> = binds(&a)
        .into_iter()
        .map(|(name, node, member)| {
            let i: u32 = name.trim_start_matches("el-").parse().unwrap();
            bound(&pod("el", i, 1), &node, member, true)
        })
        .collect();
    assert_eq!(pods.len(), 8);
    for p in &pods {
        h.send(Event::Pod(Change::Apply(p.clone())));
    }
    assert_eq!(h.state("el"), Some(GroupState::Running));
    let mut big = job("big", 1, 4);
    big.created = h.now;
    if let Ok(g) = big.group.as_mut() {
        g.duration_seconds = Some(20);
    }
    let a = h.send(job_event(Change::Apply(big)));
    assert!(!a.iter().any(|a| matches!(a, Action::DeletePods { .. })), "not before big is owed a reservation");
    // The default queue is selective: big is owed a reservation once its slowdown reaches 3 (20 s
    // of waiting past its 20 s run). Then el is asked: the 4 pods of one node are deleted.
    h.now += 40;
    let a = h.cycle();
    let deleted: Vec<String> = a
        .iter()
        .filter_map(|a| match a {
            Action::DeletePods { key, pods, .. } if &*key.name == "el" => Some(pods.iter().map(|(n, _)| n.clone())),
            _ => None,
        })
        .flatten()
        .collect();
    assert_eq!(deleted.len(), 4, "{a:?}");
    let going: Vec<&PodView> = pods.iter().filter(|p| deleted.contains(&p.name)).collect();
    let node = going[0].node.clone().unwrap();
    assert!(going.iter().all(|p| p.node.as_deref() == Some(node.as_str())), "one node's pods");
    assert_eq!(h.state("big"), Some(GroupState::Reserved));
    for p in &going {
        h.send(Event::Pod(Change::Apply(PodView { deleting: true, ..(*p).clone() })));
    }
    assert_eq!(h.state("big"), Some(GroupState::Reserved), "no room is freed while a pod may run in it");
    // The Job controller makes a replacement while the others go: it takes no leaving member.
    let replacement = PodView { uid: "el-new".into(), ..pod("el", going[0].place.as_ref().unwrap().index.unwrap(), 1) };
    assert!(binds(&h.send(Event::Pod(Change::Apply(replacement.clone())))).is_empty());
    let mut a = Vec::new();
    for p in &going {
        a.extend(h.send(Event::Pod(Change::Delete((*p).clone()))));
    }
    a.extend(h.cycle());
    assert_eq!(h.state("big"), Some(GroupState::Admitted), "{a:?}");
    // Its pod (made ahead, first in line) is bound where el's pods were.
    let b = binds(&h.send(Event::Pod(Change::Apply(pod("big", 0, 4)))));
    assert_eq!(b, [("big-0".to_string(), node.clone(), 0)]);
    let g = h.brain.engine().unwrap().engine().group(&GroupKey::new(NS, "el")).unwrap().clone();
    assert_eq!((g.state, g.member_count(), g.evictions), (GroupState::Running, 4, 0));
    assert!(binds(&h.send(Event::Pod(Change::Apply(replacement)))).is_empty(), "el's members are all taken");
}

#[test]
fn a_preemptor_is_bound_only_once_its_victims_pods_are_gone_from_the_node() {
    // One 4-cpu node. `low` runs on it; `high`, of a higher class, preempts it: the engine frees
    // the node at once, but low's pod stops only later, and until it is gone the node is full.
    let mut h = preempting(&[node("n1", 4)], 1);
    let b = binds(&h.send(Event::Pod(Change::Apply(pod("low", 0, 4)))));
    assert_eq!(b, [("low-0".to_string(), "n1".to_string(), 0)]);
    let low_pod = bound(&pod("low", 0, 4), "n1", 0, true);
    h.send(Event::Pod(Change::Apply(low_pod.clone())));
    assert_eq!(h.state("low"), Some(GroupState::Running));
    submit_high(&mut h, 1);
    assert_eq!(h.state("low"), Some(GroupState::Queued));
    // high's pod comes while low's still runs, then while it is being deleted: not bound.
    assert!(binds(&h.send(Event::Pod(Change::Apply(pod("high", 0, 4))))).is_empty(), "n1 is still full");
    let stopping = PodView { deleting: true, ..low_pod.clone() };
    assert!(
        binds(&h.send(Event::Pod(Change::Apply(stopping.clone())))).is_empty(),
        "a pod being deleted holds its room"
    );
    // Gone: high's pod is bound where the engine placed it.
    let b = binds(&h.send(Event::Pod(Change::Delete(stopping))));
    assert_eq!(b, [("high-0".to_string(), "n1".to_string(), 0)]);
}

#[test]
fn a_starting_gang_is_bound_whole_once_every_victim_has_left_its_nodes() {
    // Two 4-cpu nodes, each with one pod of `low`; `high` (2 pods of 4 cpu, a higher class)
    // preempts it. low's pod on n2 goes at once, the one on n1 stays a while being deleted: none
    // of high's pods is bound until both nodes have room, so no part of the gang runs alone.
    let mut h = preempting(&[node("n1", 4), node("n2", 4)], 2);
    let mut low = Vec::new();
    for i in 0..2 {
        for (p, n, m) in binds(&h.send(Event::Pod(Change::Apply(pod("low", i, 4))))) {
            let i: u32 = p.rsplit('-').next().unwrap().parse().unwrap();
            low.push(bound(&pod("low", i, 4), &n, m, true));
        }
    }
    assert_eq!(low.len(), 2);
    for p in &low {
        h.send(Event::Pod(Change::Apply(p.clone())));
    }
    assert_eq!(h.state("low"), Some(GroupState::Running));
    submit_high(&mut h, 2);
    let (on_n1, on_n2): (Vec<&PodView>, Vec<&PodView>) = low.iter().partition(|p| p.node.as_deref() == Some("n1"));
    let stopping = PodView { deleting: true, ..on_n1[0].clone() };
    h.send(Event::Pod(Change::Apply(stopping.clone())));
    h.send(Event::Pod(Change::Delete(on_n2[0].clone())));
    // Both of high's pods come: n2 has room, n1 not yet. Neither is bound.
    let mut a = h.send(Event::Pod(Change::Apply(pod("high", 0, 4))));
    a.extend(h.send(Event::Pod(Change::Apply(pod("high", 1, 4)))));
    a.extend(h.cycle());
    assert!(binds(&a).is_empty(), "part of the gang bound while a victim still stops: {a:?}");
    // The last victim is gone: both are bound, one per node.
    let mut b = binds(&h.send(Event::Pod(Change::Delete(stopping))));
    b.sort();
    let nodes: Vec<&str> = b.iter().map(|(_, n, _)| n.as_str()).collect();
    assert_eq!(b.len(), 2, "{b:?}");
    assert!(nodes.contains(&"n1") && nodes.contains(&"n2"), "{b:?}");
}

/// A harness on `nodes` whose one queue preempts lower priority classes, with Job `low` (`pods`
/// pods of 4 cpu) queued.
fn preempting(nodes: &[NodeView], pods: i64) -> Harness {
    let mut cfg = EngineConfig::single_queue("default");
    cfg.priority_classes.insert("high".into(), 100);
    cfg.queues[0].preemption.within_queue = muster_queue::config::WithinQueue::LowerPriority;
    let mut h = Harness::configured(
        TempDir::new("muster-brain"),
        brain_config(cfg),
        nodes,
        &[job("low", pods, 4)],
        &[],
        &[],
        1000,
    );
    h.cycle();
    h
}

/// Job `high` of `pods` pods of 4 cpu, of the higher class, submitted now: admitted by
/// preempting `low`.
fn submit_high(h: &mut Harness, pods: i64) {
    let mut high = job("high", pods, 4);
    high.created = h.now;
    if let Ok(g) = high.group.as_mut() {
        g.priority_class_name = Some("high".into());
    }
    h.send(job_event(Change::Apply(high)));
    let a = h.cycle();
    assert_eq!(h.state("high"), Some(GroupState::Admitted), "{a:?}");
}
