//! Where policy params live, for the policy plugins: built-in kinds from the catalog (with their
//! conversions), custom resources from the tiers that serve them now; and how a
//! MutatingAdmissionPolicy's apply configuration merges into an object: a built-in one by its
//! OpenAPI schema, a custom resource by its CRD's structural schema (its scope's).

use kapi_admission::attributes::Gvx;
use kapi_admission_policy::{BuiltinResolver, Equivalent, ParamResolver, ParamSource};
use kapi_fieldmanager::{FieldSet, Writer};
use serde_json::Value;

use crate::field_validation::{FieldValidation, Source};
use crate::scope::ResourceScope;
use crate::tier::Chain;

/// The field manager a custom resource's apply configuration is merged as; its managedFields
/// entry is read (which nodes the schema keeps whole) and dropped.
const MERGER: &str = "kapi-mutating-admission-policy";

/// The resolver.
pub struct TierParams(pub Chain);

impl ParamResolver for TierParams {
    fn param_source(&self, api_version: &str, kind: &str) -> Option<ParamSource> {
        if let Some(builtin) = BuiltinResolver.param_source(api_version, kind) {
            return Some(builtin);
        }
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let spec = self.0.resources_in(group, version).into_iter().find(|s| s.kind == kind)?;
        let scope = self.0.scope(group, version, spec.resource)?;
        // A custom resource's cache holds its storage version's objects.
        Some(ParamSource { key_prefix: scope.spec().key_prefix(), namespaced: spec.namespaced })
    }

    fn param_object(&self, api_version: &str, kind: &str, cached: &Value) -> Value {
        BuiltinResolver.param_object(api_version, kind, cached)
    }

    fn equivalents(&self, resource: &Gvx, subresource: &str) -> Vec<Equivalent> {
        BuiltinResolver.equivalents(resource, subresource)
    }

    fn convert(&self, object: &Value, from: &Gvx, to: &Gvx) -> Result<Value, String> {
        BuiltinResolver.convert(object, from, to)
    }

    /// Built-in kinds merge by their OpenAPI schemas, custom resources by their scope's (the
    /// CRD's structural schema, or types deduced from the object without one); a kind no tier
    /// serves answers None (kube's 503 for a kind without a schema).
    fn apply_configuration(&self, kind: &Gvx, live: &Value, patch: &Value) -> Option<Result<Value, String>> {
        if let Some(builtin) = BuiltinResolver.apply_configuration(kind, live, patch) {
            return Some(builtin);
        }
        let spec = self.0.resources_in(&kind.group, &kind.version).into_iter().find(|s| s.kind == kind.name)?;
        let scope = self.0.scope(&kind.group, &kind.version, spec.resource)?;
        Some(merge_custom(scope.as_ref(), kind, live, patch))
    }
}

/// kube's `ApplyStructuredMergeDiff` on a custom resource, through what its scope offers: the
/// fields pruning would drop are the ones the schema does not declare; the merge is server-side
/// apply's (by a manager that owns nothing yet, forced: nothing is removed, nothing conflicts),
/// whose field set shows which nodes the schema keeps whole (atomic lists, maps and structs: a
/// value set with none of its members tracked); live's managedFields stay as they were.
fn merge_custom(scope: &dyn ResourceScope, kind: &Gvx, live: &Value, patch: &Value) -> Result<Value, String> {
    let mut pruned = patch.clone();
    let unknown = scope.check_fields(FieldValidation::Warn, &mut pruned, Source::Body(None)).map_err(|e| e.message)?;
    if !unknown.is_empty() {
        let undeclared: Vec<String> = unknown.iter().map(|u| smd_undeclared(u)).collect();
        return Err(format!("failed to convert patch object to typed object: {}", undeclared.join("\n")));
    }
    let Some(schema) = scope.apply_schema() else {
        return Err(format!("no schema for {}", kind.name));
    };
    let api_version = if kind.group.is_empty() { kind.version.clone() } else { format!("{}/{}", kind.group, kind.version) };
    let writer =
        Writer { manager: MERGER.into(), api_version, subresource: String::new(), reset: FieldSet::new(), now: String::new() };
    let mut base = live.clone();
    let kept = base.get_mut("metadata").and_then(Value::as_object_mut).and_then(|m| m.remove("managedFields"));
    let mut merged = schema.apply(Some(&base), patch, &writer, true).map_err(|e| e.message)?;
    let fields = merged
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .and_then(|entries| entries.iter().find(|e| e["manager"] == MERGER))
        .and_then(|e| e.get("fieldsV1"))
        .cloned()
        .unwrap_or(Value::Null);
    let mut atomics = Vec::new();
    whole_nodes("", patch, &fields, &mut atomics);
    if !atomics.is_empty() {
        return Err(format!(
            "invalid ApplyConfiguration: may not mutate atomic arrays, maps or structs: {}",
            atomics.join(", ")
        ));
    }
    if let Some(meta) = merged.get_mut("metadata").and_then(Value::as_object_mut) {
        match kept {
            Some(m) => meta.insert("managedFields".into(), m),
            None => meta.remove("managedFields"),
        };
    }
    Ok(merged)
}

/// Pruning's `unknown field "spec.a[0].b"` as structured-merge-diff words it:
/// `.spec.a[0].b: field not declared in schema`.
fn smd_undeclared(unknown: &str) -> String {
    let path = unknown.strip_prefix("unknown field \"").and_then(|p| p.strip_suffix('"')).unwrap_or(unknown);
    format!(".{path}: field not declared in schema")
}

/// The nodes of `patch` the schema keeps whole: a non-empty object or list whose field set
/// (`fieldsV1`) tracks none of its members. `metadata` is ObjectMeta, never whole; only tracked
/// members are followed (not list items).
fn whole_nodes(path: &str, patch: &Value, fields: &Value, out: &mut Vec<String>) {
    let Value::Object(members) = patch else { return };
    for (k, v) in members {
        let Some(f) = fields.get(format!("f:{k}")) else { continue };
        let p = format!("{path}.{k}");
        let tracks = |prefixes: &[&str]| {
            f.as_object().is_some_and(|m| m.keys().any(|key| prefixes.iter().any(|x| key.starts_with(x))))
        };
        let meta = path.is_empty() && k == "metadata";
        match v {
            Value::Object(m) if !m.is_empty() && !meta && !tracks(&["f:"]) => out.push(p),
            Value::Object(_) => whole_nodes(&p, v, f, out),
            Value::Array(items) if !items.is_empty() && !tracks(&["k:", "v:", "i:"]) => out.push(p),
            _ => {}
        }
    }
}
