//! Devices for muster's own pods: what a workload's pods claim through ResourceClaimTemplates
//! becomes its Group's device requests (read against the DeviceClasses and the published
//! devices), and before a pod is bound each of its claims is allocated the devices its member
//! was placed with ([`ClaimAllocation`], written by the executor).

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use k8s_openapi::api::resource::v1::DeviceClass;
use muster_graph::dra::{PublishedDevice, SelectorError, assign, drivers_accepting, graph_name};
use muster_k8s::GroupSpec as GroupObjectSpec;
use muster_k8s::dra::{ClassDrivers, EXTENDED_CLAIM, PodDevices, claim_requests, classes_by_resource};
use muster_k8s::workload::fill_devices;
use muster_queue::GroupKey;
use muster_store::Store;

use super::{Brain, Change, node_room};
use crate::allocate::{ClaimAllocation, ClaimSource};
use crate::convert::{ClassView, PodView, TemplateView, WorkloadView};

/// Why a pod with claims is not bound yet.
pub(super) enum ClaimsNotReady {
    /// Its claims are not made yet, or its devices are not in view: the next pod or slice
    /// event tries again.
    Wait,
    /// It cannot be bound as it is (told on the pod).
    Refuse(String),
}

/// The drivers each DeviceClass stands for on this cluster, by class: working it out reads every
/// published device, and each look at a workload or plain group that claims devices asks it of
/// every class named. Forgotten when a class or a published device changes.
#[derive(Default)]
pub(super) struct ClassDriverMemo(RefCell<HashMap<String, Result<BTreeSet<String>, SelectorError>>>);

impl ClassDriverMemo {
    pub(super) fn forget(&self) {
        self.0.borrow_mut().clear();
    }
}

impl<S: Store> ClassDrivers for Brain<S> {
    fn drivers(&self, class: &str, selectors: &[String]) -> Result<BTreeSet<String>, SelectorError> {
        if let Some(known) = self.class_drivers.0.borrow().get(class) {
            return known.clone();
        }
        let published = self.nodes.items.values().flat_map(|n| n.spec.published.iter());
        let found = drivers_accepting(selectors, published);
        self.class_drivers.0.borrow_mut().insert(class.to_string(), found.clone());
        found
    }
}

impl<S: Store> Brain<S> {
    pub(super) fn template_event(&mut self, c: Change<TemplateView>) {
        let namespace = match &c {
            Change::Apply(t) | Change::Delete(t) => t.key.split_once('/').map(|(ns, _)| ns.to_string()),
            _ => None,
        };
        self.templates.change(c, |t| t.key.clone());
        self.devices_changed(namespace.as_deref());
    }

    pub(super) fn class_event(&mut self, c: Change<ClassView>) {
        self.classes.change(c, |c| c.name.clone());
        self.class_drivers.forget();
        self.devices_changed(None);
    }

    /// Workloads and plain groups whose pods ask for devices are looked at again (in
    /// `namespace`, or all): a template or class that was missing may be there now, or ask
    /// otherwise.
    fn devices_changed(&mut self, namespace: Option<&str>) {
        let asking: Vec<String> = (self.workloads())
            .filter(|j| j.devices.iter().any(|d| !d.is_empty()))
            .filter(|j| namespace.is_none_or(|ns| &*j.key.namespace == ns))
            .map(|j| j.key.to_string())
            .collect();
        self.dirty_jobs.extend(asking);
        let plain: Vec<GroupKey> = (self.pods.items.values())
            .filter(|p| p.devices.is_some() && namespace.is_none_or(|ns| p.namespace == ns))
            .filter_map(|p| p.group.as_ref().map(|g| GroupKey::new(&p.namespace, g)))
            .collect();
        self.dirty_plain.extend(plain);
    }

    /// The extended resources devices serve on this cluster, each with its DeviceClass: those
    /// a class serves and no node has (where a node has one, its device plugin serves it, and
    /// pods count it as any resource).
    pub(super) fn served_by_devices(&self) -> BTreeMap<String, &DeviceClass> {
        let mut served = classes_by_resource(self.classes.items.values().map(|c| &c.class));
        served.retain(|r, _| !self.advertised(r));
        served
    }

    /// Whether some node advertises `resource`: from the engine's graph (its cluster totals),
    /// else, before there is one, from every node.
    fn advertised(&self, resource: &str) -> bool {
        match self.engine.as_ref().map(|e| &e.engine().graph().graph) {
            Some(g) => g.resources.get(resource).is_some_and(|id| g.totals().0[id.index()] > 0),
            None => self.nodes.items.values().any(|n| node_room::has(n, resource)),
        }
    }

    /// The DeviceClasses as the watch has them, for the executor's claim allocations.
    pub(super) fn class_snapshot(&self) -> Arc<BTreeMap<String, DeviceClass>> {
        Arc::new(self.classes.items.values().map(|c| (c.name.clone(), c.class.clone())).collect())
    }

    /// What `pod` asks of its node's counted resources: its requests but the extended resources
    /// devices serve (its claim holds those).
    pub(super) fn counted_requests(&self, pod: &PodView) -> Vec<(String, u64)> {
        if pod.extended().is_none() {
            return pod.requests.clone();
        }
        let served = self.served_by_devices();
        pod.requests.iter().filter(|(r, _)| !served.contains_key(r)).cloned().collect()
    }

    /// The Group object of a workload, with the devices its pods ask for.
    pub(super) fn group_object(&self, j: &WorkloadView) -> Result<GroupObjectSpec, String> {
        let mut spec = j.group.clone()?;
        self.fill_group_devices(&j.key.namespace, &mut spec, &j.devices)?;
        Ok(spec)
    }

    /// Fills the devices of `spec`, a Group object in `namespace`, from what its pods ask
    /// (`asks`: one per set, or one for alike members), read against the namespace's templates,
    /// the DeviceClasses and the published devices.
    pub(super) fn fill_group_devices(
        &self,
        namespace: &str,
        spec: &mut GroupObjectSpec,
        asks: &[PodDevices],
    ) -> Result<(), String> {
        if asks.iter().all(PodDevices::is_empty) {
            return Ok(());
        }
        let class = |name: &str| self.classes.items.get(name).map(|c| &c.class);
        let template = |name: &str| self.templates.items.get(&format!("{namespace}/{name}")).map(|t| &t.template);
        let served = self.served_by_devices();
        fill_devices(spec, asks, |asks| {
            let mut requests = claim_requests(&asks.claims, template, &class, self)?;
            let extended = asks.extended.claim(|r| served.get(r).copied());
            requests.extend(extended.device_requests(&class, self)?);
            Ok(requests)
        })
    }

    /// What to write into `pod`'s claims before it is bound as member `member` of its group:
    /// the member's devices, each under the request it serves; for extended resources its
    /// member holds devices for, the claim muster makes.
    ///
    /// `classes` is [`Self::class_snapshot`], taken once for a pass's bindings.
    pub(super) fn claim_allocations(
        &self,
        pod: &PodView,
        member: u32,
        classes: &Arc<BTreeMap<String, DeviceClass>>,
    ) -> Result<Vec<ClaimAllocation>, ClaimsNotReady> {
        let made = match pod.claims.as_deref() {
            Some(claims) => claims.all_made().ok_or(ClaimsNotReady::Wait)?,
            None => Vec::new(),
        };
        if made.is_empty() && pod.extended().is_none() {
            return Ok(Vec::new());
        }
        let key = pod.group_key().ok_or(ClaimsNotReady::Wait)?;
        let g = self.engine.as_ref().and_then(|e| e.engine().group(&key)).ok_or(ClaimsNotReady::Wait)?;
        let placed = g.allocation.as_ref().and_then(|a| a.members.iter().find(|m| m.index == member));
        let placed = placed.ok_or(ClaimsNotReady::Wait)?;
        let request = &g.spec.request;
        let requests = request.set_devices_of(request.set_of(member).0);
        let extended_prefix = format!("{EXTENDED_CLAIM}/");
        // Extended resources counted on the member's node (a device plugin's) need no claim.
        let served_by_devices = self.served_by_devices();
        let extended = (pod.extended())
            .filter(|_| requests.iter().any(|r| r.name.starts_with(&extended_prefix)))
            .map(|asks| asks.claim(|r| served_by_devices.get(r).copied()));
        if made.is_empty() && extended.is_none() {
            return Ok(Vec::new());
        }
        if requests.is_empty() {
            // A kind whose claims muster does not read (the webhook refuses them): binding would
            // leave the claims unallocated.
            return Err(ClaimsNotReady::Refuse(
                "it claims devices, but its group was placed without them: muster reads the claims of Jobs, \
                 JobSets, MPIJobs, RayJobs and RayClusters only; delete it, and create it without the claims"
                    .into(),
            ));
        }
        let published = self.nodes.items.get(&placed.node).map(|n| n.spec.published.as_slice()).unwrap_or_default();
        let of_name = |name: &String| published.iter().find(|d| graph_name(&d.driver, &d.pool, &d.name) == *name);
        // The member's devices of the requests' drivers (it may hold a device plugin's too). One a
        // slice no longer publishes: wait for the slice (or for the group's eviction).
        let claimed = |name: &&String| requests.iter().any(|r| name.starts_with(&format!("{}/", r.driver)));
        let devices: Vec<&PublishedDevice> =
            placed.devices.iter().filter(claimed).map(of_name).collect::<Option<_>>().ok_or(ClaimsNotReady::Wait)?;
        let served = assign(requests, &devices).map_err(|e| {
            ClaimsNotReady::Refuse(format!(
                "its claims ask for other devices than its member was placed with ({e}); delete the pod to have it \
                 made again"
            ))
        })?;
        let sources = made.into_iter().map(|(pod_claim, claim)| (pod_claim, ClaimSource::Made(claim)));
        let extended = extended.map(|claim| {
            let source = ClaimSource::Extended { made: pod.extended_claim.clone(), claim };
            (EXTENDED_CLAIM.to_string(), source)
        });
        Ok(sources
            .chain(extended)
            .map(|(pod_claim, claim)| {
                let prefix = format!("{pod_claim}/");
                let devices = (served.iter().zip(&devices))
                    .map(|(&r, d)| (requests[r].name.clone(), (*d).clone()))
                    .filter(|(r, _)| r.starts_with(&prefix))
                    .collect();
                let classes = Arc::clone(classes);
                ClaimAllocation { claim, pod_claim, node: placed.node.clone(), devices, classes }
            })
            .collect())
    }
}
