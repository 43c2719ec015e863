//! During the shutdown delay (after SIGTERM, before the listener closes) every HTTP/1.x answer
//! carries `Connection: close`, so keep-alive clients reconnect, through the load balancer, to a
//! replica that is still ready. (HTTP/2 connections get GOAWAY when draining starts.)

use std::sync::Arc;

use http::{header, HeaderValue, Request, Response, Version};
use hyper::body::Incoming;
use tower::ServiceExt;

use super::filter;
use crate::response::Body;
use crate::state::ApiServer;

async fn run<S>(srv: Arc<ApiServer>, inner: S, req: Request<Incoming>) -> Response<Body>
where
    S: tower::Service<Request<Incoming>, Response = Response<Body>, Error = std::convert::Infallible> + Send,
    S::Future: Send,
{
    // Connection-specific headers are forbidden in HTTP/2.
    let http1 = req.version() <= Version::HTTP_11;
    let mut resp = match inner.oneshot(req).await {
        Ok(resp) => resp,
        Err(never) => match never {},
    };
    if http1 && srv.lifecycle.is_shutting_down() {
        resp.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    resp
}

filter!(
    /// Watches `srv.lifecycle`.
    CloseWhenShuttingDownLayer => CloseWhenShuttingDown { srv: Arc<ApiServer> },
    Incoming,
    run
);
