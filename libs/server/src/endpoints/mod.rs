//! The `kubernetes` Service's endpoints, one address per ready replica (kube's
//! `kubernetesservice` controller with the lease endpoint reconciler, started by the
//! `bootstrap-controller` post-start hook and stopped by the
//! `stop-kubernetes-service-controller` pre-shutdown hook).
//!
//! Every replica renews its own [`lease`] and, once ready, advertises its address in it and
//! rewrites the endpoints from every unexpired lease ([`objects`]). A replica that terminates
//! cleanly deletes its lease and removes its address before its listener closes; one that dies
//! drops out when its lease expires (`--endpoint-lease-duration`), at the next reconcile of any
//! other replica.

pub mod lease;
pub mod objects;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kapi_apimachinery::ApiError;
use kapi_registry::catalog::{self, ResourceSpec};
use kapi_registry::rest::{RestStore, Tracker, WriteHooks};
use kapi_registry::strategy::CatalogStrategy;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::health::{self, Endpoint};
use crate::lifecycle::Lifecycle;
use lease::{Identity, LeaseSpec};

/// The manager name on kube-apiserver's own writes.
const MANAGER: &str = "kube-apiserver";
/// How often readiness is polled before the first reconcile (kube polls `/readyz` as often).
const READY_POLL: Duration = Duration::from_millis(100);

/// One resource written by the server itself, with kube-apiserver's managedFields entry.
pub(crate) struct Resource {
    spec: &'static ResourceSpec,
    track: Option<Box<Tracker>>,
}

impl Resource {
    pub(crate) fn new(group: &str, resource: &str) -> Result<Self, ApiError> {
        let spec = catalog::find(group, "v1", resource).ok_or_else(|| ApiError::internal(format!("{resource} missing from the catalog")))?;
        let track = crate::field_manager::tracker(spec, crate::field_manager::writer(spec, MANAGER.into(), ""));
        Ok(Self { spec, track })
    }

    pub(crate) fn strategy(&self) -> CatalogStrategy {
        CatalogStrategy(self.spec)
    }

    pub(crate) fn hooks(&self) -> WriteHooks<'_> {
        WriteHooks::tracking(self.track.as_deref())
    }
}

/// Keeps this replica's lease and the `kubernetes` endpoints.
pub struct EndpointController {
    rest: RestStore,
    lifecycle: Arc<Lifecycle>,
    health: Arc<health::Registry>,
    identity: Identity,
    address: SocketAddr,
    lease_duration: Duration,
    stop: watch::Sender<bool>,
    task: Mutex<Option<JoinHandle<()>>>,
}

impl EndpointController {
    /// A controller for the replica reachable at `address`, holding its lease for
    /// `lease_duration` (renewed every third of it).
    pub fn new(rest: RestStore, lifecycle: Arc<Lifecycle>, health: Arc<health::Registry>, address: SocketAddr, lease_duration: Duration) -> Self {
        Self {
            rest,
            lifecycle,
            health,
            identity: Identity::new(&lease::hostname(), address),
            address,
            lease_duration,
            stop: watch::Sender::new(false),
            task: Mutex::new(None),
        }
    }

    /// This replica's lease name.
    pub fn lease_name(&self) -> &str {
        &self.identity.lease_name
    }

    fn lease(&self, advertise: bool) -> LeaseSpec<'_> {
        LeaseSpec { identity: &self.identity, duration: self.lease_duration, advertise: advertise.then_some(self.address) }
    }

    /// Creates or renews the lease without advertising the address (the
    /// `start-kube-apiserver-identity-lease-controller` hook's first write).
    pub async fn acquire_lease(&self) -> Result<(), ApiError> {
        lease::renew(&self.rest, &self.lease(false)).await
    }

    /// One reconcile: the other replicas' live addresses, plus this one when included.
    async fn reconcile(&self, include_self: bool) -> Result<(), ApiError> {
        let mut addresses = lease::live_addresses(&self.rest, &self.identity).await?;
        if include_self {
            addresses.push(self.address);
        }
        objects::reconcile(&self.rest, &addresses).await
    }

    /// Starts renewing the lease and, once the server is ready, reconciling the endpoints.
    pub fn start(self: &Arc<Self>) {
        let task = tokio::spawn(self.clone().run(self.stop.subscribe()));
        if let Ok(mut slot) = self.task.lock() {
            *slot = Some(task);
        }
    }

    async fn run(self: Arc<Self>, mut stop: watch::Receiver<bool>) {
        let interval = (self.lease_duration / 3).max(Duration::from_millis(200));
        let mut ready = false;
        let mut renewed: Option<tokio::time::Instant> = None;
        loop {
            if !ready {
                // kube's controller waits for /readyz before it first adds its address.
                ready = self.lifecycle.has_been_ready.is_signaled() || self.health.passes(Endpoint::Readyz).await;
            }
            let advertise = ready && !self.lifecycle.is_shutting_down();
            if advertise || renewed.is_none_or(|at| at.elapsed() >= interval) {
                match lease::renew(&self.rest, &self.lease(advertise)).await {
                    Ok(()) => renewed = Some(tokio::time::Instant::now()),
                    Err(e) => tracing::warn!(lease = %self.identity.lease_name, "renewing the apiserver lease: {}", e.message),
                }
            }
            if advertise {
                if let Err(e) = self.reconcile(true).await {
                    tracing::warn!("reconciling the kubernetes endpoints: {}", e.message);
                }
            }
            let pause = if ready { interval } else { READY_POLL };
            tokio::select! {
                () = tokio::time::sleep(pause) => {}
                _ = stop.wait_for(|s| *s) => return,
            }
        }
    }

    /// Stops the loop, deletes this replica's lease and removes its address from the endpoints
    /// (the `stop-kubernetes-service-controller` pre-shutdown hook).
    pub async fn stop(&self) -> Result<(), ApiError> {
        self.stop.send_replace(true);
        let task = self.task.lock().ok().and_then(|mut t| t.take());
        if let Some(task) = task {
            // A reconcile in progress finishes first, so it cannot add the address back.
            let _ = task.await;
        }
        lease::release(&self.rest, &self.identity).await?;
        self.reconcile(false).await?;
        tracing::info!(lease = %self.identity.lease_name, address = %self.address, "removed this apiserver from the kubernetes endpoints");
        Ok(())
    }
}
