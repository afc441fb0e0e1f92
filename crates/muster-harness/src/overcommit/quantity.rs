//! Kubernetes quantities ("1.5", "500m", "2Gi", "20e9", "4000001u") as exact amounts, parsed
//! here rather than by muster's own parser, so that the checker does not share muster's mistakes.

/// An amount in billionths of its unit (nanocores, nanobytes): exact for every quantity the
/// apiserver keeps, which rounds finer ones up to 1n.
pub type Nanos = i128;

pub const ONE: Nanos = 1_000_000_000;

#[derive(Debug, thiserror::Error, PartialEq)]
#[error("not a quantity: {0:?} (a number with an SI or binary suffix or an exponent, e.g. 500m, 2Gi, 1e3)")]
pub struct NotAQuantity(pub String);

/// `s` in nanos, rounded up (as the apiserver rounds).
pub fn nanos(s: &str) -> Result<Nanos, NotAQuantity> {
    let bad = || NotAQuantity(s.to_string());
    let t = s.trim();
    let (negative, t) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let number_end = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (number, suffix) = t.split_at(number_end);
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && fraction.is_empty() {
        return Err(bad());
    }
    // number = mantissa / 10^fraction digits; suffix = numerator / denominator.
    let mantissa: Nanos = format!("{whole}{fraction}").parse().map_err(|_| bad())?;
    let (numerator, denominator) = scale(suffix).ok_or_else(bad)?;
    let denominator = pow10(fraction.len() as i32).and_then(|d| d.checked_mul(denominator)).ok_or_else(bad)?;
    let amount = mantissa.checked_mul(numerator).and_then(|n| n.checked_mul(ONE)).ok_or_else(bad)?;
    let rounded_up = (amount + denominator - 1) / denominator;
    Ok(if negative { -rounded_up } else { rounded_up })
}

/// A suffix's value as numerator / denominator.
fn scale(suffix: &str) -> Option<(Nanos, Nanos)> {
    let decimal = |e: i32| if e >= 0 { Some((pow10(e)?, 1)) } else { Some((1, pow10(-e)?)) };
    let binary = |e: u32| Some((1i128 << e, 1));
    match suffix {
        "n" => decimal(-9),
        "u" => decimal(-6),
        "m" => decimal(-3),
        "" => decimal(0),
        "k" => decimal(3),
        "M" => decimal(6),
        "G" => decimal(9),
        "T" => decimal(12),
        "P" => decimal(15),
        "E" => decimal(18),
        "Ki" => binary(10),
        "Mi" => binary(20),
        "Gi" => binary(30),
        "Ti" => binary(40),
        "Pi" => binary(50),
        "Ei" => binary(60),
        _ => {
            let exponent = suffix.strip_prefix(['e', 'E'])?;
            let digits = exponent.trim_start_matches(['+', '-']);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            decimal(exponent.parse().ok()?)
        }
    }
}

fn pow10(e: i32) -> Option<Nanos> {
    10i128.checked_pow(u32::try_from(e).ok()?)
}

/// `v` for a log line, to 6 significant digits: memory and storage in Mi, the rest as a plain
/// number.
pub fn show(resource: &str, v: Nanos) -> String {
    let units = v as f64 / ONE as f64;
    if resource == "memory" || resource == "ephemeral-storage" || resource.starts_with("hugepages-") {
        format!("{}Mi", six_digits(units / f64::from(1 << 20)))
    } else {
        six_digits(units)
    }
}

fn six_digits(x: f64) -> String {
    let magnitude = if x == 0.0 { 0 } else { x.abs().log10().floor() as i32 };
    let decimals = usize::try_from(5 - magnitude).unwrap_or(0);
    let text = format!("{x:.decimals$}");
    if text.contains('.') { text.trim_end_matches('0').trim_end_matches('.').to_string() } else { text }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_in_every_form_the_apiserver_keeps() {
        for (s, want) in [
            ("1e3", 1000 * ONE),
            ("0.5", ONE / 2),
            ("100Mi", 100 * (1 << 20) * ONE),
            ("2k", 2000 * ONE),
            ("1500m", 3 * ONE / 2),
            ("20e9", 20_000_000_000 * ONE),
            ("4000001u", 4_000_001_000),
            ("1n", 1),
            (".5Ki", 512 * ONE),
            ("1E-3", ONE / 1000),
        ] {
            assert_eq!(nanos(s), Ok(want), "{s}");
        }
    }

    #[test]
    fn amounts_show_six_significant_digits() {
        let mi = |s: &str| show("memory", nanos(s).unwrap());
        assert_eq!((mi("20e9"), mi("32Gi")), ("19073.5Mi".into(), "32768Mi".into()));
        assert_eq!(show("cpu", nanos("4000001u").unwrap()), "4");
        assert_eq!(show("cpu", nanos("8.011").unwrap()), "8.011");
        assert_eq!(show("cpu", nanos("10m").unwrap()), "0.01");
        assert_eq!(show("pods", 0), "0");
    }

    #[test]
    fn finer_than_a_nano_rounds_up_and_nonsense_is_refused() {
        assert_eq!(nanos("0.1n"), Ok(1));
        for s in ["", "m", "1x", "1.2.3", "e3", "1e", "1Qi", "1e+", "99999999999999999999999999999E"] {
            assert!(nanos(s).is_err(), "{s}");
        }
    }
}
