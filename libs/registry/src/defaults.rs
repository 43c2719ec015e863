//! What kube-apiserver fills in on write, per kind: the `SetDefaults_*` functions of each GA
//! version (`pkg/apis/*/v1/defaults.go`) and the create-time effects of each strategy's
//! `PrepareForCreate` that users see in `kubectl get -o yaml`.
//!
//! Every default only fills a field that is absent (or JSON `null`), so applying defaults twice
//! changes nothing and never overwrites what a client set.

mod pod;
mod secret;
mod workloads;

use serde_json::{json, Map, Value};

pub use pod::pod_qos_class;
pub(crate) use pod::quantity_value as pod_quantity;
pub use workloads::{JOB_NAME_LABELS, JOB_UID_LABELS};

/// Defaulting (kube's SetDefaults_* for the GA version): idempotent, never overwrites a set field.
pub fn apply_defaults(group: &str, kind: &str, obj: &mut Value) {
    if !obj.is_object() {
        return;
    }
    match (group, kind) {
        ("", "Pod") => pod::default_pod(obj),
        ("", "PodTemplate") => pod::default_template_at(obj, &["template"]),
        ("", "ReplicationController") => workloads::default_replication_controller(obj),
        ("", "Service") => default_service(obj),
        ("", "Secret") => {
            secret::merge_string_data(obj);
            set_default(obj, &["type"], json!("Opaque"));
        }
        ("", "Namespace") => default_namespace(obj),
        ("", "PersistentVolumeClaim") => pod::default_pvc_spec_at(obj, &["spec"]),
        ("", "PersistentVolume") => default_persistent_volume(obj),
        ("", "Endpoints") => default_endpoints(obj),
        ("", "Node") => default_node(obj),
        ("apps", "Deployment") => workloads::default_deployment(obj),
        ("apps", "ReplicaSet") => workloads::default_replica_set(obj),
        ("apps", "StatefulSet") => workloads::default_stateful_set(obj),
        ("apps", "DaemonSet") => workloads::default_daemon_set(obj),
        ("batch", "Job") => workloads::default_job(obj),
        ("batch", "CronJob") => workloads::default_cron_job(obj),
        ("discovery.k8s.io", "EndpointSlice") => default_endpoint_slice(obj),
        ("networking.k8s.io", "NetworkPolicy") => default_network_policy(obj),
        ("networking.k8s.io", "Ingress") => {}
        ("rbac.authorization.k8s.io", "RoleBinding" | "ClusterRoleBinding") => default_subjects(obj),
        ("scheduling.k8s.io", "PriorityClass") => {
            set_default(obj, &["preemptionPolicy"], json!("PreemptLowerPriority"))
        }
        ("storage.k8s.io", "StorageClass") => {
            set_default(obj, &["reclaimPolicy"], json!("Delete"));
            set_default(obj, &["volumeBindingMode"], json!("Immediate"));
        }
        ("storage.k8s.io", "CSIDriver") => default_csi_driver(obj),
        ("autoscaling", "HorizontalPodAutoscaler") => default_hpa(obj),
        ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration") => default_webhooks(obj, false),
        ("admissionregistration.k8s.io", "MutatingWebhookConfiguration") => default_webhooks(obj, true),
        _ => {}
    }
}

/// kube's strategy PrepareForCreate effects other than metadata (status reset to what the
/// strategy sets: Pod status {phase: Pending, qosClass}, Deployment/ReplicaSet/... status {},
/// Namespace spec.finalizers ["kubernetes"] + status.phase Active, Service status {loadBalancer: {}}, ...).
pub fn prepare_for_create(group: &str, kind: &str, obj: &mut Value) {
    if !obj.is_object() {
        return;
    }
    // The status each strategy writes on create, as Go serializes the reset struct: fields
    // without `omitempty` appear as zeros.
    if (group, kind) == ("", "Node") {
        // A Node keeps its status on create, but not the dynamic kubelet config source (gone).
        for (parent, field) in [("/spec", "configSource"), ("/status", "config")] {
            if let Some(m) = obj.pointer_mut(parent).and_then(Value::as_object_mut) {
                m.remove(field);
            }
        }
    }
    let status = match (group, kind) {
        ("", "Pod") => Some(pod::initial_pod_status(obj)),
        ("", "Service") => Some(json!({"loadBalancer": {}})),
        ("", "Namespace") => {
            ensure_kubernetes_finalizer(obj);
            Some(json!({"phase": "Active"}))
        }
        ("", "PersistentVolumeClaim" | "PersistentVolume") => Some(json!({"phase": "Pending"})),
        ("", "ReplicationController") | ("apps", "ReplicaSet") => Some(json!({"replicas": 0})),
        ("apps", "Deployment") | ("batch", "CronJob") | ("certificates.k8s.io", "CertificateSigningRequest") => {
            Some(json!({}))
        }
        ("apps", "StatefulSet") => Some(json!({"replicas": 0, "availableReplicas": 0})),
        ("apps", "DaemonSet") => Some(json!({
            "currentNumberScheduled": 0,
            "numberMisscheduled": 0,
            "desiredNumberScheduled": 0,
            "numberReady": 0
        })),
        ("batch", "Job") => {
            workloads::generate_job_selector(obj);
            Some(json!({}))
        }
        ("networking.k8s.io", "Ingress") => Some(json!({"loadBalancer": {}})),
        ("policy", "PodDisruptionBudget") => Some(json!({
            "disruptionsAllowed": 0,
            "currentHealthy": 0,
            "desiredHealthy": 0,
            "expectedPods": 0
        })),
        ("autoscaling", "HorizontalPodAutoscaler") => Some(json!({"desiredReplicas": 0})),
        ("", "ResourceQuota") => Some(json!({})),
        _ => None,
    };
    if let (Some(status), Some(map)) = (status, obj.as_object_mut()) {
        map.insert("status".into(), status);
    }
}

// ---- shared JSON helpers -------------------------------------------------------------------

/// True when the field is missing or JSON `null`: what Go sees as an unset pointer or zero value.
pub(crate) fn is_unset(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) => true,
        Some(Value::String(s)) => s.is_empty(),
        _ => false,
    }
}

/// Sets `path` to `value` unless it is already set, creating intermediate objects.
pub(crate) fn set_default(obj: &mut Value, path: &[&str], value: Value) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let Some(map) = object_at_mut(obj, parents) else {
        return;
    };
    if is_unset(map.get(*last)) {
        map.insert((*last).to_string(), value);
    }
}

/// The object at `path`, created when missing; `None` when something on the way is not an object.
pub(crate) fn object_at_mut<'a>(obj: &'a mut Value, path: &[&str]) -> Option<&'a mut Map<String, Value>> {
    let mut cur = obj;
    for key in path {
        let map = cur.as_object_mut()?;
        let entry = map.entry((*key).to_string()).or_insert_with(|| json!({}));
        if entry.is_null() {
            *entry = json!({});
        }
        cur = entry;
    }
    cur.as_object_mut()
}

/// The existing value at `path` without creating anything.
pub(crate) fn get_mut<'a>(obj: &'a mut Value, path: &[&str]) -> Option<&'a mut Value> {
    let mut cur = obj;
    for key in path {
        cur = cur.as_object_mut()?.get_mut(*key)?;
    }
    if cur.is_null() {
        None
    } else {
        Some(cur)
    }
}

/// Calls `f` on every object element of the array at `path`, if any.
pub(crate) fn for_each_item(obj: &mut Value, path: &[&str], mut f: impl FnMut(&mut Value)) {
    if let Some(Value::Array(items)) = get_mut(obj, path) {
        for item in items.iter_mut().filter(|i| i.is_object()) {
            f(item);
        }
    }
}

// ---- small kinds ---------------------------------------------------------------------------

fn default_service(obj: &mut Value) {
    set_default(obj, &["spec", "sessionAffinity"], json!("None"));
    set_default(obj, &["spec", "type"], json!("ClusterIP"));
    let spec = obj.get("spec").cloned().unwrap_or(Value::Null);
    let svc_type = spec.get("type").and_then(Value::as_str).unwrap_or("ClusterIP").to_string();
    if spec.get("sessionAffinity").and_then(Value::as_str) == Some("ClientIP") {
        set_default(obj, &["spec", "sessionAffinityConfig", "clientIP", "timeoutSeconds"], json!(10800));
    }
    for_each_item(obj, &["spec", "ports"], |port| {
        set_default(port, &["protocol"], json!("TCP"));
        let target_unset = match port.get("targetPort") {
            None | Some(Value::Null) => true,
            Some(Value::Number(n)) => n.as_i64() == Some(0),
            Some(Value::String(s)) => s.is_empty(),
            _ => false,
        };
        if target_unset {
            if let Some(p) = port.get("port").cloned() {
                port["targetPort"] = p;
            }
        }
    });
    if matches!(svc_type.as_str(), "NodePort" | "LoadBalancer") {
        set_default(obj, &["spec", "externalTrafficPolicy"], json!("Cluster"));
    }
    if svc_type == "LoadBalancer" {
        set_default(obj, &["spec", "allocateLoadBalancerNodePorts"], json!(true));
    }
    if svc_type != "ExternalName" {
        set_default(obj, &["spec", "internalTrafficPolicy"], json!("Cluster"));
        // ipFamilyPolicy and ipFamilies depend on the cluster's ranges: the Service allocator
        // (service_alloc) sets them, as kube's Service storage does.
    }
}

fn default_namespace(obj: &mut Value) {
    // kube labels every namespace with its own name so that selectors can pick namespaces.
    let name = obj.pointer("/metadata/name").and_then(Value::as_str).map(str::to_string);
    if let Some(name) = name.filter(|n| !n.is_empty()) {
        if let Some(labels) = object_at_mut(obj, &["metadata", "labels"]) {
            labels.insert("kubernetes.io/metadata.name".into(), json!(name));
        }
    }
    if obj.get("status").is_some_and(Value::is_object) {
        set_default(obj, &["status", "phase"], json!("Active"));
    }
}

fn ensure_kubernetes_finalizer(obj: &mut Value) {
    let Some(spec) = object_at_mut(obj, &["spec"]) else {
        return;
    };
    match spec.get_mut("finalizers") {
        Some(Value::Array(list)) => {
            if !list.iter().any(|f| f.as_str() == Some("kubernetes")) {
                list.push(json!("kubernetes"));
            }
        }
        _ => {
            spec.insert("finalizers".into(), json!(["kubernetes"]));
        }
    }
}

fn default_persistent_volume(obj: &mut Value) {
    set_default(obj, &["spec", "persistentVolumeReclaimPolicy"], json!("Retain"));
    set_default(obj, &["spec", "volumeMode"], json!("Filesystem"));
    if obj.pointer("/spec/hostPath").is_some_and(Value::is_object) {
        set_default(obj, &["spec", "hostPath", "type"], json!(""));
    }
}

fn default_endpoints(obj: &mut Value) {
    for_each_item(obj, &["subsets"], |subset| {
        for_each_item(subset, &["ports"], |port| set_default(port, &["protocol"], json!("TCP")));
    });
}

fn default_endpoint_slice(obj: &mut Value) {
    for_each_item(obj, &["ports"], |port| {
        set_default(port, &["protocol"], json!("TCP"));
        if let Some(map) = port.as_object_mut() {
            map.entry("name").or_insert_with(|| json!(""));
        }
    });
}

fn default_node(obj: &mut Value) {
    // SetDefaults_NodeStatus: allocatable defaults to capacity.
    let capacity = obj.pointer("/status/capacity").cloned();
    if let Some(capacity) = capacity.filter(Value::is_object) {
        set_default(obj, &["status", "allocatable"], capacity);
    }
}

/// `SetDefaults_CSIDriver` (storage/v1) with its feature gates as kube ships them (the inline
/// volume and FSGroupPolicy gates are GA, SELinuxMountReadWriteOncePod on): every optional
/// field but `tokenRequests` gets a value, and no modes at all means `[Persistent]`.
fn default_csi_driver(obj: &mut Value) {
    for (field, value) in [
        ("attachRequired", json!(true)),
        ("podInfoOnMount", json!(false)),
        ("storageCapacity", json!(false)),
        ("fsGroupPolicy", json!("ReadWriteOnceWithFSType")),
        ("requiresRepublish", json!(false)),
        ("seLinuxMount", json!(false)),
    ] {
        set_default(obj, &["spec", field], value);
    }
    // `len(modes) == 0`: an empty list is defaulted too.
    if obj.pointer("/spec/volumeLifecycleModes").and_then(Value::as_array).is_some_and(Vec::is_empty) {
        obj["spec"]["volumeLifecycleModes"] = Value::Null;
    }
    set_default(obj, &["spec", "volumeLifecycleModes"], json!(["Persistent"]));
}

fn default_network_policy(obj: &mut Value) {
    for rule_kind in ["ingress", "egress"] {
        for_each_item(obj, &["spec", rule_kind], |rule| {
            for_each_item(rule, &["ports"], |port| set_default(port, &["protocol"], json!("TCP")));
        });
    }
    let unset = match obj.pointer("/spec/policyTypes") {
        None | Some(Value::Null) => true,
        Some(Value::Array(a)) => a.is_empty(),
        _ => false,
    };
    if unset && obj.get("spec").is_some_and(Value::is_object) {
        let mut types = vec![json!("Ingress")];
        if obj.pointer("/spec/egress").and_then(Value::as_array).is_some_and(|a| !a.is_empty()) {
            types.push(json!("Egress"));
        }
        obj["spec"]["policyTypes"] = Value::Array(types);
    }
}

/// kube defaults a subject's `apiGroup` to `rbac.authorization.k8s.io` for users and groups
/// and to "" for service accounts; `apiGroup` is `omitempty`, so the "" never reaches JSON (a
/// stored `""` would make an unchanged client-side re-apply a change).
fn default_subjects(obj: &mut Value) {
    for_each_item(obj, &["subjects"], |subject| {
        let kind = subject.get("kind").and_then(Value::as_str).unwrap_or_default().to_owned();
        let Some(map) = subject.as_object_mut() else { return };
        match kind.as_str() {
            "ServiceAccount" if map.get("apiGroup").is_some_and(|g| g.is_null() || g.as_str() == Some("")) => {
                map.remove("apiGroup");
            }
            "User" | "Group" if map.get("apiGroup").is_none_or(Value::is_null) => {
                map.insert("apiGroup".into(), json!("rbac.authorization.k8s.io"));
            }
            _ => {}
        }
    });
}

fn default_hpa(obj: &mut Value) {
    set_default(obj, &["spec", "minReplicas"], json!(1));
    let no_metrics = match obj.pointer("/spec/metrics") {
        None | Some(Value::Null) => true,
        Some(Value::Array(a)) => a.is_empty(),
        _ => false,
    };
    if no_metrics && obj.get("spec").is_some_and(Value::is_object) {
        obj["spec"]["metrics"] = json!([{
            "type": "Resource",
            "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}
        }]);
    }
}

fn default_webhooks(obj: &mut Value, mutating: bool) {
    for_each_item(obj, &["webhooks"], |hook| {
        set_default(hook, &["failurePolicy"], json!("Fail"));
        set_default(hook, &["matchPolicy"], json!("Equivalent"));
        set_default(hook, &["namespaceSelector"], json!({}));
        set_default(hook, &["objectSelector"], json!({}));
        set_default(hook, &["timeoutSeconds"], json!(10));
        if mutating {
            set_default(hook, &["reinvocationPolicy"], json!("Never"));
        }
        if hook.pointer("/clientConfig/service").is_some_and(Value::is_object) {
            set_default(hook, &["clientConfig", "service", "port"], json!(443));
        }
        for_each_item(hook, &["rules"], |rule| set_default(rule, &["scope"], json!("*")));
    });
}

#[cfg(test)]
mod tests;
