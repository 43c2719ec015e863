//! The kubelet client (kube's `pkg/kubelet/client`): where a node's kubelet listens and the
//! TLS it is reached with, for the pod subresources kube-apiserver proxies to it (log, exec,
//! attach, portforward; see `handlers::pod_connect`).
//!
//! As kube: the address is the first of the Node's `status.addresses` in
//! `--kubelet-preferred-address-types` order, the port `status.daemonEndpoints.kubeletEndpoint.Port`
//! (10250 when unset), the scheme HTTPS with `--kubelet-client-certificate`/`--kubelet-client-key`
//! as client certificate. Without `--kubelet-certificate-authority` kube does not verify the
//! kubelet's serving certificate (its transport config turns `Insecure` on when there is no CA),
//! and neither does kapi; with one, the certificate must chain to it and name the address.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use kapi_apimachinery::{ApiError, StatusReason};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use serde_json::Value;
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

use crate::tls;

/// kube's default `--kubelet-preferred-address-types`.
pub const DEFAULT_PREFERRED_ADDRESS_TYPES: &[&str] = &["Hostname", "InternalDNS", "InternalIP", "ExternalDNS", "ExternalIP"];
/// The kubelet port when a Node does not report one (kube's `ports.KubeletPort`).
pub const DEFAULT_PORT: u16 = 10250;
/// kube's default `--kubelet-timeout`.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

/// The `--kubelet-*` flags.
#[derive(Debug, Clone)]
pub struct KubeletClientOptions {
    /// `--kubelet-client-certificate`: the client certificate kapi presents to kubelets.
    pub client_certificate: Option<PathBuf>,
    /// `--kubelet-client-key`.
    pub client_key: Option<PathBuf>,
    /// `--kubelet-certificate-authority`: the CA kubelets' serving certificates chain to;
    /// without it they are not verified (kube's behaviour).
    pub certificate_authority: Option<PathBuf>,
    /// `--kubelet-timeout`: bound on reaching a kubelet and reading its answer's head (the
    /// stream that follows, a followed log or an exec session, is not bounded).
    pub timeout: Duration,
    /// `--kubelet-preferred-address-types`.
    pub preferred_address_types: Vec<String>,
}

impl Default for KubeletClientOptions {
    fn default() -> Self {
        Self {
            client_certificate: None,
            client_key: None,
            certificate_authority: None,
            timeout: DEFAULT_TIMEOUT,
            preferred_address_types: DEFAULT_PREFERRED_ADDRESS_TYPES.iter().map(|s| (*s).to_owned()).collect(),
        }
    }
}

/// Why the `--kubelet-*` flags cannot be used (a start-up error).
#[derive(Debug, thiserror::Error)]
pub enum KubeletConfigError {
    /// A certificate or key file could not be read.
    #[error("{flag}: reading {path}: {source}")]
    Read {
        /// The flag naming the file.
        flag: &'static str,
        /// The file.
        path: String,
        /// The IO error.
        source: std::io::Error,
    },
    /// The PEM material is unusable.
    #[error("{flag}: {source}")]
    Pem {
        /// The flag naming the file.
        flag: &'static str,
        /// What is wrong with it.
        source: tls::TlsError,
    },
    /// Only one of the certificate and its key was given.
    #[error("--kubelet-client-certificate and --kubelet-client-key must be given together")]
    HalfPair,
    /// rustls refused the client certificate and key.
    #[error("--kubelet-client-certificate: {0}")]
    Rustls(#[from] rustls::Error),
}

/// A failure to reach a kubelet; rendered once as kube renders it (see [`KubeletError::into_api_error`]).
#[derive(Debug, thiserror::Error)]
pub enum KubeletError {
    /// No address of a preferred type (kube's `NoMatchError`).
    #[error("no preferred addresses found; known addresses: {0}")]
    NoPreferredAddress(String),
    /// The TCP connection failed, in Go's words (`dial tcp 127.0.0.1:1: connect: connection refused`).
    #[error("dial tcp {addr}: {reason}")]
    Dial {
        /// `host:port`.
        addr: String,
        /// Go's wording of the failure.
        reason: String,
    },
    /// The TLS handshake failed.
    #[error("tls: {0}")]
    Tls(String),
    /// The kubelet did not answer within `--kubelet-timeout`.
    #[error("dial tcp {0}: i/o timeout")]
    Timeout(String),
    /// The HTTP exchange failed.
    #[error("{0}")]
    Http(String),
}

impl KubeletError {
    /// kube hands these errors, which are not API errors, to its error responder: a 500 whose
    /// reason is unknown (left out) and whose message is the error text, prefixed with what
    /// was being done (`error dialing backend: ...`, `Get "https://...": ...`).
    pub fn into_api_error(self, context: &str) -> ApiError {
        let message = if context.is_empty() { self.to_string() } else { format!("{context}: {self}") };
        ApiError::new(500, StatusReason::Unknown, message)
    }
}

/// Where one node's kubelet listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeletAddress {
    /// The address of the preferred type (an IP or a host name).
    pub host: String,
    /// The kubelet port.
    pub port: u16,
}

impl fmt::Display for KubeletAddress {
    /// `host:port`, with IPv6 addresses bracketed as Go's `net.JoinHostPort` writes them.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

/// The kubelet client: TLS configurations (verifying, and skipping verification for
/// `insecureSkipTLSVerifyBackend`), the timeout and the address preference.
pub struct KubeletClient {
    verified: Arc<rustls::ClientConfig>,
    insecure: Arc<rustls::ClientConfig>,
    timeout: Duration,
    preferred_address_types: Vec<String>,
}

impl fmt::Debug for KubeletClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KubeletClient").field("timeout", &self.timeout).field("preferred_address_types", &self.preferred_address_types).finish()
    }
}

fn read(flag: &'static str, path: &PathBuf) -> Result<String, KubeletConfigError> {
    std::fs::read_to_string(path).map_err(|source| KubeletConfigError::Read { flag, path: path.display().to_string(), source })
}

impl KubeletClient {
    /// Reads the flags' files (blocking: call it where start-up does its file IO).
    pub fn new(opts: &KubeletClientOptions) -> Result<Self, KubeletConfigError> {
        let client_auth = match (&opts.client_certificate, &opts.client_key) {
            (Some(cert), Some(key)) => {
                let chain = tls::parse_certificates(&read("--kubelet-client-certificate", cert)?, "the kubelet client certificate")
                    .map_err(|source| KubeletConfigError::Pem { flag: "--kubelet-client-certificate", source })?;
                let key = tls::parse_private_key(&read("--kubelet-client-key", key)?)
                    .map_err(|source| KubeletConfigError::Pem { flag: "--kubelet-client-key", source })?;
                Some((chain, key))
            }
            (None, None) => None,
            _ => return Err(KubeletConfigError::HalfPair),
        };
        let verifier: Arc<dyn ServerCertVerifier> = match &opts.certificate_authority {
            Some(ca) => {
                let roots = tls::root_store(&read("--kubelet-certificate-authority", ca)?)
                    .map_err(|source| KubeletConfigError::Pem { flag: "--kubelet-certificate-authority", source })?;
                rustls::client::WebPkiServerVerifier::builder_with_provider(Arc::new(roots), tls::crypto_provider())
                    .build()
                    .map_err(|e| KubeletConfigError::Rustls(rustls::Error::General(e.to_string())))?
            }
            None => Arc::new(SkipVerification(tls::crypto_provider())),
        };
        let build = |verifier: Arc<dyn ServerCertVerifier>| -> Result<Arc<rustls::ClientConfig>, KubeletConfigError> {
            let builder = rustls::ClientConfig::builder_with_provider(tls::crypto_provider())
                .with_safe_default_protocol_versions()?
                .dangerous()
                .with_custom_certificate_verifier(verifier);
            let mut config = match &client_auth {
                Some((chain, key)) => builder.with_client_auth_cert(chain.clone(), key.clone_key())?,
                None => builder.with_no_client_auth(),
            };
            // Upgrades (SPDY, WebSocket) only exist in HTTP/1.1.
            config.alpn_protocols = vec![b"http/1.1".to_vec()];
            Ok(Arc::new(config))
        };
        Ok(Self {
            verified: build(verifier)?,
            insecure: build(Arc::new(SkipVerification(tls::crypto_provider())))?,
            timeout: opts.timeout,
            preferred_address_types: opts.preferred_address_types.clone(),
        })
    }

    /// `--kubelet-timeout`.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The kubelet address of a Node object (kube's `GetConnectionInfo`).
    pub fn address(&self, node: &Value) -> Result<KubeletAddress, KubeletError> {
        let addresses = node.pointer("/status/addresses").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
        let field = |a: &Value, k: &str| a.get(k).and_then(Value::as_str).unwrap_or_default().to_owned();
        let host = self
            .preferred_address_types
            .iter()
            .find_map(|wanted| addresses.iter().find(|a| field(a, "type") == *wanted).map(|a| field(a, "address")))
            .ok_or_else(|| {
                // Go's `%v` of a []NodeAddress: `[{InternalIP 10.0.0.1} {Hostname n1}]`.
                let known: Vec<String> = addresses.iter().map(|a| format!("{{{} {}}}", field(a, "type"), field(a, "address"))).collect();
                KubeletError::NoPreferredAddress(format!("[{}]", known.join(" ")))
            })?;
        let port = node
            .pointer("/status/daemonEndpoints/kubeletEndpoint/Port")
            .and_then(Value::as_i64)
            .filter(|p| *p > 0)
            .and_then(|p| u16::try_from(p).ok())
            .unwrap_or(DEFAULT_PORT);
        Ok(KubeletAddress { host, port })
    }

    /// Opens a TLS connection to a kubelet within `--kubelet-timeout`; `insecure` skips the
    /// serving certificate check (`insecureSkipTLSVerifyBackend`).
    pub async fn connect(&self, to: &KubeletAddress, insecure: bool) -> Result<TlsStream<TcpStream>, KubeletError> {
        let config = if insecure { self.insecure.clone() } else { self.verified.clone() };
        let name = ServerName::try_from(to.host.clone()).map_err(|e| KubeletError::Dial { addr: to.to_string(), reason: e.to_string() })?;
        let connecting = async {
            let tcp = TcpStream::connect((to.host.as_str(), to.port))
                .await
                .map_err(|e| KubeletError::Dial { addr: to.to_string(), reason: go_dial_error(&e) })?;
            let _ = tcp.set_nodelay(true);
            TlsConnector::from(config).connect(name, tcp).await.map_err(|e| KubeletError::Tls(e.to_string()))
        };
        tokio::time::timeout(self.timeout, connecting).await.map_err(|_| KubeletError::Timeout(to.to_string()))?
    }
}

/// How Go's net package words a failed dial, which kube's messages carry.
fn go_dial_error(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::ConnectionRefused => "connect: connection refused".to_owned(),
        std::io::ErrorKind::TimedOut => "i/o timeout".to_owned(),
        _ => format!("connect: {e}"),
    }
}

/// Accepts any serving certificate, as kube's kubelet transport does without a CA; the
/// handshake signatures are still checked, so the peer holds the key of what it presents.
#[derive(Debug)]
pub struct SkipVerification(pub Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for SkipVerification {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(&self, message: &[u8], cert: &CertificateDer<'_>, dss: &DigitallySignedStruct) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(&self, message: &[u8], cert: &CertificateDer<'_>, dss: &DigitallySignedStruct) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn client(types: &[&str]) -> KubeletClient {
        tls::install_crypto_provider();
        let opts = KubeletClientOptions { preferred_address_types: types.iter().map(|s| (*s).to_owned()).collect(), ..Default::default() };
        KubeletClient::new(&opts).expect("client without files")
    }

    #[test]
    fn address_follows_the_preferred_types_and_the_reported_port() {
        let node = json!({"status": {"addresses": [
            {"type": "InternalIP", "address": "10.0.0.5"}, {"type": "Hostname", "address": "n1"}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 11250}}}});
        let kube_default = client(DEFAULT_PREFERRED_ADDRESS_TYPES);
        assert_eq!(kube_default.address(&node).unwrap(), KubeletAddress { host: "n1".into(), port: 11250 });
        let ip_first = client(&["InternalIP", "Hostname"]);
        assert_eq!(ip_first.address(&node).unwrap().to_string(), "10.0.0.5:11250");
    }

    #[test]
    fn address_defaults_the_port_and_names_known_addresses_when_none_is_preferred() {
        let node = json!({"status": {"addresses": [{"type": "ExternalIP", "address": "fd00::1"}]}});
        let addr = client(&["ExternalIP"]).address(&node).unwrap();
        assert_eq!(addr.to_string(), "[fd00::1]:10250");
        let err = client(&["InternalIP"]).address(&node).unwrap_err();
        assert_eq!(err.to_string(), "no preferred addresses found; known addresses: [{ExternalIP fd00::1}]");
        let status = err.into_api_error("").to_status();
        assert_eq!(status["code"], 500);
        assert!(status.get("reason").is_none(), "kube's unknown reason is left out: {status}");
    }

    #[test]
    fn a_certificate_without_its_key_is_a_start_error() {
        let opts = KubeletClientOptions { client_certificate: Some("/nonexistent.crt".into()), ..Default::default() };
        assert!(matches!(KubeletClient::new(&opts), Err(KubeletConfigError::HalfPair)));
        let opts = KubeletClientOptions { certificate_authority: Some("/nonexistent/ca.crt".into()), ..Default::default() };
        let err = KubeletClient::new(&opts).unwrap_err().to_string();
        assert!(err.starts_with("--kubelet-certificate-authority: reading /nonexistent/ca.crt"), "{err}");
    }

    #[tokio::test]
    async fn refused_dials_read_as_go_words_them() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        let to = KubeletAddress { host: "127.0.0.1".into(), port };
        let err = client(DEFAULT_PREFERRED_ADDRESS_TYPES).connect(&to, false).await.unwrap_err();
        assert_eq!(err.into_api_error("error dialing backend").message, format!("error dialing backend: dial tcp 127.0.0.1:{port}: connect: connection refused"));
    }
}
