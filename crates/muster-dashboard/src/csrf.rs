//! The login form's CSRF token, double-submitted: the form carries it in a hidden field and the
//! browser in a SameSite=Strict cookie; another site can make a browser post the form but can
//! neither read nor set the cookie, so its post is refused.

/// A fresh random token (32 bytes, hex); none when the operating system gives no randomness.
pub fn new_token() -> Option<String> {
    use ring::rand::{SecureRandom, SystemRandom};
    let mut bytes = [0u8; 32];
    SystemRandom::new().fill(&mut bytes).ok()?;
    Some(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Whether the form's token is the cookie's. Both are hashed first, so the comparison takes the
/// same time wherever they differ.
pub fn matches(cookie: Option<&str>, form: &str) -> bool {
    match cookie {
        Some(cookie) if !cookie.is_empty() && !form.is_empty() => {
            crate::refused::hash(cookie) == crate::refused::hash(form)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_random_and_only_an_equal_pair_matches() {
        let (a, b) = (new_token().unwrap(), new_token().unwrap());
        assert_eq!(a.len(), 64);
        assert_ne!(a, b);
        assert!(matches(Some(&a), &a));
        assert!(!matches(Some(&a), &b));
        assert!(!matches(None, &a), "no cookie");
        assert!(!matches(Some(""), ""), "both empty");
    }
}
