//! The built-in kinds' schemas as strategic-merge-patch metadata: which lists merge, by which
//! key, which maps are replaced. The `x-kubernetes-patch-*` extensions come from
//! [`crate::patch_meta`], the same ones kubectl reads from `/openapi/v2` to compute its patches,
//! so the client and the server agree on every list.

use kapi_apimachinery::strategic_merge::{FieldMeta, PatchSchema};
use serde_json::Value;

use crate::definitions::{definitions, V2_REF_PREFIX};

/// One node of a kind's schema (`None`: a field the schema does not describe).
#[derive(Clone, Copy, Debug)]
pub struct SchemaNode {
    schema: Option<&'static Value>,
}

/// The schema of a built-in kind for strategic merge patch; `None` for kinds without a typed
/// schema (custom resources), which kube-apiserver does not strategic-merge at all.
pub fn patch_schema(group: &str, version: &str, kind: &str) -> Option<SchemaNode> {
    let defs = definitions();
    let name = defs.by_gvk.get(&(group.to_string(), version.to_string(), kind.to_string()))?;
    Some(SchemaNode { schema: defs.defs.get(name) })
}

/// Follows `$ref`s to the schema that describes the value.
fn resolve(mut schema: &'static Value) -> &'static Value {
    let defs = &definitions().defs;
    for _ in 0..=defs.len() {
        let Some(target) = schema.get("$ref").and_then(Value::as_str).and_then(|r| r.strip_prefix(V2_REF_PREFIX)) else {
            break;
        };
        match defs.get(target) {
            Some(next) => schema = next,
            None => break,
        }
    }
    schema
}

fn is_array(schema: &Value) -> bool {
    match schema.get("type") {
        Some(Value::String(t)) => t == "array",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "array"),
        _ => false,
    }
}

impl PatchSchema for SchemaNode {
    fn field(&self, key: &str) -> (Self, FieldMeta) {
        let Some(node) = self.schema.map(resolve) else {
            return (SchemaNode { schema: None }, FieldMeta::default());
        };
        let field = node
            .get("properties")
            .and_then(|p| p.get(key))
            .or_else(|| node.get("additionalProperties").filter(|a| a.is_object()));
        let Some(field) = field else {
            return (SchemaNode { schema: None }, FieldMeta::default());
        };
        let strategies = field.get("x-kubernetes-patch-strategy").and_then(Value::as_str).unwrap_or("");
        let meta = FieldMeta {
            merge: strategies.split(',').any(|s| s == "merge"),
            replace: strategies.split(',').any(|s| s == "replace"),
            merge_key: field.get("x-kubernetes-patch-merge-key").and_then(Value::as_str).map(str::to_owned),
        };
        let resolved = resolve(field);
        let child = if is_array(resolved) { resolved.get("items") } else { Some(resolved) };
        (SchemaNode { schema: child }, meta)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pod_lists_carry_kube_merge_keys() {
        let pod = patch_schema("", "v1", "Pod").expect("pods have a schema");
        let (spec, _) = pod.field("spec");
        let (container, meta) = spec.field("containers");
        assert_eq!(meta, FieldMeta { merge: true, replace: false, merge_key: Some("name".into()) });
        let (_, ports) = container.field("ports");
        assert_eq!(ports.merge_key.as_deref(), Some("containerPort"));
        let (_, args) = container.field("args");
        assert_eq!(args, FieldMeta::default());
        let (_, tolerations) = spec.field("tolerations");
        assert!(!tolerations.merge);
        let (meta_node, _) = pod.field("metadata");
        let (_, finalizers) = meta_node.field("finalizers");
        assert!(finalizers.merge && finalizers.merge_key.is_none());
        let (labels, _) = meta_node.field("labels");
        let (_, label) = labels.field("app");
        assert_eq!(label, FieldMeta::default());
        assert!(patch_schema("example.com", "v1", "Widget").is_none());
    }
}
