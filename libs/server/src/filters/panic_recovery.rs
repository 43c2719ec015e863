//! Turns a panicking handler into a 500 Status instead of a dropped connection.

use std::panic::AssertUnwindSafe;

use futures_util::FutureExt;
use http::{Request, Response};
use hyper::body::Incoming;
use kapi_apimachinery::ApiError;
use tower::{Layer, ServiceExt};

use super::filter_service;
use crate::negotiation::Output;
use crate::response::{self, Body};

/// Layer of [`PanicRecovery`].
#[derive(Debug, Clone, Copy)]
pub struct PanicRecoveryLayer;

impl<S> Layer<S> for PanicRecoveryLayer {
    type Service = PanicRecovery<S>;
    fn layer(&self, inner: S) -> Self::Service {
        PanicRecovery { inner }
    }
}

/// See the module docs.
#[derive(Debug, Clone)]
pub struct PanicRecovery<S> {
    inner: S,
}

async fn run<S>(inner: S, req: Request<Incoming>) -> Response<Body>
where
    S: tower::Service<Request<Incoming>, Response = Response<Body>, Error = std::convert::Infallible> + Send,
    S::Future: Send,
{
    let path = req.uri().path().to_owned();
    match AssertUnwindSafe(inner.oneshot(req)).catch_unwind().await {
        Ok(Ok(resp)) => resp,
        Ok(Err(never)) => match never {},
        Err(panic) => {
            let msg = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "panic".into());
            tracing::error!(%path, "handler panicked: {msg}");
            response::error(&ApiError::internal("an error on the server has prevented the request from succeeding"), Output::JSON)
        }
    }
}

filter_service!(PanicRecovery<S> {}, Incoming, run);
