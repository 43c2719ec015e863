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
pub struct Storage {
    name: &'static str,
    store: StoreSlot,
    timeout: Duration,
}

impl Storage {
    /// The `etcd` check.
    pub fn liveness(store: StoreSlot, timeout: Duration) -> Self {
        Self { name: "etcd", store, timeout }
    }

    /// The `etcd-readiness` check.
    pub fn readiness(store: StoreSlot, timeout: Duration) -> Self {
        Self { name: "etcd-readiness", store, timeout }
    }
}

impl HealthCheck for Storage {
    fn name(&self) -> &str {
        self.name
    }
    fn check(&self) -> CheckFuture<'_> {
        Box::pin(async move {
            let store = self.store.get().ok_or(CheckError::StorageNotConnected)?;
            match tokio::time::timeout(self.timeout, store.current_revision()).await {
                Ok(Ok(_)) => Ok(()),
                Ok(Err(e)) => Err(CheckError::Storage(e.to_string())),
                Err(_) => Err(CheckError::Storage(format!("the storage backend did not answer within {:?}", self.timeout))),
            }
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
