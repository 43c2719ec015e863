//! The Service allocation repair pass over a real SQLite store and its watch caches: claims a
//! crash left without a Service are given back, Services whose claims went missing get them
//! again, and young claims (a Service on its way into the store) are left alone.

use std::time::Duration;

use bytes::Bytes;
use kapi_registry::catalog::{self, Serving};
use kapi_registry::rest::{DeleteOptions, RestStore, WriteHooks};
use kapi_registry::service_alloc::{repair, ServiceAllocator, ServiceNetwork};
use kapi_registry::strategy::CatalogStrategy;
use kapi_storage::sqlite::{SqliteConfig, SqliteStore};
use kapi_storage::DynStore;
use kapi_watch::{CacheConfig, CacheSet};
use serde_json::{json, Value};

const PORTS: &str = "/registry/ranges/servicenodeports/";

async fn wait_until(mut check: impl FnMut() -> bool) {
    for _ in 0..100 {
        if check() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the watch cache never caught up");
}

fn cached(rest: &RestStore, resource: &str, name: &str) -> bool {
    let spec = catalog::find(if resource == "ipaddresses" { "networking.k8s.io" } else { "" }, "v1", resource).unwrap();
    rest.caches().cache(&spec.key_prefix()).unwrap().get(&format!("{}{name}", spec.key_prefix())).is_some()
}

#[tokio::test]
async fn repair_restores_missing_claims_and_releases_orphans() {
    let dir = tempfile::tempdir().unwrap();
    let store: DynStore = SqliteStore::open(&dir.path().join("kapi.db"), SqliteConfig::default()).expect("open sqlite");
    let mut prefixes: Vec<String> = catalog::resources().iter().filter(|r| matches!(r.serving, Serving::Stored)).map(|r| r.key_prefix()).collect();
    prefixes.sort();
    prefixes.dedup();
    let caches = CacheSet::start(store.clone(), prefixes, CacheConfig::default()).await.expect("caches");
    let plain = RestStore::new(store.clone(), caches);
    let allocator = ServiceAllocator::new(ServiceNetwork::default(), plain.clone(), store.clone());
    let rest = plain.clone().with_effects("", "services", std::sync::Arc::new(allocator.clone()));
    let services = CatalogStrategy(catalog::find("", "v1", "services").unwrap());
    let addresses = CatalogStrategy(catalog::find("networking.k8s.io", "v1", "ipaddresses").unwrap());

    let svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "kept", "namespace": "default"},
        "spec": {"type": "NodePort", "selector": {"a": "b"}, "ports": [{"port": 80, "protocol": "TCP"}]}});
    let kept = rest.create(&services, Some("default"), svc, false, WriteHooks::default()).await.expect("create the Service");
    let ip = kept["spec"]["clusterIP"].as_str().unwrap().to_owned();
    let port = kept["spec"]["ports"][0]["nodePort"].as_u64().unwrap();
    assert!(store.get(&format!("{PORTS}{port}")).await.unwrap().is_some(), "the node port is claimed");

    // What a crash leaves: the Service's claims lost, claims of a Service never stored.
    plain.delete(&addresses, None, &ip, &DeleteOptions::default()).await.expect("drop the IPAddress");
    store.delete(&format!("{PORTS}{port}"), None).await.expect("drop the port claim");
    let orphan = json!({"apiVersion": "networking.k8s.io/v1", "kind": "IPAddress",
        "metadata": {"name": "10.96.5.5", "labels": {"ipaddress.kubernetes.io/managed-by": "ipallocator.k8s.io"}},
        "spec": {"parentRef": {"resource": "services", "namespace": "default", "name": "gone"}}});
    plain.create(&addresses, None, orphan.clone(), false, WriteHooks::default()).await.expect("orphan IPAddress");
    let foreign = json!({"apiVersion": "networking.k8s.io/v1", "kind": "IPAddress", "metadata": {"name": "10.96.5.6"},
        "spec": {"parentRef": {"resource": "gateways", "group": "example.com", "namespace": "default", "name": "gw"}}});
    plain.create(&addresses, None, foreign, false, WriteHooks::default()).await.expect("foreign IPAddress");
    store.create(&format!("{PORTS}30555"), Bytes::from(r#"{"namespace":"default","name":"gone","since":0}"#)).await.unwrap();
    wait_until(|| !cached(&plain, "ipaddresses", &ip) && cached(&plain, "ipaddresses", "10.96.5.6")).await;

    // Young claims stay: their Service may be on its way.
    let young = repair::run_once(&allocator, Duration::from_secs(3600)).await.expect("repair");
    assert_eq!((young.restored, young.released), (2, 1), "{young:?}");
    assert!(plain.get(&addresses, None, "10.96.5.5").await.is_ok());

    let report = repair::run_once(&allocator, Duration::ZERO).await.expect("repair");
    assert_eq!((report.restored, report.released, report.conflicts), (0, 1, 0), "{report:?}");
    let restored: Value = plain.get(&addresses, None, &ip).await.expect("the Service's IPAddress is back");
    assert_eq!(restored["spec"]["parentRef"]["name"], "kept");
    assert!(store.get(&format!("{PORTS}{port}")).await.unwrap().is_some(), "the node port claim is back");
    assert_eq!(plain.get(&addresses, None, "10.96.5.5").await.unwrap_err().code, 404, "the orphan went");
    assert!(store.get(&format!("{PORTS}30555")).await.unwrap().is_none(), "the orphan claim went");
    assert!(plain.get(&addresses, None, "10.96.5.6").await.is_ok(), "another allocator's IPAddress stays");

    // A second pass finds nothing to do.
    wait_until(|| !cached(&plain, "ipaddresses", "10.96.5.5")).await;
    assert_eq!(repair::run_once(&allocator, Duration::ZERO).await.unwrap(), repair::RepairReport::default());
}
