//! Turns a panicking handler into a 500 Status instead of a dropped connection.

use std::panic::AssertUnwindSafe;

use futures_util::FutureExt;
use http::{Request, Response};
use hyper::body::Incoming;
use kapi_apimachinery::ApiError;
use tower::ServiceExt;

use super::filter;
use crate::negotiation::Output;
use crate::response::{self, Body};

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

filter!(
    /// Answers 500 when a handler panics.
    PanicRecoveryLayer => PanicRecovery {  },
    Incoming,
    run
);
