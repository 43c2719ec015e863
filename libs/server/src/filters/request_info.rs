//! Parses the request once into [`RequestInfo`] and the error representation, for every later
//! filter (kube's `WithRequestInfo`).

use http::{Request, Response};
use hyper::body::Incoming;
use tower::ServiceExt;

use super::{filter, ErrorOutput};
use crate::negotiation::{negotiate, Negotiable, Output};
use crate::request_info::RequestInfo;
use crate::response::Body;

async fn run<S>(inner: S, mut req: Request<Incoming>) -> Response<Body>
where
    S: tower::Service<Request<Incoming>, Response = Response<Body>, Error = std::convert::Infallible> + Send,
    S::Future: Send,
{
    let info = RequestInfo::parse(req.method(), req.uri().path(), req.uri().query());
    let accept = req.headers().get(http::header::ACCEPT).and_then(|v| v.to_str().ok());
    // Status errors have a protobuf encoding, so protobuf clients get them in protobuf.
    let output = negotiate(accept, Negotiable::Resource, true).map(Output::plain).unwrap_or(Output::JSON);
    req.extensions_mut().insert(info);
    req.extensions_mut().insert(ErrorOutput(output));
    match inner.oneshot(req).await {
        Ok(resp) => resp,
        Err(never) => match never {},
    }
}

filter!(
    /// Parses the request once for every later filter.
    RequestInfoLayer => WithRequestInfo {  },
    Incoming,
    run
);
