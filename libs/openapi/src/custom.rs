//! Parts of the documents that change at run time (custom resources), merged with the built-in
//! documents the way kube's apiextensions-apiserver merges its CRD specs: the built-in
//! (static) paths and definitions win every conflict, each group version of custom resources
//! gets its own v3 document, and everything is rebuilt lazily, once per change.
//!
//! The merged v2 document, its protobuf form and the v3 index are rebuilt on the first request
//! after a change; a v3 group-version document only when the parts of that group version
//! changed, so a CRD update with 2,000 CRDs served rebuilds one small document (plus v2 and the
//! index when asked for).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use serde_json::{json, Map, Value};

use crate::definitions::{definitions, referenced_closure, V2_REF_PREFIX};
use crate::render::{to_v3_refs, V3_REF_PREFIX};
use crate::{fnv_hex, security_scheme, v2_proto, Built, SwaggerDocument, INFO_VERSION};

/// What one served version of a custom resource adds to the documents: its paths and
/// definitions, in Swagger 2.0 form for `/openapi/v2` and in OpenAPI 3.0 form for its group
/// version's `/openapi/v3` document (the two differ: v2 drops what kubectl's v2 parser cannot
/// read, such as `nullable` and `anyOf`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CustomPart {
    /// API group (never empty for a custom resource).
    pub group: String,
    /// API version.
    pub version: String,
    /// Swagger 2.0 path items by path; references use `#/definitions/`.
    pub v2_paths: BTreeMap<String, Value>,
    /// Swagger 2.0 definitions by name (`com.example.v1.Widget`).
    pub v2_definitions: BTreeMap<String, Value>,
    /// OpenAPI 3.0 path items by path; references use `#/components/schemas/`.
    pub v3_paths: BTreeMap<String, Value>,
    /// OpenAPI 3.0 schemas by name.
    pub v3_schemas: BTreeMap<String, Value>,
}

impl CustomPart {
    /// `apis/<group>/<version>`: the key of the part's v3 document.
    pub fn gv_key(&self) -> String {
        crate::gv_key(&self.group, &self.version)
    }
}

/// One custom group version's v3 document, built on first request.
#[derive(Default)]
pub(crate) struct GvDoc {
    parts: Vec<Arc<CustomPart>>,
    /// The document and its hash.
    doc: OnceLock<(Bytes, String)>,
}

/// The custom parts of one moment and the documents built from them.
#[derive(Default)]
pub(crate) struct CustomDocs {
    parts: Vec<Arc<CustomPart>>,
    by_gv: HashMap<String, Arc<GvDoc>>,
    v2: OnceLock<Bytes>,
    v2_protobuf: OnceLock<Bytes>,
    v3_index: OnceLock<Bytes>,
}

fn same_parts(a: &[Arc<CustomPart>], b: &[Arc<CustomPart>]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| Arc::ptr_eq(x, y) || x == y)
}

impl CustomDocs {
    /// The state for `parts`, keeping the cached documents of `previous` that `parts` does not
    /// change. None when nothing changed at all.
    pub(crate) fn next(previous: &CustomDocs, mut parts: Vec<Arc<CustomPart>>) -> Option<CustomDocs> {
        parts.sort_by(|a, b| {
            (&a.group, &a.version, a.v2_definitions.keys().next()).cmp(&(
                &b.group,
                &b.version,
                b.v2_definitions.keys().next(),
            ))
        });
        if same_parts(&previous.parts, &parts) {
            return None;
        }
        let mut grouped: HashMap<String, Vec<Arc<CustomPart>>> = HashMap::new();
        for part in &parts {
            grouped.entry(part.gv_key()).or_default().push(part.clone());
        }
        let by_gv = grouped
            .into_iter()
            .map(|(gv, parts)| {
                let doc = match previous.by_gv.get(&gv) {
                    Some(old) if same_parts(&old.parts, &parts) => old.clone(),
                    _ => Arc::new(GvDoc { parts, doc: OnceLock::new() }),
                };
                (gv, doc)
            })
            .collect();
        Some(CustomDocs { parts, by_gv, ..CustomDocs::default() })
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.parts.is_empty()
    }

    /// The merged v2 document (JSON).
    pub(crate) fn v2(&self, built: &Built) -> Bytes {
        self.v2.get_or_init(|| merged_v2(built, &self.parts)).clone()
    }

    /// The merged v2 document in gnostic protobuf form.
    pub(crate) fn v2_protobuf(&self, built: &Built) -> Bytes {
        self.v2_protobuf
            .get_or_init(|| {
                let v2 = self.v2(built);
                Bytes::from(v2_proto::document(&serde_json::from_slice(&v2).unwrap_or(Value::Null)))
            })
            .clone()
    }

    /// The v3 document of a custom group version and its hash; None for group versions no
    /// custom part has (or that the built-in documents own).
    pub(crate) fn v3_group_version(&self, built: &Built, gv: &str) -> Option<(Bytes, String)> {
        if built.v3.contains_key(gv) {
            return None;
        }
        let doc = self.by_gv.get(gv)?;
        Some(doc.doc.get_or_init(|| gv_document(built, &doc.parts)).clone())
    }

    /// The v3 index: the built-in group versions and every custom one.
    pub(crate) fn v3_index(&self, built: &Built) -> Bytes {
        self.v3_index
            .get_or_init(|| {
                let mut entries: BTreeMap<String, Value> =
                    built.v3_index_entries.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
                for gv in self.by_gv.keys() {
                    if let Some((_, hash)) = self.v3_group_version(built, gv) {
                        entries.insert(
                            gv.clone(),
                            json!({ "serverRelativeURL": format!("/openapi/v3/{gv}?hash={hash}") }),
                        );
                    }
                }
                let paths: Map<String, Value> = entries.into_iter().collect();
                Bytes::from(serde_json::to_vec(&json!({ "paths": paths })).unwrap_or_default())
            })
            .clone()
    }
}

/// The built-in v2 document with every custom part's paths and definitions added; on a name
/// clash the built-in entry stays (kube's static spec has the highest priority).
fn merged_v2(built: &Built, parts: &[Arc<CustomPart>]) -> Bytes {
    let defs = definitions();
    let mut all_defs: BTreeMap<&str, &Value> = defs.defs.iter().map(|(k, v)| (k.as_str(), v)).collect();
    all_defs.extend(built.extra.iter().map(|(k, v)| (k.as_str(), v)));
    let mut paths: BTreeMap<&str, &Value> = built.v2_paths.iter().map(|(k, v)| (k.as_str(), v)).collect();
    for part in parts {
        for (name, schema) in &part.v2_definitions {
            all_defs.entry(name.as_str()).or_insert(schema);
        }
        for (path, item) in &part.v2_paths {
            paths.entry(path.as_str()).or_insert(item);
        }
    }
    let doc = SwaggerDocument {
        swagger: "2.0",
        info: json!({ "title": "Kubernetes", "version": INFO_VERSION }),
        paths: &paths,
        definitions: &all_defs,
        security_definitions: json!({ "BearerToken": security_scheme() }),
        security: json!([{ "BearerToken": [] }]),
    };
    Bytes::from(serde_json::to_vec(&doc).unwrap_or_default())
}

/// Names of the `#/components/schemas/` references under `value`.
fn v3_refs(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, inner) in map {
                match (key.as_str(), inner) {
                    ("$ref", Value::String(r)) => {
                        if let Some(name) = r.strip_prefix(V3_REF_PREFIX) {
                            out.push(name.to_owned());
                        }
                    }
                    _ => v3_refs(inner, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| v3_refs(v, out)),
        _ => {}
    }
}

/// The v3 document of one custom group version: the parts' paths and schemas merged (as
/// kube's `MergeSpecsV3`), plus the built-in schemas they reference (ObjectMeta, Status,
/// autoscaling/v1 Scale, ...) and what those reference in turn.
fn gv_document(built: &Built, parts: &[Arc<CustomPart>]) -> (Bytes, String) {
    let defs = definitions();
    let mut paths: BTreeMap<&str, &Value> = BTreeMap::new();
    let mut own: BTreeMap<&str, &Value> = BTreeMap::new();
    let mut wanted = Vec::new();
    for part in parts {
        for (path, item) in &part.v3_paths {
            paths.entry(path.as_str()).or_insert(item);
            v3_refs(item, &mut wanted);
        }
        for (name, schema) in &part.v3_schemas {
            own.entry(name.as_str()).or_insert(schema);
            v3_refs(schema, &mut wanted);
        }
    }
    wanted.retain(|name| !own.contains_key(name.as_str()));
    wanted.sort();
    wanted.dedup();
    let lookup = |name: &str| defs.defs.get(name).or_else(|| built.extra.get(name));
    let roots: Vec<Value> = wanted.iter().map(|n| json!({ "$ref": format!("{V2_REF_PREFIX}{n}") })).collect();
    let roots: Vec<&Value> = roots.iter().collect();
    let mut schemas: BTreeMap<String, Value> = BTreeMap::new();
    for name in referenced_closure(&roots, lookup) {
        if let Some(schema) = lookup(&name) {
            let mut schema = schema.clone();
            to_v3_refs(&mut schema);
            schemas.insert(name, schema);
        }
    }
    for (name, schema) in own {
        schemas.insert(name.to_owned(), schema.clone());
    }
    let doc = json!({
        "openapi": "3.0.0",
        "info": { "title": "Kubernetes CRD Swagger", "version": "v0.1.0" },
        "paths": paths,
        "components": { "schemas": schemas, "securitySchemes": { "BearerToken": security_scheme() } },
    });
    let bytes = Bytes::from(serde_json::to_vec(&doc).unwrap_or_default());
    let hash = fnv_hex(&bytes);
    (bytes, hash)
}
