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
