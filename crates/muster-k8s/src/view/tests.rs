//! Rows, tables and explanations from Groups as the apiserver returns them.

use super::text::{follows, natural_key};
use super::*;
use crate::Quantity;
use crate::group::MemberAllocation;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

fn ts(s: &str) -> Timestamp {
    s.parse().unwrap()
}

const NOW: &str = "2026-01-02T03:00:00Z";

/// A Group from the JSON the apiserver would return; `status` is spliced in as given.
fn group(ns: &str, name: &str, queue: &str, members: &str, status: &str) -> Group {
    serde_json::from_str(&format!(
        r#"{{"apiVersion": "muster.dev/v1alpha1", "kind": "Group",
            "metadata": {{"name": "{name}", "namespace": "{ns}", "creationTimestamp": "2026-01-02T02:50:00Z"}},
            "spec": {{"queue": "{queue}", "members": {members}, "resources": {{"cpu": 2, "memory": "2Gi"}}}},
            "status": {status}}}"#
    ))
    .unwrap()
}

fn cond(type_: &str, status: &str, reason: &str, message: &str, at: &str) -> Condition {
    Condition {
        type_: type_.into(),
        status: status.into(),
        reason: reason.into(),
        message: message.into(),
        observed_generation: None,
        last_transition_time: Time(ts(at)),
    }
}

/// The cells of each line of a table, split on runs of two or more spaces.
fn cells(table: &str) -> Vec<Vec<String>> {
    table.lines().map(|l| l.split("  ").map(str::trim).filter(|c| !c.is_empty()).map(String::from).collect()).collect()
}

fn line_cells(line: &str) -> Vec<String> {
    cells(line).remove(0)
}

fn mixed() -> Vec<Group> {
    vec![
        group(
            "ml",
            "running",
            "b",
            r#"{"min": 4}"#,
            r#"{"phase": "Running", "queuePosition": 9, "allocation": [{"member": 0, "node": "n1"}]}"#,
        ),
        group(
            "ml",
            "third",
            "b",
            r#"{"min": 4}"#,
            r#"{"phase": "Queued", "queuePosition": 3, "estimatedStart": "2026-01-02T03:10:00Z", "message": "waits for 8 cpu"}"#,
        ),
        group(
            "ml",
            "first",
            "b",
            r#"{"min": 2, "max": 6}"#,
            r#"{"phase": "Reserved", "queuePosition": 1, "estimatedStart": "2026-01-02T03:03:00Z"}"#,
        ),
        group("dev", "other-queue", "a", r#"{"min": 1}"#, r#"{"phase": "Queued", "queuePosition": 2}"#),
        group("dev", "new", "a", r#"{"min": 1}"#, r#"{}"#),
        group("ml", "done", "a", r#"{"min": 1}"#, r#"{"phase": "Succeeded"}"#),
        group("ml", "admitted", "a", r#"{"min": 1}"#, r#"{"phase": "Admitted"}"#),
    ]
}

#[test]
fn pending_groups_come_first_by_queue_and_position_then_active_ones() {
    let rows = queue_rows(&mixed(), &ListOptions::default());
    let names: Vec<&str> = rows.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["other-queue", "new", "first", "third", "admitted", "running"]);
    // A running group's stale position is not shown.
    assert_eq!(rows[5].position, None);
    let with_done = queue_rows(&mixed(), &ListOptions { finished: true, ..Default::default() });
    assert_eq!(with_done.last().map(|r| r.name.as_str()), Some("done"));
    let only_b = queue_rows(&mixed(), &ListOptions { queue: Some("b".into()), finished: true });
    assert!(only_b.iter().all(|r| r.queue == "b"), "{only_b:?}");
    assert_eq!(only_b.len(), 3);
}

#[test]
fn table_has_kubectl_headers_aligned_columns_and_none() {
    let rows = queue_rows(&mixed(), &ListOptions::default());
    let t = render_table(&rows, false, true, ts(NOW));
    let lines: Vec<&str> = t.lines().collect();
    assert_eq!(
        line_cells(lines[0]),
        ["NAMESPACE", "NAME", "QUEUE", "PHASE", "POSITION", "MEMBERS", "ESTIMATED-START", "REASON"]
    );
    // Every column starts at the same offset on every line.
    for header in ["NAME", "QUEUE", "PHASE", "POSITION", "ESTIMATED-START", "REASON"] {
        let col = lines[0].find(&format!("   {header}")).unwrap() + 3;
        for l in &lines[1..] {
            assert!(l.len() > col && l.as_bytes()[col - 1] == b' ', "{header} misaligned in {l:?}");
            assert_ne!(l.as_bytes()[col], b' ', "{header} misaligned in {l:?}");
        }
    }
    assert!(t.lines().all(|l| l == l.trim_end()), "trailing blanks");
    let third = line_cells(lines.iter().find(|l| l.contains("third")).unwrap());
    assert_eq!(third, ["ml", "third", "b", "Queued", "3", "4", "in 10m", "waits for 8 cpu"]);
    let first = line_cells(lines.iter().find(|l| l.contains("first")).unwrap());
    assert_eq!(&first[3..7], ["Reserved", "1", "2..6", "in 3m"]);
    let new = line_cells(lines.iter().find(|l| l.contains(" new ")).unwrap());
    assert_eq!(&new[3..], ["<none>", "<none>", "1", "<none>", "<none>"]);
    let running = line_cells(lines.iter().find(|l| l.contains("running")).unwrap());
    assert_eq!(&running[3..], ["Running", "<none>", "4", "<none>", "<none>"]);
}

#[test]
fn one_namespace_has_no_namespace_column_and_wide_adds_absolute_times() {
    let rows = queue_rows(&mixed(), &ListOptions { queue: Some("b".into()), finished: false });
    let t = render_table(&rows, true, false, ts(NOW));
    let lines = cells(&t);
    assert_eq!(
        lines[0],
        [
            "NAME",
            "QUEUE",
            "PHASE",
            "POSITION",
            "MEMBERS",
            "ESTIMATED-START",
            "ESTIMATED-AT",
            "AGE",
            "REQUEUES",
            "REASON"
        ]
    );
    assert_eq!(lines[1][0], "first");
    assert_eq!(&lines[1][5..9], ["in 3m", "2026-01-02T03:03:00Z", "10m", "0"]);
}

#[test]
fn long_reasons_are_cut_unless_wide() {
    let long = "x".repeat(200);
    let g = group("ml", "g", "q", r#"{"min": 1}"#, &format!(r#"{{"phase": "Queued", "message": "{long}"}}"#));
    let rows = queue_rows(&[g], &ListOptions::default());
    let normal = render_table(&rows, false, false, ts(NOW));
    assert!(normal.lines().nth(1).unwrap().ends_with("xxx..."));
    assert!(!normal.contains(&long));
    assert!(render_table(&rows, true, false, ts(NOW)).contains(&long));
}

#[test]
fn json_has_every_field() {
    let rows = queue_rows(&mixed(), &ListOptions::default());
    let v: serde_json::Value = serde_json::from_str(&render_json(&rows)).unwrap();
    let items = v["items"].as_array().unwrap();
    assert_eq!(items.len(), rows.len());
    let third = items.iter().find(|i| i["name"] == "third").unwrap();
    assert_eq!(third["position"], 3);
    assert_eq!(third["estimatedStart"], "2026-01-02T03:10:00Z");
    assert_eq!(third["phase"], "Queued");
    assert_eq!(third["reason"], "waits for 8 cpu");
    assert!(items.iter().find(|i| i["name"] == "new").unwrap()["phase"].is_null());
}

#[test]
fn reason_prefers_the_message_then_the_latest_true_condition() {
    let c = [
        cond("Queued", "True", "Waiting", "waits for quota", "2026-01-02T02:00:00Z"),
        cond("Reserved", "True", "Reserved", "start reserved at 03:10", "2026-01-02T02:30:00Z"),
        cond("Evicted", "False", "Evicted", "was evicted", "2026-01-02T02:59:00Z"),
    ];
    assert_eq!(reason(Some("  two\n lines "), &c), "two lines");
    assert_eq!(reason(None, &c), "start reserved at 03:10");
    assert_eq!(reason(Some(""), &c[..1]), "waits for quota");
    let bare = [cond("Queued", "True", "Waiting", "", "2026-01-02T02:00:00Z")];
    assert_eq!(reason(None, &bare), "Waiting");
    assert_eq!(reason(None, &[]), "");
}

#[test]
fn durations_read_like_kubectl() {
    for (secs, want) in [
        (0, "0s"),
        (45, "45s"),
        (119, "119s"),
        (150, "2m30s"),
        (180, "3m"),
        (900, "15m"),
        (3 * 3600 + 20 * 60, "3h20m"),
        (12 * 3600, "12h"),
        (52 * 3600, "2d4h"),
        (30 * 86_400, "30d"),
        (3 * 365 * 86_400, "3y"),
        (-5, "0s"),
    ] {
        assert_eq!(human_duration(secs), want, "{secs}");
    }
    let now = ts(NOW);
    assert_eq!(relative(now, ts("2026-01-02T03:03:00Z")), "in 3m");
    assert_eq!(relative(now, ts("2026-01-02T02:59:15Z")), "45s ago");
    assert_eq!(relative(now, now), "now");
    assert_eq!(absolute(ts("2026-01-02T03:03:00.75Z")), "2026-01-02T03:03:00Z");
}

fn alloc(pairs: &[(u32, &str)]) -> Vec<MemberAllocation> {
    pairs.iter().map(|(m, n)| MemberAllocation { member: *m, node: n.to_string() }).collect()
}

#[test]
fn small_allocations_list_each_member() {
    let a = alloc(&[(1, "node-2"), (0, "node-1")]);
    assert_eq!(allocation_lines(&a), ["member 0 -> node-1", "member 1 -> node-2"]);
}

#[test]
fn big_allocations_collapse_into_node_ranges() {
    // 10 members on node-1..node-9, two of them on node-5; node-10 follows node-9.
    let mut pairs: Vec<(u32, String)> = (1..=9).map(|i| (i - 1, format!("node-{i}"))).collect();
    pairs.push((9, "node-5".into()));
    let a: Vec<MemberAllocation> =
        pairs.iter().map(|(m, n)| MemberAllocation { member: *m, node: n.clone() }).collect();
    assert_eq!(allocation_lines(&a), ["node-1..node-9 (10 members)"]);
    let mut gap = a.clone();
    gap.push(MemberAllocation { member: 10, node: "node-10".into() });
    gap.push(MemberAllocation { member: 11, node: "node-12".into() });
    gap.push(MemberAllocation { member: 12, node: "gpu-01".into() });
    assert_eq!(allocation_lines(&gap), ["gpu-01 (1 member)", "node-1..node-10 (11 members)", "node-12 (1 member)"]);
}

#[test]
fn numbered_series_follow_each_other() {
    assert!(follows("node-9", "node-10"));
    assert!(follows("gpu-007", "gpu-008"));
    assert!(!follows("gpu-009", "gpu-0010"));
    assert!(!follows("node-1", "node-3"));
    assert!(!follows("a-1", "b-2"));
    assert!(!follows("node", "node"));
    assert!(!follows("n-99999999999999999999999999999999999999999", "n-1"));
    let mut names = vec!["node-10", "node-9", "node-1"];
    names.sort_by(|a, b| natural_key(a).cmp(&natural_key(b)));
    assert_eq!(names, ["node-1", "node-9", "node-10"]);
}

#[test]
fn why_explains_a_waiting_group() {
    let mut g = group(
        "ml",
        "train",
        "team-a",
        r#"{"min": 4, "max": 8}"#,
        r#"{"phase": "Queued", "queuePosition": 2, "estimatedStart": "2026-01-02T03:05:00Z",
            "message": "needs 16 cpu; 8 free in the quota of team-a",
            "requeue": {"count": 1, "requeueAt": "2026-01-02T03:01:00Z"}}"#,
    );
    g.status.as_mut().unwrap().conditions = vec![
        cond("Queued", "True", "QuotaExceeded", "needs 16 cpu", "2026-01-02T02:55:00Z"),
        cond("Evicted", "True", "PodsReadyTimeout", "not ready within 300s", "2026-01-02T02:50:00Z"),
    ];
    let q: Queue = serde_json::from_str(
        r#"{"apiVersion": "muster.dev/v1alpha1", "kind": "Queue", "metadata": {"name": "team-a"},
            "spec": {"policy": {"kind": "conservative", "depth": 4}, "cohort": "research"},
            "status": {"estimates": {"groups": 12, "medianErrorPercent": 8}}}"#,
    )
    .unwrap();
    let text = explain(&g, &QueueInfo::Found(Box::new(q)), ts(NOW));
    let line = |key: &str| {
        text.lines().find(|l| l.starts_with(key)).unwrap_or_else(|| panic!("no {key} in\n{text}")).to_string()
    };
    assert!(line("Group:").ends_with("ml/train"));
    assert!(line("Queue:").contains("team-a (conservative backfill, depth 4; cohort research)"));
    assert!(line("Phase:").ends_with("Queued"));
    assert!(line("Members:").contains("4..8, each cpu 2, memory 2Gi"));
    assert!(line("Position:").ends_with("2 in queue team-a"));
    assert!(line("Estimated start:").ends_with("in 5m (2026-01-02T03:05:00Z)"));
    assert!(
        line("Estimates:")
            .ends_with("off by 8% of the wait (median) for the last 12 groups admitted from queue team-a")
    );
    assert!(line("Message:").ends_with("needs 16 cpu; 8 free in the quota of team-a"));
    assert!(line("Requeues:").contains("1, back in the queue in 60s (2026-01-02T03:01:00Z)"));
    assert!(line("Allocation:").ends_with("<none>"));
    let queued = text.lines().find(|l| l.trim_start().starts_with("Queued")).unwrap();
    assert_eq!(line_cells(queued), ["Queued", "True", "QuotaExceeded", "5m", "needs 16 cpu"]);
    let evicted = text.lines().find(|l| l.trim_start().starts_with("Evicted")).unwrap();
    assert_eq!(line_cells(evicted), ["Evicted", "True", "PodsReadyTimeout", "10m", "not ready within 300s"]);
    // Fields line up after their labels.
    let starts: Vec<usize> = ["Group:", "Queue:", "Phase:", "Message:"]
        .iter()
        .map(|k| {
            let l = line(k);
            l.len() - l[k.len()..].trim_start().len()
        })
        .collect();
    assert!(starts.windows(2).all(|w| w[0] == w[1]), "{starts:?}\n{text}");
}

#[test]
fn why_explains_a_running_group_without_stale_waiting_fields() {
    let allocation: Vec<String> =
        (0..10).map(|i| format!(r#"{{"member": {i}, "node": "node-{}"}}"#, i / 2 + 1)).collect();
    let g = group(
        "ml",
        "big",
        "q",
        r#"{"min": 10}"#,
        &format!(
            r#"{{"phase": "Running", "queuePosition": 4, "estimatedStart": "2026-01-02T02:00:00Z", "allocation": [{}]}}"#,
            allocation.join(",")
        ),
    );
    let text = explain(&g, &QueueInfo::Missing, ts(NOW));
    assert!(!text.contains("Position:"), "{text}");
    assert!(!text.contains("Estimated start:"), "{text}");
    assert!(text.contains("no such Queue"), "{text}");
    assert!(text.lines().any(|l| l.starts_with("Allocation:") && l.ends_with(" 10 members on 5 nodes")), "{text}");
    assert!(text.contains("  node-1..node-5 (10 members)"), "{text}");
    assert!(text.contains("Conditions:") && text.contains("<none>"), "{text}");
}

#[test]
fn a_group_without_status_says_so() {
    let g = group("ml", "fresh", "q", r#"{"min": 1}"#, "{}");
    let text = explain(&g, &QueueInfo::Unknown, ts(NOW));
    assert!(text.contains("muster has not looked at the group yet"), "{text}");
    assert!(text.lines().any(|l| l.starts_with("Queue:") && l.ends_with(" q")), "{text}");
}

#[test]
fn missing_groups_are_explained() {
    assert_eq!(
        missing_message("ml", "x", &Missing::Unlabelled),
        "job x is not managed by muster: it has no muster.dev/queue label"
    );
    assert!(missing_message("ml", "x", &Missing::NoJob).starts_with("no such job: x in namespace ml"));
    assert!(missing_message("ml", "x", &Missing::NoGroupYet("q".into())).contains("controller"));
}

#[test]
fn base_units_read_as_people_write_them() {
    assert_eq!(quantity_text("memory", &Quantity::Int(2 << 30)), "2Gi");
    assert_eq!(quantity_text("memory", &Quantity::Int(1536 << 20)), "1536Mi");
    assert_eq!(quantity_text("memory", &Quantity::Int(1000)), "1000");
    assert_eq!(quantity_text("memory", &Quantity::Int(0)), "0");
    assert_eq!(quantity_text("ephemeral-storage", &Quantity::Int(1 << 40)), "1Ti");
    assert_eq!(quantity_text("cpu", &Quantity::Text("2000m".into())), "2");
    assert_eq!(quantity_text("cpu", &Quantity::Text("500m".into())), "500m");
    assert_eq!(quantity_text("cpu", &Quantity::Int(4)), "4");
    assert_eq!(quantity_text("nvidia.com/gpu", &Quantity::Int(1024)), "1024");
    assert_eq!(quantity_text("memory", &Quantity::Text("4Gi".into())), "4Gi");
}

#[test]
fn why_shows_each_set_of_a_group_of_sets() {
    let mut g = group("ml", "pi", "q", r#"{"min": 5}"#, "{}");
    g.spec.resources.clear();
    g.spec.sets = serde_json::from_str(
        r#"[{"name": "launcher", "members": {"min": 1}, "resources": {"cpu": "1"}},
            {"name": "worker", "members": {"min": 2, "max": 4}, "resources": {"cpu": "32", "nvidia.com/gpu": 8}},
            {"name": "spare", "members": {"min": 2}, "optional": true, "resources": {"cpu": "32"}}]"#,
    )
    .unwrap();
    let text = explain(&g, &QueueInfo::Unknown, ts(NOW));
    let sets = text.lines().find(|l| l.starts_with("Sets:")).unwrap_or_else(|| panic!("no sets in\n{text}"));
    assert!(
        sets.ends_with(
            "launcher 1 (each cpu 1); worker 2..4 (each cpu 32, nvidia.com/gpu 8); spare 2 (optional, each cpu 32)"
        ),
        "{sets}"
    );
    assert!(text.lines().any(|l| l.starts_with("Members:") && !l.contains("each")), "{text}");
    let alike = group("ml", "train", "q", r#"{"min": 2}"#, "{}");
    assert!(!explain(&alike, &QueueInfo::Unknown, ts(NOW)).contains("Sets:"));
}

#[test]
fn why_shows_the_devices_a_member_claims() {
    let mut g = group("ml", "train", "q", r#"{"min": 2}"#, "{}");
    g.spec.devices = serde_json::from_str(
        r#"[{"name": "gpus/gpus", "driver": "gpu.example.com", "count": 8,
             "selectors": ["device.driver == \"gpu.example.com\"", "device.attributes[\"gpu.example.com\"].model == \"h100\""]}]"#,
    )
    .unwrap();
    let text = explain(&g, &QueueInfo::Unknown, ts(NOW));
    let members = text.lines().find(|l| l.starts_with("Members:")).unwrap_or_else(|| panic!("{text}"));
    assert!(
        members.ends_with(
            "each cpu 2, memory 2Gi, 8 gpu.example.com devices where device.driver == \"gpu.example.com\" && \
             device.attributes[\"gpu.example.com\"].model == \"h100\""
        ),
        "{members}"
    );
}
