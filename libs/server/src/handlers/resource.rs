//! Resource requests: decode, call the generic REST store, encode in the negotiated form.
//!
//! Routing is data-driven from the catalog: the verbs a resource lists in discovery are the
//! verbs served here; anything else is 405 MethodNotAllowed, an unknown resource 404.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{Response, StatusCode};
use kapi_apimachinery::fields::FieldSelector;
use kapi_apimachinery::labels::LabelSelector;
use kapi_apimachinery::patch::{apply_json_patch, apply_merge_patch};
use kapi_apimachinery::strategic_merge::apply_strategic_merge_patch;
use kapi_fieldmanager::ApplySchema;
use kapi_openapi::{patch_schema, SchemaNode};
use kapi_apimachinery::resource_version;
use kapi_apimachinery::status::success_status;
use kapi_apimachinery::{ApiError, GroupResource};
use kapi_registry::catalog::{ResourceSpec, Serving};
use kapi_registry::rest::{Admit, DeleteOptions, ListParams, WriteHooks};
use kapi_registry::strategy::{Strategy, WriteTarget};
use serde_json::{json, Map, Value};

use crate::field_validation::{self, FieldValidation, Patched, Source};
use crate::scope::ResourceScope;
use crate::negotiation::{content_essence, decode_body, negotiate, Encoding, Negotiable, Output, Shape};
use crate::decode::{decode_object, decode_subresource, BodyType};
use crate::field_manager;
use crate::handlers::{admission, pod_connect, reviews, Caller};
use crate::query::Query;
use crate::request_info::RequestInfo;
use crate::response::{self, Body};
use crate::state::ApiServer;
use crate::transform::{self, IncludeObject};
use crate::watch_stream;

/// How long a watch lasts when nothing bounds it (a year: effectively until the client or
/// termination ends it).
const WATCH_WITHOUT_TIMEOUT: Duration = Duration::from_secs(365 * 24 * 3600);

type HandlerResult = Result<Response<Body>, ApiError>;

/// Patch media types served for kinds with a typed schema.
const PATCH_TYPES: &[&str] = &[
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
    "application/apply-patch+yaml",
];
/// Patch media types for kinds without a typed schema: kube does not strategic-merge those.
const UNTYPED_PATCH_TYPES: &[&str] = &["application/json-patch+json", "application/merge-patch+json"];
/// Patch media types for custom resources: no Go types to strategic-merge, but a schema to apply.
const APPLY_ONLY_PATCH_TYPES: &[&str] =
    &["application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml"];

/// Checks the patch media type before anything is read, as kube's patch handler does, and picks
/// the schema the patch needs (strategic merge and apply only exist for typed kinds).
fn patch_kind<'a>(
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
enum PatchKind<'a> {
    Json,
    Merge,
    Strategic(SchemaNode),
    Apply(ApplySchema<'a>),
}

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
        Ok(scope) => dispatch(srv, scope, info, query, output, content_type, caller, body).await,
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

fn dry_run(query: &Query) -> Result<bool, ApiError> {
    match query.all("dryRun").as_slice() {
        [] => Ok(false),
        ["All"] => Ok(true),
        values => Err(ApiError::bad_request(format!(
            "Invalid dryRun value: {values:?}: supported values: \"All\""
        ))),
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
fn decode_checked(
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
fn with_warnings(mut resp: Response<Body>, warnings: &[String]) -> Response<Body> {
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
        return reviews::create(srv, spec, info, output, content_type, caller, &body);
    }
    let name = info.name.as_str();
    let admit = admission::for_request(srv, spec, caller.user);
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
            let hooks = WriteHooks { track: track.as_deref(), admit: admit.as_deref() };
            let created = srv.rest.create(strategy, ns, obj, dry_run(query)?, hooks).await?;
            Ok(with_warnings(single(scope, &created, output, query, StatusCode::CREATED).await?, &warnings))
        }
        "update" => {
            let mut warnings = Vec::new();
            let obj = scope.convert_to_storage(decode_checked(scope, query, content_type, &body, &mut warnings)?).await?;
            let track = field_manager::for_request(scope, query, caller.user_agent, "")?;
            let hooks = WriteHooks { track: track.as_deref(), admit: admit.as_deref() };
            // kinds that allow create on update answer 201 when the PUT created the object
            let (updated, created) = srv.rest.update_or_create(strategy, ns, name, obj, WriteTarget::Main, dry_run(query)?, hooks).await?;
            let code = if created { StatusCode::CREATED } else { StatusCode::OK };
            Ok(with_warnings(single(scope, &updated, output, query, code).await?, &warnings))
        }
        "patch" => {
            let req =
                PatchRequest { content_type, body: &body, query, user_agent: caller.user_agent, target: WriteTarget::Main, admit: admit.as_deref() };
            let (patched, warnings, status) = patch(srv, scope, ns, name, &req).await?;
            Ok(with_warnings(single(scope, &patched, output, query, status).await?, &warnings))
        }
        "delete" => {
            let opts = delete_options(&srv.openapi, query, content_type, &body)?;
            let outcome = srv.rest.delete(strategy, ns, name, &opts).await?;
            // A pending delete answers the object; a completed one the object or a Status, as
            // the kind's store says (kube's ReturnDeletedObject).
            let returns_object = !outcome.deleted || strategy.returns_deleted_object();
            if returns_object {
                Ok(single(scope, &outcome.object, output, query, StatusCode::OK).await?)
            } else {
                let uid = outcome.object.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or_default();
                Ok(response::object(StatusCode::OK, &success_status(Some((&gr, name, uid))), output.plain()))
            }
        }
        "deletecollection" => {
            let params = list_params(spec, query)?;
            let opts = delete_options(&srv.openapi, query, content_type, &body)?;
            let (deleted, rev) = srv.rest.delete_collection(strategy, ns, &params, &opts).await?;
            let deleted = scope.convert_list_from_storage(deleted).await?;
            let list = list_object(spec, scope.typed_lists(), deleted.iter(), list_meta(rev, None, None));
            Ok(response::object(StatusCode::OK, &list, output.plain()))
        }
        _ => Err(ApiError::method_not_supported(&gr, &info.verb)),
    }
}

/// Answers with one stored object, in the request's version and shape. Tables are computed from
/// the stored version, as kube prints from its internal version.
async fn single(scope: &dyn ResourceScope, obj: &Value, output: Output, query: &Query, code: StatusCode) -> Result<Response<Body>, ApiError> {
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

fn list_meta(rev: u64, continue_token: Option<String>, remaining: Option<u64>) -> Value {
    let mut m = Map::new();
    m.insert("resourceVersion".into(), Value::String(rev.to_string()));
    if let Some(c) = continue_token {
        m.insert("continue".into(), Value::String(c));
        if let Some(r) = remaining.filter(|r| *r > 0) {
            m.insert("remainingItemCount".into(), Value::from(r));
        }
    }
    Value::Object(m)
}

/// A list (`PodList`): items of built-in kinds carry no kind/apiVersion, as kube-apiserver's
/// typed lists encode them; custom resources' (unstructured) items keep theirs.
fn list_object<'a>(spec: &ResourceSpec, typed: bool, items: impl Iterator<Item = &'a Value>, meta: Value) -> Value {
    let items: Vec<Value> = items
        .map(|o| {
            let mut o = o.clone();
            if let Some(m) = o.as_object_mut().filter(|_| typed) {
                m.remove("kind");
                m.remove("apiVersion");
            }
            o
        })
        .collect();
    json!({"kind": format!("{}List", spec.kind), "apiVersion": spec.api_version(), "metadata": meta, "items": items})
}

/// A list serialized from borrowed items, without cloning them: kube's list encoding.
#[derive(serde::Serialize)]
struct ListRef<'a> {
    kind: String,
    #[serde(rename = "apiVersion")]
    api_version: String,
    metadata: &'a Value,
    items: ItemsRef<'a>,
}

/// The items of a [`ListRef`]; `typed` drops each item's `kind` and `apiVersion`.
struct ItemsRef<'a> {
    items: &'a [Arc<Value>],
    typed: bool,
}

impl serde::Serialize for ItemsRef<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.items.iter().map(|item| ItemRef(item, self.typed)))
    }
}

/// One list item, in stored order; without `kind` and `apiVersion` when typed.
struct ItemRef<'a>(&'a Value, bool);

impl serde::Serialize for ItemRef<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        match self.0.as_object() {
            Some(fields) if self.1 => {
                let mut map = serializer.serialize_map(None)?;
                for (k, v) in fields.iter().filter(|(k, _)| k.as_str() != "kind" && k.as_str() != "apiVersion") {
                    map.serialize_entry(k, v)?;
                }
                map.end()
            }
            _ => self.0.serialize(serializer),
        }
    }
}

/// Parses list/watch query parameters with kube-apiserver's validation.
pub fn list_params(spec: &ResourceSpec, query: &Query) -> Result<ListParams, ApiError> {
    let labels = match query.get("labelSelector").filter(|s| !s.is_empty()) {
        Some(s) => Some(LabelSelector::parse(s)?),
        None => None,
    };
    let fields = match query.get("fieldSelector").filter(|s| !s.is_empty()) {
        Some(s) => {
            let sel = FieldSelector::parse(s)?;
            let mut supported: Vec<&str> = vec!["metadata.name"];
            if spec.namespaced {
                supported.push("metadata.namespace");
            }
            supported.extend_from_slice(spec.field_selectors);
            sel.check_supported(&supported)?;
            Some(sel)
        }
        None => None,
    };
    let watch = query.bool("watch")?.unwrap_or(false);
    let send_initial_events = query.bool("sendInitialEvents")?;
    resource_version::validate_list_options_with_continue(
        query.get("resourceVersion"),
        query.get("resourceVersionMatch"),
        send_initial_events,
        watch,
        query.get("continue"),
    )?;
    resource_version::validate_continue_rv(query.get("resourceVersion"), query.get("continue"))?;
    let rv = resource_version::parse(query.get("resourceVersion").unwrap_or(""))?;
    let rv_match = resource_version::parse_match(query.get("resourceVersionMatch").unwrap_or(""))?;
    let limit = query.u64("limit")?.map(|l| l as usize);
    Ok(ListParams {
        labels,
        fields,
        limit,
        continue_token: query.get("continue").filter(|c| !c.is_empty()).map(str::to_owned),
        resource_version: rv,
        resource_version_match: rv_match,
        send_initial_events: send_initial_events.unwrap_or(false),
    })
}

async fn list(srv: &Arc<ApiServer>, scope: &dyn ResourceScope, ns: Option<&str>, query: &Query, output: Output) -> HandlerResult {
    let spec = scope.spec();
    let strategy = scope.strategy();
    let params = list_params(spec, query)?;
    let mut page = srv.rest.list(strategy, ns, &params).await?;
    if !scope.converts() {
        for item in page.items.iter_mut() {
            if let Some(defaulted) = scope.read_defaults(item) {
                *item = Arc::new(defaulted);
            }
        }
    }
    let meta = list_meta(page.resource_version, page.continue_token, page.remaining);
    let value = match output.shape {
        Shape::Table => {
            let include = IncludeObject::parse(query.get("includeObject")).map_err(ApiError::bad_request)?;
            scope.table(&mut page.items.iter().map(|a| a.as_ref()), meta, include, true)
        }
        Shape::PartialMetadata => transform::partial_metadata_list(page.items.iter().map(|a| a.as_ref()), meta),
        Shape::Object | Shape::DiscoveryV2 if scope.converts() => {
            let items = scope.convert_list_from_storage(page.items.iter().map(|o| o.as_ref().clone()).collect()).await?;
            list_object(spec, scope.typed_lists(), items.iter(), meta)
        }
        Shape::Object | Shape::DiscoveryV2 if output.encoding == Encoding::Json => {
            // The common case (informers, kubectl -o json): serialize straight from the cached
            // objects instead of building a copy of the whole list first.
            // A big list takes long to encode: off the async workers, so that watches and other
            // requests keep being served meanwhile (a burst of big lists would stall them).
            let items = page.items;
            let typed = scope.typed_lists();
            let bytes = tokio::task::spawn_blocking(move || {
                let list = ListRef {
                    kind: format!("{}List", spec.kind),
                    api_version: spec.api_version(),
                    metadata: &meta,
                    items: ItemsRef { items: &items, typed },
                };
                serde_json::to_vec(&list).map(|mut bytes| {
                    bytes.push(b'\n');
                    bytes
                })
            })
            .await
            .map_err(|e| ApiError::internal(format!("encoding the list: {e}")))?
            .map_err(|e| ApiError::internal(format!("encoding the list: {e}")))?;
            return Ok(response::json(StatusCode::OK, bytes));
        }
        Shape::Object | Shape::DiscoveryV2 => list_object(spec, scope.typed_lists(), page.items.iter().map(|a| a.as_ref()), meta),
    };
    Ok(response::object(StatusCode::OK, &value, output))
}

async fn watch(
    srv: &Arc<ApiServer>,
    scope: &Arc<dyn ResourceScope>,
    ns: Option<&str>,
    info: &RequestInfo,
    query: &Query,
    output: Output,
) -> HandlerResult {
    let mut params = list_params(scope.spec(), query)?;
    // `GET .../pods/<name>?watch=1` and `/watch/.../pods/<name>` watch one object.
    if !info.name.is_empty() {
        let by_name = FieldSelector::parse(&format!("metadata.name={}", info.name))?;
        params.fields = Some(by_name);
    }
    // kube: the client's timeoutSeconds; when absent or 0, a random time in
    // [min, 2*min) of --min-request-timeout, so watches do not all end (and relist) together;
    // with --min-request-timeout=0, no server-side end at all.
    let timeout = match query.u64("timeoutSeconds")?.filter(|s| *s > 0) {
        Some(s) => Duration::from_secs(s),
        None if srv.options.min_request_timeout.is_zero() => WATCH_WITHOUT_TIMEOUT,
        None => srv.options.min_request_timeout.mul_f64(1.0 + rand::random::<f64>()),
    };
    let allow_bookmarks = query.bool("allowWatchBookmarks")?.unwrap_or(false);
    let watcher = match srv.rest.watch(scope.strategy(), ns, &params).await {
        Ok(watcher) => watcher,
        Err(e) if e.code == 410 => return Ok(watch_stream::respond_error(&e, output)),
        Err(e) => return Err(e),
    };
    Ok(watch_stream::respond(
        srv,
        scope.clone(),
        watcher,
        watch_stream::WatchOptions {
            output,
            timeout,
            allow_bookmarks,
            send_initial_events: params.send_initial_events,
            include: IncludeObject::parse(query.get("includeObject")).map_err(ApiError::bad_request)?,
        },
    ))
}

fn delete_options(openapi: &kapi_openapi::OpenApi, query: &Query, content_type: Option<&str>, body: &[u8]) -> Result<DeleteOptions, ApiError> {
    let mut opts = DeleteOptions { dry_run: dry_run(query)?, ..Default::default() };
    let from_body = crate::decode::decode_delete_options(openapi, content_type, body)?.unwrap_or(Value::Null);
    opts.grace_period_seconds = match query.i64("gracePeriodSeconds")? {
        Some(g) => Some(g),
        None => from_body.get("gracePeriodSeconds").and_then(Value::as_i64),
    };
    let policy = query
        .get("propagationPolicy")
        .map(str::to_owned)
        .or_else(|| from_body.get("propagationPolicy").and_then(Value::as_str).map(str::to_owned));
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

/// Applies a JSON or merge patch to `current`, with kube's rule that the patched object may not
/// rename itself; a resourceVersion the patch sets is a precondition.
fn apply_patch(kind: &PatchKind<'_>, body: &[u8], current: &Value) -> Result<Value, ApiError> {
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
struct PatchRequest<'a> {
    content_type: Option<&'a str>,
    body: &'a [u8],
    query: &'a Query,
    user_agent: Option<&'a str>,
    target: WriteTarget,
    admit: Option<&'a Admit>,
}

/// PATCH of the main resource or its status: JSON, merge, strategic merge patch or server-side
/// apply. Returns the stored object, the field validation warnings and the status code (201
/// when an apply created the object).
async fn patch(
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
        .update_with_async(strategy, ns, name, req.target, dry, WriteHooks { track: track.as_deref(), admit: req.admit }, |stored| {
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
        Some(n) => {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({n}) does not match the name on the URL ({name})"
            )))
        }
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
        let Some(fields) = last.lock().ok().and_then(|m| m.clone()) else { return };
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
        .update_with_async(strategy, ns, name, req.target, dry, WriteHooks { track, admit: req.admit }, |stored| {
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
            let created = srv.rest.create(strategy, ns, obj, dry, WriteHooks { track: None, admit: req.admit }).await?;
            Ok((created, warnings, StatusCode::CREATED))
        }
        Err(e) => Err(e),
    }
}

#[allow(clippy::too_many_arguments)]
async fn subresource(
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
    match (sub, info.verb.as_str()) {
        ("status", "get") => {
            let obj = srv.rest.get(strategy, ns, name).await?;
            single(scope, &obj, output, query, StatusCode::OK).await
        }
        ("status", "update") => {
            let mut warnings = Vec::new();
            let obj = scope.convert_to_storage(decode_checked(scope, query, content_type, &body, &mut warnings)?).await?;
            let track = field_manager::for_request(scope, query, caller.user_agent, "status")?;
            let updated = srv.rest.update(strategy, ns, name, obj, WriteTarget::Status, dry, WriteHooks::tracking(track.as_deref())).await?;
            Ok(with_warnings(single(scope, &updated, output, query, StatusCode::OK).await?, &warnings))
        }
        ("status", "patch") => {
            let req = PatchRequest { content_type, body: &body, query, user_agent: caller.user_agent, target: WriteTarget::Status, admit: None };
            let (patched, warnings, status) = patch(srv, scope, ns, name, &req).await?;
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
            let updated = srv
                .rest
                .update_with(strategy, ns, name, WriteTarget::Main, dry, WriteHooks::tracking(scale_track.as_deref()), |parent| {
                    scope.apply_scale(parent, &scale)
                })
                .await?;
            Ok(response::object(StatusCode::OK, &scope.scale_of(&updated), output.plain()))
        }
        ("scale", "patch") => {
            let patch = patch_kind(content_type, patch_schema("autoscaling", "v1", "Scale"), None)?;
            let (PatchKind::Json | PatchKind::Merge | PatchKind::Strategic(_)) = patch else {
                return Err(ApiError::unsupported_media_type(UNTYPED_PATCH_TYPES));
            };
            let scale_track = field_manager::for_request(scope, query, caller.user_agent, "scale")?;
            let updated = srv
                .rest
                .update_with(strategy, ns, name, WriteTarget::Main, dry, WriteHooks::tracking(scale_track.as_deref()), |parent| {
                    let scale = scope.scale_of(parent);
                    let patched = apply_patch(&patch, &body, &scale)?;
                    scope.apply_scale(parent, &patched)
                })
                .await?;
            Ok(response::object(StatusCode::OK, &scope.scale_of(&updated), output.plain()))
        }
        ("token", "create") if spec.group.is_empty() && spec.resource == "serviceaccounts" => {
            let request = decode_body(content_type, &body)?;
            let answer = srv.service_accounts.token_request(&srv.rest, ns.unwrap_or_default(), name, request).await?;
            Ok(response::object(StatusCode::CREATED, &answer, output))
        }
        ("binding", "create") if spec.group.is_empty() && spec.resource == "pods" => {
            let binding = decode_subresource(&srv.openapi, content_type, &body, BodyType { group: "", version: "v1", kind: "Binding" })?;
            bind_pod(srv, strategy, ns, name, &binding, dry).await?;
            Ok(response::object(StatusCode::CREATED, &success_status(None), output.plain()))
        }
        _ => Err(ApiError::method_not_supported(&gr, &info.verb)),
    }
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
        return Err(ApiError::invalid(
            "",
            "Binding",
            name,
            vec![kapi_apimachinery::Cause::required("target.name", "")],
        ));
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
            let conditions = new
                .get_mut("status")
                .and_then(Value::as_object_mut)
                .map(|s| s.entry("conditions").or_insert_with(|| json!([])));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn borrowed_list_encoding_equals_the_built_list() {
        let spec = kapi_registry::catalog::find("", "v1", "configmaps").expect("configmaps");
        let items: Vec<Arc<Value>> = (0..3)
            .map(|i| {
                Arc::new(json!({"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": format!("c{i}"), "resourceVersion": "7"}, "data": {"k": "v"}}))
            })
            .collect();
        let meta = list_meta(9, Some("tok".into()), Some(4));
        let built = list_object(spec, true, items.iter().map(|a| a.as_ref()), meta.clone());
        let borrowed =
            ListRef { kind: "ConfigMapList".into(), api_version: "v1".into(), metadata: &meta, items: ItemsRef { items: &items, typed: true } };
        let bytes = serde_json::to_vec(&borrowed).unwrap();
        assert_eq!(serde_json::from_slice::<Value>(&bytes).unwrap(), built);
        assert!(built["items"][0].get("kind").is_none(), "list items carry no kind");
        assert_eq!(built["items"][2]["metadata"]["name"], "c2");
    }
}
