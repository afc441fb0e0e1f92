//! The cluster-scoped `Reservation`: a calendar reservation (part of the cluster set aside for
//! some queues or namespaces over a time window, once or repeating). Mirrors
//! `muster_queue::ReservationConfig`; [`ReservationSpec::to_config`] converts, with the engine's
//! own checks. Its status holds the `Accepted` and `Active` conditions and the windows muster
//! holds now ([`ReservationStatus::new`]).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use muster_graph::InputError;

pub use crate::condition::ACCEPTED;
use crate::condition::{self, Refusal};
use muster_queue::engine::ReservationWindow;
use muster_queue::{AtStart, EngineConfig, QueueConfig, ReservationConfig, ReservedAmount, clock};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Room set aside for some queues or namespaces over a time window. Cluster-scoped: only
/// cluster administrators make them.
#[derive(CustomResource, Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "muster.dev",
    version = "v1alpha1",
    kind = "Reservation",
    doc = "A muster calendar Reservation: room set aside for some queues or namespaces over a time window.",
    status = "ReservationStatus",
    category = "muster",
    derive = "PartialEq",
    printcolumn = r#"{"name": "Start", "type": "date", "jsonPath": ".spec.start"}"#,
    printcolumn = r#"{"name": "End", "type": "date", "jsonPath": ".spec.end"}"#,
    printcolumn = r#"{"name": "Every", "type": "integer", "jsonPath": ".spec.everySeconds"}"#,
    printcolumn = r#"{"name": "Accepted", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Accepted\")].status"}"#,
    printcolumn = r#"{"name": "Active", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Active\")].status"}"#,
    printcolumn = r#"{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ReservationSpec {
    /// Queues whose groups may use the room.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub queues: Vec<String>,
    /// Namespaces whose groups may use the room, whatever their queue.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub namespaces: Vec<String>,
    /// The nodes it is on: every node with these labels, whole (unless `amount` says how much).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    /// How much it sets aside (members times what one member asks, as a group of that shape would
    /// be placed at each window's start), on the selected nodes if `nodeSelector` is given too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub amount: Option<ReservedAmount>,
    /// The first window's start (RFC 3339).
    pub start: Time,
    /// The first window's end (RFC 3339), after `start`.
    pub end: Time,
    /// Repeats the window every so many seconds (604800: weekly); absent or 0: once. Seconds, not
    /// a duration string such as `168h`: Kubernetes API conventions write durations as integer
    /// fields named with their unit (`activeDeadlineSeconds`), as muster's Queue does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub every_seconds: Option<i64>,
    /// What a window's opening does to others' work still on its room: Wait (default; it runs
    /// on and the reservation's users wait for it) or Evict (whole groups are evicted and
    /// queued again).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_start: Option<AtStart>,
}

/// What the controller reports about a reservation.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReservationStatus {
    /// `Accepted`: whether muster honours it (False: the message names the field to fix).
    /// `Active`: True while one of its windows is open.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The windows muster holds now: the current or next one, and for a repeating reservation
    /// those that start within a period.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub windows: Vec<WindowStatus>,
}

/// One window as muster holds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WindowStatus {
    pub start: Time,
    pub end: Time,
    /// The nodes its room is on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<String>,
    /// Why it holds nothing (no node selected, no room at its start, another reservation on the
    /// same nodes); muster tries again every cycle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Engine field names that the Reservation spells differently.
const RENAMED: [(&str, &str); 1] = [("everyS", "everySeconds")];

impl ReservationSpec {
    /// The engine's configuration of reservation `name`, checked as the engine checks it against
    /// the queues `known`. Errors name the field of the Reservation object, such as `spec.end`.
    pub fn to_config(&self, name: &str, known: &[QueueConfig]) -> Result<ReservationConfig, InputError> {
        let file = format!("Reservation/{name}");
        let config = ReservationConfig {
            name: name.to_string(),
            queues: self.queues.clone(),
            namespaces: self.namespaces.clone(),
            node_selector: self.node_selector.clone(),
            amount: self.amount.clone(),
            start: self.start.0.as_second(),
            end: self.end.0.as_second(),
            every_s: self.every_seconds.unwrap_or(0),
            at_start: self.at_start.unwrap_or_default(),
        };
        // The engine's own checks (names, fields against the queues), with its paths
        // (`reservations[0].everyS`) turned into the object's (`spec.everySeconds`).
        let mut engine = EngineConfig::single_queue("unused");
        engine.queues = known.iter().map(|q| QueueConfig::new(&q.name)).collect();
        engine.reservations = vec![config];
        engine.compile(&file).map_err(|e| {
            let field = e.path.strip_prefix("reservations[0].").unwrap_or(&e.path);
            let path = match field {
                "name" => "metadata.name".to_string(),
                f => format!("spec.{}", RENAMED.iter().find(|(old, _)| *old == f).map_or(f, |(_, new)| new)),
            };
            // The engine counts seconds; the object reads in timestamps.
            let message = match field {
                "end" => format!(
                    "{} is not after spec.start {}; a window needs a length",
                    clock::show(self.end.0.as_second()),
                    clock::show(self.start.0.as_second())
                ),
                _ => e.message,
            };
            InputError::new(&file, path, message)
        })?;
        Ok(engine.reservations.remove(0))
    }
}

/// Condition types of a Reservation (and [`ACCEPTED`]).
pub const ACTIVE: &str = "Active";

impl ReservationStatus {
    /// The status of a reservation of `generation` that muster holds as `windows` at `now` (Unix
    /// seconds), or refused with `refused`. `lastTransitionTime` of a condition whose status is
    /// unchanged from `previous` is kept.
    pub fn new(
        generation: Option<i64>,
        refused: Option<&InputError>,
        windows: &[ReservationWindow],
        now: i64,
        previous: Option<&ReservationStatus>,
    ) -> Self {
        let previous = previous.map_or(&[][..], |p| &p.conditions[..]);
        let accepted = condition::accepted(refused.map(Refusal::invalid_spec).as_ref(), generation, now, previous);
        let mut conditions = vec![accepted];
        if refused.is_none() {
            let active = match windows.iter().find(|w| w.start <= now && now < w.end) {
                Some(w) => (true, "WindowOpen", format!("open until {}", clock::show(w.end))),
                None => {
                    let next = windows.iter().map(|w| w.start).filter(|&s| s > now).min();
                    (
                        false,
                        "NoWindowOpen",
                        next.map_or("no window to come".into(), |s| format!("next window at {}", clock::show(s))),
                    )
                }
            };
            conditions.push(condition::new(ACTIVE, active.0, active.1, active.2, generation, now, previous));
        }
        let windows = windows
            .iter()
            .map(|w| WindowStatus {
                start: condition::time(w.start),
                end: condition::time(w.end),
                nodes: w.nodes.clone(),
                error: w.error.clone(),
            })
            .collect();
        ReservationStatus { conditions, observed_generation: generation, windows }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(yaml: &str) -> ReservationSpec {
        serde_yaml_ng::from_str(yaml).unwrap()
    }

    const WEEKLY: &str = "queues: [team-a]\nnodeSelector: {pool: gpu}\nstart: '2026-12-01T09:00:00Z'\n\
                          end: '2026-12-01T17:00:00Z'\neverySeconds: 604800\natStart: Evict\n";

    fn queues() -> Vec<QueueConfig> {
        vec![QueueConfig::new("team-a"), QueueConfig::new("team-b")]
    }

    #[test]
    fn a_spec_converts_field_by_field() {
        let c = spec(WEEKLY).to_config("training", &queues()).unwrap();
        assert_eq!(c.name, "training");
        assert_eq!(c.queues, ["team-a"]);
        assert_eq!(c.node_selector, BTreeMap::from([("pool".to_string(), "gpu".to_string())]));
        assert_eq!((c.start, c.end), (1_796_115_600, 1_796_144_400));
        assert_eq!(c.every_s, 604_800);
        assert_eq!(c.at_start, AtStart::Evict);
        let amount = spec(
            "namespaces: [ml]\namount: {members: 4, resources: {nvidia.com/gpu: 8}, topology: rack}\n\
             start: '2026-12-01T09:00:00+01:00'\nend: '2026-12-01T10:00:00+01:00'\n",
        )
        .to_config("a", &queues())
        .unwrap();
        assert_eq!(amount.start, 1_796_112_000, "an offset is honoured");
        assert_eq!(amount.every_s, 0, "once by default");
        assert_eq!(amount.at_start, AtStart::Wait, "Wait by default");
        assert_eq!(amount.amount.unwrap().members, 4);
    }

    #[test]
    fn bad_input_names_the_field() {
        for (change, path, says) in [
            (
                "end: '2026-12-01T09:00:00Z'",
                "spec.end",
                "2026-12-01T09:00:00Z is not after spec.start 2026-12-01T09:00:00Z",
            ),
            ("everySeconds: 60", "spec.everySeconds", "would make windows overlap"),
            ("queues: [team-c]", "spec.queues", "no queue \"team-c\""),
            ("queues: []", "spec.queues", "say who may use it"),
            ("nodeSelector: {}", "spec.nodeSelector", "say what it sets aside"),
            ("amount: {members: 0, resources: {cpu: 1}}", "spec.amount.members", "at least 1"),
            ("amount: {members: 1, resources: {cpu: lots}}", "spec.amount.resources.cpu", "lots"),
        ] {
            let mut doc: serde_yaml_ng::Mapping = serde_yaml_ng::from_str(WEEKLY).unwrap();
            let patch: serde_yaml_ng::Mapping = serde_yaml_ng::from_str(change).unwrap();
            doc.extend(patch);
            let s: ReservationSpec = serde_yaml_ng::from_value(doc.into()).unwrap();
            let e = s.to_config("training", &queues()).unwrap_err();
            assert_eq!(e.path, path, "{change}: {e}");
            assert!(e.message.contains(says), "{change}: {e}");
            assert_eq!(e.file, "Reservation/training");
        }
        assert_eq!(spec(WEEKLY).to_config("Bad Name", &queues()).unwrap_err().path, "metadata.name");
    }

    #[test]
    fn unknown_values_do_not_parse() {
        assert!(serde_yaml_ng::from_str::<ReservationSpec>(&format!("{WEEKLY}atStart: Kill\n")).is_err());
        let bad_time = WEEKLY.replace("'2026-12-01T09:00:00Z'", "tomorrow");
        assert!(serde_yaml_ng::from_str::<ReservationSpec>(&bad_time).is_err());
    }

    fn window(start: i64, end: i64) -> ReservationWindow {
        ReservationWindow { reservation: "r".into(), start, end, nodes: vec!["n1".into()], error: None }
    }

    #[test]
    fn status_says_accepted_and_whether_a_window_is_open_keeping_transition_times() {
        let before =
            ReservationStatus::new(Some(3), None, &[window(2_000_000_100, 2_000_000_200)], 2_000_000_000, None);
        let status = |s: &ReservationStatus, kind: &str| {
            let c = s.conditions.iter().find(|c| c.type_ == kind).unwrap();
            (c.status.clone(), c.reason.clone(), c.last_transition_time.0.as_second())
        };
        assert_eq!(status(&before, ACCEPTED), ("True".into(), "Valid".into(), 2_000_000_000));
        assert_eq!(status(&before, ACTIVE), ("False".into(), "NoWindowOpen".into(), 2_000_000_000));
        assert_eq!(before.windows[0].nodes, ["n1"]);
        assert_eq!(before.observed_generation, Some(3));
        let open = ReservationStatus::new(
            Some(3),
            None,
            &[window(2_000_000_100, 2_000_000_200)],
            2_000_000_150,
            Some(&before),
        );
        assert_eq!(status(&open, ACCEPTED).2, 2_000_000_000, "unchanged status keeps its transition time");
        assert_eq!(status(&open, ACTIVE), ("True".into(), "WindowOpen".into(), 2_000_000_150));
        let e = InputError::new("Reservation/r", "spec.end", "not after spec.start");
        let refused = ReservationStatus::new(Some(4), Some(&e), &[], 2_000_000_300, Some(&open));
        assert_eq!(status(&refused, ACCEPTED), ("False".into(), "InvalidSpec".into(), 2_000_000_300));
        assert!(refused.conditions[0].message.starts_with("spec.end: "));
        assert_eq!(refused.conditions.len(), 1, "no Active condition on a refused reservation");
    }
}
