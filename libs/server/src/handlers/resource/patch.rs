//! PATCH: JSON, merge and strategic merge patches, and server-side apply.

use std::sync::{Arc, Mutex};

use http::StatusCode;
use kapi_apimachinery::patch::{apply_json_patch, apply_merge_patch};
use kapi_apimachinery::strategic_merge::apply_strategic_merge_patch;
use kapi_apimachinery::ApiError;
use kapi_fieldmanager::ApplySchema;
use kapi_openapi::SchemaNode;
use kapi_registry::rest::{Prepare, StoreAdmission, WriteHooks};
use kapi_registry::strategy::WriteTarget;
use serde_json::{json, Value};

use super::dry_run;
use crate::field_manager;
use crate::field_validation::{FieldValidation, Patched, Source};
use crate::negotiation::{content_essence, decode_body};
use crate::query::Query;
use crate::scope::ResourceScope;
use crate::state::ApiServer;

/// Patch media types served for kinds with a typed schema.
const PATCH_TYPES: &[&str] =
    &["application/json-patch+json", "application/merge-patch+json", "application/strategic-merge-patch+json", "application/apply-patch+yaml"];
/// Patch media types for kinds without a typed schema: kube does not strategic-merge those.
pub(super) const UNTYPED_PATCH_TYPES: &[&str] = &["application/json-patch+json", "application/merge-patch+json"];
/// Patch media types for custom resources: no Go types to strategic-merge, but a schema to apply.
const APPLY_ONLY_PATCH_TYPES: &[&str] = &["application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml"];

/// Checks the patch media type before anything is read, as kube's patch handler does, and picks
/// the schema the patch needs (strategic merge and apply only exist for typed kinds).
pub(super) fn patch_kind<'a>(
    content_type: Option<&str>,
    schema: Option<SchemaNode>,
    apply: Option<ApplySchema<'a>>,
) -> Result<PatchKind<'a>, ApiError> {
    let accepted = match (&schema, &apply) {
        (Some(_), _) => PATCH_TYPES,
        (None, Some(_)) => APPLY_ONLY_PATCH_TYPES,
        (None, None) => UNTYPED_PATCH_TYPES,
    };
    match content_essence(content_type).as_deref() {
        Some("application/json-patch+json") => Ok(PatchKind::Json),
        Some("application/merge-patch+json") => Ok(PatchKind::Merge),
        Some("application/strategic-merge-patch+json") => match schema {
            Some(schema) => Ok(PatchKind::Strategic(schema)),
            None => Err(ApiError::unsupported_media_type(accepted)),
        },
        Some("application/apply-patch+yaml" | "application/apply-patch+cbor") => match apply {
            Some(node) => Ok(PatchKind::Apply(node)),
            None => Err(ApiError::unsupported_media_type(accepted)),
        },
        _ => Err(ApiError::unsupported_media_type(accepted)),
    }
}

/// The patch formats a PATCH body may use.
#[derive(Clone)]
pub(super) enum PatchKind<'a> {
    Json,
    Merge,
    Strategic(SchemaNode),
    Apply(ApplySchema<'a>),
}

/// Applies a JSON or merge patch to `current`, with kube's rule that the patched object may not
/// rename itself; a resourceVersion the patch sets is a precondition.
pub(super) fn apply_patch(kind: &PatchKind<'_>, body: &[u8], current: &Value) -> Result<Value, ApiError> {
    // The patch sees the object as clients see it, resourceVersion included (a JSON patch may
    // `test` or `replace` it, as kubectl's managed-fields migration does).
    let base = current.clone();
    let patched = match kind {
        PatchKind::Json => apply_json_patch(&base, body)?,
        PatchKind::Merge => apply_merge_patch(&base, body)?,
        PatchKind::Strategic(schema) => apply_strategic_merge_patch(&base, body, schema)?,
        PatchKind::Apply(_) => return Err(ApiError::unsupported_media_type(UNTYPED_PATCH_TYPES)),
    };
    if !patched.is_object() {
        return Err(match kind {
            PatchKind::Json | PatchKind::Merge => crate::patch_decode::not_an_object(&patched),
            _ => ApiError::bad_request("the patched object must be a JSON object"),
        });
    }
    let mut patched = patched;
    // The type comes from the URL: a patch may restate it or drop it, never change it.
    for field in ["apiVersion", "kind"] {
        match (patched.get(field), current.get(field)) {
            (Some(new), Some(old)) if new != old => {
                return Err(ApiError::bad_request(format!(
                    "the patched object's {field} ({}) does not match the {field} on the URL ({})",
                    new.as_str().map_or_else(|| new.to_string(), str::to_owned),
                    old.as_str().unwrap_or_default()
                )));
            }
            (None, Some(old)) => {
                patched[field] = old.clone();
            }
            _ => {}
        }
    }
    let old_name = current.pointer("/metadata/name");
    let new_name = patched.pointer("/metadata/name");
    if old_name != new_name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({}) does not match the name on the URL ({})",
            new_name.and_then(Value::as_str).unwrap_or(""),
            old_name.and_then(Value::as_str).unwrap_or("")
        )));
    }
    Ok(patched)
}

/// An untouched resourceVersion is no precondition: the write may retry against a newer
/// object. One the patch set (or replaced) must still be the stored one, else 409.
fn drop_unchanged_resource_version(patched: &mut Value, current: &Value) {
    if patched.pointer("/metadata/resourceVersion") == current.pointer("/metadata/resourceVersion") {
        if let Some(m) = patched.get_mut("metadata").and_then(Value::as_object_mut) {
            m.remove("resourceVersion");
        }
    }
}

/// What a PATCH request carries besides the object it names.
pub(super) struct PatchRequest<'a> {
    pub(super) content_type: Option<&'a str>,
    pub(super) body: &'a [u8],
    pub(super) query: &'a Query,
    pub(super) user_agent: Option<&'a str>,
    pub(super) target: WriteTarget,
    pub(super) prepare: Option<&'a Prepare>,
    pub(super) admission: &'a dyn StoreAdmission,
}

/// PATCH of the main resource or its status: JSON, merge, strategic merge patch or server-side
/// apply. Returns the stored object, the field validation warnings and the status code (201
/// when an apply created the object).
pub(super) async fn patch(
    srv: &Arc<ApiServer>,
    scope: &dyn ResourceScope,
    ns: Option<&str>,
    name: &str,
    req: &PatchRequest<'_>,
) -> Result<(Value, Vec<String>, StatusCode), ApiError> {
    let query = req.query;
    let strategy = scope.strategy();
    // Reject an unsupported patch type before reading anything.
    let kind = patch_kind(req.content_type, scope.patch_schema(), scope.apply_schema())?;
    let mode = FieldValidation::from_query(query)?;
    let dry = dry_run(query)?;
    let subresource = if req.target == WriteTarget::Status { "status" } else { "" };
    let force = parse_force(query, matches!(kind, PatchKind::Apply(_)))?;
    let manager = field_manager::manager(query, req.user_agent)?;
    if let PatchKind::Apply(schema) = &kind {
        if query.get("fieldManager").is_none() {
            return Err(invalid_patch_options(kapi_apimachinery::Cause::required("fieldManager", "is required for apply patch")));
        }
        let writer = field_manager::writer_for(scope, manager, subresource);
        return server_side_apply(srv, scope, ns, name, req, schema, &writer, force, dry, mode).await;
    }
    // kube refuses a JSON, merge or strategic merge patch that is not JSON before it reads the
    // object (its patch handler's `validateAndTranscodePatch`).
    if kapi_apimachinery::go_json::syntax_error(req.body).is_some() {
        return Err(ApiError::bad_request("invalid JSON patch"));
    }
    if matches!(kind, PatchKind::Json | PatchKind::Merge) {
        crate::patch_decode::check_document(mode, matches!(kind, PatchKind::Json), req.body)?;
    }
    let track = scope.tracker(field_manager::writer_for(scope, manager, subresource));
    // Only the last attempt's warnings describe the stored result.
    let warnings = std::sync::Mutex::new(Vec::new());
    let (body, kind, warned) = (req.body, &kind, &warnings);
    let patched = srv
        .rest
        .update_with_async(strategy, ns, name, req.target, dry, WriteHooks { track: track.as_deref(), prepare: None, admission: Some(req.admission) }, |stored| {
            let stored = stored.clone();
            Box::pin(async move {
                // Patches apply to the object in the version the client speaks.
                let current = scope.convert_from_storage(stored).await?;
                let mut patched = apply_patch(kind, body, &current)?;
                let how = match kind {
                    PatchKind::Merge => Patched::Json(Some(body)),
                    PatchKind::Json => Patched::Json(None),
                    PatchKind::Strategic(_) => Patched::Strategic(body),
                    PatchKind::Apply(_) => Patched::Apply,
                };
                let found = scope.check_fields(mode, &mut patched, Source::Patched(how))?;
                drop_unchanged_resource_version(&mut patched, &current);
                *warned.lock().unwrap_or_else(|p| p.into_inner()) = found;
                scope.convert_to_storage(patched).await
            })
        })
        .await?;
    Ok((patched, warnings.into_inner().unwrap_or_else(|p| p.into_inner()), StatusCode::OK))
}

/// `?force=`: only apply patches may force (kube's PatchOptions validation).
fn parse_force(query: &Query, apply: bool) -> Result<bool, ApiError> {
    let force = match query.get("force") {
        None | Some("false") => false,
        Some("true") => true,
        Some(other) => return Err(ApiError::bad_request(format!("force: invalid value {other:?}: must be true or false"))),
    };
    if force && !apply {
        return Err(invalid_patch_options(kapi_apimachinery::Cause::invalid(
            "force",
            &Value::Bool(true),
            "may not be specified for non-apply patch",
        )));
    }
    Ok(force)
}

/// kube's 422 for bad PatchOptions (`PatchOptions.meta.k8s.io "" is invalid: ...`).
fn invalid_patch_options(cause: kapi_apimachinery::Cause) -> ApiError {
    ApiError::invalid("meta.k8s.io", "PatchOptions", "", vec![cause])
}

/// Server-side apply: merges the applied configuration into the live object with ownership
/// (409 on conflicts unless forced), or creates the object when it does not exist.
#[allow(clippy::too_many_arguments)]
async fn server_side_apply(
    srv: &Arc<ApiServer>,
    scope: &dyn ResourceScope,
    ns: Option<&str>,
    name: &str,
    req: &PatchRequest<'_>,
    schema: &ApplySchema<'_>,
    writer: &kapi_fieldmanager::Writer,
    force: bool,
    dry: bool,
    mode: FieldValidation,
) -> Result<(Value, Vec<String>, StatusCode), ApiError> {
    let (spec, strategy) = (scope.spec(), scope.strategy());
    let mut config = decode_body(Some("application/yaml"), req.body)?;
    let expected_version = spec.api_version();
    let got_version = config.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
    if got_version != expected_version {
        return Err(ApiError::bad_request(format!(
            "Incorrect version specified in apply patch. Specified patch version: {got_version}, expected: {expected_version}"
        )));
    }
    let got_kind = config.get("kind").and_then(Value::as_str).unwrap_or_default();
    if got_kind != spec.kind {
        return Err(ApiError::bad_request(format!(
            "Incorrect kind specified in apply patch. Specified patch kind: {got_kind}, expected: {}",
            spec.kind
        )));
    }
    match config.pointer("/metadata/name").and_then(Value::as_str) {
        Some(n) if n == name => {}
        Some(n) => return Err(ApiError::bad_request(format!("the name of the object ({n}) does not match the name on the URL ({name})"))),
        None => {
            if let Some(m) = config.as_object_mut() {
                let meta = m.entry("metadata").or_insert_with(|| json!({}));
                if let Some(meta) = meta.as_object_mut() {
                    meta.insert("name".into(), Value::String(name.to_owned()));
                }
            }
        }
    }
    let warnings = scope.check_fields(mode, &mut config, Source::Patched(Patched::Apply))?;
    // A status write keeps only the request's status (the strategy starts over from the stored
    // object), but the managedFields the apply computed must survive it, as kube's status
    // strategies keep them: the last attempt's are put back once the strategy has run.
    let managed: Arc<Mutex<Option<Value>>> = Arc::default();
    let last = Arc::clone(&managed);
    let restore = move |_: Option<&Value>, new: &mut Value| {
        let Some(fields) = last.lock().ok().and_then(|m| m.clone()) else {
            return;
        };
        if let Some(meta) = new.get_mut("metadata").and_then(Value::as_object_mut) {
            match fields {
                Value::Null => meta.remove("managedFields"),
                fields => meta.insert("managedFields".into(), fields),
            };
        }
    };
    let track: Option<&kapi_registry::rest::Tracker> = (req.target == WriteTarget::Status).then_some(&restore);
    let result = srv
        .rest
        .update_with_async(strategy, ns, name, req.target, dry, WriteHooks { track, prepare: None, admission: Some(req.admission) }, |stored| {
            let stored = stored.clone();
            let (config, managed) = (&config, &managed);
            Box::pin(async move {
                let current = scope.convert_from_storage(stored).await?;
                let applied = schema.apply(Some(&current), config, writer, force)?;
                if let Ok(mut m) = managed.lock() {
                    *m = Some(applied.pointer("/metadata/managedFields").cloned().unwrap_or(Value::Null));
                }
                scope.convert_to_storage(applied).await
            })
        })
        .await;
    match result {
        Ok(obj) => Ok((obj, warnings, StatusCode::OK)),
        Err(e) if e.code == 404 && req.target == WriteTarget::Main => {
            let applied = schema.apply(None, &config, writer, force)?;
            let obj = scope.convert_to_storage(applied).await?;
            let created = srv.rest.create(strategy, ns, obj, dry, WriteHooks { track: None, prepare: req.prepare, admission: Some(req.admission) }).await?;
            Ok((created, warnings, StatusCode::CREATED))
        }
        Err(e) => Err(e),
    }
}
