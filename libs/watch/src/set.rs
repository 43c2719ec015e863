//! The caches of one store and the task that follows its change log.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use kapi_storage::{DynStore, Event, KeyValue, ListOptions, Revision, StorageError};
use tokio::sync::watch;

use crate::cache::ResourceCache;
use crate::config::CacheConfig;
use crate::error::WatchError;
use crate::event::decode_object;

/// How often a snapshot load is retried when compaction overtakes it.
const LOAD_ATTEMPTS: usize = 5;
/// How long start-up may take to replay the retained log into the caches.
const START_CATCH_UP: Duration = Duration::from_secs(300);

/// Where a (re)load takes its snapshot.
#[derive(Clone, Copy)]
enum Start {
    /// At the compaction horizon, so the follower replays every retained event into the
    /// windows (start-up).
    Horizon,
    /// At the current revision (reload after compaction overtook the follower: watchers end
    /// with Expired anyway).
    Current,
}

/// State shared by the handle and the follower task.
struct Core {
    store: DynStore,
    caches: RwLock<Caches>,
    /// Held while the follower applies events or reloads, and while a cache is added: a new
    /// cache is loaded at exactly the revision the follower has applied, so it misses no event
    /// and sees none twice.
    applying: tokio::sync::Mutex<()>,
    /// What the follower knows of resources without a cache: since `since`, every event has
    /// passed through it, and `last` holds the revision of the newest event per prefix. A cache
    /// added later starts its window there, so watches resuming from an older revision (a
    /// client that listed on another replica) are served rather than expired.
    uncached: Mutex<Uncached>,
    config: CacheConfig,
    applied: watch::Sender<Revision>,
    /// The highest revision anyone (a NATS hint, a reader waiting for consistency) says is
    /// committed; the follower reads the log as soon as it exceeds what it has applied.
    hints: watch::Sender<Revision>,
    lag: LagTracker,
    shutdown: watch::Sender<bool>,
}

/// How far the follower trails what it knows to be committed, for the lag metrics.
#[derive(Default)]
struct LagTracker {
    known: AtomicU64,
    behind_since: Mutex<Option<Instant>>,
}

impl LagTracker {
    /// Something says `rev` is committed while the follower has applied `applied`.
    fn learned(&self, rev: Revision, applied: Revision) {
        let known = self.known.fetch_max(rev, Ordering::SeqCst).max(rev);
        if known > applied {
            let mut since = self.behind_since.lock().unwrap_or_else(|p| p.into_inner());
            since.get_or_insert_with(Instant::now);
        }
    }

    /// The follower reached `applied`; when `drained` (the log had nothing more) whatever it
    /// was told beyond that was not in the log yet, so it is not lag either.
    fn reached(&self, applied: Revision, drained: bool) {
        let mut known = self.known.load(Ordering::SeqCst);
        if drained && known > applied {
            // Keep a newer claim that arrived while the log was read.
            let _ = self.known.compare_exchange(known, applied, Ordering::SeqCst, Ordering::SeqCst);
            known = self.known.load(Ordering::SeqCst);
        }
        if known <= applied {
            *self.behind_since.lock().unwrap_or_else(|p| p.into_inner()) = None;
        }
    }

    fn snapshot(&self, applied: Revision) -> FollowerLag {
        let known = self.known.load(Ordering::SeqCst).max(applied);
        let since = *self.behind_since.lock().unwrap_or_else(|p| p.into_inner());
        FollowerLag {
            applied,
            revisions: known - applied,
            seconds: if known > applied { since.map_or(0.0, |s| s.elapsed().as_secs_f64()) } else { 0.0 },
        }
    }
}

impl Core {
    fn read_caches(&self) -> std::sync::RwLockReadGuard<'_, Caches> {
        self.caches.read().unwrap_or_else(|p| p.into_inner())
    }
}

/// How far this process's caches trail the store, as the follower lag metrics report it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FollowerLag {
    /// Revision the caches have applied.
    pub applied: Revision,
    /// How far the highest revision known to be committed (store notifications, NATS hints,
    /// readers) is ahead of `applied`: a revision distance (contiguous revisions on SQLite make
    /// it an event count; FoundationDB's versionstamps do not).
    pub revisions: Revision,
    /// How long the caches have trailed that revision (0 when caught up).
    pub seconds: f64,
}

/// See [`Core::uncached`].
#[derive(Default)]
struct Uncached {
    since: Revision,
    last: HashMap<String, Revision>,
}

/// The `/registry/<group>/<resource>/` prefix of a key (None for other layouts).
fn resource_prefix(key: &str) -> Option<&str> {
    key.match_indices('/').nth(3).map(|(i, _)| &key[..=i])
}

/// The caches of a set, in start order and by prefix.
#[derive(Default)]
struct Caches {
    list: Vec<Arc<ResourceCache>>,
    by_prefix: HashMap<String, Arc<ResourceCache>>,
}

impl Caches {
    fn insert(&mut self, cache: Arc<ResourceCache>) {
        self.by_prefix.insert(cache.prefix().to_owned(), cache.clone());
        self.list.push(cache);
    }

    /// The caches a key belongs to. Keys are `/registry/<group>/<resource>/...` and so are
    /// cache prefixes: one map look-up finds the cache whatever the number of resources (a
    /// cluster with thousands of CRDs); other layouts fall back to comparing every prefix.
    fn for_key(&self, key: &str) -> Vec<&Arc<ResourceCache>> {
        if let Some(cache) = resource_prefix(key).and_then(|p| self.by_prefix.get(p)) {
            return vec![cache];
        }
        self.list.iter().filter(|c| key.starts_with(c.prefix())).collect()
    }
}

/// All resource caches of one store plus the log follower that feeds them. Caches may be added
/// and removed while it runs (custom resources come and go with their definitions).
pub struct CacheSet {
    core: Arc<Core>,
}

impl std::fmt::Debug for CacheSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CacheSet")
            .field("prefixes", &self.core.read_caches().by_prefix.keys().cloned().collect::<Vec<_>>())
            .field("revision", &self.revision())
            .finish()
    }
}

impl CacheSet {
    /// Loads every prefix from a store snapshot at the compaction horizon and replays the log
    /// from there, so that this process's event windows reach as far back as the store's log
    /// (bounded by `config.window` per resource): a watch that resumes here after its replica
    /// went away finds its history even if this replica just started. Returns once the caches
    /// have caught up with the revision that was current at the call; the follower then keeps
    /// them current.
    pub async fn start(
        store: DynStore,
        prefixes: Vec<String>,
        config: CacheConfig,
    ) -> Result<Arc<CacheSet>, WatchError> {
        let mut caches = Caches::default();
        for prefix in prefixes {
            if caches.by_prefix.contains_key(&prefix) {
                continue;
            }
            caches.insert(Arc::new(ResourceCache::new(prefix, &config)));
        }
        let target = store.current_revision().await?;
        let revision = match load(&store, &caches.list, config.load_page, Start::Horizon).await {
            Ok(revision) => revision,
            Err(e) => {
                // History is a convenience (watches resuming from before this start); the
                // present is not. Old revisions may be unreadable where current ones are not:
                // values sealed with an encryption key since removed, after a rotation that
                // rewrote every current object. Watches from before the start then get 410.
                tracing::warn!(error = %e, "the store's history cannot be read; the watch caches start at the current revision");
                load(&store, &caches.list, config.load_page, Start::Current).await?
            }
        };
        let (applied, _) = watch::channel(revision);
        let (hints, _) = watch::channel(target);
        let (shutdown, _) = watch::channel(false);
        let core = Arc::new(Core {
            store,
            caches: RwLock::new(caches),
            applying: tokio::sync::Mutex::new(()),
            uncached: Mutex::new(Uncached { since: revision, last: HashMap::new() }),
            config,
            applied,
            hints,
            lag: LagTracker::default(),
            shutdown,
        });
        core.lag.learned(target, revision);
        tokio::spawn(follow(core.clone(), revision));
        let set = Arc::new(CacheSet { core });
        set.wait_for(target, START_CATCH_UP).await?;
        Ok(set)
    }

    /// Tells the follower that `rev` is committed (a NATS hint from another replica): it reads
    /// the log now instead of at its next poll. Claims beyond the log cost one empty read.
    pub fn hint(&self, rev: Revision) {
        let applied = self.revision();
        self.core.lag.learned(rev, applied);
        if rev > applied {
            self.core.hints.send_if_modified(|h| {
                let newer = rev > *h;
                *h = (*h).max(rev);
                newer
            });
        }
    }

    /// How far the caches trail what this process knows to be committed.
    pub fn lag(&self) -> FollowerLag {
        self.core.lag.snapshot(self.revision())
    }

    /// The cache of one resource, by the exact prefix it was started with.
    pub fn cache(&self, prefix: &str) -> Option<Arc<ResourceCache>> {
        self.core.read_caches().by_prefix.get(prefix).cloned()
    }

    /// Adds a cache for `prefix` (or returns the one there is), loaded from a store snapshot at
    /// the revision the follower has applied; from then on the follower keeps it current like
    /// the others. Fails when that revision is compacted already (the caller retries).
    pub async fn add(&self, prefix: &str) -> Result<Arc<ResourceCache>, WatchError> {
        if let Some(cache) = self.cache(prefix) {
            return Ok(cache);
        }
        self.add_all(&[prefix.to_owned()]).await?;
        self.cache(prefix).ok_or_else(|| WatchError::Storage(StorageError::Backend(format!("cache {prefix} vanished"))))
    }

    /// [`CacheSet::add`] for several prefixes at once: one pause of the follower and one
    /// snapshot for all of them (a burst of new CRDs).
    pub async fn add_all(&self, prefixes: &[String]) -> Result<(), WatchError> {
        let _applying = self.core.applying.lock().await;
        let missing: Vec<&String> = prefixes.iter().filter(|p| self.cache(p).is_none()).collect();
        if missing.is_empty() {
            return Ok(());
        }
        let caches: Vec<Arc<ResourceCache>> = missing.iter().map(|p| Arc::new(ResourceCache::new((*p).clone(), &self.core.config))).collect();
        let at = self.revision();
        let (revision, lists) = read_snapshot(&self.core.store, &caches, self.core.config.load_page.max(1), Some(at)).await?;
        let starts: Vec<Revision> = {
            let uncached = self.core.uncached.lock().unwrap_or_else(|p| p.into_inner());
            missing.iter().map(|p| uncached.last.get(p.as_str()).copied().unwrap_or(uncached.since)).collect()
        };
        for ((cache, items), window_start) in caches.iter().zip(lists).zip(starts) {
            let items = decode_snapshot(items).await?;
            cache.reset_from(items, revision, window_start);
        }
        let mut registry = self.core.caches.write().unwrap_or_else(|p| p.into_inner());
        for cache in caches {
            registry.insert(cache);
        }
        Ok(())
    }

    /// Removes the cache of `prefix`; its watchers end as on shutdown.
    pub async fn remove(&self, prefix: &str) {
        let _applying = self.core.applying.lock().await;
        let removed = {
            let mut caches = self.core.caches.write().unwrap_or_else(|p| p.into_inner());
            caches.list.retain(|c| c.prefix() != prefix);
            caches.by_prefix.remove(prefix)
        };
        if let Some(cache) = removed {
            // Its events up to now are gone with it: a cache added again starts after them.
            let applied = self.revision();
            self.core.uncached.lock().unwrap_or_else(|p| p.into_inner()).last.insert(prefix.to_owned(), applied);
            cache.close();
        }
    }

    /// Revision up to which the follower has applied the log.
    pub fn revision(&self) -> Revision {
        *self.core.applied.borrow()
    }

    /// Waits until the follower has applied `rev` (consistent reads from cache). A revision
    /// beyond the caches is a commit this process has not heard of yet (another replica's), so
    /// the follower is told to read the log at once rather than at its next poll.
    pub async fn wait_for(&self, rev: Revision, timeout: Duration) -> Result<(), WatchError> {
        if rev > self.revision() {
            self.hint(rev);
        }
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
        for cache in &self.core.read_caches().list {
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
    start: Start,
) -> Result<Revision, WatchError> {
    let mut attempt = 0;
    let (revision, lists) = loop {
        attempt += 1;
        let at = match start {
            Start::Current => None,
            Start::Horizon => Some(store.compacted_revision().await?),
        };
        match read_snapshot(store, caches, page.max(1), at).await {
            Ok(found) => break found,
            Err(StorageError::Compacted { .. }) if attempt < LOAD_ATTEMPTS => continue,
            Err(e) => return Err(e.into()),
        }
    };
    reset_caches(caches.to_vec(), lists, revision).await?;
    Ok(revision)
}

/// Decodes one snapshot list off the async workers.
async fn decode_snapshot(items: Vec<KeyValue>) -> Result<Vec<(String, Revision, serde_json::Value)>, WatchError> {
    tokio::task::spawn_blocking(move || {
        items
            .into_iter()
            .filter_map(|kv| match decode_object(&kv.key, &kv.value, kv.mod_revision) {
                Ok(o) => Some((kv.key, kv.mod_revision, o)),
                Err(e) => {
                    tracing::error!(error = %e, "skipping undecodable object in snapshot");
                    None
                }
            })
            .collect()
    })
    .await
    .map_err(|e| WatchError::Storage(StorageError::Backend(format!("cache load task failed: {e}"))))
}

/// Decodes snapshot lists (off the async workers) and resets each cache to its list.
async fn reset_caches(caches: Vec<Arc<ResourceCache>>, lists: Vec<Vec<KeyValue>>, revision: Revision) -> Result<(), WatchError> {
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
    })
}

/// Lists every prefix at revision `at` (None: the current one), page by page on one snapshot.
/// Revision 0 is the empty store before its first write.
async fn read_snapshot(
    store: &DynStore,
    caches: &[Arc<ResourceCache>],
    page: usize,
    at: Option<Revision>,
) -> Result<(Revision, Vec<Vec<KeyValue>>), StorageError> {
    if at == Some(0) {
        return Ok((0, caches.iter().map(|_| Vec::new()).collect()));
    }
    let mut pinned: Option<Revision> = at;
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
        let caches = core2.read_caches();
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
            let targets = caches.for_key(&ev.key);
            if targets.is_empty() {
                if let Some(prefix) = resource_prefix(&ev.key) {
                    let mut uncached = core2.uncached.lock().unwrap_or_else(|p| p.into_inner());
                    uncached.last.insert(prefix.to_owned(), ev.revision);
                }
            }
            for cache in targets {
                cache.apply(ev.revision, ev.key.clone(), ev.kind, object.clone());
            }
        }
        for cache in &caches.list {
            cache.advance(last);
        }
        last
    })
    .await
    .map_err(|e| e.to_string())
}

async fn reload(core: &Arc<Core>) -> Result<Revision, WatchError> {
    let _applying = core.applying.lock().await;
    let caches = core.read_caches().list.clone();
    let revision = load(&core.store, &caches, core.config.load_page, Start::Current).await?;
    // History restarts here: nothing is known of uncached resources before it.
    *core.uncached.lock().unwrap_or_else(|p| p.into_inner()) = Uncached { since: revision, last: HashMap::new() };
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

/// The log follower: woken by the store's commit notifications (its own commits, and other
/// processes' commits noticed by polling) and by hints (NATS, readers waiting for a revision),
/// reads the log in batches until caught up; reloads everything when compaction overtakes it.
/// Whatever woke it, events come from the log only, so every watcher sees each event once, in
/// revision order, however hints are lost, duplicated or reordered.
async fn follow(core: Arc<Core>, mut applied: Revision) {
    let mut notify = core.store.subscribe();
    let mut hints = core.hints.subscribe();
    let mut shutdown = core.shutdown.subscribe();
    let batch = core.config.log_batch.max(1);
    loop {
        if *shutdown.borrow() {
            return;
        }
        let told = (*notify.borrow_and_update()).max(*hints.borrow_and_update());
        core.lag.learned(told, applied);
        loop {
            let read = tokio::select! {
                r = core.store.read_log(applied, batch) => r,
                _ = shutdown.wait_for(|s| *s) => return,
            };
            match read {
                Ok(events) if events.is_empty() => {
                    core.lag.reached(applied, true);
                    break;
                }
                Ok(events) => {
                    let full = events.len() >= batch;
                    let applying = core.applying.lock().await;
                    let outcome = apply_batch(&core, events).await;
                    if let Ok(rev) = outcome {
                        core.applied.send_replace(rev);
                    }
                    drop(applying);
                    match outcome {
                        Ok(rev) => applied = rev,
                        Err(e) => {
                            tracing::error!(error = %e, "applying log batch failed; reloading caches");
                            let Some(rev) = reload_or_pause(&core, applied, &mut shutdown).await else { return };
                            applied = rev;
                        }
                    }
                    if !full {
                        // A short batch was everything the log held when it was read.
                        core.lag.reached(applied, true);
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
            r = hints.changed() => r.is_ok(),
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
