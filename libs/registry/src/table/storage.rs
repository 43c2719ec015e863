//! Printers for the storage kinds: persistent volumes and their claims, volume attachments, CSI drivers, CSI
//! storage capacities and volume attributes classes (kube's `printers.go`).

use serde_json::{json, Value};
use time::OffsetDateTime;

use super::{age, array_at, col, name, or_unset, str_at, wide, ColumnDef, AGE, NAME};

pub(super) const PVC: &[ColumnDef] = &[
    NAME,
    col("Status", "string", "phase represents the current phase of PersistentVolumeClaim."),
    col("Volume", "string", "volumeName is the binding reference to the PersistentVolume backing this claim."),
    col("Capacity", "string", "capacity represents the actual resources of the underlying volume."),
    col("Access Modes", "string", "accessModes contains the actual access modes the volume backing the PVC has. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#access-modes-1"),
    col("StorageClass", "string", "StorageClass of the pvc"),
    col("VolumeAttributesClass", "string", "VolumeAttributesClass of the pvc"),
    AGE,
    wide("VolumeMode", "string", "volumeMode defines what type of volume is required by the claim. Value of Filesystem is implied when not included in claim spec."),
];

pub(super) const PERSISTENT_VOLUME: &[ColumnDef] = &[
    NAME,
    col("Capacity", "string", "capacity is the description of the persistent volume's resources and capacity. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#capacity"),
    col("Access Modes", "string", "accessModes contains all ways the volume can be mounted. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#access-modes"),
    col("Reclaim Policy", "string", "persistentVolumeReclaimPolicy defines what happens to a persistent volume when released from its claim. Valid options are Retain (default for manually created PersistentVolumes), Delete (default for dynamically provisioned PersistentVolumes), and Recycle (deprecated). Recycle must be supported by the volume plugin underlying this PersistentVolume. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#reclaiming"),
    col("Status", "string", "phase indicates if a volume is available, bound to a claim, or released by a claim. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#phase"),
    col("Claim", "string", "claimRef is part of a bi-directional binding between PersistentVolume and PersistentVolumeClaim. Expected to be non-nil when bound. claim.VolumeName is the authoritative bind between PV and PVC. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#binding"),
    col("StorageClass", "string", "StorageClass of the pv"),
    col("VolumeAttributesClass", "string", "VolumeAttributesClass of the pv"),
    col("Reason", "string", "reason is a brief CamelCase string that describes any failure and is meant for machine parsing and tidy display in the CLI."),
    AGE,
    wide("VolumeMode", "string", "volumeMode defines if a volume is intended to be used with a formatted filesystem or to remain in raw block state. Value of Filesystem is implied when not included in spec."),
];

/// kube formats the Attacher column as a name.
pub(super) const VOLUME_ATTACHMENT: &[ColumnDef] = &[
    NAME,
    ColumnDef { format: "name", ..col("Attacher", "string", "attacher indicates the name of the volume driver that MUST handle this request. This is the name returned by GetPluginName().") },
    col("PV", "string", "persistentVolumeName represents the name of the persistent volume to attach."),
    col("Node", "string", "nodeName represents the node that the volume should be attached to."),
    col("Attached", "boolean", "attached indicates the volume is successfully attached. This field must only be set by the entity completing the attach operation, i.e. the external-attacher."),
    AGE,
];

pub(super) const CSI_DRIVER: &[ColumnDef] = &[
    NAME,
    col("AttachRequired", "boolean", "attachRequired indicates this CSI volume driver requires an attach operation (because it implements the CSI ControllerPublishVolume() method), and that the Kubernetes attach detach controller should call the attach volume interface which checks the volumeattachment status and waits until the volume is attached before proceeding to mounting. The CSI external-attacher coordinates with CSI volume driver and updates the volumeattachment status when the attach operation is complete. If the value is specified to false, the attach operation will be skipped. Otherwise the attach operation will be called.\n\nThis field is immutable."),
    col("PodInfoOnMount", "boolean", "podInfoOnMount indicates this CSI volume driver requires additional pod information (like podName, podUID, etc.) during mount operations, if set to true. If set to false, pod information will not be passed on mount. Default is false.\n\nThe CSI driver specifies podInfoOnMount as part of driver deployment. If true, Kubelet will pass pod information as VolumeContext in the CSI NodePublishVolume() calls. The CSI driver is responsible for parsing and validating the information passed in as VolumeContext.\n\nThe following VolumeContext will be passed if podInfoOnMount is set to true. This list might grow, but the prefix will be used. \"csi.storage.k8s.io/pod.name\": pod.Name \"csi.storage.k8s.io/pod.namespace\": pod.Namespace \"csi.storage.k8s.io/pod.uid\": string(pod.UID) \"csi.storage.k8s.io/ephemeral\": \"true\" if the volume is an ephemeral inline volume\n                                defined by a CSIVolumeSource, otherwise \"false\"\n\n\"csi.storage.k8s.io/ephemeral\" is a new feature in Kubernetes 1.16. It is only required for drivers which support both the \"Persistent\" and \"Ephemeral\" VolumeLifecycleMode. Other drivers can leave pod info disabled and/or ignore this field. As Kubernetes 1.15 doesn't support this field, drivers can only support one mode when deployed on such a cluster and the deployment determines which mode that is, for example via a command line parameter of the driver.\n\nThis field was immutable in Kubernetes < 1.29 and now is mutable."),
    col("StorageCapacity", "boolean", "storageCapacity indicates that the CSI volume driver wants pod scheduling to consider the storage capacity that the driver deployment will report by creating CSIStorageCapacity objects with capacity information, if set to true.\n\nThe check can be enabled immediately when deploying a driver. In that case, provisioning new volumes with late binding will pause until the driver deployment has published some suitable CSIStorageCapacity object.\n\nAlternatively, the driver can be deployed with the field unset or false and it can be flipped later when storage capacity information has been published.\n\nThis field was immutable in Kubernetes <= 1.22 and now is mutable."),
    col("TokenRequests", "string", "tokenRequests indicates the CSI driver needs pods' service account tokens it is mounting volume for to do necessary authentication. Kubelet will pass the tokens in VolumeContext in the CSI NodePublishVolume calls. The CSI driver should parse and validate the following VolumeContext: \"csi.storage.k8s.io/serviceAccount.tokens\": {\n  \"<audience>\": {\n    \"token\": <token>,\n    \"expirationTimestamp\": <expiration timestamp in RFC3339>,\n  },\n  ...\n}\n\nNote: Audience in each TokenRequest should be different and at most one token is empty string. To receive a new token after expiry, RequiresRepublish can be used to trigger NodePublishVolume periodically."),
    col("RequiresRepublish", "boolean", "requiresRepublish indicates the CSI driver wants `NodePublishVolume` being periodically called to reflect any possible change in the mounted volume. This field defaults to false.\n\nNote: After a successful initial NodePublishVolume call, subsequent calls to NodePublishVolume should only update the contents of the volume. New mount points will not be seen by a running container."),
    col("Modes", "string", "volumeLifecycleModes defines what kind of volumes this CSI volume driver supports. The default if the list is empty is \"Persistent\", which is the usage defined by the CSI specification and implemented in Kubernetes via the usual PV/PVC mechanism.\n\nThe other mode is \"Ephemeral\". In this mode, volumes are defined inline inside the pod spec with CSIVolumeSource and their lifecycle is tied to the lifecycle of that pod. A driver has to be aware of this because it is only going to get a NodePublishVolume call for such a volume.\n\nFor more information about implementing this mode, see https://kubernetes-csi.github.io/docs/ephemeral-local-volumes.html A driver can support one or more of these modes and more modes may be added in the future.\n\nThis field is beta. This field is immutable."),
    AGE,
];

/// kube prints no age for storage capacities.
pub(super) const CSI_STORAGE_CAPACITY: &[ColumnDef] = &[
    NAME,
    col("StorageClassName", "string", "storageClassName represents the name of the StorageClass that the reported capacity applies to. It must meet the same requirements as the name of a StorageClass object (non-empty, DNS subdomain). If that object no longer exists, the CSIStorageCapacity object is obsolete and should be removed by its creator. This field is immutable."),
    col("Capacity", "string", "capacity is the value reported by the CSI driver in its GetCapacityResponse for a GetCapacityRequest with topology and parameters that match the previous fields.\n\nThe semantic is currently (CSI spec 1.2) defined as: The available capacity, in bytes, of the storage that can be used to provision volumes. If not set, that information is currently unavailable."),
];

pub(super) const VOLUME_ATTRIBUTES_CLASS: &[ColumnDef] =
    &[NAME, col("DriverName", "string", "Name of the CSI driver This field is immutable."), AGE];

/// `helper.GetAccessModesAsString`: the short names of the modes present, in kube's order.
pub(super) fn access_modes(obj: &Value, pointer: &str) -> String {
    let modes: Vec<&str> = array_at(obj, pointer).iter().filter_map(Value::as_str).collect();
    [("ReadWriteOnce", "RWO"), ("ReadOnlyMany", "ROX"), ("ReadWriteMany", "RWX"), ("ReadWriteOncePod", "RWOP")]
        .into_iter()
        .filter(|(mode, _)| modes.contains(mode))
        .map(|(_, short)| short)
        .collect::<Vec<_>>()
        .join(",")
}

/// `helper.GetPersistentVolumeClass` / `GetPersistentVolumeClaimClass`: the beta annotation
/// wins over `spec.storageClassName`.
pub(super) fn storage_class_of(obj: &Value) -> &str {
    match str_at(obj, "/metadata/annotations/volume.beta.kubernetes.io~1storage-class") {
        "" => str_at(obj, "/spec/storageClassName"),
        class => class,
    }
}

/// A `resource.Quantity`'s `String()`: stored quantities are canonical already; a missing one
/// is the zero quantity, `0`.
pub(super) fn quantity(obj: &Value, pointer: &str) -> String {
    obj.pointer(pointer).and_then(Value::as_str).unwrap_or("0").to_string()
}

fn deleting(obj: &Value) -> bool {
    obj.pointer("/metadata/deletionTimestamp").is_some_and(|d| !d.is_null())
}

/// `printPersistentVolume`: the claim as `namespace/name`, `Terminating` while deleted.
pub(super) fn persistent_volume(pv: &Value, now: OffsetDateTime) -> Vec<Value> {
    let claim = match pv.pointer("/spec/claimRef").filter(|c| c.is_object()) {
        Some(c) => format!("{}/{}", str_at(c, "/namespace"), str_at(c, "/name")),
        None => String::new(),
    };
    let phase = if deleting(pv) { "Terminating" } else { str_at(pv, "/status/phase") };
    vec![
        name(pv),
        json!(quantity(pv, "/spec/capacity/storage")),
        json!(access_modes(pv, "/spec/accessModes")),
        json!(str_at(pv, "/spec/persistentVolumeReclaimPolicy")),
        json!(phase),
        json!(claim),
        json!(storage_class_of(pv)),
        json!(or_unset(str_at(pv, "/spec/volumeAttributesClassName"))),
        json!(str_at(pv, "/status/reason")),
        age(pv, now),
        json!(or_unset(str_at(pv, "/spec/volumeMode"))),
    ]
}

/// `printPersistentVolumeClaim`: capacity and access modes only once bound to a volume.
pub(super) fn pvc(pvc: &Value, now: OffsetDateTime) -> Vec<Value> {
    let phase = if deleting(pvc) { "Terminating" } else { str_at(pvc, "/status/phase") };
    let volume = str_at(pvc, "/spec/volumeName");
    let (capacity, modes) = if volume.is_empty() {
        (String::new(), String::new())
    } else {
        (quantity(pvc, "/status/capacity/storage"), access_modes(pvc, "/status/accessModes"))
    };
    vec![
        name(pvc),
        json!(phase),
        json!(volume),
        json!(capacity),
        json!(modes),
        json!(storage_class_of(pvc)),
        json!(or_unset(str_at(pvc, "/spec/volumeAttributesClassName"))),
        age(pvc, now),
        json!(or_unset(str_at(pvc, "/spec/volumeMode"))),
    ]
}

pub(super) fn volume_attachment(va: &Value, now: OffsetDateTime) -> Vec<Value> {
    vec![
        name(va),
        json!(str_at(va, "/spec/attacher")),
        json!(str_at(va, "/spec/source/persistentVolumeName")),
        json!(str_at(va, "/spec/nodeName")),
        json!(va.pointer("/status/attached").and_then(Value::as_bool).unwrap_or(false)),
        age(va, now),
    ]
}

/// `printCSIDriver`: the spec's defaults for unset flags (attach required, the others off),
/// token audiences (`<unset>` without the list), lifecycle modes (`<none>`).
pub(super) fn csi_driver(d: &Value, now: OffsetDateTime) -> Vec<Value> {
    let flag = |key: &str, default: bool| d.pointer(&format!("/spec/{key}")).and_then(Value::as_bool).unwrap_or(default);
    let tokens = match d.pointer("/spec/tokenRequests").and_then(Value::as_array) {
        Some(requests) => requests.iter().map(|t| str_at(t, "/audience")).collect::<Vec<_>>().join(","),
        None => "<unset>".to_string(),
    };
    let modes: Vec<&str> = array_at(d, "/spec/volumeLifecycleModes").iter().filter_map(Value::as_str).collect();
    let modes = if modes.is_empty() { "<none>".to_string() } else { modes.join(",") };
    vec![
        name(d),
        json!(flag("attachRequired", true)),
        json!(flag("podInfoOnMount", false)),
        json!(flag("storageCapacity", false)),
        json!(tokens),
        json!(flag("requiresRepublish", false)),
        json!(modes),
        age(d, now),
    ]
}

pub(super) fn csi_storage_capacity(c: &Value) -> Vec<Value> {
    let capacity = c.get("capacity").and_then(Value::as_str).unwrap_or("<unset>");
    vec![name(c), json!(str_at(c, "/storageClassName")), json!(capacity)]
}

/// `printVolumeAttributesClass`: the default class (alpha annotation) is marked in its name.
pub(super) fn volume_attributes_class(vac: &Value, now: OffsetDateTime) -> Vec<Value> {
    let mut n = str_at(vac, "/metadata/name").to_string();
    if str_at(vac, "/metadata/annotations/volumeattributesclass.alpha.kubernetes.io~1is-default-class") == "true" {
        n.push_str(" (default)");
    }
    vec![json!(n), json!(str_at(vac, "/driverName")), age(vac, now)]
}
