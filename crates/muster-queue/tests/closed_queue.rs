//! A closed queue: what a queue whose definition was removed while groups still name it becomes.
//! Its placed groups run on, its waiting ones wait (saying why), and nothing new enters it.

mod common;

use common::*;
use muster_queue::{Engine, EngineConfig, EngineError, GroupState, QueueConfig};

#[test]
fn a_closed_queue_admits_nothing_and_its_placed_groups_run_on() {
    let mut c = EngineConfig::single_queue("a");
    c.queues.push(QueueConfig::new("b"));
    let mut e = engine(graph(3, 4), c.clone());
    e.submit(spec("runs", "b", 2, 4, Some(100), 0), 0).unwrap();
    let ts = e.schedule(0);
    ready_all(&mut e, &ts, 0);
    e.submit(elastic("grows", "b", 1, 2, 4, None, 0), 0).unwrap();
    e.submit(spec("waits", "b", 1, 4, Some(100), 0), 0).unwrap();
    let ts = e.schedule(0);
    ready_all(&mut e, &ts, 0);
    assert_eq!((state(&e, "runs"), state(&e, "waits")), (GroupState::Running, GroupState::Queued));
    assert_eq!(e.group(&key("grows")).unwrap().member_count(), 1, "the third node's worth");

    // Queue b's definition goes while both still name it.
    let mut snap = e.snapshot();
    snap.config.queues.retain(|q| q.name != "b");
    snap.config.queues.push(QueueConfig::closed("b", ["ns".to_string()]));
    let mut e = Engine::restore(graph(3, 4), snap).unwrap();
    e.schedule(1);
    assert_eq!(state(&e, "runs"), GroupState::Running, "placed, it runs on");
    e.finished(&key("runs"), true, 100).unwrap();
    e.schedule(101);
    assert_eq!(state(&e, "waits"), GroupState::Queued, "there is room, and it still waits");
    assert_eq!(e.group(&key("grows")).unwrap().member_count(), 1, "and a placed group does not grow");
    let why = e.explain(&key("waits"), 101).unwrap();
    assert!(why.reason.starts_with("queue b is closed"), "{}", why.reason);
    assert_eq!(why.estimated_start, None);
    match e.submit(spec("new", "b", 1, 1, Some(10), 102), 102) {
        Err(EngineError::InvalidGroup { field, message, .. }) => {
            assert_eq!(field, "queue");
            assert!(message.contains("closed"), "{message}");
        }
        other => panic!("a new group in a closed queue is refused, got {other:?}"),
    }
    // The open queue goes on.
    e.submit(spec("other", "a", 2, 4, Some(10), 102), 102).unwrap();
    e.schedule(102);
    assert_eq!(state(&e, "other"), GroupState::Admitted);
    e.check_invariants().unwrap();
}
