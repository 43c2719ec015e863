//! Typed-decoding checks against a kind's schema: unknown fields (what kube-apiserver's strict
//! decoder reports for `fieldValidation=Strict|Warn`) and the type errors Go's `encoding/json`
//! would raise, with the same paths and texts.

use std::collections::HashSet;

use serde_json::{Map, Value};

use crate::definitions::ref_target;
use crate::quantity;

/// Problems found while decoding an object against its kind's schema.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct FieldProblems {
    /// Paths of fields the schema does not know (`spec.template.spec.containers[0].foo`).
    pub unknown: Vec<String>,
    /// Paths of fields given more than once in the request body.
    pub duplicate: Vec<String>,
    /// `(path, message)` for values Go's typed decoding rejects, e.g.
    /// `json: cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas of type int32`.
    /// Kube fails the request with the first one whatever `fieldValidation` says.
    pub type_errors: Vec<(String, String)>,
    /// The same problems, one for one, as kube's unstructured converter words them
    /// (`cannot restore map from string`): kube decodes the result of a strategic merge patch
    /// from a map with it, not from JSON.
    pub unstructured_errors: Vec<String>,
    /// Every key path of the raw body in document order (a repeated key at each occurrence),
    /// filled only when there are both unknown and duplicate fields: kube's decoder reports
    /// them as it meets them, so the strict errors interleave in this order.
    pub key_order: Vec<String>,
}

impl FieldProblems {
    /// True when nothing was found.
    pub fn is_empty(&self) -> bool {
        self.unknown.is_empty() && self.duplicate.is_empty() && self.type_errors.is_empty()
    }
}

/// Kube's decoder stops collecting strict errors after this many.
const MAX_STRICT_ERRORS: usize = 100;

/// Nesting beyond which values are not inspected (recursive schemas such as CRD validation
/// schemas could otherwise recurse as deep as a hostile body nests).
const MAX_DEPTH: usize = 256;

/// How a schema constrains the JSON found at one position.
enum Shape<'a> {
    /// Free-form: RawExtension, JSON, FieldsV1, preserve-unknown-fields, untyped.
    Any,
    /// `intstr.IntOrString`: a string or an int32.
    IntOrString,
    /// `resource.Quantity`: a string or number in quantity syntax.
    Quantity,
    Struct {
        type_name: String,
        props: &'a Map<String, Value>,
    },
    Map {
        values: &'a Value,
    },
    Array {
        items: &'a Value,
    },
    Str {
        bytes: bool,
    },
    Integer {
        go: &'static str,
    },
    Number,
    Bool,
    /// One of several schemas (JSONSchemaPropsOrBool and friends): the one matching the JSON
    /// type applies.
    OneOf {
        alternatives: &'a [Value],
    },
}

pub(crate) struct Checker<'d> {
    defs: &'d Map<String, Value>,
    problems: FieldProblems,
    seen_unknown: HashSet<String>,
    /// Go's error context: struct field names from the root, without indices or map keys.
    field_stack: Vec<String>,
    /// Go's error context: the innermost struct type being decoded.
    struct_name: Option<String>,
    depth: usize,
}

impl<'d> Checker<'d> {
    pub(crate) fn new(defs: &'d Map<String, Value>) -> Self {
        Checker {
            defs,
            problems: FieldProblems::default(),
            seen_unknown: HashSet::new(),
            field_stack: Vec::new(),
            struct_name: None,
            depth: 0,
        }
    }

    /// Checks a whole object against the definition `root`.
    pub(crate) fn check_root(mut self, root: &str, obj: &Value) -> FieldProblems {
        if self.defs.contains_key(root) {
            let named = serde_json::json!({ "$ref": format!("{}{root}", crate::definitions::V2_REF_PREFIX) });
            self.walk(obj, &named, "", true);
        }
        self.problems
    }

    /// Removes the fields `root`'s schema does not know, as decoding into kube's typed structs
    /// drops them (objects are kept as JSON here, so this is done explicitly).
    pub(crate) fn prune_root(&self, root: &str, obj: &mut Value) {
        if self.defs.contains_key(root) {
            let named = serde_json::json!({ "$ref": format!("{}{root}", crate::definitions::V2_REF_PREFIX) });
            self.prune(obj, &named, true, 0);
        }
    }

    fn prune(&self, value: &mut Value, schema: &Value, top: bool, depth: usize) {
        if depth >= MAX_DEPTH {
            return;
        }
        match (self.classify(schema).0, value) {
            (Shape::Struct { props, .. }, Value::Object(fields)) => {
                fields.retain(|k, _| props.contains_key(k) || (top && (k == "apiVersion" || k == "kind")));
                for (key, inner) in fields.iter_mut() {
                    if let Some(field_schema) = props.get(key) {
                        self.prune(inner, field_schema, false, depth + 1);
                    }
                }
            }
            (Shape::Map { values }, Value::Object(fields)) => {
                for inner in fields.values_mut() {
                    self.prune(inner, values, false, depth + 1);
                }
            }
            (Shape::Array { items }, Value::Array(elements)) => {
                for inner in elements {
                    self.prune(inner, items, false, depth + 1);
                }
            }
            (Shape::OneOf { alternatives }, value) => {
                let chosen = alternatives.iter().find(|alt| accepts_json_type(&self.classify(alt).0, value));
                if let Some(alternative) = chosen {
                    self.prune(value, alternative, false, depth + 1);
                }
            }
            _ => {}
        }
    }

    fn walk(&mut self, value: &Value, schema: &Value, path: &str, top: bool) {
        // Go leaves the zero value for null, whatever the target type.
        if value.is_null() || self.depth >= MAX_DEPTH {
            return;
        }
        self.depth += 1;
        self.walk_inner(value, schema, path, top);
        self.depth -= 1;
    }

    fn walk_inner(&mut self, value: &Value, schema: &Value, path: &str, top: bool) {
        let (shape, go_type) = self.classify(schema);
        match shape {
            Shape::Any => {}
            Shape::IntOrString => match value {
                Value::String(_) => {}
                Value::Number(n) if number_fits_int(n, i32::MIN as i64, i32::MAX as i64) => {}
                // Its own JSON unmarshaler decodes the int, whatever the source.
                other => self.type_error(path, other, "int32", format!("json: cannot unmarshal {} into Go value of type int32", go_json_found(other, "int32"))),
            },
            Shape::Quantity => {
                let text = match value {
                    Value::String(s) => Some(s.trim().to_string()),
                    Value::Number(n) => Some(n.to_string()),
                    _ => None,
                };
                let result = match text {
                    Some(t) => quantity::check(&t),
                    None => Err(quantity::FORMAT_WRONG),
                };
                if let Err(message) = result {
                    self.problems
                        .type_errors
                        .push((path.to_string(), message.to_string()));
                    self.problems.unstructured_errors.push(message.to_string());
                }
            }
            Shape::Struct { type_name, props } => {
                let Value::Object(fields) = value else {
                    return self.type_error(path, value, &go_type, format!("cannot restore struct from: {}", go_kind(value)));
                };
                let short = type_name
                    .rsplit('.')
                    .next()
                    .unwrap_or(&type_name)
                    .to_string();
                for (key, inner) in fields {
                    let child = join(path, key);
                    match props.get(key) {
                        Some(field_schema) => {
                            let saved = self.struct_name.replace(short.clone());
                            self.field_stack.push(key.clone());
                            self.walk(inner, field_schema, &child, false);
                            self.field_stack.pop();
                            self.struct_name = saved;
                        }
                        None if top && (key == "apiVersion" || key == "kind") => {}
                        None => self.unknown(child),
                    }
                }
            }
            Shape::Map { values } => {
                let Value::Object(fields) = value else {
                    return self.type_error(path, value, &go_type, format!("cannot restore map from {}", go_kind(value)));
                };
                for (key, inner) in fields {
                    self.walk(inner, values, &join(path, key), false);
                }
            }
            Shape::Array { items } => {
                let Value::Array(elements) = value else {
                    return self.type_error(path, value, &go_type, format!("cannot restore slice from {}", go_kind(value)));
                };
                for (index, inner) in elements.iter().enumerate() {
                    self.walk(inner, items, &format!("{path}[{index}]"), false);
                }
            }
            Shape::Str { bytes } => match value {
                Value::String(s) if bytes => {
                    if let Err(message) = check_base64(s) {
                        self.problems.unstructured_errors.push(format!("error decoding from json: {message}"));
                        self.problems.type_errors.push((path.to_string(), message));
                    }
                }
                Value::String(_) => {}
                other if bytes => self.type_error(path, other, &go_type, format!("cannot restore slice from {}", go_kind(other))),
                other => self.type_error(path, other, &go_type, unstructured_scalar(other, "string")),
            },
            Shape::Integer { go } => {
                let (min, max) = if go == "int32" {
                    (i32::MIN as i64, i32::MAX as i64)
                } else {
                    (i64::MIN, i64::MAX)
                };
                match value {
                    Value::Number(n) if number_fits_int(n, min, max) => {}
                    other => self.type_error(path, other, go, unstructured_scalar(other, go)),
                }
            }
            Shape::Number => {
                if !value.is_number() {
                    self.type_error(path, value, "float64", unstructured_scalar(value, "float64"));
                }
            }
            Shape::Bool => {
                if !value.is_boolean() {
                    self.type_error(path, value, "bool", unstructured_scalar(value, "bool"));
                }
            }
            Shape::OneOf { alternatives } => {
                // Their custom unmarshalers word errors their own way; only descend.
                let chosen = alternatives
                    .iter()
                    .find(|alt| accepts_json_type(&self.classify(alt).0, value));
                if let Some(alternative) = chosen {
                    self.walk(value, alternative, path, false);
                }
            }
        }
    }

    fn unknown(&mut self, path: String) {
        if self.problems.unknown.len() < MAX_STRICT_ERRORS && self.seen_unknown.insert(path.clone())
        {
            self.problems.unknown.push(path);
        }
    }

    /// Records a value of the wrong type: Go's JSON decoding text, and `unstructured`, the
    /// unstructured converter's.
    fn type_error(&mut self, path: &str, value: &Value, go_type: &str, unstructured: String) {
        let found = go_json_found(value, go_type);
        self.problems.unstructured_errors.push(unstructured);
        let message = match (&self.struct_name, self.field_stack.is_empty()) {
            (Some(name), false) => format!(
                "json: cannot unmarshal {found} into Go struct field {name}.{} of type {go_type}",
                self.field_stack.join(".")
            ),
            _ => format!("json: cannot unmarshal {found} into Go value of type {go_type}"),
        };
        self.problems.type_errors.push((path.to_string(), message));
    }

    /// Resolves `$ref`s and says what the schema expects, plus the Go type name kube would print.
    fn classify<'s>(&self, schema: &'s Value) -> (Shape<'s>, String)
    where
        'd: 's,
    {
        let mut current = schema;
        let mut def_name: Option<&str> = None;
        // Bounded: a chain of bare refs cannot be longer than the number of definitions.
        for _ in 0..=self.defs.len() {
            let Some(target) = current
                .get("$ref")
                .and_then(Value::as_str)
                .and_then(ref_target)
            else {
                break;
            };
            match self.defs.get(target) {
                Some(next) => {
                    def_name = Some(target);
                    current = next;
                }
                None => return (Shape::Any, String::new()),
            }
        }
        if let Some(name) = def_name {
            match name {
                "io.k8s.apimachinery.pkg.util.intstr.IntOrString" => {
                    return (Shape::IntOrString, "intstr.IntOrString".into())
                }
                "io.k8s.apimachinery.pkg.api.resource.Quantity" => {
                    return (Shape::Quantity, "resource.Quantity".into())
                }
                _ => {}
            }
        }
        if current
            .get("x-kubernetes-preserve-unknown-fields")
            .and_then(Value::as_bool)
            == Some(true)
        {
            return (Shape::Any, String::new());
        }
        if current
            .get("x-kubernetes-int-or-string")
            .and_then(Value::as_bool)
            == Some(true)
        {
            return (Shape::IntOrString, "intstr.IntOrString".into());
        }
        if let Some(alternatives) = current.get("oneOf").and_then(Value::as_array) {
            return (Shape::OneOf { alternatives }, String::new());
        }
        match current.get("type").and_then(Value::as_str) {
            Some("object") => {
                if let Some(props) = current.get("properties").and_then(Value::as_object) {
                    let type_name = def_name
                        .map(go_type_name)
                        .unwrap_or_else(|| "struct".into());
                    (
                        Shape::Struct {
                            type_name: type_name.clone(),
                            props,
                        },
                        type_name,
                    )
                } else if let Some(values) = current
                    .get("additionalProperties")
                    .filter(|v| v.is_object())
                {
                    let (_, inner) = self.classify(values);
                    (Shape::Map { values }, format!("map[string]{inner}"))
                } else {
                    (Shape::Any, String::new())
                }
            }
            Some("array") => match current.get("items") {
                Some(items) => {
                    let (_, inner) = self.classify(items);
                    (Shape::Array { items }, format!("[]{inner}"))
                }
                None => (Shape::Any, String::new()),
            },
            Some("string") => {
                let bytes = current.get("format").and_then(Value::as_str) == Some("byte");
                (
                    Shape::Str { bytes },
                    if bytes {
                        "[]uint8".into()
                    } else {
                        "string".into()
                    },
                )
            }
            Some("integer") => {
                let go = if current.get("format").and_then(Value::as_str) == Some("int32") {
                    "int32"
                } else {
                    "int64"
                };
                (Shape::Integer { go }, go.into())
            }
            Some("number") => (Shape::Number, "float64".into()),
            Some("boolean") => (Shape::Bool, "bool".into()),
            _ => (Shape::Any, String::new()),
        }
    }
}

/// What Go's JSON decoder says it found (`cannot unmarshal <found> into ...`).
fn go_json_found(value: &Value, go_type: &str) -> String {
    match value {
        Value::String(_) => "string".to_string(),
        Value::Bool(_) => "bool".to_string(),
        Value::Array(_) => "array".to_string(),
        Value::Object(_) => "object".to_string(),
        Value::Null => "null".to_string(),
        // Go names the literal only when a numeric target could not hold it.
        Value::Number(n) if is_numeric_go_type(go_type) => format!("number {n}"),
        Value::Number(_) => "number".to_string(),
    }
}

/// The Go kind of a value decoded into `map[string]interface{}` with integers preserved, as
/// the unstructured converter names it.
fn go_kind(value: &Value) -> &'static str {
    match value {
        Value::String(_) => "string",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_i64() || n.is_u64() => "int64",
        Value::Number(_) => "float64",
        Value::Array(_) => "slice",
        Value::Object(_) => "map",
        Value::Null => "interface",
    }
}

/// The unstructured converter's text for a value a scalar field of Go type `target` cannot
/// take: Go converts integers to strings (so it says it cannot), and fractions to integers;
/// anything else is a type it does not recognize as a source.
fn unstructured_scalar(value: &Value, target: &str) -> String {
    match (go_kind(value), target) {
        ("int64", "string") => "cannot convert int64 to string".to_string(),
        ("float64", "int32" | "int64") => format!("cannot convert float64 to {target}"),
        _ => format!("unrecognized type: {target}"),
    }
}

/// Go's `reflect.Type.String()` for a generated type: package name and type name
/// (`io.k8s.api.core.v1.Container` -> `v1.Container`).
fn go_type_name(definition: &str) -> String {
    let mut parts = definition.rsplit('.');
    match (parts.next(), parts.next()) {
        (Some(name), Some(package)) => format!("{package}.{name}"),
        (Some(name), None) => name.to_string(),
        _ => definition.to_string(),
    }
}

/// Whether a shape takes a JSON value of this kind at all (used to pick a `oneOf` branch).
fn accepts_json_type(shape: &Shape<'_>, value: &Value) -> bool {
    match shape {
        Shape::Any => true,
        Shape::IntOrString | Shape::Quantity => value.is_string() || value.is_number(),
        Shape::Struct { .. } | Shape::Map { .. } => value.is_object(),
        Shape::Array { .. } => value.is_array(),
        Shape::Str { .. } => value.is_string(),
        Shape::Integer { .. } | Shape::Number => value.is_number(),
        Shape::Bool => value.is_boolean(),
        Shape::OneOf { .. } => false,
    }
}

fn is_numeric_go_type(go_type: &str) -> bool {
    matches!(go_type, "int32" | "int64" | "float64")
}

/// Whether a JSON number decodes into a Go integer within `[min, max]` (`1.0` does not: Go
/// parses the literal as an integer).
fn number_fits_int(n: &serde_json::Number, min: i64, max: i64) -> bool {
    match n.as_i64() {
        Some(v) => v >= min && v <= max,
        None => false,
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// Go decodes `[]byte` from standard padded base64 and skips `\r`/`\n`; the error text is
/// `illegal base64 data at input byte N`.
fn check_base64(text: &str) -> Result<(), String> {
    use base64::Engine;
    let cleaned: String = text.chars().filter(|c| *c != '\r' && *c != '\n').collect();
    match base64::engine::general_purpose::STANDARD.decode(cleaned.as_bytes()) {
        Ok(_) => Ok(()),
        Err(base64::DecodeError::InvalidByte(offset, _)) => {
            Err(format!("illegal base64 data at input byte {offset}"))
        }
        Err(base64::DecodeError::InvalidLastSymbol(offset, _)) => {
            Err(format!("illegal base64 data at input byte {offset}"))
        }
        Err(_) => {
            // Length/padding errors: Go reports the start of the incomplete quantum.
            let offset = cleaned.len() - cleaned.len() % 4;
            Err(format!("illegal base64 data at input byte {offset}"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::definitions::definitions;
    use serde_json::json;

    fn check(name: &str, obj: Value) -> FieldProblems {
        Checker::new(&definitions().defs).check_root(name, &obj)
    }

    #[test]
    fn nested_unknown_fields_have_indexed_paths() {
        let p = check(
            "io.k8s.api.apps.v1.Deployment",
            json!({
                "apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "x", "bogus": 1, "labels": {"a": "b"}},
                "spec": {"foo": 1, "template": {"spec": {"containers": [
                    {"name": "a", "image": "i"},
                    {"name": "b", "image": "i", "imagePullPolize": "Always"}
                ]}}}
            }),
        );
        assert_eq!(
            p.unknown,
            vec![
                "metadata.bogus",
                "spec.foo",
                "spec.template.spec.containers[1].imagePullPolize"
            ]
        );
        assert!(p.type_errors.is_empty(), "{:?}", p.type_errors);
    }

    #[test]
    fn type_errors_use_go_wording() {
        let p = check(
            "io.k8s.api.apps.v1.Deployment",
            json!({"spec": {"replicas": "3", "template": {"spec": {"containers": "x"}}}}),
        );
        assert_eq!(
            p.type_errors,
            vec![
                ("spec.replicas".to_string(), "json: cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas of type int32".to_string()),
                ("spec.template.spec.containers".to_string(), "json: cannot unmarshal string into Go struct field PodSpec.spec.template.spec.containers of type []v1.Container".to_string()),
            ]
        );
        let p = check(
            "io.k8s.api.apps.v1.Deployment",
            json!({"spec": {"replicas": 1.5}}),
        );
        assert_eq!(p.type_errors[0].1, "json: cannot unmarshal number 1.5 into Go struct field DeploymentSpec.spec.replicas of type int32");
        let p = check("io.k8s.api.core.v1.ConfigMap", json!({"data": {"k": 1}}));
        assert_eq!(
            p.type_errors[0].1,
            "json: cannot unmarshal number into Go struct field ConfigMap.data of type string"
        );
    }

    #[test]
    fn unstructured_converter_wording() {
        let p = check(
            "io.k8s.api.apps.v1.Deployment",
            json!({"metadata": {"labels": "x"}, "spec": {"replicas": "3", "paused": 1, "minReadySeconds": 1.5,
                "selector": [], "template": {"spec": {"containers": {}, "hostname": 7, "hostNetwork": "yes"}}}}),
        );
        assert_eq!(
            p.unstructured_errors,
            vec![
                "cannot restore map from string",
                "unrecognized type: int32",
                "unrecognized type: bool",
                "cannot convert float64 to int32",
                "cannot restore struct from: slice",
                "cannot restore slice from map",
                "cannot convert int64 to string",
                "unrecognized type: bool",
            ]
        );
        assert_eq!(p.unstructured_errors.len(), p.type_errors.len());
        let p = check("io.k8s.api.core.v1.Secret", json!({"data": {"k": "!!"}}));
        assert_eq!(p.unstructured_errors, vec!["error decoding from json: illegal base64 data at input byte 0"]);
    }

    #[test]
    fn int_or_string_and_quantity() {
        let ok = check(
            "io.k8s.api.core.v1.Service",
            json!({"spec": {"ports": [{"port": 80, "targetPort": 8080}, {"port": 81, "targetPort": "http"}]}}),
        );
        assert!(ok.is_empty(), "{ok:?}");
        let bad = check(
            "io.k8s.api.core.v1.Service",
            json!({"spec": {"ports": [{"port": 80, "targetPort": true}]}}),
        );
        assert_eq!(
            bad.type_errors[0].1,
            "json: cannot unmarshal bool into Go struct field ServicePort.spec.ports.targetPort of type int32"
        );
        let q = check(
            "io.k8s.api.core.v1.Pod",
            json!({"spec": {"containers": [{"name": "a", "resources": {"limits": {"cpu": "500m", "memory": 128}}}]}}),
        );
        assert!(q.is_empty(), "{q:?}");
        let q = check(
            "io.k8s.api.core.v1.Pod",
            json!({"spec": {"containers": [{"name": "a", "resources": {"limits": {"cpu": "lots"}}}]}}),
        );
        assert_eq!(
            q.type_errors[0].0,
            "spec.containers[0].resources.limits.cpu"
        );
    }

    #[test]
    fn free_form_fields_accept_anything() {
        let p = check(
            "io.k8s.api.apps.v1.ControllerRevision",
            json!({"data": {"anything": {"goes": [1, 2]}}, "revision": 1}),
        );
        assert!(p.is_empty(), "{p:?}");
        let p = check(
            "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
            json!({"managedFields": [{"fieldsV1": {"f:spec": {}}, "manager": "m"}]}),
        );
        assert!(p.is_empty(), "{p:?}");
    }

    #[test]
    fn secret_data_must_be_base64() {
        let p = check(
            "io.k8s.api.core.v1.Secret",
            json!({"data": {"a": "aGVsbG8=", "b": "not*base64"}}),
        );
        assert_eq!(
            p.type_errors,
            vec![(
                "data.b".to_string(),
                "illegal base64 data at input byte 3".to_string()
            )]
        );
    }

    #[test]
    fn crd_schemas_are_checked_through_one_of() {
        let crd = json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "crontabs.stable.example.com"},
            "spec": {
                "group": "stable.example.com", "scope": "Namespaced",
                "names": {"plural": "crontabs", "singular": "crontab", "kind": "CronTab", "shortNames": ["ct"]},
                "versions": [{
                    "name": "v1", "served": true, "storage": true,
                    "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}},
                    "additionalPrinterColumns": [{"name": "Spec", "type": "string", "jsonPath": ".spec.cronSpec"}],
                    "schema": {"openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "x-kubernetes-preserve-unknown-fields": true,
                                "properties": {
                                    "cronSpec": {"type": "string", "pattern": "^(\\d+|\\*)(/\\d+)?(\\s+(\\d+|\\*)(/\\d+)?){4}$"},
                                    "replicas": {"type": "integer", "minimum": 1, "default": 1},
                                    "tags": {"type": "array", "items": {"type": "string", "bogusInItems": 1}},
                                    "extra": {"type": "object", "additionalProperties": true},
                                    "port": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]}
                                },
                                "x-kubernetes-validations": [{"rule": "self.replicas < 10", "message": "too many"}]
                            }
                        }
                    }}
                }]
            }
        });
        let p = check(
            "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition",
            crd,
        );
        assert_eq!(p.unknown, vec!["spec.versions[0].schema.openAPIV3Schema.properties.spec.properties.tags.items.bogusInItems"]);
        assert!(p.type_errors.is_empty(), "{:?}", p.type_errors);
    }

    #[test]
    fn deep_nesting_is_bounded() {
        let mut schema = json!({"type": "object"});
        for _ in 0..400 {
            schema = json!({"type": "object", "properties": {"properties": {"type": "object", "additionalProperties": schema}}});
        }
        let p = check(
            "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition",
            json!({"spec": {"versions": [{"schema": {"openAPIV3Schema": schema}}]}}),
        );
        assert!(p.is_empty(), "{p:?}");
    }

    #[test]
    fn go_type_names() {
        assert_eq!(go_type_name("io.k8s.api.core.v1.Container"), "v1.Container");
        assert_eq!(
            go_type_name("io.k8s.apimachinery.pkg.util.intstr.IntOrString"),
            "intstr.IntOrString"
        );
    }
}
