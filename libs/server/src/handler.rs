//! The router behind the filter chain ([`crate::filters`]): resource requests go to the
//! generic resource handler, everything else (discovery, OpenAPI, version, metrics, health) to
//! its own handler.

use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use kapi_apimachinery::ApiError;
use tower::Service;

use crate::filters::ResponseFuture;
use crate::handlers::{discovery, resource, system, Caller};
use kapi_auth::serviceaccount::{CACHE_CONTROL, JWKS_CONTENT_TYPE, JWKS_PATH, OPENID_CONFIG_PATH};
use kapi_auth::UserInfo;
use crate::negotiation::{negotiate, Negotiable, Output, Shape};
use crate::query::Query;
use crate::request_info::RequestInfo;
use crate::response::{self, Body};
use crate::state::ApiServer;

/// The innermost service: reads the [`RequestInfo`] the chain parsed and dispatches.
#[derive(Clone)]
pub struct Router {
    srv: Arc<ApiServer>,
}

impl Router {
    /// Routes to the handlers of `srv`.
    pub fn new(srv: Arc<ApiServer>) -> Self {
        Self { srv }
    }
}

impl Service<Request<Bytes>> for Router {
    type Response = Response<Body>;
    type Error = std::convert::Infallible;
    type Future = ResponseFuture;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<Bytes>) -> Self::Future {
        let srv = self.srv.clone();
        Box::pin(async move {
            let (mut parts, body) = req.into_parts();
            let info = match parts.extensions.remove::<RequestInfo>() {
                Some(info) => info,
                None => RequestInfo::parse(&parts.method, parts.uri.path(), parts.uri.query()),
            };
            // A group version another server owns (an APIService backed by a Service, or a
            // tier of a split deployment) goes there whole, its discovery document included,
            // as kube-aggregator's proxy handler sends it; so do the OpenAPI documents when
            // another tier has them.
            let proxy = if info.is_resource_request {
                srv.chain.proxy(&info.api_group, &info.api_version)
            } else if parts.uri.path().starts_with("/openapi/") {
                srv.chain.openapi_proxy()
            } else {
                None
            };
            if let Some(proxy) = proxy {
                let user = parts.extensions.get::<UserInfo>().cloned().unwrap_or_default();
                let resp = proxy.serve(parts, body, user).await;
                if !info.is_long_running() {
                    return Ok(resp);
                }
                // A proxied watch ends when this server stops taking requests, as its own do.
                let (head, body) = resp.into_parts();
                let stop = srv.lifecycle.not_accepting_new_requests.subscribe();
                return Ok(Response::from_parts(head, response::ending_when(body, stop)));
            }
            let accept = parts.headers.get(http::header::ACCEPT).and_then(|v| v.to_str().ok()).map(str::to_owned);
            Ok(route(&srv, &info, &parts, accept.as_deref(), body).await)
        })
    }
}

async fn route(srv: &Arc<ApiServer>, info: &RequestInfo, parts: &http::request::Parts, accept: Option<&str>, body: Bytes) -> Response<Body> {
    let query = Query::parse(parts.uri.query());
    let path = info.path.trim_end_matches('/');
    let content_type = parts.headers.get(http::header::CONTENT_TYPE).and_then(|v| v.to_str().ok());
    if info.is_resource_request && !info.parts.is_empty() {
        let user_agent = parts.headers.get(http::header::USER_AGENT).and_then(|v| v.to_str().ok());
        let anonymous = UserInfo::default();
        let user = parts.extensions.get::<UserInfo>().unwrap_or(&anonymous);
        return resource::handle(srv, info, &query, accept, content_type, &Caller { user, user_agent, head: parts }, body).await;
    }
    let is_get = matches!(parts.method, Method::GET | Method::HEAD);
    // The documents are built only once negotiation has chosen one (the aggregated one lists
    // every resource, and comes from the chain's cache of derived documents).
    let discovery_doc = |doc: &dyn Fn() -> Option<serde_json::Value>, aggregated: Option<&dyn Fn() -> Arc<serde_json::Value>>| -> Response<Body> {
        if !is_get {
            return response::error(&ApiError::new(405, kapi_apimachinery::StatusReason::MethodNotAllowed, "the server does not allow this method on the requested resource"), Output::JSON);
        }
        let output = match negotiate(accept, Negotiable::Discovery, false) {
            Ok(o) => o,
            Err(e) => return response::error(&e, Output::JSON),
        };
        match (output.shape, aggregated) {
            (Shape::DiscoveryV2, Some(agg)) => response::object(StatusCode::OK, &agg(), Output::DISCOVERY_V2),
            (shape, _) => match doc() {
                Some(d) if shape == Shape::DiscoveryV2 => response::object(StatusCode::OK, &d, Output::JSON),
                Some(d) => response::object(StatusCode::OK, &d, output),
                None => response::error(&ApiError::path_not_found(), Output::JSON),
            },
        }
    };
    if is_get && (path == "/api" || path == "/apis" || path.starts_with("/apis/") || path.starts_with("/api/")) {
        srv.chain.discovery_sync().await;
    }
    match path {
        "/api" => discovery_doc(
            &|| Some(discovery::api_versions(&srv.options.external_address)),
            Some(&|| srv.chain.derived("aggregated /api", |chain| discovery::aggregated(chain, true))),
        ),
        "/apis" => discovery_doc(
            &|| Some(discovery::api_group_list(&srv.chain)),
            Some(&|| srv.chain.derived("aggregated /apis", |chain| discovery::aggregated(chain, false))),
        ),
        _ if info.is_resource_request => discovery_doc(&|| discovery::api_resource_list(&srv.chain, &info.api_group, &info.api_version), None),
        _ if path.starts_with("/apis/") && path.matches('/').count() == 2 => {
            discovery_doc(&|| discovery::api_group_doc(&srv.chain, &path["/apis/".len()..]), None)
        }
        p if p.starts_with("/openapi/") => {
            // A document stale after a CRD change is rebuilt on first read (the whole v2 with
            // thousands of CRDs takes a while): off the async workers.
            let (openapi, p, accept) = (srv.openapi.clone(), p.to_owned(), accept.map(str::to_owned));
            let answer = tokio::task::spawn_blocking(move || crate::handlers::openapi::handle(&openapi, &p, &query, accept.as_deref())).await;
            match answer {
                Ok(Some(resp)) => resp,
                Ok(None) => response::text(StatusCode::NOT_FOUND, "404 page not found\n", "text/plain; charset=utf-8"),
                Err(e) => response::error(&ApiError::internal(format!("building the OpenAPI document: {e}")), Output::JSON),
            }
        }
        "/version" => system::respond(),
        OPENID_CONFIG_PATH | JWKS_PATH => oidc_document(srv, path, is_get),
        "/metrics" | "/metrics/slis" => crate::metrics::respond(srv, path),
        _ if parts.uri.path().starts_with(crate::flow_control::debug::PREFIX) => {
            crate::flow_control::debug::respond(srv.flow_control.as_deref(), parts.uri.path(), &query)
        }
        p if p == "/healthz" || p == "/livez" || p == "/readyz" || p.starts_with("/healthz/") || p.starts_with("/livez/") || p.starts_with("/readyz/") => {
            crate::health::respond(&srv.health, p, &query).await
        }
        _ => response::text(StatusCode::NOT_FOUND, "404 page not found\n", "text/plain; charset=utf-8"),
    }
}

/// The service-account issuer's discovery documents (kube's `/.well-known/openid-configuration`
/// and `/openid/v1/jwks`), cacheable for an hour; 404 when the issuer is not an https URL.
fn oidc_document(srv: &ApiServer, path: &str, is_get: bool) -> Response<Body> {
    let Some(metadata) = srv.service_accounts.metadata.as_ref() else {
        return response::text(StatusCode::NOT_FOUND, "404 page not found\n", "text/plain; charset=utf-8");
    };
    if !is_get {
        return response::error(&ApiError::new(405, kapi_apimachinery::StatusReason::MethodNotAllowed, "the server does not allow this method on the requested resource"), Output::JSON);
    }
    let (doc, content_type) = if path == JWKS_PATH {
        (metadata.jwks(), JWKS_CONTENT_TYPE)
    } else {
        (metadata.configuration(), "application/json")
    };
    let mut resp = response::text(StatusCode::OK, doc.to_string(), content_type);
    resp.headers_mut().insert(http::header::CACHE_CONTROL, http::HeaderValue::from_static(CACHE_CONTROL));
    resp
}
