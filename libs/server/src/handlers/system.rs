//! Non-resource endpoints: version, health checks, metrics.

use std::time::Duration;

use http::StatusCode;
use serde_json::{json, Value};

use crate::query::Query;
use crate::response::{self, Body};
use crate::state::ApiServer;

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

/// One named health check's result.
struct Check {
    name: &'static str,
    ok: bool,
}

async fn run_checks(srv: &ApiServer, endpoint: &str) -> Vec<Check> {
    let storage_ok = tokio::time::timeout(Duration::from_secs(2), srv.rest.store().current_revision())
        .await
        .is_ok_and(|r| r.is_ok());
    let mut checks = vec![Check { name: "ping", ok: true }, Check { name: "log", ok: true }, Check { name: "etcd", ok: storage_ok }];
    if endpoint != "livez" {
        checks.push(Check { name: "poststarthook/kapi-bootstrap", ok: srv.lifecycle.is_ready() });
        checks.push(Check { name: "informer-sync", ok: srv.lifecycle.is_ready() });
    }
    if endpoint == "readyz" {
        checks.push(Check { name: "shutdown", ok: !srv.lifecycle.is_shutting_down() });
    }
    checks
}

/// `/healthz`, `/livez`, `/readyz` and their `/<check>` sub-paths, with `?verbose` and
/// `?exclude=` as kube-apiserver answers them.
pub async fn health(srv: &ApiServer, path: &str, query: &Query) -> hyper::Response<Body> {
    let trimmed = path.trim_start_matches('/');
    let (endpoint, single) = match trimmed.split_once('/') {
        Some((e, rest)) => (e, Some(rest)),
        None => (trimmed, None),
    };
    let checks = run_checks(srv, endpoint).await;
    if let Some(name) = single {
        return match checks.iter().find(|c| c.name == name) {
            Some(c) if c.ok => response::text(StatusCode::OK, "ok", "text/plain; charset=utf-8"),
            Some(c) => response::text(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("internal server error: {} check failed\n", c.name),
                "text/plain; charset=utf-8",
            ),
            None => response::text(StatusCode::NOT_FOUND, "404 page not found\n", "text/plain; charset=utf-8"),
        };
    }
    let excluded = query.all("exclude");
    let mut body = String::new();
    let mut failed = false;
    for c in &checks {
        if excluded.contains(&c.name) {
            body.push_str(&format!("[+]{} excluded: ok\n", c.name));
            continue;
        }
        if c.ok {
            body.push_str(&format!("[+]{} ok\n", c.name));
        } else {
            failed = true;
            body.push_str(&format!("[-]{} failed: reason withheld\n", c.name));
        }
    }
    if failed {
        body.push_str(&format!("{endpoint} check failed\n"));
        return response::text(StatusCode::INTERNAL_SERVER_ERROR, body, "text/plain; charset=utf-8");
    }
    if query.has("verbose") {
        body.push_str(&format!("{endpoint} check passed\n"));
        response::text(StatusCode::OK, body, "text/plain; charset=utf-8")
    } else {
        response::text(StatusCode::OK, "ok", "text/plain; charset=utf-8")
    }
}
