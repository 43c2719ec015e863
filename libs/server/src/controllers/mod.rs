//! In-process controllers for what kube-controller-manager does and users expect of any
//! cluster: the `default` ServiceAccount and `kube-root-ca.crt` ConfigMap of every namespace
//! ([`service_accounts`]), and ResourceQuota usage kept exact ([`resource_quota`]).
//!
//! Each follows the watch caches, as kube's controllers follow informers, and queues the keys
//! to reconcile; a failed reconcile is queued again a second later. Every write is idempotent
//! (a create that finds the object made meanwhile is done; updates are conditional and
//! recomputed from the current object), so that every replica may run them at once.

pub mod garbage_collector;
pub mod disruption;
pub mod namespace;
pub mod resource_quota;
pub mod service_accounts;

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kapi_registry::catalog::ResourceSpec;
use kapi_registry::rest::RestStore;
use kapi_watch::{CacheSet, EventType, WatchError, WatchItem};
use serde_json::Value;
use tokio::sync::Notify;

use crate::config::StartError;
use crate::rbac_sync::{initial_state, SyncError};

/// The field manager of the controllers' writes, as kube-controller-manager's user agent names
/// them.
pub(crate) const MANAGER: &str = "kube-controller-manager";

/// Starts every controller over the caches; `data_dir` holds the cluster CA they publish.
pub async fn start(data_dir: &Path, caches: Arc<CacheSet>, rest: RestStore) -> Result<(), StartError> {
    let path = data_dir.join("pki").join("ca.crt");
    let root_ca = tokio::fs::read_to_string(&path)
        .await
        .map_err(|source| StartError::Io { context: format!("reading the cluster CA {}", path.display()), source })?;
    service_accounts::start(caches.clone(), rest.clone(), root_ca);
    resource_quota::start(caches.clone(), rest.clone());
    disruption::start(caches, rest);
    Ok(())
}

/// Keys waiting to be reconciled, each once however often it was added (kube's work queue).
#[derive(Default)]
pub(crate) struct Queue {
    pending: Mutex<BTreeSet<String>>,
    wake: Notify,
}

impl Queue {
    /// Queues `key`.
    pub(crate) fn add(&self, key: impl Into<String>) {
        self.pending.lock().unwrap_or_else(|e| e.into_inner()).insert(key.into());
        self.wake.notify_one();
    }

    /// Queues `key` again after a pause (a reconcile failed).
    pub(crate) fn retry(self: &Arc<Self>, key: String) {
        let queue = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(1)).await;
            queue.add(key);
        });
    }

    /// The next key, waiting for one.
    pub(crate) async fn next(&self) -> String {
        loop {
            if let Some(key) = self.pending.lock().unwrap_or_else(|e| e.into_inner()).pop_first() {
                return key;
            }
            self.wake.notified().await;
        }
    }
}

/// Follows `spec`'s cache until the caches shut down: `on` sees every object of the initial
/// state as added, then every change. A watch the cache cuts off is opened again from a fresh
/// initial state (so `on` sees everything again, which reconciling tolerates).
pub(crate) async fn follow(caches: Arc<CacheSet>, spec: &'static ResourceSpec, mut on: impl FnMut(EventType, &Value) + Send) {
    loop {
        let mut watcher = match initial_state(&caches, spec).await {
            Ok((objects, watcher)) => {
                for obj in &objects {
                    on(EventType::Added, obj);
                }
                watcher
            }
            Err(SyncError::Watch(WatchError::ShuttingDown)) => return,
            Err(e) => {
                tracing::warn!(resource = spec.resource, "controller watch failed: {e}; retrying");
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
        };
        loop {
            match watcher.next().await {
                Some(WatchItem::Event { event, kind }) => on(kind, &event.object),
                Some(WatchItem::Bookmark(_) | WatchItem::InitialEventsEnd(_)) => {}
                Some(WatchItem::Terminated { .. }) => break,
                None => return,
            }
        }
    }
}
