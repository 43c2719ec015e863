//! Ratcheting on update (kube's CRDValidationRatcheting): unchanged invalid values pass,
//! changed or new ones fail.

use serde_json::{json, Value};

use super::Structural;

fn msgs(s: &Structural, new: Value, old: Value) -> Vec<String> {
    s.validate_update(&new, &old).into_iter().map(|c| c.message).collect()
}

fn widget() -> Structural {
    Structural::new(&json!({"type": "object", "properties": {
        "apiVersion": {"type": "string"}, "kind": {"type": "string"}, "metadata": {"type": "object"},
        "spec": {"type": "object", "properties": {
            "name": {"type": "string", "maxLength": 3},
            "other": {"type": "string"},
            "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["port"],
                "items": {"type": "object", "properties": {"port": {"type": "integer"}, "proto": {"type": "string", "enum": ["TCP"]}}}},
            "args": {"type": "array", "items": {"type": "string", "pattern": "^-"}},
            "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
            "labels": {"type": "object", "additionalProperties": {"type": "string", "maxLength": 2}}
        }}
    }}))
    .expect("schema parses")
}

#[test]
fn unchanged_invalid_value_passes_an_update() {
    let s = widget();
    let old = json!({"spec": {"name": "toolong", "other": "a"}});
    let new = json!({"spec": {"name": "toolong", "other": "b"}});
    assert_eq!(msgs(&s, new.clone(), old), Vec::<String>::new());
    // The same object fails on create.
    assert_eq!(s.validate(&new).len(), 1);
}

#[test]
fn changed_invalid_value_fails() {
    let s = widget();
    let old = json!({"spec": {"name": "toolong"}});
    let new = json!({"spec": {"name": "toolonger"}});
    assert_eq!(msgs(&s, new, old), vec!["spec.name: Too long: may not be more than 3 bytes"]);
}

#[test]
fn new_invalid_field_fails() {
    let s = widget();
    let old = json!({"spec": {"other": "a"}});
    let new = json!({"spec": {"other": "a", "name": "toolong"}});
    assert_eq!(msgs(&s, new, old), vec!["spec.name: Too long: may not be more than 3 bytes"]);
}

#[test]
fn map_lists_correlate_by_key() {
    let s = widget();
    let old = json!({"spec": {"ports": [{"port": 80, "proto": "UDP"}, {"port": 443, "proto": "TCP"}]}});
    // Reordered, unchanged item 80 keeps its invalid proto.
    let new = json!({"spec": {"ports": [{"port": 443, "proto": "TCP"}, {"port": 80, "proto": "UDP"}]}});
    assert_eq!(msgs(&s, new, old.clone()), Vec::<String>::new());
    // A new item with the same invalid value is not ratcheted.
    let new = json!({"spec": {"ports": [{"port": 80, "proto": "UDP"}, {"port": 8080, "proto": "UDP"}]}});
    assert_eq!(msgs(&s, new, old), vec![r#"spec.ports[1].proto: Unsupported value: "UDP": supported values: "TCP""#]);
}

#[test]
fn atomic_lists_ratchet_only_as_a_whole() {
    let s = widget();
    let old = json!({"spec": {"args": ["bad", "-ok"]}});
    assert_eq!(msgs(&s, json!({"spec": {"args": ["bad", "-ok"]}}), old.clone()), Vec::<String>::new());
    // Appending to the list changes it: the old bad item is no longer ratcheted.
    assert_eq!(
        msgs(&s, json!({"spec": {"args": ["bad", "-ok", "-x"]}}), old),
        vec!["spec.args[0]: Invalid value: \"bad\": spec.args[0] in body should match '^-'"]
    );
}

#[test]
fn additional_properties_correlate_by_key() {
    let s = widget();
    let old = json!({"spec": {"labels": {"a": "long"}}});
    assert_eq!(msgs(&s, json!({"spec": {"labels": {"a": "long", "b": "ok"}}}), old.clone()), Vec::<String>::new());
    assert_eq!(
        msgs(&s, json!({"spec": {"labels": {"a": "long", "b": "long"}}}), old),
        vec!["spec.labels.b: Too long: may not be more than 2 bytes"]
    );
}

#[test]
fn list_type_duplicates_ratchet_on_the_whole_object() {
    let s = widget();
    let old = json!({"spec": {"tags": ["a", "a"]}});
    assert_eq!(msgs(&s, json!({"spec": {"tags": ["a", "a", "b"]}}), old), Vec::<String>::new());
    let old = json!({"spec": {"tags": ["a"]}});
    assert_eq!(msgs(&s, json!({"spec": {"tags": ["a", "a"]}}), old), vec![r#"spec.tags[1]: Duplicate value: "a""#]);
}

#[test]
fn kind_and_api_version_never_ratchet() {
    let s = Structural::new(&json!({"type": "object", "properties": {"kind": {"type": "string", "maxLength": 2}, "x": {"type": "string"}}}))
        .expect("schema parses");
    // The kind field itself is never ratcheted...
    let (old, new) = (json!({"kind": "Widget", "x": "a"}), json!({"kind": "Widget", "x": "b"}));
    assert_eq!(msgs(&s, new, old), vec!["kind: Too long: may not be more than 2 bytes"]);
    // ...but an object unchanged as a whole ratchets everything, as in kube.
    let obj = json!({"kind": "Widget"});
    assert_eq!(msgs(&s, obj.clone(), obj), Vec::<String>::new());
}
