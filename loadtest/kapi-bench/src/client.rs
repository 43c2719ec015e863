//! A small HTTPS client for the benchmark: one kept-alive HTTP/1.1 connection per task, with
//! the admin client certificate, so every run measures the server, not connection set-up.

use std::sync::Arc;

use bytes::Bytes;
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

/// Where and how to connect.
#[derive(Clone)]
pub struct Target {
    pub addr: String,
    tls: Arc<rustls::ClientConfig>,
}

impl Target {
    /// TLS trusting `ca_pem`, presenting `cert_pem`/`key_pem` when given.
    pub fn new(addr: String, ca_pem: &str, client: Option<(&str, &str)>) -> Result<Self, String> {
        let mut roots = rustls::RootCertStore::empty();
        for cert in rustls_pemfile::certs(&mut ca_pem.as_bytes()) {
            roots
                .add(cert.map_err(|e| e.to_string())?)
                .map_err(|e| e.to_string())?;
        }
        let builder = rustls::ClientConfig::builder().with_root_certificates(roots);
        let config = match client {
            Some((cert, key)) => {
                let chain: Vec<CertificateDer<'static>> =
                    rustls_pemfile::certs(&mut cert.as_bytes())
                        .collect::<Result<_, _>>()
                        .map_err(|e| e.to_string())?;
                let key: PrivateKeyDer<'static> = rustls_pemfile::private_key(&mut key.as_bytes())
                    .map_err(|e| e.to_string())?
                    .ok_or("no private key")?;
                builder
                    .with_client_auth_cert(chain, key)
                    .map_err(|e| e.to_string())?
            }
            None => builder.with_no_client_auth(),
        };
        Ok(Self {
            addr,
            tls: Arc::new(config),
        })
    }

    /// Opens one HTTP/2 connection (ALPN `h2`) that carries many concurrent streams, as
    /// client-go multiplexes its watches.
    pub async fn connect_h2(&self) -> Result<H2Conn, String> {
        let tcp = TcpStream::connect(&self.addr).await.map_err(|e| format!("connect {}: {e}", self.addr))?;
        tcp.set_nodelay(true).map_err(|e| e.to_string())?;
        let name = ServerName::try_from("localhost").map_err(|e| e.to_string())?;
        let mut config = (*self.tls).clone();
        config.alpn_protocols = vec![b"h2".to_vec()];
        let tls = TlsConnector::from(Arc::new(config)).connect(name, tcp).await.map_err(|e| format!("TLS: {e}"))?;
        if tls.get_ref().1.alpn_protocol() != Some(b"h2") {
            return Err("the server did not choose HTTP/2".into());
        }
        let (sender, conn) = hyper::client::conn::http2::handshake(hyper_util::rt::TokioExecutor::new(), TokioIo::new(tls))
            .await
            .map_err(|e| format!("HTTP/2: {e}"))?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(H2Conn { sender })
    }

    /// Opens one connection.
    pub async fn connect(&self) -> Result<Conn, String> {
        let tcp = TcpStream::connect(&self.addr)
            .await
            .map_err(|e| format!("connect {}: {e}", self.addr))?;
        tcp.set_nodelay(true).map_err(|e| e.to_string())?;
        let name = ServerName::try_from("localhost").map_err(|e| e.to_string())?;
        let tls = TlsConnector::from(self.tls.clone())
            .connect(name, tcp)
            .await
            .map_err(|e| format!("TLS: {e}"))?;
        let (sender, conn) = http1::handshake(TokioIo::new(tls))
            .await
            .map_err(|e| format!("HTTP: {e}"))?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(Conn { sender })
    }
}

/// One kept-alive connection.
pub struct Conn {
    sender: http1::SendRequest<Full<Bytes>>,
}

impl Conn {
    /// Sends a request and reads the whole answer.
    pub async fn send(
        &mut self,
        method: Method,
        path: &str,
        body: Option<Bytes>,
    ) -> Result<(StatusCode, Bytes), String> {
        let resp = self.start(method, path, body).await?;
        let status = resp.status();
        let bytes = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| e.to_string())?
            .to_bytes();
        Ok((status, bytes))
    }

    /// Sends a request and returns the streaming response (watches).
    pub async fn start(
        &mut self,
        method: Method,
        path: &str,
        body: Option<Bytes>,
    ) -> Result<hyper::Response<hyper::body::Incoming>, String> {
        self.start_accepting(method, path, body, None).await
    }

    /// A GET with an `Accept` header (aggregated discovery), read whole.
    pub async fn get_accepting(&mut self, path: &str, accept: &str) -> Result<(StatusCode, Bytes), String> {
        let resp = self.start_accepting(Method::GET, path, None, Some(accept)).await?;
        let status = resp.status();
        let bytes = resp.into_body().collect().await.map_err(|e| e.to_string())?.to_bytes();
        Ok((status, bytes))
    }

    async fn start_accepting(
        &mut self,
        method: Method,
        path: &str,
        body: Option<Bytes>,
        accept: Option<&str>,
    ) -> Result<hyper::Response<hyper::body::Incoming>, String> {
        self.sender.ready().await.map_err(|e| e.to_string())?;
        let mut req = Request::builder()
            .method(method)
            .uri(path)
            .header("host", "localhost");
        if let Some(accept) = accept {
            req = req.header("accept", accept);
        }
        if body.is_some() {
            req = req.header("content-type", "application/json");
        }
        let req = req
            .body(Full::new(body.unwrap_or_default()))
            .map_err(|e| e.to_string())?;
        self.sender
            .send_request(req)
            .await
            .map_err(|e| e.to_string())
    }
}

/// One HTTP/2 connection; clones share it, each request is a stream.
#[derive(Clone)]
pub struct H2Conn {
    sender: hyper::client::conn::http2::SendRequest<Full<Bytes>>,
}

impl H2Conn {
    /// Sends a GET and returns the streaming response.
    pub async fn get(&mut self, path: &str) -> Result<hyper::Response<hyper::body::Incoming>, String> {
        self.sender.ready().await.map_err(|e| e.to_string())?;
        let req = Request::builder().method(Method::GET).uri(format!("https://localhost{path}")).body(Full::new(Bytes::new())).map_err(|e| e.to_string())?;
        self.sender.send_request(req).await.map_err(|e| e.to_string())
    }
}
