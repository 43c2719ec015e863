//! Small differences from kube-apiserver that break programs comparing answers byte for byte
//! (issue "Fidelity"): JSON answers end with a newline as Go's `json.Encoder` writes them, and
//! methods a path does not serve answer 405 MethodNotAllowed.

use kapi_e2e::{Kapi, Request};
use serde_json::json;

const CMS: &str = "/api/v1/namespaces/default/configmaps";

#[test]
fn json_answers_end_with_a_newline() {
    let kapi = Kapi::start().expect("start kapi");
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "nl"}, "data": {"a": "b"}});
    let answers = [
        ("create", kapi.request(&Request::new("POST", CMS).json(&cm))),
        ("get", kapi.request(&Request::get(&format!("{CMS}/nl")))),
        ("list", kapi.request(&Request::get(CMS))),
        ("list (limit)", kapi.request(&Request::get(&format!("{CMS}?limit=1")))),
        ("not found", kapi.request(&Request::get(&format!("{CMS}/missing")))),
        ("invalid", kapi.request(&Request::new("POST", CMS).json(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "Bad_Name"}})))),
        ("discovery", kapi.request(&Request::get("/api/v1"))),
        ("delete", kapi.request(&Request::new("DELETE", &format!("{CMS}/nl")))),
    ];
    for (what, r) in answers {
        assert!(r.raw.ends_with("}\n") && !r.raw.ends_with("\n\n"), "{what}: {:?}", &r.raw[r.raw.len().saturating_sub(20)..]);
    }
}

#[test]
fn methods_a_path_does_not_serve_are_405() {
    let kapi = Kapi::start().expect("start kapi");
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}});
    for (method, path) in [("PUT", CMS.to_owned()), ("PATCH", CMS.to_owned()), ("POST", format!("{CMS}/x"))] {
        let mut req = Request::new(method, &path).json(&cm);
        if method == "PATCH" {
            req = Request::new(method, &path).raw("application/merge-patch+json", b"{}".to_vec());
        }
        let r = kapi.request(&req);
        assert_eq!(r.status, 405, "{method} {path}: {}", r.raw);
        assert_eq!(r.reason(), "MethodNotAllowed");
        assert_eq!(r.message(), "the server does not allow this method on the requested resource");
    }
    // Nothing was created by any of them.
    assert_eq!(kapi.request(&Request::get(&format!("{CMS}/x"))).status, 404);
    // kubectl replace on a collection is not a thing, but a raw client sees the same answer.
    let out = kapi.kubectl(&["get", "--raw", CMS]);
    assert!(out.status.success());
}

#[test]
fn json_patch_may_test_and_replace_the_resource_version() {
    let kapi = Kapi::start().expect("start kapi");
    let created = kapi.request(&Request::new("POST", CMS).json(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "rv"}, "data": {"a": "1"}})));
    assert_eq!(created.status, 201, "{}", created.raw);
    let rv = created.body["metadata"]["resourceVersion"].as_str().unwrap_or_default().to_owned();
    let patch = |ops: serde_json::Value| kapi.request(&Request::new("PATCH", &format!("{CMS}/rv")).raw("application/json-patch+json", ops.to_string().into_bytes()));
    // kubectl's managed-fields migration: test the current resourceVersion, then change.
    let ok = patch(json!([{"op": "test", "path": "/metadata/resourceVersion", "value": rv}, {"op": "replace", "path": "/data/a", "value": "2"}]));
    assert_eq!(ok.status, 200, "{}", ok.raw);
    assert_eq!(ok.body["data"]["a"], "2");
    // A stale one fails the test (422, nothing changes); replacing it with a stale one is 409.
    let stale = patch(json!([{"op": "test", "path": "/metadata/resourceVersion", "value": rv}, {"op": "replace", "path": "/data/a", "value": "3"}]));
    assert_eq!(stale.status, 422, "{}", stale.raw);
    let pinned = patch(json!([{"op": "replace", "path": "/metadata/resourceVersion", "value": rv}, {"op": "replace", "path": "/data/a", "value": "4"}]));
    assert_eq!(pinned.status, 409, "{}", pinned.raw);
    assert_eq!(pinned.reason(), "Conflict");
    assert_eq!(kapi.get_json(&format!("{CMS}/rv"))["data"]["a"], "2");
}

#[test]
fn a_watch_from_an_expired_resource_version_is_one_error_event() {
    // A small cache window and a short compaction window: old revisions expire quickly.
    let kapi = Kapi::start_with(&["--storage-compaction-window", "1s", "--watch-cache-size", "8"]).expect("start kapi");
    let first = kapi.request(&Request::new("POST", CMS).json(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "w"}})));
    let rv = first.body["metadata"]["resourceVersion"].as_str().unwrap_or_default().to_owned();
    for i in 0..40 {
        let patch = format!(r#"{{"data":{{"n":"{i}"}}}}"#);
        let r = kapi.request(&Request::new("PATCH", &format!("{CMS}/w")).raw("application/merge-patch+json", patch.into_bytes()));
        assert_eq!(r.status, 200, "{}", r.raw);
    }
    std::thread::sleep(std::time::Duration::from_secs(3));
    let r = kapi.request(&Request::get(&format!("{CMS}?watch=1&resourceVersion={rv}&timeoutSeconds=2")));
    assert_eq!(r.status, 200, "kube answers a watch it cannot start with 200 and an ERROR event: {}", r.raw);
    let event: serde_json::Value = serde_json::from_str(r.raw.lines().next().unwrap_or_default()).expect("one event");
    assert_eq!(event["type"], "ERROR", "{}", r.raw);
    assert_eq!((event["object"]["code"].clone(), event["object"]["reason"].clone()), (json!(410), json!("Expired")), "{}", r.raw);
    assert_eq!(r.raw.lines().count(), 1, "{}", r.raw);
}
