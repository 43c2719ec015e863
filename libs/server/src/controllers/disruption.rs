//! kube's disruption controller (kube-controller-manager's `disruption`): every
//! PodDisruptionBudget's status says how many of its pods are healthy, how many must stay, and
//! so how many may be evicted now — the numbers `pods/eviction` decides by. `expectedPods` is
//! the pods counted for an integer `minAvailable`, and the sum of the pods' controllers' scale
//! for a percentage or `maxUnavailable`; a pod the eviction handler recorded in
//! `disruptedPods` counts as gone until it is deleted or two minutes pass.
//!
//! Recomputed when a budget, a pod or a workload controller of its namespace changes; writes
//! are pinned to the resourceVersion read, so replicas running it at once cannot undo an
//! eviction's decrement.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use kapi_apimachinery::labels::LabelSelector;
use kapi_apimachinery::{time as ktime, ApiError};
use kapi_registry::catalog::{self, ResourceSpec};
use kapi_registry::rest::{RestStore, WriteHooks};
use kapi_registry::strategy::{CatalogStrategy, WriteTarget};
use kapi_watch::CacheSet;
use serde_json::{json, Map, Value};

use super::{follow, str_at};

/// kube's `DeletionTimeout`: how long a pod recorded as disrupted counts as gone.
const DELETION_TIMEOUT: i64 = 120;

/// The workload controllers whose scale makes a budget's `expectedPods`.
const WORKLOADS: &[(&str, &str)] = &[("apps", "replicasets"), ("apps", "deployments"), ("apps", "statefulsets"), ("", "replicationcontrollers")];

fn spec(group: &str, resource: &str) -> Option<&'static ResourceSpec> {
    catalog::find(group, "v1", resource)
}


/// Starts the controller.
pub fn start(ctx: &super::ControllerContext) {
    let (caches, rest) = (ctx.caches.clone(), ctx.rest.clone());
    let (Some(budgets), Some(pods)) = (spec("policy", "poddisruptionbudgets"), spec("", "pods")) else {
        tracing::error!("poddisruptionbudgets or pods are not served; no disruption controller");
        return;
    };
    let queue = ctx.queue();
    let on_budget = queue.clone();
    tokio::spawn(follow(caches.clone(), budgets, move |_, b| {
        on_budget.add(format!("{}/{}", str_at(b, "/metadata/namespace"), str_at(b, "/metadata/name")))
    }));
    // A pod or workload change may change any budget of its namespace: queue the namespace,
    // expanded to its budgets by the worker.
    let namespaces = queue.clone();
    tokio::spawn(follow(caches.clone(), pods, move |_, p| namespaces.add(format!("{}/", str_at(p, "/metadata/namespace")))));
    for (group, resource) in WORKLOADS {
        let Some(workload) = spec(group, resource) else { continue };
        let namespaces = queue.clone();
        tokio::spawn(follow(caches.clone(), workload, move |_, w| namespaces.add(format!("{}/", str_at(w, "/metadata/namespace")))));
    }
    tokio::spawn(async move {
        let controller = Controller { caches, rest, budgets };
        loop {
            let key = queue.next().await;
            let Some((namespace, name)) = key.split_once('/') else { continue };
            let names: Vec<String> = if name.is_empty() {
                controller.cached(budgets, Some(namespace)).iter().map(|b| str_at(b, "/metadata/name").to_owned()).collect()
            } else {
                vec![name.to_owned()]
            };
            for name in names {
                match controller.sync(namespace, &name).await {
                    Ok(Some(recheck)) => {
                        let (queue, key) = (queue.clone(), format!("{namespace}/{name}"));
                        tokio::spawn(async move {
                            tokio::time::sleep(recheck).await;
                            queue.add(key);
                        });
                    }
                    Ok(None) => {}
                    Err(e) => {
                        tracing::debug!(namespace, name, "disruption budget sync failed: {e}");
                        queue.retry(format!("{namespace}/{name}"));
                    }
                }
            }
        }
    });
}

struct Controller {
    caches: Arc<CacheSet>,
    rest: RestStore,
    budgets: &'static ResourceSpec,
}

impl Controller {
    /// The cached objects of a resource, in one namespace or all.
    fn cached(&self, spec: &ResourceSpec, namespace: Option<&str>) -> Vec<Arc<Value>> {
        let prefix = spec.key_prefix();
        let narrowed = match namespace {
            Some(ns) => format!("{prefix}{ns}/"),
            None => prefix.clone(),
        };
        self.caches.cache(&prefix).map(|c| c.list(&narrowed).0.into_iter().map(|o| o.object).collect()).unwrap_or_default()
    }

    fn cached_one(&self, group: &str, resource: &str, namespace: &str, name: &str) -> Option<Arc<Value>> {
        let spec = spec(group, resource)?;
        let prefix = spec.key_prefix();
        self.caches.cache(&prefix)?.get(&format!("{prefix}{namespace}/{name}")).map(|o| o.object)
    }

    /// Recomputes one budget's status; Some(delay) asks for a recheck when a disrupted pod's
    /// record expires.
    async fn sync(&self, namespace: &str, name: &str) -> Result<Option<Duration>, ApiError> {
        let Some(budget) = self.cached(self.budgets, Some(namespace)).into_iter().find(|b| str_at(b, "/metadata/name") == name) else {
            return Ok(None);
        };
        if budget.pointer("/metadata/deletionTimestamp").is_some() {
            return Ok(None);
        }
        let pods: Vec<Arc<Value>> = match spec("", "pods") {
            Some(pods) => self
                .cached(pods, Some(namespace))
                .into_iter()
                .filter(|p| selects(&budget, p.pointer("/metadata/labels").and_then(Value::as_object)))
                .collect(),
            None => Vec::new(),
        };
        let now = time::OffsetDateTime::now_utc().unix_timestamp();
        let (disrupted, recheck) = self.live_disruptions(&budget, &pods, now);
        let mut status = match self.expected_and_desired(&budget, &pods) {
            Ok((expected, desired)) => {
                let healthy = pods
                    .iter()
                    .filter(|p| {
                        p.pointer("/metadata/deletionTimestamp").is_none() && !disrupted.contains_key(str_at(p, "/metadata/name")) && is_ready(p)
                    })
                    .count() as i64;
                json!({"currentHealthy": healthy, "desiredHealthy": desired, "expectedPods": expected, "disruptionsAllowed": (healthy - desired).max(0)})
            }
            // kube's failSafe: nothing may be evicted while the budget cannot be computed.
            Err(reason) => {
                let old = budget.get("status").cloned().unwrap_or_else(|| json!({}));
                let mut s = json!({"disruptionsAllowed": 0});
                for f in ["currentHealthy", "desiredHealthy", "expectedPods"] {
                    s[f] = old.get(f).cloned().unwrap_or(json!(0));
                }
                s["syncFailed"] = json!(reason);
                s
            }
        };
        status["observedGeneration"] = budget.pointer("/metadata/generation").cloned().unwrap_or(json!(1));
        if !disrupted.is_empty() {
            status["disruptedPods"] = Value::Object(disrupted);
        }
        let mut updated = (*budget).clone();
        let failed = status.as_object_mut().and_then(|s| s.remove("syncFailed"));
        let old_conditions = budget.pointer("/status/conditions").cloned();
        updated["status"] = status;
        if let Some(conditions) = old_conditions {
            updated["status"]["conditions"] = conditions;
        }
        match failed {
            Some(reason) => set_condition(&mut updated, false, "SyncFailed", reason.as_str().unwrap_or("")),
            None => {
                let allowed = updated.pointer("/status/disruptionsAllowed").and_then(Value::as_i64).unwrap_or(0) > 0;
                set_allowed_condition(&mut updated, allowed);
            }
        }
        if updated.get("status") == budget.get("status") {
            return Ok(recheck);
        }
        let strategy = CatalogStrategy(self.budgets);
        match self.rest.update(&strategy, Some(namespace), name, updated, WriteTarget::Status, false, WriteHooks::default()).await {
            Ok(_) => Ok(recheck),
            // Someone (an eviction) wrote meanwhile: the watch brings the budget back.
            Err(e) if e.code == 409 || e.code == 404 => Ok(recheck),
            Err(e) => Err(e),
        }
    }

    /// The eviction records still standing: a pod recorded less than [`DELETION_TIMEOUT`]
    /// ago that still exists and is not being deleted; and when the first expires.
    fn live_disruptions(&self, budget: &Value, pods: &[Arc<Value>], now: i64) -> (Map<String, Value>, Option<Duration>) {
        let mut live = Map::new();
        let mut next: Option<i64> = None;
        let existing: HashSet<&str> =
            pods.iter().filter(|p| p.pointer("/metadata/deletionTimestamp").is_none()).map(|p| str_at(p, "/metadata/name")).collect();
        for (pod, at) in budget.pointer("/status/disruptedPods").and_then(Value::as_object).into_iter().flatten() {
            let Some(at) = at.as_str().and_then(ktime::parse_rfc3339).map(|t| t.unix_timestamp()) else { continue };
            let expires = at + DELETION_TIMEOUT;
            if expires <= now || !existing.contains(pod.as_str()) {
                continue;
            }
            live.insert(
                pod.clone(),
                json!(ktime::format_rfc3339(time::OffsetDateTime::from_unix_timestamp(at).unwrap_or(time::OffsetDateTime::UNIX_EPOCH))),
            );
            next = Some(next.map_or(expires, |n| n.min(expires)));
        }
        (live, next.map(|n| Duration::from_secs((n - now).max(1) as u64)))
    }

    /// (expectedPods, desiredHealthy) as kube's `getExpectedPodCount`.
    fn expected_and_desired(&self, budget: &Value, pods: &[Arc<Value>]) -> Result<(i64, i64), String> {
        let min = budget.pointer("/spec/minAvailable").filter(|v| !v.is_null());
        let max = budget.pointer("/spec/maxUnavailable").filter(|v| !v.is_null());
        if let (Some(Value::Number(n)), None) = (min, max) {
            return Ok((pods.len() as i64, n.as_i64().unwrap_or(0)));
        }
        let expected = self.expected_scale(pods)?;
        if let Some(max) = max {
            let unavailable = scaled(max, expected, true)?;
            return Ok((expected, (expected - unavailable).max(0)));
        }
        match min {
            Some(min) => Ok((expected, scaled(min, expected, true)?)),
            None => Ok((expected, 0)),
        }
    }

    /// The sum of the scale of the pods' controllers, each once (kube's finders: a ReplicaSet
    /// a Deployment controls counts as the Deployment).
    fn expected_scale(&self, pods: &[Arc<Value>]) -> Result<i64, String> {
        let mut seen: BTreeMap<String, i64> = BTreeMap::new();
        for pod in pods {
            let namespace = str_at(pod, "/metadata/namespace");
            let owner = controller_ref(pod).ok_or_else(|| format!("found no controller ref for pod {:?}", str_at(pod, "/metadata/name")))?;
            let (mut group, mut resource, mut name) = owner;
            if (group.as_str(), resource.as_str()) == ("apps", "replicasets") {
                if let Some(rs) = self.cached_one("apps", "replicasets", namespace, &name) {
                    if let Some((g, r, n)) = controller_ref(&rs).filter(|(g, r, _)| g == "apps" && r == "deployments") {
                        (group, resource, name) = (g, r, n);
                    }
                }
            }
            let Some(controller) = self.cached_one(&group, &resource, namespace, &name) else {
                return Err(format!("found no controllers for pod {:?}", str_at(pod, "/metadata/name")));
            };
            let replicas = controller.pointer("/spec/replicas").and_then(Value::as_i64).unwrap_or(1);
            seen.insert(str_at(&controller, "/metadata/uid").to_owned(), replicas);
        }
        Ok(seen.values().sum())
    }
}

/// kube's `IsPodReady`: the Ready condition is True.
pub(crate) fn is_ready(pod: &Value) -> bool {
    pod.pointer("/status/conditions").and_then(Value::as_array).is_some_and(|cs| {
        cs.iter().any(|c| c.get("type").and_then(Value::as_str) == Some("Ready") && c.get("status").and_then(Value::as_str) == Some("True"))
    })
}

/// Whether a budget's selector picks a pod with `labels`; an empty or invalid selector picks
/// nothing.
pub(crate) fn selects(budget: &Value, labels: Option<&serde_json::Map<String, Value>>) -> bool {
    let Some(selector) = budget.pointer("/spec/selector").filter(|s| s.as_object().is_some_and(|m| !m.is_empty())) else { return false };
    match LabelSelector::from_json(selector) {
        Ok(sel) if !sel.is_empty() => sel.matches(labels),
        _ => false,
    }
}

/// The pod's (or ReplicaSet's) controller owner as (group, resource, name), for the kinds the
/// controller knows.
fn controller_ref(obj: &Value) -> Option<(String, String, String)> {
    let owner = obj.pointer("/metadata/ownerReferences")?.as_array()?.iter().find(|o| o.get("controller").and_then(Value::as_bool) == Some(true))?;
    let group = str_at(owner, "/apiVersion").rsplit_once('/').map_or("", |(g, _)| g).to_owned();
    let resource = match (group.as_str(), str_at(owner, "/kind")) {
        ("apps", "ReplicaSet") => "replicasets",
        ("apps", "Deployment") => "deployments",
        ("apps", "StatefulSet") => "statefulsets",
        ("", "ReplicationController") => "replicationcontrollers",
        _ => return None,
    };
    Some((group, resource.to_owned(), str_at(owner, "/name").to_owned()))
}

/// An int-or-percent against `total` (percentages rounded up, as kube's budgets do).
fn scaled(value: &Value, total: i64, round_up: bool) -> Result<i64, String> {
    match value {
        Value::Number(n) => Ok(n.as_i64().unwrap_or(0)),
        Value::String(s) => {
            let pct: i64 =
                s.strip_suffix('%').and_then(|p| p.parse().ok()).ok_or_else(|| format!("invalid value for IntOrString: invalid value {s:?}"))?;
            let scaled = pct * total;
            Ok(if round_up { (scaled + 99) / 100 } else { scaled / 100 })
        }
        other => Err(format!("invalid value for IntOrString: {other}")),
    }
}

/// kube's `UpdateDisruptionAllowedCondition`: `DisruptionAllowed` True (SufficientPods) while a
/// disruption is allowed, False (InsufficientPods) otherwise.
pub(crate) fn set_allowed_condition(budget: &mut Value, allowed: bool) {
    if allowed {
        set_condition(budget, true, "SufficientPods", "");
    } else {
        set_condition(budget, false, "InsufficientPods", "");
    }
}

fn set_condition(budget: &mut Value, status: bool, reason: &str, message: &str) {
    let generation = budget.pointer("/metadata/generation").cloned().unwrap_or(json!(1));
    let status_text = if status { "True" } else { "False" };
    let Some(obj) = budget.as_object_mut() else { return };
    let st = obj.entry("status").or_insert_with(|| json!({}));
    if !st.is_object() {
        *st = json!({});
    }
    let conditions = st.as_object_mut().map(|s| s.entry("conditions").or_insert_with(|| json!([])));
    let Some(Value::Array(conditions)) = conditions else { return };
    let existing = conditions.iter_mut().find(|c| c.get("type").and_then(Value::as_str) == Some("DisruptionAllowed"));
    match existing {
        Some(c) => {
            if c.get("status").and_then(Value::as_str) != Some(status_text) {
                c["lastTransitionTime"] = json!(ktime::now_rfc3339());
            }
            c["status"] = json!(status_text);
            c["reason"] = json!(reason);
            c["message"] = json!(message);
            c["observedGeneration"] = generation;
        }
        None => conditions.push(json!({"type": "DisruptionAllowed", "status": status_text, "reason": reason, "message": message,
            "observedGeneration": generation, "lastTransitionTime": ktime::now_rfc3339()})),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentages_round_up() {
        assert_eq!(scaled(&json!("50%"), 3, true), Ok(2));
        assert_eq!(scaled(&json!(2), 10, true), Ok(2));
        assert!(scaled(&json!("x%"), 3, true).is_err());
    }

    #[test]
    fn condition_follows_allowed() {
        let mut b = json!({"metadata": {"generation": 2}, "status": {}});
        set_allowed_condition(&mut b, true);
        assert_eq!(b["status"]["conditions"][0]["reason"], "SufficientPods");
        let first = b["status"]["conditions"][0]["lastTransitionTime"].clone();
        set_allowed_condition(&mut b, true);
        assert_eq!(b["status"]["conditions"][0]["lastTransitionTime"], first);
        set_allowed_condition(&mut b, false);
        assert_eq!(b["status"]["conditions"][0]["status"], "False");
        assert_eq!(b["status"]["conditions"][0]["reason"], "InsufficientPods");
        assert_eq!(b["status"]["conditions"].as_array().unwrap().len(), 1);
    }
}
