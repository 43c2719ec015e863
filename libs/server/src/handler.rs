//! The request path: kube-apiserver's `DefaultBuildHandlerChain` in one place, outermost first,
//! then the router.
//!
//! Order and why:
//! 1. panic recovery — a bug in one request answers 500 instead of dropping the connection;
//! 2. request info — every later step reads the parsed verb/resource;
//! 3. metrics — times everything after it, including rejected requests;
//! 4. authentication — 401 before any work is done for unknown callers;
//! 5. authorization — 403 with kube's message before reading the body;
//! 6. body limit — 413 before decoding;
//! 7. timeout — non-long-running requests end with 504 after `--request-timeout`.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use futures_util::FutureExt;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use kapi_apimachinery::ApiError;
use kapi_auth::{Attributes, AuthOutcome, AuthRequest, Decision, UserInfo};

use crate::handlers::{discovery, resource, system};
use crate::metrics::{metric_verb, RequestLabels};
use crate::negotiation::{negotiate, Negotiable, Output};
use crate::query::Query;
use crate::request_info::RequestInfo;
use crate::response::{self, Body};
use crate::state::ApiServer;

/// What the connection knows about its peer.
#[derive(Debug, Default, Clone)]
pub struct ConnInfo {
    /// Verified client certificate chain (DER, leaf first), if the client sent one.
    pub peer_certificates: Option<Vec<Vec<u8>>>,
}

/// Paths kube-apiserver's default policy (`system:public-info-viewer`) opens to everyone.
fn is_public(path: &str) -> bool {
    matches!(path, "/healthz" | "/livez" | "/readyz" | "/version" | "/version/")
        || path.starts_with("/healthz/")
        || path.starts_with("/livez/")
        || path.starts_with("/readyz/")
}

fn header_str<'a>(req: &'a Request<Incoming>, name: http::header::HeaderName) -> Option<&'a str> {
    req.headers().get(name).and_then(|v| v.to_str().ok())
}

/// Serves one request through the whole chain.
pub async fn serve(srv: Arc<ApiServer>, conn: Arc<ConnInfo>, req: Request<Incoming>) -> Response<Body> {
    let started = Instant::now();
    let info = RequestInfo::parse(req.method(), req.uri().path(), req.uri().query());
    let method = req.method().clone();
    let dry_run = if Query::parse(req.uri().query()).get("dryRun").is_some() { "All" } else { "" };
    let long_running = info.is_long_running();
    if long_running && info.is_resource_request {
        srv.metrics
            .long_running
            .with_label_values(&[&metric_verb(&method, &info.verb), &info.api_group, &info.api_version, &info.resource, &info.subresource, info.scope(), "apiserver"])
            .inc();
    }
    let result = AssertUnwindSafe(filters(&srv, &conn, &info, req)).catch_unwind().await;
    let resp = match result {
        Ok(resp) => resp,
        Err(panic) => {
            let msg = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "panic".into());
            tracing::error!(path = %info.path, "handler panicked: {msg}");
            response::error(&ApiError::internal("an error on the server has prevented the request from succeeding"), Output::Json)
        }
    };
    if info.is_resource_request {
        if long_running {
            srv.metrics
                .long_running
                .with_label_values(&[&metric_verb(&method, &info.verb), &info.api_group, &info.api_version, &info.resource, &info.subresource, info.scope(), "apiserver"])
                .dec();
        }
        srv.metrics.observe(
            &RequestLabels {
                verb: &metric_verb(&method, &info.verb),
                dry_run,
                group: &info.api_group,
                version: &info.api_version,
                resource: &info.resource,
                subresource: &info.subresource,
                scope: info.scope(),
            },
            resp.status().as_u16(),
            started.elapsed().as_secs_f64(),
        );
    }
    resp
}

fn authenticate(srv: &ApiServer, conn: &ConnInfo, req: &Request<Incoming>) -> Option<UserInfo> {
    let auth_req = AuthRequest { peer_certificates: conn.peer_certificates.as_deref(), headers: req.headers() };
    match srv.authenticator.authenticate(&auth_req) {
        AuthOutcome::Authenticated(user) => Some(user),
        AuthOutcome::NotApplicable | AuthOutcome::Rejected(_) => None,
    }
}

/// kube's forbidden message: `pods is forbidden: User "alice" cannot list resource "pods" in API
/// group "" in the namespace "b"`.
fn forbidden_message(info: &RequestInfo, user: &UserInfo, reason: &str) -> String {
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

async fn filters(srv: &Arc<ApiServer>, conn: &ConnInfo, info: &RequestInfo, req: Request<Incoming>) -> Response<Body> {
    let accept = header_str(&req, http::header::ACCEPT).map(str::to_owned);
    let err_output = negotiate(accept.as_deref(), Negotiable::Resource).unwrap_or(Output::Json);
    let user = authenticate(srv, conn, &req);
    let Some(user) = user.or_else(|| {
        is_public(info.path.as_str()).then(|| UserInfo {
            name: "system:anonymous".into(),
            uid: String::new(),
            groups: vec!["system:unauthenticated".into()],
            extra: Default::default(),
        })
    }) else {
        return response::error(&ApiError::unauthorized(), err_output);
    };
    if !is_public(&info.path) {
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
        match srv.authorizer.authorize(&attrs) {
            Decision::Allow => {}
            Decision::Deny(reason) => {
                return response::error(&ApiError::forbidden(forbidden_message(info, &user, &reason)), err_output)
            }
            Decision::NoOpinion => return response::error(&ApiError::forbidden(forbidden_message(info, &user, "")), err_output),
        }
    }
    let (parts, body) = req.into_parts();
    let body = if matches!(parts.method, Method::POST | Method::PUT | Method::PATCH | Method::DELETE) {
        match Limited::new(body, srv.options.max_body_bytes).collect().await {
            Ok(b) => b.to_bytes(),
            Err(e) if e.downcast_ref::<http_body_util::LengthLimitError>().is_some() => {
                return response::error(&ApiError::too_large(srv.options.max_body_bytes), err_output)
            }
            Err(e) => return response::error(&ApiError::bad_request(format!("error reading the request body: {e}")), err_output),
        }
    } else {
        Bytes::new()
    };
    let route = route(srv, info, &parts, accept.as_deref(), body);
    if info.is_long_running() {
        return route.await;
    }
    match tokio::time::timeout(srv.options.request_timeout, route).await {
        Ok(resp) => resp,
        Err(_) => response::error(
            &ApiError::timeout("request did not complete within the allotted timeout"),
            err_output,
        ),
    }
}

async fn route(srv: &Arc<ApiServer>, info: &RequestInfo, parts: &http::request::Parts, accept: Option<&str>, body: Bytes) -> Response<Body> {
    let query = Query::parse(parts.uri.query());
    let path = info.path.trim_end_matches('/');
    let content_type = parts.headers.get(http::header::CONTENT_TYPE).and_then(|v| v.to_str().ok());
    if info.is_resource_request && !info.parts.is_empty() {
        return resource::handle(srv, info, &parts.method, &query, accept, content_type, body).await;
    }
    let is_get = matches!(parts.method, Method::GET | Method::HEAD);
    let discovery_doc = |doc: Option<serde_json::Value>, aggregated: Option<serde_json::Value>| -> Response<Body> {
        if !is_get {
            return response::error(&ApiError::new(405, kapi_apimachinery::StatusReason::MethodNotAllowed, "the server does not allow this method on the requested resource"), Output::Json);
        }
        let output = match negotiate(accept, Negotiable::Discovery) {
            Ok(o) => o,
            Err(e) => return response::error(&e, Output::Json),
        };
        match (output, doc, aggregated) {
            (Output::DiscoveryV2, _, Some(agg)) => response::object(StatusCode::OK, &agg, Output::DiscoveryV2),
            (Output::DiscoveryV2, Some(d), None) => response::object(StatusCode::OK, &d, Output::Json),
            (o, Some(d), _) => response::object(StatusCode::OK, &d, o),
            (_, None, _) => response::error(&ApiError::path_not_found(), Output::Json),
        }
    };
    match path {
        "/api" => discovery_doc(Some(discovery::api_versions(&srv.options.external_address)), Some(discovery::aggregated(true))),
        "/apis" => discovery_doc(Some(discovery::api_group_list()), Some(discovery::aggregated(false))),
        _ if info.is_resource_request => discovery_doc(discovery::api_resource_list(&info.api_group, &info.api_version), None),
        _ if path.starts_with("/apis/") && path.matches('/').count() == 2 => {
            discovery_doc(discovery::api_group_doc(&path["/apis/".len()..]), None)
        }
        p if p.starts_with("/openapi/") => crate::handlers::openapi::handle(&srv.openapi, p, &query, accept)
            .unwrap_or_else(|| response::text(StatusCode::NOT_FOUND, "404 page not found\n", "text/plain; charset=utf-8")),
        "/version" => response::object(StatusCode::OK, &system::version(), Output::Json),
        "/metrics" => response::text(StatusCode::OK, srv.metrics.render(), "text/plain; version=0.0.4; charset=utf-8"),
        p if p == "/healthz" || p == "/livez" || p == "/readyz" || p.starts_with("/healthz/") || p.starts_with("/livez/") || p.starts_with("/readyz/") => {
            system::health(srv, p, &query).await
        }
        _ => response::text(StatusCode::NOT_FOUND, "404 page not found\n", "text/plain; charset=utf-8"),
    }
}
