#![recursion_limit = "256"]
//! CEL rules over durations and timestamps through the API: a Gateway-API-like route whose
//! timeouts are compared with `duration(...)`, and a certificate-like resource whose validity
//! window uses `format: date-time` and `format: duration` fields. Valid objects are created;
//! invalid ones are refused with 422 and kube's causes (field path and message).

use kapi_e2e::{wait_for, Kapi, Request};
use serde_json::{json, Value};
use std::time::Duration;

const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";

fn crd(plural: &str, kind: &str, spec: Value) -> Value {
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": format!("{plural}.example.com")},
        "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": plural, "kind": kind},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": spec}}}}]}})
}

/// Gateway API's HTTPRoute timeouts, as its CRD declares them (plain strings with a pattern).
fn route_crd() -> Value {
    let timeout = json!({"type": "string", "pattern": "^([0-9]{1,5}(h|m|s|ms)){1,4}$"});
    crd("routes", "Route", json!({"type": "object", "properties": {"rules": {"type": "array", "maxItems": 16, "items": {
        "type": "object", "properties": {"timeouts": {"type": "object",
            "properties": {"request": timeout, "backendRequest": timeout},
            "x-kubernetes-validations": [{
                "message": "backendRequest timeout cannot be longer than request timeout",
                "rule": "!(has(self.request) && has(self.backendRequest) && duration(self.request) != duration('0s') && duration(self.backendRequest) > duration(self.request))"
            }]}}}}}}))
}

fn certificate_crd() -> Value {
    crd("certificates", "Certificate", json!({"type": "object",
        "properties": {
            "notBefore": {"type": "string", "format": "date-time"},
            "notAfter": {"type": "string", "format": "date-time"},
            "renewBefore": {"type": "string", "format": "duration",
                "x-kubernetes-validations": [{"rule": "self >= duration('5m')", "message": "renewBefore must be at least 5m"}]}
        },
        "x-kubernetes-validations": [
            {"rule": "timestamp(self.notAfter) > timestamp(self.notBefore)", "message": "notAfter must be after notBefore"},
            {"rule": "!has(self.renewBefore) || self.notAfter - self.renewBefore > self.notBefore", "fieldPath": ".renewBefore", "message": "renewBefore is longer than the validity window"}
        ]}))
}

/// Each cause as `<field>: <message>` (kube keeps the field out of the cause's message).
fn causes(r: &kapi_e2e::HttpResponse) -> Vec<String> {
    let text = |c: &Value, k: &str| c[k].as_str().unwrap_or_default().to_owned();
    r.body["details"]["causes"].as_array().into_iter().flatten().map(|c| format!("{}: {}", text(c, "field"), text(c, "message"))).collect()
}

fn serve(kapi: &Kapi, crd: &Value, collection: &str) {
    let created = kapi.request(&Request::new("POST", CRDS).json(crd));
    assert_eq!(created.status, 201, "{}", created.raw);
    let served = wait_for(Duration::from_secs(10), || (kapi.request(&Request::get(collection)).status == 200).then_some(()));
    assert!(served.is_some(), "{collection} not served");
}

#[test]
fn duration_and_timestamp_rules_accept_valid_objects_and_refuse_invalid_ones() {
    let kapi = Kapi::start().expect("start kapi");
    let routes = "/apis/example.com/v1/namespaces/default/routes";
    let certificates = "/apis/example.com/v1/namespaces/default/certificates";
    serve(&kapi, &route_crd(), routes);
    serve(&kapi, &certificate_crd(), certificates);

    let route = |name: &str, timeouts: Value| json!({"apiVersion": "example.com/v1", "kind": "Route", "metadata": {"name": name}, "spec": {"rules": [{}, {"timeouts": timeouts}]}});
    let cert = |name: &str, spec: Value| json!({"apiVersion": "example.com/v1", "kind": "Certificate", "metadata": {"name": name}, "spec": spec});
    let window = json!({"notBefore": "2024-01-01T00:00:00Z", "notAfter": "2024-04-01T00:00:00+02:00"});

    let mut failures = Vec::new();
    let valid = [
        (routes, route("r1", json!({"request": "10s", "backendRequest": "5s"}))),
        (routes, route("r2", json!({"request": "0s", "backendRequest": "1h"}))),
        (routes, route("r3", json!({"backendRequest": "1h"}))),
        (certificates, cert("c1", window.clone())),
        (certificates, cert("c2", json!({"notBefore": "2024-01-01T00:00:00Z", "notAfter": "2024-04-01T00:00:00Z", "renewBefore": "720h"}))),
    ];
    for (collection, body) in &valid {
        let r = kapi.request(&Request::new("POST", collection).json(body));
        if r.status != 201 {
            failures.push(format!("{}: HTTP {} {}", body["metadata"]["name"], r.status, r.raw));
        }
    }
    let invalid = [
        (routes, route("r4", json!({"request": "1m", "backendRequest": "1m1s"})), "Route.example.com \"r4\" is invalid: spec.rules[1].timeouts: Invalid value: backendRequest timeout cannot be longer than request timeout", vec!["spec.rules[1].timeouts: Invalid value: backendRequest timeout cannot be longer than request timeout"]),
        (certificates, cert("c3", json!({"notBefore": "2024-01-01T00:00:00Z", "notAfter": "2024-01-01T01:00:00+02:00"})), "Certificate.example.com \"c3\" is invalid: spec: Invalid value: notAfter must be after notBefore", vec!["spec: Invalid value: notAfter must be after notBefore"]),
        (certificates, cert("c4", json!({"notBefore": "2024-01-01T00:00:00Z", "notAfter": "2024-01-02T00:00:00Z", "renewBefore": "1m"})), "Certificate.example.com \"c4\" is invalid: spec.renewBefore: Invalid value: \"1m\": renewBefore must be at least 5m", vec!["spec.renewBefore: Invalid value: \"1m\": renewBefore must be at least 5m"]),
        (certificates, cert("c5", json!({"notBefore": "2024-01-01T00:00:00Z", "notAfter": "2024-01-02T00:00:00Z", "renewBefore": "2 days"})), "", vec!["spec.renewBefore: Invalid value: renewBefore is longer than the validity window"]),
    ];
    for (collection, body, message, want) in &invalid {
        let name = body["metadata"]["name"].as_str().unwrap_or_default();
        let r = kapi.request(&Request::new("POST", collection).json(body));
        let mut got = causes(&r);
        got.sort();
        let mut want = want.clone();
        want.sort();
        if r.status != 422 || got != want || (!message.is_empty() && r.message() != *message) {
            failures.push(format!("{name}: HTTP {} message {:?} causes {got:#?}, want {want:#?}", r.status, r.message()));
        }
        if kapi.request(&Request::get(&format!("{collection}/{name}"))).status != 404 {
            failures.push(format!("{name}: stored"));
        }
    }
    // a transition through update: moving notAfter before notBefore is refused
    let mut c1 = kapi.get_json(&format!("{certificates}/c1"));
    c1["spec"]["notAfter"] = json!("2023-12-31T23:00:00+02:00");
    let r = kapi.request(&Request::new("PUT", &format!("{certificates}/c1")).json(&c1));
    if r.status != 422 || causes(&r) != vec!["spec: Invalid value: notAfter must be after notBefore"] {
        failures.push(format!("update c1: HTTP {} {}", r.status, r.raw));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
