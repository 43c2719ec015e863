use prost::Message as _;
use serde_json::{json, Value};

use super::*;

fn codec() -> &'static Codec {
    Codec::global()
}

fn round_trip(obj: Value) -> Bytes {
    let bytes = codec().encode(&obj).unwrap_or_else(|e| panic!("encode {}: {e}", obj["kind"]));
    assert!(bytes.starts_with(MAGIC));
    let back = codec().decode(&bytes).unwrap_or_else(|e| panic!("decode {}: {e}", obj["kind"]));
    assert_eq!(back, obj, "round trip of {}", obj["kind"]);
    bytes
}

/// The message bytes inside the envelope, for decoding with k8s-pb's prost types.
fn raw(bytes: &[u8]) -> Vec<u8> {
    let (_, _, raw) = unknown(&bytes[MAGIC.len()..]).expect("envelope");
    raw.to_vec()
}

fn pod() -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web", "namespace": "default", "uid": "6f0b8e3c-1d6a-4f0e-9d59-1a2b3c4d5e6f",
                     "resourceVersion": "42", "generation": 1, "creationTimestamp": "2026-11-23T05:00:00Z",
                     "labels": {"app": "web"}, "annotations": {"note": ""},
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-1", "uid": "u1", "controller": true}],
                     "managedFields": [{"manager": "kubectl", "operation": "Update", "apiVersion": "v1",
                                        "time": "2026-11-23T05:00:00Z", "fieldsType": "FieldsV1",
                                        "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:app": {}}}}}]},
        "spec": {
            "containers": [{
                "name": "web", "image": "nginx:1.25",
                "ports": [{"containerPort": 80, "protocol": "TCP"}, {"containerPort": 0, "name": "zero"}],
                "env": [{"name": "A", "value": "1"}, {"name": "B", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
                "resources": {"limits": {"cpu": "500m", "memory": "128Mi"}, "requests": {"cpu": "100m"}},
                "livenessProbe": {"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 10},
                "readinessProbe": {"tcpSocket": {"port": "http"}},
                "securityContext": {"runAsUser": 0, "allowPrivilegeEscalation": false},
                "volumeMounts": [{"name": "cfg", "mountPath": "/etc/cfg", "readOnly": true}]
            }],
            "volumes": [{"name": "cfg", "configMap": {"name": "web-config", "defaultMode": 420}}],
            "restartPolicy": "Always", "terminationGracePeriodSeconds": 0, "automountServiceAccountToken": false,
            "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 300}]
        },
        "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-11-23T05:00:01Z"}]}
    })
}

#[test]
fn pod_round_trips_and_prost_agrees() {
    let bytes = round_trip(pod());
    let decoded = k8s_pb::api::core::v1::Pod::decode(raw(&bytes).as_slice()).expect("prost decodes our Pod");
    let meta = decoded.metadata.expect("metadata");
    assert_eq!(meta.name.as_deref(), Some("web"));
    assert_eq!(meta.labels.get("app").map(String::as_str), Some("web"));
    assert_eq!(meta.creation_timestamp.and_then(|t| t.seconds), Some(1_795_410_000));
    let spec = decoded.spec.expect("spec");
    let c = &spec.containers[0];
    assert_eq!(c.ports[0].container_port, Some(80));
    assert_eq!(c.resources.as_ref().and_then(|r| r.limits.get("memory")).and_then(|q| q.string.as_deref()), Some("128Mi"));
    let probe = c.liveness_probe.as_ref().expect("probe");
    let port = probe.handler.as_ref().and_then(|h| h.http_get.as_ref()).and_then(|g| g.port.as_ref()).expect("port");
    assert_eq!((port.r#type, port.int_val), (Some(0), Some(8080)));
    let named = c.readiness_probe.as_ref().and_then(|p| p.handler.as_ref()).and_then(|h| h.tcp_socket.as_ref()).and_then(|t| t.port.as_ref()).expect("named port");
    assert_eq!((named.r#type, named.str_val.as_deref()), (Some(1), Some("http")));
    assert_eq!(spec.termination_grace_period_seconds, Some(0), "explicit zero kept");
    assert_eq!(spec.automount_service_account_token, Some(false), "explicit false kept");
    assert_eq!(spec.volumes[0].volume_source.as_ref().and_then(|s| s.config_map.as_ref()).and_then(|c| c.default_mode), Some(420));
}

#[test]
fn go_style_zero_values_are_dropped_like_kube_json() {
    // What a Go client writes for an unset string and an unset Time.
    let msg = k8s_pb::api::core::v1::ConfigMap {
        metadata: Some(k8s_pb::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some("c".into()),
            namespace: Some(String::new()),
            resource_version: Some(String::new()),
            creation_timestamp: Some(k8s_pb::apimachinery::pkg::apis::meta::v1::Time { seconds: None, nanos: None }),
            ..Default::default()
        }),
        data: [("k".to_owned(), String::new())].into_iter().collect(),
        immutable: Some(false),
        ..Default::default()
    };
    let bytes = envelope("v1", "ConfigMap", &msg.encode_to_vec());
    let obj = codec().decode(&bytes).expect("decode");
    assert_eq!(
        obj,
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": ""}, "immutable": false})
    );
}

#[test]
fn workloads_services_and_secrets_round_trip() {
    round_trip(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]},
                 "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 0}},
                 "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}},
                 "progressDeadlineSeconds": 600},
        "status": {}
    }));
    round_trip(json!({
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
        "spec": {"ports": [{"port": 80, "targetPort": 8080}, {"name": "h", "port": 81, "targetPort": "http"}],
                 "clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10"], "ipFamilies": ["IPv4"], "type": "ClusterIP"}
    }));
    let secret = round_trip(json!({
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "type": "Opaque",
        "data": {"bin": "AAEC/w==", "text": "aGk="}
    }));
    let decoded = k8s_pb::api::core::v1::Secret::decode(raw(&secret).as_slice()).expect("prost");
    assert_eq!(decoded.data.get("bin").map(Vec::as_slice), Some(&[0u8, 1, 2, 255][..]));
    round_trip(json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l"},
        "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15, "renewTime": "2026-11-23T05:00:00.123456Z"}
    }));
    round_trip(json!({
        "apiVersion": "apps/v1", "kind": "ControllerRevision", "metadata": {"name": "r"},
        "data": {"spec": {"template": {"spec": {"containers": [{"name": "c"}]}}}}, "revision": 3
    }));
    round_trip(json!({
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema", "metadata": {"name": "f"},
        "spec": {"priorityLevelConfiguration": {"name": "p"}, "matchingPrecedence": 100}
    }));
}

#[test]
fn custom_resource_definitions_round_trip() {
    round_trip(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"plural": "widgets", "kind": "Widget", "shortNames": ["wd"]},
                 "versions": [{"name": "v1", "served": true, "storage": true,
                     "subresources": {"status": {}},
                     "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                         "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                                  "properties": {"size": {"type": "integer", "default": 3, "minimum": 1, "maximum": 2.5},
                                                 "tags": {"type": "array", "items": {"type": "string"}},
                                                 "mode": {"type": "string", "enum": ["a", "b"]}},
                                  "additionalProperties": false, "required": ["size"]},
                         "status": {"type": "object", "additionalProperties": {"type": "string"}}}}}}]}
    }));
}

#[test]
fn lists_status_and_partial_metadata() {
    round_trip(json!({
        "apiVersion": "v1", "kind": "PodList", "metadata": {"resourceVersion": "9", "continue": "abc", "remainingItemCount": 3},
        "items": [{"metadata": {"name": "a"}}, {"metadata": {"name": "b"}, "spec": {"containers": [{"name": "c"}]}}]
    }));
    round_trip(json!({
        "apiVersion": "v1", "kind": "Status", "metadata": {}, "status": "Failure",
        "message": "pods \"x\" not found", "reason": "NotFound",
        "details": {"name": "x", "kind": "pods", "causes": [{"reason": "FieldValueInvalid", "field": "spec"}]}, "code": 404
    }));
    round_trip(json!({
        "apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadataList", "metadata": {"resourceVersion": "5"},
        "items": [{"metadata": {"name": "a", "namespace": "n", "resourceVersion": "4"}}]
    }));
    assert!(codec().supports("apps/v1", "StatefulSet"));
    assert!(codec().supports("autoscaling/v1", "Scale"));
    assert!(codec().supports("apps/v1", "DeleteOptions"));
    assert!(!codec().supports("example.com/v1", "Widget"));
    assert!(matches!(codec().encode(&json!({"apiVersion": "example.com/v1", "kind": "Widget"})), Err(ProtobufError::UnknownKind { .. })));
}

#[test]
fn hand_written_wire_bytes_decode() {
    // ConfigMap{metadata{name "x"} (1), data {"k": "v"} (2)} written byte by byte.
    let mut raw = vec![0x0a, 0x03, 0x0a, 0x01, b'x'];
    raw.extend([0x12, 0x06, 0x0a, 0x01, b'k', 0x12, 0x01, b'v']);
    let obj = codec().decode(&envelope("v1", "ConfigMap", &raw)).expect("decode");
    assert_eq!(obj, json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"k": "v"}}));
    // An unknown field number (99, varint) is skipped, as protobuf requires.
    let mut with_unknown = raw.clone();
    with_unknown.extend([0x98, 0x06, 0x01]);
    assert_eq!(codec().decode(&envelope("v1", "ConfigMap", &with_unknown)).expect("decode"), obj);
}

#[test]
fn watch_frames_nest_the_enveloped_object() {
    let obj = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}});
    let encoded = codec().encode(&obj).expect("encode");
    let frame = codec().watch_frame("ADDED", &encoded);
    let len = u32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]) as usize;
    assert_eq!(len, frame.len() - 4);
    assert!(!frame[4..].starts_with(MAGIC), "stream frames carry the raw WatchEvent");
    let event = codec().decode_watch_event(&frame[4..]).expect("decode the WatchEvent");
    assert_eq!(event["type"], "ADDED");
    assert_eq!(event["object"], obj, "RawExtension carrying an enveloped object decodes to it");
    let prost_event = k8s_pb::apimachinery::pkg::apis::meta::v1::WatchEvent::decode(&frame[4..]).expect("prost");
    assert_eq!(prost_event.r#type.as_deref(), Some("ADDED"));
    assert_eq!(prost_event.object.and_then(|o| o.raw).as_deref(), Some(&encoded[..]));
}

#[test]
fn garbage_and_truncations_fail_cleanly() {
    let bytes = codec().encode(&pod()).expect("encode");
    for len in 0..bytes.len() {
        // Every prefix either decodes (a shorter valid message) or fails; none panics.
        let _ = codec().decode(&bytes[..len]);
    }
    assert!(matches!(codec().decode(b"{\"kind\":\"Pod\"}"), Err(ProtobufError::BadMagic)));
    assert!(codec().decode(b"k8s\0\x0a\xff\xff garbage").is_err());
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    for _ in 0..2000 {
        let mut junk = MAGIC.to_vec();
        for _ in 0..(seed % 64) {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            junk.push(seed as u8);
        }
        let _ = codec().decode(&junk);
    }
    let wrong_type = codec().encode(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": 5}}));
    assert!(matches!(wrong_type, Err(ProtobufError::Value { ref field, .. }) if field == "metadata.name"), "{wrong_type:?}");
}

/// Found by the protobuf_object fuzz target: a NaN double decoded to `null`, which encoded
/// back without the field, so the stored object was not the one sent.
#[test]
fn non_finite_doubles_are_refused() {
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "a.b.c"},
        "spec": {"group": "b.c", "scope": "Namespaced", "names": {"plural": "a", "kind": "A"},
                 "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "number", "minimum": 0.5}}}]}});
    let bytes = codec().encode(&crd).expect("encode");
    let half = 0.5f64.to_le_bytes();
    let at = bytes.windows(8).position(|w| w == half).expect("the double is on the wire");
    for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
        let mut wire = bytes.to_vec();
        wire[at..at + 8].copy_from_slice(&bad.to_le_bytes());
        let err = codec().decode(&wire).expect_err("a non-finite double");
        assert!(matches!(err, ProtobufError::Value { ref message, .. } if message.starts_with("json: unsupported value: ")), "{err}");
    }
}

#[test]
fn generated_schema_is_fresh() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = std::process::Command::new("python3")
        .arg(root.join("scripts/gen-protobuf-schema.py"))
        .arg("--check")
        .output()
        .expect("python3 runs the schema generator");
    assert!(out.status.success(), "{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
}

#[test]
fn user_extras_are_lists_in_json_and_wrapped_lists_on_the_wire() {
    let review = json!({
        "apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview",
        "metadata": {"creationTimestamp": "2026-11-23T05:00:00Z"},
        "status": {"userInfo": {"username": "system:serviceaccount:default:robot", "uid": "u1",
            "groups": ["system:serviceaccounts"],
            "extra": {"authentication.kubernetes.io/pod-name": ["web"], "scopes": ["a", "b"]}}}
    });
    let bytes = round_trip(review);
    let decoded = k8s_pb::api::authentication::v1::SelfSubjectReview::decode(&raw(&bytes)[..]).expect("prost decodes it");
    let extra = decoded.status.and_then(|s| s.user_info).map(|u| u.extra).unwrap_or_default();
    assert_eq!(extra["scopes"].items, vec!["a".to_owned(), "b".to_owned()]);
}
