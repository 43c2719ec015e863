//! OpenAPI documents for the served kinds (`/openapi/v2`, `/openapi/v3`) and the schema-driven
//! field checks behind `fieldValidation`.
//!
//! kubectl needs the documents for `explain`, for client-side patch computation and to learn
//! that the server validates fields itself; the server needs each kind's schema to report
//! unknown and duplicate fields the way kube-apiserver's typed decoder does. Both come from the
//! `schemars` impls of k8s-openapi, generated once per process on first use.

mod definitions;
mod duplicates;
mod fields;
mod kinds;
mod list_docs;
mod messages;
mod patch_meta;
mod patch_schema;
mod apply_schema;
mod custom;
mod paths;
mod quantity;
mod render;
mod structural;
mod v2_proto;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, OnceLock, RwLock};

use bytes::Bytes;
use serde_json::{json, Map, Value};

pub use custom::{CustomPart, CustomPartTrees, EncodedJson};
pub use fields::FieldProblems;
pub use apply_schema::{apply_schema, ApplyNode};
pub use patch_schema::{patch_schema, SchemaNode};
/// The syntax check kube's decoder makes on a Quantity (`resource.ParseQuantity`), with its
/// error text; public so that the fuzz targets can hold it against CEL's quantity parser.
pub use quantity::check as check_quantity;
pub use structural::structural_schema;
pub use messages::{decode_error_message, first_type_error, strict_message, warnings};

use definitions::{
    custom_definition_name, definitions, free_form_schema, list_schema, referenced_closure,
};
use paths::{resource_paths, ResourceSchemas};

/// Version string kube reports in the documents' `info`.
const INFO_VERSION: &str = "v1.36.0";

/// One served resource, as the lead's catalog describes it (this crate does not depend on the
/// registry).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServedResource {
    pub group: String,
    pub version: String,
    pub kind: String,
    /// Plural resource name (`deployments`).
    pub resource: String,
    pub namespaced: bool,
    /// Kube verbs: get, list, watch, create, update, patch, delete, deletecollection.
    pub verbs: Vec<String>,
    /// Subresource names (`status`, `scale`, or `deployments/status`).
    pub subresources: Vec<String>,
    /// Whether kube declares the object (not `Status`) as the DELETE answer: the registry's
    /// `ReturnDeletedObject` as kube's published OpenAPI shows it.
    pub delete_returns_object: bool,
}

/// The rendered documents, built together on first request, and the pieces the documents
/// with custom parts are merged from.
struct Built {
    v2: Bytes,
    v2_protobuf: Bytes,
    v3_index: Bytes,
    v3: HashMap<String, Bytes>,
    /// v2 path items of the built-in resources.
    v2_paths: BTreeMap<String, Value>,
    /// Definitions of served kinds k8s-openapi does not know (beside `definitions()`).
    extra: Map<String, Value>,
    /// The built-in entries of the v3 index.
    v3_index_entries: Map<String, Value>,
}

/// OpenAPI documents and field checks for a fixed set of served resources.
///
/// Building the documents takes a noticeable moment (hundreds of schemas), so it happens
/// lazily on the first document request; call [`OpenApi::warm`] from a blocking context at
/// startup to keep that off request paths.
///
/// Custom resources come and go at run time: [`OpenApi::set_custom_parts`] swaps their parts;
/// the documents that include them are rebuilt on the next request, once per change.
pub struct OpenApi {
    served: Vec<ServedResource>,
    built: OnceLock<Built>,
    custom: RwLock<Arc<custom::CustomDocs>>,
    /// Brings the custom parts up to date before a document is read (see
    /// [`OpenApi::set_custom_source`]).
    custom_source: OnceLock<CustomSource>,
}

/// What [`OpenApi::set_custom_source`] takes: called before every document read.
pub type CustomSource = Box<dyn Fn() + Send + Sync>;

impl OpenApi {
    /// Cheap: nothing is generated until a document or a field check needs it.
    pub fn new(served: Vec<ServedResource>) -> Self {
        OpenApi {
            served,
            built: OnceLock::new(),
            custom: RwLock::new(Arc::default()),
            custom_source: OnceLock::new(),
        }
    }

    /// Lets the owner of the custom parts compute them when they are needed rather than when
    /// they change: `flush` runs before every document read (on the reader's blocking thread)
    /// and calls [`OpenApi::set_custom_parts`] if parts are pending, so a burst of CRD changes
    /// costs one computation, and none while nobody reads. Set once; later calls are ignored.
    pub fn set_custom_source(&self, flush: CustomSource) {
        let _ = self.custom_source.set(flush);
    }

    /// Replaces the custom parts (every served version of every Established CRD). Only the
    /// documents the change touches are dropped: v2, its protobuf form, the v3 index and the
    /// v3 documents of group versions whose parts differ. Cheap: nothing is rendered here.
    pub fn set_custom_parts(&self, parts: Vec<Arc<CustomPart>>) {
        let mut custom = self.custom.write().unwrap_or_else(|p| p.into_inner());
        if let Some(next) = custom::CustomDocs::next(&custom, parts) {
            *custom = Arc::new(next);
        }
    }

    fn custom(&self) -> Option<Arc<custom::CustomDocs>> {
        if let Some(flush) = self.custom_source.get() {
            flush();
        }
        let custom = self.custom.read().unwrap_or_else(|p| p.into_inner()).clone();
        (!custom.is_empty()).then_some(custom)
    }

    /// Builds the definitions and every document now (CPU-bound; run it on a blocking thread).
    pub fn warm(&self) {
        self.built();
    }

    /// `GET /openapi/v2`: the Swagger 2.0 document (JSON).
    pub fn v2(&self) -> Bytes {
        match self.custom() {
            Some(custom) => custom.v2(self.built()),
            None => self.built().v2.clone(),
        }
    }

    /// `GET /openapi/v2` in gnostic's protobuf form (`openapi.v2.Document`), which kubectl
    /// 1.27 and 1.28 ask for before `explain` and client-side validation.
    pub fn v2_protobuf(&self) -> Bytes {
        match self.custom() {
            Some(custom) => custom.v2_protobuf(self.built()),
            None => self.built().v2_protobuf.clone(),
        }
    }

    /// `GET /openapi/v3`: the index of group-version documents with their content hashes.
    pub fn v3_index(&self) -> Bytes {
        match self.custom() {
            Some(custom) => custom.v3_index(self.built()),
            None => self.built().v3_index.clone(),
        }
    }

    /// `GET /openapi/v3/<gv path>` (`api/v1`, `apis/apps/v1`): the OpenAPI 3.0 document of one
    /// group version; None for a group version that is not served.
    pub fn v3_group_version(&self, gv_path: &str) -> Option<Bytes> {
        let key = gv_path.trim_matches('/');
        if let Some(doc) = self.built().v3.get(key) {
            return Some(doc.clone());
        }
        self.custom()?.v3_group_version(self.built(), key).map(|(doc, _)| doc)
    }

    /// The hash the v3 index advertises for a group version, for `?hash=` cache validation.
    pub fn v3_hash(&self, gv_path: &str) -> Option<String> {
        let key = gv_path.trim_matches('/');
        if let Some(doc) = self.built().v3.get(key) {
            return Some(fnv_hex(doc));
        }
        self.custom()?.v3_group_version(self.built(), key).map(|(_, hash)| hash)
    }

    /// Unknown fields, duplicate fields and type errors of `obj`, a `group/version, Kind`
    /// object, as kube-apiserver's typed decoder reports them. `raw_json` is the request body
    /// when it was JSON (duplicates cannot be seen in a parsed value). Kinds without a known
    /// schema (custom resources) report nothing.
    pub fn field_problems(
        &self,
        group: &str,
        version: &str,
        kind: &str,
        obj: &Value,
        raw_json: Option<&[u8]>,
    ) -> FieldProblems {
        let defs = definitions();
        let key = (group.to_string(), version.to_string(), kind.to_string());
        let Some(root) = defs.by_gvk.get(&key) else {
            return FieldProblems::default();
        };
        let mut problems = fields::Checker::new(&defs.defs).check_root(root, obj);
        if let Some(raw) = raw_json {
            // An unknown field is reported once as unknown, not again as duplicate.
            let under_unknown = |path: &str| {
                problems.unknown.iter().any(|u| {
                    path == u
                        || path
                            .strip_prefix(u.as_str())
                            .is_some_and(|rest| rest.starts_with('.') || rest.starts_with('['))
                })
            };
            let duplicate: Vec<String> = duplicates::find_duplicates(raw)
                .into_iter()
                .filter(|d| !under_unknown(d))
                .collect();
            problems.duplicate = duplicate;
            if !problems.unknown.is_empty() && !problems.duplicate.is_empty() {
                problems.key_order = duplicates::key_occurrences(raw);
            }
        }
        problems
    }

    /// Drops the fields of `obj` that its kind's schema does not know, as kube-apiserver's
    /// typed decoding does (after [`OpenApi::field_problems`] has reported them). Kinds without
    /// a known schema are left alone.
    pub fn prune_unknown_fields(&self, group: &str, version: &str, kind: &str, obj: &mut Value) {
        let defs = definitions();
        let key = (group.to_string(), version.to_string(), kind.to_string());
        if let Some(root) = defs.by_gvk.get(&key) {
            fields::Checker::new(&defs.defs).prune_root(root, obj);
        }
    }

    fn built(&self) -> &Built {
        self.built.get_or_init(|| build(&self.served))
    }
}

/// A property of a built-in definition (`io.k8s.api.core.v1.ConfigMap`, `apiVersion`), so that
/// the parts of custom resources describe `apiVersion`, `kind` and `metadata` with the very
/// words the built-in kinds use.
pub fn builtin_property(definition: &str, property: &str) -> Option<Value> {
    definitions().defs.get(definition)?.get("properties")?.get(property).cloned()
}

/// kube's description of the `metadata` of a documented list type (`list_docs.rs`), e.g.
/// `PartialObjectMetadataList`'s, which kube's custom-resource lists reuse.
pub fn list_metadata_description(list_definition: &str) -> Option<&'static str> {
    list_docs::LIST_DOCS.iter().find(|(name, ..)| *name == list_definition).map(|(.., metadata)| *metadata)
}

/// `api/v1` or `apis/<group>/<version>`: the key of a group version in the v3 index.
fn gv_key(group: &str, version: &str) -> String {
    paths::gv_prefix(group, version)
        .trim_start_matches('/')
        .to_string()
}

fn build(served: &[ServedResource]) -> Built {
    let defs = definitions();
    let mut extra = Map::new();
    let mut v2_paths: BTreeMap<String, Value> = BTreeMap::new();
    let mut v3_paths: BTreeMap<String, BTreeMap<String, Value>> = BTreeMap::new();
    let mut seen = HashSet::new();

    for r in served {
        if !seen.insert((r.group.clone(), r.version.clone(), r.resource.clone())) {
            continue;
        }
        let schemas = resource_schemas(r, defs, &mut extra);
        let gv = gv_key(&r.group, &r.version);
        let gv_paths = v3_paths.entry(gv).or_default();
        for item in resource_paths(r, &schemas) {
            v2_paths.insert(item.path.clone(), render::v2_path_item(&item));
            gv_paths.insert(item.path.clone(), render::v3_path_item(&item));
        }
    }

    let mut all_defs: BTreeMap<&str, &Value> =
        defs.defs.iter().map(|(k, v)| (k.as_str(), v)).collect();
    for (name, schema) in &extra {
        all_defs.insert(name.as_str(), schema);
    }
    let lookup = |name: &str| all_defs.get(name).copied();

    // Serialized from references: the definitions are not copied for the v2 document.
    let borrowed_paths: BTreeMap<&str, &Value> = v2_paths.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let v2 = SwaggerDocument {
        swagger: "2.0",
        info: json!({ "title": "Kubernetes", "version": INFO_VERSION }),
        paths: &borrowed_paths,
        definitions: &all_defs,
        security_definitions: json!({ "BearerToken": security_scheme() }),
        security: json!([{ "BearerToken": [] }]),
    };
    let v2 = Bytes::from(serde_json::to_vec(&v2).unwrap_or_default());
    drop(borrowed_paths);
    let v2_protobuf = Bytes::from(v2_proto::document(&serde_json::from_slice(&v2).unwrap_or(Value::Null)));

    let mut v3 = HashMap::new();
    let mut index = Map::new();
    for (gv, paths) in v3_paths {
        let roots: Vec<&Value> = paths.values().collect();
        let mut schemas = Map::new();
        for name in referenced_closure(&roots, lookup) {
            if let Some(schema) = lookup(&name) {
                schemas.insert(name, schema.clone());
            }
        }
        let mut doc = json!({
            "openapi": "3.0.0",
            "info": { "title": "Kubernetes", "version": INFO_VERSION },
            "paths": paths,
            "components": { "schemas": schemas, "securitySchemes": { "BearerToken": security_scheme() } },
        });
        render::to_v3_refs(&mut doc);
        let bytes = Bytes::from(serde_json::to_vec(&doc).unwrap_or_default());
        index.insert(
            gv.clone(),
            json!({ "serverRelativeURL": format!("/openapi/v3/{gv}?hash={}", fnv_hex(&bytes)) }),
        );
        v3.insert(gv, bytes);
    }

    Built {
        v2,
        v2_protobuf,
        v3_index: Bytes::from(serde_json::to_vec(&json!({ "paths": &index })).unwrap_or_default()),
        v3,
        v2_paths,
        extra,
        v3_index_entries: index,
    }
}

/// The Swagger 2.0 document, borrowing the shared definitions.
#[derive(serde::Serialize)]
struct SwaggerDocument<'a> {
    swagger: &'static str,
    info: Value,
    paths: &'a BTreeMap<&'a str, &'a Value>,
    definitions: &'a BTreeMap<&'a str, &'a Value>,
    #[serde(rename = "securityDefinitions")]
    security_definitions: Value,
    security: Value,
}

fn security_scheme() -> Value {
    json!({ "type": "apiKey", "description": "Bearer Token authentication", "name": "authorization", "in": "header" })
}

/// Definition names for a served kind; kinds k8s-openapi does not know get free-form schemas
/// under kube's custom-resource naming.
fn resource_schemas(
    r: &ServedResource,
    defs: &definitions::Definitions,
    extra: &mut Map<String, Value>,
) -> ResourceSchemas {
    let gvk = |kind: &str| (r.group.clone(), r.version.clone(), kind.to_string());
    let list_kind = format!("{}List", r.kind);
    let kind_def = match defs.by_gvk.get(&gvk(&r.kind)) {
        Some(name) => name.clone(),
        None => {
            let name = custom_definition_name(&r.group, &r.version, &r.kind);
            extra
                .entry(name.clone())
                .or_insert_with(|| free_form_schema(&r.group, &r.version, &r.kind));
            name
        }
    };
    let list_def = match defs.by_gvk.get(&gvk(&list_kind)) {
        Some(name) => name.clone(),
        None => {
            let name = format!("{kind_def}List");
            extra.entry(name.clone()).or_insert_with(|| {
                list_schema(&kind_def, &r.group, &r.version, &r.kind, &list_kind)
            });
            name
        }
    };
    ResourceSchemas { kind_def, list_def }
}

/// FNV-1a 64 of `bytes` as 16 upper-case hex digits: a stable content tag for `?hash=`.
fn fnv_hex(bytes: &[u8]) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in bytes {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{hash:016X}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv_is_stable() {
        assert_eq!(fnv_hex(b""), "CBF29CE484222325");
        assert_eq!(fnv_hex(b"a"), "AF63DC4C8601EC8C");
    }

    /// Every kind k8s-openapi knows, served with all verbs: every v3 document must be
    /// self-contained. Also reports the build cost (`--nocapture`).
    #[test]
    fn full_catalog_documents_are_self_contained() {
        let served: Vec<ServedResource> = kinds::KINDS
            .iter()
            .filter(|k| k.list_kind.is_some())
            .map(|k| ServedResource {
                group: k.group.into(),
                version: k.version.into(),
                kind: k.kind.into(),
                resource: format!("{}s", k.kind.to_lowercase()),
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
                subresources: vec!["status".into()],
                delete_returns_object: false,
            })
            .collect();
        let rss = || {
            std::fs::read_to_string("/proc/self/status")
                .ok()
                .and_then(|s| {
                    s.lines()
                        .find(|l| l.starts_with("VmRSS:"))
                        .map(str::to_string)
                })
                .unwrap_or_default()
        };
        let rss_before = rss();
        let started = std::time::Instant::now();
        let api = OpenApi::new(served);
        api.warm();
        let built = api.built();
        let v3_total: usize = built.v3.values().map(|b| b.len()).sum();
        eprintln!(
            "full catalog: {:?}, {rss_before} -> {}, v2 {} bytes, {} v3 documents totalling {} bytes",
            started.elapsed(),
            rss(),
            built.v2.len(),
            built.v3.len(),
            v3_total
        );
        for (gv, doc) in &built.v3 {
            let doc: Value = serde_json::from_slice(doc).expect("json");
            let mut refs = Vec::new();
            collect_string_refs(&doc, &mut refs);
            for r in refs {
                let name = r
                    .strip_prefix(render::V3_REF_PREFIX)
                    .unwrap_or_else(|| panic!("{gv}: bad ref {r}"));
                assert!(
                    doc["components"]["schemas"].get(name).is_some(),
                    "{gv}: dangling {r}"
                );
            }
        }
    }

    fn collect_string_refs(value: &Value, out: &mut Vec<String>) {
        match value {
            Value::Object(map) => {
                for (k, v) in map {
                    match (k.as_str(), v) {
                        ("$ref", Value::String(r)) => out.push(r.clone()),
                        _ => collect_string_refs(v, out),
                    }
                }
            }
            Value::Array(items) => items.iter().for_each(|v| collect_string_refs(v, out)),
            _ => {}
        }
    }

    #[test]
    fn gv_keys() {
        assert_eq!(gv_key("", "v1"), "api/v1");
        assert_eq!(gv_key("apps", "v1"), "apis/apps/v1");
    }
}
