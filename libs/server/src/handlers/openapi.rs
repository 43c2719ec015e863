//! `/openapi/v2` and `/openapi/v3[/<group version>]`, which kubectl reads for `explain` and to
//! learn that the server validates fields itself (then it sends `fieldValidation=Strict`).

use http::{header, HeaderValue, StatusCode};
use kapi_apimachinery::media::parse_accept;
use kapi_openapi::{OpenApi, ServedResource};
use kapi_registry::catalog;

use crate::query::Query;
use crate::response::{self, Body};

/// The served resources in the shape the OpenAPI builder wants.
pub fn served_resources() -> Vec<ServedResource> {
    catalog::resources()
        .iter()
        .map(|r| ServedResource {
            group: r.group.to_owned(),
            version: r.version.to_owned(),
            kind: r.kind.to_owned(),
            resource: r.resource.to_owned(),
            namespaced: r.namespaced,
            verbs: r.verbs.iter().map(|v| (*v).to_owned()).collect(),
            subresources: r.subresources.iter().map(|s| s.name.to_owned()).collect(),
            delete_returns_object: kapi_registry::semantics::lookup(r.group, r.resource).openapi_delete_returns_object,
        })
        .collect()
}

/// The gnostic protobuf media types of the v2 document. Clients still ask for the `@v1.0`
/// spelling, which is not a valid media type for Go's parser, so the answer carries the
/// `.v1.0` one (as kube-openapi does).
const V2_PROTOBUF: &[&str] =
    &["application/com.github.proto-openapi.spec.v2.v1.0+protobuf", "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"];

/// Whether the client's first acceptable type for the v2 document is gnostic protobuf. Matched
/// on the raw header: the `@` in the media type is not a token character for strict parsers.
fn prefers_v2_protobuf(accept: Option<&str>) -> bool {
    let Some(accept) = accept else { return false };
    for range in accept.split(',') {
        let mut parts = range.split(';');
        let essence = parts.next().unwrap_or("").trim().to_ascii_lowercase();
        let refused = parts.any(|p| matches!(p.trim().replace(' ', "").as_str(), "q=0" | "q=0.0" | "q=0.00" | "q=0.000"));
        if refused {
            continue;
        }
        if V2_PROTOBUF.contains(&essence.as_str()) {
            return true;
        }
        if matches!(essence.as_str(), "application/json" | "application/*" | "*/*") {
            return false;
        }
    }
    false
}

/// Whether the client accepts JSON.
fn accepts_json(accept: Option<&str>) -> bool {
    let Some(accept) = accept.filter(|a| !a.trim().is_empty()) else { return true };
    parse_accept(accept).iter().any(|r| {
        matches!((r.type_.as_str(), r.subtype.as_str()), ("application", "json") | ("application", "*") | ("*", "*"))
    })
}

fn not_acceptable() -> http::Response<Body> {
    response::text(StatusCode::NOT_ACCEPTABLE, "406 Not Acceptable: only application/json is served\n", "text/plain; charset=utf-8")
}

fn json_document(bytes: bytes::Bytes) -> http::Response<Body> {
    let mut resp = http::Response::new(response::full(bytes));
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp
}

/// Serves an OpenAPI path; None when `path` is not one.
pub fn handle(openapi: &OpenApi, path: &str, query: &Query, accept: Option<&str>) -> Option<http::Response<Body>> {
    let path = path.trim_end_matches('/');
    if path == "/openapi/v2" {
        if prefers_v2_protobuf(accept) {
            let mut resp = http::Response::new(response::full(openapi.v2_protobuf()));
            resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(V2_PROTOBUF[0]));
            return Some(resp);
        }
        return Some(if accepts_json(accept) { json_document(openapi.v2()) } else { not_acceptable() });
    }
    if path == "/openapi/v3" {
        return Some(if accepts_json(accept) { json_document(openapi.v3_index()) } else { not_acceptable() });
    }
    let gv = path.strip_prefix("/openapi/v3/")?;
    let Some(doc) = openapi.v3_group_version(gv) else {
        return Some(response::text(StatusCode::NOT_FOUND, "404 page not found\n", "text/plain; charset=utf-8"));
    };
    if !accepts_json(accept) {
        return Some(not_acceptable());
    }
    let hash = openapi.v3_hash(gv).unwrap_or_default();
    match query.get("hash") {
        // A stale hash: kube redirects to the current document so caches stay immutable.
        Some(asked) if asked != hash => {
            let mut resp = response::text(StatusCode::MOVED_PERMANENTLY, "", "text/plain; charset=utf-8");
            if let Ok(loc) = HeaderValue::from_str(&format!("/openapi/v3/{gv}?hash={hash}")) {
                resp.headers_mut().insert(header::LOCATION, loc);
            }
            Some(resp)
        }
        Some(_) => {
            let mut resp = json_document(doc);
            resp.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("public, immutable"));
            if let Ok(etag) = HeaderValue::from_str(&format!("\"{hash}\"")) {
                resp.headers_mut().insert(header::ETAG, etag);
            }
            Some(resp)
        }
        None => {
            let mut resp = json_document(doc);
            resp.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache, private"));
            if let Ok(etag) = HeaderValue::from_str(&format!("\"{hash}\"")) {
                resp.headers_mut().insert(header::ETAG, etag);
            }
            Some(resp)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_rules() {
        assert!(accepts_json(None));
        assert!(accepts_json(Some("application/json")));
        assert!(accepts_json(Some("application/com.github.proto-openapi.spec.v2@v1.0+protobuf, application/json")));
        assert!(!accepts_json(Some("application/com.github.proto-openapi.spec.v2@v1.0+protobuf")));
        assert!(prefers_v2_protobuf(Some("application/com.github.proto-openapi.spec.v2@v1.0+protobuf")));
        assert!(prefers_v2_protobuf(Some("application/com.github.proto-openapi.spec.v2.v1.0+protobuf, application/json")));
        assert!(!prefers_v2_protobuf(Some("application/json, application/com.github.proto-openapi.spec.v2@v1.0+protobuf")));
        assert!(!prefers_v2_protobuf(None));
    }

    #[test]
    fn served_resources_cover_the_catalog_kinds() {
        let served = served_resources();
        assert!(served.iter().any(|r| r.kind == "Deployment" && r.group == "apps" && r.subresources.contains(&"scale".to_owned())));
        assert!(served.iter().any(|r| r.kind == "ConfigMap" && r.group.is_empty()));
    }
}
