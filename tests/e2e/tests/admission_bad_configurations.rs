//! Webhook configurations and admission policies kube refuses, refused by kapi over the API
//! with kube's 422 and every cause, and nothing stored.

use kapi_e2e::{Kapi, Request};
use serde_json::{json, Value};

const ADMISSION: &str = "/apis/admissionregistration.k8s.io/v1";

fn hook(edit: impl Fn(&mut Value)) -> Value {
    let mut h = json!({"name": "check.example.com", "sideEffects": "None", "admissionReviewVersions": ["v1"],
        "clientConfig": {"url": "https://hook.example.com/validate"},
        "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}]});
    edit(&mut h);
    h
}

fn webhooks(kind: &str, name: &str, hooks: Vec<Value>) -> (String, Value) {
    let plural = if kind == "MutatingWebhookConfiguration" { "mutatingwebhookconfigurations" } else { "validatingwebhookconfigurations" };
    (plural.to_owned(), json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind, "metadata": {"name": name}, "webhooks": hooks}))
}

fn validating(name: &str, edit: impl Fn(&mut Value)) -> (String, Value) {
    webhooks("ValidatingWebhookConfiguration", name, vec![hook(edit)])
}

fn policy(name: &str, edit: impl Fn(&mut Value)) -> (String, Value) {
    let mut spec = json!({"matchConstraints": {"resourceRules": [{"operations": ["CREATE"], "apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["deployments"]}]},
        "validations": [{"expression": "object.spec.replicas <= 5"}]});
    edit(&mut spec);
    ("validatingadmissionpolicies".into(), json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy", "metadata": {"name": name}, "spec": spec}))
}

fn binding(name: &str, spec: Value) -> (String, Value) {
    ("validatingadmissionpolicybindings".into(), json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": name}, "spec": spec}))
}

fn mutating_policy(name: &str, edit: impl Fn(&mut Value)) -> (String, Value) {
    let mut spec = json!({"reinvocationPolicy": "Never",
        "matchConstraints": {"resourceRules": [{"operations": ["CREATE"], "apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["deployments"]}]},
        "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": "Object{metadata: Object.metadata{labels: {'a': 'b'}}}"}}]});
    edit(&mut spec);
    ("mutatingadmissionpolicies".into(), json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicy", "metadata": {"name": name}, "spec": spec}))
}

fn mutating_binding(name: &str, spec: Value) -> (String, Value) {
    ("mutatingadmissionpolicybindings".into(), json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicyBinding", "metadata": {"name": name}, "spec": spec}))
}

#[test]
fn bad_webhook_configurations_and_policies_are_refused_as_kube_refuses_them() {
    let kapi = Kapi::start().expect("start kapi");
    let cases: Vec<((String, Value), Vec<&str>)> = vec![
        (validating("no-side-effects", |h| drop(h.as_object_mut().map(|o| o.remove("sideEffects")))), vec!["webhooks[0].sideEffects: Required value: must specify one of None, NoneOnDryRun"]),
        (validating("side-effects-some", |h| h["sideEffects"] = json!("Some")), vec![r#"webhooks[0].sideEffects: Unsupported value: "Some": supported values: "None", "NoneOnDryRun""#]),
        (validating("http-url", |h| h["clientConfig"] = json!({"url": "http://hook.example.com/v"})), vec![r#"webhooks[0].clientConfig.url: Invalid value: "http": 'https' is the only allowed URL scheme; desired format: https://host[/path]"#]),
        (validating("query-url", |h| h["clientConfig"] = json!({"url": "https://hook.example.com/v?x=1"})), vec![r#"webhooks[0].clientConfig.url: Invalid value: "x=1": query parameters are not permitted in the URL"#]),
        (validating("url-and-service", |h| h["clientConfig"]["service"] = json!({"namespace": "default", "name": "svc"})), vec!["webhooks[0].clientConfig: Required value: exactly one of url or service is required"]),
        (validating("service-path", |h| h["clientConfig"] = json!({"service": {"namespace": "default", "name": "svc", "path": "validate"}})), vec![r#"webhooks[0].clientConfig.service.path: Invalid value: "validate": must start with a '/'"#]),
        (validating("two-segment-name", |h| h["name"] = json!("check.example")), vec![r#"webhooks[0].name: Invalid value: "check.example": should be a domain with at least three segments separated by dots"#]),
        (webhooks("ValidatingWebhookConfiguration", "duplicate-names", vec![hook(|_| {}), hook(|_| {})]), vec![r#"webhooks[1].name: Duplicate value: "check.example.com""#]),
        (validating("bad-operation", |h| h["rules"][0]["operations"] = json!(["PATCH"])), vec![r#"webhooks[0].rules[0].operations[0]: Unsupported value: "PATCH": supported values: "*", "CONNECT", "CREATE", "DELETE", "UPDATE""#]),
        (validating("wildcard-and-more", |h| h["rules"][0]["resources"] = json!(["*", "pods"])), vec![r#"webhooks[0].rules[0].resources: Invalid value: []string{"*", "pods"}: if '*' is present, must not specify other resources without subresources"#]),
        (validating("bad-scope", |h| h["rules"][0]["scope"] = json!("Global")), vec![r#"webhooks[0].rules[0].scope: Unsupported value: "Global": supported values: "*", "Cluster", "Namespaced""#]),
        (validating("long-timeout", |h| h["timeoutSeconds"] = json!(31)), vec!["webhooks[0].timeoutSeconds: Invalid value: 31: the timeout value must be between 1 and 30 seconds"]),
        (validating("bad-selector", |h| h["namespaceSelector"] = json!({"matchExpressions": [{"key": "env", "operator": "Equals", "values": ["a"]}]})), vec![r#"webhooks[0].namespaceSelector.matchExpressions[0].operator: Invalid value: "Equals": not a valid selector operator"#]),
        (validating("review-versions", |h| h["admissionReviewVersions"] = json!(["v2"])), vec![r#"webhooks[0].admissionReviewVersions: Invalid value: []string{"v2"}: must include at least one of v1, v1beta1"#]),
        (validating("bad-failure-policy", |h| h["failurePolicy"] = json!("Retry")), vec![r#"webhooks[0].failurePolicy: Unsupported value: "Retry": supported values: "Fail", "Ignore""#]),
        (validating("non-bool-condition", |h| h["matchConditions"] = json!([{"name": "a", "expression": "object.metadata.name"}])), vec![r#"webhooks[0].matchConditions[0].expression: Invalid value: "object.metadata.name": must evaluate to bool but got dyn"#]),
        (webhooks("MutatingWebhookConfiguration", "bad-reinvocation", vec![hook(|h| h["reinvocationPolicy"] = json!("Always"))]), vec![r#"webhooks[0].reinvocationPolicy: Unsupported value: "Always": supported values: "IfNeeded", "Never""#]),
        (policy("no-constraints", |s| drop(s.as_object_mut().map(|o| o.remove("matchConstraints")))), vec!["spec.matchConstraints: Required value"]),
        (policy("no-validations", |s| s["validations"] = json!([])), vec!["spec.validations: Required value: validations or auditAnnotations must contain at least one item", "spec.auditAnnotations: Required value: validations or auditAnnotations must contain at least one item"]),
        (policy("string-validation", |s| s["validations"] = json!([{"expression": "'yes'"}])), vec![r#"spec.validations[0].expression: Invalid value: "'yes'": must evaluate to bool but got string"#]),
        (policy("params-without-kind", |s| s["validations"] = json!([{"expression": "object.spec.replicas <= params.max"}])), vec![r#"spec.validations[0].expression: Invalid value: "object.spec.replicas <= params.max": compilation failed: ERROR: <input>:1:25: undeclared reference to 'params' (in container '')
 | object.spec.replicas <= params.max
 | ........................^"#]),
        (policy("bad-variable-name", |s| s["variables"] = json!([{"name": "in", "expression": "1"}])), vec![r#"spec.variables[0].name: Invalid value: "in": name is not a valid CEL identifier"#]),
        (policy("bad-reason", |s| s["validations"][0]["reason"] = json!("Teapot")), vec![r#"spec.validations[0].reason: Unsupported value: "Teapot": supported values: "Forbidden", "Invalid", "RequestEntityTooLarge""#]),
        (binding("deny-and-warn", json!({"policyName": "p", "validationActions": ["Deny", "Warn"]})), vec![r#"spec.validationActions: Invalid value: []admissionregistration.ValidationAction{"Deny", "Warn"}: must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)"#]),
        (binding("name-and-selector", json!({"policyName": "p", "validationActions": ["Deny"], "paramRef": {"name": "x", "selector": {}, "parameterNotFoundAction": "Deny"}})), vec!["spec.paramRef.name: Forbidden: name and selector are mutually exclusive", "spec.paramRef.selector: Forbidden: name and selector are mutually exclusive"]),
        (binding("no-actions", json!({"policyName": "p"})), vec!["spec.validationActions: Required value: at least one validation action is required"]),
        (mutating_policy("map-no-reinvocation", |s| drop(s.as_object_mut().map(|o| o.remove("reinvocationPolicy")))), vec!["spec.reinvocationPolicy: Required value"]),
        (mutating_policy("map-no-mutations", |s| s["mutations"] = json!([])), vec!["spec.mutations: Required value: mutations must contain at least one item"]),
        (mutating_policy("map-delete", |s| s["matchConstraints"]["resourceRules"][0]["operations"] = json!(["DELETE"])), vec![r#"spec.matchConstraints.resourceRules.operations: Unsupported value: "DELETE": supported values: "*", "CONNECT", "CREATE", "UPDATE""#]),
        (mutating_policy("map-patch-type", |s| s["mutations"][0]["patchType"] = json!("MergePatch")), vec![r#"spec.mutations[0].patchType: Unsupported value: "MergePatch": supported values: "ApplyConfiguration", "JSONPatch""#]),
        (mutating_policy("map-both-patches", |s| s["mutations"][0] = json!({"patchType": "JSONPatch", "applyConfiguration": {"expression": "Object{}"}})), vec![
            "spec.mutations[0].jsonPatch: Required value: must be specified when patchType is JSONPatch",
            r#"spec.mutations[0].applyConfiguration: Invalid value: "{applyConfiguration}": must not be specified when patchType is JSONPatch"#,
        ]),
        (mutating_policy("map-not-an-object", |s| s["mutations"][0]["applyConfiguration"]["expression"] = json!("'labels'")), vec![r#"spec.mutations[0].applyConfiguration.expression: Invalid value: "'labels'": must evaluate to Object but got string"#]),
        (mutating_policy("map-json-patch-type", |s| s["mutations"][0] = json!({"patchType": "JSONPatch", "jsonPatch": {"expression": "[1]"}})), vec![r#"spec.mutations[0].jsonPatch.expression: Invalid value: "[1]": must evaluate to list(JSONPatch) but got list(int)"#]),
        (mutating_binding("mapb-no-policy", json!({})), vec!["spec.policyName: Required value"]),
        (mutating_binding("mapb-param-ref", json!({"policyName": "p", "paramRef": {"name": "x", "selector": {}}})), vec!["spec.paramRef.name: Forbidden: name and selector are mutually exclusive", "spec.paramRef.selector: Forbidden: name and selector are mutually exclusive", "spec.paramRef.parameterNotFoundAction: Required value"]),
    ];
    assert!(cases.len() >= 20);
    for ((plural, body), want) in &cases {
        let name = body["metadata"]["name"].as_str().unwrap_or_default();
        let r = kapi.request(&Request::new("POST", &format!("{ADMISSION}/{plural}")).json(body));
        assert_eq!((r.status, r.body["reason"].as_str()), (422, Some("Invalid")), "{name}: {}", r.raw);
        let causes: Vec<String> = r.body["details"]["causes"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| format!("{}: {}", c["field"].as_str().unwrap_or_default(), c["message"].as_str().unwrap_or_default()))
            .collect();
        assert_eq!(&causes, want, "{name}: every cause, in kube's order");
        let kind = body["kind"].as_str().unwrap_or_default();
        let message = r.body["message"].as_str().unwrap_or_default();
        assert!(message.starts_with(&format!("{kind}.admissionregistration.k8s.io \"{name}\" is invalid: ")), "{name}: {message}");
        assert_eq!(kapi.request(&Request::get(&format!("{ADMISSION}/{plural}/{name}"))).status, 404, "{name}: nothing stored");
    }

    // Unknown fields: refused under fieldValidation=Strict, with kube's text.
    let (plural, mut body) = validating("unknown-field", |_| {});
    body["webhooks"][0]["retries"] = json!(3);
    let r = kapi.request(&Request::new("POST", &format!("{ADMISSION}/{plural}?fieldValidation=Strict")).json(&body));
    assert_eq!(r.status, 400, "{}", r.raw);
    assert_eq!(
        r.body["message"],
        r#"ValidatingWebhookConfiguration in version "v1" cannot be handled as a ValidatingWebhookConfiguration: strict decoding error: unknown field "webhooks[0].retries""#,
        "{}",
        r.raw
    );
    assert_eq!(kapi.request(&Request::get(&format!("{ADMISSION}/{plural}/unknown-field"))).status, 404);
}
