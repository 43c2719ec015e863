//! Ends requests that are not long-running with kube's 504 Timeout Status after
//! `--request-timeout`; watches and other long-running requests have their own deadlines.

use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use kapi_apimachinery::ApiError;
use tower::ServiceExt;

use super::{filter, ErrorOutput};
use crate::negotiation::Output;
use crate::request_info::RequestInfo;
use crate::response::{self, Body};

async fn run<S>(timeout: Duration, inner: S, req: Request<Bytes>) -> Response<Body>
where
    S: tower::Service<Request<Bytes>, Response = Response<Body>, Error = std::convert::Infallible> + Send,
    S::Future: Send,
{
    let long_running = req.extensions().get::<RequestInfo>().is_some_and(RequestInfo::is_long_running);
    let output = req.extensions().get::<ErrorOutput>().map_or(Output::JSON, |o| o.0);
    let call = inner.oneshot(req);
    let result = if long_running {
        call.await
    } else {
        match tokio::time::timeout(timeout, call).await {
            Ok(result) => result,
            Err(_) => return response::error(&ApiError::timeout("request did not complete within the allotted timeout"), output),
        }
    };
    match result {
        Ok(resp) => resp,
        Err(never) => match never {},
    }
}

filter!(
    /// Ends requests running longer than `timeout` with 504.
    TimeoutLayer => Timeout { timeout: Duration },
    Bytes,
    run
);
