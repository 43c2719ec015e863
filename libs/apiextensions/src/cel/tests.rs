//! Compile-time checks: kube's messages for compile errors, result types, costs.

use serde_json::{json, Value};

use super::validate_crd_schema;

const P: &str = "spec.validation.openAPIV3Schema";

fn crd(schema: Value) -> Vec<String> {
    validate_crd_schema(&schema, P, false).into_iter().map(|c| c.message).collect()
}

fn with_rule(props: Value, rule: Value) -> Value {
    json!({"type": "object", "properties": {"spec": {"type": "object", "properties": props, "x-kubernetes-validations": [rule]}}})
}

#[test]
fn valid_rules_compile() {
    let s = with_rule(
        json!({"replicas": {"type": "integer"}, "name": {"type": "string", "maxLength": 10}}),
        json!({"rule": "self.replicas > 0 && self.name.startsWith('a')"}),
    );
    assert_eq!(crd(s), Vec::<String>::new());
}

#[test]
fn syntax_error() {
    let s = with_rule(json!({}), json!({"rule": "self."}));
    let m = crd(s);
    assert_eq!(m.len(), 1, "{m:?}");
    assert!(m[0].starts_with(r#"spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Invalid value: {"Rule":"self.","Message":"","MessageExpression":"","Reason":null,"FieldPath":"","OptionalOldSelf":null}: compilation failed: ERROR: <input>:1:"#), "{}", m[0]);
}

#[test]
fn undefined_field() {
    let s = with_rule(json!({"a": {"type": "integer"}}), json!({"rule": "self.b > 0"}));
    assert_eq!(
        crd(s),
        vec![
            r#"spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Invalid value: {"Rule":"self.b \u003e 0","Message":"","MessageExpression":"","Reason":null,"FieldPath":"","OptionalOldSelf":null}: compilation failed: ERROR: <input>:1:5: undefined field 'b'
 | self.b > 0
 | ....^"#
        ]
    );
}

#[test]
fn undeclared_reference() {
    let s = with_rule(json!({}), json!({"rule": "foo == 1"}));
    let m = crd(s);
    assert!(m[0].ends_with("compilation failed: ERROR: <input>:1:1: undeclared reference to 'foo' (in container '')\n | foo == 1\n | ^"), "{}", m[0]);
}

#[test]
fn no_matching_overload() {
    let s = with_rule(json!({"a": {"type": "string"}}), json!({"rule": "self.a > 1"}));
    let m = crd(s);
    assert!(m[0].contains("found no matching overload for '_>_' applied to '(string, int)'"), "{}", m[0]);
}

#[test]
fn rule_must_be_bool() {
    let s = with_rule(json!({"a": {"type": "integer"}}), json!({"rule": "self.a + 1"}));
    let m = crd(s);
    assert!(m[0].ends_with(": cel expression must evaluate to a bool"), "{}", m[0]);
}

#[test]
fn message_expression_must_be_string() {
    let s = with_rule(json!({"a": {"type": "integer"}}), json!({"rule": "self.a > 1", "messageExpression": "self.a"}));
    assert_eq!(
        crd(s),
        vec![
            r#"spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].messageExpression: Invalid value: {"Rule":"self.a \u003e 1","Message":"","MessageExpression":"self.a","Reason":null,"FieldPath":"","OptionalOldSelf":null}: messageExpression must evaluate to a string"#
        ]
    );
}

#[test]
fn unbounded_list_of_unbounded_strings_is_too_expensive() {
    let s = with_rule(
        json!({"l": {"type": "array", "items": {"type": "string"}}}),
        json!({"rule": "self.l.all(x, x.matches('^a.*'))"}),
    );
    let m = crd(s);
    assert_eq!(m[0], "spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Forbidden: estimated rule cost exceeds budget by factor of more than 100x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)");
    assert!(m.last().is_some_and(|l| l.starts_with("spec.validation.openAPIV3Schema: Forbidden: x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema exceeds budget by factor of")), "{m:?}");
    assert!(m.iter().any(|l| l == "spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Forbidden: contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema"));
}

#[test]
fn bounded_list_is_cheap_enough() {
    let s = with_rule(
        json!({"l": {"type": "array", "maxItems": 100, "items": {"type": "string", "maxLength": 64}}}),
        json!({"rule": "self.l.all(x, x.matches('^a.*'))"}),
    );
    assert_eq!(crd(s), Vec::<String>::new());
}

#[test]
fn cost_suppressed_for_unchanged_schema() {
    let s = with_rule(
        json!({"l": {"type": "array", "items": {"type": "string"}}}),
        json!({"rule": "self.l.all(x, x.matches('^a.*'))"}),
    );
    let m: Vec<String> = validate_crd_schema(&s, P, true).into_iter().map(|c| c.message).collect();
    assert!(m.iter().all(|l| !l.contains("estimated rule cost exceeds")), "{m:?}");
}

#[test]
fn transition_rule_and_optional_old_self_compile() {
    let s = with_rule(
        json!({"a": {"type": "string"}}),
        json!({"rule": "!oldSelf.hasValue() || self.a == oldSelf.value().a", "optionalOldSelf": true}),
    );
    assert_eq!(crd(s), Vec::<String>::new());
}

#[test]
fn int_or_string_and_preserve_unknown_are_dynamic() {
    let s = with_rule(
        json!({"port": {"x-kubernetes-int-or-string": true}, "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}),
        json!({"rule": "(type(self.port) == int || self.port.startsWith('p')) && self.extra.anything != 1"}),
    );
    assert_eq!(crd(s), Vec::<String>::new());
}

#[test]
fn embedded_resource_has_type_and_object_meta() {
    let s = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "template": {"type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true,
            "x-kubernetes-validations": [{"rule": "self.kind == 'Pod' && self.metadata.name != ''"}]}}}}});
    assert_eq!(crd(s), Vec::<String>::new());
}
