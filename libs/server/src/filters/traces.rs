//! The request's span (kube's `WithTracing`, its otelhttp handler): with
//! `--tracing-config-file`, each request gets a server span whose parent is the client's W3C
//! trace context (`traceparent`, `tracestate`) when it sends one, sampled
//! `ParentBased(TraceIDRatioBased)`, so a client's sampled request is always traced. The rest
//! of the chain runs inside it: the spans of authentication, authorization, handlers, storage,
//! admission and encoding are its descendants, and webhooks called meanwhile receive its trace
//! context.
//!
//! Names and attributes are kube's: `GET /api/v1/namespaces/{:namespace}/pods/{:name}` for
//! resource requests (the method alone for others); `http.method`, `http.target`,
//! `http.scheme`, `http.flavor`, `http.user_agent`, `net.sock.peer.addr`, `http.status_code`
//! and the `audit-id`. The span starts when the request arrived and ends when its answer's
//! head is ready (a watch's span covers its set-up, not the whole stream).
//!
//! Without a tracer installed the filter only passes the request on.

use std::sync::Arc;
use std::time::SystemTime;

use http::{Request, Response, Version};
use hyper::body::Incoming;
use kapi_otel::{KeyValue, Span};
use tower::ServiceExt;

use super::{filter, ConnInfo};
use crate::request_info::RequestInfo;
use crate::response::Body;

/// kube's span name: the method and the request's route, with namespace and name as
/// placeholders so that names group requests.
fn span_name(method: &http::Method, info: Option<&RequestInfo>) -> String {
    let Some(info) = info.filter(|i| i.is_resource_request) else { return method.as_str().to_owned() };
    let mut name = format!("{method} /{}", info.api_prefix);
    if !info.api_group.is_empty() {
        name.push('/');
        name.push_str(&info.api_group);
    }
    name.push('/');
    name.push_str(&info.api_version);
    if !info.namespace.is_empty() {
        name.push_str("/namespaces/{:namespace}");
    }
    if !info.resource.is_empty() {
        name.push('/');
        name.push_str(&info.resource);
    }
    if !info.name.is_empty() {
        name.push_str("/{:name}");
    }
    if !info.subresource.is_empty() {
        name.push('/');
        name.push_str(&info.subresource);
    }
    name
}

fn flavor(version: Version) -> &'static str {
    match version {
        Version::HTTP_2 => "2",
        Version::HTTP_10 => "1.0",
        _ => "1.1",
    }
}

fn start(req: &Request<Incoming>) -> Option<Span> {
    let received = SystemTime::now();
    let parent = kapi_otel::extract(req.headers());
    let target = req.uri().path_and_query().map_or_else(|| req.uri().path().to_owned(), |p| p.as_str().to_owned());
    let mut attributes = vec![
        KeyValue::new("http.method", req.method().as_str().to_owned()),
        KeyValue::new("http.target", target),
        KeyValue::new("http.scheme", "https"),
        KeyValue::new("http.flavor", flavor(req.version())),
    ];
    if let Some(agent) = req.headers().get(http::header::USER_AGENT).and_then(|v| v.to_str().ok()) {
        attributes.push(KeyValue::new("http.user_agent", agent.to_owned()));
    }
    if let Some(peer) = req.extensions().get::<Arc<ConnInfo>>().and_then(|c| c.peer) {
        attributes.push(KeyValue::new("net.sock.peer.addr", peer.ip().to_string()));
    }
    let name = span_name(req.method(), req.extensions().get::<RequestInfo>());
    Span::server(name, &parent, received, attributes).filter(Span::is_recording)
}

async fn run<S>(inner: S, req: Request<Incoming>) -> Response<Body>
where
    S: tower::Service<Request<Incoming>, Response = Response<Body>, Error = std::convert::Infallible> + Send,
    S::Future: Send,
{
    let span = if kapi_otel::enabled() { start(&req) } else { None };
    let Some(span) = span else {
        return match inner.oneshot(req).await {
            Ok(resp) => resp,
            Err(never) => match never {},
        };
    };
    let resp = match span.run(inner.oneshot(req)).await {
        Ok(resp) => resp,
        Err(never) => match never {},
    };
    let code = resp.status().as_u16();
    span.set_attribute(KeyValue::new("http.status_code", i64::from(code)));
    if let Some(id) = resp.headers().get("audit-id").and_then(|v| v.to_str().ok()) {
        span.set_attribute(KeyValue::new("audit-id", id.to_owned()));
    }
    if code >= 500 {
        span.set_error(format!("HTTP {code}"));
    }
    resp
}

filter!(
    /// Runs each request inside its span when a tracer is installed.
    TracingLayer => WithTracing {  },
    Incoming,
    run
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn span_names_are_kube_routes() {
        let name = |method: &str, path: &str| {
            let method: http::Method = method.parse().unwrap();
            span_name(&method, Some(&RequestInfo::parse(&method, path, None)))
        };
        assert_eq!(name("POST", "/api/v1/namespaces/default/configmaps"), "POST /api/v1/namespaces/{:namespace}/configmaps");
        assert_eq!(name("GET", "/api/v1/nodes/n1"), "GET /api/v1/nodes/{:name}");
        assert_eq!(
            name("PUT", "/apis/apps/v1/namespaces/a/deployments/d/scale"),
            "PUT /apis/apps/v1/namespaces/{:namespace}/deployments/{:name}/scale"
        );
        assert_eq!(name("GET", "/healthz"), "GET");
        assert_eq!(span_name(&http::Method::GET, None), "GET");
    }
}
