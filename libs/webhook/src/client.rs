//! The client every webhook call goes through: kube's `ClientManager` and client-go's REST
//! client reduced to what webhooks use (one JSON POST with a deadline), over pooled
//! connections.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::header;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use serde_json::Value;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use crate::config::{ClientConfig, Endpoint};
use crate::error::{self, CallError, DEADLINE_EXCEEDED};
use crate::pool::{Conn, Key, Pool};
use crate::resolver::ServiceResolver;

/// TLS configurations kept, one per distinct caBundle; past this many (CA rotations piling up)
/// they are rebuilt as needed.
const MAX_TLS_CONFIGS: usize = 256;

/// The client all webhooks share: cheap to clone (Arc inside), keeps idle connections per
/// endpoint (address, port, TLS server name, CA bundle) and reuses them (HTTP/1.1 keep-alive;
/// several requests in flight to one endpoint use several connections; a bounded number of
/// idle connections per endpoint, e.g. 32, closed connections discarded).
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

/// Sees every webhook call (host, method, status code or `<error>`, duration), as client-go's
/// request metrics do; the server turns it into `rest_client_*` series.
pub trait CallObserver: Send + Sync {
    /// One call ended.
    fn observe(&self, host: &str, method: &str, code: &str, elapsed: Duration);
}

static OBSERVER: std::sync::OnceLock<Arc<dyn CallObserver>> = std::sync::OnceLock::new();

/// Reports every call of every [`Client`] of the process to `observer` (client-go's metrics
/// are process-wide too); the first observer set stays.
pub fn observe_calls_with(observer: Arc<dyn CallObserver>) {
    let _ = OBSERVER.set(observer);
}

/// A TLS configuration's trust and identity: the caBundle and the client credentials.
type TlsKey = (Vec<u8>, crate::config::Credentials);

struct Inner {
    resolver: Arc<dyn ServiceResolver>,
    pool: Pool,
    tls: Mutex<HashMap<TlsKey, Arc<rustls::ClientConfig>>>,
}

/// One call's request line and what its messages show.
struct Call<'a> {
    config: &'a ClientConfig,
    /// `https://<authority><path and query>`, as Go's url.Error prints it.
    url: String,
    path_and_query: String,
}

impl Client {
    /// A client resolving `service` clientConfigs through `resolver`.
    pub fn new(resolver: Arc<dyn ServiceResolver>) -> Client {
        Client { inner: Arc::new(Inner { resolver, pool: Pool::default(), tls: Mutex::new(HashMap::new()) }) }
    }

    /// POSTs `body` (JSON bytes) to the webhook, adding kube's `?timeout=<n>s` to the path
    /// (n = timeout in whole seconds), and reads the JSON answer; the whole call (dial, TLS,
    /// request, response) is bounded by `timeout`.
    pub async fn post_json(&self, config: &ClientConfig, body: Bytes, timeout: Duration) -> Result<Value, CallError> {
        self.timed(config, body, timeout, true).await
    }

    /// One call, bounded by `timeout` and reported to the [`CallObserver`] (client-go's
    /// `rest_client_*` series).
    async fn timed(&self, config: &ClientConfig, body: Bytes, timeout: Duration, decode: bool) -> Result<Value, CallError> {
        let path_and_query = config.path_and_query(go_timeout(timeout).as_deref());
        let call = Call { url: format!("https://{}{path_and_query}", config.authority()), path_and_query, config };
        let started = std::time::Instant::now();
        // Inside a traced request, the call is a client span (as client-go's otelhttp
        // transport makes) and the webhook receives it as its `traceparent`.
        let span = kapi_otel::Span::child("HTTP POST", kapi_otel::SpanKind::Client, || {
            vec![kapi_otel::KeyValue::new("http.method", "POST"), kapi_otel::KeyValue::new("http.url", call.url.clone())]
        });
        let answer = match tokio::time::timeout(timeout, kapi_otel::within(span.as_ref(), self.call(&call, body, decode))).await {
            Ok(answer) => answer,
            Err(_) => Err(CallError::post(&call.url, DEADLINE_EXCEEDED)),
        };
        if let Some(span) = &span {
            match &answer {
                Ok(_) => span.set_attribute(kapi_otel::KeyValue::new("http.status_code", 200)),
                Err(CallError::Status { code, .. }) => span.set_attribute(kapi_otel::KeyValue::new("http.status_code", i64::from(*code))),
                Err(e) => span.set_error(e.to_string()),
            }
        }
        if let Some(observer) = OBSERVER.get() {
            let code = match &answer {
                Ok(_) => "200".to_owned(),
                Err(CallError::Status { code, .. }) => code.to_string(),
                Err(_) => "<error>".to_owned(),
            };
            observer.observe(&config.authority(), "POST", &code, started.elapsed());
        }
        answer
    }

    /// POSTs `body` and checks only the answer's status, as client-go's `Do().Error()`: what a
    /// webhook that receives (audit events) answers with is not read.
    pub async fn post(&self, config: &ClientConfig, body: Bytes, timeout: Duration) -> Result<(), CallError> {
        self.timed(config, body, timeout, false).await.map(|_| ())
    }

    async fn call(&self, call: &Call<'_>, body: Bytes, decode: bool) -> Result<Value, CallError> {
        let config = call.config;
        let (host, port) = match &config.endpoint {
            Endpoint::Url { host, port, .. } => (host.clone(), *port),
            Endpoint::Service { namespace, name, port, .. } => {
                self.inner.resolver.resolve(namespace, name, *port).map_err(|e| CallError::post(&call.url, e))?
            }
        };
        let identity = match &config.credentials {
            crate::config::Credentials::Certificate { cert, .. } => Some(cert.as_slice().into()),
            _ => None,
        };
        let key = Key { host, port, server_name: config.server_name(), ca_bundle: config.ca_bundle.as_slice().into(), identity };
        let mut idle = self.inner.pool.take(&key).await;
        loop {
            let reused = idle.is_some();
            let mut conn = match idle.take() {
                Some(conn) => conn,
                None => self.dial(call, &key).await?,
            };
            let response = match conn.sender.send_request(request(call, body.clone())?).await {
                Ok(response) => response,
                // The server closed the idle connection as the request went out; nothing of an
                // answer came back, so the webhook never saw the request.
                Err(e) if reused && closed_before_answer(&e) => continue,
                Err(e) => return Err(CallError::post(&call.url, hyper_error(&e, &conn))),
            };
            let status = response.status().as_u16();
            let content_type = response
                .headers()
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("application/json")
                .to_owned();
            let answer = response.into_body().collect().await.map_err(|e| {
                CallError::Call(format!(
                    "unexpected error when reading response body. Please retry. Original error: {}",
                    body_error(&e, &conn)
                ))
            })?;
            self.inner.pool.put(key, conn);
            let answer = answer.to_bytes();
            if !(200..=206).contains(&status) {
                return Err(CallError::Status { code: status, body: answer });
            }
            if !decode {
                return Ok(Value::Null);
            }
            let value = error::decode(status, &content_type, &answer)?;
            // client-go turns a Status of failure into an error whatever the HTTP status.
            if error::failure_status_message(&value).is_some() {
                return Err(CallError::Status { code: status, body: answer });
            }
            return Ok(value);
        }
    }

    /// A new connection to `key`: TCP to the first address that answers, then TLS.
    async fn dial(&self, call: &Call<'_>, key: &Key) -> Result<Conn, CallError> {
        let failed = |cause: String| CallError::post(&call.url, cause);
        let addresses: Vec<SocketAddr> = match key.host.parse::<IpAddr>() {
            Ok(ip) => vec![SocketAddr::new(ip, key.port)],
            Err(_) => tokio::net::lookup_host((key.host.as_str(), key.port))
                .await
                .map_err(|e| failed(format!("dial tcp: lookup {}: {}", key.host, lookup_error(&e))))?
                .collect(),
        };
        let mut first_error = None;
        let mut tcp = None;
        for address in addresses {
            match TcpStream::connect(address).await {
                Ok(stream) => {
                    tcp = Some(stream);
                    break;
                }
                Err(e) => {
                    first_error.get_or_insert(format!("dial tcp {address}: connect: {}", error::go_errno_text(&e)));
                }
            }
        }
        let tcp = tcp.ok_or_else(|| failed(first_error.unwrap_or_else(|| format!("dial tcp: lookup {}: no such host", key.host))))?;
        let _ = tcp.set_nodelay(true);
        let (local, peer) = match (tcp.local_addr(), tcp.peer_addr()) {
            (Ok(local), Ok(peer)) => (local, peer),
            (Err(e), _) | (_, Err(e)) => return Err(failed(e.to_string())),
        };
        let tls = self.tls(call.config).map_err(CallError::Call)?;
        let name = ServerName::try_from(key.server_name.clone()).map_err(|e| failed(e.to_string()))?;
        let stream = TlsConnector::from(tls)
            .connect(name, tcp)
            .await
            .map_err(|e| failed(crate::tls::handshake_error(&e, &key.server_name, local, peer)))?;
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(|e| failed(e.to_string()))?;
        let task = tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(Conn::new(sender, local, peer, task.abort_handle()))
    }

    /// The TLS configuration trusting `config`'s caBundle with its client certificate, built
    /// once per pair.
    fn tls(&self, config: &ClientConfig) -> Result<Arc<rustls::ClientConfig>, String> {
        let mut configs = self.inner.tls.lock().unwrap_or_else(|e| e.into_inner());
        let key = (config.ca_bundle.clone(), config.credentials.clone());
        if let Some(tls) = configs.get(&key) {
            return Ok(tls.clone());
        }
        let tls = crate::tls::client_config(&config.ca_bundle, &config.credentials)?;
        if configs.len() >= MAX_TLS_CONFIGS {
            configs.clear();
        }
        configs.insert(key, tls.clone());
        Ok(tls)
    }
}

fn request(call: &Call<'_>, body: Bytes) -> Result<http::Request<Full<Bytes>>, CallError> {
    let mut request = http::Request::new(Full::new(body));
    *request.method_mut() = http::Method::POST;
    *request.uri_mut() = call.path_and_query.parse().map_err(|e| CallError::post(&call.url, e))?;
    let headers = request.headers_mut();
    headers.insert(header::HOST, call.config.authority().parse().map_err(|e| CallError::post(&call.url, e))?);
    headers.insert(header::CONTENT_TYPE, header::HeaderValue::from_static("application/json"));
    headers.insert(header::ACCEPT, header::HeaderValue::from_static("application/json, */*"));
    headers.insert(header::USER_AGENT, header::HeaderValue::from_static(concat!("kapi/", env!("CARGO_PKG_VERSION"))));
    // The trace context of the call's span (see `timed`), inside a traced request.
    kapi_otel::inject(headers);
    if let crate::config::Credentials::Token(token) = &call.config.credentials {
        let value = header::HeaderValue::from_str(&format!("Bearer {token}")).map_err(|e| CallError::post(&call.url, e))?;
        headers.insert(header::AUTHORIZATION, value);
    }
    Ok(request)
}

/// client-go's `timeout` parameter: the deadline rounded up to whole seconds (kube's webhook
/// dispatchers round so), printed as Go prints a `time.Duration` (`30s`, `1m30s`).
fn go_timeout(timeout: Duration) -> Option<String> {
    let secs = timeout.as_secs() + u64::from(timeout.subsec_nanos() > 0);
    match (secs / 3600, secs % 3600 / 60, secs % 60) {
        (0, 0, 0) => None,
        (0, 0, s) => Some(format!("{s}s")),
        (0, m, s) => Some(format!("{m}m{s}s")),
        (h, m, s) => Some(format!("{h}h{m}m{s}s")),
    }
}

/// Whether a request on a reused connection failed because the server had closed it: the
/// request could not be written, or the connection ended before an answer began. A partial
/// answer cut short counts too, which hyper does not tell apart; webhooks do not do that.
fn closed_before_answer(e: &hyper::Error) -> bool {
    if e.is_canceled() || e.is_closed() || e.is_incomplete_message() {
        return true;
    }
    io_source(e).is_some_and(|io| {
        matches!(
            io.kind(),
            std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionAborted | std::io::ErrorKind::UnexpectedEof
        )
    })
}

fn io_source(e: &hyper::Error) -> Option<&std::io::Error> {
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            return Some(io);
        }
        source = s.source();
    }
    None
}

/// A failed exchange as Go's net/http reports it: a connection that ends before the answer is
/// `EOF`.
fn hyper_error(e: &hyper::Error, conn: &Conn) -> String {
    if e.is_canceled() || e.is_closed() || e.is_incomplete_message() {
        return "EOF".into();
    }
    match io_source(e) {
        Some(io) if io.kind() == std::io::ErrorKind::BrokenPipe => error::go_io_error(io, "write", conn.local, conn.peer),
        Some(io) => error::go_io_error(io, "read", conn.local, conn.peer),
        None => e.to_string(),
    }
}

/// A body cut short, as Go's `io.ReadAll` reports it.
fn body_error(e: &hyper::Error, conn: &Conn) -> String {
    match io_source(e) {
        Some(io) if io.kind() != std::io::ErrorKind::UnexpectedEof => error::go_io_error(io, "read", conn.local, conn.peer),
        _ if e.is_incomplete_message() || io_source(e).is_some() => "unexpected EOF".into(),
        _ => e.to_string(),
    }
}

/// A failed name lookup as Go's resolver words the usual one.
fn lookup_error(e: &std::io::Error) -> String {
    let text = e.to_string();
    if text.contains("not known") || text.contains("No address") || text.contains("no such host") {
        "no such host".into()
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_are_whole_seconds_as_go_prints_durations() {
        let t = |ms| go_timeout(Duration::from_millis(ms));
        assert_eq!(t(30_000).as_deref(), Some("30s"));
        assert_eq!(t(1_500).as_deref(), Some("2s"));
        assert_eq!(t(90_000).as_deref(), Some("1m30s"));
        assert_eq!(t(3_600_000).as_deref(), Some("1h0m0s"));
        assert_eq!(t(0), None);
    }
}
