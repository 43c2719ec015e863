//! The Swagger 2.0 document in gnostic's protobuf form (`openapi.v2.Document`), which kubectl
//! 1.27 and 1.28 request (`application/com.github.proto-openapi.spec.v2@v1.0+protobuf`) for
//! `explain` and client-side validation.
//!
//! The JSON document is walked and written field by field with gnostic's field numbers
//! (OpenAPIv2.proto). Values that gnostic keeps as `Any` (vendor extensions, `default`,
//! `example`, `enum`) carry their JSON text in `Any.yaml`; JSON is valid YAML and kubectl parses
//! that field as YAML. Parts of Swagger kubectl does not read and kapi does not emit (XML,
//! external docs, security definitions, headers, examples) are not written.

use serde_json::{Map, Value};

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn key(out: &mut Vec<u8>, tag: u32, wire: u8) {
    varint(out, (u64::from(tag) << 3) | u64::from(wire));
}

fn bytes(out: &mut Vec<u8>, tag: u32, data: &[u8]) {
    key(out, tag, 2);
    varint(out, data.len() as u64);
    out.extend_from_slice(data);
}

fn string(out: &mut Vec<u8>, tag: u32, obj: &Map<String, Value>, name: &str) {
    if let Some(s) = obj.get(name).and_then(Value::as_str) {
        bytes(out, tag, s.as_bytes());
    }
}

fn strings(out: &mut Vec<u8>, tag: u32, obj: &Map<String, Value>, name: &str) {
    for s in obj.get(name).and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str) {
        bytes(out, tag, s.as_bytes());
    }
}

fn boolean(out: &mut Vec<u8>, tag: u32, obj: &Map<String, Value>, name: &str) {
    if let Some(true) = obj.get(name).and_then(Value::as_bool) {
        key(out, tag, 0);
        varint(out, 1);
    }
}

fn int(out: &mut Vec<u8>, tag: u32, obj: &Map<String, Value>, name: &str) {
    if let Some(n) = obj.get(name).and_then(Value::as_i64) {
        key(out, tag, 0);
        varint(out, n as u64);
    }
}

fn double(out: &mut Vec<u8>, tag: u32, obj: &Map<String, Value>, name: &str) {
    if let Some(f) = obj.get(name).and_then(Value::as_f64) {
        key(out, tag, 1);
        out.extend_from_slice(&f.to_bits().to_le_bytes());
    }
}

fn message(out: &mut Vec<u8>, tag: u32, inner: Vec<u8>) {
    bytes(out, tag, &inner);
}

/// `Any{yaml = 2}` with the value's JSON text.
fn any(value: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    bytes(&mut out, 2, serde_json::to_string(value).unwrap_or_default().as_bytes());
    out
}

/// `NamedAny` entries for every `x-` key.
fn vendor_extensions(out: &mut Vec<u8>, tag: u32, obj: &Map<String, Value>) {
    for (k, v) in obj.iter().filter(|(k, _)| k.starts_with("x-")) {
        let mut named = Vec::new();
        bytes(&mut named, 1, k.as_bytes());
        message(&mut named, 2, any(v));
        message(out, tag, named);
    }
}

fn schema(obj: &Map<String, Value>) -> Vec<u8> {
    let mut out = Vec::new();
    string(&mut out, 1, obj, "$ref");
    string(&mut out, 2, obj, "format");
    string(&mut out, 3, obj, "title");
    string(&mut out, 4, obj, "description");
    if let Some(d) = obj.get("default") {
        message(&mut out, 5, any(d));
    }
    double(&mut out, 6, obj, "multipleOf");
    double(&mut out, 7, obj, "maximum");
    boolean(&mut out, 8, obj, "exclusiveMaximum");
    double(&mut out, 9, obj, "minimum");
    boolean(&mut out, 10, obj, "exclusiveMinimum");
    int(&mut out, 11, obj, "maxLength");
    int(&mut out, 12, obj, "minLength");
    string(&mut out, 13, obj, "pattern");
    int(&mut out, 14, obj, "maxItems");
    int(&mut out, 15, obj, "minItems");
    boolean(&mut out, 16, obj, "uniqueItems");
    int(&mut out, 17, obj, "maxProperties");
    int(&mut out, 18, obj, "minProperties");
    strings(&mut out, 19, obj, "required");
    for e in obj.get("enum").and_then(Value::as_array).into_iter().flatten() {
        message(&mut out, 20, any(e));
    }
    match obj.get("additionalProperties") {
        Some(Value::Object(s)) => {
            let mut item = Vec::new();
            message(&mut item, 1, schema(s));
            message(&mut out, 21, item);
        }
        Some(Value::Bool(b)) => {
            let mut item = Vec::new();
            key(&mut item, 2, 0);
            varint(&mut item, u64::from(*b));
            message(&mut out, 21, item);
        }
        _ => {}
    }
    match obj.get("type") {
        Some(Value::String(t)) => {
            let mut item = Vec::new();
            bytes(&mut item, 1, t.as_bytes());
            message(&mut out, 22, item);
        }
        Some(Value::Array(ts)) => {
            let mut item = Vec::new();
            for t in ts.iter().filter_map(Value::as_str) {
                bytes(&mut item, 1, t.as_bytes());
            }
            message(&mut out, 22, item);
        }
        _ => {}
    }
    match obj.get("items") {
        Some(Value::Object(s)) => {
            let mut item = Vec::new();
            message(&mut item, 1, schema(s));
            message(&mut out, 23, item);
        }
        Some(Value::Array(list)) => {
            let mut item = Vec::new();
            for s in list.iter().filter_map(Value::as_object) {
                message(&mut item, 1, schema(s));
            }
            message(&mut out, 23, item);
        }
        _ => {}
    }
    for s in obj.get("allOf").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_object) {
        message(&mut out, 24, schema(s));
    }
    if let Some(props) = obj.get("properties").and_then(Value::as_object) {
        let mut properties = Vec::new();
        for (name, s) in props {
            if let Some(s) = s.as_object() {
                let mut named = Vec::new();
                bytes(&mut named, 1, name.as_bytes());
                message(&mut named, 2, schema(s));
                message(&mut properties, 1, named);
            }
        }
        message(&mut out, 25, properties);
    }
    string(&mut out, 26, obj, "discriminator");
    boolean(&mut out, 27, obj, "readOnly");
    if let Some(e) = obj.get("example") {
        message(&mut out, 30, any(e));
    }
    vendor_extensions(&mut out, 31, obj);
    out
}

/// Query, path, header and formData parameters share a layout except for their field numbers.
fn non_body_parameter(p: &Map<String, Value>) -> Vec<u8> {
    let location = p.get("in").and_then(Value::as_str).unwrap_or("query");
    // (oneof tag in NonBodyParameter, whether the sub-schema has allowEmptyValue at 5)
    let (oneof, with_allow_empty) = match location {
        "header" => (1, false),
        "formData" => (2, true),
        "path" => (4, false),
        _ => (3, true),
    };
    let mut sub = Vec::new();
    boolean(&mut sub, 1, p, "required");
    string(&mut sub, 2, p, "in");
    string(&mut sub, 3, p, "description");
    string(&mut sub, 4, p, "name");
    let shift = if with_allow_empty {
        boolean(&mut sub, 5, p, "allowEmptyValue");
        1
    } else {
        0
    };
    string(&mut sub, 5 + shift, p, "type");
    string(&mut sub, 6 + shift, p, "format");
    string(&mut sub, 8 + shift, p, "collectionFormat");
    if let Some(d) = p.get("default") {
        message(&mut sub, 9 + shift, any(d));
    }
    boolean(&mut sub, 19 + shift, p, "uniqueItems");
    for e in p.get("enum").and_then(Value::as_array).into_iter().flatten() {
        message(&mut sub, 20 + shift, any(e));
    }
    vendor_extensions(&mut sub, 22 + shift, p);
    let mut nb = Vec::new();
    message(&mut nb, oneof, sub);
    nb
}

/// `ParametersItem{parameter = 1 | json_reference = 2}`.
fn parameters_item(p: &Map<String, Value>) -> Vec<u8> {
    let mut item = Vec::new();
    if let Some(r) = p.get("$ref").and_then(Value::as_str) {
        let mut reference = Vec::new();
        bytes(&mut reference, 1, r.as_bytes());
        string(&mut reference, 2, p, "description");
        message(&mut item, 2, reference);
        return item;
    }
    let mut parameter = Vec::new();
    if p.get("in").and_then(Value::as_str) == Some("body") {
        let mut body = Vec::new();
        string(&mut body, 1, p, "description");
        string(&mut body, 2, p, "name");
        string(&mut body, 3, p, "in");
        boolean(&mut body, 4, p, "required");
        if let Some(s) = p.get("schema").and_then(Value::as_object) {
            message(&mut body, 5, schema(s));
        }
        vendor_extensions(&mut body, 6, p);
        message(&mut parameter, 1, body);
    } else {
        message(&mut parameter, 2, non_body_parameter(p));
    }
    message(&mut item, 1, parameter);
    item
}

fn parameters(out: &mut Vec<u8>, tag: u32, obj: &Map<String, Value>) {
    for p in obj.get("parameters").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_object) {
        message(out, tag, parameters_item(p));
    }
}

fn operation(op: &Map<String, Value>) -> Vec<u8> {
    let mut out = Vec::new();
    strings(&mut out, 1, op, "tags");
    string(&mut out, 2, op, "summary");
    string(&mut out, 3, op, "description");
    string(&mut out, 5, op, "operationId");
    strings(&mut out, 6, op, "produces");
    strings(&mut out, 7, op, "consumes");
    parameters(&mut out, 8, op);
    if let Some(responses) = op.get("responses").and_then(Value::as_object) {
        let mut rs = Vec::new();
        for (code, r) in responses {
            let Some(r) = r.as_object() else { continue };
            let mut value = Vec::new();
            let mut response = Vec::new();
            string(&mut response, 1, r, "description");
            if let Some(s) = r.get("schema").and_then(Value::as_object) {
                let mut item = Vec::new();
                message(&mut item, 1, schema(s));
                message(&mut response, 2, item);
            }
            vendor_extensions(&mut response, 5, r);
            message(&mut value, 1, response);
            let mut named = Vec::new();
            bytes(&mut named, 1, code.as_bytes());
            message(&mut named, 2, value);
            message(&mut rs, 1, named);
        }
        message(&mut out, 9, rs);
    }
    strings(&mut out, 10, op, "schemes");
    boolean(&mut out, 11, op, "deprecated");
    vendor_extensions(&mut out, 13, op);
    out
}

fn path_item(item: &Map<String, Value>) -> Vec<u8> {
    let mut out = Vec::new();
    string(&mut out, 1, item, "$ref");
    for (method, tag) in [("get", 2), ("put", 3), ("post", 4), ("delete", 5), ("options", 6), ("head", 7), ("patch", 8)] {
        if let Some(op) = item.get(method).and_then(Value::as_object) {
            message(&mut out, tag, operation(op));
        }
    }
    parameters(&mut out, 9, item);
    vendor_extensions(&mut out, 10, item);
    out
}

/// Encodes a Swagger 2.0 JSON document as `openapi.v2.Document`.
pub(crate) fn document(doc: &Value) -> Vec<u8> {
    let Some(doc) = doc.as_object() else { return Vec::new() };
    let mut out = Vec::new();
    string(&mut out, 1, doc, "swagger");
    if let Some(info) = doc.get("info").and_then(Value::as_object) {
        let mut i = Vec::new();
        string(&mut i, 1, info, "title");
        string(&mut i, 2, info, "version");
        string(&mut i, 3, info, "description");
        vendor_extensions(&mut i, 7, info);
        message(&mut out, 2, i);
    }
    string(&mut out, 3, doc, "host");
    string(&mut out, 4, doc, "basePath");
    strings(&mut out, 5, doc, "schemes");
    strings(&mut out, 6, doc, "consumes");
    strings(&mut out, 7, doc, "produces");
    if let Some(paths) = doc.get("paths").and_then(Value::as_object) {
        let mut ps = Vec::new();
        for (path, item) in paths {
            let Some(item) = item.as_object() else { continue };
            let mut named = Vec::new();
            bytes(&mut named, 1, path.as_bytes());
            message(&mut named, 2, path_item(item));
            message(&mut ps, 2, named);
        }
        vendor_extensions(&mut ps, 1, paths);
        message(&mut out, 8, ps);
    }
    if let Some(defs) = doc.get("definitions").and_then(Value::as_object) {
        let mut ds = Vec::new();
        for (name, s) in defs {
            let Some(s) = s.as_object() else { continue };
            let mut named = Vec::new();
            bytes(&mut named, 1, name.as_bytes());
            message(&mut named, 2, schema(s));
            message(&mut ds, 1, named);
        }
        message(&mut out, 9, ds);
    }
    if let Some(params) = doc.get("parameters").and_then(Value::as_object) {
        let mut ps = Vec::new();
        for (name, p) in params {
            let Some(p) = p.as_object() else { continue };
            // NamedParameter{name, Parameter}: the Parameter is ParametersItem's field 1.
            let item = parameters_item(p);
            let mut named = Vec::new();
            bytes(&mut named, 1, name.as_bytes());
            // Unwrap ParametersItem{1: Parameter} to the Parameter bytes.
            if let Some(parameter) = first_field(&item, 1) {
                message(&mut named, 2, parameter.to_vec());
            }
            message(&mut ps, 1, named);
        }
        message(&mut out, 10, ps);
    }
    vendor_extensions(&mut out, 16, doc);
    out
}

/// The payload of the first length-delimited field `tag` in `msg` (our own output only).
fn first_field(msg: &[u8], tag: u32) -> Option<&[u8]> {
    let mut pos = 0;
    let read = |pos: &mut usize| -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = *msg.get(*pos)?;
            *pos += 1;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    };
    while pos < msg.len() {
        let k = read(&mut pos)?;
        let len = read(&mut pos)? as usize;
        let data = msg.get(pos..pos + len)?;
        pos += len;
        if (k >> 3) as u32 == tag && k & 7 == 2 {
            return Some(data);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Length-delimited fields of a message, as (tag, payload); panics on anything else, which
    /// in this test means our encoder wrote something it should not have.
    fn fields(msg: &[u8]) -> Vec<(u32, Vec<u8>)> {
        let mut out = Vec::new();
        let mut pos = 0;
        let read = |pos: &mut usize| {
            let mut v = 0u64;
            for shift in (0..64).step_by(7) {
                let b = msg[*pos];
                *pos += 1;
                v |= u64::from(b & 0x7f) << shift;
                if b & 0x80 == 0 {
                    break;
                }
            }
            v
        };
        while pos < msg.len() {
            let k = read(&mut pos);
            match k & 7 {
                2 => {
                    let len = read(&mut pos) as usize;
                    out.push(((k >> 3) as u32, msg[pos..pos + len].to_vec()));
                    pos += len;
                }
                0 => {
                    read(&mut pos);
                }
                1 => pos += 8,
                other => panic!("wire type {other}"),
            }
        }
        out
    }

    fn field(msg: &[u8], tag: u32) -> Vec<u8> {
        fields(msg).into_iter().find(|(t, _)| *t == tag).map(|(_, v)| v).unwrap_or_default()
    }

    #[test]
    fn document_layout_follows_gnostic_numbers() {
        let doc = json!({
            "swagger": "2.0",
            "info": {"title": "Kubernetes", "version": "v1.36.0"},
            "paths": {"/apis/apps/v1/deployments": {"get": {"operationId": "listAppsV1Deployment",
                "parameters": [{"name": "fieldValidation", "in": "query", "type": "string", "uniqueItems": true}],
                "responses": {"200": {"description": "OK", "schema": {"$ref": "#/definitions/io.k8s.api.apps.v1.DeploymentList"}}},
                "x-kubernetes-group-version-kind": {"group": "apps", "kind": "Deployment", "version": "v1"}}}},
            "definitions": {"io.k8s.api.apps.v1.DeploymentSpec": {"type": "object", "description": "spec",
                "properties": {"replicas": {"type": "integer", "format": "int32", "description": "Number of desired pods."}},
                "required": ["selector"]}}
        });
        let bytes = document(&doc);
        assert_eq!(field(&bytes, 1), b"2.0");
        assert_eq!(field(&field(&bytes, 2), 1), b"Kubernetes");
        // definitions (9) -> NamedSchema (1) -> name (1), Schema (2) -> properties (25) -> NamedSchema.
        let named = field(&field(&bytes, 9), 1);
        assert_eq!(field(&named, 1), b"io.k8s.api.apps.v1.DeploymentSpec");
        let spec = field(&named, 2);
        assert_eq!(field(&field(&spec, 22), 1), b"object");
        assert_eq!(field(&spec, 19), b"selector");
        let replicas = field(&field(&spec, 25), 1);
        assert_eq!(field(&replicas, 1), b"replicas");
        assert_eq!(field(&field(&field(&replicas, 2), 22), 1), b"integer");
        // paths (8) -> NamedPathItem (2) -> PathItem (2) -> get (2) -> operation.
        let path = field(&field(&bytes, 8), 2);
        assert_eq!(field(&path, 1), b"/apis/apps/v1/deployments");
        let op = field(&field(&path, 2), 2);
        assert_eq!(field(&op, 5), b"listAppsV1Deployment");
        // parameters (8) -> ParametersItem -> Parameter (1) -> NonBodyParameter (2) -> query (3) -> name (4).
        let query = field(&field(&field(&field(&op, 8), 1), 2), 3);
        assert_eq!(field(&query, 4), b"fieldValidation");
        // Vendor extension (13): NamedAny{name, Any{yaml = 2}} with JSON (valid YAML) text.
        let ext = field(&op, 13);
        assert_eq!(field(&ext, 1), b"x-kubernetes-group-version-kind");
        let yaml: serde_json::Value = serde_json::from_slice(&field(&field(&ext, 2), 2)).expect("JSON text");
        assert_eq!(yaml["kind"], "Deployment");
    }
}
