//! kube-aggregator's proxy handler: a request for a group version that an APIService hands to a
//! Service goes to one of the Service's endpoints, as the caller (front-proxy identity headers
//! under the proxy client certificate), and the answer streams back as it comes (watches and
//! long lists are never buffered). Upgrade requests (exec-like streams) pass through.

use std::sync::Arc;

use bytes::Bytes;
use http::{header, HeaderMap, HeaderName, HeaderValue, Request, Response, StatusCode};
use http_body_util::{BodyExt, Empty, Full};
use kapi_auth::UserInfo;
use kapi_server::handlers::pod_connect::proxy::{is_upgrade, splice};
use kapi_server::response::{self, Body};
use kapi_server::tier::{Proxy, TierFuture};
use kapi_webhook::ServiceResolver;

use crate::apiservice::ApiService;
use crate::transport::Transport;

/// Headers of one hop only (RFC 9110 7.6.1), and what the proxy itself sets.
const HOP_BY_HOP: &[&str] = &["connection", "keep-alive", "proxy-connection", "proxy-authenticate", "proxy-authorization", "te", "trailer", "transfer-encoding", "upgrade"];

/// What happens to a failed proxied request besides its answer: the availability controller
/// looks at the APIService again at once rather than at its next resync.
pub(crate) trait OnFailure: Send + Sync {
    fn failed(&self, apiservice: &str);
}

/// The proxy of one remote group version.
pub(crate) struct RemoteProxy {
    pub(crate) service: ApiService,
    pub(crate) transport: Result<Arc<Transport>, String>,
    pub(crate) resolver: Arc<dyn ServiceResolver>,
    pub(crate) on_failure: Arc<dyn OnFailure>,
}

impl Proxy for RemoteProxy {
    fn serve(&self, head: http::request::Parts, body: Bytes, user: UserInfo) -> TierFuture<'static, Response<Body>> {
        let (service, transport, resolver, on_failure) = (self.service.clone(), self.transport.clone(), self.resolver.clone(), self.on_failure.clone());
        Box::pin(async move {
            // kube answers with Go's http.Error: plain text, not a Status.
            if !service.available {
                return plain_error(StatusCode::SERVICE_UNAVAILABLE, "service unavailable");
            }
            let transport = match transport {
                Ok(t) => t,
                Err(e) => return plain_error(StatusCode::INTERNAL_SERVER_ERROR, &e),
            };
            let Some(target) = &service.service else { return plain_error(StatusCode::NOT_FOUND, "") };
            let (host, port) = match resolver.resolve(&target.namespace, &target.name, target.port) {
                Ok(endpoint) => endpoint,
                Err(e) => {
                    tracing::warn!(apiservice = %service.name, "error resolving {}/{}: {e}", target.namespace, target.name);
                    on_failure.failed(&service.name);
                    return plain_error(StatusCode::SERVICE_UNAVAILABLE, "service unavailable");
                }
            };
            match forward(&transport, &host, port, head, body, &user).await {
                Ok(resp) => resp,
                Err(e) => {
                    on_failure.failed(&service.name);
                    plain_error(StatusCode::SERVICE_UNAVAILABLE, &e)
                }
            }
        })
    }
}

/// Sends one request to `host:port` as `user` and streams the answer back; the error is the
/// connection's failure, in Go's words.
pub(crate) async fn forward(transport: &Transport, host: &str, port: u16, head: http::request::Parts, body: Bytes, user: &UserInfo) -> Result<Response<Body>, String> {
    let authority = if host.contains(':') { format!("[{host}]:{port}") } else { format!("{host}:{port}") };
    let path = head.uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
    let uri = format!("https://{authority}{path}");
    if is_upgrade(&head) {
        return Ok(upgrade(transport, host, port, &uri, head, user).await);
    }
    let mut request = Request::builder().method(head.method.clone()).uri(&uri);
    if let Some(headers) = request.headers_mut() {
        forward_headers(&head.headers, headers, false);
        set_identity(headers, user);
    }
    let request = request.body(Full::new(body)).map_err(|e| e.to_string())?;
    let answer = transport.send(request).await?;
    let (mut parts, body) = answer.into_parts();
    strip_hop_by_hop(&mut parts.headers);
    Ok(Response::from_parts(parts, response::streamed(body)))
}

/// An upgrade request: a connection of its own, the 101 passed back, then both directions
/// copied until either ends (kube's UpgradeAwareHandler; the identity headers are set on the
/// request itself, since the upgrade bypasses the round tripper).
async fn upgrade(transport: &Transport, host: &str, port: u16, uri: &str, head: http::request::Parts, user: &UserInfo) -> Response<Body> {
    let Some(client_upgrade) = head.extensions.get::<hyper::upgrade::OnUpgrade>().cloned() else {
        return plain_error(StatusCode::BAD_REQUEST, "Upgrade request required");
    };
    let conn = match transport.dial_http1(host, port).await {
        Ok(conn) => conn,
        Err(e) => return plain_error(StatusCode::SERVICE_UNAVAILABLE, &e),
    };
    let (mut sender, connection) = match hyper::client::conn::http1::handshake(conn.into_io()).await {
        Ok(pair) => pair,
        Err(e) => return plain_error(StatusCode::SERVICE_UNAVAILABLE, &e.to_string()),
    };
    tokio::spawn(async move {
        if let Err(e) = connection.with_upgrades().await {
            tracing::debug!("aggregated server upgrade connection: {e}");
        }
    });
    let path = uri.split_once("://").and_then(|(_, rest)| rest.find('/').map(|i| &rest[i..])).unwrap_or("/");
    let mut request = Request::builder().method(head.method.clone()).uri(path);
    if let Some(headers) = request.headers_mut() {
        forward_headers(&head.headers, headers, true);
        set_identity(headers, user);
        if let Ok(v) = HeaderValue::from_str(&format!("{host}:{port}")) {
            headers.insert(header::HOST, v);
        }
    }
    let Ok(request) = request.body(Empty::<Bytes>::new()) else {
        return plain_error(StatusCode::INTERNAL_SERVER_ERROR, "building the upgrade request");
    };
    let mut answer = match sender.send_request(request).await {
        Ok(answer) => answer,
        Err(e) => return plain_error(StatusCode::SERVICE_UNAVAILABLE, &e.to_string()),
    };
    if answer.status() != StatusCode::SWITCHING_PROTOCOLS {
        let (mut parts, body) = answer.into_parts();
        strip_hop_by_hop(&mut parts.headers);
        return Response::from_parts(parts, response::streamed(body));
    }
    let backend_upgrade = hyper::upgrade::on(&mut answer);
    tokio::spawn(async move {
        match tokio::try_join!(client_upgrade, backend_upgrade) {
            Ok((client, backend)) => splice(hyper_util::rt::TokioIo::new(client), hyper_util::rt::TokioIo::new(backend)).await,
            Err(e) => tracing::debug!("aggregated upgrade failed: {e}"),
        }
    });
    let (parts, _) = answer.into_parts();
    Response::from_parts(parts, Empty::new().map_err(|never| match never {}).boxed_unsync())
}

/// Copies the caller's headers except those of this hop, the credentials this server consumed
/// (kube's authentication and impersonation filters remove them) and any identity headers the
/// caller sent (kube's `SetAuthProxyHeaders` replaces them).
fn forward_headers(from: &HeaderMap, to: &mut HeaderMap, keep_upgrade: bool) {
    for (name, value) in from {
        let n = name.as_str();
        let hop = HOP_BY_HOP.contains(&n) && !(keep_upgrade && (n == "upgrade" || n == "connection"));
        if hop || n == "host" || n == "content-length" || n == "authorization" || n.starts_with("impersonate-") || n.starts_with("x-remote-") {
            continue;
        }
        to.append(name.clone(), value.clone());
    }
}

/// client-go's `SetAuthProxyHeaders`: the user, uid, groups and extra the backend trusts
/// because the proxy client certificate vouches for them.
pub(crate) fn set_identity(headers: &mut HeaderMap, user: &UserInfo) {
    if let Ok(v) = HeaderValue::from_str(&user.name) {
        headers.insert("x-remote-user", v);
    }
    if !user.uid.is_empty() {
        if let Ok(v) = HeaderValue::from_str(&user.uid) {
            headers.insert("x-remote-uid", v);
        }
    }
    for group in &user.groups {
        if let Ok(v) = HeaderValue::from_str(group) {
            headers.append("x-remote-group", v);
        }
    }
    for (key, values) in &user.extra {
        let Ok(name) = HeaderName::from_bytes(format!("x-remote-extra-{}", header_key_escape(key)).as_bytes()) else { continue };
        for value in values {
            if let Ok(v) = HeaderValue::from_str(value) {
                headers.append(name.clone(), v);
            }
        }
    }
}

/// client-go's `headerKeyEscape`: bytes a header name cannot hold are percent-encoded.
fn header_key_escape(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    for b in key.bytes() {
        if b.is_ascii_alphanumeric() || b"!#$&'*+-.^_`|~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn strip_hop_by_hop(headers: &mut HeaderMap) {
    for name in HOP_BY_HOP {
        headers.remove(*name);
    }
}

/// Go's `http.Error`: the text and a newline, as plain text.
pub(crate) fn plain_error(status: StatusCode, text: &str) -> Response<Body> {
    let mut resp = response::text(status, format!("{text}\n"), "text/plain; charset=utf-8");
    resp.headers_mut().insert("x-content-type-options", HeaderValue::from_static("nosniff"));
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_headers_replace_what_the_caller_sent_and_credentials_stay_here() {
        let mut from = HeaderMap::new();
        from.insert("authorization", HeaderValue::from_static("Bearer secret"));
        from.insert("impersonate-user", HeaderValue::from_static("someone"));
        from.insert("x-remote-user", HeaderValue::from_static("forged"));
        from.insert("accept", HeaderValue::from_static("application/json"));
        from.insert("connection", HeaderValue::from_static("keep-alive"));
        let mut to = HeaderMap::new();
        forward_headers(&from, &mut to, false);
        let user = UserInfo {
            name: "jane".into(),
            groups: vec!["dev".into(), "system:authenticated".into()],
            extra: [("scopes.example.com/a b".to_owned(), vec!["x".to_owned(), "y".to_owned()])].into_iter().collect(),
            ..UserInfo::default()
        };
        set_identity(&mut to, &user);
        assert_eq!(to.get("accept").unwrap(), "application/json");
        assert!(to.get("authorization").is_none() && to.get("impersonate-user").is_none() && to.get("connection").is_none());
        assert_eq!(to.get_all("x-remote-user").iter().collect::<Vec<_>>(), ["jane"]);
        assert_eq!(to.get_all("x-remote-group").iter().collect::<Vec<_>>(), ["dev", "system:authenticated"]);
        assert_eq!(to.get_all("x-remote-extra-scopes.example.com%2Fa%20b").iter().collect::<Vec<_>>(), ["x", "y"]);
    }

    #[test]
    fn errors_are_gos_plain_text() {
        let resp = plain_error(StatusCode::SERVICE_UNAVAILABLE, "service unavailable");
        assert_eq!(resp.status(), 503);
        assert_eq!(resp.headers()["content-type"], "text/plain; charset=utf-8");
    }
}
