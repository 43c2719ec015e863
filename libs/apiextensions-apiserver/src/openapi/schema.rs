//! The definitions of a custom resource version, as kube's CRD OpenAPI builder derives them
//! from the version's structural schema: int-or-string unfolded into `anyOf`, `apiVersion`,
//! `kind` and `metadata` added (also inside embedded resources), the group-version-kind and
//! selectable-fields extensions, and for Swagger 2.0 the downgrade kubectl's v2 parser needs
//! (no junctors, nullable and preserve-unknown-fields nodes left untyped, no defaults).

use serde_json::{json, Map, Value};

const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
const LIST_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta";
/// kube's custom-resource lists describe `metadata` as this list type does.
const PARTIAL_OBJECT_METADATA_LIST: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.PartialObjectMetadataList";
/// A built-in kind whose `apiVersion`, `kind` and `metadata` descriptions are TypeMeta's and
/// ObjectMeta's.
const TYPED_KIND: &str = "io.k8s.api.core.v1.ConfigMap";

fn is_true(schema: &Value, key: &str) -> bool {
    schema.get(key).and_then(Value::as_bool) == Some(true)
}

/// Calls `f` on every structural node (pre-order: the node, then `properties`, `items` and
/// `additionalProperties` as they are after `f` ran).
fn visit(schema: &mut Value, f: &mut impl FnMut(&mut Map<String, Value>)) {
    let Value::Object(node) = schema else { return };
    f(node);
    if let Some(Value::Object(props)) = node.get_mut("properties") {
        props.values_mut().for_each(|p| visit(p, f));
    }
    if let Some(items) = node.get_mut("items") {
        visit(items, f);
    }
    if let Some(additional) = node.get_mut("additionalProperties") {
        visit(additional, f);
    }
}

/// Drops what the structural form does not keep: false booleans and empty lists have no
/// representation in kube's schema type and are not published.
fn normalize(node: &mut Map<String, Value>) {
    for key in [
        "nullable",
        "uniqueItems",
        "exclusiveMaximum",
        "exclusiveMinimum",
        "x-kubernetes-preserve-unknown-fields",
        "x-kubernetes-embedded-resource",
        "x-kubernetes-int-or-string",
    ] {
        if node.get(key) == Some(&Value::Bool(false)) {
            node.remove(key);
        }
    }
    for key in ["required", "x-kubernetes-list-map-keys", "x-kubernetes-validations", "enum", "allOf", "anyOf", "oneOf"]
    {
        if node.get(key).and_then(Value::as_array).is_some_and(Vec::is_empty) {
            node.remove(key);
        }
    }
    if node.get("description").and_then(Value::as_str) == Some("") {
        node.remove("description");
    }
}

fn int_or_string_any_of() -> Value {
    json!([{ "type": "integer" }, { "type": "string" }])
}

/// kube's `Unfold`: an int-or-string node gets `anyOf: [integer, string]` unless it already
/// says so (directly or as the first `allOf`); with an `anyOf` of its own, the pair goes first
/// into `allOf`.
fn unfold(node: &mut Map<String, Value>) {
    if node.get("x-kubernetes-int-or-string") != Some(&Value::Bool(true)) {
        return;
    }
    let pair = int_or_string_any_of();
    if node.get("anyOf") == Some(&pair) {
        return;
    }
    if node.get("allOf").and_then(|a| a.get(0)).and_then(|first| first.get("anyOf")) == Some(&pair) {
        return;
    }
    if node.contains_key("anyOf") {
        let mut all_of = vec![json!({ "anyOf": pair })];
        if let Some(Value::Array(rest)) = node.remove("allOf") {
            all_of.extend(rest);
        }
        node.insert("allOf".into(), Value::Array(all_of));
    } else {
        node.insert("anyOf".into(), pair);
    }
}

/// kube's v2 downgrade of one node (`ToStructuralOpenAPIV2`).
fn to_v2(node: &mut Map<String, Value>) {
    for key in ["allOf", "oneOf", "anyOf", "not"] {
        node.remove(key);
    }
    if node.remove("nullable") == Some(Value::Bool(true)) {
        for key in ["type", "items", "properties"] {
            node.remove(key);
        }
    }
    let preserve = node.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
    if preserve {
        node.remove("items");
        node.remove("properties");
    }
    let ty = node.get("type").and_then(Value::as_str).map(str::to_owned);
    if !node.contains_key("items") && ty.as_deref() == Some("array") {
        node.remove("type");
    }
    if preserve && ty.as_deref() == Some("object") {
        node.remove("type");
    }
    let nullable_props: Vec<String> = node
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| p.iter().filter(|(_, s)| is_true(s, "nullable")).map(|(k, _)| k.clone()).collect())
        .unwrap_or_default();
    if let Some(Value::Array(required)) = node.get_mut("required") {
        required.retain(|r| r.as_str().is_none_or(|r| !nullable_props.iter().any(|p| p == r)));
    }
    if node.get("additionalProperties").is_some_and(|a| is_true(a, "nullable")) {
        node.remove("required");
    }
    if node.get("required").and_then(Value::as_array).is_some_and(Vec::is_empty) {
        node.remove("required");
    }
}

/// Removes `default` everywhere in a schema (kube prunes defaults from the v2 document).
fn prune_defaults(schema: &mut Value) {
    let Value::Object(node) = schema else { return };
    node.remove("default");
    for key in ["properties", "patternProperties", "definitions"] {
        if let Some(Value::Object(map)) = node.get_mut(key) {
            map.values_mut().for_each(prune_defaults);
        }
    }
    for key in ["allOf", "anyOf", "oneOf"] {
        if let Some(Value::Array(list)) = node.get_mut(key) {
            list.iter_mut().for_each(prune_defaults);
        }
    }
    for key in ["items", "additionalProperties", "not"] {
        match node.get_mut(key) {
            Some(Value::Array(list)) => list.iter_mut().for_each(prune_defaults),
            Some(inner) => prune_defaults(inner),
            None => {}
        }
    }
}

fn reference(def: &str, description: Option<Value>, v2: bool) -> Value {
    let target = if v2 { format!("#/definitions/{def}") } else { format!("#/components/schemas/{def}") };
    let mut out = Map::new();
    if let Some(d) = description {
        out.insert("description".into(), d);
    }
    if v2 {
        out.insert("$ref".into(), Value::String(target));
    } else {
        // OpenAPI 3.0 ignores siblings of `$ref`: kube's v3 wraps the reference in `allOf`.
        out.insert("allOf".into(), json!([{ "$ref": target }]));
    }
    Value::Object(out)
}

fn description_of(definition: &str, property: &str) -> Option<Value> {
    kapi_openapi::builtin_property(definition, property).and_then(|p| p.get("description").cloned())
}

fn type_meta(property: &str) -> Value {
    kapi_openapi::builtin_property(TYPED_KIND, property).unwrap_or_else(|| json!({ "type": "string" }))
}

fn set_property(node: &mut Map<String, Value>, name: &str, schema: Value) {
    if !node.get("properties").is_some_and(Value::is_object) {
        node.insert("properties".into(), Value::Object(Map::new()));
    }
    if let Some(Value::Object(props)) = node.get_mut("properties") {
        props.insert(name.to_owned(), schema);
    }
}

/// kube's `addEmbeddedProperties`: embedded resources get `apiVersion`, `kind` and `metadata`
/// and require the first two (not in v2 under preserve-unknown-fields, where kubectl would
/// then reject the unknown fields).
fn add_embedded(schema: &mut Value, v2: bool) {
    let Value::Object(node) = schema else { return };
    if let Some(Value::Object(props)) = node.get_mut("properties") {
        props.values_mut().for_each(|p| add_embedded(p, v2));
    }
    for key in ["items", "additionalProperties"] {
        if let Some(inner) = node.get_mut(key) {
            add_embedded(inner, v2);
        }
    }
    if v2 && node.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true)) {
        return;
    }
    if node.get("x-kubernetes-embedded-resource") != Some(&Value::Bool(true)) {
        return;
    }
    set_property(node, "apiVersion", type_meta("apiVersion"));
    set_property(node, "kind", type_meta("kind"));
    set_property(node, "metadata", reference(OBJECT_META, description_of(TYPED_KIND, "metadata"), v2));
    let required = node.entry("required").or_insert_with(|| Value::Array(Vec::new()));
    if let Value::Array(list) = required {
        for name in ["kind", "apiVersion"] {
            if !list.iter().any(|r| r == name) {
                list.push(Value::String(name.into()));
            }
        }
    }
}

/// What a definition is built from.
pub(crate) struct KindInfo<'a> {
    pub group: &'a str,
    pub version: &'a str,
    pub kind: &'a str,
    pub list_kind: &'a str,
    pub plural: &'a str,
    /// The version's `openAPIV3Schema` when it is structural (else the permissive definition).
    pub schema: Option<&'a Value>,
    /// `spec.preserveUnknownFields` of the CRD.
    pub preserve_unknown_fields: bool,
    /// `fieldPath`s of the version's selectable fields.
    pub selectable: Vec<String>,
}

fn gvk(group: &str, version: &str, kind: &str) -> Value {
    json!([{ "group": group, "kind": kind, "version": version }])
}

fn selectable_extension(info: &KindInfo) -> Option<Value> {
    (!info.selectable.is_empty())
        .then(|| Value::Array(info.selectable.iter().map(|f| json!({ "fieldPath": f })).collect()))
}

/// The kind's definition (`buildKubeNative`). Without a schema, or in v2 when unknown fields
/// are preserved at the root, it is kube's permissive `{type: object}`: properties there would
/// make kubectl reject every field it does not list.
pub(crate) fn kind_schema(info: &KindInfo, v2: bool) -> Value {
    let permissive = match info.schema {
        None => true,
        Some(s) => v2 && (is_true(s, "x-kubernetes-preserve-unknown-fields") || info.preserve_unknown_fields),
    };
    let mut out = match info.schema {
        Some(schema) if !permissive => {
            let mut s = schema.clone();
            visit(&mut s, &mut |node| {
                normalize(node);
                unfold(node);
            });
            if v2 {
                visit(&mut s, &mut to_v2);
            }
            if let Value::Object(node) = &mut s {
                set_property(node, "metadata", reference(OBJECT_META, description_of(TYPED_KIND, "metadata"), v2));
                set_property(node, "apiVersion", type_meta("apiVersion"));
                set_property(node, "kind", type_meta("kind"));
            }
            add_embedded(&mut s, v2);
            s
        }
        _ => json!({ "type": "object" }),
    };
    if let Value::Object(node) = &mut out {
        node.insert("x-kubernetes-group-version-kind".into(), gvk(info.group, info.version, info.kind));
        if let Some(fields) = selectable_extension(info) {
            node.insert("x-kubernetes-selectable-fields".into(), fields);
        }
    }
    if v2 {
        prune_defaults(&mut out);
    }
    out
}

/// The list kind's definition (`buildListSchema`).
pub(crate) fn list_schema(info: &KindInfo, kind_def: &str, v2: bool) -> Value {
    let item_ref = if v2 { format!("#/definitions/{kind_def}") } else { format!("#/components/schemas/{kind_def}") };
    let mut out = json!({
        "description": format!("{} is a list of {}", info.list_kind, info.kind),
        "type": "object",
        "required": ["items"],
        "properties": {
            "apiVersion": type_meta("apiVersion"),
            "items": {
                "description": format!("List of {}. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md", info.plural),
                "type": "array",
                "items": { "$ref": item_ref },
            },
            "kind": type_meta("kind"),
            "metadata": reference(LIST_META, kapi_openapi::list_metadata_description(PARTIAL_OBJECT_METADATA_LIST).map(Value::from), v2),
        },
        "x-kubernetes-group-version-kind": gvk(info.group, info.version, info.list_kind),
    });
    if let (Some(fields), Value::Object(node)) = (selectable_extension(info), &mut out) {
        node.insert("x-kubernetes-selectable-fields".into(), fields);
    }
    out
}
