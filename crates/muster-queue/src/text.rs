//! Equality of short texts without a call into the C library. Behind a blocked head the cycle
//! checks each waiting group's reason against what it would write, millions of times on a long
//! queue; on the machine measured a `memcmp` call per part cost more than comparing the bytes
//! (docs/benchmarks.md, "Reasons compared in words").

/// Whether `a` and `b` hold the same bytes, compared a word at a time.
fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let (mut wa, mut wb) = (a.chunks_exact(8), b.chunks_exact(8));
    // The tails byte by byte: `==` on slices is the very `memcmp` call this avoids.
    (&mut wa).zip(&mut wb).all(|(x, y)| word(x) == word(y)) && wa.remainder().iter().eq(wb.remainder())
}

/// Whether `text` is `parts` one after another.
pub(crate) fn is_concat(text: &str, parts: &[&str]) -> bool {
    let mut rest = text;
    for part in parts {
        match rest.split_at_checked(part.len()) {
            Some((head, tail)) if same(head, part) => rest = tail,
            _ => return false,
        }
    }
    rest.is_empty()
}

fn word(bytes: &[u8]) -> u64 {
    bytes.try_into().map_or(0, u64::from_ne_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_compares_every_byte_at_every_length() {
        for len in 0..40 {
            let a: String = (0..len).map(|i| char::from(b'a' + (i % 26) as u8)).collect();
            assert!(same(&a, &a.clone()));
            for at in 0..len {
                let mut b = a.clone().into_bytes();
                b[at] = b'Z';
                let b = String::from_utf8(b).unwrap();
                assert!(!same(&a, &b), "differs at {at} of {len}");
            }
            assert!(!same(&a, &format!("{a}x")));
        }
    }

    #[test]
    fn is_concat_needs_every_part_in_order_and_nothing_more() {
        assert!(is_concat("waiting for capacity: needs 2 cpu", &["waiting for capacity: ", "needs 2 cpu", ""]));
        assert!(!is_concat("waiting for capacity: needs 2 cpu; more", &["waiting for capacity: ", "needs 2 cpu", ""]));
        assert!(!is_concat("waiting for capacity: needs 2 cpu", &["waiting for capacity: ", "needs 3 cpu", ""]));
        assert!(!is_concat("waiting", &["waiting for capacity: "]));
        assert!(is_concat("", &["", ""]));
        // A part boundary inside a character is no match, not a panic.
        assert!(!is_concat("é", &["\u{0}"]));
    }
}
