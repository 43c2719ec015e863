//! During the shutdown delay (after SIGTERM, before the listener closes) every HTTP/1.x answer
//! carries `Connection: close`, so keep-alive clients reconnect, through the load balancer, to a
//! replica that is still ready. (HTTP/2 connections get GOAWAY when draining starts.)

use std::sync::Arc;

use http::{header, HeaderValue, Request, Response, Version};
use hyper::body::Incoming;
use tower::{Layer, ServiceExt};

use super::filter_service;
use crate::response::Body;
use crate::state::ApiServer;

/// Layer of [`CloseWhenShuttingDown`].
#[derive(Clone)]
pub struct CloseWhenShuttingDownLayer {
    srv: Arc<ApiServer>,
}

impl CloseWhenShuttingDownLayer {
    /// Watches `srv.lifecycle`.
    pub fn new(srv: Arc<ApiServer>) -> Self {
        Self { srv }
    }
}

impl<S> Layer<S> for CloseWhenShuttingDownLayer {
    type Service = CloseWhenShuttingDown<S>;
    fn layer(&self, inner: S) -> Self::Service {
        CloseWhenShuttingDown { inner, srv: self.srv.clone() }
    }
}

/// See the module docs.
#[derive(Clone)]
pub struct CloseWhenShuttingDown<S> {
    inner: S,
    srv: Arc<ApiServer>,
}

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

filter_service!(CloseWhenShuttingDown<S> { srv: Arc<ApiServer> }, Incoming, run);
