//! The `Accepted` condition of Queue and Cohort objects: True for those in the engine's
//! configuration, False with why (naming the field to fix) for those left out. Written by the
//! leader each time it loads the configuration, where the condition differs from what the object
//! shows. Its own field manager keeps it apart from the brain's queue reports, which carry no
//! conditions and would otherwise remove it under server-side apply.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::ApiResource;
use kube::{Client, Resource};
use muster_k8s::cohort::ConfigKind;
use muster_k8s::condition::{self, Refusal};
use muster_k8s::{Cohort, Queue};
use serde_json::json;
use tracing::warn;

/// The field manager of the `Accepted` conditions.
const FIELD_MANAGER: &str = "muster-config";

/// What the configuration made of one Queue or Cohort object.
#[derive(Debug, Clone)]
pub struct Verdict {
    pub kind: ConfigKind,
    pub name: String,
    pub generation: Option<i64>,
    /// The object's conditions when listed.
    pub conditions: Vec<Condition>,
    /// None: honoured.
    pub refusal: Option<Refusal>,
}

impl Verdict {
    pub fn of_queue(q: &Queue) -> Self {
        Self::of(ConfigKind::Queue, q, q.status.as_ref().map(|s| s.conditions.clone()))
    }

    pub fn of_cohort(c: &Cohort) -> Self {
        Self::of(ConfigKind::Cohort, c, c.status.as_ref().map(|s| s.conditions.clone()))
    }

    /// An object muster cannot read, refused with why (it has no conditions muster could read).
    pub fn unreadable(kind: ConfigKind, u: &crate::listing::Unreadable) -> Self {
        Verdict {
            kind,
            name: u.name.clone(),
            generation: u.generation,
            conditions: Vec::new(),
            refusal: Some(Refusal::invalid_spec(&u.error)),
        }
    }

    fn of(kind: ConfigKind, object: &impl Resource, conditions: Option<Vec<Condition>>) -> Self {
        let meta = object.meta();
        Verdict {
            kind,
            name: meta.name.clone().unwrap_or_default(),
            generation: meta.generation,
            conditions: conditions.unwrap_or_default(),
            refusal: None,
        }
    }

    /// The `Accepted` condition to write at `now`, or None when the object already says it.
    pub fn fresh_condition(&self, now: i64) -> Option<Condition> {
        let fresh = condition::accepted(self.refusal.as_ref(), self.generation, now, &self.conditions);
        (!condition::unchanged(&self.conditions, &fresh)).then_some(fresh)
    }
}

/// Writes the `Accepted` condition of every object in `verdicts` whose condition changed. A
/// failed write is logged; it is tried again at the next configuration load.
pub async fn write(client: &Client, verdicts: &[Verdict]) {
    let now = crate::unix_now();
    let apply = PatchParams::apply(FIELD_MANAGER).force();
    for v in verdicts {
        let Some(fresh) = v.fresh_condition(now) else { continue };
        let patch = Patch::Apply(
            json!({"apiVersion": "muster.dev/v1alpha1", "kind": v.kind.to_string(), "status": {"conditions": [fresh]}}),
        );
        // Untyped: the object the apiserver answers with is not read back, so one muster cannot
        // read (`listing.rs`) still gets its condition.
        let resource = match v.kind {
            ConfigKind::Queue => ApiResource::erase::<Queue>(&()),
            ConfigKind::Cohort => ApiResource::erase::<Cohort>(&()),
        };
        let api = Api::<DynamicObject>::all_with(client.clone(), &resource);
        if let Err(e) = api.patch_status(&v.name, &apply, &patch).await {
            warn!(kind = %v.kind, name = v.name, "cannot write the Accepted condition: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_changed_verdict_is_written() {
        let mut v = Verdict {
            kind: ConfigKind::Queue,
            name: "a".into(),
            generation: Some(1),
            conditions: Vec::new(),
            refusal: None,
        };
        let first = v.fresh_condition(100).expect("a new object gets its condition");
        v.conditions = vec![first];
        assert_eq!(v.fresh_condition(200), None, "the same verdict again writes nothing");
        v.refusal = Some(Refusal { reason: "CohortLeftOut", message: "its cohort x is left out".into() });
        let refused = v.fresh_condition(300).expect("a refusal is written");
        assert_eq!((refused.status.as_str(), refused.reason.as_str()), ("False", "CohortLeftOut"));
    }
}
