//! The connections to an aggregated API server, as kube-aggregator's transport makes them: TLS
//! checked against the APIService's `caBundle` and the name `<service>.<namespace>.svc` (or
//! not checked with `insecureSkipTLSVerify`), the proxy client certificate presented, HTTP/2
//! when the server offers it (one connection multiplexes every request), HTTP/1.1 keep-alive
//! connections otherwise; connections are pooled per endpoint.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::Uri;
use http_body_util::Full;
use hyper_util::client::legacy::connect::{Connected, Connection};
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

use crate::apiservice::ApiService;

/// How long reaching an aggregated server (TCP and TLS) may take.
const DIAL_TIMEOUT: Duration = Duration::from_secs(10);

/// The client identity kube-aggregator presents (`--proxy-client-cert-file`,
/// `--proxy-client-key-file`), PEM.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProxyIdentity {
    /// The certificate chain.
    pub cert: Vec<u8>,
    /// Its private key.
    pub key: Vec<u8>,
}

/// What a transport is built from: two APIServices with equal settings share one.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct TransportKey {
    ca_bundle: Vec<u8>,
    insecure: bool,
    server_name: String,
}

impl TransportKey {
    pub(crate) fn new(ca_bundle: Vec<u8>, insecure: bool, server_name: String) -> TransportKey {
        TransportKey { ca_bundle, insecure, server_name }
    }

    pub(crate) fn of(service: &ApiService) -> Option<TransportKey> {
        Some(TransportKey { ca_bundle: service.ca_bundle.clone(), insecure: service.insecure_skip_tls_verify, server_name: service.server_name()? })
    }
}

/// Connections to the servers of one transport configuration.
pub(crate) struct Transport {
    client: Client<Connector, Full<Bytes>>,
    /// HTTP/1.1 only, for upgrade requests (a stream of their own after the 101).
    http1: Connector,
}

impl Transport {
    /// Builds the TLS configurations; a bad `caBundle` or identity is the error kube reports.
    pub(crate) fn new(key: &TransportKey, identity: Option<&ProxyIdentity>) -> Result<Transport, String> {
        let server_name = ServerName::try_from(key.server_name.clone()).map_err(|e| format!("invalid server name {:?}: {e}", key.server_name))?;
        let config = |alpn: &[&[u8]]| -> Result<Arc<rustls::ClientConfig>, String> {
            let identity = identity.map(|i| (i.cert.as_slice(), i.key.as_slice()));
            let mut config = Arc::unwrap_or_clone(kapi_webhook::backend_client_config(&key.ca_bundle, identity, alpn)?);
            if key.insecure {
                let verifier = kapi_server::kubelet::SkipVerification(kapi_server::tls::crypto_provider());
                config.dangerous().set_certificate_verifier(Arc::new(verifier));
            }
            Ok(Arc::new(config))
        };
        let both = Connector { tls: config(&[b"h2", b"http/1.1"])?, server_name: server_name.clone() };
        let http1 = Connector { tls: config(&[b"http/1.1"])?, server_name };
        let client = Client::builder(TokioExecutor::new()).pool_idle_timeout(Duration::from_secs(90)).build(both);
        Ok(Transport { client, http1 })
    }

    /// Sends one request (its URI names the endpoint) and returns the answer's head; the body
    /// streams. A request that the backend refused unprocessed goes again, on a new
    /// connection, as Go's HTTP/2 transport retries it: a backend that drains for a rolling
    /// restart answers the streams it had not started with GOAWAY (or REFUSED_STREAM), which
    /// says they never ran, so sending them again is safe for every method.
    pub(crate) async fn send(&self, request: http::Request<Full<Bytes>>) -> Result<http::Response<hyper::body::Incoming>, String> {
        let (head, body) = request.into_parts();
        let mut attempt = 0;
        loop {
            let mut again = http::Request::new(body.clone());
            *again.method_mut() = head.method.clone();
            *again.uri_mut() = head.uri.clone();
            *again.version_mut() = head.version;
            *again.headers_mut() = head.headers.clone();
            match self.client.request(again).await {
                Err(e) if attempt < UNPROCESSED_RETRIES && unprocessed(&e) => {
                    attempt += 1;
                    tokio::time::sleep(Duration::from_millis(10 * attempt)).await;
                }
                answer => return answer.map_err(|e| go_error_text(&e)),
            }
        }
    }

    /// A fresh HTTP/1.1 connection to `host:port`, for an upgrade request.
    pub(crate) async fn dial_http1(&self, host: &str, port: u16) -> Result<TlsConn, String> {
        self.http1.dial(host, port).await.map_err(|e| e.to_string())
    }
}

/// How many times a request refused unprocessed is sent again (Go's transport tries up to 6).
const UNPROCESSED_RETRIES: u64 = 3;

/// Whether the backend said it never processed the request: an HTTP/2 GOAWAY without error
/// past the request's stream, or the stream refused.
fn unprocessed(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(e);
    while let Some(err) = cause {
        if let Some(h2) = err.downcast_ref::<h2::Error>() {
            let reason = h2.reason();
            return h2.is_remote() && ((h2.is_go_away() && reason == Some(h2::Reason::NO_ERROR)) || reason == Some(h2::Reason::REFUSED_STREAM));
        }
        cause = err.source();
    }
    false
}

/// The innermost cause of a client error: the dial or TLS failure as the connector worded it,
/// Go's words (`dial tcp 127.0.0.1:443: connect: connection refused`).
fn go_error_text(e: &(dyn std::error::Error + 'static)) -> String {
    let mut inner: &(dyn std::error::Error + 'static) = e;
    while let Some(source) = inner.source() {
        inner = source;
    }
    inner.to_string()
}

/// Dials the URI's host and port and speaks TLS with the transport's server name.
#[derive(Clone)]
pub(crate) struct Connector {
    tls: Arc<rustls::ClientConfig>,
    server_name: ServerName<'static>,
}

impl Connector {
    async fn dial(&self, host: &str, port: u16) -> io::Result<TlsConn> {
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let address = format!("{}:{port}", if host.contains(':') { format!("[{host}]") } else { host.to_owned() });
        let tcp = match tokio::time::timeout(DIAL_TIMEOUT, TcpStream::connect((host, port))).await {
            Ok(Ok(tcp)) => tcp,
            Ok(Err(e)) => return Err(io::Error::new(e.kind(), format!("dial tcp {address}: connect: {}", kapi_webhook::go_errno_text(&e)))),
            Err(_) => return Err(io::Error::new(io::ErrorKind::TimedOut, format!("dial tcp {address}: i/o timeout"))),
        };
        let _ = tcp.set_nodelay(true);
        let tls = tokio::time::timeout(DIAL_TIMEOUT, TlsConnector::from(self.tls.clone()).connect(self.server_name.clone(), tcp))
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "net/http: TLS handshake timeout"))?
            .map_err(|e| io::Error::new(e.kind(), format!("tls: {}", e.get_ref().map(ToString::to_string).unwrap_or_else(|| e.to_string()))))?;
        Ok(TlsConn(TokioIo::new(tls)))
    }
}

impl tower::Service<Uri> for Connector {
    type Response = TlsConn;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<TlsConn>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let connector = self.clone();
        Box::pin(async move {
            let host = uri.host().ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no host in the backend URI"))?.to_owned();
            connector.dial(&host, uri.port_u16().unwrap_or(443)).await
        })
    }
}

/// A TLS connection to an aggregated server, telling the client whether HTTP/2 was agreed.
pub(crate) struct TlsConn(TokioIo<TlsStream<TcpStream>>);

impl TlsConn {
    /// The raw stream, for an upgrade's handshake.
    pub(crate) fn into_io(self) -> TokioIo<TlsStream<TcpStream>> {
        self.0
    }
}

impl Connection for TlsConn {
    fn connected(&self) -> Connected {
        let connected = Connected::new();
        if self.0.inner().get_ref().1.alpn_protocol() == Some(b"h2") {
            connected.negotiated_h2()
        } else {
            connected
        }
    }
}

impl hyper::rt::Read for TlsConn {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: hyper::rt::ReadBufCursor<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl hyper::rt::Write for TlsConn {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }

    fn poll_write_vectored(mut self: Pin<&mut Self>, cx: &mut Context<'_>, bufs: &[io::IoSlice<'_>]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.0.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A real HTTP/2 exchange over an in-memory pipe: the server (h2) refuses the stream, and
    /// the error hyper's client reports is recognised as unprocessed; an error the server
    /// sends after it started the request is not.
    #[tokio::test]
    async fn refused_streams_are_recognised_as_unprocessed() {
        for (reason, expected) in [(h2::Reason::REFUSED_STREAM, true), (h2::Reason::INTERNAL_ERROR, false)] {
            let (client_io, server_io) = tokio::io::duplex(64 * 1024);
            let server = tokio::spawn(async move {
                let mut conn = h2::server::handshake(server_io).await.expect("server handshake");
                if let Some(Ok((_request, mut respond))) = conn.accept().await {
                    respond.send_reset(reason);
                }
                // Keep the connection served until the client is done.
                while conn.accept().await.is_some() {}
            });
            let (mut sender, connection) = hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(client_io)).await.expect("client handshake");
            tokio::spawn(connection);
            let request = http::Request::post("https://backend/apis").body(Full::new(Bytes::from_static(b"{}"))).expect("request");
            let e = sender.send_request(request).await.expect_err("the stream was reset");
            assert_eq!(unprocessed(&e), expected, "{reason:?}: {e}");
            drop(sender);
            server.abort();
        }
    }
}
