//! The timeline: running, reserved and estimated groups as bars on the nodes they hold, from a
//! little before now into the future, as the planner sees it, over the windows calendar
//! reservations set aside. One SVG, made on the server.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

use muster_queue::{Plan, PlannedGroup, ReservationWindow, WindowKind};

use crate::format::{esc, relative};

const LABEL_WIDTH: f64 = 180.0;
const CHART_WIDTH: f64 = 900.0;
const ROW: f64 = 18.0;
const AXIS: f64 = 24.0;

/// The class of a window's bars (the stylesheet colours them; tests look for them).
pub fn class(kind: WindowKind) -> &'static str {
    match kind {
        WindowKind::Running => "running",
        WindowKind::Reserved => "reserved",
        WindowKind::Estimated => "estimated",
    }
}

/// The timeline of `plan` as an SVG element; a sentence when nothing has a window.
pub fn svg(plan: &Plan) -> String {
    let windows: Vec<&PlannedGroup> = plan.groups.iter().filter(|g| g.window.is_some()).collect();
    if windows.is_empty() && plan.set_asides.is_empty() {
        return r#"<p class="empty">Nothing runs or waits with a planned start.</p>"#.into();
    }
    let rows = rows(plan, &windows);
    let now = plan.now;
    // The groups set the time shown; a reservation's window far ahead would squeeze them, so it
    // sets the time only when no group has a window.
    let group_ends = windows.iter().filter_map(|g| g.window.as_ref()).map(|w| w.end.unwrap_or(w.start).max(w.start));
    let latest = group_ends.max().or_else(|| plan.set_asides.iter().map(|r| r.end).max()).unwrap_or(now);
    let ahead = (latest - now).max(60);
    let (from, to) = (now - (ahead / 10).max(10), now + ahead + ahead / 10);
    let scale = CHART_WIDTH / (to - from) as f64;
    let x = |t: i64| LABEL_WIDTH + (t.clamp(from, to) - from) as f64 * scale;
    let height = AXIS + ROW * rows.len() as f64;
    let mut out = String::new();
    let _ = write!(
        out,
        r#"<svg class="timeline" xmlns="http://www.w3.org/2000/svg" width="{w}" height="{height}" viewBox="0 0 {w} {height}">"#,
        w = LABEL_WIDTH + CHART_WIDTH
    );
    for i in 0..=4 {
        let t = from + (to - from) * i / 4;
        let _ = write!(
            out,
            r#"<line class="tick" x1="{x}" x2="{x}" y1="{AXIS}" y2="{height}"/><text class="tick" x="{x}" y="14">{}</text>"#,
            esc(&relative(t, now)),
            x = x(t)
        );
    }
    for (i, (domain, node)) in rows.iter().enumerate() {
        let y = AXIS + ROW * i as f64;
        let label = domain.as_ref().map_or_else(|| node.clone(), |d| format!("{d} / {node}"));
        let _ = write!(out, r#"<text class="node" x="4" y="{}">{}</text>"#, y + ROW - 5.0, esc(&label));
    }
    let row_of: BTreeMap<&str, usize> = rows.iter().enumerate().map(|(i, (_, n))| (n.as_str(), i)).collect();
    for r in plan.set_asides.iter().filter(|r| r.end > from && r.start < to) {
        let (x0, x1) = (x(r.start), x(r.end));
        let title =
            format!("reservation {}: from {} to {}", r.reservation, relative(r.start, now), relative(r.end, now));
        for row in r.nodes.iter().filter_map(|n| row_of.get(n.as_str())) {
            let _ = write!(
                out,
                r#"<rect class="set-aside" data-reservation="{}" x="{x0:.1}" y="{}" width="{:.1}" height="{ROW}"><title>{}</title></rect>"#,
                esc(&r.reservation),
                AXIS + ROW * *row as f64,
                (x1 - x0).max(2.0),
                esc(&title)
            );
        }
    }
    for g in windows {
        let Some(w) = &g.window else { continue };
        let end = w.end.unwrap_or(to);
        let (x0, x1) = (x(w.start), x(end));
        let width = (x1 - x0).max(2.0);
        let name = format!("{}/{}", g.key.namespace, g.key.name);
        let until = w.end.map_or_else(|| "until it finishes".to_string(), |e| format!("to {}", relative(e, now)));
        let title = format!("{name}: {} from {} {until}", class(w.kind), relative(w.start, now));
        let nodes: BTreeSet<&str> = w.nodes.iter().map(String::as_str).collect();
        let mut first = true;
        for node in nodes {
            let Some(&row) = row_of.get(node) else { continue };
            let y = AXIS + ROW * row as f64 + 2.0;
            let _ = write!(
                out,
                r#"<rect class="bar {}" data-group="{}" x="{x0:.1}" y="{y}" width="{width:.1}" height="{}"><title>{}</title></rect>"#,
                class(w.kind),
                esc(&name),
                ROW - 4.0,
                esc(&title)
            );
            if first && width > 50.0 {
                let _ = write!(
                    out,
                    r#"<text class="bar-label" x="{}" y="{}">{}</text>"#,
                    x0 + 3.0,
                    y + ROW - 8.0,
                    esc(&g.key.name)
                );
            }
            first = false;
        }
    }
    let _ = write!(out, r#"<line class="now" x1="{x}" x2="{x}" y1="{}" y2="{height}"/></svg>"#, AXIS - 6.0, x = x(now));
    out
}

/// The nodes that appear in any window (a group's or a reservation's), by topology domain then
/// name, with their domain.
fn rows(plan: &Plan, windows: &[&PlannedGroup]) -> Vec<(Option<String>, String)> {
    let domain: BTreeMap<&str, &str> =
        plan.nodes.iter().filter_map(|n| n.domain.as_deref().map(|d| (n.name.as_str(), d))).collect();
    let of_groups = windows.iter().filter_map(|g| g.window.as_ref()).flat_map(|w| w.nodes.iter());
    let of_reservations = plan.set_asides.iter().flat_map(|r: &ReservationWindow| r.nodes.iter());
    let used: BTreeSet<(Option<String>, String)> =
        of_groups.chain(of_reservations).map(|n| (domain.get(n.as_str()).map(|d| d.to_string()), n.clone())).collect();
    used.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use muster_queue::{GroupKey, GroupState, PlanWindow};

    fn windowed(name: &str, kind: WindowKind, start: i64, end: Option<i64>, nodes: &[&str]) -> PlannedGroup {
        PlannedGroup {
            key: GroupKey { namespace: "ns".into(), name: name.into() },
            queue: "q".into(),
            state: GroupState::Running,
            members: nodes.len() as u32,
            sets: vec![],
            devices: vec![],
            position: 0,
            estimated_start: None,
            reason: String::new(),
            window: Some(PlanWindow { kind, start, end, nodes: nodes.iter().map(|n| n.to_string()).collect() }),
        }
    }

    #[test]
    fn each_window_is_a_bar_on_each_of_its_nodes_after_the_one_before() {
        let plan = Plan {
            now: 1000,
            queues: vec![],
            groups: vec![
                windowed("run", WindowKind::Running, 900, Some(1600), &["n1", "n2", "n2"]),
                windowed("next", WindowKind::Reserved, 1600, Some(2200), &["n1", "n2"]),
                windowed("later", WindowKind::Estimated, 2200, None, &["n3"]),
            ],
            nodes: vec![],
            set_asides: vec![],
        };
        let picture = svg(&plan);
        assert_eq!(picture.matches(r#"class="bar running""#).count(), 2, "one bar per node, not per member");
        assert_eq!(picture.matches(r#"class="bar reserved""#).count(), 2);
        assert_eq!(picture.matches(r#"class="bar estimated""#).count(), 1);
        assert_eq!(picture.matches(r#"<text class="node""#).count(), 3);
        assert!(picture.contains("ns/later: estimated from in 20m until it finishes"), "{picture}");
        // The reserved bars start where the running ones end.
        let x_of = |class: &str| {
            let at = picture.find(&format!(r#"class="bar {class}""#)).unwrap();
            let rest = &picture[at..];
            let x: f64 = rest.split("x=\"").nth(1).unwrap().split('"').next().unwrap().parse().unwrap();
            let w: f64 = rest.split("width=\"").nth(1).unwrap().split('"').next().unwrap().parse().unwrap();
            (x, w)
        };
        let (run_x, run_w) = x_of("running");
        let (next_x, _) = x_of("reserved");
        assert!((run_x + run_w - next_x).abs() < 0.2, "{run_x} + {run_w} vs {next_x}");
        assert!(svg(&Plan { groups: vec![], ..plan }).contains("Nothing runs or waits"));
    }

    #[test]
    fn a_reservation_window_is_a_band_on_its_nodes_under_the_bars() {
        let set_aside = |start: i64, end: i64| ReservationWindow {
            reservation: "training".into(),
            start,
            end,
            nodes: vec!["n1".into(), "n9".into()],
            error: None,
        };
        let plan = Plan {
            now: 1000,
            queues: vec![],
            groups: vec![windowed("run", WindowKind::Running, 900, Some(1600), &["n1"])],
            nodes: vec![],
            set_asides: vec![set_aside(1300, 2000), set_aside(90_000, 95_000)],
        };
        let picture = svg(&plan);
        assert_eq!(picture.matches(r#"class="set-aside""#).count(), 2, "one band per node, the far window left out");
        assert!(picture.contains("reservation training: from in 5m to in 16m"), "{picture}");
        assert_eq!(
            picture.matches(r#"<text class="node""#).count(),
            2,
            "its nodes are rows even with no group on them"
        );
        assert!(picture.find("set-aside").unwrap() < picture.find("bar running").unwrap(), "bars drawn over it");
        // With no group window, the reservations set the time shown.
        let alone = svg(&Plan { groups: vec![], ..plan });
        assert_eq!(alone.matches(r#"class="set-aside""#).count(), 4, "{alone}");
    }
}
