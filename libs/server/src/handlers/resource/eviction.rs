//! `pods/{name}/eviction` as kube's `EvictionREST`: a pod that already caused its disruption
//! (Pending, Succeeded, Failed, or being deleted) is deleted at once; otherwise the one
//! PodDisruptionBudget selecting it must allow a disruption, which the eviction takes by
//! decrementing `status.disruptionsAllowed` and recording the pod in `status.disruptedPods`
//! (a conditional write, so concurrent evictions cannot both take the last one) before the
//! pod is deleted. Refusals carry kube's codes and messages (429 with a `DisruptionBudget`
//! cause, kubectl drain's signal to retry).

use std::sync::Arc;

use kapi_apimachinery::status::Details;
use kapi_apimachinery::{ApiError, Cause, GroupResource, StatusReason};
use kapi_registry::catalog;
use kapi_registry::rest::{DeleteOptions, ListParams, WriteHooks};
use kapi_registry::strategy::{CatalogStrategy, Strategy, WriteTarget};
use serde_json::{json, Value};

use crate::controllers::disruption::{is_ready, selects};
use crate::state::ApiServer;

/// kube's `MaxDisruptedPodSize`: evictions approved but not yet seen by the disruption
/// controller, beyond which a budget refuses more.
const MAX_DISRUPTED_PODS: usize = 2000;
/// How often a lost race on the pod or the budget is retried (kube's `EvictionsRetry`).
const RETRIES: usize = 20;

/// What an eviction answered besides an error: success, or kube's 500 Status for a pod that
/// several budgets select.
pub(super) enum Evicted {
    Done,
    TooManyBudgets,
}

/// Decodes the deleteOptions of an Eviction, merging the request's dry run as kube's
/// `propagateDryRun` does.
pub(super) fn delete_options(eviction: &Value, query_dry_run: bool) -> Result<DeleteOptions, ApiError> {
    let opts = eviction.get("deleteOptions").filter(|o| o.is_object());
    let body_dry_run: Vec<String> = opts
        .and_then(|o| o.get("dryRun"))
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect())
        .unwrap_or_default();
    let query: Vec<String> = if query_dry_run { vec!["All".into()] } else { Vec::new() };
    if !body_dry_run.is_empty() && !query.is_empty() && body_dry_run != query {
        return Err(ApiError::bad_request(format!(
            "Non-matching dry-run options in request and content: [{}] and [{}]",
            query.join(" "),
            body_dry_run.join(" ")
        )));
    }
    let s = |path: &str| opts.and_then(|o| o.pointer(path)).and_then(Value::as_str).map(str::to_owned);
    Ok(DeleteOptions {
        grace_period_seconds: opts.and_then(|o| o.get("gracePeriodSeconds")).and_then(Value::as_i64),
        propagation_policy: s("/propagationPolicy"),
        precondition_uid: s("/preconditions/uid"),
        precondition_resource_version: s("/preconditions/resourceVersion"),
        dry_run: query_dry_run || body_dry_run.iter().any(|d| d == "All"),
    })
}

/// Evicts pod `namespace/name` (admission already ran on the Eviction).
pub(super) async fn evict(srv: &Arc<ApiServer>, pods: &dyn Strategy, namespace: &str, name: &str, opts: DeleteOptions) -> Result<Evicted, ApiError> {
    // A resourceVersion the client gave is its own precondition: no retries on conflict.
    let retry = opts.precondition_resource_version.is_none();
    let mut attempts = 0;
    let pod = loop {
        attempts += 1;
        let pod = srv.rest.get(pods, Some(namespace), name).await?;
        if !can_ignore_budget(&pod) {
            break pod;
        }
        let mut delete = opts.clone();
        if enforce_resource_version(&pod) && delete.precondition_resource_version.is_none() {
            delete.precondition_resource_version = resource_version(&pod);
        }
        match srv.rest.delete(pods, Some(namespace), name, &delete).await {
            Ok(_) => return Ok(Evicted::Done),
            Err(e) if e.code == 409 && retry && attempts < RETRIES => continue,
            Err(e) => return Err(e),
        }
    };

    let budgets = selecting_budgets(srv, namespace, &pod).await?;
    if budgets.len() > 1 {
        return Ok(Evicted::TooManyBudgets);
    }
    let mut delete = opts.clone();
    // Set when an unready pod goes without taking a disruption: its budget's name.
    let mut unready_spare = None;
    if let Some(budget) = budgets.into_iter().next() {
        let status_i64 = |b: &Value, f: &str| b.pointer(&format!("/status/{f}")).and_then(Value::as_i64).unwrap_or(0);
        let (current, desired) = (status_i64(&budget, "currentHealthy"), status_i64(&budget, "desiredHealthy"));
        if !is_ready(&pod) && current >= desired && desired > 0 {
            // An unready pod does not count towards the healthy ones: nothing to take, but the
            // pod must not have become ready meanwhile.
            unready_spare = budget.pointer("/metadata/name").and_then(Value::as_str).map(str::to_owned);
            delete.precondition_resource_version = delete.precondition_resource_version.or_else(|| resource_version(&pod));
        } else {
            take_disruption(srv, namespace, name, &budget, opts.dry_run).await?;
        }
    }
    match srv.rest.delete(pods, Some(namespace), name, &delete).await {
        Ok(_) => Ok(Evicted::Done),
        Err(e) if e.code == 409 && opts.precondition_resource_version.is_none() && unready_spare.is_some() => {
            let budget = unready_spare.unwrap_or_default();
            Err(too_many_requests(10, &format!("The disruption budget {budget} is still being processed by the server.")))
        }
        Err(e) => Err(e),
    }
}

/// kube's `canIgnorePDB`.
fn can_ignore_budget(pod: &Value) -> bool {
    matches!(phase(pod), "Succeeded" | "Failed" | "Pending") || pod.pointer("/metadata/deletionTimestamp").is_some()
}

/// kube's `shouldEnforceResourceVersion`: a live pod must not turn ready between the check and
/// the delete.
fn enforce_resource_version(pod: &Value) -> bool {
    !matches!(phase(pod), "Succeeded" | "Failed") && pod.pointer("/metadata/deletionTimestamp").is_none()
}

fn phase(pod: &Value) -> &str {
    pod.pointer("/status/phase").and_then(Value::as_str).unwrap_or("")
}

fn resource_version(obj: &Value) -> Option<String> {
    obj.pointer("/metadata/resourceVersion").and_then(Value::as_str).map(str::to_owned)
}

/// The budgets of the pod's namespace whose (non-empty, valid) selector matches its labels.
async fn selecting_budgets(srv: &Arc<ApiServer>, namespace: &str, pod: &Value) -> Result<Vec<Value>, ApiError> {
    let spec =
        catalog::find("policy", "v1", "poddisruptionbudgets").ok_or_else(|| ApiError::internal("poddisruptionbudgets missing from the catalog"))?;
    let page = srv.rest.list(&CatalogStrategy(spec), Some(namespace), &ListParams::default()).await?;
    let labels = pod.pointer("/metadata/labels").and_then(Value::as_object);
    Ok(page.items.iter().filter(|b| selects(b, labels)).map(|b| (**b).clone()).collect())
}

/// kube's `checkAndDecrement`, retried on conflict with a fresh budget.
async fn take_disruption(srv: &Arc<ApiServer>, namespace: &str, pod: &str, budget: &Value, dry_run: bool) -> Result<(), ApiError> {
    let spec =
        catalog::find("policy", "v1", "poddisruptionbudgets").ok_or_else(|| ApiError::internal("poddisruptionbudgets missing from the catalog"))?;
    let strategy = CatalogStrategy(spec);
    let name = budget.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("").to_owned();
    let mut current = budget.clone();
    for attempt in 0..RETRIES {
        if attempt > 0 {
            current = srv.rest.get(&strategy, Some(namespace), &name).await?;
        }
        let updated = decremented(&current, &name, pod)?;
        if dry_run {
            return Ok(());
        }
        // Pinned to the budget as read: a concurrent eviction makes this one start over.
        match srv.rest.update(&strategy, Some(namespace), &name, updated, WriteTarget::Status, false, WriteHooks::default()).await {
            Ok(_) => return Ok(()),
            Err(e) if e.code == 409 => continue,
            Err(e) => return Err(e),
        }
    }
    Err(ApiError::timeout(format!("couldn't update PodDisruptionBudget {name:?} due to conflicts")))
}

/// The budget with one disruption taken for `pod`, or kube's refusal.
fn decremented(budget: &Value, name: &str, pod: &str) -> Result<Value, ApiError> {
    let int = |f: &str| budget.pointer(f).and_then(Value::as_i64).unwrap_or(0);
    if int("/status/observedGeneration") < int("/metadata/generation") {
        return Err(too_many_requests(10, &format!("The disruption budget {name} is still being processed by the server.")));
    }
    let allowed = int("/status/disruptionsAllowed");
    let forbidden = |why: &str| ApiError::forbidden_for(&GroupResource::new("policy", "poddisruptionbudget"), name, why);
    if allowed < 0 {
        return Err(forbidden("pdb disruptions allowed is negative"));
    }
    let disrupted = budget.pointer("/status/disruptedPods").and_then(Value::as_object).map_or(0, |m| m.len());
    if disrupted > MAX_DISRUPTED_PODS {
        return Err(forbidden("DisruptedPods map too big - too many evictions not confirmed by PDB controller"));
    }
    if allowed == 0 {
        let (desired, current) = (int("/status/desiredHealthy"), int("/status/currentHealthy"));
        return Err(too_many_requests(0, &format!("The disruption budget {name} needs {desired} healthy pods and has {current} currently")));
    }
    let mut updated = budget.clone();
    updated["status"]["disruptionsAllowed"] = json!(allowed - 1);
    if allowed - 1 == 0 {
        crate::controllers::disruption::set_allowed_condition(&mut updated, false);
    }
    let status = updated["status"].as_object_mut().ok_or_else(|| ApiError::internal("budget status is not an object"))?;
    let pods = status.entry("disruptedPods").or_insert_with(|| json!({}));
    if !pods.is_object() {
        *pods = json!({});
    }
    pods[pod] = json!(kapi_apimachinery::time::now_rfc3339());
    Ok(updated)
}

/// kube's eviction 429: `Cannot evict pod as it would violate the pod's disruption budget.`
/// with a `DisruptionBudget` cause.
fn too_many_requests(retry_after: u32, cause: &str) -> ApiError {
    ApiError {
        details: Some(Box::new(Details {
            causes: vec![Cause { reason: "DisruptionBudget".into(), message: cause.into(), field: String::new() }],
            retry_after_seconds: Some(retry_after),
            ..Details::default()
        })),
        ..ApiError::new(429, StatusReason::TooManyRequests, "Cannot evict pod as it would violate the pod's disruption budget.")
    }
}
