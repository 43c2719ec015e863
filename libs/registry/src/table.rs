//! Server-side printing (`as=Table;v=v1;g=meta.k8s.io`): kube-apiserver's printers
//! (`pkg/printers/internalversion/printers.go`) per kind, and kube's default table convertor
//! (Name, Created At) for every other kind.
//!
//! The server always prints the wide columns; clients hide those with priority > 0 unless asked
//! (`kubectl get -o wide`).

mod control;
mod kinds;
mod network;
mod pods;
mod policy;
mod storage;
mod workloads;

use std::cmp::Ordering;
use std::time::Duration;

use kapi_apimachinery::labels::LabelSelector;
use kapi_apimachinery::time::{format_rfc3339, human_duration, parse_rfc3339};
use serde_json::{json, Map, Value};
use time::OffsetDateTime;

const ADMISSION: &str = "admissionregistration.k8s.io";
const FLOW_CONTROL: &str = "flowcontrol.apiserver.k8s.io";

/// metav1.TableColumnDefinition objects ({name, type, format, description, priority}) for the kind.
pub fn columns(group: &str, kind: &str) -> Vec<Value> {
    let defs: Vec<ColumnDef> = match (group, kind) {
        ("", "Pod") => pods::COLUMNS.to_vec(),
        ("", "Service") => kinds::SERVICE.to_vec(),
        ("", "Node") => kinds::NODE.to_vec(),
        ("", "Namespace") => kinds::NAMESPACE.to_vec(),
        ("", "ConfigMap") => kinds::CONFIG_MAP.to_vec(),
        ("", "Secret") => kinds::SECRET.to_vec(),
        ("", "ServiceAccount") => policy::SERVICE_ACCOUNT.to_vec(),
        ("", "Event") | ("events.k8s.io", "Event") => kinds::EVENT.to_vec(),
        ("", "PersistentVolumeClaim") => storage::PVC.to_vec(),
        ("", "PersistentVolume") => storage::PERSISTENT_VOLUME.to_vec(),
        ("", "Endpoints") => network::ENDPOINTS.to_vec(),
        ("", "ResourceQuota") => control::RESOURCE_QUOTA.to_vec(),
        ("", "ComponentStatus") => control::COMPONENT_STATUS.to_vec(),
        ("", "ReplicationController") => workloads::REPLICATION_CONTROLLER.to_vec(),
        ("", "PodTemplate") => workloads::POD_TEMPLATE.to_vec(),
        ("apps", "Deployment") => workloads::DEPLOYMENT.to_vec(),
        ("apps", "ReplicaSet") => workloads::REPLICA_SET.to_vec(),
        ("apps", "StatefulSet") => workloads::STATEFUL_SET.to_vec(),
        ("apps", "DaemonSet") => workloads::DAEMON_SET.to_vec(),
        ("apps", "ControllerRevision") => control::CONTROLLER_REVISION.to_vec(),
        ("autoscaling", "HorizontalPodAutoscaler") => control::HORIZONTAL_POD_AUTOSCALER.to_vec(),
        ("certificates.k8s.io", "CertificateSigningRequest") => control::CERTIFICATE_SIGNING_REQUEST.to_vec(),
        ("certificates.k8s.io", "ClusterTrustBundle") => control::CLUSTER_TRUST_BUNDLE.to_vec(),
        (FLOW_CONTROL, "FlowSchema") => control::FLOW_SCHEMA.to_vec(),
        (FLOW_CONTROL, "PriorityLevelConfiguration") => control::PRIORITY_LEVEL_CONFIGURATION.to_vec(),
        ("discovery.k8s.io", "EndpointSlice") => network::ENDPOINT_SLICE.to_vec(),
        ("networking.k8s.io", "Ingress") => network::INGRESS.to_vec(),
        ("networking.k8s.io", "ServiceCIDR") => network::SERVICE_CIDR.to_vec(),
        ("networking.k8s.io", "IPAddress") => network::IP_ADDRESS.to_vec(),
        ("storage.k8s.io", "VolumeAttachment") => storage::VOLUME_ATTACHMENT.to_vec(),
        ("storage.k8s.io", "CSIDriver") => storage::CSI_DRIVER.to_vec(),
        ("storage.k8s.io", "CSIStorageCapacity") => storage::CSI_STORAGE_CAPACITY.to_vec(),
        ("storage.k8s.io", "VolumeAttributesClass") => storage::VOLUME_ATTRIBUTES_CLASS.to_vec(),
        ("batch", "Job") => workloads::JOB.to_vec(),
        ("batch", "CronJob") => workloads::CRON_JOB.to_vec(),
        ("coordination.k8s.io", "Lease") => kinds::LEASE.to_vec(),
        ("rbac.authorization.k8s.io", "RoleBinding") => kinds::ROLE_BINDING.to_vec(),
        ("rbac.authorization.k8s.io", "ClusterRoleBinding") => kinds::CLUSTER_ROLE_BINDING.to_vec(),
        ("storage.k8s.io", "StorageClass") => kinds::STORAGE_CLASS.to_vec(),
        ("scheduling.k8s.io", "PriorityClass") => kinds::PRIORITY_CLASS.to_vec(),
        ("policy", "PodDisruptionBudget") => policy::POD_DISRUPTION_BUDGET.to_vec(),
        ("networking.k8s.io", "NetworkPolicy") => policy::NETWORK_POLICY.to_vec(),
        ("networking.k8s.io", "IngressClass") => policy::INGRESS_CLASS.to_vec(),
        (ADMISSION, "ValidatingWebhookConfiguration" | "MutatingWebhookConfiguration") => {
            policy::WEBHOOK_CONFIGURATION.to_vec()
        }
        (ADMISSION, "ValidatingAdmissionPolicy") => policy::VALIDATING_ADMISSION_POLICY.to_vec(),
        (ADMISSION, "MutatingAdmissionPolicy") => policy::MUTATING_ADMISSION_POLICY.to_vec(),
        (ADMISSION, "ValidatingAdmissionPolicyBinding" | "MutatingAdmissionPolicyBinding") => {
            policy::ADMISSION_POLICY_BINDING.to_vec()
        }
        ("apiregistration.k8s.io", "APIService") => policy::API_SERVICE.to_vec(),
        ("node.k8s.io", "RuntimeClass") => policy::RUNTIME_CLASS.to_vec(),
        ("storage.k8s.io", "CSINode") => policy::CSI_NODE.to_vec(),
        _ => DEFAULT_COLUMNS.to_vec(),
    };
    defs.into_iter().map(ColumnDef::to_json).collect()
}

/// One row's cells for the object (same order as columns, except where kube's own printer
/// adds a cell it declares no column for: IPAddress). `now` for AGE-like cells.
pub fn cells(group: &str, kind: &str, obj: &Value, now: OffsetDateTime) -> Vec<Value> {
    match (group, kind) {
        ("", "Pod") => pods::cells(obj, now),
        ("", "Service") => kinds::service(obj, now),
        ("", "Node") => kinds::node(obj, now),
        ("", "Namespace") => kinds::namespace(obj, now),
        ("", "ConfigMap") => kinds::config_map(obj, now),
        ("", "Secret") => kinds::secret(obj, now),
        ("", "ServiceAccount") => policy::service_account(obj, now),
        ("", "Event") => kinds::event(obj, now),
        ("events.k8s.io", "Event") => kinds::event(&kinds::events_v1_as_core(obj), now),
        ("", "PersistentVolumeClaim") => storage::pvc(obj, now),
        ("", "PersistentVolume") => storage::persistent_volume(obj, now),
        ("", "Endpoints") => network::endpoints(obj, now),
        ("", "ResourceQuota") => control::resource_quota(obj, now),
        ("", "ComponentStatus") => control::component_status(obj),
        ("", "ReplicationController") => workloads::replication_controller(obj, now),
        ("", "PodTemplate") => workloads::pod_template(obj),
        ("apps", "Deployment") => workloads::deployment(obj, now),
        ("apps", "ReplicaSet") => workloads::replica_set(obj, now),
        ("apps", "StatefulSet") => workloads::stateful_set(obj, now),
        ("apps", "DaemonSet") => workloads::daemon_set(obj, now),
        ("apps", "ControllerRevision") => control::controller_revision(obj, now),
        ("autoscaling", "HorizontalPodAutoscaler") => control::horizontal_pod_autoscaler(obj, now),
        ("certificates.k8s.io", "CertificateSigningRequest") => control::certificate_signing_request(obj, now),
        ("certificates.k8s.io", "ClusterTrustBundle") => control::cluster_trust_bundle(obj),
        (FLOW_CONTROL, "FlowSchema") => control::flow_schema(obj, now),
        (FLOW_CONTROL, "PriorityLevelConfiguration") => control::priority_level_configuration(obj, now),
        ("discovery.k8s.io", "EndpointSlice") => network::endpoint_slice(obj, now),
        ("networking.k8s.io", "Ingress") => network::ingress(obj, now),
        ("networking.k8s.io", "ServiceCIDR") => network::service_cidr(obj, now),
        ("networking.k8s.io", "IPAddress") => network::ip_address(obj, now),
        ("storage.k8s.io", "VolumeAttachment") => storage::volume_attachment(obj, now),
        ("storage.k8s.io", "CSIDriver") => storage::csi_driver(obj, now),
        ("storage.k8s.io", "CSIStorageCapacity") => storage::csi_storage_capacity(obj),
        ("storage.k8s.io", "VolumeAttributesClass") => storage::volume_attributes_class(obj, now),
        ("batch", "Job") => workloads::job(obj, now),
        ("batch", "CronJob") => workloads::cron_job(obj, now),
        ("coordination.k8s.io", "Lease") => vec![name(obj), json!(str_at(obj, "/spec/holderIdentity")), age(obj, now)],
        ("rbac.authorization.k8s.io", "RoleBinding" | "ClusterRoleBinding") => kinds::role_binding(obj, now),
        ("storage.k8s.io", "StorageClass") => kinds::storage_class(obj, now),
        ("scheduling.k8s.io", "PriorityClass") => kinds::priority_class(obj, now),
        ("policy", "PodDisruptionBudget") => policy::pod_disruption_budget(obj, now),
        ("networking.k8s.io", "NetworkPolicy") => policy::network_policy(obj, now),
        ("networking.k8s.io", "IngressClass") => policy::ingress_class(obj, now),
        (ADMISSION, "ValidatingWebhookConfiguration" | "MutatingWebhookConfiguration") => {
            policy::webhook_configuration(obj, now)
        }
        (ADMISSION, "ValidatingAdmissionPolicy") => policy::admission_policy(obj, "validations", now),
        (ADMISSION, "MutatingAdmissionPolicy") => policy::admission_policy(obj, "mutations", now),
        (ADMISSION, "ValidatingAdmissionPolicyBinding" | "MutatingAdmissionPolicyBinding") => {
            policy::admission_policy_binding(obj, now)
        }
        ("apiregistration.k8s.io", "APIService") => policy::api_service(obj, now),
        ("node.k8s.io", "RuntimeClass") => policy::runtime_class(obj, now),
        ("storage.k8s.io", "CSINode") => policy::csi_node(obj, now),
        _ => {
            let created = obj
                .pointer("/metadata/creationTimestamp")
                .and_then(Value::as_str)
                .and_then(parse_rfc3339)
                .map(format_rfc3339)
                .unwrap_or_else(|| "0001-01-01T00:00:00Z".to_string());
            vec![name(obj), json!(created)]
        }
    }
}

/// How a kind's printer orders the rows of a list, for the kinds whose printer sorts them
/// (kube's FlowSchema printer); None keeps the list's order (by name, as stored).
pub fn row_order(group: &str, kind: &str) -> Option<fn(&Value, &Value) -> Ordering> {
    match (group, kind) {
        (FLOW_CONTROL, "FlowSchema") => Some(control::flow_schema_order),
        _ => None,
    }
}

/// One column definition, kept static so each kind's list is plain data.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ColumnDef {
    name: &'static str,
    kind: &'static str,
    format: &'static str,
    description: &'static str,
    priority: u8,
}

impl ColumnDef {
    fn to_json(self) -> Value {
        json!({
            "name": self.name,
            "type": self.kind,
            "format": self.format,
            "description": self.description,
            "priority": self.priority,
        })
    }
}

/// A column shown by default.
pub(crate) const fn col(name: &'static str, kind: &'static str, description: &'static str) -> ColumnDef {
    ColumnDef { name, kind, format: "", description, priority: 0 }
}

/// A column shown only with `-o wide`.
pub(crate) const fn wide(name: &'static str, kind: &'static str, description: &'static str) -> ColumnDef {
    ColumnDef { name, kind, format: "", description, priority: 1 }
}

/// `ObjectMeta.name`'s description, shared by every Name column.
pub(crate) const NAME_DESC: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";
/// `ObjectMeta.creationTimestamp`'s description, shared by every Age column.
pub(crate) const AGE_DESC: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";
pub(crate) const NAME: ColumnDef =
    ColumnDef { name: "Name", kind: "string", format: "name", description: NAME_DESC, priority: 0 };
pub(crate) const AGE: ColumnDef = col("Age", "string", AGE_DESC);

const DEFAULT_COLUMNS: &[ColumnDef] = &[NAME, col("Created At", "date", AGE_DESC)];

// ---- cell helpers --------------------------------------------------------------------------

pub(crate) fn str_at<'a>(obj: &'a Value, pointer: &str) -> &'a str {
    obj.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

pub(crate) fn int_at(obj: &Value, pointer: &str) -> i64 {
    obj.pointer(pointer).and_then(Value::as_i64).unwrap_or(0)
}

pub(crate) fn name(obj: &Value) -> Value {
    json!(str_at(obj, "/metadata/name"))
}

pub(crate) fn age(obj: &Value, now: OffsetDateTime) -> Value {
    json!(since(obj.pointer("/metadata/creationTimestamp"), now))
}

/// kube's `translateTimestampSince`: `<unknown>` for a missing time, else a human duration.
pub(crate) fn since(ts: Option<&Value>, now: OffsetDateTime) -> String {
    match ts.and_then(Value::as_str).and_then(parse_rfc3339) {
        Some(t) => duration_between(t, now),
        None => "<unknown>".to_string(),
    }
}

/// `duration.HumanDuration(later - earlier)`, with kube's `<invalid>` for clearly negative spans.
pub(crate) fn duration_between(earlier: OffsetDateTime, later: OffsetDateTime) -> String {
    let secs = (later - earlier).whole_seconds();
    if secs < -1 {
        return "<invalid>".to_string();
    }
    human_duration(Duration::from_secs(u64::try_from(secs).unwrap_or(0)))
}

/// `labels.FormatLabels`: sorted `k=v` pairs, `<none>` when empty.
pub(crate) fn format_labels(map: Option<&Value>) -> String {
    let Some(map) = map.and_then(Value::as_object).filter(|m| !m.is_empty()) else {
        return "<none>".to_string();
    };
    let mut pairs: Vec<String> = map.iter().map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or(""))).collect();
    pairs.sort();
    pairs.join(",")
}

/// The string form of a `metav1.LabelSelector` (`""` for a missing or empty one).
pub(crate) fn selector_string(sel: Option<&Value>) -> String {
    match sel.filter(|s| !s.is_null()) {
        None => String::new(),
        Some(s) => LabelSelector::from_json(s).map(|s| s.to_string()).unwrap_or_else(|_| "<error>".to_string()),
    }
}

/// `layoutContainerCells`: container names and images, comma-separated.
pub(crate) fn container_cells(pod_spec: Option<&Value>) -> (Value, Value) {
    let containers =
        pod_spec.and_then(|s| s.get("containers")).and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[]);
    let names: Vec<&str> = containers.iter().map(|c| str_at(c, "/name")).collect();
    let images: Vec<&str> = containers.iter().map(|c| str_at(c, "/image")).collect();
    (json!(names.join(",")), json!(images.join(",")))
}

/// The array at `pointer`, empty when absent.
pub(crate) fn array_at<'a>(obj: &'a Value, pointer: &str) -> &'a [Value] {
    obj.pointer(pointer).and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[])
}

/// `<unset>` for an empty string.
pub(crate) fn or_unset(s: &str) -> String {
    if s.is_empty() { "<unset>".to_string() } else { s.to_string() }
}

/// The first `max` items, comma-joined, then ` + N more...` for the rest (kube's
/// `formatEndpoints` and `listWithMoreString`).
pub(crate) fn first_of(mut items: Vec<String>, max: usize) -> String {
    let count = items.len();
    items.truncate(max);
    match count.saturating_sub(max) {
        0 => items.join(","),
        more => format!("{} + {more} more...", items.join(",")),
    }
}

/// `listWithMoreString`: [`first_of`], `<unset>` for none.
pub(crate) fn list_with_more(items: Vec<String>, max: usize) -> String {
    if items.is_empty() { "<unset>".to_string() } else { first_of(items, max) }
}

pub(crate) fn len_of(obj: &Value, key: &str) -> usize {
    obj.get(key).map_or(0, |v| match v {
        Value::Object(m) => m.len(),
        Value::Array(a) => a.len(),
        _ => 0,
    })
}

pub(crate) fn object_keys<'a>(obj: &'a Value, key: &str) -> impl Iterator<Item = &'a String> {
    obj.get(key).and_then(Value::as_object).into_iter().flat_map(Map::keys)
}

#[cfg(test)]
mod tests;
