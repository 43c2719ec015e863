//! kube's garbage collector (kube-controller-manager's `garbagecollector`): objects whose
//! `metadata.ownerReferences` name only owners that no longer exist are deleted, references to
//! absent owners are dropped from objects that keep a live one, and the two deletion modes
//! that wait on dependents are carried out: an owner deleted with the `orphan` finalizer
//! (propagationPolicy Orphan) is taken out of its dependents' ownerReferences before it goes,
//! and an owner deleted with `foregroundDeletion` (Foreground) goes only once no dependent with
//! `blockOwnerDeletion` is left, its dependents deleted first (in the foreground themselves
//! when they have dependents). The store adds those finalizers on DELETE
//! (`RestStore::delete_admitted`, with kube's default policy per kind).
//!
//! Structure, as kube's: a dependency graph over every served resource that can be listed,
//! watched and deleted (custom resources included; the set is looked at again every second so
//! that new CRDs are followed), kept from the watch caches ([`graph`]); one queue of work
//! keyed by uid; workers that decide on the graph and act only after reading the object and
//! its owners live ([`attempt`]), with conditional writes ([`ops`]). Work waits until every
//! followed resource has delivered its initial state, as kube waits for its monitors to sync:
//! orphaning or finishing a foreground deletion on a partial graph would miss dependents.
//!
//! Several replicas may run it at once: every delete carries uid (and resourceVersion)
//! preconditions, every metadata edit is a read-modify-write on the stored revision, and a
//! 404 or 409 from a race ends the work or queues it again; failures are retried with a
//! pause that doubles up to [`MAX_BACKOFF`].

mod attempt;
mod graph;
mod ops;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use kapi_registry::catalog::ResourceSpec;
use kapi_watch::{CacheSet, WatchError, WatchItem};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::Queue;
use crate::rbac_sync::{initial_state, SyncError};
use attempt::Done;
use graph::{Graph, Work};
use ops::{Failure, Ops};

/// Workers taking work from the queue (kube runs 20; the work is mostly waiting on the store).
const WORKERS: usize = 4;
/// How often the set of served resources is looked at for new or removed ones.
const RESYNC: Duration = Duration::from_secs(1);
/// The first pause before a failed piece of work is tried again; it doubles per failure.
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
/// The longest pause between attempts at a piece of work that keeps failing.
const MAX_BACKOFF: Duration = Duration::from_secs(120);

pub(super) struct Collector {
    graph: Mutex<Graph>,
    ops: Ops,
    queue: Arc<Queue>,
    /// Failures in a row per queue key, for the growing pause.
    failures: Mutex<HashMap<String, u32>>,
    /// Key prefixes of followed resources whose initial state has not arrived yet.
    unsynced: Mutex<HashSet<String>>,
    /// Whether `unsynced` is empty.
    synced: watch::Sender<bool>,
}

/// Starts the collector over the caches; `chain` says which resources are served (and maps an
/// ownerReference's apiVersion and kind to one).
pub fn start(ctx: &super::ControllerContext) {
    let (caches, rest, chain) = (ctx.caches.clone(), ctx.rest.clone(), ctx.chain.clone());
    let collector = Arc::new(Collector {
        graph: Mutex::default(),
        ops: Ops { rest, chain },
        queue: ctx.queue(),
        failures: Mutex::default(),
        unsynced: Mutex::default(),
        synced: watch::Sender::new(false),
    });
    tokio::spawn(collector.clone().follow_resources(caches));
    for _ in 0..WORKERS {
        tokio::spawn(collector.clone().work());
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Collector {
    fn graph(&self) -> MutexGuard<'_, Graph> {
        lock(&self.graph)
    }

    fn enqueue(&self, work: Vec<Work>) {
        for w in work {
            self.queue.add(w.key());
        }
    }

    /// The resources to follow, one per storage (key prefix): stored, listable, watchable and
    /// deletable (kube's GC monitors the resources that support delete, list and watch), except
    /// events (kube-controller-manager's default `ignoredResources`: many, short-lived, owned by
    /// nothing).
    fn served(&self) -> BTreeMap<String, &'static ResourceSpec> {
        let mut wanted = BTreeMap::new();
        for spec in self.ops.chain.stored_resources() {
            let ignored = spec.resource == "events" && matches!(spec.group, "" | "events.k8s.io");
            if !ignored && ["delete", "list", "watch"].iter().all(|v| spec.supports(v)) {
                wanted.entry(spec.key_prefix()).or_insert(spec);
            }
        }
        wanted
    }

    /// Follows every served resource, starting on new ones (CRDs created later) and dropping
    /// those no longer served, until the caches shut down.
    async fn follow_resources(self: Arc<Self>, caches: Arc<CacheSet>) {
        let mut following: HashMap<String, (&'static ResourceSpec, JoinHandle<()>)> = HashMap::new();
        loop {
            let wanted = self.served();
            let stale: Vec<String> = following
                .iter()
                .filter(|(prefix, (spec, _))| {
                    wanted.get(*prefix).is_none_or(|w| (w.group, w.version, w.resource) != (spec.group, spec.version, spec.resource))
                })
                .map(|(p, _)| p.clone())
                .collect();
            for prefix in stale {
                if let Some((_, task)) = following.remove(&prefix) {
                    task.abort();
                }
                self.set_synced(&prefix, true);
                let work = self.graph().forget_resource(&prefix);
                self.enqueue(work);
            }
            for (prefix, spec) in wanted {
                if following.contains_key(&prefix) {
                    continue;
                }
                self.set_synced(&prefix, false);
                let task = tokio::spawn(self.clone().follow(caches.clone(), spec));
                following.insert(prefix, (spec, task));
            }
            // A follower ends only when the caches shut down.
            if following.values().any(|(_, task)| task.is_finished()) {
                following.values().for_each(|(_, task)| task.abort());
                return;
            }
            tokio::time::sleep(RESYNC).await;
        }
    }

    fn set_synced(&self, prefix: &str, synced: bool) {
        let mut unsynced = lock(&self.unsynced);
        if synced {
            unsynced.remove(prefix);
        } else {
            unsynced.insert(prefix.to_owned());
        }
        self.synced.send_replace(unsynced.is_empty());
    }

    /// Follows one resource's cache into the graph (as `controllers::follow`, but a fresh
    /// initial state replaces the resource's nodes, so that deletions missed while the watch
    /// was cut off are seen, and its arrival marks the resource synced).
    async fn follow(self: Arc<Self>, caches: Arc<CacheSet>, spec: &'static ResourceSpec) {
        let prefix = spec.key_prefix();
        loop {
            let mut watcher = match initial_state(&caches, spec).await {
                Ok((objects, watcher)) => {
                    let work = self.graph().relist(spec, &objects);
                    self.enqueue(work);
                    self.set_synced(&prefix, true);
                    watcher
                }
                Err(SyncError::Watch(WatchError::ShuttingDown)) => return,
                // No cache to follow (a resource this tier does not cache, or a custom resource
                // whose cache just went): nothing to wait for, the workers must not stall on it.
                Err(e @ SyncError::NoCache(_)) => {
                    self.set_synced(&prefix, true);
                    tracing::debug!(resource = spec.resource, "garbage collector: {e}; looking again later");
                    tokio::time::sleep(RESYNC * 10).await;
                    continue;
                }
                Err(e) => {
                    // A custom resource's cache goes just before it stops being served.
                    tracing::debug!(resource = spec.resource, "garbage collector watch failed: {e}; retrying");
                    tokio::time::sleep(RESYNC).await;
                    continue;
                }
            };
            loop {
                match watcher.next().await {
                    Some(WatchItem::Event { event, kind }) => {
                        let work = self.graph().observe(spec, kind, &event.object);
                        self.enqueue(work);
                    }
                    Some(WatchItem::Bookmark(_) | WatchItem::InitialEventsEnd(_)) => {}
                    Some(WatchItem::Terminated { .. }) => break,
                    None => return,
                }
            }
        }
    }

    /// One worker: takes work once the graph is synced, does it, and retries failures after
    /// a pause that grows with each failure in a row.
    async fn work(self: Arc<Self>) {
        let mut synced = self.synced.subscribe();
        loop {
            let key = self.queue.next().await;
            if synced.wait_for(|s| *s).await.is_err() {
                return;
            }
            let result = match Work::parse(&key) {
                Some(Work::Delete(uid)) => self.attempt_to_delete(&uid).await,
                Some(Work::Orphan(uid)) => self.attempt_to_orphan(&uid).await,
                None => Ok(Done::Forget),
            };
            match result {
                Ok(Done::Forget) => {
                    lock(&self.failures).remove(&key);
                }
                Ok(Done::Requeue) => self.retry_later(key),
                Err(Failure::Invalid(reason)) => {
                    tracing::info!("garbage collector: {reason}; leaving the reference alone");
                    lock(&self.failures).remove(&key);
                }
                Err(e @ (Failure::Conflict(_) | Failure::Unmapped(_))) => {
                    tracing::debug!(%key, "garbage collector: {e}; looking again later");
                    self.retry_later(key);
                }
                Err(Failure::Api(e)) => {
                    tracing::warn!(%key, "garbage collector: {}; retrying", e.message);
                    self.retry_later(key);
                }
            }
        }
    }

    fn retry_later(&self, key: String) {
        let failures = {
            let mut all = lock(&self.failures);
            let n = all.entry(key.clone()).or_insert(0);
            *n = n.saturating_add(1);
            *n
        };
        let pause = FIRST_BACKOFF.saturating_mul(1 << failures.min(16).saturating_sub(1)).min(MAX_BACKOFF);
        let queue = self.queue.clone();
        tokio::spawn(async move {
            tokio::time::sleep(pause).await;
            queue.add(key);
        });
    }
}
