//! The paths kube's CRD OpenAPI builder describes for one served version of a custom resource:
//! list (and list across namespaces), create, delete collection, read, replace, delete, patch,
//! and the status and scale subresources, with their query parameters (from the options kind
//! of each action), bodies, responses and `x-kubernetes-*` extensions, in Swagger 2.0 and
//! OpenAPI 3.0 form.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

const STATUS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Status";
const PATCH: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Patch";
const DELETE_OPTIONS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions";
const SCALE: &str = "io.k8s.api.autoscaling.v1.Scale";

/// What the routes of one custom resource version are built from.
pub(crate) struct Names<'a> {
    pub group: &'a str,
    pub version: &'a str,
    pub kind: &'a str,
    pub plural: &'a str,
    pub namespaced: bool,
    pub status: bool,
    pub scale: bool,
    /// Definition names of the kind and its list.
    pub kind_def: &'a str,
    pub list_def: &'a str,
}

/// One query or path parameter: name, location, JSON type, description.
type Param = (&'static str, &'static str, &'static str, String);

fn query(name: &'static str, ty: &'static str, description: &str) -> Param {
    (name, "query", ty, description.to_owned())
}

/// The query parameters of an action, as kube derives them from its options kind.
fn option_params(action: &str) -> Vec<Param> {
    let dry_run =
        || query("dryRun", "string", "When present, modifications are not persisted. The only valid value is All.");
    let manager = || query("fieldManager", "string", "Name of the actor making the change, recorded in managedFields.");
    let validation =
        || query("fieldValidation", "string", "How unknown and duplicate fields are treated: Ignore, Warn or Strict.");
    match action {
        "get" => vec![query("resourceVersion", "string", "Which resource version the object may be read from.")],
        "list" | "deletecollection" => vec![
            query("labelSelector", "string", "Restrict the objects by their labels. Defaults to everything."),
            query("fieldSelector", "string", "Restrict the objects by their fields. Defaults to everything."),
            query("watch", "boolean", "Watch for changes to the objects and return them as a stream of events."),
            query(
                "allowWatchBookmarks",
                "boolean",
                "Ask for BOOKMARK watch events; the server may still not send them.",
            ),
            query("resourceVersion", "string", "Constrains which resource versions the request may be served from."),
            query(
                "resourceVersionMatch",
                "string",
                "How resourceVersion applies to list calls: Exact or NotOlderThan.",
            ),
            query("timeoutSeconds", "integer", "Timeout for the list/watch call, regardless of activity."),
            query("limit", "integer", "Maximum number of items to return; a continue token is set when more exist."),
            query("continue", "string", "Token from a previous paginated list to fetch the next page."),
            query(
                "sendInitialEvents",
                "boolean",
                "With watch=true, start the stream with synthetic events for the current state.",
            ),
        ],
        "put" | "post" => vec![dry_run(), manager(), validation()],
        "patch" => vec![
            dry_run(),
            query("force", "boolean", "Take ownership of fields other managers own. Only valid for apply patches."),
            manager(),
            validation(),
        ],
        "delete" => vec![
            query("gracePeriodSeconds", "integer", "Seconds before the object is deleted; zero means immediately."),
            query("orphanDependents", "boolean", "Deprecated: use propagationPolicy. Whether dependents are orphaned."),
            query(
                "propagationPolicy",
                "string",
                "Whether and how garbage collection runs: Orphan, Background or Foreground.",
            ),
            dry_run(),
            query(
                "ignoreStoreReadErrorWithClusterBreakingPotential",
                "boolean",
                "Delete an object that cannot be read from storage (corrupt or undecryptable). Dangerous.",
            ),
        ],
        _ => Vec::new(),
    }
}

/// One route of the builder.
struct Route {
    path: String,
    method: &'static str,
    action: &'static str,
    operation_id: String,
    description: String,
    /// Request body: definition and whether it is required.
    body: Option<(String, bool)>,
    params: Vec<Param>,
    responses: Vec<(u16, &'static str, String)>,
}

/// kube's `ToValidOperationID`: letters, `_` and (not first) digits are kept; any other
/// character is dropped and capitalizes the next kept one.
pub(crate) fn valid_id(s: &str, capitalize_first: bool) -> String {
    let mut out = String::new();
    let mut capitalize = capitalize_first;
    for (i, c) in s.chars().enumerate() {
        if c.is_alphabetic() || c == '_' || (i != 0 && c.is_numeric()) {
            if capitalize {
                out.extend(c.to_uppercase());
                capitalize = false;
            } else {
                out.push(c);
            }
        } else {
            capitalize = true;
        }
    }
    out
}

/// `a` or `an` before the kind, as kube's descriptions say "create a Widget".
fn article(kind: &str) -> &'static str {
    match kind.chars().next().map(|c| c.to_ascii_lowercase()) {
        Some('a' | 'e' | 'i' | 'o' | 'u') => " an ",
        _ => " a ",
    }
}

fn description(kind: &str, sub: &str, verb: &str) -> String {
    let of = if sub.is_empty() { String::new() } else { format!(" {sub} of") };
    match verb {
        "list" => format!("list{of} objects of kind {kind}"),
        "read" | "replace" => format!("{verb}{of} the specified {kind}"),
        "patch" => format!("partially update{of} the specified {kind}"),
        "create" | "delete" => format!("{verb}{of}{}{kind}", article(kind)),
        _ => format!("delete collection of{of} {kind}"),
    }
}

fn capitalized(s: &str) -> String {
    let mut chars = s.chars();
    chars.next().map(|c| c.to_uppercase().chain(chars).collect()).unwrap_or_default()
}

/// The request-independent parts of one route.
struct Spec<'a> {
    method: &'static str,
    action: &'static str,
    verb: &'static str,
    sub: &'static str,
    sample: &'a str,
    body: Option<(&'a str, bool)>,
}

/// The routes of one version, in kube's order.
fn routes(n: &Names) -> Vec<Route> {
    let gv_id =
        format!("{}{}", valid_id(n.group.strip_suffix(".k8s.io").unwrap_or(n.group), true), valid_id(n.version, true));
    let scope = if n.namespaced { "Namespaced" } else { "" };
    let route = |path: &str, s: Spec, rest_override: Option<String>| {
        let rest = rest_override.unwrap_or_else(|| format!("{scope}{}{}", n.kind, capitalized(s.sub)));
        // kube names operations `<verb><Group><Version><Rest>`; deletecollection keeps only
        // `delete` as its verb prefix (`deleteExampleComV1CollectionNamespacedWidget`).
        let (prefix, rest) = match s.verb {
            "deletecollection" => ("delete", format!("collection{rest}")),
            verb => (verb, rest),
        };
        let mut responses = vec![(200, "OK", s.sample.to_owned())];
        match s.action {
            "post" => responses.extend([(201, "Created", s.sample.to_owned()), (202, "Accepted", s.sample.to_owned())]),
            "delete" => responses.push((202, "Accepted", s.sample.to_owned())),
            "put" => responses.push((201, "Created", s.sample.to_owned())),
            _ => {}
        }
        Route {
            path: path.to_owned(),
            method: s.method,
            action: s.action,
            operation_id: format!("{prefix}{gv_id}{}", valid_id(&rest, true)),
            description: description(n.kind, s.sub, s.verb),
            body: s.body.map(|(def, required)| (if def.is_empty() { s.sample } else { def }.to_owned(), required)),
            params: option_params(s.action),
            responses,
        }
    };
    let spec = |method, action, verb, sub, sample, body| Spec { method, action, verb, sub, sample, body };
    let mut out = Vec::new();
    let mut root = format!("/apis/{}/{}/{}", n.group, n.version, n.plural);
    if n.namespaced {
        let rest = format!("{}ForAllNamespaces", n.kind);
        out.push(route(&root, spec("get", "list", "list", "", n.list_def, None), Some(rest)));
        root = format!("/apis/{}/{}/namespaces/{{namespace}}/{}", n.group, n.version, n.plural);
    }
    let item = format!("{root}/{{name}}");
    let mut specs = vec![
        (root.clone(), spec("get", "list", "list", "", n.list_def, None)),
        (root.clone(), spec("post", "post", "create", "", n.kind_def, Some(("", true)))),
        (root.clone(), spec("delete", "deletecollection", "deletecollection", "", STATUS, None)),
        (item.clone(), spec("get", "get", "read", "", n.kind_def, None)),
        (item.clone(), spec("put", "put", "replace", "", n.kind_def, Some(("", true)))),
        (item.clone(), spec("delete", "delete", "delete", "", STATUS, Some((DELETE_OPTIONS, false)))),
        (item.clone(), spec("patch", "patch", "patch", "", n.kind_def, Some((PATCH, true)))),
    ];
    for (enabled, sub, sample) in [(n.status, "status", n.kind_def), (n.scale, "scale", SCALE)] {
        if enabled {
            let path = format!("{item}/{sub}");
            specs.push((path.clone(), spec("get", "get", "read", sub, sample, None)));
            specs.push((path.clone(), spec("put", "put", "replace", sub, sample, Some(("", true)))));
            specs.push((path, spec("patch", "patch", "patch", sub, sample, Some((PATCH, true)))));
        }
    }
    out.extend(specs.into_iter().map(|(path, s)| route(&path, s, None)));
    out
}

fn consumes(route: &Route) -> &'static [&'static str] {
    if route.method == "patch" {
        &["application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml"]
    } else {
        &["application/json", "application/yaml"]
    }
}

const PRODUCES: [&str; 2] = ["application/json", "application/yaml"];

fn v2_param((name, location, ty, description): &Param) -> Value {
    let mut p = json!({ "uniqueItems": true, "type": ty, "description": description, "name": name, "in": location });
    if *location == "path" {
        p["required"] = Value::Bool(true);
    }
    p
}

fn v3_param((name, location, ty, description): &Param) -> Value {
    let mut p = json!({ "name": name, "in": location, "description": description });
    if *location == "path" {
        p["required"] = Value::Bool(true);
    }
    p["schema"] = json!({ "type": ty, "uniqueItems": true });
    p
}

fn reference(def: &str, v2: bool) -> Value {
    let prefix = if v2 { "#/definitions/" } else { "#/components/schemas/" };
    json!({ "$ref": format!("{prefix}{def}") })
}

/// One operation; `common` parameters are on the path item instead.
fn operation(route: &Route, n: &Names, common: &[Param], v2: bool) -> Value {
    let mut params: Vec<&Param> =
        route.params.iter().filter(|p| !common.iter().any(|c| c.0 == p.0 && c.1 == p.1)).collect();
    params.sort_by_key(|p| (p.0, p.1));
    let mut op = Map::new();
    op.insert("description".into(), Value::String(route.description.clone()));
    if v2 {
        op.insert("consumes".into(), json!(consumes(route)));
        op.insert("produces".into(), json!(PRODUCES));
        op.insert("schemes".into(), json!(["https"]));
    }
    op.insert(
        "tags".into(),
        json!([format!(
            "{}_{}",
            valid_id(n.group.strip_suffix(".k8s.io").unwrap_or(n.group), false),
            valid_id(n.version, false)
        )]),
    );
    op.insert("operationId".into(), Value::String(route.operation_id.clone()));
    let mut rendered: Vec<(&str, Value)> =
        params.iter().map(|p| (p.0, if v2 { v2_param(p) } else { v3_param(p) })).collect();
    if let Some((def, required)) = &route.body {
        if v2 {
            rendered.push((
                "body",
                json!({ "name": "body", "in": "body", "required": required, "schema": reference(def, true) }),
            ));
            rendered.sort_by(|a, b| a.0.cmp(b.0));
        } else {
            let content: Map<String, Value> =
                consumes(route).iter().map(|m| ((*m).to_owned(), json!({ "schema": reference(def, false) }))).collect();
            op.insert("requestBody".into(), json!({ "content": content, "required": required }));
        }
    }
    if !rendered.is_empty() {
        op.insert("parameters".into(), Value::Array(rendered.into_iter().map(|(_, p)| p).collect()));
    }
    let mut responses = Map::new();
    for (code, text, def) in &route.responses {
        let response = if v2 {
            json!({ "description": text, "schema": reference(def, true) })
        } else {
            let content: Map<String, Value> =
                PRODUCES.iter().map(|m| ((*m).to_owned(), json!({ "schema": reference(def, false) }))).collect();
            json!({ "description": text, "content": content })
        };
        responses.insert(code.to_string(), response);
    }
    responses.insert("401".into(), json!({ "description": "Unauthorized" }));
    op.insert("responses".into(), Value::Object(responses));
    op.insert("x-kubernetes-action".into(), Value::String(route.action.into()));
    op.insert(
        "x-kubernetes-group-version-kind".into(),
        json!({ "group": n.group, "kind": n.kind, "version": n.version }),
    );
    Value::Object(op)
}

/// Path items by path, in Swagger 2.0 (`v2`) or OpenAPI 3.0 form. As kube-openapi does, the
/// parameters every operation of a path shares (`pretty`, the path parameters, and all of them
/// when a path has one operation) move to the path item.
fn render(routes: &[Route], n: &Names, v2: bool) -> BTreeMap<String, Value> {
    let mut by_path: BTreeMap<&str, Vec<&Route>> = BTreeMap::new();
    for route in routes {
        by_path.entry(route.path.as_str()).or_default().push(route);
    }
    let mut out = BTreeMap::new();
    for (path, routes) in by_path {
        let mut all: Vec<Param> = Vec::new();
        if path.contains("{name}") {
            all.push(("name", "path", "string", format!("name of the {}", n.kind)));
        }
        if path.contains("{namespace}") {
            all.push((
                "namespace",
                "path",
                "string",
                "object name and auth scope, such as for teams and projects".into(),
            ));
        }
        all.push(query("pretty", "string", "If 'true', the output is pretty printed."));
        let shared: Vec<Param> = routes[0]
            .params
            .iter()
            .filter(|p| routes.iter().all(|r| r.params.iter().any(|q| q.0 == p.0 && q.1 == p.1)))
            .cloned()
            .collect();
        all.extend(shared);
        all.sort_by_key(|p| (p.0, p.1));
        let mut item = Map::new();
        for route in &routes {
            item.insert(route.method.into(), operation(route, n, &all, v2));
        }
        let params: Vec<Value> = all.iter().map(|p| if v2 { v2_param(p) } else { v3_param(p) }).collect();
        item.insert("parameters".into(), Value::Array(params));
        out.insert(path.to_owned(), Value::Object(item));
    }
    out
}

/// The v2 and v3 path items of one custom resource version.
pub(crate) fn paths(n: &Names) -> (BTreeMap<String, Value>, BTreeMap<String, Value>) {
    let routes = routes(n);
    (render(&routes, n, true), render(&routes, n, false))
}
