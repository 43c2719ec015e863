//! kube's `WithHSTS` and `WithCORS`: `--strict-transport-security-directives` adds a
//! Strict-Transport-Security header to every answer; `--cors-allowed-origins` (regular
//! expressions) lets browsers of matching origins call the API, and answers their preflight
//! OPTIONS requests itself with 204.

use std::sync::Arc;

use http::{HeaderValue, Method, Request, Response, StatusCode};
use hyper::body::Incoming;
use tower::ServiceExt;

use super::filter;
use crate::response::{self, Body};

/// The two headers' configuration.
#[derive(Debug, Default)]
pub struct HeaderPolicy {
    /// `--strict-transport-security-directives`, joined as kube joins them.
    pub hsts: Option<HeaderValue>,
    /// `--cors-allowed-origins`, compiled.
    pub cors: Vec<regex::Regex>,
}

/// kube's defaults for CORS answers.
const ALLOWED_METHODS: &str = "POST, GET, OPTIONS, PUT, DELETE, PATCH";
const ALLOWED_HEADERS: &str = "Content-Type, Content-Length, Accept-Encoding, X-CSRF-Token, Authorization, X-Requested-With, If-Modified-Since";
const EXPOSED_HEADERS: &str = "Date";

impl HeaderPolicy {
    /// Reads the two flags; bad values are refused with kube's texts.
    pub fn from_flags(hsts: &[String], cors: &[String]) -> Result<HeaderPolicy, String> {
        let hsts = if hsts.is_empty() {
            None
        } else {
            for d in hsts {
                let ok = d == "includeSubDomains" || d == "preload" || d.strip_prefix("max-age=").is_some_and(|n| n.parse::<u64>().is_ok());
                if !ok {
                    return Err("--strict-transport-security-directives invalid, allowed values: max-age=expireTime, includeSubDomains, preload. see https://tools.ietf.org/html/rfc6797#section-6.1 for more information".to_owned());
                }
            }
            Some(HeaderValue::from_str(&hsts.join("; ")).map_err(|e| e.to_string())?)
        };
        let cors = cors
            .iter()
            .map(|p| regex::Regex::new(p).map_err(|e| format!("--cors-allowed-origins has an invalid regular expression: {e}")))
            .collect::<Result<_, _>>()?;
        Ok(HeaderPolicy { hsts, cors })
    }

    /// Whether either filter does anything.
    pub fn is_empty(&self) -> bool {
        self.hsts.is_none() && self.cors.is_empty()
    }
}

async fn run<S>(policy: Arc<HeaderPolicy>, inner: S, req: Request<Incoming>) -> Response<Body>
where
    S: tower::Service<Request<Incoming>, Response = Response<Body>, Error = std::convert::Infallible> + Send,
    S::Future: Send,
{
    if policy.is_empty() {
        return match inner.oneshot(req).await {
            Ok(resp) => resp,
            Err(never) => match never {},
        };
    }
    let origin = req.headers().get(http::header::ORIGIN).and_then(|o| o.to_str().ok()).map(str::to_owned);
    let cors_origin = origin.filter(|o| policy.cors.iter().any(|re| re.is_match(o)));
    let preflight = cors_origin.is_some() && req.method() == Method::OPTIONS;
    let mut resp = if preflight {
        let mut resp = Response::new(response::full(bytes::Bytes::new()));
        *resp.status_mut() = StatusCode::NO_CONTENT;
        resp
    } else {
        match inner.oneshot(req).await {
            Ok(resp) => resp,
            Err(never) => match never {},
        }
    };
    let headers = resp.headers_mut();
    if let Some(origin) = cors_origin.and_then(|o| HeaderValue::from_str(&o).ok()) {
        headers.insert(http::header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
        headers.insert(http::header::ACCESS_CONTROL_ALLOW_METHODS, HeaderValue::from_static(ALLOWED_METHODS));
        headers.insert(http::header::ACCESS_CONTROL_ALLOW_HEADERS, HeaderValue::from_static(ALLOWED_HEADERS));
        headers.insert(http::header::ACCESS_CONTROL_EXPOSE_HEADERS, HeaderValue::from_static(EXPOSED_HEADERS));
        headers.insert(http::header::ACCESS_CONTROL_ALLOW_CREDENTIALS, HeaderValue::from_static("true"));
    }
    if let Some(hsts) = &policy.hsts {
        headers.insert(http::header::STRICT_TRANSPORT_SECURITY, hsts.clone());
    }
    resp
}

filter!(
    /// Adds kube's HSTS and CORS headers.
    HeaderLayer => WithHeaders { policy: Arc<HeaderPolicy> },
    Incoming,
    run
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_read_as_kube_reads_them() {
        let p = HeaderPolicy::from_flags(&["max-age=31536000".into(), "includeSubDomains".into(), "preload".into()], &[]).expect("valid");
        assert_eq!(p.hsts.expect("hsts"), "max-age=31536000; includeSubDomains; preload");
        assert!(HeaderPolicy::from_flags(&["max-age=soon".into()], &[]).is_err());
        assert!(HeaderPolicy::from_flags(&[], &["(".into()]).expect_err("bad regex").starts_with("--cors-allowed-origins has an invalid regular expression"));
        assert!(HeaderPolicy::from_flags(&[], &[]).expect("empty").is_empty());
    }
}
