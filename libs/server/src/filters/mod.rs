//! kube-apiserver's handler chain (`DefaultBuildHandlerChain`) as tower layers, outermost first.
//!
//! Order and why:
//! 1. [`panic_recovery`] — a bug in one request answers 500 instead of dropping the connection;
//!    [`http_headers`] — kube's HSTS and CORS headers on every answer, CORS preflights
//!    answered at once;
//!    [`pretty`] — indents the JSON answer of every later step for clients that ask for it;
//! 2. [`request_info`] — every later step reads the parsed verb/resource from the extensions;
//!    [`traces`] — with a tracer installed, the request's span (the client's `traceparent` its
//!    parent): every later step and the spans they start run inside it, as kube's
//!    `WithTracing` right after `WithRequestInfo`;
//! 3. [`shutdown`] — counts requests in flight for termination, tells clients to reconnect
//!    after SIGTERM and refuses new requests once draining (it needs the request info: watches
//!    are counted apart); before authentication, as kube's `WithRetryAfter`, so a draining
//!    replica spends nothing on requests it refuses;
//!    [`goaway`] — `--goaway-chance` of HTTP/2 answers close their connection;
//! 4. [`metrics`] — times everything after it, including rejected requests;
//! 5. [`authentication`] — 401 before any work is done for unknown callers;
//!    [`audit`] — the request's audit event, which names the authenticated user (and, once
//!    impersonation ran, whom it impersonates), written at each stage the policy keeps;
//!    [`impersonation`] — `Impersonate-*` headers swap the user, each part authorized;
//! 6. [`max_in_flight`] — 429 beyond the concurrency budgets (it needs the user: masters are
//!    exempt); or, with `--enable-priority-and-fairness`, [`priority_and_fairness`] in its place
//!    (it classifies by the user and the request info);
//! 7. [`authorization`] — 403 with kube's message before reading the body;
//! 8. [`timeout`] — non-long-running requests end with 504 after `--request-timeout`, the
//!    body's upload included (a slow sender cannot keep its in-flight slot);
//! 9. [`body_limit`] — 413 before decoding, and the body read into memory.
//!
//! What a filter learns travels in request extensions, as kube's filters use the request
//! context: [`RequestInfo`](crate::request_info::RequestInfo), [`ErrorOutput`],
//! [`UserInfo`](kapi_auth::UserInfo), and the connection's [`ConnInfo`].

pub mod audit;
pub mod authentication;
pub mod authorization;
pub mod body_limit;
pub mod goaway;
pub mod httplog;
pub mod http_headers;
pub mod impersonation;
pub mod max_in_flight;
pub mod metrics;
pub mod panic_recovery;
pub mod pretty;
pub mod priority_and_fairness;
pub mod shutdown;
pub mod request_info;
pub mod timeout;
pub mod traces;

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use http::{Request, Response};
use hyper::body::Incoming;
use tower::{Layer, ServiceBuilder};

use crate::handler::Router;
use crate::negotiation::Output;
use crate::response::Body;
use crate::state::ApiServer;

/// The future every service in the chain returns.
pub type ResponseFuture = Pin<Box<dyn Future<Output = Result<Response<Body>, Infallible>> + Send>>;

/// What the connection knows about its peer; the listener inserts it into every request of the
/// connection as an `Arc<ConnInfo>` (shared, not copied per request).
#[derive(Debug, Default, Clone)]
pub struct ConnInfo {
    /// Client certificate chain (DER, leaf first) as presented; the verdicts say who issued it.
    pub peer_certificates: Option<Vec<Vec<u8>>>,
    /// The chain against the client CA (x509 authentication).
    pub client_ca: kapi_auth::ChainVerdict,
    /// The chain against the front-proxy CA (request-header authentication).
    pub front_proxy_ca: kapi_auth::ChainVerdict,
    /// The peer's address (audit events' source IPs).
    pub peer: Option<std::net::SocketAddr>,
}

/// The representation errors are written in, negotiated once from `Accept`.
#[derive(Debug, Clone, Copy)]
pub struct ErrorOutput(pub Output);

/// The assembled chain, shareable between connections (the listener installs it once the
/// server is built).
pub type Chain = tower::util::BoxCloneSyncService<Request<Incoming>, Response<Body>, Infallible>;

/// The whole chain in front of the router.
pub fn chain(srv: Arc<ApiServer>) -> Chain {
    let after_limits = ServiceBuilder::new()
        .layer(authorization::AuthorizationLayer::new(srv.clone()))
        .layer(timeout::TimeoutLayer::new(srv.options.request_timeout))
        .layer(body_limit::BodyLimitLayer::new(srv.options.max_body_bytes))
        .service(Router::new(srv.clone()));
    // One of two limiters, chosen once: boxed, both have the type the layers before expect.
    let limited: Chain = match &srv.flow_control {
        Some(fc) => {
            tower::util::BoxCloneSyncService::new(priority_and_fairness::PriorityAndFairnessLayer::new(srv.clone(), fc.clone()).layer(after_limits))
        }
        None => tower::util::BoxCloneSyncService::new(max_in_flight::MaxInFlightLayer::new(srv.clone()).layer(after_limits)),
    };
    let chain = ServiceBuilder::new()
        .layer(panic_recovery::PanicRecoveryLayer::new())
        .layer(http_headers::HeaderLayer::new(srv.options.http_headers.clone()))
        .layer(pretty::PrettyLayer::new())
        .layer(request_info::RequestInfoLayer::new())
        .layer(traces::TracingLayer::new())
        .layer(httplog::HttpLogLayer::new(srv.options.http_log))
        .layer(shutdown::ShutdownLayer::new(srv.clone()))
        .layer(goaway::GoawayLayer::new(srv.options.goaway_chance))
        .layer(metrics::MetricsLayer::new(srv.clone()))
        .layer(authentication::AuthenticationLayer::new(srv.clone()))
        .layer(audit::AuditLayer::new(srv.clone()))
        .layer(impersonation::ImpersonationLayer::new(srv))
        .service(limited);
    tower::util::BoxCloneSyncService::new(chain)
}

/// How long reading and dropping an unwanted request body may take.
const DRAIN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Reads and drops what is left of a request body the server will not use (at most `limit`
/// bytes, for at most [`DRAIN_TIMEOUT`]). Answering without it would drop the body unread, and
/// a client still sending then sees a reset (an HTTP/2 stream error, a broken HTTP/1.1
/// connection) instead of the answer.
pub(crate) async fn drain_body(mut body: Incoming, limit: usize) {
    use http_body_util::BodyExt;
    let drained = async {
        let mut seen = 0usize;
        while let Some(Ok(frame)) = body.frame().await {
            seen += frame.data_ref().map_or(0, |d| d.len());
            if seen > limit {
                break;
            }
        }
    };
    let _ = tokio::time::timeout(DRAIN_TIMEOUT, drained).await;
}

/// Answers a request a filter refuses before reading its body (401, 403, 429, ...): the error
/// in the negotiated representation, after draining up to `body_limit` bytes of the body.
pub(crate) async fn reject(req: Request<Incoming>, body_limit: usize, err: &kapi_apimachinery::ApiError) -> Response<Body> {
    let output = req.extensions().get::<ErrorOutput>().map_or(Output::JSON, |o| o.0);
    drain_body(req.into_body(), body_limit).await;
    crate::response::error(err, output)
}

/// Takes the ready inner service out of `slot`, leaving a fresh clone: tower's rule for calling
/// a clone-able service from a `call` that returns a `'static` future.
pub(crate) fn take_ready<S: Clone>(slot: &mut S) -> S {
    let fresh = slot.clone();
    std::mem::replace(slot, fresh)
}

/// Implements `Service` for a filter whose per-request work is the async fn `$run(self_fields, inner, req)`.
macro_rules! filter_service {
    ($name:ident<$s:ident> { $($field:ident : $ty:ty),* $(,)? }, $body:ty, $run:path) => {
        impl<$s> tower::Service<http::Request<$body>> for $name<$s>
        where
            $s: tower::Service<http::Request<$body>, Response = http::Response<crate::response::Body>, Error = std::convert::Infallible, Future = crate::filters::ResponseFuture>
                + Clone
                + Send
                + 'static,
        {
            type Response = http::Response<crate::response::Body>;
            type Error = std::convert::Infallible;
            type Future = crate::filters::ResponseFuture;

            fn poll_ready(&mut self, cx: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), Self::Error>> {
                self.inner.poll_ready(cx)
            }

            fn call(&mut self, req: http::Request<$body>) -> Self::Future {
                let inner = crate::filters::take_ready(&mut self.inner);
                $(let $field = self.$field.clone();)*
                Box::pin(async move { Ok($run($($field,)* inner, req).await) })
            }
        }
    };
}
pub(crate) use filter_service;

/// Declares a filter: its layer (`$layer::new(fields...)`), its service (`$service<S>`) and the
/// `Service` impl running `$run(fields..., inner, req)`. Filters differ only in `$run`.
macro_rules! filter {
    ($(#[$doc:meta])* $layer:ident => $service:ident { $($field:ident : $ty:ty),* $(,)? }, $body:ty, $run:path) => {
        $(#[$doc])*
        #[derive(Clone)]
        pub struct $layer {
            $($field: $ty,)*
        }

        impl $layer {
            /// The layer with its configuration.
            #[allow(clippy::new_without_default)]
            pub fn new($($field: $ty),*) -> Self {
                Self { $($field,)* }
            }
        }

        impl<S> tower::Layer<S> for $layer {
            type Service = $service<S>;
            fn layer(&self, inner: S) -> Self::Service {
                $service { inner, $($field: self.$field.clone(),)* }
            }
        }

        /// The service of the layer of the same name (see the module docs).
        #[derive(Clone)]
        pub struct $service<S> {
            inner: S,
            $($field: $ty,)*
        }

        crate::filters::filter_service!($service<S> { $($field: $ty),* }, $body, $run);
    };
}
pub(crate) use filter;
