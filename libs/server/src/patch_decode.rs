//! What kube's patch handler says about JSON and merge patch documents of the wrong shape
//! (`endpoints/handlers/patch.go`, `applyJSPatch`).
//!
//! Under `fieldValidation=Warn` (the default) and `Strict`, kube first decodes the document
//! strictly into the type it expects (a list of `jsonPatchOp`, a `map[string]any`), so a
//! document of another shape is a 400 `error decoding patch: ...` with Go's decoding text.
//! Under `Ignore` it goes straight to its JSON patch library: a merge patch that is an array
//! becomes the patched document itself, which then cannot be read as an object (422).

use kapi_apimachinery::patch::json_kind;
use kapi_apimachinery::ApiError;
use serde_json::Value;

use crate::field_validation::{invalid_patch, FieldValidation, Patched};

/// The fields of kube's `jsonPatchOp` that are Go strings (`value` is `interface{}`).
const OP_STRING_FIELDS: [&str; 3] = ["op", "path", "from"];

/// Checks a JSON (`json_patch`) or merge patch document, already known to be JSON, as kube's
/// strict pre-decode does in the Warn and Strict modes.
pub fn check_document(mode: FieldValidation, json_patch: bool, body: &[u8]) -> Result<(), ApiError> {
    if mode == FieldValidation::Ignore {
        return Ok(());
    }
    let Ok(doc) = serde_json::from_slice::<Value>(body) else { return Ok(()) };
    let problem = if json_patch { op_list_problem(&doc) } else { merge_problem(&doc) };
    match problem {
        Some(text) => Err(ApiError::bad_request(format!("error decoding patch: {text}"))),
        None => Ok(()),
    }
}

fn merge_problem(doc: &Value) -> Option<String> {
    match doc {
        Value::Object(_) | Value::Null => None,
        other => Some(format!("json: cannot unmarshal {} into Go value of type map[string]interface {{}}", json_kind(other))),
    }
}

/// Go reports the first value that does not fit, in document order.
fn op_list_problem(doc: &Value) -> Option<String> {
    let ops = match doc {
        Value::Array(ops) => ops,
        Value::Null => return None,
        other => return Some(format!("json: cannot unmarshal {} into Go value of type []handlers.jsonPatchOp", json_kind(other))),
    };
    ops.iter().find_map(|op| match op {
        Value::Object(fields) => fields.iter().find_map(|(key, value)| {
            let bad = OP_STRING_FIELDS.contains(&key.as_str()) && !matches!(value, Value::String(_) | Value::Null);
            bad.then(|| format!("json: cannot unmarshal {} into Go struct field jsonPatchOp.{key} of type string", json_kind(value)))
        }),
        Value::Null => None,
        other => Some(format!("json: cannot unmarshal {} into Go value of type handlers.jsonPatchOp", json_kind(other))),
    })
}

/// kube's 422 for a JSON or merge patch whose result is not an object: the decoder cannot
/// read its type (`couldn't get version/kind; json parse error: ...`), shown with the result.
pub fn not_an_object(patched: &Value) -> ApiError {
    invalid_patch(Patched::Json(None), patched, &crate::decode::not_an_object_reason(patched))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(mode: FieldValidation, json_patch: bool, body: &str) -> Option<String> {
        check_document(mode, json_patch, body.as_bytes()).err().map(|e| e.message)
    }

    #[test]
    fn merge_patches_must_be_objects_unless_ignored() {
        let want = "error decoding patch: json: cannot unmarshal array into Go value of type map[string]interface {}";
        assert_eq!(message(FieldValidation::Warn, false, "[1]").as_deref(), Some(want));
        assert_eq!(message(FieldValidation::Strict, false, "[1]").as_deref(), Some(want));
        assert_eq!(message(FieldValidation::Ignore, false, "[1]"), None);
        assert_eq!(message(FieldValidation::Warn, false, r#"{"a":1}"#), None);
        assert_eq!(message(FieldValidation::Warn, false, "null"), None);
    }

    #[test]
    fn json_patches_are_lists_of_ops() {
        let cases = [
            (r#"{"op":"add"}"#, Some("json: cannot unmarshal object into Go value of type []handlers.jsonPatchOp")),
            (r#"["add"]"#, Some("json: cannot unmarshal string into Go value of type handlers.jsonPatchOp")),
            (r#"[{"op":1,"path":2}]"#, Some("json: cannot unmarshal number into Go struct field jsonPatchOp.op of type string")),
            (r#"[{"op":"add","path":"/a","value":[1]}]"#, None),
        ];
        for (body, want) in cases {
            let want = want.map(|w| format!("error decoding patch: {w}"));
            assert_eq!(message(FieldValidation::Warn, true, body), want, "{body}");
            assert_eq!(message(FieldValidation::Ignore, true, body), None, "{body}");
        }
    }

    #[test]
    fn a_result_that_is_not_an_object_is_an_invalid_patch() {
        let err = not_an_object(&serde_json::json!([{"b": 1, "a": "<"}]));
        assert_eq!(err.code, 422);
        assert_eq!(
            err.message,
            r#" "" is invalid: patch: Invalid value: "[{\"a\":\"\\u003c\",\"b\":1}]": couldn't get version/kind; json parse error: json: cannot unmarshal array into Go value of type struct { APIVersion string "json:\"apiVersion,omitempty\""; Kind string "json:\"kind,omitempty\"" }"#
        );
    }
}
