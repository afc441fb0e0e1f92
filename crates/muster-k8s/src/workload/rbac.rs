//! The part of muster's ClusterRole that the registry of kinds decides: a rule for each held
//! kind and each kind that holds one ([`HOLDERS`]). No finalizers rule: the Groups muster makes
//! name their owner without blockOwnerDeletion, so the OwnerReferencesPermissionEnforcement
//! admission plugin asks for none. `deploy/chart/templates/rbac.yaml` carries it between two
//! marker lines; a test keeps the checked-in copy current.

use super::{HELD_KINDS, HOLDERS, Kind};

/// The line before the generated rules in `deploy/chart/templates/rbac.yaml`.
pub const BEGIN: &str = "# BEGIN held kinds: generated from muster_k8s::workload::HELD_KINDS";
/// The line after them.
pub const END: &str = "# END held kinds";

/// The ClusterRole rules of the held kinds and their holders, as YAML list items.
pub fn held_kind_rules() -> String {
    HELD_KINDS.iter().chain(&HOLDERS).map(|k| rule(k)).collect()
}

fn rule(k: &Kind) -> String {
    format!(
        "# {}s: {}.\n- apiGroups: [{}]\n  resources: [{}]\n  verbs: [{}]\n",
        k.kind,
        k.why,
        k.group,
        k.plural,
        k.verbs.join(", ")
    )
}

/// `yaml` with the text between [`BEGIN`] and [`END`] replaced by [`held_kind_rules`]; None when
/// the markers are missing.
pub fn with_held_kind_rules(yaml: &str) -> Option<String> {
    let start = yaml.find(BEGIN)? + BEGIN.len() + 1;
    let end = yaml[start..].find(END)? + start;
    Some(format!("{}{}{}", &yaml[..start], held_kind_rules(), &yaml[end..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHECKED_IN: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/chart/templates/rbac.yaml");

    #[test]
    fn checked_in_rbac_grants_exactly_the_registered_kinds() {
        let old = std::fs::read_to_string(CHECKED_IN).expect("read deploy/chart/templates/rbac.yaml");
        let fresh = with_held_kind_rules(&old).expect("deploy/chart/templates/rbac.yaml has the held-kind markers");
        if std::env::var_os("MUSTER_UPDATE_RBAC").is_some() {
            std::fs::write(CHECKED_IN, &fresh).expect("write deploy/chart/templates/rbac.yaml");
            return;
        }
        assert!(
            old == fresh,
            "deploy/chart/templates/rbac.yaml is out of date with muster_k8s::workload::HELD_KINDS; run \
             `MUSTER_UPDATE_RBAC=1 cargo test -p muster-k8s` to regenerate it"
        );
        for k in HELD_KINDS.iter().chain(&HOLDERS) {
            assert!(old.contains(&format!("  resources: [{}]\n", k.plural)), "{}", k.kind);
        }
    }

    #[test]
    fn the_rules_replace_only_the_marked_text() {
        let yaml = format!("a\n{BEGIN}\nstale\n{END}\nb\n");
        let out = with_held_kind_rules(&yaml).unwrap();
        assert!(out.starts_with(&format!("a\n{BEGIN}\n# Jobs: ")), "{out}");
        assert!(
            out.ends_with(&format!("  resources: [trainjobs]\n  verbs: [patch]\n{END}\nb\n")),
            "the holders come last: {out}"
        );
        assert!(!out.contains("finalizers"), "no Group names its owner with blockOwnerDeletion: {out}");
        assert!(!out.contains("stale"));
        assert_eq!(with_held_kind_rules("no markers"), None);
    }
}
