//! The values expressions see besides the objects: kube's AdmissionRequest (`request`), the
//! trimmed Namespace (`namespaceObject`) and the authorizer's view of the request.

use std::sync::Arc;

use kapi_admission::attributes::Gvx;
use kapi_admission::Attributes;
use kapi_apiextensions::cel::{AuthorizerInput, AuthzUser, CelAuthorizer, RequestResource};
use serde_json::{json, Map, Value};

use crate::matching::Matched;

fn gvk(g: &Gvx) -> Value {
    json!({"group": g.group, "version": g.version, "kind": g.name})
}

fn gvr(g: &Gvx) -> Value {
    json!({"group": g.group, "version": g.version, "resource": g.name})
}

/// kube's `CreateAdmissionRequest` as CEL reads it: `kind`/`resource` are what the policy
/// matched (an equivalent version's under `Equivalent`), `requestKind`/`requestResource` what
/// was asked; empty optional fields are absent, as in the JSON form kube converts.
pub fn admission_request(attrs: &Attributes, matched_resource: &Gvx, matched_kind: &Gvx) -> Value {
    let mut r = Map::new();
    r.insert("kind".into(), gvk(matched_kind));
    r.insert("resource".into(), gvr(matched_resource));
    let mut optional = |k: &str, v: &str| {
        if !v.is_empty() {
            r.insert(k.into(), Value::from(v));
        }
    };
    optional("subResource", &attrs.subresource);
    optional("requestSubResource", &attrs.subresource);
    optional("name", &attrs.name);
    optional("namespace", &attrs.namespace);
    r.insert("requestKind".into(), gvk(&attrs.kind));
    r.insert("requestResource".into(), gvr(&attrs.resource));
    r.insert("operation".into(), Value::from(attrs.operation.as_str()));
    let user = &attrs.user;
    let mut u = Map::new();
    if !user.name.is_empty() {
        u.insert("username".into(), Value::from(user.name.as_str()));
    }
    if !user.uid.is_empty() {
        u.insert("uid".into(), Value::from(user.uid.as_str()));
    }
    if !user.groups.is_empty() {
        u.insert("groups".into(), json!(user.groups));
    }
    if !user.extra.is_empty() {
        u.insert("extra".into(), json!(user.extra));
    }
    r.insert("userInfo".into(), Value::Object(u));
    r.insert("dryRun".into(), Value::Bool(attrs.dry_run));
    r.insert("options".into(), attrs.options.clone());
    Value::Object(r)
}

/// The request for a [`Matched`] resource.
pub(crate) fn for_match(attrs: &Attributes, matched: &Matched) -> Value {
    admission_request(attrs, &matched.resource, &matched.kind)
}

/// kube's `CreateNamespaceObject`: the namespace's spec, status and a subset of its metadata.
pub fn namespace_object(ns: &Value) -> Value {
    const KEPT: &[&str] = &[
        "name",
        "generateName",
        "namespace",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "labels",
        "annotations",
        "finalizers",
    ];
    let mut out = Map::new();
    if let Some(meta) = ns.get("metadata").and_then(Value::as_object) {
        let kept: Map<String, Value> =
            meta.iter().filter(|(k, _)| KEPT.contains(&k.as_str())).map(|(k, v)| (k.clone(), v.clone())).collect();
        out.insert("metadata".into(), Value::Object(kept));
    }
    for key in ["spec", "status"] {
        if let Some(v) = ns.get(key) {
            out.insert(key.into(), v.clone());
        }
    }
    Value::Object(out)
}

/// `authorizer` for the requesting user, and `authorizer.requestResource` for what it asks.
pub fn authorizer_input(attrs: &Attributes, authorizer: Arc<dyn CelAuthorizer>) -> AuthorizerInput {
    let user = &attrs.user;
    AuthorizerInput {
        authorizer,
        user: AuthzUser {
            name: user.name.clone(),
            uid: user.uid.clone(),
            groups: user.groups.clone(),
            extra: user.extra.clone(),
        },
        request_resource: RequestResource {
            group: attrs.resource.group.clone(),
            resource: attrs.resource.name.clone(),
            subresource: attrs.subresource.clone(),
            namespace: attrs.namespace.clone(),
            name: attrs.name.clone(),
        },
    }
}
