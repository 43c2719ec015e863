//! A custom resource's structural schema as server-side apply type information, following the
//! way kube gets there: the CRD version's schema is published as OpenAPI (root and embedded
//! resources gain `apiVersion`, `kind` and an `ObjectMeta` `metadata`), which kube-openapi's
//! `schemaconv` turns into a structured-merge-diff schema. Its rules, reproduced here:
//!
//! - objects are granular maps unless `x-kubernetes-map-type: atomic`; declared properties are
//!   struct fields, other keys follow `additionalProperties` or are deduced (kube deduces them
//!   below `x-kubernetes-preserve-unknown-fields` and in free-form objects, and rejects them
//!   elsewhere, where pruning has already removed them);
//! - lists are atomic unless `x-kubernetes-list-type` is `set` or `map` (with
//!   `x-kubernetes-list-map-keys`); a key a list element omits takes its schema default;
//! - nodes without a type (int-or-string, preserve-unknown-fields) are deduced from the value;
//! - `metadata` is the built-in `ObjectMeta` (supplied by the caller, as this crate does not
//!   know the built-in schemas), but without Go's typed zero values: custom resources are
//!   unstructured, so nothing exists before someone sets it.
//!
//! Objects report [`Shape::Map`] even when they declare properties: kapi's `Struct` means a Go
//! struct, which stays (empty) when apply removes its last field; an unstructured object does
//! not.

use kapi_fieldmanager::{ListType, Shape, TypeSchema};
use serde_json::Value;

use super::node::{AdditionalProperties, Schema};
use super::Structural;

/// Where a node stands in the schema.
#[derive(Clone, Copy, Debug)]
enum At<'a> {
    /// A node of the structural schema. `resource`: the root or an embedded resource (kube
    /// adds TypeMeta and ObjectMeta properties to those).
    Schema { node: &'a Schema, resource: bool },
    /// No schema: the type is deduced from the value (structured-merge-diff's deduced type).
    Deduced,
    /// A value set as a whole: elements of lists without `items`, `apiVersion` and `kind`.
    Leaf,
    /// Inside `metadata`: the caller's `ObjectMeta` node (`CustomType::meta`).
    Meta,
}

/// One node of a custom resource's type for server-side apply and managedFields. `M` is the
/// built-in `ObjectMeta` schema the resource's `metadata` follows.
#[derive(Clone, Debug)]
pub struct CustomType<'a, M> {
    at: At<'a>,
    /// The `ObjectMeta` root handed down to embedded resources, or the current `ObjectMeta`
    /// node when `at` is [`At::Meta`].
    meta: M,
}

impl Structural {
    /// The root type of this version's custom resources, `metadata` typed by `object_meta`.
    pub fn apply_type<M: TypeSchema>(&self, object_meta: M) -> CustomType<'_, M> {
        CustomType { at: At::Schema { node: self.schema(), resource: true }, meta: object_meta }
    }
}

impl<'a, M: TypeSchema> CustomType<'a, M> {
    fn with(&self, at: At<'a>) -> Self {
        CustomType { at, meta: self.meta.clone() }
    }

    fn schema(&self, node: &'a Schema) -> Self {
        self.with(At::Schema { node, resource: node.x_kubernetes_embedded_resource })
    }
}

fn list_type(node: &Schema) -> ListType {
    match node.x_kubernetes_list_type.as_deref() {
        Some("set") => ListType::Set,
        Some("map") => ListType::Map(node.x_kubernetes_list_map_keys.clone()),
        _ => ListType::Atomic,
    }
}

impl<M: TypeSchema> TypeSchema for CustomType<'_, M> {
    fn shape(&self) -> Shape {
        match self.at {
            At::Meta => self.meta.shape(),
            At::Leaf => Shape::Scalar,
            At::Deduced => Shape::Untyped,
            At::Schema { node, .. } => match node.type_.as_str() {
                "object" => Shape::Map { atomic: node.x_kubernetes_map_type.as_deref() == Some("atomic") },
                "array" => Shape::List(list_type(node)),
                // int-or-string and preserve-unknown-fields nodes: deduced from the value.
                "" => Shape::Untyped,
                _ => Shape::Scalar,
            },
        }
    }

    fn field(&self, name: &str) -> (Self, bool) {
        match self.at {
            At::Meta => {
                let (child, declared) = self.meta.field(name);
                (CustomType { at: At::Meta, meta: child }, declared)
            }
            At::Leaf | At::Deduced => (self.with(At::Deduced), false),
            At::Schema { node, resource } => {
                if resource {
                    match name {
                        "metadata" => return (self.with(At::Meta), true),
                        "apiVersion" | "kind" => return (self.with(At::Leaf), true),
                        _ => {}
                    }
                }
                if let Some(child) = node.properties.get(name) {
                    return (self.schema(child), true);
                }
                match &node.additional_properties {
                    Some(AdditionalProperties::Schema(values)) => (self.schema(values), false),
                    // `additionalProperties: true`, preserved unknown fields, free-form objects;
                    // pruning has removed anything else.
                    _ => (self.with(At::Deduced), false),
                }
            }
        }
    }

    fn items(&self) -> Self {
        match self.at {
            At::Meta => CustomType { at: At::Meta, meta: self.meta.items() },
            At::Schema { node, .. } => match &node.items {
                Some(items) => self.schema(items),
                None => self.with(At::Leaf),
            },
            At::Leaf | At::Deduced => self.with(At::Leaf),
        }
    }

    fn key_default(&self, key: &str) -> Option<Value> {
        match self.at {
            At::Meta => self.meta.key_default(key),
            At::Schema { node, .. } => node.properties.get(key).and_then(|k| k.default.clone()),
            At::Leaf | At::Deduced => None,
        }
    }

    // `always_present` stays empty: unstructured objects have no typed zero values.
}

#[cfg(test)]
mod tests {
    use kapi_fieldmanager::{apply, track_update, FieldSet, Path, Writer};
    use serde_json::json;

    use super::*;

    /// The parts of kube's `ObjectMeta` that matter here: granular label and annotation maps,
    /// finalizers as a set, owner references keyed by uid.
    #[derive(Clone, Copy, Debug, PartialEq)]
    enum Meta {
        Root,
        Map,
        Finalizers,
        Owners,
        Owner,
        Leaf,
    }

    impl TypeSchema for Meta {
        fn shape(&self) -> Shape {
            match self {
                Meta::Root | Meta::Owner => Shape::Struct { atomic: false },
                Meta::Map => Shape::Map { atomic: false },
                Meta::Finalizers => Shape::List(ListType::Set),
                Meta::Owners => Shape::List(ListType::Map(vec!["uid".into()])),
                Meta::Leaf => Shape::Scalar,
            }
        }
        fn field(&self, name: &str) -> (Self, bool) {
            match (self, name) {
                (Meta::Root, "labels" | "annotations") => (Meta::Map, true),
                (Meta::Root, "finalizers") => (Meta::Finalizers, true),
                (Meta::Root, "ownerReferences") => (Meta::Owners, true),
                (Meta::Root | Meta::Owner, _) => (Meta::Leaf, true),
                _ => (Meta::Leaf, false),
            }
        }
        fn items(&self) -> Self {
            if *self == Meta::Owners {
                Meta::Owner
            } else {
                Meta::Leaf
            }
        }
        fn always_present(&self) -> Vec<(String, Value)> {
            vec![("creationTimestamp".into(), Value::Null)]
        }
    }

    fn structural() -> Structural {
        Structural::new(&json!({
            "type": "object",
            "properties": {
                "metadata": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20}}},
                "spec": {"type": "object", "properties": {
                    "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name", "protocol"],
                        "items": {"type": "object", "required": ["name"], "properties": {
                            "name": {"type": "string"},
                            "protocol": {"type": "string", "default": "TCP"},
                            "port": {"type": "integer"}}}},
                    "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
                    "args": {"type": "array", "items": {"type": "string"}},
                    "command": {"type": "array", "x-kubernetes-list-type": "atomic", "items": {"type": "string"}},
                    "settings": {"type": "object", "additionalProperties": {"type": "string"}},
                    "selector": {"type": "object", "x-kubernetes-map-type": "atomic", "properties": {"app": {"type": "string"}}},
                    "resources": {"type": "object", "x-kubernetes-map-type": "granular", "properties": {"cpu": {"x-kubernetes-int-or-string": true}}},
                    "config": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    "template": {"type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true},
                    "replicas": {"type": "integer"}}},
                "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}}
            }
        }))
        .expect("schema")
    }

    fn writer(manager: &str) -> Writer {
        Writer {
            manager: manager.into(),
            api_version: "example.com/v1".into(),
            subresource: String::new(),
            reset: FieldSet::from_paths(&[Path::fields(&["status"])]),
            now: "2026-01-01T00:00:00Z".into(),
        }
    }

    fn entry(obj: &Value, manager: &str) -> Value {
        let entries = obj["metadata"]["managedFields"].as_array().cloned().unwrap_or_default();
        entries.into_iter().find(|e| e["manager"] == manager).map(|e| e["fieldsV1"].clone()).unwrap_or(Value::Null)
    }

    #[test]
    fn list_and_map_types_follow_the_extensions() {
        let s = structural();
        let root = s.apply_type(Meta::Root);
        let spec = root.field("spec").0;
        let field = |name: &str| spec.field(name).0.shape();
        assert_eq!(field("ports"), Shape::List(ListType::Map(vec!["name".into(), "protocol".into()])));
        assert_eq!(field("tags"), Shape::List(ListType::Set));
        assert_eq!(field("args"), Shape::List(ListType::Atomic), "lists are atomic by default");
        assert_eq!(field("command"), Shape::List(ListType::Atomic));
        assert_eq!(field("settings"), Shape::Map { atomic: false });
        assert_eq!(field("selector"), Shape::Map { atomic: true });
        assert_eq!(field("resources"), Shape::Map { atomic: false });
        assert_eq!(field("replicas"), Shape::Scalar);
        assert_eq!(root.shape(), Shape::Map { atomic: false });
        assert!(
            spec.field("ports").1 && !spec.field("settings").0.field("x").1,
            "properties are declared, map keys not"
        );
        assert_eq!(spec.field("settings").0.field("x").0.shape(), Shape::Scalar);
    }

    #[test]
    fn untyped_nodes_are_deduced() {
        let s = structural();
        let spec = s.apply_type(Meta::Root).field("spec").0;
        let cpu = spec.field("resources").0.field("cpu").0;
        assert_eq!(cpu.shape(), Shape::Untyped, "int-or-string");
        let config = spec.field("config").0;
        assert_eq!(config.shape(), Shape::Map { atomic: false });
        let (unknown, declared) = config.field("anything");
        assert!(!declared);
        assert_eq!(unknown.shape(), Shape::Untyped);
        assert_eq!(unknown.field("deeper").0.shape(), Shape::Untyped);
    }

    #[test]
    fn root_and_embedded_resources_have_object_meta() {
        let s = structural();
        let root = s.apply_type(Meta::Root);
        let (meta, declared) = root.field("metadata");
        assert!(declared);
        assert_eq!(meta.shape(), Shape::Struct { atomic: false }, "the CRD's own metadata schema is replaced");
        assert_eq!(meta.field("finalizers").0.shape(), Shape::List(ListType::Set));
        assert_eq!(meta.field("ownerReferences").0.items().field("uid").0.shape(), Shape::Scalar);
        assert!(meta.always_present().is_empty(), "no typed zero values in custom resources");
        let template = root.field("spec").0.field("template").0;
        assert_eq!(template.field("metadata").0.field("labels").0.shape(), Shape::Map { atomic: false });
        assert_eq!(template.field("kind").0.shape(), Shape::Scalar);
        assert!(template.field("kind").1 && template.field("apiVersion").1);
        assert!(!template.field("spec").1, "other fields of a preserved embedded resource are deduced");
        assert_eq!(root.field("spec").0.field("config").0.field("metadata").0.shape(), Shape::Untyped);
    }

    #[test]
    fn key_defaults_complete_list_map_keys() {
        let s = structural();
        let items = s.apply_type(Meta::Root).field("spec").0.field("ports").0.items();
        assert_eq!(items.key_default("protocol"), Some(json!("TCP")));
        assert_eq!(items.key_default("name"), None);
    }

    #[test]
    fn apply_records_kube_fields_v1() {
        let s = structural();
        let root = s.apply_type(Meta::Root);
        let config = json!({
            "apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": "w", "namespace": "default", "labels": {"app": "w"}, "finalizers": ["example.com/f"]},
            "spec": {
                "ports": [{"name": "http", "port": 80}],
                "tags": ["a", "b"], "args": ["x"], "settings": {"k": "v"}, "selector": {"app": "w"},
                "config": {"nested": {"deep": 1}, "list": [1]},
                "template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"labels": {"l": "1"}}, "spec": {"x": 1}}
            }
        });
        let obj = apply(None, &config, &root, &writer("kubectl"), false).expect("apply");
        assert_eq!(
            entry(&obj, "kubectl"),
            json!({
                "f:metadata": {"f:finalizers": {"v:\"example.com/f\"": {}}, "f:labels": {"f:app": {}}},
                "f:spec": {
                    "f:args": {},
                    "f:config": {"f:list": {}, "f:nested": {".": {}, "f:deep": {}}},
                    "f:ports": {"k:{\"name\":\"http\",\"protocol\":\"TCP\"}": {".": {}, "f:name": {}, "f:port": {}}},
                    "f:selector": {},
                    "f:settings": {"f:k": {}},
                    "f:tags": {"v:\"a\"": {}, "v:\"b\"": {}},
                    "f:template": {"f:apiVersion": {}, "f:kind": {}, "f:metadata": {"f:labels": {"f:l": {}}}, "f:spec": {".": {}, "f:x": {}}}
                }
            })
        );
    }

    #[test]
    fn managers_share_list_maps_and_sets_and_conflict_on_atomic_lists() {
        let s = structural();
        let root = s.apply_type(Meta::Root);
        let cr = |spec: Value| json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": spec});
        let a = apply(
            None,
            &cr(json!({"ports": [{"name": "http", "port": 80}], "tags": ["a"], "args": ["x"]})),
            &root,
            &writer("a"),
            false,
        )
        .expect("a");
        let b_config = cr(json!({"ports": [{"name": "metrics", "port": 9090}], "tags": ["a", "b"]}));
        let b = apply(Some(&a), &b_config, &root, &writer("b"), false).expect("b merges by key, sets by value");
        assert_eq!(b["spec"]["ports"], json!([{"name": "http", "port": 80}, {"name": "metrics", "port": 9090}]));
        assert_eq!(b["spec"]["tags"], json!(["a", "b"]));
        let err =
            apply(Some(&b), &cr(json!({"args": ["y"]})), &root, &writer("b"), false).expect_err("atomic list conflict");
        assert_eq!(err.code, 409);
        assert_eq!(err.message, "Apply failed with 1 conflict: conflict with \"a\": .spec.args");
        let err = apply(Some(&b), &cr(json!({"ports": [{"name": "http", "port": 81}]})), &root, &writer("b"), false)
            .expect_err("list-map item field conflict");
        assert_eq!(
            err.message,
            "Apply failed with 1 conflict: conflict with \"a\": .spec.ports[name=\"http\",protocol=\"TCP\"].port"
        );

        // "a" stops applying its port and tag: its item goes, the shared tag stays.
        let a2 = apply(Some(&b), &cr(json!({"args": ["x"]})), &root, &writer("a"), false).expect("a drops items");
        assert_eq!(a2["spec"]["ports"], json!([{"name": "metrics", "port": 9090}]));
        assert_eq!(a2["spec"]["tags"], json!(["a", "b"]));
    }

    #[test]
    fn removing_the_last_field_of_an_object_removes_the_object() {
        let s = structural();
        let root = s.apply_type(Meta::Root);
        let cr = |spec: Value| json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": spec});
        let a =
            apply(None, &cr(json!({"replicas": 1, "resources": {"cpu": "1"}})), &root, &writer("a"), false).expect("a");
        let a2 = apply(Some(&a), &cr(json!({"replicas": 1})), &root, &writer("a"), false).expect("a again");
        assert_eq!(a2["spec"], json!({"replicas": 1}));
    }

    #[test]
    fn updates_record_changed_fields_without_typed_zero_values() {
        let s = structural();
        let root = s.apply_type(Meta::Root);
        let old = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"replicas": 1}});
        let mut new = old.clone();
        new["spec"]["settings"] = json!({"a": "b"});
        new["spec"]["ports"] = json!([{"name": "http", "protocol": "UDP"}]);
        track_update(Some(&old), &mut new, &root, &writer("editor"));
        assert_eq!(
            entry(&new, "editor"),
            json!({"f:spec": {
                "f:ports": {".": {}, "k:{\"name\":\"http\",\"protocol\":\"UDP\"}": {".": {}, "f:name": {}, "f:protocol": {}}},
                "f:settings": {".": {}, "f:a": {}}
            }})
        );
    }
}
