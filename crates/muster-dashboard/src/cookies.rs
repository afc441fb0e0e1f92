//! The dashboard's cookies: `__Host-` names (the browser keeps them for this host and path `/`
//! only, and only over HTTPS), always Secure, HttpOnly and SameSite=Strict.

use axum::http::{HeaderMap, header};

/// The caller's Kubernetes token, set by the login form.
pub const TOKEN: &str = "__Host-muster_token";
/// The login form's CSRF token (double submit: the cookie and a hidden field must agree).
pub const CSRF: &str = "__Host-muster_csrf";

/// The value of the cookie `name` in the request, if any.
pub fn get(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|c| c.trim().strip_prefix(name)?.strip_prefix('=').map(str::to_string))
}

/// A `Set-Cookie` value for `name`, kept `max_age_seconds`.
pub fn set(name: &str, value: &str, max_age_seconds: u32) -> String {
    format!("{name}={value}; Path=/; Secure; HttpOnly; SameSite=Strict; Max-Age={max_age_seconds}")
}

/// Whether `value` can be a cookie's value as it is (RFC 6265 cookie-octets): a token with a
/// `;` or a space could otherwise add attributes to the cookie.
pub fn is_cookie_safe(value: &str) -> bool {
    !value.is_empty()
        && value.bytes().all(|b| matches!(b, 0x21 | 0x23..=0x2b | 0x2d..=0x3a | 0x3c..=0x5b | 0x5d..=0x7e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cookie_is_read_by_its_exact_name_and_set_with_every_attribute() {
        let mut h = HeaderMap::new();
        h.insert(header::COOKIE, format!("a=1; {TOKEN}=abc.def; b=2").parse().unwrap());
        assert_eq!(get(&h, TOKEN).as_deref(), Some("abc.def"));
        assert_eq!(get(&h, CSRF), None);
        h.insert(header::COOKIE, format!("{TOKEN}x=no").parse().unwrap());
        assert_eq!(get(&h, TOKEN), None, "only the cookie of that exact name");
        assert_eq!(set(TOKEN, "t", 60), "__Host-muster_token=t; Path=/; Secure; HttpOnly; SameSite=Strict; Max-Age=60");
    }

    #[test]
    fn only_cookie_octets_are_safe() {
        assert!(is_cookie_safe("eyJhbGciOiJSUzI1NiJ9.eyJhdWQiOlsibSJdfQ.c2ln-_"));
        for bad in ["", "a b", "a;b", "a,b", "a\"b", "a\\b", "é"] {
            assert!(!is_cookie_safe(bad), "{bad:?}");
        }
    }
}
