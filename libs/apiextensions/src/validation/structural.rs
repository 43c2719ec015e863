//! kube's structural-schema rules (`pkg/apiserver/schema`): `NewStructural`'s refusals and
//! `ValidateStructural` (invariants plus completeness). A schema is structural when every
//! field is typed outside the logic junctors (`allOf`, `anyOf`, `oneOf`, `not`), which may only
//! carry value validations about fields the structure already declares. Pruning, defaulting
//! and server-side apply all rely on that, so v1 CRDs must be structural.

use kapi_apimachinery::Cause;
use serde_json::Value;

use super::regex_check::regex_error;
use super::schema_walk::{items, items_schema, non_empty_map, or_bool, properties, property, Items, OrBool};
use super::{forbidden, get_arr, get_bool, get_some, get_str, invalid, invalid_str, required, Path};

/// The first error kube's `NewStructural` gives for `s`, if any: keywords it cannot represent.
pub(crate) fn new_structural_error(s: &Value) -> Option<String> {
    if !s.is_object() {
        return None;
    }
    let unsupported = [
        ("id", !get_str(s, "id").is_empty()),
        ("schema", !get_str(s, "$schema").is_empty()),
        ("$ref", !get_str(s, "$ref").is_empty()),
        ("patternProperties", non_empty_map(s, "patternProperties")),
        ("dependencies", non_empty_map(s, "dependencies")),
        ("additionalItems", get_some(s, "additionalItems").is_some()),
        ("definitions", non_empty_map(s, "definitions")),
    ];
    if let Some((name, _)) = unsupported.iter().find(|(_, bad)| *bad) {
        return Some(format!("OpenAPIV3Schema '{name}' is not supported"));
    }
    let mut nested: Vec<&Value> = get_some(s, "not").into_iter().collect();
    for key in ["allOf", "anyOf", "oneOf"] {
        nested.extend(get_arr(s, key));
    }
    if let Some(e) = nested.into_iter().find_map(new_structural_error) {
        return Some(e);
    }
    if get_some(s, "x-kubernetes-preserve-unknown-fields").and_then(Value::as_bool) == Some(false) {
        return Some("internal error: 'x-kubernetes-preserve-unknown-fields' must be true or undefined".into());
    }
    match items(s) {
        Some(Items::Array(a)) if !a.is_empty() => {
            return Some("OpenAPIV3Schema 'items' must be a schema, but is an array".into());
        }
        Some(Items::Schema(x)) => {
            if let Some(e) = new_structural_error(x) {
                return Some(e);
            }
        }
        _ => {}
    }
    if let Some(e) = properties(s).find_map(|(_, p)| new_structural_error(p)) {
        return Some(e);
    }
    or_bool(s, "additionalProperties").and_then(|a| a.schema()).and_then(new_structural_error)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Level {
    Root,
    Item,
    Field,
}

/// kube's `ValidateStructural`: every error, sorted by message as kube sorts them.
pub(crate) fn validate_structural(path: &Path, s: &Value) -> Vec<Cause> {
    let mut errs = invariants(s, Level::Root, path);
    errs.extend(completeness_value(s, Some(s), path, path));
    errs.sort_by(|a, b| a.message.cmp(&b.message));
    errs
}

/// The `{type: integer}, {type: string}` pair of an int-or-string `anyOf`, and nothing else.
fn is_int_or_string_any_of(any_of: &[Value]) -> bool {
    let only_type = |v: &Value, t: &str| {
        v.as_object().is_some_and(|m| {
            m.iter().all(|(k, x)| {
                if k == "type" {
                    x.as_str() == Some(t)
                } else {
                    x.is_null() || x == &Value::Bool(false) || x == ""
                }
            })
        }) && get_str(v, "type") == t
    };
    any_of.len() == 2 && only_type(&any_of[0], "integer") && only_type(&any_of[1], "string")
}

fn invariants(s: &Value, lvl: Level, path: &Path) -> Vec<Cause> {
    let mut errs = Vec::new();
    if !s.is_object() {
        return errs;
    }
    let ty = get_str(s, "type");
    let item = items_schema(s);
    if ty == "array" && item.is_none() {
        errs.push(required(&path.child("items"), "must be specified"));
    }
    if let Some(x) = item {
        errs.extend(invariants(x, Level::Item, &path.child("items")));
    }
    for (k, p) in properties(s) {
        errs.extend(invariants(p, Level::Field, &path.child("properties").key(k)));
    }
    let ap = or_bool(s, "additionalProperties");
    if let Some(ap) = &ap {
        if lvl == Level::Root {
            errs.push(forbidden(&path.child("additionalProperties"), "must not be used at the root"));
        }
        if let OrBool::Schema(x) = ap {
            errs.extend(invariants(x, Level::Field, &path.child("additionalProperties")));
        }
    }
    let (int_or_string, preserve, embedded) = (
        get_bool(s, "x-kubernetes-int-or-string"),
        get_bool(s, "x-kubernetes-preserve-unknown-fields"),
        get_bool(s, "x-kubernetes-embedded-resource"),
    );
    if int_or_string && preserve {
        errs.push(invalid(
            &path.child("x-kubernetes-preserve-unknown-fields"),
            &Value::Bool(true),
            "must be false if x-kubernetes-int-or-string is true",
        ));
    }
    if int_or_string && embedded {
        errs.push(invalid(
            &path.child("x-kubernetes-embedded-resource"),
            &Value::Bool(true),
            "must be false if x-kubernetes-int-or-string is true",
        ));
    }
    let skip_any_of = is_int_or_string_any_of(get_arr(s, "anyOf"));
    let skip_first_all_of_any_of =
        get_arr(s, "allOf").first().is_some_and(|a| is_int_or_string_any_of(get_arr(a, "anyOf")));
    errs.extend(value_validation(s, skip_any_of, skip_first_all_of_any_of, lvl, path));

    let check_metadata = lvl == Level::Root || embedded;
    if embedded && ty != "object" {
        let msg = "must be object if x-kubernetes-embedded-resource is true";
        if ty.is_empty() {
            errs.push(required(&path.child("type"), msg));
        } else {
            errs.push(invalid_str(&path.child("type"), ty, msg));
        }
    } else if ty.is_empty() && !int_or_string && !preserve {
        let msg = match lvl {
            Level::Root => "must not be empty at the root",
            Level::Item => "must not be empty for specified array items",
            Level::Field => "must not be empty for specified object fields",
        };
        errs.push(required(&path.child("type"), msg));
    }
    if embedded && ap.is_some() {
        errs.push(forbidden(
            &path.child("additionalProperties"),
            "must not be used if x-kubernetes-embedded-resource is set",
        ));
    }
    if lvl == Level::Root && !ty.is_empty() && ty != "object" {
        errs.push(invalid_str(&path.child("type"), ty, "must be object at the root"));
    }
    for key in ["kind", "apiVersion"] {
        if let Some(p) = property(s, key).filter(|_| check_metadata) {
            let t = get_str(p, "type");
            if t != "string" {
                errs.push(invalid_str(&path.child("properties").key(key).child("type"), t, "must be string"));
            }
        }
    }
    if let Some(meta) = property(s, "metadata") {
        errs.extend(metadata_invariants(meta, check_metadata, lvl, &path.child("properties").key("metadata")));
    }
    if embedded && !preserve && properties(s).next().is_none() {
        errs.push(required(
            &path.child("properties"),
            "must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields",
        ));
    }
    errs
}

/// Root metadata may only constrain `name` and `generateName`: everything else about it is
/// fixed by ObjectMeta.
fn metadata_invariants(s: &Value, check_metadata: bool, lvl: Level, path: &Path) -> Vec<Cause> {
    let mut errs = Vec::new();
    let ty = get_str(s, "type");
    if check_metadata && ty != "object" {
        errs.push(invalid_str(&path.child("type"), ty, "must be object"));
    }
    if lvl != Level::Root {
        return errs;
    }
    let prop_names: Vec<&String> = properties(s).map(|(k, _)| k).collect();
    let only_names = !prop_names.is_empty()
        && prop_names.len() <= 2
        && prop_names.iter().all(|k| *k == "name" || *k == "generateName")
        && (prop_names.len() == 1 || prop_names[0] != prop_names[1]);
    let Some(m) = s.as_object() else {
        return errs;
    };
    let anything_else = m.iter().any(|(k, v)| match k.as_str() {
        "type" | "default" => false,
        "properties" => !(only_names || v.as_object().is_some_and(|p| p.is_empty())),
        // converted by appending, so an empty list is no list
        "enum" | "allOf" | "anyOf" | "oneOf" => v.as_array().is_some_and(|a| !a.is_empty()),
        _ => !(v.is_null() || v == &Value::Bool(false) || v == ""),
    });
    if anything_else {
        errs.push(forbidden(
            path,
            "must not specify anything other than name and generateName, but metadata is implicitly specified",
        ));
    }
    errs
}

/// kube's `validateValueValidation` for the junctors of one node.
fn value_validation(
    s: &Value,
    skip_any_of: bool,
    skip_first_all_of_any_of: bool,
    lvl: Level,
    path: &Path,
) -> Vec<Cause> {
    let mut errs = Vec::new();
    if !skip_any_of {
        for (i, x) in get_arr(s, "anyOf").iter().enumerate() {
            errs.extend(nested(x, false, lvl, &path.child("anyOf").index(i)));
        }
    }
    for (i, x) in get_arr(s, "allOf").iter().enumerate() {
        errs.extend(nested(x, skip_first_all_of_any_of && i == 0, lvl, &path.child("allOf").index(i)));
    }
    for (i, x) in get_arr(s, "oneOf").iter().enumerate() {
        errs.extend(nested(x, false, lvl, &path.child("oneOf").index(i)));
    }
    if let Some(not) = get_some(s, "not") {
        errs.extend(nested(not, false, lvl, &path.child("not")));
    }
    let pattern = get_str(s, "pattern");
    if !pattern.is_empty() {
        if let Some(e) = regex_error(pattern) {
            errs.push(invalid_str(
                &path.child("pattern"),
                pattern,
                &format!("must be a valid regular expression, but isn't: {e}"),
            ));
        }
    }
    errs
}

/// kube's `validateNestedValueValidation`: inside a junctor only value validations are allowed.
fn nested(v: &Value, skip_any_of: bool, lvl: Level, path: &Path) -> Vec<Cause> {
    let mut errs = Vec::new();
    if !v.is_object() {
        return errs;
    }
    errs.extend(value_validation(v, skip_any_of, false, lvl, path));
    if let Some(x) = items_schema(v) {
        errs.extend(nested(x, false, lvl, &path.child("items")));
    }
    for (k, p) in properties(v) {
        errs.extend(nested(p, false, Level::Field, &path.child("properties").key(k)));
    }
    if !get_str(v, "type").is_empty() {
        errs.push(forbidden(&path.child("type"), "must be empty to be structural"));
    }
    if or_bool(v, "additionalProperties").is_some_and(|a| a.allows()) {
        errs.push(forbidden(&path.child("additionalProperties"), "must be undefined to be structural"));
    }
    let checks: [(&str, bool, &str); 11] = [
        ("default", get_some(v, "default").is_some(), "must be undefined to be structural"),
        ("title", !get_str(v, "title").is_empty(), "must be empty to be structural"),
        ("description", !get_str(v, "description").is_empty(), "must be empty to be structural"),
        ("nullable", get_bool(v, "nullable"), "must be false to be structural"),
        (
            "x-kubernetes-preserve-unknown-fields",
            get_bool(v, "x-kubernetes-preserve-unknown-fields"),
            "must be false to be structural",
        ),
        (
            "x-kubernetes-embedded-resource",
            get_bool(v, "x-kubernetes-embedded-resource"),
            "must be false to be structural",
        ),
        ("x-kubernetes-int-or-string", get_bool(v, "x-kubernetes-int-or-string"), "must be false to be structural"),
        (
            "x-kubernetes-list-map-keys",
            !get_arr(v, "x-kubernetes-list-map-keys").is_empty(),
            "must be empty to be structural",
        ),
        (
            "x-kubernetes-list-type",
            get_some(v, "x-kubernetes-list-type").is_some(),
            "must be undefined to be structural",
        ),
        ("x-kubernetes-map-type", get_some(v, "x-kubernetes-map-type").is_some(), "must be undefined to be structural"),
        (
            "x-kubernetes-validations",
            !get_arr(v, "x-kubernetes-validations").is_empty(),
            "must be empty to be structural",
        ),
    ];
    for (key, bad, msg) in checks {
        if bad {
            errs.push(forbidden(&path.child(key), msg));
        }
    }
    if property(v, "metadata").is_some() {
        errs.push(forbidden(&path.child("properties").key("metadata"), "must not be specified in a nested context"));
    }
    errs
}

/// kube's `validateValueValidationCompleteness`: what a junctor at `v_path` constrains must
/// exist in the structure at `s_path`. Only the root's junctors are visited, as in kube.
fn completeness_value(v: &Value, s: Option<&Value>, s_path: &Path, v_path: &Path) -> Vec<Cause> {
    let Some(s) = s else {
        return vec![required(s_path, &format!("because it is defined in {v_path}"))];
    };
    let mut errs = Vec::new();
    if let Some(not) = get_some(v, "not") {
        errs.extend(completeness_nested(not, Some(s), s_path, &v_path.child("not")));
    }
    for key in ["allOf", "anyOf", "oneOf"] {
        for (i, x) in get_arr(v, key).iter().enumerate() {
            errs.extend(completeness_nested(x, Some(s), s_path, &v_path.child(key).index(i)));
        }
    }
    errs
}

fn completeness_nested(v: &Value, s: Option<&Value>, s_path: &Path, v_path: &Path) -> Vec<Cause> {
    let Some(s) = s else {
        return vec![required(s_path, &format!("because it is defined in {v_path}"))];
    };
    let mut errs = completeness_value(v, Some(s), s_path, v_path);
    if let Some(vi) = items_schema(v) {
        errs.extend(completeness_nested(vi, items_schema(s), &s_path.child("items"), &v_path.child("items")));
    }
    for (k, vp) in properties(v) {
        let sp = &s_path.child("properties").key(k);
        let vpp = v_path.child("properties").key(k);
        match property(s, k) {
            Some(sfld) => errs.extend(completeness_nested(vp, Some(sfld), sp, &vpp)),
            None => errs.push(required(sp, &format!("because it is defined in {vpp}"))),
        }
    }
    errs
}
