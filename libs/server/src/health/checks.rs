//! The checks every kapi registers, named as kube-apiserver names them.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use kapi_storage::DynStore;

use super::{CheckError, CheckFuture, HealthCheck};
use crate::lifecycle::Lifecycle;

/// `ping`: the process answers HTTP.
#[derive(Debug, Clone, Copy)]
pub struct Ping;

impl HealthCheck for Ping {
    fn name(&self) -> &str {
        "ping"
    }
    fn check(&self) -> CheckFuture<'_> {
        Box::pin(async { Ok(()) })
    }
}

/// `log`: kube's check that logging is not blocked. tracing writes without a flush loop that
/// could wedge, so it always passes; it is listed so probes and scripts see kube's names.
#[derive(Debug, Clone, Copy)]
pub struct Log;

impl HealthCheck for Log {
    fn name(&self) -> &str {
        "log"
    }
    fn check(&self) -> CheckFuture<'_> {
        Box::pin(async { Ok(()) })
    }
}

/// The store, once start-up has opened it: health is served before that, and the storage
/// checks fail until then.
pub type StoreSlot = Arc<OnceLock<DynStore>>;

/// `etcd` (every endpoint) and `etcd-readiness` (readyz): the storage backend answers a read
/// within the timeout. kube names them after etcd whatever the backend; kapi keeps the names
/// so existing probes and dashboards work.
///
/// The `etcd` check tolerates a brief outage ([`STORAGE_OUTAGE_GRACE`]): restarting kapi does
/// not bring a store back (an etcd leader election, a member restart), and every replica would
/// be restarted at once. `etcd-readiness` fails at once, so load balancers drain the replica.
pub struct Storage {
    name: &'static str,
    store: StoreSlot,
    timeout: Duration,
    outage_grace: Option<Duration>,
    failing_since: std::sync::Mutex<Option<std::time::Instant>>,
}

/// How long the store may fail continuously before the `etcd` check fails.
pub const STORAGE_OUTAGE_GRACE: Duration = Duration::from_secs(20);

impl Storage {
    /// The `etcd` check.
    pub fn liveness(store: StoreSlot, timeout: Duration) -> Self {
        Self { name: "etcd", store, timeout, outage_grace: Some(STORAGE_OUTAGE_GRACE), failing_since: Default::default() }
    }

    /// The `etcd-readiness` check.
    pub fn readiness(store: StoreSlot, timeout: Duration) -> Self {
        Self { name: "etcd-readiness", store, timeout, outage_grace: None, failing_since: Default::default() }
    }

    /// Whether a failure now is still within the outage grace.
    fn tolerated(&self) -> bool {
        let Some(grace) = self.outage_grace else { return false };
        let mut since = self.failing_since.lock().unwrap_or_else(|p| p.into_inner());
        since.get_or_insert_with(std::time::Instant::now).elapsed() < grace
    }
}

impl HealthCheck for Storage {
    fn name(&self) -> &str {
        self.name
    }
    fn check(&self) -> CheckFuture<'_> {
        Box::pin(async move {
            let store = self.store.get().ok_or(CheckError::StorageNotConnected)?;
            let failure = match tokio::time::timeout(self.timeout, store.current_revision()).await {
                Ok(Ok(_)) => {
                    *self.failing_since.lock().unwrap_or_else(|p| p.into_inner()) = None;
                    return Ok(());
                }
                Ok(Err(e)) => CheckError::Storage(e.to_string()),
                Err(_) => CheckError::Storage(format!("the storage backend did not answer within {:?}", self.timeout)),
            };
            if self.tolerated() {
                tracing::warn!(check = self.name, error = %failure, "storage failing; tolerated for {:?}", STORAGE_OUTAGE_GRACE);
                return Ok(());
            }
            Err(failure)
        })
    }
}

/// `kms-providers`: kube's check of the KMS v2 plugins of `--encryption-provider-config`
/// (Status answers, healthz `ok`, a valid key ID; a new key ID gets a new DEK seed). Answers
/// are reused for 20 s (3 s after a failure), as kube's.
pub struct KmsProviders(pub std::sync::Arc<kapi_encryption::LiveConfig>);

impl HealthCheck for KmsProviders {
    fn name(&self) -> &str {
        "kms-providers"
    }
    fn check(&self) -> CheckFuture<'_> {
        Box::pin(async move { self.0.current().kms_health().await.map_err(CheckError::Kms) })
    }
}

/// What must be loaded before requests can be answered from memory: the watch caches and the
/// indexes built from them (kube's informers).
#[derive(Debug)]
pub struct Informers {
    synced: Vec<(&'static str, AtomicBool)>,
}

impl Informers {
    /// Informers of these names, none synced yet.
    pub fn new(names: &[&'static str]) -> Self {
        Self { synced: names.iter().map(|n| (*n, AtomicBool::new(false))).collect() }
    }

    /// Marks one as loaded.
    pub fn mark_synced(&self, name: &str) {
        for (n, synced) in &self.synced {
            if *n == name {
                synced.store(true, Ordering::SeqCst);
            }
        }
    }

    fn not_started(&self) -> Vec<&'static str> {
        self.synced.iter().filter(|(_, s)| !s.load(Ordering::SeqCst)).map(|(n, _)| *n).collect()
    }
}

/// `informer-sync` (readyz): every informer has loaded.
#[derive(Debug, Clone)]
pub struct InformerSync(pub Arc<Informers>);

impl HealthCheck for InformerSync {
    fn name(&self) -> &str {
        "informer-sync"
    }
    fn check(&self) -> CheckFuture<'_> {
        Box::pin(async move {
            let missing = self.0.not_started();
            if missing.is_empty() {
                Ok(())
            } else {
                Err(CheckError::InformersNotStarted(missing))
            }
        })
    }
}

/// `shutdown` (readyz, registered last as kube does): fails from SIGTERM on, so load balancers
/// stop sending new work during the shutdown delay.
#[derive(Debug, Clone)]
pub struct Shutdown(Arc<Lifecycle>);

impl Shutdown {
    /// The check over `lifecycle`'s `ShutdownInitiated`.
    pub fn new(lifecycle: Arc<Lifecycle>) -> Self {
        Self(lifecycle)
    }
}

impl HealthCheck for Shutdown {
    fn name(&self) -> &str {
        "shutdown"
    }
    fn check(&self) -> CheckFuture<'_> {
        Box::pin(async move {
            if self.0.shutdown_initiated.is_signaled() {
                Err(CheckError::ShuttingDown)
            } else {
                Ok(())
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn informer_sync_and_storage_report_kube_texts() {
        let informers = Arc::new(Informers::new(&["watch-cache", "rbac"]));
        let check = InformerSync(informers.clone());
        assert_eq!(check.check().await.unwrap_err().to_string(), "2 informers not started yet: [watch-cache rbac]");
        informers.mark_synced("watch-cache");
        informers.mark_synced("rbac");
        assert!(check.check().await.is_ok());
        let etcd = Storage::liveness(Arc::new(OnceLock::new()), Duration::from_secs(1));
        assert_eq!(etcd.check().await.unwrap_err().to_string(), "etcd client connection not yet established");
    }
}
