//! Termination as requests see it (kube's `WithRetryAfter`, `WithWaitGroup` and
//! `WithWatchTerminationDuringShutdown` in one place, since they share one decision):
//!
//! - every request in flight is counted, non-long-running ones and watches apart, so
//!   termination can wait for them;
//! - from SIGTERM on, answers ask the client to reconnect (`Connection: close` on HTTP/1.1,
//!   GOAWAY on HTTP/2), so keep-alive clients come back through the load balancer to a replica
//!   that is still ready;
//! - once new requests are refused: with `--shutdown-send-retry-after`, 429 with
//!   `Retry-After: 5` and `Connection: close` (the listener is still open); otherwise a request
//!   that still arrives on an open connection gets 503 with `Retry-After: 1`.
//!
//! Health probes and metrics scrapes are never refused, so a load balancer keeps seeing the
//! failing `/readyz` rather than errors.

use std::sync::Arc;

use http::{header, HeaderValue, Request, Response};
use hyper::body::Incoming;
use kapi_apimachinery::ApiError;
use tower::ServiceExt;

use super::filter;
use crate::negotiation::Output;
use crate::request_info::RequestInfo;
use crate::response::{self, Body};
use crate::serve::CloseConnection;
use crate::state::ApiServer;

/// kube's text for requests refused during termination with `--shutdown-send-retry-after`.
pub const RETRY_AFTER_MESSAGE: &str = "The apiserver is shutting down, please try again later.";

/// Paths that are served until the end (kube's `pathPrefixesExemptFromRetryAfter`).
const EXEMPT_PREFIXES: [&str; 4] = ["/readyz", "/livez", "/healthz", "/metrics"];

/// Health probes, metrics scrapes and a kube-apiserver talking to itself are never refused.
fn is_exempt(req: &Request<Incoming>) -> bool {
    let loopback = req
        .headers()
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ua| ua.starts_with("kube-apiserver/"));
    loopback || EXEMPT_PREFIXES.iter().any(|p| req.uri().path().starts_with(p))
}

/// 429 the way kube's `WithRetryAfter` writes it: plain text, `Retry-After: 5`, connection closed.
fn retry_after() -> Response<Body> {
    let mut resp = response::too_many_requests(RETRY_AFTER_MESSAGE, "5");
    resp.extensions_mut().insert(CloseConnection);
    resp
}

/// 503 the way kube's `WithWaitGroup` writes it once the wait began.
fn shutting_down() -> Response<Body> {
    let mut resp = response::error(&ApiError::service_unavailable("apiserver is shutting down"), Output::JSON);
    resp.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    resp.extensions_mut().insert(CloseConnection);
    resp
}

async fn run<S>(srv: Arc<ApiServer>, inner: S, req: Request<Incoming>) -> Response<Body>
where
    S: tower::Service<Request<Incoming>, Response = Response<Body>, Error = std::convert::Infallible> + Send,
    S::Future: Send,
{
    let lifecycle = &srv.lifecycle;
    let exempt = is_exempt(&req);
    if srv.options.shutdown_send_retry_after && lifecycle.not_accepting_new_requests.is_signaled() && !exempt {
        return retry_after();
    }
    let long_running = req.extensions().get::<RequestInfo>().is_some_and(RequestInfo::is_long_running);
    let group = if long_running { &lifecycle.watches } else { &lifecycle.requests };
    let guard = group.add();
    if guard.is_none() && !exempt {
        return shutting_down();
    }
    let mut resp = match inner.oneshot(req).await {
        Ok(resp) => resp,
        Err(never) => match never {},
    };
    if lifecycle.is_shutting_down() {
        resp.extensions_mut().insert(CloseConnection);
    }
    match guard {
        // A watch's body is the whole watch.
        Some(guard) => response::hold_until_sent(resp, guard),
        None => resp,
    }
}

filter!(
    /// Counts requests for termination and refuses them once it drains.
    ShutdownLayer => WithShutdown { srv: Arc<ApiServer> },
    Incoming,
    run
);
