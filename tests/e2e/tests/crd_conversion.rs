//! CRD conversion through a real HTTPS webhook (a Python process started by the test, with its
//! own CA given as `caBundle`): objects stored in one version read back in the other, both
//! ways, for gets, lists, watches and patches, by `url` and by `service` (resolved through the
//! Service's EndpointSlices); with the webhook down, kube's error and never a wrong object.

use std::time::Duration;

use kapi_e2e::{wait_for, ConversionWebhook, Kapi, Request};
use serde_json::{json, Value};

const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
const ALPHA: &str = "/apis/demo.io/v1alpha1/namespaces/default/apps";
const GA: &str = "/apis/demo.io/v1/namespaces/default/apps";

fn crd(client_config: Value, storage: &str) -> Value {
    let version = |name: &str, props: Value| {
        json!({"name": name, "served": true, "storage": name == storage,
               "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object", "properties": props}}}}})
    };
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "apps.demo.io"},
           "spec": {"group": "demo.io", "scope": "Namespaced", "names": {"plural": "apps", "kind": "App"},
                    "versions": [version("v1alpha1", json!({"image": {"type": "string"}, "replicas": {"type": "integer"}})),
                                 version("v1", json!({"container": {"type": "object", "properties": {"image": {"type": "string"}}}, "replicas": {"type": "integer"}}))],
                    "conversion": {"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"], "clientConfig": client_config}}}})
}

fn install(kapi: &Kapi, crd: &Value) {
    let r = kapi.request(&Request::new("POST", CRDS).json(crd));
    assert_eq!(r.status, 201, "{}", r.raw);
    assert!(wait_for(Duration::from_secs(10), || (kapi.request(&Request::get(GA)).status == 200).then_some(())).is_some(), "served");
}

fn create(kapi: &Kapi, path: &str, body: Value) -> Value {
    let r = kapi.request(&Request::new("POST", path).json(&body));
    assert_eq!(r.status, 201, "{}", r.raw);
    r.body
}

/// Both directions of conversion for gets, lists, watches and patches.
fn converts_both_ways(kapi: &Kapi) {
    let alpha = create(kapi, ALPHA, json!({"apiVersion": "demo.io/v1alpha1", "kind": "App", "metadata": {"name": "old"}, "spec": {"image": "nginx", "replicas": 1}}));
    assert_eq!(alpha["spec"]["image"], "nginx", "{alpha}");
    let as_ga = kapi.get_json(&format!("{GA}/old"));
    assert_eq!(as_ga["apiVersion"], "demo.io/v1");
    assert_eq!(as_ga["spec"], json!({"container": {"image": "nginx"}, "replicas": 1}), "{as_ga}");
    assert_eq!(as_ga["metadata"]["annotations"]["converted-by"], "e2e-webhook", "the webhook's annotations are kept");

    let ga = create(kapi, GA, json!({"apiVersion": "demo.io/v1", "kind": "App", "metadata": {"name": "new"}, "spec": {"container": {"image": "redis"}}}));
    assert_eq!(ga["spec"]["container"]["image"], "redis", "{ga}");
    let as_alpha = kapi.get_json(&format!("{ALPHA}/new"));
    assert_eq!((as_alpha["apiVersion"].clone(), as_alpha["spec"]["image"].clone()), (json!("demo.io/v1alpha1"), json!("redis")), "{as_alpha}");

    let list = kapi.get_json(GA);
    let images: Vec<Value> = list["items"].as_array().into_iter().flatten().map(|i| i["spec"]["container"]["image"].clone()).collect();
    assert_eq!(images, [json!("redis"), json!("nginx")], "{list}");
    assert!(list["items"].as_array().into_iter().flatten().all(|i| i["apiVersion"] == "demo.io/v1"));

    // A merge patch in v1 of an object stored in the other version.
    let patched = kapi.request(&Request::new("PATCH", &format!("{GA}/old")).raw("application/merge-patch+json", br#"{"spec":{"container":{"image":"nginx:2"}}}"#.to_vec()));
    assert_eq!(patched.status, 200, "{}", patched.raw);
    assert_eq!(patched.body["spec"]["container"]["image"], "nginx:2");
    assert_eq!(kapi.get_json(&format!("{ALPHA}/old"))["spec"]["image"], "nginx:2");

    // Watch in v1 from the list's revision sees later changes converted.
    let rv = list["metadata"]["resourceVersion"].as_str().unwrap_or_default().to_owned();
    let out = kapi.kubectl(&["get", "--raw", &format!("{GA}?watch=1&resourceVersion={rv}&timeoutSeconds=1")]);
    let events: Vec<Value> = String::from_utf8_lossy(&out.stdout).lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!((events[0]["object"]["apiVersion"].clone(), events[0]["object"]["spec"]["container"]["image"].clone()), (json!("demo.io/v1"), json!("nginx:2")));
}

#[test]
fn conversion_webhook_by_url() {
    let kapi = Kapi::start().expect("start kapi");
    let mut webhook = ConversionWebhook::start().expect("start the webhook");
    let port = webhook.port;
    install(&kapi, &crd(json!({"url": format!("https://127.0.0.1:{port}/convert"), "caBundle": webhook.ca_bundle}), "v1alpha1"));
    converts_both_ways(&kapi);

    // The webhook down: kube's error, no wrong object; reads needing no conversion still work.
    webhook.stop();
    let r = kapi.request(&Request::get(&format!("{GA}/old")));
    assert_eq!(r.status, 500, "{}", r.raw);
    assert_eq!(r.reason(), "InternalError");
    let expected = format!(
        "Internal error occurred: conversion webhook for demo.io/v1alpha1, Kind=App failed: Post \"https://127.0.0.1:{port}/convert?timeout=30s\": dial tcp 127.0.0.1:{port}: connect: connection refused"
    );
    assert_eq!(r.message(), expected);
    assert!(r.body.get("spec").is_none());
    let list = kapi.request(&Request::get(GA));
    assert_eq!(list.status, 500, "{}", list.raw);
    let alpha = kapi.request(&Request::get(&format!("{ALPHA}/old")));
    assert_eq!(alpha.status, 200, "{}", alpha.raw);
    let create = kapi.request(&Request::new("POST", GA).json(&json!({"apiVersion": "demo.io/v1", "kind": "App", "metadata": {"name": "lost"}, "spec": {}})));
    assert_eq!(create.status, 500, "{}", create.raw);
    assert_eq!(kapi.request(&Request::get(&format!("{ALPHA}/lost"))).status, 404, "nothing stored when conversion fails");
}

#[test]
fn conversion_webhook_by_service_through_endpointslices() {
    let kapi = Kapi::start().expect("start kapi");
    let webhook = ConversionWebhook::start().expect("start the webhook");
    let port = webhook.port;
    let svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "conv"},
                     "spec": {"ports": [{"name": "https", "port": 443, "targetPort": port}]}});
    assert_eq!(kapi.request(&Request::new("POST", "/api/v1/namespaces/default/services").json(&svc)).status, 201);
    let slice = json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                       "metadata": {"name": "conv-1", "labels": {"kubernetes.io/service-name": "conv"}},
                       "addressType": "IPv4", "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": true}}],
                       "ports": [{"name": "https", "port": port, "protocol": "TCP"}]});
    let r = kapi.request(&Request::new("POST", "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices").json(&slice));
    assert_eq!(r.status, 201, "{}", r.raw);
    install(&kapi, &crd(json!({"service": {"namespace": "default", "name": "conv", "path": "/convert", "port": 443}, "caBundle": webhook.ca_bundle}), "v1"));
    converts_both_ways(&kapi);
}
