//! Invalid schemas: structural rules, unsupported keywords, extensions, defaults, rules.
//! Single-version CRDs, so kube reports them under the hoisted `spec.validation` path.

use serde_json::json;

use super::fixtures::{assert_create, widget_with_schema, widget_with_version_field};

/// Non-structural: a property without a type.
#[test]
fn object_field_without_type() {
    assert_create(
        widget_with_schema(
            json!({"type": "object", "properties": {"spec": {"properties": {"a": {"type": "string"}}}}}),
        ),
        &[
            r#"spec.validation.openAPIV3Schema.properties[spec].type: Required value: must not be empty for specified object fields"#,
        ],
    );
}

/// Non-structural: array items without a type, an array without items.
#[test]
fn array_items_without_type_and_missing_items() {
    assert_create(
        widget_with_schema(
            json!({"type": "object", "properties": {"list": {"type": "array", "items": {"description": "x"}}, "noitems": {"type": "array"}}}),
        ),
        &[
            r#"spec.validation.openAPIV3Schema.properties[list].items.type: Required value: must not be empty for specified array items"#,
            r#"spec.validation.openAPIV3Schema.properties[noitems].items: Required value: must be specified"#,
        ],
    );
}

/// The root must be an object.
#[test]
fn root_must_be_object() {
    assert_create(
        widget_with_schema(json!({"type": "array", "items": {"type": "string"}})),
        &[r#"spec.validation.openAPIV3Schema.type: Invalid value: "array": must be object at the root"#],
    );
}

/// Root metadata may only constrain name and generateName.
#[test]
fn root_metadata_only_name_and_generate_name() {
    assert_create(
        widget_with_schema(
            json!({"type": "object", "properties": {"metadata": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20}, "labels": {"type": "object"}}}}}),
        ),
        &[
            r#"spec.validation.openAPIV3Schema.properties[metadata]: Forbidden: must not specify anything other than name and generateName, but metadata is implicitly specified"#,
        ],
    );
}

/// Constraining metadata.name alone is allowed.
#[test]
fn root_metadata_name_constraint_is_fine() {
    assert_create(
        widget_with_schema(
            json!({"type": "object", "properties": {"metadata": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20}}}}}),
        ),
        &[],
    );
}

/// AdditionalProperties and properties exclude each other.
#[test]
fn additional_properties_and_properties_exclusive() {
    assert_create(
        widget_with_schema(
            json!({"type": "object", "properties": {"m": {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": {"type": "string"}}}}),
        ),
        &[
            r#"spec.validation.openAPIV3Schema.properties[m].additionalProperties: Forbidden: additionalProperties and properties are mutual exclusive"#,
        ],
    );
}

/// Keywords kube does not support, and uniqueItems.
#[test]
fn unsupported_keywords() {
    assert_create(
        widget_with_schema(
            json!({"type": "object", "properties": {"a": {"type": "object", "$ref": "#/x", "id": "i", "patternProperties": {"^x": {"type": "string"}}, "definitions": {"d": {"type": "string"}}, "dependencies": {"a": ["b"]}}, "b": {"type": "array", "items": {"type": "string"}, "uniqueItems": true, "additionalItems": false}}}),
        ),
        &[
            r#"spec.validation.openAPIV3Schema.properties[a].id: Forbidden: id is not supported"#,
            r#"spec.validation.openAPIV3Schema.properties[a].patternProperties: Forbidden: patternProperties is not supported"#,
            r#"spec.validation.openAPIV3Schema.properties[a].definitions: Forbidden: definitions is not supported"#,
            r#"spec.validation.openAPIV3Schema.properties[a].dependencies: Forbidden: dependencies is not supported"#,
            r#"spec.validation.openAPIV3Schema.properties[a].$ref: Forbidden: $ref is not supported"#,
            r#"spec.validation.openAPIV3Schema.properties[b].additionalItems: Forbidden: additionalItems is not supported"#,
            r#"spec.validation.openAPIV3Schema.properties[b].uniqueItems: Forbidden: uniqueItems cannot be set to true since the runtime complexity becomes quadratic"#,
        ],
    );
}

/// Logic junctors may only carry value validations about declared fields.
#[test]
fn junctors_carry_only_value_validations() {
    assert_create(
        widget_with_schema(
            json!({"type": "object", "properties": {"a": {"type": "string", "anyOf": [{"type": "string", "description": "d"}, {"pattern": "^x"}]}}, "allOf": [{"properties": {"missing": {"minLength": 1}}}]}),
        ),
        &[
            r#"spec.validation.openAPIV3Schema.properties[a].anyOf[0].description: Forbidden: must be empty to be structural"#,
            r#"spec.validation.openAPIV3Schema.properties[a].anyOf[0].type: Forbidden: must be empty to be structural"#,
            r#"spec.validation.openAPIV3Schema.properties[missing]: Required value: because it is defined in spec.validation.openAPIV3Schema.allOf[0].properties[missing]"#,
        ],
    );
}

/// Int-or-string: not with preserve-unknown-fields; the anyOf must be exactly [integer, string].
#[test]
fn int_or_string_misuse() {
    assert_create(
        widget_with_schema(
            json!({"type": "object", "properties": {"a": {"x-kubernetes-int-or-string": true, "x-kubernetes-preserve-unknown-fields": true}, "b": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "string"}, {"type": "integer"}]}, "c": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}], "pattern": "^[0-9]+%?$"}}}),
        ),
        &[
            r#"spec.validation.openAPIV3Schema.properties[a].x-kubernetes-preserve-unknown-fields: Invalid value: true: must be false if x-kubernetes-int-or-string is true"#,
            r#"spec.validation.openAPIV3Schema.properties[b].anyOf[0].type: Forbidden: must be empty to be structural"#,
            r#"spec.validation.openAPIV3Schema.properties[b].anyOf[1].type: Forbidden: must be empty to be structural"#,
        ],
    );
}

/// Embedded resources: objects with properties or preserve-unknown-fields, kind a string.
#[test]
fn embedded_resource_rules() {
    assert_create(
        widget_with_schema(
            json!({"type": "object", "properties": {"a": {"type": "string", "x-kubernetes-embedded-resource": true}, "b": {"type": "object", "x-kubernetes-embedded-resource": true}, "c": {"type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true, "properties": {"kind": {"type": "integer"}}}}}),
        ),
        &[
            r#"spec.validation.openAPIV3Schema.properties[a].properties: Required value: must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields"#,
            r#"spec.validation.openAPIV3Schema.properties[a].type: Invalid value: "string": must be object if x-kubernetes-embedded-resource is true"#,
            r#"spec.validation.openAPIV3Schema.properties[b].properties: Required value: must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields"#,
            r#"spec.validation.openAPIV3Schema.properties[c].properties[kind].type: Invalid value: "integer": must be string"#,
        ],
    );
}

/// List-type map/set and list-map-keys rules.
#[test]
fn list_type_and_map_keys_rules() {
    assert_create(
        widget_with_schema(json!({"type": "object", "properties": {
            "a": {"type": "array", "x-kubernetes-list-type": "map", "items": {"type": "object", "properties": {"name": {"type": "string"}}}},
            "b": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name", "port", "name"], "items": {"type": "object", "properties": {"name": {"type": "object"}}}},
            "c": {"type": "array", "x-kubernetes-list-map-keys": ["name"], "items": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}}},
            "d": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "object", "properties": {"x": {"type": "string"}}}},
            "e": {"type": "array", "x-kubernetes-list-type": "bag", "items": {"type": "string"}},
            "f": {"type": "string", "x-kubernetes-list-type": "atomic"},
            "g": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"], "items": {"type": "string"}}
        }})),
        &[
            r#"spec.validation.openAPIV3Schema.properties[a].x-kubernetes-list-map-keys: Required value: must not be empty if x-kubernetes-list-type is map"#,
            r#"spec.validation.openAPIV3Schema.properties[b].items.properties[name].type: Invalid value: "object": must be a scalar type if parent array's x-kubernetes-list-type is map"#,
            r#"spec.validation.openAPIV3Schema.properties[b].x-kubernetes-list-map-keys: Invalid value: ["name","port","name"]: entries must all be names of item properties"#,
            r#"spec.validation.openAPIV3Schema.properties[b].items.properties[name].type: Invalid value: "object": must be a scalar type if parent array's x-kubernetes-list-type is map"#,
            r#"spec.validation.openAPIV3Schema.properties[b].x-kubernetes-list-map-keys: Invalid value: ["name","port","name"]: must not contain duplicate entries"#,
            r#"spec.validation.openAPIV3Schema.properties[b].items.properties[name].default: Required value: this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property"#,
            r#"spec.validation.openAPIV3Schema.properties[b].items.properties[name].default: Required value: this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property"#,
            r#"spec.validation.openAPIV3Schema.properties[c].x-kubernetes-list-type: Required value: must be map if x-kubernetes-list-map-keys is non-empty"#,
            r#"spec.validation.openAPIV3Schema.properties[d].items.x-kubernetes-map-type: Invalid value: null: must be atomic as item of a list with x-kubernetes-list-type=set"#,
            r#"spec.validation.openAPIV3Schema.properties[e].x-kubernetes-list-type: Unsupported value: "bag": supported values: "atomic", "set", "map""#,
            r#"spec.validation.openAPIV3Schema.properties[f].type: Invalid value: "string": must be array if x-kubernetes-list-type is specified"#,
            r#"spec.validation.openAPIV3Schema.properties[g].items.type: Invalid value: "string": must be object if parent array's x-kubernetes-list-type is map"#,
        ],
    );
}

/// Map-type only on objects, atomic or granular.
#[test]
fn map_type_rules() {
    assert_create(
        widget_with_schema(
            json!({"type": "object", "properties": {"a": {"type": "string", "x-kubernetes-map-type": "atomic"}, "b": {"type": "object", "x-kubernetes-map-type": "fancy"}}}),
        ),
        &[
            r#"spec.validation.openAPIV3Schema.properties[a].type: Invalid value: "string": must be object if x-kubernetes-map-type is specified"#,
            r#"spec.validation.openAPIV3Schema.properties[b].x-kubernetes-map-type: Unsupported value: "fancy": supported values: "atomic", "granular""#,
        ],
    );
}

/// Defaults must match their schema and carry no unknown fields.
#[test]
fn defaults_must_validate_and_be_pruned() {
    assert_create(
        widget_with_schema(json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "size": {"type": "string", "enum": ["small", "large"], "default": "huge"},
            "count": {"type": "integer", "default": "three"},
            "limit": {"type": "integer", "maximum": 10, "default": 11},
            "obj": {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"], "default": {"b": "x"}}
        }}}})),
        &[
            r#"spec.validation.openAPIV3Schema.properties[spec].properties[size].default: Unsupported value: "huge": supported values: "small", "large""#,
            r#"spec.validation.openAPIV3Schema.properties[spec].properties[count].default: Invalid value: "string":  in body must be of type integer: "string""#,
            r#"spec.validation.openAPIV3Schema.properties[spec].properties[limit].default: Invalid value: 11:  in body should be less than or equal to 10"#,
            r#"spec.validation.openAPIV3Schema.properties[spec].properties[obj].default: Invalid value: {"b":"x"}: must not have unknown fields"#,
            r#"spec.validation.openAPIV3Schema.properties[spec].properties[obj].default.a: Required value"#,
        ],
    );
}

/// No defaults in top-level metadata.
#[test]
fn no_defaults_in_top_level_metadata() {
    assert_create(
        widget_with_schema(
            json!({"type": "object", "properties": {"metadata": {"type": "object", "default": {"name": "x"}}}}),
        ),
        &[
            r#"spec.validation.openAPIV3Schema.properties[metadata].default: Forbidden: must not be set in top-level metadata"#,
        ],
    );
}

/// The root cannot be nullable.
#[test]
fn nullable_root_forbidden() {
    assert_create(
        widget_with_schema(json!({"type": "object", "nullable": true})),
        &[r#"spec.validation.openAPIV3Schema.nullable: Forbidden: nullable cannot be true at the root"#],
    );
}

/// With the status subresource the root may only carry keywords that survive extracting status.
#[test]
fn status_subresource_restricts_root_keywords() {
    let mut crd = widget_with_version_field("subresources", json!({"status": {}}));
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["minProperties"] = json!(1);
    assert_create(
        crd.clone(),
        &[
            &format!("spec.validation.openAPIV3Schema: Invalid value: {}: only [Description Type Format Title Maximum ExclusiveMaximum Minimum ExclusiveMinimum MaxLength MinLength Pattern MaxItems MinItems UniqueItems MultipleOf Required Items Properties ExternalDocs Example XPreserveUnknownFields XValidations] fields are allowed at the root of the schema if the status subresource is enabled", crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]),
        ],
    );
}

/// `x-kubernetes-validations` entries: rule, message, messageExpression, reason, fieldPath.
#[test]
fn validation_rule_shapes() {
    assert_create(
        widget_with_schema(
            json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {"a": {"type": "string"}}, "x-kubernetes-validations": [
                {"rule": "  "},
                {"rule": "self.a != ''", "message": "   "},
                {"rule": "self.a != ''", "reason": "FieldValueBad"},
                {"rule": "self.a != ''", "fieldPath": ".b"},
                {"rule": "self.a != ''", "messageExpression": " "},
                {"rule": "self.a\n != ''"}
            ]}}}),
        ),
        &[
            r#"spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Required value: rule is not specified"#,
            r#"spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[1].message: Invalid value: "   ": must be non-empty if specified"#,
            r#"spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[2].reason: Unsupported value: "FieldValueBad": supported values: "FieldValueDuplicate", "FieldValueForbidden", "FieldValueInvalid", "FieldValueRequired""#,
            r#"spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[3].fieldPath: Invalid value: ".b": must be a valid path"#,
            r#"spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[4].messageExpression: Required value: messageExpression must be non-empty if specified"#,
            r#"spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[5].message: Required value: message must be specified if rule contains line breaks"#,
        ],
    );
}

/// OldSelf only where old and new values correlate; optionalOldSelf only with oldSelf.
#[test]
fn transition_rules_need_correlatable_values() {
    assert_create(
        widget_with_schema(
            json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {"l": {"type": "array", "maxItems": 10, "items": {"type": "string", "maxLength": 10, "x-kubernetes-validations": [{"rule": "self == oldSelf"}]}}}, "x-kubernetes-validations": [{"rule": "self.l.size() > 0", "optionalOldSelf": true}]}}}),
        ),
        &[
            r#"spec.validation.openAPIV3Schema.properties[spec].properties[l].items.x-kubernetes-validations[0].rule: Invalid value: "self == oldSelf": oldSelf cannot be used on the uncorrelatable portion of the schema within spec.validation.openAPIV3Schema.properties[spec].properties[l]"#,
            r#"spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].optionalOldSelf: Invalid value: true: may not be set if oldSelf is not used in rule"#,
        ],
    );
}

/// Patterns must compile, with Go's error wording.
#[test]
fn pattern_must_compile() {
    assert_create(
        widget_with_schema(json!({"type": "object", "properties": {"a": {"type": "string", "pattern": "^(abc$"}}})),
        &[
            r#"spec.validation.openAPIV3Schema.properties[a].pattern: Invalid value: "^(abc$": must be a valid regular expression, but isn't: error parsing regexp: missing closing ): `^(abc$`"#,
        ],
    );
}

/// Types: no null, only OpenAPI types; preserve-unknown-fields true or absent.
#[test]
fn types_must_be_openapi_types() {
    assert_create(
        widget_with_schema(
            json!({"type": "object", "properties": {"a": {"type": "null"}, "b": {"type": "foo"}, "c": {"type": "string", "x-kubernetes-preserve-unknown-fields": false}}}),
        ),
        &[
            r#"spec.validation.openAPIV3Schema.properties[a].type: Unsupported value: "null": supported values: "array", "boolean", "integer", "number", "object", "string""#,
            r#"spec.validation.openAPIV3Schema.properties[a].type: Forbidden: type cannot be set to null, use nullable as an alternative"#,
            r#"spec.validation.openAPIV3Schema.properties[b].type: Unsupported value: "foo": supported values: "array", "boolean", "integer", "number", "object", "string""#,
            r#"spec.validation.openAPIV3Schema.properties[c].x-kubernetes-preserve-unknown-fields: Invalid value: false: must be true or undefined"#,
        ],
    );
}

/// $schema is only caught by the structural conversion, shown when nothing else is wrong.
#[test]
fn dollar_schema_not_supported() {
    assert_create(
        widget_with_schema(json!({"type": "object", "$schema": "http://json-schema.org/draft-04/schema#"})),
        &[r#"spec.validation.openAPIV3Schema: Invalid value: "": OpenAPIV3Schema 'schema' is not supported"#],
    );
}

/// Metadata may not be reasoned about inside a junctor.
#[test]
fn metadata_in_junctors_forbidden() {
    assert_create(
        widget_with_schema(
            json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {"metadata": {"type": "string"}}}}, "anyOf": [{"properties": {"metadata": {"required": ["name"]}}}]}),
        ),
        &[
            r#"spec.validation.openAPIV3Schema.anyOf[0].properties[metadata]: Forbidden: must not be specified in a nested context"#,
            r#"spec.validation.openAPIV3Schema.properties[metadata]: Required value: because it is defined in spec.validation.openAPIV3Schema.anyOf[0].properties[metadata]"#,
        ],
    );
}
