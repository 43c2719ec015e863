//! kube's resourcequota controller: every ResourceQuota's `status.hard` is its `spec.hard`,
//! and `status.used` is recounted from the watch caches (with the same evaluators admission
//! charges by) when a quota is created or its limits change, when something that uses quota
//! is deleted or stops using it (a pod that ends, a Service that changes type, a claim that
//! shrinks), and every five minutes, kube's resync period. That is how a deleted pod's share
//! is given back.
//!
//! Admission charges `used` between recounts; its status writes do not start a recount, and a
//! recount writes only at the resourceVersion it read, so it never overwrites a charge made
//! meanwhile (it loses the race and counts again). As in kube, a recount cannot see a write
//! admitted but not stored yet, so `used` may for a moment be below the truth.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use kapi_admission_builtin::resource_quota::usage::{add, mask, resource_list, to_json, ResourceList};
use kapi_admission_builtin::resource_quota::{quota_matches, Evaluator};
use kapi_apimachinery::ApiError;
use kapi_registry::catalog::{self, ResourceSpec, Serving};
use kapi_registry::rest::{RestStore, WriteHooks};
use kapi_registry::strategy::{CatalogStrategy, WriteTarget};
use kapi_watch::EventType;
use serde_json::{json, Value};

use super::{follow, str_at};

/// kube-controller-manager's `--resource-quota-sync-period` default.
const RESYNC: Duration = Duration::from_secs(300);

/// The kinds whose changes can lower usage, each with the events that can.
const RELEASERS: &[(&str, &str, bool)] = &[
    // (resource, group, modifications too)
    ("pods", "", true),
    ("services", "", true),
    ("persistentvolumeclaims", "", true),
    ("configmaps", "", false),
    ("secrets", "", false),
    ("replicationcontrollers", "", false),
    ("resourcequotas", "", false),
];


fn served(group: &str, resource: &str) -> Option<&'static ResourceSpec> {
    catalog::resources().iter().find(|r| r.group == group && r.resource == resource && matches!(r.serving, Serving::Stored) && r.namespaced)
}

/// Starts the controller.
pub fn start(ctx: &super::ControllerContext) {
    let (caches, rest) = (ctx.caches.clone(), ctx.rest.clone());
    let Some(quotas) = served("", "resourcequotas") else {
        tracing::error!("resourcequotas are not served; no resource-quota controller");
        return;
    };
    let queue = ctx.queue();
    let on_quota = queue.clone();
    tokio::spawn(follow(caches.clone(), quotas, move |ty, q| {
        // Admission's charges change status only; a recount is for new or changed limits.
        let limits_changed =
            resource_list(q.pointer("/spec/hard")) != resource_list(q.pointer("/status/hard")) || q.pointer("/status/used").is_none();
        if ty != EventType::Deleted && limits_changed {
            on_quota.add(str_at(q, "/metadata/namespace"));
        }
    }));
    for (resource, group, modifications) in RELEASERS {
        let Some(spec) = served(group, resource) else { continue };
        let queue = queue.clone();
        tokio::spawn(follow(caches.clone(), spec, move |ty, obj| {
            if ty == EventType::Deleted || (*modifications && ty == EventType::Modified) {
                queue.add(str_at(obj, "/metadata/namespace"));
            }
        }));
    }
    let resync = queue.clone();
    let all = rest.clone();
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(RESYNC).await;
            let Some(cache) = all.caches().cache(&quotas.key_prefix()) else { continue };
            let namespaces: BTreeSet<String> =
                cache.list(&quotas.key_prefix()).0.iter().map(|q| str_at(&q.object, "/metadata/namespace").to_owned()).collect();
            for ns in namespaces {
                resync.add(ns);
            }
        }
    });
    tokio::spawn(async move {
        loop {
            let ns = queue.next().await;
            if let Err(e) = sync(&rest, quotas, &ns).await {
                tracing::debug!(namespace = %ns, "resource-quota controller: {e}; counting again");
                queue.retry(ns);
            }
        }
    });
}

fn cached(rest: &RestStore, spec: &ResourceSpec, ns: &str) -> Vec<Arc<Value>> {
    let prefix = spec.key_prefix();
    match rest.caches().cache(&prefix) {
        Some(cache) => cache.list(&format!("{prefix}{ns}/")).0.into_iter().map(|o| o.object).collect(),
        None => Vec::new(),
    }
}

/// The resource a quota name counts: kube's evaluators' resources and `count/<resource>.<group>`.
fn counted_resource(name: &str) -> Option<(String, String)> {
    if let Some(rest) = name.strip_prefix("count/") {
        let (resource, group) = rest.split_once('.').unwrap_or((rest, ""));
        return Some((group.to_owned(), resource.to_owned()));
    }
    ["pods", "services", "persistentvolumeclaims", "configmaps", "secrets", "replicationcontrollers", "resourcequotas"]
        .into_iter()
        .find(|r| Evaluator::of("", r).charges(name))
        .map(|r| (String::new(), r.to_owned()))
}

/// kube's `CalculateUsage` for one quota: every limited resource, zero when nothing uses it.
fn recount(rest: &RestStore, quota: &Value, hard: &ResourceList, now: i64) -> ResourceList {
    let names: BTreeSet<String> = hard.keys().cloned().collect();
    let resources: BTreeSet<(String, String)> = names.iter().filter_map(|n| counted_resource(n)).collect();
    let mut used: ResourceList = hard.keys().map(|k| (k.clone(), kapi_admission_builtin::quantity::Quantity::ZERO)).collect();
    let ns = str_at(quota, "/metadata/namespace");
    for (group, resource) in resources {
        let (Some(spec), evaluator) = (served(&group, &resource), Evaluator::of(&group, &resource)) else { continue };
        for obj in cached(rest, spec, ns) {
            if quota_matches(&evaluator, quota, hard, &obj) {
                used = add(&used, &mask(&evaluator.usage(&obj, now), &names));
            }
        }
    }
    used
}

async fn sync(rest: &RestStore, spec: &'static ResourceSpec, ns: &str) -> Result<(), ApiError> {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0);
    let mut failed = None;
    for quota in cached(rest, spec, ns) {
        let hard = resource_list(quota.pointer("/spec/hard"));
        let used = recount(rest, &quota, &hard, now);
        let status = json!({"hard": to_json(&hard), "used": to_json(&used)});
        let same = |field: &str| resource_list(quota.pointer(&format!("/status/{field}"))) == resource_list(status.get(field));
        if same("hard") && same("used") && quota.pointer("/status/used").is_some() {
            continue;
        }
        let mut updated = (*quota).clone();
        updated["status"] = status;
        let name = str_at(&quota, "/metadata/name");
        // At the resourceVersion read: a charge admission made since wins, and the namespace
        // is counted again.
        match rest.update(&CatalogStrategy(spec), Some(ns), name, updated, WriteTarget::Status, false, WriteHooks::default()).await {
            Ok(_) => {}
            Err(e) if e.code == 404 => {}
            Err(e) => failed = Some(e),
        }
    }
    failed.map_or(Ok(()), Err)
}
