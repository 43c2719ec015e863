//! Rendering of `paths::PathItem`s as Swagger 2.0 and OpenAPI 3.0 JSON, and the v3 rewrite of
//! schema references.

use serde_json::{json, Map, Value};

use crate::definitions::V2_REF_PREFIX;
use crate::paths::{BodySchema, In, Operation, Param, PathItem};

/// Prefix of a `$ref` into `components.schemas` in a v3 document.
pub(crate) const V3_REF_PREFIX: &str = "#/components/schemas/";

const PATCH_TYPES: [&str; 4] = [
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
    "application/apply-patch+yaml",
];

fn produces(op: &Operation) -> Vec<&'static str> {
    if op.responses.iter().any(|(_, _, b)| *b == BodySchema::Text) {
        return if op.action == "connect" {
            vec!["*/*"]
        } else {
            vec![
                "text/plain",
                "application/json",
                "application/yaml",
                "application/vnd.kubernetes.protobuf",
            ]
        };
    }
    let mut types = vec![
        "application/json",
        "application/yaml",
        "application/vnd.kubernetes.protobuf",
    ];
    if op.watch_stream {
        types.push("application/json;stream=watch");
        types.push("application/vnd.kubernetes.protobuf;stream=watch");
    }
    types
}

fn consumes(op: &Operation) -> Vec<&'static str> {
    if op.patch {
        PATCH_TYPES.to_vec()
    } else {
        vec!["*/*"]
    }
}

fn schema_ref(body: &BodySchema) -> Value {
    match body {
        BodySchema::Def(name) => json!({ "$ref": format!("{V2_REF_PREFIX}{name}") }),
        BodySchema::Text => json!({ "type": "string" }),
    }
}

fn gvk_object(op: &Operation) -> Option<Value> {
    op.gvk
        .as_ref()
        .map(|(group, version, kind)| json!({ "group": group, "kind": kind, "version": version }))
}

fn v2_param(p: &Param) -> Value {
    let mut v = json!({
        "uniqueItems": true,
        "type": p.ty,
        "description": p.description,
        "name": p.name,
        "in": if p.location == In::Path { "path" } else { "query" },
    });
    if p.location == In::Path {
        v["required"] = Value::Bool(true);
    }
    v
}

fn v3_param(p: &Param) -> Value {
    let mut v = json!({
        "name": p.name,
        "in": if p.location == In::Path { "path" } else { "query" },
        "description": p.description,
        "schema": { "type": p.ty, "uniqueItems": true },
    });
    if p.location == In::Path {
        v["required"] = Value::Bool(true);
    }
    v
}

fn with_extensions(mut op_json: Map<String, Value>, op: &Operation) -> Value {
    op_json.insert(
        "x-kubernetes-action".into(),
        Value::String(op.action.into()),
    );
    if let Some(gvk) = gvk_object(op) {
        op_json.insert("x-kubernetes-group-version-kind".into(), gvk);
    }
    Value::Object(op_json)
}

fn v2_operation(op: &Operation) -> Value {
    let mut params: Vec<Value> = Vec::new();
    if let Some(body) = &op.body {
        let mut p = json!({ "name": "body", "in": "body", "schema": schema_ref(body) });
        if op.body_required {
            p["required"] = Value::Bool(true);
        }
        params.push(p);
    }
    params.extend(op.params.iter().map(v2_param));
    let mut responses = Map::new();
    for (code, description, body) in &op.responses {
        responses.insert(
            code.to_string(),
            json!({ "description": description, "schema": schema_ref(body) }),
        );
    }
    responses.insert("401".into(), json!({ "description": "Unauthorized" }));
    let mut out = Map::new();
    out.insert("description".into(), Value::String(op.description.clone()));
    out.insert("consumes".into(), json!(consumes(op)));
    out.insert("produces".into(), json!(produces(op)));
    out.insert("schemes".into(), json!(["https"]));
    out.insert("tags".into(), json!([op.tag]));
    out.insert("operationId".into(), Value::String(op.operation_id.clone()));
    if !params.is_empty() {
        out.insert("parameters".into(), Value::Array(params));
    }
    out.insert("responses".into(), Value::Object(responses));
    with_extensions(out, op)
}

fn v3_operation(op: &Operation) -> Value {
    let mut out = Map::new();
    out.insert("tags".into(), json!([op.tag]));
    out.insert("description".into(), Value::String(op.description.clone()));
    out.insert("operationId".into(), Value::String(op.operation_id.clone()));
    if !op.params.is_empty() {
        out.insert(
            "parameters".into(),
            Value::Array(op.params.iter().map(v3_param).collect()),
        );
    }
    if let Some(body) = &op.body {
        let mut content = Map::new();
        for media in consumes(op) {
            content.insert(media.into(), json!({ "schema": schema_ref(body) }));
        }
        let mut request = json!({ "content": content });
        if op.body_required {
            request["required"] = Value::Bool(true);
        }
        out.insert("requestBody".into(), request);
    }
    let mut responses = Map::new();
    for (code, description, body) in &op.responses {
        let mut content = Map::new();
        for media in produces(op) {
            content.insert(media.into(), json!({ "schema": schema_ref(body) }));
        }
        responses.insert(
            code.to_string(),
            json!({ "description": description, "content": content }),
        );
    }
    responses.insert("401".into(), json!({ "description": "Unauthorized" }));
    out.insert("responses".into(), Value::Object(responses));
    with_extensions(out, op)
}

/// A Swagger 2.0 path item.
pub(crate) fn v2_path_item(item: &PathItem) -> Value {
    let mut out = Map::new();
    for op in &item.operations {
        out.insert(op.method.into(), v2_operation(op));
    }
    if !item.params.is_empty() {
        out.insert(
            "parameters".into(),
            Value::Array(item.params.iter().map(v2_param).collect()),
        );
    }
    Value::Object(out)
}

/// An OpenAPI 3.0 path item; its `$ref`s still use the v2 prefix until `to_v3_refs`.
pub(crate) fn v3_path_item(item: &PathItem) -> Value {
    let mut out = Map::new();
    for op in &item.operations {
        out.insert(op.method.into(), v3_operation(op));
    }
    if !item.params.is_empty() {
        out.insert(
            "parameters".into(),
            Value::Array(item.params.iter().map(v3_param).collect()),
        );
    }
    Value::Object(out)
}

/// Points `$ref`s at `components.schemas` and, as kube's v3 does, wraps a `$ref` that has
/// siblings (a field's own description) in `allOf`, since OpenAPI 3.0 ignores `$ref` siblings.
pub(crate) fn to_v3_refs(value: &mut Value) {
    match value {
        Value::Object(map) => {
            if let Some(Value::String(reference)) = map.get_mut("$ref") {
                if let Some(name) = reference.strip_prefix(V2_REF_PREFIX) {
                    *reference = format!("{V3_REF_PREFIX}{name}");
                }
                if map.len() > 1 {
                    if let Some(reference) = map.remove("$ref") {
                        map.insert("allOf".into(), json!([{ "$ref": reference }]));
                    }
                }
            }
            // Keys are not filtered: a property may be named `default` or `enum`.
            map.values_mut().for_each(to_v3_refs);
        }
        Value::Array(items) => items.iter_mut().for_each(to_v3_refs),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ref_with_siblings_becomes_all_of() {
        let mut v = json!({
            "properties": {
                "metadata": { "description": "d", "$ref": "#/definitions/a.B" },
                "items": { "type": "array", "items": { "$ref": "#/definitions/a.C" } }
            }
        });
        to_v3_refs(&mut v);
        assert_eq!(
            v["properties"]["metadata"],
            json!({ "description": "d", "allOf": [{ "$ref": "#/components/schemas/a.B" }] })
        );
        assert_eq!(
            v["properties"]["items"]["items"],
            json!({ "$ref": "#/components/schemas/a.C" })
        );
    }
}
