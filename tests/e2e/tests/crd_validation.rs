#![recursion_limit = "256"]
//! The validation suite over the API: invalid custom resources and invalid CRDs, each refused
//! with 422 and kube's exact causes (field paths and messages), and nothing stored.

use kapi_e2e::{wait_for, Kapi, Request};
use serde_json::{json, Value};
use std::time::Duration;

const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
const SPECIMENS: &str = "/apis/example.com/v1/namespaces/default/specimens";

fn specimen_crd() -> Value {
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "specimens.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "specimens", "kind": "Specimen"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {
                "type": "object", "required": ["name"], "properties": {
                    "name": {"type": "string", "minLength": 1, "maxLength": 10, "pattern": "^[a-z]+$"},
                    "mode": {"type": "string", "enum": ["a", "b"]},
                    "replicas": {"type": "integer", "minimum": 1, "maximum": 10},
                    "ratio": {"type": "number", "minimum": 0, "exclusiveMinimum": true, "maximum": 1, "exclusiveMaximum": true},
                    "step": {"type": "integer", "multipleOf": 5},
                    "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 2},
                    "set": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
                    "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                              "items": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}, "port": {"type": "integer"}}}},
                    "labels": {"type": "object", "additionalProperties": {"type": "string", "maxLength": 3}, "maxProperties": 2},
                    "sel": {"type": "object", "minProperties": 1, "properties": {"a": {"type": "string"}, "b": {"type": "string"}}},
                    "port": {"x-kubernetes-int-or-string": true},
                    "flag": {"type": "boolean"},
                    "size": {"type": "number"},
                    "when": {"type": "string", "format": "date-time"},
                    "id": {"type": "string", "format": "uuid"},
                    "ip": {"type": "string", "format": "ipv4"},
                    "int32": {"type": "integer", "format": "int32"},
                    "nested": {"type": "object", "required": ["inner"], "properties": {"inner": {"type": "object", "required": ["x"], "properties": {"x": {"type": "integer"}}}}},
                    "template": {"type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true}
                }}}}}}]}})
}

/// (spec fields merged over `{"name": "abc"}`, the causes kube reports).
fn invalid_specimens() -> Vec<(Value, Vec<&'static str>)> {
    vec![
        (json!({"name": null}), vec!["spec.name: Required value"]),
        (json!({"name": 5}), vec![r#"spec.name: Invalid value: "integer": spec.name in body must be of type string: "integer""#]),
        (json!({"name": true}), vec![r#"spec.name: Invalid value: "boolean": spec.name in body must be of type string: "boolean""#]),
        (json!({"name": "abcdefghijk"}), vec!["spec.name: Too long: may not be more than 10 bytes"]),
        (json!({"name": "ABC"}), vec![r#"spec.name: Invalid value: "ABC": spec.name in body should match '^[a-z]+$'"#]),
        (json!({"mode": "c"}), vec![r#"spec.mode: Unsupported value: "c": supported values: "a", "b""#]),
        (json!({"mode": 1}), vec![r#"spec.mode: Invalid value: "integer": spec.mode in body must be of type string: "integer""#, r#"spec.mode: Unsupported value: 1: supported values: "a", "b""#]),
        (json!({"replicas": 0}), vec!["spec.replicas: Invalid value: 0: spec.replicas in body should be greater than or equal to 1"]),
        (json!({"replicas": 11}), vec!["spec.replicas: Invalid value: 11: spec.replicas in body should be less than or equal to 10"]),
        (json!({"replicas": "3"}), vec![r#"spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string""#]),
        (json!({"ratio": 0}), vec!["spec.ratio: Invalid value: 0: spec.ratio in body should be greater than 0"]),
        (json!({"ratio": 1}), vec!["spec.ratio: Invalid value: 1: spec.ratio in body should be less than 1"]),
        (json!({"ratio": "half"}), vec![r#"spec.ratio: Invalid value: "string": spec.ratio in body must be of type number: "string""#]),
        (json!({"step": 7}), vec!["spec.step: Invalid value: 7: spec.step in body should be a multiple of 5"]),
        (json!({"tags": []}), vec!["spec.tags: Invalid value: 0: spec.tags in body should have at least 1 items"]),
        (json!({"tags": ["a", "b", "c"]}), vec!["spec.tags: Too many: 3: must have at most 2 items"]),
        (json!({"tags": ["a", 1]}), vec![r#"spec.tags[1]: Invalid value: "integer": spec.tags[1] in body must be of type string: "integer""#]),
        (json!({"tags": "a"}), vec![r#"spec.tags: Invalid value: "string": spec.tags in body must be of type array: "string""#]),
        (json!({"set": ["x", "x"]}), vec![r#"spec.set[1]: Duplicate value: "x""#]),
        (json!({"ports": [{"name": "http", "port": 80}, {"name": "http", "port": 81}]}), vec![r#"spec.ports[1]: Duplicate value: {"name":"http"}"#]),
        (json!({"ports": [{"port": 80}]}), vec!["spec.ports[0].name: Required value"]),
        (json!({"labels": {"a": "long"}}), vec!["spec.labels.a: Too long: may not be more than 3 bytes"]),
        (json!({"labels": {"a": 1}}), vec![r#"spec.labels.a: Invalid value: "integer": spec.labels.a in body must be of type string: "integer""#]),
        (json!({"labels": {"a": "x", "b": "y", "c": "z"}}), vec!["spec.labels: Too many: 3: must have at most 2 items"]),
        (json!({"sel": {}}), vec!["spec.sel: Invalid value: 0: spec.sel in body should have at least 1 properties"]),
        (json!({"sel": "a=b"}), vec![r#"spec.sel: Invalid value: "string": spec.sel in body must be of type object: "string""#]),
        (json!({"port": true}), vec![r#"spec.port: Invalid value: "boolean": spec.port in body must be of type integer,string: "boolean""#]),
        (json!({"port": 1.5}), vec![r#"spec.port: Invalid value: "number": spec.port in body must be of type integer,string: "number""#]),
        (json!({"flag": "yes"}), vec![r#"spec.flag: Invalid value: "string": spec.flag in body must be of type boolean: "string""#]),
        (json!({"size": [1]}), vec![r#"spec.size: Invalid value: "array": spec.size in body must be of type number: "array""#]),
        (json!({"when": "yesterday"}), vec![r#"spec.when: Invalid value: "yesterday": spec.when in body must be of type date-time: "yesterday""#]),
        (json!({"id": "not-a-uuid"}), vec![r#"spec.id: Invalid value: "not-a-uuid": spec.id in body must be of type uuid: "not-a-uuid""#]),
        (json!({"ip": "::1"}), vec![r#"spec.ip: Invalid value: "::1": spec.ip in body must be of type ipv4: "::1""#]),
        (json!({"int32": 2147483648u64}), vec![r#"<nil>: Invalid value: "": Checked value must be of type integer with format int32 in spec.int32"#]),
        (json!({"nested": {}}), vec!["spec.nested.inner: Required value"]),
        (json!({"nested": {"inner": {}}}), vec!["spec.nested.inner.x: Required value"]),
        (json!({"nested": {"inner": {"x": "1"}}}), vec![r#"spec.nested.inner.x: Invalid value: "string": spec.nested.inner.x in body must be of type integer: "string""#]),
        (json!({"template": {}}), vec!["spec.template.apiVersion: Required value", "spec.template.kind: Required value"]),
        // Embedded resources' names are checked as path segments only (kube's objectmeta rules).
        (json!({"template": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a/b"}}}), vec![
            r#"spec.template.metadata.name: Invalid value: "a/b": may not contain '/'"#,
        ]),
        (json!({"replicas": 0, "mode": "z", "name": "X"}), vec![
            r#"spec.name: Invalid value: "X": spec.name in body should match '^[a-z]+$'"#,
            r#"spec.mode: Unsupported value: "z": supported values: "a", "b""#,
            "spec.replicas: Invalid value: 0: spec.replicas in body should be greater than or equal to 1",
        ]),
    ]
}

/// (what is wrong, the CRD change, one cause kube reports). Each starts from a valid CRD.
fn invalid_crds() -> Vec<(&'static str, Value, &'static str)> {
    let schema = |props: Value| json!({"spec": {"versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object", "properties": props}}}]}});
    vec![
        ("name is not plural.group", json!({"metadata": {"name": "wrong.example.com"}}), r#"metadata.name: Invalid value: "wrong.example.com": must be spec.names.plural+"."+spec.group"#),
        ("group without a dot", json!({"metadata": {"name": "things.example"}, "spec": {"group": "example"}}), r#"spec.group: Invalid value: "example": should be a domain with at least one dot"#),
        ("bad scope", json!({"spec": {"scope": "Global"}}), r#"spec.scope: Unsupported value: "Global": supported values: "Cluster", "Namespaced""#),
        ("no storage version", json!({"spec": {"versions": [{"name": "v1", "served": true, "storage": false, "schema": {"openAPIV3Schema": {"type": "object"}}}]}}), "must have exactly one version marked as storage version"),
        ("no versions", json!({"spec": {"versions": []}}), ": must have exactly one version marked as storage version"),
        ("kind equals listKind", json!({"spec": {"names": {"plural": "things", "kind": "Thing", "listKind": "Thing"}}}), r#"spec.names.listKind: Invalid value: "Thing": kind and listKind may not be the same"#),
        ("object field without type", schema(json!({"spec": {"properties": {"a": {"type": "string"}}}})), "spec.validation.openAPIV3Schema.properties[spec].type: Required value: must not be empty for specified object fields"),
        ("array items without type", schema(json!({"list": {"type": "array", "items": {}}})), "spec.validation.openAPIV3Schema.properties[list].items.type: Required value: must not be empty for specified array items"),
        ("array without items", schema(json!({"noitems": {"type": "array"}})), "spec.validation.openAPIV3Schema.properties[noitems].items: Required value: must be specified"),
        ("$ref", schema(json!({"a": {"type": "object", "$ref": "#/definitions/x"}})), "spec.validation.openAPIV3Schema.properties[a].$ref: Forbidden: $ref is not supported"),
        ("uniqueItems", schema(json!({"b": {"type": "array", "items": {"type": "string"}, "uniqueItems": true}})), "spec.validation.openAPIV3Schema.properties[b].uniqueItems: Forbidden: uniqueItems cannot be set to true since the runtime complexity becomes quadratic"),
        ("properties and additionalProperties", schema(json!({"m": {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": {"type": "string"}}})), "spec.validation.openAPIV3Schema.properties[m].additionalProperties: Forbidden: additionalProperties and properties are mutual exclusive"),
        ("list-type map without keys", schema(json!({"a": {"type": "array", "x-kubernetes-list-type": "map", "items": {"type": "object", "properties": {"name": {"type": "string"}}}}})), "spec.validation.openAPIV3Schema.properties[a].x-kubernetes-list-map-keys: Required value: must not be empty if x-kubernetes-list-type is map"),
        ("default out of range", schema(json!({"spec": {"type": "object", "properties": {"limit": {"type": "integer", "maximum": 10, "default": 11}}}})), "spec.validation.openAPIV3Schema.properties[spec].properties[limit].default: Invalid value: 11:  in body should be less than or equal to 10"),
        ("metadata beyond name", schema(json!({"metadata": {"type": "object", "properties": {"labels": {"type": "object"}}}})), "spec.validation.openAPIV3Schema.properties[metadata]: Forbidden: must not specify anything other than name and generateName, but metadata is implicitly specified"),
        ("bad printer column", json!({"spec": {"versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object"}},
            "additionalPrinterColumns": [{"name": "Bad", "type": "color", "jsonPath": ".spec.x"}]}]}}), r#"spec.additionalPrinterColumns[0].type: Invalid value: "color": must be one of boolean,date,integer,number,string"#),
    ]
}

fn base_crd() -> Value {
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "things.example.com"},
           "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "things", "kind": "Thing"},
                    "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object"}}}]}})
}

/// JSON merge of `patch` into `base` (RFC 7386, nulls delete).
fn merge(base: &mut Value, patch: &Value) {
    match (base, patch) {
        (Value::Object(b), Value::Object(p)) => {
            for (k, v) in p {
                if v.is_null() {
                    b.remove(k);
                } else {
                    merge(b.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        (b, p) => *b = p.clone(),
    }
}

fn causes(r: &kapi_e2e::HttpResponse) -> Vec<String> {
    r.body["details"]["causes"].as_array().into_iter().flatten().map(|c| {
        let field = c["field"].as_str().unwrap_or_default();
        let message = c["message"].as_str().unwrap_or_default();
        if message.starts_with(field) { message.to_owned() } else { format!("{field}: {message}") }
    }).collect()
}

#[test]
fn invalid_custom_resources_are_refused_with_kubes_causes_and_nothing_is_stored() {
    let kapi = Kapi::start().expect("start kapi");
    let created = kapi.request(&Request::new("POST", CRDS).json(&specimen_crd()));
    assert_eq!(created.status, 201, "{}", created.raw);
    let established = wait_for(Duration::from_secs(10), || (kapi.request(&Request::get(SPECIMENS)).status == 200).then_some(()));
    assert!(established.is_some());
    let cases = invalid_specimens();
    assert!(cases.len() >= 40, "{} cases", cases.len());
    let mut failures = Vec::new();
    for (i, (spec, expected)) in cases.iter().enumerate() {
        let mut body = json!({"apiVersion": "example.com/v1", "kind": "Specimen", "metadata": {"name": format!("s{i}")}, "spec": {"name": "abc"}});
        merge(&mut body["spec"], spec);
        let r = kapi.request(&Request::new("POST", SPECIMENS).json(&body));
        // kube walks an object's properties in Go map order: the order of causes is not fixed.
        let mut got = causes(&r);
        got.sort();
        let mut want: Vec<&str> = expected.clone();
        want.sort();
        if r.status != 422 || got.iter().map(String::as_str).collect::<Vec<_>>() != want {
            failures.push(format!("case {i} {spec}: HTTP {} causes {got:#?}, want {expected:#?}", r.status));
        }
        if r.status == 422 && !r.message().starts_with(&format!("Specimen.example.com \"s{i}\" is invalid: ")) {
            failures.push(format!("case {i}: message {}", r.message()));
        }
        let stored = kapi.request(&Request::get(&format!("{SPECIMENS}/s{i}")));
        if stored.status != 404 {
            failures.push(format!("case {i}: stored ({})", stored.status));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert_eq!(kapi.get_json(SPECIMENS)["items"], json!([]));
}

#[test]
fn invalid_crds_are_refused_with_kubes_causes_and_nothing_is_stored() {
    let kapi = Kapi::start().expect("start kapi");
    let cases = invalid_crds();
    assert!(cases.len() >= 15, "{} cases", cases.len());
    let mut failures = Vec::new();
    for (what, change, expected) in &cases {
        let mut crd = base_crd();
        merge(&mut crd, change);
        let r = kapi.request(&Request::new("POST", CRDS).json(&crd));
        let got = causes(&r);
        if r.status != 422 || !got.iter().any(|c| c.contains(expected)) {
            failures.push(format!("{what}: HTTP {} causes {got:#?}, want one containing {expected:?}", r.status));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert_eq!(kapi.get_json(CRDS)["items"], json!([]), "nothing stored");
}
