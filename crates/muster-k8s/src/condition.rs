//! Conditions as muster writes them on its configuration objects (Queue, Cohort, Reservation):
//! `Accepted` says whether muster honours the object, and a condition's `lastTransitionTime`
//! moves only when its status does.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

/// The condition type that says whether muster honours a configuration object.
pub const ACCEPTED: &str = "Accepted";

/// Why an object is left out of muster's configuration: a CamelCase reason and a message that
/// names the field to fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub reason: &'static str,
    pub message: String,
}

impl Refusal {
    /// The object's own spec is invalid (the message names the field).
    pub fn invalid_spec(e: &muster_graph::InputError) -> Self {
        Refusal { reason: "InvalidSpec", message: format!("{}: {}", e.path, e.message) }
    }
}

/// Condition `kind` of an object at `generation`, at `now` (Unix seconds). Its transition time
/// is kept from the same condition in `previous` when its status has not changed.
pub fn new(
    kind: &str,
    status: bool,
    reason: &str,
    message: String,
    generation: Option<i64>,
    now: i64,
    previous: &[Condition],
) -> Condition {
    let status = if status { "True" } else { "False" }.to_string();
    let kept = previous.iter().find(|c| c.type_ == kind && c.status == status);
    Condition {
        type_: kind.to_string(),
        status,
        reason: reason.to_string(),
        message,
        observed_generation: generation,
        last_transition_time: kept.map_or_else(|| time(now), |c| c.last_transition_time.clone()),
    }
}

/// `Accepted`: True when muster honours the object, False with why when it is left out.
pub fn accepted(refused: Option<&Refusal>, generation: Option<i64>, now: i64, previous: &[Condition]) -> Condition {
    match refused {
        Some(r) => new(ACCEPTED, false, r.reason, r.message.clone(), generation, now, previous),
        None => new(ACCEPTED, true, "Valid", "muster honours it".into(), generation, now, previous),
    }
}

/// Unix second `t` as a Kubernetes time.
pub fn time(t: i64) -> Time {
    Time(k8s_openapi::jiff::Timestamp::from_second(t).unwrap_or_default())
}

/// Whether `fresh` says what `current` says (type, status, reason, message, generation): then
/// there is nothing to write.
pub fn unchanged(current: &[Condition], fresh: &Condition) -> bool {
    current.iter().any(|c| {
        c.type_ == fresh.type_
            && c.status == fresh.status
            && c.reason == fresh.reason
            && c.message == fresh.message
            && c.observed_generation == fresh.observed_generation
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_transition_time_moves_only_with_the_status() {
        let first = accepted(None, Some(1), 100, &[]);
        assert_eq!((first.status.as_str(), first.reason.as_str()), ("True", "Valid"));
        let again = accepted(None, Some(2), 200, std::slice::from_ref(&first));
        assert_eq!(again.last_transition_time, time(100), "still True: the time it became True");
        let refusal = Refusal { reason: "InvalidSpec", message: "spec.quotas.cpu.nominal: not a quantity".into() };
        let refused = accepted(Some(&refusal), Some(3), 300, std::slice::from_ref(&again));
        assert_eq!((refused.status.as_str(), refused.reason.as_str()), ("False", "InvalidSpec"));
        assert_eq!(refused.last_transition_time, time(300));
        assert_eq!(refused.message, refusal.message);
        assert!(unchanged(std::slice::from_ref(&again), &accepted(None, Some(2), 400, &[])));
        assert!(!unchanged(std::slice::from_ref(&again), &accepted(None, Some(3), 400, &[])), "a new generation");
        assert!(!unchanged(&[again], &refused));
    }
}
