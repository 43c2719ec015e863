//! Built-in kinds as kube-apiserver answers for them: admissionregistration validation (422 with
//! kube's causes, nothing stored), `kubectl get` columns as kube's printers give them, and RBAC
//! bindings that re-apply `unchanged` and then move to server-side apply without a conflict.

use std::path::PathBuf;

use kapi_e2e::{Kapi, OutputExt, Request};
use serde_json::{json, Value};

const WEBHOOKS: &str = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations";
const MUTATING: &str = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations";

fn hook() -> Value {
    json!({
        "name": "check.example.com",
        "clientConfig": {"service": {"name": "svc", "namespace": "default", "path": "/validate"}},
        "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}],
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"]
    })
}

fn configuration(kind: &str, name: &str, hook: Value) -> Value {
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind, "metadata": {"name": name},
        "webhooks": [hook]})
}

/// POSTs an invalid configuration: kube's 422 with its causes, and nothing stored.
fn refused(kapi: &Kapi, path: &str, kind: &str, hook: Value, causes: &[(&str, &str)]) {
    let name = "bad";
    let resp = kapi.request(&Request::new("POST", path).json(&configuration(kind, name, hook)));
    assert_eq!(resp.status, 422, "{kind}: {}", resp.body);
    assert_eq!(resp.body["reason"], "Invalid");
    assert_eq!(resp.body["details"]["kind"], kind);
    assert_eq!(resp.body["details"]["group"], "admissionregistration.k8s.io");
    let got: Vec<(String, String)> = resp.body["details"]["causes"]
        .as_array()
        .expect("causes")
        .iter()
        .map(|c| (c["field"].as_str().unwrap_or("").to_string(), c["message"].as_str().unwrap_or("").to_string()))
        .collect();
    let want: Vec<(String, String)> = causes.iter().map(|(f, m)| (f.to_string(), m.to_string())).collect();
    assert_eq!(got, want, "{kind}");
    let first = causes.iter().map(|(f, m)| format!("{f}: {m}")).collect::<Vec<_>>();
    let message = if first.len() == 1 { first[0].clone() } else { format!("[{}]", first.join(", ")) };
    assert_eq!(
        resp.body["message"],
        format!("{kind}.admissionregistration.k8s.io \"{name}\" is invalid: {message}"),
        "{kind}"
    );
    let get = kapi.request(&Request::get(&format!("{path}/{name}")));
    assert_eq!(get.status, 404, "{kind} was stored: {}", get.body);
}

#[test]
fn invalid_webhook_configurations_are_refused() {
    let kapi = Kapi::start().expect("start kapi");
    let vwc = "ValidatingWebhookConfiguration";
    let mwc = "MutatingWebhookConfiguration";

    let mut no_side_effects = hook();
    no_side_effects.as_object_mut().unwrap().remove("sideEffects");
    refused(
        &kapi,
        WEBHOOKS,
        vwc,
        no_side_effects,
        &[("webhooks[0].sideEffects", "Required value: must specify one of None, NoneOnDryRun")],
    );

    let mut slow = hook();
    slow["timeoutSeconds"] = json!(31);
    slow["sideEffects"] = json!("Some");
    refused(
        &kapi,
        MUTATING,
        mwc,
        slow,
        &[
            ("webhooks[0].sideEffects", "Unsupported value: \"Some\": supported values: \"None\", \"NoneOnDryRun\""),
            ("webhooks[0].timeoutSeconds", "Invalid value: 31: the timeout value must be between 1 and 30 seconds"),
        ],
    );

    let mut http = hook();
    http["clientConfig"] = json!({"url": "http://hook.example.com/v"});
    http["admissionReviewVersions"] = json!([]);
    refused(
        &kapi,
        WEBHOOKS,
        vwc,
        http,
        &[
            (
                "webhooks[0].clientConfig.url",
                "Invalid value: \"http\": 'https' is the only allowed URL scheme; desired format: https://host[/path]",
            ),
            ("webhooks[0].admissionReviewVersions", "Required value: must specify one of v1, v1beta1"),
        ],
    );

    let mut rules = hook();
    rules["rules"][0]["operations"] = json!(["PATCH"]);
    rules["rules"][0]["resources"] = json!(["*/*", "pods"]);
    refused(
        &kapi,
        WEBHOOKS,
        vwc,
        rules,
        &[
            (
                "webhooks[0].rules[0].operations[0]",
                "Unsupported value: \"PATCH\": supported values: \"*\", \"CONNECT\", \"CREATE\", \"DELETE\", \"UPDATE\"",
            ),
            (
                "webhooks[0].rules[0].resources",
                "Invalid value: []string{\"*/*\", \"pods\"}: if '*/*' is present, must not specify other resources",
            ),
        ],
    );

    // The valid configuration is stored, defaulted.
    let ok = kapi.request(&Request::new("POST", WEBHOOKS).json(&configuration(vwc, "good", hook())));
    assert_eq!(ok.status, 201, "{}", ok.body);
    assert_eq!(ok.body["webhooks"][0]["timeoutSeconds"], 10);
}

fn write(kapi: &Kapi, name: &str, yaml: &str) -> PathBuf {
    let path = kapi.data_dir().join(name);
    std::fs::write(&path, yaml).expect("write manifest");
    path
}

/// `kubectl get` output as rows of cells (kubectl separates columns by at least two spaces
/// when no cell contains two spaces itself).
fn table(out: &str) -> Vec<Vec<String>> {
    out.lines()
        .map(|l| l.split("  ").map(str::trim).filter(|c| !c.is_empty()).map(String::from).collect())
        .collect()
}

const SAMPLES: &str = r#"
apiVersion: v1
kind: ServiceAccount
metadata: {name: builder, namespace: default}
secrets: [{name: builder-token}]
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web, namespace: default}
spec:
  minAvailable: 1
  selector: {matchLabels: {app: web}}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: deny, namespace: default}
spec:
  podSelector: {matchLabels: {app: web}}
---
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: nginx}
spec:
  controller: k8s.io/ingress-nginx
  parameters: {apiGroup: k8s.example.com, kind: IngressParameters, name: external}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: check}
webhooks:
- name: check.example.com
  clientConfig: {service: {name: svc, namespace: default}}
  sideEffects: None
  admissionReviewVersions: [v1]
- name: check2.example.com
  clientConfig: {url: "https://hook.example.com/v"}
  sideEffects: NoneOnDryRun
  admissionReviewVersions: [v1]
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {name: v1.metrics.example.com}
spec:
  group: metrics.example.com
  version: v1
  groupPriorityMinimum: 100
  versionPriority: 100
  service: {namespace: monitoring, name: metrics}
"#;

#[test]
fn kubectl_get_prints_kube_columns() {
    let kapi = Kapi::start().expect("start kapi");
    let file = write(&kapi, "samples.yaml", SAMPLES);
    kapi.kubectl(&["apply", "-f", &file.display().to_string()]).ok("apply samples");

    // APIService availability comes from its status: kube prints the Available condition,
    // `Unknown` without one.
    let api: Value = serde_json::from_str(
        &kapi.kubectl(&["get", "apiservice", "v1.metrics.example.com", "-o", "json"]).ok("get apiservice"),
    )
    .expect("APIService JSON");
    let available = api["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "Available"))
        .map(|c| match (c["status"].as_str().unwrap_or(""), c["reason"].as_str().unwrap_or("")) {
            (s, r) if s != "True" && !r.is_empty() => format!("{s} ({r})"),
            (s, _) => s.to_string(),
        })
        .unwrap_or_else(|| "Unknown".to_string());

    let cases: [(&[&str], &[&str], Vec<&str>); 6] = [
        (&["serviceaccount", "builder"], &["NAME", "SECRETS", "AGE"], vec!["builder", "1"]),
        (
            &["pdb", "web"],
            &["NAME", "MIN AVAILABLE", "MAX UNAVAILABLE", "ALLOWED DISRUPTIONS", "AGE"],
            vec!["web", "1", "N/A", "0"],
        ),
        (&["networkpolicy", "deny"], &["NAME", "POD-SELECTOR", "AGE"], vec!["deny", "app=web"]),
        (
            &["ingressclass", "nginx"],
            &["NAME", "CONTROLLER", "PARAMETERS", "AGE"],
            vec!["nginx", "k8s.io/ingress-nginx", "IngressParameters.k8s.example.com/external"],
        ),
        (&["validatingwebhookconfiguration", "check"], &["NAME", "WEBHOOKS", "AGE"], vec!["check", "2"]),
        (
            &["apiservice", "v1.metrics.example.com"],
            &["NAME", "SERVICE", "AVAILABLE", "AGE"],
            vec!["v1.metrics.example.com", "monitoring/metrics", available.as_str()],
        ),
    ];
    for (args, headers, cells) in cases {
        let out = kapi.kubectl(&[&["get"], args].concat()).ok(&format!("kubectl get {}", args.join(" ")));
        let rows = table(&out);
        assert_eq!(rows.len(), 2, "{out}");
        assert_eq!(rows[0], headers, "{out}");
        assert_eq!(rows[1].len(), headers.len(), "{out}");
        assert_eq!(&rows[1][..cells.len()], cells.as_slice(), "{out}");
        let age = rows[1].last().expect("age");
        assert!(age.ends_with('s') || age.ends_with('m'), "age cell {age:?} in {out}");
    }
}

const BINDING: &str = r#"
apiVersion: v1
kind: ServiceAccount
metadata: {name: deployer, namespace: default}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: deployer, namespace: default}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: edit}
subjects:
- kind: ServiceAccount
  name: deployer
  namespace: default
- kind: User
  name: alice
  apiGroup: rbac.authorization.k8s.io
"#;

#[test]
fn rbac_binding_reapplies_unchanged_and_moves_to_server_side() {
    let kapi = Kapi::start().expect("start kapi");
    let file = write(&kapi, "binding.yaml", BINDING).display().to_string();
    let first = kapi.kubectl(&["apply", "-f", &file]).ok("first apply");
    assert!(first.contains("rolebinding.rbac.authorization.k8s.io/deployer created"), "{first}");

    // kube omits the ServiceAccount subject's empty apiGroup (`omitempty`).
    let rb = kapi.get_json("/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings/deployer");
    assert_eq!(rb["subjects"][0], json!({"kind": "ServiceAccount", "name": "deployer", "namespace": "default"}));

    let again = kapi.kubectl(&["apply", "-f", &file]).ok("second apply");
    for line in ["serviceaccount/deployer unchanged", "rolebinding.rbac.authorization.k8s.io/deployer unchanged"] {
        assert!(again.lines().any(|l| l.trim() == line), "lacks {line:?}:\n{again}");
    }

    let out = kapi.kubectl(&["apply", "--server-side", "-f", &file]);
    let stdout = out.ok("server-side apply over the client-side apply");
    assert!(stdout.contains("rolebinding.rbac.authorization.k8s.io/deployer serverside-applied"), "{stdout}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("conflict"), "{stderr}");
}
