//! The caches of one store and the task that follows its change log.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use kapi_storage::{DynStore, Event, KeyValue, ListOptions, Revision, StorageError};
use tokio::sync::watch;

use crate::cache::ResourceCache;
use crate::config::CacheConfig;
use crate::error::WatchError;
use crate::event::decode_object;

/// How often a snapshot load is retried when compaction overtakes it.
const LOAD_ATTEMPTS: usize = 5;

/// State shared by the handle and the follower task.
struct Core {
    store: DynStore,
    caches: Vec<Arc<ResourceCache>>,
    config: CacheConfig,
    applied: watch::Sender<Revision>,
    shutdown: watch::Sender<bool>,
}

/// All resource caches of one store plus the log follower that feeds them.
pub struct CacheSet {
    core: Arc<Core>,
    by_prefix: HashMap<String, Arc<ResourceCache>>,
}

impl std::fmt::Debug for CacheSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CacheSet")
            .field("prefixes", &self.by_prefix.keys().collect::<Vec<_>>())
            .field("revision", &self.revision())
            .finish()
    }
}

impl CacheSet {
    /// Loads every prefix from one store snapshot, then follows the log (spawned task).
    pub async fn start(
        store: DynStore,
        prefixes: Vec<String>,
        config: CacheConfig,
    ) -> Result<Arc<CacheSet>, WatchError> {
        let mut by_prefix = HashMap::new();
        let mut caches = Vec::new();
        for prefix in prefixes {
            if by_prefix.contains_key(&prefix) {
                continue;
            }
            let cache = Arc::new(ResourceCache::new(prefix.clone(), &config));
            by_prefix.insert(prefix, cache.clone());
            caches.push(cache);
        }
        let revision = load(&store, &caches, config.load_page).await?;
        let (applied, _) = watch::channel(revision);
        let (shutdown, _) = watch::channel(false);
        let core = Arc::new(Core {
            store,
            caches,
            config,
            applied,
            shutdown,
        });
        tokio::spawn(follow(core.clone(), revision));
        Ok(Arc::new(CacheSet { core, by_prefix }))
    }

    /// The cache of one resource, by the exact prefix it was started with.
    pub fn cache(&self, prefix: &str) -> Option<Arc<ResourceCache>> {
        self.by_prefix.get(prefix).cloned()
    }

    /// Revision up to which the follower has applied the log.
    pub fn revision(&self) -> Revision {
        *self.core.applied.borrow()
    }

    /// Waits until the follower has applied `rev` (consistent reads from cache).
    pub async fn wait_for(&self, rev: Revision, timeout: Duration) -> Result<(), WatchError> {
        let mut applied = self.core.applied.subscribe();
        let mut shutdown = self.core.shutdown.subscribe();
        let reached = async {
            tokio::select! {
                r = applied.wait_for(|a| *a >= rev) => r.is_ok(),
                _ = shutdown.wait_for(|s| *s) => false,
            }
        };
        match tokio::time::timeout(timeout, reached).await {
            Ok(true) => Ok(()),
            Ok(false) => Err(WatchError::ShuttingDown),
            Err(_) => Err(WatchError::Timeout),
        }
    }

    /// Ends the follower and every watcher cleanly (they see `None` after draining).
    pub fn shutdown(&self) {
        self.core.shutdown.send_replace(true);
        for cache in &self.core.caches {
            cache.close();
        }
    }
}

impl Drop for CacheSet {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Reads every prefix at one snapshot revision and resets the caches to it; retried when
/// compaction overtakes the pinned snapshot.
async fn load(
    store: &DynStore,
    caches: &[Arc<ResourceCache>],
    page: usize,
) -> Result<Revision, WatchError> {
    let mut attempt = 0;
    let (revision, lists) = loop {
        attempt += 1;
        match read_snapshot(store, caches, page.max(1)).await {
            Ok(found) => break found,
            Err(StorageError::Compacted { .. }) if attempt < LOAD_ATTEMPTS => continue,
            Err(e) => return Err(e.into()),
        }
    };
    let caches = caches.to_vec();
    tokio::task::spawn_blocking(move || {
        for (cache, items) in caches.iter().zip(lists) {
            let decoded = items
                .into_iter()
                .filter_map(
                    |kv| match decode_object(&kv.key, &kv.value, kv.mod_revision) {
                        Ok(o) => Some((kv.key, kv.mod_revision, o)),
                        Err(e) => {
                            tracing::error!(error = %e, "skipping undecodable object in snapshot");
                            None
                        }
                    },
                )
                .collect();
            cache.reset(decoded, revision);
        }
    })
    .await
    .map_err(|e| {
        WatchError::Storage(StorageError::Backend(format!(
            "cache load task failed: {e}"
        )))
    })?;
    Ok(revision)
}

async fn read_snapshot(
    store: &DynStore,
    caches: &[Arc<ResourceCache>],
    page: usize,
) -> Result<(Revision, Vec<Vec<KeyValue>>), StorageError> {
    let mut pinned: Option<Revision> = None;
    let mut lists = Vec::with_capacity(caches.len());
    for cache in caches {
        let mut items = Vec::new();
        let mut start_after = None;
        loop {
            let opts = ListOptions {
                start_after,
                limit: Some(page),
                revision: pinned,
            };
            let res = store.list(cache.prefix(), opts).await?;
            pinned.get_or_insert(res.revision);
            start_after = res.items.last().map(|kv| kv.key.clone());
            items.extend(res.items);
            if !res.more || start_after.is_none() {
                break;
            }
        }
        lists.push(items);
    }
    let revision = match pinned {
        Some(r) => r,
        None => store.current_revision().await?,
    };
    Ok((revision, lists))
}

/// Applies a batch off the async workers (JSON parsing and fan-out are CPU work) and returns
/// the revision reached.
async fn apply_batch(core: &Arc<Core>, events: Vec<Event>) -> Result<Revision, String> {
    let core2 = core.clone();
    tokio::task::spawn_blocking(move || {
        let mut last = 0;
        for ev in events {
            last = ev.revision;
            let object = match decode_object(&ev.key, &ev.value, ev.revision) {
                Ok(o) => Some(o),
                Err(e) => {
                    tracing::error!(error = %e, revision = ev.revision, "undecodable value in log");
                    None
                }
            };
            for cache in core2
                .caches
                .iter()
                .filter(|c| ev.key.starts_with(c.prefix()))
            {
                cache.apply(ev.revision, ev.key.clone(), ev.kind, object.clone());
            }
        }
        for cache in &core2.caches {
            cache.advance(last);
        }
        last
    })
    .await
    .map_err(|e| e.to_string())
}

async fn reload(core: &Arc<Core>) -> Result<Revision, WatchError> {
    let revision = load(&core.store, &core.caches, core.config.load_page).await?;
    core.applied.send_if_modified(|a| {
        let changed = revision > *a;
        *a = (*a).max(revision);
        changed
    });
    Ok(revision)
}

/// Sleeps for the backoff unless shutdown comes first; returns false on shutdown.
async fn pause(core: &Core, shutdown: &mut watch::Receiver<bool>) -> bool {
    tokio::select! {
        _ = tokio::time::sleep(core.config.retry_backoff) => true,
        _ = shutdown.wait_for(|s| *s) => false,
    }
}

/// Reloads every cache from the store, or waits the backoff when that fails. Returns the
/// revision the caches are at (`applied` after a failed reload), or None on shutdown.
async fn reload_or_pause(core: &Arc<Core>, applied: Revision, shutdown: &mut watch::Receiver<bool>) -> Option<Revision> {
    match reload(core).await {
        Ok(rev) => Some(rev),
        Err(e) => {
            tracing::warn!(error = %e, "watch cache reload failed");
            pause(core, shutdown).await.then_some(applied)
        }
    }
}

/// The log follower: woken by the store's commit notifications, reads the log in batches
/// until caught up; reloads everything when compaction overtakes it.
async fn follow(core: Arc<Core>, mut applied: Revision) {
    let mut notify = core.store.subscribe();
    let mut shutdown = core.shutdown.subscribe();
    let batch = core.config.log_batch.max(1);
    loop {
        if *shutdown.borrow() {
            return;
        }
        notify.borrow_and_update();
        loop {
            let read = tokio::select! {
                r = core.store.read_log(applied, batch) => r,
                _ = shutdown.wait_for(|s| *s) => return,
            };
            match read {
                Ok(events) if events.is_empty() => break,
                Ok(events) => {
                    let full = events.len() >= batch;
                    match apply_batch(&core, events).await {
                        Ok(rev) => {
                            applied = rev;
                            core.applied.send_replace(rev);
                        }
                        Err(e) => {
                            tracing::error!(error = %e, "applying log batch failed; reloading caches");
                            let Some(rev) = reload_or_pause(&core, applied, &mut shutdown).await else { return };
                            applied = rev;
                        }
                    }
                    if !full {
                        break;
                    }
                }
                Err(StorageError::Compacted {
                    requested,
                    compacted,
                }) => {
                    tracing::warn!(
                        requested,
                        compacted,
                        "log compacted past the watch cache; reloading"
                    );
                    let Some(rev) = reload_or_pause(&core, applied, &mut shutdown).await else { return };
                    applied = rev;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "reading the change log failed");
                    if !pause(&core, &mut shutdown).await {
                        return;
                    }
                }
            }
        }
        let notifier_alive = tokio::select! {
            r = notify.changed() => r.is_ok(),
            _ = shutdown.wait_for(|s| *s) => return,
        };
        // A store that dropped its notifier is polled at the backoff pace instead.
        if !notifier_alive && !pause(&core, &mut shutdown).await {
            return;
        }
    }
}

#[cfg(test)]
#[path = "set_tests.rs"]
mod tests;
