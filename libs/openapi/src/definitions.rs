//! The schema definitions of every built-in kind, generated once from k8s-openapi's
//! `schemars::JsonSchema` impls and named as kube-apiserver names them.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::OnceLock;

use schemars::generate::SchemaSettings;
use schemars::{Schema, SchemaGenerator};
use serde_json::{json, Map, Value};

use crate::kinds::KINDS;

/// Prefix of a `$ref` into the definitions, as the v2 document spells it.
pub(crate) const V2_REF_PREFIX: &str = "#/definitions/";

/// One top-level kind that k8s-openapi provides a schema for.
pub(crate) struct KindEntry {
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    pub list_kind: Option<&'static str>,
    /// Adds the kind's schema (and everything it references) to the generator.
    pub register: fn(&mut SchemaGenerator) -> Schema,
    pub name: fn() -> Cow<'static, str>,
}

/// Group, version and kind, the key kube uses to find a schema.
pub(crate) type Gvk = (String, String, String);

/// All definitions plus the index from GVK to definition name.
pub(crate) struct Definitions {
    /// Definition name (`io.k8s.api.apps.v1.Deployment`) -> schema, with `$ref`s of the form
    /// `#/definitions/<name>`.
    pub defs: Map<String, Value>,
    pub by_gvk: HashMap<Gvk, String>,
}

static DEFINITIONS: OnceLock<Definitions> = OnceLock::new();

/// The process-wide definitions; built on first use because generation walks ~700 schemas.
pub(crate) fn definitions() -> &'static Definitions {
    DEFINITIONS.get_or_init(build)
}

fn build() -> Definitions {
    let mut settings = SchemaSettings::draft07();
    settings.definitions_path = "/definitions".into();
    // Keep `description` next to `$ref` (kube's v2 does); v3 rewrites those into `allOf`.
    settings.transforms.clear();
    let mut generator = SchemaGenerator::new(settings);

    for entry in KINDS {
        (entry.register)(&mut generator);
    }
    // Types the paths reference besides the kinds themselves.
    generator.subschema_for::<k8s_openapi::apimachinery::pkg::apis::meta::v1::DeleteOptions>();
    generator.subschema_for::<k8s_openapi::apimachinery::pkg::apis::meta::v1::Patch>();
    generator.subschema_for::<k8s_openapi::apimachinery::pkg::apis::meta::v1::WatchEvent<
        k8s_openapi::apimachinery::pkg::runtime::RawExtension,
    >>();
    generator.subschema_for::<k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta>();

    let mut defs = generator.take_definitions(false);
    crate::patch_meta::apply(&mut defs);
    let mut by_gvk = HashMap::new();
    for entry in KINDS {
        let name = (entry.name)().into_owned();
        if let Some(Value::Object(schema)) = defs.get_mut(&name) {
            schema.insert(
                "x-kubernetes-group-version-kind".into(),
                gvk_extension(entry.group, entry.version, entry.kind),
            );
        }
        by_gvk.insert(
            (
                entry.group.to_string(),
                entry.version.to_string(),
                entry.kind.to_string(),
            ),
            name.clone(),
        );
        if let Some(list_kind) = entry.list_kind {
            let list_name = format!("{name}List");
            defs.insert(
                list_name.clone(),
                list_schema(&name, entry.group, entry.version, entry.kind, list_kind),
            );
            by_gvk.insert(
                (
                    entry.group.to_string(),
                    entry.version.to_string(),
                    list_kind.to_string(),
                ),
                list_name,
            );
        }
    }
    // Kube lists every group version a DeleteOptions/WatchEvent may arrive in; the core one is
    // what clients look for.
    for (name, kind) in [
        (
            "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions",
            "DeleteOptions",
        ),
        (
            "io.k8s.apimachinery.pkg.apis.meta.v1.WatchEvent",
            "WatchEvent",
        ),
    ] {
        if let Some(Value::Object(schema)) = defs.get_mut(name) {
            schema.insert(
                "x-kubernetes-group-version-kind".into(),
                gvk_extension("", "v1", kind),
            );
        }
    }
    // A DELETE body is decoded into DeleteOptions: its type errors are checked by this schema.
    by_gvk.insert(
        (String::new(), "v1".to_string(), "DeleteOptions".to_string()),
        "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions".to_string(),
    );
    Definitions { defs, by_gvk }
}

/// The `x-kubernetes-group-version-kind` value kube puts on top-level kinds (a one-item list).
pub(crate) fn gvk_extension(group: &str, version: &str, kind: &str) -> Value {
    json!([{ "group": group, "kind": kind, "version": version }])
}

pub(crate) fn list_schema(
    item: &str,
    group: &str,
    version: &str,
    kind: &str,
    list_kind: &str,
) -> Value {
    let docs = ListDocs::of(item, kind, list_kind);
    json!({
        "description": docs.description,
        "type": "object",
        "properties": {
            "apiVersion": {
                "description": "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources",
                "type": "string"
            },
            "items": {
                "description": docs.items,
                "type": "array",
                "items": { "$ref": format!("{V2_REF_PREFIX}{item}") }
            },
            "kind": {
                "description": "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds",
                "type": "string"
            },
            "metadata": {
                "description": docs.metadata,
                "$ref": format!("{V2_REF_PREFIX}io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta")
            }
        },
        "required": ["items"],
        "x-kubernetes-group-version-kind": gvk_extension(group, version, list_kind),
    })
}

/// The descriptions of a list definition: kube's own (the Go doc comments of `<Kind>List`,
/// which k8s-openapi's generic `List<T>` drops; see `list_docs.rs`), or, for a list the
/// generated table does not know (a kind newer than k8s-pb), texts in the style of kube's
/// custom-resource list builder.
struct ListDocs {
    description: Cow<'static, str>,
    items: Cow<'static, str>,
    metadata: Cow<'static, str>,
}

impl ListDocs {
    fn of(item: &str, kind: &str, list_kind: &str) -> Self {
        let list_def = format!("{item}List");
        match crate::list_docs::LIST_DOCS.iter().find(|(name, ..)| *name == list_def) {
            Some((_, description, items, metadata)) => ListDocs {
                description: Cow::Borrowed(description),
                items: Cow::Borrowed(items),
                metadata: Cow::Borrowed(metadata),
            },
            None => ListDocs {
                description: Cow::Owned(format!("{list_kind} is a list of {kind}")),
                items: Cow::Owned(format!("List of {kind} objects.")),
                metadata: Cow::Borrowed("Standard list metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds"),
            },
        }
    }
}

/// Kube's definition name for a kind that k8s-openapi does not know (a custom resource):
/// the group reversed, then version and kind (`com.example.v1.Widget`).
pub(crate) fn custom_definition_name(group: &str, version: &str, kind: &str) -> String {
    let mut parts: Vec<&str> = group.split('.').filter(|p| !p.is_empty()).collect();
    parts.reverse();
    if parts.is_empty() {
        format!("{version}.{kind}")
    } else {
        format!("{}.{version}.{kind}", parts.join("."))
    }
}

/// A schema that accepts any object, for kinds the server serves without a typed schema.
pub(crate) fn free_form_schema(group: &str, version: &str, kind: &str) -> Value {
    json!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
        "x-kubernetes-group-version-kind": gvk_extension(group, version, kind),
    })
}

/// The definition a `$ref` points at, if it is a local definitions reference.
pub(crate) fn ref_target(reference: &str) -> Option<&str> {
    reference.strip_prefix(V2_REF_PREFIX)
}

/// Every `$ref` target reachable from `roots`, followed transitively through `lookup`.
pub(crate) fn referenced_closure<'a>(
    roots: &[&Value],
    lookup: impl Fn(&str) -> Option<&'a Value>,
) -> Vec<String> {
    let mut seen: Vec<String> = Vec::new();
    let mut seen_set = std::collections::HashSet::new();
    let mut stack: Vec<String> = Vec::new();
    for root in roots {
        collect_refs(root, &mut stack);
    }
    while let Some(name) = stack.pop() {
        if !seen_set.insert(name.clone()) {
            continue;
        }
        if let Some(schema) = lookup(&name) {
            collect_refs(schema, &mut stack);
        }
        seen.push(name);
    }
    seen.sort();
    seen
}

fn collect_refs(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, inner) in map {
                if key == "$ref" {
                    if let Some(target) = inner.as_str().and_then(ref_target) {
                        out.push(target.to_string());
                    }
                } else {
                    collect_refs(inner, out);
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|item| collect_refs(item, out)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_carry_kube_names_and_gvk() {
        let d = definitions();
        let deploy = &d.defs["io.k8s.api.apps.v1.Deployment"];
        assert_eq!(
            deploy["x-kubernetes-group-version-kind"],
            json!([{"group": "apps", "kind": "Deployment", "version": "v1"}])
        );
        assert_eq!(
            d.by_gvk[&("".into(), "v1".into(), "Pod".into())],
            "io.k8s.api.core.v1.Pod"
        );
        assert!(d
            .defs
            .contains_key("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"));
        assert!(d.defs.contains_key("io.k8s.api.core.v1.ConfigMapList"));
        assert_eq!(
            d.defs["io.k8s.api.apps.v1.DeploymentList"]["properties"]["items"]["items"]["$ref"],
            "#/definitions/io.k8s.api.apps.v1.Deployment"
        );
    }

    #[test]
    fn refs_point_at_existing_definitions() {
        let d = definitions();
        let all: Vec<&Value> = d.defs.values().collect();
        for name in referenced_closure(&all, |n| d.defs.get(n)) {
            assert!(d.defs.contains_key(&name), "dangling $ref to {name}");
        }
    }

    /// kube documents each list type in its own words; `kubectl explain` prints them.
    #[test]
    fn lists_carry_kube_descriptions() {
        let d = definitions();
        let text = |def: &str, pointer: &str| d.defs[def].pointer(pointer).and_then(Value::as_str).unwrap_or("").to_string();
        let cases = [
            ("io.k8s.api.core.v1.ServiceList", "/description", "ServiceList holds a list of services."),
            ("io.k8s.api.core.v1.ServiceList", "/properties/items/description", "List of services"),
            ("io.k8s.api.core.v1.ServiceList", "/properties/metadata/description",
                "Standard list metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds"),
            ("io.k8s.api.apps.v1.DeploymentList", "/description", "DeploymentList is a list of Deployments."),
            ("io.k8s.api.apps.v1.DeploymentList", "/properties/items/description", "Items is the list of Deployments."),
            ("io.k8s.api.apps.v1.DeploymentList", "/properties/metadata/description", "Standard list metadata."),
            ("io.k8s.api.core.v1.ConfigMapList", "/properties/metadata/description",
                "More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"),
            ("io.k8s.api.core.v1.PodList", "/properties/items/description",
                "List of pods. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md"),
            ("io.k8s.api.rbac.v1.ClusterRoleBindingList", "/properties/items/description", "Items is a list of ClusterRoleBindings"),
        ];
        for (def, pointer, want) in cases {
            assert_eq!(text(def, pointer), want, "{def}{pointer}");
        }
        // Every built-in list but alpha ones newer than k8s-pb has kube's text, not the fallback.
        for entry in KINDS.iter().filter(|e| e.list_kind.is_some() && !e.version.contains("alpha")) {
            let list = format!("{}List", (entry.name)());
            assert!(!text(&list, "/description").ends_with(&format!(" is a list of {}", entry.kind)), "{list}");
        }
    }

    #[test]
    fn lists_kube_does_not_document_get_generic_texts() {
        let schema = list_schema("com.example.v1.Widget", "example.com", "v1", "Widget", "WidgetList");
        assert_eq!(schema["description"], "WidgetList is a list of Widget");
        assert_eq!(schema["properties"]["items"]["description"], "List of Widget objects.");
        assert_eq!(schema["required"], json!(["items"]));
    }

    #[test]
    fn custom_names_reverse_the_group() {
        assert_eq!(
            custom_definition_name("stable.example.com", "v1", "CronTab"),
            "com.example.stable.v1.CronTab"
        );
    }
}
