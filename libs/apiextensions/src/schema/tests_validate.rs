//! Validation of objects against structural schemas: kube's exact messages and paths (many
//! taken from apiextensions-apiserver's `validation_test.go`).

use serde_json::{json, Value};

use super::Structural;

fn schema(v: Value) -> Structural {
    Structural::new(&v).expect("schema parses")
}

/// The rendered messages, in order.
fn errs(s: &Structural, obj: Value) -> Vec<String> {
    s.validate(&obj).into_iter().map(|c| c.message).collect()
}

/// Asserts the set of messages (kube's tests compare sets: Go map iteration is unordered).
#[track_caller]
fn assert_errs(s: &Structural, obj: Value, expected: &[&str]) {
    let mut got = errs(s, obj);
    got.sort();
    let mut want: Vec<String> = expected.iter().map(|e| e.to_string()).collect();
    want.sort();
    assert_eq!(got, want);
}

fn field(props: Value) -> Structural {
    schema(json!({"type": "object", "properties": {"field": props}}))
}

#[test]
fn type_errors_name_the_actual_type() {
    let s = field(json!({"type": "object", "nullable": true}));
    assert_errs(&s, json!({"field": "foo"}), &[r#"field: Invalid value: "string": field in body must be of type object: "string""#]);
    assert_errs(&s, json!({"field": 42}), &[r#"field: Invalid value: "integer": field in body must be of type object: "integer""#]);
    assert_errs(&s, json!({"field": true}), &[r#"field: Invalid value: "boolean": field in body must be of type object: "boolean""#]);
    assert_errs(&s, json!({"field": 1.2}), &[r#"field: Invalid value: "number": field in body must be of type object: "number""#]);
    assert_errs(&s, json!({"field": []}), &[r#"field: Invalid value: "array": field in body must be of type object: "array""#]);
    assert_errs(&s, json!({"field": null}), &[]);
    assert_errs(&s, json!({}), &[]);
}

#[test]
fn non_nullable_null_is_a_type_error() {
    let s = field(json!({"type": "string"}));
    assert_errs(&s, json!({"field": null}), &[r#"field: Invalid value: "null": field in body must be of type string: "null""#]);
    // Without a type, null is fine.
    let s = field(json!({"nullable": true}));
    for v in [json!(null), json!("foo"), json!(42), json!(true), json!(1.2), json!([]), json!({})] {
        assert_errs(&s, json!({ "field": v }), &[]);
    }
}

#[test]
fn integer_accepts_integral_floats_and_rejects_fractions() {
    let s = schema(json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {"replicas": {"type": "integer"}}}}}));
    assert_errs(&s, json!({"spec": {"replicas": 3}}), &[]);
    assert_errs(&s, json!({"spec": {"replicas": 3.0}}), &[]);
    assert_errs(
        &s,
        json!({"spec": {"replicas": "string"}}),
        &[r#"spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string""#],
    );
    assert_errs(
        &s,
        json!({"spec": {"replicas": 1.5}}),
        &[
            r#"spec.replicas: Invalid value: "number": spec.replicas in body must be of type integer: "number""#,
            r#"<nil>: Invalid value: "": Checked value must be of type integer (default format) in spec.replicas"#,
        ],
    );
    let c = s.validate(&json!({"spec": {"replicas": "x"}}));
    assert_eq!(c[0].reason, "FieldValueTypeInvalid");
    assert_eq!(c[0].field, "spec.replicas");
}

#[test]
fn number_accepts_integers() {
    let s = field(json!({"type": "number"}));
    assert_errs(&s, json!({"field": 1}), &[]);
    assert_errs(&s, json!({"field": 1.5}), &[]);
    assert_errs(&s, json!({"field": "1"}), &[r#"field: Invalid value: "string": field in body must be of type number: "string""#]);
}

#[test]
fn boolean_and_array_types() {
    let s = schema(json!({"type": "object", "properties": {"b": {"type": "boolean"}, "a": {"type": "array", "items": {"type": "string"}}}}));
    assert_errs(&s, json!({"b": "true"}), &[r#"b: Invalid value: "string": b in body must be of type boolean: "string""#]);
    assert_errs(&s, json!({"a": {}}), &[r#"a: Invalid value: "object": a in body must be of type array: "object""#]);
    assert_errs(&s, json!({"a": ["x", 1]}), &[r#"a[1]: Invalid value: "integer": a[1] in body must be of type string: "integer""#]);
}

#[test]
fn int_or_string() {
    let s = field(json!({"x-kubernetes-int-or-string": true}));
    assert_errs(&s, json!({"field": 42}), &[]);
    assert_errs(&s, json!({"field": "foo"}), &[]);
    assert_errs(&s, json!({"field": null}), &[r#"field: Invalid value: "null": field in body must be of type integer,string: "null""#]);
    assert_errs(&s, json!({"field": true}), &[r#"field: Invalid value: "boolean": field in body must be of type integer,string: "boolean""#]);
    assert_errs(&s, json!({"field": 1.2}), &[r#"field: Invalid value: "number": field in body must be of type integer,string: "number""#]);
    assert_errs(&s, json!({"field": {}}), &[r#"field: Invalid value: "object": field in body must be of type integer,string: "object""#]);
    let s = field(json!({"x-kubernetes-int-or-string": true, "nullable": true}));
    assert_errs(&s, json!({"field": null}), &[]);
}

#[test]
fn int_or_string_with_any_of_reports_the_best_branch() {
    let s = field(json!({"x-kubernetes-int-or-string": true, "nullable": true, "anyOf": [{"type": "integer"}, {"type": "string"}]}));
    assert_errs(&s, json!({"field": 42}), &[]);
    assert_errs(
        &s,
        json!({"field": true}),
        &[
            r#"<nil>: Invalid value: "": "field" must validate at least one schema (anyOf)"#,
            r#"field: Invalid value: "boolean": field in body must be of type integer,string: "boolean""#,
            r#"field: Invalid value: "boolean": field in body must be of type integer: "boolean""#,
        ],
    );
    assert_errs(
        &s,
        json!({"field": 1.2}),
        &[
            r#"<nil>: Invalid value: "": "field" must validate at least one schema (anyOf)"#,
            r#"field: Invalid value: "number": field in body must be of type integer,string: "number""#,
            r#"field: Invalid value: "number": field in body must be of type integer: "number""#,
            r#"<nil>: Invalid value: "": Checked value must be of type integer (default format) in field"#,
        ],
    );
}

#[test]
fn all_of_wrapping_any_of() {
    let s = field(json!({"x-kubernetes-int-or-string": true, "nullable": true, "allOf": [{"anyOf": [{"type": "integer"}, {"type": "string"}]}]}));
    assert_errs(
        &s,
        json!({"field": []}),
        &[
            r#"<nil>: Invalid value: "": "field" must validate all the schemas (allOf). None validated"#,
            r#"<nil>: Invalid value: "": "field" must validate at least one schema (anyOf)"#,
            r#"field: Invalid value: "array": field in body must be of type integer,string: "array""#,
            r#"field: Invalid value: "array": field in body must be of type integer: "array""#,
        ],
    );
}

#[test]
fn one_of_and_not() {
    let s = field(json!({"type": "string", "oneOf": [{"pattern": "^a"}, {"pattern": "b$"}]}));
    assert_errs(&s, json!({"field": "ax"}), &[]);
    assert_errs(&s, json!({"field": "ab"}), &[r#"<nil>: Invalid value: "": "field" must validate one and only one schema (oneOf). Found 2 valid alternatives"#]);
    assert_errs(
        &s,
        json!({"field": "x"}),
        &[
            r#"<nil>: Invalid value: "": "field" must validate one and only one schema (oneOf). Found none valid"#,
            r#"field: Invalid value: "x": field in body should match '^a'"#,
        ],
    );
    let s = field(json!({"type": "string", "not": {"enum": ["forbidden"]}}));
    assert_errs(&s, json!({"field": "ok"}), &[]);
    assert_errs(&s, json!({"field": "forbidden"}), &[r#"<nil>: Invalid value: "": "field" must not validate the schema (not)"#]);
}

#[test]
fn required_fields() {
    let s = schema(json!({
        "type": "object", "required": ["field"],
        "properties": {"field": {"type": "object", "required": ["nested"], "properties": {"nested": {}}}}
    }));
    assert_errs(&s, json!({"test": "a"}), &["field: Required value"]);
    assert_errs(&s, json!({"field": {}}), &["field.nested: Required value"]);
    let c = s.validate(&json!({}));
    assert_eq!((c[0].reason.as_str(), c[0].field.as_str()), ("FieldValueRequired", "field"));
}

#[test]
fn enums_are_unsupported_values() {
    let s = schema(json!({"type": "object", "properties": {"field": {
        "type": "object", "required": ["nestedint", "nestedstring"],
        "properties": {"nestedint": {"type": "integer", "enum": [1, 2]}, "nestedstring": {"type": "string", "enum": ["a", "b"]}}
    }}}));
    assert_errs(&s, json!({"field": {}}), &["field.nestedint: Required value", "field.nestedstring: Required value"]);
    assert_errs(
        &s,
        json!({"field": {"nestedint": "x", "nestedstring": true}}),
        &[
            r#"field.nestedint: Invalid value: "string": field.nestedint in body must be of type integer: "string""#,
            r#"field.nestedint: Unsupported value: "x": supported values: "1", "2""#,
            r#"field.nestedstring: Invalid value: "boolean": field.nestedstring in body must be of type string: "boolean""#,
            r#"field.nestedstring: Unsupported value: true: supported values: "a", "b""#,
        ],
    );
    let s = schema(json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {"mode": {"type": "string", "enum": ["a", "b"]}}}}}));
    assert_errs(&s, json!({"spec": {"mode": "x"}}), &[r#"spec.mode: Unsupported value: "x": supported values: "a", "b""#]);
    let c = s.validate(&json!({"spec": {"mode": "x"}}));
    assert_eq!(c[0].reason, "FieldValueNotSupported");
    // Integral floats match integer enum values, as Go's conversion does.
    let s = field(json!({"type": "number", "enum": [1, 2.5]}));
    assert_errs(&s, json!({"field": 1.0}), &[]);
    assert_errs(&s, json!({"field": 2.5}), &[]);
    assert_errs(&s, json!({"field": 3}), &[r#"field: Unsupported value: 3: supported values: "1", "2.5""#]);
    // Objects in enums are shown as JSON.
    let s = field(json!({"type": "object", "enum": [{"a": 1}]}));
    assert_errs(&s, json!({"field": {"a": 2}}), &[r#"field: Unsupported value: {"a":2}: supported values: "{\"a\":1}""#]);
    // null never matches an enum.
    let s = field(json!({"type": "string", "nullable": true, "enum": ["a"]}));
    assert_errs(&s, json!({"field": null}), &[r#"field: Unsupported value: null: supported values: "a""#]);
}

#[test]
fn string_lengths_in_runes() {
    let s = schema(json!({"type": "object", "properties": {"fieldX": {"type": "string", "maxLength": 2, "minLength": 1}}}));
    assert_errs(&s, json!({"fieldX": "abc"}), &["fieldX: Too long: may not be more than 2 bytes"]);
    assert_errs(&s, json!({"fieldX": "éé"}), &[]);
    assert_errs(&s, json!({"fieldX": ""}), &[r#"fieldX: Invalid value: "": fieldX in body should be at least 1 chars long"#]);
    let one = field(json!({"type": "string", "maxLength": 1}));
    assert_errs(&one, json!({"field": "ab"}), &["field: Too long: may not be more than 1 byte"]);
    let c = s.validate(&json!({"fieldX": "abc"}));
    assert_eq!(c[0].reason, "FieldValueTooLong");
}

#[test]
fn patterns() {
    let s = field(json!({"type": "string", "pattern": "^[a-z]+$"}));
    assert_errs(&s, json!({"field": "abc"}), &[]);
    assert_errs(&s, json!({"field": "aBc"}), &[r#"field: Invalid value: "aBc": field in body should match '^[a-z]+$'"#]);
    // Unanchored search, as Go's MatchString.
    let s = field(json!({"type": "string", "pattern": "[0-9]"}));
    assert_errs(&s, json!({"field": "ab1c"}), &[]);
    let s = field(json!({"type": "string", "pattern": "+"}));
    assert_errs(
        &s,
        json!({"field": "foo"}),
        &["field: Invalid value: \"foo\": field in body should match '+, but pattern is invalid: error parsing regexp: missing argument to repetition operator: `+`'"],
    );
}

#[test]
fn numeric_bounds() {
    let s = schema(json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "replicas": {"type": "integer", "minimum": 1, "maximum": 10},
        "ratio": {"type": "number", "minimum": 0, "maximum": 1, "exclusiveMaximum": true, "exclusiveMinimum": true},
        "big": {"type": "number", "maximum": 1000000}
    }}}}));
    assert_errs(&s, json!({"spec": {"replicas": 0}}), &["spec.replicas: Invalid value: 0: spec.replicas in body should be greater than or equal to 1"]);
    assert_errs(&s, json!({"spec": {"replicas": 11}}), &["spec.replicas: Invalid value: 11: spec.replicas in body should be less than or equal to 10"]);
    assert_errs(&s, json!({"spec": {"ratio": 1}}), &["spec.ratio: Invalid value: 1: spec.ratio in body should be less than 1"]);
    assert_errs(&s, json!({"spec": {"ratio": 0.0}}), &["spec.ratio: Invalid value: 0: spec.ratio in body should be greater than 0"]);
    assert_errs(&s, json!({"spec": {"ratio": 0.5}}), &[]);
    assert_errs(&s, json!({"spec": {"big": 2000000.5}}), &["spec.big: Invalid value: 2.0000005e+06: spec.big in body should be less than or equal to 1e+06"]);
}

#[test]
fn multiple_of() {
    let s = schema(json!({"type": "object", "properties": {"i": {"type": "integer", "multipleOf": 5}, "n": {"type": "number", "multipleOf": 0.5}}}));
    assert_errs(&s, json!({"i": 10}), &[]);
    assert_errs(&s, json!({"i": 7}), &["i: Invalid value: 7: i in body should be a multiple of 5"]);
    assert_errs(&s, json!({"n": 1.5}), &[]);
    assert_errs(&s, json!({"n": 1.25}), &["n: Invalid value: 1.25: n in body should be a multiple of 0.5"]);
    // kube-openapi truncates a fractional factor for integer values.
    assert_errs(&s, json!({"n": 3}), &["n: Invalid value: 0: factor MultipleOf declared for n must be positive: 0"]);
}

#[test]
fn numeric_formats() {
    let s = schema(json!({"type": "object", "properties": {
        "intThirtyTwo": {"type": "integer", "format": "int32"}, "intSixtyFour": {"type": "integer", "format": "int64"},
        "floatThreeTwo": {"type": "number", "format": "float"}, "floatSixFour": {"type": "number", "format": "double"}
    }}));
    assert_errs(&s, json!({"intThirtyTwo": -2147483648i64, "intSixtyFour": i64::MIN, "floatThreeTwo": -3.4028234663852886e38, "floatSixFour": f64::MAX}), &[]);
    assert_errs(&s, json!({"intThirtyTwo": 2147483648i64}), &[r#"<nil>: Invalid value: "": Checked value must be of type integer with format int32 in intThirtyTwo"#]);
    assert_errs(
        &s,
        json!({"intSixtyFour": 1.0145901896392268e19}),
        &[
            r#"intSixtyFour: Invalid value: "float64": intSixtyFour in body must be of type int64: "float64""#,
            r#"<nil>: Invalid value: "": Checked value must be of type integer with format int64 in intSixtyFour"#,
        ],
    );
    assert_errs(&s, json!({"floatThreeTwo": 3.7431058130238174e38}), &[r#"<nil>: Invalid value: "": Checked value must be of type number with format float in floatThreeTwo"#]);
}

#[test]
fn string_formats() {
    let s = schema(json!({"type": "object", "properties": {
        "email": {"type": "string", "format": "email"}, "ip": {"type": "string", "format": "ipv4"},
        "when": {"type": "string", "format": "date-time"}, "id": {"type": "string", "format": "uuid"},
        "short": {"type": "string", "format": "k8s-short-name"}, "long": {"type": "string", "format": "k8s-long-name"},
        "unknown": {"type": "string", "format": "no-such-format"}, "d": {"type": "string", "format": "date"}
    }}));
    assert_errs(&s, json!({"email": "a@b.c", "ip": "1.2.3.4", "when": "2024-01-01T00:00:00Z", "id": "123e4567-e89b-12d3-a456-426614174000", "unknown": "x"}), &[]);
    assert_errs(&s, json!({"email": "nope"}), &[r#"email: Invalid value: "nope": email in body must be of type email: "nope""#]);
    assert_errs(&s, json!({"ip": "::1"}), &[r#"ip: Invalid value: "::1": ip in body must be of type ipv4: "::1""#]);
    assert_errs(&s, json!({"when": "yesterday"}), &[r#"when: Invalid value: "yesterday": when in body must be of type date-time: "yesterday""#]);
    assert_errs(&s, json!({"id": "x"}), &[r#"id: Invalid value: "x": id in body must be of type uuid: "x""#]);
    assert_errs(&s, json!({"long": "a.-"}), &[r#"long: Invalid value: "a.-": long in body must be of type k8s-long-name: "a.-""#]);
    assert_errs(&s, json!({"short": "a-"}), &[r#"short: Invalid value: "a-": short in body must be of type k8s-short-name: "a-""#]);
    // A non-string for a string format: the type validator names the format.
    assert_errs(
        &s,
        json!({"d": 5}),
        &[
            r#"d: Invalid value: "int64": d in body must be of type date: "int64""#,
        ],
    );
}

#[test]
fn arrays() {
    let s = schema(json!({"type": "object", "properties": {
        "fieldX": {"type": "array", "maxItems": 2, "minItems": 1, "uniqueItems": true, "items": {"type": "string"}}
    }}));
    assert_errs(&s, json!({"fieldX": ["a", "b", "c"]}), &["fieldX: Too many: 3: must have at most 2 items"]);
    assert_errs(&s, json!({"fieldX": []}), &["fieldX: Invalid value: 0: fieldX in body should have at least 1 items"]);
    assert_errs(&s, json!({"fieldX": ["a", "a"]}), &[r#"fieldX: Invalid value: "": fieldX in body shouldn't contain duplicates"#]);
    let one = field(json!({"type": "array", "maxItems": 1}));
    assert_errs(&one, json!({"field": [1, 2]}), &["field: Too many: 2: must have at most 1 item"]);
    let c = s.validate(&json!({"fieldX": ["a", "b", "c"]}));
    assert_eq!(c[0].reason, "FieldValueTooMany");
}

#[test]
fn objects_properties_counts_and_additional_properties() {
    let s = schema(json!({"type": "object", "properties": {
        "fieldX": {"type": "object", "maxProperties": 2},
        "fieldY": {"type": "object", "minProperties": 2},
        "labels": {"type": "object", "additionalProperties": {"type": "string", "maxLength": 3}}
    }}));
    assert_errs(&s, json!({"fieldX": {"a": true, "b": true, "c": true}}), &["fieldX: Too many: 3: must have at most 2 items"]);
    assert_errs(&s, json!({"fieldY": {"a": 1}}), &["fieldY: Invalid value: 1: fieldY in body should have at least 2 properties"]);
    assert_errs(
        &s,
        json!({"labels": {"a": "ok", "b": 1, "c": "toolong"}}),
        &[
            r#"labels.b: Invalid value: "integer": labels.b in body must be of type string: "integer""#,
            "labels.c: Too long: may not be more than 3 bytes",
        ],
    );
}

#[test]
fn root_level_errors_use_nil_path() {
    let s = schema(json!({"type": "object", "minProperties": 5}));
    assert_errs(&s, json!({"a": 1}), &[r#"<nil>: Invalid value: 1:  in body should have at least 5 properties"#]);
}

#[test]
fn embedded_resources() {
    let s = schema(json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "template": {"type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true}
    }}}}));
    assert_errs(&s, json!({"spec": {"template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"}}}}), &[]);
    assert_errs(&s, json!({"spec": {"template": {}}}), &["spec.template.apiVersion: Required value", "spec.template.kind: Required value"]);
    assert_errs(
        &s,
        json!({"spec": {"template": {"apiVersion": "a/b/c", "kind": "Foo_Bar"}}}),
        &[
            r#"spec.template.apiVersion: Invalid value: "a/b/c": unexpected GroupVersion string: a/b/c"#,
            r#"spec.template.kind: Invalid value: "Foo_Bar": may have mixed case, but should otherwise match: a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"#,
        ],
    );
    assert_errs(
        &s,
        json!({"spec": {"template": {"apiVersion": 1, "kind": ""}}}),
        &[r#"spec.template.apiVersion: Invalid value: 1: must be a string"#, r#"spec.template.kind: Invalid value: "": must not be empty"#],
    );
    assert_errs(
        &s,
        json!({"spec": {"template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a/b"}}}}),
        &[r#"spec.template.metadata.name: Invalid value: "a/b": may not contain '/'"#],
    );
    assert_errs(
        &s,
        json!({"spec": {"template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": 5}}}}),
        &[r#"spec.template.metadata: Invalid value: {"name":5}: json: cannot unmarshal number into Go struct field ObjectMeta.name of type string"#],
    );
}

#[test]
fn list_type_set_and_map_duplicates() {
    let s = schema(json!({"type": "object", "properties": {
        "set": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
        "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["port"],
                  "items": {"type": "object", "properties": {"port": {"type": "integer"}, "name": {"type": "string"}}}},
        "multi": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["a", "b"],
                  "items": {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}}}
    }}));
    assert_errs(&s, json!({"set": ["a", "b", "a", "a"]}), &[r#"set[2]: Duplicate value: "a""#]);
    assert_errs(&s, json!({"ports": [{"port": 80, "name": "a"}, {"port": 80, "name": "b"}]}), &[r#"ports[1]: Duplicate value: {"port":80}"#]);
    assert_errs(&s, json!({"ports": [{"name": "a"}, {"name": "b"}]}), &[r#"ports[1]: Duplicate value: {}"#]);
    assert_errs(&s, json!({"multi": [{"a": "x", "b": 1}, {"a": "x", "b": 2}, {"a": "x", "b": 1}]}), &[r#"multi[2]: Duplicate value: {"a":"x","b":1}"#]);
    assert_errs(
        &s,
        json!({"ports": [{"port": 1}, "x"]}),
        &[
            r#"ports[1]: Invalid value: "string": ports[1] in body must be of type object: "string""#,
            r#"ports[1]: Invalid value: "x": must be an object for an array of list-type map"#,
        ],
    );
    let c = s.validate(&json!({"set": ["a", "a"]}));
    assert_eq!((c[0].reason.as_str(), c[0].field.as_str()), ("FieldValueDuplicate", "set[1]"));
}

#[test]
fn nested_paths_through_items_and_maps() {
    let s = schema(json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "containers": {"type": "array", "items": {"type": "object", "required": ["name"], "properties": {
            "name": {"type": "string"}, "ports": {"type": "array", "items": {"type": "integer", "maximum": 65535}}}}}
    }}}}));
    assert_errs(
        &s,
        json!({"spec": {"containers": [{"name": "a", "ports": [80, 70000]}, {"ports": []}]}}),
        &[
            "spec.containers[0].ports[1]: Invalid value: 70000: spec.containers[0].ports[1] in body should be less than or equal to 65535",
            "spec.containers[1].name: Required value",
        ],
    );
}

#[test]
fn every_failing_field_is_reported() {
    let s = schema(json!({"type": "object", "properties": {"spec": {"type": "object", "required": ["a"], "properties": {
        "a": {"type": "string"}, "b": {"type": "integer", "minimum": 0}, "c": {"type": "string", "enum": ["x"]}
    }}}}));
    let got = errs(&s, json!({"spec": {"b": -1, "c": "y"}}));
    assert_eq!(
        got,
        vec![
            "spec.b: Invalid value: -1: spec.b in body should be greater than or equal to 0",
            r#"spec.c: Unsupported value: "y": supported values: "x""#,
            "spec.a: Required value",
        ]
    );
}

#[test]
fn quoting_follows_go() {
    let s = field(json!({"type": "integer"}));
    assert_errs(&s, json!({"field": "a\"b"}), &[r#"field: Invalid value: "string": field in body must be of type integer: "string""#]);
    let s = field(json!({"type": "string", "pattern": "^x$"}));
    assert_errs(&s, json!({"field": "tab\there"}), &[r#"field: Invalid value: "tab\there": field in body should match '^x$'"#]);
}

#[test]
fn preserve_unknown_fields_are_not_validated() {
    let s = schema(json!({"type": "object", "properties": {"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
        "properties": {"known": {"type": "integer"}}}}}));
    assert_errs(&s, json!({"spec": {"anything": {"goes": [1, "x"]}, "known": 1}}), &[]);
    assert_errs(&s, json!({"spec": {"known": "x"}}), &[r#"spec.known: Invalid value: "string": spec.known in body must be of type integer: "string""#]);
}
