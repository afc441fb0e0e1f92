//! The pages: the plan (queues, waiting groups, running groups, the timeline, nodes) and one
//! group (its window, reason and events). Plain HTML; the script only reloads `<main>`.

use std::collections::BTreeSet;
use std::fmt::Write;

use muster_queue::{NodePlan, Plan, PlannedGroup, QueuePlan};

use crate::format::{amount, esc, relative};
use crate::timeline;
use crate::visible::Viewer;

/// A whole page around `main`; with `reload` its script (`/assets/dashboard.js`) reloads `main`
/// every few seconds (not a form's page, whose input it would wipe). The style and the script are
/// files of their own, so the Content-Security-Policy can forbid inline ones.
pub fn document(title: &str, main: &str, reload: bool) -> String {
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{title}</title>\
         <link rel=\"stylesheet\" href=\"{css}\"><script src=\"{js}\" defer></script></head>\
         <body><main{reload}>{main}</main></body></html>",
        title = esc(title),
        reload = if reload { " data-reload" } else { "" },
        css = crate::assets::STYLE_PATH,
        js = crate::assets::SCRIPT_PATH,
    )
}

/// The content of the plan's page.
pub fn plan(plan: &Plan, viewer: &Viewer) -> String {
    let mut out = String::new();
    let _ = write!(out, "<h1>muster: the plan</h1><p class=\"muted\">as of {}", esc(&utc(plan.now)));
    if !viewer.name.is_empty() {
        let _ = write!(out, ", seen as {}", esc(&viewer.name));
    }
    out.push_str("</p>");
    if viewer.queues {
        queues(&mut out, &plan.queues);
    }
    waiting(&mut out, plan);
    running(&mut out, plan);
    out.push_str(
        "<h2>Timeline</h2><p class=\"legend\"><span class=\"running\"></span>running\
         <span class=\"reserved\"></span>reserved (backfill never delays it)\
         <span class=\"estimated\"></span>estimated (not held)\
         <span class=\"set-aside\"></span>set aside by a calendar reservation</p>",
    );
    out.push_str(&timeline::svg(plan));
    if viewer.nodes {
        nodes(&mut out, &plan.nodes);
    }
    out
}

/// The content shown when this replica does not lead (it has no plan).
pub fn no_plan() -> String {
    "<h1>muster: the plan</h1><p class=\"empty\">This replica does not lead, or has not started \
     yet: it has no plan. Open the dashboard of the replica holding the Lease muster-controller.</p>"
        .into()
}

fn queues(out: &mut String, queues: &[QueuePlan]) {
    out.push_str("<h2>Queues</h2><table id=\"queues\"><tr><th>queue</th><th>waiting</th><th>admitted</th><th>usage / nominal quota</th></tr>");
    for q in queues {
        let resources: BTreeSet<&String> = q.usage.keys().chain(q.nominal.keys()).collect();
        let usage: Vec<String> = resources
            .iter()
            .map(|r| {
                let used = q.usage.get(*r).copied().unwrap_or(0);
                match q.nominal.get(*r) {
                    Some(n) => format!("{} {} / {}", esc(r), amount(r, used), amount(r, *n)),
                    None => format!("{} {}", esc(r), amount(r, used)),
                }
            })
            .collect();
        let _ = write!(
            out,
            "<tr class=\"queue\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&q.name),
            q.pending,
            q.admitted,
            usage.join(", ")
        );
    }
    out.push_str("</table>");
}

fn waiting(out: &mut String, plan: &Plan) {
    let groups: Vec<&PlannedGroup> = plan.groups.iter().filter(|g| g.position > 0).collect();
    let _ = write!(out, "<h2>Waiting ({})</h2>", groups.len());
    if groups.is_empty() {
        out.push_str("<p class=\"empty\">No group waits.</p>");
        return;
    }
    out.push_str("<table id=\"waiting\"><tr><th>queue</th><th>#</th><th>group</th><th>members</th><th>estimated start</th><th>why</th></tr>");
    for g in groups {
        let start = g.estimated_start.map_or_else(
            || "<span class=\"muted\">no estimate</span>".to_string(),
            |t| format!("{} <span class=\"muted\">({})</span>", esc(&relative(t, plan.now)), esc(&utc(t))),
        );
        let _ = write!(
            out,
            "<tr class=\"waiting\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{start}</td><td>{}</td></tr>",
            esc(&g.queue),
            g.position,
            link(g),
            g.members,
            esc(&g.reason)
        );
    }
    out.push_str("</table>");
}

fn running(out: &mut String, plan: &Plan) {
    let groups: Vec<&PlannedGroup> = plan.groups.iter().filter(|g| g.position == 0).collect();
    let _ = write!(out, "<h2>Running ({})</h2>", groups.len());
    if groups.is_empty() {
        out.push_str("<p class=\"empty\">No group runs.</p>");
        return;
    }
    out.push_str("<table id=\"running\"><tr><th>queue</th><th>group</th><th>members</th><th>started</th><th>expected end</th><th>nodes</th></tr>");
    for g in groups {
        let (started, end, nodes) = match &g.window {
            Some(w) => (
                relative(w.start, plan.now),
                w.end.map_or_else(|| "when it finishes".to_string(), |e| relative(e, plan.now)),
                w.nodes.iter().collect::<BTreeSet<_>>().len(),
            ),
            None => (String::new(), String::new(), 0),
        };
        let _ = write!(
            out,
            "<tr class=\"running\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{nodes}</td></tr>",
            esc(&g.queue),
            link(g),
            g.members,
            esc(&started),
            esc(&end)
        );
    }
    out.push_str("</table>");
}

fn nodes(out: &mut String, nodes: &[NodePlan]) {
    let resources: BTreeSet<&String> = nodes.iter().flat_map(|n| n.capacity.keys()).filter(|r| *r != "pods").collect();
    let _ = write!(out, "<h2>Nodes ({})</h2><table id=\"nodes\"><tr><th>domain</th><th>node</th>", nodes.len());
    for r in &resources {
        let _ = write!(out, "<th>{}</th>", esc(r));
    }
    out.push_str("</tr>");
    let mut sorted: Vec<&NodePlan> = nodes.iter().collect();
    sorted.sort_by(|a, b| (&a.domain, &a.name).cmp(&(&b.domain, &b.name)));
    for n in sorted {
        let off = if n.schedulable { "" } else { " <span class=\"muted\">(not schedulable)</span>" };
        let _ = write!(
            out,
            "<tr class=\"node\"><td>{}</td><td>{}{off}</td>",
            esc(n.domain.as_deref().unwrap_or("")),
            esc(&n.name)
        );
        for r in &resources {
            let cap = n.capacity.get(*r).copied().unwrap_or(0);
            let used = n.used.get(*r).copied().unwrap_or(0);
            let pct = used.saturating_mul(100).checked_div(cap).unwrap_or(0).min(100);
            let _ = write!(
                out,
                "<td><meter min=\"0\" max=\"100\" value=\"{pct}\"></meter>{} / {}</td>",
                amount(r, used),
                amount(r, cap)
            );
        }
        out.push_str("</tr>");
    }
    out.push_str("</table>");
}

/// One Kubernetes event of a group, for its page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventLine {
    pub time: String,
    pub kind: String,
    pub reason: String,
    pub message: String,
}

/// The content of one group's page; `None` when the plan has no such group (it ended, or the
/// viewer may not see it).
pub fn group(plan: &Plan, namespace: &str, name: &str, events: &[EventLine]) -> Option<String> {
    let g = plan.groups.iter().find(|g| &*g.key.namespace == namespace && &*g.key.name == name)?;
    let mut out = String::new();
    let _ = write!(
        out,
        "<p><a href=\"/\">the plan</a></p><h1>{}/{}</h1><table id=\"group\"><tr><th>state</th><td>{:?}</td></tr>\
         <tr><th>queue</th><td>{}</td></tr><tr><th>members</th><td>{}</td></tr>",
        esc(namespace),
        esc(name),
        g.state,
        esc(&g.queue),
        g.members
    );
    if !g.sets.is_empty() {
        let sets: Vec<String> = (g.sets.iter())
            .map(|s| format!("{} {}{}", s.name, s.members, if s.optional { " (optional)" } else { "" }))
            .collect();
        let _ = write!(out, "<tr><th>sets</th><td>{}</td></tr>", esc(&sets.join(", ")));
    }
    if !g.devices.is_empty() {
        let _ = write!(out, "<tr><th>devices per member</th><td>{}</td></tr>", esc(&g.devices.join("; ")));
    }
    if g.position > 0 {
        let _ = write!(out, "<tr><th>position</th><td>{}</td></tr>", g.position);
    }
    if let Some(t) = g.estimated_start {
        let _ =
            write!(out, "<tr><th>estimated start</th><td>{} ({})</td></tr>", esc(&relative(t, plan.now)), esc(&utc(t)));
    }
    let _ = write!(out, "<tr><th>why</th><td>{}</td></tr>", esc(&g.reason));
    if let Some(w) = &g.window {
        let end = w.end.map_or_else(|| "until it finishes".to_string(), |e| format!("to {}", relative(e, plan.now)));
        let _ = write!(
            out,
            "<tr><th>window</th><td>{} from {} {}</td></tr><tr><th>nodes</th><td>{}</td></tr>",
            timeline::class(w.kind),
            esc(&relative(w.start, plan.now)),
            esc(&end),
            esc(&w.nodes.join(", "))
        );
    }
    out.push_str("</table><h2>Events</h2>");
    if events.is_empty() {
        out.push_str("<p class=\"empty\">No events.</p>");
    } else {
        out.push_str("<table id=\"events\"><tr><th>time</th><th>type</th><th>reason</th><th>message</th></tr>");
        for e in events {
            let _ = write!(
                out,
                "<tr class=\"event\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&e.time),
                esc(&e.kind),
                esc(&e.reason),
                esc(&e.message)
            );
        }
        out.push_str("</table>");
    }
    let only = Plan { groups: vec![g.clone()], ..plan.clone() };
    out.push_str("<h2>Timeline</h2>");
    out.push_str(&timeline::svg(&only));
    Some(out)
}

fn link(g: &PlannedGroup) -> String {
    format!("<a href=\"/groups/{ns}/{name}\">{ns}/{name}</a>", ns = esc(&g.key.namespace), name = esc(&g.key.name))
}

/// Unix seconds as `2026-11-24 14:05:09 UTC`.
fn utc(t: i64) -> String {
    k8s_openapi::jiff::Timestamp::from_second(t)
        .map(|ts| ts.strftime("%Y-%m-%d %H:%M:%S UTC").to_string())
        .unwrap_or_else(|_| t.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use muster_queue::{GroupKey, GroupState, PlanWindow, PlannedSet, WindowKind};

    fn plan() -> Plan {
        Plan {
            now: 1000,
            queues: vec![],
            groups: vec![PlannedGroup {
                key: GroupKey { namespace: "ml".into(), name: "<gang>".into() },
                queue: "q".into(),
                state: GroupState::Reserved,
                members: 2,
                sets: vec![],
                devices: vec![],
                position: 1,
                estimated_start: Some(1300),
                reason: "waiting for capacity".into(),
                window: Some(PlanWindow {
                    kind: WindowKind::Reserved,
                    start: 1300,
                    end: None,
                    nodes: vec!["n1".into(), "n2".into()],
                }),
            }],
            nodes: vec![],
            set_asides: vec![],
        }
    }

    #[test]
    fn a_waiting_group_is_listed_escaped_with_its_start_and_its_page_shows_its_window() {
        let main = super::plan(&plan(), &Viewer::everything());
        assert!(main.contains("<a href=\"/groups/ml/&lt;gang&gt;\">ml/&lt;gang&gt;</a>"), "{main}");
        assert!(main.contains("<td>in 5m <span class=\"muted\">(1970-01-01 00:21:40 UTC)</span></td>"), "{main}");
        assert!(main.contains("No group runs."));
        let events =
            [EventLine { time: "t".into(), kind: "Normal".into(), reason: "Reserved".into(), message: "m".into() }];
        let page = group(&plan(), "ml", "<gang>", &events).expect("the group is in the plan");
        assert!(page.contains("<th>window</th><td>reserved from in 5m until it finishes</td>"), "{page}");
        assert!(page.contains("<td>n1, n2</td>") && page.contains("<tr class=\"event\">"));
        assert!(group(&plan(), "ml", "other", &[]).is_none());
        assert!(!page.contains("<th>sets</th>"), "alike members have no sets");
        let mut sets = plan();
        let set = |name: &str, members, optional| PlannedSet { name: name.into(), members, optional };
        sets.groups[0].sets = vec![set("launcher", 1, false), set("<worker>", 4, false), set("spare", 4, true)];
        let page = group(&sets, "ml", "<gang>", &[]).unwrap();
        assert!(
            page.contains("<tr><th>sets</th><td>launcher 1, &lt;worker&gt; 4, spare 4 (optional)</td></tr>"),
            "{page}"
        );
        assert!(!page.contains("devices per member"), "no devices asked");
        sets.groups[0].devices = vec![
            r#"<worker>: 8 gpu.example.com devices where device.attributes["gpu.example.com"].model == "h100""#.into(),
        ];
        let page = group(&sets, "ml", "<gang>", &[]).unwrap();
        assert!(
            page.contains("<th>devices per member</th><td>&lt;worker&gt;: 8 gpu.example.com devices where device.attributes[&quot;gpu.example.com&quot;].model == &quot;h100&quot;</td>"),
            "{page}"
        );
    }
}
