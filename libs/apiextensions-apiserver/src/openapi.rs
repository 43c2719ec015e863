//! The OpenAPI parts of custom resources, as kube's apiextensions-apiserver publishes them
//! (`pkg/controller/openapi/builder`, its v2 controller and its v3 controller): for every served
//! version of every Established CRD, the definitions `<reversed group>.<version>.<Kind>` and
//! `...<Kind>List` and the paths of every verb and subresource, in Swagger 2.0 form for
//! `/openapi/v2` and OpenAPI 3.0 form for `/openapi/v3/apis/<group>/<version>`.
//!
//! The tier offers every served CRD to a [`Publisher`] after each refresh; parts are computed
//! once per CRD resourceVersion, when a document is read or the CRDs have been quiet for a
//! moment, and swapped into the shared [`OpenApi`], which rebuilds only the documents that
//! changed, on their next request. Custom resources never reach
//! `OpenApi::field_problems`: their schemas live only in the published documents.

mod routes;
mod schema;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kapi_openapi::{CustomPart, CustomPartTrees, OpenApi};
use serde_json::Value;
use tokio::sync::Notify;

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
    crd_part_trees(crd).into_iter().map(CustomPart::new).collect()
}

/// [`crd_parts`] before encoding: the trees, which tests read.
fn crd_part_trees(crd: &Value) -> Vec<CustomPartTrees> {
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
        parts.push(CustomPartTrees {
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

/// How long the CRDs must stay unchanged before their parts are computed ahead of a read.
const QUIET: Duration = Duration::from_secs(1);

/// Publishes the parts of the served CRDs into the shared documents. Parts are computed when
/// a document is read (the documents are never stale) or once the CRDs have been quiet for a
/// moment, not on every change: during a burst of CRD creates that CPU goes to the creates
/// and the controllers that establish them. Each CRD's parts are computed once per
/// resourceVersion (as `Served::build` reuses its entries).
#[derive(Clone)]
pub struct Publisher {
    openapi: Arc<OpenApi>,
    /// CRD name -> its parts. Held while parts are computed, so a reader that arrives
    /// meanwhile waits for them instead of reading the old documents.
    cache: Arc<Mutex<HashMap<String, Cached>>>,
    /// The served CRDs not yet published (the latest offer wins).
    pending: Arc<Mutex<Option<Vec<Arc<Value>>>>>,
    offered: Arc<Notify>,
}

impl Publisher {
    /// A publisher into `openapi` (the server's documents, from the tier context) that the
    /// documents ask for pending parts before each read. Needs a Tokio runtime: it starts the
    /// task that publishes once offers stop coming.
    pub fn start(openapi: Arc<OpenApi>) -> Self {
        let publisher = Self::new(openapi.clone());
        // Weak: the documents hold this closure and must not keep the publisher alive.
        let (cache, pending, docs) = (Arc::downgrade(&publisher.cache), Arc::downgrade(&publisher.pending), Arc::downgrade(&openapi));
        openapi.set_custom_source(Box::new(move || {
            if let (Some(cache), Some(pending), Some(openapi)) = (cache.upgrade(), pending.upgrade(), docs.upgrade()) {
                Publisher { openapi, cache, pending, offered: Arc::default() }.flush();
            }
        }));
        tokio::spawn(publisher.clone().publish_when_quiet());
        publisher
    }

    /// A publisher that computes parts only when [`Publisher::publish`] or
    /// [`Publisher::flush`] is called.
    pub fn new(openapi: Arc<OpenApi>) -> Self {
        Self { openapi, cache: Arc::default(), pending: Arc::default(), offered: Arc::default() }
    }

    /// Makes `crds` (the served ones) the set to publish; cheap, nothing is computed here.
    pub fn offer(&self, crds: Vec<Arc<Value>>) {
        *self.pending.lock().unwrap_or_else(|p| p.into_inner()) = Some(crds);
        self.offered.notify_one();
    }

    /// Publishes what was offered once no offer came for [`QUIET`], so that the first read
    /// after a burst finds the parts ready. Ends when the tier drops its publisher.
    async fn publish_when_quiet(self) {
        loop {
            self.offered.notified().await;
            while tokio::time::timeout(QUIET, self.offered.notified()).await.is_ok() {}
            if Arc::strong_count(&self.pending) <= 1 {
                return;
            }
            let publisher = self.clone();
            if let Err(e) = tokio::task::spawn_blocking(move || publisher.flush()).await {
                tracing::error!("publishing the OpenAPI parts of custom resources: {e}");
            }
        }
    }

    /// Publishes the pending offer, if any (CPU-bound: call it on a blocking thread).
    pub fn flush(&self) {
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        let Some(crds) = self.pending.lock().unwrap_or_else(|p| p.into_inner()).take() else { return };
        self.publish_into(&mut cache, crds.iter().map(|c| c.as_ref()));
    }

    /// Makes the documents describe exactly `crds` (the served ones), now. Nothing is
    /// rendered when no CRD changed since the last call.
    pub fn publish<'a>(&self, crds: impl IntoIterator<Item = &'a Value>) {
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        self.pending.lock().unwrap_or_else(|p| p.into_inner()).take();
        self.publish_into(&mut cache, crds);
    }

    fn publish_into<'a>(&self, cache: &mut HashMap<String, Cached>, crds: impl IntoIterator<Item = &'a Value>) {
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
