//! `/version` (health checks live in [`crate::health`]).

use http::{header, HeaderValue, Response, StatusCode};
use serde_json::{json, Value};

use crate::response::{full, indent_json, json_bytes, Body};

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

/// The `/version` answer. kube writes it with `WriteRawJSON`: always indented, whoever asks,
/// and with no other header than its Content-Type.
pub fn respond() -> Response<Body> {
    let mut resp = Response::new(full(indent_json(&json_bytes(&version()))));
    *resp.status_mut() = StatusCode::OK;
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp
}
