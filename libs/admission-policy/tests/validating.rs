//! The ValidatingAdmissionPolicy plugin through `kapi_admission::Chain`, over policies,
//! bindings, namespaces and params stored in SQLite and read from the watch caches.

mod support;

use kapi_apimachinery::StatusReason;
use serde_json::{json, Value};
use support::{create_deployment, deployment, deployment_policy, Cluster, Rules};

const FAILURE_KEY: &str = "validation.policy.admission.k8s.io/validation_failure";

fn limit(expression: &str) -> Value {
    json!([{"expression": expression}])
}

// the server's runtime: evaluation runs in place of the worker (block_in_place)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn denies_with_kubes_message_and_reason() {
    let c = Cluster::new().await;
    c.policy(deployment_policy("replicas-limit", limit("object.spec.replicas <= 5"), json!({}))).await;
    c.binding("replicas-binding", "replicas-limit", json!({})).await;
    let (r, _) = c.admit(&create_deployment(deployment("default", "web", 10), "alice")).await;
    let err = r.unwrap_err();
    let message = "ValidatingAdmissionPolicy 'replicas-limit' with binding 'replicas-binding' denied request: failed expression: object.spec.replicas <= 5";
    assert_eq!(err.message, format!("deployments.apps \"web\" is forbidden: {message}"));
    // no reason on the validation: kube answers 422 Invalid, the cause repeating the message
    assert_eq!((err.code, err.reason), (422, StatusReason::Invalid));
    let details = err.details.as_ref().unwrap();
    assert_eq!((details.group.as_str(), details.kind.as_str(), details.name.as_str()), ("apps", "deployments", "web"));
    assert_eq!(details.causes.iter().map(|c| c.message.as_str()).collect::<Vec<_>>(), [message]);
    let (r, outcome) = c.admit(&create_deployment(deployment("default", "web", 3), "alice")).await;
    assert!(r.is_ok() && outcome.warnings.is_empty());
}

#[tokio::test]
async fn reasons_give_their_codes() {
    for (reason, code, status) in [
        ("Forbidden", 403, StatusReason::Forbidden),
        ("RequestEntityTooLarge", 413, StatusReason::RequestEntityTooLarge),
        ("Invalid", 422, StatusReason::Invalid),
    ] {
        let c = Cluster::new().await;
        let v = json!([{"expression": "object.spec.replicas <= 5", "message": "too many", "reason": reason}]);
        c.policy(deployment_policy("p", v, json!({}))).await;
        c.binding("b", "p", json!({})).await;
        let err = c.admit(&create_deployment(deployment("default", "web", 10), "alice")).await.0.unwrap_err();
        assert_eq!((err.code, err.reason), (code, status), "{reason}");
        assert_eq!(err.message, "deployments.apps \"web\" is forbidden: ValidatingAdmissionPolicy 'p' with binding 'b' denied request: too many");
    }
}

#[tokio::test]
async fn params_from_a_config_map_limit_replicas() {
    let c = Cluster::new().await;
    let cm = |name: &str, max: &str, labels: Value| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default", "labels": labels}, "data": {"maxReplicas": max}});
    c.create("", "configmaps", cm("limits", "3", json!({}))).await.unwrap();
    let v = json!([{"expression": "object.spec.replicas <= int(params.data.maxReplicas)", "messageExpression": "'at most ' + params.data.maxReplicas + ' replicas'"}]);
    c.policy(deployment_policy("max-replicas", v, json!({"paramKind": {"apiVersion": "v1", "kind": "ConfigMap"}})))
        .await;
    c.binding(
        "by-name",
        "max-replicas",
        json!({"paramRef": {"name": "limits", "namespace": "default", "parameterNotFoundAction": "Deny"}}),
    )
    .await;
    let err = c.admit(&create_deployment(deployment("default", "web", 5), "alice")).await.0.unwrap_err();
    assert!(
        err.message.ends_with(
            "ValidatingAdmissionPolicy 'max-replicas' with binding 'by-name' denied request: at most 3 replicas"
        ),
        "{}",
        err.message
    );
    assert!(c.admit(&create_deployment(deployment("default", "web", 2), "alice")).await.0.is_ok());

    // with a selector, every matching param is evaluated
    c.create("", "configmaps", cm("team-a", "4", json!({"limits": "team"}))).await.unwrap();
    c.create("", "configmaps", cm("team-b", "8", json!({"limits": "team"}))).await.unwrap();
    c.binding("by-selector", "max-replicas", json!({"paramRef": {"selector": {"matchLabels": {"limits": "team"}}, "parameterNotFoundAction": "Deny"}, "validationActions": ["Warn"]}))
        .await;
    let (r, outcome) = c.admit(&create_deployment(deployment("default", "web", 6), "alice")).await;
    assert!(r.unwrap_err().message.contains("with binding 'by-name' denied request: at most 3 replicas"));
    assert_eq!(outcome.warnings, ["Validation failed for ValidatingAdmissionPolicy 'max-replicas' with binding 'by-selector': at most 4 replicas"]);
}

#[tokio::test]
async fn missing_params_allow_or_deny() {
    let c = Cluster::new().await;
    let v = limit("object.spec.replicas <= int(params.data.maxReplicas)");
    c.policy(deployment_policy("p", v, json!({"paramKind": {"apiVersion": "v1", "kind": "ConfigMap"}}))).await;
    c.binding("allow", "p", json!({"paramRef": {"name": "absent", "parameterNotFoundAction": "Allow"}})).await;
    assert!(c.admit(&create_deployment(deployment("default", "web", 10), "alice")).await.0.is_ok());
    c.binding("deny", "p", json!({"paramRef": {"name": "absent", "parameterNotFoundAction": "Deny"}})).await;
    let err = c.admit(&create_deployment(deployment("default", "web", 10), "alice")).await.0.unwrap_err();
    assert_eq!(
        err.message,
        "deployments.apps \"web\" is forbidden: ValidatingAdmissionPolicy 'p' with binding 'deny' denied request: failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction"
    );
    assert_eq!(err.code, 422);
}

#[tokio::test]
async fn a_param_kind_that_is_not_served_is_a_policy_configuration_error() {
    let c = Cluster::new().await;
    let v = limit("object.spec.replicas <= 5");
    c.policy(deployment_policy("p", v, json!({"paramKind": {"apiVersion": "example.com/v1", "kind": "Limits"}}))).await;
    c.binding("b", "p", json!({"paramRef": {"name": "x", "parameterNotFoundAction": "Allow"}})).await;
    let err = c.admit(&create_deployment(deployment("default", "web", 1), "alice")).await.0.unwrap_err();
    assert!(err.message.ends_with(
        "ValidatingAdmissionPolicy 'p' denied request: failed to configure policy: failed to find resource referenced by paramKind: 'example.com/v1, Kind=Limits'"
    ), "{}", err.message);
}

#[tokio::test]
async fn warn_and_audit() {
    let c = Cluster::new().await;
    let extra = json!({"auditAnnotations": [{"key": "replicas", "valueExpression": "'replicas: ' + string(object.spec.replicas)"}]});
    c.policy(deployment_policy("p", limit("object.spec.replicas <= 5"), extra)).await;
    c.binding("warn", "p", json!({"validationActions": ["Warn"]})).await;
    c.binding("audit", "p", json!({"validationActions": ["Audit"]})).await;
    let (r, outcome) = c.admit(&create_deployment(deployment("default", "web", 10), "alice")).await;
    assert!(r.is_ok());
    assert_eq!(
        outcome.warnings,
        ["Validation failed for ValidatingAdmissionPolicy 'p' with binding 'warn': failed expression: object.spec.replicas <= 5"]
    );
    assert_eq!(
        outcome.annotations.get(FAILURE_KEY).map(String::as_str),
        Some(
            r#"[{"message":"failed expression: object.spec.replicas \u003c= 5","policy":"p","binding":"audit","expressionIndex":0,"validationActions":["Audit"]}]"#
        )
    );
    // the same value from both bindings once
    assert_eq!(outcome.annotations.get("p/replicas").map(String::as_str), Some("replicas: 10"));
    let (r, outcome) = c.admit(&create_deployment(deployment("default", "web", 2), "alice")).await;
    assert!(r.is_ok() && outcome.warnings.is_empty() && !outcome.annotations.contains_key(FAILURE_KEY));
    assert_eq!(outcome.annotations.get("p/replicas").map(String::as_str), Some("replicas: 2"));
}

#[tokio::test]
async fn message_expressions() {
    let c = Cluster::new().await;
    let v = json!([
        {"expression": "object.spec.replicas <= 5", "message": "static", "messageExpression": "'replicas ' + string(object.spec.replicas) + ' exceed 5'"},
        {"expression": "object.metadata.name != 'web'", "message": "fallback", "messageExpression": "'  '"},
    ]);
    c.policy(deployment_policy("p", v, json!({}))).await;
    c.binding("b", "p", json!({"validationActions": ["Warn"]})).await;
    let (_, outcome) = c.admit(&create_deployment(deployment("default", "web", 10), "alice")).await;
    assert_eq!(
        outcome.warnings,
        [
            "Validation failed for ValidatingAdmissionPolicy 'p' with binding 'b': replicas 10 exceed 5",
            "Validation failed for ValidatingAdmissionPolicy 'p' with binding 'b': fallback",
        ]
    );
}

#[tokio::test]
async fn failure_policy_on_runtime_errors() {
    for (policy, refused) in [("Fail", true), ("Ignore", false)] {
        let c = Cluster::new().await;
        c.policy(deployment_policy("p", limit("object.spec.nope > 1"), json!({"failurePolicy": policy}))).await;
        c.binding("b", "p", json!({})).await;
        let r = c.admit(&create_deployment(deployment("default", "web", 1), "alice")).await.0;
        assert_eq!(r.is_err(), refused, "{policy}");
        if let Err(e) = r {
            assert!(
                e.message.ends_with(
                    "denied request: expression 'object.spec.nope > 1' resulted in error: no such key: nope"
                ),
                "{}",
                e.message
            );
            assert_eq!(e.code, 422);
        }
    }
}

#[tokio::test]
async fn namespace_selector() {
    let c = Cluster::new().await;
    c.namespace("prod", json!({"env": "prod"})).await;
    c.namespace("dev", json!({"env": "dev"})).await;
    let mut policy = deployment_policy(
        "p",
        limit("object.spec.replicas <= 5 && namespaceObject.metadata.labels.env == 'prod'"),
        json!({}),
    );
    policy["spec"]["matchConstraints"]["namespaceSelector"] = json!({"matchLabels": {"env": "prod"}});
    c.policy(policy).await;
    c.binding("b", "p", json!({})).await;
    assert!(c.admit(&create_deployment(deployment("prod", "web", 10), "alice")).await.0.is_err());
    assert!(c.admit(&create_deployment(deployment("prod", "web", 2), "alice")).await.0.is_ok());
    assert!(c.admit(&create_deployment(deployment("dev", "web", 10), "alice")).await.0.is_ok());
}

#[tokio::test]
async fn match_conditions_and_variables() {
    let c = Cluster::new().await;
    let extra = json!({
        "matchConditions": [{"name": "not-admin", "expression": "request.userInfo.username != 'admin'"}],
        "variables": [
            {"name": "replicas", "expression": "object.spec.replicas"},
            {"name": "tooMany", "expression": "variables.replicas > 5"},
        ],
    });
    let v =
        json!([{"expression": "!variables.tooMany", "messageExpression": "'replicas: ' + string(variables.replicas)"}]);
    c.policy(deployment_policy("p", v, extra)).await;
    c.binding("b", "p", json!({})).await;
    let err = c.admit(&create_deployment(deployment("default", "web", 10), "alice")).await.0.unwrap_err();
    assert!(err.message.ends_with("denied request: replicas: 10"), "{}", err.message);
    assert!(c.admit(&create_deployment(deployment("default", "web", 10), "admin")).await.0.is_ok());
    assert!(c.admit(&create_deployment(deployment("default", "web", 5), "alice")).await.0.is_ok());
}

#[tokio::test]
async fn authorizer_checks() {
    let rules = Rules { allowed: vec![("alice".into(), "scale".into(), "deployments".into())], ..Rules::default() };
    let c = Cluster::with_authorizer(rules).await;
    let v = json!([{
        "expression": "object.spec.replicas <= 5 || authorizer.group('apps').resource('deployments').namespace(object.metadata.namespace).check('scale').allowed()",
        "messageExpression": "'may not scale past 5'",
    }]);
    c.policy(deployment_policy("p", v, json!({}))).await;
    c.binding("b", "p", json!({})).await;
    assert!(c.admit(&create_deployment(deployment("default", "web", 10), "alice")).await.0.is_ok());
    let err = c.admit(&create_deployment(deployment("default", "web", 10), "bob")).await.0.unwrap_err();
    assert!(err.message.ends_with("denied request: may not scale past 5"));
    let asked = c.authorizer.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 2);
    assert_eq!(
        (asked[1].user.name.as_str(), asked[1].api_group.as_str(), asked[1].namespace.as_str()),
        ("bob", "apps", "default")
    );
}

// a validation that reads the authorizer only through a variable still has its functions
#[tokio::test]
async fn authorizer_checks_through_a_variable() {
    let rules = Rules { allowed: vec![("alice".into(), "scale".into(), "deployments".into())], ..Rules::default() };
    let c = Cluster::with_authorizer(rules).await;
    let extra = json!({"variables": [{"name": "scale", "expression": "authorizer.group('apps').resource('deployments').namespace(object.metadata.namespace).check('scale')"}]});
    c.policy(deployment_policy("p", limit("object.spec.replicas <= 5 || variables.scale.allowed()"), extra)).await;
    c.binding("b", "p", json!({})).await;
    assert!(c.admit(&create_deployment(deployment("default", "web", 10), "alice")).await.0.is_ok());
    let err = c.admit(&create_deployment(deployment("default", "web", 10), "bob")).await.0.unwrap_err();
    assert!(err.message.ends_with("failed expression: object.spec.replicas <= 5 || variables.scale.allowed()"), "{}", err.message);
}

// the bound policies are kept between writes: a binding or policy written later is seen
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bindings_and_policies_written_later_apply_at_once() {
    let c = Cluster::new().await;
    c.policy(deployment_policy("p", limit("object.spec.replicas <= 5"), json!({}))).await;
    assert!(c.admit(&create_deployment(deployment("default", "web", 10), "alice")).await.0.is_ok());
    c.binding("b", "p", json!({})).await;
    assert!(c.admit(&create_deployment(deployment("default", "web", 10), "alice")).await.0.is_err());
    assert!(c.admit(&create_deployment(deployment("default", "web", 2), "alice")).await.0.is_ok());
    // a second policy, bound before it exists
    c.binding("b2", "q", json!({})).await;
    assert!(c.admit(&create_deployment(deployment("default", "web", 2), "alice")).await.0.is_ok());
    c.policy(deployment_policy("q", limit("object.spec.replicas != 2"), json!({}))).await;
    let err = c.admit(&create_deployment(deployment("default", "web", 2), "alice")).await.0.unwrap_err();
    assert!(err.message.contains("ValidatingAdmissionPolicy 'q' with binding 'b2'"), "{}", err.message);
}

// a policy whose worst case is long runs off the worker (block_in_place) on the server's
// runtime, and gives the same answers
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_costly_policy_on_the_multi_threaded_runtime() {
    let c = Cluster::new().await;
    let expression = "object.spec.template.spec.containers.all(x, x.image != 'bad')";
    c.policy(deployment_policy("p", limit(expression), json!({}))).await;
    c.binding("b", "p", json!({})).await;
    assert!(c.admit(&create_deployment(deployment("default", "web", 1), "alice")).await.0.is_ok());
    let mut d = deployment("default", "web", 1);
    d["spec"]["template"]["spec"]["containers"][0]["image"] = json!("bad");
    assert!(c.admit(&create_deployment(d, "alice")).await.0.is_err());
}

#[tokio::test]
async fn cost_limit_exceeded() {
    let c = Cluster::new().await;
    let expression = "object.spec.template.spec.containers.all(a, object.spec.template.spec.containers.all(b, a.name != b.name || a == b))";
    c.policy(deployment_policy("p", limit(expression), json!({}))).await;
    c.binding("b", "p", json!({})).await;
    let mut d = deployment("default", "web", 1);
    let containers: Vec<Value> = (0..1500).map(|i| json!({"name": format!("c{i}"), "image": "nginx"})).collect();
    d["spec"]["template"]["spec"]["containers"] = Value::Array(containers);
    let err = c.admit(&create_deployment(d, "alice")).await.0.unwrap_err();
    assert!(
        err.message.ends_with(&format!("denied request: expression '{expression}' resulted in error: operation cancelled: actual cost limit exceeded")),
        "{}",
        err.message
    );
    // a few containers are cheap
    assert!(c.admit(&create_deployment(deployment("default", "web", 1), "alice")).await.0.is_ok());
}

#[tokio::test]
async fn a_changed_policy_applies_at_once() {
    let c = Cluster::new().await;
    c.policy(deployment_policy("p", limit("object.spec.replicas <= 5"), json!({}))).await;
    c.binding("b", "p", json!({})).await;
    assert!(c.admit(&create_deployment(deployment("default", "web", 4), "alice")).await.0.is_ok());
    let spec =
        kapi_registry::catalog::find("admissionregistration.k8s.io", "v1", "validatingadmissionpolicies").unwrap();
    let mut stored = c.rest.get(&kapi_registry::strategy::CatalogStrategy(spec), None, "p").await.unwrap();
    stored["spec"]["validations"] = limit("object.spec.replicas <= 3");
    c.update("admissionregistration.k8s.io", "validatingadmissionpolicies", stored).await;
    let err = c.admit(&create_deployment(deployment("default", "web", 4), "alice")).await.0.unwrap_err();
    assert!(err.message.ends_with("failed expression: object.spec.replicas <= 3"), "{}", err.message);
}

#[tokio::test]
async fn policies_do_not_apply_to_their_own_configuration() {
    let c = Cluster::new().await;
    let policy = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy", "metadata": {"name": "deny-all"},
        "spec": {"matchConstraints": {"resourceRules": [{"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["*"], "resources": ["*"]}]},
            "validations": [{"expression": "false"}]}});
    c.policy(policy).await;
    c.binding("b", "deny-all", json!({})).await;
    assert!(c.admit(&create_deployment(deployment("default", "web", 1), "alice")).await.0.is_err());
    let mut attrs = create_deployment(json!({"metadata": {"name": "b2"}}), "alice");
    attrs.kind = kapi_admission::attributes::Gvx {
        group: "admissionregistration.k8s.io".into(),
        version: "v1".into(),
        name: "ValidatingAdmissionPolicyBinding".into(),
    };
    attrs.resource = kapi_admission::attributes::Gvx {
        group: "admissionregistration.k8s.io".into(),
        version: "v1".into(),
        name: "validatingadmissionpolicybindings".into(),
    };
    attrs.namespace = String::new();
    assert!(c.admit(&attrs).await.0.is_ok());
}

#[tokio::test]
async fn equivalent_versions_match_and_see_the_matched_version() {
    let c = Cluster::new().await;
    let policy = |name: &str, match_policy: &str| {
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy", "metadata": {"name": name},
            "spec": {"matchConstraints": {"matchPolicy": match_policy, "resourceRules": [{"apiGroups": ["autoscaling"], "apiVersions": ["v2"], "operations": ["CREATE"], "resources": ["horizontalpodautoscalers"]}]},
                "validations": [{"expression": "request.kind.version == 'v2' && request.requestKind.version == 'v1' && object.apiVersion == 'autoscaling/v2' && object.spec.maxReplicas <= 5"}]}})
    };
    c.policy(policy("equivalent", "Equivalent")).await;
    c.binding("b", "equivalent", json!({})).await;
    let hpa = |max: i64| {
        json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "h", "namespace": "default"},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}, "minReplicas": 1, "maxReplicas": max, "targetCPUUtilizationPercentage": 50}})
    };
    let mut attrs = create_deployment(hpa(10), "alice");
    attrs.kind = kapi_admission::attributes::Gvx {
        group: "autoscaling".into(),
        version: "v1".into(),
        name: "HorizontalPodAutoscaler".into(),
    };
    attrs.resource = kapi_admission::attributes::Gvx {
        group: "autoscaling".into(),
        version: "v1".into(),
        name: "horizontalpodautoscalers".into(),
    };
    assert!(c.admit(&attrs).await.0.is_err());
    attrs.object = Some(hpa(3));
    assert!(c.admit(&attrs).await.0.is_ok());
    // Exact: the v1 request does not match a v2 rule
    let c = Cluster::new().await;
    c.policy(policy("exact", "Exact")).await;
    c.binding("b", "exact", json!({})).await;
    attrs.object = Some(hpa(10));
    assert!(c.admit(&attrs).await.0.is_ok());
}

#[tokio::test]
async fn object_selector_exclusions_and_binding_match_resources() {
    let c = Cluster::new().await;
    c.namespace("team", json!({"team": "a"})).await;
    let mut policy = deployment_policy("p", limit("object.spec.replicas <= 5"), json!({}));
    policy["spec"]["matchConstraints"]["objectSelector"] =
        json!({"matchExpressions": [{"key": "exempt", "operator": "DoesNotExist"}]});
    policy["spec"]["matchConstraints"]["excludeResourceRules"] = json!([{"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["*"], "resources": ["deployments"], "resourceNames": ["legacy"]}]);
    c.policy(policy).await;
    // the binding narrows the policy to namespaces of team a
    c.binding("b", "p", json!({"matchResources": {"namespaceSelector": {"matchLabels": {"team": "a"}}}})).await;
    assert!(c.admit(&create_deployment(deployment("team", "web", 10), "alice")).await.0.is_err());
    assert!(c.admit(&create_deployment(deployment("default", "web", 10), "alice")).await.0.is_ok());
    assert!(c.admit(&create_deployment(deployment("team", "legacy", 10), "alice")).await.0.is_ok());
    let mut exempt = deployment("team", "web", 10);
    exempt["metadata"]["labels"]["exempt"] = json!("yes");
    assert!(c.admit(&create_deployment(exempt.clone(), "alice")).await.0.is_ok());
    // on update, the old object's labels match too
    let mut update = create_deployment(exempt, "alice");
    update.operation = kapi_admission::Operation::Update;
    update.old_object = Some(deployment("team", "web", 1));
    assert!(c.admit(&update).await.0.is_err());
}
