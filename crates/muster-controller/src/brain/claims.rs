//! Devices other schedulers allocated to ResourceClaims (kube-scheduler, for its pods): held in
//! the graph device by device, as other schedulers' pods hold their requests, so that muster
//! never places a group on them. A claim reserved for one of muster's pods is held by that pod's
//! group already.

use muster_durable::Input;
use muster_queue::ExternalHold;
use muster_store::Store;

use super::{Brain, Change};
use crate::convert::ClaimView;

/// The engine's id of a claim's hold (pods' holds are their uids).
fn hold_id(uid: &str) -> String {
    format!("claim/{uid}")
}

impl<S: Store> Brain<S> {
    pub(super) fn claim_event(&mut self, c: Change<ClaimView>) {
        let applied = if let Change::Apply(v) = &c { Some(v.clone()) } else { None };
        let (deleted, dropped) = self.claims.change(c, |v| v.uid.clone());
        if self.engine.is_none() {
            return;
        }
        for v in deleted.into_iter().chain(dropped) {
            self.inputs.push(Input::Vacate(hold_id(&v.uid)));
        }
        if let Some(v) = applied {
            match self.foreign_hold(&v) {
                Some(hold) => self.inputs.push(Input::Occupy { id: hold_id(&v.uid), hold }),
                None => self.inputs.push(Input::Vacate(hold_id(&v.uid))),
            }
        }
    }

    /// What an allocated claim holds, unless it is reserved for a pod of muster's.
    fn foreign_hold(&self, v: &ClaimView) -> Option<ExternalHold> {
        let ours = v.reserved_for.iter().any(|uid| self.pods.items.get(uid).is_some_and(|p| p.ours));
        v.held.clone().filter(|_| !ours)
    }

    /// Every allocated claim's hold, by its engine id: what a starting engine must count.
    pub(super) fn claim_holds(&self) -> impl Iterator<Item = (String, ExternalHold)> + '_ {
        (self.claims.items.values()).filter_map(|v| self.foreign_hold(v).map(|h| (hold_id(&v.uid), h)))
    }

    /// The hold of the claim or pod behind engine id `id`, to try again (its node was unknown).
    pub(super) fn external_hold(&self, id: &str) -> Option<ExternalHold> {
        if let Some(uid) = id.strip_prefix("claim/") {
            return self.claims.items.get(uid).and_then(|v| self.foreign_hold(v));
        }
        let p = self.pods.items.get(id).filter(|p| p.holds_capacity())?;
        Some(ExternalHold::pod(p.node.as_deref()?, &p.requests))
    }
}
