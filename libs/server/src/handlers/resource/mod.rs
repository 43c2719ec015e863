//! Resource requests: decode, call the generic REST store, encode in the negotiated form.
//!
//! Routing is data-driven from the catalog: the verbs a resource lists in discovery are the
//! verbs served here; anything else is 405 MethodNotAllowed, an unknown resource 404.

use std::sync::Arc;

use bytes::Bytes;
use http::{Response, StatusCode};
use kapi_admission::Operation;
use kapi_apimachinery::status::success_status;
use kapi_apimachinery::{ApiError, GroupResource};
use kapi_registry::catalog::Serving;
use kapi_registry::rest::WriteHooks;
use kapi_registry::strategy::WriteTarget;
use serde_json::{json, Value};

use crate::decode::decode_object;
use crate::field_manager;
use crate::field_validation::{self, FieldValidation, Source};
use crate::admission::{self, requester, RequestAdmission, View};
use crate::handlers::{reviews, Caller};
use crate::negotiation::{content_essence, negotiate, Negotiable, Output, Shape};
use crate::query::Query;
use crate::request_info::RequestInfo;
use crate::response::{self, Body};
use crate::scope::ResourceScope;
use crate::state::ApiServer;
use crate::transform::{self, IncludeObject};

mod delete;
mod eviction;
mod list;
mod patch;
mod subresource;

use delete::{delete_options, delete_options_object};
pub use list::list_params;
use list::{list, list_meta, list_object, watch};
use patch::{patch, PatchRequest};
use subresource::subresource;

pub(super) type HandlerResult = Result<Response<Body>, ApiError>;

/// Serves one resource request whose body (if any) has been read already.
pub async fn handle(
    srv: &Arc<ApiServer>,
    info: &RequestInfo,
    query: &Query,
    accept: Option<&str>,
    content_type: Option<&str>,
    caller: &Caller<'_>,
    body: Bytes,
) -> Response<Body> {
    let what = if info.verb == "watch" { Negotiable::Watch } else { Negotiable::Resource };
    let scope = find_scope(srv, info).await;
    let protobuf = scope.as_ref().is_ok_and(|scope| scope.protobuf());
    let output = match negotiate(accept, what, protobuf) {
        Ok(o) => o,
        Err(e) => return response::error(&e, Output::JSON),
    };
    let result = match &scope {
        Ok(scope) => {
            let work = dispatch(srv, scope, info, query, output, content_type, caller, body);
            match handler_span(&info.verb) {
                Some(name) => kapi_otel::traced(name, || handler_attributes(info, caller), work).await,
                None => work.await,
            }
        }
        Err(e) => Err(e.clone()),
    };
    let resp = match result {
        Ok(resp) => resp,
        Err(e) => response::error(&e, output),
    };
    match &scope {
        Ok(scope) => with_warnings(resp, scope.warnings()),
        Err(_) => resp,
    }
}

/// kube's handler span for a verb (`Create`, `Get`, ...; lists and watches share kube's
/// `List` handler, collections' deletes its `Delete`).
fn handler_span(verb: &str) -> Option<&'static str> {
    Some(match verb {
        "get" => "Get",
        "list" | "watch" => "List",
        "create" => "Create",
        "update" => "Update",
        "patch" => "Patch",
        "delete" | "deletecollection" => "Delete",
        _ => return None,
    })
}

/// The attributes kube's handlers give their span (its `traceFields`).
fn handler_attributes(info: &RequestInfo, caller: &Caller<'_>) -> Vec<kapi_otel::KeyValue> {
    use kapi_otel::KeyValue;
    let head = caller.head;
    let header = |name: http::header::HeaderName| head.headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
    let client = head.extensions.get::<Arc<crate::filters::ConnInfo>>().and_then(|c| c.peer).map(|p| p.ip().to_string());
    let protocol = match head.version {
        http::Version::HTTP_2 => "HTTP/2.0",
        http::Version::HTTP_10 => "HTTP/1.0",
        _ => "HTTP/1.1",
    };
    vec![
        KeyValue::new("accept", header(http::header::ACCEPT)),
        KeyValue::new("client", client.unwrap_or_default()),
        KeyValue::new("protocol", protocol),
        KeyValue::new("resource", info.resource.clone()),
        KeyValue::new("scope", info.scope()),
        KeyValue::new("url", head.uri.path().to_owned()),
        KeyValue::new("user-agent", header(http::header::USER_AGENT)),
        KeyValue::new("verb", head.method.as_str().to_owned()),
    ]
}

/// The scope of the requested resource. A resource no tier knows may be one another replica
/// has just defined: the chain first catches up with the store's current revision, so that a
/// custom resource is never 404 here once its CRD is Established anywhere.
async fn find_scope(srv: &ApiServer, info: &RequestInfo) -> Result<Arc<dyn ResourceScope>, ApiError> {
    let lookup = || srv.chain.scope(&info.api_group, &info.api_version, &info.resource);
    let scope = match lookup() {
        Some(scope) => scope,
        None => {
            let current = srv.rest.store().current_revision().await.map_err(ApiError::internal)?;
            srv.chain.sync(current).await;
            lookup().ok_or_else(ApiError::path_not_found)?
        }
    };
    let spec = scope.spec();
    // A namespace in the path of a cluster-scoped resource names no route.
    if !spec.namespaced && !info.namespace.is_empty() && (spec.resource != "namespaces" || info.namespace != info.name) {
        return Err(ApiError::path_not_found());
    }
    Ok(scope)
}

pub(super) fn dry_run(query: &Query) -> Result<bool, ApiError> {
    match query.all("dryRun").as_slice() {
        [] => Ok(false),
        ["All"] => Ok(true),
        values => Err(ApiError::bad_request(format!("Invalid dryRun value: {values:?}: supported values: \"All\""))),
    }
}

/// The raw JSON of a body, for duplicate-field detection (YAML bodies are parsed first).
fn raw_json<'a>(content_type: Option<&str>, body: &'a [u8]) -> Option<&'a [u8]> {
    match content_essence(content_type).as_deref() {
        None | Some("application/json") => Some(body),
        _ => None,
    }
}

/// Decodes a create/update body and applies `fieldValidation`, collecting the warnings to send.
pub(super) fn decode_checked(
    scope: &dyn ResourceScope,
    query: &Query,
    content_type: Option<&str>,
    body: &[u8],
    warnings: &mut Vec<String>,
) -> Result<Value, ApiError> {
    let mode = FieldValidation::from_query(query)?;
    let mut obj = decode_object(content_type, body, scope.spec())?;
    warnings.extend(scope.check_fields(mode, &mut obj, Source::Body(raw_json(content_type, body)))?);
    Ok(obj)
}

/// Adds `Warning` headers, as kube-apiserver does for field validation in Warn mode.
pub(super) fn with_warnings(mut resp: Response<Body>, warnings: &[String]) -> Response<Body> {
    for text in warnings {
        if let Ok(v) = http::HeaderValue::from_str(&field_validation::warning_header(text)) {
            resp.headers_mut().append(http::header::WARNING, v);
        }
    }
    resp
}

#[allow(clippy::too_many_arguments)]
async fn dispatch(
    srv: &Arc<ApiServer>,
    shared: &Arc<dyn ResourceScope>,
    info: &RequestInfo,
    query: &Query,
    output: Output,
    content_type: Option<&str>,
    caller: &Caller<'_>,
    body: Bytes,
) -> HandlerResult {
    // Objects may live in another version's storage: the strategy (defaults, validation,
    // storage keys) is the storage version's; bodies and answers are converted.
    let scope = shared.as_ref();
    let spec = scope.spec();
    let strategy = scope.strategy();
    let gr = GroupResource::new(spec.group, spec.resource);
    let ns = (!info.namespace.is_empty() && spec.namespaced).then_some(info.namespace.as_str());
    if spec.namespaced && ns.is_none() && !matches!(info.verb.as_str(), "list" | "watch") {
        return Err(ApiError::path_not_found());
    }
    if !info.subresource.is_empty() {
        return subresource(srv, scope, info, ns, query, output, content_type, caller, body).await;
    }
    // Collection paths serve list, watch, create and deletecollection; object paths get,
    // update, patch and delete. Any other method on a path has no route in kube (405).
    let collection = info.name.is_empty();
    let routed = match info.verb.as_str() {
        "update" | "patch" | "get" | "delete" => !collection,
        "create" | "deletecollection" | "list" => collection,
        _ => true,
    };
    if !routed {
        return Err(ApiError::method_not_allowed());
    }
    if !spec.supports(&info.verb) {
        return Err(ApiError::method_not_supported(&gr, &info.verb));
    }
    scope.check_verb(&info.verb)?;
    if matches!(spec.serving, Serving::Virtual) {
        return reviews::create(srv, spec, info, output, content_type, caller, &body).await;
    }
    let name = info.name.as_str();
    let dry = dry_run(query)?;
    let admit = |operation, options| {
        let audit = caller.head.extensions.get::<crate::filters::audit::AuditHandle>().cloned();
        let request = admission::Request { info, user: caller.user, operation, options, dry_run: dry, audit };
        RequestAdmission::new(&srv.admission, scope, request, View::Object)
    };
    match info.verb.as_str() {
        "get" => {
            let obj = srv.rest.get(strategy, ns, name).await?;
            Ok(single(scope, &obj, output, query, StatusCode::OK).await?)
        }
        "list" => list(srv, scope, ns, query, output).await,
        "watch" => watch(srv, shared, ns, info, query, output).await,
        "create" => {
            let mut warnings = Vec::new();
            let obj = scope.convert_to_storage(decode_checked(scope, query, content_type, &body, &mut warnings)?).await?;
            let track = field_manager::for_request(scope, query, caller.user_agent, "")?;
            let admission = admit(Operation::Create, admission::options_object("CreateOptions", query));
            let prepare = requester::for_create(spec, caller.user);
            let hooks = WriteHooks { track: track.as_deref(), prepare: prepare.as_deref(), admission: Some(&admission) };
            let created = srv.rest.create(strategy, ns, obj, dry, hooks).await?;
            warnings.extend(admission.warnings());
            Ok(with_warnings(single(scope, &created, output, query, StatusCode::CREATED).await?, &warnings))
        }
        "update" => {
            let mut warnings = Vec::new();
            let obj = scope.convert_to_storage(decode_checked(scope, query, content_type, &body, &mut warnings)?).await?;
            let track = field_manager::for_request(scope, query, caller.user_agent, "")?;
            let admission = admit(Operation::Update, admission::options_object("UpdateOptions", query));
            let prepare = requester::for_create(spec, caller.user);
            let hooks = WriteHooks { track: track.as_deref(), prepare: prepare.as_deref(), admission: Some(&admission) };
            // kinds that allow create on update answer 201 when the PUT created the object
            let (updated, created) = srv.rest.update_or_create(strategy, ns, name, obj, WriteTarget::Main, dry, hooks).await?;
            let code = if created { StatusCode::CREATED } else { StatusCode::OK };
            warnings.extend(admission.warnings());
            Ok(with_warnings(single(scope, &updated, output, query, code).await?, &warnings))
        }
        "patch" => {
            let admission = admit(Operation::Update, admission::options_object("PatchOptions", query));
            let prepare = requester::for_create(spec, caller.user);
            let req = PatchRequest {
                content_type,
                body: &body,
                query,
                user_agent: caller.user_agent,
                target: WriteTarget::Main,
                prepare: prepare.as_deref(),
                admission: &admission,
            };
            let (patched, mut warnings, status) = patch(srv, scope, ns, name, &req).await?;
            warnings.extend(admission.warnings());
            Ok(with_warnings(single(scope, &patched, output, query, status).await?, &warnings))
        }
        "delete" => {
            let opts = delete_options(&srv.openapi, query, content_type, &body)?;
            let admission = admit(Operation::Delete, delete_options_object(&opts));
            let outcome = srv.rest.delete_admitted(strategy, ns, name, &opts, Some(&admission)).await?;
            // A pending delete answers the object; a completed one the object or a Status, as
            // the kind's store says (kube's ReturnDeletedObject).
            let returns_object = !outcome.deleted || strategy.returns_deleted_object();
            let resp = if returns_object {
                single(scope, &outcome.object, output, query, StatusCode::OK).await?
            } else {
                let uid = outcome.object.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or_default();
                response::object(StatusCode::OK, &success_status(Some((&gr, name, uid))), output.plain())
            };
            Ok(with_warnings(resp, &admission.warnings()))
        }
        "deletecollection" => {
            let params = list_params(spec, query)?;
            let opts = delete_options(&srv.openapi, query, content_type, &body)?;
            // kube admits each object with the collection's attributes (no name).
            let admission = admit(Operation::Delete, delete_options_object(&opts));
            let (deleted, rev) = srv.rest.delete_collection(strategy, ns, &params, &opts, Some(&admission)).await?;
            let deleted = scope.convert_list_from_storage(deleted).await?;
            let list = list_object(spec, scope.typed_lists(), deleted.iter(), list_meta(rev, None, None));
            Ok(with_warnings(response::object(StatusCode::OK, &list, output.plain()), &admission.warnings()))
        }
        _ => Err(ApiError::method_not_supported(&gr, &info.verb)),
    }
}

/// Answers with one stored object, in the request's version and shape. Tables are computed from
/// the stored version, as kube prints from its internal version.
pub(super) async fn single(
    scope: &dyn ResourceScope,
    obj: &Value,
    output: Output,
    query: &Query,
    code: StatusCode,
) -> Result<Response<Body>, ApiError> {
    let value = match output.shape {
        Shape::Table => {
            let include = IncludeObject::parse(query.get("includeObject")).map_err(ApiError::bad_request)?;
            let meta = json!({"resourceVersion": obj.pointer("/metadata/resourceVersion").cloned().unwrap_or(Value::Null)});
            scope.table(&mut std::iter::once(obj), meta, include, true)
        }
        Shape::PartialMetadata => transform::partial_metadata(obj),
        Shape::Object | Shape::DiscoveryV2 => scope.convert_from_storage(obj.clone()).await?,
    };
    Ok(response::object(code, &value, output))
}
