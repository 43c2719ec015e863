//! Where policy params live, for the policy plugins: built-in kinds from the catalog (with their
//! conversions), custom resources from the tiers that serve them now; and how a
//! MutatingAdmissionPolicy's apply configuration merges into a built-in object.

use kapi_admission::attributes::Gvx;
use kapi_admission_policy::{BuiltinResolver, Equivalent, ParamResolver, ParamSource};
use serde_json::Value;

use crate::tier::Chain;

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

    /// Built-in kinds merge by their OpenAPI schemas; a custom resource's apply configuration
    /// answers None (kube's 503 for a kind without a schema) until the extensions tier lends
    /// its structural schema here.
    fn apply_configuration(&self, kind: &Gvx, live: &Value, patch: &Value) -> Option<Result<Value, String>> {
        BuiltinResolver.apply_configuration(kind, live, patch)
    }
}
