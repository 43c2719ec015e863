//! User-written FlowSchemas and PriorityLevelConfigurations are validated as kube-apiserver
//! validates them: an invalid one is answered 422 Invalid with every cause (kube's field paths
//! and messages) and is not stored, on create and on update alike. The API is served with or
//! without `--enable-priority-and-fairness`; with it, the server's own bootstrap objects go
//! through the same validation and must all be stored, and the mandatory ones (`exempt`,
//! `catch-all`) keep their fixed spec as kube keeps it.

use std::time::Duration;

use kapi_e2e::{wait_for, HttpResponse, Kapi, Request};
use serde_json::{json, Value};

const FLOW_SCHEMAS: &str = "/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas";
const LEVELS: &str = "/apis/flowcontrol.apiserver.k8s.io/v1/prioritylevelconfigurations";
const API_VERSION: &str = "flowcontrol.apiserver.k8s.io/v1";

/// A FlowSchema with a fault in nearly every part, and the (field, message) causes kube gives.
fn bad_schema() -> (Value, Vec<(&'static str, &'static str)>) {
    let obj = json!({"apiVersion": API_VERSION, "kind": "FlowSchema", "metadata": {"name": "bad-schema"}, "spec": {
        "priorityLevelConfiguration": {"name": ""},
        "matchingPrecedence": 10001,
        "distinguisherMethod": {"type": "ByGroup"},
        "rules": [{
            "subjects": [{"kind": "Robot"}, {"kind": "ServiceAccount", "serviceAccount": {"name": "*"}}],
            "resourceRules": [{"verbs": ["*", "get"], "apiGroups": [], "resources": ["pods"]}],
            "nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": ["healthz"]}]
        }]
    }});
    let causes = vec![
        ("spec.matchingPrecedence", "Invalid value: 10001: must not be greater than 10000"),
        (
            "spec.distinguisherMethod.type",
            r#"Unsupported value: flowcontrol.FlowDistinguisherMethod{Type:"ByGroup"}: supported values: "ByNamespace", "ByUser""#,
        ),
        ("spec.priorityLevelConfiguration.name", "Required value: must reference a priority level"),
        ("spec.rules[0].subjects[0].kind", r#"Unsupported value: "Robot": supported values: "Group", "ServiceAccount", "User""#),
        ("spec.rules[0].subjects[1].serviceAccount.namespace", "Required value: must specify namespace for service account"),
        ("spec.rules[0].resourceRules[0].verbs", r#"Invalid value: []string{"*", "get"}: if '*' is present, must not specify other verbs"#),
        ("spec.rules[0].resourceRules[0].apiGroups", "Required value: resource rules must supply at least one api group"),
        (
            "spec.rules[0].resourceRules[0].namespaces",
            "Required value: resource rules that are not cluster scoped must supply at least one namespace",
        ),
        ("spec.rules[0].nonResourceRules[0].nonResourceURLs[0]", r#"Invalid value: "healthz": must start with slash"#),
    ];
    (obj, causes)
}

/// A PriorityLevelConfiguration with several faults, and kube's causes.
fn bad_level() -> (Value, Vec<(&'static str, &'static str)>) {
    let obj = json!({"apiVersion": API_VERSION, "kind": "PriorityLevelConfiguration", "metadata": {"name": "bad-level"}, "spec": {
        "type": "Limited",
        "exempt": {"nominalConcurrencyShares": 1},
        "limited": {
            "nominalConcurrencyShares": -1,
            "lendablePercent": 101,
            "borrowingLimitPercent": -5,
            "limitResponse": {"type": "Queue", "queuing": {"queues": 7, "handSize": 8, "queueLengthLimit": -1}}
        }
    }});
    let causes = vec![
        ("spec.exempt", "Forbidden: must be nil if the type is Limited"),
        ("spec.limited.nominalConcurrencyShares", "Invalid value: -1: must be a non-negative integer"),
        ("spec.limited.limitResponse.queuing.queueLengthLimit", "Invalid value: -1: must be positive"),
        ("spec.limited.limitResponse.queuing.handSize", "Invalid value: 8: should not be greater than queues (7)"),
        ("spec.limited.lendablePercent", "Invalid value: 101: must be between 0 and 100, inclusive"),
        ("spec.limited.borrowingLimitPercent", "Invalid value: -5: if specified, must be a non-negative integer"),
    ];
    (obj, causes)
}

/// Asserts a 422 Invalid naming `kind` and `name` whose message and details list exactly
/// `causes`, in order.
fn assert_invalid(r: &HttpResponse, kind: &str, name: &str, causes: &[(&str, &str)]) {
    assert_eq!(r.status, 422, "{}", r.raw);
    assert_eq!(r.reason(), "Invalid", "{}", r.raw);
    let joined: Vec<String> = causes.iter().map(|(field, message)| format!("{field}: {message}")).collect();
    // kube brackets the list only when there are several causes.
    let list = if joined.len() == 1 { joined[0].clone() } else { format!("[{}]", joined.join(", ")) };
    let want = format!("{kind}.flowcontrol.apiserver.k8s.io \"{name}\" is invalid: {list}");
    assert_eq!(r.message(), want);
    let details = &r.body["details"];
    assert_eq!((details["name"].as_str(), details["kind"].as_str()), (Some(name), Some(kind)), "{}", r.raw);
    let got: Vec<(&str, &str)> = details["causes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| (c["field"].as_str().unwrap_or(""), c["message"].as_str().unwrap_or("")))
        .collect();
    assert_eq!(got, causes, "{}", r.raw);
}

fn assert_absent(kapi: &Kapi, collection: &str, name: &str) {
    let r = kapi.request(&Request::get(&format!("{collection}/{name}")));
    assert_eq!(r.status, 404, "{name} was stored: {}", r.raw);
}

fn post(kapi: &Kapi, collection: &str, obj: &Value) -> HttpResponse {
    kapi.request(&Request::new("POST", collection).json(obj))
}

fn exercise(kapi: &Kapi) {
    // Invalid creates: every cause, nothing stored.
    let (schema, causes) = bad_schema();
    assert_invalid(&post(kapi, FLOW_SCHEMAS, &schema), "FlowSchema", "bad-schema", &causes);
    assert_absent(kapi, FLOW_SCHEMAS, "bad-schema");
    let (level, causes) = bad_level();
    assert_invalid(&post(kapi, LEVELS, &level), "PriorityLevelConfiguration", "bad-level", &causes);
    assert_absent(kapi, LEVELS, "bad-level");

    // A valid pair is accepted.
    let level = json!({"apiVersion": API_VERSION, "kind": "PriorityLevelConfiguration", "metadata": {"name": "team-a"}, "spec": {
        "type": "Limited",
        "limited": {"nominalConcurrencyShares": 5, "lendablePercent": 20, "limitResponse": {"type": "Queue", "queuing": {"queues": 16, "handSize": 4, "queueLengthLimit": 20}}}
    }});
    let schema = json!({"apiVersion": API_VERSION, "kind": "FlowSchema", "metadata": {"name": "team-a"}, "spec": {
        "priorityLevelConfiguration": {"name": "team-a"},
        "matchingPrecedence": 600,
        "distinguisherMethod": {"type": "ByNamespace"},
        "rules": [{
            "subjects": [{"kind": "ServiceAccount", "serviceAccount": {"namespace": "team-a", "name": "*"}}, {"kind": "Group", "group": {"name": "team-a"}}],
            "resourceRules": [{"verbs": ["get", "list", "watch"], "apiGroups": ["", "apps"], "resources": ["*"], "namespaces": ["team-a"]}],
            "nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": ["/metrics", "/debug/*"]}]
        }]
    }});
    let created_level = post(kapi, LEVELS, &level);
    assert_eq!(created_level.status, 201, "{}", created_level.raw);
    let created_schema = post(kapi, FLOW_SCHEMAS, &schema);
    assert_eq!(created_schema.status, 201, "{}", created_schema.raw);

    // An update that breaks a rule is refused and leaves the stored object as it was: a PUT of
    // the level, a merge patch of the schema.
    let before = kapi.get_json(&format!("{LEVELS}/team-a"));
    let mut broken = before.clone();
    broken["spec"]["limited"]["lendablePercent"] = json!(150);
    let r = kapi.request(&Request::new("PUT", &format!("{LEVELS}/team-a")).json(&broken));
    assert_invalid(&r, "PriorityLevelConfiguration", "team-a", &[("spec.limited.lendablePercent", "Invalid value: 150: must be between 0 and 100, inclusive")]);
    let after = kapi.get_json(&format!("{LEVELS}/team-a"));
    assert_eq!(after["spec"], before["spec"]);
    assert_eq!(after["metadata"]["resourceVersion"], before["metadata"]["resourceVersion"]);
    assert_eq!(after["spec"]["limited"]["lendablePercent"], 20);

    let before = kapi.get_json(&format!("{FLOW_SCHEMAS}/team-a"));
    let patch = json!({"spec": {"matchingPrecedence": 1}});
    let r = kapi.request(&Request::new("PATCH", &format!("{FLOW_SCHEMAS}/team-a")).raw("application/merge-patch+json", patch.to_string()));
    assert_invalid(
        &r,
        "FlowSchema",
        "team-a",
        &[("spec.matchingPrecedence", "Invalid value: 1: only the schema named 'exempt' may have matchingPrecedence 1")],
    );
    let after = kapi.get_json(&format!("{FLOW_SCHEMAS}/team-a"));
    assert_eq!(after["spec"], before["spec"]);
    assert_eq!(after["spec"]["matchingPrecedence"], 600);
}

#[test]
fn invalid_flow_control_objects_are_refused_with_every_cause_and_not_stored() {
    let kapi = Kapi::start().expect("start kapi");
    exercise(&kapi);
}

#[test]
fn with_priority_and_fairness_the_bootstrap_objects_still_validate() {
    let kapi = Kapi::start_with(&["--enable-priority-and-fairness=true"]).expect("start kapi");
    // The configuration producer writes kube's bootstrap objects through the same validation.
    let count = |collection: &str| kapi.get_json(collection)["items"].as_array().map_or(0, Vec::len);
    let stored = wait_for(Duration::from_secs(10), || (count(FLOW_SCHEMAS) == 11 && count(LEVELS) == 8).then_some(()));
    assert!(stored.is_some(), "bootstrap objects stored: {} schemas, {} levels\n{}", count(FLOW_SCHEMAS), count(LEVELS), kapi.log());
    exercise(&kapi);
    mandatory_specs(&kapi);
}

/// kube's `ValidateFlowSchema` and `ValidateIfMandatoryPriorityLevelConfigurationObject`: the
/// mandatory objects keep their fixed spec, on update as on create; only the `exempt` level's
/// `spec.exempt` may change (within its bounds).
fn mandatory_specs(kapi: &Kapi) {
    let put = |collection: &str, obj: &Value| {
        let name = obj["metadata"]["name"].as_str().unwrap_or_default();
        kapi.request(&Request::new("PUT", &format!("{collection}/{name}")).json(obj))
    };
    let mut schema = kapi.get_json(&format!("{FLOW_SCHEMAS}/exempt"));
    let before = schema.clone();
    schema["spec"]["rules"][0]["subjects"][0]["group"]["name"] = json!("admins");
    let r = put(FLOW_SCHEMAS, &schema);
    assert_eq!((r.status, r.reason()), (422, "Invalid"), "{}", r.raw);
    let causes = r.body["details"]["causes"].as_array().cloned().unwrap_or_default();
    assert_eq!(causes.len(), 1, "{}", r.raw);
    assert_eq!(causes[0]["field"], "spec");
    // kube shows the refused spec (its Go `%#v`; kapi's JSON) before its reason.
    let message = causes[0]["message"].as_str().unwrap_or_default();
    assert!(message.starts_with("Invalid value: ") && message.contains("admins"), "{message}");
    assert!(message.ends_with(": spec of 'exempt' must equal the fixed value"), "{message}");
    assert_eq!(kapi.get_json(&format!("{FLOW_SCHEMAS}/exempt"))["spec"], before["spec"]);

    let mut level = kapi.get_json(&format!("{LEVELS}/exempt"));
    level["spec"]["exempt"] = json!({"nominalConcurrencyShares": 5, "lendablePercent": 101});
    let r = put(LEVELS, &level);
    assert_invalid(&r, "PriorityLevelConfiguration", "exempt", &[("spec.exempt.lendablePercent", "Invalid value: 101: must be between 0 and 100, inclusive")]);
    level["spec"]["exempt"]["lendablePercent"] = json!(30);
    let r = put(LEVELS, &level);
    assert_eq!(r.status, 200, "{}", r.raw);
    assert_eq!(r.body["spec"]["exempt"], json!({"nominalConcurrencyShares": 5, "lendablePercent": 30}));

    let mut level = kapi.get_json(&format!("{LEVELS}/catch-all"));
    level["spec"]["limited"]["borrowingLimitPercent"] = json!(0);
    let r = put(LEVELS, &level);
    assert_eq!(r.status, 422, "{}", r.raw);
    let message = r.message();
    assert!(message.starts_with("PriorityLevelConfiguration.flowcontrol.apiserver.k8s.io \"catch-all\" is invalid: spec: Invalid value: "), "{message}");
    assert!(message.ends_with(": spec of 'catch-all' must equal the fixed value"), "{message}");
}
