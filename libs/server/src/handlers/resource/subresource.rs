//! Subresources: status, scale, token, binding, eviction, namespace finalize, and the pod connect subresources.

use std::sync::Arc;

use bytes::Bytes;
use http::StatusCode;
use kapi_admission::Operation;
use kapi_apimachinery::status::success_status;
use kapi_apimachinery::{ApiError, GroupResource};
use kapi_openapi::patch_schema;
use kapi_registry::rest::WriteHooks;
use kapi_registry::strategy::{Strategy, WriteTarget};
use serde_json::{json, Value};

use super::patch::{apply_patch, patch_kind, PatchKind, PatchRequest, UNTYPED_PATCH_TYPES};
use super::{decode_checked, dry_run, eviction, patch, single, with_warnings, HandlerResult};
use crate::admission::{self, RequestAdmission, View};
use crate::decode::{decode_subresource, BodyType};
use crate::field_manager;
use crate::handlers::{pod_connect, Caller};
use crate::negotiation::{decode_body, Output};
use crate::query::Query;
use crate::request_info::RequestInfo;
use crate::response;
use crate::scope::ResourceScope;
use crate::state::ApiServer;

#[allow(clippy::too_many_arguments)]
pub(super) async fn subresource(
    srv: &Arc<ApiServer>,
    scope: &dyn ResourceScope,
    info: &RequestInfo,
    ns: Option<&str>,
    query: &Query,
    output: Output,
    content_type: Option<&str>,
    caller: &Caller<'_>,
    body: Bytes,
) -> HandlerResult {
    let (spec, strategy) = (scope.spec(), scope.strategy());
    let sub = info.subresource.as_str();
    let gr = GroupResource::new(spec.group, format!("{}/{}", spec.resource, sub));
    let Some(sub_spec) = spec.subresources.iter().find(|s| s.name == sub) else {
        return Err(ApiError::path_not_found());
    };
    if !sub_spec.verbs.contains(&info.verb.as_str()) {
        return Err(ApiError::method_not_supported(&gr, &info.verb));
    }
    if pod_connect::serves(spec, sub) {
        return pod_connect::serve(srv, strategy, info, ns, query, caller).await;
    }
    let name = info.name.as_str();
    let dry = dry_run(query)?;
    let admit = |operation, options, view| {
        let audit = caller.head.extensions.get::<crate::filters::audit::AuditHandle>().cloned();
        let request = admission::Request { info, user: caller.user, operation, options, dry_run: dry, audit };
        RequestAdmission::new(&srv.admission, scope, request, view)
    };
    match (sub, info.verb.as_str()) {
        ("status" | "approval", "get") => {
            let obj = srv.rest.get(strategy, ns, name).await?;
            single(scope, &obj, output, query, StatusCode::OK).await
        }
        ("approval", "update" | "patch") if (spec.group, spec.resource) == ("certificates.k8s.io", "certificatesigningrequests") => {
            let kind = if info.verb == "update" { "UpdateOptions" } else { "PatchOptions" };
            let admission = admit(Operation::Update, admission::options_object(kind, query), View::Object);
            let track = field_manager::for_request(scope, query, caller.user_agent, "approval")?;
            let hooks = WriteHooks { admission: Some(&admission), ..WriteHooks::tracking(track.as_deref()) };
            let (mut warnings, body_obj, patch) = if info.verb == "update" {
                let mut warnings = Vec::new();
                let obj = decode_checked(scope, query, content_type, &body, &mut warnings)?;
                (warnings, Some(obj), None)
            } else {
                (Vec::new(), None, Some(patch_kind(content_type, patch_schema("certificates.k8s.io", "v1", "CertificateSigningRequest"), None)?))
            };
            let updated = srv
                .rest
                .update_with(strategy, ns, name, WriteTarget::Status, dry, hooks, |stored| {
                    let requested = match (&body_obj, &patch) {
                        (Some(obj), _) => obj.clone(),
                        (None, Some(kind)) => apply_patch(kind, &body, stored)?,
                        (None, None) => stored.clone(),
                    };
                    Ok(approval_update(stored, &requested))
                })
                .await?;
            warnings.extend(admission.warnings());
            Ok(with_warnings(single(scope, &updated, output, query, StatusCode::OK).await?, &warnings))
        }
        ("status", "update") => {
            let mut warnings = Vec::new();
            let obj = scope.convert_to_storage(decode_checked(scope, query, content_type, &body, &mut warnings)?).await?;
            let track = field_manager::for_request(scope, query, caller.user_agent, "status")?;
            let admission = admit(Operation::Update, admission::options_object("UpdateOptions", query), View::Object);
            let hooks = WriteHooks { admission: Some(&admission), ..WriteHooks::tracking(track.as_deref()) };
            let updated = srv.rest.update(strategy, ns, name, obj, WriteTarget::Status, dry, hooks).await?;
            warnings.extend(admission.warnings());
            Ok(with_warnings(single(scope, &updated, output, query, StatusCode::OK).await?, &warnings))
        }
        ("status", "patch") => {
            let admission = admit(Operation::Update, admission::options_object("PatchOptions", query), View::Object);
            let req = PatchRequest {
                content_type,
                body: &body,
                query,
                user_agent: caller.user_agent,
                target: WriteTarget::Status,
                prepare: None,
                admission: &admission,
            };
            let (patched, mut warnings, status) = patch(srv, scope, ns, name, &req).await?;
            warnings.extend(admission.warnings());
            Ok(with_warnings(single(scope, &patched, output, query, status).await?, &warnings))
        }
        ("scale", "get") => {
            let obj = srv.rest.get(strategy, ns, name).await?;
            Ok(response::object(StatusCode::OK, &scope.scale_of(&obj), output.plain()))
        }
        ("scale", "update") => {
            let scale = decode_subresource(&srv.openapi, content_type, &body, BodyType { group: "autoscaling", version: "v1", kind: "Scale" })?;
            if scale.pointer("/metadata/name").and_then(Value::as_str).is_some_and(|n| n != name) {
                return Err(ApiError::bad_request("the name of the object does not match the name on the URL"));
            }
            let scale_track = field_manager::for_request(scope, query, caller.user_agent, "scale")?;
            let admission = admit(Operation::Update, admission::options_object("UpdateOptions", query), View::Scale);
            let hooks = WriteHooks { admission: Some(&admission), ..WriteHooks::tracking(scale_track.as_deref()) };
            let updated =
                srv.rest.update_with(strategy, ns, name, WriteTarget::Main, dry, hooks, |parent| scope.apply_scale(parent, &scale)).await?;
            Ok(with_warnings(response::object(StatusCode::OK, &scope.scale_of(&updated), output.plain()), &admission.warnings()))
        }
        ("scale", "patch") => {
            let patch = patch_kind(content_type, patch_schema("autoscaling", "v1", "Scale"), None)?;
            let (PatchKind::Json | PatchKind::Merge | PatchKind::Strategic(_)) = patch else {
                return Err(ApiError::unsupported_media_type(UNTYPED_PATCH_TYPES));
            };
            let scale_track = field_manager::for_request(scope, query, caller.user_agent, "scale")?;
            let admission = admit(Operation::Update, admission::options_object("PatchOptions", query), View::Scale);
            let hooks = WriteHooks { admission: Some(&admission), ..WriteHooks::tracking(scale_track.as_deref()) };
            let updated = srv
                .rest
                .update_with(strategy, ns, name, WriteTarget::Main, dry, hooks, |parent| {
                    let scale = scope.scale_of(parent);
                    let patched = apply_patch(&patch, &body, &scale)?;
                    scope.apply_scale(parent, &patched)
                })
                .await?;
            Ok(with_warnings(response::object(StatusCode::OK, &scope.scale_of(&updated), output.plain()), &admission.warnings()))
        }
        ("finalize", "update") if spec.group.is_empty() && spec.resource == "namespaces" => {
            let mut warnings = Vec::new();
            let requested = decode_checked(scope, query, content_type, &body, &mut warnings)?;
            let track = field_manager::for_request(scope, query, caller.user_agent, "finalize")?;
            let admission = admit(Operation::Update, admission::options_object("UpdateOptions", query), View::Object);
            let hooks = WriteHooks { admission: Some(&admission), ..WriteHooks::tracking(track.as_deref()) };
            let updated = srv
                .rest
                .update_with(strategy, ns, name, WriteTarget::Subresource, dry, hooks, |stored| finalize_update(strategy, name, stored, &requested))
                .await?;
            warnings.extend(admission.warnings());
            Ok(with_warnings(single(scope, &updated, output, query, StatusCode::OK).await?, &warnings))
        }
        ("token", "create") if spec.group.is_empty() && spec.resource == "serviceaccounts" => {
            let mut request = decode_body(content_type, &body)?;
            let view = View::Body("authentication.k8s.io", "v1", "TokenRequest");
            let admission = admit(Operation::Create, admission::options_object("CreateOptions", query), view);
            admission.admit_object(&mut request).await?;
            let answer = srv.service_accounts.token_request(&srv.rest, ns.unwrap_or_default(), name, request).await?;
            Ok(with_warnings(response::object(StatusCode::CREATED, &answer, output), &admission.warnings()))
        }
        ("binding", "create") if spec.group.is_empty() && spec.resource == "pods" => {
            let mut binding =
                decode_subresource(&srv.openapi, content_type, &body, BodyType { group: "", version: "v1", kind: "Binding" })?;
            let admission = admit(Operation::Create, admission::options_object("CreateOptions", query), View::Body("", "v1", "Binding"));
            admission.admit_object(&mut binding).await?;
            bind_pod(srv, strategy, ns, name, &binding, dry).await?;
            Ok(with_warnings(response::object(StatusCode::CREATED, &success_status(None), output.plain()), &admission.warnings()))
        }
        ("eviction", "create") if spec.group.is_empty() && spec.resource == "pods" => {
            let target = match decode_body(content_type, &body)?.get("apiVersion").and_then(Value::as_str) {
                Some("policy/v1beta1") => BodyType { group: "policy", version: "v1beta1", kind: "Eviction" },
                _ => BodyType { group: "policy", version: "v1", kind: "Eviction" },
            };
            let mut eviction = decode_subresource(&srv.openapi, content_type, &body, target)?;
            if eviction.pointer("/metadata/name").and_then(Value::as_str) != Some(name) {
                return Err(ApiError::bad_request("name in URL does not match name in Eviction object"));
            }
            let opts = eviction::delete_options(&eviction, dry)?;
            let view = View::Body("policy", target.version, "Eviction");
            let admission = admit(Operation::Create, admission::options_object("CreateOptions", query), view);
            admission.admit_object(&mut eviction).await?;
            let answer = match eviction::evict(srv, strategy, ns.unwrap_or_default(), name, opts).await? {
                eviction::Evicted::Done => response::object(StatusCode::CREATED, &success_status(None), output.plain()),
                eviction::Evicted::TooManyBudgets => {
                    let status = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                        "message": "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.", "code": 500});
                    response::object(StatusCode::INTERNAL_SERVER_ERROR, &status, output.plain())
                }
            };
            Ok(with_warnings(answer, &admission.warnings()))
        }
        _ => Err(ApiError::method_not_supported(&gr, &info.verb)),
    }
}

/// kube's CSR approval strategy: only `status.conditions` change, taken from the request; a new
/// condition gets its timestamps; a resourceVersion the request names is a precondition.
fn approval_update(stored: &Value, requested: &Value) -> Value {
    let mut new = stored.clone();
    let now = kapi_apimachinery::time::now_rfc3339();
    let old_conditions = stored.pointer("/status/conditions").and_then(Value::as_array).cloned().unwrap_or_default();
    let mut conditions = requested.pointer("/status/conditions").and_then(Value::as_array).cloned().unwrap_or_default();
    for condition in conditions.iter_mut() {
        let known = old_conditions.iter().find(|c| c.get("type") == condition.get("type") && c.get("status") == condition.get("status"));
        for field in ["lastUpdateTime", "lastTransitionTime"] {
            if condition.get(field).is_none_or(Value::is_null) {
                condition[field] = known.and_then(|k| k.get(field)).cloned().unwrap_or_else(|| Value::String(now.clone()));
            }
        }
    }
    let status = new.as_object_mut().map(|m| m.entry("status").or_insert_with(|| json!({})));
    if let Some(status) = status.and_then(Value::as_object_mut) {
        if conditions.is_empty() {
            status.remove("conditions");
        } else {
            status.insert("conditions".into(), Value::Array(conditions));
        }
    }
    match requested.pointer("/metadata/resourceVersion") {
        Some(rv) => new["metadata"]["resourceVersion"] = rv.clone(),
        None => {
            if let Some(m) = new.get_mut("metadata").and_then(Value::as_object_mut) {
                m.remove("resourceVersion");
            }
        }
    }
    new
}

/// kube's namespace finalize strategy: the request's namespace with the stored status (the
/// store keeps the system metadata), validated as an update; a resourceVersion the request
/// names is a precondition.
fn finalize_update(strategy: &dyn Strategy, name: &str, stored: &Value, requested: &Value) -> Result<Value, ApiError> {
    let mut new = requested.clone();
    match stored.get("status") {
        Some(status) => new["status"] = status.clone(),
        None => {
            if let Some(m) = new.as_object_mut() {
                m.remove("status");
            }
        }
    }
    // The request is decoded with defaults, as kube decodes it (the metadata.name label).
    strategy.apply_defaults(&mut new);
    let causes = strategy.validate_update(&new, stored);
    if !causes.is_empty() {
        return Err(ApiError::invalid("", "Namespace", name, causes));
    }
    Ok(new)
}

/// `pods/<name>/binding`: sets `spec.nodeName` once, as the scheduler does through kube-apiserver.
async fn bind_pod(
    srv: &Arc<ApiServer>,
    strategy: &dyn Strategy,
    ns: Option<&str>,
    name: &str,
    binding: &Value,
    dry_run: bool,
) -> Result<(), ApiError> {
    let node = binding.pointer("/target/name").and_then(Value::as_str).unwrap_or_default().to_owned();
    if node.is_empty() {
        return Err(ApiError::invalid("", "Binding", name, vec![kapi_apimachinery::Cause::required("target.name", "")]));
    }
    let gr = GroupResource::new("", "pods/binding");
    srv.rest
        .update_with(strategy, ns, name, WriteTarget::Subresource, dry_run, WriteHooks::default(), |pod| {
            if pod.pointer("/metadata/deletionTimestamp").is_some() {
                return Err(ApiError::conflict(&gr, name, &format!("pod {name} is being deleted, cannot be assigned to a host")));
            }
            if let Some(existing) = pod.pointer("/spec/nodeName").and_then(Value::as_str).filter(|n| !n.is_empty()) {
                return Err(ApiError::conflict(&gr, name, &format!("pod {name} is already assigned to node \"{existing}\"")));
            }
            let mut new = pod.clone();
            new["spec"]["nodeName"] = Value::String(node.clone());
            // As kube's binding: the binding's annotations land on the pod, and the pod is
            // marked scheduled.
            if let Some(annotations) = binding.pointer("/metadata/annotations").and_then(Value::as_object) {
                let meta = new.get_mut("metadata").and_then(Value::as_object_mut);
                if let Some(meta) = meta {
                    let target = meta.entry("annotations").or_insert_with(|| json!({}));
                    if let Some(target) = target.as_object_mut() {
                        target.extend(annotations.iter().map(|(k, v)| (k.clone(), v.clone())));
                    }
                }
            }
            let conditions = new.get_mut("status").and_then(Value::as_object_mut).map(|s| s.entry("conditions").or_insert_with(|| json!([])));
            if let Some(Value::Array(conditions)) = conditions {
                conditions.retain(|c| c.get("type").and_then(Value::as_str) != Some("PodScheduled"));
                conditions.push(json!({"type": "PodScheduled", "status": "True", "lastProbeTime": null,
                    "lastTransitionTime": kapi_apimachinery::time::now_rfc3339()}));
            }
            if let Some(m) = new.get_mut("metadata").and_then(Value::as_object_mut) {
                m.remove("resourceVersion");
            }
            Ok(new)
        })
        .await?;
    Ok(())
}
