//! Post-start bootstrap, as kube-apiserver's post-start hooks do it: the system namespaces
//! (`start-system-namespaces-controller`) and the `default` namespace with the `kubernetes`
//! Service (`bootstrap-controller`) exist before the server reports ready.

use kapi_apimachinery::ApiError;
use kapi_registry::catalog;
use kapi_registry::rest::{RestStore, WriteHooks};
use kapi_registry::strategy::CatalogStrategy;
use serde_json::json;

/// The namespaces kube-apiserver's system-namespaces controller keeps.
pub const SYSTEM_NAMESPACES: &[&str] = &["kube-system", "kube-public", "kube-node-lease"];

async fn ensure(rest: &RestStore, group: &str, resource: &str, ns: Option<&str>, obj: serde_json::Value) -> Result<(), ApiError> {
    let spec = catalog::find(group, "v1", resource).ok_or_else(|| ApiError::internal(format!("{resource} missing from catalog")))?;
    // kube-apiserver records its own writes under its name.
    let track = crate::field_manager::tracker(spec, crate::field_manager::writer(spec, "kube-apiserver".into(), ""));
    match rest.create(&CatalogStrategy(spec), ns, obj, false, WriteHooks::tracking(track.as_deref())).await {
        Ok(_) => Ok(()),
        Err(e) if e.code == 409 => Ok(()),
        Err(e) => Err(e),
    }
}

fn namespace(name: &str) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
}

/// kube's system PriorityClasses (`system-node-critical`, `system-cluster-critical`), as its
/// `scheduling/bootstrap-system-priority-classes` hook creates them; safe to run on every start
/// and from several replicas at once.
pub async fn system_priority_classes(rest: &RestStore) -> Result<(), ApiError> {
    for class in kapi_admission_builtin::priority::system_class_objects() {
        ensure(rest, "scheduling.k8s.io", "priorityclasses", None, class).await?;
    }
    Ok(())
}

/// The system namespaces; safe to run on every start and from several replicas at once.
pub async fn system_namespaces(rest: &RestStore) -> Result<(), ApiError> {
    for ns in SYSTEM_NAMESPACES {
        ensure(rest, "", "namespaces", None, namespace(ns)).await?;
    }
    Ok(())
}

/// The `default` namespace and the `kubernetes` Service pointing at `secure_port`; safe to run
/// on every start and from several replicas at once.
pub async fn kubernetes_service(rest: &RestStore, secure_port: u16) -> Result<(), ApiError> {
    ensure(rest, "", "namespaces", None, namespace("default")).await?;
    let svc = json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "kubernetes", "namespace": "default", "labels": {"component": "apiserver", "provider": "kubernetes"}},
        "spec": {
            "type": "ClusterIP",
            "clusterIP": "10.96.0.1",
            "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": secure_port}],
            "sessionAffinity": "None",
        },
    });
    ensure(rest, "", "services", Some("default"), svc).await
}
