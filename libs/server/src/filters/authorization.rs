//! May they (kube's `WithAuthorization`): the authorizer decides on the request's attributes;
//! a denial is 403 with kube-apiserver's message.

use std::sync::Arc;

use http::{Request, Response};
use hyper::body::Incoming;
use kapi_apimachinery::{ApiError, GroupResource};
use kapi_auth::{Attributes, Decision, UserInfo};
use tower::ServiceExt;

use super::filter;
use crate::negotiation::Output;
use crate::request_info::RequestInfo;
use crate::response::{self, Body};
use crate::state::ApiServer;

/// kube's `responsewriters.Forbidden`: `pods "x" is forbidden: User "alice" cannot get
/// resource "pods" in API group "" in the namespace "b"`, plus `: <reason>` when the authorizer
/// gave one.
pub fn forbidden(info: &Attributes, reason: &str) -> ApiError {
    let user = &info.user;
    let mut msg = if info.resource_request {
        let resource = if info.subresource.is_empty() { info.resource.clone() } else { format!("{}/{}", info.resource, info.subresource) };
        let mut m = format!(
            "User \"{}\" cannot {} resource \"{resource}\" in API group \"{}\"",
            user.name, info.verb, info.api_group
        );
        if info.namespace.is_empty() {
            m.push_str(" at the cluster scope");
        } else {
            m.push_str(&format!(" in the namespace \"{}\"", info.namespace));
        }
        m
    } else {
        format!("User \"{}\" cannot {} path \"{}\"", user.name, info.verb, info.path)
    };
    if !reason.is_empty() {
        msg.push_str(&format!(": {reason}"));
    }
    let gr = if info.resource_request { GroupResource::new(&info.api_group, &info.resource) } else { GroupResource::new("", "") };
    ApiError::forbidden_for(&gr, &info.name, &msg)
}

/// The authorizer's view of a request.
pub fn attributes(info: &RequestInfo, user: &UserInfo) -> Attributes {
    Attributes {
        user: user.clone(),
        verb: info.verb.clone(),
        namespace: info.namespace.clone(),
        api_group: info.api_group.clone(),
        api_version: info.api_version.clone(),
        resource: info.resource.clone(),
        subresource: info.subresource.clone(),
        name: list_name(info),
        resource_request: info.is_resource_request,
        path: info.path.clone(),
        field_selector: info.field_selector.clone(),
    }
}

/// The object name: the path's, or for a list or watch without one (not the legacy `/watch/`
/// path) the name its field selector requires (`metadata.name=x`), as kube's
/// RequestInfoFactory gives authorizers; so a kubelet may list its own Node, and RBAC rules
/// with `resourceNames` cover such lists.
fn list_name(info: &RequestInfo) -> String {
    if !info.name.is_empty() || !matches!(info.verb.as_str(), "list" | "watch") || info.parts.first().is_some_and(|p| p == "watch") {
        return info.name.clone();
    }
    kapi_apimachinery::fields::FieldSelector::parse(&info.field_selector)
        .ok()
        .and_then(|s| s.requires_exact_match("metadata.name").map(str::to_owned))
        .filter(|name| !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '%']))
        .unwrap_or_default()
}

async fn run<S>(srv: Arc<ApiServer>, inner: S, req: Request<Incoming>) -> Response<Body>
where
    S: tower::Service<Request<Incoming>, Response = Response<Body>, Error = std::convert::Infallible> + Send,
    S::Future: Send,
{
    let (Some(info), Some(user)) = (req.extensions().get::<RequestInfo>(), req.extensions().get::<UserInfo>()) else {
        return response::error(&ApiError::internal("request reached authorization without its request info or user"), Output::JSON);
    };
    let attrs = attributes(info, user);
    // kube's filter span: the decision alone (webhook authorizers called meanwhile get its
    // trace context).
    let decision = kapi_otel::traced("authorization", Vec::new, srv.authorizer.authorize_async(&attrs)).await;
    // kube's audit annotations of the decision.
    if let Some(audit) = req.extensions().get::<super::audit::AuditHandle>() {
        audit.annotate("authorization.k8s.io/decision", if decision.is_allowed() { "allow" } else { "forbid" });
        if !decision.reason().is_empty() {
            audit.annotate("authorization.k8s.io/reason", decision.reason());
        }
    }
    let denied = match decision {
        Decision::Allow(_) => None,
        Decision::Deny(reason) | Decision::NoOpinion(reason) => Some(forbidden(&attrs, &reason)),
    };
    let label = if denied.is_some() { "denied" } else { "allowed" };
    srv.metrics.authorization_decisions.with_label_values(&[label]).inc();
    if let Some(err) = denied {
        return super::reject(req, srv.options.max_body_bytes, &err).await;
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

#[cfg(test)]
mod tests {
    use super::*;
    use http::Method;

    #[test]
    fn lists_take_their_name_from_a_metadata_name_selector() {
        let user = UserInfo::new("system:node:n1", ["system:nodes"]);
        let info = RequestInfo::parse(&Method::GET, "/api/v1/nodes", Some("fieldSelector=metadata.name%3Dn1&watch=true"));
        let attrs = attributes(&info, &user);
        assert_eq!((attrs.verb.as_str(), attrs.name.as_str(), attrs.field_selector.as_str()), ("watch", "n1", "metadata.name=n1"));
        let pods = attributes(&RequestInfo::parse(&Method::GET, "/api/v1/pods", Some("fieldSelector=spec.nodeName%3Dn1")), &user);
        assert_eq!((pods.name.as_str(), pods.field_selector.as_str()), ("", "spec.nodeName=n1"));
        // The legacy watch path and writes keep the path's name.
        assert_eq!(attributes(&RequestInfo::parse(&Method::GET, "/api/v1/watch/nodes", Some("fieldSelector=metadata.name%3Dn1")), &user).name, "");
        assert_eq!(attributes(&RequestInfo::parse(&Method::DELETE, "/api/v1/nodes", Some("fieldSelector=metadata.name%3Dn1")), &user).name, "");
    }
}
