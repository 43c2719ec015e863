//! Leader election for the in-process controllers, as kube-controller-manager's: one replica at
//! a time holds the `kube-system/kube-controller-manager` Lease and runs the controllers'
//! workers; the others keep following the caches and queueing keys, ready to take over. A
//! holder that stops renewing is replaced once the Lease has gone unchanged for its duration
//! (measured on the candidate's own clock, as client-go does, so replicas' clocks need not
//! agree); a leader that cannot renew within the renew deadline stops acting.
//!
//! Losing the lease does not end the process (the API server keeps serving): workers finish
//! the reconcile in hand and wait. Every controller write is conditional, so the moment two
//! replicas overlap is harmless.

use std::time::{Duration, Instant};

use kapi_apimachinery::{time as ktime, ApiError};
use kapi_registry::catalog;
use kapi_registry::rest::{RestStore, WriteHooks};
use kapi_registry::strategy::{CatalogStrategy, WriteTarget};
use serde_json::{json, Value};
use tokio::sync::watch;

/// kube-controller-manager's Lease.
pub const LEASE_NAMESPACE: &str = "kube-system";
/// Its name.
pub const LEASE_NAME: &str = "kube-controller-manager";

/// The `--leader-elect-*` settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElectionConfig {
    /// `--leader-elect-lease-duration`.
    pub lease_duration: Duration,
    /// `--leader-elect-renew-deadline`.
    pub renew_deadline: Duration,
    /// `--leader-elect-retry-period`.
    pub retry_period: Duration,
}

impl Default for ElectionConfig {
    /// kube-controller-manager's 15 s, 10 s and 2 s.
    fn default() -> Self {
        ElectionConfig { lease_duration: Duration::from_secs(15), renew_deadline: Duration::from_secs(10), retry_period: Duration::from_secs(2) }
    }
}

impl ElectionConfig {
    /// client-go's checks: the lease outlasts the renew deadline, which outlasts a jittered
    /// retry.
    pub fn validate(&self) -> Result<(), String> {
        if self.lease_duration <= self.renew_deadline {
            return Err("leaseDuration must be greater than renewDeadline".into());
        }
        if self.renew_deadline.as_secs_f64() <= self.retry_period.as_secs_f64() * 1.2 {
            return Err("renewDeadline must be greater than retryPeriod*JitterFactor".into());
        }
        if self.retry_period.is_zero() {
            return Err("retryPeriod must be greater than zero".into());
        }
        Ok(())
    }
}

/// Whether this replica's controllers may act now.
#[derive(Clone)]
pub struct Leadership {
    state: watch::Receiver<bool>,
    /// Keeps the channel open for [`Leadership::always`].
    _always: Option<std::sync::Arc<watch::Sender<bool>>>,
}

impl Leadership {
    /// Always leading: leader election is off (`--leader-elect=false`).
    pub fn always() -> Self {
        let (tx, rx) = watch::channel(true);
        Leadership { state: rx, _always: Some(std::sync::Arc::new(tx)) }
    }

    /// Whether this replica leads right now.
    pub fn is_leader(&self) -> bool {
        *self.state.borrow()
    }

    /// Waits until this replica leads (at once if it does). Never returns if the election
    /// ended (the process is stopping).
    pub async fn led(&self) {
        let mut state = self.state.clone();
        if state.wait_for(|leads| *leads).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// The running election: what the controllers wait on, and the way to step down.
#[derive(Clone)]
pub struct Election {
    /// Whether this replica leads.
    pub leadership: Leadership,
    rest: RestStore,
    identity: String,
    stopped: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Election {
    /// Stops campaigning and, when this replica holds the Lease, gives it up (client-go's
    /// `ReleaseOnCancel`: no holder, a one-second duration), so that another replica takes
    /// over at once instead of after the lease duration.
    pub async fn release(&self) -> Result<(), ApiError> {
        self.stopped.store(true, std::sync::atomic::Ordering::SeqCst);
        let spec = catalog::find("coordination.k8s.io", "v1", "leases").ok_or_else(|| ApiError::internal("leases missing from the catalog"))?;
        let strategy = CatalogStrategy(spec);
        let lease = match self.rest.get(&strategy, Some(LEASE_NAMESPACE), LEASE_NAME).await {
            Ok(lease) => lease,
            Err(e) if e.code == 404 => return Ok(()),
            Err(e) => return Err(e),
        };
        if lease.pointer("/spec/holderIdentity").and_then(Value::as_str) != Some(self.identity.as_str()) {
            return Ok(());
        }
        let now = ktime::now_rfc3339_micro();
        let mut released = lease.clone();
        let transitions = lease.pointer("/spec/leaseTransitions").cloned().unwrap_or(json!(0));
        released["spec"] = json!({"leaseDurationSeconds": 1, "acquireTime": now, "renewTime": now, "leaseTransitions": transitions});
        match self.rest.update(&strategy, Some(LEASE_NAMESPACE), LEASE_NAME, released, WriteTarget::Main, false, WriteHooks::default()).await {
            Ok(_) => Ok(()),
            Err(e) if e.code == 409 || e.code == 404 => Ok(()),
            Err(e) => Err(e),
        }
    }
}

/// Runs the election for `identity` until the process ends or it is released.
pub fn start(rest: RestStore, identity: String, config: ElectionConfig) -> Election {
    let (tx, rx) = watch::channel(false);
    let stopped = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let election =
        Election { leadership: Leadership { state: rx, _always: None }, rest: rest.clone(), identity: identity.clone(), stopped: stopped.clone() };
    tokio::spawn(async move {
        let mut elector = Elector { rest, identity, config, observed: None };
        let mut last_renewal = Instant::now();
        loop {
            if stopped.load(std::sync::atomic::Ordering::SeqCst) {
                let _ = tx.send(false);
                return;
            }
            let leading = *tx.borrow();
            match elector.try_acquire_or_renew().await {
                Ok(true) => {
                    last_renewal = Instant::now();
                    if !leading {
                        tracing::info!(identity = %elector.identity, "successfully acquired lease {LEASE_NAMESPACE}/{LEASE_NAME}");
                        let _ = tx.send(true);
                    }
                }
                Ok(false) if leading => {
                    tracing::warn!(identity = %elector.identity, "leaderelection lost: another replica holds {LEASE_NAMESPACE}/{LEASE_NAME}");
                    let _ = tx.send(false);
                }
                Ok(false) => {}
                Err(e) => {
                    tracing::debug!("leader election: {e}");
                    if leading && last_renewal.elapsed() > elector.config.renew_deadline {
                        tracing::warn!(identity = %elector.identity, "leaderelection lost: failed to renew the lease within the renew deadline");
                        let _ = tx.send(false);
                    }
                }
            }
            tokio::time::sleep(elector.config.retry_period).await;
        }
    });
    election
}

struct Elector {
    rest: RestStore,
    identity: String,
    config: ElectionConfig,
    /// The other holder's record as last seen, and when this replica saw it change.
    observed: Option<(Value, Instant)>,
}

impl Elector {
    /// One round of client-go's `tryAcquireOrRenew`: Ok(true) when this replica holds the
    /// Lease afterwards.
    async fn try_acquire_or_renew(&mut self) -> Result<bool, ApiError> {
        let spec = catalog::find("coordination.k8s.io", "v1", "leases").ok_or_else(|| ApiError::internal("leases missing from the catalog"))?;
        let strategy = CatalogStrategy(spec);
        let now = ktime::now_rfc3339_micro();
        let seconds = self.config.lease_duration.as_secs() as i64;
        let current = match self.rest.get(&strategy, Some(LEASE_NAMESPACE), LEASE_NAME).await {
            Ok(lease) => lease,
            Err(e) if e.code == 404 => {
                let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": LEASE_NAME, "namespace": LEASE_NAMESPACE},
                    "spec": {"holderIdentity": self.identity, "leaseDurationSeconds": seconds, "acquireTime": now, "renewTime": now, "leaseTransitions": 0}});
                return match self.rest.create(&strategy, Some(LEASE_NAMESPACE), lease, false, WriteHooks::default()).await {
                    Ok(_) => Ok(true),
                    Err(e) if e.code == 409 => Ok(false),
                    Err(e) => Err(e),
                };
            }
            Err(e) => return Err(e),
        };
        let holder = current.pointer("/spec/holderIdentity").and_then(Value::as_str).unwrap_or("");
        let mut next = current.clone();
        if holder == self.identity {
            next["spec"]["renewTime"] = json!(now);
            next["spec"]["leaseDurationSeconds"] = json!(seconds);
        } else {
            let record = current.get("spec").cloned().unwrap_or(Value::Null);
            let seen_at = match &self.observed {
                Some((seen, at)) if *seen == record => *at,
                _ => {
                    self.observed = Some((record, Instant::now()));
                    Instant::now()
                }
            };
            let duration =
                current.pointer("/spec/leaseDurationSeconds").and_then(Value::as_u64).map_or(self.config.lease_duration, Duration::from_secs);
            if !holder.is_empty() && seen_at.elapsed() < duration {
                return Ok(false);
            }
            let transitions = current.pointer("/spec/leaseTransitions").and_then(Value::as_i64).unwrap_or(0);
            next["spec"] = json!({"holderIdentity": self.identity, "leaseDurationSeconds": seconds, "acquireTime": now, "renewTime": now,
                "leaseTransitions": transitions + 1});
        }
        // Pinned to the Lease as read: of two candidates, one wins.
        match self.rest.update(&strategy, Some(LEASE_NAMESPACE), LEASE_NAME, next, WriteTarget::Main, false, WriteHooks::default()).await {
            Ok(_) => Ok(true),
            Err(e) if e.code == 409 => Ok(false),
            Err(e) => Err(e),
        }
    }
}
