//! kube's `WithPriorityAndFairness`, in max-in-flight's place when
//! `--enable-priority-and-fairness` is on: each request is classified to a FlowSchema and its
//! priority level by its user, groups and request info; exempt levels run it at once, limited
//! ones run it when their queues dispatch it. A request waits in its queue at most a quarter of
//! its deadline (`--request-timeout`, or the client's shorter `?timeout=`), at most a minute,
//! as kube's `getRequestWaitContext`; then it leaves its queue and is answered 429, as it is
//! when its queue is full or its level rejects.
//!
//! Every answer carries `X-Kubernetes-PF-FlowSchema-UID` and `X-Kubernetes-PF-PriorityLevel-UID`.
//!
//! Seats follow kube's work estimator: a LIST takes one per 100 objects it walks (the
//! resource's count in its watch cache), at most the level's maximum; a write that at least
//! ten watchers of its resource will hear of takes one seat per ten of them (at most the
//! level's maximum) and keeps them 5 ms per seat of that work after its answer is sent (kube's
//! final phase: the notifications go out after the client has its answer); everything else
//! takes one. A WATCH waits its turn like any request and holds its seat while it is set up
//! (until its answer's head is ready, kube's watch-initialization signal); other long-running
//! requests (exec, attach, port-forward, proxy, logs) are classified but not limited, as in
//! kube.
//!
//! A 429's `Retry-After` is the level's from kube's dropped-requests tracker
//! (`flow_control::dropped`): 1 s at first, longer while the level keeps rejecting.

use std::sync::Arc;
use std::time::Duration;

use http::header::HeaderValue;
use http::{Request, Response};
use hyper::body::Incoming;
use kapi_auth::UserInfo;
use kapi_flowcontrol::RequestDigest;
use tower::ServiceExt;

use super::filter;
use crate::flow_control::level::{Admission, RequestDescription};
use crate::flow_control::FlowControl;
use crate::request_info::RequestInfo;
use crate::response::{self, Body};
use crate::state::ApiServer;

/// kube's `ResponseHeaderMatchedFlowSchemaUID`.
pub const FLOW_SCHEMA_UID: &str = "x-kubernetes-pf-flowschema-uid";
/// kube's `ResponseHeaderMatchedPriorityLevelConfigurationUID`.
pub const PRIORITY_LEVEL_UID: &str = "x-kubernetes-pf-prioritylevel-uid";

/// kube's bound on any request's wait in a queue.
const MAX_WAIT: Duration = Duration::from_secs(60);

/// How long a request may wait in its queue: a quarter of its deadline, at most a minute.
fn wait_limit(request_timeout: Duration, query: Option<&str>) -> Duration {
    // An unparsable `?timeout=` is answered 400 by the timeout filter once dispatched.
    let deadline = super::timeout::deadline(request_timeout, query).unwrap_or(request_timeout);
    (deadline / 4).min(MAX_WAIT)
}

/// A request's work (kube's `WorkEstimate`): the seats it holds while it runs, and how long
/// they stay taken after its answer is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct WorkEstimate {
    seats: u32,
    linger: Duration,
}

const ONE_SEAT: WorkEstimate = WorkEstimate { seats: 1, linger: Duration::ZERO };

/// kube's mutating work estimator: watchers per seat of notification work.
const WATCHES_PER_SEAT: u64 = 10;
/// kube's estimate of one seat's work per notification batch.
const EVENT_ADDITIONAL: Duration = Duration::from_millis(5);

/// The seats a request takes (kube's work estimator): a LIST by the number of objects of its
/// resource the watch cache holds, a write by the watchers of its resource; everything else
/// one seat.
fn work_estimate(srv: &ApiServer, info: &RequestInfo, query: Option<&str>, max_seats: u32) -> WorkEstimate {
    if !info.is_resource_request {
        return ONE_SEAT;
    }
    let mutating = matches!(info.verb.as_str(), "create" | "update" | "patch" | "delete");
    if info.verb != "list" && !mutating {
        return ONE_SEAT;
    }
    let Some(scope) = srv.chain.scope(&info.api_group, &info.api_version, &info.resource) else { return ONE_SEAT };
    let Some(cache) = srv.rest.caches().cache(&scope.spec().key_prefix()) else { return ONE_SEAT };
    if mutating {
        // A service account token is made, not stored: nobody hears of it (kube's exemption).
        if info.resource == "serviceaccounts" && info.subresource == "token" {
            return ONE_SEAT;
        }
        return mutating_estimate(cache.watcher_count() as u64, max_seats);
    }
    let stored = cache.len() as u64;
    let query = crate::query::Query::parse(query);
    let limit = query.get("limit").and_then(|l| l.parse::<u64>().ok());
    // kapi answers lists from the watch cache except continued pages and exact-revision reads.
    let from_storage = query.get("continue").is_some_and(|c| !c.is_empty()) || query.get("resourceVersionMatch") == Some("Exact");
    let selector = ["labelSelector", "fieldSelector"].iter().any(|k| query.get(k).is_some_and(|s| !s.is_empty()));
    WorkEstimate { seats: kapi_flowcontrol::list_seats(stored, limit, !from_storage, selector, max_seats), linger: Duration::ZERO }
}

/// A write heard by `watchers`: from ten of them on, one seat per ten, each for 5 ms after
/// the answer; a request wider than the level's maximum is reshaped into its maximum seats
/// for proportionally longer (the same seat-seconds).
fn mutating_estimate(watchers: u64, max_seats: u32) -> WorkEstimate {
    if watchers < WATCHES_PER_SEAT {
        return ONE_SEAT;
    }
    let work_seats = watchers.div_ceil(WATCHES_PER_SEAT);
    let seats = u32::try_from(work_seats).unwrap_or(u32::MAX).min(max_seats.clamp(1, kapi_flowcontrol::allocation::ESTIMATOR_MAX_SEATS));
    let linger = EVENT_ADDITIONAL.mul_f64(work_seats as f64 / f64::from(seats));
    WorkEstimate { seats, linger }
}

fn with_headers(mut resp: Response<Body>, schema_uid: &HeaderValue, level_uid: &HeaderValue) -> Response<Body> {
    for (name, uid) in [(FLOW_SCHEMA_UID, schema_uid), (PRIORITY_LEVEL_UID, level_uid)] {
        resp.headers_mut().insert(name, uid.clone());
    }
    resp
}

async fn run<S>(srv: Arc<ApiServer>, fc: Arc<FlowControl>, inner: S, req: Request<Incoming>) -> Response<Body>
where
    S: tower::Service<Request<Incoming>, Response = Response<Body>, Error = std::convert::Infallible> + Send,
    S::Future: Send,
{
    let decision = {
        let info = req.extensions().get::<RequestInfo>();
        let user = req.extensions().get::<UserInfo>();
        let field = |f: fn(&RequestInfo) -> &str| info.map_or("", f);
        let digest = RequestDigest {
            user: user.map_or("", |u| u.name.as_str()),
            groups: user.map_or(&[], |u| u.groups.as_slice()),
            is_resource: info.is_some_and(|i| i.is_resource_request),
            verb: field(|i| i.verb.as_str()),
            api_group: field(|i| i.api_group.as_str()),
            resource: field(|i| i.resource.as_str()),
            subresource: field(|i| i.subresource.as_str()),
            namespace: field(|i| i.namespace.as_str()),
            path: field(|i| i.path.as_str()),
        };
        fc.snapshot().decide(&digest)
    };
    let Some(decision) = decision else {
        return match inner.oneshot(req).await {
            Ok(resp) => resp,
            Err(never) => match never {},
        };
    };
    // kube limits watches (for their set-up) but no other long-running request.
    let watch = req.extensions().get::<RequestInfo>().is_some_and(|i| i.verb == "watch");
    let long_running = req.extensions().get::<RequestInfo>().is_some_and(RequestInfo::is_long_running) && !watch;
    let mut estimate = ONE_SEAT;
    let arrived = std::time::Instant::now();
    let gauges = crate::metrics::flowcontrol_flow(&decision.level, &decision.schema);
    let seat = match &decision.queues {
        Some(level) if !long_running => {
            let limit = wait_limit(srv.options.request_timeout, req.uri().query());
            if let Some(info) = req.extensions().get::<RequestInfo>() {
                estimate = work_estimate(&srv, info, req.uri().query(), decision.max_seats);
            }
            let seats = estimate.seats;
            // kube's rejection reasons: no place in a queue (or a level that does not queue),
            // or the wait ran out.
            let description = describe(&req, &decision.schema, seats, estimate.linger);
            let (seat, reason) = match level.arrive_described(fc.next_id(), decision.flow_hash, seats, description) {
                Admission::Admitted(ticket) => {
                    let _in_queue = ticket.queued().then(|| gauges.in_queue(seats));
                    (ticket.wait(limit).await, "time-out")
                }
                Admission::Rejected => (None, if level.queues() { "queue-full" } else { "concurrency-limit" }),
            };
            if seat.is_none() {
                crate::metrics::flowcontrol_rejected(&decision.schema, &decision.level, reason, arrived.elapsed());
                super::drain_body(req.into_body(), srv.options.max_body_bytes).await;
                // kube's Retry-After: the level's, grown by its recent rejections (this one counted).
                let retry_after = fc.dropped().reject(&decision.level);
                return with_headers(super::max_in_flight::too_many_requests_after(retry_after), &decision.schema_uid, &decision.level_uid);
            }
            seat
        }
        _ => None,
    };
    gauges.dispatched(arrived.elapsed());
    // kube counts what runs, exempt requests included (at kapi's one seat: it estimates no work
    // for them), a watch while it is set up; not the other long-running requests.
    let executing = (!long_running).then(|| gauges.executing(estimate.seats, estimate.linger));
    let resp = match inner.oneshot(req).await {
        Ok(resp) => with_headers(resp, &decision.schema_uid, &decision.level_uid),
        Err(never) => match never {},
    };
    match seat {
        // A watch is set up once its answer's head is ready; its events are not limited.
        Some(seat) if watch => {
            drop(seat);
            resp
        }
        // The seat is free once the answer is written, not when it is ready.
        Some(seat) => response::hold_until_sent(resp, (seat.linger(estimate.linger), executing)),
        // An exempt request runs until its answer is written too.
        None => match executing {
            Some(executing) if !watch => response::hold_until_sent(resp, executing),
            _ => resp,
        },
    }
}

/// What the debug dumps (`flow_control::debug`) show of a request of a limited level while it
/// waits and runs: its seats, and for how long after its answer it keeps them.
fn describe(req: &Request<Incoming>, schema: &str, seats: u32, linger: Duration) -> RequestDescription {
    let info = req.extensions().get::<RequestInfo>();
    let field = |f: fn(&RequestInfo) -> &String| info.map_or_else(String::new, |i| f(i).clone());
    RequestDescription {
        flow_schema: schema.to_owned(),
        user: req.extensions().get::<UserInfo>().map_or_else(String::new, |u| u.name.clone()),
        verb: field(|i| &i.verb),
        path: field(|i| &i.path),
        namespace: field(|i| &i.namespace),
        name: field(|i| &i.name),
        api_group: field(|i| &i.api_group),
        api_version: field(|i| &i.api_version),
        resource: field(|i| &i.resource),
        subresource: field(|i| &i.subresource),
        arrived: std::time::SystemTime::now(),
        initial_seats: seats,
        // kapi's final phase keeps the seats the request ran with.
        final_seats: if linger.is_zero() { 0 } else { seats },
        additional_latency: linger,
    }
}

filter!(
    /// Classifies, queues and limits with `fc`.
    PriorityAndFairnessLayer => PriorityAndFairness { srv: Arc<ApiServer>, fc: Arc<FlowControl> },
    Incoming,
    run
);

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{mutating_estimate, wait_limit, WorkEstimate, ONE_SEAT};

    #[test]
    fn writes_cost_a_seat_per_ten_watchers_after_their_answer() {
        assert_eq!(mutating_estimate(0, 8), ONE_SEAT);
        assert_eq!(mutating_estimate(9, 8), ONE_SEAT);
        assert_eq!(mutating_estimate(10, 8), WorkEstimate { seats: 1, linger: Duration::from_millis(5) });
        assert_eq!(mutating_estimate(35, 8), WorkEstimate { seats: 4, linger: Duration::from_millis(5) });
        // 200 watchers: 20 seats of 5 ms reshaped into the level's 8 seats for 12.5 ms.
        assert_eq!(mutating_estimate(200, 8), WorkEstimate { seats: 8, linger: Duration::from_micros(12_500) });
        // Never beyond the estimator's own ceiling of 10.
        assert_eq!(mutating_estimate(1000, 40).seats, 10);
    }

    #[test]
    fn requests_wait_a_quarter_of_their_deadline_at_most_a_minute() {
        let minute = Duration::from_secs(60);
        assert_eq!(wait_limit(minute, None), Duration::from_secs(15));
        assert_eq!(wait_limit(minute, Some("timeout=8s")), Duration::from_secs(2));
        assert_eq!(wait_limit(Duration::from_secs(600), None), minute);
        assert_eq!(wait_limit(minute, Some("timeout=abc")), Duration::from_secs(15));
    }
}
