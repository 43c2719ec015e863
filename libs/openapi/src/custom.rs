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
use crate::{fnv_hex, security_scheme, v2_proto, Built, INFO_VERSION};

/// A JSON value kept as its text. Custom parts are many (thousands of CRDs, four per served
/// version) and read only when a document is rebuilt, where they are copied into it as they
/// are; as `serde_json::Value` trees they took several times their text's size.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct EncodedJson(String);

impl EncodedJson {
    /// The value's compact JSON text.
    pub fn new(value: &Value) -> Self {
        EncodedJson(serde_json::to_string(value).unwrap_or_else(|_| "null".into()))
    }

    /// The value, parsed again (tests and inspection; documents use the text).
    pub fn value(&self) -> Value {
        serde_json::from_str(&self.0).unwrap_or(Value::Null)
    }

    /// The JSON text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

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
    pub v2_paths: BTreeMap<String, EncodedJson>,
    /// Swagger 2.0 definitions by name (`com.example.v1.Widget`).
    pub v2_definitions: BTreeMap<String, EncodedJson>,
    /// OpenAPI 3.0 path items by path; references use `#/components/schemas/`.
    pub v3_paths: BTreeMap<String, EncodedJson>,
    /// OpenAPI 3.0 schemas by name.
    pub v3_schemas: BTreeMap<String, EncodedJson>,
    /// Names of the `#/components/schemas/` the v3 paths and schemas reference.
    pub v3_refs: Vec<String>,
}

/// The trees a [`CustomPart`] is made from.
#[derive(Debug, Clone, Default)]
pub struct CustomPartTrees {
    /// API group.
    pub group: String,
    /// API version.
    pub version: String,
    /// Swagger 2.0 path items by path.
    pub v2_paths: BTreeMap<String, Value>,
    /// Swagger 2.0 definitions by name.
    pub v2_definitions: BTreeMap<String, Value>,
    /// OpenAPI 3.0 path items by path.
    pub v3_paths: BTreeMap<String, Value>,
    /// OpenAPI 3.0 schemas by name.
    pub v3_schemas: BTreeMap<String, Value>,
}

impl CustomPart {
    /// Encodes the trees of a part and notes what its v3 side references.
    pub fn new(trees: CustomPartTrees) -> Self {
        let mut v3_refs = Vec::new();
        for value in trees.v3_paths.values().chain(trees.v3_schemas.values()) {
            refs_of(value, &mut v3_refs);
        }
        v3_refs.sort();
        v3_refs.dedup();
        let encode = |map: BTreeMap<String, Value>| map.into_iter().map(|(k, v)| (k, EncodedJson::new(&v))).collect();
        CustomPart {
            group: trees.group,
            version: trees.version,
            v2_paths: encode(trees.v2_paths),
            v2_definitions: encode(trees.v2_definitions),
            v3_paths: encode(trees.v3_paths),
            v3_schemas: encode(trees.v3_schemas),
            v3_refs,
        }
    }

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
/// clash the built-in entry stays (kube's static spec has the highest priority). The same
/// bytes serde_json writes for the built-in `SwaggerDocument`, with the parts' texts spliced in.
fn merged_v2(built: &Built, parts: &[Arc<CustomPart>]) -> Bytes {
    let defs = definitions();
    let mut all_defs: BTreeMap<&str, Json<'_>> = defs.defs.iter().map(|(k, v)| (k.as_str(), Json::Tree(v))).collect();
    all_defs.extend(built.extra.iter().map(|(k, v)| (k.as_str(), Json::Tree(v))));
    let mut paths: BTreeMap<&str, Json<'_>> = built.v2_paths.iter().map(|(k, v)| (k.as_str(), Json::Tree(v))).collect();
    for part in parts {
        for (name, schema) in &part.v2_definitions {
            all_defs.entry(name.as_str()).or_insert(Json::Text(schema));
        }
        for (path, item) in &part.v2_paths {
            paths.entry(path.as_str()).or_insert(Json::Text(item));
        }
    }
    let mut out = Vec::new();
    write_fields(
        &mut out,
        &[
            ("swagger", &|o| write_tree(o, &"2.0")),
            ("info", &|o| write_tree(o, &json!({ "title": "Kubernetes", "version": INFO_VERSION }))),
            ("paths", &|o| write_object(o, &paths)),
            ("definitions", &|o| write_object(o, &all_defs)),
            ("securityDefinitions", &|o| write_tree(o, &json!({ "BearerToken": security_scheme() }))),
            ("security", &|o| write_tree(o, &json!([{ "BearerToken": [] }]))),
        ],
    );
    Bytes::from(out)
}

/// Names of the `#/components/schemas/` references under `value`.
fn refs_of(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, inner) in map {
                match (key.as_str(), inner) {
                    ("$ref", Value::String(r)) => {
                        if let Some(name) = r.strip_prefix(V3_REF_PREFIX) {
                            out.push(name.to_owned());
                        }
                    }
                    _ => refs_of(inner, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| refs_of(v, out)),
        _ => {}
    }
}

/// A JSON value of a document being assembled: a built-in one (a tree) or a custom part's
/// (its text).
#[derive(Clone, Copy)]
enum Json<'a> {
    Tree(&'a Value),
    Text(&'a EncodedJson),
}

/// Writes `value` as JSON.
fn write_tree(out: &mut Vec<u8>, value: &impl serde::Serialize) {
    // Serializing a Value or a string into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, value);
}

/// Writes `{"<key>":<value>,...}` with each value written by its writer, in order, as
/// serde_json writes a map.
fn write_entries<'k, W: FnOnce(&mut Vec<u8>)>(out: &mut Vec<u8>, entries: impl Iterator<Item = (&'k str, W)>) {
    out.push(b'{');
    for (i, (key, write)) in entries.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_tree(out, &key);
        out.push(b':');
        write(out);
    }
    out.push(b'}');
}

/// Writes an object of `entries` in their (sorted) order.
fn write_object(out: &mut Vec<u8>, entries: &BTreeMap<&str, Json<'_>>) {
    write_entries(
        out,
        entries.iter().map(|(key, value)| {
            (*key, move |o: &mut Vec<u8>| match value {
                Json::Tree(v) => write_tree(o, v),
                Json::Text(t) => o.extend_from_slice(t.as_str().as_bytes()),
            })
        }),
    );
}

/// Writes the value of one field of a document.
type FieldWriter<'a> = &'a dyn Fn(&mut Vec<u8>);

/// Writes the fields of a document, in order.
fn write_fields(out: &mut Vec<u8>, fields: &[(&str, FieldWriter<'_>)]) {
    write_entries(out, fields.iter().map(|(key, write)| (*key, |o: &mut Vec<u8>| write(o))));
}

/// The v3 document of one custom group version: the parts' paths and schemas merged (as
/// kube's `MergeSpecsV3`), plus the built-in schemas they reference (ObjectMeta, Status,
/// autoscaling/v1 Scale, ...) and what those reference in turn.
fn gv_document(built: &Built, parts: &[Arc<CustomPart>]) -> (Bytes, String) {
    let defs = definitions();
    let mut paths: BTreeMap<&str, Json<'_>> = BTreeMap::new();
    let mut own: BTreeMap<&str, Json<'_>> = BTreeMap::new();
    let mut wanted: Vec<&str> = Vec::new();
    for part in parts {
        for (path, item) in &part.v3_paths {
            paths.entry(path.as_str()).or_insert(Json::Text(item));
        }
        for (name, schema) in &part.v3_schemas {
            own.entry(name.as_str()).or_insert(Json::Text(schema));
        }
        wanted.extend(part.v3_refs.iter().map(String::as_str));
    }
    wanted.retain(|name| !own.contains_key(name));
    wanted.sort_unstable();
    wanted.dedup();
    let lookup = |name: &str| defs.defs.get(name).or_else(|| built.extra.get(name));
    let roots: Vec<Value> = wanted.iter().map(|n| json!({ "$ref": format!("{V2_REF_PREFIX}{n}") })).collect();
    let roots: Vec<&Value> = roots.iter().collect();
    // The built-in schemas are few and need their references rewritten: copied.
    let builtin: Vec<(String, Value)> = referenced_closure(&roots, lookup)
        .into_iter()
        .filter_map(|name| {
            let mut schema = lookup(&name)?.clone();
            to_v3_refs(&mut schema);
            Some((name, schema))
        })
        .collect();
    let mut schemas: BTreeMap<&str, Json<'_>> = builtin.iter().map(|(name, schema)| (name.as_str(), Json::Tree(schema))).collect();
    schemas.extend(own);
    let mut out = Vec::new();
    write_fields(
        &mut out,
        &[
            ("openapi", &|o| write_tree(o, &"3.0.0")),
            ("info", &|o| write_tree(o, &json!({ "title": "Kubernetes CRD Swagger", "version": "v0.1.0" }))),
            ("paths", &|o| write_object(o, &paths)),
            (
                "components",
                &|o| {
                    write_fields(
                        o,
                        &[
                            ("schemas", &|o| write_object(o, &schemas)),
                            ("securitySchemes", &|o| write_tree(o, &json!({ "BearerToken": security_scheme() }))),
                        ],
                    )
                },
            ),
        ],
    );
    let bytes = Bytes::from(out);
    let hash = fnv_hex(&bytes);
    (bytes, hash)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::OpenApi;

    fn part() -> CustomPart {
        let schema = json!({"type": "object", "description": "A \"widget\" <b>", "properties": {"spec": {"type": "object"}}});
        let path = json!({"get": {"operationId": "listExampleComV1Widget", "responses": {"200": {"schema": {"$ref": "#/components/schemas/com.example.v1.Widget"}}}}});
        CustomPart::new(CustomPartTrees {
            group: "example.com".into(),
            version: "v1".into(),
            v2_paths: [("/apis/example.com/v1/widgets".to_owned(), path.clone())].into_iter().collect(),
            v2_definitions: [("com.example.v1.Widget".to_owned(), schema.clone())].into_iter().collect(),
            v3_paths: [("/apis/example.com/v1/widgets".to_owned(), path)].into_iter().collect(),
            v3_schemas: [("com.example.v1.Widget".to_owned(), schema)].into_iter().collect(),
        })
    }

    #[test]
    fn spliced_documents_are_the_json_serde_would_write() {
        let openapi = OpenApi::new(Vec::new());
        openapi.set_custom_parts(vec![Arc::new(part())]);
        for doc in [openapi.v2(), openapi.v3_group_version("apis/example.com/v1").expect("custom group version")] {
            let parsed: Value = serde_json::from_slice(&doc).expect("valid JSON");
            assert_eq!(serde_json::to_vec(&parsed).expect("serializes"), doc.to_vec(), "byte for byte");
        }
        let v2: Value = serde_json::from_slice(&openapi.v2()).expect("v2");
        assert_eq!(v2["definitions"]["com.example.v1.Widget"]["description"], "A \"widget\" <b>");
        assert!(v2["definitions"]["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"].is_object(), "built-in definitions stay");
        assert!(v2["paths"]["/apis/example.com/v1/widgets"]["get"].is_object());
        let v3: Value = serde_json::from_slice(&openapi.v3_group_version("apis/example.com/v1").expect("v3")).expect("v3 JSON");
        assert_eq!(v3["components"]["schemas"]["com.example.v1.Widget"]["properties"]["spec"]["type"], "object");
        assert_eq!(part().v3_refs, vec!["com.example.v1.Widget".to_owned()]);
    }
}
