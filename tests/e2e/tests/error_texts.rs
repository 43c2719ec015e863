//! kube-apiserver's answers to bodies and patches that do not decode, byte for byte (issue 25
//! point 4), as its create, update and patch handlers word them: a body whose type cannot be
//! read is "unrecognized" with a summary of its start, a type the URL's kind cannot be made
//! from "cannot be handled", a JSON patch document that is not JSON "invalid JSON patch", a
//! patched object that does not decode an invalid `patch` (422) showing the patched JSON (JSON
//! and merge patches) or the patch itself (strategic merge patches, with the converter's
//! `cannot restore map from string`); the strict pre-decode of JSON and merge patch documents;
//! strict errors in the order the decoder meets them; DELETE bodies (DeleteOptions) and scale
//! and binding bodies.

use kapi_e2e::{HttpResponse, Kapi, Request};
use serde_json::{json, Value};

const CMS: &str = "/api/v1/namespaces/default/configmaps";
const CM: &str = "/api/v1/namespaces/default/configmaps/settings";

/// The Go type kube reads `apiVersion` and `kind` into first, as its errors print it.
const FIND_KIND: &str = r#"struct { APIVersion string "json:\"apiVersion,omitempty\""; Kind string "json:\"kind,omitempty\"" }"#;

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
    // kube-root-ca.crt is every namespace's (kube's root-ca-cert-publisher); nothing else.
    let names: Vec<&str> = list["items"].as_array().into_iter().flatten().filter_map(|i| i["metadata"]["name"].as_str()).collect();
    assert!(names.iter().all(|n| *n == "kube-root-ca.crt"), "{list}");
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
    // Under Warn (the default) and Strict kube first decodes the document strictly into the
    // type it expects; under Ignore its JSON patch library words the failure.
    let r = send(&kapi, "PATCH", CM, Some("application/json-patch+json"), r#"{"op":"add"}"#);
    assert_eq!(r.raw, bad_request("error decoding patch: json: cannot unmarshal object into Go value of type []handlers.jsonPatchOp"));
    let r = send(&kapi, "PATCH", &format!("{CM}?fieldValidation=Ignore"), Some("application/json-patch+json"), r#"{"op":"add"}"#);
    assert_eq!(r.raw, bad_request("json: cannot unmarshal object into Go value of type jsonpatch.Patch"));
    // A merge patch that is an array: refused by the strict decode, or (Ignore) the patched
    // document itself, which does not decode as an object.
    let r = send(&kapi, "PATCH", CM, Some("application/merge-patch+json"), r#"[{"b":1,"a":null}]"#);
    assert_eq!(r.raw, bad_request("error decoding patch: json: cannot unmarshal array into Go value of type map[string]interface {}"));
    let r = send(&kapi, "PATCH", &format!("{CM}?fieldValidation=Ignore"), Some("application/merge-patch+json"), r#"[{"b":1,"a":null}]"#);
    assert_eq!(r.raw, invalid_patch(r#"[{"b":1}]"#, &format!("couldn't get version/kind; json parse error: json: cannot unmarshal array into Go value of type {FIND_KIND}")));
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

#[test]
fn strict_errors_follow_the_body() {
    let kapi = Kapi::start().expect("start kapi");
    // kube's decoder reports fields as it meets them: here the duplicate comes first.
    let body = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"dup"},"data":{"k":"1","k":"2"},"bogus":1}"#;
    let r = send(&kapi, "POST", &format!("{CMS}?fieldValidation=Strict"), Some("application/json"), body);
    assert_eq!(
        r.raw,
        bad_request(r#"ConfigMap in version "v1" cannot be handled as a ConfigMap: strict decoding error: duplicate field "data.k", unknown field "bogus""#)
    );
    let body = r#"{"apiVersion":"v1","kind":"ConfigMap","bogus":1,"metadata":{"name":"dup"},"data":{"k":"1","k":"2"}}"#;
    let r = send(&kapi, "POST", &format!("{CMS}?fieldValidation=Strict"), Some("application/json"), body);
    assert_eq!(
        r.raw,
        bad_request(r#"ConfigMap in version "v1" cannot be handled as a ConfigMap: strict decoding error: unknown field "bogus", duplicate field "data.k""#)
    );
}

#[test]
fn delete_options_and_subresource_bodies_that_do_not_decode() {
    let kapi = Kapi::start().expect("start kapi");
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"}});
    assert_eq!(kapi.request(&Request::new("POST", CMS).json(&cm)).status, 201);
    // DELETE: the DeleteOptions decoder's own texts, not wrapped as a create's are.
    let cases = [
        ("{", "couldn't get version/kind; json parse error: unexpected end of JSON input".to_owned()),
        ("[1]", format!("couldn't get version/kind; json parse error: json: cannot unmarshal array into Go value of type {FIND_KIND}")),
        (r#"{"gracePeriodSeconds":"0"}"#, "json: cannot unmarshal string into Go struct field DeleteOptions.gracePeriodSeconds of type int64".to_owned()),
    ];
    for (body, want) in cases {
        let r = send(&kapi, "DELETE", CM, Some("application/json"), body);
        assert_eq!(r.raw, bad_request(&want), "DELETE {body}");
    }
    assert_eq!(kapi.request(&Request::get(CM)).status, 200, "a refused DELETE deleted");

    // scale PUT and pod binding: decoded as kube's update and create handlers decode.
    let scale = "/apis/apps/v1/namespaces/default/deployments/web/scale";
    let r = send(&kapi, "PUT", scale, Some("application/json"), "[1]");
    assert_eq!(
        r.raw,
        bad_request(&format!(
            "the object provided is unrecognized (must be of type Scale): couldn't get version/kind; json parse error: json: cannot unmarshal array into Go value of type {FIND_KIND} (5b315d)"
        ))
    );
    let r = send(&kapi, "PUT", scale, Some("application/json"), r#"{"apiVersion":"autoscaling/v1","kind":"Scale","spec":{"replicas":"3"}}"#);
    assert_eq!(
        r.raw,
        bad_request(r#"Scale in version "v1" cannot be handled as a Scale: json: cannot unmarshal string into Go struct field ScaleSpec.spec.replicas of type int32"#)
    );
    let r = send(&kapi, "PUT", scale, Some("application/json"), r#"{"apiVersion":"apps/v1","kind":"Deployment"}"#);
    assert_eq!(r.raw, bad_request(r#"Deployment in version "v1" cannot be handled as a Scale: converting (v1.Deployment) to (autoscaling.Scale): unknown conversion"#));
    let r = send(&kapi, "POST", "/api/v1/namespaces/default/pods/p/binding", Some("application/json"), r#"{"apiVersion":"v1","#);
    assert_eq!(
        r.raw,
        bad_request(
            r#"the object provided is unrecognized (must be of type Binding): couldn't get version/kind; json parse error: unexpected end of JSON input ({"apiVersion":"v1",)"#
        )
    );
}
