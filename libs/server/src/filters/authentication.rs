//! Who is calling (kube's `WithAuthentication`): the configured authenticator decides (with
//! `--anonymous-auth`, requests without credentials run as `system:anonymous`); anything it
//! does not authenticate is 401 `Unauthorized`, with no reason given to the client.
//!
//! kube's mitigation of HTTP/2 rapid reset (CVE-2023-44487, its
//! UnauthenticatedHTTP2DOSMitigation): an unauthenticated client (401, or the anonymous user)
//! gets its answer and then GOAWAY, so it holds no HTTP/2 connection open to multiplex on: it
//! may use HTTP/2, with the cost of HTTP/1.1 without keep-alive.

use std::sync::Arc;

use http::{Request, Response, Version};
use hyper::body::Incoming;
use kapi_apimachinery::ApiError;
use kapi_auth::{AuthOutcome, AuthRequest};
use tower::ServiceExt;

use super::{filter, ConnInfo};
use crate::response::Body;
use crate::serve::CloseConnection;
use crate::state::ApiServer;

async fn run<S>(srv: Arc<ApiServer>, inner: S, mut req: Request<Incoming>) -> Response<Body>
where
    S: tower::Service<Request<Incoming>, Response = Response<Body>, Error = std::convert::Infallible> + Send,
    S::Future: Send,
{
    let conn = req.extensions().get::<Arc<ConnInfo>>().cloned().unwrap_or_default();
    let auth_request = AuthRequest {
        peer_certificates: conn.peer_certificates.as_deref(),
        client_ca: &conn.client_ca,
        front_proxy_ca: &conn.front_proxy_ca,
        headers: req.headers(),
    };
    // kube's filter span: authentication alone (token webhooks called meanwhile get its trace
    // context).
    let outcome = kapi_otel::traced("authentication", Vec::new, srv.authenticator.authenticate_async(&auth_request)).await;
    let user = match outcome {
        AuthOutcome::Authenticated(user) => {
            srv.metrics.authentication_attempts.with_label_values(&["success"]).inc();
            srv.metrics.authenticated_user(&user.name);
            user
        }
        AuthOutcome::NotApplicable | AuthOutcome::Rejected(_) => {
            let result = match &outcome {
                AuthOutcome::Rejected(reason) => {
                    tracing::debug!(path = req.uri().path(), "unable to authenticate the request: {reason}");
                    "error"
                }
                _ => "failure",
            };
            srv.metrics.authentication_attempts.with_label_values(&[result]).inc();
            let http2 = req.version() == Version::HTTP_2;
            let mut resp = super::reject(req, srv.options.max_body_bytes, &ApiError::unauthorized()).await;
            if http2 {
                resp.extensions_mut().insert(CloseConnection);
            }
            return resp;
        }
    };
    let close = req.version() == Version::HTTP_2 && user.name == kapi_auth::user::ANONYMOUS;
    req.extensions_mut().insert(user);
    let mut resp = match inner.oneshot(req).await {
        Ok(resp) => resp,
        Err(never) => match never {},
    };
    if close {
        resp.extensions_mut().insert(CloseConnection);
    }
    resp
}

filter!(
    /// Authenticates with `srv.authenticator`.
    AuthenticationLayer => WithAuthentication { srv: Arc<ApiServer> },
    Incoming,
    run
);
