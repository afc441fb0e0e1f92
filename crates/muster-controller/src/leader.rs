//! Leader election on a `coordination.k8s.io/v1` Lease: one replica acts, the others wait. Every
//! write of the lease is conditional on its resourceVersion, so two replicas never both win.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease as LeaseObject, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::PostParams;
use kube::{Api, Client};
use tracing::{info, warn};

use crate::{ControllerError, Options};

pub struct Lease {
    api: Api<LeaseObject>,
    name: String,
    identity: String,
    ttl: Duration,
}

impl Lease {
    pub fn new(client: Client, opts: &Options) -> Self {
        Lease {
            api: Api::namespaced(client, &opts.lease_namespace),
            name: opts.lease_name.clone(),
            identity: opts.identity.clone(),
            ttl: opts.lease_ttl,
        }
    }

    fn spec(&self, acquired: Option<MicroTime>, transitions: i32) -> LeaseSpec {
        let now = MicroTime(Timestamp::now());
        LeaseSpec {
            holder_identity: Some(self.identity.clone()),
            lease_duration_seconds: Some(self.ttl.as_secs() as i32),
            acquire_time: Some(acquired.unwrap_or_else(|| now.clone())),
            renew_time: Some(now),
            lease_transitions: Some(transitions),
            ..LeaseSpec::default()
        }
    }

    /// One attempt: Ok(true) when this instance holds the lease afterwards.
    async fn try_take(&self) -> Result<bool, kube::Error> {
        let Some(mut lease) = self.api.get_opt(&self.name).await? else {
            let obj = LeaseObject {
                metadata: ObjectMeta { name: Some(self.name.clone()), ..ObjectMeta::default() },
                spec: Some(self.spec(None, 0)),
            };
            return match self.api.create(&PostParams::default(), &obj).await {
                Ok(_) => Ok(true),
                Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
                Err(e) => Err(e),
            };
        };
        let spec = lease.spec.clone().unwrap_or_default();
        let mine = spec.holder_identity.as_deref() == Some(&self.identity);
        let free = spec.holder_identity.as_deref().is_none_or(str::is_empty);
        let expired = match (&spec.renew_time, spec.lease_duration_seconds) {
            (Some(t), Some(d)) => t.0.as_second() + i64::from(d) < Timestamp::now().as_second(),
            _ => true,
        };
        if !(mine || free || expired) {
            return Ok(false);
        }
        let transitions = spec.lease_transitions.unwrap_or(0) + i32::from(!mine);
        lease.spec = Some(self.spec(if mine { spec.acquire_time } else { None }, transitions));
        match self.api.replace(&self.name, &PostParams::default(), &lease).await {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Waits until this instance holds the lease.
    pub async fn acquire(&self) -> Result<(), ControllerError> {
        let mut said = false;
        loop {
            match self.try_take().await {
                Ok(true) => return Ok(()),
                Ok(false) if !said => {
                    info!(lease = self.name, "another instance leads; waiting");
                    said = true;
                }
                Ok(false) => {}
                Err(e) => warn!(lease = self.name, "lease: {e}"),
            }
            tokio::time::sleep(self.ttl / 5).await;
        }
    }

    /// Renews the lease; returns (an error) once it could not be renewed for a whole term, so
    /// that the instance stops acting before another one may take over.
    pub async fn hold(&self) -> Result<(), ControllerError> {
        let mut renewed = Instant::now();
        loop {
            tokio::time::sleep(self.ttl / 3).await;
            match self.try_take().await {
                Ok(true) => renewed = Instant::now(),
                Ok(false) => return Err(ControllerError::LostLease(self.name.clone())),
                Err(e) => warn!(lease = self.name, "renewing the lease: {e}"),
            }
            if renewed.elapsed() >= self.ttl * 2 / 3 {
                return Err(ControllerError::LostLease(self.name.clone()));
            }
        }
    }

    /// Gives the lease up on a clean shutdown, so a standby takes over at once.
    pub async fn release(&self) {
        let Ok(Some(mut lease)) = self.api.get_opt(&self.name).await else { return };
        if let Some(spec) = lease.spec.as_mut()
            && spec.holder_identity.as_deref() == Some(&self.identity)
        {
            spec.holder_identity = None;
            if let Err(e) = self.api.replace(&self.name, &PostParams::default(), &lease).await {
                warn!(lease = self.name, "releasing the lease: {e}");
            }
        }
    }
}
