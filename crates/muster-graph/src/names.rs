//! Kubernetes naming rules for node names, label keys and values, and taints, so a description
//! that Kubernetes would refuse is refused here first, with the rule in the message.

/// A DNS label: 1-63 of a-z, 0-9 and '-', not starting or ending with '-'.
pub fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// The name part of a label key, or a label value when non-empty: 1-63 of alphanumerics,
/// '-', '_' and '.', starting and ending with an alphanumeric.
fn is_label_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && s.starts_with(|c: char| c.is_ascii_alphanumeric())
        && s.ends_with(|c: char| c.is_ascii_alphanumeric())
}

/// A DNS subdomain: dot-separated DNS labels, at most 253 characters (a DRA driver's name).
pub fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_dns_label)
}

/// Checks a label (or taint) key: `[prefix/]name`.
pub fn check_label_key(key: &str) -> Result<(), String> {
    let ok = match key.split_once('/') {
        Some((prefix, name)) => is_dns_subdomain(prefix) && is_label_name(name),
        None => is_label_name(key),
    };
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{key:?} is not a valid key; write [prefix/]name: name is 1-63 of letters, digits, '-', '_', '.', \
             prefix a DNS subdomain such as example.com"
        ))
    }
}

/// Checks a label (or taint) value: empty, or 1-63 of letters, digits, '-', '_', '.'.
pub fn check_label_value(value: &str) -> Result<(), String> {
    if value.is_empty() || is_label_name(value) {
        Ok(())
    } else {
        Err(format!(
            "{value:?} is not a valid value; use at most 63 of letters, digits, '-', '_', '.', \
             starting and ending with a letter or digit"
        ))
    }
}

/// A fully qualified extended resource name such as `nvidia.com/gpu`.
pub fn is_qualified_resource(name: &str) -> bool {
    name.split_once('/')
        .is_some_and(|(domain, local)| domain.contains('.') && is_dns_subdomain(domain) && is_label_name(local))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubernetes_name_rules() {
        assert!(check_label_key("topology.kubernetes.io/zone").is_ok());
        assert!(check_label_key("node-type").is_ok());
        assert!(check_label_key("a=b").is_err());
        assert!(check_label_key("x/y/z").is_err());
        assert!(check_label_key("muster:down").is_err());
        assert!(check_label_value("").is_ok());
        assert!(check_label_value("x,y").is_err());
        assert!(is_qualified_resource("nvidia.com/gpu"));
        assert!(!is_qualified_resource("nodomain/x"));
        assert!(!is_dns_label("-a"));
    }
}
