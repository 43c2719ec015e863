//! JSON patch (RFC 6902) and JSON merge patch (RFC 7386) as kube-apiserver applies them.
//!
//! Status codes follow kube-apiserver's patch handler: a body that does not decode is 400; a
//! JSON patch that decodes but does not apply (a failed `test`, a missing path, an unknown op)
//! is 422 with the fixed message `the server rejected our request due to an error in our
//! request` and an empty `details`, because kube reports it through `NewGenericServerResponse`;
//! more than 10000 operations is 413.

use json_patch::PatchOperation;
use serde_json::Value;

use crate::status::{ApiError, StatusReason};

/// kube-apiserver's cap on the operations of one JSON patch.
pub const MAX_JSON_PATCH_OPERATIONS: usize = 10_000;

fn not_applicable() -> ApiError {
    ApiError {
        details: Some(Box::default()),
        ..ApiError::new(422, StatusReason::Invalid, "the server rejected our request due to an error in our request")
    }
}

/// The JSON type name of a value, as Go's decoding errors name it (`cannot unmarshal array ...`).
pub fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Applies an `application/json-patch+json` body to `doc`; the result is a new document and
/// `doc` is untouched whatever happens.
pub fn apply_json_patch(doc: &Value, patch: &[u8]) -> Result<Value, ApiError> {
    let raw: Value = serde_json::from_slice(patch).map_err(|e| ApiError::bad_request(e.to_string()))?;
    let Value::Array(ops) = raw else {
        return Err(ApiError::bad_request(format!(
            "json: cannot unmarshal {} into Go value of type jsonpatch.Patch",
            json_kind(&raw)
        )));
    };
    if let Some(bad) = ops.iter().find(|op| !op.is_object()) {
        return Err(ApiError::bad_request(format!(
            "json: cannot unmarshal {} into Go value of type jsonpatch.Operation",
            json_kind(bad)
        )));
    }
    if ops.len() > MAX_JSON_PATCH_OPERATIONS {
        return Err(ApiError::new(
            413,
            StatusReason::RequestEntityTooLarge,
            format!("The allowed maximum operations in a JSON patch is {MAX_JSON_PATCH_OPERATIONS}, got {}", ops.len()),
        ));
    }
    // An operation with an unknown `op` or missing members decodes in kube and fails when
    // applied, hence 422 rather than 400.
    let ops: Vec<PatchOperation> =
        ops.into_iter().map(serde_json::from_value).collect::<Result<_, _>>().map_err(|_| not_applicable())?;
    // One operation at a time on a copy: the same result as applying the list, with room for
    // kube's one departure from RFC 6902 below; `doc` stays untouched on failure.
    let mut out = doc.clone();
    for op in &ops {
        if tests_null_on_absent_member(&out, op) {
            continue;
        }
        json_patch::patch(&mut out, std::slice::from_ref(op)).map_err(|_| not_applicable())?;
    }
    Ok(out)
}

/// kube applies JSON patches with evanphx/json-patch v4, whose `test` of `null` passes when the
/// member is absent from an existing object (RFC 6902 and the json-patch crate fail it). Clients
/// rely on it: kube-rs's finalizer helper adds the first finalizer with `test
/// /metadata/finalizers null` then `add /metadata/finalizers [...]`. A missing parent or an array
/// index past the end still fails, as in kube.
fn tests_null_on_absent_member(doc: &Value, op: &PatchOperation) -> bool {
    let PatchOperation::Test(test) = op else { return false };
    if !test.value.is_null() {
        return false;
    }
    let Some((parent, last)) = test.path.split_back() else { return false };
    matches!(doc.pointer(parent.as_str()), Some(Value::Object(map)) if !map.contains_key(last.decoded().as_ref()))
}

/// Applies an `application/merge-patch+json` body: objects merge recursively, `null` deletes a
/// member, anything else replaces. A body that is not an object or an array is 400. An array
/// is the result itself, as evanphx/json-patch v4's `MergePatch` makes it (null members of its
/// objects dropped): kube then fails to decode it as an object.
pub fn apply_merge_patch(doc: &Value, patch: &[u8]) -> Result<Value, ApiError> {
    let mut patch: Value = serde_json::from_slice(patch).map_err(|_| ApiError::bad_request("Invalid JSON Patch"))?;
    match patch {
        Value::Object(_) => {
            let mut out = doc.clone();
            json_patch::merge(&mut out, &patch);
            Ok(out)
        }
        Value::Array(_) => {
            drop_null_members(&mut patch);
            Ok(patch)
        }
        _ => Err(ApiError::bad_request("Invalid JSON Patch")),
    }
}

/// Drops `null` members of objects at any depth (array elements stay, `null` or not).
fn drop_null_members(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|_, v| !v.is_null());
            map.values_mut().for_each(drop_null_members);
        }
        Value::Array(items) => items.iter_mut().for_each(drop_null_members),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod() -> Value {
        json!({"metadata": {"name": "a", "labels": {"app": "web", "tier": "fe"}}, "spec": {"replicas": 1}})
    }

    #[test]
    fn merge_patch_null_deletes() {
        let out =
            apply_merge_patch(&pod(), br#"{"metadata":{"labels":{"tier":null,"new":"x"}},"spec":{"replicas":3}}"#)
                .unwrap_or_else(|e| panic!("{}", e.message));
        assert_eq!(out["metadata"]["labels"], json!({"app": "web", "new": "x"}));
        assert_eq!(out["spec"]["replicas"], 3);
        assert_eq!(out["metadata"]["name"], "a");
    }

    #[test]
    fn merge_patch_array_is_the_result() {
        let out = apply_merge_patch(&pod(), br#"[{"a":null,"b":[null,{"c":null}]},null]"#).map_err(|e| e.message);
        assert_eq!(out, Ok(json!([{"b": [null, {}]}, null])));
    }

    #[test]
    fn merge_patch_rejects_non_objects() {
        for body in [&b"\"x\""[..], b"null", b"3", b"{not json"] {
            let e = apply_merge_patch(&pod(), body).err().map(|e| (e.code, e.message));
            assert_eq!(e, Some((400, "Invalid JSON Patch".to_string())), "{}", String::from_utf8_lossy(body));
        }
    }

    #[test]
    fn json_patch_applies() {
        let out = apply_json_patch(
            &pod(),
            br#"[{"op":"test","path":"/metadata/labels/app","value":"web"},
                 {"op":"replace","path":"/spec/replicas","value":5},
                 {"op":"add","path":"/metadata/labels/x","value":"y"},
                 {"op":"remove","path":"/metadata/labels/tier"}]"#,
        )
        .unwrap_or_else(|e| panic!("{}", e.message));
        assert_eq!(out["spec"]["replicas"], 5);
        assert_eq!(out["metadata"]["labels"], json!({"app": "web", "x": "y"}));
    }

    #[test]
    fn json_patch_test_failure_is_422_and_atomic() {
        let doc = pod();
        let e = apply_json_patch(
            &doc,
            br#"[{"op":"replace","path":"/spec/replicas","value":5},{"op":"test","path":"/metadata/labels/app","value":"db"}]"#,
        )
        .err();
        let e = e.unwrap_or_else(|| panic!("test op should fail"));
        assert_eq!(e.code, 422);
        assert_eq!(e.reason, StatusReason::Invalid);
        assert_eq!(e.message, "the server rejected our request due to an error in our request");
        assert_eq!(e.to_status()["details"], json!({}));
        assert_eq!(doc, pod());
    }

    #[test]
    fn json_patch_test_of_null_passes_on_an_absent_member_as_in_kube() {
        // kube-rs's finalizer helper, on an object without finalizers.
        let out = apply_json_patch(
            &pod(),
            br#"[{"op":"test","path":"/metadata/finalizers","value":null},
                 {"op":"add","path":"/metadata/finalizers","value":["example.com/f"]}]"#,
        )
        .unwrap_or_else(|e| panic!("{}", e.message));
        assert_eq!(out["metadata"]["finalizers"], json!(["example.com/f"]));
        // An escaped member name; a present null member also equals null.
        let mut doc = pod();
        doc["metadata"]["annotations"] = json!({"a/b": null});
        doc["spec"]["list"] = json!([1]);
        let ok = |p: &[u8]| apply_json_patch(&doc, p).map(|_| ()).map_err(|e| e.code);
        assert_eq!(ok(br#"[{"op":"test","path":"/metadata/annotations/a~1b","value":null}]"#), Ok(()));
        assert_eq!(ok(br#"[{"op":"test","path":"/metadata/annotations/other","value":null}]"#), Ok(()));
        // Still failing: a present non-null member, a missing parent, an index past the end, a
        // non-null value for an absent member.
        assert_eq!(ok(br#"[{"op":"test","path":"/metadata/name","value":null}]"#), Err(422));
        assert_eq!(ok(br#"[{"op":"test","path":"/metadata/missing/x","value":null}]"#), Err(422));
        assert_eq!(ok(br#"[{"op":"test","path":"/spec/list/1","value":null}]"#), Err(422));
        assert_eq!(ok(br#"[{"op":"test","path":"/metadata/finalizers","value":[]}]"#), Err(422));
        // Atomic: a later failure leaves nothing applied.
        let before = doc.clone();
        assert_eq!(
            ok(br#"[{"op":"test","path":"/metadata/finalizers","value":null},{"op":"add","path":"/metadata/finalizers","value":[]},{"op":"test","path":"/metadata/name","value":"zz"}]"#),
            Err(422)
        );
        assert_eq!(doc, before);
    }

    #[test]
    fn json_patch_errors() {
        let code = |b: &[u8]| apply_json_patch(&pod(), b).err().map(|e| e.code);
        assert_eq!(code(b"{bad"), Some(400));
        assert_eq!(code(br#"{"op":"add"}"#), Some(400));
        assert_eq!(code(br#"["x"]"#), Some(400));
        assert_eq!(code(br#"[{"op":"frobnicate","path":"/a"}]"#), Some(422));
        assert_eq!(code(br#"[{"op":"remove","path":"/nope"}]"#), Some(422));
        assert_eq!(code(br#"[{"op":"add","path":"/missing/parent","value":1}]"#), Some(422));
        let many = format!(
            "[{}]",
            vec![r#"{"op":"test","path":"/spec","value":{}}"#; MAX_JSON_PATCH_OPERATIONS + 1].join(",")
        );
        assert_eq!(code(many.as_bytes()), Some(413));
        assert_eq!(apply_json_patch(&pod(), b"[]").ok(), Some(pod()));
    }
}
