//! `/version` (health checks live in [`crate::health`]).

use serde_json::{json, Value};

/// The Kubernetes version kapi serves (k8s-openapi `v1_36` types, reference discovery).
pub const KUBE_MINOR: &str = "36";

/// `GET /version`.
pub fn version() -> Value {
    json!({
        "major": "1",
        "minor": KUBE_MINOR,
        "emulationMajor": "1",
        "emulationMinor": KUBE_MINOR,
        "minCompatibilityMajor": "1",
        "minCompatibilityMinor": "35",
        "gitVersion": format!("v1.{KUBE_MINOR}.0-kapi.{}", env!("CARGO_PKG_VERSION")),
        "gitCommit": option_env!("KAPI_GIT_COMMIT").unwrap_or("unknown"),
        "gitTreeState": "clean",
        "buildDate": "1970-01-01T00:00:00Z",
        "goVersion": "n/a (rust)",
        "compiler": "rustc",
        "platform": format!("{}/{}", std::env::consts::OS, match std::env::consts::ARCH { "x86_64" => "amd64", "aarch64" => "arm64", a => a }),
    })
}
