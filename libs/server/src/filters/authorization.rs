//! May they (kube's `WithAuthorization`): the authorizer decides on the request's attributes;
//! a denial is 403 with kube-apiserver's message.

use std::sync::Arc;

use http::{Request, Response};
use hyper::body::Incoming;
use kapi_apimachinery::ApiError;
use kapi_auth::{Attributes, Decision, UserInfo};
use tower::ServiceExt;

use super::authentication::is_public;
use super::{filter, ErrorOutput};
use crate::negotiation::Output;
use crate::request_info::RequestInfo;
use crate::response::{self, Body};
use crate::state::ApiServer;

/// kube's forbidden message: `pods is forbidden: User "alice" cannot list resource "pods" in API
/// group "" in the namespace "b"`.
pub fn forbidden_message(info: &RequestInfo, user: &UserInfo, reason: &str) -> String {
    let mut msg = if info.is_resource_request {
        let resource = if info.subresource.is_empty() { info.resource.clone() } else { format!("{}/{}", info.resource, info.subresource) };
        let object = if info.name.is_empty() { resource.clone() } else { format!("{resource} \"{}\"", info.name) };
        let mut m = format!(
            "{object} is forbidden: User \"{}\" cannot {} resource \"{resource}\" in API group \"{}\"",
            user.name, info.verb, info.api_group
        );
        if info.namespace.is_empty() {
            m.push_str(" at the cluster scope");
        } else {
            m.push_str(&format!(" in the namespace \"{}\"", info.namespace));
        }
        m
    } else {
        format!("forbidden: User \"{}\" cannot {} path \"{}\"", user.name, info.verb, info.path)
    };
    if !reason.is_empty() {
        msg.push_str(&format!(": {reason}"));
    }
    msg
}

async fn run<S>(srv: Arc<ApiServer>, inner: S, req: Request<Incoming>) -> Response<Body>
where
    S: tower::Service<Request<Incoming>, Response = Response<Body>, Error = std::convert::Infallible> + Send,
    S::Future: Send,
{
    if !is_public(req.uri().path()) {
        let (Some(info), Some(user)) = (req.extensions().get::<RequestInfo>(), req.extensions().get::<UserInfo>()) else {
            return response::error(&ApiError::internal("request reached authorization without its request info or user"), Output::JSON);
        };
        let attrs = Attributes {
            user: user.clone(),
            verb: info.verb.clone(),
            namespace: info.namespace.clone(),
            api_group: info.api_group.clone(),
            api_version: info.api_version.clone(),
            resource: info.resource.clone(),
            subresource: info.subresource.clone(),
            name: info.name.clone(),
            resource_request: info.is_resource_request,
            path: info.path.clone(),
        };
        let denied = match srv.authorizer.authorize(&attrs) {
            Decision::Allow => None,
            Decision::Deny(reason) => Some(forbidden_message(info, user, &reason)),
            Decision::NoOpinion => Some(forbidden_message(info, user, "")),
        };
        if let Some(message) = denied {
            let output = req.extensions().get::<ErrorOutput>().map_or(Output::JSON, |o| o.0);
            return response::error(&ApiError::forbidden(message), output);
        }
    }
    match inner.oneshot(req).await {
        Ok(resp) => resp,
        Err(never) => match never {},
    }
}

filter!(
    /// Authorizes with `srv.authorizer`.
    AuthorizationLayer => WithAuthorization { srv: Arc<ApiServer> },
    Incoming,
    run
);
