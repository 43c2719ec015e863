//! Reading `JSONSchemaProps` in its JSON form: the union-typed fields (`items`,
//! `additionalProperties`, `dependencies`) and kube's `SchemaHas` walk, which several "does the
//! old CRD already break this rule" checks of an update use.

use serde_json::{Map, Value};

use super::{get_arr, get_some};

/// `items`: one schema or (unsupported) an array of schemas.
pub(crate) enum Items<'a> {
    Schema(&'a Value),
    Array(&'a [Value]),
}

pub(crate) fn items(s: &Value) -> Option<Items<'_>> {
    match get_some(s, "items")? {
        Value::Array(a) => Some(Items::Array(a)),
        other => Some(Items::Schema(other)),
    }
}

/// The single `items` schema, if that is what `items` holds.
pub(crate) fn items_schema(s: &Value) -> Option<&Value> {
    match items(s)? {
        Items::Schema(x) => Some(x),
        Items::Array(_) => None,
    }
}

/// `additionalProperties` / `additionalItems`: a boolean or a schema (which allows).
pub(crate) enum OrBool<'a> {
    Bool(bool),
    Schema(&'a Value),
}

pub(crate) fn or_bool<'a>(s: &'a Value, key: &str) -> Option<OrBool<'a>> {
    match get_some(s, key)? {
        Value::Bool(b) => Some(OrBool::Bool(*b)),
        other => Some(OrBool::Schema(other)),
    }
}

impl<'a> OrBool<'a> {
    pub(crate) fn schema(&self) -> Option<&'a Value> {
        match self {
            OrBool::Schema(s) => Some(s),
            OrBool::Bool(_) => None,
        }
    }

    /// kube's `Allows`: a schema allows, a boolean says so itself.
    pub(crate) fn allows(&self) -> bool {
        match self {
            OrBool::Schema(_) => true,
            OrBool::Bool(b) => *b,
        }
    }
}

/// The named properties (empty map when absent).
pub(crate) fn properties(s: &Value) -> impl Iterator<Item = (&String, &Value)> {
    s.get("properties").and_then(Value::as_object).into_iter().flatten()
}

pub(crate) fn properties_map(s: &Value) -> Option<&Map<String, Value>> {
    s.get("properties").and_then(Value::as_object).filter(|m| !m.is_empty())
}

pub(crate) fn property<'a>(s: &'a Value, name: &str) -> Option<&'a Value> {
    s.get("properties").and_then(|p| p.get(name))
}

/// Whether a map-valued keyword (`patternProperties`, `definitions`, `dependencies`) is non-empty.
pub(crate) fn non_empty_map(s: &Value, key: &str) -> bool {
    s.get(key).and_then(Value::as_object).is_some_and(|m| !m.is_empty())
}

/// Every sub-schema kube's `SchemaHas` visits, in its order.
pub(crate) fn children(s: &Value) -> Vec<&Value> {
    let mut out = Vec::new();
    match items(s) {
        Some(Items::Schema(x)) => out.push(x),
        Some(Items::Array(a)) => out.extend(a.iter()),
        None => {}
    }
    for key in ["allOf", "anyOf", "oneOf"] {
        out.extend(get_arr(s, key).iter());
    }
    if let Some(not) = get_some(s, "not") {
        out.push(not);
    }
    out.extend(properties(s).map(|(_, v)| v));
    if let Some(ap) = or_bool(s, "additionalProperties").and_then(|x| x.schema()) {
        out.push(ap);
    }
    if let Some(m) = s.get("patternProperties").and_then(Value::as_object) {
        out.extend(m.values());
    }
    if let Some(ai) = or_bool(s, "additionalItems").and_then(|x| x.schema()) {
        out.push(ai);
    }
    if let Some(m) = s.get("definitions").and_then(Value::as_object) {
        out.extend(m.values());
    }
    if let Some(m) = s.get("dependencies").and_then(Value::as_object) {
        out.extend(m.values().filter(|v| v.is_object()));
    }
    out
}

/// kube's `SchemaHas`: whether `pred` holds for `s` or any schema below it.
pub(crate) fn schema_has(s: &Value, pred: &dyn Fn(&Value) -> bool) -> bool {
    if !s.is_object() {
        return false;
    }
    pred(s) || children(s).into_iter().any(|c| schema_has(c, pred))
}

/// The `openAPIV3Schema` of every version of a v1 CRD (kube's `HasSchemaWith` visits the
/// hoisted top-level schema or the per-version ones: the same set).
pub(crate) fn version_schemas(crd: &Value) -> Vec<&Value> {
    crd.pointer("/spec/versions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| v.pointer("/schema/openAPIV3Schema").filter(|s| !s.is_null()))
        .collect()
}

/// kube's `HasSchemaWith` over a v1 CRD.
pub(crate) fn crd_has_schema_with(crd: &Value, pred: &dyn Fn(&Value) -> bool) -> bool {
    version_schemas(crd).into_iter().any(pred)
}
