//! Topology per set of pods, inside the job's own (a gang of gangs): disaggregated inference's
//! prefill and decode each in one rack, both in one block. The models that can say it (muster,
//! Volcano's sub-group network topology, native's CompositePodGroup) wait for such room; Kueue
//! keeps each PodSet to a rack but has no constraint over both; the default scheduler and
//! coscheduling place pods anywhere.

use muster_sim::engine::{Engine, RunRecord};
use muster_sim::{SimError, Workload, scenario};

/// Two blocks of two racks of two 4-cpu nodes: n-0..n-3 block 0 (racks n-0/1, n-2/3), n-4..n-7
/// block 1. Instant control plane.
const CLUSTER: &str = "name: blocks\nnodeClasses:\n  - {name: n, count: 8, capacity: {cpu: \"4\", pods: 110}, \
                       spread: {block: 4, rack: 2}}\n";

/// Fillers of whole nodes (node, run time), then at 1 s the job `pd` with the class fields
/// `class` and `pods` (its sets and sub-groups), 50 s in place.
fn with_job(fillers: &[(u32, &str)], class: &str, pods: &str) -> Result<Workload, SimError> {
    let fillers: String = fillers
        .iter()
        .map(|(node, run)| {
            format!(
                "  - {{name: filler-{node}, count: 1, members: 1, resources: {{cpu: \"4\"}}, runTime: {run}, \
                 nodeSelector: {{kubernetes.io/hostname: n-{node}}}}}\n"
            )
        })
        .collect();
    let text = format!(
        "name: t\ncluster: c.yaml\ntiming: {{podCreateQps: 0, bindQps: 0, podStartDelay: 0s}}\njobClasses:\n{fillers}\
         \x20 - name: pd\n    count: 1\n    runTime: 50s\n    arrival: {{start: 1s}}\n{class}{pods}"
    );
    let read = |_: &std::path::Path| Ok(CLUSTER.to_string());
    scenario::from_text_with("t.yaml", &text, std::path::Path::new("."), 1, &read)
}

/// [`with_job`] where the job is two sets of two whole-node pods (`prefill`, `decode`) with the set
/// topology `set`; twice as long if a constraint is broken.
fn workload(fillers: &[(u32, &str)], set: &str, class: &str) -> Result<Workload, SimError> {
    let sets = format!(
        "    sets:\n      - {{name: prefill, members: 2, resources: {{cpu: \"4\"}}{set}}}\n      - {{name: decode, members: 2, \
         resources: {{cpu: \"4\"}}{set}}}\n"
    );
    with_job(fillers, class, &sets)
}

fn run(w: &Workload, name: &str) -> RunRecord {
    let mut s = muster_sim::scheduler(name, w).unwrap();
    Engine::new(w).unwrap().run(s.as_mut(), false).unwrap()
}

/// Under each scheduler of `names`, the job ran spread (a constraint broken) as `spread` says and
/// ended within `ended` (seconds).
fn expect(w: &Workload, names: &[&str], spread: bool, ended: std::ops::RangeInclusive<f64>, why: &str) {
    let i = w.jobs.iter().position(|j| j.class == "pd").unwrap();
    for name in names {
        let rec = run(w, name);
        let end = rec.jobs[i].ended_ms.unwrap() as f64 / 1000.0;
        assert_eq!(rec.jobs[i].spread, Some(spread), "{name}: {why}");
        assert!(ended.contains(&end), "{name}: ended at {end} s, not within {ended:?} s ({why})");
    }
}

const RACK: &str = ", topology: {level: rack, mode: required, spanSlowdown: 2}";

#[test]
fn prefill_and_decode_each_in_a_rack_wait_for_two_racks_of_one_block() {
    // At 1 s racks n-0/1 (block 0) and n-4/5 (block 1) are free; rack n-2/3 frees at 10 s.
    let fillers = [(2, "10s"), (3, "10s"), (6, "100s"), (7, "100s")];
    let block = "    topology: {level: block, mode: required, spanSlowdown: 2}\n";
    let w = workload(&fillers, RACK, block).unwrap();
    expect(&w, &["muster", "volcano", "native"], false, 60.0..=66.0, "both racks in block 0 from 10 s");
    // Kueue keeps each PodSet in a rack, one per block, at once: the job spans blocks.
    expect(&w, &["kueue"], true, 101.0..=106.0, "a rack in each block at once");
    expect(&w, &["default", "coscheduling"], true, 101.0..=106.0, "placed anywhere at once");
}

#[test]
fn a_set_in_one_rack_waits_for_a_whole_rack_where_the_model_has_topology() {
    // At 1 s one rack (n-4/5) is whole and n-1, n-3 are free beside busy nodes; n-0 frees at 10 s.
    let fillers = [(0, "10s"), (2, "100s"), (6, "100s"), (7, "100s")];
    let w = workload(&fillers, RACK, "").unwrap();
    expect(&w, &["muster", "volcano", "native", "kueue"], false, 60.0..=66.0, "a rack per set from 10 s");
    expect(&w, &["default", "coscheduling"], true, 101.0..=106.0, "one set over two racks at once");
}

#[test]
fn muster_receives_each_sets_topology_and_the_jobs_own() {
    let block = "    topology: {level: block, mode: required}\n";
    let w = workload(&[], RACK, block).unwrap();
    let g = w.jobs.iter().find(|j| j.class == "pd").unwrap().to_group_request();
    assert_eq!(g.topology.as_ref().map(|t| t.level.as_str()), Some("block"));
    let levels: Vec<_> = g.sets.iter().map(|s| s.topology.as_ref().map(|t| t.level.as_str())).collect();
    assert_eq!(levels, [Some("rack"), Some("rack")]);
}

#[test]
fn a_sets_level_wider_than_the_jobs_is_kept_as_muster_keeps_it() {
    // The job in one rack, each set in one block: the blocks hold already, as muster's matcher
    // takes them. At 1 s rack n-4/5 is whole, n-0..n-3 busy until 10 s.
    let rack = "    topology: {level: rack, mode: required, spanSlowdown: 2}\n";
    let fillers = [(0, "10s"), (1, "10s"), (2, "10s"), (3, "10s"), (6, "100s"), (7, "100s")];
    let block = ", topology: {level: block, mode: required, spanSlowdown: 2}";
    let single = |set: &str| {
        with_job(
            &fillers,
            rack,
            &format!("    sets:\n      - {{name: all, members: 2, resources: {{cpu: \"4\"}}{set}}}\n"),
        )
    };
    let w = single(block).unwrap();
    let g = w.jobs.iter().find(|j| j.class == "pd").unwrap().to_group_request();
    assert_eq!(g.sets[0].topology.as_ref().map(|t| t.level.as_str()), Some("block"), "kept as written");
    expect(&w, &["muster", "volcano", "native"], false, 51.0..=56.0, "the whole rack n-4/5 at once");
    // With the job's rack only preferred, the set's block still holds it: at 1 s only n-1 (block
    // 0) and n-4 (block 1) are free, so it waits for the cluster to free at 100 s, not spread.
    let preferred = "    topology: {level: rack, mode: preferred, spanSlowdown: 2}\n";
    let fillers = [(0, "100s"), (2, "100s"), (3, "100s"), (5, "100s"), (6, "100s"), (7, "100s")];
    let sets = format!("    sets:\n      - {{name: all, members: 2, resources: {{cpu: \"4\"}}{block}}}\n");
    let w = with_job(&fillers, preferred, &sets).unwrap();
    expect(&w, &["muster"], false, 150.0..=156.0, "in one rack from 100 s, not over two blocks at 1 s");
    let w = with_job(&fillers, preferred, &sets.replace(block, "")).unwrap();
    expect(&w, &["muster"], true, 100.0..=106.0, "without the set's level: over both blocks at 1 s");
    let e = workload(&[], ", topology: {level: row, mode: required}", "").unwrap_err().to_string();
    assert!(e.contains("jobClasses[0].sets[0].topology.level") && e.contains("levels are"), "{e}");
}

#[test]
fn on_the_disaggregated_scenario_only_kueue_and_the_models_without_topology_break_constraints() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/suite/disaggregated.yaml");
    let w = scenario::load(&path, 1).unwrap();
    let constrained = w.jobs.iter().filter(|j| j.topology.is_some() || !j.units.is_empty());
    let constrained = constrained.count();
    assert!(constrained >= 20);
    let spread = |name: &str| {
        let rec = run(&w, name);
        assert!(rec.jobs.iter().all(|j| j.ended_ms.is_some()), "{name}: every job ends");
        rec.jobs.iter().filter(|j| j.spread == Some(true)).count()
    };
    for name in ["muster", "volcano", "native"] {
        assert_eq!(spread(name), 0, "{name} keeps every gang to its rack and every job to its block");
    }
    // Kueue keeps each PodSet in a rack, so it breaks only the jobs' blocks: some, not all.
    let kueue = spread("kueue");
    assert!(kueue > 0 && kueue < constrained, "kueue spread {kueue} of {constrained}");
    assert!(spread("coscheduling") * 2 > constrained, "coscheduling spreads most");
}

/// [`with_job`] where the job is two sub-groups of a 2-cpu leader and a whole-node worker
/// each, every sub-group in one rack (two nodes), with the class fields `class`.
fn leaders_and_workers(fillers: &[(u32, &str)], class: &str) -> Workload {
    let leader = |name: &str| format!("      - {{name: {name}-leader, members: 1, resources: {{cpu: \"2\"}}}}\n");
    let worker = |name: &str| format!("      - {{name: {name}-worker, members: 1, resources: {{cpu: \"4\"}}}}\n");
    let group = |name: &str| {
        format!(
            "      - {{name: {name}, sets: [{name}-leader, {name}-worker], topology: {{level: rack, mode: required, \
             spanSlowdown: 2}}}}\n"
        )
    };
    let pods = format!(
        "    sets:\n{}{}{}{}    subGroups:\n{}{}",
        leader("prefill"),
        worker("prefill"),
        leader("decode"),
        worker("decode"),
        group("prefill"),
        group("decode"),
    );
    with_job(fillers, class, &pods).unwrap()
}

#[test]
fn a_sub_group_of_a_leader_and_a_worker_waits_for_a_whole_rack_under_every_model_with_topology() {
    // At 1 s one rack (n-4/5) is whole; n-0 frees at 10 s, and with it rack n-0/1.
    let w = leaders_and_workers(&[(0, "10s"), (2, "100s"), (6, "100s"), (7, "100s")], "");
    // Kueue too: a one-pod leader and its workers are a PodSet group, assigned to one domain.
    expect(&w, &["muster", "volcano", "native", "kueue"], false, 60.0..=66.0, "a rack per sub-group from 10 s");
    expect(&w, &["default", "coscheduling"], true, 101.0..=106.0, "a sub-group over two racks at once");
}

#[test]
fn sub_groups_that_must_share_a_block_wait_for_it_where_the_model_can_say_so() {
    let block = "    topology: {level: block, mode: required, spanSlowdown: 2}\n";
    let w = leaders_and_workers(&[(2, "10s"), (3, "10s"), (6, "100s"), (7, "100s")], block);
    expect(&w, &["muster", "volcano", "native"], false, 60.0..=66.0, "both racks in block 0 from 10 s");
    expect(&w, &["kueue"], true, 101.0..=106.0, "a rack in each block at once");
    let g = w.jobs.iter().find(|j| j.class == "pd").unwrap().to_group_request();
    let groups: Vec<(&str, &[String], &str)> =
        g.subgroups.iter().map(|s| (s.name.as_str(), s.sets.as_slice(), s.topology.level.as_str())).collect();
    assert_eq!(groups.len(), 2, "muster receives the sub-groups");
    assert_eq!(groups[0], ("prefill", &["prefill-leader".to_string(), "prefill-worker".to_string()][..], "rack"));
}

#[test]
fn sub_groups_the_simulator_cannot_keep_are_refused_with_the_field() {
    let path = std::path::Path::new(".");
    let read = |_: &std::path::Path| Ok(CLUSTER.to_string());
    let class = |sets: &str, groups: &str| {
        format!(
            "name: t\ncluster: c.yaml\njobClasses:\n  - name: pd\n    count: 1\n    runTime: 5s\n{sets}    \
             subGroups: {groups}\n"
        )
    };
    let two = "    sets:\n      - {name: a, members: 1, resources: {cpu: \"1\"}}\n      - {name: b, members: 1, \
               resources: {cpu: \"1\"}, topology: {level: rack, mode: required}}\n";
    let rack = "topology: {level: rack, mode: required}";
    for (sets, groups, field, hint) in [
        (
            "    members: 2\n    resources: {cpu: \"1\"}\n",
            format!("[{{name: g, sets: [a], {rack}}}]"),
            "jobClasses[0].subGroups",
            "give the class sets",
        ),
        (two, format!("[{{name: g, sets: [a, c], {rack}}}]"), "jobClasses[0].subGroups[0].sets[1]", "not a set"),
        (
            two,
            format!("[{{name: g, sets: [a], {rack}}}, {{name: h, sets: [a], {rack}}}]"),
            "jobClasses[0].subGroups[1].sets[0]",
            "one sub-group",
        ),
        (two, format!("[{{name: g, sets: [a, b], {rack}}}]"), "jobClasses[0].sets[1].topology", "sub-group \"g\""),
    ] {
        let e = scenario::from_text_with("t.yaml", &class(sets, &groups), path, 1, &read).unwrap_err().to_string();
        assert!(e.contains(field) && e.contains(hint), "{groups}: {e}");
    }
}
