//! Text for people: escaped HTML, resource amounts in their usual units, times relative to now.

/// `text` safe inside HTML text and attribute values.
pub fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// An amount of `resource` in base units (millicores for cpu, bytes for memory and storage) as
/// people write it: `12.5` cpu, `64Gi`, `316Mi`, `8`.
pub fn amount(resource: &str, base: u64) -> String {
    const GI: u64 = 1 << 30;
    const MI: u64 = 1 << 20;
    match resource {
        "cpu" => trim(base as f64 / 1000.0),
        "memory" | "ephemeral-storage" if base >= GI => format!("{}Gi", trim(base as f64 / GI as f64)),
        "memory" | "ephemeral-storage" => format!("{}Mi", trim(base as f64 / MI as f64)),
        _ => base.to_string(),
    }
}

/// One decimal at most, none when whole.
fn trim(x: f64) -> String {
    let s = format!("{x:.1}");
    s.strip_suffix(".0").map_or(s.clone(), str::to_string)
}

/// `at` relative to `now`: `now`, `in 5m`, `12s ago`, `in 2h 5m`.
pub fn relative(at: i64, now: i64) -> String {
    let d = at - now;
    if d == 0 {
        return "now".into();
    }
    let span = duration(d.unsigned_abs());
    if d > 0 { format!("in {span}") } else { format!("{span} ago") }
}

/// A span in seconds: `45s`, `5m`, `2h 5m`, `3d 4h`.
pub fn duration(secs: u64) -> String {
    match secs {
        s if s < 60 => format!("{s}s"),
        s if s < 3600 => format!("{}m", s / 60),
        s if s < 86_400 => match (s / 3600, s % 3600 / 60) {
            (h, 0) => format!("{h}h"),
            (h, m) => format!("{h}h {m}m"),
        },
        s => format!("{}d {}h", s / 86_400, s % 86_400 / 3600),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn html_is_escaped_and_amounts_and_times_read_as_people_write_them() {
        assert_eq!(esc(r#"<a href="x">'&'</a>"#), "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;");
        assert_eq!(amount("cpu", 12_500), "12.5");
        assert_eq!(amount("cpu", 4000), "4");
        assert_eq!(amount("memory", 64 << 30), "64Gi");
        assert_eq!(amount("memory", 3 << 29), "1.5Gi");
        assert_eq!(amount("memory", 316 << 20), "316Mi");
        assert_eq!(amount("memory", 0), "0Mi");
        assert_eq!(amount("nvidia.com/gpu", 8), "8");
        assert_eq!(relative(100, 100), "now");
        assert_eq!(relative(400, 100), "in 5m");
        assert_eq!(relative(88, 100), "12s ago");
        assert_eq!(relative(100 + 7500, 100), "in 2h 5m");
        assert_eq!(duration(3 * 86_400 + 4 * 3600), "3d 4h");
    }
}
