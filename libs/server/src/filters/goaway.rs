//! `--goaway-chance` (kube's `WithProbabilisticGoaway`): HTTP/2 multiplexes every request of a
//! client over one long-lived connection, so behind a TCP load balancer the clients that
//! connected first stay on the replicas they met first, and a replica added later gets no
//! traffic. Closing a small fraction of connections (GOAWAY after the response; streams in
//! flight, watches included, finish undisturbed) makes clients reconnect and spread again.

use http::{Request, Response, Version};
use hyper::body::Incoming;
use tower::ServiceExt;

use super::filter;
use crate::response::Body;
use crate::serve::CloseConnection;

/// The largest accepted `--goaway-chance` (one request in 50), as kube validates it.
pub const MAX_GOAWAY_CHANCE: f64 = 0.02;

async fn run<S>(chance: f64, inner: S, req: Request<Incoming>) -> Response<Body>
where
    S: tower::Service<Request<Incoming>, Response = Response<Body>, Error = std::convert::Infallible> + Send,
    S::Future: Send,
{
    let goaway = req.version() == Version::HTTP_2 && chance > 0.0 && rand::random::<f64>() < chance;
    let mut resp = match inner.oneshot(req).await {
        Ok(resp) => resp,
        Err(never) => match never {},
    };
    if goaway {
        resp.extensions_mut().insert(CloseConnection);
    }
    resp
}

filter!(
    /// Sends GOAWAY after a `chance` fraction of HTTP/2 responses.
    GoawayLayer => ProbabilisticGoaway { chance: f64 },
    Incoming,
    run
);
