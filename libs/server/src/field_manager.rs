//! Who a write is by, for `managedFields`: the manager name (kube's `?fieldManager=` or the
//! User-Agent's product), the version spoken, and the fields the write resets. Builds the
//! tracker the generic REST store calls on every create, update and patch.

use kapi_apimachinery::{time as ktime, ApiError, Cause};
use kapi_fieldmanager::{track_update, FieldSet, Path, Writer};
use kapi_fieldmanager::TypeSchema;
use kapi_openapi::{apply_schema, ApplyNode};
use kapi_registry::catalog::ResourceSpec;
use kapi_registry::conversion;
use kapi_registry::rest::Tracker;
use serde_json::Value;

use crate::query::Query;
use crate::scope::ResourceScope;

/// kube's limit on a field manager's name.
const MAX_MANAGER_LENGTH: usize = 128;

/// The manager of a write: `?fieldManager=` if given (validated as kube does), else the
/// User-Agent up to its first `/` (`kubectl/v1.32 ...` -> `kubectl`).
pub fn manager(query: &Query, user_agent: Option<&str>) -> Result<String, ApiError> {
    if let Some(m) = query.get("fieldManager") {
        let bad = |detail: &str| {
            ApiError::invalid(
                "meta.k8s.io",
                "PatchOptions",
                "",
                vec![Cause::invalid("fieldManager", &Value::String(m.to_owned()), detail)],
            )
        };
        if m.chars().count() > MAX_MANAGER_LENGTH {
            return Err(bad("must be at most 128 characters"));
        }
        if m.chars().any(|c| c.is_control() || !(c.is_alphanumeric() || c.is_ascii_graphic() || c == ' ')) {
            return Err(bad("must consist of printable characters"));
        }
        return Ok(m.to_owned());
    }
    let agent = user_agent.unwrap_or_default();
    let product: String = agent.split('/').next().unwrap_or_default().chars().take(MAX_MANAGER_LENGTH).collect();
    Ok(product)
}

/// The fields built-in strategies reset on a write of `subresource` ("" or status) of `spec`.
pub fn reset_fields(spec: &ResourceSpec, subresource: &str) -> FieldSet {
    if subresource == "status" {
        FieldSet::from_paths(&[Path::fields(&["spec"])])
    } else if subresource.is_empty() && spec.has_subresource("status") {
        FieldSet::from_paths(&[Path::fields(&["status"])])
    } else {
        FieldSet::new()
    }
}

/// The writer of a request on the built-in `spec` (the served version) for `subresource`
/// ("" or status); the server's own writers use it.
pub fn writer(spec: &ResourceSpec, manager: String, subresource: &str) -> Writer {
    with_reset(spec, manager, subresource, reset_fields(spec, subresource))
}

/// The writer of a request on the scope's resource, with the fields its strategy resets.
pub fn writer_for(scope: &dyn ResourceScope, manager: String, subresource: &str) -> Writer {
    with_reset(scope.spec(), manager, subresource, scope.reset_fields(subresource))
}

fn with_reset(spec: &ResourceSpec, manager: String, subresource: &str, reset: FieldSet) -> Writer {
    Writer { manager, api_version: spec.api_version(), subresource: subresource.to_owned(), reset, now: ktime::now_rfc3339() }
}

/// The tracker for a create, update or non-apply patch of the scope's resource (or its
/// `subresource`) by the request's field manager.
pub fn for_request(
    scope: &dyn ResourceScope,
    query: &Query,
    user_agent: Option<&str>,
    subresource: &str,
) -> Result<Option<Box<Tracker>>, ApiError> {
    Ok(scope.tracker(writer_for(scope, manager(query, user_agent)?, subresource)))
}

/// The managedFields tracker for writes of the built-in kind `spec` by `writer` (the server's
/// own writers use it too); None for kinds without a typed schema.
pub fn tracker(spec: &'static ResourceSpec, writer: Writer) -> Option<Box<Tracker>> {
    let stored = conversion::storage_spec(spec);
    let schema = apply_schema(stored.group, stored.version, stored.kind)?;
    Some(Box::new(move |old: Option<&Value>, new: &mut Value| track_update(old, new, &schema, &writer)))
}

/// The built-in `ObjectMeta` as server-side apply sees it. kube types the `metadata` of custom
/// resources (and of their embedded resources) with the built-in definition, so the extensions
/// tier hands this node to the CRD schema's apply type. Every kind's `metadata` is `ObjectMeta`;
/// a ConfigMap's is taken because it always exists.
pub fn object_meta() -> Option<ApplyNode> {
    apply_schema("", "v1", "ConfigMap").map(|cm| cm.field("metadata").0)
}
