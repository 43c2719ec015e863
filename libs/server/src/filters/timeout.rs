//! Ends requests that are not long-running with kube's 504 Timeout Status after
//! `--request-timeout`, or sooner when the client asks with `?timeout=` (kubectl's
//! `--request-timeout`), as kube's `WithRequestDeadline`: a client may shorten the deadline,
//! never extend it. Watches and other long-running requests have their own deadlines.
//!
//! The deadline covers reading the body too (the body filter runs inside this one), as kube's
//! handlers read the body under it: a client trickling a body cannot hold an in-flight slot
//! for longer than a request may run.

use std::time::Duration;

use http::{Request, Response};
use hyper::body::Incoming;
use kapi_apimachinery::time::parse_go_duration;
use kapi_apimachinery::ApiError;
use tower::ServiceExt;

use super::{filter, ErrorOutput};
use crate::negotiation::Output;
use crate::query::Query;
use crate::request_info::RequestInfo;
use crate::response::{self, Body};

/// kube's message for an unparsable `?timeout=`.
const INVALID_TIMEOUT: &str = "invalid timeout specified in the request URL";

/// The deadline of one request: the client's `?timeout=` when positive and shorter.
pub(crate) fn deadline(maximum: Duration, query: Option<&str>) -> Result<Duration, ApiError> {
    let query = Query::parse(query);
    let Some(asked) = query.get("timeout").filter(|v| !v.is_empty()) else { return Ok(maximum) };
    match parse_go_duration(asked) {
        Ok(Some(t)) if !t.is_zero() && t < maximum => Ok(t),
        Ok(_) => Ok(maximum),
        Err(e) => Err(ApiError::bad_request(format!("{INVALID_TIMEOUT} - {e}"))),
    }
}

async fn run<S>(timeout: Duration, inner: S, req: Request<Incoming>) -> Response<Body>
where
    S: tower::Service<Request<Incoming>, Response = Response<Body>, Error = std::convert::Infallible> + Send,
    S::Future: Send,
{
    let long_running = req.extensions().get::<RequestInfo>().is_some_and(RequestInfo::is_long_running);
    let output = req.extensions().get::<ErrorOutput>().map_or(Output::JSON, |o| o.0);
    if long_running {
        return match inner.oneshot(req).await {
            Ok(resp) => resp,
            Err(never) => match never {},
        };
    }
    let limit = match deadline(timeout, req.uri().query()) {
        Ok(limit) => limit,
        Err(e) => return response::error(&e, output),
    };
    match tokio::time::timeout(limit, inner.oneshot(req)).await {
        Ok(Ok(resp)) => resp,
        Ok(Err(never)) => match never {},
        Err(_) => response::error(&timed_out(), output),
    }
}

/// kube's `NewTimeoutError("request did not complete within the allotted timeout", 0)`.
fn timed_out() -> ApiError {
    ApiError { details: Some(Box::default()), ..ApiError::timeout("Timeout: request did not complete within the allotted timeout") }
}

filter!(
    /// Ends requests running longer than `timeout` (or the client's shorter `?timeout=`) with 504.
    TimeoutLayer => Timeout { timeout: Duration },
    Incoming,
    run
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clients_may_shorten_the_deadline_only() {
        let max = Duration::from_secs(60);
        assert_eq!(deadline(max, None).unwrap(), max);
        assert_eq!(deadline(max, Some("timeout=5s")).unwrap(), Duration::from_secs(5));
        assert_eq!(deadline(max, Some("timeout=5m")).unwrap(), max);
        assert_eq!(deadline(max, Some("timeout=0s")).unwrap(), max);
        assert_eq!(deadline(max, Some("timeout=-1s")).unwrap(), max);
        let err = deadline(max, Some("timeout=abc")).unwrap_err();
        assert_eq!(err.code, 400);
        assert_eq!(err.message, "invalid timeout specified in the request URL - time: invalid duration \"abc\"");
    }
}
