//! TLS serving: the rustls server configuration (serving certificate, ALPN, optional client
//! certificates) and the helpers that read PEM material.
//!
//! Client certificates are requested but not required at the TLS layer, like kube-apiserver's
//! `RequestClientCert`: a client without a certificate still connects and is authenticated
//! otherwise (or answered 401). The handshake checks that the client holds the key of the
//! certificate it presents; whether the certificate chains to the client CA is checked after
//! the handshake ([`ClientChainVerifier`]), so that a certificate from another CA gets kube's
//! 401 instead of a failed handshake.

use std::sync::Arc;

use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::WebPkiClientVerifier;
use rustls::{DigitallySignedStruct, DistinguishedName, RootCertStore, SignatureScheme};

/// Why a TLS configuration could not be built.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// The PEM text could not be read.
    #[error("reading {what}: {source}")]
    Pem {
        /// Which input was being read.
        what: &'static str,
        /// The PEM decoding error.
        source: std::io::Error,
    },
    /// The serving certificate PEM holds no certificate.
    #[error("no certificate found in the serving certificate PEM")]
    NoCertificate,
    /// The private key PEM holds no key.
    #[error("no private key found in the serving key PEM")]
    NoPrivateKey,
    /// The client CA bundle holds no usable certificate.
    #[error("client CA bundle: {0}")]
    ClientCa(String),
    /// rustls refused the certificate or key (unsupported key type, key not matching the
    /// certificate, ...).
    #[error("building the TLS configuration: {0}")]
    Rustls(#[from] rustls::Error),
}

/// Installs ring as the process-wide rustls provider, which `ServerConfig::builder()` and
/// `ClientConfig::builder()` require; calling it again (or after someone else did) is harmless.
pub fn install_crypto_provider() {
    // An error only means a provider is already installed, which is what we want.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// The provider kapi's own configurations are built with, independent of the process default,
/// so that building a config never panics.
pub fn crypto_provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Reads every certificate of a PEM bundle, in order (leaf first for a chain).
pub fn parse_certificates(pem: &str, what: &'static str) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    rustls_pemfile::certs(&mut pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|source| TlsError::Pem { what, source })
}

/// Reads the first private key (PKCS#8, PKCS#1 or SEC1) of a PEM text.
pub fn parse_private_key(pem: &str) -> Result<PrivateKeyDer<'static>, TlsError> {
    rustls_pemfile::private_key(&mut pem.as_bytes())
        .map_err(|source| TlsError::Pem { what: "the serving key", source })?
        .ok_or(TlsError::NoPrivateKey)
}

/// Builds a trust store from a PEM bundle of CA certificates.
pub fn root_store(ca_pem: &str) -> Result<RootCertStore, TlsError> {
    let certs = parse_certificates(ca_pem, "the client CA bundle")?;
    if certs.is_empty() {
        return Err(TlsError::ClientCa("no certificate found".into()));
    }
    let mut roots = RootCertStore::empty();
    for cert in certs {
        roots.add(cert).map_err(|e| TlsError::ClientCa(e.to_string()))?;
    }
    Ok(roots)
}

/// rustls server config: the serving cert chain + key (PEM), ALPN h2 and http/1.1, and, when a
/// client CA bundle is given, client certificates requested (not required).
///
/// Security: the handshake only proves the client holds the key of the certificate it sent; the
/// chain is **not** checked against the CA here. Whoever serves with this config must check
/// every presented chain with [`ClientChainVerifier`] before trusting it (`serve::serve` does,
/// once per connection).
pub fn server_config(cert_pem: &str, key_pem: &str, client_ca_pem: Option<&str>) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    server_config_with(cert_pem, key_pem, client_ca_pem, &crate::tls_policy::TlsPolicy::default())
}

/// [`server_config`] under `--tls-min-version` and `--tls-cipher-suites`.
pub fn server_config_with(
    cert_pem: &str,
    key_pem: &str,
    client_ca_pem: Option<&str>,
    policy: &crate::tls_policy::TlsPolicy,
) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    server_config_named(cert_pem, key_pem, client_ca_pem, policy, &[])
}

/// [`server_config_with`] with `--tls-sni-cert-key` certificates chosen by the client's SNI.
pub fn server_config_named(
    cert_pem: &str,
    key_pem: &str,
    client_ca_pem: Option<&str>,
    policy: &crate::tls_policy::TlsPolicy,
    named: &[crate::tls_sni::SniPem],
) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let chain = parse_certificates(cert_pem, "the serving certificate")?;
    if chain.is_empty() {
        return Err(TlsError::NoCertificate);
    }
    let key = parse_private_key(key_pem)?;
    let provider = Arc::new(CryptoProvider { cipher_suites: policy.suites(), ..rustls::crypto::ring::default_provider() });
    let resolver = if named.is_empty() { None } else { Some(Arc::new(crate::tls_sni::SniResolver::new(&provider, (cert_pem, key_pem), named)?)) };
    let builder = rustls::ServerConfig::builder_with_provider(provider).with_protocol_versions(policy.versions())?;
    let builder = match client_ca_pem {
        Some(ca) => {
            let chains = ClientChainVerifier::new(ca)?;
            builder.with_client_cert_verifier(Arc::new(ProofOfPossessionOnly { chains }))
        }
        None => builder.with_no_client_auth(),
    };
    let mut config = match resolver {
        Some(resolver) => builder.with_cert_resolver(resolver),
        None => builder.with_single_cert(chain, key)?,
    };
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Checks client certificate chains against the client CA, after the handshake.
#[derive(Debug, Clone)]
pub struct ClientChainVerifier {
    inner: Arc<dyn ClientCertVerifier>,
}

impl ClientChainVerifier {
    /// A verifier for chains issued by the CAs in `client_ca_pem`.
    pub fn new(client_ca_pem: &str) -> Result<Self, TlsError> {
        let inner = WebPkiClientVerifier::builder_with_provider(Arc::new(root_store(client_ca_pem)?), crypto_provider())
            .allow_unauthenticated()
            .build()
            .map_err(|e| TlsError::ClientCa(e.to_string()))?;
        Ok(Self { inner })
    }

    /// Whether `chain` (DER, leaf first) is valid now and issued by the client CA.
    pub fn verify(&self, chain: &[Vec<u8>]) -> Result<(), String> {
        let Some((leaf, intermediates)) = chain.split_first() else { return Err("no certificate".into()) };
        let leaf = CertificateDer::from(leaf.as_slice());
        let intermediates: Vec<CertificateDer<'_>> = intermediates.iter().map(|c| CertificateDer::from(c.as_slice())).collect();
        self.inner.verify_client_cert(&leaf, &intermediates, UnixTime::now()).map(|_| ()).map_err(|e| e.to_string())
    }
}

/// The handshake half of client-certificate checking: the client must prove it holds the key of
/// the certificate it sends (the signature checks), but any issuer is accepted here; the chain
/// is judged after the handshake by [`ClientChainVerifier`], so that a bad one is a 401.
#[derive(Debug)]
struct ProofOfPossessionOnly {
    chains: ClientChainVerifier,
}

impl ClientCertVerifier for ProofOfPossessionOnly {
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.chains.inner.root_hint_subjects()
    }

    fn verify_client_cert(&self, _end_entity: &CertificateDer<'_>, _intermediates: &[CertificateDer<'_>], _now: UnixTime) -> Result<ClientCertVerified, rustls::Error> {
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(&self, message: &[u8], cert: &CertificateDer<'_>, dss: &DigitallySignedStruct) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.chains.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(&self, message: &[u8], cert: &CertificateDer<'_>, dss: &DigitallySignedStruct) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.chains.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.chains.inner.supported_verify_schemes()
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }
}

/// The verified client chain of a connection (DER, leaf first), in the shape
/// `kapi_auth::AuthRequest::peer_certificates` takes.
pub fn peer_certificates(conn: &rustls::ServerConnection) -> Option<Vec<Vec<u8>>> {
    conn.peer_certificates().map(|certs| certs.iter().map(|c| c.as_ref().to_vec()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pki::{ensure_pki, issue_client_cert, tests::TempDir, Pki};
    use kapi_auth::{AuthOutcome, AuthRequest, Authenticator, UnionAuthenticator, X509Authenticator};
    use rustls::pki_types::ServerName;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    fn pki(tag: &str) -> (TempDir, Pki) {
        let dir = TempDir::new(tag);
        let pki = ensure_pki(dir.path(), &["127.0.0.1".to_owned()]).expect("pki");
        (dir, pki)
    }

    fn client_config(pki: &Pki, client: Option<(&str, &str)>) -> Arc<rustls::ClientConfig> {
        let builder = rustls::ClientConfig::builder_with_provider(crypto_provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(root_store(&pki.ca_cert_pem).unwrap());
        let config = match client {
            Some((cert, key)) => builder
                .with_client_auth_cert(parse_certificates(cert, "client").unwrap(), parse_private_key(key).unwrap())
                .unwrap(),
            None => builder.with_no_client_auth(),
        };
        Arc::new(config)
    }

    /// Runs one handshake plus a one-byte echo; returns what the server saw (peer chain and
    /// ALPN) or the server-side handshake error.
    async fn handshake(
        server: Arc<rustls::ServerConfig>,
        client: Arc<rustls::ClientConfig>,
        alpn: &[&[u8]],
    ) -> (Result<(Option<Vec<Vec<u8>>>, Option<Vec<u8>>), std::io::Error>, Result<u8, std::io::Error>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server_task = tokio::spawn(async move {
            let (tcp, _) = listener.accept().await?;
            let mut tls = tokio_rustls::TlsAcceptor::from(server).accept(tcp).await?;
            let seen = (peer_certificates(tls.get_ref().1), tls.get_ref().1.alpn_protocol().map(<[u8]>::to_vec));
            let mut byte = [0u8; 1];
            tls.read_exact(&mut byte).await?;
            tls.write_all(&byte).await?;
            tls.shutdown().await?;
            Ok::<_, std::io::Error>(seen)
        });
        let mut client = (*client).clone();
        client.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        let client_result = async {
            let tcp = TcpStream::connect(addr).await?;
            let name = ServerName::try_from("localhost").map_err(std::io::Error::other)?;
            let mut tls = tokio_rustls::TlsConnector::from(Arc::new(client)).connect(name, tcp).await?;
            tls.write_all(&[42]).await?;
            let mut byte = [0u8; 1];
            tls.read_exact(&mut byte).await?;
            Ok::<_, std::io::Error>(byte[0])
        }
        .await;
        let server_result = server_task.await.unwrap();
        (server_result, client_result)
    }

    #[test]
    fn builds_with_and_without_client_ca() {
        let (_dir, pki) = pki("tls-build");
        let with = server_config(&pki.serving_cert_pem, &pki.serving_key_pem, Some(&pki.ca_cert_pem)).unwrap();
        assert_eq!(with.alpn_protocols, vec![b"h2".to_vec(), b"http/1.1".to_vec()]);
        let without = server_config(&pki.serving_cert_pem, &pki.serving_key_pem, None).unwrap();
        assert_eq!(without.alpn_protocols.len(), 2);
    }

    #[test]
    fn rejects_bad_input() {
        let (_dir, pki) = pki("tls-bad");
        assert!(matches!(server_config("", &pki.serving_key_pem, None), Err(TlsError::NoCertificate)));
        assert!(matches!(server_config(&pki.serving_cert_pem, "", None), Err(TlsError::NoPrivateKey)));
        // A key that does not belong to the certificate.
        assert!(server_config(&pki.serving_cert_pem, &pki.admin_key_pem, None).is_err());
        assert!(matches!(
            server_config(&pki.serving_cert_pem, &pki.serving_key_pem, Some("garbage")),
            Err(TlsError::ClientCa(_))
        ));
    }

    #[tokio::test]
    async fn handshake_passes_client_certificate_to_the_authenticator() {
        let (_dir, pki) = pki("tls-hs");
        let (cert, key) = issue_client_cert(&pki, "jane", &["dev", "ops"]).unwrap();
        let server = server_config(&pki.serving_cert_pem, &pki.serving_key_pem, Some(&pki.ca_cert_pem)).unwrap();
        let (seen, echoed) = handshake(server, client_config(&pki, Some((&cert, &key))), &[b"h2"]).await;
        assert_eq!(echoed.unwrap(), 42);
        let (chain, alpn) = seen.unwrap();
        assert_eq!(alpn.as_deref(), Some(&b"h2"[..]));
        let chain = chain.expect("server saw no client certificate");
        assert_eq!(chain[0], parse_certificates(&cert, "client").unwrap()[0].as_ref());

        let headers = http::HeaderMap::new();
        let union = UnionAuthenticator::new(vec![Box::new(X509Authenticator)]);
        let verified = kapi_auth::ChainVerdict::Verified;
        let absent = kapi_auth::ChainVerdict::Absent;
        let req = AuthRequest { peer_certificates: Some(&chain), client_ca: &verified, front_proxy_ca: &absent, headers: &headers };
        let outcome = union.authenticate(&req);
        let AuthOutcome::Authenticated(user) = outcome else { panic!("not authenticated: {outcome:?}") };
        assert_eq!(user.name, "jane");
        assert_eq!(user.groups, vec!["dev", "ops", "system:authenticated"]);
    }

    #[tokio::test]
    async fn client_without_certificate_still_connects() {
        let (_dir, pki) = pki("tls-anon");
        let server = server_config(&pki.serving_cert_pem, &pki.serving_key_pem, Some(&pki.ca_cert_pem)).unwrap();
        let (seen, echoed) = handshake(server, client_config(&pki, None), &[b"http/1.1"]).await;
        assert_eq!(echoed.unwrap(), 42);
        let (chain, alpn) = seen.unwrap();
        assert!(chain.is_none());
        assert_eq!(alpn.as_deref(), Some(&b"http/1.1"[..]));
    }

    #[tokio::test]
    async fn certificate_from_another_ca_connects_but_fails_chain_verification() {
        let (_dir, pki) = pki("tls-other-ca");
        let (_other_dir, other) = self::pki("tls-other-ca-2");
        assert_ne!(pki.ca_cert_pem, other.ca_cert_pem);
        let (cert, key) = issue_client_cert(&other, "mallory", &["system:masters"]).unwrap();
        let server = server_config(&pki.serving_cert_pem, &pki.serving_key_pem, Some(&pki.ca_cert_pem)).unwrap();
        let (seen, echoed) = handshake(server, client_config(&pki, Some((&cert, &key))), &[]).await;
        assert_eq!(echoed.unwrap(), 42, "the handshake completes, so the server can answer 401");
        let chain = seen.unwrap().0.expect("the certificate reached the server");
        let verifier = ClientChainVerifier::new(&pki.ca_cert_pem).unwrap();
        let err = verifier.verify(&chain).expect_err("a certificate from another CA must not verify");
        assert!(err.contains("invalid peer certificate"), "{err}");
        let (good, _) = issue_client_cert(&pki, "jane", &[]).unwrap();
        let good: Vec<Vec<u8>> = parse_certificates(&good, "good").unwrap().iter().map(|c| c.as_ref().to_vec()).collect();
        assert!(verifier.verify(&good).is_ok());
    }

    #[tokio::test]
    async fn a_certificate_without_its_key_fails_the_handshake() {
        let (_dir, pki) = pki("tls-stolen");
        let (cert, _key) = issue_client_cert(&pki, "jane", &[]).unwrap();
        let (_, other_key) = issue_client_cert(&pki, "eve", &[]).unwrap();
        let server = server_config(&pki.serving_cert_pem, &pki.serving_key_pem, Some(&pki.ca_cert_pem)).unwrap();
        // Presenting jane's certificate with another key: the CertificateVerify signature fails.
        let client = rustls::ClientConfig::builder_with_provider(crypto_provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(root_store(&pki.ca_cert_pem).unwrap())
            .with_client_auth_cert(parse_certificates(&cert, "client").unwrap(), parse_private_key(&other_key).unwrap());
        // rustls may refuse the mismatched pair on the client side already; either way no
        // connection is made with a certificate whose key the client does not hold.
        if let Ok(client) = client {
            let (seen, _) = handshake(server, Arc::new(client), &[]).await;
            assert!(seen.is_err(), "the server accepted a certificate without proof of its key");
        }
    }
}
