//! Pruning: byte-for-byte results (kapi keeps the input's key order) and the unknown-field
//! paths, following apiextensions-apiserver's `pruning/algorithm_test.go`.

use serde_json::{json, Value};

use super::Structural;

fn schema(v: Value) -> Structural {
    Structural::new(&v).expect("schema parses")
}

fn parse(s: &str) -> Value {
    serde_json::from_str(s).expect("valid json")
}

/// Prunes `input` and compares the serialized result and the reported fields.
#[track_caller]
fn check(s: &Structural, input: &str, expected: &str, unknown: &[&str]) {
    let mut obj = parse(input);
    let got = s.prune(&mut obj);
    assert_eq!(serde_json::to_string(&obj).expect("serializes"), serde_json::to_string(&parse(expected)).expect("serializes"));
    let want: Vec<String> = unknown.iter().map(|p| format!("unknown field \"{p}\"")).collect();
    assert_eq!(got, want);
}

#[test]
fn object_array_object() {
    let s = schema(json!({"properties": {
        "array": {"items": {"properties": {"a": {}, "c": {}}}},
        "specified": {"properties": {"a": {}, "c": {}}}
    }}));
    check(
        &s,
        r#"{"array":[{"a":1},{"b":1},{"a":1,"b":2,"c":3}],"unspecified":{"a":1},"specified":{"a":1,"b":2,"c":3}}"#,
        r#"{"array":[{"a":1},{},{"a":1,"c":3}],"specified":{"a":1,"c":3}}"#,
        &["array[1].b", "array[2].b", "specified.b", "unspecified"],
    );
}

#[test]
fn nested_preserve_unknown_fields() {
    let s = schema(json!({
        "type": "object", "x-kubernetes-preserve-unknown-fields": true,
        "properties": {
            "alpha": {"type": "string"}, "beta": {"type": "number"},
            "pruning": {"type": "object", "properties": {
                "preserving": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                "pruning": {"type": "object"}}},
            "preserving": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "properties": {
                "preserving": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                "preservingUnknownType": {"x-kubernetes-preserve-unknown-fields": true},
                "pruning": {"type": "object"}}},
            "preservingAdditionalPropertiesNotInheritingXPreserveUnknownFields": {
                "type": "object", "x-kubernetes-preserve-unknown-fields": true,
                "additionalProperties": {"type": "object", "properties": {"specified": {"type": "object"}}}},
            "preservingAdditionalPropertiesKeyPruneValues": {
                "type": "object", "additionalProperties": {"type": "object", "properties": {"specified": {"type": "object"}}}}
        }
    }));
    check(
        &s,
        r#"{"unspecified":"bar","alpha":"abc","beta":42.0,"unspecifiedObject":{"unspecified":"bar"},
            "pruning":{"unspecified":"bar","unspecifiedObject":{"unspecified":"bar"},"pruning":{"unspecified":"bar"},"apiVersion":"unknown","preserving":{"unspecified":"bar"}},
            "preserving":{"unspecified":"bar","unspecifiedObject":{"unspecified":"bar"},"pruning":{"unspecified":"bar"},"preserving":{"unspecified":"bar"},"preservingUnknownType":[{"foo":true},{"bar":true}]},
            "preservingAdditionalPropertiesNotInheritingXPreserveUnknownFields":{"foo":{"specified":{"unspecified":"bar"},"unspecified":"bar"}},
            "preservingAdditionalPropertiesKeyPruneValues":{"foo":{"specified":{"unspecified":"bar"},"unspecified":"bar"}}}"#,
        r#"{"unspecified":"bar","alpha":"abc","beta":42.0,"unspecifiedObject":{"unspecified":"bar"},
            "pruning":{"pruning":{},"preserving":{"unspecified":"bar"}},
            "preserving":{"unspecified":"bar","unspecifiedObject":{"unspecified":"bar"},"pruning":{},"preserving":{"unspecified":"bar"},"preservingUnknownType":[{"foo":true},{"bar":true}]},
            "preservingAdditionalPropertiesNotInheritingXPreserveUnknownFields":{"foo":{"specified":{}}},
            "preservingAdditionalPropertiesKeyPruneValues":{"foo":{"specified":{}}}}"#,
        &[
            "preserving.pruning.unspecified",
            "preservingAdditionalPropertiesKeyPruneValues.foo.specified.unspecified",
            "preservingAdditionalPropertiesKeyPruneValues.foo.unspecified",
            "preservingAdditionalPropertiesNotInheritingXPreserveUnknownFields.foo.specified.unspecified",
            "preservingAdditionalPropertiesNotInheritingXPreserveUnknownFields.foo.unspecified",
            "pruning.apiVersion",
            "pruning.pruning.unspecified",
            "pruning.unspecified",
            "pruning.unspecifiedObject",
        ],
    );
}

#[test]
fn additional_properties_schema_and_false() {
    let s = schema(json!({"properties": {"a": {}, "c": {"additionalProperties": {"type": "integer"}}}}));
    check(&s, r#"{"a":1,"b":1,"c":{"a":1,"b":2,"c":{"a":1}}}"#, r#"{"a":1,"c":{"a":1,"b":2,"c":{}}}"#, &["b", "c.c.a"]);
    let s = schema(json!({"properties": {"a": {}, "c": {"additionalProperties": false}}}));
    check(
        &s,
        r#"{"a":1,"b":1,"c":{"a":1,"b":2,"c":{"a":1,"apiVersion":"unknown"}}}"#,
        r#"{"a":1,"c":{"a":1,"b":2,"c":{}}}"#,
        &["b", "c.c.a", "c.c.apiVersion"],
    );
}

#[test]
fn embedded_resources_keep_type_meta_and_coerce_metadata() {
    let s = schema(json!({"type": "object", "properties": {
        "pruned": {"type": "object", "x-kubernetes-embedded-resource": true, "properties": {"spec": {"type": "object"}}},
        "preserving": {"type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true},
        "nested": {"type": "object", "x-kubernetes-embedded-resource": true, "properties": {"spec": {"type": "object", "properties": {
            "embedded": {"type": "object", "x-kubernetes-embedded-resource": true, "properties": {"spec": {"type": "object"}}}}}}}
    }}));
    let meta = r#"{"name":"instance","unspecified":"bar"}"#;
    let input = format!(
        r#"{{"apiVersion":"foo/v1","kind":"Foo","metadata":{meta},"unspecified":"bar",
        "pruned":{{"apiVersion":"foo/v1","kind":"Foo","unspecified":"bar","metadata":{meta},"spec":{{"unspecified":"bar"}}}},
        "preserving":{{"apiVersion":"foo/v1","kind":"Foo","unspecified":"bar","metadata":{meta},"spec":{{"unspecified":"bar"}}}},
        "nested":{{"apiVersion":"foo/v1","kind":"Foo","unspecified":"bar","metadata":{meta},"spec":{{"unspecified":"bar",
          "embedded":{{"apiVersion":"foo/v1","kind":"Foo","unspecified":"bar","metadata":{meta},"spec":{{"unspecified":"bar"}}}}}}}}}}"#
    );
    let m = r#"{"name":"instance"}"#;
    let expected = format!(
        r#"{{"apiVersion":"foo/v1","kind":"Foo","metadata":{m},
        "pruned":{{"apiVersion":"foo/v1","kind":"Foo","metadata":{m},"spec":{{}}}},
        "preserving":{{"apiVersion":"foo/v1","kind":"Foo","unspecified":"bar","metadata":{m},"spec":{{"unspecified":"bar"}}}},
        "nested":{{"apiVersion":"foo/v1","kind":"Foo","metadata":{m},"spec":{{
          "embedded":{{"apiVersion":"foo/v1","kind":"Foo","metadata":{m},"spec":{{}}}}}}}}}}"#
    );
    check(
        &s,
        &input,
        &expected,
        &[
            "metadata.unspecified",
            "nested.spec.embedded.spec.unspecified",
            "nested.spec.embedded.unspecified",
            "nested.spec.unspecified",
            "nested.unspecified",
            "pruned.spec.unspecified",
            "pruned.unspecified",
            "unspecified",
            "nested.metadata.unspecified",
            "nested.spec.embedded.metadata.unspecified",
            "preserving.metadata.unspecified",
            "pruned.metadata.unspecified",
        ],
    );
}

#[test]
fn root_metadata_is_reduced_to_object_meta() {
    let s = schema(json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {"replicas": {"type": "integer"}}}}}));
    check(
        &s,
        r#"{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w","foo":1,"labels":{},"generateName":"",
            "ownerReferences":[{"apiVersion":"v1","kind":"X","name":"x","uid":"u","bogus":true}]},"spec":{"replicas":1,"foo":"bar"},"status":{}}"#,
        r#"{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w",
            "ownerReferences":[{"apiVersion":"v1","kind":"X","name":"x","uid":"u"}]},"spec":{"replicas":1}}"#,
        &["metadata.foo", "metadata.ownerReferences[0].bogus", "spec.foo", "status"],
    );
}

#[test]
fn non_nullable_nulls_without_default_are_dropped() {
    let s = schema(json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "nullable": {"type": "string", "nullable": true},
        "defaulted": {"type": "string", "default": "d"},
        "plain": {"type": "string"},
        "list": {"type": "array", "items": {"type": "object", "properties": {"x": {"type": "string"}}}}
    }}}}));
    check(
        &s,
        r#"{"spec":{"nullable":null,"defaulted":null,"plain":null,"list":[{"x":null},null]}}"#,
        r#"{"spec":{"nullable":null,"defaulted":null,"list":[{},null]}}"#,
        &[],
    );
    let mut obj = parse(r#"{"spec":{"nullable":null,"defaulted":null}}"#);
    s.prune(&mut obj);
    s.apply_defaults(&mut obj);
    assert_eq!(serde_json::to_string(&obj).expect("serializes"), r#"{"spec":{"nullable":null,"defaulted":"d"}}"#);
}

#[test]
fn defaults_are_pruned_when_the_schema_is_built() {
    let s = schema(json!({"type": "object", "properties": {"spec": {"type": "object",
        "default": {"known": 1, "unknown": 2},
        "properties": {"known": {"type": "integer"}}}}}));
    let mut obj = json!({});
    s.apply_defaults(&mut obj);
    assert_eq!(serde_json::to_string(&obj).expect("serializes"), r#"{"spec":{"known":1}}"#);
}
