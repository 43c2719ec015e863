//! Keeps the Node authorizer's graph current from the watch caches (kube's graph populator on
//! the pod, persistent volume, volume attachment and resource slice informers). As for the
//! RBAC index, each resource's initial state is loaded before the server takes requests, and a
//! watch the cache cuts off is replaced by a fresh initial state swapped into the graph.

use std::sync::Arc;
use std::time::Duration;

use kapi_auth::node::{NodeAuthorizer, Source};
use kapi_registry::catalog::{self, ResourceSpec};
use kapi_watch::{CacheSet, EventType, WatchError, WatchItem, Watcher};
use serde_json::Value;

use crate::rbac_sync::{initial_state, SyncError};

/// The served version of a source; None when the resource is not served (resource slices).
fn spec(source: Source) -> Option<&'static ResourceSpec> {
    let (group, resource) = source.group_resource();
    catalog::find(group, "v1", resource)
}

fn apply(authz: &NodeAuthorizer, source: Source, ty: EventType, obj: &Value) {
    let mut graph = authz.graph().write().unwrap_or_else(|e| e.into_inner());
    match ty {
        EventType::Added | EventType::Modified => graph.put(source, obj),
        EventType::Deleted => graph.delete(source, obj),
    }
}

async fn load(caches: &CacheSet, source: Source, spec: &ResourceSpec, authz: &NodeAuthorizer) -> Result<Watcher, SyncError> {
    let (objects, watcher) = initial_state(caches, spec).await?;
    let mut graph = authz.graph().write().unwrap_or_else(|e| e.into_inner());
    graph.clear(source);
    for obj in &objects {
        graph.put(source, obj);
    }
    Ok(watcher)
}

/// Loads the graph from the caches, then keeps it current in background tasks.
pub async fn start(caches: Arc<CacheSet>, authz: NodeAuthorizer) -> Result<(), SyncError> {
    for source in Source::ALL {
        let Some(spec) = spec(source) else {
            tracing::debug!(resource = source.group_resource().1, "not served; the node graph does without it");
            continue;
        };
        let watcher = load(&caches, source, spec, &authz).await?;
        tokio::spawn(follow(caches.clone(), source, spec, watcher, authz.clone()));
    }
    let [pods, pvs, attachments, slices] = authz.graph().read().unwrap_or_else(|e| e.into_inner()).counts();
    tracing::info!(pods, pvs, attachments, slices, "node authorizer graph loaded");
    Ok(())
}

async fn follow(caches: Arc<CacheSet>, source: Source, spec: &'static ResourceSpec, mut watcher: Watcher, authz: NodeAuthorizer) {
    loop {
        match watcher.next().await {
            Some(WatchItem::Event { event, kind }) => apply(&authz, source, kind, &event.object),
            Some(WatchItem::Bookmark(_) | WatchItem::InitialEventsEnd(_)) => {}
            Some(WatchItem::Terminated { reason, .. }) => {
                tracing::warn!(resource = spec.resource, ?reason, "node graph watch ended; reloading");
                loop {
                    match load(&caches, source, spec, &authz).await {
                        Ok(w) => {
                            watcher = w;
                            break;
                        }
                        Err(SyncError::Watch(WatchError::ShuttingDown)) => return,
                        Err(e) => {
                            tracing::warn!(resource = spec.resource, "node graph reload failed: {e}");
                            tokio::time::sleep(Duration::from_millis(200)).await;
                        }
                    }
                }
            }
            None => return,
        }
    }
}
