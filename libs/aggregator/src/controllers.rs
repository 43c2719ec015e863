//! kube-aggregator's controllers, on every replica as kube runs them on every apiserver (their
//! writes are idempotent): the APIService informer that keeps routing current, the automatic
//! registration of local APIServices for what the chain serves (kube's autoregister and
//! crdregistration controllers), and the availability controllers (local ones are always
//! available; remote ones are checked as kube checks them, on changes, every 30 s, and at
//! once after a proxied request failed).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use kapi_apimachinery::ApiError;
use kapi_registry::catalog;
use kapi_registry::rest::{DeleteOptions, WriteHooks};
use kapi_registry::strategy::CatalogStrategy;
use kapi_server::controllers::follow;
use kapi_server::field_manager;
use kapi_server::lifecycle::PostStartHook;
use kapi_server::tier::{Chain, CUSTOM_GROUP_ORDER};
use serde_json::{json, Value};

use crate::available;
use crate::tier::{local_apiservice, Shared};

/// kube's label on the APIServices the aggregator registers itself: `onstart` for built-in
/// group versions, `true` for custom resource ones (kept in step with their CRDs).
pub(crate) const AUTOMANAGED: &str = "kube-aggregator.kubernetes.io/automanaged";
/// kube's resync of the remote availability controller.
const RESYNC: Duration = Duration::from_secs(30);
/// The field manager of the aggregator's writes (kube's aggregator writes as kube-apiserver).
pub(crate) const MANAGER: &str = "kube-apiserver";

/// Starts every controller; `hooks` complete as each has started (the registration hook after
/// its first complete pass).
pub(crate) fn start(shared: Arc<Shared>, chain: Chain, hooks: Vec<PostStartHook>) {
    let caches = shared.rest.caches().clone();
    // The informer: routing follows the APIService cache, loaded before serving starts.
    if let Some(cache) = caches.cache(&shared.spec.key_prefix()) {
        let (objects, _) = cache.list(&shared.spec.key_prefix());
        shared.set_services(objects.into_iter().map(|o| o.object));
    }
    let follower = shared.clone();
    tokio::spawn(async move {
        let mut services: BTreeMap<String, Arc<Value>> = follower.state().services.iter().map(|(k, (_, o))| (k.clone(), o.clone())).collect();
        follow(follower.rest.caches().clone(), follower.spec, move |kind, obj| {
            let name = obj.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_owned();
            match kind {
                kapi_watch::EventType::Deleted => {
                    services.remove(&name);
                    kapi_server::metrics::global::forget_apiservice(&name);
                }
                _ => {
                    services.insert(name.clone(), Arc::new(obj.clone()));
                }
            }
            follower.set_services(services.values().cloned());
            follower.checks.add(&name);
        })
        .await;
    });
    // Services and their EndpointSlices decide remote availability: a change checks the
    // APIServices that name the Service.
    for (group, resource) in [("", "services"), ("discovery.k8s.io", "endpointslices")] {
        let Some(spec) = catalog::find(group, "v1", resource) else { continue };
        let watcher = shared.clone();
        tokio::spawn(follow(caches.clone(), spec, move |_, obj| {
            let namespace = obj.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or_default();
            let name = match resource {
                "services" => obj.pointer("/metadata/name"),
                _ => obj.pointer("/metadata/labels/kubernetes.io~1service-name"),
            }
            .and_then(Value::as_str)
            .unwrap_or_default();
            for (apiservice, (s, _)) in &watcher.state().services {
                if s.service.as_ref().is_some_and(|t| t.namespace == namespace && t.name == name) {
                    watcher.checks.add(apiservice);
                }
            }
        }));
    }
    let resync = shared.clone();
    tokio::spawn(async move {
        loop {
            for (name, (s, _)) in &resync.state().services {
                if s.service.is_some() {
                    resync.checks.add(name);
                }
            }
            tokio::time::sleep(RESYNC).await;
        }
    });
    let worker = shared.clone();
    tokio::spawn(async move {
        loop {
            let name = worker.checks.next().await;
            if let Err(e) = available::check(&worker, &name).await {
                tracing::warn!(apiservice = %name, "availability check failed: {e}; retrying");
                let queue = worker.checks.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    queue.add(&name);
                });
            }
        }
    });
    if let Some(split) = &shared.split {
        tokio::spawn(split.clone().follow(shared.generation.clone()));
        // A CRD change: read the extensions tier's discovery at once.
        if let Some(spec) = catalog::find("apiextensions.k8s.io", "v1", "customresourcedefinitions") {
            let split = split.clone();
            tokio::spawn(follow(caches.clone(), spec, move |_, _| split.nudge()));
        }
    }
    tokio::spawn(register(shared, chain, hooks));
}

/// The local APIServices the chain calls for now: name -> (group, version, priorities, custom).
/// (In a split deployment the tiers behind the aggregator count as local, as kube's delegates.)
fn desired(shared: &Shared, chain: &Chain) -> BTreeMap<String, (String, String, i64, i64, bool)> {
    let mut out = BTreeMap::new();
    let state = shared.state();
    for group in chain.groups() {
        for version in &group.versions {
            let served_here = !chain.resources_in(&group.name, version).is_empty()
                || shared.split.as_ref().is_some_and(|split| split.resources(&group.name, version).is_some());
            if state.is_remote(&group.name, version) || !served_here {
                continue;
            }
            let custom = group.order == CUSTOM_GROUP_ORDER;
            let (name, gp, vp) = local_apiservice(&group.name, version, custom);
            out.insert(name, (group.name.clone(), version.clone(), gp, vp, custom));
        }
    }
    out
}

/// Whether a CRD in the store (the cache caught up with `revision`) serves `group`/`version`.
async fn crd_serves(shared: &Shared, group: &str, version: &str, revision: u64) -> bool {
    let caches = shared.rest.caches();
    if caches.wait_for(revision, Duration::from_secs(5)).await.is_err() {
        return true;
    }
    let Some(spec) = catalog::find("apiextensions.k8s.io", "v1", "customresourcedefinitions") else { return true };
    let Some(cache) = caches.cache(&spec.key_prefix()) else { return true };
    cache.list(&spec.key_prefix()).0.iter().any(|crd| {
        crd.object.pointer("/spec/group").and_then(Value::as_str) == Some(group)
            && crd.object.pointer("/spec/versions").and_then(Value::as_array).into_iter().flatten().any(|v| {
                v.get("name").and_then(Value::as_str) == Some(version) && v.get("served").and_then(Value::as_bool) == Some(true)
            })
    })
}

/// Keeps a local APIService for every group version the chain serves, and removes those of
/// custom resource group versions no longer served. A replica that has not yet seen a new CRD
/// must not remove what another replica registered for it: before a removal the chain is
/// brought up to the APIService's revision, and the delete is conditional on it.
async fn register(shared: Arc<Shared>, chain: Chain, hooks: Vec<PostStartHook>) {
    // A split aggregator is ready once it knows what the tiers behind it serve.
    if let Some(split) = &shared.split {
        split.wait_ready().await;
    }
    let mut hooks = Some(hooks);
    let mut seen: Option<(u64, usize)> = None;
    loop {
        let now = (chain.generation(), shared.state().services.len());
        if seen != Some(now) {
            match register_pass(&shared, &chain).await {
                Ok(()) => {
                    seen = Some(now);
                    for hook in hooks.take().unwrap_or_default() {
                        let _ = hook.run(Duration::ZERO, || async { Ok::<(), std::convert::Infallible>(()) }).await;
                    }
                }
                Err(e) => tracing::warn!("registering local APIServices: {e}; retrying"),
            }
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

async fn register_pass(shared: &Shared, chain: &Chain) -> Result<(), ApiError> {
    let strategy = CatalogStrategy(shared.spec);
    let wanted = desired(shared, chain);
    let state = shared.state();
    for (name, (group, version, gp, vp, custom)) in &wanted {
        if state.services.contains_key(name) {
            continue;
        }
        let obj = json!({
            "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
            "metadata": {"name": name, "labels": {AUTOMANAGED: if *custom { "true" } else { "onstart" }}},
            "spec": {"group": group, "version": version, "groupPriorityMinimum": gp, "versionPriority": vp},
        });
        let track = field_manager::tracker(shared.spec, field_manager::writer(shared.spec, MANAGER.into(), ""));
        match shared.rest.create(&strategy, None, obj, false, WriteHooks::tracking(track.as_deref())).await {
            Ok(_) => {}
            Err(e) if e.code == 409 => {}
            Err(e) => return Err(e),
        }
    }
    for (name, (service, obj)) in &state.services {
        let managed = obj.pointer(&format!("/metadata/labels/{}", AUTOMANAGED.replace('/', "~1"))).and_then(Value::as_str) == Some("true");
        if !managed || service.service.is_some() || wanted.contains_key(name) {
            continue;
        }
        let rv = obj.pointer("/metadata/resourceVersion").and_then(Value::as_str).unwrap_or_default().to_owned();
        chain.sync(rv.parse().unwrap_or(0)).await;
        if desired(shared, chain).contains_key(name) {
            continue;
        }
        // A split aggregator learns of CRDs from the extensions tier a moment later: its own
        // CRD cache, caught up with the APIService, decides.
        if shared.split.is_some() && crd_serves(shared, &service.group, &service.version, rv.parse().unwrap_or(0)).await {
            continue;
        }
        let options = DeleteOptions { precondition_resource_version: Some(rv), ..DeleteOptions::default() };
        match shared.rest.delete(&strategy, None, name, &options).await {
            Ok(_) => {}
            Err(e) if e.code == 404 || e.code == 409 => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
