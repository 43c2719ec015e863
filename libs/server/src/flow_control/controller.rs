//! kube's APF config controller (`priority-and-fairness-config-consumer`): follows the
//! FlowSchema and PriorityLevelConfiguration watch caches and rebuilds the flow-control
//! snapshot on every change, so a change made through any replica applies here as soon as this
//! replica's cache has it (well within kube's one second).
//!
//! Each resource is followed by an initial-state watch, as the RBAC index is
//! ([`crate::rbac_sync::initial_state`]); a watch the cache cuts off is re-established from a
//! fresh initial state.
//!
//! Not done yet: the `Dangling` status condition on FlowSchemas whose level does not exist
//! (they are skipped in matching, as kube skips them).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kapi_registry::catalog::{self, ResourceSpec};
use kapi_watch::{CacheSet, EventType, WatchError, WatchItem, Watcher};
use serde_json::Value;

use super::FlowControl;
use crate::rbac_sync::{initial_state, SyncError};

const GROUP: &str = "flowcontrol.apiserver.k8s.io";
const RESOURCES: [&str; 2] = ["flowschemas", "prioritylevelconfigurations"];

/// The stored objects by resource, then name.
type Objects = Arc<Mutex<[BTreeMap<String, Arc<Value>>; 2]>>;

fn spec(resource: &'static str) -> Result<&'static ResourceSpec, SyncError> {
    catalog::find(GROUP, "v1", resource).ok_or(SyncError::NoCache(resource))
}

fn key(obj: &Value) -> String {
    obj.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_owned()
}

/// Rebuilds the snapshot from the objects as they are now.
fn rebuild(fc: &FlowControl, objects: &Objects) {
    let (schemas, levels): (Vec<Value>, Vec<Value>) = {
        let objects = objects.lock().unwrap_or_else(|e| e.into_inner());
        let values = |m: &BTreeMap<String, Arc<Value>>| m.values().map(|v| Value::clone(v)).collect();
        (values(&objects[0]), values(&objects[1]))
    };
    fc.reload(&schemas, &levels);
    fc.changed.notify_one();
}

async fn load(caches: &CacheSet, which: usize, objects: &Objects) -> Result<Watcher, SyncError> {
    let (initial, watcher) = initial_state(caches, spec(RESOURCES[which])?).await?;
    objects.lock().unwrap_or_else(|e| e.into_inner())[which] = initial.into_iter().map(|o| (key(&o), o)).collect();
    Ok(watcher)
}

/// Loads the stored configuration into `fc`, then keeps it current in background tasks.
pub async fn start(caches: Arc<CacheSet>, fc: Arc<FlowControl>) -> Result<(), SyncError> {
    let objects: Objects = Arc::default();
    let mut watchers = Vec::new();
    for which in 0..RESOURCES.len() {
        watchers.push(load(&caches, which, &objects).await?);
    }
    rebuild(&fc, &objects);
    for (which, watcher) in watchers.into_iter().enumerate() {
        tokio::spawn(follow(caches.clone(), which, watcher, objects.clone(), fc.clone()));
    }
    Ok(())
}

async fn follow(caches: Arc<CacheSet>, which: usize, mut watcher: Watcher, objects: Objects, fc: Arc<FlowControl>) {
    loop {
        match watcher.next().await {
            Some(WatchItem::Event { event, kind }) => {
                {
                    let mut objects = objects.lock().unwrap_or_else(|e| e.into_inner());
                    let name = key(&event.object);
                    match kind {
                        EventType::Added | EventType::Modified => objects[which].insert(name, event.object.clone()),
                        EventType::Deleted => objects[which].remove(&name),
                    };
                }
                rebuild(&fc, &objects);
            }
            Some(WatchItem::Bookmark(_) | WatchItem::InitialEventsEnd(_)) => {}
            Some(WatchItem::Terminated { reason, .. }) => {
                tracing::warn!(resource = RESOURCES[which], ?reason, "flow-control watch ended; reloading");
                loop {
                    match load(&caches, which, &objects).await {
                        Ok(w) => {
                            watcher = w;
                            break;
                        }
                        Err(SyncError::Watch(WatchError::ShuttingDown)) => return,
                        Err(e) => {
                            tracing::warn!(resource = RESOURCES[which], "flow-control reload failed: {e}");
                            tokio::time::sleep(Duration::from_millis(200)).await;
                        }
                    }
                }
                rebuild(&fc, &objects);
            }
            None => return,
        }
    }
}
