//! The OpenAPI parts of custom resources, as kube's apiextensions-apiserver publishes them
//! (`pkg/controller/openapi/builder`, its v2 controller and its v3 controller): for every served
//! version of every Established CRD, the definitions `<reversed group>.<version>.<Kind>` and
//! `...<Kind>List` and the paths of every verb and subresource, in Swagger 2.0 form for
//! `/openapi/v2` and OpenAPI 3.0 form for `/openapi/v3/apis/<group>/<version>`.
//!
//! The tier hands every served CRD to a [`Publisher`] after each refresh; parts are computed once
//! per CRD resourceVersion and swapped into the shared [`OpenApi`], which rebuilds only the
//! documents that changed, on their next request. Custom resources never reach
//! `OpenApi::field_problems`: their schemas live only in the published documents.

mod routes;
mod schema;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use kapi_openapi::{CustomPart, OpenApi};
use serde_json::Value;

use crate::crd::str_at;

/// kube's definition name of a custom kind: the group reversed, then version and kind
/// (`example.com`, `v1`, `Widget` -> `com.example.v1.Widget`).
pub fn definition_name(group: &str, version: &str, kind: &str) -> String {
    let mut parts: Vec<&str> = group.split('.').collect();
    parts.reverse();
    format!("{}.{version}.{kind}", parts.join("."))
}

/// Whether a version's schema can be published: kube publishes only structural schemas and
/// falls back to the permissive definition for the rest.
fn structural(schema: &Value) -> bool {
    kapi_apiextensions::schema::Structural::new(schema).is_ok()
}

/// The parts of every served version of `crd` (kube builds them for served versions only;
/// whether the CRD is Established is the caller's business).
pub fn crd_parts(crd: &Value) -> Vec<CustomPart> {
    let group = str_at(crd, "/spec/group");
    let kind = str_at(crd, "/spec/names/kind");
    let plural = str_at(crd, "/spec/names/plural");
    let list_kind = match str_at(crd, "/spec/names/listKind") {
        "" => format!("{kind}List"),
        list => list.to_owned(),
    };
    if group.is_empty() || kind.is_empty() || plural.is_empty() {
        return Vec::new();
    }
    let namespaced = str_at(crd, "/spec/scope") != "Cluster";
    let preserve_unknown_fields = crd.pointer("/spec/preserveUnknownFields").and_then(Value::as_bool) == Some(true);
    let versions = crd.pointer("/spec/versions").and_then(Value::as_array).cloned().unwrap_or_default();
    let mut parts = Vec::new();
    for version in versions.iter().filter(|v| v.get("served").and_then(Value::as_bool) == Some(true)) {
        let name = str_at(version, "/name");
        if name.is_empty() {
            continue;
        }
        let schema = version.pointer("/schema/openAPIV3Schema").filter(|s| s.is_object() && structural(s));
        let selectable = version
            .get("selectableFields")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|f| f.get("jsonPath").and_then(Value::as_str))
            .map(|p| p.trim_start_matches('.').to_owned())
            .collect();
        let info = schema::KindInfo {
            group,
            version: name,
            kind,
            list_kind: &list_kind,
            plural,
            schema,
            preserve_unknown_fields,
            selectable,
        };
        let kind_def = definition_name(group, name, kind);
        let list_def = definition_name(group, name, &list_kind);
        let has = |sub: &str| version.pointer(&format!("/subresources/{sub}")).is_some_and(|s| !s.is_null());
        let names = routes::Names {
            group,
            version: name,
            kind,
            plural,
            namespaced,
            status: has("status"),
            scale: has("scale"),
            kind_def: &kind_def,
            list_def: &list_def,
        };
        let (v2_paths, v3_paths) = routes::paths(&names);
        let definitions = |v2: bool| {
            [
                (kind_def.clone(), schema::kind_schema(&info, v2)),
                (list_def.clone(), schema::list_schema(&info, &kind_def, v2)),
            ]
            .into_iter()
            .collect()
        };
        parts.push(CustomPart {
            group: group.to_owned(),
            version: name.to_owned(),
            v2_definitions: definitions(true),
            v3_schemas: definitions(false),
            v2_paths,
            v3_paths,
        });
    }
    parts
}

/// The parts of one CRD at one resourceVersion.
type Cached = (String, Vec<Arc<CustomPart>>);

/// Publishes the parts of the served CRDs into the shared documents, computing each CRD's
/// parts once per resourceVersion (as `Served::build` reuses its entries).
#[derive(Clone)]
pub struct Publisher {
    openapi: Arc<OpenApi>,
    /// CRD name -> its parts.
    cache: Arc<Mutex<HashMap<String, Cached>>>,
}

impl Publisher {
    /// A publisher into `openapi` (the server's documents, from the tier context).
    pub fn new(openapi: Arc<OpenApi>) -> Self {
        Self { openapi, cache: Arc::default() }
    }

    /// [`Publisher::publish`] on a blocking thread: the first publish after start computes
    /// the parts of every CRD, which must not stall the runtime. Awaited, so that publishes
    /// stay in the order of the refreshes.
    pub async fn publish_crds(&self, crds: Vec<Arc<Value>>) {
        let publisher = self.clone();
        let task = tokio::task::spawn_blocking(move || publisher.publish(crds.iter().map(|c| c.as_ref())));
        if let Err(e) = task.await {
            tracing::error!("publishing the OpenAPI parts of custom resources: {e}");
        }
    }

    /// Makes the documents describe exactly `crds` (the served ones). Nothing is rendered
    /// when no CRD changed since the last call.
    pub fn publish<'a>(&self, crds: impl IntoIterator<Item = &'a Value>) {
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        let mut next = HashMap::new();
        let mut changed = false;
        for crd in crds {
            let name = str_at(crd, "/metadata/name");
            let rv = str_at(crd, "/metadata/resourceVersion");
            let entry = match cache.remove(name) {
                Some(entry) if entry.0 == rv => entry,
                _ => {
                    changed = true;
                    (rv.to_owned(), crd_parts(crd).into_iter().map(Arc::new).collect())
                }
            };
            next.insert(name.to_owned(), entry);
        }
        changed |= !cache.is_empty();
        *cache = next;
        if changed {
            self.openapi.set_custom_parts(cache.values().flat_map(|(_, parts)| parts.iter().cloned()).collect());
        }
    }
}
