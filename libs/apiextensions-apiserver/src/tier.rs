//! The extensions tier (kube's apiextensions-apiserver as the core server's delegate): serves
//! `apiextensions.k8s.io` and every Established CRD's resources, and runs the CRD controllers.
//!
//! What it serves is a [`Served`] snapshot rebuilt from the CRD watch cache whenever a CRD
//! changes (and on demand, when a request names a resource this replica does not know yet:
//! see [`Tier::sync`]). Each custom resource gets a watch cache before its scope is published,
//! so the generic store always finds one.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use futures_util::StreamExt;
use kapi_apimachinery::ApiError;
use kapi_registry::catalog::{self, ResourceSpec};
use kapi_registry::rest::{DeleteOptions, ListParams, RestStore, WriteHooks};
use kapi_registry::strategy::WriteTarget;
use kapi_server::lifecycle::{PostStartHook, PostStartHooks};
use kapi_server::scope::{BuiltinScope, ResourceScope};
use kapi_server::tier::{builtin_group_order, ServedGroup, Tier, TierBuilder, TierContext, TierFuture};
use kapi_server::StartError;
use kapi_watch::{WatchItem, WatchStart};
use serde_json::Value;

use crate::crd::{self, CrdStrategy, CLEANUP_FINALIZER, TERMINATING};
use crate::names;
use crate::served::Served;

/// The group the tier serves itself.
const GROUP: &str = "apiextensions.k8s.io";
/// How long a request waits for the caches to reach the store's revision before 404.
const SYNC_WAIT: Duration = Duration::from_secs(3);
/// How many CRD status writes (or cleanups) one controller pass runs at once.
const CONCURRENT_WRITES: usize = 32;
/// How often the controllers look at every CRD even without changes (finalizers in progress).
const RESYNC: Duration = Duration::from_secs(5);

/// What identifies a set of stored CRDs at their versions: (count, newest revision).
type Fingerprint = (usize, kapi_storage::Revision);

/// The extensions tier.
pub struct ExtensionsTier {
    rest: RestStore,
    crd_spec: &'static ResourceSpec,
    crd_scope: Arc<dyn ResourceScope>,
    served: RwLock<Arc<Served>>,
    /// One refresh at a time; holds the fingerprint of the CRDs the last one served.
    refreshing: tokio::sync::Mutex<Option<Fingerprint>>,
    /// Publishes the OpenAPI parts of the served CRDs into the server's documents.
    openapi: crate::openapi::Publisher,
    /// CRDs the controllers have looked at: name -> (resourceVersion, group).
    reconciled: Mutex<HashMap<String, (String, String)>>,
    /// Bumped at every snapshot swap ([`Tier::generation`]).
    generation: AtomicU64,
}

impl ExtensionsTier {
    fn snapshot(&self) -> Arc<Served> {
        self.served.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn crds(&self) -> Vec<Arc<Value>> {
        self.crds_with_fingerprint().0
    }

    /// The stored CRDs and a fingerprint of the set: their number and newest revision. Any
    /// create or update brings a revision newer than every stored one, a delete changes the
    /// number; equal fingerprints are the same CRDs at the same versions.
    fn crds_with_fingerprint(&self) -> (Vec<Arc<Value>>, Fingerprint) {
        let prefix = self.crd_spec.key_prefix();
        let Some(cache) = self.rest.caches().cache(&prefix) else { return (Vec::new(), (0, 0)) };
        let listed = cache.list(&prefix).0;
        let fingerprint = (listed.len(), listed.iter().map(|o| o.revision).max().unwrap_or(0));
        (listed.into_iter().map(|o| o.object).collect(), fingerprint)
    }

    /// Rebuilds what is served from the CRD cache: watch caches for new custom resources first,
    /// then the new snapshot, then the caches of resources no longer served are dropped.
    /// Nothing is done when the CRDs are those of the last rebuild (requests for unknown
    /// resources ask for a refresh each: they must not cost a rebuild each).
    pub async fn refresh(&self) {
        let mut last = self.refreshing.lock().await;
        let current = self.snapshot();
        let (crds, fingerprint) = self.crds_with_fingerprint();
        if *last == Some(fingerprint) {
            return;
        }
        // CPU-bound (every CRD looked at, new ones' schemas parsed and rules compiled): off
        // the async workers, which serve requests meanwhile.
        let (rest, all) = (self.rest.clone(), crds.clone());
        let next = match tokio::task::spawn_blocking(move || Served::build(&current, &all, &rest)).await {
            Ok(next) => next,
            Err(e) => {
                tracing::error!("rebuilding the served custom resources: {e}");
                return;
            }
        };
        let current = self.snapshot();
        let (old, new) = (current.prefixes(), next.prefixes());
        let added: Vec<String> = new.difference(&old).cloned().collect();
        if let Err(e) = self.rest.caches().add_all(&added).await {
            // Served at the next refresh; until then these CRDs are treated as not there.
            tracing::warn!("cannot start the watch caches of new custom resources yet: {e}");
            return;
        }
        *self.served.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(next);
        self.generation.fetch_add(1, Ordering::Release);
        for prefix in old.difference(&new) {
            self.rest.caches().remove(prefix).await;
        }
        let served = self.snapshot();
        self.openapi.offer(crds.into_iter().filter(|c| served.serves(crd::str_at(c, "/metadata/name"))).collect());
        *last = Some(fingerprint);
    }

    /// One pass of kube's CRD controllers: names and conditions (naming, establishing, API
    /// approval), and instance cleanup of deleted CRDs (finalizer). Only CRDs that changed since
    /// the last pass are looked at, plus, in the groups where something changed or went, the
    /// CRDs still waiting for names (a released name may now be theirs); `full` looks at all.
    /// The names a group has granted are indexed once per pass, so a pass is linear in the
    /// number of CRDs.
    async fn reconcile(&self, full: bool) {
        let crds = self.crds();
        let granted = names::names_by_group(crds.iter().map(|c| c.as_ref()));
        let todo: Vec<&Arc<Value>> = {
            let mut seen = self.reconciled.lock().unwrap_or_else(|p| p.into_inner());
            let current: HashMap<&str, &Arc<Value>> = crds.iter().map(|c| (crd::str_at(c, "/metadata/name"), c)).collect();
            let mut touched_groups: HashSet<String> = HashSet::new();
            for (name, (_, group)) in seen.iter() {
                if !current.contains_key(name.as_str()) {
                    touched_groups.insert(group.clone());
                }
            }
            seen.retain(|name, _| current.contains_key(name.as_str()));
            // A CRD whose cached copy is older than what this replica last wrote is skipped:
            // the write's own event brings it back, and a pass in between would compute from
            // a stale copy and try the same write again.
            let known = |c: &Value| seen.get(crd::str_at(c, "/metadata/name")).map(|(r, _)| r.as_str());
            let stale = |c: &Value| known(c).is_some_and(|r| revision_order(rv(c), r).is_lt());
            let changed: Vec<&Arc<Value>> =
                crds.iter().filter(|c| !stale(c) && (full || known(c) != Some(rv(c)))).collect();
            touched_groups.extend(changed.iter().map(|c| crd::str_at(c, "/spec/group").to_owned()));
            let waiting = crds.iter().filter(|c| {
                touched_groups.contains(crd::str_at(c, "/spec/group"))
                    && !crd::is_true(c, crd::NAMES_ACCEPTED)
                    && !stale(c)
                    && !changed.iter().any(|x| Arc::ptr_eq(x, c))
            });
            let todo: Vec<&Arc<Value>> = changed.iter().copied().chain(waiting).collect();
            for c in &todo {
                seen.insert(crd::str_at(c, "/metadata/name").to_owned(), (rv(c).to_owned(), crd::str_at(c, "/spec/group").to_owned()));
            }
            todo
        };
        let empty = names::GroupNames::default();
        // CRDs are independent of each other within a pass: their writes go out together
        // (bounded), so a burst of new CRDs is Established in a few store round trips rather
        // than one after the other.
        let work: Vec<_> = todo
            .into_iter()
            .map(|crd| self.reconcile_one(crd, granted.get(crd::str_at(crd, "/spec/group")).unwrap_or(&empty)))
            .collect();
        futures_util::stream::iter(work).buffer_unordered(CONCURRENT_WRITES).collect::<Vec<()>>().await;
    }

    /// One CRD of a controller pass.
    async fn reconcile_one(&self, crd: &Value, group_names: &names::GroupNames) {
        let name = crd::str_at(crd, "/metadata/name").to_owned();
        let deleting = crd::at(crd, "/metadata/deletionTimestamp").is_some_and(|t| !t.is_null());
        let result = if deleting {
            if crd::strings_at(crd, "/metadata/finalizers").iter().any(|f| f == CLEANUP_FINALIZER) {
                self.finalize(&name).await.map(|()| None)
            } else {
                Ok(None)
            }
        } else if names::desired_status(crd, group_names).is_some() {
            self.write_status(&name, Some(crd), |current| names::desired_status(current, group_names)).await.map(Some)
        } else {
            Ok(None)
        };
        match result {
            // Deletions in progress are looked at again at the next resync.
            Ok(_) if deleting => self.forget(&name),
            Ok(Some(written)) => {
                let mut seen = self.reconciled.lock().unwrap_or_else(|p| p.into_inner());
                if let Some(entry) = seen.get_mut(&name) {
                    entry.0 = written;
                }
            }
            Ok(None) => {}
            Err(e) => {
                self.forget(&name);
                // A conflict with another replica's write is retried at once on its event.
                if e.code != 409 {
                    tracing::warn!(crd = name, "CRD controller: {}", e.message);
                }
            }
        }
    }

    /// Makes the next pass look at `name` again.
    fn forget(&self, name: &str) {
        self.reconciled.lock().unwrap_or_else(|p| p.into_inner()).remove(name);
    }

    /// Writes the status `desired` computes from the stored CRD (None: nothing to write);
    /// answers the CRD's resourceVersion after the write.
    /// `cached` is the controller's copy, tried before a store read.
    async fn write_status(
        &self,
        name: &str,
        cached: Option<&Value>,
        desired: impl Fn(&Value) -> Option<Value> + Send + Sync,
    ) -> Result<String, ApiError> {
        let strategy = CrdStrategy(self.crd_spec);
        let mutate = |current: &Value| {
            let mut next = current.clone();
            if let Some(status) = desired(current) {
                next["status"] = status;
            }
            Ok(next)
        };
        let hooks = WriteHooks::default();
        let written = match cached {
            Some(cached) => self.rest.update_from_cached(&strategy, None, name, WriteTarget::Status, hooks, cached, mutate).await,
            None => self.rest.update_with(&strategy, None, name, WriteTarget::Status, false, hooks, mutate).await,
        };
        written.map(|written| rv(&written).to_owned())
    }

    async fn set_terminating(&self, name: &str, state: &str, reason: &str, message: &str) -> Result<(), ApiError> {
        let (state, reason, message) = (state.to_owned(), reason.to_owned(), message.to_owned());
        self.write_status(name, None, move |current| {
            let mut status = current.get("status").and_then(Value::as_object).cloned().unwrap_or_default();
            crd::set_condition(&mut status, TERMINATING, &state, &reason, &message);
            let status = Value::Object(status);
            (current.get("status") != Some(&status)).then_some(status)
        })
        .await
        .map(|_| ())
    }

    /// kube's CRD finalizer: deletes every instance, then releases the CRD.
    async fn finalize(&self, name: &str) -> Result<(), ApiError> {
        let served = self.snapshot();
        if let Some(scope) = served.entry(name).and_then(|e| e.any_scope()).cloned() {
            self.set_terminating(name, "True", "InstanceDeletionInProgress", "CustomResource deletion is in progress").await?;
            let strategy = scope.strategy();
            let params = ListParams::default();
            let page = self.rest.list(strategy, None, &params).await?;
            let mut failures = Vec::new();
            for obj in page.items {
                let obj_name = crd::str_at(&obj, "/metadata/name");
                let ns = Some(crd::str_at(&obj, "/metadata/namespace")).filter(|n| !n.is_empty());
                match self.rest.delete(strategy, ns, obj_name, &DeleteOptions::default()).await {
                    Ok(_) => {}
                    Err(e) if e.code == 404 => {}
                    Err(e) => failures.push(e.message),
                }
            }
            if !failures.is_empty() {
                let message = format!("could not issue all deletes: [{}]", failures.join(", "));
                self.set_terminating(name, "True", "InstanceDeletionFailed", &message).await?;
                return Ok(());
            }
            let left = self.rest.list(strategy, None, &params).await?;
            if !left.items.is_empty() {
                // Instances with finalizers of their own: wait for them.
                let message = format!("could not confirm zero CustomResources remaining: {} remaining", left.items.len());
                self.set_terminating(name, "True", "InstanceDeletionCheck", &message).await?;
                return Ok(());
            }
            self.set_terminating(name, "False", "InstanceDeletionCompleted", "removed all instances").await?;
        } else {
            self.set_terminating(name, "False", "NeverEstablished", "resource was never established").await?;
        }
        let strategy = CrdStrategy(self.crd_spec);
        self.rest
            .update_with(&strategy, None, name, WriteTarget::Main, false, WriteHooks::default(), |current| {
                let mut next = current.clone();
                if let Some(list) = next.pointer_mut("/metadata/finalizers").and_then(Value::as_array_mut) {
                    list.retain(|f| f.as_str() != Some(CLEANUP_FINALIZER));
                }
                if let Some(meta) = next.get_mut("metadata").and_then(Value::as_object_mut) {
                    meta.remove("resourceVersion");
                }
                Ok(next)
            })
            .await
            .map(|_| ())
    }

    /// The controllers: every change of a CRD rebuilds what is served and runs one
    /// reconcile pass; a periodic pass moves finalizers along.
    async fn run_controllers(self: Arc<Self>) {
        // What is served is rebuilt by a task of its own, woken by CRD changes (wake-ups
        // coalesce): the controllers' status writes (what makes a new CRD Established) never
        // wait behind a rebuild of the snapshot and the OpenAPI parts.
        let changed = Arc::new(tokio::sync::Notify::new());
        let refresher = {
            let (tier, changed) = (self.clone(), changed.clone());
            tokio::spawn(async move {
                loop {
                    changed.notified().await;
                    tier.refresh().await;
                }
            })
        };
        let prefix = self.crd_spec.key_prefix();
        let all: kapi_watch::Filter = Arc::new(|_: &Value| true);
        loop {
            let Some(cache) = self.rest.caches().cache(&prefix) else { break };
            let (_, revision) = cache.list(&prefix);
            let Ok(mut watcher) = cache.watch(&prefix, WatchStart::After(revision), all.clone()) else { break };
            changed.notify_one();
            self.reconcile(true).await;
            loop {
                match tokio::time::timeout(RESYNC, watcher.next()).await {
                    Ok(Some(WatchItem::Event { .. })) => {
                        // A burst of CRD writes is handled as one change.
                        let mut ended = false;
                        while let Ok(next) = tokio::time::timeout(Duration::ZERO, watcher.next()).await {
                            match next {
                                Some(WatchItem::Terminated { .. }) | None => {
                                    ended = true;
                                    break;
                                }
                                Some(_) => {}
                            }
                        }
                        changed.notify_one();
                        self.reconcile(false).await;
                        if ended {
                            break;
                        }
                    }
                    Ok(Some(WatchItem::Bookmark(_) | WatchItem::InitialEventsEnd(_))) => {}
                    Ok(Some(WatchItem::Terminated { .. })) => break,
                    Ok(None) => {
                        refresher.abort();
                        return;
                    }
                    Err(_) => self.reconcile(true).await,
                }
            }
        }
        refresher.abort();
    }
}

/// A CRD's resourceVersion.
fn rv(crd: &Value) -> &str {
    crd::str_at(crd, "/metadata/resourceVersion")
}

/// Orders two resourceVersions of the same object as revisions (this server's are numbers);
/// versions that are not numbers compare equal, which treats them as current.
fn revision_order(a: &str, b: &str) -> std::cmp::Ordering {
    match (a.parse::<u64>(), b.parse::<u64>()) {
        (Ok(a), Ok(b)) => a.cmp(&b),
        _ => std::cmp::Ordering::Equal,
    }
}

impl Tier for ExtensionsTier {
    fn name(&self) -> &'static str {
        "apiextensions-apiserver"
    }

    fn groups(&self) -> Vec<ServedGroup> {
        let own = ServedGroup { name: GROUP.into(), versions: vec!["v1".into()], order: builtin_group_order(GROUP).unwrap_or(0) };
        std::iter::once(own).chain(self.snapshot().groups().iter().cloned()).collect()
    }

    fn resources_in(&self, group: &str, version: &str) -> Vec<&'static ResourceSpec> {
        if group == GROUP {
            return catalog::resources_in(group, version).collect();
        }
        self.snapshot().resources_in(group, version)
    }

    fn scope(&self, group: &str, version: &str, resource: &str) -> Option<Arc<dyn ResourceScope>> {
        if group == GROUP {
            return (version == self.crd_spec.version && resource == self.crd_spec.resource).then(|| self.crd_scope.clone());
        }
        self.snapshot().scope(group, version, resource)
    }

    fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    fn sync(&self, revision: kapi_storage::Revision) -> TierFuture<'_, ()> {
        Box::pin(async move {
            if self.rest.caches().wait_for(revision, SYNC_WAIT).await.is_ok() {
                self.refresh().await;
            }
        })
    }
}

/// Builds the extensions tier: kube's post-start hooks for it, its first snapshot (with the
/// watch caches of every custom resource already stored) and its controllers.
#[derive(Default)]
pub struct ExtensionsTierBuilder {
    hooks: Option<[PostStartHook; 3]>,
}

impl TierBuilder for ExtensionsTierBuilder {
    fn register_hooks(&mut self, hooks: &mut PostStartHooks) {
        self.hooks = Some([
            hooks.register("start-apiextensions-informers"),
            hooks.register("start-apiextensions-controllers"),
            hooks.register("crd-informer-synced"),
        ]);
    }

    fn build(self: Box<Self>, ctx: TierContext) -> TierFuture<'static, Result<Arc<dyn Tier>, StartError>> {
        Box::pin(async move {
            let crd_spec = catalog::find(GROUP, "v1", "customresourcedefinitions")
                .ok_or_else(|| StartError::Config("customresourcedefinitions missing from the catalog".into()))?;
            let crd_scope: Arc<dyn ResourceScope> =
                Arc::new(BuiltinScope::with_strategy(crd_spec, Box::new(CrdStrategy(crd_spec)), ctx.openapi.clone()));
            let tier = Arc::new(ExtensionsTier {
                rest: ctx.rest.clone(),
                crd_spec,
                crd_scope,
                served: RwLock::new(Arc::new(Served::default())),
                refreshing: tokio::sync::Mutex::new(None),
                openapi: crate::openapi::Publisher::start(ctx.openapi.clone()),
                reconciled: Mutex::new(HashMap::new()),
                generation: AtomicU64::new(0),
            });
            // The CRD cache is loaded already (the watch caches start with every built-in
            // resource): the informers are synced and the first snapshot is complete.
            tier.refresh().await;
            tokio::spawn(tier.clone().run_controllers());
            if let Some(hooks) = self.hooks {
                for hook in hooks {
                    let _ = hook.run(Duration::ZERO, || async { Ok::<(), std::convert::Infallible>(()) }).await;
                }
            }
            Ok(tier as Arc<dyn Tier>)
        })
    }
}
