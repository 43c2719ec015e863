//! Update and status-update validation: immutability and ratcheting of rules the stored
//! object already broke.

use serde_json::{json, Value};

use super::fixtures::{widget, widget_with_schema};
use crate::validation::{apply_defaults, validate_status_update, validate_update};

fn defaulted(mut crd: Value) -> Value {
    apply_defaults(&mut crd);
    crd["metadata"]["resourceVersion"] = json!("1");
    crd
}

fn established(mut crd: Value) -> Value {
    crd["status"]["conditions"] = json!([{"type": "Established", "status": "True"}]);
    crd
}

fn update_messages(new: Value, old: Value) -> Vec<String> {
    validate_update(&defaulted(new), &defaulted(old)).into_iter().map(|c| c.message).collect()
}

#[test]
fn unchanged_update_is_valid() {
    assert_eq!(update_messages(widget(), widget()), Vec::<String>::new());
}

#[test]
fn group_and_plural_are_immutable() {
    let mut new = widget();
    new["spec"]["group"] = json!("example.org");
    new["metadata"]["name"] = json!("widgets.example.org");
    assert_eq!(
        update_messages(new, widget()),
        vec![
            r#"metadata.name: Invalid value: "widgets.example.org": field is immutable"#,
            r#"spec.group: Invalid value: "example.org": field is immutable"#,
        ]
    );
}

#[test]
fn scope_and_kind_are_immutable_once_established() {
    let mut new = widget();
    new["spec"]["scope"] = json!("Cluster");
    new["spec"]["names"] = json!({"plural": "widgets", "kind": "Gadget"});
    // not established: both may change
    assert_eq!(update_messages(new.clone(), widget()), Vec::<String>::new());
    assert_eq!(
        update_messages(established(new), established(widget())),
        vec![
            r#"spec.scope: Invalid value: "Cluster": field is immutable"#,
            r#"spec.names.kind: Invalid value: "Gadget": field is immutable"#,
        ]
    );
}

/// A stored CRD with a non-atomic set (written before kube required atomic items) may be
/// updated while the rule stays broken; a fresh CRD may not.
#[test]
fn non_atomic_set_items_ratchet() {
    let schema = json!({"type": "object", "properties": {"s": {"type": "array", "x-kubernetes-list-type": "set",
        "items": {"type": "object", "properties": {"a": {"type": "string"}}}}}});
    let old = widget_with_schema(schema.clone());
    let mut new = old.clone();
    new["metadata"]["labels"] = json!({"touched": "yes"});
    assert_eq!(update_messages(new.clone(), old), Vec::<String>::new());
    assert_eq!(
        update_messages(new, widget()),
        vec![
            "spec.validation.openAPIV3Schema.properties[s].items.x-kubernetes-map-type: Invalid value: null: must be atomic as item of a list with x-kubernetes-list-type=set"
        ]
    );
}

/// Unpruned defaults in the stored object are tolerated on update.
#[test]
fn unpruned_defaults_ratchet() {
    let schema = json!({"type": "object", "properties": {"o": {"type": "object",
        "properties": {"a": {"type": "string"}}, "default": {"a": "x", "zz": 1}}}});
    let old = widget_with_schema(schema);
    assert_eq!(update_messages(old.clone(), old.clone()), Vec::<String>::new());
    assert_eq!(
        update_messages(old, widget()),
        vec![
            r#"spec.validation.openAPIV3Schema.properties[o].default: Invalid value: {"a":"x","zz":1}: must not have unknown fields"#
        ]
    );
}

#[test]
fn stored_version_cannot_be_dropped() {
    let mut old = widget();
    let v1 = old["spec"]["versions"][0].clone();
    let mut v2 = v1.clone();
    v2["name"] = json!("v2");
    v2["storage"] = json!(false);
    old["spec"]["versions"] = json!([v1, v2]);
    old["status"] = json!({"storedVersions": ["v1", "v2"]});
    let mut new = old.clone();
    new["spec"]["versions"] = json!([new["spec"]["versions"][0].clone()]);
    assert_eq!(
        update_messages(new, old),
        vec![
            r#"status.storedVersions[1]: Invalid value: "v2": missing from spec.versions; v2 was previously a storage version, and must remain in spec.versions until a storage migration ensures no data remains persisted in v2 and removes v2 from status.storedVersions"#
        ]
    );
}

#[test]
fn status_update_checks_accepted_names() {
    let old = defaulted(widget());
    let mut new = old.clone();
    new["status"]["acceptedNames"] = json!({"plural": "Widgets", "kind": "Widget"});
    let got: Vec<String> = validate_status_update(&new, &old).into_iter().map(|c| c.message).collect();
    assert_eq!(
        got,
        vec![
            r#"status.acceptedNames.plural: Invalid value: "Widgets": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"#
        ]
    );
}
