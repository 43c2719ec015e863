//! Who is calling (kube's `WithAuthentication`): the configured authenticator decides (with
//! `--anonymous-auth`, requests without credentials run as `system:anonymous`); anything it
//! does not authenticate is 401 `Unauthorized`, with no reason given to the client.

use std::sync::Arc;

use http::{Request, Response};
use hyper::body::Incoming;
use kapi_apimachinery::ApiError;
use kapi_auth::{AuthOutcome, AuthRequest};
use tower::ServiceExt;

use super::{filter, ConnInfo};
use crate::response::Body;
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
    let outcome = srv.authenticator.authenticate_async(&auth_request).await;
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
            return super::reject(req, srv.options.max_body_bytes, &ApiError::unauthorized()).await;
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
