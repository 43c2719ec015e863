//! `--tls-sni-cert-key`: more serving certificates, each chosen by the name a client asks for
//! in its TLS ClientHello (SNI), as kube-apiserver's named certificates: explicit name patterns
//! after the files (`cert,key:*.example.com,example.com`), else the certificate's own names
//! (its CN when a valid domain and not an IP, its DNS and IP SANs). Exact names trump
//! wildcards, explicit patterns trump extracted names, earlier flags trump later ones; a name
//! nothing matches gets the default serving certificate.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

use crate::tls::{parse_certificates, parse_private_key, TlsError};

/// One `--tls-sni-cert-key`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SniCertKey {
    /// The certificate file.
    pub cert: PathBuf,
    /// Its key file.
    pub key: PathBuf,
    /// Explicit name patterns; empty: the certificate's own names.
    pub names: Vec<String>,
}

impl std::str::FromStr for SniCertKey {
    type Err = String;

    /// kube's syntax: `cert,key` or `cert,key:name1,name2`.
    fn from_str(s: &str) -> Result<Self, String> {
        let (files, names) = match s.split_once(':') {
            Some((files, names)) => (files, names.split(',').map(str::trim).filter(|n| !n.is_empty()).map(str::to_lowercase).collect()),
            None => (s, Vec::new()),
        };
        match files.split(',').map(str::trim).collect::<Vec<_>>().as_slice() {
            [cert, key] if !cert.is_empty() && !key.is_empty() => Ok(SniCertKey { cert: cert.into(), key: key.into(), names }),
            _ => Err(format!("expected comma separated certificate and key file paths in {s:?}")),
        }
    }
}

/// One named certificate's material, read.
pub struct SniPem {
    /// The certificate chain, PEM.
    pub cert: String,
    /// The key, PEM.
    pub key: String,
    /// Explicit patterns (empty: the certificate's names).
    pub names: Vec<String>,
}

/// Picks the certificate for a ClientHello's server name.
#[derive(Debug)]
pub struct SniResolver {
    default: Arc<CertifiedKey>,
    by_name: HashMap<String, Arc<CertifiedKey>>,
}

/// kube's `getCertificateNames`.
fn certificate_names(leaf: &[u8]) -> Vec<String> {
    let Ok(info) = kapi_auth::x509::CertificateInfo::from_der(leaf) else { return Vec::new() };
    let mut names = Vec::new();
    let cn = info.common_name.to_lowercase();
    let cn_is_ip = cn.parse::<std::net::IpAddr>().is_ok();
    let cn_is_domain = cn == "*" || kapi_apimachinery::validation::is_dns1123_subdomain(cn.strip_prefix("*.").unwrap_or(&cn)).is_empty();
    if !cn.is_empty() && !cn_is_ip && cn_is_domain {
        names.push(cn);
    }
    names.extend(info.dns_names.iter().map(|n| n.to_lowercase()));
    names.extend(info.ip_addresses.iter().map(ToString::to_string));
    names
}

impl SniResolver {
    /// The resolver serving `default` unless a named certificate matches.
    pub fn new(provider: &CryptoProvider, default: (&str, &str), named: &[SniPem]) -> Result<Self, TlsError> {
        let certified = |cert: &str, key: &str| -> Result<Arc<CertifiedKey>, TlsError> {
            let chain = parse_certificates(cert, "the serving certificate")?;
            if chain.is_empty() {
                return Err(TlsError::NoCertificate);
            }
            let key = provider.key_provider.load_private_key(parse_private_key(key)?)?;
            Ok(Arc::new(CertifiedKey::new(chain, key)))
        };
        let default = certified(default.0, default.1)?;
        let mut by_name = HashMap::new();
        let mut extracted = Vec::new();
        for pem in named {
            let key = certified(&pem.cert, &pem.key)?;
            if pem.names.is_empty() {
                let leaf = key.cert.first().map(|c| c.as_ref().to_vec()).unwrap_or_default();
                extracted.push((certificate_names(&leaf), key));
            } else {
                for name in &pem.names {
                    by_name.entry(name.clone()).or_insert_with(|| key.clone());
                }
            }
        }
        for (names, key) in extracted {
            for name in names {
                by_name.entry(name).or_insert_with(|| key.clone());
            }
        }
        Ok(SniResolver { default, by_name })
    }

    /// The certificate for `server_name`: an exact match, else its wildcard (`*.` and all but
    /// the first label), else the default.
    pub fn pick(&self, server_name: Option<&str>) -> Arc<CertifiedKey> {
        let Some(name) = server_name.map(str::to_lowercase) else { return self.default.clone() };
        if let Some(key) = self.by_name.get(&name) {
            return key.clone();
        }
        if let Some((_, rest)) = name.split_once('.') {
            if let Some(key) = self.by_name.get(&format!("*.{rest}")) {
                return key.clone();
            }
        }
        self.default.clone()
    }
}

impl ResolvesServerCert for SniResolver {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.pick(hello.server_name()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pem(names: &[&str]) -> (String, String) {
        let cert = rcgen::generate_simple_self_signed(names.iter().map(|n| n.to_string()).collect::<Vec<_>>()).unwrap();
        (cert.cert.pem(), cert.signing_key.serialize_pem())
    }

    #[test]
    fn flags_parse_as_kube_writes_them() {
        let plain: SniCertKey = "a.crt,a.key".parse().unwrap();
        assert_eq!((plain.cert, plain.key, plain.names), (PathBuf::from("a.crt"), PathBuf::from("a.key"), Vec::<String>::new()));
        let named: SniCertKey = "foo.crt,foo.key:*.Foo.com,foo.com".parse().unwrap();
        assert_eq!(named.names, ["*.foo.com", "foo.com"]);
        assert!("only-one-file".parse::<SniCertKey>().is_err());
    }

    #[test]
    fn names_pick_certificates() {
        let provider = rustls::crypto::ring::default_provider();
        let default = pem(&["localhost"]);
        let foo = pem(&["foo.example.com"]);
        let wild = pem(&["ignored.example.org"]);
        let named = [
            SniPem { cert: foo.0.clone(), key: foo.1.clone(), names: Vec::new() },
            SniPem { cert: wild.0.clone(), key: wild.1.clone(), names: vec!["*.example.com".into()] },
        ];
        let resolver = SniResolver::new(&provider, (&default.0, &default.1), &named).unwrap();
        let leaf = |k: Arc<CertifiedKey>| certificate_names(k.cert[0].as_ref());
        assert_eq!(leaf(resolver.pick(Some("foo.example.com"))), ["foo.example.com"], "the extracted exact name beats the wildcard");
        assert_eq!(leaf(resolver.pick(Some("BAR.example.com"))), ["ignored.example.org"], "the wildcard");
        assert_eq!(leaf(resolver.pick(Some("a.b.example.com"))), ["localhost"], "a wildcard covers one label");
        assert_eq!(leaf(resolver.pick(None)), ["localhost"]);
    }
}
