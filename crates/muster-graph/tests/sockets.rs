//! Sockets as Fluxion models them: a member asking for sockets holds them whole; the others take
//! from pools without breaking up whole sockets needlessly; allocations export as JGF that reads
//! back.

mod common;

use common::check_invariants;
use common::parse::socket_jgf;
use muster_graph::{MatchOutcome, Policy, ResourceGraph, jgf, jobspec, load_graph};

/// One node, two sockets of 4 cores, 16 GB and 2 GPUs each.
fn two_sockets() -> ResourceGraph {
    ResourceGraph::new(jgf::import("sockets.json", &socket_jgf(1, 2, false)).unwrap(), Policy::First)
}

/// A Flux jobspec of `members` slots, each with `per_slot` (YAML of the slot's `with` list).
fn flux(members: u32, per_slot: &str, duration: u32) -> muster_graph::GroupRequest {
    let text = format!(
        "version: 1\nresources:\n  - type: slot\n    count: {members}\n    label: task\n    with:\n{per_slot}\
         attributes:\n  system:\n    duration: {duration}\n"
    );
    jobspec::parse("job.yaml", &text).unwrap_or_else(|e| panic!("{e}"))
}

fn cores_in_socket(sockets: u32, cores: u32) -> String {
    format!(
        "      - type: socket\n        count: {sockets}\n        with:\n          - type: core\n            count: {cores}\n"
    )
}

fn cores(count: u32) -> String {
    format!("      - type: core\n        count: {count}\n")
}

fn allocated(outcome: MatchOutcome) -> u64 {
    match outcome {
        MatchOutcome::Allocated(id) => id,
        other => panic!("expected an allocation, got {other:?}"),
    }
}

#[test]
fn a_socket_request_parses_into_whole_sockets_per_member() {
    let g = flux(3, &cores_in_socket(2, 4), 60);
    let sockets = g.sockets.as_ref().expect("sockets asked for");
    assert_eq!((sockets.count, sockets.requests.clone()), (2, vec![("cpu".to_string(), 4000)]));
    // The least a member takes: 2 sockets of 4 cores.
    assert_eq!(g.requests, vec![("cpu".to_string(), 8000)]);
    assert_eq!((g.min_members, g.max_members), (3, 3));
}

#[test]
fn a_member_holds_its_socket_whole_so_cores_left_in_a_used_socket_do_not_serve_it() {
    let mut rg = two_sockets();
    // Two cores of socket 0 for a job that asks for no socket.
    let small = allocated(rg.allocate(&flux(1, &cores(2), 100), 0));
    // A whole socket: socket 1, the idle one.
    let whole = allocated(rg.allocate(&flux(1, &cores_in_socket(1, 2), 100), 0));
    let node = &rg.graph.nodes[0];
    let held = &rg.allocation(whole).unwrap().members[0].sockets;
    assert_eq!(held, &vec![node.sockets[1].vertex], "the idle socket is taken");
    // Two cores are free on the node (in socket 0), but no socket is idle: Fluxion would not
    // place it now, and muster placed it before sockets were modelled.
    let cpu = rg.graph.resources.get("cpu").unwrap().index();
    assert_eq!(node.free[cpu], 2000);
    match rg.allocate_orelse_reserve(&flux(1, &cores_in_socket(1, 2), 50), 0) {
        MatchOutcome::Reserved { at, .. } => assert_eq!(at, 100, "when the first socket frees"),
        other => panic!("expected a reservation, got {other:?}"),
    }
    // A job that asks for no socket still uses those two cores now.
    allocated(rg.allocate(&flux(1, &cores(2), 50), 0));
    check_invariants(&rg);
    rg.cancel(small).unwrap();
    check_invariants(&rg);
}

#[test]
fn more_cores_in_one_socket_than_any_socket_has_is_unsatisfiable() {
    let rg = two_sockets();
    // Eight cores fit the node, six fit no socket.
    assert!(rg.satisfiability(&flux(1, &cores(6), 10)).is_ok());
    let e = rg.satisfiability(&flux(1, &cores_in_socket(1, 6), 10)).unwrap_err();
    assert!(e.contains("socket"), "{e}");
    // Sockets the cluster's graph does not have are refused too.
    let flat = ResourceGraph::new(
        muster_graph::cluster::load(
            "c.yaml",
            "name: flat\nnodeClasses:\n  - name: cpu\n    count: 2\n    capacity: {cpu: 64}\n",
        )
        .unwrap(),
        Policy::First,
    );
    let e = flat.satisfiability(&flux(1, &cores_in_socket(1, 1), 10)).unwrap_err();
    assert!(e.contains("socket"), "{e}");
}

#[test]
fn jobs_without_sockets_fill_used_sockets_first_and_leave_whole_ones_free() {
    let mut rg = two_sockets();
    for _ in 0..4 {
        allocated(rg.allocate(&flux(1, &cores(1), 100), 0));
    }
    // Four single cores fill socket 0; socket 1 stays whole for a socket job.
    allocated(rg.allocate(&flux(1, &cores_in_socket(1, 4), 100), 0));
    check_invariants(&rg);
}

#[test]
fn room_that_moves_between_sockets_is_not_room_for_a_job_spanning_the_window() {
    let mut rg = two_sockets();
    let socket_job = || flux(1, &cores_in_socket(1, 4), 50);
    let a = allocated(rg.allocate(&socket_job(), 0));
    allocated(rg.allocate(&socket_job(), 0));
    // Both sockets busy until 50: the third is reserved on socket 0 from 50 to 150.
    match rg.allocate_orelse_reserve(&flux(1, &cores_in_socket(1, 4), 100), 0) {
        MatchOutcome::Reserved { at, .. } => assert_eq!(at, 50),
        other => panic!("expected a reservation, got {other:?}"),
    }
    // The first ends early: socket 0 is free until 50, socket 1 from 50. Four cores are free at
    // every instant of [0, 100), but no core throughout: a 4-core job of 100 s waits for 50.
    rg.cancel(a).unwrap();
    match rg.allocate_orelse_reserve(&flux(1, &cores(4), 100), 0) {
        MatchOutcome::Reserved { at, .. } => assert_eq!(at, 50),
        other => panic!("expected a reservation at 50, got {other:?}"),
    }
    // A shorter one fits now, in socket 0 before its reservation.
    allocated(rg.allocate(&flux(1, &cores(4), 50), 0));
    check_invariants(&rg);
}

#[test]
fn a_socket_member_holds_the_gpus_of_its_sockets_and_others_take_gpus_where_they_take_cores() {
    let mut rg = two_sockets();
    let one_gpu = "      - type: core\n        count: 1\n      - type: gpu\n        count: 1\n";
    let a = allocated(rg.allocate(&flux(1, one_gpu, 100), 0));
    let b = allocated(rg.allocate(&flux(1, &cores_in_socket(1, 1), 100), 0));
    let node = &rg.graph.nodes[0];
    let socket_of = |v| node.devices.iter().find(|d| d.vertex == v).and_then(|d| d.socket);
    let a_gpus: Vec<_> = rg.allocation(a).unwrap().members[0].devices.iter().map(|&v| socket_of(v)).collect();
    let b_gpus: Vec<_> = rg.allocation(b).unwrap().members[0].devices.iter().map(|&v| socket_of(v)).collect();
    assert_eq!(a_gpus, vec![Some(0)], "the GPU comes from the socket the core comes from");
    assert_eq!(b_gpus, vec![Some(1), Some(1)], "a whole socket brings both its GPUs");
    check_invariants(&rg);
}

#[test]
fn shrinking_a_socket_group_releases_exactly_the_released_members_sockets() {
    let mut rg = two_sockets();
    let id = allocated(rg.allocate(&flux(2, &cores_in_socket(1, 2), 100), 0));
    let members = rg.allocation(id).unwrap().members.clone();
    rg.shrink(id, &[0]).unwrap();
    let kept = &rg.allocation(id).unwrap().members[0];
    assert_eq!((kept.index, &kept.sockets), (1, &members[1].sockets), "member 1 keeps its socket");
    let next = allocated(rg.allocate(&flux(1, &cores_in_socket(1, 2), 100), 0));
    assert_eq!(rg.allocation(next).unwrap().members[0].sockets, members[0].sockets);
    check_invariants(&rg);
}

#[test]
fn importing_a_socket_group_onto_a_node_without_an_idle_socket_is_refused_and_changes_nothing() {
    let mut rg = two_sockets();
    allocated(rg.allocate(&flux(1, &cores(1), 100), 0));
    allocated(rg.allocate(&flux(1, &cores_in_socket(1, 1), 100), 0));
    let before = common::fingerprint(&rg.graph);
    let member = muster_graph::ImportedMember { index: 0, node: "node0".into(), devices: vec![] };
    let e = rg.import(99, &flux(1, &cores_in_socket(1, 1), 100), &[member], (0, 100)).unwrap_err();
    assert!(e.to_string().contains("sockets"), "{e}");
    assert_eq!(common::fingerprint(&rg.graph), before);
}

#[test]
fn a_running_socket_group_is_recorded_as_it_runs_even_where_a_reservation_planned_its_sockets() {
    let mut rg = two_sockets();
    let running = flux(2, &cores_in_socket(1, 1), 10);
    let id = allocated(rg.allocate(&running, 0));
    // Both sockets are the group's until its expected end, so a 6-core job is planned from then.
    let outcome = rg.allocate_orelse_reserve(&flux(1, &cores(6), 100), 0);
    assert!(matches!(outcome, MatchOutcome::Reserved { at: 10, .. }), "{outcome:?}");
    let first_socket = rg.allocation(id).unwrap().members[0].sockets[0];
    let name = rg.graph.vertex(first_socket).meta.name.clone();
    rg.cancel(id).unwrap();
    // The group outran that end (a restart finds it running until 50): it is recorded where it
    // runs, one member naming its socket and the other given the one left, as the resources
    // outside sockets are checked against what runs and not against what is planned.
    let members = [
        muster_graph::ImportedMember { index: 0, node: "node0".into(), devices: vec![name] },
        muster_graph::ImportedMember { index: 1, node: "node0".into(), devices: vec![] },
    ];
    rg.import(id, &running, &members, (0, 50)).unwrap();
    let held: Vec<_> = rg.allocation(id).unwrap().members.iter().map(|m| m.sockets.clone()).collect();
    assert_eq!(held[0], vec![first_socket]);
    assert_eq!(held[1].len(), 1);
    assert_ne!(held[1], held[0], "each member holds a socket of its own");
}

#[test]
fn an_allocation_exported_as_jgf_reads_back_as_exactly_what_it_holds() {
    let mut rg = two_sockets();
    let small = allocated(rg.allocate(&flux(1, &cores(3), 100), 0));
    let whole = allocated(rg.allocate(&flux(1, &cores_in_socket(1, 1), 100), 0));
    let read = |id| {
        let text = jgf::export_allocation(&rg.graph, rg.allocation(id).unwrap());
        load_graph("alloc.json", &text).unwrap_or_else(|e| panic!("{e}\n{text}"))
    };
    let cap = |g: &muster_graph::Graph, r: &str| g.resources.get(r).map_or(0, |id| g.nodes[0].capacity[id.index()]);
    let g = read(small);
    assert_eq!((cap(&g, "cpu"), cap(&g, "memory"), cap(&g, "nvidia.com/gpu")), (3000, 0, 0));
    assert_eq!(g.nodes[0].sockets.len(), 1, "three cores of one socket");
    // The whole socket: its 4 cores, 16 GB and 2 GPUs, though the member asked for one core.
    let g = read(whole);
    assert_eq!((cap(&g, "cpu"), cap(&g, "memory"), cap(&g, "nvidia.com/gpu")), (4000, 16 << 30, 2));
    assert_eq!(g.nodes[0].sockets.len(), 1);
}

#[test]
fn a_graph_with_sockets_round_trips_through_jgf_with_its_sockets() {
    let g = jgf::import("sockets.json", &socket_jgf(2, 2, false)).unwrap();
    let again = load_graph("again.json", &jgf::export(&g)).unwrap();
    for n in 0..2 {
        assert_eq!(again.nodes[n].sockets.len(), 2);
        for s in 0..2 {
            assert_eq!(again.nodes[n].sockets[s].capacity, g.nodes[n].sockets[s].capacity);
        }
    }
}
