//! `status.typeChecking`: expressions checked against the schemas of the kinds a policy
//! matches, with kube's field paths and texts.

use kapi_admission_policy::{type_checking, SchemaResolver};
use serde_json::{json, Value};

/// Deployments and ConfigMaps with small schemas.
struct Schemas;

impl SchemaResolver for Schemas {
    fn kinds_for(&self, group: &str, version: &str, resource: &str) -> Vec<String> {
        match (group, version, resource) {
            ("apps", "v1", "deployments") => vec!["Deployment".into()],
            ("", "v1", "configmaps") => vec!["ConfigMap".into()],
            _ => Vec::new(),
        }
    }

    fn schema(&self, group: &str, version: &str, kind: &str) -> Option<Value> {
        // kube keeps a kind's metadata when it declares name and generateName, as real kinds do
        let meta = json!({"type": "object", "properties": {"name": {"type": "string"}, "generateName": {"type": "string"},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}}}});
        match (group, version, kind) {
            ("apps", "v1", "Deployment") => Some(json!({"type": "object", "properties": {
                "metadata": meta,
                "spec": {"type": "object", "properties": {"replicas": {"type": "integer"}, "paused": {"type": "boolean"}}}}})),
            ("", "v1", "ConfigMap") => Some(json!({"type": "object", "properties": {
                "metadata": meta, "data": {"type": "object", "additionalProperties": {"type": "string"}}}})),
            _ => None,
        }
    }
}

fn policy(rules: Value, validations: Value, extra: Value) -> Value {
    let mut spec = json!({"matchConstraints": {"resourceRules": rules}, "validations": validations});
    if let Value::Object(m) = extra {
        for (k, v) in m {
            spec[k] = v;
        }
    }
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy", "metadata": {"name": "p"}, "spec": spec})
}

fn deployments() -> Value {
    json!([{"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["deployments"]}])
}

#[test]
fn fields_the_kind_lacks_are_reported_per_expression() {
    let p = policy(
        deployments(),
        json!([
            {"expression": "object.spec.replicas <= 5"},
            {"expression": "object.spec.replica <= 5", "messageExpression": "'paused: ' + string(object.spec.pausd)"},
        ]),
        json!({}),
    );
    assert_eq!(
        type_checking(&p, &Schemas),
        json!({"expressionWarnings": [
            {"fieldRef": "spec.validations[1].expression",
             "warning": "apps/v1, Kind=Deployment: ERROR: <input>:1:12: undefined field 'replica'\n | object.spec.replica <= 5\n | ...........^\n"},
            {"fieldRef": "spec.validations[1].messageExpression",
             "warning": "apps/v1, Kind=Deployment: ERROR: <input>:1:32: undefined field 'pausd'\n | 'paused: ' + string(object.spec.pausd)\n | ...............................^\n"},
        ]})
    );
}

#[test]
fn params_and_variables_are_typed_too() {
    let p = policy(
        deployments(),
        json!([{"expression": "variables.replicas <= int(params.data.max) && params.metadata.nme != ''"}]),
        json!({"paramKind": {"apiVersion": "v1", "kind": "ConfigMap"}, "variables": [{"name": "replicas", "expression": "object.spec.replicas"}]}),
    );
    let warnings = type_checking(&p, &Schemas);
    let w = warnings["expressionWarnings"][0]["warning"].as_str().unwrap();
    assert!(w.starts_with("apps/v1, Kind=Deployment: ERROR: <input>:1:"), "{w}");
    assert!(w.contains("undefined field 'nme'"), "{w}");
}

#[test]
fn nothing_to_check_without_exact_rules_or_schemas() {
    let wildcard = json!([{"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["*"], "resources": ["*"]}]);
    assert_eq!(
        type_checking(&policy(wildcard, json!([{"expression": "object.nope"}]), json!({})), &Schemas),
        json!({})
    );
    let unknown =
        json!([{"apiGroups": ["example.com"], "apiVersions": ["v1"], "operations": ["*"], "resources": ["widgets"]}]);
    assert_eq!(type_checking(&policy(unknown, json!([{"expression": "object.nope"}]), json!({})), &Schemas), json!({}));
    let ok =
        policy(deployments(), json!([{"expression": "object.spec.paused || has(object.metadata.labels)"}]), json!({}));
    assert_eq!(type_checking(&ok, &Schemas), json!({}));
}
