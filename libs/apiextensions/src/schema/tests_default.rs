//! Defaulting: byte-for-byte results, following apiextensions-apiserver's
//! `defaulting/algorithm_test.go`. Defaults of missing properties are appended in property
//! name order.

use serde_json::{json, Value};

use super::Structural;

#[track_caller]
fn check(schema: Value, input: &str, expected: &str) {
    let s = Structural::new(&schema).expect("schema parses");
    let original: Value = serde_json::from_str(input).expect("valid json");
    let mut obj = original.clone();
    s.apply_defaults(&mut obj);
    assert_eq!(serde_json::to_string(&obj).expect("serializes"), expected);
    // The read path's check agrees with the walk: a copy exactly when defaults change it.
    match s.with_defaults(&original) {
        Some(defaulted) => assert_eq!(defaulted, obj),
        None => assert_eq!(original, obj, "with_defaults missed a default"),
    }
}

#[test]
fn reads_copy_only_what_defaults_change() {
    let s = Structural::new(&json!({"properties": {"spec": {"properties": {"size": {"type": "integer", "default": 1}}}}})).expect("schema");
    assert_eq!(s.with_defaults(&json!({"spec": {}})), Some(json!({"spec": {"size": 1}})));
    assert_eq!(s.with_defaults(&json!({"spec": {"size": 3}})), None);
    let plain = Structural::new(&json!({"properties": {"spec": {"type": "object"}}})).expect("schema");
    assert_eq!(plain.with_defaults(&json!({"spec": {}})), None);
}

#[test]
fn scalars_are_left_alone() {
    check(json!({"default": "foo"}), "4", "4");
    check(json!({"items": {"default": "foo"}}), "[1,2]", "[1,2]");
}

#[test]
fn object_array() {
    check(
        json!({"items": {"properties": {"a": {"default": "A"}, "b": {"default": "B"}, "c": {"default": "C"}}}}),
        r#"[{"a":1},{"b":1},{"c":1}]"#,
        r#"[{"a":1,"b":"B","c":"C"},{"b":1,"a":"A","c":"C"},{"c":1,"a":"A","b":"B"}]"#,
    );
}

#[test]
fn object_array_object_and_additional_properties() {
    check(
        json!({"properties": {
            "array": {"items": {"properties": {"a": {"default": "A"}, "b": {"default": "B"}}}},
            "object": {"properties": {"a": {"default": "N"}, "b": {"default": "O"}}},
            "additionalProperties": {"additionalProperties": {"properties": {"a": {"default": "alpha"}, "b": {"default": "beta"}}}},
            "foo": {"default": "bar"}
        }}),
        r#"{"array":[{"a":1},{"b":2}],"object":{"a":1},"additionalProperties":{"x":{"a":1},"y":{"b":2}}}"#,
        r#"{"array":[{"a":1,"b":"B"},{"b":2,"a":"A"}],"object":{"a":1,"b":"O"},"additionalProperties":{"x":{"a":1,"b":"beta"},"y":{"b":2,"a":"alpha"}},"foo":"bar"}"#,
    );
}

#[test]
fn empty_values_are_not_defaulted_but_null_is() {
    check(
        json!({"items": {"properties": {"a": {"default": "A"}}}}),
        r#"[{},{"a":1},{"a":0},{"a":0.0},{"a":""},{"a":null},{"a":[]},{"a":{}}]"#,
        r#"[{"a":"A"},{"a":1},{"a":0},{"a":0.0},{"a":""},{"a":"A"},{"a":[]},{"a":{}}]"#,
    );
}

#[test]
fn nullable_handling() {
    check(json!({"nullable": true, "items": {"properties": {"a": {"default": "A"}}}}), "[null]", "[null]");
    check(json!({"items": {"default": "A"}}), "[null]", r#"["A"]"#);
    check(json!({"properties": {"a": {"nullable": true, "default": "A"}}}), r#"{"a":null}"#, r#"{"a":null}"#);
    check(json!({"properties": {"a": {"default": "A"}}}), r#"{"a":null}"#, r#"{"a":"A"}"#);
    check(json!({"additionalProperties": {"nullable": true, "default": "A"}}), r#"{"a":null}"#, r#"{"a":null}"#);
    check(json!({"additionalProperties": {"default": "A"}}), r#"{"a":null}"#, r#"{"a":"A"}"#);
    check(json!({"additionalProperties": true}), r#"{"a":null}"#, r#"{"a":null}"#);
}

#[test]
fn defaults_inside_defaults() {
    check(
        json!({"type": "object", "properties": {"spec": {"type": "object", "default": {},
            "properties": {"replicas": {"type": "integer", "default": 1}, "strategy": {"type": "object", "default": {"type": "Rolling"},
                "properties": {"type": {"type": "string"}, "maxSurge": {"x-kubernetes-int-or-string": true, "default": "25%"}}}}}}}),
        r#"{"apiVersion":"a/v1","kind":"K","metadata":{"name":"x"}}"#,
        r#"{"apiVersion":"a/v1","kind":"K","metadata":{"name":"x"},"spec":{"replicas":1,"strategy":{"type":"Rolling","maxSurge":"25%"}}}"#,
    );
}
