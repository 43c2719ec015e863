//! kube's namespace controller (kube-controller-manager's `namespace` controller, its
//! `NamespacedResourcesDeleter`): a namespace marked for deletion has every object of every
//! served namespaced resource (custom resources included) deleted, its deletion conditions
//! kept in `status.conditions` with kube's reasons and messages, and once nothing is left the
//! `kubernetes` finalizer removed from `spec.finalizers` through `namespaces/{name}/finalize`;
//! the store then removes the namespace (when `metadata.finalizers` is empty too).
//!
//! As kube's controller it waits [`DELETION_GRACE`] after seeing a deletion (so that every
//! replica sees the namespace Terminating and no create slips in behind the controller), and
//! requeues a namespace whose content remains (objects held by their own finalizers) after
//! `estimate / 2 + 1` seconds. Every write is conditional or idempotent: several replicas may
//! run it at once.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kapi_apimachinery::ApiError;
use kapi_registry::catalog::{self, ResourceSpec};
use kapi_registry::rest::{DeleteOptions, ListParams, RestStore, WriteHooks};
use kapi_registry::strategy::{CatalogStrategy, WriteTarget};
use kapi_watch::EventType;
use serde_json::{json, Value};
use tokio::time::Instant;

use super::{follow, str_at, Queue, MANAGER};
use crate::tier::Chain;

/// kube's `namespaceDeletionGracePeriod`: how long after seeing a namespace's deletion the
/// controller starts on it.
const DELETION_GRACE: Duration = Duration::from_secs(5);
/// kube's `finalizerEstimateSeconds`: the estimate when remaining objects wait on finalizers.
const FINALIZER_ESTIMATE_SECONDS: i64 = 15;
/// The finalizer this controller owns in `spec.finalizers`.
const KUBERNETES_FINALIZER: &str = "kubernetes";

/// The condition types the controller maintains, in kube's order, with their "ok" reason and
/// message (`status_condition_utils.go`).
const CONDITIONS: [(&str, &str, &str); 5] = [
    ("NamespaceDeletionDiscoveryFailure", "ResourcesDiscovered", "All resources successfully discovered"),
    ("NamespaceDeletionGroupVersionParsingFailure", "ParsedGroupVersions", "All legacy kube types successfully parsed"),
    ("NamespaceDeletionContentFailure", "ContentDeleted", "All content successfully deleted, may be waiting on finalization"),
    ("NamespaceContentRemaining", "ContentRemoved", "All content successfully removed"),
    ("NamespaceFinalizersRemaining", "ContentRemoved", "All content successfully removed"),
];

struct Controller {
    rest: RestStore,
    chain: Chain,
    namespaces: &'static ResourceSpec,
}

/// Keys due later (kube's `AddAfter`): a key waits for the earliest time it was asked for.
#[derive(Default)]
struct Delays {
    due: Mutex<HashMap<String, Instant>>,
}

impl Delays {
    fn add_after(self: &Arc<Self>, queue: &Arc<Queue>, key: String, delay: Duration) {
        let at = Instant::now() + delay;
        {
            let mut due = self.due.lock().unwrap_or_else(|e| e.into_inner());
            match due.get(&key) {
                Some(existing) if *existing <= at => return,
                _ => {
                    due.insert(key.clone(), at);
                }
            }
        }
        let (delays, queue) = (self.clone(), queue.clone());
        tokio::spawn(async move {
            tokio::time::sleep_until(at).await;
            let mut due = delays.due.lock().unwrap_or_else(|e| e.into_inner());
            // A later, earlier request took over this key.
            if due.get(&key) == Some(&at) {
                due.remove(&key);
                drop(due);
                queue.add(key);
            }
        });
    }
}

/// What deleting a namespace's content left.
#[derive(Default)]
struct Remaining {
    /// The longest wait the remaining objects suggest (seconds).
    estimate: i64,
    /// Remaining objects per resource (`resource.group`).
    by_resource: BTreeMap<String, usize>,
    /// Remaining objects per finalizer they carry.
    by_finalizer: BTreeMap<String, usize>,
    /// Failures, one per resource.
    errors: Vec<String>,
}

/// Starts the controller over the namespaces' cache; `chain` says which resources are served.
pub fn start(ctx: &super::ControllerContext) {
    let (caches, rest, chain) = (ctx.caches.clone(), ctx.rest.clone(), ctx.chain.clone());
    let Some(namespaces) = catalog::find("", "v1", "namespaces") else {
        tracing::error!("namespaces are not served; no namespace controller");
        return;
    };
    let queue = ctx.queue();
    let delays = Arc::new(Delays::default());
    let (on_namespace, on_delays) = (queue.clone(), delays.clone());
    tokio::spawn(follow(caches, namespaces, move |ty, ns| {
        if ty != EventType::Deleted && ns.pointer("/metadata/deletionTimestamp").is_some_and(|t| !t.is_null()) {
            on_delays.add_after(&on_namespace, str_at(ns, "/metadata/name").to_owned(), DELETION_GRACE);
        }
    }));
    let controller = Controller { rest, chain, namespaces };
    tokio::spawn(async move {
        loop {
            let ns = queue.next().await;
            match controller.sync(&ns).await {
                Ok(None) => {}
                Ok(Some(estimate)) => delays.add_after(&queue, ns, Duration::from_secs((estimate / 2 + 1) as u64)),
                Err(e) => {
                    tracing::warn!(namespace = %ns, "namespace controller: {e}; retrying");
                    queue.retry(ns);
                }
            }
        }
    });
}


fn string_list(obj: &Value, pointer: &str) -> Vec<String> {
    obj.pointer(pointer).and_then(Value::as_array).map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect()).unwrap_or_default()
}

impl Controller {
    /// One pass over a namespace: Some(estimate) when content remains and it should be
    /// looked at again.
    async fn sync(&self, name: &str) -> Result<Option<i64>, ApiError> {
        let strategy = CatalogStrategy(self.namespaces);
        let ns = match self.rest.get(&strategy, None, name).await {
            Ok(ns) => ns,
            Err(e) if e.code == 404 => return Ok(None),
            Err(e) => return Err(e),
        };
        let deleted_at = str_at(&ns, "/metadata/deletionTimestamp");
        if deleted_at.is_empty() {
            return Ok(None);
        }
        if !string_list(&ns, "/spec/finalizers").iter().any(|f| f == KUBERNETES_FINALIZER) {
            return Ok(None);
        }
        let deleted_at = time::OffsetDateTime::parse(deleted_at, &time::format_description::well_known::Rfc3339).ok();
        let remaining = self.delete_content(name, deleted_at).await;
        self.update_conditions(name, &remaining).await?;
        if let Some(first) = remaining.errors.first() {
            return Err(ApiError::internal(first.clone()));
        }
        if remaining.estimate > 0 {
            return Ok(Some(remaining.estimate));
        }
        self.finalize(name).await?;
        Ok(None)
    }

    /// The namespaced stored resources served now, each storage once.
    fn resources(&self) -> Vec<&'static ResourceSpec> {
        let mut seen = BTreeSet::new();
        self.chain
            .stored_resources()
            .into_iter()
            .filter(|r| r.namespaced && r.verbs.contains(&"delete") && r.verbs.contains(&"list"))
            .filter(|r| seen.insert(r.key_prefix()))
            .collect()
    }

    /// kube's `deleteAllContent`: deletes every object of every resource in the namespace,
    /// then counts what is left.
    async fn delete_content(&self, ns: &str, deleted_at: Option<time::OffsetDateTime>) -> Remaining {
        let mut remaining = Remaining::default();
        for spec in self.resources() {
            let Some(scope) = self.chain.scope(spec.group, spec.version, spec.resource) else { continue };
            let strategy = scope.strategy();
            let gvr = format!("{}/{}, Resource={}", spec.group, spec.version, spec.resource);
            let mut estimate = 0;
            if spec.group.is_empty() && spec.resource == "pods" {
                estimate = self.pods_estimate(strategy, ns, deleted_at).await;
            }
            let list = match self.rest.list(strategy, Some(ns), &ListParams::default()).await {
                Ok(list) => list,
                Err(e) => {
                    remaining.errors.push(e.message.clone());
                    continue;
                }
            };
            let mut failed = None;
            for obj in &list.items {
                if obj.pointer("/metadata/deletionTimestamp").is_some_and(|t| !t.is_null()) {
                    continue;
                }
                let name = str_at(obj, "/metadata/name");
                let opts = DeleteOptions { propagation_policy: Some("Background".into()), ..DeleteOptions::default() };
                match self.rest.delete(strategy, Some(ns), name, &opts).await {
                    Ok(_) => {}
                    Err(e) if e.code == 404 || e.code == 405 => {}
                    Err(e) => failed = Some(e.message.clone()),
                }
            }
            if let Some(e) = failed {
                remaining.errors.push(e);
                continue;
            }
            let left = match self.rest.list(strategy, Some(ns), &ListParams::default()).await {
                Ok(list) => list.items,
                Err(e) => {
                    remaining.errors.push(e.message.clone());
                    continue;
                }
            };
            if left.is_empty() {
                continue;
            }
            *remaining.by_resource.entry(format!("{}.{}", spec.resource, spec.group)).or_default() += left.len();
            let mut with_finalizers = false;
            for obj in &left {
                for finalizer in string_list(obj, "/metadata/finalizers") {
                    with_finalizers = true;
                    *remaining.by_finalizer.entry(finalizer).or_default() += 1;
                }
            }
            if estimate > 0 {
                remaining.estimate = remaining.estimate.max(estimate);
            } else if with_finalizers {
                remaining.estimate = remaining.estimate.max(FINALIZER_ESTIMATE_SECONDS);
            } else {
                remaining.errors.push(format!("unexpected items still remain in namespace: {ns} for gvr: {gvr}"));
            }
        }
        remaining
    }

    /// kube's `estimateGracefulTerminationForPods`: the longest grace period of the pods that
    /// still run, or 0 once that long has passed since the namespace's deletion.
    async fn pods_estimate(&self, strategy: &dyn kapi_registry::strategy::Strategy, ns: &str, deleted_at: Option<time::OffsetDateTime>) -> i64 {
        let Ok(pods) = self.rest.list(strategy, Some(ns), &ListParams::default()).await else { return 0 };
        let estimate = pods
            .items
            .iter()
            .filter(|p| !matches!(str_at(p, "/status/phase"), "Succeeded" | "Failed"))
            .filter_map(|p| p.pointer("/spec/terminationGracePeriodSeconds").and_then(Value::as_i64))
            .max()
            .unwrap_or(0);
        let since = deleted_at.map(|t| (time::OffsetDateTime::now_utc() - t).whole_seconds()).unwrap_or(i64::MAX);
        if since >= estimate {
            0
        } else {
            estimate
        }
    }

    /// kube's `namespaceConditionUpdater`: every maintained condition, True with the failure
    /// or False with its "ok" text; written only when one changed.
    async fn update_conditions(&self, name: &str, remaining: &Remaining) -> Result<(), ApiError> {
        let mut failing: HashMap<&str, (String, String)> = HashMap::new();
        if !remaining.errors.is_empty() {
            let mut msgs = remaining.errors.clone();
            msgs.sort();
            let msg = format!("Failed to delete all resource types, {} remaining: {}", msgs.len(), msgs.join(", "));
            failing.insert("NamespaceDeletionContentFailure", ("ContentDeletionFailed".into(), msg));
        }
        if !remaining.by_resource.is_empty() {
            let mut parts: Vec<String> = remaining.by_resource.iter().map(|(r, n)| format!("{r} has {n} resource instances")).collect();
            parts.sort();
            failing.insert("NamespaceContentRemaining", ("SomeResourcesRemain".into(), format!("Some resources are remaining: {}", parts.join(", "))));
        }
        if !remaining.by_finalizer.is_empty() {
            let mut parts: Vec<String> = remaining.by_finalizer.iter().map(|(f, n)| format!("{f} in {n} resource instances")).collect();
            parts.sort();
            failing.insert("NamespaceFinalizersRemaining", ("SomeFinalizerRemain".into(), format!("Some finalizers are remaining: {}", parts.join(", "))));
        }
        let strategy = CatalogStrategy(self.namespaces);
        let track = crate::field_manager::tracker(self.namespaces, crate::field_manager::writer(self.namespaces, MANAGER.into(), "status"));
        let hooks = WriteHooks::tracking(track.as_deref());
        let result = self
            .rest
            .update_with(&strategy, None, name, WriteTarget::Status, false, hooks, |stored| {
                let mut ns = stored.clone();
                let now = kapi_apimachinery::time::now_rfc3339();
                let mut conditions = ns.pointer("/status/conditions").and_then(Value::as_array).cloned().unwrap_or_default();
                for (ty, ok_reason, ok_message) in CONDITIONS {
                    let (status, reason, message) = match failing.get(ty) {
                        Some((reason, message)) => ("True", reason.as_str(), message.as_str()),
                        None => ("False", ok_reason, ok_message),
                    };
                    match conditions.iter_mut().find(|c| str_at(c, "/type") == ty) {
                        None => conditions.push(json!({"type": ty, "status": status, "lastTransitionTime": now, "reason": reason, "message": message})),
                        Some(c) => {
                            if str_at(c, "/status") != status {
                                c["lastTransitionTime"] = json!(now);
                            }
                            c["status"] = json!(status);
                            c["reason"] = json!(reason);
                            c["message"] = json!(message);
                        }
                    }
                }
                if str_at(&ns, "/status/phase") != "Terminating" {
                    ns["status"]["phase"] = json!("Terminating");
                }
                ns["status"]["conditions"] = Value::Array(conditions);
                if let Some(m) = ns.get_mut("metadata").and_then(Value::as_object_mut) {
                    m.remove("resourceVersion");
                }
                Ok(ns)
            })
            .await;
        super::gone_is_done(result)
    }

    /// kube's `finalizeNamespace`: `kubernetes` leaves `spec.finalizers` (the `finalize`
    /// subresource's write); the store removes the namespace when nothing else holds it.
    async fn finalize(&self, name: &str) -> Result<(), ApiError> {
        let strategy = CatalogStrategy(self.namespaces);
        let track = crate::field_manager::tracker(self.namespaces, crate::field_manager::writer(self.namespaces, MANAGER.into(), "finalize"));
        let result = self
            .rest
            .update_with(&strategy, None, name, WriteTarget::Subresource, false, WriteHooks::tracking(track.as_deref()), |stored| {
                let mut ns = stored.clone();
                let kept: Vec<String> = string_list(stored, "/spec/finalizers").into_iter().filter(|f| f != KUBERNETES_FINALIZER).collect();
                ns["spec"]["finalizers"] = json!(kept);
                if let Some(m) = ns.get_mut("metadata").and_then(Value::as_object_mut) {
                    m.remove("resourceVersion");
                }
                Ok(ns)
            })
            .await;
        super::gone_is_done(result)
    }
}
