//! MutatingAdmissionPolicy and binding validation against kube's exact messages: each case
//! changes one thing in a valid policy and expects kube's causes, in kube's order.

use serde_json::{json, Value};

use super::super::{validate, ADMISSION};

const MAP: &str = "MutatingAdmissionPolicy";
const MAPB: &str = "MutatingAdmissionPolicyBinding";

fn policy() -> Value {
    json!({"metadata": {"name": "p"}, "spec": {
        "failurePolicy": "Fail",
        "reinvocationPolicy": "Never",
        "matchConstraints": {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["deployments"]}]},
        "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": "Object{metadata: Object.metadata{labels: {'a': 'b'}}}"}}]
    }})
}

fn messages(kind: &str, obj: &Value) -> Vec<String> {
    validate(ADMISSION, kind, obj).into_iter().map(|c| c.message).collect()
}

/// The messages of the valid policy changed by `edit` (on its spec).
fn check(edit: impl Fn(&mut Value), want: &[&str]) {
    let mut p = policy();
    edit(&mut p["spec"]);
    assert_eq!(messages(MAP, &p), want);
}

#[test]
fn valid_policies_pass() {
    check(|_| {}, &[]);
    check(
        |s| {
            s["mutations"] = json!([{"patchType": "JSONPatch", "jsonPatch": {"expression": "[JSONPatch{op: 'add', path: '/metadata/labels/a', value: variables.v}]"}}]);
            s["variables"] = json!([{"name": "v", "expression": "'x'"}]);
            s["paramKind"] = json!({"apiVersion": "v1", "kind": "ConfigMap"});
            s["matchConditions"] = json!([{"name": "m", "expression": "params != null"}]);
            s["reinvocationPolicy"] = json!("IfNeeded");
            s["matchConstraints"]["resourceRules"][0]["operations"] = json!(["*"]);
        },
        &[],
    );
}

#[test]
fn required_fields() {
    let p = json!({"metadata": {"name": "p"}, "spec": {}});
    assert_eq!(
        messages(MAP, &p),
        [
            "spec.matchConstraints: Required value",
            "spec.mutations: Required value: mutations must contain at least one item",
            "spec.reinvocationPolicy: Required value",
        ]
    );
    check(|s| s["matchConstraints"] = json!({}), &["spec.matchConstraints.resourceRules: Required value"]);
    check(|s| s["reinvocationPolicy"] = json!(""), &["spec.reinvocationPolicy: Required value"]);
}

#[test]
fn enumerations() {
    check(
        |s| s["reinvocationPolicy"] = json!("Always"),
        &[r#"spec.reinvocationPolicy: Unsupported value: "Always": supported values: "IfNeeded", "Never""#],
    );
    check(
        |s| s["failurePolicy"] = json!("Maybe"),
        &[r#"spec.failurePolicy: Unsupported value: "Maybe": supported values: "Fail", "Ignore""#],
    );
    check(
        |s| s["mutations"][0]["patchType"] = json!("MergePatch"),
        &[r#"spec.mutations[0].patchType: Unsupported value: "MergePatch": supported values: "ApplyConfiguration", "JSONPatch""#],
    );
    check(|s| s["mutations"][0] = json!({}), &["spec.mutations[0].patchType: Required value"]);
}

// a delete has nothing to mutate
#[test]
fn only_mutable_operations() {
    check(
        |s| s["matchConstraints"]["resourceRules"][0]["operations"] = json!(["CREATE", "DELETE"]),
        &[r#"spec.matchConstraints.resourceRules.operations: Unsupported value: "DELETE": supported values: "*", "CONNECT", "CREATE", "UPDATE""#],
    );
}

#[test]
fn the_patch_type_union() {
    check(
        |s| s["mutations"][0] = json!({"patchType": "JSONPatch", "applyConfiguration": {"expression": "Object{}"}}),
        &[
            "spec.mutations[0].jsonPatch: Required value: must be specified when patchType is JSONPatch",
            r#"spec.mutations[0].applyConfiguration: Invalid value: "{applyConfiguration}": must not be specified when patchType is JSONPatch"#,
        ],
    );
    check(
        |s| s["mutations"][0] = json!({"patchType": "ApplyConfiguration", "jsonPatch": {"expression": "[]"}}),
        &[
            "spec.mutations[0].applyConfiguration: Required value: must be specified when patchType is ApplyConfiguration",
            r#"spec.mutations[0].jsonPatch: Invalid value: "{jsonPatch}": must not be specified when patchType is ApplyConfiguration"#,
        ],
    );
    check(
        |s| s["mutations"][0]["applyConfiguration"]["expression"] = json!("  "),
        &["spec.mutations[0].applyConfiguration.expression: Required value"],
    );
}

// each expression compiles for the result its patch type takes, with the mutation types
#[test]
fn mutation_expressions_compile_with_their_result_type() {
    check(
        |s| s["mutations"][0]["applyConfiguration"]["expression"] = json!("1"),
        &[r#"spec.mutations[0].applyConfiguration.expression: Invalid value: "1": must evaluate to Object but got int"#],
    );
    check(
        |s| s["mutations"][0] = json!({"patchType": "JSONPatch", "jsonPatch": {"expression": " 'x' "}}),
        &[r#"spec.mutations[0].jsonPatch.expression: Invalid value: "'x'": must evaluate to list(JSONPatch) but got string"#],
    );
    let mut p = policy();
    p["spec"]["mutations"][0]["applyConfiguration"]["expression"] = json!("Object{spec: params.x}");
    let got = messages(MAP, &p);
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(
        got[0].starts_with(r#"spec.mutations[0].applyConfiguration.expression: Invalid value: "Object{spec: params.x}": compilation failed: ERROR: <input>:1:"#)
            && got[0].contains("undeclared reference to 'params'"),
        "{}",
        got[0]
    );
}

#[test]
fn variables_match_conditions_and_param_kind() {
    check(
        |s| s["variables"] = json!([{"name": "1x", "expression": "object.spec"}]),
        &[r#"spec.variables[0].name: Invalid value: "1x": name is not a valid CEL identifier"#],
    );
    let mut p = policy();
    p["spec"]["variables"] = json!([{"name": "", "expression": ""}]);
    assert_eq!(
        messages(MAP, &p),
        ["spec.variables[0].name: Required value: name is not specified", "spec.variables[0].expression: Required value: expression is not specified"]
    );
    check(
        |s| s["matchConditions"] = json!([{"name": "m", "expression": "'x'"}]),
        &[r#"spec.matchConditions[0].expression: Invalid value: "'x'": must evaluate to bool but got string"#],
    );
    check(|s| s["paramKind"] = json!({"apiVersion": "v1"}), &["spec.paramKind.kind: Required value"]);
}

fn binding(spec: Value) -> Value {
    json!({"metadata": {"name": "b"}, "spec": spec})
}

#[test]
fn bindings() {
    assert!(messages(MAPB, &binding(json!({"policyName": "p"}))).is_empty());
    assert!(messages(MAPB, &binding(json!({"policyName": "p", "paramRef": {"name": "x", "parameterNotFoundAction": "Deny"}}))).is_empty());
    assert_eq!(messages(MAPB, &binding(json!({}))), ["spec.policyName: Required value"]);
    assert_eq!(
        messages(MAPB, &binding(json!({"policyName": "P_"}))),
        [r#"spec.policyName: Invalid value: "P_": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"#]
    );
    assert_eq!(
        messages(MAPB, &binding(json!({"policyName": "p", "paramRef": {}}))),
        ["spec.paramRef: Required value: one of name or selector must be specified", "spec.paramRef.parameterNotFoundAction: Required value"]
    );
    let rules = json!({"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["DELETE"], "resources": ["pods"]}]});
    assert_eq!(
        messages(MAPB, &binding(json!({"policyName": "p", "matchResources": rules}))),
        [r#"spec.matchResources.resourceRules.operations: Unsupported value: "DELETE": supported values: "*", "CONNECT", "CREATE", "UPDATE""#]
    );
}
