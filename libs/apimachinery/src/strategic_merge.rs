//! Strategic merge patch (`application/strategic-merge-patch+json`) as kube-apiserver applies
//! it to a stored object (apimachinery's `strategicpatch` with the server's options: parallel
//! deletion lists are merged, nulls for absent fields are dropped).
//!
//! How a field merges comes from its type: lists tagged `patchStrategy: merge` merge element by
//! element (by `patchMergeKey` for objects, as a set for scalars), other lists are replaced, and
//! maps merge recursively. The caller supplies that metadata through [`PatchSchema`], so this
//! module stays free of any particular schema source.
//!
//! Directives: `$patch: replace|delete` in a map, `$patch: delete|replace` elements in a list,
//! `$retainKeys`, `$setElementOrder/<list>` and `$deleteFromPrimitiveList/<list>`. List order
//! follows kube: `$setElementOrder` first, then the patch's order, then the live order, with
//! server-only elements interleaved by their live positions.
//!
//! Errors are 400 `BadRequest` for a malformed patch and 422 for the two cases kube reports as
//! unprocessable (lists of lists, content outside `$retainKeys`). kube-apiserver answers some
//! malformed patches (a missing merge key, an unknown `$patch` value) with a 500; kapi says 400,
//! because the fault is the request's.

use std::cmp::Ordering;

use serde_json::{Map, Value};

use crate::patch::json_kind;
use crate::status::{ApiError, StatusReason};

const DIRECTIVE: &str = "$patch";
const RETAIN_KEYS: &str = "$retainKeys";
const SET_ELEMENT_ORDER: &str = "$setElementOrder";
const DELETE_FROM_PRIMITIVE_LIST: &str = "$deleteFromPrimitiveList";

/// The list a `$setElementOrder/<list>` or `$deleteFromPrimitiveList/<list>` key names.
fn directive_target<'k>(key: &'k str, prefix: &str, format_error: &str) -> Result<Option<&'k str>, ApiError> {
    let Some(rest) = key.strip_prefix(prefix) else {
        return Ok(None);
    };
    match rest.strip_prefix('/') {
        Some(list) if !list.is_empty() => Ok(Some(list)),
        _ => Err(bad_request(format_error)),
    }
}

const BAD_PRIMITIVE_LIST: &str = "invalid patch format of primitive list";
const BAD_SET_ELEMENT_ORDER: &str = "invalid patch format of setElementOrder list";

/// How one field merges, from the Go type's `patchStrategy` and `patchMergeKey` tags.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FieldMeta {
    /// `patchStrategy` includes `merge`: lists merge element-wise instead of being replaced.
    pub merge: bool,
    /// `patchStrategy` includes `replace`: a map is replaced instead of merged.
    pub replace: bool,
    /// `patchMergeKey`: the field that identifies an object in a merged list.
    pub merge_key: Option<String>,
}

/// The type information strategic merge patch needs, one node of a schema at a time.
pub trait PatchSchema: Sized {
    /// The schema to merge `key`'s value with, and how the field merges. For a list field the
    /// schema is that of its elements; for a map's (`additionalProperties`) entries, that of
    /// the values. An unknown field gets a schema that knows nothing (everything replaces,
    /// maps merge), as kube's generic JSON handling does.
    fn field(&self, key: &str) -> (Self, FieldMeta);
}

/// A schema that knows nothing: maps merge, lists are replaced. Used for custom data and tests.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoSchema;

impl PatchSchema for NoSchema {
    fn field(&self, _key: &str) -> (Self, FieldMeta) {
        (NoSchema, FieldMeta::default())
    }
}

fn bad_request(message: impl Into<String>) -> ApiError {
    ApiError::bad_request(message)
}

fn unprocessable(message: &str) -> ApiError {
    ApiError { details: Some(Box::default()), ..ApiError::new(422, StatusReason::Invalid, message) }
}

fn compact(v: &Value) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

/// Applies a strategic merge patch body to `doc`, which is left untouched. The body must be a
/// JSON object (400 otherwise, with Go's decoding message as kube gives it).
pub fn apply_strategic_merge_patch<S: PatchSchema>(doc: &Value, patch: &[u8], schema: &S) -> Result<Value, ApiError> {
    let patch: Value = serde_json::from_slice(patch).map_err(|e| bad_request(e.to_string()))?;
    let Value::Object(patch) = patch else {
        return Err(bad_request(format!(
            "json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
            json_kind(&patch)
        )));
    };
    let original = match doc {
        Value::Object(m) => m.clone(),
        _ => Map::new(),
    };
    merge_map(original, patch, schema).map(Value::Object)
}

/// Merges `patch` into `original` (both already parsed); the entry point for callers that hold
/// values rather than bytes.
pub fn strategic_merge<S: PatchSchema>(original: &Value, patch: &Value, schema: &S) -> Result<Value, ApiError> {
    match (original, patch) {
        (Value::Object(o), Value::Object(p)) => merge_map(o.clone(), p.clone(), schema).map(Value::Object),
        (_, Value::Object(p)) => merge_map(Map::new(), p.clone(), schema).map(Value::Object),
        (_, other) => Err(bad_request(format!(
            "json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
            json_kind(other)
        ))),
    }
}

fn merge_map<S: PatchSchema>(mut original: Map<String, Value>, mut patch: Map<String, Value>, schema: &S) -> Result<Map<String, Value>, ApiError> {
    if let Some(directive) = patch.get(DIRECTIVE) {
        return match directive.as_str() {
            Some("replace") => {
                patch.remove(DIRECTIVE);
                Ok(drop_nulls_in_map(patch))
            }
            Some("delete") => Ok(Map::new()),
            _ => Err(bad_request(format!(
                "unknown patch type: {} in map: {}",
                directive.as_str().map_or_else(|| compact(directive), str::to_owned),
                compact(&Value::Object(patch.clone()))
            ))),
        };
    }
    apply_retain_keys(&mut original, &mut patch)?;
    apply_set_element_order(&mut original, &mut patch, schema)?;

    for (key, patch_value) in patch {
        if key.starts_with(SET_ELEMENT_ORDER) {
            continue;
        }
        let (key, delete_list) = match directive_target(&key, DELETE_FROM_PRIMITIVE_LIST, BAD_PRIMITIVE_LIST)? {
            Some(list) => (list.to_owned(), true),
            None => (key, false),
        };
        if patch_value.is_null() {
            original.remove(&key);
            continue;
        }
        let Some(current) = original.remove(&key) else {
            if !delete_list {
                let (sub, meta) = schema.field(&key);
                original.insert(key, fresh(patch_value, &sub, &meta)?);
            }
            continue;
        };
        let merged = match (current, patch_value) {
            (Value::Object(o), Value::Object(p)) if !delete_list => {
                let (sub, meta) = schema.field(&key);
                if meta.replace {
                    Value::Object(drop_nulls_in_map(p))
                } else {
                    Value::Object(merge_map(o, p, &sub)?)
                }
            }
            (Value::Array(o), Value::Array(p)) => {
                let (sub, meta) = schema.field(&key);
                if meta.merge || delete_list {
                    Value::Array(merge_list(o, p, &sub, meta.merge_key.as_deref(), delete_list)?)
                } else {
                    drop_nulls(Value::Array(p))
                }
            }
            // A deletion list that does not fit the field changes nothing.
            (current, _) if delete_list => current,
            // A value of another type replaces the current one whole: it is new, so its
            // directives are processed as a new field's (kube would store them as sent, and
            // its typed decoding then refuses the object).
            (_, p) => {
                let (sub, meta) = schema.field(&key);
                fresh(p, &sub, &meta)?
            }
        };
        original.insert(key, merged);
    }
    Ok(original)
}

/// A value the original does not have: merged into nothing, so that its directives are
/// processed and its nulls dropped rather than stored.
fn fresh<S: PatchSchema>(value: Value, schema: &S, meta: &FieldMeta) -> Result<Value, ApiError> {
    match value {
        Value::Object(p) if !meta.replace => merge_map(Map::new(), p, schema).map(Value::Object),
        Value::Array(p) if meta.merge && p.iter().any(Value::is_object) => {
            merge_list(Vec::new(), p, schema, meta.merge_key.as_deref(), false).map(Value::Array)
        }
        other => Ok(drop_nulls(other)),
    }
}

/// kube decodes into typed structs, where a JSON null is the zero value and is not written
/// back; objects here stay JSON, so nulls inside replaced values are dropped explicitly.
fn drop_nulls(value: Value) -> Value {
    match value {
        Value::Object(m) => Value::Object(drop_nulls_in_map(m)),
        Value::Array(items) => Value::Array(items.into_iter().map(drop_nulls).collect()),
        other => other,
    }
}

fn drop_nulls_in_map(m: Map<String, Value>) -> Map<String, Value> {
    m.into_iter().filter(|(_, v)| !v.is_null()).map(|(k, v)| (k, drop_nulls(v))).collect()
}

/// `$retainKeys`: fields of the original not in the list are cleared; a patch may not set a
/// field outside the list.
fn apply_retain_keys(original: &mut Map<String, Value>, patch: &mut Map<String, Value>) -> Result<(), ApiError> {
    let Some(retain) = patch.remove(RETAIN_KEYS) else {
        return Ok(());
    };
    let bad = || bad_request("invalid patch format of retainKeys");
    let Value::Array(retain) = retain else {
        return Err(bad());
    };
    let keep = |k: &str| retain.iter().any(|r| r.as_str() == Some(k));
    for (k, v) in patch.iter() {
        if v.is_null() || k.starts_with(DELETE_FROM_PRIMITIVE_LIST) || k.starts_with(SET_ELEMENT_ORDER) {
            continue;
        }
        if !keep(k) {
            return Err(bad());
        }
    }
    original.retain(|k, _| keep(k));
    Ok(())
}

/// `$setElementOrder/<list>`: merges the named list now and orders the result by the directive
/// (which names every element the client knows, in its order), so the main loop skips it.
fn apply_set_element_order<S: PatchSchema>(original: &mut Map<String, Value>, patch: &mut Map<String, Value>, schema: &S) -> Result<(), ApiError> {
    let directives: Vec<String> = patch.keys().filter(|k| k.starts_with(SET_ELEMENT_ORDER)).cloned().collect();
    for directive in directives {
        let bad = || bad_request(BAD_SET_ELEMENT_ORDER);
        let key = directive_target(&directive, SET_ELEMENT_ORDER, BAD_SET_ELEMENT_ORDER)?.unwrap_or_default().to_owned();
        let key = key.as_str();
        let Some(Value::Array(order)) = patch.remove(&directive) else {
            return Err(bad());
        };
        let current = match original.get(key) {
            None => None,
            Some(Value::Array(items)) => Some(items.clone()),
            Some(_) => return Err(bad()),
        };
        let patch_list = match patch.get(key) {
            None => None,
            Some(Value::Array(items)) => Some(items.clone()),
            Some(_) => return Err(bad()),
        };
        let (sub, meta) = schema.field(key);
        let merge_key = meta.merge_key.as_deref();
        if let Some(k) = merge_key {
            if let Some(entry) = order.iter().find(|e| e.get(k).is_none()) {
                return Err(missing_merge_key(entry, k));
            }
        }
        if let Some(p) = &patch_list {
            check_order_matches(p, &order, merge_key)?;
        }
        let original_items = current.clone().unwrap_or_default();
        let merged = match (current, patch_list) {
            (None, None) => continue,
            (Some(c), None) => c,
            (None, Some(p)) => match fresh(Value::Array(p), &sub, &meta)? {
                Value::Array(items) => items,
                _ => unreachable!("a list stays a list"),
            },
            (Some(c), Some(p)) if meta.merge => merge_list(c, p, &sub, merge_key, false)?,
            (Some(_), Some(p)) => p,
        };
        let kind = element_kind(&original_items, &merged)?;
        let key_for_maps = if kind == ElementKind::Map { merge_key } else { None };
        let (in_order, server_only) = partition(merged, &order, key_for_maps)?;
        let ordered = normalize_order(in_order, server_only, &order, &original_items, key_for_maps)?;
        original.insert(key.to_owned(), Value::Array(ordered));
        patch.remove(key);
    }
    Ok(())
}

/// kube's check that the patch list is ordered consistently with `$setElementOrder` and names
/// nothing the directive leaves out.
fn check_order_matches(patch: &[Value], order: &[Value], merge_key: Option<&str>) -> Result<(), ApiError> {
    if patch.is_empty() || order.is_empty() {
        return Ok(());
    }
    let plain: Vec<&Value> = patch.iter().filter(|v| v.get(DIRECTIVE).is_none()).collect();
    let (mut pi, mut oi) = (0, 0);
    while pi < plain.len() && oi < order.len() {
        if same_element(plain[pi], &order[oi], merge_key) {
            pi += 1;
        }
        oi += 1;
    }
    if pi < plain.len() {
        return Err(bad_request(format!(
            "The order in patch list:\n{}\n doesn't match $setElementOrder list:\n{}\n",
            compact(&Value::Array(patch.to_vec())),
            compact(&Value::Array(order.to_vec()))
        )));
    }
    Ok(())
}

fn same_element(a: &Value, b: &Value, merge_key: Option<&str>) -> bool {
    match merge_key {
        Some(k) => a.get(k).is_some() && a.get(k) == b.get(k),
        None => a == b,
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ElementKind {
    Map,
    Scalar,
}

/// The common element kind of the lists: every element must have the same JSON type (kube
/// compares Go types), and lists of lists cannot be merged.
fn element_kind(a: &[Value], b: &[Value]) -> Result<ElementKind, ApiError> {
    let mut first: Option<&Value> = None;
    for v in a.iter().chain(b) {
        if v.is_array() {
            return Err(unprocessable("lists of lists are not supported"));
        }
        match first {
            None => first = Some(v),
            Some(prev) if json_kind(prev) != json_kind(v) => {
                return Err(bad_request(format!(
                    "list element types are not identical: {} and {}",
                    json_kind(prev),
                    json_kind(v)
                )))
            }
            Some(_) => {}
        }
    }
    Ok(if first.is_some_and(Value::is_object) { ElementKind::Map } else { ElementKind::Scalar })
}

fn merge_list<S: PatchSchema>(
    original: Vec<Value>,
    patch: Vec<Value>,
    schema: &S,
    merge_key: Option<&str>,
    delete_list: bool,
) -> Result<Vec<Value>, ApiError> {
    if original.is_empty() && patch.is_empty() {
        return Ok(original);
    }
    let kind = element_kind(&original, &patch)?;
    if kind == ElementKind::Scalar {
        if delete_list {
            return Ok(original.into_iter().filter(|v| !patch.contains(v)).collect());
        }
        let mut merged: Vec<Value> = Vec::with_capacity(original.len() + patch.len());
        for v in original.iter().chain(&patch) {
            if !merged.contains(v) {
                merged.push(v.clone());
            }
        }
        let (in_patch, server_only) = partition(merged, &patch, None)?;
        return normalize_order(in_patch, server_only, &patch, &original, None);
    }
    let Some(key) = merge_key else {
        return Err(bad_request("cannot merge lists without merge key"));
    };
    let (original, patch) = apply_list_directives(original, patch, key)?;
    let mut merged = original.clone();
    for element in &patch {
        let Some(wanted) = element.get(key) else {
            return Err(missing_merge_key(element, key));
        };
        match merged.iter().position(|m| m.get(key) == Some(wanted)) {
            Some(i) => {
                let (Value::Object(o), Value::Object(p)) = (merged[i].take(), element.clone()) else {
                    unreachable!("element kinds were checked")
                };
                merged[i] = Value::Object(merge_map(o, p, schema)?);
            }
            None => merged.push(fresh(element.clone(), schema, &FieldMeta::default())?),
        }
    }
    let (in_patch, server_only) = partition(merged, &patch, Some(key))?;
    normalize_order(in_patch, server_only, &patch, &original, Some(key))
}

fn missing_merge_key(element: &Value, key: &str) -> ApiError {
    bad_request(format!("map: {} does not contain declared merge key: {key}", compact(element)))
}

/// Handles `$patch` elements of a merged list: `delete` removes the original element with the
/// same merge key, `replace` makes the other patch elements the whole list.
fn apply_list_directives(mut original: Vec<Value>, patch: Vec<Value>, key: &str) -> Result<(Vec<Value>, Vec<Value>), ApiError> {
    let mut plain = Vec::with_capacity(patch.len());
    let mut replace = false;
    for element in patch {
        let Some(directive) = element.get(DIRECTIVE) else {
            plain.push(element);
            continue;
        };
        match directive.as_str() {
            Some("delete") => {
                let Some(wanted) = element.get(key) else {
                    return Err(missing_merge_key(&element, key));
                };
                original.retain(|o| o.get(key) != Some(wanted));
            }
            Some("replace") => replace = true,
            Some("merge") => return Err(bad_request("merging lists cannot yet be specified in the patch")),
            _ => {
                return Err(bad_request(format!(
                    "unknown patch type: {} in map: {}",
                    directive.as_str().map_or_else(|| compact(directive), str::to_owned),
                    compact(&element)
                )))
            }
        }
    }
    if replace {
        let replaced = plain.into_iter().map(drop_nulls).collect();
        return Ok((replaced, Vec::new()));
    }
    Ok((original, plain))
}

/// Position of `item` in `list`, by merge key for objects and by value otherwise.
fn index_of(list: &[Value], item: &Value, key: Option<&str>) -> Option<usize> {
    match key {
        Some(k) => {
            let wanted = item.get(k)?;
            list.iter().position(|v| v.get(k) == Some(wanted))
        }
        None => list.iter().position(|v| v == item),
    }
}

/// Splits `merged` into the elements `by` names and the rest, keeping order.
fn partition(merged: Vec<Value>, by: &[Value], key: Option<&str>) -> Result<(Vec<Value>, Vec<Value>), ApiError> {
    let mut named = Vec::new();
    let mut rest = Vec::new();
    for v in merged {
        if let Some(k) = key {
            if v.get(k).is_none() {
                return Err(missing_merge_key(&v, k));
            }
        }
        if index_of(by, &v, key).is_some() {
            named.push(v);
        } else {
            rest.push(v);
        }
    }
    Ok((named, rest))
}

/// Orders `named` by `named_order` and `server_only` by `live_order`, then interleaves them:
/// a server-only element goes before a named one only when the live list has it earlier.
fn normalize_order(
    mut named: Vec<Value>,
    mut server_only: Vec<Value>,
    named_order: &[Value],
    live_order: &[Value],
    key: Option<&str>,
) -> Result<Vec<Value>, ApiError> {
    let by = |order: &[Value]| {
        let order = order.to_vec();
        move |a: &Value, b: &Value| -> Ordering {
            let ia = index_of(&order, a, key).unwrap_or(usize::MAX);
            let ib = index_of(&order, b, key).unwrap_or(usize::MAX);
            ia.cmp(&ib)
        }
    };
    named.sort_by(by(named_order));
    server_only.sort_by(by(live_order));

    let mut out = Vec::with_capacity(named.len() + server_only.len());
    let (mut left, mut right) = (server_only.into_iter().peekable(), named.into_iter().peekable());
    loop {
        match (left.peek(), right.peek()) {
            (None, None) => break,
            (Some(_), None) => out.extend(left.by_ref()),
            (None, Some(_)) => out.extend(right.by_ref()),
            (Some(l), Some(r)) => {
                let earlier = match (index_of(live_order, l, key), index_of(live_order, r, key)) {
                    (Some(li), Some(ri)) => li < ri,
                    _ => false,
                };
                let next = if earlier { left.next() } else { right.next() };
                out.extend(next);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// A schema for the tests: `items` merge by `name`, `tags` merge as a set, others replace.
    struct TestSchema;

    impl PatchSchema for TestSchema {
        fn field(&self, key: &str) -> (Self, FieldMeta) {
            let meta = match key {
                "items" => FieldMeta { merge: true, merge_key: Some("name".into()), ..FieldMeta::default() },
                "tags" => FieldMeta { merge: true, ..FieldMeta::default() },
                _ => FieldMeta::default(),
            };
            (TestSchema, meta)
        }
    }

    fn smp(original: Value, patch: Value) -> Result<Value, ApiError> {
        strategic_merge(&original, &patch, &TestSchema)
    }

    #[test]
    fn merges_keyed_lists_and_keeps_server_only_elements_in_place() {
        let out = smp(
            json!({"items": [{"name": "a", "v": 1}, {"name": "b", "v": 2}, {"name": "c"}]}),
            json!({"items": [{"name": "c", "v": 3}, {"name": "a", "v": null}]}),
        )
        .unwrap();
        assert_eq!(out, json!({"items": [{"name": "b", "v": 2}, {"name": "c", "v": 3}, {"name": "a"}]}));
    }

    #[test]
    fn other_lists_are_replaced_and_sets_deduplicated() {
        let out = smp(json!({"args": ["x", "y"], "tags": ["a", "b"]}), json!({"args": ["z"], "tags": ["c", "a"]}))
            .unwrap();
        assert_eq!(out, json!({"args": ["z"], "tags": ["c", "a", "b"]}));
    }

    #[test]
    fn directives() {
        let original = json!({"items": [{"name": "a"}, {"name": "b"}], "tags": ["a", "b"], "m": {"x": 1, "y": 2}});
        let out = smp(
            original.clone(),
            json!({
                "items": [{"name": "a", "$patch": "delete"}],
                "$deleteFromPrimitiveList/tags": ["b"],
                "m": {"$retainKeys": ["y"], "y": 3}
            }),
        )
        .unwrap();
        assert_eq!(out, json!({"items": [{"name": "b"}], "tags": ["a"], "m": {"y": 3}}));

        let out = smp(original.clone(), json!({"items": [{"name": "z"}, {"$patch": "replace"}], "m": {"$patch": "delete"}}))
            .unwrap();
        assert_eq!(out["items"], json!([{"name": "z"}]));
        assert_eq!(out["m"], json!({}));

        let out = smp(
            original.clone(),
            json!({"$setElementOrder/items": [{"name": "b"}, {"name": "a"}], "items": [{"name": "a", "k": 1}]}),
        )
        .unwrap();
        assert_eq!(out["items"], json!([{"name": "b"}, {"name": "a", "k": 1}]));
    }

    /// Found by the fuzzer: a map that replaces a string kept its `$retainKeys`.
    #[test]
    fn a_value_of_another_type_is_merged_as_a_new_field() {
        let out = smp(
            json!({"kind": "Deployment", "items": "x"}),
            json!({"kind": {"s": {"$retainKeys": ["type"], "type": "Recreate"}}, "items": [{"name": "a", "$patch": "replace"}]}),
        )
        .unwrap();
        assert_eq!(out, json!({"kind": {"s": {"type": "Recreate"}}, "items": []}));
    }

    #[test]
    fn malformed_patches_fail_with_client_errors() {
        let original = json!({"items": [{"name": "a"}], "m": {"x": 1}});
        for (patch, code, message) in [
            (json!({"items": [{"v": 1}]}), 400, "does not contain declared merge key: name"),
            (json!({"items": [{"name": "a", "$patch": "merge"}]}), 400, "merging lists cannot yet be specified"),
            (json!({"m": {"$patch": "bogus"}}), 400, "unknown patch type: bogus"),
            (json!({"m": {"$retainKeys": ["y"], "x": 2}}), 400, "invalid patch format of retainKeys"),
            (json!({"items": [["nested"]]}), 422, "lists of lists are not supported"),
            (json!({"$setElementOrder/items": "a"}), 400, "invalid patch format of setElementOrder list"),
        ] {
            let err = smp(original.clone(), patch.clone()).unwrap_err();
            assert_eq!(err.code, code, "{patch}");
            assert!(err.message.contains(message), "{patch}: {}", err.message);
        }
        let err = apply_strategic_merge_patch(&original, b"[1]", &NoSchema).unwrap_err();
        assert_eq!(err.code, 400);
        assert!(err.message.contains("cannot unmarshal array"), "{}", err.message);
    }
}
