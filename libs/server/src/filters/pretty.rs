//! Pretty printing, as kube-apiserver decides it when it picks a serializer
//! (`negotiation.isPrettyPrint`): answers in negotiated JSON are indented when the query says
//! `pretty=<true>` (Go's `strconv.ParseBool`; a value it cannot read means false, an empty one
//! means "not said"), or, when the query does not say, when the User-Agent is a human's tool
//! (`curl`, `Wget`, a browser's `Mozilla/5.0`), or when the negotiated media type carries
//! `pretty=1`. Handlers mark the answers kube writes with a negotiated serializer
//! ([`NegotiatedJson`]); watch streams, OpenAPI documents and protobuf or YAML answers are never
//! indented, as in kube. Re-indenting here, after the handler, keeps the choice out of every
//! handler and filter that writes a Status.

use http::{HeaderMap, Request, Response};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use kapi_apimachinery::media::parse_accept;
use tower::ServiceExt;

use super::filter;
use crate::query::Query;
use crate::response::{full, indent_json, Body, NegotiatedJson};

async fn run<S>(inner: S, req: Request<Incoming>) -> Response<Body>
where
    S: tower::Service<Request<Incoming>, Response = Response<Body>, Error = std::convert::Infallible> + Send,
    S::Future: Send,
{
    let pretty = wants_pretty(req.uri().query(), req.headers());
    let resp = match inner.oneshot(req).await {
        Ok(resp) => resp,
        Err(never) => match never {},
    };
    if !pretty || resp.extensions().get::<NegotiatedJson>().is_none() {
        return resp;
    }
    let (parts, body) = resp.into_parts();
    let compact = match body.collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(never) => match never {},
    };
    Response::from_parts(parts, full(indent_json(&compact)))
}

/// Whether the request asks for indented JSON (see the module docs).
pub fn wants_pretty(query: Option<&str>, headers: &HeaderMap) -> bool {
    let said = query.filter(|q| q.contains("pretty")).and_then(|q| Query::parse(Some(q)).get("pretty").map(str::to_owned));
    if let Some(value) = said.filter(|v| !v.is_empty()) {
        return matches!(value.as_str(), "1" | "t" | "T" | "TRUE" | "true" | "True");
    }
    let header = |name| headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or("");
    let agent = header(http::header::USER_AGENT);
    if ["curl", "Wget", "Mozilla/5.0"].iter().any(|p| agent.starts_with(p)) {
        return true;
    }
    parse_accept(header(http::header::ACCEPT))
        .iter()
        .any(|r| r.params.iter().any(|(k, v)| k.eq_ignore_ascii_case("pretty") && v == "1"))
}

filter!(
    /// Indents negotiated JSON answers for clients that ask for it.
    PrettyLayer => WithPretty {  },
    Incoming,
    run
);

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn headers(agent: &str, accept: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(http::header::USER_AGENT, HeaderValue::from_str(agent).unwrap());
        h.insert(http::header::ACCEPT, HeaderValue::from_str(accept).unwrap());
        h
    }

    #[test]
    fn kube_rules() {
        let kubectl = headers("kubectl/v1.36.4 (linux/amd64) kubernetes/abc", "application/json");
        let curl = headers("curl/8.5.0", "*/*");
        assert!(!wants_pretty(None, &kubectl));
        assert!(wants_pretty(Some("pretty=true"), &kubectl));
        assert!(wants_pretty(Some("limit=1&pretty=1"), &kubectl));
        assert!(wants_pretty(Some("pretty=T"), &kubectl));
        // A value ParseBool cannot read is false; an empty one leaves the choice to the agent.
        assert!(!wants_pretty(Some("pretty=yes"), &curl));
        assert!(wants_pretty(Some("pretty="), &curl));
        assert!(wants_pretty(None, &curl));
        assert!(!wants_pretty(Some("pretty=false"), &curl));
        assert!(!wants_pretty(Some("pretty=0"), &headers("Mozilla/5.0 (X11)", "")));
        assert!(wants_pretty(None, &headers("Wget/1.21", "")));
        assert!(!wants_pretty(None, &headers("wget/1.21", "")));
        assert!(wants_pretty(None, &headers("python-requests", "application/json;pretty=1")));
    }

    #[test]
    fn indents_as_go_marshal_indent() {
        let compact = br#"{"kind":"Status","metadata":{},"items":[],"list":[1,{"a":"x,y:{}"}],"s":"q\"}"}"#;
        let want = "{\n  \"kind\": \"Status\",\n  \"metadata\": {},\n  \"items\": [],\n  \"list\": [\n    1,\n    {\n      \"a\": \"x,y:{}\"\n    }\n  ],\n  \"s\": \"q\\\"}\"\n}";
        assert_eq!(String::from_utf8(indent_json(&[&compact[..], b"\n"].concat())).unwrap(), want);
    }
}
