//! DeleteOptions from the query and the body, with kube's validation.

use kapi_apimachinery::ApiError;
use kapi_registry::rest::DeleteOptions;
use serde_json::Value;

use super::dry_run;
use crate::query::Query;

pub(super) fn delete_options(
    openapi: &kapi_openapi::OpenApi,
    query: &Query,
    content_type: Option<&str>,
    body: &[u8],
) -> Result<DeleteOptions, ApiError> {
    let mut opts = DeleteOptions { dry_run: dry_run(query)?, ..Default::default() };
    let from_body = crate::decode::decode_delete_options(openapi, content_type, body)?.unwrap_or(Value::Null);
    opts.grace_period_seconds = match query.i64("gracePeriodSeconds")? {
        Some(g) => Some(g),
        None => from_body.get("gracePeriodSeconds").and_then(Value::as_i64),
    };
    let policy =
        query.get("propagationPolicy").map(str::to_owned).or_else(|| from_body.get("propagationPolicy").and_then(Value::as_str).map(str::to_owned));
    let orphan = match query.bool("orphanDependents")? {
        Some(o) => Some(o),
        None => from_body.get("orphanDependents").and_then(Value::as_bool),
    };
    if let Some(p) = &policy {
        if !matches!(p.as_str(), "Orphan" | "Background" | "Foreground") {
            return Err(ApiError::invalid(
                "meta.k8s.io",
                "DeleteOptions",
                "",
                vec![kapi_apimachinery::Cause::not_supported(
                    "propagationPolicy",
                    &Value::String(p.clone()),
                    &["Foreground", "Background", "Orphan"],
                )],
            ));
        }
        if orphan.is_some() {
            return Err(ApiError::invalid(
                "meta.k8s.io",
                "DeleteOptions",
                "",
                vec![kapi_apimachinery::Cause::invalid(
                    "propagationPolicy",
                    &Value::String(p.clone()),
                    "orphanDependents and deletionPropagation cannot be both set",
                )],
            ));
        }
    }
    opts.propagation_policy = policy.or_else(|| orphan.map(|o| if o { "Orphan".into() } else { "Background".into() }));
    if let Some(pre) = from_body.get("preconditions") {
        opts.precondition_uid = pre.get("uid").and_then(Value::as_str).map(str::to_owned);
        opts.precondition_resource_version = pre.get("resourceVersion").and_then(Value::as_str).map(str::to_owned);
    }
    if from_body.get("dryRun").and_then(Value::as_array).is_some_and(|a| a.iter().any(|v| v == "All")) {
        opts.dry_run = true;
    }
    Ok(opts)
}

/// kube's `DeleteOptions` object as admission sees it.
pub(super) fn delete_options_object(opts: &DeleteOptions) -> Value {
    let mut options = serde_json::Map::new();
    options.insert("kind".into(), Value::String("DeleteOptions".into()));
    options.insert("apiVersion".into(), Value::String("meta.k8s.io/v1".into()));
    if let Some(grace) = opts.grace_period_seconds {
        options.insert("gracePeriodSeconds".into(), Value::from(grace));
    }
    if let Some(policy) = &opts.propagation_policy {
        options.insert("propagationPolicy".into(), Value::String(policy.clone()));
    }
    let mut preconditions = serde_json::Map::new();
    if let Some(uid) = &opts.precondition_uid {
        preconditions.insert("uid".into(), Value::String(uid.clone()));
    }
    if let Some(rv) = &opts.precondition_resource_version {
        preconditions.insert("resourceVersion".into(), Value::String(rv.clone()));
    }
    if !preconditions.is_empty() {
        options.insert("preconditions".into(), Value::Object(preconditions));
    }
    if opts.dry_run {
        options.insert("dryRun".into(), serde_json::json!(["All"]));
    }
    Value::Object(options)
}
