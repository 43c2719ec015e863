//! Three CRDs modelled on widely used operators, written for these tests, driven with kubectl
//! (default and 1.27) as their users drive them: a certificate-like CRD (nested required fields,
//! enums, patterns, CEL rules with a transition rule), a monitoring CRD (label selectors, a
//! list-map, int-or-string) and an application CRD served as v1alpha1 and v1 with a conversion
//! webhook. For each: create, get with printer columns, short name and category lookups, JSON,
//! merge and server-side apply patches, scale, status through its subresource only, watch,
//! explain, dry-run, delete; then the CRD's deletion takes every instance, route, discovery
//! entry and OpenAPI part with it.

use std::path::PathBuf;
use std::time::Duration;

use kapi_e2e::{OutputExt, versioned_kubectl, wait_for, ConversionWebhook, Kapi, Request};
use serde_json::{json, Value};

/// One CRD and what its flow checks.
struct Case {
    crd_name: &'static str,
    /// `group/version` the objects are written in.
    api_version: &'static str,
    kind: &'static str,
    plural: &'static str,
    short: &'static str,
    category: &'static str,
    /// Column headers of `kubectl get <short>`.
    columns: &'static [&'static str],
    /// A valid object's spec.
    spec: Value,
    /// (JSON pointer, value) a merge patch sets, and the spec a server-side apply sends.
    merge: (&'static str, Value),
    apply_spec: Value,
    /// JSON pointer of the scale subresource's replicas.
    replicas: &'static str,
    /// A field `kubectl explain <plural>.spec` must name.
    explained: &'static str,
    /// An invalid change (merge patch) and a text of kube's answer.
    invalid: (Value, &'static str),
}

const CERT_CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: certificates.cert.example.io}
spec:
  group: cert.example.io
  scope: Namespaced
  names: {plural: certificates, singular: certificate, kind: Certificate, shortNames: [cert, certs], categories: [cert-manager]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
      scale: {specReplicasPath: .spec.replicas, statusReplicasPath: .status.replicas}
    additionalPrinterColumns:
    - {name: Ready, type: string, jsonPath: ".status.conditions[?(@.type==\"Ready\")].status"}
    - {name: Secret, type: string, jsonPath: .spec.secretName}
    - {name: Age, type: date, jsonPath: .metadata.creationTimestamp}
    schema:
      openAPIV3Schema:
        type: object
        description: A Certificate asks for a signed X.509 certificate kept in a Secret.
        properties:
          spec:
            type: object
            required: [secretName, issuerRef]
            x-kubernetes-validations:
            - {rule: "self.secretName == oldSelf.secretName", message: secretName is immutable}
            - {rule: "!has(self.renewBefore) || has(self.duration)", message: renewBefore needs duration}
            properties:
              secretName: {type: string, description: Name of the Secret that holds the certificate., pattern: '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$', maxLength: 253}
              commonName: {type: string, maxLength: 64}
              dnsNames: {type: array, maxItems: 100, x-kubernetes-list-type: set, items: {type: string, maxLength: 253}}
              duration: {type: string, pattern: '^[0-9]+h$', maxLength: 16}
              renewBefore: {type: string, pattern: '^[0-9]+h$', maxLength: 16}
              replicas: {type: integer, minimum: 0}
              issuerRef:
                type: object
                required: [name]
                properties:
                  name: {type: string, maxLength: 253}
                  kind: {type: string, enum: [Issuer, ClusterIssuer], default: Issuer}
          status:
            type: object
            properties:
              replicas: {type: integer}
              conditions: {type: array, items: {type: object, properties: {type: {type: string}, status: {type: string}}}}
"#;

const MONITOR_CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: servicemonitors.monitoring.example.io}
spec:
  group: monitoring.example.io
  scope: Namespaced
  names: {plural: servicemonitors, singular: servicemonitor, kind: ServiceMonitor, shortNames: [smon], categories: [monitoring]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
      scale: {specReplicasPath: .spec.shards, statusReplicasPath: .status.shards, labelSelectorPath: .status.selector}
    additionalPrinterColumns:
    - {name: Shards, type: integer, jsonPath: .spec.shards}
    - {name: Endpoints, type: string, priority: 1, jsonPath: ".spec.endpoints[*].port"}
    - {name: Age, type: date, jsonPath: .metadata.creationTimestamp}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [selector, endpoints]
            properties:
              shards: {type: integer, minimum: 1}
              jobLabel: {type: string, description: The label whose value names the scrape job.}
              selector:
                type: object
                properties:
                  matchLabels: {type: object, additionalProperties: {type: string}}
                  matchExpressions:
                    type: array
                    items:
                      type: object
                      required: [key, operator]
                      properties:
                        key: {type: string}
                        operator: {type: string, enum: [In, NotIn, Exists, DoesNotExist]}
                        values: {type: array, items: {type: string}}
              endpoints:
                type: array
                x-kubernetes-list-type: map
                x-kubernetes-list-map-keys: [port]
                items:
                  type: object
                  required: [port]
                  properties:
                    port: {x-kubernetes-int-or-string: true}
                    interval: {type: string, pattern: '^[0-9]+(s|m)$'}
                    path: {type: string, default: /metrics}
          status:
            type: object
            properties:
              shards: {type: integer}
              selector: {type: string}
"#;

fn app_crd(ca_bundle: &str, port: u16) -> String {
    format!(
        r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {{name: apps.demo.io}}
spec:
  group: demo.io
  scope: Namespaced
  names: {{plural: apps, singular: app, kind: App, shortNames: [ap], categories: [demo]}}
  conversion:
    strategy: Webhook
    webhook:
      conversionReviewVersions: [v1]
      clientConfig: {{url: "https://127.0.0.1:{port}/convert", caBundle: "{ca_bundle}"}}
  versions:
  - name: v1alpha1
    served: true
    storage: false
    subresources: {{status: {{}}, scale: {{specReplicasPath: .spec.replicas, statusReplicasPath: .status.replicas}}}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {{type: object, properties: {{image: {{type: string}}, replicas: {{type: integer}}}}}}
          status: {{type: object, properties: {{replicas: {{type: integer}}}}}}
  - name: v1
    served: true
    storage: true
    subresources: {{status: {{}}, scale: {{specReplicasPath: .spec.replicas, statusReplicasPath: .status.replicas}}}}
    additionalPrinterColumns:
    - {{name: Image, type: string, jsonPath: .spec.container.image}}
    - {{name: Replicas, type: integer, jsonPath: .spec.replicas}}
    - {{name: Age, type: date, jsonPath: .metadata.creationTimestamp}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              replicas: {{type: integer, minimum: 0, maximum: 100}}
              container:
                type: object
                description: The container the application runs.
                required: [image]
                properties: {{image: {{type: string, minLength: 1}}, tier: {{type: string, enum: [web, worker]}}}}
          status: {{type: object, properties: {{replicas: {{type: integer}}}}}}
"#
    )
}

fn cases() -> [Case; 3] {
    [
        Case {
            crd_name: "certificates.cert.example.io",
            api_version: "cert.example.io/v1",
            kind: "Certificate",
            plural: "certificates",
            short: "cert",
            category: "cert-manager",
            columns: &["NAME", "READY", "SECRET", "AGE"],
            spec: json!({"secretName": "web-tls", "dnsNames": ["a.example.com"], "issuerRef": {"name": "ca"}}),
            merge: ("/spec/commonName", json!("web")),
            apply_spec: json!({"secretName": "web-tls", "dnsNames": ["a.example.com", "b.example.com"], "issuerRef": {"name": "ca"}, "duration": "2160h"}),
            replicas: "/spec/replicas",
            explained: "secretName",
            invalid: (json!({"spec": {"secretName": "other"}}), "spec: Invalid value: secretName is immutable"),
        },
        Case {
            crd_name: "servicemonitors.monitoring.example.io",
            api_version: "monitoring.example.io/v1",
            kind: "ServiceMonitor",
            plural: "servicemonitors",
            short: "smon",
            category: "monitoring",
            columns: &["NAME", "SHARDS", "AGE"],
            spec: json!({"shards": 1, "selector": {"matchLabels": {"app": "web"}}, "endpoints": [{"port": "web", "interval": "30s"}, {"port": 9090}]}),
            merge: ("/spec/jobLabel", json!("app")),
            apply_spec: json!({"shards": 1, "selector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}]}, "endpoints": [{"port": "web", "interval": "15s"}]}),
            replicas: "/spec/shards",
            explained: "jobLabel",
            invalid: (json!({"spec": {"endpoints": [{"port": "web"}, {"port": "web"}]}}), "spec.endpoints[1]: Duplicate value: {\"port\":\"web\"}"),
        },
        Case {
            crd_name: "apps.demo.io",
            api_version: "demo.io/v1",
            kind: "App",
            plural: "apps",
            short: "ap",
            category: "demo",
            columns: &["NAME", "IMAGE", "REPLICAS", "AGE"],
            spec: json!({"replicas": 1, "container": {"image": "nginx"}}),
            merge: ("/spec/container/tier", json!("web")),
            apply_spec: json!({"replicas": 1, "container": {"image": "nginx:2"}}),
            replicas: "/spec/replicas",
            explained: "container",
            invalid: (json!({"spec": {"replicas": 500}}), "spec.replicas: Invalid value: 500: spec.replicas in body should be less than or equal to 100"),
        },
    ]
}

struct Ctl<'a> {
    kapi: &'a Kapi,
    bin: PathBuf,
}

impl Ctl<'_> {
    fn run(&self, args: &[&str]) -> (bool, String, String) {
        self.kapi.kubectl_with(&self.bin, args).outcome()
    }

    fn ok(&self, args: &[&str]) -> String {
        self.kapi.kubectl_with(&self.bin, args).ok(&format!("kubectl {}", args.join(" ")))
    }

    fn apply_file(&self, name: &str, text: &str, extra: &[&str]) -> String {
        let path = self.kapi.data_dir().join(name);
        std::fs::write(&path, text).expect("write manifest");
        let mut args = vec!["apply", "-f", path.to_str().unwrap_or_default()];
        args.extend_from_slice(extra);
        self.ok(&args)
    }
}

fn manifest(case: &Case, name: &str, spec: &Value) -> String {
    serde_json::to_string(&json!({"apiVersion": case.api_version, "kind": case.kind, "metadata": {"name": name, "labels": {"app": "web"}}, "spec": spec}))
        .unwrap_or_default()
}

fn collection(case: &Case) -> String {
    format!("/apis/{}/namespaces/default/{}", case.api_version, case.plural)
}

fn flow(ctl: &Ctl<'_>, case: &Case) {
    let kapi = ctl.kapi;
    ctl.ok(&["wait", "--for", "condition=established", "--timeout=20s", &format!("crd/{}", case.crd_name)]);
    let item = format!("{}/a", collection(case));

    // Create (client-side apply), get with printer columns, short name, kind and category.
    ctl.apply_file(&format!("{}-a.json", case.plural), &manifest(case, "a", &case.spec), &[]);
    let table = ctl.ok(&["get", case.short]);
    let header: Vec<&str> = table.lines().next().unwrap_or_default().split_whitespace().collect();
    assert_eq!(header, case.columns, "{table}");
    assert!(table.lines().nth(1).is_some_and(|l| l.starts_with("a ")), "{table}");
    for name in [case.plural, case.kind, case.short] {
        assert!(ctl.ok(&["get", name, "a", "-o", "name"]).contains("/a"), "{name}");
    }
    assert!(ctl.ok(&["get", case.category, "-o", "name"]).contains(&format!("{}.{}/a", case.kind.to_lowercase(), case.crd_name.split_once('.').map(|x| x.1).unwrap_or_default())));

    // Patches: JSON, merge, server-side apply (a second manager).
    let before = kapi.get_json(&item);
    let rv = before["metadata"]["resourceVersion"].as_str().unwrap_or_default().to_owned();
    ctl.ok(&["patch", case.short, "a", "--type=json", "-p", r#"[{"op":"add","path":"/metadata/labels/patched","value":"json"}]"#]);
    let (pointer, value) = &case.merge;
    let mut merge = json!({});
    let mut slot = &mut merge;
    for segment in pointer.split('/').skip(1) {
        slot = &mut slot[segment];
    }
    *slot = value.clone();
    ctl.ok(&["patch", case.short, "a", "--type=merge", "-p", &merge.to_string()]);
    ctl.apply_file(&format!("{}-a-ssa.json", case.plural), &manifest(case, "a", &case.apply_spec), &["--server-side", "--field-manager=e2e-ssa", "--force-conflicts"]);
    let after = kapi.get_json(&item);
    assert_eq!(after["metadata"]["labels"]["patched"], "json", "{after}");
    assert_eq!(after.pointer(pointer), Some(value), "{after}");
    let managers: Vec<Value> = after["metadata"]["managedFields"].as_array().into_iter().flatten().map(|m| m["manager"].clone()).collect();
    assert!(managers.contains(&json!("e2e-ssa")), "{managers:?}");

    // Invalid changes are refused with kube's cause and change nothing.
    let (ok, _, stderr) = ctl.run(&["patch", case.short, "a", "--type=merge", "-p", &case.invalid.0.to_string()]);
    assert!(!ok && stderr.contains(case.invalid.1), "{stderr}");

    // Scale, then status only through the status subresource.
    ctl.ok(&["scale", &format!("{}/a", case.plural), "--replicas=3"]);
    assert_eq!(kapi.get_json(&item).pointer(case.replicas), Some(&json!(3)));
    let status_field = case.replicas.replace("/spec/", "");
    ctl.ok(&["patch", case.short, "a", "--type=merge", "-p", &format!(r#"{{"status":{{"{status_field}":2}}}}"#)]);
    assert!(kapi.get_json(&item)["status"].get(&status_field).is_none(), "status is ignored on the main resource");
    ctl.ok(&["patch", case.short, "a", "--subresource=status", "--type=merge", "-p", &format!(r#"{{"status":{{"{status_field}":2}}}}"#)]);
    let scale = kapi.get_json(&format!("{item}/scale"));
    assert_eq!((scale["spec"]["replicas"].clone(), scale["status"]["replicas"].clone()), (json!(3), json!(2)), "{scale}");

    // Watch from before the patches sees them in order.
    let out = ctl.ok(&["get", "--raw", &format!("{}?watch=1&resourceVersion={rv}&timeoutSeconds=1", collection(case))]);
    let events: Vec<Value> = out.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    assert!(events.len() >= 5 && events.iter().all(|e| e["type"] == "MODIFIED" && e["object"]["apiVersion"] == case.api_version), "{out}");

    // Explain from the published OpenAPI.
    let explain = wait_for(Duration::from_secs(5), || {
        let (ok, out, _) = ctl.run(&["explain", &format!("{}.spec", case.plural)]);
        (ok && out.contains(case.explained)).then_some(out)
    });
    assert!(explain.is_some(), "kubectl explain {}.spec names {}", case.plural, case.explained);

    // Dry-run stores nothing; delete.
    ctl.apply_file(&format!("{}-b.json", case.plural), &manifest(case, "b", &case.spec), &["--dry-run=server"]);
    assert_eq!(kapi.request(&Request::get(&format!("{}/b", collection(case)))).status, 404);
    ctl.ok(&["delete", case.short, "a"]);
    assert_eq!(kapi.request(&Request::get(&item)).status, 404);
}

fn crd_goes_with_everything(ctl: &Ctl<'_>, case: &Case) {
    let kapi = ctl.kapi;
    for name in ["x", "y"] {
        ctl.apply_file(&format!("{}-{name}.json", case.plural), &manifest(case, name, &case.spec), &[]);
    }
    let group_version = case.api_version;
    assert!(kapi.get_json("/openapi/v3")["paths"].get(format!("apis/{group_version}")).is_some());
    ctl.ok(&["delete", "crd", case.crd_name]);
    let gone = wait_for(Duration::from_secs(20), || {
        (kapi.request(&Request::get(&format!("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{}", case.crd_name))).status == 404).then_some(())
    });
    assert!(gone.is_some(), "{} deleted", case.crd_name);
    assert_eq!(kapi.request(&Request::get(&collection(case))).status, 404);
    assert_eq!(kapi.request(&Request::get(&format!("/apis/{group_version}"))).status, 404);
    assert!(!ctl.ok(&["api-resources"]).contains(&format!(" {} ", case.kind)));
    let openapi_gone = wait_for(Duration::from_secs(5), || kapi.get_json("/openapi/v3")["paths"].get(format!("apis/{group_version}")).is_none().then_some(()));
    assert!(openapi_gone.is_some(), "OpenAPI part of {group_version} removed");
}

fn run_with(bin: PathBuf) {
    let kapi = Kapi::start().expect("start kapi");
    let webhook = ConversionWebhook::start().expect("start the conversion webhook");
    let ctl = Ctl { kapi: &kapi, bin };
    for (file, text) in [("cert-crd.yaml", CERT_CRD.to_owned()), ("monitor-crd.yaml", MONITOR_CRD.to_owned()), ("app-crd.yaml", app_crd(&webhook.ca_bundle, webhook.port))] {
        let path = kapi.data_dir().join(file);
        std::fs::write(&path, text).expect("write crd");
        ctl.ok(&["create", "-f", path.to_str().unwrap_or_default()]);
    }
    let cases = cases();
    for case in &cases {
        flow(&ctl, case);
    }
    // The application stored through v1alpha1 reads back in v1 through the webhook.
    let alpha = json!({"apiVersion": "demo.io/v1alpha1", "kind": "App", "metadata": {"name": "old"}, "spec": {"image": "busybox", "replicas": 1}});
    let r = kapi.request(&Request::new("POST", "/apis/demo.io/v1alpha1/namespaces/default/apps").json(&alpha));
    assert_eq!(r.status, 201, "{}", r.raw);
    assert_eq!(kapi.get_json("/apis/demo.io/v1/namespaces/default/apps/old")["spec"]["container"]["image"], "busybox");
    let table = ctl.ok(&["get", "apps.v1.demo.io", "old"]);
    assert!(table.contains("busybox"), "{table}");
    for case in &cases {
        crd_goes_with_everything(&ctl, case);
    }
    drop(webhook);
}

#[test]
fn three_operator_crds_with_default_kubectl() {
    run_with(PathBuf::from("kubectl"));
}

#[test]
fn three_operator_crds_with_kubectl_1_27() {
    match versioned_kubectl("1.27") {
        Ok(bin) => run_with(bin),
        Err(e) => eprintln!("skipping: kubectl 1.27 is not installed here ({e})"),
    }
}
