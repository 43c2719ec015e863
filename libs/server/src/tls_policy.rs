//! `--tls-min-version` and `--tls-cipher-suites`, read as kube-apiserver reads them (Go's
//! names), applied to the rustls configuration.
//!
//! rustls speaks TLS 1.2 and 1.3 only, and only AEAD suites: `VersionTLS10`/`VersionTLS11`
//! are accepted and serve TLS 1.2 and up; Go suite names rustls does not implement (CBC, RC4,
//! 3DES, static RSA) are accepted and left out, with a warning; a name Go does not know is
//! refused with kube's text. As in Go, the list restricts TLS 1.2 only: TLS 1.3's suites are
//! always on.

use rustls::crypto::ring::cipher_suite as suites;
use rustls::SupportedCipherSuite;

/// The TLS policy of the listener.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsPolicy {
    /// Refuse TLS 1.2 (`--tls-min-version=VersionTLS13`).
    pub tls13_only: bool,
    /// TLS 1.2 suites allowed (empty: rustls' defaults), by Go name.
    pub cipher_suites: Vec<String>,
}

/// The versions under `--tls-min-version=VersionTLS13`.
static TLS13_ONLY: &[&rustls::SupportedProtocolVersion] = &[&rustls::version::TLS13];

/// Go's TLS suite names rustls implements, with their rustls suites.
const SUPPORTED: &[(&str, SupportedCipherSuite)] = &[
    ("TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", suites::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256),
    ("TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", suites::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384),
    ("TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305", suites::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256),
    ("TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256", suites::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256),
    ("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", suites::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256),
    ("TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", suites::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384),
    ("TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305", suites::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256),
    ("TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256", suites::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256),
    // TLS 1.3 names Go lists: accepted, and always on anyway.
    ("TLS_AES_128_GCM_SHA256", suites::TLS13_AES_128_GCM_SHA256),
    ("TLS_AES_256_GCM_SHA384", suites::TLS13_AES_256_GCM_SHA384),
    ("TLS_CHACHA20_POLY1305_SHA256", suites::TLS13_CHACHA20_POLY1305_SHA256),
];

/// Go's suite names rustls does not implement.
const UNSUPPORTED: &[&str] = &[
    "TLS_RSA_WITH_RC4_128_SHA",
    "TLS_RSA_WITH_3DES_EDE_CBC_SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA256",
    "TLS_RSA_WITH_AES_128_GCM_SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_ECDSA_WITH_RC4_128_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_RC4_128_SHA",
    "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256",
];

impl TlsPolicy {
    /// Reads the two flags; errors are kube's texts.
    pub fn from_flags(min_version: Option<&str>, cipher_suites: &[String]) -> Result<TlsPolicy, String> {
        let tls13_only = match min_version.unwrap_or("") {
            "" | "VersionTLS10" | "VersionTLS11" | "VersionTLS12" => false,
            "VersionTLS13" => true,
            other => {
                return Err(format!(
                    "unknown tls version {other:?}, allowed values are: VersionTLS10, VersionTLS11, VersionTLS12, VersionTLS13"
                ))
            }
        };
        for name in cipher_suites {
            if !SUPPORTED.iter().any(|(n, _)| n == name) && !UNSUPPORTED.contains(&name.as_str()) {
                return Err(format!("Cipher suite {name} not supported or doesn't exist"));
            }
        }
        for name in cipher_suites.iter().filter(|n| UNSUPPORTED.contains(&n.as_str())) {
            tracing::warn!("--tls-cipher-suites: {name} is not implemented by kapi's TLS stack; left out");
        }
        Ok(TlsPolicy { tls13_only, cipher_suites: cipher_suites.to_vec() })
    }

    /// The rustls suites: TLS 1.3's always, TLS 1.2's as listed (all of rustls' without a list).
    pub fn suites(&self) -> Vec<SupportedCipherSuite> {
        let defaults = rustls::crypto::ring::default_provider().cipher_suites;
        if self.cipher_suites.is_empty() {
            return defaults;
        }
        let mut chosen: Vec<SupportedCipherSuite> = defaults.iter().copied().filter(|s| s.version() == &rustls::version::TLS13).collect();
        for name in &self.cipher_suites {
            if let Some((_, suite)) = SUPPORTED.iter().find(|(n, _)| n == name) {
                if !chosen.iter().any(|c| c.suite() == suite.suite()) {
                    chosen.push(*suite);
                }
            }
        }
        chosen
    }

    /// The protocol versions served.
    pub fn versions(&self) -> &'static [&'static rustls::SupportedProtocolVersion] {
        if self.tls13_only {
            TLS13_ONLY
        } else {
            rustls::DEFAULT_VERSIONS
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_read_as_kube_reads_them() {
        assert!(!TlsPolicy::from_flags(None, &[]).expect("default").tls13_only);
        assert!(TlsPolicy::from_flags(Some("VersionTLS13"), &[]).expect("1.3").tls13_only);
        assert_eq!(
            TlsPolicy::from_flags(Some("VersionTLS14"), &[]).expect_err("unknown"),
            "unknown tls version \"VersionTLS14\", allowed values are: VersionTLS10, VersionTLS11, VersionTLS12, VersionTLS13"
        );
        assert_eq!(TlsPolicy::from_flags(None, &["TLS_FOO".into()]).expect_err("unknown suite"), "Cipher suite TLS_FOO not supported or doesn't exist");
        let policy = TlsPolicy::from_flags(None, &["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256".into(), "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA".into()]).expect("known names");
        let tls12: Vec<_> = policy.suites().into_iter().filter(|s| s.version() == &rustls::version::TLS12).collect();
        assert_eq!(tls12.len(), 1, "only the listed suite rustls has");
        assert_eq!(policy.suites().iter().filter(|s| s.version() == &rustls::version::TLS13).count(), 3, "TLS 1.3 suites stay on");
    }
}
