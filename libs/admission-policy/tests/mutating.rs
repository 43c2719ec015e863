//! The MutatingAdmissionPolicy plugin through `kapi_admission::Chain` (with its reinvocation),
//! over policies, bindings and params stored in SQLite and read from the watch caches.

mod support;

use kapi_apimachinery::StatusReason;
use serde_json::{json, Value};
use support::{create_deployment, deployment, Cluster};

/// A policy on deployments with `mutations`, and what else `extra` puts in its spec.
fn spec(mutations: Value, extra: Value) -> Value {
    let mut spec = json!({
        "matchConstraints": {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["deployments"]}]},
        "mutations": mutations,
    });
    if let Value::Object(m) = extra {
        for (k, v) in m {
            spec[k] = v;
        }
    }
    spec
}

fn json_patch(expression: &str) -> Value {
    json!([{"patchType": "JSONPatch", "jsonPatch": {"expression": expression}}])
}

fn apply(expression: &str) -> Value {
    json!([{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": expression}}])
}

#[tokio::test]
async fn json_patch_mutations() {
    let c = Cluster::new().await;
    let patch = "[JSONPatch{op: 'add', path: '/metadata/labels/' + jsonpatch.escapeKey('example.com/managed'), value: 'yes'}, JSONPatch{op: 'replace', path: '/spec/replicas', value: object.spec.replicas * 2}]";
    c.mutating_policy("label", spec(json_patch(patch), json!({}))).await;
    c.mutating_binding("label-binding", "label", json!({})).await;
    let out = c.mutate(&create_deployment(deployment("default", "web", 2), "alice")).await.unwrap();
    assert_eq!(out["metadata"]["labels"], json!({"app": "web", "example.com/managed": "yes"}));
    assert_eq!(out["spec"]["replicas"], 4);
}

#[tokio::test]
async fn a_failed_test_operation_leaves_the_object_alone() {
    let c = Cluster::new().await;
    let patch = "[JSONPatch{op: 'test', path: '/spec/replicas', value: 100}, JSONPatch{op: 'replace', path: '/spec/replicas', value: 1}]";
    c.mutating_policy("p", spec(json_patch(patch), json!({}))).await;
    c.mutating_binding("b", "p", json!({})).await;
    let d = deployment("default", "web", 2);
    assert_eq!(c.mutate(&create_deployment(d.clone(), "alice")).await.unwrap(), d);
}

#[tokio::test]
async fn apply_configurations_merge_as_server_side_apply() {
    let c = Cluster::new().await;
    let expr = "Object{spec: Object.spec{replicas: 3, template: Object.spec.template{spec: Object.spec.template.spec{containers: [Object.spec.template.spec.containers{name: 'c', image: 'nginx:2'}, Object.spec.template.spec.containers{name: 'sidecar', image: 'proxy'}]}}}}";
    c.mutating_policy("p", spec(apply(expr), json!({}))).await;
    c.mutating_binding("b", "p", json!({})).await;
    let mut d = deployment("default", "web", 1);
    d["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] = json!("Always");
    let out = c.mutate(&create_deployment(d, "alice")).await.unwrap();
    assert_eq!(out["spec"]["replicas"], 3);
    // containers merge by name: the existing one keeps its other fields
    assert_eq!(
        out["spec"]["template"]["spec"]["containers"],
        json!([{"name": "c", "image": "nginx:2", "imagePullPolicy": "Always"}, {"name": "sidecar", "image": "proxy"}])
    );
    assert_eq!(out["metadata"]["labels"], json!({"app": "web"}));
}

#[tokio::test]
async fn apply_configurations_may_not_set_atomic_or_undeclared_fields() {
    let c = Cluster::new().await;
    c.mutating_policy(
        "atomic",
        spec(apply("Object{spec: Object.spec{selector: Object.spec.selector{matchLabels: {'a': 'b'}}}}"), json!({})),
    )
    .await;
    c.mutating_binding("b", "atomic", json!({})).await;
    let err = c.mutate(&create_deployment(deployment("default", "web", 1), "alice")).await.unwrap_err();
    assert_eq!(
        err.message,
        "policy 'atomic' with binding 'b' denied request: error applying patch: invalid ApplyConfiguration: may not mutate atomic arrays, maps or structs: .spec.selector"
    );
    assert_eq!((err.code, err.reason), (403, StatusReason::Invalid));
    assert_eq!(err.details.as_ref().unwrap().causes.len(), 1);

    let c = Cluster::new().await;
    c.mutating_policy("typo", spec(apply("Object{spec: Object.spec{replicaz: 1}}"), json!({}))).await;
    c.mutating_binding("b", "typo", json!({})).await;
    let err = c.mutate(&create_deployment(deployment("default", "web", 1), "alice")).await.unwrap_err();
    assert!(err.message.ends_with("error applying patch: failed to convert patch object to typed object: .spec.replicaz: field not declared in schema"), "{}", err.message);
    // a type name that does not follow the field path
    let c = Cluster::new().await;
    c.mutating_policy("names", spec(apply("Object{spec: Object.status{replicas: 1}}"), json!({}))).await;
    c.mutating_binding("b", "names", json!({})).await;
    let err = c.mutate(&create_deployment(deployment("default", "web", 1), "alice")).await.unwrap_err();
    assert!(err.message.ends_with("denied request: type mismatch: unexpected type name \"Object.status\", expected \"Object.spec\", which matches field name path from root Object type"), "{}", err.message);
}

#[tokio::test]
async fn params_match_conditions_and_failure_policy() {
    let c = Cluster::new().await;
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "owner", "namespace": "default"}, "data": {"team": "blue"}});
    c.create("", "configmaps", cm).await.unwrap();
    let extra = json!({
        "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
        "matchConditions": [{"name": "not-admin", "expression": "request.userInfo.username != 'admin'"}],
        "variables": [{"name": "team", "expression": "params.data.team"}],
    });
    let patch = "[JSONPatch{op: 'add', path: '/metadata/labels/team', value: variables.team}]";
    c.mutating_policy("team", spec(json_patch(patch), extra)).await;
    c.mutating_binding("b", "team", json!({"paramRef": {"name": "owner", "parameterNotFoundAction": "Deny"}})).await;
    let out = c.mutate(&create_deployment(deployment("default", "web", 1), "alice")).await.unwrap();
    assert_eq!(out["metadata"]["labels"]["team"], "blue");
    let out = c.mutate(&create_deployment(deployment("default", "web", 1), "admin")).await.unwrap();
    assert!(out["metadata"]["labels"].get("team").is_none());

    // a runtime error refuses under Fail and is ignored under Ignore
    for (policy, refused) in [("Fail", true), ("Ignore", false)] {
        let c = Cluster::new().await;
        let patch = "[JSONPatch{op: 'add', path: '/metadata/labels/x', value: object.spec.nope}]";
        c.mutating_policy("p", spec(json_patch(patch), json!({"failurePolicy": policy}))).await;
        c.mutating_binding("b", "p", json!({})).await;
        let r = c.mutate(&create_deployment(deployment("default", "web", 1), "alice")).await;
        assert_eq!(r.is_err(), refused, "{policy}");
        if let Err(e) = r {
            assert_eq!(e.message, "policy 'p' with binding 'b' denied request: expression '[JSONPatch{op: 'add', path: '/metadata/labels/x', value: object.spec.nope}]' resulted in error: no such key: nope");
        }
    }
}

#[tokio::test]
async fn missing_params_deny_as_a_binding_configuration_error() {
    let c = Cluster::new().await;
    let extra = json!({"paramKind": {"apiVersion": "v1", "kind": "ConfigMap"}});
    c.mutating_policy(
        "p",
        spec(json_patch("[JSONPatch{op: 'add', path: '/metadata/labels/x', value: params.data.x}]"), extra),
    )
    .await;
    c.mutating_binding("b", "p", json!({"paramRef": {"name": "absent", "parameterNotFoundAction": "Deny"}})).await;
    let err = c.mutate(&create_deployment(deployment("default", "web", 1), "alice")).await.unwrap_err();
    assert_eq!(
        err.message,
        "policy 'p' with binding 'b' denied request: failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction"
    );
    assert_eq!((err.code, err.reason), (403, StatusReason::Forbidden));
}

#[tokio::test]
async fn if_needed_policies_run_again_after_later_changes() {
    let c = Cluster::new().await;
    // runs first (by name) and copies an annotation a later policy adds into a label
    let copy = "has(object.metadata.annotations) && 'owner' in object.metadata.annotations ? [JSONPatch{op: 'add', path: '/metadata/labels/owner', value: object.metadata.annotations['owner']}] : []";
    c.mutating_policy("a-copy", spec(json_patch(copy), json!({"reinvocationPolicy": "IfNeeded"}))).await;
    c.mutating_binding("a", "a-copy", json!({})).await;
    c.mutating_policy(
        "b-annotate",
        spec(
            json_patch("[JSONPatch{op: 'add', path: '/metadata/annotations', value: {'owner': 'team-x'}}]"),
            json!({}),
        ),
    )
    .await;
    c.mutating_binding("b", "b-annotate", json!({})).await;
    let out = c.mutate(&create_deployment(deployment("default", "web", 1), "alice")).await.unwrap();
    assert_eq!(out["metadata"]["annotations"], json!({"owner": "team-x"}));
    assert_eq!(out["metadata"]["labels"]["owner"], "team-x");

    // without IfNeeded, the first policy does not see the annotation
    let c = Cluster::new().await;
    c.mutating_policy("a-copy", spec(json_patch(copy), json!({"reinvocationPolicy": "Never"}))).await;
    c.mutating_binding("a", "a-copy", json!({})).await;
    c.mutating_policy(
        "b-annotate",
        spec(
            json_patch("[JSONPatch{op: 'add', path: '/metadata/annotations', value: {'owner': 'team-x'}}]"),
            json!({}),
        ),
    )
    .await;
    c.mutating_binding("b", "b-annotate", json!({})).await;
    let out = c.mutate(&create_deployment(deployment("default", "web", 1), "alice")).await.unwrap();
    assert!(out["metadata"]["labels"].get("owner").is_none());
}

#[tokio::test]
async fn mutating_then_validating() {
    let c = Cluster::new().await;
    c.mutating_policy(
        "cap",
        spec(
            apply("Object{spec: Object.spec{replicas: object.spec.replicas > 5 ? 5 : object.spec.replicas}}"),
            json!({}),
        ),
    )
    .await;
    c.mutating_binding("cap", "cap", json!({})).await;
    c.policy(support::deployment_policy("limit", json!([{"expression": "object.spec.replicas <= 5"}]), json!({})))
        .await;
    c.binding("limit", "limit", json!({})).await;
    let mut attrs = create_deployment(deployment("default", "web", 9), "alice");
    let mut outcome = kapi_admission::Outcome::default();
    c.chain.admit(&mut attrs, &mut outcome).await.unwrap();
    assert_eq!(attrs.object.as_ref().unwrap()["spec"]["replicas"], 5);
    c.chain.validate(&attrs, &mut outcome).await.unwrap();
}
