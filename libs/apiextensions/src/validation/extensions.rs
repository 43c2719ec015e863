//! The `x-kubernetes-*` extension rules kube's `ValidateCustomResourceDefinitionOpenAPISchema`
//! applies to each schema node: preserve-unknown-fields, map types, list types and map keys.
//! They decide how server-side apply merges lists and maps, so a wrong combination would make
//! merges ambiguous.

use kapi_apimachinery::Cause;
use serde_json::Value;

use super::schema_walk::{items, items_schema, property, Items};
use super::{
    forbidden, get_arr, get_bool, get_some, get_str, invalid, invalid_str, not_supported, required, Opts, Path,
};

/// The `x-kubernetes-*` extension rules of one node.
pub(crate) fn extension_rules(s: &Value, path: &Path, list_type: Option<&str>, opts: &Opts) -> Vec<Cause> {
    let mut errs = Vec::new();
    let ty = get_str(s, "type");
    if get_some(s, "x-kubernetes-preserve-unknown-fields").and_then(Value::as_bool) == Some(false) {
        errs.push(invalid(
            &path.child("x-kubernetes-preserve-unknown-fields"),
            &Value::Bool(false),
            "must be true or undefined",
        ));
    }
    let map_type = get_some(s, "x-kubernetes-map-type").map(|v| v.as_str().unwrap_or(""));
    if let Some(mt) = map_type {
        let msg = "must be object if x-kubernetes-map-type is specified";
        if ty.is_empty() {
            errs.push(required(&path.child("type"), msg));
        } else if ty != "object" {
            errs.push(invalid_str(&path.child("type"), ty, msg));
        }
        if mt != "atomic" && mt != "granular" {
            errs.push(not_supported(&path.child("x-kubernetes-map-type"), mt, &["atomic", "granular"]));
        }
    }
    if list_type.is_some() && ty != "array" {
        let msg = "must be array if x-kubernetes-list-type is specified";
        if ty.is_empty() {
            errs.push(required(&path.child("type"), msg));
        } else {
            errs.push(invalid_str(&path.child("type"), ty, msg));
        }
    } else if opts.require_atomic_set_type && list_type == Some("set") {
        if let Some(is) = items_schema(s) {
            let msg = "must be atomic as item of a list with x-kubernetes-list-type=set";
            let item_list_type = get_some(is, "x-kubernetes-list-type");
            match get_str(is, "type") {
                "array" if item_list_type.is_some_and(|t| t.as_str() != Some("atomic")) => {
                    errs.push(invalid(
                        &path.child("items").child("x-kubernetes-list-type"),
                        item_list_type.unwrap_or(&Value::Null),
                        msg,
                    ));
                }
                "object" if get_some(is, "x-kubernetes-map-type").and_then(Value::as_str) != Some("atomic") => {
                    // kube shows the items' list type here
                    errs.push(invalid(
                        &path.child("items").child("x-kubernetes-map-type"),
                        item_list_type.unwrap_or(&Value::Null),
                        msg,
                    ));
                }
                _ => {}
            }
        }
    }
    if let Some(lt) = list_type {
        if !matches!(lt, "atomic" | "set" | "map") {
            errs.push(not_supported(&path.child("x-kubernetes-list-type"), lt, &["atomic", "set", "map"]));
        }
    }
    let keys = get_arr(s, "x-kubernetes-list-map-keys");
    if !keys.is_empty() {
        let msg = "must be map if x-kubernetes-list-map-keys is non-empty";
        match list_type {
            None => errs.push(required(&path.child("x-kubernetes-list-type"), msg)),
            Some(lt) if lt != "map" => errs.push(invalid_str(&path.child("x-kubernetes-list-type"), lt, msg)),
            _ => {}
        }
    }
    if list_type == Some("map") {
        if keys.is_empty() {
            errs.push(required(
                &path.child("x-kubernetes-list-map-keys"),
                "must not be empty if x-kubernetes-list-type is map",
            ));
        }
        match items(s) {
            None => errs.push(required(&path.child("items"), "must have a schema if x-kubernetes-list-type is map")),
            Some(Items::Array(_)) => errs.push(invalid(
                &path.child("items"),
                s.get("items").unwrap_or(&Value::Null),
                "must only have a single schema if x-kubernetes-list-type is map",
            )),
            Some(Items::Schema(is)) => {
                let item_type = get_str(is, "type");
                if item_type != "object" {
                    errs.push(invalid_str(
                        &path.child("items").child("type"),
                        item_type,
                        "must be object if parent array's x-kubernetes-list-type is map",
                    ));
                } else {
                    let keys_value = Value::Array(keys.to_vec());
                    let mut seen: Vec<&str> = Vec::new();
                    for k in keys.iter().map(|k| k.as_str().unwrap_or("")) {
                        match property(is, k) {
                            Some(p) if matches!(get_str(p, "type"), "array" | "object") => errs.push(invalid_str(
                                &path.child("items").child("properties").key(k).child("type"),
                                item_type,
                                "must be a scalar type if parent array's x-kubernetes-list-type is map",
                            )),
                            Some(_) => {}
                            None => errs.push(invalid(
                                &path.child("x-kubernetes-list-map-keys"),
                                &keys_value,
                                "entries must all be names of item properties",
                            )),
                        }
                        if seen.contains(&k) {
                            errs.push(invalid(
                                &path.child("x-kubernetes-list-map-keys"),
                                &keys_value,
                                "must not contain duplicate entries",
                            ));
                        }
                        seen.push(k);
                    }
                }
            }
        }
    }
    errs
}

/// kube's `validateMapListKeysMapSet`: set and map items are not nullable; map keys are
/// required or defaulted, and not nullable.
pub(crate) fn map_list_keys_map_set(s: &Value, path: &Path) -> Vec<Cause> {
    let mut errs = Vec::new();
    let Some(is) = items_schema(s) else {
        return errs;
    };
    let lt = get_some(s, "x-kubernetes-list-type").and_then(Value::as_str).unwrap_or("");
    if lt != "set" && lt != "map" {
        return errs;
    }
    if get_bool(is, "nullable") {
        errs.push(forbidden(
            &path.child("items").child("nullable"),
            &format!("cannot be nullable when x-kubernetes-list-type is {lt}"),
        ));
    }
    if lt == "map" {
        let required_keys: Vec<&str> = get_arr(is, "required").iter().filter_map(Value::as_str).collect();
        for k in get_arr(s, "x-kubernetes-list-map-keys").iter().map(|k| k.as_str().unwrap_or("")) {
            let Some(p) = property(is, k) else {
                continue;
            };
            let ppath = path.child("items").child("properties").key(k);
            if !required_keys.contains(&k) && get_some(p, "default").is_none() {
                errs.push(required(
                    &ppath.child("default"),
                    "this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property",
                ));
            }
            if get_bool(p, "nullable") {
                errs.push(forbidden(
                    &ppath.child("nullable"),
                    "this property is in x-kubernetes-list-map-keys, so it cannot be nullable",
                ));
            }
        }
    }
    errs
}
