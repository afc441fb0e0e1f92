//! Never over-commit, never bypass: the controller's decision core against what a hostile tenant
//! (or just another scheduler) does. The same cases run on a real control plane in
//! crates/muster-harness/tests/tenant.rs (e2e `muster-tenant`); here the property test tries
//! many interleavings.

mod common;

use std::collections::BTreeMap;

use common::*;
use muster_controller::brain::Subject;
use muster_controller::convert::{GroupObjectView, PodGroupApi, status_fingerprint};
use proptest::prelude::*;

/// A pod no muster group owns, bound to `node` by someone else (the default scheduler, or a
/// user's preset nodeName).
fn foreign(name: &str, node: &str, cpu: u64) -> PodView {
    PodView {
        uid: format!("foreign-{name}"),
        namespace: "elsewhere".into(),
        name: name.into(),
        node: Some(node.into()),
        ours: false,
        phase: PodPhase::Running,
        requests: vec![("cpu".into(), cpu * 1000)],
        ..PodView::default()
    }
}

fn admitted(h: &Harness, name: &str) -> bool {
    h.state(name).is_some_and(GroupState::holds_allocation)
}

/// The replay of the first defect: a pod outside muster lands on a node muster holds whole; the
/// holder goes in the same batch as a waiting group is scheduled. The foreign pod was refused for
/// lack of room, retried before the release, and the release handed its room to the waiting group.
#[test]
fn a_foreign_pod_on_a_held_node_keeps_its_room_when_the_hold_ends() {
    let mut h = Harness::new(&[node("n1", 8)], &[job("holder", 4, 2)], &[]);
    h.brain.take_actions();
    h.cycle();
    assert!(admitted(&h, "holder"), "4 x 2 cpu hold all of n1");
    let intruder = foreign("intruder", "n1", 7);
    h.send(Event::Pod(Change::Apply(intruder.clone())));
    h.send(job_event(Change::Apply(job("honest", 4, 1))));
    assert!(!admitted(&h, "honest"));
    // The tenant deletes the holder; the same batch schedules.
    let a = h.send(job_event(Change::Delete(job("holder", 4, 2))));
    assert!(!admitted(&h, "honest"), "7 foreign + 4 cpu on an 8-cpu node: {a:?}");
    h.cycle();
    assert!(!admitted(&h, "honest"));
    let a = h.send(Event::Pod(Change::Delete(intruder)));
    assert!(admitted(&h, "honest"), "the room is free once the foreign pod goes: {a:?}");
}

#[test]
fn a_plain_group_waits_for_its_pods_and_refuses_pods_that_differ_from_its_first() {
    let mut h = Harness::new(&[node("n1", 8), node("n2", 8)], &[], &[]);
    // Pod 0 asks 10m cpu, pods 1-3 ask 7 cpu: sized from pod 0, four would fit on one node.
    let mut pods: Vec<PodView> = (0..4).map(|i| plain("g", i, 4, 7)).collect();
    pods[0].requests = vec![("cpu".into(), 10)];
    let mut a = Vec::new();
    for p in &pods {
        a.extend(h.send(Event::Pod(Change::Apply(p.clone()))));
    }
    assert_eq!(h.state("g"), None, "never queued: {a:?}");
    assert!(binds(&a).is_empty());
    let refusal = a.iter().find_map(|a| match a {
        Action::Event { reason, message, .. } if reason == "InvalidGroup" => Some(message.clone()),
        _ => None,
    });
    let refusal = refusal.unwrap_or_else(|| panic!("an InvalidGroup event: {a:?}"));
    assert!(
        refusal.contains("spec.containers[*].resources") && refusal.contains("cpu 7") && refusal.contains("cpu 10m"),
        "names the field and both values: {refusal}"
    );
    // A group whose pods agree, with 5 of 50 created, holds nothing: an honest Job gets the room.
    let few: Vec<PodView> = (0..5).map(|i| plain("big", i, 50, 1)).collect();
    for p in &few {
        h.send(Event::Pod(Change::Apply(p.clone())));
    }
    h.send(job_event(Change::Apply(job("honest", 2, 8))));
    h.cycle();
    assert_eq!(h.state("big"), None, "5 of 50 pods: not queued, nothing held");
    let mut gone = Vec::new();
    for p in &few {
        gone.extend(h.send(Event::Pod(Change::Delete(p.clone()))));
    }
    assert!(gone.iter().any(|a| matches!(a, Action::DeleteGroup { key } if &*key.name == "big")), "{gone:?}");
    assert!(admitted(&h, "honest"), "both whole nodes are free for the honest Job");
    // Elastic (group-min 1): queued with its one pod, but for one member, not fifty.
    let lone = PodView { members: Some(Box::new(Ok(Members { min: 1, max: Some(50) }))), ..plain("lone", 0, 50, 1) };
    h.send(Event::Pod(Change::Apply(lone)));
    h.send(job_event(Change::Delete(job("honest", 2, 8))));
    h.cycle();
    assert!(admitted(&h, "lone"));
    assert_eq!(allocation(&h, "lone").len(), 1, "as many members as pods");
}

#[test]
fn a_pod_larger_than_its_groups_members_is_never_bound() {
    let mut h = Harness::new(&[node("n1", 8)], &[job("train", 2, 2)], &[]);
    h.brain.take_actions();
    h.cycle();
    assert!(admitted(&h, "train"));
    // Its pods say 7 cpu where the members were placed for 2 (a Group forged or out of date).
    let mut a = Vec::new();
    for i in 0..2 {
        a.extend(h.send(Event::Pod(Change::Apply(pod("train", i, 7)))));
    }
    assert!(binds(&a).is_empty(), "{a:?}");
    let told = told(&a, "PodTooLarge");
    assert_eq!(told.len(), 2, "each pod told once: {a:?}");
    assert!(told[0].contains("cpu 7 where a member has cpu 2"), "{}", told[0]);
    let again = h.send(Event::Pod(Change::Apply(pod("train", 0, 7))));
    assert!(!again.iter().any(|a| matches!(a, Action::Event { reason, .. } if reason == "PodTooLarge")));
}

#[test]
fn a_pod_whose_requests_cannot_be_counted_is_never_bound() {
    let mut h = Harness::new(&[node("n1", 8)], &[job("train", 2, 2)], &[]);
    h.brain.take_actions();
    h.cycle();
    assert!(admitted(&h, "train"));
    // Its pods ask an amount muster cannot count: as nothing it would over-commit the node.
    let mut a = Vec::new();
    for i in 0..2 {
        let mut p = pod("train", i, 2);
        p.requests.clear();
        p.uncountable = Some(Box::new("spec.containers[0].resources.requests[memory]: too large".into()));
        a.extend(h.send(Event::Pod(Change::Apply(p))));
    }
    assert!(binds(&a).is_empty(), "{a:?}");
    let told = told(&a, "UncountableRequests");
    assert_eq!(told.len(), 2, "each pod told once: {a:?}");
    assert!(told[0].contains("requests[memory]: too large"), "{}", told[0]);
}

#[test]
fn a_pod_for_muster_without_a_group_is_told_what_it_lacks_once() {
    let mut h = Harness::new(&[node("n1", 8)], &[], &[]);
    let stray =
        PodView { uid: "stray".into(), namespace: NS.into(), name: "stray".into(), ours: true, ..PodView::default() };
    let a = h.send(Event::Pod(Change::Apply(stray.clone())));
    let told = a.iter().find_map(|a| match a {
        Action::Event { reason, message, subject, .. } if reason == "MissingGroup" => Some((message, subject)),
        _ => None,
    });
    let (message, subject) = told.unwrap_or_else(|| panic!("a MissingGroup event: {a:?}"));
    assert!(message.contains("muster.dev/queue") && message.contains("muster.dev/group"), "{message}");
    assert_eq!(*subject, Subject::Pod { uid: "stray".into() });
    let a = h.send(Event::Pod(Change::Apply(stray)));
    assert!(!a.iter().any(|a| matches!(a, Action::Event { .. })), "once: {a:?}");
}

#[test]
fn a_pod_of_a_job_without_the_queue_label_is_told_what_its_job_lacks() {
    // The Job watch only lists queued Jobs: a pod of another Job naming muster's scheduler.
    let mut h = Harness::new(&[node("n1", 8)], &[job("queued", 1, 1)], &[]);
    h.brain.take_actions();
    let a = h.send(Event::Pod(Change::Apply(pod("unqueued", 0, 1))));
    let told = a.iter().find_map(|a| match a {
        Action::Event { reason, message, .. } if reason == "MissingGroup" => Some(message.clone()),
        _ => None,
    });
    let told = told.unwrap_or_else(|| panic!("a MissingGroup event: {a:?}"));
    assert!(told.contains("Job unqueued has no muster.dev/queue label"), "{told}");
    // The queued Job's own pod is not told anything.
    h.cycle();
    let a = h.send(Event::Pod(Change::Apply(pod("queued", 0, 1))));
    assert!(!a.iter().any(|a| matches!(a, Action::Event { reason, .. } if reason == "MissingGroup")), "{a:?}");
}

fn group_object(name: &str, status: u64, foreign_status: bool) -> GroupObjectView {
    GroupObjectView { key: GroupKey::new(NS, name), status, foreign_status }
}

fn restores(actions: &[Action]) -> Vec<GroupState> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::RestoreStatus { status, .. } => status.phase,
            _ => None,
        })
        .collect()
}

#[test]
fn a_group_status_written_by_someone_else_is_restored_and_a_deleted_group_recreated() {
    let mut h = Harness::new(&[node("n1", 8)], &[job("train", 2, 2)], &[]);
    h.brain.take_actions();
    let a = h.cycle();
    let ours = a
        .iter()
        .rev()
        .find_map(|a| match a {
            Action::Status { key, status } if &*key.name == "train" => Some((**status).clone()),
            _ => None,
        })
        .expect("muster wrote a status");
    let mine = status_fingerprint(&ours);
    // muster's own older write coming back late is no forgery.
    h.send(Event::GroupObject(Change::Apply(group_object("train", mine ^ 1, false))));
    h.now += 10;
    assert!(restores(&h.cycle()).is_empty());
    // Another writer's status is restored, but only once it has stood for a while.
    h.send(Event::GroupObject(Change::Apply(group_object("train", mine ^ 1, true))));
    assert!(restores(&h.cycle()).is_empty(), "not at once");
    h.now += 2;
    assert_eq!(restores(&h.cycle()), [GroupState::Admitted]);
    h.send(Event::GroupObject(Change::Apply(group_object("train", mine, true))));
    h.now += 10;
    assert!(restores(&h.cycle()).is_empty(), "restored: nothing more to do");
    // Deleted while its Job lives: created again, with muster's status.
    h.send(Event::GroupObject(Change::Delete(group_object("train", mine, true))));
    h.now += 3;
    let a = h.cycle();
    assert!(a.iter().any(|a| matches!(a, Action::EnsureGroup { key, .. } if &*key.name == "train")), "{a:?}");
    assert_eq!(last_phase(&a, "train"), Some(GroupState::Admitted));
    assert!(admitted(&h, "train"), "the engine kept the group all along");
    // Deleted with its Job: gone for good.
    h.send(job_event(Change::Apply(WorkloadView { deleting: true, ..job("train", 2, 2) })));
    h.send(Event::GroupObject(Change::Apply(group_object("train", mine, false))));
    h.send(Event::GroupObject(Change::Delete(group_object("train", mine, false))));
    h.now += 3;
    let a = h.cycle();
    assert!(!a.iter().any(|a| matches!(a, Action::EnsureGroup { .. })), "{a:?}");
}

// ----- the property: whatever the interleaving, no node gets more than it has -----

const NODES: [&str; 2] = ["n1", "n2"];
const NODE_CPU: u64 = 8;

#[derive(Debug, Clone)]
enum Step {
    /// A tenant submits Job `k` of `members` pods of `cpu` each.
    Submit { k: u8, members: u8, cpu: u8 },
    /// Another scheduler's pod appears bound to a node.
    Foreign { id: u8, node: u8, cpu: u8 },
    /// That pod goes (deleted, or finished).
    ForeignGone { id: u8, finished: bool },
    /// A Job goes: deleted (pods and Job in either order), or finished.
    JobGone { k: u8, deleted: bool, pods_first: bool },
    /// Time passes: a cycle.
    Cycle,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0..6u8, 1..5u8, 1..5u8).prop_map(|(k, members, cpu)| Step::Submit { k, members, cpu }),
        (0..4u8, 0..2u8, 1..9u8).prop_map(|(id, node, cpu)| Step::Foreign { id, node, cpu }),
        (0..4u8, any::<bool>()).prop_map(|(id, finished)| Step::ForeignGone { id, finished }),
        (0..6u8, any::<bool>(), any::<bool>()).prop_map(|(k, deleted, pods_first)| Step::JobGone {
            k,
            deleted,
            pods_first
        }),
        Just(Step::Cycle),
    ]
}

/// The cluster as the apiserver keeps it: what the brain's actions did to it.
#[derive(Default)]
struct Cluster {
    pods: BTreeMap<String, PodView>,
    jobs: BTreeMap<String, WorkloadView>,
}

impl Cluster {
    fn bound_cpu(&self, node: &str) -> u64 {
        let on_node = self.pods.values().filter(|p| p.node.as_deref() == Some(node) && !p.phase.is_terminal());
        on_node.flat_map(|p| p.requests.iter()).filter(|(r, _)| r == "cpu").map(|(_, a)| a).sum()
    }

    /// Carries out the brain's actions as the apiserver and the Job controller would, checking
    /// each binding against what the node already runs.
    fn apply(&mut self, h: &mut Harness, actions: Vec<Action>) -> Result<(), TestCaseError> {
        let mut events = Vec::new();
        for a in actions {
            match a {
                Action::Bind { uid, node, member, .. } => {
                    let Some(p) = self.pods.get(&uid).cloned() else { continue };
                    let cpu: u64 = p.requests.iter().map(|(_, a)| a).sum();
                    let used = self.bound_cpu(&node);
                    prop_assert!(
                        used + cpu <= NODE_CPU * 1000,
                        "over-commit: {} ({cpu}m) bound to {node}, which already runs {used}m",
                        p.name
                    );
                    let b = bound(&p, &node, member, true);
                    self.pods.insert(uid, b.clone());
                    events.push(Event::Pod(Change::Apply(b)));
                }
                Action::Suspend { key, suspend: false, .. } => {
                    let Some(j) = self.jobs.get_mut(&*key.name) else { continue };
                    j.suspended = false;
                    events.push(job_event(Change::Apply(j.clone())));
                    // The Job controller creates its pods.
                    let spec = j.group.as_ref().expect("valid");
                    let cpu = match &spec.resources["cpu"] {
                        Quantity::Int(c) => *c as u64,
                        other => panic!("{other:?}"),
                    };
                    for i in 0..spec.members.min as u32 {
                        let p = pod(&key.name, i, cpu);
                        if !self.pods.contains_key(&p.uid) {
                            self.pods.insert(p.uid.clone(), p.clone());
                            events.push(Event::Pod(Change::Apply(p)));
                        }
                    }
                }
                _ => {}
            }
        }
        for e in events {
            let more = h.send(e);
            self.apply(h, more)?;
        }
        Ok(())
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn no_interleaving_of_foreign_pods_releases_and_waiting_groups_over_commits(
        steps in prop::collection::vec(step(), 1..40)
    ) {
        let nodes: Vec<NodeView> = NODES.iter().map(|n| node(n, NODE_CPU)).collect();
        let mut h = Harness::new(&nodes, &[], &[]);
        let mut c = Cluster::default();
        let first = h.brain.take_actions();
        c.apply(&mut h, first)?;
        for s in steps {
            let actions = match s {
                Step::Submit { k, members, cpu } => {
                    let name = format!("job{k}");
                    if c.jobs.contains_key(&name) {
                        continue;
                    }
                    let j = job(&name, i64::from(members), i64::from(cpu));
                    c.jobs.insert(name, j.clone());
                    h.send(job_event(Change::Apply(j)))
                }
                Step::Foreign { id, node, cpu } => {
                    let p = foreign(&format!("f{id}"), NODES[usize::from(node)], u64::from(cpu));
                    if c.pods.contains_key(&p.uid) {
                        continue;
                    }
                    c.pods.insert(p.uid.clone(), p.clone());
                    h.send(Event::Pod(Change::Apply(p)))
                }
                Step::ForeignGone { id, finished } => {
                    let Some(p) = c.pods.remove(&format!("foreign-f{id}")) else { continue };
                    if finished {
                        let done = PodView { phase: PodPhase::Succeeded, ..p };
                        c.pods.insert(done.uid.clone(), done.clone());
                        h.send(Event::Pod(Change::Apply(done)))
                    } else {
                        h.send(Event::Pod(Change::Delete(p)))
                    }
                }
                Step::JobGone { k, deleted, pods_first } => {
                    let name = format!("job{k}");
                    let Some(j) = c.jobs.get(&name).cloned() else { continue };
                    let pods: Vec<PodView> =
                        c.pods.values().filter(|p| p.workload() == Some(name.as_str())).cloned().collect();
                    let mut events = Vec::new();
                    let job_event = if deleted {
                        c.jobs.remove(&name);
                        job_event(Change::Delete(j))
                    } else {
                        let done = WorkloadView { finished: Some(true), ..j };
                        c.jobs.insert(name.clone(), done.clone());
                        job_event(Change::Apply(done))
                    };
                    for p in pods {
                        if deleted {
                            c.pods.remove(&p.uid);
                            events.push(Event::Pod(Change::Delete(p)));
                        } else {
                            let done = PodView { phase: PodPhase::Succeeded, ..p };
                            c.pods.insert(done.uid.clone(), done.clone());
                            events.push(Event::Pod(Change::Apply(done)));
                        }
                    }
                    if pods_first { events.push(job_event) } else { events.insert(0, job_event) }
                    // One batch: the engine sees them together, as after a busy moment.
                    for e in events {
                        h.brain.handle(e, h.now);
                    }
                    h.cycle()
                }
                Step::Cycle => h.cycle(),
            };
            c.apply(&mut h, actions)?;
            h.brain.engine().unwrap().engine().check_invariants().map_err(TestCaseError::fail)?;
        }
    }
}

#[test]
fn an_elastic_plain_group_takes_the_pods_created_after_it_was_queued() {
    // group-min 1, group-size 3: queued with its one pod, it grows as its other pods come.
    let mut h = Harness::new(&[node("n1", 8)], &[], &[]);
    let p = |i| PodView { members: Some(Box::new(Ok(Members { min: 1, max: Some(3) }))), ..plain("el", i, 3, 1) };
    let a = [h.send(Event::Pod(Change::Apply(p(0)))), h.cycle()].concat();
    assert_eq!(binds(&a).len(), 1, "{a:?}");
    h.send(Event::Pod(Change::Apply(bound_plain(&p(0), "n1", 0, true))));
    h.cycle();
    let mut a = h.send(Event::Pod(Change::Apply(p(1))));
    a.extend(h.send(Event::Pod(Change::Apply(p(2)))));
    a.extend(h.cycle());
    a.extend(h.cycle());
    let mut bound: Vec<String> = binds(&a).into_iter().map(|(pod, _, _)| pod).collect();
    bound.sort();
    assert_eq!(bound, ["el-1", "el-2"], "{a:?}");
    assert_eq!(allocation(&h, "el").len(), 3);
    // A fourth pod is beyond its size: it waits, gated.
    let a = [h.send(Event::Pod(Change::Apply(p(3)))), h.cycle()].concat();
    assert!(binds(&a).is_empty(), "{a:?}");
    assert_eq!(allocation(&h, "el").len(), 3);
}

#[test]
fn pods_beyond_a_pod_groups_gang_join_once_it_is_placed() {
    for api in [PodGroupApi::Kubernetes, PodGroupApi::SchedulerPlugins] {
        pods_beyond_the_gang_join(api);
    }
}

fn pods_beyond_the_gang_join(api: PodGroupApi) {
    // PodGroup ring, minCount or minMember 2 (the webhook's group-size), and four pods naming it;
    // room for 3.
    let mut h = Harness::new(&[node("n1", 3)], &[], &[]);
    let p = |i| PodView { pod_group: Some(api), ..plain("ring", i, 2, 1) };
    let mut a = Vec::new();
    for i in 0..4 {
        a.extend(h.send(Event::Pod(Change::Apply(p(i)))));
    }
    a.extend(h.cycle());
    let gang = binds(&a);
    assert_eq!(gang.len(), 2, "the gang of minCount pods at once: {a:?}");
    let mut a = Vec::new();
    for (pod, node, member) in &gang {
        let i: u32 = pod.rsplit('-').next().unwrap().parse().unwrap();
        a.extend(h.send(Event::Pod(Change::Apply(bound_plain(&p(i), node, *member, true)))));
    }
    a.extend(h.cycle());
    assert_eq!(binds(&a).len(), 1, "one more where the node has room: {a:?}");
    assert_eq!(allocation(&h, "ring").len(), 3);
    let g = h.brain.engine().unwrap().engine().group(&muster_queue::GroupKey::new(NS, "ring")).unwrap();
    assert_eq!((g.spec.request.min_members, g.spec.request.max_members), (2, 4), "the fourth waits for room");
    // A pod of the gang ends: the fourth takes its member.
    let (pod, node, member) = gang[0].clone();
    let mut done = bound_plain(&p(pod.rsplit('-').next().unwrap().parse().unwrap()), &node, member, false);
    done.phase = PodPhase::Succeeded;
    let a = [h.send(Event::Pod(Change::Apply(done))), h.cycle()].concat();
    assert_eq!(binds(&a), [("ring-3".to_string(), node, member)], "{a:?}");
}
