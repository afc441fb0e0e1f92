//! Text as kubectl writes it: tables, ages and times, quantities, runs of node names.

use k8s_openapi::jiff::Timestamp;

use crate::Quantity;
use crate::group::MemberAllocation;

pub fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The longest reason a normal table shows; `-o wide` shows all of it.
pub const REASON_WIDTH: usize = 80;

pub fn truncate(s: &str, width: usize) -> String {
    if s.chars().count() <= width {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(width.saturating_sub(3)).collect();
        t.push_str("...");
        t
    }
}

pub fn or_none(s: String) -> String {
    if s.is_empty() { "<none>".into() } else { s }
}

/// A kubectl-style table: uppercase headers, columns three spaces apart, no trailing blanks.
pub fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (i, cell) in r.iter().enumerate() {
            if let Some(w) = widths.get_mut(i) {
                *w = (*w).max(cell.chars().count());
            }
        }
    }
    let mut out = String::new();
    let header: Vec<String> = headers.iter().map(|h| h.to_string()).collect();
    for r in std::iter::once(&header).chain(rows) {
        let mut line = String::new();
        for (i, cell) in r.iter().enumerate() {
            if i + 1 == r.len() {
                line.push_str(cell);
            } else {
                let pad = widths[i] - cell.chars().count();
                line.push_str(cell);
                line.push_str(&" ".repeat(pad + 3));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// A time as the apiserver writes it, to the second.
pub fn absolute(t: Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// `in 3m` for a time ahead of `now`, `3m ago` for one behind it, `now` within a second.
pub fn relative(now: Timestamp, t: Timestamp) -> String {
    let d = t.as_second() - now.as_second();
    match d {
        0 => "now".into(),
        d if d > 0 => format!("in {}", human_duration(d)),
        d => format!("{} ago", human_duration(-d)),
    }
}

/// A duration the way kubectl shows ages: exact while short, coarser as it grows
/// (`45s`, `2m30s`, `15m`, `3h20m`, `12h`, `2d4h`, `30d`, `3y`).
pub fn human_duration(secs: i64) -> String {
    let s = secs.max(0);
    let (m, h, d) = (s / 60, s / 3600, s / 86_400);
    if s < 120 {
        format!("{s}s")
    } else if m < 10 {
        if s % 60 == 0 { format!("{m}m") } else { format!("{m}m{}s", s % 60) }
    } else if h < 3 {
        format!("{m}m")
    } else if h < 8 {
        if m % 60 == 0 { format!("{h}h") } else { format!("{h}h{}m", m % 60) }
    } else if h < 48 {
        format!("{h}h")
    } else if h < 192 {
        if h % 24 == 0 { format!("{d}d") } else { format!("{d}d{}h", h % 24) }
    } else if d < 730 {
        format!("{d}d")
    } else {
        format!("{}y", d / 365)
    }
}

/// Members placed on more nodes than this are summarised as node ranges.
pub const ALLOCATION_LIST_MAX: usize = 8;

/// The allocation as lines: one per member for small groups (`member 0 -> node-1`), else runs of
/// consecutively numbered nodes with their member counts (`node-1..node-9 (10 members)`).
pub fn allocation_lines(allocation: &[MemberAllocation]) -> Vec<String> {
    let mut sorted: Vec<&MemberAllocation> = allocation.iter().collect();
    sorted.sort_by_key(|a| a.member);
    if sorted.len() <= ALLOCATION_LIST_MAX {
        return sorted.iter().map(|a| format!("member {} -> {}", a.member, a.node)).collect();
    }
    // Members per node, nodes in natural order (node-2 before node-10).
    let mut per_node: Vec<(String, usize)> = Vec::new();
    let mut nodes: Vec<&str> = sorted.iter().map(|a| a.node.as_str()).collect();
    nodes.sort_by(|a, b| natural_key(a).cmp(&natural_key(b)));
    for n in nodes {
        match per_node.last_mut() {
            Some((last, count)) if last == n => *count += 1,
            _ => per_node.push((n.to_string(), 1)),
        }
    }
    let mut runs: Vec<(String, String, usize)> = Vec::new();
    for (node, count) in per_node {
        match runs.last_mut() {
            Some((_, last, c)) if follows(last, &node) => {
                *last = node;
                *c += count;
            }
            _ => runs.push((node.clone(), node, count)),
        }
    }
    let plural = |c: usize| if c == 1 { "member" } else { "members" };
    runs.into_iter()
        .map(|(first, last, c)| {
            if first == last {
                format!("{first} ({c} {})", plural(c))
            } else {
                format!("{first}..{last} ({c} {})", plural(c))
            }
        })
        .collect()
}

/// A name split into its text and a trailing number, if any: `node-10` is (`node-`, `10`).
pub fn split_number(name: &str) -> (&str, &str) {
    let digits = name.len() - name.bytes().rev().take_while(u8::is_ascii_digit).count();
    name.split_at(digits)
}

pub fn natural_key(name: &str) -> (&str, usize, &str) {
    let (prefix, digits) = split_number(name);
    // Compare numbers by length first, then text: same order as their values, any size.
    let trimmed = digits.trim_start_matches('0');
    (prefix, trimmed.len(), trimmed)
}

/// Whether `next` is the node after `prev` in a numbered series (`node-9` -> `node-10`,
/// `gpu-007` -> `gpu-008`).
pub fn follows(prev: &str, next: &str) -> bool {
    let (p1, d1) = split_number(prev);
    let (p2, d2) = split_number(next);
    if p1 != p2 || d1.is_empty() || d2.is_empty() {
        return false;
    }
    let (Ok(a), Ok(b)) = (d1.parse::<u128>(), d2.parse::<u128>()) else { return false };
    if a.checked_add(1) != Some(b) {
        return false;
    }
    // Zero-padded series keep their width; unpadded ones may grow (9 -> 10).
    let padded = d1.len() > 1 && d1.starts_with('0');
    !padded || d2.len() == d1.len()
}

/// A per-member amount as people write it: the controller stores base units (`2000m`,
/// `2147483648`), shown as `2` and `2Gi`; anything else as written.
pub fn quantity_text(resource: &str, q: &Quantity) -> String {
    let bytes = resource == "memory" || resource.ends_with("storage") || resource.starts_with("hugepages-");
    match q {
        Quantity::Int(i) if bytes && *i > 0 => {
            let unit = ["Ei", "Pi", "Ti", "Gi", "Mi", "Ki"]
                .iter()
                .zip([60, 50, 40, 30, 20, 10])
                .find(|(_, shift)| i % (1i64 << shift) == 0);
            match unit {
                Some((u, shift)) => format!("{}{u}", i >> shift),
                None => i.to_string(),
            }
        }
        Quantity::Int(i) => i.to_string(),
        Quantity::Text(s) => match s.strip_suffix('m').and_then(|m| m.parse::<u64>().ok()) {
            Some(milli) if milli % 1000 == 0 => (milli / 1000).to_string(),
            _ => s.clone(),
        },
    }
}
