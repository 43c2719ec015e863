//! APIService objects as the aggregator reads them (apiregistration.k8s.io/v1), and kube's
//! order of groups and versions in discovery (`helper.SortedByGroupAndVersion`).

use std::cmp::Ordering;

use kapi_apimachinery::version_order;
use serde_json::Value;

/// Where an APIService's group version is served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceRef {
    /// The Service's namespace.
    pub namespace: String,
    /// The Service's name.
    pub name: String,
    /// The Service port (kube's default 443).
    pub port: u16,
}

/// One APIService, as much of it as routing, discovery and the availability check use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiService {
    /// `<version>.<group>`.
    pub name: String,
    /// `spec.group` (empty: the legacy core group).
    pub group: String,
    /// `spec.version`.
    pub version: String,
    /// `spec.groupPriorityMinimum`: higher first.
    pub group_priority: i64,
    /// `spec.versionPriority`: higher first within the group.
    pub version_priority: i64,
    /// `spec.service`; `None` for local APIServices (served in this process).
    pub service: Option<ServiceRef>,
    /// `spec.caBundle`, decoded (PEM).
    pub ca_bundle: Vec<u8>,
    /// `spec.insecureSkipTLSVerify`.
    pub insecure_skip_tls_verify: bool,
    /// Whether the `Available` condition is `True`.
    pub available: bool,
}

impl ApiService {
    /// Reads a stored APIService; `None` when it lacks a group version (validation keeps those
    /// out of the store).
    pub fn from_object(obj: &Value) -> Option<ApiService> {
        let text = |pointer: &str| obj.pointer(pointer).and_then(Value::as_str).unwrap_or_default().to_owned();
        let int = |pointer: &str| obj.pointer(pointer).and_then(Value::as_i64).unwrap_or(0);
        let version = text("/spec/version");
        if version.is_empty() {
            return None;
        }
        let service = obj.pointer("/spec/service").filter(|s| !s.is_null()).map(|s| ServiceRef {
            namespace: s.get("namespace").and_then(Value::as_str).unwrap_or_default().to_owned(),
            name: s.get("name").and_then(Value::as_str).unwrap_or_default().to_owned(),
            port: s.get("port").and_then(Value::as_u64).and_then(|p| u16::try_from(p).ok()).unwrap_or(443),
        });
        let ca_bundle = {
            use base64::Engine;
            base64::engine::general_purpose::STANDARD.decode(text("/spec/caBundle")).unwrap_or_default()
        };
        let available = obj
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .is_some_and(|cs| cs.iter().any(|c| c.get("type").and_then(Value::as_str) == Some("Available") && c.get("status").and_then(Value::as_str) == Some("True")));
        Some(ApiService {
            name: text("/metadata/name"),
            group: text("/spec/group"),
            version,
            group_priority: int("/spec/groupPriorityMinimum"),
            version_priority: int("/spec/versionPriority"),
            service,
            ca_bundle,
            insecure_skip_tls_verify: obj.pointer("/spec/insecureSkipTLSVerify").and_then(Value::as_bool).unwrap_or(false),
            available,
        })
    }

    /// The TLS name the backend's serving certificate must carry: `<service>.<namespace>.svc`
    /// (kube-aggregator's transport config).
    pub fn server_name(&self) -> Option<String> {
        self.service.as_ref().map(|s| format!("{}.{}.svc", s.name, s.namespace))
    }
}

/// kube's order of the versions of one group: higher `versionPriority` first, then kube's
/// version order.
pub fn compare_versions(a: &ApiService, b: &ApiService) -> Ordering {
    b.version_priority.cmp(&a.version_priority).then_with(|| version_order::compare(&a.version, &b.version))
}

/// APIServices grouped by group, groups in kube's discovery order (the highest
/// `groupPriorityMinimum` of a group's APIServices first, then by group name), versions in
/// [`compare_versions`] order.
pub fn sorted_by_group_and_version(services: &[ApiService]) -> Vec<Vec<ApiService>> {
    let mut groups: Vec<Vec<ApiService>> = Vec::new();
    for s in services {
        match groups.iter_mut().find(|g| g[0].group == s.group) {
            Some(g) => g.push(s.clone()),
            None => groups.push(vec![s.clone()]),
        }
    }
    for g in &mut groups {
        g.sort_by(compare_versions);
    }
    let priority = |g: &Vec<ApiService>| g.iter().map(|s| s.group_priority).max().unwrap_or(0);
    groups.sort_by(|a, b| priority(b).cmp(&priority(a)).then_with(|| a[0].group.cmp(&b[0].group)));
    groups
}

/// kube's priorities of the groups kube-apiserver serves (the aggregator's table for its
/// automatic local APIServices); groups it does not list sit just below the listed ones, in
/// the order the server lists them.
pub fn builtin_priority(group: &str, version: &str) -> Option<(i64, i64)> {
    let group_priority = match group {
        "" => 18000,
        "apps" => 17800,
        "events.k8s.io" => 17750,
        "authentication.k8s.io" => 17700,
        "authorization.k8s.io" => 17600,
        "autoscaling" => 17500,
        "batch" => 17400,
        "certificates.k8s.io" => 17300,
        "networking.k8s.io" => 17200,
        "policy" => 17100,
        "rbac.authorization.k8s.io" => 17000,
        "storage.k8s.io" => 16800,
        "apiextensions.k8s.io" | "admissionregistration.k8s.io" => 16700,
        "scheduling.k8s.io" => 16600,
        "coordination.k8s.io" => 16500,
        "node.k8s.io" => 16300,
        "discovery.k8s.io" => 16200,
        "flowcontrol.apiserver.k8s.io" => 16100,
        "internal.apiserver.k8s.io" => 16000,
        "resource.k8s.io" => 15900,
        "storagemigration.k8s.io" => 15800,
        "apiregistration.k8s.io" => return None,
        _ => return None,
    };
    // GA before beta before alpha, as kube's table spaces them.
    let version_priority = if version.contains("alpha") {
        9
    } else if version.contains("beta") {
        12
    } else {
        15
    };
    let version_priority = if group.is_empty() { 1 } else { version_priority };
    Some((group_priority, version_priority))
}

/// kube's priorities of a CustomResourceDefinition's group versions (its crdregistration
/// controller): below every built-in group; versions of equal priority order by name.
pub const CRD_PRIORITY: (i64, i64) = (1000, 100);

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn svc(group: &str, version: &str, gp: i64, vp: i64) -> ApiService {
        ApiService::from_object(&json!({
            "metadata": {"name": format!("{version}.{group}")},
            "spec": {"group": group, "version": version, "groupPriorityMinimum": gp, "versionPriority": vp},
        }))
        .unwrap()
    }

    #[test]
    fn groups_by_their_highest_priority_then_name_versions_by_priority_then_kube_order() {
        let services = [
            svc("metrics.k8s.io", "v1beta1", 100, 100),
            svc("b.example", "v1", 1000, 100),
            svc("a.example", "v2", 1000, 100),
            svc("a.example", "v10", 1000, 100),
            svc("a.example", "v1alpha1", 1000, 200),
            svc("apps", "v1", 17800, 15),
            svc("low", "v1", 10, 15),
            svc("low", "v2", 2000, 1),
        ];
        let sorted = sorted_by_group_and_version(&services);
        let names: Vec<Vec<String>> = sorted.iter().map(|g| g.iter().map(|s| s.name.clone()).collect()).collect();
        assert_eq!(
            names,
            vec![
                vec!["v1.apps".to_owned()],
                vec!["v1.low".into(), "v2.low".into()],
                vec!["v1alpha1.a.example".into(), "v10.a.example".into(), "v2.a.example".into()],
                vec!["v1.b.example".into()],
                vec!["v1beta1.metrics.k8s.io".into()],
            ]
        );
    }

    #[test]
    fn reads_service_references_with_kubes_default_port_and_the_available_condition() {
        let s = ApiService::from_object(&json!({
            "metadata": {"name": "v1beta1.metrics.k8s.io"},
            "spec": {"group": "metrics.k8s.io", "version": "v1beta1", "service": {"namespace": "kube-system", "name": "metrics-server"},
                     "caBundle": "UEVN", "groupPriorityMinimum": 100, "versionPriority": 100},
            "status": {"conditions": [{"type": "Available", "status": "True"}]},
        }))
        .unwrap();
        assert_eq!(s.service, Some(ServiceRef { namespace: "kube-system".into(), name: "metrics-server".into(), port: 443 }));
        assert_eq!(s.ca_bundle, b"PEM");
        assert!(s.available);
        assert_eq!(s.server_name().as_deref(), Some("metrics-server.kube-system.svc"));
        assert!(ApiService::from_object(&json!({"metadata": {"name": "x"}, "spec": {}})).is_none());
    }
}
