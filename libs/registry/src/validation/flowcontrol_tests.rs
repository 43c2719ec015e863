//! FlowSchema and PriorityLevelConfiguration validation against kube's exact messages: each
//! case changes one thing in a valid object and expects kube's causes, in kube's order.

use serde_json::{json, Value};

use super::super::validate;

// The server's own bootstrap objects, from the crate that writes them.
use kapi_flowcontrol::bootstrap;

const GROUP: &str = "flowcontrol.apiserver.k8s.io";
const FS: &str = "FlowSchema";
const PL: &str = "PriorityLevelConfiguration";

const SUBDOMAIN: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
// kube's RegexError really does print two spaces before "or".
const LABEL: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";

fn schema(name: &str) -> Value {
    json!({"metadata": {"name": name}, "spec": {
        "priorityLevelConfiguration": {"name": "workload-low"},
        "matchingPrecedence": 500,
        "distinguisherMethod": {"type": "ByUser"},
        "rules": [{
            "subjects": [{"kind": "User", "user": {"name": "alice"}}],
            "resourceRules": [{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods"], "namespaces": ["default"]}],
            "nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": ["/healthz"]}]
        }]
    }})
}

fn level(name: &str) -> Value {
    json!({"metadata": {"name": name}, "spec": {"type": "Limited", "limited": {
        "nominalConcurrencyShares": 10,
        "lendablePercent": 50,
        "borrowingLimitPercent": 200,
        "limitResponse": {"type": "Queue", "queuing": {"queues": 64, "handSize": 6, "queueLengthLimit": 50}}
    }}})
}

fn messages(kind: &str, obj: &Value) -> Vec<String> {
    validate(GROUP, kind, obj).into_iter().map(|c| c.message).collect()
}

/// The messages of the valid schema `name` changed by `edit` (on its spec).
fn check_schema(name: &str, edit: impl Fn(&mut Value), want: &[&str]) {
    let mut s = schema(name);
    edit(&mut s["spec"]);
    assert_eq!(messages(FS, &s), want, "{s}");
}

fn check_rule(edit: impl Fn(&mut Value), want: &[&str]) {
    check_schema("s", |spec| edit(&mut spec["rules"][0]), want);
}

fn check_level(name: &str, edit: impl Fn(&mut Value), want: &[&str]) {
    let mut l = level(name);
    edit(&mut l["spec"]);
    assert_eq!(messages(PL, &l), want, "{l}");
}

/// kube's cause for a mandatory object whose spec is not the fixed one (the spec shown as JSON).
fn not_fixed(name: &str, spec: &Value) -> String {
    let which = if name == "exempt" && spec.get("type").is_some() && spec.get("rules").is_none() {
        "spec of 'exempt' except the 'spec.exempt' field"
    } else {
        &format!("spec of '{name}'")
    };
    format!("spec: Invalid value: {spec}: {which} must equal the fixed value")
}

fn check_queuing(queuing: Value, want: &[&str]) {
    check_level("l", |s| s["limited"]["limitResponse"]["queuing"] = queuing.clone(), want);
}

#[test]
fn every_bootstrap_object_is_valid() {
    let schemas = [bootstrap::mandatory_schemas(), bootstrap::suggested_schemas()].concat();
    let levels = [bootstrap::mandatory_levels(), bootstrap::suggested_levels()].concat();
    assert_eq!((schemas.len(), levels.len()), (11, 8));
    for s in &schemas {
        assert_eq!(messages(FS, s), Vec::<String>::new(), "{s}");
    }
    for l in &levels {
        assert_eq!(messages(PL, l), Vec::<String>::new(), "{l}");
    }
}

#[test]
fn valid_objects_pass() {
    check_schema("s", |_| {}, &[]);
    check_level("l", |_| {}, &[]);
    // v1 defaults (unset or zero precedence is 1000, zero queuing numbers are kube's
    // defaults), cluster-scoped rules without namespaces, `*` service accounts, zero shares.
    check_schema("s", |s| s["matchingPrecedence"] = json!(0), &[]);
    check_schema(
        "s",
        |s| {
            s.as_object_mut().unwrap().remove("matchingPrecedence");
            s["distinguisherMethod"] = json!({"type": "ByNamespace"});
            s["rules"][0]["subjects"] = json!([{"kind": "ServiceAccount", "serviceAccount": {"namespace": "kube-system", "name": "*"}}, {"kind": "Group", "group": {"name": "system:authenticated"}}]);
            s["rules"][0]["resourceRules"] = json!([{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "clusterScope": true}]);
            s["rules"][0]["nonResourceRules"] = json!([{"verbs": ["*"], "nonResourceURLs": ["/", "/apis/", "/healthz/*"]}]);
        },
        &[],
    );
    check_schema("exempt", |s| *s = super::mandatory_schema_spec("exempt").unwrap(), &[]);
    check_level("l", |s| s["limited"] = json!({"nominalConcurrencyShares": 0, "limitResponse": {"type": "Reject"}}), &[]);
    check_queuing(json!({"queues": 0, "handSize": 0, "queueLengthLimit": 0}), &[]);
    check_queuing(json!({}), &[]);
    check_queuing(json!({"queues": 10_000_000, "handSize": 2}), &[]);
    check_level("exempt", |s| *s = json!({"type": "Exempt", "exempt": {"nominalConcurrencyShares": 7, "lendablePercent": 10}}), &[]);
    check_level("exempt", |s| *s = json!({"type": "Exempt"}), &[]);
}

#[test]
fn matching_precedence_range() {
    check_schema("s", |s| s["matchingPrecedence"] = json!(-1), &["spec.matchingPrecedence: Invalid value: -1: must be a positive value"]);
    check_schema("s", |s| s["matchingPrecedence"] = json!(10001), &["spec.matchingPrecedence: Invalid value: 10001: must not be greater than 10000"]);
    check_schema("s", |s| s["matchingPrecedence"] = json!(10000), &[]);
    check_schema(
        "s",
        |s| s["matchingPrecedence"] = json!(1),
        &["spec.matchingPrecedence: Invalid value: 1: only the schema named 'exempt' may have matchingPrecedence 1"],
    );
}

#[test]
fn distinguisher_method_type() {
    check_schema(
        "s",
        |s| s["distinguisherMethod"] = json!({"type": "ByGroup"}),
        &[r#"spec.distinguisherMethod.type: Unsupported value: flowcontrol.FlowDistinguisherMethod{Type:"ByGroup"}: supported values: "ByNamespace", "ByUser""#],
    );
    check_schema("s", |s| s["distinguisherMethod"] = Value::Null, &[]);
}

#[test]
fn priority_level_reference() {
    check_schema(
        "s",
        |s| s["priorityLevelConfiguration"] = json!({}),
        &["spec.priorityLevelConfiguration.name: Required value: must reference a priority level"],
    );
    let want = format!("spec.priorityLevelConfiguration.name: Invalid value: \"Workload_Low\": {SUBDOMAIN}");
    check_schema("s", |s| s["priorityLevelConfiguration"]["name"] = json!("Workload_Low"), &[want.as_str()]);
}

#[test]
fn rules_need_subjects_and_some_rule() {
    check_rule(|r| r["subjects"] = json!([]), &["spec.rules[0].subjects: Required value: subjects must contain at least one value"]);
    check_rule(
        |r| {
            r.as_object_mut().unwrap().remove("resourceRules");
            r["nonResourceRules"] = json!([]);
        },
        &["spec.rules[0]: Required value: at least one of resourceRules and nonResourceRules has to be non-empty"],
    );
}

#[test]
fn subject_kinds_and_members() {
    let subject = |s: Value| move |r: &mut Value| r["subjects"] = json!([s.clone()]);
    check_rule(
        subject(json!({"kind": "Robot"})),
        &[r#"spec.rules[0].subjects[0].kind: Unsupported value: "Robot": supported values: "Group", "ServiceAccount", "User""#],
    );
    check_rule(
        subject(json!({"kind": "User"})),
        &["spec.rules[0].subjects[0].user: Required value: user is required when subject kind is 'User'"],
    );
    check_rule(subject(json!({"kind": "User", "user": {}})), &["spec.rules[0].subjects[0].user.name: Required value"]);
    check_rule(
        subject(json!({"kind": "User", "user": {"name": "a"}, "group": {"name": "g"}, "serviceAccount": {"name": "x", "namespace": "y"}})),
        &[
            "spec.rules[0].subjects[0].serviceAccount: Forbidden: serviceAccount is forbidden when subject kind is not 'ServiceAccount'",
            "spec.rules[0].subjects[0].group: Forbidden: group is forbidden when subject kind is not 'Group'",
        ],
    );
    check_rule(
        subject(json!({"kind": "Group"})),
        &["spec.rules[0].subjects[0].group: Required value: group is required when subject kind is 'Group'"],
    );
    check_rule(
        subject(json!({"kind": "Group", "group": {"name": ""}, "user": {"name": "a"}})),
        &[
            "spec.rules[0].subjects[0].group.name: Required value",
            "spec.rules[0].subjects[0].user: Forbidden: user is forbidden when subject kind is not 'User'",
        ],
    );
}

#[test]
fn service_account_subjects() {
    let subject = |s: Value| move |r: &mut Value| r["subjects"] = json!([s.clone()]);
    check_rule(
        subject(json!({"kind": "ServiceAccount"})),
        &["spec.rules[0].subjects[0].serviceAccount: Required value: serviceAccount is required when subject kind is 'ServiceAccount'"],
    );
    check_rule(
        subject(json!({"kind": "ServiceAccount", "serviceAccount": {}, "user": {"name": "a"}})),
        &[
            "spec.rules[0].subjects[0].serviceAccount.name: Required value",
            "spec.rules[0].subjects[0].serviceAccount.namespace: Required value: must specify namespace for service account",
            "spec.rules[0].subjects[0].user: Forbidden: user is forbidden when subject kind is not 'User'",
        ],
    );
    let name = format!("spec.rules[0].subjects[0].serviceAccount.name: Invalid value: \"Bot_1\": {SUBDOMAIN}");
    check_rule(
        subject(json!({"kind": "ServiceAccount", "serviceAccount": {"name": "Bot_1", "namespace": "a.b"}})),
        &[name.as_str(), "spec.rules[0].subjects[0].serviceAccount.namespace: Invalid value: \"a.b\": must not contain dots"],
    );
}

#[test]
fn verbs_of_both_rule_kinds() {
    let path = |kind: &str| format!("spec.rules[0].{kind}[0].verbs");
    for kind in ["resourceRules", "nonResourceRules"] {
        let set = |verbs: Value| move |r: &mut Value| r[kind][0]["verbs"] = verbs.clone();
        check_rule(set(json!([])), &[format!("{}: Required value: verbs must contain at least one value", path(kind)).as_str()]);
        check_rule(
            set(json!(["*", "get"])),
            &[format!("{}: Invalid value: []string{{\"*\", \"get\"}}: if '*' is present, must not specify other verbs", path(kind)).as_str()],
        );
        check_rule(
            set(json!(["get", "fly"])),
            &[format!(
                "{}: Unsupported value: []string{{\"get\", \"fly\"}}: supported values: \"create\", \"delete\", \"deletecollection\", \"get\", \"list\", \"patch\", \"proxy\", \"update\", \"watch\"",
                path(kind)
            )
            .as_str()],
        );
    }
}

#[test]
fn resource_rule_lists() {
    let edit = |key: &'static str, v: Value| move |r: &mut Value| r["resourceRules"][0][key] = v.clone();
    check_rule(
        edit("apiGroups", json!([])),
        &["spec.rules[0].resourceRules[0].apiGroups: Required value: resource rules must supply at least one api group"],
    );
    check_rule(
        edit("apiGroups", json!(["*", "apps"])),
        &["spec.rules[0].resourceRules[0].apiGroups: Invalid value: []string{\"*\", \"apps\"}: if '*' is present, must not specify other api groups"],
    );
    check_rule(
        edit("resources", json!([])),
        &["spec.rules[0].resourceRules[0].resources: Required value: resource rules must supply at least one resource"],
    );
    check_rule(
        edit("resources", json!(["pods", "*"])),
        &["spec.rules[0].resourceRules[0].resources: Invalid value: []string{\"pods\", \"*\"}: if '*' is present, must not specify other resources"],
    );
}

#[test]
fn resource_rule_namespaces_and_cluster_scope() {
    let edit = |v: Value| move |r: &mut Value| r["resourceRules"][0]["namespaces"] = v.clone();
    check_rule(
        edit(json!([])),
        &["spec.rules[0].resourceRules[0].namespaces: Required value: resource rules that are not cluster scoped must supply at least one namespace"],
    );
    check_rule(|r| r["resourceRules"][0] = json!({"verbs": ["get"], "apiGroups": [""], "resources": ["nodes"], "clusterScope": true}), &[]);
    check_rule(
        edit(json!(["*", "default"])),
        &["spec.rules[0].resourceRules[0].namespaces: Invalid value: []string{\"*\", \"default\"}: if '*' is present, must not specify other namespaces"],
    );
    let want = format!("spec.rules[0].resourceRules[0].namespaces[1]: Invalid value: \"Kube_System\": each member of this list must be '*' or a DNS-1123 label; {LABEL}");
    check_rule(edit(json!(["default", "Kube_System"])), &[want.as_str()]);
}

#[test]
fn non_resource_urls() {
    let edit = |v: Value| move |r: &mut Value| r["nonResourceRules"][0]["nonResourceURLs"] = v.clone();
    check_rule(
        edit(json!([])),
        &["spec.rules[0].nonResourceRules[0].nonResourceURLs: Required value: nonResourceURLs must contain at least one value"],
    );
    check_rule(
        edit(json!(["/healthz", "*"])),
        &["spec.rules[0].nonResourceRules[0].nonResourceURLs: Invalid value: []string{\"/healthz\", \"*\"}: if '*' is present, must not specify other non-resource URLs"],
    );
    check_rule(
        edit(json!(["", "healthz", "/a b", "//", "/health*", "/*/*", "/healthz/*/x", "/ok/*"])),
        &[
            "spec.rules[0].nonResourceRules[0].nonResourceURLs[0]: Invalid value: \"\": must not be empty",
            "spec.rules[0].nonResourceRules[0].nonResourceURLs[1]: Invalid value: \"healthz\": must start with slash",
            "spec.rules[0].nonResourceRules[0].nonResourceURLs[2]: Invalid value: \"/a b\": must not contain white-space",
            "spec.rules[0].nonResourceRules[0].nonResourceURLs[3]: Invalid value: \"//\": must not contain double slash",
            "spec.rules[0].nonResourceRules[0].nonResourceURLs[4]: Invalid value: \"/health*\": wildcard can only do suffix matching",
            "spec.rules[0].nonResourceRules[0].nonResourceURLs[5]: Invalid value: \"/*/*\": wildcard can only do suffix matching",
            "spec.rules[0].nonResourceRules[0].nonResourceURLs[6]: Invalid value: \"/healthz/*/x\": wildcard can only do suffix matching",
        ],
    );
}

#[test]
fn status_condition_types() {
    for (kind, mut obj) in [(FS, schema("s")), (PL, level("l"))] {
        obj["status"] = json!({"conditions": [{"type": "Dangling"}, {"type": "Dangling"}, {"type": ""}]});
        assert_eq!(
            messages(kind, &obj),
            ["status.conditions[1].type: Duplicate value: \"Dangling\"", "status.conditions[2].type: Required value: must not be empty"]
        );
    }
}

#[test]
fn level_type_and_the_exempt_name() {
    check_level(
        "exempt",
        |_| {},
        &[
            "spec.type: Invalid value: \"Limited\": type must be 'Exempt' if and only if name is 'exempt'",
            &not_fixed("exempt", &level("exempt")["spec"]),
        ],
    );
    check_level(
        "l",
        |s| *s = json!({"type": "Exempt"}),
        &["spec.type: Invalid value: \"Exempt\": type must be 'Exempt' if and only if name is 'exempt'"],
    );
    check_level("l", |s| s["type"] = json!("Unlimited"), &[r#"spec.type: Unsupported value: "Unlimited": supported values: "Exempt", "Limited""#]);
    check_level("l", |s| *s = json!({}), &[r#"spec.type: Unsupported value: "": supported values: "Exempt", "Limited""#]);
}

#[test]
fn level_sub_structs_follow_the_type() {
    check_level("l", |s| s["exempt"] = json!({}), &["spec.exempt: Forbidden: must be nil if the type is Limited"]);
    check_level("l", |s| *s = json!({"type": "Limited"}), &["spec.limited: Required value: must not be empty when type is Limited"]);
    let mut spec = level("exempt")["spec"].clone();
    spec["type"] = json!("Exempt");
    check_level(
        "exempt",
        |s| s["type"] = json!("Exempt"),
        &["spec.limited: Forbidden: must be nil if the type is not Limited", &not_fixed("exempt", &spec)],
    );
}

#[test]
fn limited_numbers() {
    let edit = |key: &'static str, v: i64| move |s: &mut Value| s["limited"][key] = json!(v);
    check_level(
        "l",
        edit("nominalConcurrencyShares", -1),
        &["spec.limited.nominalConcurrencyShares: Invalid value: -1: must be a non-negative integer"],
    );
    check_level("l", edit("lendablePercent", 101), &["spec.limited.lendablePercent: Invalid value: 101: must be between 0 and 100, inclusive"]);
    check_level("l", edit("lendablePercent", -1), &["spec.limited.lendablePercent: Invalid value: -1: must be between 0 and 100, inclusive"]);
    check_level(
        "l",
        edit("borrowingLimitPercent", -1),
        &["spec.limited.borrowingLimitPercent: Invalid value: -1: if specified, must be a non-negative integer"],
    );
}

#[test]
fn exempt_numbers() {
    check_level(
        "exempt",
        |s| *s = json!({"type": "Exempt", "exempt": {"nominalConcurrencyShares": -1, "lendablePercent": 101}}),
        &[
            "spec.exempt.nominalConcurrencyShares: Invalid value: -1: must be a non-negative integer",
            "spec.exempt.lendablePercent: Invalid value: 101: must be between 0 and 100, inclusive",
        ],
    );
}

#[test]
fn limit_response_type_and_queuing() {
    let response = |v: Value| move |s: &mut Value| s["limited"]["limitResponse"] = v.clone();
    check_level(
        "l",
        response(json!({"type": "Drop"})),
        &[r#"spec.limited.limitResponse.type: Unsupported value: "Drop": supported values: "Queue", "Reject""#],
    );
    check_level(
        "l",
        response(json!({"type": "Reject", "queuing": {"queues": 1}})),
        &["spec.limited.limitResponse.queuing: Forbidden: must be nil if limited.limitResponse.type is not Limited"],
    );
    check_level(
        "l",
        response(json!({"type": "Queue"})),
        &["spec.limited.limitResponse.queuing: Required value: must not be empty if limited.limitResponse.type is Limited"],
    );
}

#[test]
fn queuing_numbers() {
    check_queuing(
        json!({"queues": -1, "handSize": -2, "queueLengthLimit": -3}),
        &[
            "spec.limited.limitResponse.queuing.queueLengthLimit: Invalid value: -3: must be positive",
            "spec.limited.limitResponse.queuing.queues: Invalid value: -1: must be positive",
            "spec.limited.limitResponse.queuing.handSize: Invalid value: -2: must be positive",
        ],
    );
    check_queuing(
        json!({"queues": 7, "handSize": 8}),
        &["spec.limited.limitResponse.queuing.handSize: Invalid value: 8: should not be greater than queues (7)"],
    );
    // An unset hand size is v1's default 8.
    check_queuing(
        json!({"queues": 4}),
        &["spec.limited.limitResponse.queuing.handSize: Invalid value: 8: should not be greater than queues (4)"],
    );
    check_queuing(
        json!({"queues": 10_000_001, "handSize": 3}),
        &[
            "spec.limited.limitResponse.queuing.queues: Invalid value: 10000001: must not be greater than 10000000",
            "spec.limited.limitResponse.queuing.handSize: Invalid value: 3: required entropy bits of deckSize 10000001 and handSize 3 should not be greater than 60",
        ],
    );
}

#[test]
fn shuffle_sharding_entropy() {
    check_queuing(
        json!({"queues": 512, "handSize": 8}),
        &["spec.limited.limitResponse.queuing.handSize: Invalid value: 8: required entropy bits of deckSize 512 and handSize 8 should not be greater than 60"],
    );
    check_queuing(
        json!({"queues": 128, "handSize": 10}),
        &["spec.limited.limitResponse.queuing.handSize: Invalid value: 10: required entropy bits of deckSize 128 and handSize 10 should not be greater than 60"],
    );
    // 2^10 queues and a hand of 6 need exactly 60 bits: allowed.
    check_queuing(json!({"queues": 1024, "handSize": 6}), &[]);
    check_queuing(
        json!({"queues": 1025, "handSize": 6}),
        &["spec.limited.limitResponse.queuing.handSize: Invalid value: 6: required entropy bits of deckSize 1025 and handSize 6 should not be greater than 60"],
    );
}

#[test]
fn the_v1beta3_round_trip_annotation_is_forbidden() {
    let mut l = level("l");
    l["metadata"]["annotations"] = json!({"flowcontrol.k8s.io/v1beta3-preserve-zero-concurrency-shares": ""});
    assert_eq!(
        messages(PL, &l),
        ["metadata.annotations: Forbidden: annotation 'flowcontrol.k8s.io/v1beta3-preserve-zero-concurrency-shares' is forbidden"]
    );
}

/// The mandatory object `name` of kind `kind` as kube's bootstrap writes it, `edit`ed on its
/// spec, and the messages it gets.
fn check_mandatory(kind: &str, name: &str, edit: impl Fn(&mut Value), fixed: bool) {
    let objects = if kind == FS { bootstrap::mandatory_schemas() } else { bootstrap::mandatory_levels() };
    let mut obj = objects.into_iter().find(|o| o["metadata"]["name"] == name).unwrap();
    edit(&mut obj["spec"]);
    let want = if fixed { Vec::new() } else { vec![not_fixed(name, &obj["spec"])] };
    assert_eq!(messages(kind, &obj), want, "{obj}");
}

#[test]
fn the_fixed_specs_are_the_bootstrap_ones() {
    for s in bootstrap::mandatory_schemas() {
        let name = s["metadata"]["name"].as_str().unwrap();
        assert_eq!(Some(&s["spec"]), super::mandatory_schema_spec(name).as_ref(), "{name}");
    }
    for l in bootstrap::mandatory_levels() {
        let name = l["metadata"]["name"].as_str().unwrap();
        assert_eq!(Some(&l["spec"]), super::mandatory_level_spec(name).as_ref(), "{name}");
    }
    assert!(super::mandatory_schema_spec("global-default").is_none());
    assert!(super::mandatory_level_spec("workload-low").is_none());
}

#[test]
fn mandatory_levels_keep_their_fixed_spec() {
    let set = |key: &'static str, v: Value| move |s: &mut Value| s["limited"][key] = v.clone();
    check_mandatory(PL, "catch-all", set("nominalConcurrencyShares", json!(50)), false);
    check_mandatory(PL, "catch-all", set("lendablePercent", json!(10)), false);
    // An unset pointer is not a zero.
    check_mandatory(PL, "catch-all", set("borrowingLimitPercent", json!(0)), false);
    check_mandatory(PL, "catch-all", |s| s["limited"]["limitResponse"] = json!({"type": "Queue", "queuing": {}}), false);
    // Read with v1's defaults: an unset lendable percent is 0.
    check_mandatory(PL, "catch-all", |s| drop(s["limited"].as_object_mut().unwrap().remove("lendablePercent")), true);
    // The exempt level's `spec.exempt` is the administrator's, within its bounds.
    check_mandatory(PL, "exempt", |s| s["exempt"] = json!({"nominalConcurrencyShares": 40, "lendablePercent": 25}), true);
    check_mandatory(PL, "exempt", |s| drop(s.as_object_mut().unwrap().remove("exempt")), true);
    // Nothing else of it is.
    let mut spec = bootstrap::mandatory_levels()[1]["spec"].clone();
    spec["limited"] = json!({"nominalConcurrencyShares": 1, "limitResponse": {"type": "Reject"}});
    check_level("exempt", |s| *s = spec.clone(), &["spec.limited: Forbidden: must be nil if the type is not Limited", &not_fixed("exempt", &spec)]);
    // Other levels' specs are free, whatever their name looks like.
    check_level("catch-all-2", |s| s["limited"]["nominalConcurrencyShares"] = json!(50), &[]);
}

#[test]
fn mandatory_schemas_keep_their_fixed_spec() {
    check_mandatory(FS, "catch-all", |s| s["matchingPrecedence"] = json!(9999), false);
    check_mandatory(FS, "catch-all", |s| s["distinguisherMethod"] = json!({"type": "ByNamespace"}), false);
    check_mandatory(FS, "catch-all", |s| s["priorityLevelConfiguration"]["name"] = json!("global-default"), false);
    // The order of subjects counts, as in kube's deep equality.
    check_mandatory(FS, "catch-all", |s| s["rules"][0]["subjects"].as_array_mut().unwrap().reverse(), false);
    check_mandatory(FS, "exempt", |s| s["rules"][0]["nonResourceRules"][0]["verbs"] = json!(["get"]), false);
    check_mandatory(FS, "exempt", |s| s["rules"][0]["resourceRules"][0]["clusterScope"] = json!(false), false);
    // An unset pointer differs from any set one.
    check_mandatory(FS, "exempt", |s| s["distinguisherMethod"] = json!({"type": "ByUser"}), false);
    // What v1 defaults or leaves empty reads the same: no rules of a kind is an empty list, an
    // unset cluster scope false.
    check_mandatory(FS, "exempt", |s| s["rules"][0]["subjects"][0]["user"] = Value::Null, true);
    let mut exempt = super::mandatory_schema_spec("exempt").unwrap();
    exempt["rules"][0]["resourceRules"][0]["clusterScope"] = json!(false);
    let mut without_scope = exempt.clone();
    without_scope["rules"][0]["resourceRules"][0].as_object_mut().unwrap().remove("clusterScope");
    assert_eq!(super::schema_spec(&exempt), super::schema_spec(&without_scope));
    let mut no_lists = json!({"priorityLevelConfiguration": {"name": "x"}, "rules": [{"subjects": [], "nonResourceRules": null}]});
    assert_eq!(super::schema_spec(&no_lists)["matchingPrecedence"], 1000);
    no_lists["rules"][0].as_object_mut().unwrap().remove("nonResourceRules");
    assert_eq!(super::schema_spec(&no_lists)["rules"][0]["nonResourceRules"], json!([]));
    // Other schemas' specs are free.
    check_schema("catch-all-2", |s| s["matchingPrecedence"] = json!(10000), &[]);
}
