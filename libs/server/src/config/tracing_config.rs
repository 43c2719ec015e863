//! `--tracing-config-file`: kube's TracingConfiguration (apiserver.config.k8s.io), read and
//! validated as kube-apiserver does before it starts: a file it cannot read, decode or accept
//! stops start-up with the reason.
//!
//! ```yaml
//! apiVersion: apiserver.config.k8s.io/v1
//! kind: TracingConfiguration
//! endpoint: localhost:4317        # the OTLP gRPC collector (kube's default)
//! samplingRatePerMillion: 1000    # root spans per million requests (kube's default: 0)
//! ```

use std::path::Path;

use serde::Deserialize;

/// The versions kube serves the TracingConfiguration in.
const API_VERSIONS: [&str; 3] = ["apiserver.config.k8s.io/v1", "apiserver.config.k8s.io/v1beta1", "apiserver.config.k8s.io/v1alpha1"];
/// kube's default collector.
const DEFAULT_ENDPOINT: &str = "localhost:4317";
const MAX_SAMPLING_RATE: i64 = 1_000_000;

/// Why a tracing configuration file was refused.
#[derive(Debug, thiserror::Error)]
pub enum TracingConfigError {
    /// The file could not be read.
    #[error("failed to read tracing config: unable to read tracing configuration from {path:?}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The read error.
        source: std::io::Error,
    },
    /// Not a TracingConfiguration of a known version, or not YAML/JSON.
    #[error("failed to read tracing config: unable to decode tracing configuration data: {0}")]
    Decode(String),
    /// A field kube's validation refuses.
    #[error("failed to validate tracing configuration: {0}")]
    Invalid(String),
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct TracingConfiguration {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    endpoint: Option<String>,
    sampling_rate_per_million: Option<i64>,
}

/// Reads and validates the file. The spans name this server `apiserver-<uuid>` (kube's
/// APIServerID) as their `service.instance.id`.
pub fn load(path: &Path) -> Result<kapi_otel::Settings, TracingConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| TracingConfigError::Read { path: path.display().to_string(), source })?;
    parse(&text, &format!("apiserver-{}", uuid::Uuid::new_v4()))
}

/// Installs the tracer of `settings` for the whole process: call it once, from inside the
/// Tokio runtime that serves (the exporter's connection lives there), before the server is
/// built.
pub fn install(settings: &kapi_otel::Settings) -> Result<(), kapi_otel::Error> {
    kapi_otel::install(settings)
}

/// Sends the spans still queued and stops the exporter (a few seconds at most; nothing
/// without a tracer). It blocks: call it after serving ended, off the async workers, before
/// the runtime is dropped.
pub fn shutdown() {
    kapi_otel::shutdown();
}

/// Decodes and validates a TracingConfiguration document (YAML or JSON).
pub fn parse(text: &str, instance_id: &str) -> Result<kapi_otel::Settings, TracingConfigError> {
    let config: TracingConfiguration = serde_saphyr::from_str(text).map_err(|e| TracingConfigError::Decode(e.to_string()))?;
    if !API_VERSIONS.contains(&config.api_version.as_str()) || config.kind != "TracingConfiguration" {
        return Err(TracingConfigError::Decode(format!(
            "no kind {:?} is registered for version {:?}: want kind \"TracingConfiguration\" in {}",
            config.kind,
            config.api_version,
            API_VERSIONS.join(", ")
        )));
    }
    let mut errors = Vec::new();
    let rate = config.sampling_rate_per_million.unwrap_or(0);
    if rate < 0 {
        errors.push(format!("samplingRatePerMillion: Invalid value: {rate}: sampling rate must be positive"));
    }
    if rate > MAX_SAMPLING_RATE {
        errors.push(format!("samplingRatePerMillion: Invalid value: {rate}: sampling rate per million must be less than or equal to one million"));
    }
    let endpoint = config.endpoint.unwrap_or_else(|| DEFAULT_ENDPOINT.to_owned());
    if let Err(e) = kapi_otel::grpc_uri(&endpoint) {
        errors.push(format!("endpoint: Invalid value: {endpoint:?}: {e}"));
    }
    if !errors.is_empty() {
        return Err(TracingConfigError::Invalid(errors.join(", ")));
    }
    Ok(kapi_otel::Settings { endpoint, sampling_rate_per_million: rate.clamp(0, MAX_SAMPLING_RATE) as u32, instance_id: instance_id.to_owned() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kube_defaults_apply() {
        let settings = parse("apiVersion: apiserver.config.k8s.io/v1\nkind: TracingConfiguration\n", "id").unwrap();
        assert_eq!(settings.endpoint, "localhost:4317");
        assert_eq!(settings.sampling_rate_per_million, 0);
        let settings = parse(
            r#"{"apiVersion":"apiserver.config.k8s.io/v1beta1","kind":"TracingConfiguration","endpoint":"127.0.0.1:9","samplingRatePerMillion":1000000}"#,
            "id",
        )
        .unwrap();
        assert_eq!((settings.endpoint.as_str(), settings.sampling_rate_per_million), ("127.0.0.1:9", 1_000_000));
    }

    #[test]
    fn bad_documents_are_refused_with_the_reason() {
        let err = |text: &str| parse(text, "id").unwrap_err().to_string();
        assert!(err("apiVersion: apiserver.config.k8s.io/v2\nkind: TracingConfiguration\n").contains("no kind"));
        assert!(err("apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\n").contains("no kind"));
        assert!(err("apiVersion: apiserver.config.k8s.io/v1\nkind: TracingConfiguration\nsamplingRatePerMillion: 1000001\n")
            .contains("less than or equal to one million"));
        assert!(err("apiVersion: apiserver.config.k8s.io/v1\nkind: TracingConfiguration\nsamplingRatePerMillion: -1\n").contains("must be positive"));
        assert!(err("apiVersion: apiserver.config.k8s.io/v1\nkind: TracingConfiguration\nendpoint: ftp://x:1\n").contains("endpoint: Invalid value"));
        assert!(err("apiVersion: apiserver.config.k8s.io/v1\nkind: TracingConfiguration\nendpiont: x:1\n").contains("decode"));
    }
}
