//! The timeline: running, reserved and estimated groups as bars on the nodes they hold, from a
//! little before now into the future, as the planner sees it. One SVG, made on the server.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

use muster_queue::{Plan, PlannedGroup, WindowKind};

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
    if windows.is_empty() {
        return r#"<p class="empty">Nothing runs or waits with a planned start.</p>"#.into();
    }
    let rows = rows(plan, &windows);
    let now = plan.now;
    let latest = windows
        .iter()
        .filter_map(|g| g.window.as_ref())
        .map(|w| w.end.unwrap_or(w.start).max(w.start))
        .max()
        .unwrap_or(now);
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

/// The nodes that appear in any window, by topology domain then name, with their domain.
fn rows(plan: &Plan, windows: &[&PlannedGroup]) -> Vec<(Option<String>, String)> {
    let domain: BTreeMap<&str, &str> =
        plan.nodes.iter().filter_map(|n| n.domain.as_deref().map(|d| (n.name.as_str(), d))).collect();
    let used: BTreeSet<(Option<String>, String)> = windows
        .iter()
        .filter_map(|g| g.window.as_ref())
        .flat_map(|w| w.nodes.iter())
        .map(|n| (domain.get(n.as_str()).map(|d| d.to_string()), n.clone()))
        .collect();
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
}
