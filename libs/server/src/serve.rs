//! The TLS listener: accepts connections, verifies client certificates, serves HTTP/1.1 and
//! HTTP/2 through the handler chain, and drains on shutdown.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt;

use crate::filters::{self, ConnInfo};
use crate::tls::ClientChainVerifier;
use kapi_auth::ChainVerdict;
use crate::state::ApiServer;

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
        ConnInfo { client_ca: verdict(&self.client), front_proxy_ca: verdict(&self.front_proxy), peer_certificates: Some(chain) }
    }
}

/// How long a client may take to finish the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Accepts connections until `shutdown` resolves, then waits (bounded by `drain`) for in-flight
/// requests to finish. Long-running watches end on their own when the lifecycle's shutdown
/// signal fires.
pub async fn serve(
    srv: Arc<ApiServer>,
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    verifiers: ChainVerifiers,
    shutdown: impl Future<Output = ()>,
    drain: Duration,
) {
    let acceptor = TlsAcceptor::from(tls);
    let chain = filters::chain(srv);
    let graceful = GracefulShutdown::new();
    let builder = Arc::new(auto::Builder::new(TokioExecutor::new()));
    tokio::pin!(shutdown);
    loop {
        let (tcp, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = tcp.set_nodelay(true);
        let acceptor = acceptor.clone();
        let chain = chain.clone();
        let builder = builder.clone();
        let verifiers = verifiers.clone();
        let watcher = graceful.watcher();
        tokio::spawn(async move {
            let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
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
            let presented = tls
                .get_ref()
                .1
                .peer_certificates()
                .map(|certs| certs.iter().map(|c| c.as_ref().to_vec()).collect::<Vec<_>>());
            // The handshake proved key possession; the chain is judged here, once per
            // connection, against each CA bundle, so a certificate from another CA is a 401
            // rather than a reset.
            let conn_info = verifiers.judge(presented);
            let conn_info = Arc::new(conn_info);
            let service = service_fn(move |mut req: http::Request<hyper::body::Incoming>| {
                req.extensions_mut().insert(conn_info.clone());
                chain.clone().oneshot(req)
            });
            let conn = builder.serve_connection_with_upgrades(TokioIo::new(tls), service);
            if let Err(e) = watcher.watch(conn.into_owned()).await {
                tracing::debug!(%peer, "connection ended: {e}");
            }
        });
    }
    drop(listener);
    tokio::select! {
        () = graceful.shutdown() => tracing::info!("all connections drained"),
        () = tokio::time::sleep(drain) => tracing::warn!("drain timeout after {drain:?}; closing remaining connections"),
    }
}
