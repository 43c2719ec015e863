//! `service` clientConfigs resolved through EndpointSlices in the watch caches of a RestStore
//! over real SQLite storage, and called over HTTPS as `<service>.<namespace>.svc`.

mod support;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kapi_registry::catalog;
use kapi_registry::rest::RestStore;
use kapi_storage::sqlite::{SqliteConfig, SqliteStore};
use kapi_storage::DynStore;
use kapi_watch::{CacheConfig, CacheSet};
use kapi_webhook::{Client, ClientConfig, EndpointSliceResolver, ServiceResolver};
use serde_json::{json, Value};
use support::{Behaviour, Ca, Server};

fn prefix(group: &str, resource: &str) -> String {
    catalog::find(group, "v1", resource).expect("served").key_prefix()
}

/// A RestStore whose caches hold `services` and `slices` (namespace, name, object).
async fn rest_store(dir: &tempfile::TempDir, services: &[Value], slices: &[Value]) -> RestStore {
    let store: DynStore = SqliteStore::open(&dir.path().join("kapi.db"), SqliteConfig::default()).expect("open sqlite");
    let (svc_prefix, slice_prefix) = (prefix("", "services"), prefix("discovery.k8s.io", "endpointslices"));
    for (prefix, objects) in [(&svc_prefix, services), (&slice_prefix, slices)] {
        for object in objects {
            let key = format!("{prefix}{}/{}", object["metadata"]["namespace"].as_str().unwrap(), object["metadata"]["name"].as_str().unwrap());
            store.create(&key, Bytes::from(object.to_string())).await.expect("create");
        }
    }
    let caches = CacheSet::start(store.clone(), vec![svc_prefix, slice_prefix], CacheConfig::default()).await.expect("caches");
    RestStore::new(store, caches)
}

fn service(name: &str, ports: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Service", "metadata": {"namespace": "default", "name": name},
           "spec": {"type": "ClusterIP", "ports": ports, "ipFamilies": ["IPv4"]}})
}

fn slice(name: &str, service: &str, ports: Value, endpoints: Value) -> Value {
    json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "addressType": "IPv4",
           "metadata": {"namespace": "default", "name": name, "labels": {"kubernetes.io/service-name": service}},
           "ports": ports, "endpoints": endpoints})
}

#[tokio::test]
async fn services_resolve_to_their_first_ready_endpoint() {
    let dir = tempfile::tempdir().unwrap();
    let rest = rest_store(
        &dir,
        &[service("hook", json!([{"name": "https", "port": 443, "targetPort": 8443}])), service("empty", json!([{"port": 443}]))],
        &[
            slice("hook-a", "hook", json!([{"name": "https", "port": 8443}]), json!([{"addresses": ["10.0.0.1"], "conditions": {"ready": false}}])),
            slice("hook-b", "hook", json!([{"name": "https", "port": 8443}]), json!([{"addresses": ["10.0.0.2"], "conditions": {"ready": true}}])),
            slice("other", "other", json!([{"name": "https", "port": 9443}]), json!([{"addresses": ["10.0.0.3"]}])),
        ],
    )
    .await;
    let resolver = EndpointSliceResolver::new(rest);
    assert_eq!(resolver.resolve("default", "hook", 443), Ok(("10.0.0.2".to_owned(), 8443)));
    assert_eq!(resolver.resolve("default", "hook", 80), Err(r#"no service port 80 found for service "hook""#.to_owned()));
    assert_eq!(resolver.resolve("default", "empty", 443), Err(r#"no endpoints available for service "empty""#.to_owned()));
    assert_eq!(resolver.resolve("default", "nope", 443), Err(r#"service "nope" not found"#.to_owned()));
    assert_eq!(resolver.resolve("kube-system", "hook", 443), Err(r#"service "hook" not found"#.to_owned()));
}

#[tokio::test]
async fn a_service_webhook_is_called_as_name_namespace_svc() {
    let ca = Ca::new();
    let server = Server::start("127.0.0.1:0", ca.serving(&["hook.default.svc"]), Behaviour::Normal).await;
    let dir = tempfile::tempdir().unwrap();
    let port = server.addr.port();
    let rest = rest_store(
        &dir,
        &[service("hook", json!([{"name": "https", "port": 443}]))],
        &[slice("hook-1", "hook", json!([{"name": "https", "port": port}]), json!([{"addresses": ["127.0.0.1"]}]))],
    )
    .await;
    let client = Client::new(Arc::new(EndpointSliceResolver::new(rest)));
    let config = ClientConfig::from_json(&json!({"service": {"namespace": "default", "name": "hook", "path": "/convert"}, "caBundle": ca.bundle()})).unwrap();
    let answer = client.post_json(&config, Bytes::from_static(b"{}"), Duration::from_secs(30)).await.expect("answer");
    assert_eq!(answer["path"], "/convert?timeout=30s");
    assert_eq!(answer["host"], "hook.default.svc:443", "the Host header names the Service, not the endpoint");

    // A certificate for the endpoint's address is not one for the Service (Go matches a name
    // against DNS names only, so it finds no names at all).
    let by_ip = Server::start("127.0.0.1:0", ca.serving(&["127.0.0.1"]), Behaviour::Normal).await;
    let dir = tempfile::tempdir().unwrap();
    let rest = rest_store(
        &dir,
        &[service("hook", json!([{"name": "https", "port": 443}]))],
        &[slice("hook-1", "hook", json!([{"name": "https", "port": by_ip.addr.port()}]), json!([{"addresses": ["127.0.0.1"]}]))],
    )
    .await;
    let client = Client::new(Arc::new(EndpointSliceResolver::new(rest)));
    let err = client.post_json(&config, Bytes::from_static(b"{}"), Duration::from_secs(30)).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"Post "https://hook.default.svc:443/convert?timeout=30s": tls: failed to verify certificate: x509: certificate is not valid for any names, but wanted to match hook.default.svc"#
    );
}
