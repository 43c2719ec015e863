//! A built-in kind's schema as one self-contained structural schema: every `$ref` inlined, a
//! single `type` per node, only what typing needs (types, formats, properties, items,
//! additional properties and kube's `x-kubernetes-*` markers). kube's policy type checking
//! resolves the built-in OpenAPI definitions the same way to type `object` and `params`.

use serde_json::{json, Map, Value};

use crate::definitions::{definitions, V2_REF_PREFIX};

/// Keys kept as they are.
const KEPT: &[&str] = &[
    "format",
    "x-kubernetes-int-or-string",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-embedded-resource",
];

/// The schema of a built-in kind with its references resolved; None for kinds kapi has no
/// typed schema for. A definition that contains itself (JSONSchemaProps) is an open object
/// where it recurs.
pub fn structural_schema(group: &str, version: &str, kind: &str) -> Option<Value> {
    let defs = definitions();
    let name = defs.by_gvk.get(&(group.to_owned(), version.to_owned(), kind.to_owned()))?;
    let schema = defs.defs.get(name)?;
    let mut stack = vec![name.as_str()];
    Some(resolve(schema, &mut stack))
}

fn open_object() -> Value {
    json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})
}

/// The first type of `type` that is not `null` (schemars spells optional types as lists).
fn single_type(t: &Value) -> Option<&str> {
    match t {
        Value::String(s) => Some(s),
        Value::Array(ts) => ts.iter().filter_map(Value::as_str).find(|s| *s != "null"),
        _ => None,
    }
}

fn resolve<'a>(schema: &'a Value, stack: &mut Vec<&'a str>) -> Value {
    let Value::Object(m) = schema else { return open_object() };
    // `$ref`, or a lone `allOf: [{$ref}]` next to a description
    let reference = m.get("$ref").or_else(|| match m.get("allOf").and_then(Value::as_array).map(Vec::as_slice) {
        Some([only]) => only.get("$ref"),
        _ => None,
    });
    if let Some(target) = reference.and_then(Value::as_str).and_then(|r| r.strip_prefix(V2_REF_PREFIX)) {
        let Some((name, def)) = definitions().defs.get_key_value(target) else { return open_object() };
        if stack.contains(&name.as_str()) {
            return open_object();
        }
        stack.push(name);
        let resolved = resolve(def, stack);
        stack.pop();
        return resolved;
    }
    let mut out = Map::new();
    if let Some(t) = m.get("type").and_then(single_type) {
        out.insert("type".into(), Value::from(t));
    }
    for key in KEPT {
        if let Some(v) = m.get(*key) {
            out.insert((*key).into(), v.clone());
        }
    }
    if let Some(Value::Object(props)) = m.get("properties") {
        let props: Map<String, Value> = props.iter().map(|(k, p)| (k.clone(), resolve(p, stack))).collect();
        out.insert("properties".into(), Value::Object(props));
        out.entry("type").or_insert_with(|| Value::from("object"));
    }
    if let Some(items) = m.get("items") {
        out.insert("items".into(), resolve(items, stack));
    }
    match m.get("additionalProperties") {
        Some(Value::Object(_)) => {
            let ap = m.get("additionalProperties").map(|ap| resolve(ap, stack)).unwrap_or_else(open_object);
            out.insert("additionalProperties".into(), ap);
            out.entry("type").or_insert_with(|| Value::from("object"));
        }
        Some(Value::Bool(true)) => {
            out.insert("x-kubernetes-preserve-unknown-fields".into(), Value::Bool(true));
        }
        _ => {}
    }
    if out.get("type").and_then(Value::as_str) == Some("object")
        && !out.contains_key("properties")
        && !out.contains_key("additionalProperties")
    {
        // an object schemars says nothing more about (RawExtension): anything
        out.insert("x-kubernetes-preserve-unknown-fields".into(), Value::Bool(true));
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deployment_resolves_to_its_fields() {
        let s = structural_schema("apps", "v1", "Deployment").expect("schema");
        assert_eq!(s["type"], "object");
        assert_eq!(s.pointer("/properties/spec/properties/replicas/type"), Some(&json!("integer")));
        assert_eq!(s.pointer("/properties/metadata/properties/name/type"), Some(&json!("string")));
        let containers = s.pointer("/properties/spec/properties/template/properties/spec/properties/containers").unwrap();
        assert_eq!(containers["type"], "array");
        assert_eq!(containers.pointer("/items/properties/image/type"), Some(&json!("string")));
        assert_eq!(s.pointer("/properties/metadata/properties/creationTimestamp/format"), Some(&json!("date-time")));
        assert!(!s.to_string().contains("$ref"));
    }

    #[test]
    fn a_recursive_definition_ends_in_an_open_object() {
        let s = structural_schema("apiextensions.k8s.io", "v1", "CustomResourceDefinition").expect("schema");
        let props = "/properties/spec/properties/versions/items/properties/schema/properties/openAPIV3Schema/properties";
        let schema = s.pointer(props).expect("JSONSchemaProps, once");
        assert_eq!(schema["type"]["type"], "string");
        assert_eq!(schema["not"], open_object());
    }

    #[test]
    fn unknown_kinds_have_none() {
        assert!(structural_schema("example.com", "v1", "Widget").is_none());
    }
}
