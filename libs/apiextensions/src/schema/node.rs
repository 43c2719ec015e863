//! The schema node: one level of a structural `openAPIV3Schema`, parsed once from JSON.
//!
//! kube keeps two views of a CRD schema: the structural one (for pruning, defaulting, list
//! types) and a kube-openapi `spec.Schema` (for value validation). Both are the same tree once
//! the CRD has been accepted as structural, so kapi keeps one node type with every keyword;
//! the value validations under `allOf`/`anyOf`/`oneOf`/`not` reuse it too (the structural
//! rules already forbid types and extensions there).

use std::collections::BTreeMap;

use regex::Regex;
use serde_json::{Map, Value};

use super::regex_go;

/// `additionalProperties`: either a boolean or a schema for the values of unlisted keys.
#[derive(Debug, Clone)]
pub enum AdditionalProperties {
    /// `additionalProperties: true|false` without a schema.
    Bool(bool),
    /// `additionalProperties: {...}`: every key not in `properties` follows this schema.
    Schema(Box<Schema>),
}

/// One node of a structural schema. Fields are public so that other modules (server-side
/// apply, OpenAPI publishing, CEL later) can walk the tree without re-parsing JSON.
#[derive(Debug, Clone, Default)]
pub struct Schema {
    /// `type`: object, array, string, integer, number, boolean, or empty.
    pub type_: String,
    /// `format`, as written (kube strips unsupported ones only for validation).
    pub format: String,
    /// `description`, kept for OpenAPI publishing.
    pub description: String,
    /// `title`, kept for OpenAPI publishing.
    pub title: String,
    /// `nullable`: null is an allowed value (and is not pruned).
    pub nullable: bool,
    /// `default`, already pruned against this node when built by [`super::Structural::new`].
    pub default: Option<Value>,
    /// `properties`, sorted by name (Go iterates maps in random order; kapi in sorted order).
    pub properties: BTreeMap<String, Schema>,
    /// `items` (structural schemas only allow a single schema).
    pub items: Option<Box<Schema>>,
    /// `additionalProperties`.
    pub additional_properties: Option<AdditionalProperties>,
    /// `x-kubernetes-preserve-unknown-fields`: pruning keeps unknown fields here.
    pub x_kubernetes_preserve_unknown_fields: bool,
    /// `x-kubernetes-embedded-resource`: the value is a whole object (apiVersion, kind, metadata).
    pub x_kubernetes_embedded_resource: bool,
    /// `x-kubernetes-int-or-string`: the value is an integer or a string.
    pub x_kubernetes_int_or_string: bool,
    /// `x-kubernetes-list-type`: atomic (absent), set or map.
    pub x_kubernetes_list_type: Option<String>,
    /// `x-kubernetes-list-map-keys` for list-type map.
    pub x_kubernetes_list_map_keys: Vec<String>,
    /// `x-kubernetes-map-type`: granular or atomic.
    pub x_kubernetes_map_type: Option<String>,
    /// `x-kubernetes-validations`, raw (CEL rules are evaluated elsewhere).
    pub x_kubernetes_validations: Option<Value>,
    /// `maximum`.
    pub maximum: Option<f64>,
    /// `exclusiveMaximum` (a boolean in OpenAPI v3.0).
    pub exclusive_maximum: bool,
    /// `minimum`.
    pub minimum: Option<f64>,
    /// `exclusiveMinimum` (a boolean in OpenAPI v3.0).
    pub exclusive_minimum: bool,
    /// `maxLength`, in runes.
    pub max_length: Option<i64>,
    /// `minLength`, in runes.
    pub min_length: Option<i64>,
    /// `pattern`, an RE2 regular expression matched anywhere in the string.
    pub pattern: Option<String>,
    /// `maxItems`.
    pub max_items: Option<i64>,
    /// `minItems`.
    pub min_items: Option<i64>,
    /// `uniqueItems`.
    pub unique_items: bool,
    /// `multipleOf`.
    pub multiple_of: Option<f64>,
    /// `enum`; `None` when absent.
    pub enum_: Option<Vec<Value>>,
    /// `maxProperties`.
    pub max_properties: Option<i64>,
    /// `minProperties`.
    pub min_properties: Option<i64>,
    /// `required`.
    pub required: Vec<String>,
    /// `allOf` (value validations only).
    pub all_of: Vec<Schema>,
    /// `anyOf` (value validations only).
    pub any_of: Vec<Schema>,
    /// `oneOf` (value validations only).
    pub one_of: Vec<Schema>,
    /// `not` (value validations only).
    pub not: Option<Box<Schema>>,
    /// The compiled `pattern`, or Go's compile error message.
    pub(crate) pattern_compiled: Option<Result<Regex, String>>,
}

fn int_field(m: &Map<String, Value>, key: &str) -> Result<Option<i64>, String> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => match n.as_i64() {
            Some(i) => Ok(Some(i)),
            None => n
                .as_f64()
                .filter(|f| f.fract() == 0.0)
                .map(|f| Some(f as i64))
                .ok_or(format!("{key} must be an integer")),
        },
        Some(_) => Err(format!("{key} must be an integer")),
    }
}

fn float_field(m: &Map<String, Value>, key: &str) -> Result<Option<f64>, String> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => Ok(n.as_f64()),
        Some(_) => Err(format!("{key} must be a number")),
    }
}

fn bool_field(m: &Map<String, Value>, key: &str) -> Result<bool, String> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(format!("{key} must be a boolean")),
    }
}

fn str_field(m: &Map<String, Value>, key: &str) -> Result<String, String> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(_) => Err(format!("{key} must be a string")),
    }
}

fn schema_list(m: &Map<String, Value>, key: &str) -> Result<Vec<Schema>, String> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items.iter().map(Schema::parse).collect(),
        Some(_) => Err(format!("{key} must be an array of schemas")),
    }
}

impl Schema {
    /// Parses one node (and its children) from a JSONSchemaProps JSON object.
    pub fn parse(v: &Value) -> Result<Schema, String> {
        let m = match v {
            Value::Object(m) => m,
            Value::Bool(true) => return Ok(Schema::default()),
            _ => return Err("schema must be an object".into()),
        };
        if m.contains_key("$ref") {
            return Err("$ref is not supported in structural schemas".into());
        }
        let mut s = Schema {
            type_: str_field(m, "type")?,
            format: str_field(m, "format")?,
            description: str_field(m, "description")?,
            title: str_field(m, "title")?,
            nullable: bool_field(m, "nullable")?,
            // A JSON null default is no default (kube's conversion drops it).
            default: m.get("default").filter(|d| !d.is_null()).cloned(),
            x_kubernetes_preserve_unknown_fields: bool_field(
                m,
                "x-kubernetes-preserve-unknown-fields",
            )?,
            x_kubernetes_embedded_resource: bool_field(m, "x-kubernetes-embedded-resource")?,
            x_kubernetes_int_or_string: bool_field(m, "x-kubernetes-int-or-string")?,
            x_kubernetes_validations: m
                .get("x-kubernetes-validations")
                .filter(|v| !v.is_null())
                .cloned(),
            maximum: float_field(m, "maximum")?,
            exclusive_maximum: bool_field(m, "exclusiveMaximum")?,
            minimum: float_field(m, "minimum")?,
            exclusive_minimum: bool_field(m, "exclusiveMinimum")?,
            max_length: int_field(m, "maxLength")?,
            min_length: int_field(m, "minLength")?,
            max_items: int_field(m, "maxItems")?,
            min_items: int_field(m, "minItems")?,
            unique_items: bool_field(m, "uniqueItems")?,
            multiple_of: float_field(m, "multipleOf")?,
            max_properties: int_field(m, "maxProperties")?,
            min_properties: int_field(m, "minProperties")?,
            all_of: schema_list(m, "allOf")?,
            any_of: schema_list(m, "anyOf")?,
            one_of: schema_list(m, "oneOf")?,
            ..Schema::default()
        };
        if let Some(p) = m.get("pattern").and_then(Value::as_str) {
            if !p.is_empty() {
                s.pattern = Some(p.to_string());
                s.pattern_compiled = Some(regex_go::compile(p));
            }
        }
        match m.get("x-kubernetes-list-type") {
            Some(Value::String(t)) => s.x_kubernetes_list_type = Some(t.clone()),
            None | Some(Value::Null) => {}
            Some(_) => return Err("x-kubernetes-list-type must be a string".into()),
        }
        match m.get("x-kubernetes-map-type") {
            Some(Value::String(t)) => s.x_kubernetes_map_type = Some(t.clone()),
            None | Some(Value::Null) => {}
            Some(_) => return Err("x-kubernetes-map-type must be a string".into()),
        }
        if let Some(keys) = m
            .get("x-kubernetes-list-map-keys")
            .and_then(Value::as_array)
        {
            s.x_kubernetes_list_map_keys = keys
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect();
        }
        if let Some(Value::Array(e)) = m.get("enum") {
            s.enum_ = Some(e.clone());
        }
        if let Some(Value::Array(r)) = m.get("required") {
            s.required = r
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect();
        }
        if let Some(not) = m.get("not").filter(|v| !v.is_null()) {
            s.not = Some(Box::new(Schema::parse(not)?));
        }
        match m.get("items") {
            None | Some(Value::Null) => {}
            Some(Value::Array(_)) => {
                return Err("OpenAPIV3Schema 'items' must be a schema, but is an array".into())
            }
            Some(items) => s.items = Some(Box::new(Schema::parse(items)?)),
        }
        match m.get("properties") {
            None | Some(Value::Null) => {}
            Some(Value::Object(props)) => {
                for (k, v) in props {
                    s.properties.insert(k.clone(), Schema::parse(v)?);
                }
            }
            Some(_) => return Err("properties must be an object".into()),
        }
        match m.get("additionalProperties") {
            None | Some(Value::Null) => {}
            Some(Value::Bool(b)) => s.additional_properties = Some(AdditionalProperties::Bool(*b)),
            Some(ap) => {
                s.additional_properties =
                    Some(AdditionalProperties::Schema(Box::new(Schema::parse(ap)?)))
            }
        }
        Ok(s)
    }

    /// The schema of the `additionalProperties` values, when one is given.
    pub fn additional_properties_schema(&self) -> Option<&Schema> {
        match &self.additional_properties {
            Some(AdditionalProperties::Schema(s)) => Some(s),
            _ => None,
        }
    }

    /// The schema a child key of an object follows: its property, else `additionalProperties`.
    pub fn child(&self, key: &str) -> Option<&Schema> {
        self.properties
            .get(key)
            .or_else(|| self.additional_properties_schema())
    }

    /// The sub-schema at a path of object keys; array levels are crossed with `"[]"`.
    ///
    /// Server-side apply and CEL need the list and map types of nested fields.
    pub fn at_path(&self, path: &[&str]) -> Option<&Schema> {
        let mut cur = self;
        for seg in path {
            cur = if *seg == "[]" {
                cur.items.as_deref()?
            } else {
                cur.child(seg)?
            };
        }
        Some(cur)
    }

    /// The types kube-openapi checks: `integer,string` for int-or-string, else `type`.
    pub(crate) fn openapi_types(&self) -> Vec<&str> {
        if self.x_kubernetes_int_or_string {
            vec!["integer", "string"]
        } else if self.type_.is_empty() {
            Vec::new()
        } else {
            vec![self.type_.as_str()]
        }
    }
}
