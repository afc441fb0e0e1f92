//! The status of Reservation objects: `Accepted` (False, naming the field, for one left out of
//! the engine's configuration), `Active`, and the windows the engine holds. The brain publishes
//! the windows after each cycle ([`WindowsPublisher`]), but only when they change (one opens or
//! ends, its nodes change); a task writes each Reservation's status by server-side apply when it
//! differs from what was written.

use std::collections::BTreeMap;

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::ApiResource;
use kube::{Client, ResourceExt};
use muster_graph::InputError;
use muster_k8s::{Reservation, ReservationStatus, labels};
use muster_queue::engine::ReservationWindow;
use serde_json::json;
use tokio::sync::watch;
use tracing::warn;

/// A Reservation as the configuration read it: refused (with why) or honoured.
#[derive(Debug, Clone)]
pub struct Listed {
    pub name: String,
    pub generation: Option<i64>,
    /// Its status when listed (kept transition times come from it).
    pub status: Option<ReservationStatus>,
    pub refused: Option<InputError>,
}

impl Listed {
    pub fn new(r: &Reservation, refused: Option<InputError>) -> Self {
        Listed { name: r.name_any(), generation: r.metadata.generation, status: r.status.clone(), refused }
    }

    /// A Reservation muster cannot read, refused with why.
    pub fn unreadable(u: &crate::listing::Unreadable) -> Self {
        Listed { name: u.name.clone(), generation: u.generation, status: None, refused: Some(u.error.clone()) }
    }
}

/// The windows the engine holds, as of `now` (Unix seconds).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldWindows {
    pub now: i64,
    pub windows: Vec<ReservationWindow>,
}

impl HeldWindows {
    /// Which windows are open: with the windows, all that the statuses show.
    fn open(&self) -> Vec<bool> {
        self.windows.iter().map(|w| w.start <= self.now && self.now < w.end).collect()
    }
}

/// The brain's side: publishes the held windows when they or which of them are open change.
pub struct WindowsPublisher(watch::Sender<Option<HeldWindows>>);

impl WindowsPublisher {
    pub fn channel() -> (Self, watch::Receiver<Option<HeldWindows>>) {
        let (tx, rx) = watch::channel(None);
        (WindowsPublisher(tx), rx)
    }

    pub fn publish(&self, fresh: HeldWindows) {
        self.0.send_if_modified(|last| {
            let same = last.as_ref().is_some_and(|l| l.windows == fresh.windows && l.open() == fresh.open());
            if !same {
                *last = Some(fresh);
            }
            !same
        });
    }
}

/// Writes the statuses of `listed`: refused ones at once, honoured ones from the windows the
/// brain published last and each time it publishes again. Runs until aborted (the session's
/// end, or a new configuration with its own list).
pub async fn run(client: Client, listed: Vec<Listed>, mut windows: watch::Receiver<Option<HeldWindows>>) {
    // Untyped: the object the apiserver answers with is not read back, so a Reservation muster
    // cannot read (`listing.rs`) still gets its status.
    let api = Api::<DynamicObject>::all_with(client, &ApiResource::erase::<Reservation>(&()));
    let mut written: BTreeMap<String, ReservationStatus> = BTreeMap::new();
    for r in listed.iter().filter(|r| r.refused.is_some()) {
        let status =
            ReservationStatus::new(r.generation, r.refused.as_ref(), &[], crate::unix_now(), r.status.as_ref());
        write(&api, &r.name, &status).await;
    }
    loop {
        let held = windows.borrow_and_update().clone();
        for r in listed.iter().filter(|r| r.refused.is_none()) {
            let Some(held) = &held else { break };
            let mine: Vec<ReservationWindow> =
                held.windows.iter().filter(|w| w.reservation == r.name).cloned().collect();
            let previous = written.get(&r.name).or(r.status.as_ref());
            let status = ReservationStatus::new(r.generation, None, &mine, held.now, previous);
            if written.get(&r.name) != Some(&status) && write(&api, &r.name, &status).await {
                written.insert(r.name.clone(), status);
            }
        }
        if windows.changed().await.is_err() {
            return;
        }
    }
}

/// Applies `status` to Reservation `name`; false (and a warning) if that failed: it is written
/// again at the next change.
async fn write(api: &Api<DynamicObject>, name: &str, status: &ReservationStatus) -> bool {
    let patch = Patch::Apply(json!({"apiVersion": "muster.dev/v1alpha1", "kind": "Reservation", "status": status}));
    match api.patch_status(name, &PatchParams::apply(labels::FIELD_MANAGER).force(), &patch).await {
        Ok(_) => true,
        Err(e) => {
            warn!(reservation = name, "cannot write the status: {e}");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(start: i64, nodes: &[&str]) -> ReservationWindow {
        ReservationWindow {
            reservation: "r".into(),
            start,
            end: start + 100,
            nodes: nodes.iter().map(|n| n.to_string()).collect(),
            error: None,
        }
    }

    #[test]
    fn windows_are_published_when_they_change_or_open_not_as_time_passes() {
        let (tx, mut rx) = WindowsPublisher::channel();
        let mut sent = |now: i64, w: Vec<ReservationWindow>| {
            tx.publish(HeldWindows { now, windows: w });
            rx.has_changed().unwrap() && rx.borrow_and_update().is_some()
        };
        assert!(sent(0, vec![window(50, &["n1"])]), "the first");
        assert!(!sent(10, vec![window(50, &["n1"])]), "time passed, nothing else");
        assert!(sent(20, vec![window(50, &["n2"])]), "other nodes");
        assert!(sent(50, vec![window(50, &["n2"])]), "it opened");
        assert!(!sent(60, vec![window(50, &["n2"])]), "still open");
        assert!(sent(150, Vec::new()), "it ended");
    }
}
