use serde_json::{json, Value};

use super::*;

fn messages(causes: &[Cause]) -> Vec<String> {
    causes.iter().map(|c| c.message.clone()).collect()
}

fn defaulted(group: &str, kind: &str, mut obj: Value) -> Value {
    crate::defaults::apply_defaults(group, kind, &mut obj);
    obj
}

#[test]
fn name_rules() {
    assert_eq!(name_rule("", "Namespace"), NameRule::Dns1123Label);
    assert_eq!(name_rule("", "Service"), NameRule::Dns1035Label);
    assert_eq!(name_rule("rbac.authorization.k8s.io", "ClusterRole"), NameRule::PathSegment);
    assert_eq!(name_rule("apps", "Deployment"), NameRule::Dns1123Subdomain);
}

#[test]
fn valid_pod_has_no_causes() {
    let pod = defaulted(
        "",
        "Pod",
        json!({"metadata": {"name": "p"}, "spec": {"containers": [
        {"name": "web", "image": "nginx", "ports": [{"containerPort": 80, "name": "http"}]}]}}),
    );
    assert_eq!(messages(&validate("", "Pod", &pod)), Vec::<String>::new());
}

#[test]
fn bad_pods() {
    let none = defaulted("", "Pod", json!({"spec": {}}));
    assert_eq!(messages(&validate("", "Pod", &none)), vec!["spec.containers: Required value"]);

    let pod = defaulted(
        "",
        "Pod",
        json!({"spec": {"restartPolicy": "Sometimes", "containers": [
            {"name": "Web", "image": "nginx", "ports": [{"containerPort": 70000}]},
            {"name": "b", "image": ""},
            {"name": "b", "image": "x", "volumeMounts": [{"name": "missing", "mountPath": "/m"}]}
        ]}}),
    );
    let got = messages(&validate("", "Pod", &pod));
    let want = [
        "spec.containers[0].name: Invalid value: \"Web\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
        "spec.containers[0].ports[0].containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive",
        "spec.containers[1].image: Required value",
        "spec.containers[2].name: Duplicate value: \"b\"",
        "spec.containers[2].volumeMounts[0].name: Not found: \"missing\"",
        "spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnFailure\", \"Never\"",
    ];
    for w in want {
        assert!(got.iter().any(|g| g == w), "missing {w:?} in {got:#?}");
    }
    assert_eq!(got.len(), want.len(), "{got:#?}");
}

#[test]
fn deployment_selector_rules() {
    let base = json!({"spec": {"selector": {"matchLabels": {"app": "web"}}, "template": {
        "metadata": {"labels": {"app": "other"}}, "spec": {"containers": [{"name": "a", "image": "x"}]}}}});
    let d = defaulted("apps", "Deployment", base);
    let got = messages(&validate("apps", "Deployment", &d));
    assert_eq!(
        got,
        vec!["spec.template.metadata.labels: Invalid value: {\"app\":\"other\"}: `selector` does not match template `labels`"]
    );

    let mut missing = d.clone();
    missing["spec"].as_object_mut().unwrap().remove("selector");
    let got = messages(&validate("apps", "Deployment", &missing));
    assert_eq!(got[0], "spec.selector: Required value");
    assert!(got[1].contains("`selector` does not match template `labels`"));

    let mut never = d.clone();
    never["spec"]["template"]["metadata"]["labels"] = json!({"app": "web"});
    never["spec"]["template"]["spec"]["restartPolicy"] = json!("Never");
    assert_eq!(
        messages(&validate("apps", "Deployment", &never)),
        vec!["spec.template.spec.restartPolicy: Unsupported value: \"Never\": supported values: \"Always\""]
    );
}

#[test]
fn job_restart_policy_and_generated_selector() {
    let mut job = defaulted(
        "batch",
        "Job",
        json!({"metadata": {"name": "pi", "uid": "u1"}, "spec": {"template": {
        "spec": {"containers": [{"name": "pi", "image": "perl"}]}}}}),
    );
    crate::defaults::prepare_for_create("batch", "Job", &mut job);
    assert_eq!(
        messages(&validate("batch", "Job", &job)),
        vec!["spec.template.spec.restartPolicy: Unsupported value: \"Always\": supported values: \"OnFailure\", \"Never\""]
    );
    job["spec"]["template"]["spec"]["restartPolicy"] = json!("Never");
    assert!(validate("batch", "Job", &job).is_empty());

    let mut user_sel = defaulted(
        "batch",
        "Job",
        json!({"metadata": {"name": "pi", "uid": "u1"}, "spec": {
        "selector": {"matchLabels": {"a": "b"}},
        "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"restartPolicy": "Never",
            "containers": [{"name": "pi", "image": "perl"}]}}}}),
    );
    crate::defaults::prepare_for_create("batch", "Job", &mut user_sel);
    let got = messages(&validate("batch", "Job", &user_sel));
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(got[0].starts_with("spec.selector: Invalid value: ") && got[0].ends_with("`selector` not auto-generated"));

    let mut manual = user_sel.clone();
    manual["spec"]["manualSelector"] = json!(true);
    manual["spec"]["selector"] = json!({"matchLabels": {"a": "b"}});
    assert!(validate("batch", "Job", &manual).is_empty());
}

#[test]
fn service_rules() {
    let no_ports = defaulted("", "Service", json!({"spec": {"selector": {"app": "x"}}}));
    assert_eq!(messages(&validate("", "Service", &no_ports)), vec!["spec.ports: Required value"]);

    let headless = defaulted("", "Service", json!({"spec": {"clusterIP": "None"}}));
    assert!(validate("", "Service", &headless).is_empty());

    let bad = defaulted(
        "",
        "Service",
        json!({"spec": {"type": "Fancy", "ports": [
        {"port": 0, "protocol": "HTTP"}, {"port": 80, "name": "web"}]}}),
    );
    let got = messages(&validate("", "Service", &bad));
    let want = [
        "spec.type: Unsupported value: \"Fancy\": supported values: \"ClusterIP\", \"ExternalName\", \"LoadBalancer\", \"NodePort\"",
        "spec.ports[0].name: Required value",
        "spec.ports[0].protocol: Unsupported value: \"HTTP\": supported values: \"SCTP\", \"TCP\", \"UDP\"",
        "spec.ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive",
        "spec.ports[0].targetPort: Invalid value: 0: must be between 1 and 65535, inclusive",
    ];
    assert_eq!(got, want);

    let ext = json!({"spec": {"type": "ExternalName"}});
    assert_eq!(messages(&validate("", "Service", &ext)), vec!["spec.externalName: Required value"]);
}

#[test]
fn service_cluster_ip_is_immutable_once_set() {
    let old = json!({"spec": {"clusterIP": "10.0.0.5", "clusterIPs": ["10.0.0.5"]}});
    let same = old.clone();
    assert!(validate_update("", "Service", &same, &old).is_empty());
    let changed = json!({"spec": {"clusterIP": "10.0.0.6", "clusterIPs": ["10.0.0.6"]}});
    assert_eq!(
        messages(&validate_update("", "Service", &changed, &old)),
        vec!["spec.clusterIPs[0]: Invalid value: [\"10.0.0.6\"]: may not change once set"]
    );
    let from_empty = json!({"spec": {"clusterIP": ""}});
    assert!(validate_update("", "Service", &changed, &from_empty).is_empty());
}

#[test]
fn config_keys_and_secret_data() {
    let cm = json!({"data": {"ok.key": "v", "bad key": "v"}});
    assert_eq!(
        messages(&validate("", "ConfigMap", &cm)),
        vec!["data[bad key]: Invalid value: \"bad key\": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-file.txt', regex used for validation is '[-._a-zA-Z0-9]+')"]
    );
    let secret = json!({"type": "Opaque", "data": {"a": "aGVsbG8=", "b": "not base64!"}});
    let got = messages(&validate("", "Secret", &secret));
    assert_eq!(got.len(), 1);
    assert!(
        got[0].starts_with("data[b]: Invalid value") && got[0].contains("illegal base64 data at input byte 3"),
        "{got:?}"
    );
    let tls = json!({"type": "kubernetes.io/tls", "data": {"tls.crt": "YQ=="}});
    assert_eq!(messages(&validate("", "Secret", &tls)), vec!["data[tls.key]: Required value"]);
}

#[test]
fn immutable_config_map() {
    let old = json!({"immutable": true, "data": {"a": "1"}});
    let new = json!({"immutable": true, "data": {"a": "2"}});
    assert_eq!(
        messages(&validate_update("", "ConfigMap", &new, &old)),
        vec!["data: Forbidden: field is immutable when `immutable` is set"]
    );
    assert!(validate_update("", "ConfigMap", &old, &old).is_empty());
}

#[test]
fn selector_immutable_on_update() {
    let old = json!({"spec": {"selector": {"matchLabels": {"a": "1"}}}});
    let new = json!({"spec": {"selector": {"matchLabels": {"a": "2"}}}});
    let got = messages(&validate_update("apps", "Deployment", &new, &old));
    assert_eq!(got, vec!["spec.selector: Invalid value: {\"matchLabels\":{\"a\":\"2\"}}: field is immutable"]);
}

#[test]
fn rbac_rules_need_verbs() {
    let role = json!({"rules": [{"apiGroups": [""], "resources": ["pods"]}, {"verbs": ["get"], "nonResourceURLs": ["/healthz"]}]});
    assert_eq!(
        messages(&validate("rbac.authorization.k8s.io", "Role", &role)),
        vec![
            "rules[0].verbs: Required value: verbs must contain at least one value",
            "rules[1].nonResourceURLs: Invalid value: [\"/healthz\"]: namespaced rules cannot apply to non-resource URLs",
        ]
    );
}

#[test]
fn cron_schedule() {
    let cj = |s: &str| {
        json!({"metadata": {"name": "c"}, "spec": {"schedule": s, "jobTemplate": {"spec": {"template": {
        "spec": {"restartPolicy": "OnFailure", "dnsPolicy": "ClusterFirst", "containers": [
            {"name": "a", "image": "x", "imagePullPolicy": "Always"}]}}}}}})
    };
    assert!(validate("batch", "CronJob", &cj("*/5 * * * *")).is_empty());
    assert!(validate("batch", "CronJob", &cj("@hourly")).is_empty());
    assert_eq!(
        messages(&validate("batch", "CronJob", &cj("* * *"))),
        vec!["spec.schedule: Invalid value: \"* * *\": expected exactly 5 fields, found 3: [* * *]"]
    );
    assert_eq!(
        messages(&validate("batch", "CronJob", &cj("0-70 * * * *"))),
        vec!["spec.schedule: Invalid value: \"0-70 * * * *\": end of range (70) above maximum (59): 0-70"]
    );
}

#[test]
fn unknown_kinds_are_accepted() {
    assert!(validate("example.com", "Widget", &json!({"spec": 1})).is_empty());
    assert!(validate_update("example.com", "Widget", &json!({}), &json!({"a": 1})).is_empty());
}

#[test]
fn stateful_set_containers_may_mount_claim_templates() {
    let sts = |mount: &str| {
        defaulted(
            "apps",
            "StatefulSet",
            json!({"metadata": {"name": "db"}, "spec": {
                "selector": {"matchLabels": {"app": "db"}},
                "template": {"metadata": {"labels": {"app": "db"}}, "spec": {"containers": [
                    {"name": "db", "image": "postgres", "volumeMounts": [{"name": mount, "mountPath": "/data"}]}]}},
                "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"]}}]}}),
        )
    };
    assert_eq!(messages(&validate("apps", "StatefulSet", &sts("data"))), Vec::<String>::new());
    let bad = validate("apps", "StatefulSet", &sts("other"));
    assert_eq!(bad.len(), 1, "{bad:?}");
    assert_eq!(bad[0].field, "spec.template.spec.containers[0].volumeMounts[0].name");
}
