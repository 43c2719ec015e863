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
