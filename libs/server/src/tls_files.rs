//! The serving certificate, its key and the client CAs, from the flags' files (or the generated
//! PKI), under the TLS policy; re-read when the files change (kube's dynamic certificates).

use std::hash::{Hash, Hasher};
use std::path::PathBuf;
use std::sync::Arc;

use crate::serve::{ChainVerifiers, TlsSource};
use crate::tls::{self, ClientChainVerifier, TlsError};
use crate::tls_policy::TlsPolicy;

/// Where the TLS material comes from.
pub struct TlsFiles {
    /// `--tls-cert-file` and `--tls-private-key-file`; the generated serving pair without them.
    pub serving: Option<(PathBuf, PathBuf)>,
    /// `--client-ca-file`; the generated CA without it.
    pub client_ca: Option<PathBuf>,
    /// `--requestheader-client-ca-file`.
    pub front_proxy_ca: Option<PathBuf>,
    /// The generated PKI's serving pair and CA.
    pub generated: (String, String, String),
    /// `--tls-min-version`, `--tls-cipher-suites`.
    pub policy: TlsPolicy,
    /// `--tls-sni-cert-key`.
    pub sni: Vec<crate::tls_sni::SniCertKey>,
}

fn read(path: &PathBuf, flag: &str) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("{flag} {}: {e}", path.display()))
}

impl TlsFiles {
    /// Whether any of the material is a file that can change.
    pub fn watched(&self) -> bool {
        self.serving.is_some() || self.client_ca.is_some() || self.front_proxy_ca.is_some() || !self.sni.is_empty()
    }

    /// The configuration from the files as they are now.
    pub fn material(&self) -> Result<(Arc<rustls::ServerConfig>, ChainVerifiers), String> {
        let (cert_pem, key_pem) = match &self.serving {
            Some((c, k)) => (read(c, "--tls-cert-file")?, read(k, "--tls-private-key-file")?),
            None => (self.generated.0.clone(), self.generated.1.clone()),
        };
        let client_ca = match &self.client_ca {
            Some(p) => read(p, "--client-ca-file")?,
            None => self.generated.2.clone(),
        };
        let front_proxy_ca = self.front_proxy_ca.as_ref().map(|p| read(p, "--requestheader-client-ca-file")).transpose()?;
        // The TLS layer asks for certificates of either CA (clients pick theirs by the hints).
        let all_cas = format!("{client_ca}\n{}", front_proxy_ca.as_deref().unwrap_or(""));
        let text = |e: TlsError| e.to_string();
        let named = self
            .sni
            .iter()
            .map(|s| {
                Ok(crate::tls_sni::SniPem { cert: read(&s.cert, "--tls-sni-cert-key")?, key: read(&s.key, "--tls-sni-cert-key")?, names: s.names.clone() })
            })
            .collect::<Result<Vec<_>, String>>()?;
        let config = tls::server_config_named(&cert_pem, &key_pem, Some(&all_cas), &self.policy, &named).map_err(text)?;
        let verifiers = ChainVerifiers {
            client: Some(ClientChainVerifier::new(&client_ca).map_err(text)?),
            front_proxy: front_proxy_ca.as_deref().map(ClientChainVerifier::new).transpose().map_err(text)?,
        };
        Ok((config, verifiers))
    }
}

impl TlsSource for TlsFiles {
    fn fingerprint(&self) -> u64 {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        let files = self
            .serving
            .iter()
            .flat_map(|(c, k)| [c, k])
            .chain(self.client_ca.iter())
            .chain(self.front_proxy_ca.iter())
            .chain(self.sni.iter().flat_map(|s| [&s.cert, &s.key]));
        for path in files {
            std::fs::read(path).unwrap_or_default().hash(&mut hasher);
        }
        hasher.finish()
    }

    fn load(&self) -> Result<(Arc<rustls::ServerConfig>, ChainVerifiers), String> {
        self.material()
    }
}
