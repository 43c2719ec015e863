//! The params a binding evaluates its policy with (kube's `generic.CollectParams`): none
//! without a `paramKind` or `paramRef`, the one named, or every one its selector picks; a
//! binding whose params are missing admits (`Allow`) or refuses (`Deny`).

use kapi_apimachinery::labels::LabelSelector;
use serde_json::Value;

use crate::resolver::{ParamResolver, ParamSource};

/// Reads one resource's watch cache.
pub(crate) trait CacheReader {
    /// Whether the cache with `prefix` exists (kube: the param informer has synced).
    fn has_cache(&self, prefix: &str) -> bool;
    /// The object at `key`.
    fn get(&self, prefix: &str, key: &str) -> Option<Value>;
    /// The objects under `key_prefix`.
    fn list(&self, prefix: &str, key_prefix: &str) -> Vec<Value>;
}

/// kube's `ParamKind.String()`, as its errors print it.
fn param_kind_string(param_kind: &Value) -> String {
    let s = |k: &str| param_kind.get(k).and_then(Value::as_str).unwrap_or_default().to_owned();
    format!("&ParamKind{{APIVersion:{},Kind:{},}}", s("apiVersion"), s("kind"))
}

/// A param as CEL sees it: in the param kind's version, with its type meta.
fn as_param(resolver: &dyn ParamResolver, param_kind: &Value, cached: &Value) -> Value {
    let s = |k: &str| param_kind.get(k).and_then(Value::as_str).unwrap_or_default();
    let mut v = resolver.param_object(s("apiVersion"), s("kind"), cached);
    if let Some(m) = v.as_object_mut() {
        m.entry("apiVersion").or_insert_with(|| Value::from(s("apiVersion")));
        m.entry("kind").or_insert_with(|| Value::from(s("kind")));
    }
    v
}

/// The params to evaluate with: `[None]` when the policy or binding uses none.
pub(crate) fn collect(
    param_kind: Option<&Value>,
    source: Option<&ParamSource>,
    param_ref: Option<&Value>,
    namespace: &str,
    cache: &dyn CacheReader,
    resolver: &dyn ParamResolver,
) -> Result<Vec<Option<Value>>, String> {
    let (Some(param_kind), Some(param_ref)) = (param_kind, param_ref) else { return Ok(vec![None]) };
    let Some(source) = source else {
        return Err(format!("paramKind kind `{}` not known", param_kind_string(param_kind)));
    };
    let text = |k: &str| param_ref.get(k).and_then(Value::as_str).unwrap_or_default();
    let mut scope = source.key_prefix.clone();
    if source.namespaced {
        let ns = if text("namespace").is_empty() { namespace } else { text("namespace") };
        if ns.is_empty() {
            return Err("cannot use namespaced paramRef in policy binding that matches cluster-scoped resources".into());
        }
        scope = format!("{scope}{ns}/");
    }
    if !cache.has_cache(&source.key_prefix) {
        return Err(format!("paramKind kind `{}` not yet synced to use for admission", param_kind_string(param_kind)));
    }
    if !text("namespace").is_empty() && !source.namespaced {
        return Err("paramRef.namespace must not be provided for a cluster-scoped `paramKind`".into());
    }
    let selector = param_ref.get("selector").filter(|s| !s.is_null());
    let params: Vec<Value> = if !text("name").is_empty() {
        if selector.is_some() {
            return Err("paramRef.name and paramRef.selector are mutually exclusive".into());
        }
        cache.get(&source.key_prefix, &format!("{scope}{}", text("name"))).into_iter().collect()
    } else if let Some(sel) = selector {
        let sel = LabelSelector::from_json(sel)?;
        cache
            .list(&source.key_prefix, &scope)
            .into_iter()
            .filter(|p| sel.matches(p.pointer("/metadata/labels").and_then(Value::as_object)))
            .collect()
    } else {
        return Err("one of name or selector must be provided".into());
    };
    if params.is_empty() && text("parameterNotFoundAction") == "Deny" {
        return Err("no params found for policy binding with `Deny` parameterNotFoundAction".into());
    }
    Ok(params.iter().map(|p| Some(as_param(resolver, param_kind, p))).collect())
}
