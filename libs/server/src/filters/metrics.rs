//! `apiserver_request_total`, `apiserver_request_duration_seconds` and
//! `apiserver_longrunning_requests`, labelled as kube-apiserver labels them.

use std::sync::Arc;
use std::time::Instant;

use http::{Request, Response};
use hyper::body::Incoming;
use tower::ServiceExt;

use super::filter;
use crate::metrics::{metric_verb, RequestLabels};
use crate::query::Query;
use crate::request_info::RequestInfo;
use crate::response::Body;
use crate::state::ApiServer;

async fn run<S>(srv: Arc<ApiServer>, inner: S, req: Request<Incoming>) -> Response<Body>
where
    S: tower::Service<Request<Incoming>, Response = Response<Body>, Error = std::convert::Infallible> + Send,
    S::Future: Send,
{
    let started = Instant::now();
    let info = req.extensions().get::<RequestInfo>().cloned().unwrap_or_default();
    let verb = metric_verb(req.method(), &info.verb);
    let dry_run = if Query::parse(req.uri().query()).get("dryRun").is_some() { "All" } else { "" };
    let long_running = info.is_resource_request && info.is_long_running();
    let long_running_labels =
        [verb.as_str(), &info.api_group, &info.api_version, &info.resource, &info.subresource, info.scope(), "apiserver"];
    if long_running {
        srv.metrics.long_running.with_label_values(&long_running_labels).inc();
    }
    let resp = match inner.oneshot(req).await {
        Ok(resp) => resp,
        Err(never) => match never {},
    };
    if info.is_resource_request {
        if long_running {
            srv.metrics.long_running.with_label_values(&long_running_labels).dec();
        }
        srv.metrics.observe(
            &RequestLabels {
                verb: &verb,
                dry_run,
                group: &info.api_group,
                version: &info.api_version,
                resource: &info.resource,
                subresource: &info.subresource,
                scope: info.scope(),
            },
            resp.status().as_u16(),
            started.elapsed().as_secs_f64(),
        );
    }
    resp
}

filter!(
    /// Records request counts and latencies into `srv.metrics`.
    MetricsLayer => WithMetrics { srv: Arc<ApiServer> },
    Incoming,
    run
);
