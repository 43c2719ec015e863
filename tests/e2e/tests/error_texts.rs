//! kube-apiserver's answers to bodies and patches that do not decode, byte for byte (issue 25
//! point 4), as its create, update and patch handlers word them: a body whose type cannot be
//! read is "unrecognized" with a summary of its start, a type the URL's kind cannot be made
//! from "cannot be handled", a JSON patch document that is not JSON "invalid JSON patch", a
//! patched object that does not decode an invalid `patch` (422) showing the patched JSON (JSON
//! and merge patches) or the patch itself (strategic merge patches, with the converter's
//! `cannot restore map from string`).

use kapi_e2e::{HttpResponse, Kapi, Request};
use serde_json::{json, Value};

const CMS: &str = "/api/v1/namespaces/default/configmaps";
const CM: &str = "/api/v1/namespaces/default/configmaps/settings";

/// kube's Status body for a 400 with `message`.
fn bad_request(message: &str) -> String {
    format!(
        "{{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{{}},\"status\":\"Failure\",\"message\":{},\"reason\":\"BadRequest\",\"code\":400}}\n",
        Value::String(message.into())
    )
}

/// kube's Status body for an invalid `patch` whose value is `shown`.
fn invalid_patch(shown: &str, detail: &str) -> String {
    let cause = format!("Invalid value: {}: {detail}", Value::String(shown.into()));
    format!(
        "{{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{{}},\"status\":\"Failure\",\"message\":{},\"reason\":\"Invalid\",\
         \"details\":{{\"causes\":[{{\"reason\":\"FieldValueInvalid\",\"message\":{},\"field\":\"patch\"}}]}},\"code\":422}}\n",
        Value::String(format!(" \"\" is invalid: patch: {cause}")),
        Value::String(cause),
    )
}

/// A JSON value as Go's `json.Marshal` writes a map: keys sorted at every level.
fn sorted(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            Value::Object(keys.into_iter().map(|k| (k.clone(), sorted(&m[k]))).collect())
        }
        Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

fn send(kapi: &Kapi, method: &str, path: &str, content_type: Option<&str>, body: &str) -> HttpResponse {
    let req = Request::new(method, path);
    let req = match content_type {
        Some(ct) => req.raw(ct, body),
        // curl's default for a body is a form type: "Content-Type:" removes the header.
        None => Request { body: Some(body.as_bytes().to_vec()), ..req }.header("Content-Type", ""),
    };
    kapi.request(&req)
}

#[test]
fn create_bodies_that_do_not_decode() {
    let kapi = Kapi::start().expect("start kapi");
    let cases: &[(&str, Option<&str>, &str, String)] = &[
        // YAML sent without a Content-Type is read as JSON.
        (
            "/api/v1/namespaces",
            None,
            "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: x\n",
            bad_request(
                "the object provided is unrecognized (must be of type Namespace): couldn't get version/kind; json parse error: \
                 invalid character 'a' looking for beginning of value (61706956657273696f6e3a2076310a6b696e643a204e616d657370616365 ...)",
            ),
        ),
        (
            CMS,
            Some("application/json"),
            r#"{"apiVersion":"v1","kind":"ConfigMap","#,
            bad_request(
                r#"the object provided is unrecognized (must be of type ConfigMap): couldn't get version/kind; json parse error: unexpected end of JSON input ({"apiVersion":"v1","kind":"Con ...)"#,
            ),
        ),
        (
            CMS,
            Some("application/json"),
            "",
            bad_request(
                "the object provided is unrecognized (must be of type ConfigMap): couldn't get version/kind; json parse error: unexpected end of JSON input (<empty>)",
            ),
        ),
        (
            CMS,
            Some("application/json"),
            r#"{"apiVersion":"v1" "kind":"ConfigMap"}"#,
            bad_request(
                r#"the object provided is unrecognized (must be of type ConfigMap): couldn't get version/kind; json parse error: invalid character '"' after object key:value pair ({"apiVersion":"v1" "kind":"Con ...)"#,
            ),
        ),
        (
            "/apis/apps/v1/namespaces/default/deployments",
            Some("application/json"),
            r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"},"spec":{"replicas":"3"}}"#,
            bad_request(
                r#"Deployment in version "v1" cannot be handled as a Deployment: json: cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas of type int32"#,
            ),
        ),
        (
            CMS,
            Some("application/json"),
            r#"{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"}}"#,
            bad_request(r#"Secret in version "v1" cannot be handled as a ConfigMap: converting (v1.Secret) to (core.ConfigMap): unknown conversion"#),
        ),
        (
            CMS,
            Some("application/yaml"),
            "apiVersion: v1\nkind: configmap\nmetadata:\n  name: c\n",
            bad_request(
                r#"configmap in version "v1" cannot be handled as a ConfigMap: no kind "configmap" is registered for version "v1" in scheme "pkg/api/legacyscheme/scheme.go:30""#,
            ),
        ),
        (
            "/apis/autoscaling/v1/namespaces/default/horizontalpodautoscalers",
            Some("application/json"),
            r#"{"apiVersion":"autoscaling/v2","kind":"HorizontalPodAutoscaler","metadata":{"name":"h"}}"#,
            bad_request("the API version in the data (autoscaling/v2) does not match the expected API version (autoscaling/v1)"),
        ),
    ];
    for (path, content_type, body, want) in cases {
        let r = send(&kapi, "POST", path, *content_type, body);
        assert_eq!(&r.raw, want, "POST {path} {body:?}");
    }
    // Nothing was created on the way.
    let list = kapi.get_json(CMS);
    assert_eq!(list["items"], json!([]), "{list}");
}

#[test]
fn patches_that_do_not_apply_or_decode() {
    let kapi = Kapi::start().expect("start kapi");
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings", "labels": {"app": "web"}}, "data": {"k": "v"}});
    assert_eq!(kapi.request(&Request::new("POST", CMS).json(&cm)).status, 201);
    let stored = kapi.get_json(CM);
    let rv = stored["metadata"]["resourceVersion"].clone();

    // Not JSON at all: refused before the object is read.
    for ct in ["application/json-patch+json", "application/merge-patch+json", "application/strategic-merge-patch+json"] {
        let r = send(&kapi, "PATCH", CM, Some(ct), r#"{"metadata":"#);
        assert_eq!(r.raw, bad_request("invalid JSON patch"), "{ct}");
    }
    let r = send(&kapi, "PATCH", CM, Some("application/json-patch+json"), r#"{"op":"add"}"#);
    assert_eq!(r.raw, bad_request("json: cannot unmarshal object into Go value of type jsonpatch.Patch"));
    let r = send(&kapi, "PATCH", CM, Some("application/json-patch+json"), r#"[{"op":"remove","path":"/metadata/annotations/nope"}]"#);
    assert_eq!(
        r.raw,
        "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\
         \"message\":\"the server rejected our request due to an error in our request\",\"reason\":\"Invalid\",\"details\":{},\"code\":422}\n"
    );

    // labels given a string: a JSON or merge patch shows the patched object (as its JSON patch
    // library re-marshals it) with Go's JSON decoding error ...
    let mut patched = stored.clone();
    patched["metadata"]["labels"] = json!("x");
    let shown = serde_json::to_string(&sorted(&patched)).expect("JSON");
    let json_error = "json: cannot unmarshal string into Go struct field ObjectMeta.metadata.labels of type map[string]string";
    let r = send(&kapi, "PATCH", CM, Some("application/merge-patch+json"), r#"{"metadata":{"labels":"x"}}"#);
    assert_eq!(r.raw, invalid_patch(&shown, json_error), "merge patch");
    let r = send(&kapi, "PATCH", CM, Some("application/json-patch+json"), r#"[{"op":"replace","path":"/metadata/labels","value":"x"}]"#);
    assert_eq!(r.raw, invalid_patch(&shown, json_error), "JSON patch");
    // ... a strategic merge patch shows the patch and the unstructured converter's error.
    let r = send(&kapi, "PATCH", CM, Some("application/strategic-merge-patch+json"), r#"{"metadata":{"labels":"x"},"data":{"k":"w"}}"#);
    assert_eq!(r.raw, invalid_patch("map[data:map[k:w] metadata:map[labels:x]]", "cannot restore map from string"), "strategic merge patch");
    let r = send(&kapi, "PATCH", CM, Some("application/strategic-merge-patch+json"), r#"{"data":{"k":1}}"#);
    assert_eq!(r.raw, invalid_patch("map[data:map[k:1]]", "cannot convert int64 to string"));

    // Duplicate fields under Strict are an invalid patch too.
    let r = send(
        &kapi,
        "PATCH",
        &format!("{CM}?fieldValidation=Strict"),
        Some("application/strategic-merge-patch+json"),
        r#"{"metadata":{"labels":{"x":"1","x":"2"}}}"#,
    );
    assert_eq!(r.raw, invalid_patch("map[metadata:map[labels:map[x:2]]]", r#"strict decoding error: duplicate field "metadata.labels.x""#));

    assert_eq!(kapi.get_json(CM)["metadata"]["resourceVersion"], rv, "a failed patch changed the object");
}
