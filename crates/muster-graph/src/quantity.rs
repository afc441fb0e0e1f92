//! Kubernetes quantity strings ("500m", "2Gi", "1.5") turned into integers in a resource's base unit.

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
}

impl fmt::Display for QuantityError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Empty => write!(f, "empty quantity; write a number such as \"2\", \"500m\" or \"4Gi\""),
            Self::Malformed(s) => write!(
                f,
                "{s:?} is not a quantity; allowed: a decimal number with an optional suffix \
                 (m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei)"
            ),
            Self::Negative(s) => write!(f, "{s:?} is negative; amounts must be at least 0"),
            Self::TooLarge(s) => write!(f, "{s:?} is absurdly large; the limit is {MAX_AMOUNT} base units"),
        }
    }
}

/// Parses `text` and returns it multiplied by `scale` (1000 for cpu, whose base unit is the
/// millicore; 1 for everything else), rounded up as Kubernetes does for requests.
pub fn parse_scaled(text: &str, scale: u64) -> Result<u64, QuantityError> {
    let s = text.trim();
    if s.is_empty() {
        return Err(QuantityError::Empty);
    }
    if s.starts_with('-') {
        return Err(QuantityError::Negative(s.to_string()));
    }
    let s_body = s.strip_prefix('+').unwrap_or(s);
    let split = s_body.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s_body.len());
    let (number, suffix) = s_body.split_at(split);
    let (mult_num, mult_den): (u128, u128) = match suffix {
        "" => (1, 1),
        "m" => (1, 1000),
        "k" => (1000, 1),
        "M" => (1_000_000, 1),
        "G" => (1_000_000_000, 1),
        "T" => (1_000_000_000_000, 1),
        "P" => (1_000_000_000_000_000, 1),
        "E" => (1_000_000_000_000_000_000, 1),
        "Ki" => (1 << 10, 1),
        "Mi" => (1 << 20, 1),
        "Gi" => (1 << 30, 1),
        "Ti" => (1 << 40, 1),
        "Pi" => (1 << 50, 1),
        "Ei" => (1 << 60, 1),
        _ => return Err(QuantityError::Malformed(s.to_string())),
    };
    let (int_part, frac_part) = number.split_once('.').unwrap_or((number, ""));
    if int_part.is_empty() && frac_part.is_empty() || frac_part.contains('.') || frac_part.len() > 9 {
        return Err(QuantityError::Malformed(s.to_string()));
    }
    let too_large = || QuantityError::TooLarge(s.to_string());
    let digits = format!("{int_part}{frac_part}");
    let mantissa: u128 = digits.parse().map_err(|_| too_large())?;
    let frac_den = 10u128.pow(frac_part.len() as u32);
    let num = mantissa.checked_mul(mult_num).and_then(|v| v.checked_mul(u128::from(scale))).ok_or_else(too_large)?;
    let den = frac_den * mult_den;
    let value = num.div_ceil(den);
    if value > u128::from(MAX_AMOUNT) {
        return Err(too_large());
    }
    Ok(value as u64)
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
    fn refuses_bad_forms() {
        assert!(matches!(parse_scaled("-1", 1), Err(QuantityError::Negative(_))));
        assert!(matches!(parse_scaled("two", 1), Err(QuantityError::Malformed(_))));
        assert!(matches!(parse_scaled("1.2.3", 1), Err(QuantityError::Malformed(_))));
        assert!(matches!(parse_scaled("9Ei", 1), Err(QuantityError::TooLarge(_))));
        assert!(matches!(
            parse_scaled("99999999999999999999999999999999999999999", 1),
            Err(QuantityError::TooLarge(_))
        ));
        assert_eq!(parse_scaled(" ", 1), Err(QuantityError::Empty));
    }

    #[test]
    fn formats_like_kubectl() {
        assert_eq!(format_amount(2000, Unit::Millicores), "2");
        assert_eq!(format_amount(250, Unit::Millicores), "250m");
        assert_eq!(format_amount(100 << 30, Unit::Bytes), "100Gi");
        assert_eq!(format_amount(1, Unit::Bytes), "1");
    }
}
