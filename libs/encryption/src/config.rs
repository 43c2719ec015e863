//! The EncryptionConfiguration file (`apiserver.config.k8s.io/v1`, YAML or JSON), validated as
//! kube's `ValidateEncryptionConfiguration` with its field paths and messages, and resolved per
//! stored resource as kube does: an exact `resource.group` entry first, then `*.group`, then
//! `*.*`; within a level the first entry of the file wins.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use serde::Deserialize;

use crate::kms::{KmsConfig, KmsV2};
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
    /// Valid, but a provider cannot be built (kube's "error while building transformers").
    #[error("error while building transformers from file {path:?}: {message}")]
    Build {
        /// The file.
        path: String,
        /// What failed.
        message: String,
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
    kms: Option<KmsYaml>,
}

/// kube's `KMSConfiguration` as written (v1 defaults: apiVersion v1, timeout 3s).
#[derive(Debug, Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct KmsYaml {
    api_version: Option<String>,
    #[serde(default)]
    name: String,
    #[serde(rename = "cachesize")]
    cache_size: Option<i64>,
    #[serde(default)]
    endpoint: String,
    timeout: Option<String>,
}

impl KmsYaml {
    fn api_version(&self) -> &str {
        self.api_version.as_deref().filter(|v| !v.is_empty()).unwrap_or("v1")
    }
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

    /// The KMS v2 providers, each once, in name order.
    pub fn kms_providers(&self) -> Vec<Arc<KmsV2>> {
        let mut all: Vec<Arc<KmsV2>> = Vec::new();
        for t in self.entries.values() {
            for kms in t.kms_providers() {
                if !all.iter().any(|k| Arc::ptr_eq(k, kms)) {
                    all.push(kms.clone());
                }
            }
        }
        all.sort_by(|a, b| a.name().cmp(b.name()));
        all
    }

    /// Primes every KMS v2 provider (one Status, and Encrypt of a seed, each bounded by its
    /// timeout) and starts their Status polls. A plugin that does not answer is not fatal, as
    /// in kube: its writes fail until it does.
    pub async fn start_kms(&self) {
        for kms in self.kms_providers() {
            kms.start().await;
        }
    }

    /// kube's `kms-providers` health check: every KMS v2 provider's Status check, errors
    /// joined as kube's aggregate (`kms-provider-<i>: <error>`).
    pub async fn kms_health(&self) -> Result<(), String> {
        let mut errs = Vec::new();
        for (i, kms) in self.kms_providers().iter().enumerate() {
            if let Err(e) = kms.check().await {
                errs.push(format!("kms-provider-{i}: {e}"));
            }
        }
        match errs.len() {
            0 => Ok(()),
            1 => Err(errs.remove(0)),
            _ => Err(format!("[{}]", errs.join(", "))),
        }
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
        let providers: Vec<Provider> = conf
            .providers
            .iter()
            .map(provider)
            .collect::<Result<Vec<_>, String>>()
            .map_err(|message| ConfigError::Build { path: path.to_owned(), message })?
            .into_iter()
            .flatten()
            .collect();
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

fn provider(p: &ProviderConfig) -> Result<Option<Provider>, String> {
    if let Some(k) = &p.aescbc {
        return Ok(Some(Provider::AesCbc(keys(k))));
    }
    if let Some(k) = &p.aesgcm {
        return Ok(Some(Provider::AesGcm(keys(k))));
    }
    if let Some(k) = &p.secretbox {
        return Ok(Some(Provider::Secretbox(keys(k))));
    }
    if let Some(kms) = &p.kms {
        if kms.api_version() == "v1" {
            return Err("KMSv1 is deprecated and will only receive security updates going forward. Use KMSv2 instead.  Set --feature-gates=KMSv1=true to use the deprecated KMSv1 feature.".into());
        }
        let config =
            KmsConfig { name: kms.name.clone(), socket: kms_socket(&kms.endpoint).into(), timeout: kms_timeout(kms).unwrap_or(KMS_DEFAULT_TIMEOUT) };
        return Ok(Some(Provider::Kms(Arc::new(KmsV2::new(config)))));
    }
    Ok(p.identity.as_ref().map(|_| Provider::Identity))
}

/// kube's default `timeout` of a kms provider.
const KMS_DEFAULT_TIMEOUT: Duration = Duration::from_secs(3);

/// The timeout as written: None when absent (3s), Err(text) when not a positive duration.
fn kms_timeout(kms: &KmsYaml) -> Result<Duration, String> {
    let Some(text) = kms.timeout.as_deref() else { return Ok(KMS_DEFAULT_TIMEOUT) };
    match kapi_apimachinery::time::parse_go_duration(text) {
        Ok(Some(d)) if !d.is_zero() => Ok(d),
        Ok(Some(_)) => Err("0s".into()),
        _ => Err(text.to_owned()),
    }
}

/// Go's `url.Parse` scheme of an endpoint ("" when there is none).
fn url_scheme(endpoint: &str) -> &str {
    match endpoint.split_once(':') {
        Some((scheme, _))
            if scheme.starts_with(|c: char| c.is_ascii_alphabetic()) && scheme.chars().all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c)) =>
        {
            scheme
        }
        _ => "",
    }
}

/// kube's `parseEndpoint`: the socket path of `unix:///path` (or `unix:/path`).
fn kms_socket(endpoint: &str) -> String {
    let rest = endpoint.split_once(':').map_or("", |(_, r)| r);
    match rest.strip_prefix("//") {
        Some(after) => after.find('/').map_or(String::new(), |i| after[i..].to_owned()),
        None => rest.to_owned(),
    }
}

fn validate_kms(kms: &KmsYaml, path: &str, names: &mut Vec<String>) -> Vec<String> {
    let mut causes = Vec::new();
    let v2 = kms.api_version() != "v1";
    if kms.name.is_empty() {
        causes.push(format!("{path}.name: Required value: name is a mandatory field for a provider"));
    }
    if v2 && kms.name.contains(':') {
        causes.push(format!("{path}.name: Invalid value: {:?}: invalid KMS provider name {}, must not contain ':'", kms.name, kms.name));
    }
    if v2 && names.contains(&kms.name) {
        causes.push(format!("{path}.name: Invalid value: {:?}: duplicate KMS provider name {}, names must be unique", kms.name, kms.name));
    }
    names.push(kms.name.clone());
    if let Err(shown) = kms_timeout(kms) {
        causes.push(format!("{path}.timeout: Invalid value: {shown:?}: timeout should be a positive value"));
    }
    if kms.endpoint.is_empty() {
        causes.push(format!("{path}.endpoint: Invalid value: \"\": endpoint is a mandatory field for a kms"));
    } else if url_scheme(&kms.endpoint) != "unix" {
        causes.push(format!(
            "{path}.endpoint: Invalid value: {:?}: unsupported scheme {:?} for KMS provider, only unix is supported",
            kms.endpoint,
            url_scheme(&kms.endpoint)
        ));
    } else if kms_socket(&kms.endpoint).is_empty() {
        causes.push(format!("{path}.endpoint: Invalid value: {:?}: invalid endpoint for kms provider, error: no socket path", kms.endpoint));
    }
    match kms.cache_size {
        Some(size) if v2 => causes.push(format!("{path}.cachesize: Invalid value: {size}: cachesize is not supported in v2")),
        Some(0) => causes.push(format!("{path}.cachesize: Invalid value: 0: cachesize should be a positive value, or negative to disable")),
        _ => {}
    }
    if kms.api_version() != "v1" && kms.api_version() != "v2" {
        causes.push(format!(
            "{path}.apiVersion: Invalid value: {:?}: unsupported apiVersion apiVersion for KMS provider, only v1 and v2 are supported",
            kms.api_version()
        ));
    }
    causes
}

const AES_KEY_SIZES: &[usize] = &[16, 24, 32];
const SECRETBOX_KEY_SIZES: &[usize] = &[32];

fn validate(file: &File) -> Vec<String> {
    let mut causes = Vec::new();
    if file.resources.is_empty() {
        causes.push("resources: Required value: at least one resources is required".into());
        return causes;
    }
    let mut kms_names = Vec::new();
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
            let found = [
                provider.kms.is_some(),
                provider.aesgcm.is_some(),
                provider.aescbc.is_some(),
                provider.secretbox.is_some(),
                provider.identity.is_some(),
            ]
            .iter()
            .filter(|f| **f)
            .count();
            if found == 0 {
                causes.push(format!(
                    "{path}: Invalid value: provider does not contain any of the expected providers: KMS, AESGCM, AESCBC, Secretbox, Identity"
                ));
                continue;
            }
            if found > 1 {
                causes.push(format!(
                    "{path}: Invalid value: more than one provider specified in a single element, should split into different list elements"
                ));
                continue;
            }
            if let Some(kms) = &provider.kms {
                causes.extend(validate_kms(kms, &format!("{path}.kms"), &mut kms_names));
            }
            for (name, k, sizes) in [
                ("aesgcm", &provider.aesgcm, AES_KEY_SIZES),
                ("aescbc", &provider.aescbc, AES_KEY_SIZES),
                ("secretbox", &provider.secretbox, SECRETBOX_KEY_SIZES),
            ] {
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
        let first = |g: &str, r: &str| c.transformer(g, r).map(|t| String::from_utf8_lossy(&t.encrypt("/x", b"v").unwrap()[..20]).into_owned());
        assert_eq!(first("", "secrets").as_deref(), Some("k8s:enc:aescbc:v1:k1"));
        assert_eq!(first("apps", "deployments").as_deref(), Some("k8s:enc:aescbc:v1:k1"));
        assert!(first("", "configmaps").is_some_and(|p| p.starts_with("k8s:enc:secretbox:v1")));
        let none = parse(&config(&format!("- resources: [secrets]\n  providers:\n  - aesgcm: {{keys: [{{name: k, secret: {KEY32}}}]}}\n")), "e")
            .expect("valid");
        assert!(none.transformer("", "configmaps").is_none());
    }

    #[test]
    fn invalid_configurations_get_kubes_causes() {
        assert_eq!(
            causes("- resources: [secrets]\n  providers: []\n"),
            vec!["resources[0].providers: Required value: at least one resources[0].providers is required"]
        );
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

    #[test]
    fn kms_providers_are_validated_as_kubes() {
        let kms = |fields: &str| format!("- resources: [secrets]\n  providers:\n  - kms: {{{fields}}}\n");
        let ok = parse(&config(&kms("apiVersion: v2, name: p, endpoint: 'unix:///tmp/kms.sock'")), "e").expect("valid");
        let providers = ok.kms_providers();
        assert_eq!(providers.len(), 1);
        assert_eq!(providers[0].name(), "p");
        assert_eq!(providers[0].prefix(), b"k8s:enc:kms:v2:p:");
        assert_eq!(kms_socket("unix:///tmp/kms.sock"), "/tmp/kms.sock");
        assert_eq!(kms_socket("unix:/tmp/kms.sock"), "/tmp/kms.sock");
        assert_eq!(
            causes(&kms("apiVersion: v2, name: 'a:b', endpoint: 'tcp://h:1', timeout: 0s, cachesize: 10")),
            vec![
                "resources[0].providers[0].kms.name: Invalid value: \"a:b\": invalid KMS provider name a:b, must not contain ':'",
                "resources[0].providers[0].kms.timeout: Invalid value: \"0s\": timeout should be a positive value",
                "resources[0].providers[0].kms.endpoint: Invalid value: \"tcp://h:1\": unsupported scheme \"tcp\" for KMS provider, only unix is supported",
                "resources[0].providers[0].kms.cachesize: Invalid value: 10: cachesize is not supported in v2",
            ]
        );
        assert_eq!(
            causes(&kms("apiVersion: v3")),
            vec![
                "resources[0].providers[0].kms.name: Required value: name is a mandatory field for a provider",
                "resources[0].providers[0].kms.endpoint: Invalid value: \"\": endpoint is a mandatory field for a kms",
                "resources[0].providers[0].kms.apiVersion: Invalid value: \"v3\": unsupported apiVersion apiVersion for KMS provider, only v1 and v2 are supported",
            ]
        );
        let twice = format!(
            "{}{}",
            kms("apiVersion: v2, name: p, endpoint: 'unix:///a'"),
            kms("apiVersion: v2, name: p, endpoint: 'unix:///b'").replace("[secrets]", "[configmaps]")
        );
        assert_eq!(
            causes(&twice),
            vec!["resources[1].providers[0].kms.name: Invalid value: \"p\": duplicate KMS provider name p, names must be unique"]
        );
        // v1 (also the default apiVersion) is disabled in current kube.
        match parse(&config(&kms("name: p, endpoint: 'unix:///a'")), "enc.yaml") {
            Err(e @ ConfigError::Build { .. }) => {
                assert!(e.to_string().contains("KMSv1 is deprecated and will only receive security updates going forward. Use KMSv2 instead."), "{e}")
            }
            other => panic!("expected v1 refused, got {other:?}"),
        }
    }
}
