//! Devices for muster's own pods: what a workload's pods claim through ResourceClaimTemplates
//! becomes its Group's device requests (read against the DeviceClasses and the published
//! devices), and before a pod is bound each of its claims is allocated the devices its member
//! was placed with ([`ClaimAllocation`], written by the executor).

use muster_graph::dra::{PublishedDevice, assign, graph_name};
use muster_k8s::GroupSpec as GroupObjectSpec;
use muster_k8s::dra::claim_requests;
use muster_k8s::workload::fill_devices;
use muster_store::Store;

use super::{Brain, Change};
use crate::allocate::ClaimAllocation;
use crate::convert::{ClassView, PodView, TemplateView, WorkloadView};

/// Why a pod with claims is not bound yet.
pub(super) enum ClaimsNotReady {
    /// Its claims are not made yet, or its devices are not in view: the next pod or slice
    /// event tries again.
    Wait,
    /// It cannot be bound as it is (told on the pod).
    Refuse(String),
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
        self.devices_changed(None);
    }

    /// Workloads whose pods claim devices are looked at again (in `namespace`, or all): a
    /// template or class that was missing may be there now, or ask otherwise.
    fn devices_changed(&mut self, namespace: Option<&str>) {
        let claiming: Vec<String> = (self.workloads())
            .filter(|j| j.claims.iter().any(|c| !c.is_empty()))
            .filter(|j| namespace.is_none_or(|ns| j.key.namespace == ns))
            .map(|j| j.key.to_string())
            .collect();
        self.dirty_jobs.extend(claiming);
    }

    /// The Group object of a workload, with the devices its pods' claims ask.
    pub(super) fn group_object(&self, j: &WorkloadView) -> Result<GroupObjectSpec, String> {
        let mut spec = j.group.clone()?;
        if j.claims.iter().all(Vec::is_empty) {
            return Ok(spec);
        }
        let class = |name: &str| self.classes.items.get(name).map(|c| &c.class);
        let published = self.nodes.items.values().flat_map(|n| n.spec.published.iter());
        let template =
            |name: &str| self.templates.items.get(&format!("{}/{name}", j.key.namespace)).map(|t| &t.template);
        fill_devices(&mut spec, &j.claims, |claims| claim_requests(claims, template, &class, published.clone()))?;
        Ok(spec)
    }

    /// What to write into `pod`'s claims before it is bound as member `member` of its group:
    /// the member's devices, each under the request it serves.
    pub(super) fn claim_allocations(&self, pod: &PodView, member: u32) -> Result<Vec<ClaimAllocation>, ClaimsNotReady> {
        let Some(claims) = pod.claims.as_deref() else { return Ok(Vec::new()) };
        let Some(made) = claims.all_made() else { return Err(ClaimsNotReady::Wait) };
        let key = pod.group_key().ok_or(ClaimsNotReady::Wait)?;
        let g = self.engine.as_ref().and_then(|e| e.engine().group(&key)).ok_or(ClaimsNotReady::Wait)?;
        let placed = g.allocation.as_ref().and_then(|a| a.members.iter().find(|m| m.index == member));
        let placed = placed.ok_or(ClaimsNotReady::Wait)?;
        let request = &g.spec.request;
        let requests = request.set_devices_of(request.set_of(member).0);
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
        Ok(made
            .into_iter()
            .map(|(pod_claim, claim)| {
                let prefix = format!("{pod_claim}/");
                let devices = (served.iter().zip(&devices))
                    .map(|(&r, d)| (requests[r].name.clone(), (*d).clone()))
                    .filter(|(r, _)| r.starts_with(&prefix))
                    .collect();
                ClaimAllocation { claim, pod_claim, node: placed.node.clone(), devices }
            })
            .collect())
    }
}
