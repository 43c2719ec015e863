//! The TLS listener: accepts connections, verifies client certificates, serves HTTP/1.1 and
//! HTTP/2 through the handler chain, and follows the lifecycle to close.
//!
//! The listener starts before the server is built, so `/livez`, `/readyz`, `/healthz` and
//! `/version` answer from the first moment (probes see start-up progress instead of refused
//! connections); other requests wait for the handler chain, bounded, then get kube's 503 for
//! paths not installed yet.
//!
//! Connections are told to go in two ways, both from a response's [`CloseConnection`] marker:
//! HTTP/1.1 answers get `Connection: close`, HTTP/2 connections a GOAWAY (hyper's graceful
//! shutdown: open streams, watches included, finish; the client opens a new connection for its
//! next request). HTTP/2 connections already open when termination starts get their GOAWAY at
//! once, and so does one that has had no request in progress for the idle time.

mod idle;

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use http::{header, HeaderValue, Request, Response};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Notify};
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt;

use crate::filters::{Chain, ConnInfo};
use crate::health;
use crate::lifecycle::{Lifecycle, Signal};
use crate::negotiation::Output;
use crate::query::Query;
use crate::response::{self, Body};
use crate::tls::ClientChainVerifier;
use kapi_apimachinery::ApiError;
use kapi_auth::ChainVerdict;

/// The CA bundles client certificate chains are judged against, once per connection.
#[derive(Clone, Debug, Default)]
pub struct ChainVerifiers {
    /// `--client-ca-file`.
    pub client: Option<ClientChainVerifier>,
    /// `--requestheader-client-ca-file`.
    pub front_proxy: Option<ClientChainVerifier>,
}

impl ChainVerifiers {
    fn judge(&self, presented: Option<Vec<Vec<u8>>>) -> ConnInfo {
        let Some(chain) = presented else { return ConnInfo::default() };
        let verdict = |verifier: &Option<ClientChainVerifier>| match verifier {
            None => ChainVerdict::Absent,
            Some(v) => match v.verify(&chain) {
                Ok(()) => ChainVerdict::Verified,
                Err(reason) => ChainVerdict::Failed(reason),
            },
        };
        ConnInfo { client_ca: verdict(&self.client), front_proxy_ca: verdict(&self.front_proxy), peer_certificates: Some(chain), peer: None }
    }
}

/// Response extension: close the connection after this response (`Connection: close` on
/// HTTP/1.1, GOAWAY on HTTP/2, where connection headers are forbidden).
#[derive(Debug, Clone, Copy)]
pub struct CloseConnection;

/// The handler chain, installed once the server is built.
#[derive(Debug)]
pub struct ChainSlot {
    chain: OnceLock<Chain>,
    installed: Signal,
}

impl ChainSlot {
    /// Nothing installed yet.
    pub fn new() -> Self {
        Self { chain: OnceLock::new(), installed: Signal::new("MuxAndDiscoveryComplete") }
    }

    /// Installs the chain; requests waiting for it proceed.
    pub fn install(&self, chain: Chain) {
        if self.chain.set(chain).is_ok() {
            self.installed.signal();
        }
    }

    fn get(&self) -> Option<Chain> {
        self.chain.get().cloned()
    }

    async fn wait(&self, bound: Duration) -> Option<Chain> {
        let _ = tokio::time::timeout(bound, self.installed.signaled()).await;
        self.get()
    }
}

impl Default for ChainSlot {
    fn default() -> Self {
        Self::new()
    }
}

/// How long a client may take to finish the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Where the serving certificate and the client CAs come from when they can change on disk
/// (kube's dynamic certificates): the listener checks [`TlsSource::fingerprint`] every few
/// seconds and, when it changed, serves new connections with [`TlsSource::load`]; connections
/// already open keep what they negotiated.
pub trait TlsSource: Send + Sync {
    /// A digest of the files' contents (blocking file IO: called off the async workers).
    fn fingerprint(&self) -> u64;
    /// The configuration from the files as they are now.
    fn load(&self) -> Result<(Arc<rustls::ServerConfig>, ChainVerifiers), String>;
}

/// How often the certificate files are checked for changes.
const TLS_RELOAD_INTERVAL: Duration = Duration::from_secs(2);

/// What the listener needs besides the socket.
pub struct ServeConfig {
    /// Serving certificate and client-certificate hints.
    pub tls: Arc<rustls::ServerConfig>,
    /// Client certificate verification.
    pub verifiers: ChainVerifiers,
    /// Files to reload the two above from when they change.
    pub tls_source: Option<Arc<dyn TlsSource>>,
    /// Signals to follow.
    pub lifecycle: Arc<Lifecycle>,
    /// Health checks, answered before the chain exists.
    pub health: Arc<health::Registry>,
    /// The chain, once built.
    pub chain: Arc<ChainSlot>,
    /// `--shutdown-send-retry-after`: keep listening until requests in flight are drained (new
    /// requests get 429) instead of closing when new requests stop being accepted.
    pub send_retry_after: bool,
    /// How long open connections may take to finish once the listener closed.
    pub shutdown_timeout: Duration,
    /// How long a request that arrives before the chain exists waits for it.
    pub install_wait: Duration,
    /// How long a connection may go without a request in progress (HTTP/1.1: waiting for a
    /// request's head) before it is closed.
    pub connection_idle_timeout: Duration,
    /// Concurrent streams a client may open on one HTTP/2 connection.
    pub http2_max_streams: u32,
}

/// kube's streams per HTTP/2 connection when `--http2-max-streams-per-connection` is 0: 100
/// since its rapid-reset fix (250 before), the Go HTTP/2 client's own default.
pub const DEFAULT_HTTP2_MAX_STREAMS: u32 = 100;

/// kube-apiserver's `MaxHeaderBytes` (1 MiB). Go's HTTP/2 server advertises that plus 320 bytes
/// (ten headers' worth of HTTP/2's 32-byte overhead per field) as `SETTINGS_MAX_HEADER_LIST_SIZE`.
pub const MAX_HEADER_BYTES: usize = 1 << 20;
/// The largest HTTP/2 header list (HPACK-decoded sizes plus 32 bytes per field) a request may
/// send (h2 answers 431 past it, and ends a connection whose header block grows beyond it).
const MAX_HTTP2_HEADER_LIST_BYTES: u32 = (MAX_HEADER_BYTES + 10 * 32) as u32;

/// The HTTP/1.1 and HTTP/2 connection settings. hyper runs one HTTP/1.1 timer from the end of
/// an answer to the end of the next request's head, so `connection_idle_timeout` is both kube's
/// keep-alive idle limit (90 s) and the bound on a client trickling its headers (kube allows
/// 32 s for those alone): an idle or stalled connection is closed instead of being kept forever.
/// Idle HTTP/2 connections are closed by [`idle`]. HTTP/2 header lists may be as large as
/// kube's (h2's default, 16 KiB, refused large bearer tokens client-go sends over HTTP/2).
/// HTTP/1.1 keeps hyper's limits, 100 headers in about 400 KiB (kube: 1 MiB + 4 KiB, any
/// number): hyper's read buffer grows to that bound on any connection reading a body fast, so
/// raising it to kube's would cost a megabyte per uploading connection, for heads no client
/// sends.
fn connection_builder(connection_idle_timeout: Duration, http2_max_streams: u32) -> auto::Builder<TokioExecutor> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder.http1().timer(TokioTimer::new()).header_read_timeout(connection_idle_timeout);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(http2_max_streams)
        .max_header_list_size(MAX_HTTP2_HEADER_LIST_BYTES);
    builder
}

/// Shared by every connection task.
struct Shared {
    tls: std::sync::RwLock<Arc<(TlsAcceptor, ChainVerifiers)>>,
    builder: auto::Builder<TokioExecutor>,
    lifecycle: Arc<Lifecycle>,
    health: Arc<health::Registry>,
    chain: Arc<ChainSlot>,
    install_wait: Duration,
    idle_timeout: Duration,
}

/// Swaps the TLS configuration new connections get when the files behind it change; a file
/// that does not load (half written, invalid) keeps the current configuration and is retried.
async fn reload_tls(source: Arc<dyn TlsSource>, shared: Arc<Shared>) {
    let fingerprint = |source: Arc<dyn TlsSource>| async move { tokio::task::spawn_blocking(move || source.fingerprint()).await.ok() };
    let mut current = fingerprint(source.clone()).await;
    let mut ticks = tokio::time::interval(TLS_RELOAD_INTERVAL);
    loop {
        ticks.tick().await;
        let now = fingerprint(source.clone()).await;
        if now.is_none() || now == current {
            continue;
        }
        let loading = source.clone();
        match tokio::task::spawn_blocking(move || loading.load()).await {
            Ok(Ok((config, verifiers))) => {
                *shared.tls.write().unwrap_or_else(|p| p.into_inner()) = Arc::new((TlsAcceptor::from(config), verifiers));
                current = now;
                tracing::info!("serving certificate or client CA changed on disk: new connections use the new files");
            }
            Ok(Err(e)) => tracing::warn!("reloading the serving certificate or client CA: {e}"),
            Err(e) => tracing::warn!("reloading the serving certificate or client CA: {e}"),
        }
    }
}

/// Serves until the lifecycle says to stop listening, then gives open connections
/// `shutdown_timeout` to finish.
pub async fn serve(listener: TcpListener, cfg: ServeConfig) {
    let stop_listening = if cfg.send_retry_after {
        // Listening on, new requests get 429 + Retry-After until the drain is over.
        cfg.lifecycle.in_flight_drained.subscribe()
    } else {
        cfg.lifecycle.not_accepting_new_requests.subscribe()
    };
    let shared = Arc::new(Shared {
        tls: std::sync::RwLock::new(Arc::new((TlsAcceptor::from(cfg.tls), cfg.verifiers))),
        builder: connection_builder(cfg.connection_idle_timeout, cfg.http2_max_streams),
        lifecycle: cfg.lifecycle,
        health: cfg.health,
        chain: cfg.chain,
        install_wait: cfg.install_wait,
        idle_timeout: cfg.connection_idle_timeout,
    });
    let reloader = cfg.tls_source.map(|source| tokio::spawn(reload_tls(source, shared.clone())));
    let (closing, close_rx) = watch::channel(false);
    let mut connections = JoinSet::new();
    let mut stop = stop_listening;
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((tcp, peer)) => {
                    connections.spawn(connection(shared.clone(), tcp, peer, close_rx.clone()));
                }
                Err(e) => {
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            () = fired(&mut stop) => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    drop(listener);
    if let Some(reloader) = reloader {
        reloader.abort();
    }
    tracing::info!("[graceful-termination] HTTP server stopped listening");
    closing.send_replace(true);
    let drained = async { while connections.join_next().await.is_some() {} };
    match tokio::time::timeout(cfg.shutdown_timeout, drained).await {
        Ok(()) => tracing::info!("all connections drained"),
        Err(_) => {
            tracing::warn!(open = connections.len(), "connections still open after {:?}; closing them", cfg.shutdown_timeout);
            connections.shutdown().await;
        }
    }
}

async fn connection(shared: Arc<Shared>, tcp: TcpStream, peer: std::net::SocketAddr, mut closing: watch::Receiver<bool>) {
    let _ = tcp.set_nodelay(true);
    let current = shared.tls.read().unwrap_or_else(|p| p.into_inner()).clone();
    let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, current.0.accept(tcp)).await {
        Ok(Ok(tls)) => tls,
        Ok(Err(e)) => {
            tracing::debug!(%peer, "TLS handshake failed: {e}");
            return;
        }
        Err(_) => {
            tracing::debug!(%peer, "TLS handshake timed out");
            return;
        }
    };
    let session = tls.get_ref().1;
    let http2 = session.alpn_protocol() == Some(b"h2");
    let presented = session.peer_certificates().map(|certs| certs.iter().map(|c| c.as_ref().to_vec()).collect::<Vec<_>>());
    // The handshake proved key possession; the chain is judged here, once per connection,
    // against each CA bundle, so a certificate from another CA is a 401 rather than a reset.
    let conn_info = Arc::new(ConnInfo { peer: Some(peer), ..current.1.judge(presented) });
    let goaway = Arc::new(Notify::new());
    // True once GOAWAY has been queued on this connection.
    let (going_away_tx, going_away_rx) = watch::channel(false);
    let activity = idle::Activity::new();
    let service = {
        let (shared, goaway, activity) = (shared.clone(), goaway.clone(), activity.clone());
        service_fn(move |mut req: Request<Incoming>| {
            req.extensions_mut().insert(conn_info.clone());
            let (shared, goaway, mut going_away) = (shared.clone(), goaway.clone(), going_away_rx.clone());
            let in_progress = http2.then(|| activity.begin());
            async move {
                let mut resp = dispatch(&shared, req).await;
                if let Some(in_progress) = in_progress {
                    resp = response::hold_until_sent(resp, in_progress);
                }
                if resp.extensions().get::<CloseConnection>().is_some() {
                    if http2 {
                        // The answer goes out only once the GOAWAY is queued ahead of it, so the
                        // client knows before it could send another request on this connection.
                        goaway.notify_one();
                        let _ = going_away.wait_for(|v| *v).await;
                    } else {
                        resp.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
                    }
                }
                Ok::<_, std::convert::Infallible>(resp)
            }
        })
    };
    let conn = shared.builder.serve_connection_with_upgrades(TokioIo::new(tls), service);
    tokio::pin!(conn);
    // HTTP/2 connections open when termination starts are told at once; later ones after
    // their first answer (the shutdown filter marks answers), since a GOAWAY before any
    // request would only send the client to reconnect here again.
    let told_on_termination = http2 && !shared.lifecycle.shutdown_initiated.is_signaled();
    let mut terminating = shared.lifecycle.shutdown_initiated.subscribe();
    let mut going_away = false;
    // HTTP/1.1 idle connections are closed by hyper's head timer (see `connection_builder`).
    let idle = async {
        if http2 {
            activity.until_idle_for(shared.idle_timeout).await;
        } else {
            std::future::pending::<()>().await;
        }
    };
    tokio::pin!(idle);
    loop {
        let go_away = tokio::select! {
            result = conn.as_mut() => {
                if let Err(e) = result {
                    tracing::debug!(%peer, "connection ended: {e}");
                }
                return;
            }
            () = goaway.notified(), if !going_away => true,
            () = fired(&mut terminating), if told_on_termination && !going_away => true,
            () = fired(&mut closing), if !going_away => true,
            () = &mut idle, if !going_away => true,
        };
        if go_away {
            conn.as_mut().graceful_shutdown();
            going_away = true;
            going_away_tx.send_replace(true);
        }
    }
}

/// Resolves once the flag is true (the guard `wait_for` returns must not live across an await).
async fn fired(rx: &mut watch::Receiver<bool>) {
    let _ = rx.wait_for(|v| *v).await;
}

fn is_health_path(path: &str) -> bool {
    ["/healthz", "/livez", "/readyz"].iter().any(|p| path == *p || path.strip_prefix(p).is_some_and(|rest| rest.starts_with('/')))
}

/// kube's answer for a path requested before every route is installed.
fn not_installed() -> Response<Body> {
    let mut err = ApiError::service_unavailable("the request has been made before all known HTTP paths have been installed, please try again");
    err.details = Some(Box::new(kapi_apimachinery::status::Details { retry_after_seconds: Some(5), ..Default::default() }));
    response::error(&err, Output::JSON)
}

async fn dispatch(shared: &Shared, req: Request<Incoming>) -> Response<Body> {
    if let Some(chain) = shared.chain.get() {
        return run(chain, req).await;
    }
    // Before the server is built: health from the registry, the static version, and the rest
    // waits for the chain.
    let path = req.uri().path();
    if is_health_path(path) {
        return health::respond(&shared.health, path, &Query::parse(req.uri().query())).await;
    }
    if path == "/version" {
        return crate::handlers::system::respond();
    }
    let installed = tokio::select! {
        chain = shared.chain.wait(shared.install_wait) => chain,
        // Terminating before the server was even built: nothing will be installed.
        () = shared.lifecycle.not_accepting_new_requests.signaled() => None,
    };
    match installed {
        Some(chain) => run(chain, req).await,
        None => not_installed(),
    }
}

async fn run(chain: Chain, req: Request<Incoming>) -> Response<Body> {
    match chain.oneshot(req).await {
        Ok(resp) => resp,
        Err(never) => match never {},
    }
}

#[cfg(test)]
mod tests {
    use super::{connection_builder, is_health_path};
    use std::time::Duration;

    use bytes::Bytes;
    use http_body_util::Full;
    use hyper_util::rt::{TokioExecutor, TokioIo};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    /// A plaintext server with kapi's connection settings answering 200 to everything.
    async fn server() -> std::net::SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("address");
        let builder = connection_builder(Duration::from_secs(10), 100);
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let builder = builder.clone();
                tokio::spawn(async move {
                    let ok = hyper::service::service_fn(|_req| async { Ok::<_, std::convert::Infallible>(http::Response::new(Full::new(Bytes::from_static(b"ok")))) });
                    let _ = builder.serve_connection(TokioIo::new(tcp), ok).await;
                });
            }
        });
        addr
    }

    /// The status code of an HTTP/1.1 GET with a header of `bytes` bytes (0: no answer); the
    /// answer is read while the head is still being written.
    async fn http1_code(addr: std::net::SocketAddr, bytes: usize) -> u16 {
        let tcp = TcpStream::connect(addr).await.expect("connect");
        let (mut rd, mut wr) = tcp.into_split();
        let head = format!("GET / HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n", "a".repeat(bytes));
        let writer = tokio::spawn(async move {
            for piece in head.as_bytes().chunks(64 * 1024) {
                if wr.write_all(piece).await.is_err() {
                    return;
                }
            }
            tokio::time::sleep(Duration::from_secs(30)).await;
        });
        let mut answer = Vec::new();
        let mut buf = [0u8; 4096];
        while !answer.windows(4).any(|w| w == b"\r\n\r\n") {
            match tokio::time::timeout(Duration::from_secs(10), rd.read(&mut buf)).await {
                Ok(Ok(n)) if n > 0 => answer.extend_from_slice(&buf[..n]),
                _ => break,
            }
        }
        writer.abort();
        String::from_utf8_lossy(&answer).split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0)
    }

    /// The status code of an HTTP/2 GET with a header of `bytes` bytes (0: no answer).
    async fn http2_code(addr: std::net::SocketAddr, bytes: usize) -> u16 {
        let tcp = TcpStream::connect(addr).await.expect("connect");
        let (mut sender, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tcp)).await.expect("handshake");
        tokio::spawn(conn);
        let req = http::Request::get(format!("http://{addr}/")).header("x-big", "a".repeat(bytes)).body(Full::new(Bytes::new())).expect("request");
        match tokio::time::timeout(Duration::from_secs(10), sender.send_request(req)).await {
            Ok(Ok(resp)) => resp.status().as_u16(),
            _ => 0,
        }
    }

    #[tokio::test]
    async fn request_heads_within_the_bounds() {
        let addr = server().await;
        // HTTP/1.1: hyper's ~400 KiB (checked after each read, so a head arriving in large
        // reads may pass with up to twice that; past it, always 431).
        assert_eq!(http1_code(addr, 300 * 1024).await, 200);
        assert_eq!(http1_code(addr, 1024 * 1024).await, 431);
        // HTTP/2: kube's 1 MiB + 320 bytes; h2's default was 16 KiB, which refused large bearer
        // tokens.
        assert_eq!(http2_code(addr, 64 * 1024).await, 200);
        assert_eq!(http2_code(addr, 1000 * 1024).await, 200);
        assert_ne!(http2_code(addr, 2 * 1024 * 1024).await, 200);
    }

    #[test]
    fn health_paths_are_the_three_endpoints_and_their_checks() {
        for p in ["/readyz", "/livez", "/healthz", "/readyz/poststarthook/rbac/bootstrap-roles", "/livez/ping"] {
            assert!(is_health_path(p), "{p}");
        }
        for p in ["/readyzz", "/api", "/version", "/metrics"] {
            assert!(!is_health_path(p), "{p}");
        }
    }
}
