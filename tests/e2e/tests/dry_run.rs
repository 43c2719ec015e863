//! `dryRun=All` on every writing verb: the answer is what would have been stored (defaults,
//! managedFields, generated fields) and storage does not change. Checked over HTTP for create,
//! update, each patch type, apply, delete and deletecollection, and with kubectl's
//! `--dry-run=server`.

use kapi_e2e::{Kapi, OutputExt, Request};
use serde_json::{json, Value};

const NS: &str = "dry";

fn cm(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": {"set": "x"}}, "data": {"a": "1"}})
}

#[test]
fn dry_run_answers_without_storing() {
    let kapi = Kapi::start().expect("start kapi");
    kapi.kubectl(&["create", "namespace", NS]).ok("create namespace");
    let coll = format!("/api/v1/namespaces/{NS}/configmaps");
    for name in ["one", "two"] {
        assert_eq!(kapi.request(&Request::new("POST", &coll).json(&cm(name))).status, 201);
    }
    let snapshot = || kapi.get_json(&coll)["items"].clone();
    let before = snapshot();
    let one = format!("{coll}/one");

    // create
    let r = kapi.request(&Request::new("POST", &format!("{coll}?dryRun=All&fieldManager=dry")).json(&cm("three")));
    assert_eq!(r.status, 201, "{}", r.body);
    assert!(r.body["metadata"]["uid"].as_str().is_some_and(|u| !u.is_empty()), "generated fields are filled: {}", r.body);
    assert_eq!(r.body["metadata"]["managedFields"][0]["manager"], "dry");
    assert_eq!(kapi.request(&Request::get(&format!("{coll}/three"))).status, 404);

    // update
    let mut changed = kapi.get_json(&one);
    changed["data"]["a"] = json!("2");
    let r = kapi.request(&Request::new("PUT", &format!("{one}?dryRun=All")).json(&changed));
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["data"]["a"], "2");

    // patches of every type, and apply (also creating)
    for (content_type, body) in [
        ("application/json-patch+json", r#"[{"op":"replace","path":"/data/a","value":"3"}]"#),
        ("application/merge-patch+json", r#"{"data":{"a":"3"}}"#),
        ("application/strategic-merge-patch+json", r#"{"data":{"a":"3"}}"#),
    ] {
        let r = kapi.request(&Request::new("PATCH", &format!("{one}?dryRun=All")).raw(content_type, body));
        assert_eq!(r.status, 200, "{content_type}: {}", r.body);
        assert_eq!(r.body["data"]["a"], "3", "{content_type}");
    }
    let apply = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: one}\ndata: {a: '4'}\n";
    let r = kapi.request(&Request::new("PATCH", &format!("{one}?dryRun=All&fieldManager=tool&force=true")).raw("application/apply-patch+yaml", apply));
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["data"]["a"], "4");
    let create = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: four}\n";
    let r = kapi.request(
        &Request::new("PATCH", &format!("{coll}/four?dryRun=All&fieldManager=tool")).raw("application/apply-patch+yaml", create),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(kapi.request(&Request::get(&format!("{coll}/four"))).status, 404);

    // delete and deletecollection
    let r = kapi.request(&Request::new("DELETE", &format!("{one}?dryRun=All")));
    assert_eq!(r.status, 200, "{}", r.body);
    let r = kapi.request(&Request::new("DELETE", &format!("{coll}?dryRun=All&labelSelector=set%3Dx")));
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["items"].as_array().map(Vec::len), Some(2), "{}", r.body);

    assert_eq!(snapshot(), before, "a dry run changed storage");

    // kubectl's server-side dry runs.
    let out = kapi.kubectl(&["delete", "configmap", "one", "-n", NS, "--dry-run=server"]).ok("delete --dry-run=server");
    assert!(kapi_e2e::is_deletion_report(&out, r#"configmap "one""#, NS, " (server dry run)"), "{out}");
    let out = kapi.kubectl(&["label", "configmap", "two", "-n", NS, "extra=yes", "--dry-run=server", "-o", "json"]).ok("label --dry-run");
    let labelled: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(labelled["metadata"]["labels"]["extra"], "yes");
    assert_eq!(snapshot(), before, "kubectl's dry runs changed storage");

    // An unknown dryRun value is rejected.
    let r = kapi.request(&Request::new("DELETE", &format!("{one}?dryRun=Some")));
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(snapshot(), before);
}
