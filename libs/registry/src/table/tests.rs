use serde_json::{json, Value};
use time::macros::datetime;

use super::*;

const NOW: OffsetDateTime = datetime!(2024-05-01 12:00:00 UTC);

fn names(cols: &[Value]) -> Vec<(&str, u64)> {
    cols.iter().map(|c| (c["name"].as_str().unwrap_or(""), c["priority"].as_u64().unwrap_or(9))).collect()
}

#[test]
fn pod_columns() {
    let cols = columns("", "Pod");
    assert_eq!(
        names(&cols),
        vec![
            ("Name", 0),
            ("Ready", 0),
            ("Status", 0),
            ("Restarts", 0),
            ("Age", 0),
            ("IP", 1),
            ("Node", 1),
            ("Nominated Node", 1),
            ("Readiness Gates", 1)
        ]
    );
    assert_eq!(cols[0]["format"], "name");
    assert_eq!(cols[3]["type"], "string");
}

#[test]
fn running_pod_row() {
    let pod = json!({
        "metadata": {"name": "web-1", "creationTimestamp": "2024-05-01T11:00:00Z"},
        "spec": {"nodeName": "node-a", "containers": [{"name": "a"}, {"name": "b"}]},
        "status": {
            "phase": "Running",
            "podIP": "10.1.0.7", "podIPs": [{"ip": "10.1.0.7"}],
            "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [
                {"name": "a", "ready": true, "restartCount": 2, "state": {"running": {"startedAt": "2024-05-01T11:50:00Z"}},
                 "lastState": {"terminated": {"exitCode": 1, "finishedAt": "2024-05-01T11:55:00Z"}}},
                {"name": "b", "ready": true, "restartCount": 0, "state": {"running": {}}}
            ]
        }
    });
    assert_eq!(
        cells("", "Pod", &pod, NOW),
        vec![
            json!("web-1"),
            json!("2/2"),
            json!("Running"),
            json!("2 (5m ago)"),
            json!("60m"),
            json!("10.1.0.7"),
            json!("node-a"),
            json!("<none>"),
            json!("<none>")
        ]
    );
}

#[test]
fn pod_status_reasons() {
    let waiting = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "a"}]}, "status": {"phase": "Pending",
        "containerStatuses": [{"name": "a", "ready": false, "restartCount": 0, "state": {"waiting": {"reason": "ImagePullBackOff"}}}]}});
    let row = cells("", "Pod", &waiting, NOW);
    assert_eq!(row[1], "0/1");
    assert_eq!(row[2], "ImagePullBackOff");
    assert_eq!(row[3], "0");
    assert_eq!(row[4], "<unknown>");

    let init = json!({"metadata": {"name": "p"}, "spec": {"initContainers": [{"name": "i1"}, {"name": "i2"}], "containers": [{"name": "a"}]},
        "status": {"phase": "Pending", "initContainerStatuses": [
            {"name": "i1", "state": {"terminated": {"exitCode": 0}}},
            {"name": "i2", "state": {"running": {}}}]}});
    assert_eq!(cells("", "Pod", &init, NOW)[2], "Init:1/2");

    let crashed = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "a"}]}, "status": {"phase": "Running",
        "containerStatuses": [{"name": "a", "state": {"terminated": {"exitCode": 137, "signal": 0}}}]}});
    assert_eq!(cells("", "Pod", &crashed, NOW)[2], "ExitCode:137");

    let deleting = json!({"metadata": {"name": "p", "deletionTimestamp": "2024-05-01T11:59:00Z"},
        "spec": {"containers": [{"name": "a"}]}, "status": {"phase": "Running"}});
    assert_eq!(cells("", "Pod", &deleting, NOW)[2], "Terminating");

    let gated = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "a"}]}, "status": {"phase": "Pending",
        "conditions": [{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]}});
    assert_eq!(cells("", "Pod", &gated, NOW)[2], "SchedulingGated");
}

#[test]
fn deployment_row() {
    let d = json!({
        "metadata": {"name": "web", "creationTimestamp": "2024-04-29T12:00:00Z"},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
            "template": {"spec": {"containers": [{"name": "nginx", "image": "nginx:1.25"}, {"name": "side", "image": "busybox"}]}}},
        "status": {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2}
    });
    assert_eq!(
        cells("apps", "Deployment", &d, NOW),
        vec![
            json!("web"),
            json!("2/3"),
            json!(3),
            json!(2),
            json!("2d"),
            json!("nginx,side"),
            json!("nginx:1.25,busybox"),
            json!("app=web")
        ]
    );
    assert_eq!(columns("apps", "Deployment").len(), 8);
}

#[test]
fn service_rows() {
    let svc = json!({
        "metadata": {"name": "web", "creationTimestamp": "2024-05-01T11:59:30Z"},
        "spec": {"type": "NodePort", "clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10"], "selector": {"app": "web", "tier": "fe"},
            "ports": [{"port": 80, "protocol": "TCP", "nodePort": 30080}, {"port": 53, "protocol": "UDP"}]}
    });
    assert_eq!(
        cells("", "Service", &svc, NOW),
        vec![
            json!("web"),
            json!("NodePort"),
            json!("10.96.0.10"),
            json!("<none>"),
            json!("80:30080/TCP,53/UDP"),
            json!("30s"),
            json!("app=web,tier=fe")
        ]
    );
    let lb =
        json!({"metadata": {"name": "lb"}, "spec": {"type": "LoadBalancer", "clusterIP": "10.0.0.1", "ports": []}});
    let row = cells("", "Service", &lb, NOW);
    assert_eq!(row[3], "<pending>");
    assert_eq!(row[4], "<none>");
    assert_eq!(row[6], "<none>");
    let ext = json!({"metadata": {"name": "x"}, "spec": {"type": "ExternalName", "externalName": "example.com"}});
    let row = cells("", "Service", &ext, NOW);
    assert_eq!(row[2], "<none>");
    assert_eq!(row[3], "example.com");
}

#[test]
fn job_and_cronjob_rows() {
    let job = json!({"metadata": {"name": "pi"}, "spec": {"completions": 1, "parallelism": 1,
        "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "u"}}, "template": {"spec": {"containers": [{"name": "pi", "image": "perl"}]}}},
        "status": {"succeeded": 1, "startTime": "2024-05-01T11:00:00Z", "completionTime": "2024-05-01T11:00:42Z",
            "conditions": [{"type": "Complete", "status": "True"}]}});
    let row = cells("batch", "Job", &job, NOW);
    assert_eq!(&row[1..4], &[json!("Complete"), json!("1/1"), json!("42s")]);
    assert_eq!(row[7], "batch.kubernetes.io/controller-uid=u");

    let cj = json!({"metadata": {"name": "c"}, "spec": {"schedule": "*/5 * * * *", "suspend": false,
        "jobTemplate": {"spec": {"template": {"spec": {"containers": [{"name": "a", "image": "x"}]}}}}}});
    let row = cells("batch", "CronJob", &cj, NOW);
    assert_eq!(&row[1..6], &[json!("*/5 * * * *"), json!("<none>"), json!("false"), json!(0), json!("<none>")]);
}

#[test]
fn simple_kinds() {
    let ns = json!({"metadata": {"name": "default", "creationTimestamp": "2024-05-01T11:00:00Z"}, "status": {"phase": "Active"}});
    assert_eq!(cells("", "Namespace", &ns, NOW), vec![json!("default"), json!("Active"), json!("60m")]);
    let cm = json!({"metadata": {"name": "c"}, "data": {"a": "1", "b": "2"}, "binaryData": {"c": "AA=="}});
    assert_eq!(cells("", "ConfigMap", &cm, NOW)[1], 3);
    let s = json!({"metadata": {"name": "s"}, "type": "Opaque", "data": {"a": "MQ=="}});
    assert_eq!(cells("", "Secret", &s, NOW), vec![json!("s"), json!("Opaque"), json!(1), json!("<unknown>")]);
    assert_eq!(names(&columns("", "ServiceAccount")), vec![("Name", 0), ("Secrets", 0), ("Age", 0)]);
    let node = json!({"metadata": {"name": "n1", "labels": {"node-role.kubernetes.io/control-plane": ""}},
        "spec": {"unschedulable": true},
        "status": {"conditions": [{"type": "Ready", "status": "True"}], "nodeInfo": {"kubeletVersion": "v1.34.0"},
            "addresses": [{"type": "InternalIP", "address": "192.168.1.2"}]}});
    let row = cells("", "Node", &node, NOW);
    assert_eq!(&row[..3], &[json!("n1"), json!("Ready,SchedulingDisabled"), json!("control-plane")]);
    assert_eq!(row[5], "192.168.1.2");
    assert_eq!(row[6], "<none>");
    assert_eq!(row[7], "<unknown>");
}

#[test]
fn event_row() {
    let e = json!({"metadata": {"name": "web.17"}, "involvedObject": {"kind": "Pod", "name": "web", "fieldPath": "spec.containers{a}"},
        "reason": "Pulled", "message": "pulled ", "type": "Normal", "source": {"component": "kubelet", "host": "n1"},
        "firstTimestamp": "2024-05-01T11:00:00Z", "lastTimestamp": "2024-05-01T11:58:00Z", "count": 4});
    assert_eq!(
        cells("", "Event", &e, NOW),
        vec![
            json!("2m"),
            json!("Normal"),
            json!("Pulled"),
            json!("pod/web"),
            json!("spec.containers{a}"),
            json!("kubelet, n1"),
            json!("pulled"),
            json!("60m"),
            json!(4),
            json!("web.17")
        ]
    );
}

#[test]
fn default_table_for_other_kinds() {
    let cols = columns("example.com", "Widget");
    assert_eq!(names(&cols), vec![("Name", 0), ("Created At", 0)]);
    assert_eq!(cols[1]["type"], "date");
    let w = json!({"metadata": {"name": "w", "creationTimestamp": "2024-05-01T11:00:00Z"}});
    assert_eq!(cells("example.com", "Widget", &w, NOW), vec![json!("w"), json!("2024-05-01T11:00:00Z")]);
}

#[test]
fn every_row_matches_its_columns() {
    let obj = json!({"metadata": {"name": "x"}});
    for (g, k) in [
        ("", "Pod"),
        ("", "Service"),
        ("", "Node"),
        ("", "Event"),
        ("apps", "DaemonSet"),
        ("apps", "StatefulSet"),
        ("apps", "ReplicaSet"),
        ("", "ReplicationController"),
        ("batch", "CronJob"),
        ("", "PersistentVolumeClaim"),
        ("coordination.k8s.io", "Lease"),
        ("rbac.authorization.k8s.io", "RoleBinding"),
        ("storage.k8s.io", "StorageClass"),
        ("scheduling.k8s.io", "PriorityClass"),
        ("", "PodTemplate"),
        ("events.k8s.io", "Event"),
    ] {
        assert_eq!(cells(g, k, &obj, NOW).len(), columns(g, k).len(), "{g}/{k}");
    }
}

/// The kinds kube prints with their own columns where kapi printed only name and age.
#[test]
fn policy_kind_rows() {
    let created = json!({"name": "x", "creationTimestamp": "2024-05-01T11:00:00Z"});
    let cases = [
        ("", "ServiceAccount", json!({"metadata": created, "secrets": [{"name": "t"}]}), json!(["x", 1, "60m"])),
        ("policy", "PodDisruptionBudget", json!({"metadata": created, "spec": {"minAvailable": "50%"},
            "status": {"disruptionsAllowed": 2}}), json!(["x", "50%", "N/A", 2, "60m"])),
        ("networking.k8s.io", "NetworkPolicy", json!({"metadata": created, "spec": {"podSelector": {}}}),
            json!(["x", "<none>", "60m"])),
        ("networking.k8s.io", "NetworkPolicy", json!({"metadata": created, "spec": {"podSelector": {"matchLabels": {"app": "web"}}}}),
            json!(["x", "app=web", "60m"])),
        ("networking.k8s.io", "IngressClass", json!({"metadata": created, "spec": {"controller": "k8s.io/nginx",
            "parameters": {"apiGroup": "k8s.example.com", "kind": "Params", "name": "p"}}}),
            json!(["x", "k8s.io/nginx", "Params.k8s.example.com/p", "60m"])),
        ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration", json!({"metadata": created,
            "webhooks": [{}, {}]}), json!(["x", 2, "60m"])),
        ("admissionregistration.k8s.io", "MutatingWebhookConfiguration", json!({"metadata": created}), json!(["x", 0, "60m"])),
        ("apiregistration.k8s.io", "APIService", json!({"metadata": created, "spec": {}}), json!(["x", "Local", "Unknown", "60m"])),
        ("apiregistration.k8s.io", "APIService", json!({"metadata": created,
            "spec": {"service": {"namespace": "ns", "name": "api"}},
            "status": {"conditions": [{"type": "Available", "status": "False", "reason": "MissingEndpoints"}]}}),
            json!(["x", "ns/api", "False (MissingEndpoints)", "60m"])),
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy", json!({"metadata": created,
            "spec": {"validations": [{}], "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"}}}),
            json!(["x", 1, "v1/ConfigMap", "60m"])),
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding", json!({"metadata": created,
            "spec": {"policyName": "p", "paramRef": {"name": "cm"}}}), json!(["x", "p", "*/cm", "60m"])),
    ];
    for (group, kind, obj, want) in cases {
        let got = cells(group, kind, &obj, NOW);
        assert_eq!(Value::from(got.clone()), want, "{kind}");
        assert_eq!(columns(group, kind).len(), got.len(), "{kind}");
    }
    let headers: Vec<String> =
        columns("policy", "PodDisruptionBudget").iter().map(|c| c["name"].as_str().unwrap().to_string()).collect();
    assert_eq!(headers, ["Name", "Min Available", "Max Unavailable", "Allowed Disruptions", "Age"]);
}

/// Every kind kube's printers give columns of their own, with its headers and their priorities
/// as `printers.go` declares them (wide columns priority 1).
/// A kind's group and name, and its expected (header, priority) pairs.
type KindColumns<'a> = (&'a str, &'a str, &'a [(&'a str, u64)]);

#[test]
fn kube_columns_per_kind() {
    let cases: &[KindColumns] = &[
        ("", "Endpoints", &[("Name", 0), ("Endpoints", 0), ("Age", 0)]),
        ("networking.k8s.io", "Ingress", &[("Name", 0), ("Class", 0), ("Hosts", 0), ("Address", 0), ("Ports", 0), ("Age", 0)]),
        ("", "PersistentVolume", &[
            ("Name", 0), ("Capacity", 0), ("Access Modes", 0), ("Reclaim Policy", 0), ("Status", 0), ("Claim", 0),
            ("StorageClass", 0), ("VolumeAttributesClass", 0), ("Reason", 0), ("Age", 0), ("VolumeMode", 1),
        ]),
        ("autoscaling", "HorizontalPodAutoscaler", &[
            ("Name", 0), ("Reference", 0), ("Targets", 0), ("MinPods", 0), ("MaxPods", 0), ("Replicas", 0), ("Age", 0),
        ]),
        ("certificates.k8s.io", "CertificateSigningRequest", &[
            ("Name", 0), ("Age", 0), ("SignerName", 0), ("Requestor", 0), ("RequestedDuration", 0), ("Condition", 0),
        ]),
        ("certificates.k8s.io", "ClusterTrustBundle", &[("Name", 0), ("SignerName", 0)]),
        ("apps", "ControllerRevision", &[("Name", 0), ("Controller", 0), ("Revision", 0), ("Age", 0)]),
        ("discovery.k8s.io", "EndpointSlice", &[("Name", 0), ("AddressType", 0), ("Ports", 0), ("Endpoints", 0), ("Age", 0)]),
        ("", "ResourceQuota", &[("Name", 0), ("Request", 0), ("Limit", 0), ("Age", 0)]),
        ("", "ComponentStatus", &[("Name", 0), ("Status", 0), ("Message", 0), ("Error", 0)]),
        ("storage.k8s.io", "VolumeAttachment", &[("Name", 0), ("Attacher", 0), ("PV", 0), ("Node", 0), ("Attached", 0), ("Age", 0)]),
        ("storage.k8s.io", "CSIDriver", &[
            ("Name", 0), ("AttachRequired", 0), ("PodInfoOnMount", 0), ("StorageCapacity", 0), ("TokenRequests", 0),
            ("RequiresRepublish", 0), ("Modes", 0), ("Age", 0),
        ]),
        ("storage.k8s.io", "CSIStorageCapacity", &[("Name", 0), ("StorageClassName", 0), ("Capacity", 0)]),
        ("storage.k8s.io", "VolumeAttributesClass", &[("Name", 0), ("DriverName", 0), ("Age", 0)]),
        ("flowcontrol.apiserver.k8s.io", "FlowSchema", &[
            ("Name", 0), ("PriorityLevel", 0), ("MatchingPrecedence", 0), ("DistinguisherMethod", 0), ("Age", 0), ("MissingPL", 0),
        ]),
        ("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration", &[
            ("Name", 0), ("Type", 0), ("NominalConcurrencyShares", 0), ("Queues", 0), ("HandSize", 0), ("QueueLengthLimit", 0),
            ("Age", 0),
        ]),
        ("networking.k8s.io", "ServiceCIDR", &[("Name", 0), ("CIDRs", 0), ("Age", 0)]),
        ("networking.k8s.io", "IPAddress", &[("Name", 0), ("ParentRef", 0)]),
        ("scheduling.k8s.io", "PriorityClass", &[("Name", 0), ("Value", 0), ("Global-Default", 0), ("Age", 0), ("PreemptionPolicy", 0)]),
        ("", "PersistentVolumeClaim", &[
            ("Name", 0), ("Status", 0), ("Volume", 0), ("Capacity", 0), ("Access Modes", 0), ("StorageClass", 0),
            ("VolumeAttributesClass", 0), ("Age", 0), ("VolumeMode", 1),
        ]),
    ];
    for (group, kind, want) in cases {
        let cols = columns(group, kind);
        assert_eq!(names(&cols), want.to_vec(), "{group}/{kind}");
        assert_eq!(cols[0]["format"], "name", "{kind}");
        assert!(cols.iter().all(|c| c["description"].as_str().is_some()), "{kind}");
        // kube's IP address rows carry an age cell it declares no column for.
        let extra = usize::from(*kind == "IPAddress");
        assert_eq!(cells(group, kind, &json!({"metadata": {"name": "x"}}), NOW).len(), cols.len() + extra, "{kind}");
    }
    let types = |g, k| columns(g, k).iter().map(|c| c["type"].as_str().unwrap_or("").to_string()).collect::<Vec<_>>();
    assert_eq!(types("storage.k8s.io", "CSIDriver"), ["string", "boolean", "boolean", "boolean", "string", "boolean", "string", "string"]);
    assert_eq!(types("storage.k8s.io", "VolumeAttachment")[4], "boolean");
    assert_eq!(columns("storage.k8s.io", "VolumeAttachment")[1]["format"], "name");
    assert!(columns("", "Endpoints")[1]["description"].as_str().unwrap_or("").starts_with("The set of all endpoints is the union of all subsets."));
}

/// A sample object per kind and the cells kube's printer gives it.
#[test]
fn kube_cells_per_kind() {
    let created = json!({"name": "x", "creationTimestamp": "2024-05-01T11:00:00Z"});
    let meta = |extra: Value| {
        let mut m = created.clone();
        m.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        m
    };
    let cases = [
        ("", "Endpoints", json!({"metadata": created}), json!(["x", "<none>", "60m"])),
        ("", "Endpoints", json!({"metadata": created, "subsets": [
            {"addresses": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}], "ports": [{"port": 80}, {"port": 443}]},
            {"addresses": [{"ip": "fd00::1"}]}]}),
            json!(["x", "10.0.0.1:80,10.0.0.2:80,10.0.0.1:443 + 2 more...", "60m"])),
        ("", "Endpoints", json!({"metadata": created, "subsets": [{"addresses": [{"ip": "fd00::1"}], "ports": [{"port": 53}]}]}),
            json!(["x", "[fd00::1]:53", "60m"])),
        ("networking.k8s.io", "Ingress", json!({"metadata": created, "spec": {"rules": [{"host": "a.example"}, {}]},
            "status": {"loadBalancer": {"ingress": [{"ip": "10.0.0.9"}, {"hostname": "lb.example"}, {"ip": "10.0.0.9"}]}}}),
            json!(["x", "<none>", "a.example", "10.0.0.9,lb.example", "80", "60m"])),
        ("networking.k8s.io", "Ingress", json!({"metadata": created, "spec": {"ingressClassName": "nginx", "tls": [{}],
            "rules": [{}, {"host": "a"}, {"host": "b"}, {"host": "c"}, {"host": "d"}]}}),
            json!(["x", "nginx", "a,b,c + 2 more...", "", "80, 443", "60m"])),
        ("networking.k8s.io", "Ingress", json!({"metadata": created, "spec": {}}), json!(["x", "<none>", "*", "", "80", "60m"])),
        ("", "PersistentVolume", json!({"metadata": created, "spec": {"capacity": {"storage": "10Gi"},
            "accessModes": ["ReadWriteMany", "ReadWriteOnce"], "persistentVolumeReclaimPolicy": "Retain",
            "claimRef": {"namespace": "ns", "name": "data"}, "storageClassName": "fast", "volumeMode": "Filesystem"},
            "status": {"phase": "Bound"}}),
            json!(["x", "10Gi", "RWO,RWX", "Retain", "Bound", "ns/data", "fast", "<unset>", "", "60m", "Filesystem"])),
        ("", "PersistentVolume", json!({"metadata": meta(json!({"deletionTimestamp": "2024-05-01T11:59:00Z"})), "spec": {}}),
            json!(["x", "0", "", "", "Terminating", "", "", "<unset>", "", "60m", "<unset>"])),
        ("autoscaling", "HorizontalPodAutoscaler", json!({"metadata": created, "spec": {
            "scaleTargetRef": {"kind": "Deployment", "name": "web"}, "minReplicas": 2, "maxReplicas": 10, "metrics": [
                {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}},
                {"type": "Pods", "pods": {"target": {"averageValue": "1k"}}},
                {"type": "External", "external": {"target": {"value": "5"}}}]},
            "status": {"currentReplicas": 3, "currentMetrics": [
                {"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 42}}}]}}),
            json!(["x", "Deployment/web", "cpu: 42%/80%, <unknown>/1k + 1 more...", "2", 10, 3, "60m"])),
        ("autoscaling", "HorizontalPodAutoscaler", json!({"metadata": created, "spec": {
            "scaleTargetRef": {"kind": "Deployment", "name": "web"}, "maxReplicas": 4, "targetCPUUtilizationPercentage": 50},
            "status": {"currentReplicas": 1, "currentCPUUtilizationPercentage": 7}}),
            json!(["x", "Deployment/web", "cpu: 7%/50%", "<unset>", 4, 1, "60m"])),
        ("autoscaling", "HorizontalPodAutoscaler", json!({"metadata": created, "spec": {"maxReplicas": 1, "metrics": [
                {"type": "Object", "object": {"target": {"averageValue": "3"}}},
                {"type": "Resource", "resource": {"name": "memory", "target": {"averageValue": "100Mi"}}}]}}),
            json!(["x", "/", "<unknown>/3 (avg), memory: <unknown>/100Mi", "<unset>", 1, 0, "60m"])),
        ("certificates.k8s.io", "CertificateSigningRequest", json!({"metadata": created, "spec": {
            "signerName": "kubernetes.io/kube-apiserver-client", "username": "alice", "expirationSeconds": 86400},
            "status": {"conditions": [{"type": "Approved"}, {"type": "Failed"}], "certificate": "Y2VydA=="}}),
            json!(["x", "60m", "kubernetes.io/kube-apiserver-client", "alice", "24h", "Approved,Failed,Issued"])),
        ("certificates.k8s.io", "CertificateSigningRequest", json!({"metadata": created, "spec": {"username": "bob"},
            "status": {"conditions": [{"type": "Approved"}, {"type": "Denied"}]}}),
            json!(["x", "60m", "<none>", "bob", "<none>", "Denied"])),
        ("certificates.k8s.io", "ClusterTrustBundle", json!({"metadata": created, "spec": {}}), json!(["x", "<none>"])),
        ("apps", "ControllerRevision", json!({"metadata": meta(json!({"ownerReferences": [
            {"apiVersion": "v1", "kind": "Pod", "name": "p"},
            {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "fluentd", "controller": true}]})), "revision": 3}),
            json!(["x", "daemonset.apps/fluentd", 3, "60m"])),
        ("apps", "ControllerRevision", json!({"metadata": created, "revision": 1}), json!(["x", "<none>", 1, "60m"])),
        ("discovery.k8s.io", "EndpointSlice", json!({"metadata": created, "addressType": "IPv4",
            "ports": [{"port": 80}, {"name": "dns"}, {}, {"port": 8080}],
            "endpoints": [{"addresses": ["10.0.0.1", "10.0.0.2"]}, {"addresses": ["10.0.0.3"]}]}),
            json!(["x", "IPv4", "80,dns,* + 1 more...", "10.0.0.1,10.0.0.2,10.0.0.3", "60m"])),
        ("discovery.k8s.io", "EndpointSlice", json!({"metadata": created, "addressType": "IPv6"}),
            json!(["x", "IPv6", "<unset>", "<unset>", "60m"])),
        ("", "ResourceQuota", json!({"metadata": created, "status": {
            "hard": {"pods": "10", "limits.cpu": "2", "requests.memory": "1Gi", "limits.memory": "2Gi"},
            "used": {"pods": "3", "limits.cpu": "500m"}}}),
            json!(["x", "pods: 3/10, requests.memory: 0/1Gi", "limits.cpu: 500m/2, limits.memory: 0/2Gi", "60m"])),
        ("", "ComponentStatus", json!({"metadata": created, "conditions": [
            {"type": "Healthy", "status": "False", "message": "m", "error": "e"}]}), json!(["x", "Unhealthy", "m", "e"])),
        ("", "ComponentStatus", json!({"metadata": created}), json!(["x", "Unknown", "", ""])),
        ("storage.k8s.io", "VolumeAttachment", json!({"metadata": created, "spec": {"attacher": "csi.example",
            "nodeName": "n1", "source": {"persistentVolumeName": "pv1"}}, "status": {"attached": true}}),
            json!(["x", "csi.example", "pv1", "n1", true, "60m"])),
        ("storage.k8s.io", "CSIDriver", json!({"metadata": created, "spec": {}}),
            json!(["x", true, false, false, "<unset>", false, "<none>", "60m"])),
        ("storage.k8s.io", "CSIDriver", json!({"metadata": created, "spec": {"attachRequired": false, "podInfoOnMount": true,
            "tokenRequests": [{"audience": "a"}, {"audience": "b"}], "volumeLifecycleModes": ["Persistent", "Ephemeral"]}}),
            json!(["x", false, true, false, "a,b", false, "Persistent,Ephemeral", "60m"])),
        ("storage.k8s.io", "CSIStorageCapacity", json!({"metadata": created, "storageClassName": "fast"}),
            json!(["x", "fast", "<unset>"])),
        ("storage.k8s.io", "VolumeAttributesClass", json!({"metadata": meta(json!({"annotations":
            {"volumeattributesclass.alpha.kubernetes.io/is-default-class": "true"}})), "driverName": "csi.example"}),
            json!(["x (default)", "csi.example", "60m"])),
        ("flowcontrol.apiserver.k8s.io", "FlowSchema", json!({"metadata": created, "spec": {
            "priorityLevelConfiguration": {"name": "workload-low"}, "matchingPrecedence": 9000,
            "distinguisherMethod": {"type": "ByUser"}}, "status": {"conditions": [{"type": "Dangling", "status": "False"}]}}),
            json!(["x", "workload-low", 9000, "ByUser", "60m", "False"])),
        ("flowcontrol.apiserver.k8s.io", "FlowSchema", json!({"metadata": created, "spec": {
            "priorityLevelConfiguration": {"name": "exempt"}, "matchingPrecedence": 1}}),
            json!(["x", "exempt", 1, "<none>", "60m", "?"])),
        ("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration", json!({"metadata": created, "spec": {"type": "Limited",
            "limited": {"nominalConcurrencyShares": 30, "limitResponse": {"type": "Queue",
                "queuing": {"queues": 64, "handSize": 6, "queueLengthLimit": 50}}}}}),
            json!(["x", "Limited", 30, 64, 6, 50, "60m"])),
        ("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration", json!({"metadata": created, "spec": {"type": "Limited",
            "limited": {"nominalConcurrencyShares": 5, "limitResponse": {"type": "Reject"}}}}),
            json!(["x", "Limited", 5, "<none>", "<none>", "<none>", "60m"])),
        ("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration", json!({"metadata": created, "spec": {"type": "Exempt"}}),
            json!(["x", "Exempt", "<none>", "<none>", "<none>", "<none>", "60m"])),
        ("networking.k8s.io", "ServiceCIDR", json!({"metadata": created, "spec": {"cidrs": ["10.96.0.0/12", "fd00::/108"]}}),
            json!(["x", "10.96.0.0/12,fd00::/108", "60m"])),
        ("networking.k8s.io", "IPAddress", json!({"metadata": created, "spec": {"parentRef":
            {"group": "", "resource": "Services", "namespace": "default", "name": "kubernetes"}}}),
            json!(["x", "services/default/kubernetes", "60m"])),
        ("networking.k8s.io", "IPAddress", json!({"metadata": created, "spec": {"parentRef":
            {"group": "Gateway.Networking.k8s.io", "resource": "gateways", "name": "g"}}}),
            json!(["x", "gateways.gateway.networking.k8s.io/g", "60m"])),
        ("", "PersistentVolumeClaim", json!({"metadata": created, "spec": {"volumeName": "pv1"}, "status": {"phase": "Bound"}}),
            json!(["x", "Bound", "pv1", "0", "", "", "<unset>", "60m", "<unset>"])),
    ];
    for (group, kind, obj, want) in cases {
        assert_eq!(Value::from(cells(group, kind, &obj, NOW)), want, "{kind} {obj}");
    }
}

#[test]
fn flow_schema_rows_follow_matching_precedence_then_name() {
    let fs = |name: &str, precedence: i64| json!({"metadata": {"name": name}, "spec": {"matchingPrecedence": precedence}});
    let mut items = [fs("global-default", 9900), fs("b", 500), fs("exempt", 1), fs("a", 500), fs("catch-all", 10000)];
    let order = row_order(FLOW_CONTROL, "FlowSchema").expect("FlowSchema rows are ordered");
    items.sort_by(order);
    let names: Vec<&str> = items.iter().map(|i| i["metadata"]["name"].as_str().unwrap_or_default()).collect();
    assert_eq!(names, ["exempt", "a", "b", "global-default", "catch-all"]);
    // Other kinds keep the list's order.
    assert!(row_order("", "Pod").is_none());
    assert!(row_order(FLOW_CONTROL, "PriorityLevelConfiguration").is_none());
}
