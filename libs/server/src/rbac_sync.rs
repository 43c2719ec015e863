//! Keeps the RBAC index current from the watch caches (kube's RBAC informers) and runs the
//! ClusterRole aggregation controller (kube-controller-manager's, which kapi runs in process).
//!
//! Each RBAC resource is followed by one initial-state watch on its cache: the initial state
//! fills the index before the server takes requests, later events update it in place. A watch
//! the cache cuts off (too slow, or compacted past) is re-established from a fresh initial
//! state, swapped into the index at once.

use std::sync::Arc;
use std::time::Duration;

use kapi_auth::rbac::{IndexedKind, RbacAuthorizer, RbacIndex};
use kapi_registry::catalog::{self, ResourceSpec};
use kapi_registry::rest::{RestStore, WriteHooks};
use kapi_registry::strategy::{CatalogStrategy, WriteTarget};
use kapi_watch::{CacheSet, EventType, WatchError, WatchItem, Watcher};
use serde_json::Value;
use tokio::sync::Notify;

const GROUP: &str = "rbac.authorization.k8s.io";
/// The field manager of aggregated rules, as kube-controller-manager's controller names itself.
const AGGREGATION_MANAGER: &str = "clusterrole-aggregation-controller";

fn spec(kind: IndexedKind) -> Option<&'static ResourceSpec> {
    catalog::find(GROUP, "v1", kind.resource())
}

fn apply(index: &mut RbacIndex, kind: IndexedKind, ty: EventType, obj: &Value) {
    match ty {
        EventType::Added | EventType::Modified => {
            if let Err(e) = index.put(kind, obj) {
                // Stored objects passed validation; one that does not decode grants nothing.
                tracing::warn!("ignoring an RBAC object that does not decode: {e}");
            }
        }
        EventType::Deleted => index.delete(kind, obj),
    }
}

/// Why the RBAC index (or another follower of the caches) could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    /// An RBAC resource is missing from the catalog or has no watch cache (a build defect).
    #[error("no watch cache for {0}")]
    NoCache(&'static str),
    /// The cache refused the watch.
    #[error(transparent)]
    Watch(#[from] WatchError),
    /// The cache ended the initial state before it was complete.
    #[error("the watch of {0} ended before its initial state was complete")]
    Ended(&'static str),
}

/// Opens an initial-state watch on the cache of `spec`'s resource and reads the initial state;
/// the watcher then follows later changes. Shared by every in-process follower of the caches.
pub(crate) async fn initial_state(caches: &CacheSet, spec: &ResourceSpec) -> Result<(Vec<Arc<Value>>, Watcher), SyncError> {
    let prefix = spec.key_prefix();
    let cache = caches.cache(&prefix).ok_or(SyncError::NoCache(spec.resource))?;
    let mut watcher = cache.watch(&prefix, kapi_watch::WatchStart::InitialState, Arc::new(|_: &Value| true))?;
    let mut objects = Vec::new();
    loop {
        match watcher.next().await {
            Some(WatchItem::Event { event, .. }) => objects.push(event.object.clone()),
            Some(WatchItem::InitialEventsEnd(_)) => return Ok((objects, watcher)),
            Some(WatchItem::Bookmark(_)) => {}
            Some(WatchItem::Terminated { .. }) | None => return Err(SyncError::Ended(spec.resource)),
        }
    }
}

/// Reads a watch's initial state and swaps it into the index in one write.
async fn load(caches: &CacheSet, kind: IndexedKind, authz: &RbacAuthorizer) -> Result<Watcher, SyncError> {
    let spec = spec(kind).ok_or(SyncError::NoCache(kind.resource()))?;
    let (objects, watcher) = initial_state(caches, spec).await?;
    let mut index = authz.index().write().unwrap_or_else(|e| e.into_inner());
    index.clear(kind);
    for obj in &objects {
        apply(&mut index, kind, EventType::Added, obj);
    }
    Ok(watcher)
}

/// Loads the index from the caches, then keeps it current in background tasks; cluster role
/// changes wake the aggregation controller.
pub async fn start(caches: Arc<CacheSet>, rest: RestStore, authz: RbacAuthorizer) -> Result<(), SyncError> {
    let aggregate = Arc::new(Notify::new());
    for kind in IndexedKind::ALL {
        let watcher = load(&caches, kind, &authz).await?;
        tokio::spawn(follow(caches.clone(), kind, watcher, authz.clone(), aggregate.clone()));
    }
    tokio::spawn(aggregation_controller(rest, authz, aggregate.clone()));
    aggregate.notify_one();
    Ok(())
}

async fn follow(caches: Arc<CacheSet>, kind: IndexedKind, mut watcher: Watcher, authz: RbacAuthorizer, aggregate: Arc<Notify>) {
    loop {
        match watcher.next().await {
            Some(WatchItem::Event { event, kind: ty }) => {
                apply(&mut authz.index().write().unwrap_or_else(|e| e.into_inner()), kind, ty, &event.object);
                if kind == IndexedKind::ClusterRole {
                    aggregate.notify_one();
                }
            }
            Some(WatchItem::Bookmark(_) | WatchItem::InitialEventsEnd(_)) => {}
            Some(WatchItem::Terminated { reason, .. }) => {
                tracing::warn!(resource = kind.resource(), ?reason, "RBAC watch ended; reloading");
                // Reload until the cache takes the watch again (it refuses only while closing).
                loop {
                    match load(&caches, kind, &authz).await {
                        Ok(w) => {
                            watcher = w;
                            break;
                        }
                        Err(SyncError::Watch(WatchError::ShuttingDown)) => return,
                        Err(e) => {
                            tracing::warn!(resource = kind.resource(), "RBAC reload failed: {e}");
                            tokio::time::sleep(Duration::from_millis(200)).await;
                        }
                    }
                }
                if kind == IndexedKind::ClusterRole {
                    aggregate.notify_one();
                }
            }
            None => return,
        }
    }
}

/// kube's ClusterRoleAggregationController: every ClusterRole with an `aggregationRule` holds
/// the rules of the cluster roles its selectors match. Runs whenever a cluster role changes;
/// its own writes wake it once more and find nothing to do. Several replicas may run it at
/// once: they compute the same rules, and a write that changes nothing is skipped.
async fn aggregation_controller(rest: RestStore, authz: RbacAuthorizer, wake: Arc<Notify>) {
    let Some(spec) = spec(IndexedKind::ClusterRole) else { return };
    let strategy = CatalogStrategy(spec);
    loop {
        wake.notified().await;
        let pending: Vec<(String, Vec<kapi_auth::rbac::PolicyRule>)> = {
            let index = authz.read();
            index
                .cluster_roles()
                .filter(|(_, c)| c.aggregation.is_some())
                .filter_map(|(name, c)| {
                    let want = index.aggregated_rules(name)?;
                    (want.as_slice() != &*c.rules).then(|| (name.clone(), want))
                })
                .collect()
        };
        for (name, rules) in pending {
            let track = crate::field_manager::tracker(spec, crate::field_manager::writer(spec, AGGREGATION_MANAGER.into(), ""));
            let rules = match serde_json::to_value(&rules) {
                Ok(v) => v,
                Err(e) => {
                    tracing::warn!("cannot encode aggregated rules of {name}: {e}");
                    continue;
                }
            };
            let result = rest
                .update_with(&strategy, None, &name, WriteTarget::Main, false, WriteHooks::tracking(track.as_deref()), |current| {
                    let mut new = current.clone();
                    new["rules"] = rules.clone();
                    Ok(new)
                })
                .await;
            match result {
                Ok(_) => tracing::debug!(clusterrole = %name, "aggregated rules updated"),
                // Deleted meanwhile: nothing to aggregate into.
                Err(e) if e.code == 404 => {}
                Err(e) => {
                    tracing::warn!(clusterrole = %name, "aggregating rules failed: {e}; retrying");
                    let wake = wake.clone();
                    tokio::spawn(async move {
                        tokio::time::sleep(Duration::from_millis(500)).await;
                        wake.notify_one();
                    });
                }
            }
        }
    }
}
