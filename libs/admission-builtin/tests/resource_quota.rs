//! ResourceQuota through `kapi_admission::Chain` over quotas stored in SQLite: kube's
//! evaluators, messages and the conditional charge of `status.used`.

mod support;

use kapi_admission::Operation;
use kapi_admission_builtin::ResourceQuota;
use kapi_apimachinery::StatusReason;
use kapi_registry::catalog;
use kapi_registry::rest::WriteHooks;
use kapi_registry::strategy::{CatalogStrategy, WriteTarget};
use serde_json::{json, Value};
use support::{attrs, create_attrs, pod, Cluster};

async fn cluster() -> Cluster {
    Cluster::new(|rest| Box::new(ResourceQuota::new(rest))).await
}

/// A quota with `hard` whose status the controller has filled with `used`.
async fn quota(c: &Cluster, name: &str, spec: Value, used: Value) -> Value {
    let created = c
        .create(
            "",
            "v1",
            "resourcequotas",
            json!({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": name, "namespace": "default"}, "spec": spec}),
        )
        .await;
    let mut with_status = created.clone();
    with_status["status"] = json!({"hard": spec["hard"], "used": used});
    let strategy = CatalogStrategy(catalog::find("", "v1", "resourcequotas").unwrap());
    let updated = c.rest.update(&strategy, Some("default"), name, with_status, WriteTarget::Status, false, WriteHooks::default()).await.unwrap();
    let rv: u64 = updated["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap();
    c.rest.caches().wait_for(rv, std::time::Duration::from_secs(5)).await.unwrap();
    updated
}

async fn stored_used(c: &Cluster, name: &str) -> Value {
    let strategy = CatalogStrategy(catalog::find("", "v1", "resourcequotas").unwrap());
    c.rest.get(&strategy, Some("default"), name).await.unwrap()["status"]["used"].clone()
}

fn containers(resources: Value) -> Value {
    json!([{"name": "c", "image": "nginx", "resources": resources}])
}

#[tokio::test]
async fn the_pod_over_the_quota_is_refused_and_one_that_fits_is_charged() {
    let c = cluster().await;
    quota(&c, "q", json!({"hard": {"pods": "2", "requests.cpu": "1"}}), json!({"pods": "1", "requests.cpu": "250m"})).await;
    let mut a = create_attrs("pods", pod("default", "a", json!({"containers": containers(json!({"requests": {"cpu": "500m"}}))})));
    c.admit(&mut a).await.0.unwrap();
    assert_eq!(stored_used(&c, "q").await, json!({"pods": "2", "requests.cpu": "750m"}));

    let mut b = create_attrs("pods", pod("default", "b", json!({"containers": containers(json!({"requests": {"cpu": "100m"}}))})));
    let err = c.admit(&mut b).await.0.unwrap_err();
    assert_eq!((err.code, err.reason), (403, StatusReason::Forbidden));
    assert_eq!(err.message, "pods \"b\" is forbidden: exceeded quota: q, requested: pods=1, used: pods=2, limited: pods=2");
    assert_eq!(stored_used(&c, "q").await, json!({"pods": "2", "requests.cpu": "750m"}), "nothing charged when refused");
}

#[tokio::test]
async fn kubes_other_refusals() {
    let c = cluster().await;
    quota(&c, "compute", json!({"hard": {"requests.cpu": "2", "limits.memory": "1Gi"}}), json!({"requests.cpu": "1500m", "limits.memory": "0"}))
        .await;
    // A quota on cpu or memory needs every container to say how much.
    let mut a = create_attrs("pods", pod("default", "p", json!({"containers": containers(json!({}))})));
    let err = c.admit(&mut a).await.0.unwrap_err();
    assert_eq!(err.message, "pods \"p\" is forbidden: failed quota: compute: must specify limits.memory for: c; requests.cpu for: c");
    // Several exceeded resources, sorted, in one message.
    let big = json!({"requests": {"cpu": "1"}, "limits": {"memory": "2Gi"}});
    let err = c.admit(&mut create_attrs("pods", pod("default", "p", json!({"containers": containers(big)})))).await.0.unwrap_err();
    assert_eq!(
        err.message,
        "pods \"p\" is forbidden: exceeded quota: compute, requested: limits.memory=2Gi,requests.cpu=1, used: limits.memory=0,requests.cpu=1500m, limited: limits.memory=1Gi,requests.cpu=2"
    );

    // A quota the controller has not counted yet refuses what it limits.
    c.create("", "v1", "resourcequotas", json!({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "fresh", "namespace": "default"}, "spec": {"hard": {"configmaps": "5"}}})).await;
    let mut fresh = quota(&c, "counted", json!({"hard": {"secrets": "1"}}), json!({})).await;
    fresh["status"]["hard"] = json!({"configmaps": "5"});
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "default"}});
    // `fresh` has no status at all, so it limits nothing yet; `counted` has hard but no used.
    c.admit(&mut create_attrs("configmaps", cm)).await.0.unwrap();
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "default"}});
    let err = c.admit(&mut create_attrs("secrets", secret)).await.0.unwrap_err();
    assert_eq!(err.message, "secrets \"s\" is forbidden: status unknown for quota: counted, resources: secrets");
}

#[tokio::test]
async fn services_claims_and_object_counts_use_kubes_names() {
    let c = cluster().await;
    let hard = json!({"services": "5", "services.nodeports": "2", "services.loadbalancers": "0", "count/configmaps": "1",
        "count/deployments.apps": "0", "persistentvolumeclaims": "3", "requests.storage": "10Gi", "fast.storageclass.storage.k8s.io/requests.storage": "1Gi"});
    let zero = json!({"services": "0", "services.nodeports": "0", "services.loadbalancers": "0", "count/configmaps": "0",
        "count/deployments.apps": "0", "persistentvolumeclaims": "0", "requests.storage": "0", "fast.storageclass.storage.k8s.io/requests.storage": "0"});
    quota(&c, "objects", json!({"hard": hard}), zero).await;

    let svc = |name: &str, ty: &str, ports: usize| {
        let ports: Vec<Value> = (0..ports).map(|i| json!({"port": 80 + i, "protocol": "TCP"})).collect();
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": "default"}, "spec": {"type": ty, "ports": ports}})
    };
    c.admit(&mut create_attrs("services", svc("np", "NodePort", 2))).await.0.unwrap();
    let err = c.admit(&mut create_attrs("services", svc("lb", "LoadBalancer", 1))).await.0.unwrap_err();
    assert_eq!(
        err.message,
        "services \"lb\" is forbidden: exceeded quota: objects, requested: services.loadbalancers=1,services.nodeports=1, used: services.loadbalancers=0,services.nodeports=2, limited: services.loadbalancers=0,services.nodeports=2"
    );
    // An update is charged what it adds: a ClusterIP turned NodePort takes node ports.
    let plain = svc("plain", "ClusterIP", 1);
    c.admit(&mut create_attrs("services", plain.clone())).await.0.unwrap();
    let mut old = plain.clone();
    old["metadata"]["resourceVersion"] = json!("5");
    let mut to_node_port =
        attrs(Operation::Update, ("", "v1", "services"), "Service", "default", "plain", Some(svc("plain", "NodePort", 1)), Some(old));
    let err = c.admit(&mut to_node_port).await.0.unwrap_err();
    assert!(err.message.ends_with("requested: services.nodeports=1, used: services.nodeports=2, limited: services.nodeports=2"), "{}", err.message);

    let cm = |name: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"}});
    c.admit(&mut create_attrs("configmaps", cm("one"))).await.0.unwrap();
    let err = c.admit(&mut create_attrs("configmaps", cm("two"))).await.0.unwrap_err();
    assert_eq!(err.message, "configmaps \"two\" is forbidden: exceeded quota: objects, requested: count/configmaps=1, used: count/configmaps=1, limited: count/configmaps=1");
    let deploy = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "default"}, "spec": {}});
    let err = c.admit(&mut create_attrs("deployments", deploy)).await.0.unwrap_err();
    assert_eq!(err.message, "deployments.apps \"d\" is forbidden: exceeded quota: objects, requested: count/deployments.apps=1, used: count/deployments.apps=0, limited: count/deployments.apps=0");

    let claim = |name: &str, class: &str, size: &str| {
        json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name, "namespace": "default"},
            "spec": {"storageClassName": class, "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}}})
    };
    c.admit(&mut create_attrs("persistentvolumeclaims", claim("slow", "slow", "4Gi"))).await.0.unwrap();
    let err = c.admit(&mut create_attrs("persistentvolumeclaims", claim("fast", "fast", "2Gi"))).await.0.unwrap_err();
    assert!(err.message.contains("requested: fast.storageclass.storage.k8s.io/requests.storage=2Gi"), "{}", err.message);
    let used = stored_used(&c, "objects").await;
    assert_eq!((used["services"].clone(), used["services.nodeports"].clone()), (json!("2"), json!("2")));
    assert_eq!((used["persistentvolumeclaims"].clone(), used["requests.storage"].clone()), (json!("1"), json!("4Gi")));
}

#[tokio::test]
async fn scoped_quotas_count_only_their_pods() {
    let c = cluster().await;
    let spec =
        json!({"hard": {"pods": "0"}, "scopeSelector": {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]}});
    quota(&c, "high", spec, json!({"pods": "0"})).await;
    quota(&c, "best-effort", json!({"hard": {"pods": "0"}, "scopes": ["BestEffort"]}), json!({"pods": "0"})).await;
    let guaranteed = json!({"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}});
    c.admit(&mut create_attrs("pods", pod("default", "low", json!({"containers": containers(guaranteed.clone())})))).await.0.unwrap();
    let high = json!({"containers": containers(guaranteed), "priorityClassName": "high"});
    let err = c.admit(&mut create_attrs("pods", pod("default", "hi", high))).await.0.unwrap_err();
    assert!(err.message.contains("exceeded quota: high,"), "{}", err.message);
    let err = c.admit(&mut create_attrs("pods", pod("default", "be", json!({"containers": containers(json!({}))})))).await.0.unwrap_err();
    assert!(err.message.contains("exceeded quota: best-effort,"), "{}", err.message);
}

#[tokio::test]
async fn concurrent_writes_cannot_both_take_the_last_pod_and_dry_runs_are_not_charged() {
    let c = cluster().await;
    quota(&c, "q", json!({"hard": {"pods": "2"}}), json!({"pods": "1"})).await;
    let mut dry = create_attrs("pods", pod("default", "dry", json!({"containers": containers(json!({}))})));
    dry.dry_run = true;
    c.admit(&mut dry).await.0.unwrap();
    assert_eq!(stored_used(&c, "q").await, json!({"pods": "1"}));

    // Both read used=1 from the cache; the second charge loses the race, reads the quota
    // again from the store and finds it full.
    let mut a = create_attrs("pods", pod("default", "a", json!({"containers": containers(json!({}))})));
    let mut b = create_attrs("pods", pod("default", "b", json!({"containers": containers(json!({}))})));
    let ((ra, _), (rb, _)) = tokio::join!(c.admit(&mut a), c.admit(&mut b));
    let errors: Vec<_> = [ra, rb].into_iter().filter_map(Result::err).collect();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(errors[0].message.ends_with("exceeded quota: q, requested: pods=1, used: pods=2, limited: pods=2"), "{}", errors[0].message);
    assert_eq!(stored_used(&c, "q").await, json!({"pods": "2"}));
}
