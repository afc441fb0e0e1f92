//! Summaries of measured times, and numbers printed the way the reports always printed them.

use serde::Serialize;

/// `x` rounded to `digits` decimals.
pub fn round(x: f64, digits: i32) -> f64 {
    let f = 10f64.powi(digits);
    (x * f).round() / f
}

/// The mean rounded to 2 decimals; none of nothing.
pub fn mean(xs: &[f64]) -> Option<f64> {
    (!xs.is_empty()).then(|| round(xs.iter().sum::<f64>() / xs.len() as f64, 2))
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Quantiles {
    pub p50: f64,
    pub p95: f64,
    pub max: f64,
}

/// p50, p95 and max (the element at `floor(f * n)`, 3 decimals); none of nothing.
pub fn quantiles(mut xs: Vec<f64>) -> Option<Quantiles> {
    if xs.is_empty() {
        return None;
    }
    xs.sort_by(f64::total_cmp);
    let q = |f: f64| round(xs[((f * xs.len() as f64) as usize).min(xs.len() - 1)], 3);
    Some(Quantiles { p50: q(0.5), p95: q(0.95), max: round(xs[xs.len() - 1], 3) })
}

/// Peak events per second over any `window`-second span (1 decimal).
pub fn peak_rate(times: &[f64], window: f64) -> f64 {
    let mut t = times.to_vec();
    t.sort_by(f64::total_cmp);
    let (mut best, mut i) = (0usize, 0usize);
    for j in 0..t.len() {
        while t[j] - t[i] >= window {
            i += 1;
        }
        best = best.max(j - i + 1);
    }
    round(best as f64 / window, 1)
}

/// A number as Python's `str` prints it: whole floats keep their `.0`, integers have none.
pub fn py(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Null => "None".into(),
        serde_json::Value::Number(n) if n.is_f64() => py_float(n.as_f64().unwrap_or(f64::NAN)),
        other => other.to_string(),
    }
}

pub fn py_float(x: f64) -> String {
    if x.is_finite() && x.fract() == 0.0 && x.abs() < 1e16 { format!("{x:.1}") } else { format!("{x}") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summaries() {
        assert_eq!(mean(&[1.0, 2.0, 4.0]), Some(2.33));
        assert_eq!(mean(&[]), None);
        let q = quantiles(vec![3.0, 1.0, 2.0, 4.0]).unwrap();
        assert_eq!((q.p50, q.p95, q.max), (3.0, 4.0, 4.0));
        assert_eq!(peak_rate(&[0.0, 1.0, 1.0, 2.0, 9.0], 5.0), 0.8);
        assert_eq!(py(&serde_json::json!(3.0)), "3.0");
        assert_eq!(py(&serde_json::json!(3)), "3");
        assert_eq!(py(&serde_json::json!(2.35)), "2.35");
        assert_eq!(py(&serde_json::Value::Null), "None");
    }
}
