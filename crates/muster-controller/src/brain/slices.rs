//! The devices DRA drivers publish (ResourceSlices): kept slice by slice and folded into the
//! views of their nodes, so that the engine's graph holds them as any other part of a node.

use std::collections::BTreeMap;

use muster_durable::Input;
use muster_graph::dra::PublishedDevice;
use muster_k8s::dra::devices_by_node;
use muster_store::Store;
use tracing::warn;

use super::{Brain, Change};
use crate::convert::SliceView;

impl<S: Store> Brain<S> {
    pub(super) fn slice_event(&mut self, c: Change<SliceView>) {
        let mut nodes: Vec<String> = Vec::new();
        let node_of = |s: &SliceView| s.read.as_ref().ok().map(|r| r.node.clone());
        if let Change::Apply(s) = &c {
            if let Err(e) = &s.read {
                warn!(slice = s.name, "ResourceSlice not placed: {e}");
            }
            nodes.extend(self.slices.items.get(&s.name).and_then(node_of));
            nodes.extend(node_of(s));
        }
        let (deleted, dropped) = self.slices.change(c, |s| s.name.clone());
        nodes.extend(deleted.iter().chain(&dropped).filter_map(node_of));
        nodes.sort();
        nodes.dedup();
        for node in nodes {
            self.republish(&node);
        }
        self.published_changed();
    }

    /// The published devices changed: what each DeviceClass stands for is worked out again, the
    /// groups that could not read their devices are looked at again, and the published-device
    /// metrics are refreshed from the node views.
    pub(super) fn published_changed(&mut self) {
        self.class_drivers.forget();
        for key in std::mem::take(&mut self.awaiting_devices) {
            match self.workload(&key.to_string()) {
                Some(_) => self.dirty_jobs.insert(key.to_string()),
                None => self.dirty_plain.insert(key),
            };
        }
        let mut per_driver: BTreeMap<String, i64> = BTreeMap::new();
        for d in self.nodes.items.values().flat_map(|n| &n.spec.published) {
            *per_driver.entry(d.driver.clone()).or_default() += 1;
        }
        let unread = self.slices.items.values().filter(|s| s.read.is_err()).count();
        self.metrics.set_published(&per_driver, unread as i64);
    }

    /// The devices published for `node`, slice by slice in name order, each pool from its
    /// newest generation.
    pub(super) fn published_on(&self, node: &str) -> Vec<PublishedDevice> {
        let mut slices: Vec<&SliceView> =
            (self.slices.items.values()).filter(|s| s.read.as_ref().is_ok_and(|r| r.node == node)).collect();
        slices.sort_by(|a, b| a.name.cmp(&b.name));
        devices_by_node(slices.iter().filter_map(|s| s.read.as_ref().ok())).remove(node).unwrap_or_default()
    }

    /// Brings `node`'s view in line with its slices; the engine hears of a change.
    fn republish(&mut self, node: &str) {
        let published = self.published_on(node);
        let Some(n) = self.nodes.items.get_mut(node) else { return };
        if n.spec.published == published {
            return;
        }
        n.spec.published = published;
        if self.engine.is_some() {
            self.inputs.push(Input::NodeChanged(n.spec.clone()));
        }
    }
}
