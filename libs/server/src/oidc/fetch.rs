//! The HTTPS GETs of an OIDC issuer's discovery document and JWKS: one request per connection
//! (they are rare), HTTP/1.1 over rustls trusting the authenticator's `certificateAuthority`
//! (or the host's roots without one, as Go's default transport), bounded by kube's 30 s client
//! timeout. Failures read like Go's net/http ones (`Get "<url>": ...`).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Limited};
use hyper_util::rt::TokioIo;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

/// kube's OIDC HTTP client timeout.
pub const TIMEOUT: Duration = Duration::from_secs(30);
/// The largest discovery document or JWKS read.
const MAX_BODY: usize = 4 << 20;

/// A GET client trusting one CA bundle.
#[derive(Clone)]
pub struct Getter {
    tls: Arc<rustls::ClientConfig>,
}

impl std::fmt::Debug for Getter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Getter")
    }
}

/// An answer: status code, Go's status text (`404 Not Found`) and body.
#[derive(Debug)]
pub struct Answer {
    /// The status code.
    pub code: u16,
    /// `<code> <reason>`, as Go's `resp.Status`.
    pub status: String,
    /// The body.
    pub body: Bytes,
}

/// The certificates of a PEM bundle, with client-go's error when there are none.
pub fn pem_certificates(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs: Vec<CertificateDer<'static>> = rustls_pemfile::certs(&mut &pem[..]).filter_map(Result::ok).collect();
    if certs.is_empty() {
        return Err("data does not contain any valid RSA or ECDSA certificates".into());
    }
    Ok(certs)
}

impl Getter {
    /// A client trusting `ca_pem`, or the host's roots when None.
    pub fn new(ca_pem: Option<&[u8]>) -> Result<Getter, String> {
        let mut roots = rustls::RootCertStore::empty();
        match ca_pem {
            Some(pem) => {
                for cert in pem_certificates(pem)? {
                    roots.add(cert).map_err(|e| format!("Failed to read the CA contents: {e}"))?;
                }
            }
            None => {
                let found = rustls_native_certs::load_native_certs();
                roots.add_parsable_certificates(found.certs);
            }
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Getter { tls: Arc::new(config) })
    }

    /// GETs `url` (https only), within [`TIMEOUT`].
    pub async fn get(&self, url: &str) -> Result<Answer, String> {
        match tokio::time::timeout(TIMEOUT, self.call(url)).await {
            Ok(answer) => answer.map_err(|e| format!("Get {url:?}: {e}")),
            Err(_) => Err(format!("Get {url:?}: context deadline exceeded (Client.Timeout exceeded while awaiting headers)")),
        }
    }

    async fn call(&self, url: &str) -> Result<Answer, String> {
        let uri: http::Uri = url.parse().map_err(|e: http::uri::InvalidUri| e.to_string())?;
        if uri.scheme_str() != Some("https") {
            return Err(format!("unsupported protocol scheme {:?}", uri.scheme_str().unwrap_or("")));
        }
        let authority = uri.authority().ok_or("no Host in request URL")?.clone();
        let host = authority.host().trim_start_matches('[').trim_end_matches(']').to_owned();
        let port = authority.port_u16().unwrap_or(443);
        let tcp = TcpStream::connect((host.as_str(), port)).await.map_err(|e| format!("dial tcp {host}:{port}: connect: {e}"))?;
        let _ = tcp.set_nodelay(true);
        let name = ServerName::try_from(host.clone()).map_err(|e| e.to_string())?;
        let stream = TlsConnector::from(self.tls.clone()).connect(name, tcp).await.map_err(|e| tls_error(&e))?;
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(|e| e.to_string())?;
        let task = tokio::spawn(async move {
            let _ = connection.await;
        });
        let path = uri.path_and_query().map_or("/", |p| p.as_str());
        let request = http::Request::get(path)
            .header(http::header::HOST, authority.as_str())
            .header(http::header::ACCEPT, "application/json")
            .header(http::header::USER_AGENT, concat!("kapi/", env!("CARGO_PKG_VERSION")))
            .body(Empty::<Bytes>::new())
            .map_err(|e| e.to_string())?;
        let response = sender.send_request(request).await.map_err(|e| e.to_string());
        let answer = match response {
            Ok(response) => {
                let code = response.status();
                let body = Limited::new(response.into_body(), MAX_BODY).collect().await.map_err(|e| e.to_string())?.to_bytes();
                Ok(Answer { code: code.as_u16(), status: format!("{} {}", code.as_u16(), code.canonical_reason().unwrap_or("")), body })
            }
            Err(e) => Err(e),
        };
        task.abort();
        answer
    }
}

/// A failed handshake in Go's words where they are well known.
fn tls_error(e: &std::io::Error) -> String {
    match e.get_ref().and_then(|inner| inner.downcast_ref::<rustls::Error>()) {
        Some(rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer)) => {
            "tls: failed to verify certificate: x509: certificate signed by unknown authority".into()
        }
        Some(rustls::Error::InvalidCertificate(other)) => format!("tls: failed to verify certificate: x509: {other:?}"),
        Some(other) => format!("tls: {other}"),
        None => e.to_string(),
    }
}
