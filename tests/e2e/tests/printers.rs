//! `kubectl get` prints kube's columns for the kinds whose printers kube defines (issue 25
//! point 9), and `kubectl explain` and the OpenAPI documents carry the API's own descriptions
//! (point 6), against a real kapi.

use kapi_e2e::{Kapi, OutputExt};
use serde_json::Value;

const SAMPLES: &str = r#"
apiVersion: v1
kind: Endpoints
metadata: {name: web, namespace: default}
subsets:
- addresses: [{ip: 10.0.0.1}, {ip: 10.0.0.2}]
  ports: [{port: 80}, {port: 443}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-abc, namespace: default}
addressType: IPv4
ports: [{port: 80, name: http}]
endpoints: [{addresses: [10.0.0.1]}, {addresses: [10.0.0.2]}]
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: web, namespace: default}
spec:
  ingressClassName: nginx
  tls: [{hosts: [a.example.com]}]
  rules: [{host: a.example.com}, {host: b.example.com}]
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv1}
spec:
  capacity: {storage: 5Gi}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: slow
  hostPath: {path: /tmp/pv1}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: web, namespace: default}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  minReplicas: 2
  maxReplicas: 5
  metrics:
  - type: Resource
    resource: {name: cpu, target: {type: Utilization, averageUtilization: 60}}
---
apiVersion: apps/v1
kind: ControllerRevision
metadata:
  name: web-1
  namespace: default
  ownerReferences:
  - {apiVersion: apps/v1, kind: StatefulSet, name: web, uid: 6b1c4f5e-0000-4000-8000-000000000001, controller: true}
revision: 1
---
apiVersion: v1
kind: ResourceQuota
metadata: {name: quota, namespace: default}
spec:
  hard: {pods: "10", limits.cpu: "2"}
---
apiVersion: storage.k8s.io/v1
kind: VolumeAttachment
metadata: {name: va1}
spec:
  attacher: csi.example.com
  nodeName: node-1
  source: {persistentVolumeName: pv1}
---
apiVersion: storage.k8s.io/v1
kind: CSIDriver
metadata: {name: csi.example.com}
spec:
  podInfoOnMount: true
---
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: PriorityLevelConfiguration
metadata: {name: e2e-level}
spec:
  type: Limited
  limited:
    nominalConcurrencyShares: 5
    limitResponse:
      type: Queue
      queuing: {queues: 16, handSize: 4, queueLengthLimit: 20}
---
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata: {name: e2e-flow}
spec:
  priorityLevelConfiguration: {name: e2e-level}
  matchingPrecedence: 5000
  distinguisherMethod: {type: ByUser}
"#;

/// `kubectl get` output as (header, cells) rows, cut at the header's column offsets so empty
/// cells stay in place (kubectl pads every column to its widest cell).
fn table(out: &str) -> Vec<Vec<(String, String)>> {
    let mut lines = out.lines();
    let header = lines.next().unwrap_or("");
    let mut starts = Vec::new();
    let mut prev_space = 2;
    for (i, c) in header.char_indices() {
        if c != ' ' && prev_space >= 2 {
            starts.push(i);
        }
        prev_space = if c == ' ' { prev_space + 1 } else { 0 };
    }
    let cut = |line: &str, k: usize| {
        let end = starts.get(k + 1).copied().unwrap_or(line.len()).min(line.len());
        line.get(starts[k].min(line.len())..end).unwrap_or("").trim().to_string()
    };
    lines.map(|line| (0..starts.len()).map(|k| (cut(header, k), cut(line, k))).collect()).collect()
}

/// The one row `kubectl get <args>` prints, as (header, cell) pairs.
fn get_row(kapi: &Kapi, args: &[&str]) -> Vec<(String, String)> {
    let out = kapi.kubectl(&[&["get"], args].concat()).ok(&format!("kubectl get {}", args.join(" ")));
    let mut rows = table(&out);
    assert_eq!(rows.len(), 1, "{out}");
    rows.remove(0)
}

/// A column's header and its cell; `None` for the age, checked apart.
type Expected<'a> = (&'a str, Option<&'a str>);

#[test]
fn kubectl_get_prints_kube_columns_for_every_kind() {
    // The ControllerRevision's owner is fictional (no StatefulSet is created): the garbage
    // collector would remove it, as kube's does, before kubectl prints it.
    let kapi = Kapi::start_with(&["--controllers", "*,-garbage-collector-controller"]).expect("start kapi");
    let file = kapi.write_file("samples.yaml", SAMPLES);
    kapi.kubectl(&["apply", "-f", &file.display().to_string()]).ok("apply samples");
    // The quota controller fills a quota's status; here kubectl does.
    kapi.kubectl(&[
        "patch",
        "resourcequota",
        "quota",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"hard":{"pods":"10","limits.cpu":"2"},"used":{"pods":"1"}}}"#,
    ])
    .ok("patch quota status");
    let pv: Value =
        serde_json::from_str(&kapi.kubectl(&["get", "pv", "pv1", "-o", "json"]).ok("get pv -o json")).expect("PV JSON");
    let pv_phase = pv["status"]["phase"].as_str().unwrap_or("").to_string();

    let cases: Vec<(&[&str], Vec<Expected>)> = vec![
        (
            &["endpoints", "web"],
            vec![("NAME", Some("web")), ("ENDPOINTS", Some("10.0.0.1:80,10.0.0.2:80,10.0.0.1:443 + 1 more...")), ("AGE", None)],
        ),
        (
            &["endpointslice", "web-abc"],
            vec![
                ("NAME", Some("web-abc")),
                ("ADDRESSTYPE", Some("IPv4")),
                ("PORTS", Some("80")),
                ("ENDPOINTS", Some("10.0.0.1,10.0.0.2")),
                ("AGE", None),
            ],
        ),
        (
            &["ingress", "web"],
            vec![
                ("NAME", Some("web")),
                ("CLASS", Some("nginx")),
                ("HOSTS", Some("a.example.com,b.example.com")),
                ("ADDRESS", Some("")),
                ("PORTS", Some("80, 443")),
                ("AGE", None),
            ],
        ),
        (
            &["pv", "pv1"],
            vec![
                ("NAME", Some("pv1")),
                ("CAPACITY", Some("5Gi")),
                ("ACCESS MODES", Some("RWO")),
                ("RECLAIM POLICY", Some("Retain")),
                ("STATUS", Some(pv_phase.as_str())),
                ("CLAIM", Some("")),
                ("STORAGECLASS", Some("slow")),
                ("VOLUMEATTRIBUTESCLASS", Some("<unset>")),
                ("REASON", Some("")),
                ("AGE", None),
            ],
        ),
        (
            &["hpa", "web"],
            vec![
                ("NAME", Some("web")),
                ("REFERENCE", Some("Deployment/web")),
                ("TARGETS", Some("cpu: <unknown>/60%")),
                ("MINPODS", Some("2")),
                ("MAXPODS", Some("5")),
                ("REPLICAS", Some("0")),
                ("AGE", None),
            ],
        ),
        (
            &["controllerrevision", "web-1"],
            vec![("NAME", Some("web-1")), ("CONTROLLER", Some("statefulset.apps/web")), ("REVISION", Some("1")), ("AGE", None)],
        ),
        (
            &["resourcequota", "quota"],
            vec![("NAME", Some("quota")), ("REQUEST", Some("pods: 1/10")), ("LIMIT", Some("limits.cpu: 0/2")), ("AGE", None)],
        ),
        (
            &["volumeattachment", "va1"],
            vec![
                ("NAME", Some("va1")),
                ("ATTACHER", Some("csi.example.com")),
                ("PV", Some("pv1")),
                ("NODE", Some("node-1")),
                ("ATTACHED", Some("false")),
                ("AGE", None),
            ],
        ),
        (
            &["csidriver", "csi.example.com"],
            vec![
                ("NAME", Some("csi.example.com")),
                ("ATTACHREQUIRED", Some("true")),
                ("PODINFOONMOUNT", Some("true")),
                ("STORAGECAPACITY", Some("false")),
                ("TOKENREQUESTS", Some("<unset>")),
                ("REQUIRESREPUBLISH", Some("false")),
                // Not in the manifest: kube's default.
                ("MODES", Some("Persistent")),
                ("AGE", None),
            ],
        ),
        (
            &["prioritylevelconfiguration", "e2e-level"],
            vec![
                ("NAME", Some("e2e-level")),
                ("TYPE", Some("Limited")),
                ("NOMINALCONCURRENCYSHARES", Some("5")),
                ("QUEUES", Some("16")),
                ("HANDSIZE", Some("4")),
                ("QUEUELENGTHLIMIT", Some("20")),
                ("AGE", None),
            ],
        ),
    ];
    for (args, want) in cases {
        let row = get_row(&kapi, args);
        let headers: Vec<&str> = row.iter().map(|(h, _)| h.as_str()).collect();
        assert_eq!(headers, want.iter().map(|(h, _)| *h).collect::<Vec<_>>(), "kubectl get {args:?}");
        for ((header, cell), (_, expected)) in row.iter().zip(&want) {
            match expected {
                Some(e) => assert_eq!(cell, e, "kubectl get {args:?}: column {header}"),
                None => assert!(cell.ends_with('s') || cell.ends_with('m'), "kubectl get {args:?}: age {cell:?}"),
            }
        }
    }

    // MissingPL is the Dangling condition's status once a controller sets it, `?` before.
    let row = get_row(&kapi, &["flowschema", "e2e-flow"]);
    let headers: Vec<&str> = row.iter().map(|(h, _)| h.as_str()).collect();
    assert_eq!(headers, ["NAME", "PRIORITYLEVEL", "MATCHINGPRECEDENCE", "DISTINGUISHERMETHOD", "AGE", "MISSINGPL"]);
    let cells: Vec<&str> = row.iter().map(|(_, c)| c.as_str()).collect();
    assert_eq!(cells[..4], ["e2e-flow", "e2e-level", "5000", "ByUser"]);
    assert!(["?", "False"].contains(&cells[5]), "MissingPL {:?}", cells[5]);

    // Wide output adds the priority-1 column.
    let out = kapi.kubectl(&["get", "pv", "pv1", "-o", "wide"]).ok("get pv -o wide");
    assert_eq!(table(&out)[0].last().map(|(h, c)| (h.as_str(), c.as_str())), Some(("VOLUMEMODE", "Filesystem")), "{out}");
}

#[test]
fn kubectl_explain_and_openapi_carry_the_api_descriptions() {
    let kapi = Kapi::start().expect("start kapi");
    let explain = kapi.kubectl(&["explain", "services.spec"]).ok("kubectl explain services.spec");
    assert!(
        explain.contains("Spec defines the behavior of a service."),
        "kubectl explain services.spec:\n{explain}"
    );
    let explain = kapi.kubectl(&["explain", "deployments.spec.replicas"]).ok("kubectl explain deployments.spec.replicas");
    assert!(explain.contains("Number of desired pods."), "kubectl explain deployments.spec.replicas:\n{explain}");

    // Lists are documented in their own words, in both documents.
    let v3: Value = serde_json::from_str(&kapi.kubectl(&["get", "--raw", "/openapi/v3/api/v1"]).ok("get openapi v3"))
        .expect("v3 JSON");
    let list = &v3["components"]["schemas"]["io.k8s.api.core.v1.ServiceList"];
    assert_eq!(list["description"], "ServiceList holds a list of services.");
    assert_eq!(list["properties"]["items"]["description"], "List of services");
    let v2: Value =
        serde_json::from_str(&kapi.kubectl(&["get", "--raw", "/openapi/v2"]).ok("get openapi v2")).expect("v2 JSON");
    let defs = &v2["definitions"];
    assert_eq!(defs["io.k8s.api.apps.v1.DeploymentList"]["properties"]["items"]["description"], "Items is the list of Deployments.");
    assert_eq!(defs["io.k8s.api.core.v1.PodList"]["description"], "PodList is a list of Pods.");
    assert_eq!(defs["io.k8s.api.core.v1.ConfigMapList"]["properties"]["metadata"]["description"],
        "More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata");
}
