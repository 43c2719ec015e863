//! Who is calling (kube's `WithAuthentication`): the union authenticator decides; paths the
//! default policy opens to everyone are served to anonymous callers; anything else is 401.

use std::sync::Arc;

use http::{Request, Response};
use hyper::body::Incoming;
use kapi_apimachinery::ApiError;
use kapi_auth::{AuthOutcome, AuthRequest, UserInfo};
use tower::ServiceExt;

use super::{filter, ConnInfo, ErrorOutput};
use crate::negotiation::Output;
use crate::response::{self, Body};
use crate::state::ApiServer;

/// Paths kube-apiserver's default policy (`system:public-info-viewer`) opens to everyone.
pub fn is_public(path: &str) -> bool {
    matches!(path, "/healthz" | "/livez" | "/readyz" | "/version" | "/version/")
        || path.starts_with("/healthz/")
        || path.starts_with("/livez/")
        || path.starts_with("/readyz/")
}

fn anonymous() -> UserInfo {
    UserInfo {
        name: "system:anonymous".into(),
        uid: String::new(),
        groups: vec!["system:unauthenticated".into()],
        extra: Default::default(),
    }
}

async fn run<S>(srv: Arc<ApiServer>, inner: S, mut req: Request<Incoming>) -> Response<Body>
where
    S: tower::Service<Request<Incoming>, Response = Response<Body>, Error = std::convert::Infallible> + Send,
    S::Future: Send,
{
    let conn = req.extensions().get::<Arc<ConnInfo>>();
    let outcome = match conn.and_then(|c| c.rejected_certificate.as_ref()) {
        Some(reason) => AuthOutcome::Rejected(reason.clone()),
        None => srv.authenticator.authenticate(&AuthRequest {
            peer_certificates: conn.and_then(|c| c.peer_certificates.as_deref()),
            headers: req.headers(),
        }),
    };
    let user = match outcome {
        AuthOutcome::Authenticated(user) => user,
        AuthOutcome::NotApplicable | AuthOutcome::Rejected(_) if is_public(req.uri().path()) => anonymous(),
        AuthOutcome::NotApplicable | AuthOutcome::Rejected(_) => {
            let output = req.extensions().get::<ErrorOutput>().map_or(Output::JSON, |o| o.0);
            return response::error(&ApiError::unauthorized(), output);
        }
    };
    req.extensions_mut().insert(user);
    match inner.oneshot(req).await {
        Ok(resp) => resp,
        Err(never) => match never {},
    }
}

filter!(
    /// Authenticates with `srv.authenticator`.
    AuthenticationLayer => WithAuthentication { srv: Arc<ApiServer> },
    Incoming,
    run
);
