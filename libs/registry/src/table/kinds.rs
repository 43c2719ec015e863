//! Printers for core and other single-object kinds: services, nodes, namespaces, config maps,
//! secrets, events, leases, role bindings, storage and priority classes.

use serde_json::{json, Value};
use time::OffsetDateTime;

use super::{
    age, col, format_labels, int_at, len_of, name, object_keys, since, str_at, wide, ColumnDef, AGE, NAME, NAME_DESC,
};

pub(super) const SERVICE: &[ColumnDef] = &[
    NAME,
    col("Type", "string", "type determines how the Service is exposed. Defaults to ClusterIP. Valid options are ExternalName, ClusterIP, NodePort, and LoadBalancer. \"ClusterIP\" allocates a cluster-internal IP address for load-balancing to endpoints. Endpoints are determined by the selector or if that is not specified, by manual construction of an Endpoints object or EndpointSlice objects. If clusterIP is \"None\", no virtual IP is allocated and the endpoints are published as a set of endpoints rather than a virtual IP. \"NodePort\" builds on ClusterIP and allocates a port on every node which routes to the same endpoints as the clusterIP. \"LoadBalancer\" builds on NodePort and creates an external load-balancer (if supported in the current cloud) which routes to the same endpoints as the clusterIP. \"ExternalName\" aliases this service to the specified externalName. Several other fields do not apply to ExternalName services. More info: https://kubernetes.io/docs/concepts/services-networking/service/#publishing-services-service-types"),
    col("Cluster-IP", "string", "clusterIP is the IP address of the service and is usually assigned randomly. If an address is specified manually, is in-range (as per system configuration), and is not in use, it will be allocated to the service; otherwise creation of the service will fail. This field may not be changed through updates unless the type field is also being changed to ExternalName (which requires this field to be blank) or the type field is being changed from ExternalName (in which case this field may optionally be specified, as describe above).  Valid values are \"None\", empty string (\"\"), or a valid IP address. Setting this to \"None\" makes a \"headless service\" (no virtual IP), which is useful when direct endpoint connections are preferred and proxying is not required.  Only applies to types ClusterIP, NodePort, and LoadBalancer. If this field is specified when creating a Service of type ExternalName, creation will fail. This field will be wiped when updating a Service to type ExternalName. More info: https://kubernetes.io/docs/concepts/services-networking/service/#virtual-ips-and-service-proxies"),
    col("External-IP", "string", "externalIPs is a list of IP addresses for which nodes in the cluster will also accept traffic for this service.  These IPs are not managed by Kubernetes.  The user is responsible for ensuring that traffic arrives at a node with this IP.  A common example is external load-balancers that are not part of the Kubernetes system."),
    col("Port(s)", "string", "The list of ports that are exposed by this service. More info: https://kubernetes.io/docs/concepts/services-networking/service/#virtual-ips-and-service-proxies"),
    AGE,
    wide("Selector", "string", "Route service traffic to pods with label keys and values matching this selector. If empty or not present, the service is assumed to have an external process managing its endpoints, which Kubernetes will not modify. Only applies to types ClusterIP, NodePort, and LoadBalancer. Ignored if type is ExternalName. More info: https://kubernetes.io/docs/concepts/services-networking/service/"),
];

pub(super) const NODE: &[ColumnDef] = &[
    NAME,
    col("Status", "string", "The status of the node"),
    col("Roles", "string", "The roles of the node"),
    AGE,
    col("Version", "string", "Kubelet Version reported by the node."),
    wide("Internal-IP", "string", "List of addresses reachable to the node. Queried from cloud provider, if available. More info: https://kubernetes.io/docs/reference/node/node-status/#addresses Note: This field is declared as mergeable, but the merge key is not sufficiently unique, which can cause data corruption when it is merged. Callers should instead use a full-replacement patch. See https://pr.k8s.io/79391 for an example. Consumers should assume that addresses can change during the lifetime of a Node. However, there are some exceptions where this may not be possible, such as Pods that inherit a Node's address in its own status or consumers of the downward API (status.hostIP)."),
    wide("External-IP", "string", "List of addresses reachable to the node. Queried from cloud provider, if available. More info: https://kubernetes.io/docs/reference/node/node-status/#addresses Note: This field is declared as mergeable, but the merge key is not sufficiently unique, which can cause data corruption when it is merged. Callers should instead use a full-replacement patch. See https://pr.k8s.io/79391 for an example. Consumers should assume that addresses can change during the lifetime of a Node. However, there are some exceptions where this may not be possible, such as Pods that inherit a Node's address in its own status or consumers of the downward API (status.hostIP)."),
    wide("OS-Image", "string", "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy))."),
    wide("Kernel-Version", "string", "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64)."),
    wide("Container-Runtime", "string", "ContainerRuntime Version reported by the node through runtime remote API (e.g. containerd://1.4.2)."),
];

pub(super) const NAMESPACE: &[ColumnDef] = &[NAME, col("Status", "string", "The status of the namespace"), AGE];

pub(super) const CONFIG_MAP: &[ColumnDef] = &[
    NAME,
    col("Data", "string", "Data contains the configuration data. Each key must consist of alphanumeric characters, '-', '_' or '.'. Values with non-UTF-8 byte sequences must use the BinaryData field. The keys stored in Data must not overlap with the keys in the BinaryData field, this is enforced during validation process."),
    AGE,
];

pub(super) const SECRET: &[ColumnDef] = &[
    NAME,
    col("Type", "string", "Used to facilitate programmatic handling of secret data. More info: https://kubernetes.io/docs/concepts/configuration/secret/#secret-types"),
    col("Data", "string", "Data contains the secret data. Each key must consist of alphanumeric characters, '-', '_' or '.'. The serialized form of the secret data is a base64 encoded string, representing the arbitrary (possibly non-string) data value here. Described in https://tools.ietf.org/html/rfc4648#section-4"),
    AGE,
];

pub(super) const EVENT: &[ColumnDef] = &[
    col("Last Seen", "string", "The time at which the most recent occurrence of this event was recorded."),
    col("Type", "string", "Type of this event (Normal, Warning), new types could be added in the future"),
    col("Reason", "string", "This should be a short, machine understandable string that gives the reason for the transition into the object's current status."),
    col("Object", "string", "The object that this event is about."),
    wide("Subobject", "string", "If referring to a piece of an object instead of an entire object, this string should contain a valid JSON/Go field access statement, such as desiredState.manifest.containers[2]. For example, if the object reference is to a container within a pod, this would take on a value like: \"spec.containers{name}\" (where \"name\" refers to the name of the container that triggered the event) or if no container name is specified \"spec.containers[2]\" (container with index 2 in this pod). This syntax is chosen only to have some well-defined way of referencing a part of an object."),
    wide("Source", "string", "The component reporting this event. Should be a short machine understandable string."),
    col("Message", "string", "A human-readable description of the status of this operation."),
    wide("First Seen", "string", "The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)"),
    wide("Count", "string", "The number of times this event has occurred."),
    super::ColumnDef { name: "Name", kind: "string", format: "name", description: NAME_DESC, priority: 1 },
];

pub(super) const LEASE: &[ColumnDef] = &[
    NAME,
    col("Holder", "string", "holderIdentity contains the identity of the holder of a current lease. If Coordinated Leader Election is used, the holder identity must be equal to the elected LeaseCandidate.metadata.name field."),
    AGE,
];

pub(super) const ROLE_BINDING: &[ColumnDef] = &[
    NAME,
    col("Role", "string", "RoleRef can reference a Role in the current namespace or a ClusterRole in the global namespace. If the RoleRef cannot be resolved, the Authorizer must return an error. This field is immutable."),
    AGE,
    wide("Users", "string", "Users in the roleBinding"),
    wide("Groups", "string", "Groups in the roleBinding"),
    wide("ServiceAccounts", "string", "ServiceAccounts in the roleBinding"),
];

pub(super) const CLUSTER_ROLE_BINDING: &[ColumnDef] = &[
    NAME,
    col("Role", "string", "RoleRef can only reference a ClusterRole in the global namespace. If the RoleRef cannot be resolved, the Authorizer must return an error. This field is immutable."),
    AGE,
    wide("Users", "string", "Users in the clusterRoleBinding"),
    wide("Groups", "string", "Groups in the clusterRoleBinding"),
    wide("ServiceAccounts", "string", "ServiceAccounts in the clusterRoleBinding"),
];

pub(super) const STORAGE_CLASS: &[ColumnDef] = &[
    NAME,
    col("Provisioner", "string", "provisioner indicates the type of the provisioner."),
    col("ReclaimPolicy", "string", "reclaimPolicy controls the reclaimPolicy for dynamically provisioned PersistentVolumes of this storage class. Defaults to Delete."),
    col("VolumeBindingMode", "string", "volumeBindingMode indicates how PersistentVolumeClaims should be provisioned and bound.  When unset, VolumeBindingImmediate is used. This field is only honored by servers that enable the VolumeScheduling feature."),
    col("AllowVolumeExpansion", "string", "allowVolumeExpansion shows whether the storage class allow volume expand."),
    AGE,
];

pub(super) const PRIORITY_CLASS: &[ColumnDef] = &[
    NAME,
    col("Value", "integer", "value represents the integer value of this priority class. This is the actual priority that pods receive when they have the name of this class in their pod spec."),
    col("Global-Default", "boolean", "globalDefault specifies whether this PriorityClass should be considered as the default priority for pods that do not have any priority class. Only one PriorityClass can be marked as `globalDefault`. However, if more than one PriorityClasses exists with their `globalDefault` field set to true, the smallest value of such global default PriorityClasses will be used as the default priority."),
    AGE,
    col("PreemptionPolicy", "string", "preemptionPolicy is the Policy for preempting pods with lower priority. One of Never, PreemptLowerPriority. Defaults to PreemptLowerPriority if unset."),
];

fn strings<'a>(obj: &'a Value, pointer: &str) -> Vec<&'a str> {
    obj.pointer(pointer)
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// `getServiceExternalIP` (always wide on the server: no truncation).
fn service_external_ip(svc: &Value) -> String {
    let external = strings(svc, "/spec/externalIPs");
    match str_at(svc, "/spec/type") {
        "ClusterIP" | "NodePort" => {
            if external.is_empty() {
                "<none>".to_string()
            } else {
                external.join(",")
            }
        }
        "LoadBalancer" => {
            let ingress: Vec<&str> = svc
                .pointer("/status/loadBalancer/ingress")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|i| {
                            let ip = str_at(i, "/ip");
                            let host = str_at(i, "/hostname");
                            [ip, host].into_iter().find(|s| !s.is_empty())
                        })
                        .collect()
                })
                .unwrap_or_default();
            let mut all: Vec<&str> = ingress;
            all.extend(external);
            if all.is_empty() {
                "<pending>".to_string()
            } else {
                all.join(",")
            }
        }
        "ExternalName" => str_at(svc, "/spec/externalName").to_string(),
        _ => "<unknown>".to_string(),
    }
}

pub(super) fn service(svc: &Value, now: OffsetDateTime) -> Vec<Value> {
    let cluster_ip = match strings(svc, "/spec/clusterIPs").first() {
        Some(ip) => ip.to_string(),
        None => match str_at(svc, "/spec/clusterIP") {
            "" => "<none>".to_string(),
            ip => ip.to_string(),
        },
    };
    let ports: Vec<String> = svc
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .map(|ps| {
            ps.iter()
                .map(|p| {
                    let port = int_at(p, "/port");
                    let proto = str_at(p, "/protocol");
                    match int_at(p, "/nodePort") {
                        n if n > 0 => format!("{port}:{n}/{proto}"),
                        _ => format!("{port}/{proto}"),
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    let ports = if ports.is_empty() { "<none>".to_string() } else { ports.join(",") };
    vec![
        name(svc),
        json!(str_at(svc, "/spec/type")),
        json!(cluster_ip),
        json!(service_external_ip(svc)),
        json!(ports),
        age(svc, now),
        json!(format_labels(svc.pointer("/spec/selector"))),
    ]
}

pub(super) fn node(node: &Value, now: OffsetDateTime) -> Vec<Value> {
    let conditions = node.pointer("/status/conditions").and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[]);
    let mut status: Vec<String> = conditions
        .iter()
        .find(|c| str_at(c, "/type") == "Ready")
        .map(|c| if str_at(c, "/status") == "True" { "Ready".to_string() } else { "NotReady".to_string() })
        .into_iter()
        .collect();
    if status.is_empty() {
        status.push("Unknown".into());
    }
    if node.pointer("/spec/unschedulable").and_then(Value::as_bool) == Some(true) {
        status.push("SchedulingDisabled".into());
    }
    let mut roles = std::collections::BTreeSet::new();
    if let Some(labels) = node.pointer("/metadata/labels").and_then(Value::as_object) {
        for (k, v) in labels {
            if let Some(role) = k.strip_prefix("node-role.kubernetes.io/").filter(|r| !r.is_empty()) {
                roles.insert(role.to_string());
            } else if k == "kubernetes.io/role" && v.as_str().is_some_and(|s| !s.is_empty()) {
                roles.insert(v.as_str().unwrap_or_default().to_string());
            }
        }
    }
    let roles = if roles.is_empty() { "<none>".to_string() } else { roles.into_iter().collect::<Vec<_>>().join(",") };
    let address = |kind: &str| {
        node.pointer("/status/addresses")
            .and_then(Value::as_array)
            .and_then(|a| a.iter().find(|x| str_at(x, "/type") == kind))
            .map(|x| str_at(x, "/address").to_string())
            .unwrap_or_else(|| "<none>".to_string())
    };
    let info = |key: &str| match str_at(node, &format!("/status/nodeInfo/{key}")) {
        "" => "<unknown>".to_string(),
        v => v.to_string(),
    };
    vec![
        name(node),
        json!(status.join(",")),
        json!(roles),
        age(node, now),
        json!(str_at(node, "/status/nodeInfo/kubeletVersion")),
        json!(address("InternalIP")),
        json!(address("ExternalIP")),
        json!(info("osImage")),
        json!(info("kernelVersion")),
        json!(info("containerRuntimeVersion")),
    ]
}

pub(super) fn namespace(ns: &Value, now: OffsetDateTime) -> Vec<Value> {
    vec![name(ns), json!(str_at(ns, "/status/phase")), age(ns, now)]
}

pub(super) fn config_map(cm: &Value, now: OffsetDateTime) -> Vec<Value> {
    vec![name(cm), json!(len_of(cm, "data") + len_of(cm, "binaryData")), age(cm, now)]
}

pub(super) fn secret(s: &Value, now: OffsetDateTime) -> Vec<Value> {
    // stringData merges into data (kube converts it on decode).
    let mut keys: std::collections::BTreeSet<&String> = object_keys(s, "data").collect();
    keys.extend(object_keys(s, "stringData"));
    vec![name(s), json!(str_at(s, "/type")), json!(keys.len()), age(s, now)]
}

/// An events.k8s.io/v1 Event in core/v1 shape, which kube prints with the same printer.
pub(super) fn events_v1_as_core(e: &Value) -> Value {
    let pick = |p: &str| e.pointer(p).cloned().unwrap_or(Value::Null);
    json!({
        "metadata": pick("/metadata"),
        "involvedObject": pick("/regarding"),
        "reason": pick("/reason"),
        "message": pick("/note"),
        "type": pick("/type"),
        "source": pick("/deprecatedSource"),
        "firstTimestamp": pick("/deprecatedFirstTimestamp"),
        "lastTimestamp": pick("/deprecatedLastTimestamp"),
        "count": pick("/deprecatedCount"),
        "eventTime": pick("/eventTime"),
        "series": pick("/series"),
        "reportingComponent": pick("/reportingController"),
        "reportingInstance": pick("/reportingInstance"),
    })
}

pub(super) fn event(e: &Value, now: OffsetDateTime) -> Vec<Value> {
    let set = |p: &str| e.pointer(p).filter(|v| v.as_str().is_some_and(|s| !s.is_empty()));
    let first = match set("/firstTimestamp") {
        Some(t) => since(Some(t), now),
        None => since(e.pointer("/eventTime"), now),
    };
    let mut last = match set("/lastTimestamp") {
        Some(t) => since(Some(t), now),
        None => first.clone(),
    };
    let mut count = int_at(e, "/count");
    if e.get("series").is_some_and(Value::is_object) {
        last = since(e.pointer("/series/lastObservedTime"), now);
        count = int_at(e, "/series/count");
    } else if count == 0 {
        count = 1;
    }
    let kind = str_at(e, "/involvedObject/kind").to_lowercase();
    let target = match str_at(e, "/involvedObject/name") {
        "" => kind,
        n => format!("{kind}/{n}"),
    };
    let first_non_empty = |a: &str, b: &str| if a.is_empty() { b.to_string() } else { a.to_string() };
    let component = first_non_empty(str_at(e, "/source/component"), str_at(e, "/reportingComponent"));
    let instance = first_non_empty(str_at(e, "/source/host"), str_at(e, "/reportingInstance"));
    let source = if instance.is_empty() { component } else { format!("{component}, {instance}") };
    vec![
        json!(last),
        json!(str_at(e, "/type")),
        json!(str_at(e, "/reason")),
        json!(target),
        json!(str_at(e, "/involvedObject/fieldPath")),
        json!(source),
        json!(str_at(e, "/message").trim()),
        json!(first),
        json!(count),
        name(e),
    ]
}

pub(super) fn role_binding(rb: &Value, now: OffsetDateTime) -> Vec<Value> {
    let (mut users, mut groups, mut sas) = (Vec::new(), Vec::new(), Vec::new());
    for s in rb.get("subjects").and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[]) {
        let n = str_at(s, "/name").to_string();
        match str_at(s, "/kind") {
            "User" => users.push(n),
            "Group" => groups.push(n),
            "ServiceAccount" => sas.push(format!("{}/{n}", str_at(s, "/namespace"))),
            _ => {}
        }
    }
    vec![
        name(rb),
        json!(format!("{}/{}", str_at(rb, "/roleRef/kind"), str_at(rb, "/roleRef/name"))),
        age(rb, now),
        json!(users.join(", ")),
        json!(groups.join(", ")),
        json!(sas.join(", ")),
    ]
}

pub(super) fn storage_class(sc: &Value, now: OffsetDateTime) -> Vec<Value> {
    let is_default =
        ["storageclass.kubernetes.io~1is-default-class", "storageclass.beta.kubernetes.io~1is-default-class"]
            .iter()
            .any(|k| str_at(sc, &format!("/metadata/annotations/{k}")) == "true");
    let mut n = str_at(sc, "/metadata/name").to_string();
    if is_default {
        n.push_str(" (default)");
    }
    let or = |p: &str, d: &str| match str_at(sc, p) {
        "" => d.to_string(),
        v => v.to_string(),
    };
    vec![
        json!(n),
        json!(str_at(sc, "/provisioner")),
        json!(or("/reclaimPolicy", "Delete")),
        json!(or("/volumeBindingMode", "Immediate")),
        json!(sc.get("allowVolumeExpansion").and_then(Value::as_bool).unwrap_or(false)),
        age(sc, now),
    ]
}

pub(super) fn priority_class(pc: &Value, now: OffsetDateTime) -> Vec<Value> {
    vec![
        name(pc),
        json!(int_at(pc, "/value")),
        json!(pc.get("globalDefault").and_then(Value::as_bool).unwrap_or(false)),
        age(pc, now),
        json!(str_at(pc, "/preemptionPolicy")),
    ]
}
