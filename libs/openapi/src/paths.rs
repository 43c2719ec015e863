//! The REST operations kube-apiserver installs for each served resource, described once and
//! rendered as Swagger 2.0 or OpenAPI 3.0 by `render`.

use crate::ServedResource;

/// Where a request parameter goes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum In {
    Path,
    Query,
}

#[derive(Clone, Debug)]
pub(crate) struct Param {
    pub name: &'static str,
    pub location: In,
    pub description: &'static str,
    /// Swagger primitive type: `string`, `integer` or `boolean`.
    pub ty: &'static str,
}

/// What a request or response body holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum BodySchema {
    /// A definition by name.
    Def(String),
    /// Plain text (logs, connect streams).
    Text,
}

#[derive(Clone, Debug)]
pub(crate) struct Operation {
    pub method: &'static str,
    pub operation_id: String,
    pub description: String,
    pub action: &'static str,
    pub gvk: Option<(String, String, String)>,
    pub tag: String,
    pub params: Vec<Param>,
    pub body: Option<BodySchema>,
    pub body_required: bool,
    pub patch: bool,
    pub responses: Vec<(u16, &'static str, BodySchema)>,
    pub watch_stream: bool,
}

#[derive(Clone, Debug)]
pub(crate) struct PathItem {
    pub path: String,
    pub params: Vec<Param>,
    pub operations: Vec<Operation>,
}

/// Definition names for one served resource's kind and list kind.
pub(crate) struct ResourceSchemas {
    pub kind_def: String,
    pub list_def: String,
}

const STATUS_DEF: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Status";
const DELETE_OPTIONS_DEF: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions";
const PATCH_DEF: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Patch";
const WATCH_EVENT_DEF: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.WatchEvent";

fn q(name: &'static str, ty: &'static str, description: &'static str) -> Param {
    Param {
        name,
        location: In::Query,
        description,
        ty,
    }
}

fn pretty() -> Param {
    q(
        "pretty",
        "string",
        "If 'true', the output is pretty printed.",
    )
}

fn name_param() -> Param {
    Param {
        name: "name",
        location: In::Path,
        description: "name of the object",
        ty: "string",
    }
}

fn namespace_param() -> Param {
    Param {
        name: "namespace",
        location: In::Path,
        description: "object name and auth scope, such as for teams and projects",
        ty: "string",
    }
}

fn dry_run() -> Param {
    q("dryRun", "string", "When present, modifications are not persisted. The only valid value is All: every dry run stage is processed.")
}

fn field_manager() -> Param {
    q("fieldManager", "string", "Name of the actor making the change, recorded in managedFields. Printable characters only, at most 128 of them.")
}

fn field_validation() -> Param {
    q(
        "fieldValidation",
        "string",
        "How the server treats unknown and duplicate fields in the request body: Ignore drops them silently, Warn (the default) drops them and returns one Warning header per field, Strict fails the request with 400 Bad Request listing them.",
    )
}

fn write_params(patch: bool) -> Vec<Param> {
    let mut params = vec![dry_run(), field_manager(), field_validation()];
    if patch {
        params.push(q("force", "boolean", "Force an apply request to take ownership of fields other managers own. Only valid for apply patches."));
    }
    params
}

fn list_params() -> Vec<Param> {
    vec![
        q(
            "allowWatchBookmarks",
            "boolean",
            "Ask for BOOKMARK watch events; the server may still not send them.",
        ),
        q(
            "continue",
            "string",
            "Token from a previous paginated list to fetch the next page.",
        ),
        q(
            "fieldSelector",
            "string",
            "Restrict the returned objects by their fields. Defaults to everything.",
        ),
        q(
            "labelSelector",
            "string",
            "Restrict the returned objects by their labels. Defaults to everything.",
        ),
        q(
            "limit",
            "integer",
            "Maximum number of items to return; a continue token is set when more exist.",
        ),
        q(
            "resourceVersion",
            "string",
            "Constrains which resource versions the request may be served from.",
        ),
        q(
            "resourceVersionMatch",
            "string",
            "How resourceVersion applies to list calls: Exact or NotOlderThan.",
        ),
        q(
            "sendInitialEvents",
            "boolean",
            "With watch=true, start the stream with synthetic events for the current state.",
        ),
        q(
            "timeoutSeconds",
            "integer",
            "Timeout for the list/watch call, regardless of activity.",
        ),
        q(
            "watch",
            "boolean",
            "Watch for changes to the described resources and return them as a stream of events.",
        ),
    ]
}

fn delete_params(collection: bool) -> Vec<Param> {
    let mut params = Vec::new();
    if collection {
        params.push(q(
            "continue",
            "string",
            "Token from a previous paginated list to fetch the next page.",
        ));
    }
    params.push(dry_run());
    if collection {
        params.push(q(
            "fieldSelector",
            "string",
            "Restrict the deleted objects by their fields. Defaults to everything.",
        ));
    }
    params.push(q(
        "gracePeriodSeconds",
        "integer",
        "Seconds before the object is deleted; zero means immediately.",
    ));
    params.push(q(
        "ignoreStoreReadErrorWithClusterBreakingPotential",
        "boolean",
        "Delete an object that cannot be read from storage (corrupt or undecryptable). Dangerous.",
    ));
    if collection {
        params.push(q(
            "labelSelector",
            "string",
            "Restrict the deleted objects by their labels. Defaults to everything.",
        ));
        params.push(q("limit", "integer", "Maximum number of items to act on."));
    }
    params.push(q(
        "orphanDependents",
        "boolean",
        "Deprecated: use propagationPolicy. Whether dependents are orphaned.",
    ));
    params.push(q(
        "propagationPolicy",
        "string",
        "Whether and how garbage collection runs: Orphan, Background or Foreground.",
    ));
    if collection {
        params.push(q(
            "resourceVersion",
            "string",
            "Constrains which resource versions the request may be served from.",
        ));
        params.push(q(
            "resourceVersionMatch",
            "string",
            "How resourceVersion applies: Exact or NotOlderThan.",
        ));
        params.push(q(
            "sendInitialEvents",
            "boolean",
            "With watch=true, start the stream with synthetic events for the current state.",
        ));
        params.push(q(
            "timeoutSeconds",
            "integer",
            "Timeout for the call, regardless of activity.",
        ));
    }
    params
}

fn log_params() -> Vec<Param> {
    vec![
        q(
            "container",
            "string",
            "The container to stream logs of; defaults to the only container.",
        ),
        q("follow", "boolean", "Follow the log stream of the pod."),
        q(
            "insecureSkipTLSVerifyBackend",
            "boolean",
            "Do not verify the serving certificate of the kubelet.",
        ),
        q(
            "limitBytes",
            "integer",
            "Stop after this many bytes of log output.",
        ),
        q(
            "previous",
            "boolean",
            "Return the logs of the previous, terminated container.",
        ),
        q(
            "sinceSeconds",
            "integer",
            "Only logs newer than this many seconds.",
        ),
        q("sinceTime", "string", "Only logs after this RFC3339 time."),
        q(
            "stream",
            "string",
            "Which stream to return: All, Stdout or Stderr.",
        ),
        q(
            "tailLines",
            "integer",
            "Number of lines from the end of the log to show.",
        ),
        q(
            "timestamps",
            "boolean",
            "Prefix every line with an RFC3339 timestamp.",
        ),
    ]
}

fn exec_params(attach: bool) -> Vec<Param> {
    let mut params = vec![
        q(
            "container",
            "string",
            "The container in which to run; defaults to the only container.",
        ),
        q("stderr", "boolean", "Redirect the standard error stream."),
        q("stdin", "boolean", "Redirect the standard input stream."),
        q("stdout", "boolean", "Redirect the standard output stream."),
        q("tty", "boolean", "Allocate a terminal."),
    ];
    if !attach {
        params.insert(
            0,
            q(
                "command",
                "string",
                "The command to run, one argument per parameter.",
            ),
        );
    }
    params
}

/// `apps` -> `Apps`, `rbac.authorization.k8s.io` -> `RbacAuthorization`, core -> `Core`.
fn group_camel(group: &str) -> String {
    if group.is_empty() {
        return "Core".into();
    }
    let trimmed = group.strip_suffix(".k8s.io").unwrap_or(group);
    trimmed.split('.').map(capitalize).collect()
}

fn capitalize(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// The operation tag kube uses: `apps_v1`, `core_v1`, `rbacAuthorization_v1`.
fn tag(group: &str, version: &str) -> String {
    let camel = group_camel(group);
    let mut chars = camel.chars();
    let lower: String = match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => String::new(),
    };
    format!("{lower}_{version}")
}

/// URL prefix of a group version: `/api/v1` or `/apis/apps/v1`.
pub(crate) fn gv_prefix(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("/api/{version}")
    } else {
        format!("/apis/{group}/{version}")
    }
}

/// Body kind and verbs of a subresource, as kube installs them.
struct SubresourceShape {
    body: Option<(String, String, String, String)>,
    methods: &'static [&'static str],
}

fn subresource_shape(sub: &str, r: &ServedResource, kind_def: &str) -> SubresourceShape {
    let own = Some((
        kind_def.to_string(),
        r.group.clone(),
        r.version.clone(),
        r.kind.clone(),
    ));
    let typed = |def: &str, group: &str, version: &str, kind: &str| {
        Some((
            def.to_string(),
            group.to_string(),
            version.to_string(),
            kind.to_string(),
        ))
    };
    match sub {
        "scale" => SubresourceShape {
            body: typed(
                "io.k8s.api.autoscaling.v1.Scale",
                "autoscaling",
                "v1",
                "Scale",
            ),
            methods: &["get", "put", "patch"],
        },
        "eviction" => SubresourceShape {
            body: typed("io.k8s.api.policy.v1.Eviction", "policy", "v1", "Eviction"),
            methods: &["post"],
        },
        "binding" => SubresourceShape {
            body: typed("io.k8s.api.core.v1.Binding", "", "v1", "Binding"),
            methods: &["post"],
        },
        "token" => SubresourceShape {
            body: typed(
                "io.k8s.api.authentication.v1.TokenRequest",
                "authentication.k8s.io",
                "v1",
                "TokenRequest",
            ),
            methods: &["post"],
        },
        "log" => SubresourceShape {
            body: None,
            methods: &["get"],
        },
        "exec" | "attach" | "portforward" => SubresourceShape {
            body: None,
            methods: &["connect-get", "connect-post"],
        },
        "proxy" => SubresourceShape {
            body: None,
            methods: &[
                "connect-get",
                "connect-post",
                "connect-put",
                "connect-patch",
                "connect-delete",
                "connect-head",
                "connect-options",
            ],
        },
        _ => SubresourceShape {
            body: own,
            methods: &["get", "put", "patch"],
        },
    }
}

/// Every path kube-apiserver serves for `r`, with its operations.
pub(crate) fn resource_paths(r: &ServedResource, schemas: &ResourceSchemas) -> Vec<PathItem> {
    let gv = format!("{}{}", group_camel(&r.group), capitalize(&r.version));
    let scope = if r.namespaced { "Namespaced" } else { "" };
    let prefix = gv_prefix(&r.group, &r.version);
    let ns_part = if r.namespaced {
        "/namespaces/{namespace}"
    } else {
        ""
    };
    let collection = format!("{prefix}{ns_part}/{}", r.resource);
    let item = format!("{collection}/{{name}}");
    let tag = tag(&r.group, &r.version);
    let gvk = Some((r.group.clone(), r.version.clone(), r.kind.clone()));
    let has = |verb: &str| r.verbs.iter().any(|v| v == verb);
    let kind_def = BodySchema::Def(schemas.kind_def.clone());
    let status = BodySchema::Def(STATUS_DEF.into());

    let op =
        |method: &'static str, action: &'static str, id: String, description: String| Operation {
            method,
            operation_id: id,
            description,
            action,
            gvk: gvk.clone(),
            tag: tag.clone(),
            params: Vec::new(),
            body: None,
            body_required: false,
            patch: false,
            responses: Vec::new(),
            watch_stream: false,
        };
    let base_params = |item_level: bool| {
        let mut params = Vec::new();
        if item_level {
            params.push(name_param());
        }
        if r.namespaced {
            params.push(namespace_param());
        }
        params.push(pretty());
        params
    };

    let mut paths = Vec::new();
    let mut coll_ops = Vec::new();
    if has("list") {
        let mut o = op(
            "get",
            "list",
            format!("list{gv}{scope}{}", r.kind),
            format!("list or watch objects of kind {}", r.kind),
        );
        o.params = list_params();
        o.responses = vec![(200, "OK", BodySchema::Def(schemas.list_def.clone()))];
        o.watch_stream = true;
        coll_ops.push(o);
    }
    if has("create") {
        let mut o = op(
            "post",
            "post",
            format!("create{gv}{scope}{}", r.kind),
            format!("create a {}", r.kind),
        );
        o.params = write_params(false);
        o.body = Some(kind_def.clone());
        o.body_required = true;
        o.responses = vec![
            (200, "OK", kind_def.clone()),
            (201, "Created", kind_def.clone()),
            (202, "Accepted", kind_def.clone()),
        ];
        coll_ops.push(o);
    }
    if has("deletecollection") {
        let mut o = op(
            "delete",
            "deletecollection",
            format!("delete{gv}Collection{scope}{}", r.kind),
            format!("delete collection of {}", r.kind),
        );
        o.params = delete_params(true);
        o.body = Some(BodySchema::Def(DELETE_OPTIONS_DEF.into()));
        o.responses = vec![(200, "OK", status.clone())];
        coll_ops.push(o);
    }
    if !coll_ops.is_empty() {
        paths.push(PathItem {
            path: collection.clone(),
            params: base_params(false),
            operations: coll_ops,
        });
    }

    let mut item_ops = Vec::new();
    if has("get") {
        let mut o = op(
            "get",
            "get",
            format!("read{gv}{scope}{}", r.kind),
            format!("read the specified {}", r.kind),
        );
        o.responses = vec![(200, "OK", kind_def.clone())];
        item_ops.push(o);
    }
    if has("update") {
        let mut o = op(
            "put",
            "put",
            format!("replace{gv}{scope}{}", r.kind),
            format!("replace the specified {}", r.kind),
        );
        o.params = write_params(false);
        o.body = Some(kind_def.clone());
        o.body_required = true;
        o.responses = vec![
            (200, "OK", kind_def.clone()),
            (201, "Created", kind_def.clone()),
        ];
        item_ops.push(o);
    }
    if has("patch") {
        let mut o = op(
            "patch",
            "patch",
            format!("patch{gv}{scope}{}", r.kind),
            format!("partially update the specified {}", r.kind),
        );
        o.params = write_params(true);
        o.body = Some(BodySchema::Def(PATCH_DEF.into()));
        o.body_required = true;
        o.patch = true;
        o.responses = vec![
            (200, "OK", kind_def.clone()),
            (201, "Created", kind_def.clone()),
        ];
        item_ops.push(o);
    }
    if has("delete") {
        let mut o = op(
            "delete",
            "delete",
            format!("delete{gv}{scope}{}", r.kind),
            format!("delete a {}", r.kind),
        );
        o.params = delete_params(false);
        o.body = Some(BodySchema::Def(DELETE_OPTIONS_DEF.into()));
        // kube's installer declares the object for stores with ReturnDeletedObject, a Status
        // otherwise; deletecollection always declares Status (it answers the deleted list).
        let deleted = if r.delete_returns_object { kind_def.clone() } else { status.clone() };
        o.responses = vec![(200, "OK", deleted.clone()), (202, "Accepted", deleted)];
        item_ops.push(o);
    }
    if !item_ops.is_empty() {
        paths.push(PathItem {
            path: item.clone(),
            params: base_params(true),
            operations: item_ops,
        });
    }

    if has("watch") {
        let watch_event = BodySchema::Def(WATCH_EVENT_DEF.into());
        let watch_ns = if r.namespaced {
            "/namespaces/{namespace}"
        } else {
            ""
        };
        let watch_coll = format!("{prefix}/watch{watch_ns}/{}", r.resource);
        let mut o = op("get", "watchlist", format!("watch{gv}{scope}{}List", r.kind), format!("watch individual changes to a list of {}. deprecated: use the 'watch' parameter with a list operation instead.", r.kind));
        o.params = list_params();
        o.responses = vec![(200, "OK", watch_event.clone())];
        o.watch_stream = true;
        paths.push(PathItem {
            path: watch_coll.clone(),
            params: base_params(false),
            operations: vec![o],
        });
        let mut o = op("get", "watch", format!("watch{gv}{scope}{}", r.kind), format!("watch changes to an object of kind {}. deprecated: use the 'watch' parameter with a list operation instead, filtered to a single item with the 'fieldSelector' parameter.", r.kind));
        o.params = list_params();
        o.responses = vec![(200, "OK", watch_event.clone())];
        o.watch_stream = true;
        paths.push(PathItem {
            path: format!("{watch_coll}/{{name}}"),
            params: base_params(true),
            operations: vec![o],
        });
        if r.namespaced {
            let mut o = op("get", "watchlist", format!("watch{gv}{}ListForAllNamespaces", r.kind), format!("watch individual changes to a list of {}. deprecated: use the 'watch' parameter with a list operation instead.", r.kind));
            o.params = list_params();
            o.responses = vec![(200, "OK", watch_event)];
            o.watch_stream = true;
            paths.push(PathItem {
                path: format!("{prefix}/watch/{}", r.resource),
                params: vec![pretty()],
                operations: vec![o],
            });
        }
    }
    if r.namespaced && has("list") {
        let mut o = op(
            "get",
            "list",
            format!("list{gv}{}ForAllNamespaces", r.kind),
            format!("list or watch objects of kind {}", r.kind),
        );
        o.params = list_params();
        o.responses = vec![(200, "OK", BodySchema::Def(schemas.list_def.clone()))];
        o.watch_stream = true;
        paths.push(PathItem {
            path: format!("{prefix}/{}", r.resource),
            params: vec![pretty()],
            operations: vec![o],
        });
    }

    for sub in &r.subresources {
        let sub = sub.rsplit('/').next().unwrap_or(sub);
        if sub.is_empty() {
            continue;
        }
        let shape = subresource_shape(sub, r, &schemas.kind_def);
        let suffix = capitalize(sub);
        let mut ops = Vec::new();
        for method in shape.methods {
            let mut o = match (*method, &shape.body) {
                ("get", _) => {
                    let mut o = op(
                        "get",
                        "get",
                        format!("read{gv}{scope}{}{suffix}", r.kind),
                        format!("read {sub} of the specified {}", r.kind),
                    );
                    o.responses = vec![(
                        200,
                        "OK",
                        shape
                            .body
                            .as_ref()
                            .map(|b| BodySchema::Def(b.0.clone()))
                            .unwrap_or(BodySchema::Text),
                    )];
                    if sub == "log" {
                        o.params = log_params();
                    }
                    o
                }
                ("put", Some(body)) => {
                    let mut o = op(
                        "put",
                        "put",
                        format!("replace{gv}{scope}{}{suffix}", r.kind),
                        format!("replace {sub} of the specified {}", r.kind),
                    );
                    o.params = write_params(false);
                    o.body = Some(BodySchema::Def(body.0.clone()));
                    o.body_required = true;
                    o.responses = vec![
                        (200, "OK", BodySchema::Def(body.0.clone())),
                        (201, "Created", BodySchema::Def(body.0.clone())),
                    ];
                    o
                }
                ("patch", Some(body)) => {
                    let mut o = op(
                        "patch",
                        "patch",
                        format!("patch{gv}{scope}{}{suffix}", r.kind),
                        format!("partially update {sub} of the specified {}", r.kind),
                    );
                    o.params = write_params(true);
                    o.body = Some(BodySchema::Def(PATCH_DEF.into()));
                    o.body_required = true;
                    o.patch = true;
                    o.responses = vec![
                        (200, "OK", BodySchema::Def(body.0.clone())),
                        (201, "Created", BodySchema::Def(body.0.clone())),
                    ];
                    o
                }
                ("post", Some(body)) => {
                    let mut o = op(
                        "post",
                        "post",
                        format!("create{gv}{scope}{}{suffix}", r.kind),
                        format!("create {sub} of a {}", r.kind),
                    );
                    o.params = write_params(false);
                    o.body = Some(BodySchema::Def(body.0.clone()));
                    o.body_required = true;
                    let def = BodySchema::Def(body.0.clone());
                    o.responses = vec![
                        (200, "OK", def.clone()),
                        (201, "Created", def.clone()),
                        (202, "Accepted", def),
                    ];
                    o
                }
                (connect, _) if connect.starts_with("connect-") => {
                    let http = connect.trim_start_matches("connect-");
                    let method: &'static str = match http {
                        "get" => "get",
                        "post" => "post",
                        "put" => "put",
                        "patch" => "patch",
                        "delete" => "delete",
                        "head" => "head",
                        _ => "options",
                    };
                    let mut o = op(
                        method,
                        "connect",
                        format!("connect{gv}{}{scope}{}{suffix}", capitalize(http), r.kind),
                        format!(
                            "connect {} requests to {sub} of {}",
                            http.to_uppercase(),
                            r.kind
                        ),
                    );
                    o.params = match sub {
                        "exec" => exec_params(false),
                        "attach" => exec_params(true),
                        "portforward" => vec![q("ports", "integer", "List of ports to forward.")],
                        _ => vec![q(
                            "path",
                            "string",
                            "Path is the URL path to use for the current proxy request to pod.",
                        )],
                    };
                    o.responses = vec![(200, "OK", BodySchema::Text)];
                    // kube tags connect operations with their options kind, not the resource's:
                    // clients (kubectl's field-validation probe) look for the resource's own
                    // PATCH and must not find a connect PATCH without `fieldValidation`.
                    let options_kind = match sub {
                        "exec" => "PodExecOptions".to_owned(),
                        "attach" => "PodAttachOptions".to_owned(),
                        "portforward" => "PodPortForwardOptions".to_owned(),
                        _ => format!("{}ProxyOptions", r.kind),
                    };
                    o.gvk = Some((String::new(), "v1".to_owned(), options_kind));
                    o
                }
                _ => continue,
            };
            if let Some(body) = &shape.body {
                o.gvk = Some((body.1.clone(), body.2.clone(), body.3.clone()));
            }
            ops.push(o);
        }
        if !ops.is_empty() {
            let mut params = base_params(true);
            if shape.body.is_none() && sub != "log" {
                params.retain(|p| p.name != "pretty");
            }
            paths.push(PathItem {
                path: format!("{item}/{sub}"),
                params,
                operations: ops,
            });
        }
    }
    paths
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_kube() {
        assert_eq!(
            group_camel("rbac.authorization.k8s.io"),
            "RbacAuthorization"
        );
        assert_eq!(
            group_camel("flowcontrol.apiserver.k8s.io"),
            "FlowcontrolApiserver"
        );
        assert_eq!(group_camel(""), "Core");
        assert_eq!(
            tag("rbac.authorization.k8s.io", "v1"),
            "rbacAuthorization_v1"
        );
        assert_eq!(tag("", "v1"), "core_v1");
    }

    #[test]
    fn delete_declares_the_object_only_when_the_store_returns_it() {
        let declared = |returns: bool| {
            let r = ServedResource {
                group: String::new(),
                version: "v1".into(),
                kind: "Service".into(),
                resource: "services".into(),
                namespaced: true,
                verbs: ["delete", "deletecollection"].map(String::from).to_vec(),
                subresources: Vec::new(),
                delete_returns_object: returns,
            };
            let schemas = ResourceSchemas { kind_def: "io.k8s.api.core.v1.Service".into(), list_def: "io.k8s.api.core.v1.ServiceList".into() };
            let paths = resource_paths(&r, &schemas);
            let def = |action: &str| -> Vec<String> {
                let op = paths.iter().flat_map(|p| p.operations.iter()).find(|o| o.action == action).expect("operation");
                op.responses.iter().map(|(_, _, b)| format!("{b:?}")).collect()
            };
            (def("delete"), def("deletecollection"))
        };
        let (delete, collection) = declared(true);
        assert!(delete.iter().all(|d| d.contains("io.k8s.api.core.v1.Service")), "{delete:?}");
        assert!(collection.iter().all(|d| d.contains(STATUS_DEF)), "{collection:?}");
        let (delete, _) = declared(false);
        assert!(delete.iter().all(|d| d.contains(STATUS_DEF)), "{delete:?}");
    }

    #[test]
    fn deployment_operations() {
        let r = ServedResource {
            group: "apps".into(),
            version: "v1".into(),
            kind: "Deployment".into(),
            resource: "deployments".into(),
            namespaced: true,
            verbs: [
                "create",
                "delete",
                "deletecollection",
                "get",
                "list",
                "patch",
                "update",
                "watch",
            ]
            .map(String::from)
            .to_vec(),
            subresources: vec!["status".into(), "scale".into()],
            delete_returns_object: false,
        };
        let schemas = ResourceSchemas {
            kind_def: "io.k8s.api.apps.v1.Deployment".into(),
            list_def: "io.k8s.api.apps.v1.DeploymentList".into(),
        };
        let paths = resource_paths(&r, &schemas);
        let ids: Vec<&str> = paths
            .iter()
            .flat_map(|p| p.operations.iter().map(|o| o.operation_id.as_str()))
            .collect();
        for id in [
            "listAppsV1NamespacedDeployment",
            "createAppsV1NamespacedDeployment",
            "deleteAppsV1CollectionNamespacedDeployment",
            "readAppsV1NamespacedDeployment",
            "patchAppsV1NamespacedDeployment",
            "listAppsV1DeploymentForAllNamespaces",
            "watchAppsV1NamespacedDeploymentList",
            "replaceAppsV1NamespacedDeploymentStatus",
            "readAppsV1NamespacedDeploymentScale",
        ] {
            assert!(ids.contains(&id), "missing {id} in {ids:?}");
        }
        let scale = paths
            .iter()
            .find(|p| p.path == "/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale")
            .expect("scale path");
        assert_eq!(
            scale.operations[0].gvk,
            Some(("autoscaling".into(), "v1".into(), "Scale".into()))
        );
    }
}
