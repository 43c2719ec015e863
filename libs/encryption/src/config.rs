//! The EncryptionConfiguration file (`apiserver.config.k8s.io/v1`, YAML or JSON), validated as
//! kube's `ValidateEncryptionConfiguration` with its field paths and messages, and resolved per
//! stored resource as kube does: an exact `resource.group` entry first, then `*.group`, then
//! `*.*`; within a level the first entry of the file wins.

use std::collections::HashMap;
use std::path::Path;

use base64::Engine;
use serde::Deserialize;

use crate::providers::{NamedKey, Provider, Transformer};

/// Why the configuration cannot be used; start-up stops with it.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file cannot be read.
    #[error("error reading encryption provider configuration file {path:?}: {message}")]
    Read {
        /// The file.
        path: String,
        /// What failed.
        message: String,
    },
    /// The file does not decode as an EncryptionConfiguration.
    #[error("error decoding encryption provider configuration file {path:?}: {message}")]
    Decode {
        /// The file.
        path: String,
        /// What failed.
        message: String,
    },
    /// The configuration is invalid: every cause, kube's `field: message` form.
    #[error("error while parsing file {path:?}: {}", .causes.join(", "))]
    Invalid {
        /// The file.
        path: String,
        /// The causes.
        causes: Vec<String>,
    },
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct File {
    api_version: Option<String>,
    kind: Option<String>,
    #[serde(default)]
    resources: Vec<ResourceConfig>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ResourceConfig {
    #[serde(default)]
    resources: Vec<String>,
    #[serde(default)]
    providers: Vec<ProviderConfig>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct ProviderConfig {
    aesgcm: Option<Keys>,
    aescbc: Option<Keys>,
    secretbox: Option<Keys>,
    identity: Option<serde_json::Value>,
    kms: Option<serde_json::Value>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct Keys {
    #[serde(default)]
    keys: Vec<Key>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct Key {
    #[serde(default)]
    name: String,
    #[serde(default)]
    secret: String,
}

/// The resolved configuration: per resource pattern, its providers.
#[derive(Debug, Clone, Default)]
pub struct EncryptionConfig {
    /// (group, resource) -> providers, with `*` patterns as written.
    entries: HashMap<(String, String), Transformer>,
}

impl EncryptionConfig {
    /// The providers of a stored resource (`group` "" for the core group); None: stored as is.
    pub fn transformer(&self, group: &str, resource: &str) -> Option<&Transformer> {
        let key = |g: &str, r: &str| (g.to_owned(), r.to_owned());
        self.entries.get(&key(group, resource)).or_else(|| self.entries.get(&key(group, "*"))).or_else(|| self.entries.get(&key("*", "*")))
    }
}

/// kube's `schema.ParseGroupResource`: `secrets` -> ("", secrets), `deployments.apps` ->
/// ("apps", deployments), `*.` -> ("", *).
fn group_resource(s: &str) -> (String, String) {
    match s.split_once('.') {
        Some((resource, group)) => (group.to_owned(), resource.to_owned()),
        None => (String::new(), s.to_owned()),
    }
}

/// Reads and validates the file at `path`.
pub fn load(path: &Path) -> Result<EncryptionConfig, ConfigError> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Read { path: shown.clone(), message: e.to_string() })?;
    parse(&text, &shown)
}

/// Parses and validates a configuration's text (`path` names it in errors).
pub fn parse(text: &str, path: &str) -> Result<EncryptionConfig, ConfigError> {
    let decode = |message: String| ConfigError::Decode { path: path.to_owned(), message };
    let file: File = serde_saphyr::from_str(text).map_err(|e| decode(e.to_string()))?;
    if file.kind.as_deref() != Some("EncryptionConfiguration") || file.api_version.as_deref() != Some("apiserver.config.k8s.io/v1") {
        return Err(decode(format!(
            "no kind \"{}\" is registered for version \"{}\" (expected EncryptionConfiguration in apiserver.config.k8s.io/v1)",
            file.kind.unwrap_or_default(),
            file.api_version.unwrap_or_default()
        )));
    }
    let causes = validate(&file);
    if !causes.is_empty() {
        return Err(ConfigError::Invalid { path: path.to_owned(), causes });
    }
    let mut entries = HashMap::new();
    for conf in &file.resources {
        let providers: Vec<Provider> = conf.providers.iter().filter_map(provider).collect();
        for resource in &conf.resources {
            entries.entry(group_resource(resource)).or_insert_with(|| Transformer::new(providers.clone()));
        }
    }
    Ok(EncryptionConfig { entries })
}

fn keys(keys: &Keys) -> Vec<NamedKey> {
    keys.keys
        .iter()
        .map(|k| NamedKey { name: k.name.clone(), secret: base64::engine::general_purpose::STANDARD.decode(&k.secret).unwrap_or_default() })
        .collect()
}

fn provider(p: &ProviderConfig) -> Option<Provider> {
    if let Some(k) = &p.aescbc {
        return Some(Provider::AesCbc(keys(k)));
    }
    if let Some(k) = &p.aesgcm {
        return Some(Provider::AesGcm(keys(k)));
    }
    if let Some(k) = &p.secretbox {
        return Some(Provider::Secretbox(keys(k)));
    }
    p.identity.as_ref().map(|_| Provider::Identity)
}

const AES_KEY_SIZES: &[usize] = &[16, 24, 32];
const SECRETBOX_KEY_SIZES: &[usize] = &[32];

fn validate(file: &File) -> Vec<String> {
    let mut causes = Vec::new();
    if file.resources.is_empty() {
        causes.push("resources: Required value: at least one resources is required".into());
        return causes;
    }
    for (i, conf) in file.resources.iter().enumerate() {
        let r = format!("resources[{i}].resources");
        let p = format!("resources[{i}].providers");
        if conf.resources.is_empty() {
            causes.push(format!("{r}: Required value: at least one {r} is required"));
        }
        causes.extend(overlap(&conf.resources, &r));
        causes.extend(resource_names(&conf.resources, &r));
        if conf.providers.is_empty() {
            causes.push(format!("{p}: Required value: at least one {p} is required"));
        }
        for (j, provider) in conf.providers.iter().enumerate() {
            let path = format!("{p}[{j}]");
            let found = [provider.kms.is_some(), provider.aesgcm.is_some(), provider.aescbc.is_some(), provider.secretbox.is_some(), provider.identity.is_some()]
                .iter()
                .filter(|f| **f)
                .count();
            if found == 0 {
                causes.push(format!("{path}: Invalid value: provider does not contain any of the expected providers: KMS, AESGCM, AESCBC, Secretbox, Identity"));
                continue;
            }
            if found > 1 {
                causes.push(format!("{path}: Invalid value: more than one provider specified in a single element, should split into different list elements"));
                continue;
            }
            if provider.kms.is_some() {
                causes.push(format!("{path}.kms: Unsupported value: the kms provider is not supported by this server yet"));
            }
            for (name, k, sizes) in [("aesgcm", &provider.aesgcm, AES_KEY_SIZES), ("aescbc", &provider.aescbc, AES_KEY_SIZES), ("secretbox", &provider.secretbox, SECRETBOX_KEY_SIZES)] {
                if let Some(k) = k {
                    causes.extend(validate_keys(k, &format!("{path}.{name}.keys"), sizes));
                }
            }
        }
    }
    causes
}

fn validate_keys(keys: &Keys, path: &str, sizes: &[usize]) -> Vec<String> {
    if keys.keys.is_empty() {
        return vec![format!("{path}: Required value: at least one keys is required")];
    }
    let mut causes = Vec::new();
    for (i, key) in keys.keys.iter().enumerate() {
        let at = format!("{path}[{i}]");
        if key.name.is_empty() {
            causes.push(format!("{at}.name: Required value: name is a mandatory field for a key"));
        }
        if key.secret.is_empty() {
            causes.push(format!("{at}.secret: Required value: secret is a mandatory field for a key"));
            continue;
        }
        match base64::engine::general_purpose::STANDARD.decode(&key.secret) {
            Err(_) => causes.push(format!("{at}.secret: Invalid value: \"REDACTED\": secrets must be base64 encoded")),
            Ok(secret) if !sizes.contains(&secret.len()) => causes.push(format!(
                "{at}.secret: Invalid value: \"REDACTED\": secret is not of the expected length, got {}, expected one of [{}]",
                secret.len(),
                sizes.iter().map(usize::to_string).collect::<Vec<_>>().join(" ")
            )),
            Ok(_) => {}
        }
    }
    causes
}

fn go_list(items: &[String]) -> String {
    format!("[]string{{{}}}", items.iter().map(|s| format!("{s:?}")).collect::<Vec<_>>().join(", "))
}

fn overlap(resources: &[String], path: &str) -> Vec<String> {
    if resources.len() < 2 {
        return Vec::new();
    }
    let parsed: Vec<(String, String)> = resources.iter().map(|r| group_resource(r)).collect();
    let (mut duplicate, mut overlapping) = (false, false);
    for (i, a) in parsed.iter().enumerate() {
        for (j, b) in parsed.iter().enumerate() {
            if i == j {
                continue;
            }
            if a == b {
                duplicate = true;
                continue;
            }
            // `*.*` masks everything; `*.<group>` masks that group's entries.
            let everything = a.0 == "*" && a.1 == "*";
            if everything || (a.0 == b.0 && (a.1 == "*" || b.1 == "*")) {
                overlapping = true;
            }
        }
    }
    let mut causes = Vec::new();
    if duplicate {
        causes.push(format!("{path}: Invalid value: {}: the same resource cannot be specified multiple times", go_list(resources)));
    }
    if overlapping {
        causes.push(format!(
            "{path}: Invalid value: {}: using overlapping resources such as 'secrets' and '*.' in the same resource list is not allowed as they will be masked",
            go_list(resources)
        ));
    }
    causes
}

fn resource_names(resources: &[String], path: &str) -> Vec<String> {
    let mut causes = Vec::new();
    for (j, res) in resources.iter().enumerate() {
        let at = format!("{path}[{j}]: Invalid value: {res:?}");
        let (group, resource) = group_resource(res);
        let problem = if res.chars().any(char::is_uppercase) {
            "resource name should not contain capital letters"
        } else if res == "*" {
            "use '*.' to encrypt all the resources from core API group or *.* to encrypt all resources"
        } else if matches!(res.as_str(), "apiserveripinfo" | "serviceipallocations" | "servicenodeportallocations") {
            "resources which do not have REST API/s cannot be encrypted"
        } else if group == "events.k8s.io" {
            "'*.events.k8s.io' objects are stored using the 'events' API group in etcd. Use 'events' instead in the config file"
        } else if group == "extensions" {
            "'extensions' group has been removed and cannot be used for encryption"
        } else if group == "*" && resource != "*" {
            "encrypting the same resource across groups is not supported"
        } else {
            continue;
        };
        causes.push(format!("{at}: {problem}"));
    }
    causes
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY32: &str = "c2VjcmV0IGlzIHNlY3VyZSwgaXMgaXQ/IDMyIGJ5dGU="; // 32 bytes

    fn config(body: &str) -> String {
        format!("apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n{body}")
    }

    fn causes(body: &str) -> Vec<String> {
        match parse(&config(body), "enc.yaml") {
            Err(ConfigError::Invalid { causes, .. }) => causes,
            other => panic!("expected invalid, got {other:?}"),
        }
    }

    #[test]
    fn resources_resolve_exact_then_group_then_everything() {
        let text = config(&format!(
            "- resources: [secrets, '*.apps']\n  providers:\n  - aescbc: {{keys: [{{name: k1, secret: {KEY32}}}]}}\n  - identity: {{}}\n- resources: ['*.*']\n  providers:\n  - secretbox: {{keys: [{{name: k2, secret: {KEY32}}}]}}\n"
        ));
        let c = parse(&text, "enc.yaml").expect("valid");
        let first = |g: &str, r: &str| c.transformer(g, r).map(|t| String::from_utf8_lossy(&t.encrypt("/x", b"v")[..20]).into_owned());
        assert_eq!(first("", "secrets").as_deref(), Some("k8s:enc:aescbc:v1:k1"));
        assert_eq!(first("apps", "deployments").as_deref(), Some("k8s:enc:aescbc:v1:k1"));
        assert!(first("", "configmaps").is_some_and(|p| p.starts_with("k8s:enc:secretbox:v1")));
        let none = parse(&config(&format!("- resources: [secrets]\n  providers:\n  - aesgcm: {{keys: [{{name: k, secret: {KEY32}}}]}}\n")), "e").expect("valid");
        assert!(none.transformer("", "configmaps").is_none());
    }

    #[test]
    fn invalid_configurations_get_kubes_causes() {
        assert_eq!(causes("- resources: [secrets]\n  providers: []\n"), vec!["resources[0].providers: Required value: at least one resources[0].providers is required"]);
        assert_eq!(
            causes("- resources: [secrets]\n  providers:\n  - aescbc: {keys: [{name: k, secret: c2hvcnQ=}]}\n"),
            vec!["resources[0].providers[0].aescbc.keys[0].secret: Invalid value: \"REDACTED\": secret is not of the expected length, got 5, expected one of [16 24 32]"]
        );
        assert_eq!(
            causes("- resources: [secrets]\n  providers:\n  - secretbox: {keys: [{secret: '%%%'}]}\n"),
            vec![
                "resources[0].providers[0].secretbox.keys[0].name: Required value: name is a mandatory field for a key",
                "resources[0].providers[0].secretbox.keys[0].secret: Invalid value: \"REDACTED\": secrets must be base64 encoded"
            ]
        );
        assert_eq!(
            causes("- resources: [secrets, '*.']\n  providers:\n  - identity: {}\n"),
            vec!["resources[0].resources: Invalid value: []string{\"secrets\", \"*.\"}: using overlapping resources such as 'secrets' and '*.' in the same resource list is not allowed as they will be masked"]
        );
        assert_eq!(causes("- resources: ['*', Secrets]\n  providers:\n  - identity: {}\n").len(), 3, "star, capital, overlap");
        assert_eq!(
            causes("- resources: [secrets]\n  providers:\n  - {identity: {}, aescbc: {keys: []}}\n"),
            vec!["resources[0].providers[0]: Invalid value: more than one provider specified in a single element, should split into different list elements"]
        );
        assert!(matches!(parse("kind: Nope\n", "e"), Err(ConfigError::Decode { .. })));
        assert!(matches!(parse(&config("- resources: [secrets]\n  providerz: []\n"), "e"), Err(ConfigError::Decode { .. })));
    }
}
