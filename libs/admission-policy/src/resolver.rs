//! What the plugin needs to know about resources beyond the policy objects: where the objects
//! of a `paramKind` are cached (built-in or custom), and which other versions serve the same
//! objects (`matchPolicy: Equivalent`). The server implements [`ParamResolver`] over its
//! built-ins and served CRDs; [`BuiltinResolver`] knows the built-ins alone.

use kapi_admission::attributes::Gvx;
use kapi_registry::catalog::{self, ResourceSpec};
use kapi_registry::conversion;
use serde_json::Value;

/// Where the objects of a param kind live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamSource {
    /// The key prefix of their watch cache (`/registry/core/configmaps/`).
    pub key_prefix: String,
    /// Whether they are namespaced (kube's `RESTScopeNamespace`).
    pub namespaced: bool,
}

/// A version of the same objects under another group, version or resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Equivalent {
    /// The resource (group, version, plural).
    pub resource: Gvx,
    /// Its kind (group, version, kind).
    pub kind: Gvx,
}

/// Maps kinds and resources to what the server serves.
pub trait ParamResolver: Send + Sync {
    /// Where objects of `apiVersion`/`kind` are cached; None when the kind is not served
    /// (kube's `failed to find resource referenced by paramKind`).
    fn param_source(&self, api_version: &str, kind: &str) -> Option<ParamSource>;

    /// A cached param as the param kind's version has it (caches hold the storage version).
    fn param_object(&self, _api_version: &str, _kind: &str, cached: &Value) -> Value {
        cached.clone()
    }

    /// The other resources serving the objects of `resource` (kube's
    /// `EquivalentResourceMapper`), for policies that match with `matchPolicy: Equivalent`.
    fn equivalents(&self, _resource: &Gvx, _subresource: &str) -> Vec<Equivalent> {
        Vec::new()
    }

    /// `patch` (a MutatingAdmissionPolicy apply configuration) merged into `live`, an object
    /// of `kind`, with the kind's schema ([`crate::merge_apply_configuration`]); None when the
    /// kind's schema is not known (kube answers 503 until it is).
    fn apply_configuration(&self, _kind: &Gvx, _live: &Value, _patch: &Value) -> Option<Result<Value, String>> {
        None
    }

    /// `object`, of kind `from`, converted to kind `to` (an equivalent version).
    fn convert(&self, _object: &Value, from: &Gvx, to: &Gvx) -> Result<Value, String> {
        Err(format!("no conversion from {} to {}", api_version(from), api_version(to)))
    }
}

/// `group/version`, or `version` for the core group.
pub(crate) fn api_version(g: &Gvx) -> String {
    if g.group.is_empty() {
        g.version.clone()
    } else {
        format!("{}/{}", g.group, g.version)
    }
}

fn split_api_version(api_version: &str) -> (&str, &str) {
    api_version.split_once('/').unwrap_or(("", api_version))
}

/// The built-in resources of [`kapi_registry::catalog`], with their conversions.
#[derive(Debug, Clone, Copy, Default)]
pub struct BuiltinResolver;

impl BuiltinResolver {
    fn spec_of_kind(api_version: &str, kind: &str) -> Option<&'static ResourceSpec> {
        let (group, version) = split_api_version(api_version);
        catalog::find_kind(group, version, kind)
    }
}

impl ParamResolver for BuiltinResolver {
    fn param_source(&self, api_version: &str, kind: &str) -> Option<ParamSource> {
        let spec = Self::spec_of_kind(api_version, kind)?;
        Some(ParamSource { key_prefix: spec.key_prefix(), namespaced: spec.namespaced })
    }

    fn param_object(&self, api_version: &str, kind: &str, cached: &Value) -> Value {
        Self::spec_of_kind(api_version, kind)
            .and_then(|spec| conversion::from_storage(spec, cached.clone()).ok())
            .unwrap_or_else(|| cached.clone())
    }

    fn equivalents(&self, resource: &Gvx, subresource: &str) -> Vec<Equivalent> {
        let Some(spec) = catalog::find(&resource.group, &resource.version, &resource.name) else { return Vec::new() };
        let prefix = conversion::storage_spec(spec).key_prefix();
        catalog::resources()
            .iter()
            .filter(|r| conversion::storage_spec(r).key_prefix() == prefix)
            .filter(|r| subresource.is_empty() || r.has_subresource(subresource))
            .map(|r| {
                let kind = match r.subresource(subresource) {
                    Some(s) => Gvx {
                        group: s.group.unwrap_or(r.group).into(),
                        version: s.version.unwrap_or(r.version).into(),
                        name: s.kind.into(),
                    },
                    None => Gvx { group: r.group.into(), version: r.version.into(), name: r.kind.into() },
                };
                Equivalent {
                    resource: Gvx { group: r.group.into(), version: r.version.into(), name: r.resource.into() },
                    kind,
                }
            })
            .collect()
    }

    fn apply_configuration(&self, kind: &Gvx, live: &Value, patch: &Value) -> Option<Result<Value, String>> {
        let schema = kapi_openapi::apply_schema(&kind.group, &kind.version, &kind.name)?;
        Some(crate::patching::merge_apply_configuration(&schema, live, patch))
    }

    fn convert(&self, object: &Value, from: &Gvx, to: &Gvx) -> Result<Value, String> {
        let from_spec = catalog::find_kind(&from.group, &from.version, &from.name);
        let to_spec = catalog::find_kind(&to.group, &to.version, &to.name);
        let (Some(from_spec), Some(to_spec)) = (from_spec, to_spec) else {
            return Err(format!("no conversion from {} to {}", api_version(from), api_version(to)));
        };
        let stored = conversion::to_storage(from_spec, object.clone()).map_err(|e| e.message)?;
        conversion::from_storage(to_spec, stored).map_err(|e| e.message)
    }
}
