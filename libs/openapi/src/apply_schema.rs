//! The built-in kinds' schemas as server-side-apply type information: which lists are sets or
//! keyed maps (and by which keys), which structs are atomic, which structs Go always
//! serializes. kube's structured-merge-diff derives the same from kube's OpenAPI extensions;
//! k8s-openapi's schemas lack most of them, hence the small tables below, each naming kube's
//! `+listMapKey` / `+structType=atomic` markers or Go's non-pointer struct fields.

use kapi_fieldmanager::{ListType, Shape, TypeSchema};
use serde_json::Value;

use crate::definitions::{definitions, V2_REF_PREFIX};

/// Structs kube marks `+structType=atomic` / `+mapType=atomic`: set as a whole by one owner.
const ATOMIC_STRUCTS: &[&str] = &[
    "io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector",
    "io.k8s.api.core.v1.LocalObjectReference",
    "io.k8s.api.core.v1.ObjectReference",
    "io.k8s.api.core.v1.TypedLocalObjectReference",
    "io.k8s.api.core.v1.ConfigMapKeySelector",
    "io.k8s.api.core.v1.SecretKeySelector",
    "io.k8s.api.core.v1.ObjectFieldSelector",
    "io.k8s.api.core.v1.ResourceFieldSelector",
    "io.k8s.api.core.v1.ConfigMapEnvSource",
    "io.k8s.api.core.v1.SecretEnvSource",
    "io.k8s.api.core.v1.SecretReference",
    "io.k8s.api.core.v1.NodeSelector",
    "io.k8s.api.core.v1.NodeSelectorTerm",
    "io.k8s.api.core.v1.TopologySelectorTerm",
];

/// Lists whose kube `+listMapKey`s are more than their patch merge key.
const LIST_MAP_KEYS: &[(&str, &str, &[&str])] = &[
    ("io.k8s.api.core.v1.Container", "ports", &["containerPort", "protocol"]),
    ("io.k8s.api.core.v1.EphemeralContainer", "ports", &["containerPort", "protocol"]),
    ("io.k8s.api.core.v1.ServiceSpec", "ports", &["port", "protocol"]),
    ("io.k8s.api.core.v1.PodSpec", "topologySpreadConstraints", &["topologyKey", "whenUnsatisfiable"]),
];

/// Defaults of list-map key fields (`+default`), used for elements that omit them.
const KEY_DEFAULTS: &[(&str, &str, &str)] = &[
    ("io.k8s.api.core.v1.ContainerPort", "protocol", "TCP"),
    ("io.k8s.api.core.v1.ServicePort", "protocol", "TCP"),
];

/// Fields Go serializes as `null` when unset: lists without `omitempty`, and `metav1.Time`
/// structs (omitempty does not apply to structs; a zero Time marshals as null).
const ALWAYS_NULL: &[(&str, &str)] = &[
    ("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", "creationTimestamp"),
    ("io.k8s.api.core.v1.PodSpec", "containers"),
    ("io.k8s.api.rbac.v1.Role", "rules"),
    ("io.k8s.api.rbac.v1.ClusterRole", "rules"),
];

/// Non-pointer struct fields besides every kind's metadata/spec/status.
const ALWAYS_PRESENT: &[(&str, &[&str])] = &[
    ("io.k8s.api.core.v1.PodTemplateSpec", &["metadata", "spec"]),
    ("io.k8s.api.batch.v1.JobTemplateSpec", &["metadata", "spec"]),
    ("io.k8s.api.apps.v1.DeploymentSpec", &["template", "strategy"]),
    ("io.k8s.api.apps.v1.ReplicaSetSpec", &["template"]),
    ("io.k8s.api.apps.v1.StatefulSetSpec", &["template", "updateStrategy"]),
    ("io.k8s.api.apps.v1.DaemonSetSpec", &["template", "updateStrategy"]),
    ("io.k8s.api.batch.v1.JobSpec", &["template"]),
    ("io.k8s.api.batch.v1.CronJobSpec", &["jobTemplate"]),
    ("io.k8s.api.core.v1.Container", &["resources"]),
    ("io.k8s.api.core.v1.EphemeralContainer", &["resources"]),
    ("io.k8s.api.core.v1.PersistentVolumeClaimSpec", &["resources"]),
];

/// One node of a kind's schema for server-side apply: the schema at this position (None when
/// the schema says nothing) and the definition it resolved to.
#[derive(Clone, Copy, Debug)]
pub struct ApplyNode {
    schema: Option<&'static Value>,
    /// The definition that contains this node as a property, and the property name (lists
    /// carry their key overrides there).
    owner: Option<(&'static str, &'static str)>,
}

/// The schema of a built-in kind for server-side apply; None for kinds without a typed schema.
pub fn apply_schema(group: &str, version: &str, kind: &str) -> Option<ApplyNode> {
    let defs = definitions();
    let name = defs.by_gvk.get(&(group.to_string(), version.to_string(), kind.to_string()))?;
    Some(ApplyNode { schema: defs.defs.get(name), owner: None })
}

/// Follows `$ref`s; returns the schema and the last definition name.
fn resolve(mut schema: &'static Value) -> (&'static Value, Option<&'static str>) {
    let defs = &definitions().defs;
    let mut name = None;
    for _ in 0..=defs.len() {
        let Some(target) = schema.get("$ref").and_then(Value::as_str).and_then(|r| r.strip_prefix(V2_REF_PREFIX)) else {
            break;
        };
        match defs.get_key_value(target) {
            Some((k, next)) => {
                name = Some(k.as_str());
                schema = next;
            }
            None => break,
        }
    }
    (schema, name)
}

fn type_is(schema: &Value, t: &str) -> bool {
    match schema.get("type") {
        Some(Value::String(s)) => s == t,
        Some(Value::Array(ts)) => ts.iter().any(|x| x == t),
        _ => false,
    }
}

impl ApplyNode {
    fn def_name(&self) -> Option<&'static str> {
        self.schema.and_then(|s| resolve(s).1)
    }
}

impl TypeSchema for ApplyNode {
    fn shape(&self) -> Shape {
        let Some(raw) = self.schema else { return Shape::Untyped };
        let (schema, name) = resolve(raw);
        if schema.get("x-kubernetes-preserve-unknown-fields").and_then(Value::as_bool) == Some(true) {
            return Shape::Untyped;
        }
        if type_is(schema, "array") {
            let strategy = raw.get("x-kubernetes-patch-strategy").and_then(Value::as_str).unwrap_or("");
            let merge_key = raw.get("x-kubernetes-patch-merge-key").and_then(Value::as_str);
            let explicit = raw.get("x-kubernetes-list-type").and_then(Value::as_str);
            let explicit_keys: Option<Vec<String>> = raw
                .get("x-kubernetes-list-map-keys")
                .and_then(Value::as_array)
                .map(|ks| ks.iter().filter_map(|k| k.as_str().map(str::to_owned)).collect());
            let overridden = self.owner.and_then(|(def, field)| {
                LIST_MAP_KEYS.iter().find(|(d, f, _)| *d == def && *f == field).map(|(_, _, keys)| keys.iter().map(|k| (*k).to_owned()).collect::<Vec<_>>())
            });
            let list = match (explicit, overridden.or(explicit_keys), merge_key) {
                (Some("atomic"), _, _) => ListType::Atomic,
                (Some("set"), _, _) => ListType::Set,
                (_, Some(keys), _) if !keys.is_empty() => ListType::Map(keys),
                (_, _, Some(key)) if strategy.split(',').any(|s| s == "merge") => ListType::Map(vec![key.to_owned()]),
                (_, _, None) if strategy.split(',').any(|s| s == "merge") => ListType::Set,
                _ => ListType::Atomic,
            };
            return Shape::List(list);
        }
        let atomic = schema.get("x-kubernetes-map-type").and_then(Value::as_str) == Some("atomic")
            || name.is_some_and(|n| ATOMIC_STRUCTS.contains(&n));
        if schema.get("properties").and_then(Value::as_object).is_some_and(|p| !p.is_empty()) {
            return Shape::Struct { atomic };
        }
        if schema.get("additionalProperties").is_some_and(Value::is_object) {
            return Shape::Map { atomic };
        }
        if type_is(schema, "object") {
            return Shape::Untyped;
        }
        Shape::Scalar
    }

    fn field(&self, name: &str) -> (Self, bool) {
        let Some(raw) = self.schema else { return (ApplyNode { schema: None, owner: None }, false) };
        let (schema, def) = resolve(raw);
        if let Some((key, prop)) = schema.get("properties").and_then(Value::as_object).and_then(|p| p.get_key_value(name)) {
            let owner = def.map(|d| (d, key.as_str()));
            return (ApplyNode { schema: Some(prop), owner }, true);
        }
        let values = schema.get("additionalProperties").filter(|a| a.is_object());
        (ApplyNode { schema: values, owner: None }, false)
    }

    fn items(&self) -> Self {
        let items = self.schema.map(|s| resolve(s).0).and_then(|s| s.get("items"));
        ApplyNode { schema: items, owner: None }
    }

    fn key_default(&self, key: &str) -> Option<Value> {
        let def = self.def_name()?;
        KEY_DEFAULTS.iter().find(|(d, k, _)| *d == def && *k == key).map(|(_, _, v)| Value::String((*v).to_owned()))
    }

    fn always_present(&self) -> Vec<(String, Value)> {
        let Some(raw) = self.schema else { return Vec::new() };
        let (schema, def) = resolve(raw);
        let props = schema.get("properties").and_then(Value::as_object);
        let empty = || Value::Object(serde_json::Map::new());
        let mut out = Vec::new();
        if schema.get("x-kubernetes-group-version-kind").is_some() {
            for f in ["metadata", "spec", "status"] {
                if props.is_some_and(|p| p.contains_key(f)) {
                    out.push((f.to_owned(), empty()));
                }
            }
        }
        if let Some(def) = def {
            for (d, fields) in ALWAYS_PRESENT {
                if *d == def {
                    out.extend(fields.iter().map(|f| ((*f).to_owned(), empty())));
                }
            }
            for (d, field) in ALWAYS_NULL {
                if *d == def {
                    out.push(((*field).to_owned(), Value::Null));
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use kapi_fieldmanager::{track_update, Writer};
    use serde_json::json;

    use super::*;

    fn writer(manager: &str) -> Writer {
        Writer {
            manager: manager.into(),
            api_version: "apps/v1".into(),
            subresource: String::new(),
            reset: kapi_fieldmanager::FieldSet::from_paths(&[kapi_fieldmanager::Path::fields(&["status"])]),
            now: "2026-11-23T10:00:00Z".into(),
        }
    }

    #[test]
    fn deployment_shapes() {
        let d = apply_schema("apps", "v1", "Deployment").expect("schema");
        let (spec, _) = d.field("spec");
        assert_eq!(spec.field("selector").0.shape(), Shape::Struct { atomic: true });
        let (template, _) = spec.field("template");
        let (pod, _) = template.field("spec");
        assert_eq!(pod.field("containers").0.shape(), Shape::List(ListType::Map(vec!["name".into()])));
        let container = pod.field("containers").0.items();
        assert_eq!(container.field("ports").0.shape(), Shape::List(ListType::Map(vec!["containerPort".into(), "protocol".into()])));
        assert_eq!(container.field("ports").0.items().key_default("protocol"), Some(json!("TCP")));
        assert_eq!(container.field("args").0.shape(), Shape::List(ListType::Atomic));
        assert_eq!(d.field("metadata").0.field("labels").0.shape(), Shape::Map { atomic: false });
        let present: Vec<String> = d.always_present().into_iter().map(|(f, _)| f).collect();
        assert_eq!(present, vec!["metadata", "spec", "status"]);
    }

    #[test]
    fn create_records_what_kube_records() {
        let d = apply_schema("apps", "v1", "Deployment").expect("schema");
        let mut obj = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"}},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}},
                "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [
                    {"name": "nginx", "image": "nginx", "ports": [{"containerPort": 80, "protocol": "TCP"}], "resources": {}}
                ]}}},
            "status": {}
        });
        track_update(None, &mut obj, &d, &writer("kubectl-create"));
        let mf = &obj["metadata"]["managedFields"][0];
        assert_eq!(mf["manager"], "kubectl-create");
        assert_eq!(mf["operation"], "Update");
        assert_eq!(
            mf["fieldsV1"],
            json!({
                "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
                "f:spec": {
                    "f:replicas": {}, "f:selector": {},
                    "f:strategy": {"f:rollingUpdate": {".": {}, "f:maxSurge": {}, "f:maxUnavailable": {}}, "f:type": {}},
                    "f:template": {"f:metadata": {"f:labels": {".": {}, "f:app": {}}}, "f:spec": {"f:containers": {
                        "k:{\"name\":\"nginx\"}": {".": {}, "f:image": {}, "f:name": {},
                            "f:ports": {".": {}, "k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}, "f:protocol": {}}},
                            "f:resources": {}}
                    }}}
                }
            })
        );
    }
}
