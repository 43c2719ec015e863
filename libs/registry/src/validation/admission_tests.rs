//! admissionregistration.k8s.io validation against kube's exact messages: each case changes one
//! thing in a valid, defaulted configuration and expects kube's causes, in kube's order.

use serde_json::{json, Value};

use super::*;

const VWC: &str = "ValidatingWebhookConfiguration";
const MWC: &str = "MutatingWebhookConfiguration";

fn hook() -> Value {
    json!({
        "name": "check.example.com",
        "clientConfig": {"service": {"name": "svc", "namespace": "ns", "path": "/validate"}},
        "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}],
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"]
    })
}

fn config(kind: &str, hooks: Vec<Value>) -> Value {
    let mut obj = json!({"metadata": {"name": "c"}, "webhooks": hooks});
    crate::defaults::apply_defaults(ADMISSION, kind, &mut obj);
    obj
}

fn messages_of(kind: &str, obj: &Value) -> Vec<String> {
    validate(ADMISSION, kind, obj)
        .into_iter()
        .map(|c| c.message)
        .collect()
}

/// One hook changed by `edit`: the messages both configuration kinds give.
fn check(edit: impl Fn(&mut Value), want: &[&str]) {
    for kind in [VWC, MWC] {
        let mut h = hook();
        edit(&mut h);
        let got = messages_of(kind, &config(kind, vec![h]));
        assert_eq!(got, want, "{kind}");
    }
}

#[test]
fn valid_configurations_pass() {
    check(|_| {}, &[]);
    check(
        |h| h["clientConfig"] = json!({"url": "https://hook.example.com:8443/v"}),
        &[],
    );
    check(|h| h["sideEffects"] = json!("NoneOnDryRun"), &[]);
    check(
        |h| h["rules"][0]["resources"] = json!(["pods", "pods/status", "deployments/*"]),
        &[],
    );
    check(
        |h| h["matchConditions"] = json!([{"name": "not-system", "expression": "true"}]),
        &[],
    );
    assert!(messages_of(VWC, &config(VWC, vec![])).is_empty());
}

#[test]
fn side_effects_required_and_supported() {
    check(
        |h| drop(h.as_object_mut().unwrap().remove("sideEffects")),
        &["webhooks[0].sideEffects: Required value: must specify one of None, NoneOnDryRun"],
    );
    check(
        |h| h["sideEffects"] = json!("Unknown"),
        &["webhooks[0].sideEffects: Unsupported value: \"Unknown\": supported values: \"None\", \"NoneOnDryRun\""],
    );
    check(
        |h| h["sideEffects"] = json!("Some"),
        &["webhooks[0].sideEffects: Unsupported value: \"Some\": supported values: \"None\", \"NoneOnDryRun\""],
    );
}

#[test]
fn admission_review_versions() {
    check(
        |h| h["admissionReviewVersions"] = json!([]),
        &["webhooks[0].admissionReviewVersions: Required value: must specify one of v1, v1beta1"],
    );
    check(
        |h| h["admissionReviewVersions"] = json!(["v2"]),
        &["webhooks[0].admissionReviewVersions: Invalid value: []string{\"v2\"}: must include at least one of v1, v1beta1"],
    );
    check(
        |h| h["admissionReviewVersions"] = json!(["v1", "v1"]),
        &["webhooks[0].admissionReviewVersions[1]: Invalid value: \"v1\": duplicate version"],
    );
    check(
        |h| h["admissionReviewVersions"] = json!(["v1", "V1"]),
        &["webhooks[0].admissionReviewVersions[1]: Invalid value: \"V1\": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"],
    );
}

#[test]
fn webhook_names() {
    check(
        |h| h["name"] = json!(""),
        &["webhooks[0].name: Required value"],
    );
    check(
        |h| h["name"] = json!("check.example"),
        &["webhooks[0].name: Invalid value: \"check.example\": should be a domain with at least three segments separated by dots"],
    );
    check(
        |h| h["name"] = json!("Check.example.com"),
        &["webhooks[0].name: Invalid value: \"Check.example.com\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"],
    );
    for kind in [VWC, MWC] {
        let got = messages_of(kind, &config(kind, vec![hook(), hook()]));
        assert_eq!(
            got,
            ["webhooks[1].name: Duplicate value: \"check.example.com\""],
            "{kind}"
        );
    }
}

#[test]
fn client_config_url_or_service() {
    check(
        |h| h["clientConfig"] = json!({}),
        &["webhooks[0].clientConfig: Required value: exactly one of url or service is required"],
    );
    check(
        |h| h["clientConfig"]["url"] = json!("https://a.example.com"),
        &["webhooks[0].clientConfig: Required value: exactly one of url or service is required"],
    );
    check(
        |h| h["clientConfig"] = json!({"url": "http://hook.example.com/v"}),
        &["webhooks[0].clientConfig.url: Invalid value: \"http\": 'https' is the only allowed URL scheme; desired format: https://host[/path]"],
    );
    check(
        |h| h["clientConfig"] = json!({"url": "https://u:p@hook.example.com/v?x=1#f"}),
        &[
            "webhooks[0].clientConfig.url: Invalid value: \"u:p\": user information is not permitted in the URL",
            "webhooks[0].clientConfig.url: Invalid value: \"f\": fragments are not permitted in the URL",
            "webhooks[0].clientConfig.url: Invalid value: \"x=1\": query parameters are not permitted in the URL",
        ],
    );
    check(
        |h| h["clientConfig"] = json!({"url": "hook.example.com/v"}),
        &[
            "webhooks[0].clientConfig.url: Invalid value: \"\": 'https' is the only allowed URL scheme; desired format: https://host[/path]",
            "webhooks[0].clientConfig.url: Invalid value: \"\": host must be specified; desired format: https://host[/path]",
        ],
    );
    check(
        |h| h["clientConfig"] = json!({"url": "://x"}),
        &["webhooks[0].clientConfig.url: Required value: url must be a valid URL: parse \"://x\": missing protocol scheme; desired format: https://host[/path]"],
    );
}

#[test]
fn client_config_service() {
    // kube swaps name and namespace in these paths (kubernetes/kubernetes#141353).
    check(
        |h| h["clientConfig"]["service"] = json!({"name": "svc"}),
        &["webhooks[0].clientConfig.service.name: Required value"],
    );
    check(
        |h| h["clientConfig"]["service"]["port"] = json!(70000),
        &["webhooks[0].clientConfig.service.port: Invalid value: 70000: port is not valid: must be between 1 and 65535, inclusive"],
    );
    check(
        |h| h["clientConfig"]["service"]["path"] = json!("validate"),
        &["webhooks[0].clientConfig.service.path: Invalid value: \"validate\": must start with a '/'"],
    );
    check(
        |h| h["clientConfig"]["service"]["path"] = json!("/a//b"),
        &["webhooks[0].clientConfig.service.path: Invalid value: \"/a//b\": segment[1] may not be empty"],
    );
    check(
        |h| h["clientConfig"]["service"]["path"] = json!("/Upper"),
        &["webhooks[0].clientConfig.service.path: Invalid value: \"/Upper\": segment[0]: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"],
    );
}

#[test]
fn rules() {
    check(
        |h| h["rules"] = json!([{}]),
        &[
            "webhooks[0].rules[0].operations: Required value",
            "webhooks[0].rules[0].apiGroups: Required value",
            "webhooks[0].rules[0].apiVersions: Required value",
            "webhooks[0].rules[0].resources: Required value",
        ],
    );
    check(
        |h| h["rules"][0]["operations"] = json!(["*", "CREATE", "PATCH"]),
        &[
            "webhooks[0].rules[0].operations: Invalid value: []admissionregistration.OperationType{\"*\", \"CREATE\", \"PATCH\"}: if '*' is present, must not specify other operations",
            "webhooks[0].rules[0].operations[2]: Unsupported value: \"PATCH\": supported values: \"*\", \"CONNECT\", \"CREATE\", \"DELETE\", \"UPDATE\"",
        ],
    );
    check(
        |h| h["rules"][0]["apiGroups"] = json!(["*", "apps"]),
        &["webhooks[0].rules[0].apiGroups: Invalid value: []string{\"*\", \"apps\"}: if '*' is present, must not specify other API groups"],
    );
    check(
        |h| h["rules"][0]["apiVersions"] = json!(["v1", ""]),
        &["webhooks[0].rules[0].apiVersions[1]: Required value"],
    );
    check(
        |h| h["rules"][0]["scope"] = json!("Global"),
        &["webhooks[0].rules[0].scope: Unsupported value: \"Global\": supported values: \"*\", \"Cluster\", \"Namespaced\""],
    );
}

#[test]
fn resources_and_wildcards() {
    check(
        |h| h["rules"][0]["resources"] = json!(["*/*", "pods"]),
        &["webhooks[0].rules[0].resources: Invalid value: []string{\"*/*\", \"pods\"}: if '*/*' is present, must not specify other resources"],
    );
    check(
        |h| h["rules"][0]["resources"] = json!(["*", "pods"]),
        &["webhooks[0].rules[0].resources: Invalid value: []string{\"*\", \"pods\"}: if '*' is present, must not specify other resources without subresources"],
    );
    check(
        |h| h["rules"][0]["resources"] = json!(["pods/*", "pods/status"]),
        &["webhooks[0].rules[0].resources[1]: Invalid value: \"pods/status\": if 'pods/*' is present, must not specify pods/status"],
    );
    check(
        |h| h["rules"][0]["resources"] = json!(["*/status", "pods/status"]),
        &["webhooks[0].rules[0].resources[1]: Invalid value: \"pods/status\": if '*/status' is present, must not specify pods/status"],
    );
    check(
        |h| h["rules"][0]["resources"] = json!(["pods", ""]),
        &["webhooks[0].rules[0].resources[1]: Required value"],
    );
}

#[test]
fn policies_timeouts_and_selectors() {
    check(
        |h| h["failurePolicy"] = json!("Retry"),
        &["webhooks[0].failurePolicy: Unsupported value: \"Retry\": supported values: \"Fail\", \"Ignore\""],
    );
    check(
        |h| h["matchPolicy"] = json!("Loose"),
        &["webhooks[0].matchPolicy: Unsupported value: \"Loose\": supported values: \"Equivalent\", \"Exact\""],
    );
    check(
        |h| h["timeoutSeconds"] = json!(31),
        &["webhooks[0].timeoutSeconds: Invalid value: 31: the timeout value must be between 1 and 30 seconds"],
    );
    check(
        |h| h["timeoutSeconds"] = json!(0),
        &["webhooks[0].timeoutSeconds: Invalid value: 0: the timeout value must be between 1 and 30 seconds"],
    );
    check(
        |h| h["namespaceSelector"] = json!({"matchExpressions": [{"key": "env", "operator": "Equals", "values": ["a"]}]}),
        &["webhooks[0].namespaceSelector.matchExpressions[0].operator: Invalid value: \"Equals\": not a valid selector operator"],
    );
    check(
        |h| h["objectSelector"] = json!({"matchExpressions": [{"key": "env", "operator": "In"}]}),
        &["webhooks[0].objectSelector.matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'"],
    );
    check(
        |h| h["objectSelector"] = json!({"matchExpressions": [{"key": "env", "operator": "Exists", "values": ["x"]}]}),
        &["webhooks[0].objectSelector.matchExpressions[0].values: Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'"],
    );
}

#[test]
fn reinvocation_policy_is_mutating_only() {
    let mut h = hook();
    h["reinvocationPolicy"] = json!("Always");
    assert_eq!(
        messages_of(MWC, &config(MWC, vec![h.clone()])),
        ["webhooks[0].reinvocationPolicy: Unsupported value: \"Always\": supported values: \"IfNeeded\", \"Never\""]
    );
    // A validating webhook has no such field: the decoder drops it before validation.
    h.as_object_mut().unwrap().remove("reinvocationPolicy");
    assert_eq!(
        config(MWC, vec![h])["webhooks"][0]["reinvocationPolicy"],
        "Never"
    );
}

#[test]
fn match_conditions() {
    check(
        |h| h["matchConditions"] = json!([{"name": "", "expression": " "}]),
        &[
            "webhooks[0].matchConditions[0].expression: Required value",
            "webhooks[0].matchConditions[0].name: Required value",
        ],
    );
    check(
        |h| {
            h["matchConditions"] =
                json!([{"name": "a", "expression": "true"}, {"name": "a", "expression": "false"}])
        },
        &["webhooks[0].matchConditions[1].name: Duplicate value: \"a\""],
    );
    check(
        |h| h["matchConditions"] = json!([{"name": "not ok", "expression": "true"}]),
        &["webhooks[0].matchConditions[0].name: Invalid value: \"not ok\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"],
    );
}

fn policy(spec: Value) -> Value {
    json!({"metadata": {"name": "p"}, "spec": spec})
}

fn policy_messages(kind: &str, obj: &Value) -> Vec<String> {
    validate(ADMISSION, kind, obj)
        .into_iter()
        .map(|c| c.message)
        .collect()
}

#[test]
fn validating_admission_policy() {
    let rules = json!({"resourceRules": [{"operations": ["CREATE"], "apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["deployments"]}]});
    let ok = policy(
        json!({"matchConstraints": rules, "validations": [{"expression": "object.spec.replicas <= 5"}]}),
    );
    assert!(policy_messages("ValidatingAdmissionPolicy", &ok).is_empty());
    let bad =
        policy(json!({"failurePolicy": "Never", "paramKind": {"apiVersion": "a/b/c", "kind": ""}}));
    assert_eq!(
        policy_messages("ValidatingAdmissionPolicy", &bad),
        [
            "spec.failurePolicy: Unsupported value: \"Never\": supported values: \"Fail\", \"Ignore\"",
            "spec.paramKind.apiVersion: Invalid value: \"a/b/c\": unexpected GroupVersion string: a/b/c",
            "spec.paramKind.kind: Required value",
            "spec.matchConstraints: Required value",
            "spec.validations: Required value: validations or auditAnnotations must contain at least one item",
            "spec.auditAnnotations: Required value: validations or auditAnnotations must contain at least one item",
        ]
    );
    let v = policy(
        json!({"matchConstraints": {}, "validations": [{"expression": "", "reason": "Teapot"}],
        "variables": [{"name": "in", "expression": "1"}]}),
    );
    assert_eq!(
        policy_messages("ValidatingAdmissionPolicy", &v),
        [
            "spec.matchConstraints.resourceRules: Required value",
            "spec.variables[0].name: Invalid value: \"in\": name is not a valid CEL identifier",
            "spec.validations[0].expression: Required value: expression is not specified",
            "spec.validations[0].reason: Unsupported value: \"Teapot\": supported values: \"Forbidden\", \"Invalid\", \"RequestEntityTooLarge\"",
        ]
    );
}

#[test]
fn validating_admission_policy_binding() {
    let ok = policy(json!({"policyName": "p", "validationActions": ["Deny"]}));
    assert!(policy_messages("ValidatingAdmissionPolicyBinding", &ok).is_empty());
    let bad = policy(
        json!({"paramRef": {"name": "x", "selector": {}}, "validationActions": ["Deny", "Warn", "Deny"]}),
    );
    assert_eq!(
        policy_messages("ValidatingAdmissionPolicyBinding", &bad),
        [
            "spec.policyName: Required value",
            "spec.paramRef.name: Forbidden: name and selector are mutually exclusive",
            "spec.paramRef.selector: Forbidden: name and selector are mutually exclusive",
            "spec.paramRef.parameterNotFoundAction: Required value",
            "spec.validationActions[2]: Duplicate value: \"Deny\"",
            "spec.validationActions: Invalid value: []admissionregistration.ValidationAction{\"Deny\", \"Warn\", \"Deny\"}: must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)",
        ]
    );
    let none = policy(json!({"policyName": "p"}));
    assert_eq!(
        policy_messages("ValidatingAdmissionPolicyBinding", &none),
        ["spec.validationActions: Required value: at least one validation action is required"]
    );
}

#[test]
fn cluster_kinds() {
    let pdb = json!({"spec": {"minAvailable": "120%", "unhealthyPodEvictionPolicy": "Sometimes"}});
    assert_eq!(
        policy_messages_in("policy", "PodDisruptionBudget", &pdb),
        [
            "spec.minAvailable: Invalid value: \"120%\": must not be greater than 100%",
            "spec.unhealthyPodEvictionPolicy: Unsupported value: \"Sometimes\": supported values: \"AlwaysAllow\", \"IfHealthyBudget\"",
        ]
    );
    let ic = json!({"spec": {"controller": "nginx"}});
    assert_eq!(
        policy_messages_in("networking.k8s.io", "IngressClass", &ic),
        ["spec.controller: Invalid value: \"nginx\": must be a domain-prefixed path (such as \"acme.io/foo\")"]
    );
    assert_eq!(
        policy_messages_in("networking.k8s.io", "IngressClass", &json!({"spec": {}})),
        ["spec.controller: Required value"]
    );
    let pc = json!({"metadata": {"name": "high"}, "value": 2_000_000_000});
    assert_eq!(
        policy_messages_in("scheduling.k8s.io", "PriorityClass", &pc),
        ["value: Forbidden: maximum allowed value of a user defined priority is 1000000000"]
    );
    let np = json!({"spec": {"podSelector": {"matchExpressions": [{"key": "a", "operator": "In"}]}}});
    assert_eq!(
        policy_messages_in("networking.k8s.io", "NetworkPolicy", &np),
        ["spec.podSelector.matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'"]
    );
}

fn policy_messages_in(group: &str, kind: &str, obj: &Value) -> Vec<String> {
    validate(group, kind, obj).into_iter().map(|c| c.message).collect()
}

#[test]
fn cel_expressions_are_compiled_when_written() {
    // A webhook's match conditions: no params, no variables; must be bool.
    check(
        |h| h["matchConditions"] = json!([{"name": "a", "expression": "object.metadata.name"}]),
        &["webhooks[0].matchConditions[0].expression: Invalid value: \"object.metadata.name\": must evaluate to bool but got dyn"],
    );
    check(
        |h| h["matchConditions"] = json!([{"name": "a", "expression": "params.x == 1"}]),
        &["webhooks[0].matchConditions[0].expression: Invalid value: \"params.x == 1\": compilation failed: ERROR: <input>:1:1: undeclared reference to 'params' (in container '')\n | params.x == 1\n | ^"],
    );
    let rules = json!({"resourceRules": [{"operations": ["CREATE"], "apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["deployments"]}]});
    let messages = |spec: Value| policy_messages("ValidatingAdmissionPolicy", &policy(spec));
    // Variables are visible to validations; params only with a paramKind.
    let ok = json!({"matchConstraints": rules, "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
        "variables": [{"name": "replicas", "expression": "object.spec.replicas"}],
        "validations": [{"expression": "variables.replicas <= int(params.data.max)", "messageExpression": "'too many: ' + string(variables.replicas)"}],
        "auditAnnotations": [{"key": "replicas", "valueExpression": "string(variables.replicas)"}]});
    assert_eq!(messages(ok), Vec::<String>::new());
    let bad = json!({"matchConstraints": rules,
        "variables": [{"name": "n", "expression": "object.spec.replicas +"}],
        "validations": [{"expression": "params.max > 1", "messageExpression": "1"}, {"expression": "'x'"}],
        "auditAnnotations": [{"key": "k", "valueExpression": "1"}]});
    let got = messages(bad);
    assert_eq!(got.len(), 5, "{got:#?}");
    assert!(got[0].starts_with("spec.variables[0].expression: Invalid value: \"object.spec.replicas +\": compilation failed: ERROR: <input>:1:"), "{}", got[0]);
    assert!(got[1].starts_with("spec.validations[0].expression: Invalid value: \"params.max > 1\": compilation failed: ERROR: <input>:1:1: undeclared reference to 'params'"), "{}", got[1]);
    assert_eq!(got[2], "spec.validations[0].messageExpression: Invalid value: \"1\": must evaluate to string but got int");
    assert_eq!(got[3], "spec.validations[1].expression: Invalid value: \"'x'\": must evaluate to bool but got string");
    assert_eq!(got[4], "spec.auditAnnotations[0].valueExpression: Invalid value: \"1\": must evaluate to one of [string null_type] but got int");
}
