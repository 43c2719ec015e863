//! Reading the objects a plugin decides by from the watch caches (kube's listers).

use std::sync::Arc;

use kapi_apimachinery::ApiError;
use kapi_registry::catalog::{self, ResourceSpec};
use kapi_registry::rest::RestStore;
use serde_json::Value;

/// The served resource a plugin reads; its absence is a bug in kapi, so a 500.
pub(crate) fn spec(group: &str, version: &str, resource: &str) -> Result<&'static ResourceSpec, ApiError> {
    catalog::find(group, version, resource).ok_or_else(|| ApiError::internal(format!("{resource} are not served")))
}

/// One object from its cache (`namespace` None for cluster-scoped kinds).
pub(crate) fn get(rest: &RestStore, spec: &ResourceSpec, namespace: Option<&str>, name: &str) -> Option<Arc<Value>> {
    let key = kapi_registry::rest::object_key(spec, namespace, name);
    rest.caches().cache(&spec.key_prefix()).and_then(|c| c.get(&key)).map(|o| o.object)
}

/// Every object of a namespace (or of the whole resource with None) from its cache.
pub(crate) fn list(rest: &RestStore, spec: &ResourceSpec, namespace: Option<&str>) -> Vec<Arc<Value>> {
    let prefix = match namespace {
        Some(ns) => format!("{}{ns}/", spec.key_prefix()),
        None => spec.key_prefix(),
    };
    match rest.caches().cache(&spec.key_prefix()) {
        Some(cache) => cache.list(&prefix).0.into_iter().map(|o| o.object).collect(),
        None => Vec::new(),
    }
}

/// A string at `pointer`, "" when absent.
pub(crate) fn str_at<'a>(obj: &'a Value, pointer: &str) -> &'a str {
    obj.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

/// The name of the newest object annotated `true` under one of `annotations` (the first name
/// among the newest): kube picks it when an administrator marked several classes as default.
pub(crate) fn newest_marked(objects: &[Arc<Value>], annotations: &[&str]) -> Option<String> {
    objects
        .iter()
        .filter(|o| {
            annotations.iter().any(|a| o.pointer("/metadata/annotations").and_then(|m| m.get(*a)).and_then(Value::as_str) == Some("true"))
        })
        .map(|o| (str_at(o, "/metadata/creationTimestamp"), str_at(o, "/metadata/name")))
        .max_by(|a, b| a.0.cmp(b.0).then_with(|| b.1.cmp(a.1)))
        .map(|(_, name)| name.to_owned())
}
