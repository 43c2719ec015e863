//! The RBAC API objects as the authorizer needs them, read from stored JSON.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// rbac/v1 `PolicyRule`. An empty list of resource names allows every name; the other lists
/// must match (with `*` as wildcard) for the rule to apply.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyRule {
    /// Verbs (`get`, `list`, ..., `*`).
    #[serde(default, deserialize_with = "null_as_empty")]
    pub verbs: Vec<String>,
    /// API groups (`""` is core, `*` every group).
    #[serde(default, deserialize_with = "null_as_empty", skip_serializing_if = "Vec::is_empty")]
    pub api_groups: Vec<String>,
    /// Resources, optionally `resource/subresource`, `*/subresource` or `resource/*`.
    #[serde(default, deserialize_with = "null_as_empty", skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<String>,
    /// Object names the rule is limited to.
    #[serde(default, deserialize_with = "null_as_empty", skip_serializing_if = "Vec::is_empty")]
    pub resource_names: Vec<String>,
    /// Non-resource paths (`/healthz`, `/apis/*`).
    #[serde(rename = "nonResourceURLs", default, deserialize_with = "null_as_empty", skip_serializing_if = "Vec::is_empty")]
    pub non_resource_urls: Vec<String>,
}

impl PolicyRule {
    /// Everything: `*` verbs on `*` resources of `*` groups, and `*` verbs on every path.
    /// What `system:masters` and AlwaysAllow grant, and what an aggregationRule requires.
    pub fn full_authority() -> Vec<PolicyRule> {
        let star = || vec!["*".to_owned()];
        vec![
            PolicyRule { verbs: star(), api_groups: star(), resources: star(), ..PolicyRule::default() },
            PolicyRule { verbs: star(), non_resource_urls: star(), ..PolicyRule::default() },
        ]
    }
}

fn null_as_empty<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    Ok(Option::<Vec<String>>::deserialize(d)?.unwrap_or_default())
}

/// rbac/v1 `Subject`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Subject {
    /// `User`, `Group` or `ServiceAccount`.
    pub kind: String,
    /// Name of the user, group or service account.
    pub name: String,
    /// Namespace of a service account; defaults to the binding's namespace.
    #[serde(default)]
    pub namespace: Option<String>,
}

/// rbac/v1 `RoleRef`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RoleRef {
    /// `Role` or `ClusterRole`.
    pub kind: String,
    /// The role's name.
    pub name: String,
}

/// A RoleBinding or ClusterRoleBinding, reduced to what decisions read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Binding {
    /// Binding name (reported in "allowed by" reasons).
    pub name: String,
    /// Namespace of a RoleBinding; empty for a ClusterRoleBinding.
    pub namespace: String,
    /// The role granted.
    pub role_ref: RoleRef,
    /// Who gets it.
    pub subjects: Vec<Subject>,
}

/// Why an RBAC object could not be read.
#[derive(Debug, thiserror::Error)]
#[error("{kind} {name:?}: {message}")]
pub struct DecodeError {
    kind: &'static str,
    name: String,
    message: String,
}

fn name_of(obj: &Value) -> String {
    obj.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_owned()
}

/// The rules of a Role or ClusterRole object.
pub fn rules_of(obj: &Value) -> Result<Vec<PolicyRule>, DecodeError> {
    match obj.get("rules") {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(rules) => serde_json::from_value(rules.clone())
            .map_err(|e| DecodeError { kind: "role", name: name_of(obj), message: e.to_string() }),
    }
}

impl Binding {
    /// Reads a RoleBinding or ClusterRoleBinding object.
    pub fn from_object(obj: &Value) -> Result<Binding, DecodeError> {
        let name = name_of(obj);
        let err = |message: String| DecodeError { kind: "binding", name: name.clone(), message };
        let role_ref: RoleRef =
            serde_json::from_value(obj.get("roleRef").cloned().unwrap_or(Value::Null)).map_err(|e| err(e.to_string()))?;
        let subjects: Vec<Subject> = match obj.get("subjects") {
            None | Some(Value::Null) => Vec::new(),
            Some(s) => serde_json::from_value(s.clone()).map_err(|e| err(e.to_string()))?,
        };
        let namespace = obj.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or_default().to_owned();
        Ok(Binding { name, namespace, role_ref, subjects })
    }
}
