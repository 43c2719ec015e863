//! Applying a MutatingAdmissionPolicy mutation to the object (kube's `mutating/patch`): JSON
//! Patch operations in order (a failed `test` leaves the object as it was), or an apply
//! configuration merged as server-side apply merges (structured-merge-diff's `Merge`, without
//! managed fields), refused where it would change atomic lists, maps or structs or names a
//! field the kind does not declare.

use kapi_fieldmanager::typed;
use kapi_fieldmanager::{ListType, Shape, TypeSchema};
use serde_json::Value;

/// evanphx/json-patch v4 texts for an operation that does not apply.
fn not_applicable(op: &Value, e: &json_patch::PatchError) -> String {
    let name = op.get("op").and_then(Value::as_str).unwrap_or_default();
    let path = op.get("path").and_then(Value::as_str).unwrap_or_default();
    match e.kind {
        json_patch::PatchErrorKind::InvalidPointer if name == "add" => {
            format!("add operation does not apply: doc is missing path: {path:?}: missing value")
        }
        json_patch::PatchErrorKind::InvalidPointer => {
            format!("{name} operation does not apply: doc is missing key: {path}: missing value")
        }
        _ => format!("{name} operation does not apply: {}", e.kind),
    }
}

/// evanphx v4's `test` of `null` passes when the member is absent from an existing object.
fn tests_null_on_absent_member(doc: &Value, op: &Value) -> bool {
    if op.get("op").and_then(Value::as_str) != Some("test") || !op.get("value").is_some_and(Value::is_null) {
        return false;
    }
    let path = op.get("path").and_then(Value::as_str).unwrap_or_default();
    let Some((parent, last)) = path.rsplit_once('/') else { return false };
    let last = last.replace("~1", "/").replace("~0", "~");
    matches!(doc.pointer(parent), Some(Value::Object(m)) if !m.contains_key(&last))
}

/// Applies `ops` to `object`: the patched object, the object unchanged when a `test` fails, or
/// kube's `JSON Patch: ...` error.
pub(crate) fn json_patch(object: &Value, ops: &[Value]) -> Result<Value, String> {
    let mut out = object.clone();
    for op in ops {
        if tests_null_on_absent_member(&out, op) {
            continue;
        }
        let parsed: json_patch::PatchOperation =
            serde_json::from_value(op.clone()).map_err(|e| format!("JSON Patch: {e}"))?;
        if let Err(e) = json_patch::patch(&mut out, std::slice::from_ref(&parsed)) {
            if matches!(e.kind, json_patch::PatchErrorKind::TestFailed) {
                return Ok(object.clone());
            }
            return Err(format!("JSON Patch: {}", not_applicable(op, &e)));
        }
    }
    Ok(out)
}

/// Collects the atomic nodes a patch sets and the fields it names that the schema does not
/// declare, with SMD's path text (`.field`, `[index]`).
fn walk<S: TypeSchema>(path: &str, schema: &S, value: &Value, atomics: &mut Vec<String>, undeclared: &mut Vec<String>) {
    match (schema.shape(), value) {
        // SMD looks no further into a map's entries than its own relationship
        (Shape::Map { atomic: true }, Value::Object(_)) => atomics.push(path.to_owned()),
        (Shape::Struct { atomic }, Value::Object(m)) => {
            if atomic {
                atomics.push(path.to_owned());
            }
            for (k, v) in m {
                let (child, declared) = schema.field(k);
                let p = format!("{path}.{k}");
                if !declared {
                    undeclared.push(format!("{p}: field not declared in schema"));
                    continue;
                }
                walk(&p, &child, v, atomics, undeclared);
            }
        }
        (Shape::List(list), Value::Array(items)) => {
            if list == ListType::Atomic {
                atomics.push(path.to_owned());
            }
            let child = schema.items();
            for (i, v) in items.iter().enumerate() {
                walk(&format!("{path}[{i}]"), &child, v, atomics, undeclared);
            }
        }
        _ => {}
    }
}

/// Merges an apply configuration into `live` with the kind's schema (kube's
/// `ApplyStructuredMergeDiff` and its `validatePatch`), with kube's error texts.
pub fn merge_apply_configuration<S: TypeSchema>(schema: &S, live: &Value, patch: &Value) -> Result<Value, String> {
    let (mut atomics, mut undeclared) = (Vec::new(), Vec::new());
    walk("", schema, patch, &mut atomics, &mut undeclared);
    if !undeclared.is_empty() {
        return Err(format!("failed to convert patch object to typed object: {}", undeclared.join("\n")));
    }
    if !atomics.is_empty() {
        return Err(format!(
            "invalid ApplyConfiguration: may not mutate atomic arrays, maps or structs: {}",
            atomics.join(", ")
        ));
    }
    Ok(typed::merge(live, patch, schema))
}
