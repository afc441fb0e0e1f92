//! Kubernetes quantity strings ("500m", "2Gi", "1500e6") turned into integers in a resource's
//! base unit, by apimachinery's grammar and rounding (`resource.ParseQuantity`, then
//! `MilliValue()` for cpu and `Value()` for everything else, as kube-scheduler counts requests):
//!
//! ```text
//! quantity ::= sign? digits ("." digits?)? suffix | sign? "." digits suffix
//! suffix   ::= "" | n | u | m | k | M | G | T | P | E | Ki | Mi | Gi | Ti | Pi | Ei
//!            | (e | E) sign? digits
//! ```
//!
//! The apiserver keeps a quantity in its canonical form, and that form uses an exponent
//! (`1500e6`) or a small suffix (`1500u`) for some values; every form it accepts must count here,
//! since an amount that does not count is a node over-committed. The differential test
//! (`tests/apimachinery_quantities.rs`) holds this to apimachinery's own parser.

use std::fmt;

/// Largest amount of any resource muster accepts: far above any real machine, far below overflow
/// when thousands of amounts are summed.
pub const MAX_AMOUNT: u64 = 1 << 60;

/// Why a quantity string was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QuantityError {
    Empty,
    Malformed(String),
    Negative(String),
    TooLarge(String),
    Fractional(String),
}

impl fmt::Display for QuantityError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Empty => write!(f, "empty quantity; write a number such as \"2\", \"500m\" or \"4Gi\""),
            Self::Malformed(s) => write!(
                f,
                "{s:?} is not a quantity; write a decimal number with an optional suffix (n, u, m, k, M, G, T, \
                 P, E, Ki, Mi, Gi, Ti, Pi, Ei) or exponent (e6), such as \"500m\", \"4Gi\" or \"1500e6\""
            ),
            Self::Negative(s) => write!(f, "{s:?} is negative; amounts must be at least 0"),
            Self::TooLarge(s) => write!(f, "{s:?} is absurdly large; the limit is {MAX_AMOUNT} base units"),
            Self::Fractional(s) => write!(
                f,
                "{s:?} is not a whole number; this resource is counted in whole units (Kubernetes refuses a \
                 fraction of an extended resource or of pods), so write a whole number such as \"1\""
            ),
        }
    }
}

impl std::error::Error for QuantityError {}

/// A quantity read exactly: `digits` x 10^`exp10` x 2^`exp2`, `digits` without leading zeros.
struct Exact {
    negative: bool,
    digits: Vec<u8>,
    exp10: i64,
    exp2: u32,
}

/// Splits `text` as apimachinery's `parseQuantityString` does: a sign, the digits before and after
/// the point (either may be empty: "1." and ".5" are quantities), and the rest as the suffix.
fn read(text: &str) -> Result<Exact, QuantityError> {
    if text.is_empty() {
        return Err(QuantityError::Empty);
    }
    let malformed = || QuantityError::Malformed(text.to_string());
    let (negative, rest) = match text.as_bytes()[0] {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
    let (int_part, rest) = rest.split_at(int_len);
    let (frac_part, suffix) = match rest.strip_prefix('.') {
        Some(r) => r.split_at(r.bytes().take_while(u8::is_ascii_digit).count()),
        None => ("", rest),
    };
    let (exp10, exp2) = match suffix {
        "" => (0, 0),
        "n" => (-9, 0),
        "u" => (-6, 0),
        "m" => (-3, 0),
        "k" => (3, 0),
        "M" => (6, 0),
        "G" => (9, 0),
        "T" => (12, 0),
        "P" => (15, 0),
        "E" => (18, 0),
        "Ki" => (0, 10),
        "Mi" => (0, 20),
        "Gi" => (0, 30),
        "Ti" => (0, 40),
        "Pi" => (0, 50),
        "Ei" => (0, 60),
        _ => (decimal_exponent(suffix).ok_or_else(malformed)?, 0),
    };
    // With no digit at all ("+", ".", "m", "e3") apimachinery reads 0, except where its exact
    // path takes over (a binary suffix of Pi or more, a decimal exponent below -9), which cannot
    // read an empty number and refuses it.
    if int_part.is_empty() && frac_part.is_empty() && (exp2 >= 50 || exp10 < -9) {
        return Err(malformed());
    }
    let digits: Vec<u8> = int_part.bytes().chain(frac_part.bytes()).map(|b| b - b'0').skip_while(|d| *d == 0).collect();
    Ok(Exact { negative, digits, exp10: exp10 - frac_part.len() as i64, exp2 })
}

/// The exponent of an `e`/`E` suffix. apimachinery reads it as a 64-bit integer and keeps its low
/// 32 bits (`int32(parsed)`), so `1e4294967296` is 1: the same here, to count what it counts.
fn decimal_exponent(suffix: &str) -> Option<i64> {
    let number = suffix.strip_prefix(['e', 'E'])?;
    let unsigned = number.strip_prefix(['+', '-']).unwrap_or(number);
    if unsigned.is_empty() || !unsigned.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(i64::from(number.parse::<i64>().ok()? as i32))
}

/// Parses `text` and returns it multiplied by `scale` (1000 for cpu, whose base unit is the
/// millicore; 1 for everything else), rounded up as Kubernetes counts requests (a non-zero
/// amount never counts as zero).
pub fn parse_scaled(text: &str, scale: u64) -> Result<u64, QuantityError> {
    scaled(text, scale).map(|(value, _)| value)
}

/// Parses `text` as a count of whole units (an extended resource, pods): Kubernetes refuses a
/// fraction of one, so rounding it up would hold what nobody asked for. As apimachinery judges
/// it, by the amount in thousandths rounded up: less than a thousandth over a whole number is
/// that number's next.
pub fn parse_whole(text: &str) -> Result<u64, QuantityError> {
    match scaled(text, 1)? {
        (value, false) => Ok(value),
        (_, true) => match scaled(text, 1000) {
            Ok((milli, _)) if milli.is_multiple_of(1000) => Ok(milli / 1000),
            _ => Err(QuantityError::Fractional(text.to_string())),
        },
    }
}

/// [`parse_scaled`], and whether it rounded a fraction up.
fn scaled(text: &str, scale: u64) -> Result<(u64, bool), QuantityError> {
    let q = read(text)?;
    let too_large = || QuantityError::TooLarge(text.to_string());
    if q.digits.is_empty() {
        return Ok((0, false));
    }
    if q.negative {
        return Err(QuantityError::Negative(text.to_string()));
    }
    // digits x 10^exp10 is at least 10^(len - 1 + exp10): from 10^19 on it is above MAX_AMOUNT
    // whatever the scale, and this bounds the work below for absurd exponents.
    if q.digits.len() as i64 - 1 + q.exp10 >= 19 {
        return Err(too_large());
    }
    let factor = u128::from(scale) << q.exp2;
    // digits x factor, as decimal digits (the product of a digit and factor plus the carry fits
    // in u128: factor is below 2^71).
    let mut product = Vec::with_capacity(q.digits.len() + 22);
    let mut carry = 0u128;
    for d in q.digits.iter().rev() {
        let v = u128::from(*d) * factor + carry;
        product.push((v % 10) as u8);
        carry = v / 10;
    }
    while carry > 0 {
        product.push((carry % 10) as u8);
        carry /= 10;
    }
    product.reverse();
    // product x 10^exp10, rounded up: drop the last -exp10 digits, adding one if any was not 0.
    let (whole, dropped): (&[u8], &[u8]) = if q.exp10 >= 0 {
        (&product, &[])
    } else {
        let cut = product.len().saturating_sub(q.exp10.unsigned_abs() as usize);
        product.split_at(cut)
    };
    let mut value: u128 = 0;
    for d in whole.iter().copied().chain(std::iter::repeat_n(0, q.exp10.max(0) as usize)) {
        value = value.checked_mul(10).and_then(|v| v.checked_add(u128::from(d))).ok_or_else(too_large)?;
    }
    let rounded = dropped.iter().any(|d| *d != 0);
    if rounded {
        value += 1;
    }
    if value > u128::from(MAX_AMOUNT) {
        return Err(too_large());
    }
    Ok((value as u64, rounded))
}

/// Formats an amount in base units the way `kubectl` shows it: cpu as cores or millicores,
/// byte counts with the largest exact binary suffix, everything else as a plain integer.
pub fn format_amount(amount: u64, unit: Unit) -> String {
    match unit {
        Unit::Millicores if amount.is_multiple_of(1000) => (amount / 1000).to_string(),
        Unit::Millicores => format!("{amount}m"),
        Unit::Bytes => {
            for (suffix, shift) in [("Ei", 60), ("Pi", 50), ("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10)] {
                if amount != 0 && amount.is_multiple_of(1u64 << shift) {
                    return format!("{}{suffix}", amount >> shift);
                }
            }
            amount.to_string()
        }
        Unit::Count => amount.to_string(),
    }
}

/// The base unit a resource is counted in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Unit {
    Millicores,
    Bytes,
    Count,
}

impl Unit {
    /// The JGF `unit` string for this unit.
    pub fn jgf_name(self) -> &'static str {
        match self {
            Self::Millicores => "m",
            Self::Bytes => "B",
            Self::Count => "",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_cpu_and_memory_forms() {
        assert_eq!(parse_scaled("2", 1000), Ok(2000));
        assert_eq!(parse_scaled("500m", 1000), Ok(500));
        assert_eq!(parse_scaled("1.5", 1000), Ok(1500));
        assert_eq!(parse_scaled("0.0001", 1000), Ok(1), "rounds requests up");
        assert_eq!(parse_scaled("2Gi", 1), Ok(2 << 30));
        assert_eq!(parse_scaled("316Mi", 1), Ok(316 << 20));
        assert_eq!(parse_scaled("1k", 1), Ok(1000));
        assert_eq!(parse_scaled("1500m", 1), Ok(2));
    }

    #[test]
    fn parses_the_forms_the_apiserver_keeps() {
        // apimachinery's canonical forms for these values keep the exponent or the small suffix.
        assert_eq!(parse_scaled("1500e6", 1), Ok(1_500_000_000));
        assert_eq!(parse_scaled("64e9", 1), Ok(64_000_000_000));
        assert_eq!(parse_scaled("2E3", 1), Ok(2000));
        assert_eq!(parse_scaled("1500u", 1000), Ok(2), "1.5 millicores round up to 2");
        assert_eq!(parse_scaled("1500u", 1), Ok(1));
        assert_eq!(parse_scaled("250n", 1000), Ok(1));
        assert_eq!(parse_scaled("1e-3", 1000), Ok(1));
        assert_eq!(parse_scaled("1E+3", 1), Ok(1000));
        assert_eq!(parse_scaled("1.5Gi", 1), Ok(3 << 29));
        assert_eq!(parse_scaled(".5", 1000), Ok(500));
        assert_eq!(parse_scaled("2.", 1), Ok(2));
        assert_eq!(parse_scaled("+4k", 1), Ok(4000));
        assert_eq!(parse_scaled("0.000000001Ki", 1), Ok(1));
        assert_eq!(parse_scaled("-0", 1), Ok(0), "negative zero is zero");
        assert_eq!(parse_scaled("000000000000000000000000000001", 1), Ok(1));
        assert_eq!(parse_scaled("100000000000000000000000000000e-29", 1), Ok(1));
        assert_eq!(parse_scaled("1e4294967299", 1), Ok(1000), "apimachinery keeps an exponent's low 32 bits");
        assert_eq!(parse_scaled("m", 1), Ok(0), "no digit reads as 0, as in apimachinery");
        assert_eq!(parse_scaled("+.", 1), Ok(0));
    }

    #[test]
    fn refuses_bad_forms() {
        assert!(matches!(parse_scaled("-1", 1), Err(QuantityError::Negative(_))));
        assert!(matches!(parse_scaled("-1n", 1), Err(QuantityError::Negative(_))));
        assert!(matches!(parse_scaled("two", 1), Err(QuantityError::Malformed(_))));
        assert!(matches!(parse_scaled("1.2.3", 1), Err(QuantityError::Malformed(_))));
        for bad in [
            " 1",
            "1 ",
            "1K",
            "1ki",
            "1e",
            "1e+",
            "1e3m",
            "1Mi3",
            "1.5.",
            "0x10",
            "1e99999999999999999999",
            "Pi",
            "e-10",
        ] {
            assert!(matches!(parse_scaled(bad, 1), Err(QuantityError::Malformed(_))), "{bad:?}");
        }
        assert!(matches!(parse_scaled("9Ei", 1), Err(QuantityError::TooLarge(_))));
        assert!(matches!(parse_scaled("2e18", 1), Err(QuantityError::TooLarge(_))));
        assert!(matches!(parse_scaled("1e999999", 1), Err(QuantityError::TooLarge(_))));
        assert!(matches!(
            parse_scaled("99999999999999999999999999999999999999999", 1),
            Err(QuantityError::TooLarge(_))
        ));
        assert_eq!(parse_scaled("", 1), Err(QuantityError::Empty));
    }

    #[test]
    fn whole_units_refuse_a_fraction_in_any_form() {
        for whole in ["8", "1e3", "2k", "1500e-3k", "0", "100000m", "1.9999999"] {
            assert_eq!(parse_whole(whole), parse_scaled(whole, 1), "{whole}");
        }
        for fraction in ["0.5", "500m", "1e-3", "1.5", "1n"] {
            let e = parse_whole(fraction).unwrap_err();
            assert!(matches!(e, QuantityError::Fractional(_)), "{fraction}: {e:?}");
            assert!(e.to_string().contains("whole number"), "{e}");
        }
    }

    #[test]
    fn the_limit_is_exact() {
        assert_eq!(parse_scaled(&MAX_AMOUNT.to_string(), 1), Ok(MAX_AMOUNT));
        assert!(parse_scaled(&(MAX_AMOUNT + 1).to_string(), 1).is_err());
        assert_eq!(parse_scaled("1Ei", 1), Ok(MAX_AMOUNT));
        assert!(parse_scaled("1Ei", 1000).is_err(), "2^60 cores are 2^60 x 1000 millicores");
    }

    #[test]
    fn formats_like_kubectl() {
        assert_eq!(format_amount(2000, Unit::Millicores), "2");
        assert_eq!(format_amount(250, Unit::Millicores), "250m");
        assert_eq!(format_amount(100 << 30, Unit::Bytes), "100Gi");
        assert_eq!(format_amount(1, Unit::Bytes), "1");
    }
}
