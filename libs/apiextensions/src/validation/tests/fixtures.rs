//! Builders for test CRDs: a small valid one to break field by field, plus helpers to run
//! the defaulting + validation pipeline as the CRD strategy will.

use serde_json::{json, Value};

use crate::validation::{apply_defaults, validate_create};

/// A minimal valid v1 CRD (`widgets.example.com`, one version, a structural schema).
pub(crate) fn widget() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [{
                "name": "v1",
                "served": true,
                "storage": true,
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {
                        "spec": {
                            "type": "object",
                            "properties": {
                                "replicas": {"type": "integer", "minimum": 0},
                                "size": {"type": "string", "enum": ["small", "large"], "default": "small"}
                            }
                        },
                        "status": {"type": "object", "properties": {"replicas": {"type": "integer"}}}
                    }
                }}
            }]
        }
    })
}

/// `widget()` with its single schema replaced.
pub(crate) fn widget_with_schema(schema: Value) -> Value {
    let mut crd = widget();
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = schema;
    crd
}

/// `widget()` with `spec.<key>` of its only version set.
pub(crate) fn widget_with_version_field(key: &str, value: Value) -> Value {
    let mut crd = widget();
    crd["spec"]["versions"][0][key] = value;
    crd
}

/// Defaults then validates, returning the messages.
pub(crate) fn create_messages(mut crd: Value) -> Vec<String> {
    apply_defaults(&mut crd);
    validate_create(&crd).into_iter().map(|c| c.message).collect()
}

/// Asserts that validation gives exactly `expected`, in order.
#[track_caller]
pub(crate) fn assert_create(crd: Value, expected: &[&str]) {
    let got = create_messages(crd);
    assert_eq!(got, expected, "\n got: {got:#?}");
}
