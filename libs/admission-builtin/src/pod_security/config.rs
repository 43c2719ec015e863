//! The plugin's configuration (kube's `PodSecurityConfiguration`, group
//! `pod-security.admission.config.k8s.io`): the policy of namespaces without labels, and the
//! users, namespaces and runtime classes exempt from it. It comes from the `PodSecurity` entry
//! of `--admission-control-config-file`; without one every default is privileged at latest.

use std::collections::BTreeMap;

use kapi_apimachinery::status::Cause;
use kapi_apimachinery::validation::{is_dns1123_label, is_dns1123_subdomain};
use serde_json::Value;

use super::api::{Level, LevelVersion, Policy, Version};

/// The API versions kube decodes the configuration in.
const API_VERSIONS: &[&str] = &[
    "pod-security.admission.config.k8s.io/v1",
    "pod-security.admission.config.k8s.io/v1beta1",
    "pod-security.admission.config.k8s.io/v1alpha1",
];

/// The configuration, validated.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Config {
    /// The policy of a namespace without labels (and what labels leave unset).
    pub defaults: Policy,
    /// Users whose writes are not evaluated.
    pub usernames: Vec<String>,
    /// Namespaces whose pods are not evaluated.
    pub namespaces: Vec<String>,
    /// Runtime classes whose pods are not evaluated.
    pub runtime_classes: Vec<String>,
}

impl Config {
    /// Reads the plugin's configuration (None: kube's defaults). The error is what start-up
    /// stops with, in kube's words where kube has them (`PodSecurity invalid: ...`).
    pub fn from_value(value: Option<&Value>) -> Result<Config, String> {
        let Some(value) = value else { return Ok(Config::default()) };
        let api_version = value.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
        let kind = value.get("kind").and_then(Value::as_str).unwrap_or_default();
        if kind != "PodSecurityConfiguration" || !API_VERSIONS.contains(&api_version) {
            return Err(format!("PodSecurity configuration error: no kind {kind:?} is registered for version {api_version:?}"));
        }
        let defaults = value.get("defaults").cloned().unwrap_or(Value::Null);
        // kube's defaulting fills each empty field before validation.
        let field = |name: &str, default: &str| -> String {
            match defaults.get(name).and_then(Value::as_str) {
                Some(s) if !s.is_empty() => s.to_owned(),
                _ => default.to_owned(),
            }
        };
        let values: BTreeMap<&str, String> = [
            ("enforce", field("enforce", "privileged")),
            ("enforce-version", field("enforce-version", "latest")),
            ("warn", field("warn", "privileged")),
            ("warn-version", field("warn-version", "latest")),
            ("audit", field("audit", "privileged")),
            ("audit-version", field("audit-version", "latest")),
        ]
        .into_iter()
        .collect();
        let list = |name: &str| -> Vec<String> {
            value
                .pointer(&format!("/exemptions/{name}"))
                .and_then(Value::as_array)
                .map(|a| a.iter().map(|v| v.as_str().unwrap_or_default().to_owned()).collect())
                .unwrap_or_default()
        };
        let (usernames, namespaces, runtime_classes) = (list("usernames"), list("namespaces"), list("runtimeClasses"));

        let mut errors: Vec<Cause> = Vec::new();
        let mut mode = |level: &str, version: &str| -> LevelVersion {
            let (l, level_err) = Level::parse(&values[level]);
            let (v, version_err) = Version::parse(&values[version]);
            if let Some(detail) = level_err {
                errors.push(Cause::invalid(&format!("defaults.{level}"), &Value::String(values[level].clone()), detail));
            }
            if let Some(detail) = version_err {
                errors.push(Cause::invalid(&format!("defaults.{version}"), &Value::String(values[version].clone()), detail));
            }
            LevelVersion { level: l, version: v }
        };
        let enforce = mode("enforce", "enforce-version");
        let warn = mode("warn", "warn-version");
        let audit = mode("audit", "audit-version");
        validate_list(&mut errors, "namespaces", &namespaces, |n| is_dns1123_label(n).join(", "));
        validate_list(&mut errors, "runtimeClasses", &runtime_classes, |n| is_dns1123_subdomain(n).join(", "));
        validate_list(
            &mut errors,
            "usernames",
            &usernames,
            |n| if n.is_empty() { "username must not be empty".into() } else { String::new() },
        );
        if !errors.is_empty() {
            let messages: Vec<&str> = errors.iter().map(|c| c.message.as_str()).collect();
            let joined = if messages.len() == 1 { messages[0].to_owned() } else { format!("[{}]", messages.join(", ")) };
            return Err(format!("PodSecurity invalid: {joined}"));
        }
        Ok(Config { defaults: Policy { enforce, audit, warn }, usernames, namespaces, runtime_classes })
    }

    /// Whether writes by `user` are exempt (an empty name never is).
    pub fn exempt_user(&self, user: &str) -> bool {
        !user.is_empty() && self.usernames.iter().any(|u| u == user)
    }

    /// Whether pods in `namespace` are exempt.
    pub fn exempt_namespace(&self, namespace: &str) -> bool {
        !namespace.is_empty() && self.namespaces.iter().any(|n| n == namespace)
    }

    /// Whether pods of `runtime_class` are exempt.
    pub fn exempt_runtime_class(&self, runtime_class: Option<&str>) -> bool {
        runtime_class.is_some_and(|rc| !rc.is_empty() && self.runtime_classes.iter().any(|r| r == rc))
    }
}

/// kube's exemption list checks: each entry valid (`why` gives the reason it is not, "" when
/// it is) and given once.
fn validate_list(errors: &mut Vec<Cause>, name: &str, items: &[String], why: impl Fn(&str) -> String) {
    let mut seen: Vec<&str> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let path = format!("exemptions.{name}[{i}]");
        let reason = why(item);
        if !reason.is_empty() {
            errors.push(Cause::invalid(&path, &Value::String(item.clone()), &reason));
        } else if seen.contains(&item.as_str()) {
            errors.push(Cause::duplicate(&path, &Value::String(item.clone())));
        } else {
            seen.push(item);
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn defaults_are_privileged_at_latest_and_the_file_overrides_them() {
        assert_eq!(Config::from_value(None).unwrap().defaults, Policy::default());
        let c = Config::from_value(Some(&json!({
            "apiVersion": "pod-security.admission.config.k8s.io/v1", "kind": "PodSecurityConfiguration",
            "defaults": {"enforce": "baseline", "enforce-version": "v1.30", "warn": "restricted"},
            "exemptions": {"usernames": ["ci-bot"], "namespaces": ["kube-system"], "runtimeClasses": ["kata"]}
        })))
        .unwrap();
        assert_eq!(c.defaults.enforce.to_string(), "baseline:v1.30");
        assert_eq!(c.defaults.warn.to_string(), "restricted:latest");
        assert_eq!(c.defaults.audit.to_string(), "privileged:latest");
        assert!(c.exempt_user("ci-bot") && !c.exempt_user("") && !c.exempt_user("other"));
        assert!(c.exempt_namespace("kube-system") && !c.exempt_namespace(""));
        assert!(c.exempt_runtime_class(Some("kata")) && !c.exempt_runtime_class(None) && !c.exempt_runtime_class(Some("")));
    }

    #[test]
    fn invalid_configurations_are_refused_with_kube_field_errors() {
        let err = Config::from_value(Some(&json!({
            "apiVersion": "pod-security.admission.config.k8s.io/v1", "kind": "PodSecurityConfiguration",
            "defaults": {"enforce": "strict"}, "exemptions": {"usernames": ["a", "a", ""]}
        })))
        .unwrap_err();
        assert_eq!(
            err,
            r#"PodSecurity invalid: [defaults.enforce: Invalid value: "strict": must be one of privileged, baseline, restricted, exemptions.usernames[1]: Duplicate value: "a", exemptions.usernames[2]: Invalid value: "": username must not be empty]"#
        );
        let err = Config::from_value(Some(&json!({"apiVersion": "v1", "kind": "ConfigMap"}))).unwrap_err();
        assert!(err.contains(r#"no kind "ConfigMap" is registered for version "v1""#), "{err}");
    }
}
