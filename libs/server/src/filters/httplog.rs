//! kube's httplog at `-v=3` and above: one line per request once it is answered, with the
//! verb, URI, latency, user agent, audit ID, client address and status code, the line
//! operators grep kube-apiserver's logs for.

use std::time::Instant;

use http::{Request, Response};
use hyper::body::Incoming;
use tower::ServiceExt;

use super::{filter, ConnInfo};
use crate::request_info::RequestInfo;
use crate::response::Body;

async fn run<S>(enabled: bool, inner: S, req: Request<Incoming>) -> Response<Body>
where
    S: tower::Service<Request<Incoming>, Response = Response<Body>, Error = std::convert::Infallible> + Send,
    S::Future: Send,
{
    if !enabled {
        return match inner.oneshot(req).await {
            Ok(resp) => resp,
            Err(never) => match never {},
        };
    }
    let started = Instant::now();
    // kube logs the Kubernetes verb of resource requests (LIST, WATCH), else the HTTP method.
    let verb = match req.extensions().get::<RequestInfo>() {
        Some(info) if info.is_resource_request => info.verb.to_uppercase(),
        _ => req.method().as_str().to_owned(),
    };
    // The request target as the client sent it on HTTP/1.1 (kube's RequestURI), also for HTTP/2.
    let uri = req.uri().path_and_query().map_or_else(|| req.uri().path().to_owned(), |p| p.as_str().to_owned());
    let user_agent = req.headers().get(http::header::USER_AGENT).and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
    let source = req.extensions().get::<std::sync::Arc<ConnInfo>>().and_then(|c| c.peer).map(|p| p.to_string()).unwrap_or_default();
    let resp = match inner.oneshot(req).await {
        Ok(resp) => resp,
        Err(never) => match never {},
    };
    let audit_id = resp.headers().get("audit-id").and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
    tracing::info!(
        target: "httplog",
        verb = %verb,
        URI = %uri,
        latency = ?started.elapsed(),
        userAgent = %user_agent,
        "audit-ID" = %audit_id,
        srcIP = %source,
        resp = resp.status().as_u16(),
        "HTTP"
    );
    resp
}

filter!(
    /// Logs each answered request when `enabled` (`-v=3` and above).
    HttpLogLayer => HttpLog { enabled: bool },
    Incoming,
    run
);
