//! The configuration objects (Queues, Cohorts, Reservations) listed one by one: an object the
//! apiserver took but muster cannot read (a time with more than nine fractional digits, which the
//! CRD's `date-time` format allows) is refused on its own, by name, instead of failing the list
//! and with it the controller.

use kube::api::{DynamicObject, ListParams, TypeMeta};
use kube::core::ApiResource;
use kube::{Api, Client, Resource};
use muster_graph::InputError;
use serde::de::DeserializeOwned;
use tracing::warn;

use crate::watch::Versions;

/// Every object of one kind: those muster reads, and those it cannot.
pub struct Listing<K> {
    pub read: Vec<K>,
    pub unreadable: Vec<Unreadable>,
}

/// An object muster cannot read: its name, generation and why (as `KIND/NAME: spec: ...`).
pub struct Unreadable {
    pub name: String,
    pub generation: Option<i64>,
    pub error: InputError,
}

impl<K: Resource> Listing<K> {
    /// The name and generation of every object, read or not: what a change is told from.
    pub fn versions(&self) -> Versions {
        let read = self.read.iter().map(|o| (o.meta().name.clone().unwrap_or_default(), o.meta().generation));
        Versions::from_pairs(read.chain(self.unreadable.iter().map(|u| (u.name.clone(), u.generation))))
    }
}

/// Lists every object of kind `K` and reads each on its own; one it cannot read is logged.
pub async fn list<K>(client: &Client) -> Result<Listing<K>, kube::Error>
where
    K: Resource<DynamicType = ()> + DeserializeOwned,
{
    let resource = ApiResource::erase::<K>(&());
    let objects = Api::<DynamicObject>::all_with(client.clone(), &resource).list(&ListParams::default()).await?;
    let mut listing = Listing { read: Vec::new(), unreadable: Vec::new() };
    for mut o in objects.items {
        o.types = Some(TypeMeta { api_version: resource.api_version.clone(), kind: resource.kind.clone() });
        let name = o.metadata.name.clone().unwrap_or_default();
        match serde_json::to_value(&o).and_then(serde_json::from_value::<K>) {
            Ok(k) => listing.read.push(k),
            Err(e) => {
                let error = InputError::new(
                    &format!("{}/{name}", resource.kind),
                    "spec",
                    format!("muster cannot read it: {e}"),
                );
                warn!("left out of the configuration: {error}");
                listing.unreadable.push(Unreadable { error, generation: o.metadata.generation, name });
            }
        }
    }
    Ok(listing)
}
