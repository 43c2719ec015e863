//! ValidatingAdmissionPolicy end to end: a policy with a ConfigMap param refuses a Deployment
//! over the param's replica limit with kube's message (kubectl prints it), Warn actions reach
//! kubectl as warnings, a policy changed through the API applies at once, and expressions that
//! do not type-check against the matched kinds are reported in the policy's status.

use std::time::Duration;

use kapi_e2e::{wait_for, Kapi, Request};
use serde_json::{json, Value};

const POLICIES: &str = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies";
const BINDINGS: &str = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings";
const DEPLOYMENTS: &str = "/apis/apps/v1/namespaces/default/deployments";

fn post(kapi: &Kapi, path: &str, body: &Value) -> kapi_e2e::HttpResponse {
    kapi.request(&Request::new("POST", path).json(body))
}

fn deployment(name: &str, replicas: u32) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}})
}

/// The policy and its binding (with `actions`), with the replica limit in ConfigMap `limits`.
fn install(kapi: &Kapi, actions: &[&str]) {
    let limits = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "limits"}, "data": {"maxReplicas": "3"}});
    assert_eq!(post(kapi, "/api/v1/namespaces/default/configmaps", &limits).status, 201);
    let policy = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy", "metadata": {"name": "max-replicas"},
        "spec": {"failurePolicy": "Fail",
                 "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
                 "matchConstraints": {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["deployments"]}]},
                 "validations": [{"expression": "object.spec.replicas <= int(params.data.maxReplicas)",
                                  "messageExpression": "'replicas ' + string(object.spec.replicas) + ' exceed the limit of ' + params.data.maxReplicas"}]}});
    let r = post(kapi, POLICIES, &policy);
    assert_eq!(r.status, 201, "{}", r.raw);
    let binding = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": "max-replicas-binding"},
        "spec": {"policyName": "max-replicas", "validationActions": actions,
                 "paramRef": {"name": "limits", "namespace": "default", "parameterNotFoundAction": "Deny"}}});
    let r = post(kapi, BINDINGS, &binding);
    assert_eq!(r.status, 201, "{}", r.raw);
    // Consistent reads from the caches the plugin reads: they have the policy and binding now.
    let _ = kapi.get_json(POLICIES);
    let _ = kapi.get_json(BINDINGS);
}

#[test]
fn a_policy_with_a_param_refuses_a_deployment_over_the_limit() {
    let kapi = Kapi::start().expect("start kapi");
    install(&kapi, &["Deny"]);
    let refused = post(&kapi, DEPLOYMENTS, &deployment("big", 5));
    // kube answers a validation without `reason` with 422 Invalid, in admission's forbidden shape.
    assert_eq!((refused.status, refused.body["reason"].as_str()), (422, Some("Invalid")), "{}", refused.raw);
    assert_eq!(
        refused.body["message"],
        "deployments.apps \"big\" is forbidden: ValidatingAdmissionPolicy 'max-replicas' with binding 'max-replicas-binding' denied request: replicas 5 exceed the limit of 3"
    );
    assert_eq!(kapi.request(&Request::get(&format!("{DEPLOYMENTS}/big"))).status, 404, "nothing stored");
    assert_eq!(post(&kapi, DEPLOYMENTS, &deployment("small", 2)).status, 201);

    // kubectl prints kube's message.
    let manifest = kapi.write_file("big.yaml", &serde_json::to_string(&deployment("big", 4)).expect("json"));
    let out = kapi.kubectl(&["apply", "-f", manifest.to_str().expect("utf-8 path")]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("ValidatingAdmissionPolicy 'max-replicas' with binding 'max-replicas-binding' denied request: replicas 4 exceed the limit of 3"), "{stderr}");

    // Scaling through an update is checked too; raising the param lets it through.
    let mut grown = kapi.get_json(&format!("{DEPLOYMENTS}/small"));
    grown["spec"]["replicas"] = json!(6);
    assert_eq!(kapi.request(&Request::new("PUT", &format!("{DEPLOYMENTS}/small")).json(&grown)).status, 422);
    let raised = kapi.request(&Request::new("PATCH", "/api/v1/namespaces/default/configmaps/limits").raw("application/merge-patch+json", br#"{"data":{"maxReplicas":"10"}}"#.to_vec()));
    assert_eq!(raised.status, 200, "{}", raised.raw);
    let accepted = wait_for(Duration::from_secs(5), || {
        let r = kapi.request(&Request::new("PUT", &format!("{DEPLOYMENTS}/small")).json(&grown));
        (r.status == 200).then_some(r)
    });
    assert!(accepted.is_some(), "the raised limit applies");

    // Without its param, the binding denies (parameterNotFoundAction: Deny), with kube's text.
    assert_eq!(kapi.request(&Request::new("DELETE", "/api/v1/namespaces/default/configmaps/limits")).status, 200);
    let _ = kapi.get_json("/api/v1/namespaces/default/configmaps");
    let orphan = post(&kapi, DEPLOYMENTS, &deployment("orphan", 1));
    assert_eq!(orphan.status, 422, "{}", orphan.raw);
    let message = orphan.body["message"].as_str().unwrap_or_default();
    assert!(message.contains("failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction"), "{message}");
}

#[test]
fn warn_actions_reach_kubectl_as_warnings() {
    let kapi = Kapi::start().expect("start kapi");
    install(&kapi, &["Warn"]);
    let manifest = kapi.write_file("warned.yaml", &serde_json::to_string(&deployment("warned", 5)).expect("json"));
    let out = kapi.kubectl(&["create", "-f", manifest.to_str().expect("utf-8 path")]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "Warn does not refuse: {stderr}");
    assert!(
        stderr.contains("Warning: Validation failed for ValidatingAdmissionPolicy 'max-replicas' with binding 'max-replicas-binding': replicas 5 exceed the limit of 3"),
        "{stderr}"
    );
}

#[test]
fn a_mutating_admission_policy_sets_a_label() {
    let kapi = Kapi::start().expect("start kapi");
    let policy = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicy", "metadata": {"name": "team-label"},
        "spec": {"failurePolicy": "Fail", "reinvocationPolicy": "Never",
                 "matchConstraints": {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["deployments"]}]},
                 "mutations": [
                     {"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": "Object{metadata: Object.metadata{labels: {'team': 'platform'}}}"}},
                     {"patchType": "JSONPatch", "jsonPatch": {"expression": "[JSONPatch{op: 'add', path: '/metadata/annotations', value: {'policy': 'team-label'}}]"}}
                 ]}});
    let r = post(&kapi, "/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies", &policy);
    assert_eq!(r.status, 201, "{}", r.raw);
    let binding = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicyBinding", "metadata": {"name": "team-label"},
        "spec": {"policyName": "team-label"}});
    let r = post(&kapi, "/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicybindings", &binding);
    assert_eq!(r.status, 201, "{}", r.raw);
    let _ = kapi.get_json("/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies");
    let _ = kapi.get_json("/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicybindings");

    let created = post(&kapi, DEPLOYMENTS, &deployment("labelled", 1));
    assert_eq!(created.status, 201, "{}", created.raw);
    assert_eq!(created.body["metadata"]["labels"]["team"], "platform", "{}", created.raw);
    assert_eq!(created.body["metadata"]["annotations"]["policy"], "team-label", "{}", created.raw);
    let stored = kapi.get_json(&format!("{DEPLOYMENTS}/labelled"));
    assert_eq!(stored["metadata"]["labels"]["team"], "platform");
}

// kube's validatingadmissionpolicy-status controller: expressions are type-checked against the
// schemas of the kinds a policy matches, and what does not check is reported in its status
#[test]
fn type_checking_warnings_reach_the_policy_status() {
    let kapi = Kapi::start().expect("start kapi");
    let policy = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy", "metadata": {"name": "typo"},
        "spec": {"failurePolicy": "Fail",
                 "matchConstraints": {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["deployments"]}]},
                 "validations": [{"expression": "object.spec.replicaz <= 5"}, {"expression": "object.spec.replicas <= 5"}]}});
    let r = post(&kapi, POLICIES, &policy);
    assert_eq!(r.status, 201, "{}", r.raw);
    let status = wait_for(Duration::from_secs(10), || {
        let got = kapi.get_json(&format!("{POLICIES}/typo"));
        (got["status"]["observedGeneration"] == 1).then(|| got["status"].clone())
    })
    .expect("the status controller observed the policy");
    let warning = "apps/v1, Kind=Deployment: ERROR: <input>:1:12: undefined field 'replicaz'\n | object.spec.replicaz <= 5\n | ...........^\n";
    assert_eq!(
        status["typeChecking"],
        json!({"expressionWarnings": [{"fieldRef": "spec.validations[0].expression", "warning": warning}]})
    );
    let out = kapi.kubectl(&["get", "validatingadmissionpolicy", "typo", "-o", "yaml"]);
    let yaml = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    for line in ["  observedGeneration: 1", "  typeChecking:", "    expressionWarnings:", "    - fieldRef: spec.validations[0].expression", "undefined field 'replicaz'"] {
        assert!(yaml.contains(line), "{line:?} in:\n{yaml}");
    }

    // fixed: the next generation checks clean
    let mut fixed = kapi.get_json(&format!("{POLICIES}/typo"));
    fixed["spec"]["validations"][0]["expression"] = json!("object.spec.replicas >= 0");
    let r = kapi.request(&Request::new("PUT", &format!("{POLICIES}/typo")).json(&fixed));
    assert_eq!(r.status, 200, "{}", r.raw);
    let status = wait_for(Duration::from_secs(10), || {
        let got = kapi.get_json(&format!("{POLICIES}/typo"));
        (got["status"]["observedGeneration"] == 2).then(|| got["status"].clone())
    })
    .expect("the second generation observed");
    assert_eq!(status["typeChecking"], json!({}));
}

const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
const GADGETS: &str = "/apis/example.com/v1/namespaces/default/gadgets";

/// A MutatingAdmissionPolicy on gadgets.example.com whose apply configuration is `expression`,
/// for objects named `name`.
fn gadget_policy(kapi: &Kapi, name: &str, expression: &str) {
    let policy = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicy", "metadata": {"name": name},
        "spec": {"failurePolicy": "Fail", "reinvocationPolicy": "Never",
                 "matchConstraints": {"resourceRules": [{"apiGroups": ["example.com"], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["gadgets"]}]},
                 "matchConditions": [{"name": "named", "expression": format!("object.metadata.name == '{name}'")}],
                 "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": expression}}]}});
    let r = post(kapi, "/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies", &policy);
    assert_eq!(r.status, 201, "{}", r.raw);
    let binding = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicyBinding", "metadata": {"name": name},
        "spec": {"policyName": name}});
    let r = post(kapi, "/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicybindings", &binding);
    assert_eq!(r.status, 201, "{}", r.raw);
}

fn gadget(name: &str) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": name},
        "spec": {"replicas": 1, "ports": [{"name": "http", "port": 80}], "args": ["--x"], "settings": {"color": "red"}}})
}

// a custom resource's apply configuration merges by its CRD's structural schema, as server-side
// apply would: a keyed list and a granular map merged, undeclared fields and atomic lists refused
#[test]
fn a_mutating_admission_policy_applies_to_a_custom_resource() {
    let kapi = Kapi::start().expect("start kapi");
    let item = json!({"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}, "port": {"type": "integer"}}});
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "gadgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
                 "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                     "spec": {"type": "object", "properties": {
                         "replicas": {"type": "integer"},
                         "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"], "items": item},
                         "args": {"type": "array", "items": {"type": "string"}},
                         "settings": {"type": "object", "additionalProperties": {"type": "string"}}}}}}}}]}});
    assert_eq!(post(&kapi, CRDS, &crd).status, 201);
    let served = wait_for(Duration::from_secs(10), || (kapi.request(&Request::get(GADGETS)).status == 200).then_some(()));
    assert!(served.is_some(), "gadgets served");
    gadget_policy(&kapi, "merged", "Object{spec: Object.spec{replicas: 3, settings: {'team': 'platform'}, ports: [Object.spec.ports{name: 'metrics', port: 9090}]}}");
    gadget_policy(&kapi, "typo", "Object{spec: Object.spec{replicaz: 3}}");
    gadget_policy(&kapi, "atomic", "Object{spec: Object.spec{args: ['--y']}}");
    let _ = kapi.get_json("/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies");
    let _ = kapi.get_json("/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicybindings");

    let created = post(&kapi, GADGETS, &gadget("merged"));
    assert_eq!(created.status, 201, "{}", created.raw);
    let spec = &created.body["spec"];
    assert_eq!(spec["replicas"], 3, "{}", created.raw);
    assert_eq!(spec["settings"], json!({"color": "red", "team": "platform"}), "{}", created.raw);
    assert_eq!(spec["ports"], json!([{"name": "http", "port": 80}, {"name": "metrics", "port": 9090}]), "{}", created.raw);
    assert_eq!(spec["args"], json!(["--x"]));
    let stored = kapi.get_json(&format!("{GADGETS}/merged"));
    assert_eq!(stored["spec"], created.body["spec"]);
    // the merge leaves no managedFields of its own
    let managers: Vec<&str> = stored["metadata"]["managedFields"].as_array().into_iter().flatten().filter_map(|e| e["manager"].as_str()).collect();
    assert!(!managers.contains(&"kapi-mutating-admission-policy"), "{managers:?}");

    let typo = post(&kapi, GADGETS, &gadget("typo"));
    assert_eq!(typo.status, 403, "{}", typo.raw);
    let message = typo.body["message"].as_str().unwrap_or_default();
    assert!(message.ends_with("failed to convert patch object to typed object: .spec.replicaz: field not declared in schema"), "{message}");
    let atomic = post(&kapi, GADGETS, &gadget("atomic"));
    assert_eq!(atomic.status, 403, "{}", atomic.raw);
    let message = atomic.body["message"].as_str().unwrap_or_default();
    assert!(message.ends_with("invalid ApplyConfiguration: may not mutate atomic arrays, maps or structs: .spec.args"), "{message}");
    for name in ["typo", "atomic"] {
        assert_eq!(kapi.request(&Request::get(&format!("{GADGETS}/{name}"))).status, 404, "{name}: nothing stored");
    }
}
