//! `--admission-control-config-file`: kube's AdmissionConfiguration
//! (`apiserver.config.k8s.io/v1`), which gives each plugin its configuration inline or by the
//! path of a file of its own (relative paths are relative to this file's directory).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

/// Why the configuration cannot be used; start-up stops with it.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// kube's `unable to read admission control configuration from "<file>" [<cause>]`.
    #[error("unable to read admission control configuration from {path:?} [{message}]")]
    Read {
        /// The file.
        path: String,
        /// What failed.
        message: String,
    },
    /// The file is not an AdmissionConfiguration.
    #[error("unable to read admission control configuration from {path:?} [{message}]")]
    Decode {
        /// The file.
        path: String,
        /// What failed.
        message: String,
    },
    /// A plugin's own configuration file cannot be read.
    #[error("unable to read configuration of admission plugin {plugin:?} from {path:?}: {message}")]
    Plugin {
        /// The plugin.
        plugin: String,
        /// Its file.
        path: String,
        /// What failed.
        message: String,
    },
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct File {
    api_version: Option<String>,
    kind: Option<String>,
    #[serde(default)]
    plugins: Vec<PluginEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PluginEntry {
    name: String,
    #[serde(default)]
    path: String,
    #[serde(default)]
    configuration: Option<Value>,
}

/// Where a plugin's configuration comes from.
#[derive(Debug, Clone, PartialEq)]
enum Source {
    Inline(Value),
    File(PathBuf),
}

/// The plugins' configurations.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AdmissionConfig {
    plugins: BTreeMap<String, Source>,
}

/// API versions kube reads the file in.
const VERSIONS: &[&str] = &["apiserver.config.k8s.io/v1", "apiserver.config.k8s.io/v1alpha1", "apiserver.k8s.io/v1alpha1"];

impl AdmissionConfig {
    /// Reads the file at `path`.
    pub fn load(path: &Path) -> Result<AdmissionConfig, ConfigError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Read { path: shown.clone(), message: e.to_string() })?;
        Self::parse(&text, path.parent().unwrap_or(Path::new(".")), &shown)
    }

    /// Parses a configuration's text; `base` resolves relative plugin paths.
    pub fn parse(text: &str, base: &Path, shown: &str) -> Result<AdmissionConfig, ConfigError> {
        let decode = |message: String| ConfigError::Decode { path: shown.to_owned(), message };
        let file: File = serde_saphyr::from_str(text).map_err(|e| decode(e.to_string()))?;
        let version = file.api_version.unwrap_or_default();
        if file.kind.as_deref() != Some("AdmissionConfiguration") || !VERSIONS.contains(&version.as_str()) {
            return Err(decode(format!("no kind {:?} is registered for version {version:?}", file.kind.unwrap_or_default())));
        }
        let mut plugins = BTreeMap::new();
        for entry in file.plugins {
            let source = match (entry.configuration, entry.path.is_empty()) {
                (Some(inline), _) => Source::Inline(inline),
                (None, false) => {
                    let path = PathBuf::from(&entry.path);
                    Source::File(if path.is_absolute() { path } else { base.join(path) })
                }
                (None, true) => continue,
            };
            plugins.insert(entry.name, source);
        }
        Ok(AdmissionConfig { plugins })
    }

    /// The configuration of `plugin`, if the file gives one (its own file is read now).
    pub fn config_for(&self, plugin: &str) -> Result<Option<Value>, ConfigError> {
        match self.plugins.get(plugin) {
            None => Ok(None),
            Some(Source::Inline(value)) => Ok(Some(value.clone())),
            Some(Source::File(path)) => {
                let fail = |message: String| ConfigError::Plugin { plugin: plugin.to_owned(), path: path.display().to_string(), message };
                let text = std::fs::read_to_string(path).map_err(|e| fail(e.to_string()))?;
                serde_saphyr::from_str::<Value>(&text).map(Some).map_err(|e| fail(e.to_string()))
            }
        }
    }
}
