//! `--authorization-config`: kube's AuthorizationConfiguration (apiserver.config.k8s.io v1,
//! v1beta1, v1alpha1), an ordered chain of authorizers with each webhook's timeout, TTLs,
//! failure policy, match conditions and kubeconfig, checked as kube checks it (field paths and
//! messages), so that a wrong file stops start-up naming what is wrong.

use std::path::Path;
use std::time::Duration;

use kapi_apimachinery::time::parse_go_duration;
use serde_json::Value;

use super::authorizer::{FailurePolicy, WebhookSettings};

/// The API versions kube reads the file in.
const VERSIONS: &[&str] = &["apiserver.config.k8s.io/v1", "apiserver.config.k8s.io/v1beta1", "apiserver.config.k8s.io/v1alpha1"];
const TYPES: &[&str] = &["AlwaysAllow", "AlwaysDeny", "ABAC", "Webhook", "RBAC", "Node"];

/// One authorizer of the chain, in order.
#[derive(Debug, Clone)]
pub enum ConfiguredAuthorizer {
    /// A SubjectAccessReview webhook.
    Webhook(Box<WebhookSettings>),
    /// The Node authorizer.
    Node,
    /// RBAC.
    Rbac,
    /// AlwaysAllow.
    AlwaysAllow,
    /// AlwaysDeny.
    AlwaysDeny,
}

/// Reads and checks the file.
pub fn load(path: &Path) -> Result<Vec<ConfiguredAuthorizer>, String> {
    let shown = path.display();
    let text = std::fs::read_to_string(path).map_err(|e| format!("reading {shown}: {e}"))?;
    let file: Value = serde_saphyr::from_str(&text).map_err(|e| format!("{shown}: {e}"))?;
    parse(&file).map_err(|errors| format!("{shown}: {errors}"))
}

fn str_at<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

/// Checks and reads a parsed file; errors are kube's field errors joined as its aggregate.
pub fn parse(file: &Value) -> Result<Vec<ConfiguredAuthorizer>, String> {
    let (version, kind) = (str_at(file, "apiVersion"), str_at(file, "kind"));
    if kind != "AuthorizationConfiguration" || !VERSIONS.contains(&version) {
        return Err(format!("no kind {kind:?} is registered for version {version:?}"));
    }
    let mut errors = Vec::new();
    let mut out = Vec::new();
    let authorizers = file.get("authorizers").and_then(Value::as_array).cloned().unwrap_or_default();
    if authorizers.is_empty() {
        errors.push("authorizers: Required value: at least one authorization mode must be defined".to_owned());
    }
    let mut names = Vec::new();
    let mut seen_types = Vec::new();
    for (i, a) in authorizers.iter().enumerate() {
        let path = format!("authorizers[{i}]");
        let ty = str_at(a, "type");
        let name = str_at(a, "name");
        if ty.is_empty() {
            errors.push(format!("{path}.type: Required value"));
            continue;
        }
        if !TYPES.contains(&ty) {
            let list: Vec<String> = TYPES.iter().map(|t| format!("{t:?}")).collect();
            errors.push(format!("{path}.type: Unsupported value: {ty:?}: supported values: {}", list.join(", ")));
            continue;
        }
        if ty != "Webhook" && seen_types.contains(&ty) {
            errors.push(format!("{path}.type: Duplicate value: {ty:?}"));
        }
        seen_types.push(ty);
        if name.is_empty() {
            errors.push(format!("{path}.name: Required value"));
        } else {
            for problem in kapi_apimachinery::validation::is_dns1123_subdomain(name) {
                errors.push(format!("{path}.name: Invalid value: {name:?}: {problem}"));
            }
            if names.contains(&name) {
                errors.push(format!("{path}.name: Duplicate value: {name:?}"));
            }
            names.push(name);
        }
        let webhook = a.get("webhook").filter(|w| !w.is_null());
        match (ty, webhook) {
            ("Webhook", None) => errors.push(format!("{path}.webhook: Required value: required when type=Webhook")),
            ("Webhook", Some(w)) => match webhook_settings(name, w, &format!("{path}.webhook")) {
                Ok(settings) => out.push(ConfiguredAuthorizer::Webhook(Box::new(settings))),
                Err(mut e) => errors.append(&mut e),
            },
            (_, Some(_)) => {
                errors.push(format!("{path}.webhook: Invalid value: \"non-null\": non-null webhook config must not be specified for type {ty:?}"))
            }
            ("Node", None) => out.push(ConfiguredAuthorizer::Node),
            ("RBAC", None) => out.push(ConfiguredAuthorizer::Rbac),
            ("AlwaysAllow", None) => out.push(ConfiguredAuthorizer::AlwaysAllow),
            ("AlwaysDeny", None) => out.push(ConfiguredAuthorizer::AlwaysDeny),
            (_, None) => errors.push(format!("{path}.type: Invalid value: {ty:?}: the ABAC authorizer is not supported by kapi")),
        }
    }
    match errors.len() {
        0 => Ok(out),
        1 => Err(errors.remove(0)),
        _ => Err(format!("[{}]", errors.join(", "))),
    }
}

fn duration(w: &Value, key: &str, path: &str, default: Option<Duration>, errors: &mut Vec<String>) -> Option<Duration> {
    match w.get(key).filter(|v| !v.is_null()) {
        None => {
            if default.is_none() {
                errors.push(format!("{path}.{key}: Required value"));
            }
            default
        }
        Some(v) => {
            let text = v.as_str().unwrap_or_default();
            match parse_go_duration(text) {
                Ok(Some(d)) => Some(d),
                _ => {
                    errors.push(format!("{path}.{key}: Invalid value: {v}: not a duration"));
                    None
                }
            }
        }
    }
}

fn webhook_settings(name: &str, w: &Value, path: &str) -> Result<WebhookSettings, Vec<String>> {
    let mut errors = Vec::new();
    let timeout = duration(w, "timeout", path, None, &mut errors);
    if let Some(t) = timeout {
        if t.is_zero() || t > Duration::from_secs(30) {
            errors.push(format!("{path}.timeout: Invalid value: {:?}: must be > 0s and <= 30s", format!("{}s", t.as_secs_f64())));
        }
    }
    let authorized_ttl = duration(w, "authorizedTTL", path, Some(Duration::from_secs(300)), &mut errors);
    let unauthorized_ttl = duration(w, "unauthorizedTTL", path, Some(Duration::from_secs(30)), &mut errors);
    let version = str_at(w, "subjectAccessReviewVersion");
    match version {
        "" => errors.push(format!("{path}.subjectAccessReviewVersion: Required value")),
        "v1" | "v1beta1" => {}
        other => errors.push(format!("{path}.subjectAccessReviewVersion: Unsupported value: {other:?}: supported values: \"v1\", \"v1beta1\"")),
    }
    let conditions: Vec<String> = w
        .get("matchConditions")
        .and_then(Value::as_array)
        .map(|a| a.iter().map(|c| str_at(c, "expression").to_owned()).collect())
        .unwrap_or_default();
    if !conditions.is_empty() {
        match str_at(w, "matchConditionSubjectAccessReviewVersion") {
            "" => errors.push(format!("{path}.matchConditionSubjectAccessReviewVersion: Required value")),
            "v1" => {}
            other => errors.push(format!("{path}.matchConditionSubjectAccessReviewVersion: Unsupported value: {other:?}: supported values: \"v1\"")),
        }
    }
    let compiler = kapi_apiextensions::cel::ExpressionCompiler::subject_access_review();
    let decls = kapi_apiextensions::cel::Declarations { params: false, authorizer: false };
    for (i, c) in conditions.iter().enumerate() {
        if c.is_empty() {
            errors.push(format!("{path}.matchConditions[{i}].expression: Required value"));
        } else if let Err(e) = compiler.compile(c, kapi_apiextensions::cel::ReturnType::Bool, decls) {
            errors.push(format!("{path}.matchConditions[{i}].expression: Invalid value: {c:?}: {}", e.detail));
        }
    }
    let failure_policy = match str_at(w, "failurePolicy") {
        "NoOpinion" => Some(FailurePolicy::NoOpinion),
        "Deny" => Some(FailurePolicy::Deny),
        "" => {
            errors.push(format!("{path}.failurePolicy: Required value"));
            None
        }
        other => {
            errors.push(format!("{path}.failurePolicy: Unsupported value: {other:?}: supported values: \"Deny\", \"NoOpinion\""));
            None
        }
    };
    let info = w.get("connectionInfo").unwrap_or(&Value::Null);
    let config = match str_at(info, "type") {
        "KubeConfigFile" => match str_at(info, "kubeConfigFile") {
            "" => {
                errors.push(format!("{path}.connectionInfo.kubeConfigFile: Required value"));
                None
            }
            file if !Path::new(file).is_absolute() => {
                errors.push(format!("{path}.connectionInfo.kubeConfigFile: Invalid value: {file:?}: must be an absolute path"));
                None
            }
            file => match kapi_webhook::ClientConfig::from_kubeconfig(Path::new(file)) {
                Ok(config) => Some(config),
                Err(e) => {
                    errors.push(format!("{path}.connectionInfo.kubeConfigFile: Invalid value: {file:?}: {e}"));
                    None
                }
            },
        },
        "InClusterConfig" => {
            errors.push(format!("{path}.connectionInfo.type: Invalid value: \"InClusterConfig\": not supported by kapi (give a kubeConfigFile)"));
            None
        }
        "" => {
            errors.push(format!("{path}.connectionInfo.type: Required value"));
            None
        }
        other => {
            errors
                .push(format!("{path}.connectionInfo.type: Unsupported value: {other:?}: supported values: \"InClusterConfig\", \"KubeConfigFile\""));
            None
        }
    };
    match (errors.is_empty(), timeout, authorized_ttl, unauthorized_ttl, failure_policy, config) {
        (true, Some(timeout), Some(authorized_ttl), Some(unauthorized_ttl), Some(failure_policy), Some(config)) => Ok(WebhookSettings {
            name: name.to_owned(),
            config,
            version: version.to_owned(),
            timeout,
            authorized_ttl,
            unauthorized_ttl,
            failure_policy,
            match_conditions: conditions,
        }),
        _ => Err(errors),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn kube_field_errors() {
        let file = json!({"apiVersion": "apiserver.config.k8s.io/v1", "kind": "AuthorizationConfiguration", "authorizers": [
            {"type": "Webhook", "name": "w", "webhook": {"timeout": "45s", "subjectAccessReviewVersion": "v2", "failurePolicy": "Maybe",
                "connectionInfo": {"type": "KubeConfigFile", "kubeConfigFile": "relative.yaml"}}},
            {"type": "RBAC", "name": "rbac"}, {"type": "RBAC", "name": "rbac"}, {"type": "Magic", "name": "m"}]});
        let err = parse(&file).unwrap_err();
        for expected in [
            "authorizers[0].webhook.timeout: Invalid value: \"45s\": must be > 0s and <= 30s",
            "authorizers[0].webhook.subjectAccessReviewVersion: Unsupported value: \"v2\"",
            "authorizers[0].webhook.failurePolicy: Unsupported value: \"Maybe\"",
            "authorizers[0].webhook.connectionInfo.kubeConfigFile: Invalid value: \"relative.yaml\": must be an absolute path",
            "authorizers[2].type: Duplicate value: \"RBAC\"",
            "authorizers[2].name: Duplicate value: \"rbac\"",
            "authorizers[3].type: Unsupported value: \"Magic\"",
        ] {
            assert!(err.contains(expected), "{expected} missing from {err}");
        }
        let wrong_kind = json!({"apiVersion": "v1", "kind": "Config"});
        assert_eq!(parse(&wrong_kind).unwrap_err(), "no kind \"Config\" is registered for version \"v1\"");
        let ok = json!({"apiVersion": "apiserver.config.k8s.io/v1", "kind": "AuthorizationConfiguration", "authorizers": [{"type": "Node", "name": "node"}, {"type": "RBAC", "name": "rbac"}]});
        assert!(matches!(parse(&ok).unwrap().as_slice(), [ConfiguredAuthorizer::Node, ConfiguredAuthorizer::Rbac]));
    }
}

/// The legacy `--authorization-webhook-*` flags.
#[derive(Debug, Clone)]
pub struct LegacyWebhookFlags<'a> {
    /// `--authorization-webhook-config-file`.
    pub config_file: Option<&'a Path>,
    /// `--authorization-webhook-version` (kube's default v1beta1).
    pub version: &'a str,
    /// `--authorization-webhook-cache-authorized-ttl` (5m).
    pub authorized_ttl: Duration,
    /// `--authorization-webhook-cache-unauthorized-ttl` (30s).
    pub unauthorized_ttl: Duration,
}

/// The authorizer chain from the flags: `--authorization-config`, or `--authorization-mode`
/// (RBAC when neither is given) with the legacy webhook flags; the modes in order, and the
/// webhooks their `Webhook(n)` entries name.
pub fn chain_from_flags(
    modes: Option<Vec<crate::AuthorizationMode>>,
    config_file: Option<&Path>,
    legacy: &LegacyWebhookFlags<'_>,
) -> Result<(Vec<crate::AuthorizationMode>, Vec<WebhookSettings>), String> {
    use crate::AuthorizationMode as Mode;
    if let Some(file) = config_file {
        if modes.is_some() || legacy.config_file.is_some() {
            return Err(
                "--authorization-config can not be specified when --authorization-mode or --authorization-webhook-* flags are specified".into()
            );
        }
        let mut chain = Vec::new();
        let mut webhooks = Vec::new();
        for entry in load(file).map_err(|e| format!("--authorization-config: {e}"))? {
            chain.push(match entry {
                ConfiguredAuthorizer::Webhook(settings) => {
                    webhooks.push(*settings);
                    Mode::Webhook(webhooks.len() - 1)
                }
                ConfiguredAuthorizer::Node => Mode::Node,
                ConfiguredAuthorizer::Rbac => Mode::Rbac,
                ConfiguredAuthorizer::AlwaysAllow => Mode::AlwaysAllow,
                ConfiguredAuthorizer::AlwaysDeny => Mode::AlwaysDeny,
            });
        }
        return Ok((chain, webhooks));
    }
    let modes = modes.unwrap_or_else(|| vec![Mode::Rbac]);
    let mut webhooks = Vec::new();
    if modes.iter().any(|m| matches!(m, Mode::Webhook(_))) {
        let file =
            legacy.config_file.ok_or("authorization-mode Webhook's authorization config file not passed (--authorization-webhook-config-file)")?;
        if !matches!(legacy.version, "v1" | "v1beta1") {
            return Err(format!(
                "--authorization-webhook-version: unsupported version {:?}, supported versions are \"v1\", \"v1beta1\"",
                legacy.version
            ));
        }
        let config = kapi_webhook::ClientConfig::from_kubeconfig(file).map_err(|e| format!("--authorization-webhook-config-file: {e}"))?;
        webhooks.push(WebhookSettings {
            name: "webhook".into(),
            config,
            version: legacy.version.to_owned(),
            timeout: Duration::from_secs(30),
            authorized_ttl: legacy.authorized_ttl,
            unauthorized_ttl: legacy.unauthorized_ttl,
            // The legacy webhook has no opinion when it cannot be asked, as kube's.
            failure_policy: FailurePolicy::NoOpinion,
            match_conditions: Vec::new(),
        });
    }
    Ok((modes, webhooks))
}
