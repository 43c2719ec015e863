//! kube's `WithMaxInFlightLimit`: at most `--max-requests-inflight` read-only and
//! `--max-mutating-requests-inflight` mutating requests run at once; beyond that a request is
//! answered 429 with `Retry-After: 1` at once instead of queueing, so an overloaded replica
//! sheds load and clients retry (elsewhere, behind a load balancer). Long-running requests
//! (watches) are not counted, and `system:masters` is never limited, as in kube.
//!
//! The 429 is kube's: plain text `Too many requests, please try again later.`, not a Status
//! (client-go turns it into a TooManyRequests error and retries after `Retry-After`).

use std::sync::Arc;

use http::{Request, Response};
use hyper::body::Incoming;
use kapi_auth::UserInfo;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tower::ServiceExt;

use super::filter;
use crate::request_info::RequestInfo;
use crate::response::{self, Body};
use crate::state::ApiServer;

/// The two budgets; `None` is unlimited (a flag value of 0).
#[derive(Clone)]
pub struct InFlightLimits {
    read_only: Option<Arc<Semaphore>>,
    mutating: Option<Arc<Semaphore>>,
}

impl InFlightLimits {
    /// Limits of `read_only` and `mutating` concurrent requests; 0 disables a limit.
    pub fn new(read_only: usize, mutating: usize) -> Self {
        let limit = |n: usize| (n > 0).then(|| Arc::new(Semaphore::new(n)));
        Self { read_only: limit(read_only), mutating: limit(mutating) }
    }
}

/// Holds a slot and keeps the in-flight gauge right while the request runs.
struct Slot {
    _permit: OwnedSemaphorePermit,
    gauge: prometheus::IntGauge,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.gauge.dec();
    }
}

/// kube's `tooManyRequests` as max-in-flight sends it: always `Retry-After: 1`.
pub(crate) fn too_many_requests() -> Response<Body> {
    too_many_requests_after(1)
}

/// kube's `tooManyRequests` asking the client to wait `seconds` (priority and fairness sends
/// its level's value, which grows while the level keeps rejecting).
pub(crate) fn too_many_requests_after(seconds: u64) -> Response<Body> {
    let mut resp = response::too_many_requests("Too many requests, please try again later.", "1");
    resp.headers_mut().insert(http::header::RETRY_AFTER, http::HeaderValue::from(seconds));
    resp
}

async fn run<S>(srv: Arc<ApiServer>, inner: S, req: Request<Incoming>) -> Response<Body>
where
    S: tower::Service<Request<Incoming>, Response = Response<Body>, Error = std::convert::Infallible> + Send,
    S::Future: Send,
{
    let (long_running, read_only) =
        req.extensions().get::<RequestInfo>().map_or((false, false), |i| (i.is_long_running(), i.is_read_only()));
    let privileged = req
        .extensions()
        .get::<UserInfo>()
        .is_some_and(|u| u.groups.iter().any(|g| g == "system:masters"));
    let (budget, kind) = if read_only {
        (srv.in_flight.read_only.clone(), "readOnly")
    } else {
        (srv.in_flight.mutating.clone(), "mutating")
    };
    let slot = match budget {
        Some(budget) if !long_running && !privileged => match budget.try_acquire_owned() {
            Ok(permit) => {
                let gauge = srv.metrics.inflight.with_label_values(&[kind]);
                gauge.inc();
                Some(Slot { _permit: permit, gauge })
            }
            Err(_) => {
                super::drain_body(req.into_body(), srv.options.max_body_bytes).await;
                return too_many_requests();
            }
        },
        _ => None,
    };
    let resp = match inner.oneshot(req).await {
        Ok(resp) => resp,
        Err(never) => match never {},
    };
    match slot {
        // The slot is free once the answer is written, not when it is ready.
        Some(slot) => response::hold_until_sent(resp, slot),
        None => resp,
    }
}

filter!(
    /// Limits with `srv.in_flight`, reporting `apiserver_current_inflight_requests`.
    MaxInFlightLayer => MaxInFlight { srv: Arc<ApiServer> },
    Incoming,
    run
);

#[cfg(test)]
mod tests {
    use http_body_util::BodyExt;

    use super::{too_many_requests, too_many_requests_after};

    #[tokio::test]
    async fn refusals_are_kubes_plain_text_429() {
        let resp = too_many_requests();
        assert_eq!(resp.status(), 429);
        assert_eq!(resp.headers()["retry-after"], "1");
        assert_eq!(resp.headers()["content-type"], "text/plain; charset=utf-8");
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(&body[..], b"Too many requests, please try again later.\n");
    }

    #[tokio::test]
    async fn a_longer_wait_changes_only_retry_after() {
        let resp = too_many_requests_after(8);
        assert_eq!(resp.status(), 429);
        assert_eq!(resp.headers()["retry-after"], "8");
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(&body[..], b"Too many requests, please try again later.\n");
    }
}
