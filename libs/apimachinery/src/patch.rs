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

/// How much the `copy` operations of one JSON patch may add, in bytes of JSON: kube gives
/// evanphx/json-patch its `--max-request-body-bytes` (3 MiB) as `AccumulatedCopySizeLimit`, so
/// a patch whose copies double a document over and over fails instead of filling the memory.
pub const MAX_JSON_PATCH_COPY_BYTES: usize = 3 * 1024 * 1024;

/// How deep a JSON patch may nest the document. kube refuses (422) a patched object nested
/// deeper than Go's JSON decoder reads (10000 levels); kapi stops at 1000, deeper than any body
/// it decodes (serde_json reads 128 levels), because every later step (validation, encoding,
/// dropping the value) recurses once per level on a worker thread's stack.
pub const MAX_JSON_PATCH_DEPTH: usize = 1_000;

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
    let mut guard = Growth::new(&out);
    for op in &ops {
        if tests_null_on_absent_member(&out, op) {
            continue;
        }
        guard.admit(&out, op)?;
        json_patch::patch(&mut out, std::slice::from_ref(op)).map_err(|_| not_applicable())?;
    }
    Ok(out)
}

/// What a JSON patch has made the document grow by so far: the bytes its copies added, and a
/// bound on the document's depth (exact for `add` and `replace`; a `move` or `copy` is first
/// taken to carry the deepest value its source could hold, and measured when that bound passes
/// the limit). Checked before each operation, so that a copy of a huge or deep value is refused
/// before it is made.
struct Growth {
    copied: usize,
    depth: usize,
    /// How many times the depth was measured: a few per patch, so that a patch hovering at the
    /// limit cannot make every operation walk the whole document.
    measured: usize,
}

impl Growth {
    fn new(doc: &Value) -> Self {
        Growth { copied: 0, depth: depth(doc), measured: 0 }
    }

    fn admit(&mut self, doc: &Value, op: &PatchOperation) -> Result<(), ApiError> {
        let tokens = |p: &json_patch::jsonptr::Pointer| p.tokens().count();
        let (placed, source) = match op {
            PatchOperation::Add(add) => (tokens(&add.path) + depth(&add.value), None),
            PatchOperation::Replace(replace) => (tokens(&replace.path) + depth(&replace.value), None),
            PatchOperation::Move(mv) => (tokens(&mv.path) + self.depth.saturating_sub(tokens(&mv.from)), Some((&mv.from, &mv.path))),
            PatchOperation::Copy(copy) => {
                // A missing source fails in the patch library, with its 422.
                if let Some(value) = doc.pointer(copy.from.as_str()) {
                    let room = MAX_JSON_PATCH_COPY_BYTES.saturating_sub(self.copied) + 1;
                    self.copied += json_size(value, room);
                    if self.copied > MAX_JSON_PATCH_COPY_BYTES {
                        return Err(ApiError::new(
                            422,
                            StatusReason::Invalid,
                            format!(
                                "Unable to complete the copy, the accumulated size increase of copy is {}, exceeding the limit {MAX_JSON_PATCH_COPY_BYTES}",
                                self.copied
                            ),
                        ));
                    }
                }
                (tokens(&copy.path) + self.depth.saturating_sub(tokens(&copy.from)), Some((&copy.from, &copy.path)))
            }
            PatchOperation::Remove(_) | PatchOperation::Test(_) => (0, None),
        };
        self.depth = self.depth.max(placed);
        if self.depth > MAX_JSON_PATCH_DEPTH && self.measured < 8 {
            self.measured += 1;
            let moved = source.map_or(0, |(from, path)| tokens(path) + doc.pointer(from.as_str()).map_or(0, depth));
            self.depth = depth(doc).max(moved).max(if source.is_none() { placed } else { 0 });
        }
        if self.depth > MAX_JSON_PATCH_DEPTH {
            return Err(ApiError::new(
                422,
                StatusReason::Invalid,
                format!("the JSON patch nests the object deeper than {MAX_JSON_PATCH_DEPTH} levels"),
            ));
        }
        Ok(())
    }
}

/// The nesting depth of `value` (a scalar: 0, `{}` or `[]`: 1), without recursion.
pub fn depth(value: &Value) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(value, 0usize)];
    while let Some((v, d)) = stack.pop() {
        match v {
            Value::Object(map) => {
                deepest = deepest.max(d + 1);
                stack.extend(map.values().map(|c| (c, d + 1)));
            }
            Value::Array(items) => {
                deepest = deepest.max(d + 1);
                stack.extend(items.iter().map(|c| (c, d + 1)));
            }
            _ => {}
        }
    }
    deepest
}

/// About the size of `value` as compact JSON (strings and keys counted without escapes),
/// without recursion; counting stops once past `cap`.
fn json_size(value: &Value, cap: usize) -> usize {
    let mut size = 0;
    let mut stack = vec![value];
    while let Some(v) = stack.pop() {
        size += match v {
            Value::Null => 4,
            Value::Bool(b) => if *b { 4 } else { 5 },
            Value::Number(n) => n.to_string().len(),
            Value::String(s) => s.len() + 2,
            Value::Array(items) => {
                stack.extend(items.iter());
                2 + items.len().saturating_sub(1)
            }
            Value::Object(map) => {
                stack.extend(map.values());
                2 + map.keys().map(|k| k.len() + 3).sum::<usize>() + map.len().saturating_sub(1)
            }
        };
        if size > cap {
            break;
        }
    }
    size
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

    #[test]
    fn json_patch_copies_are_bounded_as_kube_bounds_them() {
        // Each copy doubles /spec: 40 of them would make 2^40 copies of a kilobyte.
        let mut ops = vec![json!({"op": "add", "path": "/spec/x", "value": "y".repeat(1024)})];
        ops.extend((0..40).map(|i| json!({"op": "copy", "from": "/spec", "path": format!("/spec/c{i}")})));
        let e = apply_json_patch(&pod(), json!(ops).to_string().as_bytes()).expect_err("a copy bomb");
        assert_eq!((e.code, e.reason), (422, StatusReason::Invalid));
        assert!(e.message.starts_with("Unable to complete the copy, the accumulated size increase of copy is "), "{}", e.message);
        assert!(e.message.ends_with(", exceeding the limit 3145728"), "{}", e.message);
        // Copies within the limit apply.
        let out = apply_json_patch(&pod(), br#"[{"op":"copy","from":"/metadata/labels","path":"/spec/labels"}]"#).expect("a small copy");
        assert_eq!(out["spec"]["labels"], json!({"app": "web", "tier": "fe"}));
    }

    #[test]
    fn json_patch_cannot_nest_past_the_depth_limit() {
        // Each triple nests /spec/x 121 levels deeper (a 120-deep value added beside it, x moved
        // to its bottom, the value moved back); 830 of them would nest it 100,000 deep.
        let value: Value = serde_json::from_str(&format!("{}{{}}{}", r#"{"a":"#.repeat(119), "}".repeat(119))).expect("value");
        let down = "/a".repeat(120);
        let mut ops = vec![json!({"op": "add", "path": "/spec/x", "value": {}})];
        for _ in 0..830 {
            ops.push(json!({"op": "add", "path": "/spec/t", "value": value}));
            ops.push(json!({"op": "move", "from": "/spec/x", "path": format!("/spec/t{down}")}));
            ops.push(json!({"op": "move", "from": "/spec/t", "path": "/spec/x"}));
        }
        let e = apply_json_patch(&pod(), json!(ops).to_string().as_bytes()).expect_err("too deep");
        assert_eq!((e.code, e.reason), (422, StatusReason::Invalid));
        assert_eq!(e.message, "the JSON patch nests the object deeper than 1000 levels");
        // Eight triples (963 levels) apply, and the document is as deep as said.
        let out = apply_json_patch(&pod(), json!(ops[..25]).to_string().as_bytes()).expect("963 levels");
        assert_eq!(depth(&out), 3 + 8 * 120);
        // A copy of that deep value further down is refused before it is made.
        let e = apply_json_patch(&out, format!(r#"[{{"op":"copy","from":"/spec/x","path":"/spec/x{}/c"}}]"#, "/a".repeat(119)).as_bytes());
        assert_eq!(e.map(|_| ()).map_err(|e| e.message), Err("the JSON patch nests the object deeper than 1000 levels".to_owned()));
        assert_eq!(depth(&json!({"a": [1, {"b": {}}]})), 4);
        assert_eq!(depth(&json!(3)), 0);
    }
}
