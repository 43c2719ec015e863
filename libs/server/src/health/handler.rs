//! The HTTP answers of the health endpoints, byte for byte kube's `healthz.handleRootHealth`
//! and `adaptCheckToHandler`.

use std::collections::BTreeSet;

use http::StatusCode;

use super::{Endpoint, Registry};
use crate::query::Query;
use crate::response::{self, Body};

const TEXT: &str = "text/plain; charset=utf-8";

/// Answers `/<endpoint>` (the list) or `/<endpoint>/<check name>` (one check).
pub async fn respond(registry: &Registry, path: &str, query: &Query) -> hyper::Response<Body> {
    let trimmed = path.trim_start_matches('/');
    let (segment, single) = match trimmed.split_once('/') {
        Some((e, rest)) => (e, Some(rest)),
        None => (trimmed, None),
    };
    let Some(endpoint) = Endpoint::from_segment(segment) else { return not_found() };
    match single {
        Some(name) => one(registry, endpoint, name).await,
        None => list(registry, endpoint, query).await,
    }
}

fn not_found() -> hyper::Response<Body> {
    response::text(StatusCode::NOT_FOUND, "404 page not found\n", TEXT)
}

/// One check: `ok`, or 500 with the reason (this path is where the reason is shown).
async fn one(registry: &Registry, endpoint: Endpoint, name: &str) -> hyper::Response<Body> {
    let Some(entry) = registry.checks(endpoint).iter().find(|e| e.name() == name) else { return not_found() };
    let result = entry.run().await;
    registry.slis().observe(name, endpoint, result.is_ok());
    match result {
        Ok(()) => response::text(StatusCode::OK, "ok", TEXT),
        Err(e) => response::text(StatusCode::INTERNAL_SERVER_ERROR, format!("internal server error: {e}\n"), TEXT),
    }
}

/// The list: `ok`, or with `?verbose` one line per check; failures are always verbose and
/// withhold their reasons (logged instead), since anyone may read these endpoints.
async fn list(registry: &Registry, endpoint: Endpoint, query: &Query) -> hyper::Response<Body> {
    let mut excluded: BTreeSet<&str> = query.all("exclude").into_iter().collect();
    let mut out = String::new();
    let mut failed = Vec::new();
    for entry in registry.checks(endpoint) {
        let name = entry.name();
        if excluded.remove(name) {
            out.push_str(&format!("[+]{name} excluded: ok\n"));
            continue;
        }
        let result = entry.run().await;
        registry.slis().observe(name, endpoint, result.is_ok());
        match result {
            Ok(()) => out.push_str(&format!("[+]{name} ok\n")),
            Err(e) => {
                out.push_str(&format!("[-]{name} failed: reason withheld\n"));
                tracing::debug!(check = name, endpoint = endpoint.as_str(), "health check failed: {e}");
                failed.push(name);
            }
        }
    }
    if !excluded.is_empty() {
        let quoted: Vec<String> = excluded.iter().map(|n| format!("{n:?}")).collect();
        out.push_str(&format!("warn: some health checks cannot be excluded: no matches for {}\n", quoted.join(",")));
    }
    let word = endpoint.as_str();
    if !failed.is_empty() {
        out.push_str(&format!("{word} check failed\n"));
        return response::text(StatusCode::INTERNAL_SERVER_ERROR, out, TEXT);
    }
    registry.passed(endpoint);
    if query.has("verbose") {
        out.push_str(&format!("{word} check passed\n"));
        response::text(StatusCode::OK, out, TEXT)
    } else {
        response::text(StatusCode::OK, "ok", TEXT)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use http_body_util::BodyExt;

    use super::*;
    use crate::health::checks::{Ping, Shutdown};
    use crate::health::{CheckError, CheckFuture, HealthCheck};
    use crate::lifecycle::Lifecycle;

    struct Unfinished;

    impl HealthCheck for Unfinished {
        fn name(&self) -> &str {
            "poststarthook/demo"
        }
        fn check(&self) -> CheckFuture<'_> {
            Box::pin(async { Err(CheckError::NotFinished) })
        }
    }

    async fn get(registry: &Registry, path_and_query: &str) -> (u16, String) {
        let (path, q) = path_and_query.split_once('?').map_or((path_and_query, None), |(p, q)| (p, Some(q)));
        let resp = respond(registry, path, &Query::parse(q)).await;
        let status = resp.status().as_u16();
        let body = resp.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
        (status, String::from_utf8_lossy(&body).into_owned())
    }

    fn registry(grace: Duration) -> (Registry, Arc<Lifecycle>) {
        let lifecycle = Arc::new(Lifecycle::new());
        let mut r = Registry::new(grace, lifecycle.clone());
        r.add_health_checks(&[Arc::new(Ping)]);
        r.add_boot_sequence_checks(&[Arc::new(Unfinished)]);
        r.add_readyz_checks(&[Arc::new(Shutdown::new(lifecycle.clone()))]);
        (r, lifecycle)
    }

    #[tokio::test]
    async fn lists_exclusions_and_single_checks_read_as_kube_writes_them() {
        let (r, lifecycle) = registry(Duration::ZERO);
        assert_eq!(
            get(&r, "/readyz").await,
            (500, "[+]ping ok\n[-]poststarthook/demo failed: reason withheld\n[+]shutdown ok\nreadyz check failed\n".into())
        );
        assert_eq!(get(&r, "/readyz/poststarthook/demo").await, (500, "internal server error: not finished\n".into()));
        assert_eq!(get(&r, "/livez?exclude=poststarthook/demo").await, (200, "ok".into()));
        assert_eq!(
            get(&r, "/livez?verbose&exclude=poststarthook/demo&exclude=nope&exclude=also").await,
            (200, "[+]ping ok\n[+]poststarthook/demo excluded: ok\nwarn: some health checks cannot be excluded: no matches for \"also\",\"nope\"\nlivez check passed\n".into())
        );
        assert_eq!(get(&r, "/livez/shutdown").await.0, 404, "shutdown is a readyz check only");
        assert_eq!(get(&r, "/readyz/shutdown").await, (200, "ok".into()));
        assert!(!lifecycle.has_been_ready.is_signaled());
        lifecycle.shutdown_initiated.signal();
        assert_eq!(get(&r, "/readyz/shutdown").await, (500, "internal server error: process is shutting down\n".into()));
    }

    #[tokio::test]
    async fn boot_sequence_checks_pass_on_livez_during_the_grace_period() {
        let (r, _) = registry(Duration::from_secs(60));
        assert_eq!(get(&r, "/livez?verbose").await, (200, "[+]ping ok\n[+]poststarthook/demo ok\nlivez check passed\n".into()));
        assert_eq!(get(&r, "/healthz").await.0, 500, "no grace on healthz");
        assert_eq!(get(&r, "/readyz").await.0, 500, "no grace on readyz");
    }

    #[tokio::test]
    async fn first_passing_readyz_fires_has_been_ready() {
        let lifecycle = Arc::new(Lifecycle::new());
        let mut r = Registry::new(Duration::ZERO, lifecycle.clone());
        r.add_health_checks(&[Arc::new(Ping)]);
        assert_eq!(get(&r, "/readyz").await, (200, "ok".into()));
        assert!(lifecycle.has_been_ready.is_signaled());
    }
}
